"""The files of a scaling fit: fits.json, predictions.csv, crossover.json and two PNG plots."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from sweeps.report.scaling.fitting import LadderFit
from sweeps.report.scaling.intervals import Bootstrap, parameter_intervals, percentile
from sweeps.report.scaling.predict import along, path_ratio
from sweeps.report.scaling.table import Ladder
from sweeps.study.targets import Target

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


def ladder_series(ladder: Ladder) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The ladder's own lines through its rungs, for the plot: rungs of one token budget (a
    `tokens:` ladder) or of one tokens-per-parameter ratio (a `tokens_per_param:` ladder),
    whichever groups the rungs into fewer lines; each with 2 or more rungs, as (label, N, D) over
    100 points between its smallest and largest rung's compute."""
    rungs = ladder.rung_keys()
    by_tokens: dict[float, list] = {}
    by_ratio: dict[float, list] = {}
    for n, d in rungs:
        by_tokens.setdefault(d, []).append(n * d)
        by_ratio.setdefault(float(f"{d / n:.2g}"), []).append(n * d)  # budgets rounded to whole tokens
    out = []
    if len(by_tokens) <= len(by_ratio):
        for d, nd in sorted(by_tokens.items()):
            if len(nd) > 1:
                n = np.geomspace(min(nd), max(nd), 100) / d
                out.append((f"D {d:.3g}", n, np.full_like(n, d)))
    else:
        for ratio, nd in sorted(by_ratio.items()):
            if len(nd) > 1:
                n, d = along(6.0 * np.geomspace(min(nd), max(nd), 100), ratio)
                out.append((f"{ratio:.3g} tokens/param", n, d))
    return out


def plot_loss_vs_compute(
    path: Path, ladder: Ladder, result: LadderFit, boot: Bootstrap, targets: list[Target], rows: list[dict]
) -> Path:
    """Rung means with seed bars (min..max); the joint fit drawn through the ladder's own rungs
    (one line per token budget or tokens-per-parameter ratio, `ladder_series`), and along the
    path ratio (the targets') with 95% bands, dashed beyond the largest rung; targets marked with
    their predicted intervals. The compute law (one ratio) has one curve, along that ratio."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratio = path_ratio(ladder, result, targets)
    c_lo, c_top = float(ladder.flops.min()), float(ladder.flops.max())
    c_hi = max([t.flops for t in targets] + [c_top])
    inside = np.geomspace(c_lo, c_top, 100)
    beyond = np.geomspace(c_top, c_hi, 100) if c_hi > c_top else None
    series = ladder_series(ladder) if result.law == "joint" else []
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
        for k, (label, n, dd) in enumerate(series):  # the fit where the ladder measured it
            fitted = result.designs[d].predict(n, dd)
            ax.plot(6.0 * n * dd, fitted, "-", color=color, lw=1.2, label=d if k == 0 else None)
            if i == 0:
                ax.annotate(label, (6.0 * n[-1] * dd[-1], fitted[-1]), fontsize=7, color="0.3",
                            xytext=(3, 0), textcoords="offset points", va="center")  # fmt: skip
        for compute, style in ((inside, ":" if series else "-"), (beyond, "--")):
            if compute is None:
                continue
            n, dd = along(compute, ratio)
            ax.plot(
                compute,
                result.designs[d].predict(n, dd),
                style,
                color=color,
                lw=1.0 if series else 1.5,
                label=d if style == "-" and not series else None,
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
    along_text = f"banded curves at {ratio:.3g} tokens per parameter"
    if series:
        along_text += " (the largest target's)" if targets else " (the largest rung's)"
        along_text = f"solid: the fit through the rungs; {along_text}"
    ax.set_xlabel(f"training compute C = 6 N D (FLOPs); {along_text}", fontsize=8)
    ax.set_ylabel("loss")
    ax.set_title(
        "fits with 95% bootstrap bands; dashed: beyond the largest rung; stars: targets", fontsize=10
    )
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
