"""`python -m bench.launch_stages`: where a launch's fixed cost goes, stage by stage.

bench.orchestrator's study (one architecture, N seeds, backend ray, one trial at a time) launched in
this process, with a time stamp at each stage: imports, `connect` (Ray's start, MLflow's store
beside it), the cost probe, `backend.run` and in it each trial's MLflow child run (start, end, its
`fit`), the fronts, `disconnect`. The first trial's time over its `fit` is what starting the first
trial process costs. Run it on a quiet machine (docs/bench/launch_costs.md has the numbers).
"""

from __future__ import annotations

import time

T0 = time.time()  # before the project's imports: they are a stage too

import argparse  # noqa: E402
import functools  # noqa: E402
import io  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402

import sweeps.run.launch as launcher  # noqa: E402
from bench.orchestrator import TRIAL  # noqa: E402
from sweeps.run.backends.ray.backend import RayBackend  # noqa: E402
from sweeps.run.probe import Probe  # noqa: E402
from sweeps.run.tracking import client  # noqa: E402
from sweeps.study import load_study  # noqa: E402

IMPORTED = time.time()


def timed(owner, name: str, label: str, stamps: list) -> None:
    """Replaces owner.name with itself timed: (label, start since T0, seconds) into `stamps`."""
    f = getattr(owner, name)

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        start = time.time()
        try:
            return f(*args, **kwargs)
        finally:
            stamps.append((label, start - T0, time.time() - start))

    setattr(owner, name, wrapper)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.launch_stages", description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=4)
    p.add_argument("--tokens", type=int, default=102400)
    p.add_argument("--keep-ray", action="store_true", help="ray.keep: join the kept Ray (or start it)")
    args = p.parse_args(argv)
    stamps: list = []
    for owner, name in ((RayBackend, "connect"), (Probe, "ensure"), (RayBackend, "run"),
                        (launcher, "report_fronts"), (RayBackend, "disconnect")):  # fmt: skip
        timed(owner, name, name, stamps)
    folder = Path(tempfile.mkdtemp(prefix="bench-stages-"))
    uri = f"sqlite:///{folder}/mlflow.db"
    trial = {**TRIAL, "train": {**TRIAL["train"], "tokens": args.tokens}}
    study = {"name": "launch_stages", "trial": trial, "repeats": args.trials, "max_concurrent": 1,
             "backend": "ray", "resources": {"cpus": 2},
             "output": {"mlflow_uri": uri, "dir": str(folder)}, "ray": {"keep": args.keep_ray}}  # fmt: skip
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    loaded = load_study(path)
    code = launcher.launch(loaded, stream=io.StringIO())
    end = time.time() - T0
    print(f"imports        0.00  {IMPORTED - T0:6.2f} s")
    for label, at, took in stamps:
        if took > 0.01:  # the probe's later calls find everything cached
            print(f"{label:14s} {at:5.2f}  {took:6.2f} s")
    c = client(uri)
    runs = c.search_runs([e.experiment_id for e in c.search_experiments()], "tags.`sweep.role` = 'trial'")
    for i, r in enumerate(sorted(runs, key=lambda r: r.info.start_time)):
        start, stop = r.info.start_time / 1000 - T0, r.info.end_time / 1000 - T0
        fit = r.data.metrics.get("final/fit_s", float("nan"))
        took = stop - start
        print(f"trial {i:<8d} {start:5.2f}  {took:6.2f} s (fit {fit:.2f} s, outside it {took - fit:.2f} s)")
    print(f"exit status {code}, {end:.2f} s in all")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
