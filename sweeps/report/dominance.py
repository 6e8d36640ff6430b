"""Pareto dominance, in the maths alone: which points dominate, front ranks, hypervolume, and the
objectives turned into minimisation (what fronts and their bootstrap share).

Vectorised with numpy so that a report over thousands of points stays near-linear (issue 52):
the front is found by culling in lexicographic order (the first point left is never dominated,
it removes every point it dominates: one pass per front point), ranks by peeling fronts, and the
hypervolume by the same slicing as before with its two-objective base case as one sorted sweep.
They give the same ranks and fronts as the plain definitions, and the same hypervolume to the
last bit (the slices are summed in the same order); tests/sweeps/report/oracles.py keeps those."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """a dominates b (minimisation): no worse everywhere, better somewhere."""
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(x < y for x, y in zip(a, b, strict=True))


def _matrix(points) -> np.ndarray:
    array = np.asarray(points, dtype=float)
    if array.ndim == 2:
        return array
    return array.reshape(len(array), -1) if len(array) else np.zeros((0, 0))


def front_mask(points) -> np.ndarray:
    """Which points no other point dominates (minimisation); equal points are both on it. NaN
    compares false both ways, as in `dominates`: a point with a NaN is never dominated."""
    array = _matrix(points)
    if len(array) < 2 or not np.isfinite(array).all():
        return _cull(array)
    if array.shape[1] == 2:
        return _front_2d(array)
    unique, inverse = np.unique(array, axis=0, return_inverse=True)  # equal points: one fate
    return _cull(unique)[inverse.reshape(-1)] if len(unique) < len(array) else _cull(array)


STACK_POINTS = 64  # sets of up to this many points are compared all at once by `front_masks`
STACK_CELLS = 2**22  # comparisons (sets x points^2 x objectives) held in memory at once


def front_masks(stack) -> np.ndarray:
    """`front_mask` of each point set in a stack (sets x points x objectives), by the definition
    (`dominates`, NaN included) as array operations over many sets at once: for the small sets of a
    bootstrap (a study's points, a thousand replicates) one call does the work of a thousand,
    whose fixed cost per call was most of a small study's report (docs/bench/test_suite.md)."""
    stack = np.asarray(stack, dtype=float)
    sets, n, k = stack.shape
    out = np.empty((sets, n), dtype=bool)
    step = max(1, STACK_CELLS // max(1, n * n * k))
    for s in range(0, sets, step):
        a, b = stack[s : s + step, :, None, :], stack[s : s + step, None, :, :]  # point i, point j
        out[s : s + step] = ~((a <= b).all(-1) & (a < b).any(-1)).any(1)  # no i dominates j
    return out


def _front_2d(array: np.ndarray) -> np.ndarray:
    """Two objectives, finite: in lexicographic order a point is dominated exactly when an
    earlier point with a smaller first value has a second value no larger, or the first point
    of its own first value has a smaller second value."""
    order = np.lexsort((array[:, 1], array[:, 0]))
    x, y = array[order, 0], array[order, 1]
    starts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])  # where each run of equal x begins
    group = np.cumsum(np.r_[True, x[1:] != x[:-1]]) - 1
    best_before = np.r_[np.inf, np.minimum.accumulate(y)[starts[1:] - 1]]  # min y of smaller x
    dominated = (best_before[group] <= y) | (y[starts][group] < y)
    on_front = np.empty(len(array), dtype=bool)
    on_front[order] = ~dominated
    return on_front


def _cull(array: np.ndarray) -> np.ndarray:
    n = len(array)
    on_front = np.zeros(n, dtype=bool)
    if n == 0:
        return on_front
    # A dominator precedes what it dominates in lexicographic order, so the first point left is
    # on the front; what it dominates goes (transitivity: a point dominated by a dropped one is
    # dominated by the point that dropped it).
    order = np.lexsort(array.T[::-1])
    ordered = array[order]
    alive = np.ones(n, dtype=bool)
    i = 0
    while i < n:
        on_front[order[i]] = True
        head, rest = ordered[i], ordered[i + 1 :]
        alive[i + 1 :] &= ~(np.all(head <= rest, axis=1) & np.any(head < rest, axis=1))
        left = np.flatnonzero(alive[i + 1 :])
        if not len(left):
            break
        i += 1 + int(left[0])
    return on_front


def nondominated_ranks(points: Sequence[Sequence[float]]) -> list[int]:
    """Rank of each point (minimisation); 0 is the Pareto front. Equal points share a rank."""
    array = _matrix(points)
    ranks = np.full(len(array), -1)
    left = np.arange(len(array))
    rank = 0
    while len(left):
        mask = front_mask(array[left])
        ranks[left[mask]] = rank
        left = left[~mask]
        rank += 1
    return ranks.tolist()


def _hypervolume_2d(points: np.ndarray, ref: Sequence[float]) -> float:
    """The slicing below for two objectives as one sweep: sorted by the first, each slice up to
    the next point times the best second value so far, summed in order (cumsum: left to right)."""
    order = np.argsort(points[:, 0], kind="stable")
    x, y = points[order, 0], points[order, 1]
    width = np.append(x[1:], ref[0]) - x
    terms = np.where(width > 0, width * (ref[1] - np.minimum.accumulate(y)), 0.0)
    return float(np.cumsum(terms)[-1])


def hypervolume(points: Sequence[Sequence[float]], ref: Sequence[float]) -> float:
    """Exact hypervolume dominated by `points` (minimisation) up to `ref`, by slicing."""
    array = _matrix(points) if len(points) else np.zeros((0, len(ref)))
    array = array[np.all(array < np.asarray(ref, dtype=float), axis=1)]
    if not len(array):
        return 0.0
    if len(ref) == 1:
        return float(ref[0] - array[:, 0].min())
    if len(ref) == 2:
        return _hypervolume_2d(array, ref)
    array = array[np.argsort(array[:, 0], kind="stable")]
    volume = 0.0
    for i in range(len(array)):
        upper = array[i + 1, 0] if i + 1 < len(array) else ref[0]
        if upper <= array[i, 0]:
            continue
        volume += float(upper - array[i, 0]) * hypervolume(array[: i + 1, 1:], ref[1:])
    return volume


def to_minimise(values: Sequence[float], directions: Sequence[str]) -> list[float]:
    return [v if d == "minimize" else -v for v, d in zip(values, directions, strict=True)]


def normalise(rows: Sequence[Sequence[float]]) -> list[list[float]]:
    lows = [min(col) for col in zip(*rows, strict=True)]
    highs = [max(col) for col in zip(*rows, strict=True)]
    return [
        [(v - lo) / (hi - lo) if hi > lo else 0.0 for v, lo, hi in zip(r, lows, highs, strict=True)]
        for r in rows
    ]
