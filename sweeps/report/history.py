"""Hypervolume history over the trials, on a normalisation the study fixes before it launches.

Optuna's convention (`optuna.visualization.plot_hypervolume_history`): after each completed trial,
the hypervolume dominated by every completed trial so far (each trial's own objective values, not
point means), against one reference point. Here the study declares, per objective, its `best`
and `worst` value (`hypervolume: {val_loss: [best, worst], ...}`); each value is mapped to
(value - best) / (worst - best), so that 0 is the best bound and 1 the worst in every objective
and in both directions, the reference point is 1 in every coordinate, and a value is in [0, 1]
(1 = a trial at the best bound of every objective; a trial beyond the worst bound of any
objective adds nothing; one beyond the best bound may push it above 1). The bounds are part of
the study's fingerprint, so a resumed launch continues the same curve and two launches of one
study file give comparable curves. The end-of-launch `hypervolume` (over point means, normalised
by the points' own range) answers a different question and moves whenever a new point widens it.

Completed trials are taken in the order they completed (`datetime_complete`, then number); step k
is the value after the k-th completed trial.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from optuna.trial import TrialState

from sweeps.report.dominance import hypervolume

METRIC = "hypervolume_history"  # the parent run's metric, one step per completed trial


def normalised(values: Sequence[float], bounds: Sequence[Sequence[float]]) -> list[float]:
    """(value - best) / (worst - best) per objective: 0 at the best bound, 1 at the worst."""
    return [(v - best) / (worst - best) for v, (best, worst) in zip(values, bounds, strict=True)]


def completed_in_order(trials) -> list:
    done = [t for t in trials if t.state == TrialState.COMPLETE and t.values is not None]
    return sorted(done, key=lambda t: (t.datetime_complete is None, t.datetime_complete, t.number))


def history(trials, metrics: Sequence[str], bounds: Mapping[str, Sequence[float]]) -> list[float]:
    """The hypervolume after each completed trial, in completion order (one value per trial)."""
    box = [bounds[m] for m in metrics]
    points = [normalised(t.values, box) for t in completed_in_order(trials)]
    return front_history(points, [1.0] * len(metrics))


def front_history(points, ref) -> list[float]:
    """The hypervolume of the front of points[:k + 1] for each k. Kept incrementally: a point no
    better than the front (dominated by or equal to a point of it) changes nothing; otherwise it
    joins and what it dominates leaves, and only then is the hypervolume measured again."""
    front = np.zeros((0, len(ref)))
    volume, out = 0.0, []
    for point in np.asarray(points, dtype=float).reshape(-1, len(ref)):
        if not np.any(np.all(front <= point, axis=1)):
            beaten = np.all(point <= front, axis=1) & np.any(point < front, axis=1)
            front = np.vstack([front[~beaten], point])
            volume = hypervolume(front, ref)
        out.append(volume)
    return out


def log_history(tracker, study, trials) -> list[float]:
    """Logs the study's hypervolume history into the launch's parent run (steps 1..n, all of the
    study's completed trials, earlier launches' included); [] for a study without `hypervolume:`."""
    if study.hypervolume is None or tracker is None or tracker.parent_id is None:
        return []
    from mlflow.entities import Metric

    values = history(trials, [o.metric for o in study.objectives], study.hypervolume)
    stamps = [int(t.datetime_complete.timestamp() * 1000) if t.datetime_complete else 0
              for t in completed_in_order(trials)]  # fmt: skip
    rows = [Metric(METRIC, v, ms, step) for step, (v, ms) in enumerate(zip(values, stamps, strict=True), 1)]
    for i in range(0, len(rows), 1000):  # MLflow's batch limit
        tracker.client.log_batch(tracker.parent_id, metrics=rows[i : i + 1000])
    return values
