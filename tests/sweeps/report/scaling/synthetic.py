"""Synthetic ladders from a known law, with multiplicative seed noise (shared by the tests and the
measured example of docs/scaling/README.md)."""

from __future__ import annotations

import numpy as np

from sweeps.report.scaling.table import Ladder

# A byte-level-like law: loss near 2-4 nats over 0.1M-5M parameters and 0.5M-400M tokens.
TRUTH = {"E": 1.0, "A": 60.0, "alpha": 0.35, "B": 120.0, "beta": 0.30}
SIZES = (1e5, 3e5, 1e6, 2e6, 5e6)
RATIOS = (5, 20, 80)


def law(values: dict[str, float], n, d):
    n, d = np.asarray(n, float), np.asarray(d, float)
    return values["E"] + values["A"] * n ** -values["alpha"] + values["B"] * d ** -values["beta"]


def ladder(
    rng: np.random.Generator,
    truths: dict[str, dict[str, float]] | None = None,
    sizes=SIZES,
    ratios=RATIOS,
    seeds: int = 3,
    noise: float = 0.01,
) -> Ladder:
    """Every design at every (size, ratio) rung and seed; log-normal noise of relative size
    `noise`, independent per row."""
    truths = truths or {"all": TRUTH}
    rows = []
    for design, truth in truths.items():
        for n in sizes:
            for r in ratios:
                for s in range(seeds):
                    loss = float(law(truth, n, n * r)) * float(np.exp(rng.normal(0, noise)))
                    rows.append((design, n, n * r, loss, str(s)))
    design, params, tokens, loss, seed = zip(*rows, strict=True)
    return Ladder(design, params, tokens, loss, seed, "synthetic")
