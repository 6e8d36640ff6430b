"""Tiny studies written into a test's folder, and readers of what a launch recorded."""

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import yaml
from optuna.trial import TrialState

from sweeps.run.storage import load_trials
from sweeps.run.store_template import seed_store
from sweeps.run.tracking import client
from tests.factories import tiny_trial

ROOT = Path(__file__).resolve().parents[2]

TRIAL = tiny_trial(model={"d_model": 64, "d_ff": 128})


def write_study(folder: Path, name: str = "t", **extra) -> Path:
    """The study file; beside it an MLflow database with its tables (a copy of an empty one, as a
    launch makes: sweeps.run.store_template), unless the folder has one already. A study's own
    `output` still decides where it records."""
    tree = {
        "name": name,
        "trial": TRIAL,
        "space": {
            "model.residual": {"choices": {"baseline": {"kind": "none"}, "sat": {"kind": "value_residual"}}}
        },
        "repeats": 2,
        "backend": "local",
        "output": {"dir": str(folder / "results"), "mlflow_uri": f"sqlite:///{folder / 'mlflow.db'}"},
        **extra,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    seed_store(f"sqlite:///{folder / 'mlflow.db'}")  # the launcher's copy of an empty store, if none yet
    return path


def optuna_trials(study):
    return load_trials(study.name, study.storage_url())


def mlflow_runs(study, role: str):
    c = client(study.mlflow_uri())
    exp = c.get_experiment_by_name(study.experiment_name)
    return c.search_runs([exp.experiment_id], filter_string=f"tags.`sweep.role` = '{role}'", max_results=1000)


def artifacts(study, run) -> list[str]:
    c = client(study.mlflow_uri())
    out = []
    for item in c.list_artifacts(run.info.run_id):
        if item.is_dir:
            out += [f.path for f in c.list_artifacts(run.info.run_id, item.path)]
        else:
            out.append(item.path)
    return out


def start(path, **env_extra):
    """The launcher with the stand-in fit in a subprocess (tests.sweeps.fake_launch), each run
    taking 1.5 s, so that a signal can land mid-trial; `env_extra`: more of its environment."""
    env = {**os.environ, "FAKE_FIT_SLEEP": "1.5", "PYTHONPATH": str(ROOT), **env_extra}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.sweeps.fake_launch", str(path)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def wait_for_complete(study, n, proc, timeout=120):
    """Until n runs are COMPLETE and the next one is RUNNING (so a signal lands mid-trial)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        journal = Path(study.storage_url()[len("journal:") :])
        if journal.exists():
            try:
                states = Counter(t.state for t in optuna_trials(study))
            except KeyError:  # the journal file is there, the study's record not yet
                states = Counter()
            if states[TrialState.COMPLETE] >= n and states[TrialState.RUNNING]:
                time.sleep(0.3)
                return
        time.sleep(0.3)
    raise AssertionError("the launch did not finish a trial in time")
