"""`python -m evals RUN_OR_CHECKPOINT --tasks a,b [--include-path DIR] [--limit N] [--batch-size B]
[--device D] [--json OUT]`: score a trained trial with the lm-evaluation-harness.

RUN_OR_CHECKPOINT is a trial's checkpoint file or the MLflow run id of a trial that kept one.
`--tasks` takes lm-eval task names and the suites `zero_shot` and `retrieval` (evals.suites);
`--include-path` adds a folder of task YAMLs (local data). Runs `lm_eval.simple_evaluate` with the
`satsweep` model (evals.adapter), prints its table, writes the results JSON (`--json`, default
results/evals/<run or file name>.json) and, for a run, logs every task metric to that run as
`eval/<task>/<metric>` (`.<filter>` appended for a filter other than `none`) and the JSON as the
artifact `eval/results.json`.

Exit status 2, before anything is scored, for an unknown task, a trial that cannot be loaded, or,
offline, a task whose dataset is not in the local cache (the message names it and how to provide it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evals.harness import log_to_run, score, task_manager, task_metrics, task_problems, write_results
from evals.suites import SUITES, ensure_offline_mode, expand
from trainers.mlflow_names import DEFAULT_TRACKING_URI
from trainers.trained import TrialNotFound, load_trial, trial_tokenizer


def _limit(text: str) -> float | int:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"given {text}; allowed: a count >= 1 or a fraction in (0, 1)")
    return int(value) if value >= 1 else value


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m evals", description=__doc__.split("\n\n")[0])
    p.add_argument("target", metavar="RUN_OR_CHECKPOINT", help="a checkpoint file or an MLflow run id")
    p.add_argument(
        "--tasks", required=True, help=f"comma-separated task names or suites ({', '.join(SUITES)})"
    )
    p.add_argument("--include-path", default=None, help="a folder of extra task YAMLs")
    p.add_argument("--limit", type=_limit, default=None, help="documents per task (or a fraction)")
    p.add_argument("--num-fewshot", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", default=None, help="results file (default results/evals/<name>.json)")
    p.add_argument("--log-samples", action="store_true", help="keep every document's requests in the JSON")
    p.add_argument("--tracking-uri", default=DEFAULT_TRACKING_URI)
    p.add_argument("--data-root", default=None, help="data cache root, for a BPE tokenizer")
    p.add_argument("--seed", type=int, default=0, help="seed of sampling and few-shot selection")
    return p.parse_args(argv)


def _refuse(message: str) -> int:
    print(f"evals: {message}", file=sys.stderr)
    return 2


def main(argv=None) -> int:
    args = parse_args(argv)
    tasks = expand([t.strip() for t in args.tasks.split(",") if t.strip()])
    if not tasks:
        return _refuse(f"--tasks: given {args.tasks!r}; allowed: task names or {', '.join(SUITES)}")
    if args.include_path and not Path(args.include_path).is_dir():
        return _refuse(f"--include-path: {args.include_path} is not a folder")
    offline = ensure_offline_mode()  # before lm_eval imports `datasets`, which reads the flags once

    try:
        cfg, model, run_id = load_trial(args.target, args.tracking_uri)
        tokenizer = trial_tokenizer(cfg, args.data_root)
    except (TrialNotFound, ValueError, OSError) as err:
        return _refuse(f"cannot load {args.target!r}: {err}")

    from lm_eval.utils import make_table

    from evals.adapter import SatsweepLM  # imports lm_eval, the optional extra (after the flags)

    manager = task_manager(args.include_path, tasks)
    problems = task_problems(manager, tasks, offline)
    if problems:
        return _refuse("\n".join(f"--tasks: {p}" if p.startswith("unknown") else p for p in problems))

    lm = SatsweepLM.from_model(
        model, tokenizer, batch_size=args.batch_size, device=args.device, seed=args.seed, run_id=run_id
    )
    results = score(lm, manager, tasks, args.limit, args.num_fewshot, args.log_samples, args.seed)
    print(make_table(results))
    if results.get("groups"):
        print(make_table(results, "groups"))
    name = run_id or Path(args.target).stem
    out = Path(args.json) if args.json else Path("results") / "evals" / f"{name}.json"
    results["satsweep"] |= {"target": args.target, "run_id": run_id, "tasks": tasks, "limit": args.limit}
    write_results(results, out)
    print(f"results in {out}")
    if run_id is not None:
        metrics = task_metrics(results)
        log_to_run(args.tracking_uri, run_id, metrics, out)
        print(f"logged {len(metrics)} metrics to MLflow run {run_id} ({args.tracking_uri})")
    return 0
