"""`python -m sweeps.pareto <study.yaml | name> [--set ...] [--no-mlflow]`: the fronts again, from
the study's Optuna storage, logged to its latest launch's parent run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from arch.configtree import ConfigError
from sweeps.report.analysis import report_fronts
from sweeps.run.storage import load_trials
from sweeps.run.tracking import Tracker
from sweeps.study import load_study
from sweeps.study.load import study_path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m sweeps.pareto", description=__doc__.split("\n\n")[0])
    p.add_argument("study", help="a study YAML file, or the name of one in studies/")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    p.add_argument("--no-mlflow", action="store_true", help="only print and write results/<name>/pareto/")
    args = p.parse_args(argv)
    try:
        study = load_study(study_path(args.study), args.overrides)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    url = study.storage_url()
    if url.startswith("journal:") and not Path(url[len("journal:") :]).is_file():
        print(f"no Optuna study {study.name!r} in {url}: run the study first", file=sys.stderr)
        return 1
    try:
        tracker = (
            None
            if args.no_mlflow
            else Tracker.of_latest_launch(study.mlflow_uri(), study.experiment_name, study.name)
        )
        report_fronts(study, load_trials(study.name, study.storage_url()), tracker=tracker)
    except KeyError:
        print(
            f"no Optuna study {study.name!r} in {study.storage_url()}: run the study first", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
