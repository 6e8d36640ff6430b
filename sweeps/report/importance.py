"""Which parameters of the space drive each objective: Optuna's PED-ANOVA over the points.

Each point enters once, with its objectives' seed means (the fronts' statistics: the median of
the probe's rounds for throughput), as one trial of an in-memory Optuna study with the point's own
params and distributions; `optuna.importance.get_param_importances` with
`PedAnovaImportanceEvaluator` then scores, per objective, how much each parameter's distribution
among the best points differs from its distribution over all points (normalised to sum to 1;
conditional parameters included). PED-ANOVA needs no model fit (fANOVA's random forest needs
scikit-learn, which the project does not install) and is Optuna's default evaluator.

Too small to tell (said in the files, the printed line and the tag `importance.note`, and no
importance is given): fewer than `MIN_POINTS` points (PED-ANOVA wants at least 5 points in its top
quantile, Optuna's own advice; the top half of 10 points is the least that gives that), or fewer
than two parameters that take more than one value among the points (one parameter would get
importance 1 by normalisation alone). An objective whose points all have one value gets no
importances either ("does not vary"). The top quantile is max(0.1, 5 / points).
"""

from __future__ import annotations

import csv
import json
import warnings
from collections.abc import Mapping
from pathlib import Path

import optuna

MIN_POINTS = 10  # 5 points in the top quantile, the top quantile at most half of them
MIN_TOP = 5
TOP_TAGS = 3  # parameters named in each objective's tag


def too_small(rows: list[dict]) -> str | None:
    """Why the points cannot rank their parameters (None when they can)."""
    varying = [
        p for p in _param_names(rows) if len({json.dumps(r["params"].get(p), default=str) for r in rows}) > 1
    ]
    if len(rows) < MIN_POINTS:
        return f"too small to tell: {len(rows)} point(s); importances need at least {MIN_POINTS}"
    if len(varying) < 2:
        return f"too small to tell: {len(varying)} parameter(s) vary; importances need at least 2"
    return None


def _param_names(rows) -> list[str]:
    return sorted({p for r in rows for p in r["params"]})


def importances(result: Mapping, distributions: Mapping[str, Mapping]) -> dict:
    """{"evaluator", "points", "note", "objectives": {metric: {param: importance} | None}} from the
    fronts' result; `distributions`: per point id, its params' Optuna distributions."""
    rows = result["points"]
    objectives = [(o["metric"], o["direction"]) for o in result["objectives"]]
    out = {"evaluator": "PedAnovaImportanceEvaluator", "points": len(rows), "note": too_small(rows),
           "objectives": dict.fromkeys(m for m, _ in objectives)}  # fmt: skip
    if out["note"]:
        return out
    # optuna.importance imports scikit-learn and pandas (seconds): here, where importances are
    # computed, not in every launcher's start
    from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances

    quantile = max(0.1, MIN_TOP / len(rows))
    out["target_quantile"] = quantile
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(directions=[d for _, d in objectives])
    for row in rows:
        study.add_trial(
            optuna.trial.create_trial(
                params=row["params"], distributions=dict(distributions[row["point"]]),
                values=[row[m] for m, _ in objectives],
            )
        )  # fmt: skip
    notes = {}
    for i, (metric, direction) in enumerate(objectives):
        if len({row[metric] for row in rows}) < 2:
            notes[metric] = "does not vary"
            continue
        sign = 1.0 if direction == "minimize" else -1.0  # PED-ANOVA ranks lower as better
        with warnings.catch_warnings():  # its reminder that a target is minimised: it is, by `sign`
            warnings.simplefilter("ignore", UserWarning)
            scores = get_param_importances(
                study,
                evaluator=PedAnovaImportanceEvaluator(target_quantile=quantile),
                target=lambda t, i=i, sign=sign: sign * t.values[i],
            )
        out["objectives"][metric] = {p: float(v) for p, v in scores.items()}
    if notes:
        out["objective_notes"] = notes
    return out


def tags(found: Mapping) -> dict[str, str]:
    """`importance.<metric>`: its top parameters with their importance; `importance.note`."""
    if found["note"]:
        return {"importance.note": found["note"]}
    out = {}
    for metric, scores in found["objectives"].items():
        if scores is None:
            out[f"importance.{metric}"] = found.get("objective_notes", {}).get(metric, "none")
            continue
        top = sorted(scores.items(), key=lambda kv: -kv[1])[:TOP_TAGS]
        out[f"importance.{metric}"] = ", ".join(f"{p} {v:.2f}" for p, v in top)
    return out


def write(found: Mapping, folder: Path) -> list[Path]:
    """importances.json, importances.csv (objective, parameter, importance) and, when there is
    anything to show, importances.png (one bar chart per objective)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "importances.json", folder / "importances.csv"]
    paths[0].write_text(json.dumps(found, indent=2))
    with paths[1].open("w", newline="") as handle:
        w = csv.writer(handle)
        w.writerow(["objective", "parameter", "importance", "evaluator", "points", "note"])
        for metric, scores in found["objectives"].items():
            note = found["note"] or found.get("objective_notes", {}).get(metric, "")
            for param, value in (scores or {"": ""}).items():
                w.writerow([metric, param, value, found["evaluator"], found["points"], note])
    (folder / "importances.png").unlink(missing_ok=True)  # of an earlier analysis
    shown = {m: s for m, s in found["objectives"].items() if s}
    if shown:
        paths.append(_plot(shown, folder / "importances.png"))
    return paths


def _plot(shown: Mapping[str, Mapping[str, float]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(shown), figsize=(4.2 * len(shown), 3.2), squeeze=False)
    for ax, (metric, scores) in zip(axes[0], shown.items(), strict=True):
        names = sorted(scores, key=scores.get)
        ax.barh(names, [scores[n] for n in names], color="#4c72b0")
        ax.set_xlim(0, 1)
        ax.set_title(f"{metric}: importance (PED-ANOVA)", fontsize=9)
        ax.tick_params(labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(result: Mapping, trials, folder: Path, tracker=None, stream=None) -> list[Path]:
    """The importances of the fronts' points: files under `folder`, a printed line, and (with the
    launch's tracker) the parent run's tags. Returns the files written."""
    rows = result["points"]
    if not rows:
        return []
    by_number = {t.number: t for t in trials}
    distributions = {r["point"]: by_number[r["trials"][0]].distributions for r in rows}
    found = importances(result, distributions)
    paths = write(found, folder)
    shown = tags(found)
    if stream is not None:
        print("importances: " + "; ".join(f"{k.removeprefix('importance.')}: {v}" for k, v in shown.items()),
              file=stream)  # fmt: skip
    if tracker is not None and tracker.parent_id is not None:
        tracker.set_tags(tracker.parent_id, shown)
    return paths
