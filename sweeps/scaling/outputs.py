"""The files of a scaling fit: fits.json, predictions.csv, crossover.json and two PNG plots."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from sweeps.scaling.fitting import LadderFit
from sweeps.scaling.intervals import Bootstrap, parameter_intervals, percentile
from sweeps.scaling.predict import Target, along, path_ratio
from sweeps.scaling.table import Ladder

COLUMNS = (
    "design", "target", "params", "tokens", "flops", "loss", "lo", "hi",
    "diff", "diff_lo", "diff_hi", "verdict", "extrapolation",
)  # fmt: skip


def fits_document(
    result: LadderFit, boot: Bootstrap, backtest: dict | None = None, extra: dict | None = None
):
    """{design: {E, A, B, alpha, beta (or E, K, gamma), intervals, points, residual_rms}, backtest,
    fit: {law, shared exponents, notes, bootstrap}}."""
    doc: dict = {}
    for d, f in result.designs.items():
        doc[d] = {**f.natural, "intervals": parameter_intervals(boot, d), "points": f.points}
        doc[d]["residual_rms"] = f.residual_rms
    doc["backtest"] = backtest
    doc["fit"] = {
        "law": "L(N, D) = E + A N^-alpha + B D^-beta" if result.law == "joint" else "L(C) = E + K C^-gamma",
        "shared_exponents": result.shared,
        "notes": result.notes,
        "bootstrap": {"replicates": len(next(iter(boot.samples.values()))), "resampled": boot.unit},
        "redrawn_replicates": boot.redrawn,
        **(extra or {}),
    }
    return doc


def _clean(value):
    """JSON without NaN (null instead)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(path: Path, doc: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_clean(doc), indent=2) + "\n")
    return path


def write_predictions(path: Path, rows: list[dict]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    return path


def plot_loss_vs_compute(
    path: Path, ladder: Ladder, result: LadderFit, boot: Bootstrap, targets: list[Target], rows: list[dict]
) -> Path:
    """Rung means with seed bars (min..max), fitted curves along the path ratio with 95% bands,
    dashed beyond the largest rung, targets marked with their predicted intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratio = path_ratio(ladder, result, targets)
    c_lo, c_top = float(ladder.flops.min()), float(ladder.flops.max())
    c_hi = max([t.flops for t in targets] + [c_top])
    inside = np.geomspace(c_lo, c_top, 100)
    beyond = np.geomspace(c_top, c_hi, 100) if c_hi > c_top else None
    fig, ax = plt.subplots(figsize=(8, 5.5))
    rung = ladder.rung_of_row()
    for i, d in enumerate(ladder.designs):
        color = f"C{i}"
        rows_d = ladder.design == d
        for r in np.unique(rung[rows_d]):
            values = ladder.loss[rows_d & (rung == r)]
            c = ladder.flops[rows_d & (rung == r)][0]
            m = float(np.mean(values))
            bars = [[m - values.min()], [values.max() - m]]
            ax.errorbar([c], [m], yerr=bars, fmt="o", color=color, ms=4, capsize=2, alpha=0.8)
        for compute, style in ((inside, "-"), (beyond, "--")):
            if compute is None:
                continue
            n, dd = along(compute, ratio)
            ax.plot(
                compute,
                result.designs[d].predict(n, dd),
                style,
                color=color,
                label=d if style == "-" else None,
            )
            lo, hi = (
                np.array(p) for p in zip(*(percentile(s) for s in boot.predict(d, n, dd).T), strict=True)
            )
            ax.fill_between(compute, lo, hi, color=color, alpha=0.15)
        for row in rows:
            if row["design"] == d:
                m = row["loss"]
                ax.errorbar(
                    [row["flops"]], [m], yerr=[[m - row["lo"]], [row["hi"] - m]], fmt="*", color=color, ms=9
                )
    for t in targets:
        ax.axvline(t.flops, color="0.6", lw=0.6, ls=":")
        ax.annotate(
            t.name, (t.flops, 1.0), xycoords=("data", "axes fraction"), fontsize=8, rotation=90, va="top"
        )
    ax.axvline(c_top, color="0.3", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"training compute C = 6 N D (FLOPs); curves at {ratio:.3g} tokens per parameter")
    ax.set_ylabel("loss")
    ax.set_title("fits with 95% bootstrap bands; dashed: beyond the largest rung; stars: targets")
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_residuals(path: Path, ladder: Ladder, result: LadderFit) -> Path:
    """Measured minus fitted loss per rung (seed means) against the rung's compute, per design."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    rung = ladder.rung_of_row()
    for i, d in enumerate(ladder.designs):
        rows_d = ladder.design == d
        fitted = result.designs[d].predict(ladder.params, ladder.tokens)
        xs, ys = [], []
        for r in np.unique(rung[rows_d]):
            sel = rows_d & (rung == r)
            xs.append(ladder.flops[sel][0] * (1 + 0.03 * i))  # a small offset per design
            ys.append(float(np.mean(ladder.loss[sel] - fitted[sel])))
        ax.plot(xs, ys, "o", color=f"C{i}", label=d)
    ax.axhline(0, color="0.4", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("rung compute (FLOPs)")
    ax.set_ylabel("measured - fitted loss (seed mean)")
    ax.legend(fontsize=8)
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
