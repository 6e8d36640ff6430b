"""Learning-rate schedules as multipliers of the peak lr, for `torch.optim.lr_scheduler.LambdaLR`.

Step `s` counts optimizer steps from 0 to `max_steps - 1`; `W = round(warmup_frac * max_steps)`.

- warmup (all schedules): `m(s) = (s + 1) / W` for `s < W`
- cosine:   `m(s) = r + (1 - r) * 0.5 * (1 + cos(pi * p))`, `p = (s - W) / (max_steps - 1 - W)`,
            r = min_lr_ratio
- wsd:      warmup, then 1 (stable), then linear from 1 to r over the last
            `round(decay_frac * max_steps)` steps
- constant: warmup, then 1
"""

from __future__ import annotations

import math
from collections.abc import Callable

from trainers.config import TrainConfig


def _warmup(max_steps: int, frac: float) -> int:
    return min(max_steps - 1, round(frac * max_steps)) if max_steps > 1 else 0


def cosine(max_steps: int, warmup: int, min_ratio: float, decay_steps: int) -> Callable[[int], float]:
    span = max(1, max_steps - 1 - warmup)  # p = 1 at the last step

    def f(step: int) -> float:
        p = min(1.0, (step - warmup) / span)
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * p))

    return f


def wsd(max_steps: int, warmup: int, min_ratio: float, decay_steps: int) -> Callable[[int], float]:
    start = max_steps - decay_steps

    def f(step: int) -> float:
        if step < start:
            return 1.0
        p = min(1.0, (step - start + 1) / max(1, decay_steps))
        return 1.0 + (min_ratio - 1.0) * p

    return f


def constant(max_steps: int, warmup: int, min_ratio: float, decay_steps: int) -> Callable[[int], float]:
    return lambda step: 1.0


SCHEDULES = {"cosine": cosine, "wsd": wsd, "constant": constant}


def lr_multiplier(train: TrainConfig, max_steps: int) -> Callable[[int], float]:
    """The schedule of `train.schedule` over `max_steps` optimizer steps (warmup included)."""
    warmup = _warmup(max_steps, train.warmup_frac)
    decay_steps = max(1, min(max_steps - warmup, round(train.decay_frac * max_steps)))
    after = SCHEDULES[train.schedule](max_steps, warmup, train.min_lr_ratio, decay_steps)

    def f(step: int) -> float:
        return (step + 1) / warmup if step < warmup else after(step)

    return f
