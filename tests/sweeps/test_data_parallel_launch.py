"""A study of 2-worker trials through the Ray backend: real DDP training (gloo on CPU processes)."""

from __future__ import annotations

from collections import Counter

import pytest
from optuna.trial import TrialState

from sweeps.launch import launch
from sweeps.spec import load_study
from tests.sweeps.helpers import TRIAL, mlflow_runs, optuna_trials, write_study


def two_worker_study(tmp_path, lrs):
    """Trials of 2 data-parallel workers on Ray, one per learning rate, without gradient clipping
    (so that a huge rate diverges)."""
    path = write_study(
        tmp_path,
        repeats=1,
        backend="ray",
        resources={"workers": 2, "cpus": 1},
        ray={"num_cpus": 2},
        trial={**TRIAL, "model": {**TRIAL["model"], "residual": {"kind": "value_residual"}}},
        space={"train.lr": {"choices": lrs}},
    )
    path.write_text(path.read_text().replace("num_threads: 1", "num_threads: 1\n    grad_clip: null"))
    return load_study(path)


def test_a_diverging_two_worker_trial_on_ray_fails_as_diverged(tmp_path, shared_ray):
    """The default suite's check of the Ray Train path (one trial: Ray Train's start-up is most of
    its time). That a 2-worker trial on Ray records what a 1-worker one does is checked by
    tests/cluster (across two nodes) and, here, by the slow test below."""
    study = two_worker_study(tmp_path, [1.0e30])
    assert launch(study) == 4  # nothing completed
    (failed,) = optuna_trials(study)
    assert failed.state == TrialState.FAIL and failed.user_attrs["fail_reason"] == "diverged"
    (run,) = mlflow_runs(study, "trial")
    assert run.info.status == "FAILED" and run.data.tags["sweep.workers"] == "2"


@pytest.mark.slow
def test_two_worker_trials_on_ray_record_like_single_ones_and_a_diverging_one_fails(tmp_path, shared_ray):
    study = two_worker_study(tmp_path, [0.003, 1.0e30])  # one trial that trains, one that diverges
    assert study.base.train.workers == 2
    assert launch(study) == 0
    states = Counter(t.state for t in optuna_trials(study))
    assert states == {TrialState.COMPLETE: 1, TrialState.FAIL: 1}
    failed = [t for t in optuna_trials(study) if t.state == TrialState.FAIL]
    assert failed[0].user_attrs["fail_reason"] == "diverged" and failed[0].params["train.lr"] == 1.0e30
    runs = mlflow_runs(study, "trial")
    assert sorted(r.info.status for r in runs) == ["FAILED", "FINISHED"]
    assert all(r.data.tags["sweep.workers"] == "2" for r in runs)
    for run in (r for r in runs if r.info.status == "FINISHED"):
        metrics = run.data.metrics
        assert metrics["final/tokens"] == study.base.train.tokens  # the budget counts every worker
        assert metrics["final/mem_ddp_buckets_mb"] == metrics["final/mem_grads_mb"] > 0
        assert {"final/val_loss", "final/tokens_per_s", "final/peak_mem_mb", "val_loss"} <= set(metrics)
