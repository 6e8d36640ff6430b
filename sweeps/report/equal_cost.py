"""Loss at equal cost: each point's validation curve against tokens and against probe time.

A trial logs `val_loss` and `tokens` at every validation. Per point the curves of its seeds are
averaged at the token counts they share (the same schedule: the same counts), and put on a time
axis with the cost probe's speed of that architecture: seconds = tokens / tokens_per_s. The
common horizon is the time the fastest point needs for the whole budget (every curve reaches it;
comparing later would extrapolate the fast designs), and `val_loss_at_equal_time` is each point's
curve interpolated there: "which design has the lower loss after the same training time" (left
out for a point whose first validation came after the horizon: nothing was measured there).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from sweeps.report.paired_curves import run_curve
from trainers.metrics import TOKENS_PER_S


def curves(client, rows: list[dict]) -> dict[str, list[tuple[float, float]]]:
    """point id -> [(tokens, mean val_loss over its seeds)], from the MLflow children's histories."""
    out = {}
    for row in rows:
        per_seed = []
        for run_id in row["runs"]:
            if not run_id:
                continue
            per_seed.append(run_curve(client, run_id, "val_loss"))  # read once for both figures
        shared = set.intersection(*(set(c) for c in per_seed)) if per_seed else set()
        if shared:
            out[row["point"]] = [(t, float(np.mean([c[t] for c in per_seed]))) for t in sorted(shared)]
    return out


def add_equal_time(
    rows: list[dict], point_curves: Mapping[str, list], metric: str = TOKENS_PER_S
) -> float | None:
    """Sets row["val_loss_at_equal_time"], or row["equal_time_left_out"] saying why a point has
    none; returns the horizon in seconds (None without speeds)."""
    speed = {r["point"]: r.get(metric) for r in rows}
    usable = [p for p, c in point_curves.items() if speed.get(p)]
    if not usable:
        return None
    horizon = min(point_curves[p][-1][0] / speed[p] for p in usable)
    for row in rows:
        curve = point_curves.get(row["point"])
        if curve is None:
            row["equal_time_left_out"] = "no validation curve shared by its seeds"
            continue
        if not speed.get(row["point"]):
            row["equal_time_left_out"] = "no probe speed"
            continue
        seconds = [t / speed[row["point"]] for t, _ in curve]
        if seconds[0] <= horizon:  # its first validation came before the horizon: interpolate
            row["val_loss_at_equal_time"] = float(np.interp(horizon, seconds, [v for _, v in curve]))
        else:
            first = f"first validation at {seconds[0]:.3g} s"
            row["equal_time_left_out"] = f"{first}, after the horizon ({horizon:.3g} s)"
    return horizon


def plot(
    rows: list[dict], point_curves: Mapping[str, list], horizon: float | None, name_of, path: Path
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sweeps.report.outputs import most_relevant  # plotting only; outputs imports the fronts

    fig, (by_tokens, by_time) = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    with_curve = [r for r in rows if point_curves.get(r["point"])]
    shown = most_relevant(with_curve)  # a search's thousands of curves: the ones a reader wants
    if len(shown) < len(with_curve):
        by_tokens.set_title(
            f"{len(shown)} of {len(with_curve)} points (the references, the front, by p_front)", fontsize=9
        )
    for row in shown:
        curve = point_curves.get(row["point"])
        if not curve:
            continue
        tokens, loss = zip(*curve, strict=True)
        by_tokens.plot(tokens, loss, marker=".", label=name_of(row))
        if row.get(TOKENS_PER_S):
            by_time.plot([t / row[TOKENS_PER_S] for t in tokens], loss, marker=".", label=name_of(row))
    by_tokens.set_xlabel("tokens")
    by_tokens.set_ylabel("val_loss (mean over seeds)")
    by_time.set_xlabel("seconds at the cost probe's tokens/s")
    if horizon is not None:
        by_time.axvline(horizon, color="black", lw=0.8, ls="--")
        by_time.set_title("dashed: equal time (the fastest design's budget)", fontsize=9)
    by_tokens.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
