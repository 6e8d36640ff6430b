"""A study's fronts from its trials: the statistics (`fronts_for`), and the launch's report of them
(`report_fronts`: files, printed table, MLflow uploads; `publish`: the parent run's summary and
description, the children's tags).

`fronts_for(study, trials)` is the one entry point for "statistics of the completed trials": the
study's objectives, the cost probe's rounds for the metrics it times, the reference point, which
metrics are summarised by their median (`trainers.metrics`), and `fronts.compute`. The fronts'
report (`report_fronts`) and adaptive seeds' decisions (`sweeps.run.adaptive`) both read it.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Mapping

from optuna.trial import TrialState

from sweeps.report import equal_cost, importance, paired_curves, summary
from sweeps.report.costs import (
    costs_path,
    load_costs,
    probe_entry,
    round_samples,
    scale_samples,
    throughput_check,
    trials_clocked,
)
from sweeps.report.fronts import compute, is_reference
from sweeps.report.outputs import (
    conclusions_text,
    most_relevant,
    row_name,
    table_text,
    throughput_text,
    tuned_text,
    write_files,
)
from sweeps.report.stats import median_interval
from sweeps.report.verdicts import rule_for
from sweeps.study import tuning
from sweeps.study.reference import matched_points, reference_points
from sweeps.study.run_record import RunRecord
from sweeps.study.study_plan import resolve
from trainers import metrics as metrics_table
from trainers.machine import describe

REPLICATES = 1000  # bootstrap replicates of p_front (its Monte Carlo error: at most 1.6 points)


def fronts_for(study, trials, replicates: int = REPLICATES, plan=None) -> dict:
    """The fronts of `study` over the COMPLETE ones of `trials` (others are ignored): per point its
    statistics, paired verdicts against the reference and p_front (`fronts.compute`), the probe's
    timing rounds in place of seeds for the metrics it times, and the spread of the probe
    baseline's own absolute timings as its throughput interval. `result["robust"]`: the metrics
    summarised by their median. `plan`: the StudyPlan the runs were made from (each run's config,
    its micro-batch split included, as the probe timed it); resolved from `study` when not given."""
    plan = plan or resolve(study)
    trials = list(trials)
    complete = [t for t in trials if t.state == TrialState.COMPLETE and not RunRecord.of(t).is_tune]
    objectives = [(o.metric, o.direction) for o in study.objectives]
    entries = _probe_entries(study)
    rounds = probe_samples(plan, complete, entries)
    timed = {m for samples in rounds.values() for m in samples}
    robust = metrics_table.robust(timed)
    references = reference_points(study, complete)
    matched = matched_points(study, complete)
    budgets = budgets_of(study, complete) if any(
        metrics_table.test_of(m) == "logrank" for m, _ in objectives) else None  # fmt: skip
    result = compute(complete, objectives, references, rounds, replicates, robust, rule_for(study), matched,
                     budgets)  # fmt: skip
    result["robust"] = sorted(robust)
    if study.tune is not None:  # each point's tuned value, from its tune runs (none of them above)
        ended = tuning.choices(study, trials)
        points = {pid: c.to_dict() for pid, c in ended.items() if c is not None}  # every tune run done
        result["tuned"] = {"path": study.tune.path, "seeds": study.tune.seeds, "first_seed": study.seed_of(0),
                           "points": points}  # fmt: skip
    result["ladder"] = bool(study.rungs)
    result["machines"] = machines(entries)
    result["speed_from_trials"] = trials_clocked(entries)  # one architecture: no probe (outputs)
    if study.rungs:  # what the per-rung conclusions name: each rung's size and budget
        result["rungs"] = {r["label"]: {"params": r["params"], "tokens": r["tokens"]} for r in study.rungs}
    result["throughput_check"] = own_speed_check(study, complete, references)
    speed = metrics_table.TOKENS_PER_S
    scales = probe_scales(plan, complete, entries) if speed in robust else {}
    for row in result["points"]:  # the probe's baseline: the interval of its own timings
        if scale := scales.get(row["point"]):
            ci = median_interval(scale)
            row[f"{speed}_ci"] = [ci["lo"], ci["hi"]]
    return result


def budgets_of(study, trials) -> dict[str, float]:
    """Tokens each point's trials train (steps x tokens a step: where a time to an event that never
    came is censored)."""
    out = {}
    for t in trials:
        pid = RunRecord.of(t).point
        if pid is not None and pid not in out:
            cfg = study.trial_config(dict(t.params))
            out[pid] = float(cfg.max_steps * cfg.tokens_per_step)
    return out


def warm_imports() -> None:
    """The report's heaviest imports (matplotlib with its Agg backend, scipy.stats: ~1.7 s of CPU of
    its ~2.3 s on a 2-core machine), made ahead by a launcher waiting on trials that train in other
    processes, so that the report after the last trial is shorter (docs/bench/launch_costs.md)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401
    import scipy.stats  # noqa: F401


def report_fronts(study, trials, tracker=None, stream=None, plan=None) -> dict[str, float]:
    """The fronts of `study`'s trials: files, the printed table and conclusions, and (with the
    launch's tracker) the files in the parent run and tags on the children. `plan`: as in
    `fronts_for`."""
    stream = stream or sys.stdout
    result = fronts_for(study, trials, plan=plan)
    if not result["points"]:
        print("pareto: no trial has completed its budget yet", file=stream)
        return {"points": 0.0}
    paths = write_files(result, study.results_dir() / "pareto")
    render = functools.partial(printed_sections, equal_time=equal_cost.time_budget_text(study.results_dir()))
    print("\n".join(render(result)), file=stream)
    written = summary.write(result, render, study.name, study.results_dir() / "pareto")
    for path in [*paths, written]:
        print(f"  {path}", file=stream)
    ranked = importance.report(result, trials, study.results_dir() / "importance", tracker, stream)
    if tracker is not None:
        runs = [run_id for row in result["points"] for run_id in row["runs"]]
        metrics = dict.fromkeys(("val_loss", paired_curves.loss_metric(result), "tokens"))
        paired_curves.prefetch(tracker.client, runs, metrics)  # the curves' histories, in bulk
        paths += _loss_at_equal_cost(tracker, result, study.results_dir() / "pareto", stream)
        names = {r["point"]: row_name(r) for r in result["points"]}
        paths += paired_curves.write(
            paired_curves.compute(tracker.client, result), names, study.results_dir() / "pareto"
        )
        for path in paths:
            tracker.log_file(tracker.parent_id, path, "pareto")
        for path in ranked:
            tracker.log_file(tracker.parent_id, path, "importance")
        publish(tracker, study, trials, result, render, written)
    return {"hypervolume": result["hypervolume"], "front_size": float(len(result["front"])),
            "points": float(len(result["points"]))}  # fmt: skip


def _loss_at_equal_cost(tracker, result: Mapping, folder, stream) -> list:
    """val_loss against tokens and probe time (figure); each curve read at the fastest design's end,
    printed as curves (not a verdict) and in equal_time.json."""
    rows = result["points"]
    point_curves = equal_cost.curves(tracker.client, rows)
    if not point_curves:
        return []
    horizon = equal_cost.add_equal_time(rows, point_curves) if len(rows) > 1 else None  # one: no race
    (folder / "equal_time.json").unlink(missing_ok=True)  # of an earlier analysis
    curve = "val_loss_curve_at_equal_time"
    if horizon is not None and any(curve in r for r in rows):
        shown = ", ".join(f"{row_name(r)} {r[curve]:.4f}" for r in rows if curve in r)
        left_out = "; ".join(
            f"{row_name(r)}: {r['equal_time_left_out']}" for r in rows if "equal_time_left_out" in r
        )
        if left_out:  # a design missing from the line says why (validate more often to see it)
            shown += f" (left out: {left_out})"
        print(f"val_loss curves at the fastest design's end ({horizon:.1f} s at the probe's speed; slower "
              f"designs read mid-schedule: curves, not a verdict): {shown}", file=stream)  # fmt: skip
        (folder / "equal_time.json").write_text(
            json.dumps({"horizon_s": horizon, curve: {
                r["point"]: r.get(curve) for r in rows}, "left_out": {
                r["point"]: r["equal_time_left_out"] for r in rows if "equal_time_left_out" in r}}, indent=2)
        )  # fmt: skip
    figure = equal_cost.plot(rows, point_curves, horizon, row_name, folder / "loss_vs_cost.png")
    return [figure] + ([folder / "equal_time.json"] if (folder / "equal_time.json").is_file() else [])


def publish(tracker, study, trials, result: Mapping, render: summary.Render, written) -> int:
    """What a reader of MLflow sees first: the parent run's `summary.md` (`written`, at its
    artifacts' root), its description and `front` tag (`summary`), and the children's tags
    (`tag_children`). Returns the number of child runs written."""
    tracker.log_file(tracker.parent_id, written)
    title = f"{study.name}: launch {tracker.launch}"
    tracker.set_tags(tracker.parent_id, {summary.NOTE: summary.note(result, render, title),
                                         "front": summary.front_tag(result)})  # fmt: skip
    return tag_children(tracker, trials, result)


def printed_sections(result: Mapping, equal_time: str | None = None) -> list[str]:
    """The report's text as printed, section by section: the table, the tuned values, the
    equal-time budget (`equal_time`: its line, if any), the verdicts, the throughput check, the
    machines."""
    out = [table_text(result)]
    if result.get("tuned"):
        out.append(tuned_text(result))
    if equal_time:
        out.append(equal_time)
    out.append(conclusions_text(result))
    if result.get("throughput_check"):
        out.append(throughput_text(result))
    if result.get("machines"):
        out.append(machines_text(result["machines"]))
    return out


CHILD_TAG_CAP = 200  # points whose runs a search's report tags; MLflow writes one run a request


def tag_children(tracker, trials, result: Mapping, cap: int | None = None) -> int:
    """The report's tags on each trial's run (and its rank and p_front as metrics, to sort on):
    `on_front` true for the runs of the front's points, false for the others; written where they
    changed (`Tracker.update_runs`). Past `cap` points (default CHILD_TAG_CAP), only the runs of
    the front and of the `cap` a reader looks for first (`most_relevant`: the references, the
    front, the likeliest), and those an earlier report tagged: each other run would be a request
    for values pareto.csv already holds (a minute at 10,000 runs; more on a tracking server).
    Returns the number of runs written."""
    rows = {r["point"]: r for r in result["points"]}
    front = set(result["front"])
    cap = CHILD_TAG_CAP if cap is None else cap
    shown = front | {r["point"] for r in most_relevant(result["points"], front, cap)}  # the whole front
    tags, metrics, tail = {}, {}, set()
    for t in trials:
        record = RunRecord.of(t)
        run_id = record.mlflow_run_id
        if not run_id:
            continue
        if len(rows) > cap and record.point not in shown:
            tail.add(run_id)
        row = rows.get(record.point) if t.state == TrialState.COMPLETE else None
        tags[run_id] = {"pareto_rank": str(-1 if row is None else row["rank"]),
                        "on_front": str(row is not None and row["point"] in front).lower()}  # fmt: skip
        if row is not None:
            tags[run_id]["p_front"] = f"{row['p_front']:.3f}"
            metrics[run_id] = {"pareto_rank": row["rank"], "p_front": float(tags[run_id]["p_front"])}
            _add_verdicts(tags[run_id], result, row)
    return tracker.update_runs(tags, metrics, mark="pareto_rank", tail=tail)


def _add_verdicts(tags: dict, result: Mapping, row: Mapping) -> None:
    """The row's verdicts against its reference (and matched baseline), and what an open one needs."""
    if is_reference(result, row["point"]):
        tags["verdict"] = "reference"
    else:
        tags.update({f"verdict.{metric}": word for metric, word in row["verdict"].items()})
        tags["verdict"] = ", ".join(f"{m}: {w}" for m, w in row["verdict"].items())
        for metric, word in row.get("matched_verdict", {}).items():  # reference.match
            tags[f"matched_verdict.{metric}"] = word
        for metric, diff in row["diff"].items():  # what an open comparison could have seen
            if "detectable" in diff:
                tags[f"detectable.{metric}"] = f"{diff['detectable']:.4g}"
            if diff.get("seeds_to_decide"):
                tags[f"seeds_to_decide.{metric}"] = str(diff["seeds_to_decide"])
    if result.get("verdicts"):
        tags["verdict.rule"] = result["verdicts"]["rule"]  # which adjustment, which looks


def machines(entries: dict) -> list[str]:
    """The machines the cost probe timed on, where the trials run (`trainers.machine.describe` of
    each entry's kernels; entries from before they were recorded: none)."""
    found = {describe(e["kernels"]) for table in entries.values() for e in table.values() if "kernels" in e}
    return sorted(found)


def own_speed_check(study, trials, references: dict[str, str]) -> dict[str, dict]:
    """`costs.throughput_check` of the completed `trials`: the cost probe's ratio (from its cache,
    whatever the objectives) beside the trials' own `train_tokens_per_s` (kept on each trial)."""
    entries = load_costs(costs_path(study))
    speeds: dict[str, list[float]] = {}
    probe: dict[str, float] = {}
    for t in trials:
        record = RunRecord.of(t)
        pid = record.point
        if (own := record.train_tokens_per_s) is not None:
            speeds.setdefault(pid, []).append(own)
        if pid not in probe and (entry := probe_entry(entries, study.trial_config(dict(t.params)))):
            probe[pid] = entry["tokens_per_s_ratio"]
    return throughput_check(speeds, references, probe)


def machines_text(names: list[str]) -> str:
    """The line printed under the verdicts: the digits are this machine's, the verdicts' odds are not."""
    return (
        f"machine: {'; '.join(names)} (another CPU model or kernel level trains other digits;"
        " the verdicts keep their odds: docs/verdicts/recipe.md)"
    )


def _probe_entries(study) -> dict:
    """The cost probe's cache of `study` when an objective is one of its metrics, else {}."""
    probed = set(metrics_table.probe_names())
    if not any(o.metric in probed for o in study.objectives):
        return {}
    return load_costs(costs_path(study))


def probe_samples(plan, trials, entries: dict | None = None) -> dict[str, dict]:
    """Per point, the cost probe's value of each round for the objectives it times ({} for a point
    never probed): {point id: {metric: {round: value}}}. `plan`: the runs' StudyPlan."""
    study = plan.study
    entries = _probe_entries(study) if entries is None else entries
    wanted = [o.metric for o in study.objectives if metrics_table.is_timed(o.metric)]
    out = {}
    for t in trials:
        record = RunRecord.of(t)
        if record.point in out or not entries:
            continue
        rounds = round_samples(entries, plan.config(record.key(t.params)))
        if picked := {m: rounds[m] for m in wanted if rounds.get(m)}:
            out[record.point] = picked
    return out


def probe_scales(plan, trials, entries: dict | None = None) -> dict[str, list[float]]:
    """The absolute tokens/s timings of the point that is the probe's baseline (every other
    point's rounds are ratios to it, so its own rounds say nothing of its uncertainty)."""
    entries = _probe_entries(plan.study) if entries is None else entries
    out = {}
    for t in trials:
        record = RunRecord.of(t)
        if entries and (samples := scale_samples(entries, plan.config(record.key(t.params)))):
            out[record.point] = samples
    return out
