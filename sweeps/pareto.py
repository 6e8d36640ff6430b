"""Pareto fronts of a study: `python -m sweeps.pareto <study.yaml | name> [--set ...]`

Only runs that trained their full budget enter (COMPLETE Optuna trials: a run stopped early
by ASHA is PRUNED, a failed one FAIL). Runs of one point (its seeds) are averaged first: a
front is over points, with the per-point mean of each objective over its completed seeds (the
standard deviation and the seed count are in the table). Then:

- `rank`: non-dominated sorting (0 = the Pareto front over all objectives, 1 = the next layer);
- hypervolume of the front, with each objective min-max normalised over all points and turned
  into minimisation, reference point 1.1 in every coordinate (1.0 = perfect, 0 = nothing);
- per-pair fronts of the first objective against each other (e.g. loss vs throughput).

Writes results/<name>/pareto/ (pareto.csv, pareto.json, a PNG per pair, pareto.html), logs them
to the launch's parent MLflow run and tags every child run with `pareto_rank` (-1 for runs
that are not in any front: failed, pruned, interrupted).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from optuna.trial import TrialState


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """a dominates b (minimisation): no worse everywhere, better somewhere."""
    return all(x <= y for x, y in zip(a, b, strict=True)) and any(x < y for x, y in zip(a, b, strict=True))


def nondominated_ranks(points: Sequence[Sequence[float]]) -> list[int]:
    """Rank of each point (minimisation); 0 is the Pareto front. Equal points share a rank."""
    ranks = [-1] * len(points)
    left = set(range(len(points)))
    rank = 0
    while left:
        front = {i for i in left if not any(dominates(points[j], points[i]) for j in left if j != i)}
        for i in front:
            ranks[i] = rank
        left -= front
        rank += 1
    return ranks


def hypervolume(points: Sequence[Sequence[float]], ref: Sequence[float]) -> float:
    """Exact hypervolume dominated by `points` (minimisation) up to `ref`, by slicing."""
    pts = [tuple(p) for p in points if all(x < r for x, r in zip(p, ref, strict=True))]
    if not pts:
        return 0.0
    if len(ref) == 1:
        return ref[0] - min(p[0] for p in pts)
    pts.sort(key=lambda p: p[0])
    volume = 0.0
    for i, p in enumerate(pts):
        upper = pts[i + 1][0] if i + 1 < len(pts) else ref[0]
        if upper <= p[0]:
            continue
        volume += (upper - p[0]) * hypervolume([q[1:] for q in pts[: i + 1]], ref[1:])
    return volume


def to_minimise(values: Sequence[float], directions: Sequence[str]) -> list[float]:
    return [v if d == "minimize" else -v for v, d in zip(values, directions, strict=True)]


def normalise(rows: Sequence[Sequence[float]]) -> list[list[float]]:
    lows = [min(col) for col in zip(*rows, strict=True)]
    highs = [max(col) for col in zip(*rows, strict=True)]
    return [
        [(v - lo) / (hi - lo) if hi > lo else 0.0 for v, lo, hi in zip(r, lows, highs, strict=True)]
        for r in rows
    ]


def point_table(trials, metrics: Sequence[str]) -> list[dict]:
    """Per-point means over completed seeds, from Optuna trials."""
    groups: dict[str, list] = {}
    for t in trials:
        if t.state == TrialState.COMPLETE and t.values is not None:
            groups.setdefault(t.user_attrs.get("point", str(t.params)), []).append(t)
    rows = []
    for pid, group in groups.items():
        row = {"point": pid, "params": dict(group[0].params), "seeds": len(group)}
        row["trials"] = [t.number for t in group]
        row["runs"] = [t.user_attrs.get("mlflow_run_id") for t in group]
        for i, metric in enumerate(metrics):
            vals = [t.values[i] for t in group]
            mean = sum(vals) / len(vals)
            row[metric] = mean
            row[metric + "_std"] = (
                math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
            )
        rows.append(row)
    return rows


def compute(trials, objectives: Sequence[tuple[str, str]]) -> dict:
    metrics = [m for m, _ in objectives]
    directions = [d for _, d in objectives]
    rows = point_table(trials, metrics)
    result = {"objectives": [{"metric": m, "direction": d} for m, d in objectives], "points": rows}
    if not rows:
        result.update(front=[], hypervolume=0.0, pairs={})
        return result
    mins = [to_minimise([r[m] for m in metrics], directions) for r in rows]
    for row, rank in zip(rows, nondominated_ranks(mins), strict=True):
        row["rank"] = rank
    norm = normalise(mins)
    front = [i for i, r in enumerate(rows) if r["rank"] == 0]
    result["front"] = [rows[i]["point"] for i in front]
    result["hypervolume"] = hypervolume([norm[i] for i in front], [1.1] * len(metrics)) / 1.1 ** len(metrics)
    pairs = {}
    for k in range(1, len(metrics)):
        two = [[m[0], m[k]] for m in mins]
        ranks = nondominated_ranks(two)
        pairs[f"{metrics[0]}_vs_{metrics[k]}"] = [rows[i]["point"] for i, r in enumerate(ranks) if r == 0]
    result["pairs"] = pairs
    return result


# --- output -------------------------------------------------------------------------------------


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


# --- the study ----------------------------------------------------------------------------------


def analyse(study, plan=None, tracker=None, stream=None) -> dict[str, float]:
    """Fronts of `study` from its Optuna storage; logs to the parent run and tags the children."""
    import optuna

    stream = stream or sys.stdout
    if plan is not None:
        trials = plan.trials()
    else:
        from sweeps.plan import storage

        trials = optuna.load_study(study_name=study.name, storage=storage(study.storage_url())).get_trials()
    objectives = [(o.metric, o.direction) for o in study.objectives]
    result = compute(trials, objectives)
    if not result["points"]:
        print("pareto: no trial has completed its budget yet", file=stream)
        return {"points": 0.0}
    paths = write_files(result, study.results_dir() / "pareto")
    print(table_text(result), file=stream)
    for path in paths:
        print(f"  {path}", file=stream)
    if tracker is not None:
        for path in paths:
            tracker.log_file(tracker.parent_id, path, "pareto")
        _tag_children(tracker, trials, result)
    return {"hypervolume": result["hypervolume"], "front_size": float(len(result["front"])),
            "points": float(len(result["points"]))}  # fmt: skip


def _tag_children(tracker, trials, result: Mapping) -> None:
    rank_of = {r["point"]: r["rank"] for r in result["points"]}
    for t in trials:
        run_id = t.user_attrs.get("mlflow_run_id")
        if not run_id:
            continue
        rank = rank_of.get(t.user_attrs.get("point")) if t.state == TrialState.COMPLETE else None
        tracker.client.set_tag(run_id, "pareto_rank", str(-1 if rank is None else rank))


def _latest_parent(study):
    from sweeps.tracking import Tracker

    tracker = Tracker(study.mlflow_uri(), study.experiment_name, study.name, "pareto")
    runs = tracker.client.search_runs(
        [tracker.experiment_id],
        filter_string=f"tags.`sweep.study` = '{study.name}' and tags.`sweep.role` = 'parent'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    tracker.parent_id = runs[0].info.run_id if runs else None
    return tracker if runs else None


def main(argv=None) -> int:
    from arch.configtree import ConfigError
    from sweeps.spec import load_study

    p = argparse.ArgumentParser(prog="python -m sweeps.pareto", description=__doc__.split("\n\n")[0])
    p.add_argument("study", help="a study YAML file, or the name of one in studies/")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    p.add_argument("--no-mlflow", action="store_true", help="only print and write results/<name>/pareto/")
    args = p.parse_args(argv)
    path = Path(args.study)
    if not path.is_file():
        path = Path("studies") / f"{args.study}.yaml"
    try:
        study = load_study(path, args.overrides)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    url = study.storage_url()
    if url.startswith("journal:") and not Path(url[len("journal:") :]).is_file():
        print(f"no Optuna study {study.name!r} in {url}: run the study first", file=sys.stderr)
        return 1
    try:
        tracker = None if args.no_mlflow else _latest_parent(study)
        analyse(study, tracker=tracker)
    except KeyError:
        print(
            f"no Optuna study {study.name!r} in {study.storage_url()}: run the study first", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
