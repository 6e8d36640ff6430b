"""When during training a difference appears: each point's paired difference to its reference at
every evaluation, over the seeds they share.

Per point and its reference (the study's, or the rung's in a ladder) and per shared seed s, the
loss curves of the two runs (MLflow histories of the children) are matched at the token counts
both logged an evaluation at, and d_s(t) = point_s(t) - reference_s(t); at each t, the mean over
the shared seeds and its 95% t band (pointwise, at each evaluation on its own: a picture of when a
gap opens or closes, not a verdict; the verdict at the end of training is the fronts'). With one
shared seed there is no band. The loss is `val_bpb` when the study ranks on it (a sweep over
tokenizers), else `val_loss`.

Files: `paired_curves.csv` (point, reference, metric, tokens, seeds, diff, lo, hi) and
`paired_curves.png` (one line and band per point, 0 dashed), in the parent run's `pareto/`.
"""

from __future__ import annotations

import csv
import math
import weakref
from collections.abc import Mapping
from pathlib import Path

from sweeps.report.stats import interval

CURVES_SHOWN = 20  # lines in the figure; paired_curves.csv has every point


def loss_metric(result: Mapping) -> str:
    metrics = [o["metric"] for o in result["objectives"]]
    return "val_bpb" if "val_bpb" in metrics else "val_loss"


# Per MLflow client (one launch's tracker), the histories already read: the equal-cost figure and
# these curves read the same runs' val_loss and tokens, one request each per run otherwise.
_HISTORIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


BULK_RUNS = 500  # runs a bulk query names (well under SQLite's bound-parameter limit)


def prefetch(client, run_ids, metrics) -> None:
    """The histories of many runs read at once into the cache, where MLflow's store can (its SQL
    store's `get_metric_history_bulk`: one query per metric per `BULK_RUNS` runs, in the same order
    as `get_metric_history`'s per run); elsewhere (a tracking server) `history` reads them one run
    at a time. At 10,000 runs of 8 evaluations: 180-200 s of CPU run by run, 6 s in bulk
    (docs/bench/scale.md)."""
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    bulk = getattr(store, "get_metric_history_bulk", None)  # not on MlflowClient: its store's
    if bulk is None:
        return
    read = _HISTORIES.setdefault(client, {})
    ids = [run_id for run_id in dict.fromkeys(run_ids) if run_id]
    for metric in metrics:
        todo = [run_id for run_id in ids if (run_id, metric) not in read]
        for i in range(0, len(todo), BULK_RUNS):
            got: dict[str, dict[int, float]] = {run_id: {} for run_id in todo[i : i + BULK_RUNS]}
            for row in bulk(list(got), metric, max_results=2**62):
                got[row.run_id][row.step] = row.value
            read.update(((run_id, metric), values) for run_id, values in got.items())


def history(client, run_id: str, metric: str) -> dict[int, float]:
    """{step: value} of one run's metric; read once per client (the report reads finished runs)."""
    read = _HISTORIES.setdefault(client, {})
    if (run_id, metric) not in read:
        read[run_id, metric] = {m.step: m.value for m in client.get_metric_history(run_id, metric)}
    return read[run_id, metric]


def run_curve(client, run_id: str, metric: str) -> dict[float, float]:
    """{tokens: value} of one run's evaluations."""
    values = history(client, run_id, metric)
    tokens = history(client, run_id, "tokens")
    return {tokens[s]: v for s, v in values.items() if s in tokens}


def seed_curves(client, row: Mapping, metric: str) -> dict[str, dict[float, float]]:
    """Per seed of a point, its run's curve."""
    out = {}
    for seed, run_id in zip(row.get("run_seeds", []), row["runs"], strict=False):
        if run_id and (curve := run_curve(client, run_id, metric)):
            out[seed] = curve
    return out


def differences(point: Mapping, reference: Mapping) -> list[dict]:
    """Rows (tokens, seeds, diff, lo, hi) of point - reference over their shared seeds, at the
    token counts every one of those runs evaluated at. `point`/`reference`: {seed: {tokens: v}}."""
    seeds = sorted(point.keys() & reference.keys(), key=str)
    if not seeds:
        return []
    shared = set.intersection(*(set(point[s]) & set(reference[s]) for s in seeds))
    rows = []
    for tokens in sorted(shared):
        ci = interval([point[s][tokens] - reference[s][tokens] for s in seeds])
        rows.append(
            {"tokens": tokens, "seeds": len(seeds), "diff": ci["mean"], "lo": ci["lo"], "hi": ci["hi"]}
        )
    return rows


def compute(client, result: Mapping) -> list[dict]:
    """Every point against its reference: rows with point, reference and metric added."""
    metric = loss_metric(result)
    by_id = {r["point"]: r for r in result["points"]}
    cache: dict[str, dict] = {}

    def curves(pid):
        if pid not in cache:
            cache[pid] = seed_curves(client, by_id[pid], metric)
        return cache[pid]

    out = []
    for pid, ref in result.get("references", {}).items():
        if pid == ref:
            continue
        for row in differences(curves(pid), curves(ref)):
            out.append({"point": pid, "reference": ref, "metric": metric, **row})
    return out


def write(rows: list[dict], names: Mapping[str, str], folder: Path) -> list[Path]:
    """paired_curves.csv and paired_curves.png ([] when there is nothing to pair)."""
    for old in ("paired_curves.csv", "paired_curves.png"):  # of an earlier analysis
        (folder / old).unlink(missing_ok=True)
    if not rows:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    table = folder / "paired_curves.csv"
    with table.open("w", newline="") as handle:
        w = csv.DictWriter(
            handle, ["point", "name", "reference", "metric", "tokens", "seeds", "diff", "lo", "hi"]
        )
        w.writeheader()
        for r in rows:
            w.writerow({**r, "name": names.get(r["point"], r["point"])})
    return [table, _plot(rows, names, folder / "paired_curves.png")]


def _plot(rows: list[dict], names: Mapping[str, str], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    by_point: dict[str, list[dict]] = {}
    for r in rows:
        by_point.setdefault(r["point"], []).append(r)
    shown = list(by_point)
    if len(shown) > CURVES_SHOWN:  # a search's thousands: the lowest final differences (CSV: all)
        best = sorted(shown, key=lambda pid: by_point[pid][-1]["diff"])[:CURVES_SHOWN]
        shown = [pid for pid in shown if pid in set(best)]
    for pid in shown:
        mine = by_point[pid]
        tokens = [r["tokens"] for r in mine]
        line = ax.plot(tokens, [r["diff"] for r in mine], marker=".", label=names.get(pid, pid))[0]
        if all(math.isfinite(r["lo"]) for r in mine):
            ax.fill_between(
                tokens, [r["lo"] for r in mine], [r["hi"] for r in mine], alpha=0.2, color=line.get_color()
            )
    ax.axhline(0.0, color="black", lw=0.8, ls="--")
    metric = rows[0]["metric"]
    ax.set_xlabel("tokens")
    ax.set_ylabel(f"{metric}: point - reference (paired over seeds)")
    ax.set_title(
        f"{metric} difference to the reference at each evaluation (pointwise 95% t band)", fontsize=9
    )
    ax.legend(fontsize=7)
    if len(shown) < len(by_point):
        note = f"{len(shown)} of {len(by_point)} points: the lowest final differences (CSV: all)"
        ax.text(0.01, 0.01, note, transform=ax.transAxes, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
