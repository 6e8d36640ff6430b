"""A study's scaling ladder read back from its trials, and its report at the end of a launch: the
Ladder of its completed trials (`ladder_of`), and `report_ladder` (files under
results/<name>/scaling/, artifacts and tags of the parent MLflow run through the launch's tracker,
the plain-language summary).

The Ladder's rows: design = the point without its rung (the `model.residual` label when that is
the one other parameter), N = the rung's N (non-embedding parameters of the rung's model on the
base trial's design: the same N for every design of a rung, so that the bootstrap draws the same
seeds for all designs of a rung and their differences stay paired; a design's own parameters,
a gate's under 0.1%, are left out), D = the tokens the rung trained (its budget), loss = val_loss,
seed = the trial's seed.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from optuna.trial import TrialState

from sweeps.report.scaling.pipeline import fit_and_predict
from sweeps.report.scaling.predict import backtest_line, summary_lines
from sweeps.report.scaling.table import Ladder
from sweeps.study.ladder import LadderError, targets
from sweeps.study.reference import reference_design as design_params
from sweeps.study.run_record import RunRecord
from sweeps.study.rungs import without_rung
from sweeps.study.space import point_name

LOSS = "val_loss"
MIN_RUNGS = 2  # fewer completed rungs than this: nothing to fit, said and skipped


def design_of(study, point: dict) -> str:
    return point_name(without_rung(point))


def ladder_of(study, trials):
    """The Ladder of the completed trials (None when none has completed)."""
    index = [o.metric for o in study.objectives].index(LOSS)
    rows = {"design": [], "params": [], "tokens": [], "loss": [], "seed": []}
    for t in trials:
        if t.state != TrialState.COMPLETE or t.values is None:
            continue
        point = dict(t.params)
        rung = study.rung_of(point)
        if rung is None:
            continue
        rows["design"].append(design_of(study, point))
        rows["params"].append(rung["params"])
        rows["tokens"].append(study.trial_config(point).train.tokens)
        rows["loss"].append(t.values[index])
        seed = RunRecord.of(t).seed
        rows["seed"].append(str(t.number if seed is None else seed))
    if not rows["loss"]:
        return None
    return Ladder(**rows, source=f"study {study.name}")


def reference_design(study, ladder) -> str:
    """The name of the study's reference design (`sweeps.study.reference`), else the first design."""
    params = design_params(study)
    name = None if params is None else point_name(params)
    return name if name in ladder.designs else ladder.designs[0]


def report_ladder(
    study, trials, tracker=None, stream=None, replicates: int = 200, out=None, plots: bool = True
) -> list[str]:
    """Fits the ladder of the completed trials, writes results/<name>/scaling/, logs the files
    (artifacts under `scaling/`) and the target verdicts (tags) to the parent run; returns the
    summary lines to print at the end of the launch. A ladder that cannot be fitted yet (too few
    completed rungs) says why and returns that line: it never fails the launch."""
    stream = stream or sys.stdout
    ladder = ladder_of(study, trials)
    rungs = 0 if ladder is None else len(ladder.rung_keys())
    if rungs < MIN_RUNGS:
        line = f"scaling: {rungs} of {len(study.rungs)} rungs completed; too few to fit a law (no fit)"
        print(line, file=stream)
        return [line]
    out = Path(out or study.results_dir() / "scaling")
    reference = reference_design(study, ladder)
    print(f"scaling ladder: {rungs} of {len(study.rungs)} rungs, reference {reference}", file=stream)
    text = io.StringIO()
    try:
        result = fit_and_predict(
            ladder,
            out,
            targets(study.scaling),
            reference=reference,
            replicates=replicates,
            plots=plots,
            stream=text,
        )
    except Exception as err:  # the runs are recorded; a fit that fails must not lose the launch
        print(text.getvalue(), end="", file=stream)
        why = str(err) if isinstance(err, LadderError) else f"{type(err).__name__}: {err}"
        line = f"scaling: no fit: {why} (again, once fixed: python -m sweeps.scaling fit {study.name})"
        print(line, file=stream)
        return [line]
    print(text.getvalue(), end="", file=stream)
    for path in result["files"].values():
        print(f"  {path}", file=stream)
    if tracker is not None:
        _log(tracker, result)
    lines = summary_lines(result["predictions"], reference)
    test = result["fits"].get("backtest") or {}
    if test.get("possible"):
        lines.append(backtest_line(test, reference))
    return lines or [f"scaling: fitted {', '.join(ladder.designs)} (one design: no differences to report)"]


def _log(tracker, result) -> None:
    for path in result["files"].values():
        tracker.log_file(tracker.parent_id, Path(path), "scaling")
    tags = {}
    for row in result["predictions"]:
        if row["verdict"] == "reference":
            continue
        tags[f"scaling.{row['target']}.{row['design']}"] = (
            f"{row['verdict']}: {row['diff']:+.4f} [{row['diff_lo']:+.4f}, {row['diff_hi']:+.4f}], "
            f"{row['extrapolation']:.3g}x beyond the largest rung"
        )
    fit = result["fit"]
    tags["scaling.law"] = fit.law + (" (shared exponents)" if fit.shared else "")
    tracker.set_tags(tracker.parent_id, tags)
