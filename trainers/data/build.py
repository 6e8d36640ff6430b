"""`build_datamodule(cfg, data_root)`: the data module registered for `cfg.data`'s kind
(`trainers.data.registry`); importing this module registers every kind: text, tokens, mqar."""

from __future__ import annotations

from trainers.config import TrialConfig
from trainers.data import mqar, shards, text  # noqa: F401  (importing them registers the kinds)
from trainers.data.registry import datamodule_class
from trainers.data.windows import LMDataModule


def build_datamodule(cfg: TrialConfig, data_root=None) -> LMDataModule:
    """The data module of `cfg.data`, sized for `cfg.max_steps` optimizer steps."""
    return datamodule_class(cfg.data)(
        cfg.data,
        data_root=data_root,
        batch_size=cfg.train.batch_size,
        train_batches=cfg.max_steps * cfg.train.grad_accum,
        val_batches=cfg.train.eval_batches,
        seed=cfg.seed,
    )
