"""The per-design tuning stage (`tune:`): every design point at its own best learning rate.

    tune: {train.lr: {low: 1.0e-3, high: 1.0e-2, points: 5, log: true}, seeds: 2}   # metric: optional

A design that wants another rate than the one the study fixes would lose for that reason alone.
With `tune:`, a launch first runs every planned point at each of `points` values of the tuned key
path (log- or evenly spaced from `low` to `high`) with `seeds` seeds (trial.seed + 0..seeds-1):
the tune stage, its runs tagged `stage: tune`. A point's best value is the one with the best mean
of `metric` over those seeds (a run that failed, e.g. diverged at a high rate, counts as the worst).
Then the point runs `repeats` confirming seeds at that value, trial.seed + seeds + 0.., which took
no part in the choice (split sample): the fronts and verdicts read only those, so the choice
cannot leak into a verdict. A point's confirming runs start when its own tune runs are done.
The table says each point's value, how much worse its neighbours in the range were (how flat the
curve is around the choice) and warns when the best value is at an edge of the range.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

from optuna.trial import TrialState

from arch.configtree import Issue
from sweeps.study.run_record import RunRecord, is_done
from sweeps.study.space import CategoricalParam, point_id
from trainers import metrics as metrics_table


@dataclasses.dataclass(frozen=True)
class TuneRange:
    low: float = 0.0
    high: float = 0.0
    points: int = dataclasses.field(default=5, metadata={"ge": 2})
    log: bool = False

    def values(self) -> list[float]:
        """The `points` values from low to high (log-spaced with log: true), 6 significant digits."""
        if self.log:
            a, b = math.log(self.low), math.log(self.high)
            raw = [math.exp(a + (b - a) * i / (self.points - 1)) for i in range(self.points)]
        else:
            raw = [self.low + (self.high - self.low) * i / (self.points - 1) for i in range(self.points)]
        return [float(f"{v:.6g}") for v in raw]


@dataclasses.dataclass(frozen=True)
class TuneConfig:
    """`tune: {<trial key path>: {low, high, points, log}, seeds: k, metric: m}` (one path)."""

    path: str = "train.lr"
    range: TuneRange = TuneRange()
    seeds: int = dataclasses.field(default=2, metadata={"ge": 1})
    metric: str | None = None  # None: the study's first objective

    @classmethod
    def prepare(cls, data: Mapping, path: str, issues: list[Issue]) -> dict | None:
        """The YAML form ({train.lr: {...}, seeds, metric}) -> the fields."""
        paths = [k for k in data if k not in ("seeds", "metric")]
        if len(paths) != 1:
            issues.append(
                Issue(path or "tune", f"given {sorted(paths)}; allowed: one trial key path, e.g. train.lr")
            )
            return None
        name = paths[0]
        if isinstance(data[name], Mapping) and (
            unknown := sorted(set(data[name]) - {"low", "high", "points", "log"})
        ):
            issues.append(
                Issue(f"{path or 'tune'}.{name}.{unknown[0]}", "unknown; allowed: low, high, points, log")
            )
            return None
        points = data[name].get("points", 5) if isinstance(data[name], Mapping) else 5
        if not isinstance(points, int) or isinstance(points, bool) or points < 2:
            issues.append(
                Issue(f"{path or 'tune'}.{name}.points", f"given {points!r}; allowed: an integer >= 2")
            )
            return None
        rest = {k: v for k, v in data.items() if k != name}
        return {"path": name, "range": data[name], **rest}

    def as_written(self, tree: Mapping) -> dict:
        """The dumped section back in its YAML form."""
        return {
            self.path: tree["range"],
            "seeds": tree["seeds"],
            **({"metric": self.metric} if self.metric else {}),
        }

    def check(self, path: str) -> list[Issue]:
        where = f"{path or 'tune'}.{self.path}"
        r = self.range
        if r.high <= r.low:
            return [Issue(f"{where}.high", f"given {r.high}; allowed: above low {r.low}")]
        if r.log and r.low <= 0:
            return [Issue(f"{where}.low", f"given {r.low}; allowed: above 0 with log: true")]
        return []


@dataclasses.dataclass(frozen=True)
class TunedParam(CategoricalParam):
    """The tuned path as a parameter of the tune runs only: never in the grid, set by the plan."""

    type: str = "tuned"
    planned_only = True


def tuned_param(tune: TuneConfig) -> dict:
    return {tune.path: TunedParam(choices=tune.range.values())}


def tune_points(study) -> list[tuple[dict, dict]]:
    """(design point, tune point) for every planned point and tuned value, in that order."""
    values = study.tune.range.values()
    return [(p, {**p, study.tune.path: v}) for p in study.planned_points() for v in values]


def metric_of(study) -> tuple[str, str]:
    """(metric, direction) the tune stage chooses by: `tune.metric`, else the first objective."""
    by_name = {o.metric: o.direction for o in study.objectives}
    metric = study.tune.metric or study.objectives[0].metric
    return metric, by_name[metric]


@dataclasses.dataclass(frozen=True)
class Choice:
    """A point's tuned value: the curve (mean of the metric per value, over the tune seeds; a
    value with a failed run is inf when minimising), the best value, and how flat it is around it."""

    value: float
    curve: dict[float, float]
    metric: str
    direction: str

    @property
    def edge(self) -> bool:
        """The best value is the lowest or highest of the range (the optimum may lie beyond)."""
        values = list(self.curve)
        return self.value in (values[0], values[-1])

    def rises(self) -> list[float]:
        """How much worse (in the metric's units, > 0) each neighbour of the best value is."""
        values = list(self.curve)
        i = values.index(self.value)
        sign = 1 if self.direction == "minimize" else -1
        return [
            sign * (self.curve[values[j]] - self.curve[self.value])
            for j in (i - 1, i + 1)
            if 0 <= j < len(values)
        ]

    def to_dict(self) -> dict:
        curve = {str(k): v for k, v in self.curve.items()}
        return {
            "value": self.value,
            "curve": curve,
            "metric": self.metric,
            "edge": self.edge,
            "rises": self.rises(),
        }


def choose(curve: Mapping[float, list[float]], direction: str) -> float:
    """The best value of a curve {value: [the metric of each tune seed; nan for a failed run]}: the
    best mean; a value with a failed run is the worst; ties go to the lower value."""
    worst = math.inf if direction == "minimize" else -math.inf
    means = {
        v: (sum(xs) / len(xs) if xs and all(math.isfinite(x) for x in xs) else worst)
        for v, xs in curve.items()
    }
    key = (lambda v: (means[v], v)) if direction == "minimize" else (lambda v: (-means[v], v))
    return min(means, key=key)


def choices(study, trials: Iterable) -> dict[str, Choice | None]:
    """{design point id: its Choice, or None while any of its tune runs is not done}."""
    if study.tune is None:
        return {}
    metric, direction = metric_of(study)
    index = [o.metric for o in study.objectives].index(metric)
    runs: dict[str, list] = {}
    for t in trials:
        record = RunRecord.of(t)
        if record.is_tune and is_done(t):
            runs.setdefault(record.point, []).append(t)
    out = {}
    for design, point in tune_points(study):
        out.setdefault(point_id(design), {})[point[study.tune.path]] = runs.get(point_id(point), [])
    chosen = {}
    for pid, by_value in out.items():
        if any(len(ts) < study.tune.seeds for ts in by_value.values()):
            chosen[pid] = None
            continue
        curve = {
            v: [t.values[index] if t.state == TrialState.COMPLETE else math.nan for t in ts]
            for v, ts in by_value.items()
        }
        best = choose(curve, direction)
        worst = math.inf if direction == "minimize" else -math.inf
        means = {
            v: (sum(xs) / len(xs) if all(math.isfinite(x) for x in xs) else worst) for v, xs in curve.items()
        }
        chosen[pid] = Choice(best, means, metric, direction)
    return chosen


def issues(study) -> list[Issue]:
    """What a study with `tune:` must also be."""
    tune = study.tune
    if tune is None:
        return []
    out = []
    where = f"tune.{tune.path}"
    if tune.path in study.space:
        out.append(Issue(where, "also a parameter of space:; allowed: a path the space does not set"))
    if study.sampler.kind != "grid":
        out.append(
            Issue("tune", f"tunes every grid point; allowed: sampler.kind grid, not {study.sampler.kind!r}")
        )
    if study.seeds.adaptive:
        out.append(Issue("tune", "the confirming seeds are a fixed count; allowed: a fixed repeats"))
    if study.scaling is not None:
        out.append(
            Issue("tune", "a ladder's rungs have their own lr (scaling.sizes[i].lr); allowed: no scaling:")
        )
    if study.scheduler.kind != "none":
        out.append(Issue("tune", "every tune run needs its full budget; allowed: scheduler.kind none"))
    objectives = [o.metric for o in study.objectives]
    moved = [m for m in objectives if (r := metrics_table.get(m)) is not None and r.varies == "seed"]
    metric = tune.metric or (objectives[0] if objectives else None)
    if metric is not None and metric not in moved:
        given = f"given {metric!r}" + ("" if tune.metric else " (the first objective)")
        allowed = f"an objective that seeds move ({', '.join(moved) or 'none here'})"
        out.append(Issue("tune.metric", f"{given}; allowed: {allowed}"))
    return out
