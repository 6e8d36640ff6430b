"""`python -m bench.launch_costs {launch,probe,fronts} <study.yaml> [--set KEY=VALUE ...]`: what a
launch pays once, whatever its trials.

- `launch`: runs the study in this process (a fresh results folder, MLflow database and Optuna
  journal under a temporary folder) and times the cost probe and the fronts after the last trial;
- `probe`: the cost probe alone (`Probe.ensure` of the study's architectures, fresh cache);
- `fronts --results DIR`: the fronts step again (`sweeps.report.analysis.report_fronts`: statistics, files,
  plots, MLflow uploads and tags) on the study a `launch` left in DIR, with `--cold` its imports
  (matplotlib, plotly) counted too.

Each part in wall seconds and CPU seconds (this process and the probe's child processes); on a
shared machine wall time grows with the neighbours' load and CPU time much less. The fronts step
is broken down by a profile of that one call. Prints one JSON object; the measured numbers and
their commands: docs/bench/launch_costs.md.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import sys
import tempfile
import time
from pathlib import Path

from sweeps.report.analysis import report_fronts
from sweeps.run import launch as launch_module
from sweeps.run.probe import Probe
from sweeps.run.storage import load_trials
from sweeps.run.tracking import Tracker
from sweeps.study import load_study

# What the fronts step spends its time on: (label, function name as the profile shows it).
PARTS = (
    ("statistics (p_front bootstrap)", "p_front"),
    ("front PNGs and HTML", "_plots"),
    ("HTML page", "_html"),
    ("loss vs cost (MLflow histories, figure)", "_loss_at_equal_cost"),
    ("MLflow artifact uploads", "log_file"),
    ("MLflow child tags", "tag_children"),
    ("the summary (markdown, description)", "note"),
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.launch_costs", description=__doc__.split("\n\n")[0])
    p.add_argument("part", choices=("launch", "probe", "fronts"))
    p.add_argument("study")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    p.add_argument("--results", default=None, help="fronts: the folder a `launch` run printed")
    p.add_argument("--cold", action="store_true", help="fronts: count the plotting imports too")
    return p.parse_args(argv)


def cpu_seconds() -> float:
    """CPU seconds of this process and its waited-for children (the probe's timing processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Clock:
    """Wall and CPU seconds of a block, added to `into[name + "_s"]` and `into[name + "_cpu_s"]`."""

    def __init__(self, into: dict, name: str):
        self.into, self.name = into, name

    def __enter__(self):
        self.wall, self.cpu = time.perf_counter(), cpu_seconds()

    def __exit__(self, *exc):
        for key, value in ((f"{self.name}_s", time.perf_counter() - self.wall),
                           (f"{self.name}_cpu_s", cpu_seconds() - self.cpu)):  # fmt: skip
            self.into[key] = round(self.into.get(key, 0.0) + value, 2)


def study_in(folder: Path, args):
    where = [f"output.dir={folder / 'results'}", f"output.mlflow_uri=sqlite:///{folder}/m.db"]
    return load_study(args.study, [*args.overrides, *where])


def profiled_fronts(out: dict, analyse, **kwargs) -> dict:
    """`report_fronts` (`sweeps.report.analysis`) timed and profiled: its breakdown by `PARTS`."""
    profile = cProfile.Profile()
    with Clock(out, "fronts"):
        result = profile.runcall(analyse, **kwargs)
    stats = pstats.Stats(profile)
    parts = {}
    for label, name in PARTS:
        found = [v[3] if len(v) > 3 else 0.0 for (_, _, fn), v in stats.stats.items() if fn == name]
        parts[label] = round(max(found), 2) if found else 0.0
    out["fronts_parts_s"] = parts
    return result


def pareto_files(study) -> dict:
    folder = study.results_dir() / "pareto"
    files = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    return {"files": [p.name for p in files], "bytes": sum(p.stat().st_size for p in files)}


def run_launch(args, out: dict) -> int:
    folder = Path(tempfile.mkdtemp(prefix="launch-costs-"))
    study = study_in(folder, args)
    unprofiled = launch_module.report_fronts
    launch_module.report_fronts = lambda study, trials, **kw: profiled_fronts(
        out, unprofiled, study=study, trials=trials, **kw
    )
    probe_class = launch_module.Probe

    class TimedProbe(probe_class):
        def ensure(self, configs):
            with Clock(out, "probe"):
                return super().ensure(configs)

    launch_module.Probe = TimedProbe
    with Clock(out, "launch"):
        code = launch_module.launch(study, stream=sys.stderr)
    out.update(exit=code, results=str(folder), **pareto_files(study))
    return code


def run_probe(args, out: dict) -> int:
    study = study_in(Path(tempfile.mkdtemp(prefix="launch-costs-probe-")), args)
    import torch  # noqa: F401  (imported before a launch's probe too)

    probe = Probe(study, stream=sys.stderr)
    with Clock(out, "probe"):
        probe.ensure(study.trial_config(p) for p in study.planned_points())
    return 0


def run_fronts(args, out: dict) -> int:
    if args.results is None:
        raise SystemExit("fronts: --results DIR (the folder a `launch` run printed) is required")
    study = study_in(Path(args.results), args)
    if not args.cold:
        import matplotlib.pyplot  # noqa: F401
        import plotly.graph_objects  # noqa: F401
    tracker = Tracker.of_latest_launch(study.mlflow_uri(), study.experiment_name, study.name)
    with open(os.devnull, "w") as quiet:
        trials = load_trials(study.name, study.storage_url())
        profiled_fronts(out, report_fronts, study=study, trials=trials, tracker=tracker, stream=quiet)
    out.update(pareto_files(study))
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    out: dict = {"part": args.part}
    code = {"launch": run_launch, "probe": run_probe, "fronts": run_fronts}[args.part](args, out)
    out["load_average_1min"] = round(os.getloadavg()[0], 1)
    print(json.dumps(out, indent=1))
    return code


if __name__ == "__main__":
    sys.exit(main())
