"""Data-parallel trials (`train.workers`): real DDP on CPU processes (gloo), against one process."""

from __future__ import annotations

import json
from pathlib import Path

import lightning.pytorch as pl
import pytest

from arch.configtree import ConfigError
from tests.trainers.conftest import GATED
from trainers import TrainingDiverged, TrialConfig
from trainers.fit import fit


class LossFile(pl.Callback):
    """Rank 0 writes the (global) training loss of every step to `path` (picklable, for workers)."""

    def __init__(self, path):
        self.path, self.losses = str(path), []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.losses.append(float(trainer.callback_metrics["train_loss"]))
        if trainer.is_global_zero:
            Path(self.path).write_text(json.dumps(self.losses))


def _losses(tree, path):
    metrics = fit(TrialConfig.from_dict(tree), callbacks=[LossFile(path)])
    return metrics, json.loads(Path(path).read_text())


def test_two_workers_train_the_one_worker_run(tiny_tree, tmp_path):
    tree = tiny_tree(model={"residual": GATED}, train={"tokens": 8 * 4 * 32, "eval_every": 4})
    one, a = _losses(tree, tmp_path / "one.json")
    two, b = _losses({**tree, "train": {**tree["train"], "workers": 2}}, tmp_path / "two.json")
    assert len(a) == len(b) == 8
    for x, y in zip(a, b, strict=True):
        assert abs(x - y) <= 1e-5 * abs(x)
    assert abs(one["val_loss"] - two["val_loss"]) <= 1e-5 * one["val_loss"]
    assert one["tokens"] == two["tokens"] and one["steps"] == two["steps"]  # the budget is global
    # A worker holds the model's state as one process does, plus DDP's buckets (one more copy of the
    # gradients), and the activations of its half of the batch.
    assert two["mem_ddp_buckets_mb"] == pytest.approx(two["mem_grads_mb"], rel=1e-6)
    half, _ = _losses({**tree, "train": {**tree["train"], "batch_size": 2}}, tmp_path / "half.json")
    expected = half["peak_mem_mb"] + two["mem_ddp_buckets_mb"]
    assert two["peak_mem_mb"] == pytest.approx(expected, rel=0.02)
    assert two["peak_mem_mb"] < one["peak_mem_mb"]


def test_a_diverging_two_worker_run_raises_training_diverged(tiny_tree):
    tree = tiny_tree(train={"lr": 1e30, "grad_clip": None, "warmup_frac": 0.0, "workers": 2})
    with pytest.raises(TrainingDiverged, match=r"training diverged at step \d+"):
        fit(tree)


def test_the_global_batch_must_split_evenly(tiny_tree):
    with pytest.raises(ConfigError, match=r"train.batch_size: given 4; allowed: a multiple of workers \(3\)"):
        TrialConfig.from_dict(tiny_tree(train={"workers": 3}))
