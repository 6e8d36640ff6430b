"""A study's `evals:` section, evals side: what the launch checks before anything starts
(`launch_problems`) and the scoring of one trial's final weights in its worker (`score_trial`).

Both take plain values (task names or suites, a folder of task YAMLs), not the study: the study
(sweeps.study) and the worker (sweeps.run.worker) call them. lm-eval is imported on call.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

from evals.harness import log_to_run, score, task_manager, task_metrics, task_problems, write_results
from evals.suites import ensure_offline_mode, expand
from trainers.metrics import eval_parts
from trainers.trained import load_checkpoint, trial_tokenizer

SEED = 0  # one seed of few-shot selection and sampling for every trial: the trials differ in weights only


@functools.lru_cache(maxsize=4)
def _manager(include_path: str | None, tasks: tuple[str, ...]):
    """One task index per process (the launch's checks, then each run a process scores): indexing
    lm-eval's built-in tasks takes seconds to a minute."""
    return task_manager(include_path, list(tasks))


def launch_problems(tasks: list[str], include_path: str | None, objectives: dict[str, str]) -> list[str]:
    """Why the tasks cannot be scored here (unknown, or offline without their data), and every
    objective `eval/<task>/<metric>` whose direction contradicts lm-eval's for that metric
    (`objectives`: metric -> minimize | maximize); [] when the study can score them."""
    offline = ensure_offline_mode()  # before lm-eval imports `datasets`, which reads the flags once
    tasks = expand(tasks)
    manager = _manager(include_path, tuple(tasks))
    problems = task_problems(manager, tasks, offline)
    if problems:
        return problems
    for name, direction in objectives.items():
        task, metric = eval_parts(name)
        higher = higher_is_better(manager, task, metric.split(".")[0])
        wanted = None if higher is None else "maximize" if higher else "minimize"
        if wanted is not None and direction != wanted:
            why = f"lm-eval's {metric} of {task} is {'higher' if higher else 'lower'} is better"
            problems.append(f"objective {name}: given direction {direction}; allowed: {wanted} ({why})")
    return problems


def higher_is_better(manager, task: str, metric: str) -> bool | None:
    """lm-eval's direction of `metric` in `task`: the task YAML's `metric_list` entry, else the
    harness's registry of metrics; None when neither says."""
    from lm_eval.api.registry import is_higher_better
    from lm_eval.tasks._yaml_loader import load_yaml

    entry = manager.task_index.get(task)
    if entry is not None and entry.yaml_path is not None:
        config = load_yaml(entry.yaml_path, resolve_func=False)
        for item in config.get("metric_list") or []:
            if isinstance(item, dict) and item.get("metric") == metric and "higher_is_better" in item:
                return bool(item["higher_is_better"])
    return is_higher_better(metric)


def score_trial(
    checkpoint: Path,
    tasks: list[str],
    *,
    limit: int | None = None,
    include_path: str | None = None,
    batch_size: int = 8,
    device: str = "cpu",
    data_root: str | None = None,
    run_id: str | None = None,
    tracking_uri: str | None = None,
) -> dict[str, float]:
    """Every task metric `eval/<task>/<metric>` of the trial whose final weights are `checkpoint`,
    scored on `device`; with `run_id`, logged to that MLflow run with the harness's JSON
    (`eval/results.json`). Raises RuntimeError when a task cannot run here."""
    offline = ensure_offline_mode()
    tasks = expand(tasks)
    cfg, model = load_checkpoint(Path(checkpoint))
    tokenizer = trial_tokenizer(cfg, data_root)
    from evals.adapter import SatsweepLM  # imports lm_eval, the optional extra (after the flags)

    manager = _manager(include_path, tuple(tasks))
    problems = task_problems(manager, tasks, offline)
    if problems:
        raise RuntimeError("evals: " + "\n".join(problems))
    lm = SatsweepLM.from_model(
        model, tokenizer, batch_size=batch_size, device=device, seed=SEED, run_id=run_id
    )
    results = score(lm, manager, tasks, limit=limit, seed=SEED)
    metrics = task_metrics(results)
    if run_id is not None:
        with tempfile.TemporaryDirectory(prefix="satsweep-evals-") as tmp:
            log_to_run(tracking_uri, run_id, metrics, write_results(results, Path(tmp) / "results.json"))
    return metrics
