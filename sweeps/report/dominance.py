"""Pareto dominance, in the maths alone: which points dominate, front ranks, hypervolume, and the
objectives turned into minimisation (what fronts and their bootstrap share)."""

from __future__ import annotations

from collections.abc import Sequence


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """a dominates b (minimisation): no worse everywhere, better somewhere."""
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(x < y for x, y in zip(a, b, strict=True))


def nondominated_ranks(points: Sequence[Sequence[float]]) -> list[int]:
    """Rank of each point (minimisation); 0 is the Pareto front. Equal points share a rank."""
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
    """Exact hypervolume dominated by `points` (minimisation) up to `ref`, by slicing."""
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


def to_minimise(values: Sequence[float], directions: Sequence[str]) -> list[float]:
    return [v if d == "minimize" else -v for v, d in zip(values, directions, strict=True)]


def normalise(rows: Sequence[Sequence[float]]) -> list[list[float]]:
    lows = [min(col) for col in zip(*rows, strict=True)]
    highs = [max(col) for col in zip(*rows, strict=True)]
    return [
        [(v - lo) / (hi - lo) if hi > lo else 0.0 for v, lo, hi in zip(r, lows, highs, strict=True)]
        for r in rows
    ]
