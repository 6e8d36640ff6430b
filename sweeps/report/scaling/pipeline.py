"""A scaling-law analysis of one ladder, end to end: fits, bootstrap intervals, predictions at the
targets, crossovers, the backtest, and their files (`fit_and_predict`)."""

from __future__ import annotations

import sys
from pathlib import Path

from sweeps.report.scaling import outputs
from sweeps.report.scaling.fitting import AUTO, compare_shared, fit
from sweeps.report.scaling.intervals import SEEDS, bootstrap
from sweeps.report.scaling.predict import (
    MAX_FACTOR,
    backtest,
    backtest_line,
    crossovers,
    path_ratio,
    predictions,
    summary_lines,
)
from sweeps.report.scaling.table import Ladder
from sweeps.study.ladder import LadderError
from sweeps.study.targets import Target


def fit_and_predict(
    ladder: Ladder,
    out_dir: Path | None,
    targets: list[Target],
    reference: str | None = None,
    law: str = AUTO,
    shared: bool = False,
    compare: bool = False,
    replicates: int = 200,
    seed: int = 0,
    rungs: str = SEEDS,
    max_factor: float = MAX_FACTOR,
    plots: bool = True,
    json_path: Path | None = None,
    stream=None,
) -> dict:
    """Fit, bootstrap, predict, cross, backtest; write the files under `out_dir` (fits.json,
    predictions.csv, crossover.json, loss_vs_compute.png, residuals.png) and print a summary."""
    stream = stream or sys.stdout
    reference = reference or ladder.designs[0]
    if reference not in ladder.designs:
        raise LadderError(
            f"{ladder.source}: reference {reference!r} is not a design of the table; designs: "
            + ", ".join(ladder.designs)
        )
    result = fit(ladder, law, shared)
    boot = bootstrap(ladder, result, replicates, seed, rungs)
    rows = predictions(ladder, result, boot, targets, reference, max_factor)
    if result.law == "compute":
        ratio = path_ratio(ladder, result, targets)
        for t in targets:
            if not 0.5 <= (t.tokens / t.params) / ratio <= 2:
                result.notes.append(
                    f"target {t.name} has {t.tokens / t.params:.3g} tokens per parameter, the ladder "
                    f"{ratio:.3g}: L(C) holds along the ladder's ratio only, so its prediction there is at "
                    "the same compute, not at that split of it"
                )
    cross = crossovers(ladder, result, boot, targets)
    test = backtest(ladder, result.law, shared, reference, replicates, seed, rungs)
    extra = {"reference": reference, "max_factor": max_factor}
    if compare and len(ladder.designs) > 1:
        extra["shared_vs_separate"] = compare_shared(ladder, result.law)
    doc = outputs.fits_document(result, boot, test, extra)
    files = {}
    if out_dir is not None:
        out_dir = Path(out_dir)
        files["fits"] = outputs.write_json(json_path or out_dir / "fits.json", doc)
        files["predictions"] = outputs.write_predictions(out_dir / "predictions.csv", rows)
        files["crossover"] = outputs.write_json(out_dir / "crossover.json", cross)
        if plots:
            files["plot"] = outputs.plot_loss_vs_compute(
                out_dir / "loss_vs_compute.png", ladder, result, boot, targets, rows
            )
            files["residuals"] = outputs.plot_residuals(out_dir / "residuals.png", ladder, result)
    elif json_path is not None:
        files["fits"] = outputs.write_json(json_path, doc)
    for note in result.notes:
        print(f"note: {note}", file=stream)
    for d, f in result.designs.items():
        values = ", ".join(f"{k} {v:.4g}" for k, v in f.natural.items())
        print(f"{d}: {values}; {f.points} points, residual rms {f.residual_rms:.4f}", file=stream)
    for line in summary_lines(rows, reference):
        print(line, file=stream)
    for pair, entry in cross["pairs"].items():
        print(
            f"{pair}: {entry['message']} ({entry['replicates_crossing']:.0%} of replicates cross)",
            file=stream,
        )
    print(backtest_line(test, reference), file=stream)
    return {
        "fit": result,
        "bootstrap": boot,
        "predictions": rows,
        "crossover": cross,
        "fits": doc,
        "files": files,
    }
