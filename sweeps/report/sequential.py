"""Planned looks for adaptive seeds: group-sequential t boundaries with Lan-DeMets alpha spending.

A point with adaptive seeds (`repeats: {min: m, max: M}`) is looked at with n = m, m+1, ..., M
paired seeds. Testing each look at the full level is optional stopping: with 3 to 5 seeds about
10% of null comparisons end "better" or "worse" instead of 5% (`python -m sweeps.report.calibrate`).
Here the error is spent across the planned looks instead:

- **Method: group-sequential boundaries with Lan-DeMets alpha spending** (Lan & DeMets 1983),
  O'Brien-Fleming-type by default, `alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t))`, or
  Pocock-type, `alpha(t) = alpha ln(1 + (e - 1) t)`, over the information fraction t = n / M.
  Chosen over anytime-valid confidence sequences because the looks are few and planned (at most
  M - m + 1): spending the error over exactly those looks keeps most of the fixed design's power,
  where a confidence sequence pays for infinitely many looks, which 3 to 8 seeds cannot afford.
  O'Brien-Fleming by default: it spends almost nothing at the first looks, so a study that runs to
  M seeds decides nearly as a fixed M-seed study would; Pocock stops strong effects earlier.
- **Calibrated for the t statistic.** Boundaries for a normal z do not hold for t with 1 to 7
  degrees of freedom, so they are computed for the paired t statistics themselves: the first look
  exactly (the t quantile), every later one by simulating null paired differences once (the t
  statistics do not depend on the differences' scale, so one simulation serves every study) and
  cached per (m, M, spending). Each simulated look spends two Monte Carlo standard errors less
  than its share, so the table's own noise cannot push the level above the stated one (it costs
  about 2% of a 5% level), and a look whose share is too small to simulate gets the marginal t
  quantile of that share (conservative: it can only spend less).
- **p-values and intervals from the same boundaries.** `p_value(n, |t|)` is the smallest level
  whose boundary at look n the statistic reaches; `boundary(n, alpha)` is the critical |t| at level
  alpha. For every alpha, P(some look's |t| reaches its boundary) <= alpha under the null, so the
  p-value at whatever look a point stopped at is valid whatever the stopping reason (decided,
  equivalent, p_front, max), and Holm's adjustment (sweeps.report.verdicts) may use it. The
  interval `mean +- boundary(n, alpha) * sd / sqrt(n)` excludes 0 exactly when p <= alpha.

A fixed count (m = M) is one look: the plain t test and t interval.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

SPENDING = ("obrien_fleming", "pocock")
NAIVE = "naive"  # every look at the full level, no spending (calibration only: what it costs)
SIMULATIONS = 300_000  # null studies behind each boundary table
MIN_TAIL = 40  # fewer simulated crossings than this: the look's marginal t quantile instead
GRID = np.geomspace(1e-6, 0.5, 61)  # the levels a boundary table holds (interpolated in log)
CAP = 1e6  # |t| boundary standing for "nothing spent at this look"


def spent(fraction, alpha: float, spending: str):
    """Cumulative error spent by information fraction `fraction` (n / M) at total level `alpha`."""
    from scipy.stats import norm

    fraction = np.asarray(fraction, dtype=float)
    if spending == "obrien_fleming":
        return 2 - 2 * norm.cdf(norm.ppf(1 - alpha / 2) / np.sqrt(fraction))
    if spending == "pocock":
        return alpha * np.log1p((math.e - 1) * fraction)
    raise ValueError(f"spending: given {spending!r}; allowed: {', '.join(SPENDING)}")


@dataclasses.dataclass(frozen=True)
class Design:
    """Looks at n = n_min..n_max paired seeds; `spending` one of SPENDING (or NAIVE)."""

    n_min: int
    n_max: int
    spending: str = "obrien_fleming"

    def __post_init__(self):
        if not 1 <= self.n_min <= self.n_max:
            raise ValueError(f"looks: given {self.n_min}..{self.n_max}; allowed: 1 <= min <= max")
        if self.spending not in (*SPENDING, NAIVE):
            raise ValueError(f"spending: given {self.spending!r}; allowed: {', '.join(SPENDING)}")

    @property
    def looks(self) -> range:
        return range(self.n_min, self.n_max + 1)

    def name(self) -> str:
        if self.n_min == self.n_max:
            return "one look (t test)" if self.n_max == 1 else f"fixed {self.n_max} seeds (one look: t test)"
        if self.spending == NAIVE:
            return f"looks at {self.n_min}..{self.n_max} seeds, each at the full level (naive)"
        kind = {"obrien_fleming": "O'Brien-Fleming", "pocock": "Pocock"}[self.spending]
        return f"looks at {self.n_min}..{self.n_max} seeds, Lan-DeMets {kind}-type alpha spending"

    def boundary(self, n, alpha):
        """Critical |t| at n paired seeds for a two-sided level alpha (arrays broadcast); inf for
        n < 2 (no spread, no test)."""
        n, alpha = np.broadcast_arrays(np.asarray(n, dtype=int), np.asarray(alpha, dtype=float))
        out = np.full(n.shape, np.inf)
        for look in np.unique(n[n >= 2]):
            at = n == look
            out[at] = self._boundary_at(int(look), alpha[at])
        return out

    def p_value(self, n, t_abs):
        """Smallest level whose boundary at n the statistic |t| reaches (1 beyond the table's
        0.5; 0 for an infinite |t|, a difference with no spread); 1 for n < 2."""
        n, t_abs = np.broadcast_arrays(np.asarray(n, dtype=int), np.asarray(t_abs, dtype=float))
        out = np.ones(n.shape)
        for look in np.unique(n[n >= 2]):
            at = n == look
            out[at] = self._p_at(int(look), t_abs[at])
        return out

    # --- one look ---------------------------------------------------------------------------------
    def _row(self, n: int) -> np.ndarray:
        """Boundaries at look n over GRID (nonincreasing in the level)."""
        if n < self.n_min:  # fewer seeds than planned (failed runs): the first look's share
            return _t_quantile(n, spent(self.n_min / self.n_max, GRID, self.spending))
        table = boundary_table(self.n_min, self.n_max, self.spending)
        return table[min(n, self.n_max) - self.n_min]

    def _exact(self) -> bool:
        """One look, or each look at the full level: the t distribution itself, no table."""
        return self.n_min == self.n_max or self.spending == NAIVE

    def _boundary_at(self, n: int, alpha: np.ndarray) -> np.ndarray:
        if self._exact():
            return _t_quantile(n, alpha)
        row = np.log(self._row(n))
        level = np.log(np.clip(alpha, GRID[0], GRID[-1]))
        return np.exp(np.interp(level, np.log(GRID), row))

    def _p_at(self, n: int, t_abs: np.ndarray) -> np.ndarray:
        if self._exact():
            from scipy.stats import t

            return np.where(np.isnan(t_abs), 1.0, np.minimum(1.0, 2 * t.sf(t_abs, n - 1)))
        row = np.log(self._row(n))[::-1]  # nondecreasing as the level falls
        levels = np.log(GRID)[::-1]
        with np.errstate(divide="ignore"):  # |t| = 0: log -inf, below every boundary
            log_t = np.log(t_abs)
        p = np.exp(np.interp(log_t, row, levels))
        p = np.where(log_t < row[0], 1.0, p)  # below the boundary at 0.5: not near any level
        p = np.where(np.isnan(t_abs), 1.0, p)  # no difference and no spread
        return np.where(np.isinf(t_abs), 0.0, p)


def _t_quantile(n: int, alpha) -> np.ndarray:
    from scipy.stats import t

    alpha = np.asarray(alpha, dtype=float)
    with np.errstate(divide="ignore"):
        q = t.isf(alpha / 2, n - 1)
    return np.minimum(np.where(alpha > 0, q, CAP), CAP)


@functools.lru_cache(maxsize=32)
def boundary_table(n_min: int, n_max: int, spending: str) -> np.ndarray:
    """Boundaries[look, level] for looks n_min..n_max over GRID, by simulating SIMULATIONS null
    studies (fixed seed: the same table every time). The first look is the exact t quantile of
    its share; look k's boundary is the |t| that the studies not stopped before reach with
    probability (its share of the spending), so the total over all looks is the level."""
    rng = np.random.default_rng(20260101 + 100 * n_min + n_max)
    diffs = rng.standard_normal((SIMULATIONS, n_max))
    counts = np.arange(1, n_max + 1)
    sums, squares = np.cumsum(diffs, axis=1), np.cumsum(diffs**2, axis=1)
    looks = np.arange(n_min, n_max + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = sums / counts
        var = (squares - counts * mean**2) / np.maximum(counts - 1, 1)
        t_abs = np.abs(mean) / np.sqrt(var / counts)
    t_abs = t_abs[:, looks - 1].astype(np.float32)
    fractions = looks / n_max
    table = np.empty((len(looks), len(GRID)))
    for g, level in enumerate(GRID):
        cumulative = spent(fractions, level, spending)
        shares = np.diff(np.concatenate([[0.0], cumulative]))
        running = np.ones(SIMULATIONS, dtype=bool)
        for k, n in enumerate(looks):
            expected = shares[k] * SIMULATIONS  # two standard errors fewer: the table's own noise
            crossings = int(expected - 2 * math.sqrt(expected))  # may only make the level smaller
            if k == 0 or crossings < MIN_TAIL:
                bound = float(_t_quantile(int(n), shares[k]))
            else:
                alive = t_abs[running, k]
                if crossings >= len(alive):
                    bound = 0.0
                else:  # the crossings-th largest |t| among the studies still running
                    bound = float(np.partition(alive, len(alive) - crossings)[len(alive) - crossings])
            table[k, g] = max(bound, 1e-9)
            running &= t_abs[:, k] < bound
    # A larger level may never need a larger boundary: raise any that would (conservative).
    return np.maximum.accumulate(table[:, ::-1], axis=1)[:, ::-1]
