"""Pareto fronts of a study: the maths (`fronts`), the files (`outputs`), the CLI (`__main__`).

`analyse(study, plan, tracker)` computes the fronts from the study's Optuna storage, writes
results/<name>/pareto/ (pareto.csv, pareto.json, a PNG per pair, pareto.html), logs them to the
launch's parent MLflow run and tags every child run with `pareto_rank` (-1 for runs that are
not in any front: failed, pruned, interrupted).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from optuna.trial import TrialState

from sweeps.pareto.fronts import compute, dominates, hypervolume, nondominated_ranks
from sweeps.pareto.outputs import table_text, write_files

__all__ = [
    "analyse",
    "compute",
    "dominates",
    "hypervolume",
    "nondominated_ranks",
    "table_text",
    "write_files",
]


def analyse(study, plan=None, tracker=None, stream=None) -> dict[str, float]:
    """Fronts of `study` from its Optuna storage; logs to the parent run and tags the children."""
    from sweeps.storage import load_trials

    stream = stream or sys.stdout
    trials = plan.trials() if plan is not None else load_trials(study.name, study.storage_url())
    objectives = [(o.metric, o.direction) for o in study.objectives]
    result = compute(trials, objectives)
    if not result["points"]:
        print("pareto: no trial has completed its budget yet", file=stream)
        return {"points": 0.0}
    paths = write_files(result, study.results_dir() / "pareto")
    print(table_text(result), file=stream)
    for path in paths:
        print(f"  {path}", file=stream)
    if tracker is not None:
        for path in paths:
            tracker.log_file(tracker.parent_id, path, "pareto")
        _tag_children(tracker, trials, result)
    return {"hypervolume": result["hypervolume"], "front_size": float(len(result["front"])),
            "points": float(len(result["points"]))}  # fmt: skip


def _tag_children(tracker, trials, result: Mapping) -> None:
    rank_of = {r["point"]: r["rank"] for r in result["points"]}
    for t in trials:
        run_id = t.user_attrs.get("mlflow_run_id")
        if not run_id:
            continue
        rank = rank_of.get(t.user_attrs.get("point")) if t.state == TrialState.COMPLETE else None
        tracker.client.set_tag(run_id, "pareto_rank", str(-1 if rank is None else rank))
