"""The report's algorithms as they were before they were vectorised (issue 52): test oracles only.

Quadratic and slow by design: the plain definitions the fast versions in `sweeps.report` must
reproduce exactly (ranks, fronts, p_front) or to the last bits (hypervolume)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sweeps.report.dominance import to_minimise


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(x < y for x, y in zip(a, b, strict=True))


def nondominated_ranks(points: Sequence[Sequence[float]]) -> list[int]:
    ranks = [-1] * len(points)
    left = set(range(len(points)))
    rank = 0
    while left:
        front = {i for i in left if not any(dominates(points[j], points[i]) for j in left if j != i)}
        for i in front:
            ranks[i] = rank
        left -= front
        rank += 1
    return ranks


def hypervolume(points: Sequence[Sequence[float]], ref: Sequence[float]) -> float:
    pts = [tuple(p) for p in points if all(x < r for x, r in zip(p, ref, strict=True))]
    if not pts:
        return 0.0
    if len(ref) == 1:
        return ref[0] - min(p[0] for p in pts)
    pts.sort(key=lambda p: p[0])
    volume = 0.0
    for i, p in enumerate(pts):
        upper = pts[i + 1][0] if i + 1 < len(pts) else ref[0]
        if upper <= p[0]:
            continue
        volume += (upper - p[0]) * hypervolume([q[1:] for q in pts[: i + 1]], ref[1:])
    return volume


def history(points: Sequence[Sequence[float]], ref: Sequence[float]) -> list[float]:
    """The hypervolume after each point (already normalised), refronting everything each time."""
    front: list[list[float]] = []
    out = []
    for p in points:
        front.append(list(p))
        front = [q for q, r in zip(front, nondominated_ranks(front), strict=True) if r == 0]
        out.append(hypervolume(front, ref))
    return out


def p_front(
    samples: Sequence[Mapping[str, Mapping]],
    metrics: Sequence[str],
    directions: Sequence[str],
    replicates: int = 1000,
    seed: int = 0,
    robust: frozenset[str] = frozenset(),
) -> list[float]:
    if len(samples) == 1:
        return [1.0]
    rng = np.random.default_rng(seed)
    universe = {m: tuple(sorted({k for point in samples for k in point[m]}, key=str)) for m in metrics}
    counts = np.zeros(len(samples))
    for _ in range(replicates):
        draws = {
            keys: [keys[i] for i in rng.integers(0, len(keys), len(keys))] for keys in set(universe.values())
        }
        means = []
        for point in samples:
            row = []
            for m in metrics:
                values = point[m]
                picked = [values[k] for k in draws[universe[m]] if k in values]
                if not picked:
                    own = list(values.values())
                    picked = [own[i] for i in rng.integers(0, len(own), len(own))]
                row.append(float(np.median(picked) if m in robust else np.mean(picked)))
            means.append(to_minimise(row, directions))
        counts += np.array([r == 0 for r in nondominated_ranks(means)], dtype=float)
    return (counts / replicates).tolist()
