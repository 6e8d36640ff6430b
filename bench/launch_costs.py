"""`python -m bench.launch_costs <study.yaml> [--set KEY=VALUE ...]`: what a launch pays once.

Runs the study in this process (a fresh results folder, MLflow database and Optuna journal under
a temporary folder) and times the parts a launch pays whatever its trials: the cost probe, and
the fronts after the last trial (`sweeps.pareto.analyse`: statistics, files, plots, MLflow
uploads and tags), broken down by a profile of that one call. The trials' own time is the rest.
Wall seconds and CPU seconds (this process and the probe's child processes: what a busy machine
does not inflate) of each. Prints one JSON object; docs/bench/launch_costs.md holds the numbers.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import sys
import tempfile
import time
from pathlib import Path

# What the fronts' step spends its time on: (label, function name as the profile shows it).
PARTS = (
    ("statistics (p_front bootstrap)", "p_front"),
    ("PNG plots", "_plots"),
    ("HTML page", "_html"),
    ("loss vs cost (MLflow histories, figure)", "_loss_at_equal_cost"),
    ("MLflow artifact uploads", "log_file"),
    ("MLflow child tags", "_tag_children"),
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.launch_costs", description=__doc__.split("\n\n")[0])
    p.add_argument("study")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    from sweeps import pareto
    from sweeps import probe as probe_module
    from sweeps.launch import launch
    from sweeps.spec import load_study

    folder = Path(tempfile.mkdtemp(prefix="launch-costs-"))
    overrides = [
        *args.overrides,
        f"output.dir={folder / 'results'}",
        f"output.mlflow_uri=sqlite:///{folder}/m.db",
    ]
    study = load_study(args.study, overrides)
    timed: dict[str, float] = {}
    analyse = pareto.analyse
    profile = cProfile.Profile()

    def timed_analyse(*a, **k):
        start, cpu = time.perf_counter(), time.process_time()
        try:
            return profile.runcall(analyse, *a, **k)
        finally:
            timed["fronts_s"] = time.perf_counter() - start
            timed["fronts_cpu_s"] = time.process_time() - cpu

    pareto.analyse = timed_analyse
    probes = []
    probe_class = probe_module.Probe

    class CountedProbe(probe_class):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            probes.append(self)

        def ensure(self, configs):
            cpu = _cpu_with_children()
            try:
                return super().ensure(configs)
            finally:
                timed["probe_cpu_s"] = timed.get("probe_cpu_s", 0.0) + _cpu_with_children() - cpu

    probe_module.Probe = CountedProbe
    start = time.perf_counter()
    code = launch(study, stream=sys.stderr)
    wall = time.perf_counter() - start
    stats = pstats.Stats(profile)
    parts = {}
    for label, name in PARTS:
        found = [v[3] for (_, _, fn), v in stats.stats.items() if fn == name]  # cumulative seconds
        parts[label] = round(max(found), 2) if found else 0.0
    html = study.results_dir() / "pareto" / "pareto.html"
    out = {
        "exit": code,
        "wall_s": round(wall, 1),
        "probe_s": round(sum(p.seconds for p in probes), 1),
        "probe_cpu_s": round(timed.get("probe_cpu_s", 0.0), 1),
        "fronts_s": round(timed.get("fronts_s", 0.0), 1),
        "fronts_cpu_s": round(timed.get("fronts_cpu_s", 0.0), 1),
        "fronts_parts_s": parts,
        "html_bytes": html.stat().st_size if html.is_file() else 0,
        "results": str(folder),
    }
    print(json.dumps(out, indent=1))
    return code


def _cpu_with_children() -> float:
    """CPU seconds of this process and its waited-for children (the probe's timing processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    sys.exit(main())
