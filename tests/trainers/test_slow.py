"""Quality bars (slow: run with `pytest -m slow tests/trainers`)."""

from __future__ import annotations

import time

import pytest

from trainers import fit
from trainers.config import TextDataConfig
from trainers.data.cache import cache_root
from trainers.data.text import tokenized_corpus, unigram_entropy

pytestmark = pytest.mark.slow


def test_tiny_beats_the_unigram_entropy_of_the_corpus():
    train, _, _ = tokenized_corpus(TextDataConfig(corpus="shakespeare"), cache_root())
    entropy = unigram_entropy(train, 256)  # ~3.33 nats/byte
    tree = {
        "model": {"preset": "tiny"},
        "data": {"kind": "text", "corpus": "shakespeare", "seq_len": 128},
        "train": {"tokens": 200 * 16 * 128, "batch_size": 16, "eval_every": 200, "eval_batches": 16},
    }
    metrics = fit(tree)
    assert metrics["steps"] == 200
    assert metrics["val_loss"] < entropy - 0.8, (metrics["val_loss"], entropy)


@pytest.mark.xfail(
    reason="not reached yet: 600 steps (lr 3e-3) plateau at ~0.25 = 1/num_kv_pairs, the copy-any-value "
    "plateau before the induction transition; settings need tuning (more steps / lr)",
    strict=False,
)
def test_mqar_reaches_high_accuracy_within_a_cpu_minute():
    tree = {
        "model": {"preset": "tiny", "n_layers": 2, "max_seq_len": 32, "vocab_size": 64},
        "data": {"kind": "mqar", "seq_len": 16, "vocab": 64, "num_kv_pairs": 4, "val_examples": 256},
        "train": {
            "tokens": 1000 * 64 * 16,
            "batch_size": 64,
            "lr": 3e-3,
            "eval_every": 250,
            "num_threads": 2,
        },
    }
    start = time.perf_counter()
    metrics = fit(tree)
    assert metrics["mqar_acc"] > 0.9, metrics
    assert time.perf_counter() - start < 120
