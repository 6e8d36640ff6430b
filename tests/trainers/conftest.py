"""Shared helpers: a tiny trial tree on a small private text corpus, an isolated data cache, LossHistory."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest

from tests.factories import merge

TEXT = "".join(f"Line {i}: the quick brown fox jumps over the lazy dog {i % 7}.\n" for i in range(3000))

GATED = {"kind": "value_residual", "mode": "gated", "granularity": "token_head", "activation": "relu"}
STATIC_LEARNED = {"kind": "value_residual", "mode": "static", "coefficient": "learned"}


@pytest.fixture(autouse=True)
def data_cache(tmp_path_factory, monkeypatch):
    root = tmp_path_factory.getbasetemp() / "satsweep-cache"
    monkeypatch.setenv("SATSWEEP_DATA", str(root))
    return root


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    (folder / "a.txt").write_text(TEXT[: len(TEXT) // 2])
    (folder / "b.txt").write_text(TEXT[len(TEXT) // 2 :])
    return folder


@pytest.fixture
def tiny_tree(corpus_dir):
    """A 2-layer d32 model, 20 steps of 4 x 32 tokens on the private corpus."""

    def make(**extra) -> dict:
        base = {
            "seed": 0,
            "model": {"d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64, "max_seq_len": 64},
            "data": {"kind": "text", "corpus": "folder", "path": str(corpus_dir), "seq_len": 32},
            "train": {
                "tokens": 20 * 4 * 32,
                "batch_size": 4,
                "eval_every": 10,
                "eval_batches": 2,
                "log_every": 5,
                "gate_stats_every": 5,
                "num_threads": 1,
            },
        }
        return merge(base, extra)

    return make


class LossHistory(pl.Callback):
    """Records the training loss of every micro-batch."""

    def __init__(self):
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.losses.append(float(outputs["loss"].detach()))
