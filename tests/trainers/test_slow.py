"""Quality bars (slow: run with `pytest -m slow tests/trainers`)."""

from __future__ import annotations

import copy
import time

import pytest

from tests.trainers.conftest import GATED
from trainers.config import TextDataConfig
from trainers.data.cache import cache_root
from trainers.data.text import tokenized_corpus, unigram_entropy
from trainers.fit import fit

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


MQAR_TRIAL = {  # the setting of trials/mqar.yaml
    "model": {"preset": "tiny", "n_layers": 2, "d_model": 64, "n_heads": 2, "d_ff": 192, "max_seq_len": 16},
    "data": {"kind": "mqar", "seq_len": 16, "vocab": 32, "num_kv_pairs": 4, "val_examples": 500},
    "train": {
        "tokens": 1500 * 64 * 16,
        "batch_size": 64,
        "lr": 3e-3,
        "weight_decay": 0.0,
        "schedule": "constant",
        "warmup_frac": 0.02,
        "eval_every": 500,
        "num_threads": 1,
    },
}


@pytest.mark.parametrize("residual", [{"kind": "none"}, GATED], ids=["baseline", "satformer"])
def test_mqar_reaches_high_accuracy_within_a_cpu_minute(residual):
    tree = copy.deepcopy(MQAR_TRIAL)
    tree["model"]["residual"] = residual
    start = time.process_time()
    metrics = fit(tree)
    assert metrics["steps"] == 1500
    assert metrics["mqar_acc"] > 0.9, metrics  # ~1.0 (seeds 0, 1); the no-recall plateau is 0.25
    assert time.process_time() - start < 90  # ~40 CPU-seconds on one thread
