"""What a front looks like outside Python: the table, CSV, JSON, a PNG per objective pair, HTML."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from pathlib import Path

from sweeps.report.fronts import is_reference
from sweeps.study import space
from sweeps.study.rungs import RUNG, without_rung
from trainers import metrics as metrics_table


def _label(params: Mapping) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "base"


def axis_title(metric: str, direction: str) -> str:
    """`val_loss (nats/token, minimize)`: the unit from the metric table, when it has the metric."""
    record = metrics_table.get(metric)
    return f"{metric} ({record.unit}, {direction})" if record is not None else f"{metric} ({direction})"


def file_part(metric: str) -> str:
    """A metric's name inside a file name: lm-eval's `eval/<task>/<metric>` holds slashes."""
    return metric.replace("/", "_")


def row_name(row: Mapping) -> str:
    """A row's short name (`sweeps.study.space.point_name` of its params)."""
    return space.point_name(row["params"])


def _half(row: Mapping, metric: str) -> float:
    lo, hi = row[metric + "_ci"]
    return (hi - lo) / 2 if math.isfinite(lo) else math.nan


def _value(row: Mapping, metric: str) -> str:
    half = _half(row, metric)
    return f"{row[metric]:.4g}" + (f"±{half:.2g}" if math.isfinite(half) else "")


def table_text(result: Mapping) -> str:
    metrics = [o["metric"] for o in result["objectives"]]
    rows = sorted(result["points"], key=lambda r: (r["rank"], r[metrics[0]]))
    matching = bool(result.get("matched"))
    tuned = result.get("tuned")  # `tune:`: the value each point was compared at
    head = ["rank", "p_front", "point", "seeds", *([tuned["path"]] if tuned else []), *metrics,
            "vs reference", *(["vs matched baseline"] if matching else []), "params"]  # fmt: skip
    lines = [head]
    for r in rows:
        verdicts = ", ".join(f"{v}" for v in r["verdict"].values()) or "-"
        vs = "reference" if is_reference(result, r["point"]) else verdicts
        if matching:
            vs = [vs, matched_cell(result, r)]
        values = [_value(r, m) for m in metrics]
        at = (
            [f"{tuned['points'][r['point']]['value']:g}" if r["point"] in tuned["points"] else "?"]
            if tuned
            else []
        )
        lines.append([str(r["rank"]), f"{r['p_front']:.2f}", row_name(r), str(r["seeds"]), *at, *values,
                      *(vs if matching else [vs]), _label(r["params"])])  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
    out = [
        "  ".join(c.ljust(w) for c, w in zip(line[:-1], widths, strict=True)) + "  " + line[-1]
        for line in lines
    ]
    rounds = [m for m in metrics if metrics_table.is_timed(m)]
    timed = (
        f" ({', '.join(rounds)}: the median of the cost probe's rounds, order-statistic interval, of"
        " ratios to the probe's baseline, whose own ± is its absolute timing's)"
        if rounds
        else ""
    )
    if rounds and result.get("speed_from_trials"):  # one architecture: no probe (sweeps.run.probe)
        timed = (
            f" ({', '.join(rounds)}: one architecture, so no probe: the median of its trials' own"
            " train_tokens_per_s, order-statistic interval)"
        )
    out.append(
        f"values: mean ± half-width of the 95% t interval over seeds{timed}; vs reference: the paired"
        " verdict per objective" + (f" ({verdicts_note(result)})" if result.get("verdicts") else "")
    )
    out.append(
        f"hypervolume (normalised, ref 1.1): {result['hypervolume']:.4f};"
        f" front: {len(result['front'])} point(s)"
    )
    return "\n".join(out)


def matched_cell(result: Mapping, row: Mapping) -> str:
    """The table's `vs matched baseline` cell: the verdicts against the row's own widened baseline
    (`= vs reference` where the plain reference is its match); for a widened baseline, whose it is."""
    if "matched_verdict" in row:
        return ", ".join(row["matched_verdict"].values()) or "-"
    if "matched_reference" in row:
        return "= vs reference"
    of = [p for p, own in result.get("matched", {}).items() if own == row["point"] and p != own]
    of = [p for p in of if not is_reference(result, row["point"])]
    names = {r["point"]: row_name(r) for r in result["points"]}
    return f"matched baseline of {', '.join(names[p] for p in of)}" if of else "-"


def tuned_text(result: Mapping) -> str:
    """`tune:`: the value each point was compared at, its tune curve's flatness, edge warnings."""
    tuned = result["tuned"]
    path, seeds = tuned["path"], tuned["seeds"]
    lines = [
        f"tuned {path} (tune stage: each point's best mean over seeds 0..{seeds - 1}; every row above and"
        f" the verdicts below: its own best value, fresh seeds from {tuned['first_seed']}, split sample):"
    ]
    names = {r["point"]: row_name(r) for r in result["points"]}
    for pid, choice in tuned["points"].items():
        if pid not in names:
            continue
        rises = ", ".join(f"{r:+.4g}" for r in choice["rises"])
        curve = " ".join(f"{float(v):g}:{m:.4g}" for v, m in choice["curve"].items())
        warn = (
            "; warning: best at the edge of the range, the optimum may lie beyond it"
            if choice["edge"]
            else ""
        )
        lines.append(
            f"  {names[pid]}: {path} {choice['value']:g} (neighbours worse by {rises} {choice['metric']};"
            f" curve {curve}){warn}"
        )
    return "\n".join(lines)


def throughput_text(result: Mapping) -> str:
    """The cost probe's speed ratio beside the trials' own, per point against its reference."""
    names = {r["point"]: row_name(r) for r in result["points"]}
    lines = [
        "throughput against the reference: the cost probe's ratio (side by side, interleaved rounds) and "
        "the trials' own (train_tokens_per_s: each trial's training steps on its own clock, the median "
        "over its seeds over the reference's; trials share the machine with whatever else runs)"
    ]
    for pid, row in result["throughput_check"].items():
        own = (
            f"trials {row['trials']:.3f}x ({row['seeds']} vs {row['reference_seeds']} trial(s)); "
            f"trials/probe {row['trials'] / row['probe']:.3f}"
            if "trials" in row
            else "trials: no train_tokens_per_s recorded"
        )
        lines.append(f"  {names.get(pid, pid)}: probe {row['probe']:.3f}x; {own}")
    return "\n".join(lines)


def verdicts_note(result: Mapping) -> str:
    """How the verdicts were reached, e.g. `95%, Holm over 8 comparison(s), looks at 3..5 seeds,
    Lan-DeMets O'Brien-Fleming-type alpha spending`."""
    return result["verdicts"]["rule"]


def _open_note(diff: Mapping) -> str:
    """For a comparison not decided: what its seeds could have seen, and what would decide it."""
    parts = []
    if math.isfinite(diff.get("detectable", math.nan)):
        parts.append(f"detectable at 80% power: ±{diff['detectable']:.4f}")
    if "seeds_to_decide" in diff:
        needed = diff["seeds_to_decide"]
        goal = "to detect the difference seen" if diff.get("test") == "logrank" else "to decide at the margin"
        parts.append(f"{needed} seeds {goal}" if needed else "no feasible seed count")
    return "; ".join(parts)


def conclusions_text(result: Mapping) -> str:
    """One plain-language line per point against its reference: the study's one, or for a scaling
    ladder the reference design of each rung (same size, budget and seeds), rung by rung."""
    points = {r["point"]: r for r in result["points"]}
    groups: dict[str, list] = {}  # reference id -> the rows compared with it
    for row in sorted(result["points"], key=lambda r: (r["rank"], -r["p_front"])):
        ref_id = result.get("references", {}).get(row["point"])
        if ref_id is not None and ref_id != row["point"]:
            groups.setdefault(ref_id, []).append(row)
    if not groups and not any(is_reference(result, p) for p in points):
        if result.get("ladder"):
            return "scaling ladder: no rung has a run of the reference design yet: no paired verdicts"
        return "no reference point (a baseline design or `reference:` in the study): no paired verdicts"
    note = verdicts_note(result) if result.get("verdicts") else "-"
    references = [p for p in points if is_reference(result, p)]
    if len(references) == 1 and not result.get("ladder"):
        ref_id = references[0]
        head = f"against {row_name(points[ref_id])} (paired over shared seeds; verdicts and ± at {note}):"
        return "\n".join([head] + _comparison_lines(result, points[ref_id], groups.get(ref_id, []), "  "))
    lines = [
        "per rung, against the reference design at the rung's size and budget (paired over shared"
        f" seeds; verdicts and ± at {note}):"
    ]
    rungs = result.get("rungs", {})  # {label: {params, tokens}}, in compute order
    order = list(rungs)
    for ref_id in sorted(groups, key=lambda p: _rung_order(points[p], order)):
        ref = points[ref_id]
        label = ref["params"].get(RUNG)
        rung = rungs.get(label)
        size = f" (N {rung['params']:.3g}, D {rung['tokens']:.3g} tokens)" if rung else ""
        lines.append(f"  rung {label}{size}, against {space.point_name(without_rung(ref['params']))}:")
        lines += _comparison_lines(result, ref, groups[ref_id], "    ", rung=True)
    return "\n".join(lines)


def _rung_order(row: Mapping, order: list) -> tuple:
    label = row["params"].get(RUNG)
    return (order.index(label) if label in order else len(order), str(label))


def _comparison_lines(result: Mapping, ref: Mapping, rows: list, indent: str, rung: bool = False) -> list:
    """One line per row against `ref` (named without its rung when `rung`: the rung is the group's),
    and under it, with `reference.match`, the row against its matched baseline."""
    lines = []
    points = {r["point"]: r for r in result["points"]}
    for row in rows:
        name = space.point_name(without_rung(row["params"])) if rung else row_name(row)
        front = f"; on the front in {row['p_front']:.0%}"
        lines.append(f"{indent}{name}: " + _parts(result, row, ref, "") + front)
        if (own := points.get(row.get("matched_reference"))) is not None and "matched_diff" in row:
            head = f"{indent}  vs matched baseline {row_name(own)}: "
            lines.append(head + _parts(result, row, own, "matched_"))
    return lines


EXACT_TEST_NAMES = {"permutation": "exact paired permutation test", "logrank": "paired log-rank test"}


def _parts(result: Mapping, row: Mapping, ref: Mapping, against: str) -> str:
    """`row`'s differences to `ref` per objective (`against`: which of the row's comparisons)."""
    parts = []
    for o in result["objectives"]:
        m = o["metric"]
        diff, word = row[against + "diff"].get(m), row[against + "verdict"].get(m)
        if diff is None:
            parts.append(f"{m} not compared (the probe timed the widened baseline against itself)")
        elif metrics_table.is_relative(m) and ref[m]:
            ratio = f"{row[m] / ref[m]:.3f}x"
            if ratio == "1.000x" and row[m] != ref[m]:  # say what three digits hide
                ratio += f" ({row[m] - ref[m]:+.3g})"
            parts.append(f"{m} {ratio} ({word})")
        else:
            half = (diff["hi"] - diff["lo"]) / 2 if math.isfinite(diff["lo"]) else math.nan
            spread = f" ± {half:.4f}" if math.isfinite(half) else ""
            note = _open_note(diff)
            note = f"; {note}" if note else ""
            test = EXACT_TEST_NAMES.get(diff.get("test"), "")  # the t test goes unnamed (the rule line)
            test = f", {test}" if test else ""
            parts.append(f"{m} {diff['mean']:+.4f}{spread} ({word}, {diff['n']} seed(s){test}{note})")
    return "; ".join(parts)


def write_files(result: Mapping, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    metrics = [o["metric"] for o in result["objectives"]]
    paths = [folder / "pareto.json", folder / "pareto.csv"]
    paths[0].write_text(json.dumps(result, indent=2, default=str))
    with paths[1].open("w", newline="") as fh:
        writer = csv.writer(fh)
        per_metric = ["", "_std", "_ci_lo", "_ci_hi", "_diff", "_diff_lo", "_diff_hi", "_verdict", "_test",
                      "_p", "_alpha", "_detectable", "_seeds_to_decide"]  # fmt: skip
        matching = bool(result.get("matched"))
        if matching:
            per_metric += ["_matched_diff", "_matched_diff_lo", "_matched_diff_hi", "_matched_verdict"]
        writer.writerow(
            ["rank", "p_front", "point", "name", "seeds", *(m + c for m in metrics for c in per_metric),
             "params", "trials", "verdicts", *(["matched_reference"] if matching else [])]
        )  # fmt: skip
        rule = verdicts_note(result) if result.get("verdicts") else ""
        for r in sorted(result["points"], key=lambda r: r["rank"]):
            cells = []
            for m in metrics:
                diff = r["diff"].get(m, {})
                word = r["verdict"].get(m, "reference" if is_reference(result, r["point"]) else "")
                cells += [r[m], r[m + "_std"], *r[m + "_ci"], diff.get("mean", ""), diff.get("lo", ""),
                          diff.get("hi", ""), word, diff.get("test", ""), diff.get("p", ""),
                          diff.get("alpha", ""), diff.get("detectable", ""),
                          diff.get("seeds_to_decide", "")]  # fmt: skip
                if matching:  # against the row's matched baseline (`reference.match`)
                    own = r.get("matched_diff", {}).get(m, {})
                    cells += [own.get("mean", ""), own.get("lo", ""), own.get("hi", ""),
                              r.get("matched_verdict", {}).get(m, "")]  # fmt: skip
            writer.writerow(
                [r["rank"], r["p_front"], r["point"], row_name(r), r["seeds"], *cells,
                 json.dumps(r["params"]), r["trials"], rule,
                 *([r.get("matched_reference", "")] if matching else [])]
            )  # fmt: skip
    for stale in [*folder.glob("front_*.png"), folder / "pareto.html"]:  # of an earlier analysis
        stale.unlink(missing_ok=True)
    if len(result["points"]) > 1 and len(metrics) > 1:  # one point: nothing to compare, no figure
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
        shown = most_relevant(rows, front)  # every point, up to PLOT_CAP of them
        others = [r for r in rows if r["point"] not in {s["point"] for s in shown}]
        if others:  # the rest as plain dots: pareto.csv has them all
            ax.scatter([r[x] for r in others], [r[y] for r in others], s=6, color="C7", alpha=0.4,
                       label=f"{len(others)} more point(s), unlabelled (pareto.csv)")  # fmt: skip
        stacks = label_stack([r[x] for r in shown], [r[y] for r in shown])
        for r, stack in zip(shown, stacks, strict=True):
            marker, color = _marker(result, r, x)
            xerr, yerr = (0.0 if math.isnan(h) else h for h in (_half(r, x), _half(r, y)))
            ax.errorbar(r[x], r[y], xerr=xerr, yerr=yerr, fmt=marker, color=color, alpha=0.9, capsize=2,
                        markeredgecolor="black" if r["point"] in front else color)  # fmt: skip
            ax.annotate(
                f"{row_name(r)[:32]} ({r['p_front']:.0%})",
                (r[x], r[y]),
                fontsize=7,
                xytext=(3, 3 + LABEL_STEP * stack),
                textcoords="offset points",
            )
        pts = sorted((r[x], r[y]) for r in rows if r["point"] in front)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "--", color="C3", lw=1)
        ax.set_xlabel(axis_title(x, objectives[0]["direction"]))
        ax.set_ylabel(axis_title(y, objectives[k]["direction"]))
        ax.set_title(f"{x} vs {y}: bars 95% CI; marker = {x} verdict; (p_front)", fontsize=9)
        if others:
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = folder / f"front_{file_part(x)}_vs_{file_part(y)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    out.append(_html(result, folder))
    return out


LABEL_STEP = 9  # points between the labels of points drawn on one another (7-point text)
PLOT_CAP = 40  # points drawn with their label and bars; a search's thousands are dots beside them


def most_relevant(rows: list[dict], front=frozenset(), cap: int = PLOT_CAP) -> list[dict]:
    """All rows when there are at most `cap`; else the `cap` a reader looks for first, in their
    order: the references, then `front` (the pair's front; default the rows of rank 0) and the
    rest, each by p_front (highest first) and rank."""
    if len(rows) <= cap:
        return list(rows)
    front = set(front) or {r["point"] for r in rows if r.get("rank") == 0}

    def key(row):
        reference = row.get("reference") == row["point"]
        return (not reference, row["point"] not in front, -row.get("p_front", 0.0), row.get("rank", 0))

    chosen = {id(r) for r in sorted(rows, key=key)[:cap]}
    return [r for r in rows if id(r) in chosen]


def label_stack(xs: list[float], ys: list[float], near: float = 0.02) -> list[int]:
    """For each point, how many earlier points lie on it (within `near` of each axis's span): its
    label goes that many lines up, so designs with equal values (memory, often) stay readable."""
    spans = [(max(v) - min(v)) or abs(max(v)) or 1.0 for v in (xs, ys)]
    out = []
    for i, (px, py) in enumerate(zip(xs, ys, strict=True)):
        out.append(sum(
            abs(px - qx) <= near * spans[0] and abs(py - qy) <= near * spans[1]
            for qx, qy in zip(xs[:i], ys[:i], strict=True)
        ))  # fmt: skip
    return out


VERDICT_STYLE = {
    "better": ("^", "C2"),
    "worse": ("v", "C3"),
    "indistinguishable": ("o", "C7"),
    "equivalent": ("s", "C9"),
    "undecided": ("o", "C7"),
}


def _marker(result: Mapping, row: Mapping, metric: str) -> tuple[str, str]:
    if is_reference(result, row["point"]):
        return "*", "C0"
    return VERDICT_STYLE.get(row["verdict"].get(metric, "undecided"), ("o", "C7"))


PLOTLY_SYMBOL = {"^": "triangle-up", "v": "triangle-down", "o": "circle", "*": "star", "s": "square"}


def _html(result: Mapping, folder: Path) -> Path:
    """The PNG fronts as one interactive page: a panel per objective pair, points labelled with
    their names, 95% error bars, the front line; hover shows params, rank, p_front, verdicts."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    objectives = result["objectives"]
    x = objectives[0]["metric"]
    others = [o["metric"] for o in objectives[1:]]
    rows = result["points"]
    fig = make_subplots(
        rows=len(others), cols=1, subplot_titles=[f"{x} vs {y}" for y in others]
    )  # stacked: fits the artifact viewer
    hover = [
        f"<b>{row_name(r)}</b><br>{_label(r['params'])}<br>rank {r['rank']}, p_front {r['p_front']:.2f},"
        f" {r['seeds']} seed(s)<br>" + "<br>".join(f"{m}: {_value(r, m)} ({r['verdict'].get(m, 'reference')})"
                                                    for m in [x, *others])
        for r in rows
    ]  # fmt: skip
    for panel, y in enumerate(others, start=1):
        front = set(result["pairs"][f"{x}_vs_{y}"])
        named = {r["point"] for r in most_relevant(rows, front)}  # every point hovers; these are named
        styles = [_marker(result, r, x) for r in rows]
        fig.add_trace(
            go.Scatter(
                x=[r[x] for r in rows], y=[r[y] for r in rows], mode="markers+text",
                text=[row_name(r)[:32] if r["point"] in named else "" for r in rows],
                textposition="top right", hovertext=hover,
                hoverinfo="text", showlegend=False, name=f"{x} vs {y}",
                error_x={"array": [_finite(_half(r, x)) for r in rows]},
                error_y={"array": [_finite(_half(r, y)) for r in rows]},
                marker={"size": 11, "symbol": [PLOTLY_SYMBOL[m] for m, _ in styles],
                        "color": [MPL_COLORS[c] for _, c in styles],
                        "line": {"width": [2 if r["point"] in front else 0 for r in rows], "color": "black"}},
            ),
            row=panel, col=1,
        )  # fmt: skip
        pts = sorted((r[x], r[y]) for r in rows if r["point"] in front)
        fig.add_trace(
            go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines", showlegend=panel == 1,
                       name="front", line={"dash": "dash", "color": MPL_COLORS["C3"]}, hoverinfo="skip"),
            row=panel, col=1,
        )  # fmt: skip
        fig.update_xaxes(title_text=axis_title(x, objectives[0]["direction"]), row=panel, col=1)
        direction = next(o["direction"] for o in objectives if o["metric"] == y)
        fig.update_yaxes(title_text=axis_title(y, direction), row=panel, col=1)
    fig.update_layout(
        title=f"Pareto fronts: bars 95% CI; marker = {x} verdict vs reference<br>(star: reference;"
        " up: better, down: worse; black outline: on the pair's front)",
        title_font_size=12, height=80 + 440 * len(others),
    )  # fmt: skip
    path = folder / "pareto.html"
    fig.write_html(path, include_plotlyjs=True)  # self-contained: readable offline and in MLflow
    return path


MPL_COLORS = {"C0": "#1f77b4", "C2": "#2ca02c", "C3": "#d62728", "C7": "#7f7f7f", "C9": "#17becf"}


def _finite(value: float) -> float:
    return 0.0 if math.isnan(value) else value
