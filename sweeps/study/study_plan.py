"""The study resolved once into the runs it will make: `resolve(study) -> StudyPlan`, immutable.

A run is named by a `RunKey(point, stage, overrides)` (sweeps.study.run_key):

- a grid point (its seeds; adaptive seeds' rounds up to `max`; matched baselines and a ladder's
  rungs are grid points too): RunKey(point);
- a tune run (`tune:`): the point with one tuned value as a parameter, stage TUNE;
- a confirming run: the point with its tuned value as an override. Which value is known only when
  the point's tune runs end, so every value the tune stage can choose is planned.

A sampler other than the grid proposes its points while the study runs: `RunKey.of(point)` names
such a run and the plan resolves it the same way, on demand (`config`).

The plan holds each run's split under `train.micro_batch: auto`. The split needs the machine
measured (sweeps.run.memory), so it is a separate, named step that returns a NEW plan
(`with_splits`); nothing writes into the Study or into a plan. The driver, the dry run, the cost
probe and the report read each run's `TrialConfig` here, so a run trains, is timed and is reported
with one config.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from types import MappingProxyType

from sweeps.study import tuning
from sweeps.study.definition import Study
from sweeps.study.run_key import TUNE, RunKey


@dataclasses.dataclass(frozen=True)
class Split:
    """`train.micro_batch: auto` resolved for one run: one worker's micro-step batch, the
    accumulation that keeps the global batch, the evaluation batches that keep its tokens."""

    batch_size: int
    grad_accum: int
    eval_batches: int

    def apply(self, cfg):
        """`cfg` at this split (micro_batch resolved); ValueError if it changes the global batch."""
        train = cfg.train
        if self.batch_size * self.grad_accum != train.batch_size * train.grad_accum:
            raise ValueError(
                f"split {self.batch_size} x {self.grad_accum} changes the global batch "
                f"{train.batch_size} x {train.grad_accum}"
            )
        train = dataclasses.replace(
            train,
            batch_size=self.batch_size,
            grad_accum=self.grad_accum,
            eval_batches=self.eval_batches,
            micro_batch=None,
        )
        return dataclasses.replace(cfg, train=train)


@dataclasses.dataclass(frozen=True)
class StudyPlan:
    """Every run of a study with its config and split (see the module docstring)."""

    study: Study
    grid: tuple[RunKey, ...]  # the planned grid points, in grid order (the runs the verdicts read)
    tune: tuple[RunKey, ...] = ()  # `tune:`: each point at each tuned value (stage tune)
    confirming: tuple[RunKey, ...] = ()  # `tune:`: each point at each value it may be confirmed at
    splits: Mapping[RunKey, Split] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    # `micro_batch: auto` with a sampler other than the grid: the split of a sampled run's config
    sized: Callable | None = None
    # The memory plan's rows (sweeps.run.memory.PointPlan, one per grid point); None: no plan
    memory: tuple | None = None

    def runs(self) -> tuple[RunKey, ...]:
        """Every run known before the study runs (a sampler's points come as it runs)."""
        return (*self.grid, *self.tune, *self.confirming)

    def planned(self, pid: str) -> RunKey | None:
        """The grid point or tune run whose point id is `pid` (what an enqueued run records)."""
        return self._by_point_id.get(pid)

    @functools.cached_property
    def _by_point_id(self) -> Mapping[str, RunKey]:
        return MappingProxyType({k.point_id: k for k in (*self.grid, *self.tune)})

    def split(self, key: RunKey) -> Split | None:
        """The run's micro-batch split; None where `micro_batch: auto` is not asked (or not yet
        measured: the plan before `with_splits`)."""
        if key in self.splits:
            return self.splits[key]
        if self.sized is not None:
            return self.sized(self.study.trial_config(key.point, overrides=key.overrides))
        return None

    def config(self, key: RunKey, seed: int | None = None):
        """The run's resolved `TrialConfig` (at its split), with `seed` when given."""
        cfg = self.study.trial_config(key.point, overrides=key.overrides)
        split = self.split(key)
        if split is not None:
            cfg = split.apply(cfg)
        return cfg if seed is None else dataclasses.replace(cfg, seed=seed)

    def seed(self, key: RunKey, repeat: int) -> int:
        """The seed of the run's `repeat`-th run: a tune run's from trial.seed, the others' after
        the tune stage's (split sample)."""
        if key.stage == TUNE:
            return self.study.tune_seed_of(repeat)
        return self.study.seed_of(repeat)

    def repeats(self, key: RunKey) -> int:
        """How many seeds the run has at most (adaptive seeds: `max`)."""
        return self.study.tune.seeds if key.stage == TUNE else self.study.seeds.max

    def with_splits(
        self, splits: Mapping[RunKey, Split], memory: tuple | None, sized: Callable | None = None
    ) -> StudyPlan:
        """A new plan with the memory plan's splits (every known run's), its rows, and for a
        sampler other than the grid how a sampled run's split is found."""
        return dataclasses.replace(self, splits=MappingProxyType(dict(splits)), memory=memory, sized=sized)


def resolve(study: Study) -> StudyPlan:
    """The runs of `study` (each parses: load validated every point, tune and confirming runs included)."""
    grid = tuple(RunKey.of(p) for p in study.planned_points())
    if study.tune is None:
        return StudyPlan(study, grid)
    path, values = study.tune.path, study.tune.range.values()
    tune = tuple(RunKey.of(point, TUNE) for _, point in tuning.tune_points(study))
    confirming = tuple(RunKey.of(k.point, overrides={path: v}) for k in grid for v in values)
    return StudyPlan(study, grid, tune, confirming)
