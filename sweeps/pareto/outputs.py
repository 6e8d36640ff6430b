"""What a front looks like outside Python: the table, CSV, JSON, a PNG per objective pair, HTML."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from pathlib import Path

RELATIVE = ("tokens_per_s", "tokens_per_s_ratio", "peak_mem_mb", "mem_activations_mb", "params_total")


def _label(params: Mapping) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "base"


def point_name(row: Mapping) -> str:
    """A point's short name: its value when one parameter defines it, else key=value pairs."""
    params = row["params"]
    if len(params) == 1:
        return str(next(iter(params.values())))
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in params.items()) or "base"


def _half(row: Mapping, metric: str) -> float:
    lo, hi = row[metric + "_ci"]
    return (hi - lo) / 2 if math.isfinite(lo) else math.nan


def _value(row: Mapping, metric: str) -> str:
    half = _half(row, metric)
    return f"{row[metric]:.4g}" + (f"±{half:.2g}" if math.isfinite(half) else "")


def table_text(result: Mapping) -> str:
    metrics = [o["metric"] for o in result["objectives"]]
    rows = sorted(result["points"], key=lambda r: (r["rank"], r[metrics[0]]))
    ref = result.get("reference")
    head = ["rank", "p_front", "point", "seeds", *metrics, "vs reference", "params"]
    lines = [head]
    for r in rows:
        vs = "reference" if r["point"] == ref else ", ".join(f"{v}" for v in r["verdict"].values()) or "-"
        values = [_value(r, m) for m in metrics]
        lines.append([str(r["rank"]), f"{r['p_front']:.2f}", r["point"], str(r["seeds"]), *values, vs,
                      _label(r["params"])])  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
    out = [
        "  ".join(c.ljust(w) for c, w in zip(line[:-1], widths, strict=True)) + "  " + line[-1]
        for line in lines
    ]
    out.append(
        "values: mean ± half-width of the 95% t interval over seeds (tokens_per_s: the median of the"
        " cost probe's rounds, order-statistic interval); vs reference: the paired verdict per objective"
    )
    out.append(
        f"hypervolume (normalised, ref 1.1): {result['hypervolume']:.4f};"
        f" front: {len(result['front'])} point(s)"
    )
    return "\n".join(out)


def conclusions_text(result: Mapping) -> str:
    """One plain-language line per point against the reference."""
    ref_id = result.get("reference")
    ref = next((r for r in result["points"] if r["point"] == ref_id), None)
    if ref is None:
        return "no reference point (a baseline design or `reference:` in the study): no paired verdicts"
    lines = [f"against {point_name(ref)} (paired over shared seeds, 95% intervals):"]
    for row in sorted(result["points"], key=lambda r: (r["rank"], -r["p_front"])):
        if row is ref:
            continue
        parts = []
        for o in result["objectives"]:
            m = o["metric"]
            diff, word = row["diff"][m], row["verdict"][m]
            if m in RELATIVE and ref[m]:
                parts.append(f"{m} {row[m] / ref[m]:.3f}x ({word})")
            else:
                half = (diff["hi"] - diff["lo"]) / 2 if math.isfinite(diff["lo"]) else math.nan
                spread = f" ± {half:.4f}" if math.isfinite(half) else ""
                parts.append(f"{m} {diff['mean']:+.4f}{spread} ({word}, {diff['n']} seed(s))")
        lines.append(f"  {point_name(row)}: " + "; ".join(parts) + f"; on the front in {row['p_front']:.0%}")
    return "\n".join(lines)


def write_files(result: Mapping, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    metrics = [o["metric"] for o in result["objectives"]]
    paths = [folder / "pareto.json", folder / "pareto.csv"]
    paths[0].write_text(json.dumps(result, indent=2, default=str))
    with paths[1].open("w", newline="") as fh:
        writer = csv.writer(fh)
        per_metric = ["", "_std", "_ci_lo", "_ci_hi", "_diff", "_diff_lo", "_diff_hi", "_verdict"]
        writer.writerow(
            ["rank", "p_front", "point", "name", "seeds", *(m + c for m in metrics for c in per_metric),
             "params", "trials"]
        )  # fmt: skip
        for r in sorted(result["points"], key=lambda r: r["rank"]):
            cells = []
            for m in metrics:
                diff = r["diff"].get(m, {})
                word = r["verdict"].get(m, "reference" if r["point"] == result.get("reference") else "")
                cells += [r[m], r[m + "_std"], *r[m + "_ci"], diff.get("mean", ""), diff.get("lo", ""),
                          diff.get("hi", ""), word]  # fmt: skip
            writer.writerow(
                [r["rank"], r["p_front"], r["point"], point_name(r), r["seeds"], *cells,
                 json.dumps(r["params"]), r["trials"]]
            )  # fmt: skip
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
            marker, color = _marker(result, r, x)
            xerr, yerr = (0.0 if math.isnan(h) else h for h in (_half(r, x), _half(r, y)))
            ax.errorbar(r[x], r[y], xerr=xerr, yerr=yerr, fmt=marker, color=color, alpha=0.9, capsize=2,
                        markeredgecolor="black" if r["point"] in front else color)  # fmt: skip
            ax.annotate(
                f"{point_name(r)[:32]} ({r['p_front']:.0%})",
                (r[x], r[y]),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
        pts = sorted((r[x], r[y]) for r in rows if r["point"] in front)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "--", color="C3", lw=1)
        ax.set_xlabel(f"{x} ({objectives[0]['direction']})")
        ax.set_ylabel(f"{y} ({objectives[k]['direction']})")
        ax.set_title(f"{x} vs {y}: bars 95% CI; marker = {x} verdict; (p_front)", fontsize=9)
        fig.tight_layout()
        path = folder / f"front_{x}_vs_{y}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    out.append(_html(result, folder))
    return out


VERDICT_STYLE = {
    "better": ("^", "C2"),
    "worse": ("v", "C3"),
    "indistinguishable": ("o", "C7"),
    "undecided": ("o", "C7"),
}


def _marker(result: Mapping, row: Mapping, metric: str) -> tuple[str, str]:
    if row["point"] == result.get("reference"):
        return "*", "C0"
    return VERDICT_STYLE.get(row["verdict"].get(metric, "undecided"), ("o", "C7"))


def _html(result: Mapping, folder: Path) -> Path:
    import plotly.graph_objects as go

    objectives = result["objectives"]
    metrics = [o["metric"] for o in objectives]
    rows = result["points"]
    text = [
        f"{point_name(r)}<br>{_label(r['params'])}<br>rank {r['rank']}, p_front {r['p_front']:.2f},"
        f" {r['seeds']} seed(s)<br>" + ", ".join(f"{m}: {v}" for m, v in r["verdict"].items())
        for r in rows
    ]
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
