"""The maths of the fronts: non-dominated ranks, hypervolume, per-point statistics over seeds.

Only runs that trained their full budget enter (COMPLETE Optuna trials: a run stopped early
by ASHA is PRUNED, a failed one FAIL). Runs of one point (its seeds) are averaged first: a
front is over points, with the per-point mean of each objective over its completed seeds (the
standard deviation and the seed count are kept). Then:

- `rank`: non-dominated sorting (0 = the Pareto front over all objectives, 1 = the next layer);
- hypervolume of the front, with each objective min-max normalised over all points and turned
  into minimisation, reference point 1.1 in every coordinate (1.0 = perfect, 0 = nothing);
- per-pair fronts of the first objective against each other (e.g. loss vs throughput).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from optuna.trial import TrialState

from sweeps.report import exact_tests, stats
from sweeps.report.dominance import hypervolume, nondominated_ranks, normalise, to_minimise
from sweeps.report.verdicts import Rule, judge
from sweeps.study.run_record import RunRecord
from trainers import metrics as metrics_table


def point_table(trials, metrics: Sequence[str]) -> list[dict]:
    """Per-point samples {metric: {seed: value}} of the completed seeds, from Optuna trials."""
    groups: dict[str, list] = {}
    for t in trials:
        if t.state == TrialState.COMPLETE and t.values is not None:
            groups.setdefault(RunRecord.of(t).point or str(t.params), []).append(t)
    rows = []
    for pid, group in groups.items():
        row = {"point": pid, "params": dict(group[0].params), "seeds": len(group)}
        row["trials"] = [t.number for t in group]
        records = [RunRecord.of(t) for t in group]
        row["runs"] = [r.mlflow_run_id for r in records]
        keys = [f"run{j}" if r.seed is None else r.seed for j, r in enumerate(records)]  # seeds pair points
        row["run_seeds"] = keys  # the seed of each of `runs`
        row["samples"] = {
            m: {k: t.values[i] for k, t in zip(keys, group, strict=True)} for i, m in enumerate(metrics)
        }
        rows.append(row)
    return rows


def compute(
    trials,
    objectives: Sequence[tuple[str, str]],
    reference: str | Mapping[str, str] | None = None,
    samples: Mapping[str, Mapping[str, Mapping]] | None = None,
    replicates: int = 1000,
    robust: frozenset[str] = frozenset(),
    rule=None,
    matched: Mapping[str, str] | None = None,
    budgets: Mapping[str, float] | None = None,
) -> dict:
    """Fronts over points. `reference`: the point id differences are taken against, or each
    point's own ({point id: reference point id}: a ladder's reference per rung); `samples`
    replace a point's per-seed samples of a metric (e.g. the cost probe's rounds); metrics in
    `robust` are summarised by medians and order-statistic intervals; `rule`
    (`sweeps.report.verdicts.Rule`, `verdicts.rule_for(study)`; default: 95%, Holm, one look)
    judges the comparisons with the reference; `matched` ({point id: its matched baseline's id},
    `reference.match`) adds a comparison of each such point with its own baseline, in the same family;
    `budgets` ({point id: tokens trained}) censor the time-to-event metrics (a `logrank` test)."""
    metrics = [m for m, _ in objectives]
    directions = [d for _, d in objectives]
    rows = point_table(trials, metrics)
    for row in rows:
        row["samples"].update((samples or {}).get(row["point"], {}))
        if budgets and row["point"] in budgets:
            row["budget"] = budgets[row["point"]]
    result = {"objectives": [{"metric": m, "direction": d} for m, d in objectives], "points": rows}
    result["references"] = references_among(reference, rows)
    single = isinstance(reference, str) and reference in result["references"]
    result["reference"] = reference if single else None  # one reference for all; None per rung
    if not rows:
        result.update(front=[], hypervolume=0.0, pairs={})
        return result
    result["matched"] = references_among(matched, rows)
    result["verdicts"] = add_statistics(
        rows, objectives, result["references"], replicates, robust, rule, result["matched"]
    )
    mins = [to_minimise([r[m] for m in metrics], directions) for r in rows]
    for row, rank in zip(rows, nondominated_ranks(mins), strict=True):
        row["rank"] = rank
    norm = normalise(mins)
    front = [i for i, r in enumerate(rows) if r["rank"] == 0]
    result["front"] = [rows[i]["point"] for i in front]
    result["hypervolume"] = hypervolume([norm[i] for i in front], [1.1] * len(metrics)) / 1.1 ** len(metrics)
    pairs = {}
    for k in range(1, len(metrics)):
        two = [[m[0], m[k]] for m in mins]
        ranks = nondominated_ranks(two)
        pairs[f"{metrics[0]}_vs_{metrics[k]}"] = [rows[i]["point"] for i, r in enumerate(ranks) if r == 0]
    result["pairs"] = pairs
    return result


def references_among(reference: str | Mapping[str, str] | None, rows: Sequence[Mapping]) -> dict[str, str]:
    """{point id: its reference's id} for the rows whose reference is among the rows (a reference
    maps to itself); `reference` one id for every row, or a mapping per row."""
    ids = {r["point"] for r in rows}
    if reference is None:
        return {}
    if isinstance(reference, str):
        return dict.fromkeys(ids, reference) if reference in ids else {}
    return {pid: ref for pid, ref in reference.items() if pid in ids and ref in ids}


def is_reference(result: Mapping, point: str) -> bool:
    """Whether `point` is a reference of `result` (the study's one, or a ladder rung's)."""
    return result.get("references", {}).get(point) == point


def add_statistics(
    rows: list[dict],
    objectives,
    reference: str | Mapping[str, str] | None,
    replicates: int,
    robust: frozenset[str] = frozenset(),
    rule=None,
    matched: Mapping[str, str] | None = None,
) -> dict | None:
    """Per row and objective: mean, std, 95% interval; against its reference (`reference`: one
    point id, or one per row as `references_among` gives): the paired difference, its adjusted
    interval and verdict (every comparison of the study judged as one family by `rule`); and
    p_front over all objectives; with `matched`, the same against each point's matched baseline
    (`matched_diff`, `matched_verdict`; a metric the cost probe times is left out: it times a
    widened baseline against itself, not against the design's; a point matched by its reference
    itself gets `matched_reference` and no second comparison). Returns the verdicts' summary (None
    without a reference)."""
    by_id = {r["point"]: r for r in rows}
    references = references_among(reference, rows)
    matched = references_among(matched, rows)
    comparisons = []
    for row in rows:
        row["diff"], row["verdict"] = {}, {}
        ref = by_id.get(references.get(row["point"]))
        if ref is not None:
            row["reference"] = ref["point"]
        for metric, direction in objectives:
            values = list(row["samples"][metric].values())
            ci = stats.median_interval(values) if metric in robust else stats.interval(values)
            row[metric], row[metric + "_std"] = ci["mean"], ci["std"]
            row[metric + "_ci"] = [ci["lo"], ci["hi"]]
            if ref is not None and row is not ref:
                comparisons.append(_comparison(row, ref, metric, direction, robust, ""))
        if (own := by_id.get(matched.get(row["point"]))) is not None:
            row["matched_reference"] = own["point"]
            if own is ref:  # the plain reference is its match: that comparison is the plain one
                continue
            row["matched_diff"], row["matched_verdict"] = {}, {}
            for metric, direction in objectives:
                if not metrics_table.is_timed(metric):
                    comparisons.append(_comparison(row, own, metric, direction, robust, "matched_"))
    summary = judge(comparisons, rule or Rule()) if references or matched else None
    for c in comparisons:
        row, metric, against = c.pop("row"), c["metric"], c.pop("against")
        row[against + "verdict"][metric] = c["verdict"]
        row[against + "diff"][metric] = {
            k: v for k, v in c.items() if k not in ("diffs", "metric", "direction", "verdict")
        }
    metrics = [m for m, _ in objectives]
    directions = [d for _, d in objectives]
    probabilities = stats.p_front(
        [r["samples"] for r in rows], metrics, directions, replicates, robust=robust
    )
    for row, p in zip(rows, probabilities, strict=True):
        row["p_front"] = p
    return summary


def _comparison(row: Mapping, ref: Mapping, metric: str, direction: str, robust, against: str) -> dict:
    """One paired comparison of `row` with `ref` on `metric`, for `verdicts.judge`; `against`: the
    prefix of the row's keys it fills (empty: the reference's; `matched_`: its matched baseline's)."""
    diff = stats.paired(row["samples"][metric], ref["samples"][metric], metric in robust)
    test = metrics_table.test_of(metric)
    kind = "exact" if metrics_table.is_exact(metric) else "rounds" if metric in robust else "seeds"
    kind = test if kind == "seeds" and test in exact_tests.TESTS else kind
    out = {**diff, "metric": metric, "direction": direction, "kind": kind, "row": row, "against": against}
    if kind == "permutation" and metrics_table.is_bounded_fraction(metric):
        out["bounds"] = (-1.0, 1.0)
    if kind == "logrank":  # the pairs themselves, censored where a trial ran out of budget
        keys = sorted(set(row["samples"][metric]) & set(ref["samples"][metric]), key=str)
        out["pairs"] = {"x": [row["samples"][metric][k] for k in keys],
                        "ref": [ref["samples"][metric][k] for k in keys]}  # fmt: skip
        out["censor_at"] = min(row.get("budget", math.inf), ref.get("budget", math.inf))
    if metrics_table.is_relative(metric):  # its margin is a fraction of the reference's value
        values = list(ref["samples"][metric].values())
        out["scale"] = float(np.median(values) if metric in robust else np.mean(values))
    return out
