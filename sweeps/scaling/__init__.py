"""Scaling ladders: fit how each design's loss falls with size and data, predict it at larger
scales with bootstrap intervals, and say where two designs cross.

Modules: `table` (the rows, read from a CSV), `law` (the laws and the robust objective), `fit`
(identifiability, the fits, shared exponents), `intervals` (the paired bootstrap),
`predict` (targets, verdicts, crossover, backtest), `outputs` (files and plots), `targets` (the
paper's scales), `ladder` (a study's `scaling:` section expanded into rungs), `study` (a study's
ladder: dry-run lines, the Ladder of its trials, the analysis at the end of a launch), `__main__`
(the CLI). `analyse(ladder, out_dir, ...)` runs all of it.

Which N. The fits take N = non-embedding parameters: every parameter except the vocabulary tables
(the token embedding, and the output head when it is not tied to it), as Kaplan et al. 2020 count
it. Three reasons, in order: (1) a CPU ladder here is byte-level (256 symbols) while the paper's
targets use a 32,000-token vocabulary, so a total count would put 25-65M parameters of lookup
table into the targets that no rung ever varied; the non-embedding count means the same model
capacity at both ends; (2) at ladder sizes the tables' share changes with width (a byte table is
256 x d_model), which bends a law in total N (Kaplan's figure 6; Pearce and Song 2024 trace the
Kaplan/Chinchilla exponent gap to this choice); (3) C = 6 N D then counts the FLOPs of the
matrices that do the work. Chinchilla (Hoffmann et al. 2022) counts total parameters; its
published ladder fits here too, with whatever column is given (`--params`). Designs add their
own parameters (a SATFormer gate: under 0.1% at the paper's scales) and each rung counts them;
targets are counted on the baseline model (`targets.non_embedding_params`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from sweeps.scaling.fitting import AUTO, LadderFit, compare_shared, fit, identify
from sweeps.scaling.intervals import SEEDS, Bootstrap, bootstrap
from sweeps.scaling.predict import (
    MAX_FACTOR,
    Target,
    backtest,
    backtest_line,
    crossovers,
    path_ratio,
    predictions,
    summary_lines,
)
from sweeps.scaling.table import ALL, Ladder, LadderError, read_csv

__all__ = [
    "ALL",
    "Bootstrap",
    "Ladder",
    "LadderError",
    "LadderFit",
    "Target",
    "analyse",
    "bootstrap",
    "fit",
    "identify",
    "read_csv",
]


def analyse(
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
    from sweeps.scaling import outputs

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
