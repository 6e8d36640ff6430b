"""A study's seeds, one policy: a fixed count (`repeats: n`) or adaptive (`repeats: {min, max}`).

Each point runs with seeds trial.seed + 0, 1, ... (`Study.seed_of`); an adaptive study starts
every point at `min` and gives one more seed, round by round, to the points its verdicts have not
decided, up to `max` (sweeps.run.adaptive). Every look at min..max is planned by the verdicts'
sequential boundaries.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Seeds:
    min: int  # seeds every point gets (`repeats`, or `repeats.min`)
    max: int  # seeds a point can get (= min for a fixed count)
    adaptive: bool

    def describe(self) -> str:
        if self.adaptive:
            return f"{self.min} to {self.max} seeds (adaptive)"
        return f"{self.min} seed(s)"
