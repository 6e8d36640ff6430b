"""A launch killed with SIGKILL in the middle of a real trial with `train.checkpoint_every`: the
next launch resumes the trial from its checkpoint in the same MLflow child run, and it ends with
the val_loss of an uninterrupted run."""

import copy
import os
import subprocess
import sys
import time
from pathlib import Path

from optuna.trial import TrialState

from sweeps.run.launch import launch
from sweeps.run.tracking import client
from sweeps.study import load_study
from sweeps.study.run_record import RunRecord
from tests.sweeps.fake_fit import PROBE
from tests.sweeps.helpers import TRIAL, mlflow_runs, optuna_trials, write_study
from trainers.checkpoint_files import checkpoints, defect
from trainers.fit import fit

ROOT = Path(__file__).resolve().parents[3]
STEPS, EVERY = 32, 8  # optimizer steps of 8 x 32 tokens; a checkpoint every 8

# The launcher with the real trainers.fit, slowed down by a pause after every step (so that the
# test can kill it mid-trial) and the stand-in cost probe.
SCRIPT = """
import sys, time
import lightning.pytorch as pl
from trainers.fit import fit as train
from sweeps.run.launch import launch
from sweeps.study import load_study
from tests.sweeps.fake_fit import PROBE

class Pause(pl.Callback):
    def on_train_batch_end(self, *args):
        time.sleep(0.15)

def fit(config, *, callbacks=(), **kw):
    return train(config, callbacks=[*callbacks, Pause()], **kw)

sys.exit(launch(load_study(sys.argv[1]), fit=fit, probe=PROBE))
"""


def _killed_mid_trial(tmp_path, **resume_with):
    """A local launch of one real trial, killed after the trial's second checkpoint; returns the
    study to resume with (`resume_with`: other study keys for the next launch) and the MLflow run."""
    trial = copy.deepcopy(TRIAL)
    trial["train"].update(tokens=STEPS * 8 * 32, checkpoint_every=EVERY * 8 * 32, eval_every=8)
    space = {"model.residual": {"choices": {"sat": {"kind": "value_residual"}}}}
    path = write_study(tmp_path, trial=trial, repeats=1, space=space)
    study = load_study(path)
    script = tmp_path / "launch.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(path)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    root = study.results_dir() / "checkpoints"
    deadline = time.monotonic() + 240
    while True:
        folders = list(root.glob("*")) if root.is_dir() else []
        valid = [p for f in folders for p in checkpoints(f) if defect(p) is None]
        if len(valid) >= 2:
            break
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.monotonic() < deadline, "no second checkpoint in time"
        time.sleep(0.05)
    proc.kill()  # SIGKILL, mid-trial, after its second checkpoint
    proc.wait(30)
    (first_run,) = mlflow_runs(study, "trial")
    assert first_run.info.status == "RUNNING"
    if resume_with:  # backend, ray, max_concurrent: not part of the experiment
        path = write_study(tmp_path, trial=trial, repeats=1, space=space, **resume_with)
    return load_study(path), first_run


def _assert_resumed_as_uninterrupted(study, first_run):
    (run,) = mlflow_runs(study, "trial")  # the same child run, no second one
    assert run.info.run_id == first_run.info.run_id and run.info.status == "FINISHED"
    assert run.data.tags["sweep.status"] == "ok" and run.data.tags["sweep.resumes"] == "1"
    assert run.data.tags["sweep.resumed_from"] in ("step000000016.ckpt", "step000000024.ckpt")
    assert "sweep.error" not in run.data.tags
    trials = optuna_trials(study)
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.COMPLETE]
    assert RunRecord.of(trials[1]).resumed_from == run.data.tags["sweep.resumed_from"]
    root = study.results_dir() / "checkpoints"
    assert not root.exists() or not list(root.iterdir())  # the ended run's checkpoints are removed

    config = study.trial_config(dict(trials[1].params), RunRecord.of(trials[1]).seed)
    plain = {**config.to_dict()}
    plain["train"] = {**plain["train"], "checkpoint_every": None}
    uninterrupted = fit(plain)
    assert run.data.metrics["final/val_loss"] == uninterrupted["val_loss"]
    history = client(study.mlflow_uri()).get_metric_history(run.info.run_id, "train_loss")
    assert max(m.step for m in history) >= STEPS - 2  # the curve went on to the end in this run


def test_a_killed_launch_resumes_its_trial_in_the_same_mlflow_run(tmp_path):
    study, first_run = _killed_mid_trial(tmp_path)
    assert launch(study, probe=PROBE) == 0
    _assert_resumed_as_uninterrupted(study, first_run)


def test_the_ray_backend_resumes_the_trial_a_killed_local_launch_left(tmp_path, shared_ray):
    study, first_run = _killed_mid_trial(tmp_path, backend="ray", ray={"num_cpus": 2})
    assert launch(study, probe=PROBE) == 0
    _assert_resumed_as_uninterrupted(study, first_run)
