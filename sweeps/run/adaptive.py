"""Adaptive seeds (`repeats: {min, max}`, grid studies): which points get one more seed.

Every point starts with `min` seeds. When a round is finished (every planned seed of every point
done), the fronts' statistics of the completed runs decide, once, which points are still open:
a verdict against the reference that is neither better, worse nor equivalent on an objective
that seeds move (`varies: seed` in trainers.metrics: not the cost probe's throughput, not exact
metrics such as memory, which more seeds cannot change), or a front membership `p_front`
strictly between `P_FRONT_DECIDED` and 1 - `P_FRONT_DECIDED`. Each open point below `max` gets
the next seed, and so does its reference whenever another point does (pairs need shared seeds);
a scaling ladder's points are compared with the reference design of their own rung, so each
rung decides for itself and only the rungs still open grow.

The verdicts are the study's own (`sweeps.report.verdicts`, `verdicts:` and `margins:` in the
study file): each look n = min..max is a planned look of `sweeps.report.sequential`, whose
boundaries spend the error over all of them, so a verdict reached at any look, for whatever
reason the point got there, keeps the stated level. That is also why `p_front` may stay a
reason to add seeds: the seeds it adds are looks the boundaries already paid for, and `p_front`
itself is a bootstrap frequency that claims no error rate (it is reported, never tested).

The decisions are stored in the Optuna study (user attr `adaptive_seeds`: point id -> seeds) at
the moment they are made, under the study's lock: a resumed or a second launcher reads them
instead of re-deciding on more data, so the counts are the same however the launch was cut.
"""

from __future__ import annotations

import json

from optuna.trial import TrialState

from sweeps.report.analysis import fronts_for
from sweeps.report.fronts import is_reference
from sweeps.report.verdicts import OPEN
from sweeps.study.reference import reference_points
from sweeps.study.run_record import RunRecord, is_done
from trainers.metrics import varies_with_seed

P_FRONT_DECIDED = 0.05
ATTR = "adaptive_seeds"


def seed_counts(plan) -> dict[str, int]:
    """Seeds per point id as decided so far (every point at `min` before any decision)."""
    ids = [key.point_id for key in plan.resolved.grid]
    seeds = plan.study.seeds
    if not seeds.adaptive:  # fixed seeds: nothing stored to read
        return dict.fromkeys(ids, seeds.min)
    stored = json.loads(plan.optuna.user_attrs.get(ATTR, "{}"))
    return {pid: int(stored.get(pid, seeds.min)) for pid in ids}


def extend(plan, trials) -> dict[str, int]:
    """Seeds per point after deciding the round that just finished (if one did): call under the
    study's lock. Returns the counts to enqueue up to."""
    counts = seed_counts(plan)
    study = plan.study
    if not study.seeds.adaptive:
        return counts
    taken = {(r.point, r.repeat) for t in trials if is_done(t) for r in [RunRecord.of(t)]}
    if any((pid, r) not in taken for pid, n in counts.items() for r in range(n)):
        return counts  # the round is still running: decide on finished rounds only
    more = undecided_points(plan.resolved, [t for t in trials if t.state == TrialState.COMPLETE])
    grow = {pid for pid in more if counts.get(pid, 0) < study.seeds.max}
    if not grow:
        return counts
    references = reference_points(study, [t for t in trials if t.state == TrialState.COMPLETE])
    for pid in list(grow):  # a pair needs shared seeds: its reference (a ladder's: its rung's) grows too
        ref = references.get(pid)
        if ref is not None and counts.get(ref, 0) < study.seeds.max:
            grow.add(ref)
    for pid in grow:
        counts[pid] += 1
    plan.optuna.set_user_attr(ATTR, json.dumps(counts, sort_keys=True))
    return counts


def undecided_points(resolved, complete) -> set[str]:
    """Point ids whose verdict or front membership more seeds could still settle (`resolved`: the
    StudyPlan the runs were made from)."""
    if not complete:
        return set()
    study = resolved.study
    result = fronts_for(study, complete, plan=resolved)
    seed_moved = [o.metric for o in study.objectives if varies_with_seed(o.metric)]
    out = set()
    for row in result["points"]:
        if not is_reference(result, row["point"]) and any(row["verdict"].get(m) in OPEN for m in seed_moved):
            out.add(row["point"])
        if P_FRONT_DECIDED < row["p_front"] < 1 - P_FRONT_DECIDED:
            out.add(row["point"])
    return out
