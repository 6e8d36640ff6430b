"""`python -m tests.sweeps.fake_launch STUDY.yaml`: the launcher with the stand-in fit (tests only)."""

import sys

from sweeps.run.launch import exit_now, launch
from sweeps.study import load_study
from tests.sweeps.fake_fit import PROBE, fit

if __name__ == "__main__":
    exit_now(launch(load_study(sys.argv[1], sys.argv[2:]), fit=fit, probe=PROBE))
