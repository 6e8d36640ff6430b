"""Offline data modules: text corpora, pre-tokenised shards, and MQAR.

`build_datamodule(cfg, data_root)` picks the module for `cfg.data` by its config type.
"""

from __future__ import annotations

from trainers.config import MQARDataConfig, TextDataConfig, TokenDataConfig, TrialConfig
from trainers.data.corpora import CorpusUnavailable, load_corpus
from trainers.data.mqar import MQARDataModule
from trainers.data.shards import TokenDataModule
from trainers.data.text import TextDataModule
from trainers.data.windows import LMDataModule

DATA_MODULES: dict[type, type[LMDataModule]] = {
    TextDataConfig: TextDataModule,
    TokenDataConfig: TokenDataModule,
    MQARDataConfig: MQARDataModule,
}


def build_datamodule(cfg: TrialConfig, data_root=None) -> LMDataModule:
    """The data module of `cfg.data`, sized for `cfg.max_steps` optimizer steps."""
    return DATA_MODULES[type(cfg.data)](
        cfg.data,
        data_root=data_root,
        batch_size=cfg.train.batch_size,
        train_batches=cfg.max_steps * cfg.train.grad_accum,
        val_batches=cfg.train.eval_batches,
        seed=cfg.seed,
    )


__all__ = ["CorpusUnavailable", "LMDataModule", "build_datamodule", "load_corpus"]
