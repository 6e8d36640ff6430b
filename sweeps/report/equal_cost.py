"""Loss at equal cost: each point's validation curve against tokens and against probe time.

Two views, and only one is a verdict:

- Curves (the paper's wall-clock figure). A trial logs `val_loss` and `tokens` at every
  validation. Per point the curves of its seeds are averaged at the token counts they share (the
  same schedule: the same counts), and put on a time axis with the cost probe's speed of that
  architecture: seconds = tokens / tokens_per_s. The common horizon is the time the fastest point
  needs for the whole budget (every curve reaches it; comparing later would extrapolate the fast
  designs), and `val_loss_curve_at_equal_time` is each point's curve interpolated there. A slower
  design is read partway through its schedule, before its learning rate has decayed, which
  favours the fastest design: a curve, not a verdict.
- Finished runs at equal time (`budget: {time: reference | S}`, sweeps.run.time_budget): every
  design trains for the same probe time over its own steps, so the verdicts on val_loss compare
  finished runs; `time_budget_text` says so beside them, from `TIME_BUDGET_FILE`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from sweeps.report.paired_curves import run_curve
from trainers.metrics import TOKENS_PER_S

TIME_BUDGET_FILE = "time_budget.json"  # results/<name>/: the time budget as the launch resolved it


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
    """Sets row["val_loss_curve_at_equal_time"], or row["equal_time_left_out"] saying why a point
    has none; returns the horizon in seconds (None without speeds)."""
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
            row["val_loss_curve_at_equal_time"] = float(np.interp(horizon, seconds, [v for _, v in curve]))
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
        by_time.set_title("dashed: the fastest design's end (curves, not a verdict)", fontsize=9)
    by_tokens.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def time_budget_text(results_dir: Path) -> str | None:
    """The line that labels a study's verdicts as equal-time ones (None: no time budget)."""
    path = Path(results_dir) / TIME_BUDGET_FILE
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    designs = ", ".join(
        f"{d['design']} {d['tokens']} tokens ({d['steps']} steps at {d['tokens_per_s']:.4g} tokens/s)"
        for d in record["designs"].values()
    )
    return (
        f"equal time (budget.time {record['time']}): every design trained {record['seconds']:.1f} s of "
        f"training steps at the probe's speed, each over its whole schedule: {designs}; "
        "the verdicts compare these finished runs"
    )
