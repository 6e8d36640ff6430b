"""What a run is, without its seed: `RunKey(point, stage, overrides)`, hashable, one canonical id.

The StudyPlan (sweeps.study.study_plan) plans its runs by key, the plan of the Optuna side
(sweeps.run.plan) asks them by key, and a run's record (sweeps.study.run_record) gives its key back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from sweeps.study.space import point_id

TUNE = "tune"  # the stage of a tune run (`tune:`, sweeps.study.tuning); None: a run the verdicts read


@dataclasses.dataclass(frozen=True, eq=False)
class RunKey:
    """What a run is, without its seed: its point (the params as proposed, in the space's order),
    its stage (TUNE for a tune run; None for a run the verdicts read) and its overrides (a
    confirming run's tuned value, {key path: value}). Equal keys have the same `id`."""

    params: tuple[tuple[str, Any], ...]
    stage: str | None = None
    tuned: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, point: Mapping, stage: str | None = None, overrides: Mapping | None = None) -> RunKey:
        return cls(tuple(point.items()), stage, tuple(sorted((overrides or {}).items())))

    @property
    def point(self) -> dict:
        return dict(self.params)

    @property
    def overrides(self) -> dict:
        return dict(self.tuned)

    @property
    def point_id(self) -> str:
        """The point's id: what the run's record stores as its point (its seeds share it)."""
        return point_id(self.point)

    @property
    def id(self) -> str:
        """The one canonical id of the run: the point's, its stage, its overrides' id."""
        stage = f":{self.stage}" if self.stage else ""
        tuned = f"+{point_id(self.overrides)}" if self.tuned else ""
        return self.point_id + stage + tuned

    def __eq__(self, other) -> bool:
        return isinstance(other, RunKey) and self.id == other.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"RunKey({self.point}, stage={self.stage!r}, overrides={self.overrides})"
