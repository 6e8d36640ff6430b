"""The lm-evaluation-harness steps that `python -m evals` and a study's `evals:` section share:
which tasks can run here (`task_problems`), scoring a loaded trial (`score`), the metric names
(`metric_name`, `task_metrics`) and logging them to an MLflow run (`log_to_run`).

Importing this module imports nothing of lm-eval; its functions import it when called, after
`evals.suites.ensure_offline_mode` has set the offline flags that `datasets` reads once.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
import tempfile
import time
from pathlib import Path

from evals.suites import SUITES, missing_datasets
from trainers.metrics import EVAL_PREFIX


def metric_name(task: str, key: str) -> str:
    """lm-eval's `acc,none` of task `piqa` -> `eval/piqa/acc` (MLflow's allowed characters); a
    filter other than `none` is appended (`eval/gsm8k/exact_match.strict-match`)."""
    metric, _, filt = key.partition(",")
    name = f"{EVAL_PREFIX}{task}/{metric}" + ("" if filt in ("", "none") else f".{filt}")
    return re.sub(r"[^\w\-. /:]", "_", name)


def task_metrics(results: dict) -> dict[str, float]:
    """Every numeric metric of every task and group in lm-eval's results."""
    out = {}
    for section in ("results", "groups"):
        for task, metrics in results.get(section, {}).items():
            for key, value in metrics.items():
                if "," in key and isinstance(value, (int, float)) and math.isfinite(value):
                    out[metric_name(task, key)] = float(value)
    return out


def log_to_run(tracking_uri: str, run_id: str, metrics: dict[str, float], json_path: Path) -> None:
    """The metrics and the harness's JSON (artifact `eval/results.json`) on an MLflow run."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient  # adds to the run without (re)opening it

    client = MlflowClient(tracking_uri)
    stamp = int(time.time() * 1000)
    batch = [Metric(key, value, stamp, 0) for key, value in metrics.items()]
    for i in range(0, len(batch), 1000):  # one request per 1000 metrics (MLflow's batch limit)
        client.log_batch(run_id, metrics=batch[i : i + 1000])
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "results.json"
        copy.write_bytes(json_path.read_bytes())
        client.log_artifact(run_id, str(copy), artifact_path="eval")


def task_manager(include_path: str | None, tasks: list[str]):
    """lm-eval's TaskManager over `include_path` alone when it holds every task (indexing lm-eval's
    ~15,000 built-in tasks takes seconds), else over the built-in tasks and `include_path`."""
    from lm_eval.tasks import TaskManager

    if include_path:
        local = TaskManager(include_path=include_path, include_defaults=False)
        if all(t in local.all_tasks for t in tasks):
            return local
    return TaskManager(include_path=include_path)


def task_problems(manager, tasks: list[str], offline: bool) -> list[str]:
    """Why `tasks` cannot run here: unknown names (with close ones), and, offline, every task
    whose dataset is not readable locally (naming it and how to provide it); [] when they can."""
    unknown = [t for t in tasks if t not in manager.all_tasks]
    if unknown:
        hints = {t: difflib.get_close_matches(t, manager.all_tasks, n=3) for t in unknown}
        lines = "; ".join(f"{t} (close: {', '.join(h) or 'none'})" for t, h in hints.items())
        return [f"unknown {lines}; allowed: lm-eval task names or {', '.join(SUITES)}"]
    return missing_datasets(manager, tasks) if offline else []  # online, datasets downloads them


def score(lm, manager, tasks: list[str], limit=None, num_fewshot=None, log_samples=False, seed=0) -> dict:
    """lm-eval's `simple_evaluate` of the model `lm` (an `evals.adapter.SatsweepLM`) on `tasks`;
    `satsweep.context_start` in the results says which token every context started with."""
    from lm_eval import simple_evaluate

    _environment_read_once()
    results = simple_evaluate(
        model=lm,
        tasks=tasks,
        task_manager=manager,
        limit=limit,
        num_fewshot=num_fewshot,
        log_samples=log_samples,
        random_seed=seed,
        numpy_random_seed=seed,
        torch_random_seed=seed,
        fewshot_random_seed=seed,
    )
    results["satsweep"] = {"context_start": lm.context_start}
    return results


def _environment_read_once() -> None:
    """lm-eval records the machine's environment in every result through torch's `collect_env`,
    which runs `pip list` and the drivers' tools: 1-3 s a call, every scored run. It cannot change
    within one process, so a worker scoring run after run reads it once (lm-eval has no switch)."""
    from torch.utils import collect_env

    if not hasattr(collect_env.get_pretty_env_info, "cache_info"):
        collect_env.get_pretty_env_info = functools.cache(collect_env.get_pretty_env_info)


def write_results(results: dict, path: Path) -> Path:
    """The harness's results as JSON (its own serialiser for what json cannot write)."""
    from lm_eval.utils import handle_non_serializable

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, default=handle_non_serializable))
    return path
