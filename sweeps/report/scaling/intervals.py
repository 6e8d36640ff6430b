"""Percentile bootstrap of a ladder fit, paired across designs.

A replicate draws, in every rung, its seeds with replacement (the same seeds for every design), so
a design and the reference keep sharing their seeds and the difference between them keeps its
pairing. Optionally the rungs are drawn first, with replacement and the same draw for every design:
among all rungs (`rungs`) or among the rungs of the same size (`within-size`); then seeds within
every drawn copy. Measured on synthetic ladders (docs/scaling/README.md), seeds alone cover the
truth at about the nominal rate when the law holds; drawing rungs too covers it every time with
intervals about twice as wide (a pairs bootstrap loses the ladder's end points in some replicates):
the conservative choice when rungs may stray from the law (a learning rate off at one size). The draw
becomes a count per row and every design is refitted under those counts (`fitting.refit_many`, all
replicates at once, from the full fit). A replicate whose drawn rungs cannot identify the law (a
ladder of few rungs draws one size only now and then) is drawn again; how many were is reported.
With no seed column the rows themselves are resampled, within each design (and rungs are not).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from sweeps.report.scaling.fitting import LadderFit, _design_problem, _to_theta, identify_rungs, refit_many
from sweeps.report.scaling.law import natural, predict
from sweeps.report.scaling.table import Ladder
from sweeps.study.ladder import LadderError

LEVEL = 0.95


@dataclasses.dataclass
class Bootstrap:
    law: str
    designs: list[str]
    samples: dict[str, list[dict[str, float]]]  # per design, per replicate: log-space values
    redrawn: int  # replicates drawn again because their rungs could not identify the law
    unit: str  # what was resampled: "rungs and seeds", "seeds", "rows"

    def predict(self, design: str, params, tokens) -> np.ndarray:
        """(B, k) losses of every replicate at k points."""
        return np.array([predict(self.law, v, params, tokens) for v in self.samples[design]])

    def natural(self, design: str) -> dict[str, np.ndarray]:
        rows = [natural(self.law, v) for v in self.samples[design]]
        return {k: np.array([r[k] for r in rows]) for k in rows[0]}


def percentile(values, level: float = LEVEL) -> list[float]:
    """The percentile interval [lo, hi] of `values` (nan ignored)."""
    tail = (1 - level) / 2 * 100
    lo, hi = np.nanpercentile(np.asarray(values, float), [tail, 100 - tail], axis=0)
    return [float(lo), float(hi)]


RUNGS, WITHIN_SIZE, SEEDS = "rungs", "within-size", "seeds"
RESAMPLING = (SEEDS, WITHIN_SIZE, RUNGS)


def draw_counts(ladder: Ladder, rng: np.random.Generator, rungs: str = SEEDS) -> np.ndarray:
    """One replicate's count per row: rungs drawn with replacement among all rungs (`rungs`),
    among the rungs of the same size (`within-size`: every size keeps its number of rungs), or
    kept (`seeds`); then seeds within every drawn copy of a rung."""
    n = len(ladder.loss)
    if ladder.seed is None:
        counts = np.zeros(n)
        for d in ladder.designs:
            rows = np.flatnonzero(ladder.design == d)
            np.add.at(counts, rows[rng.integers(0, len(rows), len(rows))], 1)
        return counts
    rung = ladder.rung_of_row()
    n_rungs = rung.max() + 1
    copies = np.ones(n_rungs, int)
    if rungs == RUNGS:
        copies = rng.multinomial(n_rungs, np.full(n_rungs, 1 / n_rungs))
    elif rungs == WITHIN_SIZE:
        sizes = np.array([n for n, _ in ladder.rung_keys()])
        for size in np.unique(sizes):
            group = np.flatnonzero(sizes == size)
            copies[group] = rng.multinomial(len(group), np.full(len(group), 1 / len(group)))
    counts = np.zeros(n)
    for r in range(n_rungs):
        rows = np.flatnonzero(rung == r)
        seeds = sorted(set(ladder.seed[rows].tolist()))
        picked = rng.multinomial(copies[r] * len(seeds), np.full(len(seeds), 1 / len(seeds)))
        per_seed = dict(zip(seeds, picked, strict=True))
        counts[rows] = [per_seed[s] for s in ladder.seed[rows]]
    return counts


def _identifiable(ladder: Ladder, counts: np.ndarray, law: str) -> bool:
    for d in ladder.designs:
        rows = np.flatnonzero((ladder.design == d) & (counts > 0))
        keys = sorted(set(zip(ladder.params[rows].tolist(), ladder.tokens[rows].tolist(), strict=True)))
        try:
            identify_rungs(keys, law)
        except LadderError:
            return False
    return True


def bootstrap(
    ladder: Ladder, result: LadderFit, replicates: int = 200, seed: int = 0, rungs: str = SEEDS
) -> Bootstrap:
    if rungs not in RESAMPLING:
        raise LadderError(f"rungs: {rungs!r} is not one of {', '.join(RESAMPLING)}")
    rng = np.random.default_rng(seed)
    draws, redrawn = [], 0
    while len(draws) < replicates:
        counts = draw_counts(ladder, rng, rungs)
        if _identifiable(ladder, counts, result.law):
            draws.append(counts)
        else:
            redrawn += 1
            if redrawn > 20 * replicates:
                raise LadderError(
                    f"{ladder.source}: the bootstrap drew {redrawn} replicates whose rungs could not "
                    "identify the law; the ladder has too few rungs to resample them "
                    "(rungs='seeds' keeps every rung)"
                )
    counts = np.array(draws)
    designs = ladder.designs
    full = {d: f.values for d, f in result.designs.items()}
    samples: dict[str, list[dict[str, float]]] = {}
    if result.shared and len(designs) > 1:
        problem, _ = _design_problem(ladder, result.law, True)
        thetas, _ = refit_many(problem, _to_theta(problem, full), counts)
        for d in designs:
            samples[d] = [problem.values(t, d) for t in thetas]
    else:
        for d in designs:
            rows = ladder.design == d
            problem, _ = _design_problem(ladder.only(d), result.law, False)
            thetas, _ = refit_many(problem, _to_theta(problem, {d: full[d]}), counts[:, rows])
            samples[d] = [problem.values(t) for t in thetas]
    names = {RUNGS: "rungs and seeds", WITHIN_SIZE: "rungs within their size, and seeds", SEEDS: "seeds"}
    unit = "rows" if ladder.seed is None else names[rungs]
    return Bootstrap(result.law, designs, samples, redrawn, unit)


def parameter_intervals(boot: Bootstrap, design: str) -> dict[str, list[float]]:
    return {k: percentile(v) for k, v in boot.natural(design).items()}
