"""Pareto fronts of a study: the maths (`fronts`), the statistics (`stats`), the files
(`outputs`), the CLI (`__main__`).

`analyse(study, plan, tracker)` computes the fronts from the study's Optuna storage, with every
point's 95% intervals, its paired differences and verdicts against the reference point (the
study's `reference:`, else the first baseline design) and `p_front`; writes results/<name>/pareto/
(pareto.csv, pareto.json, a PNG per pair, pareto.html), prints the table and one plain-language
line per point, logs the files to the launch's parent MLflow run and tags every child run with
`pareto_rank` (-1 for runs in no front: failed, pruned, interrupted), `p_front` and `verdict`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping

from optuna.trial import TrialState

from sweeps.pareto.fronts import compute, dominates, hypervolume, nondominated_ranks
from sweeps.pareto.outputs import conclusions_text, table_text, write_files
from sweeps.pareto.stats import median_interval

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
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    rounds = probe_samples(study, complete)
    result = compute(
        trials,
        objectives,
        reference_point(study, complete),
        rounds,
        robust=frozenset({"tokens_per_s"} if rounds else ()),
    )
    if not result["points"]:
        print("pareto: no trial has completed its budget yet", file=stream)
        return {"points": 0.0}
    scales = probe_scales(study, complete)
    for row in result["points"]:  # the probe's baseline: the interval of its own timings
        if scale := scales.get(row["point"]):
            ci = median_interval(scale)
            row["tokens_per_s_ci"] = [ci["lo"], ci["hi"]]
    paths = write_files(result, study.results_dir() / "pareto")
    print(table_text(result), file=stream)
    print(conclusions_text(result), file=stream)
    for path in paths:
        print(f"  {path}", file=stream)
    if tracker is not None:
        paths += _loss_at_equal_cost(tracker, result, study.results_dir() / "pareto", stream)
        for path in paths:
            tracker.log_file(tracker.parent_id, path, "pareto")
        _tag_children(tracker, trials, result)
    return {"hypervolume": result["hypervolume"], "front_size": float(len(result["front"])),
            "points": float(len(result["points"]))}  # fmt: skip


def _loss_at_equal_cost(tracker, result: Mapping, folder, stream) -> list:
    """val_loss against tokens and probe time (figure); val_loss_at_equal_time printed and in
    equal_time.json."""
    from sweeps.pareto import equal_cost
    from sweeps.pareto.outputs import point_name

    rows = result["points"]
    point_curves = equal_cost.curves(tracker.client, rows)
    if not point_curves:
        return []
    horizon = equal_cost.add_equal_time(rows, point_curves)
    (folder / "equal_time.json").unlink(missing_ok=True)  # of an earlier analysis
    if horizon is not None and any("val_loss_at_equal_time" in r for r in rows):
        shown = ", ".join(
            f"{point_name(r)} {r['val_loss_at_equal_time']:.4f}"
            for r in rows
            if "val_loss_at_equal_time" in r
        )
        print(f"val_loss at equal time ({horizon:.1f} s at the probe's speed): {shown}", file=stream)
        (folder / "equal_time.json").write_text(
            json.dumps({"horizon_s": horizon, "val_loss_at_equal_time": {
                r["point"]: r.get("val_loss_at_equal_time") for r in rows}}, indent=2)
        )  # fmt: skip
    figure = equal_cost.plot(rows, point_curves, horizon, point_name, folder / "loss_vs_cost.png")
    return [figure] + ([folder / "equal_time.json"] if (folder / "equal_time.json").is_file() else [])


def _tag_children(tracker, trials, result: Mapping) -> None:
    rows = {r["point"]: r for r in result["points"]}
    for t in trials:
        run_id = t.user_attrs.get("mlflow_run_id")
        if not run_id:
            continue
        row = rows.get(t.user_attrs.get("point")) if t.state == TrialState.COMPLETE else None
        tags = {"pareto_rank": str(-1 if row is None else row["rank"])}
        if row is not None:
            tags["p_front"] = f"{row['p_front']:.3f}"
            if row["point"] == result["reference"]:
                tags["verdict"] = "reference"
            else:
                tags.update({f"verdict.{metric}": word for metric, word in row["verdict"].items()})
                tags["verdict"] = ", ".join(f"{m}: {w}" for m, w in row["verdict"].items())
        tracker.set_tags(run_id, tags)


def reference_point(study, trials) -> str | None:
    """The point id of the study's `reference:` (its params), else of the first baseline design."""
    for t in sorted(trials, key=lambda t: t.number):
        if study.reference is not None:
            if dict(t.params) == study.reference:
                return t.user_attrs.get("point")
        elif study.trial_config(dict(t.params)).model.residual.kind == "none":
            return t.user_attrs.get("point")
    return None


def probe_samples(study, trials) -> dict[str, dict]:
    """tokens_per_s per cost-probe round for each point (the probe's own spread), when it was probed."""
    from sweeps.probe import costs_path, load_costs, round_samples

    if "tokens_per_s" not in [o.metric for o in study.objectives]:
        return {}
    entries = load_costs(costs_path(study))
    out = {}
    for t in trials:
        pid = t.user_attrs.get("point")
        if pid in out:
            continue
        rounds = round_samples(entries, study.trial_config(dict(t.params)))
        if rounds:
            out[pid] = {"tokens_per_s": rounds}
    return out


def probe_scales(study, trials) -> dict[str, list[float]]:
    """The absolute tokens/s timings of the point that is the probe's baseline (every other
    point's rounds are ratios to it, so its own rounds say nothing of its uncertainty)."""
    from sweeps.probe import costs_path, load_costs, scale_samples

    if "tokens_per_s" not in [o.metric for o in study.objectives]:
        return {}
    entries = load_costs(costs_path(study))
    out = {}
    for t in trials:
        if samples := scale_samples(entries, study.trial_config(dict(t.params))):
            out[t.user_attrs.get("point")] = samples
    return out
