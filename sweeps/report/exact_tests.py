"""Tests for metrics a t interval does not fit: bounded, bimodal, censored (the recall metrics).

`reserved_recall_auc` is a fraction that sits near chance or near 1 (recall jumps or never comes),
and `reserved_recall_tokens` is the tokens at which recall emerged, censored at the budget when it
never did. A t interval over three seeds of such values runs past the metric's range (±1.9 on a
0-1 scale) and its error rate is not the stated one. A metric's test is declared once, in its
record (`test` in trainers.metrics); `sweeps.report.verdicts.judge` calls these:

- `permutation`: the exact paired permutation test of the mean difference (each seed's
  difference keeps or flips its sign: 2^n equally likely arrangements under no difference,
  enumerated up to `EXACT_UP_TO` seeds, a fixed Monte Carlo sample beyond). Its interval is the
  test inverted: the shifts it does not reject at the level, within the metric's range (a
  fraction's difference lies in [-1, 1]), so three seeds give [-1, 1] and never more. Three seeds
  cannot reach p < 0.25: the test says so instead of a t interval pretending otherwise.
- `logrank`: a paired permutation log-rank test of the time to an event censored at the budget
  (a value at the budget: not seen by then). The statistic is the log-rank's observed minus
  expected events of the design; under no difference the design and the reference of each seed
  are exchangeable, so swapping them seed by seed gives its exact null distribution (2^n
  arrangements), valid at any n, with the pairing by seed kept. No interval: `better` / `worse`
  when rejected (fewer tokens to emergence: better), else `undecided`.
- Seeds to decide, from the same test: the smallest n at which a study of n seeds drawn from the
  observed pairs (resampled with replacement) decides with probability `POWER`: for the
  permutation test with a margin, its interval inside the margin when the observed differences
  are centred (no difference, as the t test's count assumes); for the log-rank, a rejection at
  the observed difference. None when no n up to `MOST_PERMUTATION` / `MOST_LOGRANK` does.
- Adaptive seeds: these tests have no group-sequential boundaries; a study with looks n_min..n_max
  judges them at level / (number of looks) (Bonferroni over the looks: conservative).

The calibration under the null is `sweeps.report.calibrate --recall auc|tokens`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

TESTS = ("permutation", "logrank")
EXACT_UP_TO = 12  # seeds: 2^12 arrangements enumerated; more: a Monte Carlo sample of them
MONTE_CARLO = 4_000  # arrangements sampled: valid p-values (the observed one counts), error ~0.002 at 1%
GRID = 401  # shifts tried when inverting the permutation test
POWER = 0.8
MOST_PERMUTATION = 200  # seeds searched for seeds-to-decide (the permutation test)
MOST_LOGRANK = 30  # (the log-rank: each try runs the test on every resampled study)
STUDIES = 200  # resampled studies per seed count (a quarter of them for the log-rank)


@functools.lru_cache(maxsize=64)
def signs(n: int) -> np.ndarray:
    """[arrangements, n] of +-1: every one for n <= EXACT_UP_TO (the identity first), else a fixed
    Monte Carlo sample with the identity prepended (so the observed arrangement always counts)."""
    if n <= EXACT_UP_TO:
        codes = np.arange(2**n)[:, None] >> np.arange(n)[None, :] & 1
    else:
        codes = np.random.default_rng(20261206 + n).integers(0, 2, (MONTE_CARLO, n))
        codes = np.vstack([np.zeros((1, n), dtype=int), codes])
    return (1 - 2 * codes).astype(float)


def permutation_p(diffs: Sequence[float]) -> float:
    """Two-sided p-value of the paired mean difference: the share of sign arrangements whose |sum|
    reaches the observed one (1 with no pair)."""
    d = np.asarray(diffs, dtype=float)
    if len(d) == 0:
        return 1.0
    sums = np.abs(signs(len(d)) @ d)
    return float(np.mean(sums >= abs(d.sum()) - 1e-12 * (1 + np.abs(d).sum())))


def permutation_interval(diffs: Sequence[float], alpha: float, bounds=(-math.inf, math.inf)) -> tuple:
    """The shifts delta whose test of (diffs - delta) is not rejected at `alpha`, as [lo, hi] on a
    grid within `bounds` (for unbounded metrics: the data's range widened by its span); (nan, nan)
    with fewer than 2 pairs."""
    d = np.asarray(diffs, dtype=float)
    if len(d) < 2:
        return math.nan, math.nan
    span = max(float(d.max() - d.min()), 1e-12)
    low = bounds[0] if math.isfinite(bounds[0]) else float(d.min()) - span
    high = bounds[1] if math.isfinite(bounds[1]) else float(d.max()) + span
    shifts = np.linspace(low, high, GRID)
    s = signs(len(d))
    centred = d[None, :] - shifts[:, None]  # [shift, seed]
    observed = np.abs(centred.sum(axis=1))
    arranged = np.abs(centred @ s.T)  # [shift, arrangement]
    p = np.mean(arranged >= observed[:, None] - 1e-12 * (1 + np.abs(centred).sum(axis=1))[:, None], axis=1)
    kept = shifts[p > alpha]
    if len(kept) == 0:  # nothing kept on the grid: the point estimate alone
        return float(d.mean()), float(d.mean())
    step = (high - low) / (GRID - 1)
    lo = low if kept[0] <= low else float(kept[0]) - step / 2
    hi = high if kept[-1] >= high else float(kept[-1]) + step / 2
    return lo, hi


def logrank_statistic(times: np.ndarray, events: np.ndarray, design: np.ndarray) -> np.ndarray:
    """Observed minus expected events of the design (`design` 1) under the log-rank's null, for
    each row of `design` ([arrangements, subjects]); `times`/`events` over the subjects."""
    order = np.argsort(times, kind="stable")
    t, e, g = times[order], events[order].astype(float), design[:, order].astype(float)
    at_risk = np.arange(len(t), 0, -1).astype(float)  # subjects at risk just before each time
    design_at_risk = np.cumsum(g[:, ::-1], axis=1)[:, ::-1]
    out = np.zeros(g.shape[0])
    for value in np.unique(t[e > 0]):  # each distinct event time
        first = int(np.searchsorted(t, value))
        tied = (t == value) & (e > 0)
        deaths = float(tied.sum())
        observed = g[:, tied].sum(axis=1)
        out += observed - deaths * design_at_risk[:, first] / at_risk[first]
    return out


def logrank_p(x: Sequence[float], ref: Sequence[float], censor_at: float) -> tuple[float, float]:
    """(p, o_minus_e): the paired permutation log-rank test of the design's times `x` against the
    reference's `ref` (seed i of each paired), a time >= `censor_at` censored there. o_minus_e < 0:
    the design's events come later than expected (it emerges later)."""
    x, ref = np.asarray(x, dtype=float), np.asarray(ref, dtype=float)
    n = len(x)
    if n == 0:
        return 1.0, 0.0
    times = np.minimum(np.concatenate([x, ref]), censor_at)
    events = np.concatenate([x, ref]) < censor_at
    if not events.any():
        return 1.0, 0.0
    swap = signs(n) < 0  # an arrangement swaps the pair's labels where it is True
    design = np.concatenate([~swap, swap], axis=1)  # the first n subjects are x unless swapped
    stats = logrank_statistic(times, events, design)
    observed = stats[0]  # the identity arrangement comes first
    scale = 1e-12 * (1 + np.abs(stats).max())
    return float(np.mean(np.abs(stats) >= abs(observed) - scale)), float(observed)


def _draw(rng, pairs: np.ndarray, n: int, studies: int) -> np.ndarray:
    return pairs[rng.integers(0, len(pairs), (studies, n))]


def _smallest(decides, most: int) -> int | None:
    """The smallest n in 2..most with decides(n) >= POWER (a bisection: the share rises with n)."""
    if decides(most) < POWER:
        return None
    low, high = 2, most
    while low < high:
        mid = (low + high) // 2
        if decides(mid) >= POWER:
            high = mid
        else:
            low = mid + 1
    return low


def seeds_to_decide_permutation(diffs, margin: float, alpha: float, seed: int = 0):
    """Seeds at which the permutation interval, with no difference (the observed differences
    centred), lies inside +-margin with probability POWER; None if none up to MOST_PERMUTATION (or
    no spread). Inside +-margin is both margins rejected (the interval is the shifts not rejected)."""
    d = np.asarray(diffs, dtype=float)
    if len(d) < 2 or not math.isfinite(margin) or np.ptp(d) == 0:
        return None
    centred = d - d.mean()

    @functools.cache
    def decides(n: int) -> float:
        studies = _draw(np.random.default_rng(seed + n), centred, n, STUDIES)  # [study, seed]
        s = signs(n)
        inside = np.ones(STUDIES, dtype=bool)
        for shift in (-margin, margin):
            moved = studies - shift
            observed = np.abs(moved.sum(axis=1))
            p = np.mean(np.abs(s @ moved.T) >= observed[None, :] - 1e-12, axis=0)
            inside &= p <= alpha
        return float(inside.mean())

    return _smallest(decides, most=MOST_PERMUTATION)


def seeds_to_decide_logrank(x, ref, censor_at: float, alpha: float, seed: int = 0):
    """Seeds at which the paired log-rank rejects with probability POWER, drawing seed pairs from
    the observed ones; None when no n up to MOST_LOGRANK does (or the pairs show no difference)."""
    pairs = np.column_stack([np.asarray(x, dtype=float), np.asarray(ref, dtype=float)])
    if len(pairs) < 2 or np.all(np.minimum(pairs[:, 0], censor_at) == np.minimum(pairs[:, 1], censor_at)):
        return None

    @functools.cache
    def decides(n: int) -> float:
        rng = np.random.default_rng(seed + n)
        studies = _draw(rng, pairs, n, STUDIES // 4)
        return float(np.mean([logrank_p(s[:, 0], s[:, 1], censor_at)[0] <= alpha for s in studies]))

    return _smallest(decides, most=MOST_LOGRANK)
