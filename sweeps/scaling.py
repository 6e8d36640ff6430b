"""`python -m sweeps.scaling fit FILE.csv --params COL --tokens COL --loss COL [--design COL]
[--seed COL] [--reference NAME] [--targets NAME=N:D ...] [--json OUT] [--out DIR]`: a scaling-law
fit of any table, with bootstrap intervals, predictions at the targets, crossovers, the backtest
and plots. `fit STUDY` (a study file, a study name or its results folder) fits the completed
trials of a study with a `scaling:` section, read from its Optuna storage, into
results/<name>/scaling/ (the columns are the study's: rung N and tokens, val_loss, seed)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sweeps.report.scaling.of_study import report_ladder
from sweeps.report.scaling.pipeline import fit_and_predict
from sweeps.report.scaling.predict import MAX_FACTOR, parse_target
from sweeps.report.scaling.table import read_csv
from sweeps.run.storage import load_trials
from sweeps.study.ladder import LadderError
from sweeps.study.load import find_study
from sweeps.study.targets import paper_targets


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m sweeps.scaling", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit", help="fit a ladder read from a CSV")
    f.add_argument("table", help="a CSV file, one row per run; or a study file, name or results folder")
    f.add_argument("--params", help="column of N (non-embedding parameters, see the docs)")
    f.add_argument("--tokens", help="column of D (training tokens)")
    f.add_argument("--loss", help="column of the loss")
    f.add_argument("--design", help="column of the design name (default: one design, 'all')")
    f.add_argument("--seed", help="column of the seed (default: rows are resampled)")
    f.add_argument("--reference", help="design the others are compared with (default: the first)")
    f.add_argument("--targets", nargs="+", metavar="NAME=N:D", help="default: the paper's small..xl")
    f.add_argument("--json", type=Path, help="fits.json path (default: OUT/fits.json)")
    f.add_argument("--out", type=Path, help="folder of the files (default: results/scaling/<table name>)")
    f.add_argument("--law", choices=["auto", "joint", "compute"], default="auto")
    f.add_argument("--shared-exponents", action="store_true", help="one alpha, beta for all designs")
    f.add_argument("--compare", action="store_true", help="shared vs separate exponents: AIC, held-out rungs")
    f.add_argument("--replicates", type=int, default=200, help="bootstrap replicates (default 200)")
    f.add_argument("--max-factor", type=float, default=MAX_FACTOR, help="extrapolation limit of a verdict")
    f.add_argument(
        "--resample",
        choices=["seeds", "within-size", "rungs"],
        default="seeds",
        help="seeds within every rung (default); also rungs among those of their size, or among all rungs",
    )
    f.add_argument("--no-plots", action="store_true")
    args = p.parse_args(argv)
    if not args.table.endswith(".csv"):
        study = find_study(args.table)
        if study is not None:
            return fit_study(study, args)
    missing = [f"--{k}" for k in ("params", "tokens", "loss") if getattr(args, k) is None]
    if missing:
        p.error(f"a CSV table needs {', '.join(missing)} ({args.table!r} is not a study either)")
    try:
        ladder = read_csv(args.table, args.params, args.tokens, args.loss, args.design, args.seed)
        targets = [parse_target(t) for t in args.targets] if args.targets else paper_targets()
        out = args.out or Path("results") / "scaling" / Path(args.table).stem
        fit_and_predict(
            ladder,
            out,
            targets,
            reference=args.reference,
            law=args.law,
            shared=args.shared_exponents,
            compare=args.compare,
            replicates=args.replicates,
            rungs=args.resample,
            max_factor=args.max_factor,
            plots=not args.no_plots,
            json_path=args.json,
        )
    except LadderError as err:
        hint = f" (N: column {args.params!r}, D: column {args.tokens!r}, loss: column {args.loss!r})"
        print(f"error: {err}{hint if 'column' not in str(err) else ''}", file=sys.stderr)
        return 2
    print(f"wrote {out}/", file=sys.stderr)
    return 0


def fit_study(study, args) -> int:
    """The ladder of `study`'s completed trials, analysed as a launch does (without MLflow)."""
    if not study.rungs:
        print(f"error: study {study.name!r} has no scaling: section", file=sys.stderr)
        return 2
    try:
        trials = load_trials(study.name, study.storage_url())
    except KeyError:
        print(f"error: study {study.name!r} has no runs in {study.storage_url()}", file=sys.stderr)
        return 2
    out = Path(args.out or study.results_dir() / "scaling")
    lines = report_ladder(study, trials, None, sys.stdout, args.replicates, out, not args.no_plots)
    print("\n".join(lines))
    return 0 if (out / "fits.json").is_file() else 3


if __name__ == "__main__":
    sys.exit(main())
