"""Statistics of a front: intervals per point, paired differences against a reference, verdicts,
and how likely each point is to be on the front.

The seeds of a study are paired by construction: seed s gives every design the same backbone
init and the same data order, so "X minus reference" over shared seeds has a much smaller spread
than either alone. Samples are keyed (by seed for what a trial measures, by probe round for the
probe's throughput), and pairing uses the keys two points share.

- `interval(values)`: mean, sample standard deviation and the 95% t interval of the mean;
- `paired(x, ref)`: the mean difference x - ref over shared keys and its 95% t interval; for
  timing rounds (`robust`: a busy neighbour makes outliers) the median and an order-statistic
  interval instead (`median_interval`);
- `verdict`: one comparison judged alone (a family of one, one look): better / worse /
  indistinguishable (the interval covers 0) in the objective's direction, `equivalent` /
  `undecided` with a margin; `undecided` with one pair only, unless the metric is exact (the same
  number for every seed of an architecture: memory, parameters, FLOPs; `trainers.metrics`), where
  one pair decides.
  A study's verdicts are judged together (`sweeps.report.verdicts.judge`: planned looks, Holm);
- `p_front`: bootstrap over seeds (the same resampled seeds for every point, keeping the
  pairing): the fraction of replicates in which a point is on the Pareto front.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from sweeps.report.dominance import STACK_POINTS, front_mask, front_masks

LEVEL = 0.95


def t_quantile(df: int, level: float = LEVEL) -> float:
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, df))


def interval(values: Sequence[float]) -> dict[str, float]:
    """Mean, standard deviation and 95% t interval; the interval is nan with one value."""
    n = len(values)
    mean = float(np.mean(values))
    if n < 2:
        return {"mean": mean, "std": 0.0, "lo": math.nan, "hi": math.nan, "n": n}
    std = float(np.std(values, ddof=1))
    half = t_quantile(n - 1) * std / math.sqrt(n)
    return {"mean": mean, "std": std, "lo": mean - half, "hi": mean + half, "n": n}


def median_interval(values: Sequence[float], level: float = LEVEL) -> dict[str, float]:
    """Median and a distribution-free interval from order statistics (the sign test's): the
    narrowest [x_(k), x_(n-k+1)] with at least `level` coverage, or the whole range when fewer
    values allow no more (5 values: min to max, 93.75%). For samples with outliers (timing rounds)."""
    from scipy.stats import binom

    xs = sorted(values)
    n = len(xs)
    k = 1
    while k + 1 <= n // 2 and 2 * binom.cdf(k, n, 0.5) <= 1 - level:
        k += 1
    std = float(np.std(xs, ddof=1)) if n > 1 else 0.0
    return {"mean": float(np.median(xs)), "std": std, "lo": xs[k - 1], "hi": xs[n - k], "n": n}


def paired(x: Mapping, ref: Mapping, robust: bool = False) -> dict[str, float]:
    """x - ref over the keys both have: the mean difference and its 95% t interval, or with
    `robust` the median difference and its order-statistic interval; `diffs`: the differences."""
    keys = sorted(set(x) & set(ref), key=str)
    if not keys:
        return {"mean": math.nan, "std": math.nan, "lo": math.nan, "hi": math.nan, "n": 0, "diffs": []}
    diffs = [x[k] - ref[k] for k in keys]
    return {**(median_interval(diffs) if robust else interval(diffs)), "diffs": diffs}


def p_front(
    samples: Sequence[Mapping[str, Mapping]],
    metrics: Sequence[str],
    directions: Sequence[str],
    replicates: int = 1000,
    seed: int = 0,
    robust: frozenset[str] = frozenset(),
) -> list[float]:
    """samples[i][metric] = {key: value} of point i; returns each point's front frequency.

    Per replicate, each set of keys (the seeds, or the probe's rounds) is drawn once with
    replacement and every point averages the values of the drawn keys it has, in draw order;
    a point that has none of them resamples its own. Points with the same keys for a metric are
    averaged together as one array (the same numbers as one at a time: numpy reduces each row
    alike), so a replicate costs a few array operations and one front, not a loop over points."""
    if len(samples) == 1:  # alone, on the front in every replicate
        return [1.0]
    rng = np.random.default_rng(seed)
    # Metrics keyed alike (by seed, or by probe round) are resampled with the same draw.
    universe = {m: tuple(sorted({k for point in samples for k in point[m]}, key=str)) for m in metrics}
    groups = {m: _key_groups(samples, m) for m in metrics}
    sign = np.array([1.0 if d == "minimize" else -1.0 for d in directions])
    counts = np.zeros(len(samples))
    small, stacked = len(samples) <= STACK_POINTS, []  # a small study's replicates: compared at once
    for _ in range(replicates):
        draws = {
            keys: [keys[i] for i in rng.integers(0, len(keys), len(keys))] for keys in set(universe.values())
        }
        means = np.empty((len(samples), len(metrics)))
        empty = []  # (point, metric column) that drew none of its keys
        for j, m in enumerate(metrics):
            reduce = np.median if m in robust else np.mean
            for columns, members, values in groups[m]:
                picked = [columns[k] for k in draws[universe[m]] if k in columns]
                if picked:
                    means[members, j] = reduce(values[:, picked], axis=1)
                else:
                    empty += [(i, j) for i in members]
        for i, j in sorted(empty):  # in the order a loop over points, then metrics, draws them
            own = list(samples[i][metrics[j]].values())
            picked = [own[k] for k in rng.integers(0, len(own), len(own))]
            means[i, j] = float(np.median(picked) if metrics[j] in robust else np.mean(picked))
        if small:
            stacked.append(means * sign)
        else:
            counts += front_mask(means * sign)
    if stacked:
        counts = front_masks(np.stack(stacked)).sum(axis=0)
    return (counts / replicates).tolist()


def _key_groups(samples: Sequence[Mapping[str, Mapping]], metric: str) -> list[tuple]:
    """Points by the keys they have for `metric`: [({key: column}, the points' indices, their
    values as one array, a row per point, a column per key)]."""
    members: dict[tuple, list[int]] = {}
    for i, point in enumerate(samples):
        members.setdefault(tuple(point[metric]), []).append(i)
    return [
        (
            {k: c for c, k in enumerate(keys)},
            np.array(rows),
            np.array([[samples[i][metric][k] for k in keys] for i in rows], dtype=float),
        )
        for keys, rows in members.items()
    ]
