"""`python -m tests.sweeps.fake_launch STUDY.yaml`: the launcher with the stand-in fit (tests only).

FAKE_FINISH_DELAY (seconds) holds every child run's final MLflow write (`Tracker.finish_child`,
made on the driver's MLflow thread after Optuna is told) that long, so that a kill lands between
the two (tests/sweeps/run/test_launch.py). FAKE_LAUNCH_MODULES=1 prints, at the end, which of
torch and Lightning the launcher imported (none, when its trials run elsewhere or are the stand-in's:
tests/sweeps/run/test_kept_ray.py)."""

import os
import sys
import time

from sweeps.run.launch import exit_now, launch
from sweeps.run.tracking import Tracker
from sweeps.study import load_study
from tests.sweeps.fake_fit import PROBE, fit


def _delayed(finish, delay: float):
    def held(*args, **kwargs):
        time.sleep(delay)
        return finish(*args, **kwargs)

    return held


if __name__ == "__main__":
    if delay := float(os.environ.get("FAKE_FINISH_DELAY", "0")):
        Tracker.finish_child = _delayed(Tracker.finish_child, delay)
    rc = launch(load_study(sys.argv[1], sys.argv[2:]), fit=fit, probe=PROBE)
    if os.environ.get("FAKE_LAUNCH_MODULES") == "1":
        heavy = sorted(m for m in ("lightning", "torch") if m in sys.modules)
        print("launcher imported:", heavy, file=sys.stderr)
    exit_now(rc)
