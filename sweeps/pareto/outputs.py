"""What a front looks like outside Python: the table, CSV, JSON, a PNG per objective pair, HTML."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from pathlib import Path


def _label(params: Mapping) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "base"


def table_text(result: Mapping) -> str:
    metrics = [o["metric"] for o in result["objectives"]]
    rows = sorted(result["points"], key=lambda r: (r["rank"], r[metrics[0]]))
    head = ["rank", "point", "seeds", *metrics, "params"]
    lines = [head]
    for r in rows:
        vals = [f"{r[m]:.4g}±{r[m + '_std']:.2g}" for m in metrics]
        lines.append([str(r["rank"]), r["point"], str(r["seeds"]), *vals, _label(r["params"])])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
    out = [
        "  ".join(c.ljust(w) for c, w in zip(line[:-1], widths, strict=True)) + "  " + line[-1]
        for line in lines
    ]
    out.append(
        f"hypervolume (normalised, ref 1.1): {result['hypervolume']:.4f};"
        f" front: {len(result['front'])} point(s)"
    )
    return "\n".join(out)


def write_files(result: Mapping, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    metrics = [o["metric"] for o in result["objectives"]]
    paths = [folder / "pareto.json", folder / "pareto.csv"]
    paths[0].write_text(json.dumps(result, indent=2, default=str))
    with paths[1].open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            ["rank", "point", "seeds", *sum(([m, m + "_std"] for m in metrics), []), "params", "trials"]
        )
        for r in sorted(result["points"], key=lambda r: r["rank"]):
            stats = sum(([r[m], r[m + "_std"]] for m in metrics), [])
            writer.writerow([r["rank"], r["point"], r["seeds"], *stats, json.dumps(r["params"]), r["trials"]])
    if result["points"] and len(metrics) > 1:
        paths += _plots(result, folder)
    return paths


def _plots(result: Mapping, folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    objectives = result["objectives"]
    rows = result["points"]
    x = objectives[0]["metric"]
    out = []
    for k in range(1, len(objectives)):
        y = objectives[k]["metric"]
        front = set(result["pairs"][f"{x}_vs_{y}"])
        fig, ax = plt.subplots(figsize=(6.4, 4.8))
        for r in rows:
            on = r["point"] in front
            ax.errorbar(r[x], r[y], xerr=r[x + "_std"], yerr=r[y + "_std"], fmt="o" if on else "x",
                        color="C3" if on else "C0", alpha=0.9, capsize=2)  # fmt: skip
            ax.annotate(
                _label(r["params"])[:40], (r[x], r[y]), fontsize=7, xytext=(3, 3), textcoords="offset points"
            )
        pts = sorted((r[x], r[y]) for r in rows if r["point"] in front)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "--", color="C3", lw=1)
        ax.set_xlabel(f"{x} ({objectives[0]['direction']})")
        ax.set_ylabel(f"{y} ({objectives[k]['direction']})")
        ax.set_title(f"front: {x} vs {y} (mean over seeds, bars = 1 std)")
        fig.tight_layout()
        path = folder / f"front_{x}_vs_{y}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    out.append(_html(result, folder))
    return out


def _html(result: Mapping, folder: Path) -> Path:
    import plotly.graph_objects as go

    objectives = result["objectives"]
    metrics = [o["metric"] for o in objectives]
    rows = result["points"]
    text = [f"{r['point']}<br>{_label(r['params'])}<br>rank {r['rank']}, {r['seeds']} seed(s)" for r in rows]
    color = [r["rank"] for r in rows]
    marker = {
        "color": color,
        "colorscale": "Viridis_r",
        "showscale": True,
        "colorbar": {"title": "rank"},
        "size": 9,
    }
    if len(metrics) >= 3:
        trace = go.Scatter3d(x=[r[metrics[0]] for r in rows], y=[r[metrics[1]] for r in rows],
                             z=[r[metrics[2]] for r in rows], mode="markers", text=text, marker=marker,
                             hoverinfo="text")  # fmt: skip
        layout = {"scene": {"xaxis_title": metrics[0], "yaxis_title": metrics[1], "zaxis_title": metrics[2]}}
    else:
        trace = go.Scatter(x=[r[metrics[0]] for r in rows], y=[r[metrics[1]] for r in rows], mode="markers",
                           text=text, marker=marker, hoverinfo="text")  # fmt: skip
        layout = {"xaxis_title": metrics[0], "yaxis_title": metrics[1]}
    fig = go.Figure(trace, layout={"title": "Pareto ranks (mean over seeds)", **layout})
    path = folder / "pareto.html"
    fig.write_html(path, include_plotlyjs=True)  # self-contained: readable offline
    return path
