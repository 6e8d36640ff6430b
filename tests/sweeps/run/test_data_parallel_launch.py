"""A study of 2-worker trials through the Ray backend: real DDP training (gloo on CPU processes)."""

from __future__ import annotations

import importlib
from collections import Counter
from types import SimpleNamespace

import pytest
from optuna.trial import TrialState

from sweeps.run.launch import launch
from sweeps.study import load_study
from sweeps.study.run_record import RunRecord
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


class InProcessTorchTrainer:
    """Ray Train's `TorchTrainer` as far as `fit_on_ray_train` uses it: runs the train loop of
    one worker (rank `InProcessTorchTrainer.rank`) in this process and hands back its return value."""

    rank = 0

    def __init__(self, train_loop, *, train_loop_config, **kwargs):
        self.loop, self.config = train_loop, train_loop_config

    def fit(self):
        try:
            value = self.loop(self.config)
        except Exception as err:  # Ray Train raises a TrainingFailedError with the worker's error inside
            raise RuntimeError(f"a Ray Train worker failed: {err!r}") from None
        return SimpleNamespace(return_value=value)


@pytest.mark.parametrize("outcome", ["diverged", "trained"])
def test_a_ray_train_workers_outcome_comes_back_to_the_trial(monkeypatch, outcome):
    """The two ends of the Ray Train path without starting it: a worker's `TrainingDiverged`
    becomes rank 0's return value and `fit_on_ray_train` raises it again for the trial (which
    then fails as diverged, as a one-process trial does); other ranks return nothing. The whole
    path, Ray Train's workers across two nodes included, is the cluster suite's 2-worker test."""
    import ray.train
    import ray.train.torch
    import ray.util

    from sweeps.run.backends.ray import train as ray_train
    from trainers import TrainingDiverged
    from trainers.config import TrialConfig

    def fit_process(cfg, **kwargs):
        assert cfg.train.num_threads == 1 and kwargs["lightning"]["strategy"] is not None
        if outcome == "diverged":
            raise TrainingDiverged(2, float("nan"))
        return {"val_loss": 1.5}

    fit_module = importlib.import_module("trainers.fit")  # `trainers.fit` is also the function
    monkeypatch.setattr(fit_module, "fit_process", fit_process)
    monkeypatch.setattr(ray.train.torch, "TorchTrainer", InProcessTorchTrainer)
    monkeypatch.setattr(
        ray.train, "get_context", lambda: SimpleNamespace(get_world_rank=lambda: InProcessTorchTrainer.rank)
    )
    monkeypatch.setattr(ray.util, "get_current_placement_group", lambda: None)
    monkeypatch.setattr(ray_train, "tag_worker_nodes", lambda rank, uri, run_id: None)
    task = SimpleNamespace(
        workers=2, worker_cpus=1, worker_gpus=0, number=0, run_id="0" * 32, tracking_uri=""
    )
    config = TrialConfig.from_dict({**TRIAL, "train": {**TRIAL["train"], "num_threads": None}})
    fit = ray_train.fit_on_ray_train(task, report_to_tune=False)
    if outcome == "diverged":
        with pytest.raises(TrainingDiverged) as err:
            fit(config)
        assert err.value.step == 2 and err.value.value != err.value.value  # nan
    else:
        assert fit(config) == {"val_loss": 1.5}
    monkeypatch.setattr(InProcessTorchTrainer, "rank", 1)
    with pytest.raises(RuntimeError, match="without rank 0's metrics"):
        fit(config)  # rank 1 returns nothing, whatever its outcome


@pytest.mark.slow
def test_a_diverging_two_worker_trial_on_ray_fails_as_diverged(tmp_path, shared_ray):
    """One trial through Ray Train's real start-up (most of its time, ~45-70 s here). In CI, the
    cluster suite's 2-worker test runs this path on two Ray nodes; the test above checks its two
    ends in the default suite."""
    study = two_worker_study(tmp_path, [1.0e30])
    assert launch(study) == 4  # nothing completed
    (failed,) = optuna_trials(study)
    assert failed.state == TrialState.FAIL and RunRecord.of(failed).fail_reason == "diverged"
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
    assert RunRecord.of(failed[0]).fail_reason == "diverged" and failed[0].params["train.lr"] == 1.0e30
    runs = mlflow_runs(study, "trial")
    assert sorted(r.info.status for r in runs) == ["FAILED", "FINISHED"]
    assert all(r.data.tags["sweep.workers"] == "2" for r in runs)
    for run in (r for r in runs if r.info.status == "FINISHED"):
        metrics = run.data.metrics
        assert metrics["final/tokens"] == study.base.train.tokens  # the budget counts every worker
        assert metrics["final/mem_ddp_buckets_mb"] == metrics["final/mem_grads_mb"] > 0
        assert {"final/val_loss", "final/tokens_per_s", "final/peak_mem_mb", "val_loss"} <= set(metrics)
