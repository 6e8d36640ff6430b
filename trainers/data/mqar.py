"""Multi-query associative recall (MQAR), as in Zoology (Arora et al., arXiv 2312.04927).

One example of `seq_len` tokens with N = num_kv_pairs, half = vocab // 2:

    k_1 v_1 k_2 v_2 ... k_N v_N | k_p1 0 k_p2 0 ... k_pN 0 | 0 0 ... 0
    context (2N)                  every key queried once, random order p (2N)  padding

Keys are N distinct tokens from [1, half), values N distinct tokens from [half, vocab); token 0
is reserved (the blank after each query and the padding), as in Zoology. targets = -100
everywhere except at each query key, whose target is its value: no answer is ever an input
outside the context, so later queries cannot be answered by elimination (with the answers
written after the queries, picking an unused value scores (1 + 1/2 + ... + 1/N) / N, ~0.52 at
N = 4, without any recall). The loss and `mqar_acc` therefore count answers only.
Generated on the fly (vectorised numpy) from the trial seed; validation from a fixed seed.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.utils.data import Dataset

from trainers.config import MQARDataConfig
from trainers.data.registry import register_data
from trainers.data.windows import VAL_SEED, LMDataModule
from trainers.loss import IGNORE


def _distinct(rng: np.random.Generator, n: int, k: int, low: int, high: int) -> np.ndarray:
    """[n, k] rows of k distinct integers from [low, high) (in row chunks of ~8M draws)."""
    step = max(1, (1 << 23) // (high - low))
    parts = [np.argsort(rng.random((min(step, n - i), high - low)), axis=1)[:, :k] for i in range(0, n, step)]
    return low + np.concatenate(parts)


def generate(rng: np.random.Generator, n: int, seq_len: int, vocab: int, num_kv_pairs: int):
    """(inputs [n, seq_len] int64, targets [n, seq_len] int64 with IGNORE off the answers)."""
    half, pairs = vocab // 2, num_kv_pairs
    keys = _distinct(rng, n, pairs, 1, half)  # 0 is the blank / padding token
    values = _distinct(rng, n, pairs, half, vocab)
    order = np.argsort(rng.random((n, pairs)), axis=1)  # the query order p, per example
    q_keys = np.take_along_axis(keys, order, axis=1)
    q_values = np.take_along_axis(values, order, axis=1)
    inputs = np.zeros((n, seq_len), dtype=np.int64)
    inputs[:, 0 : 2 * pairs : 2], inputs[:, 1 : 2 * pairs : 2] = keys, values
    inputs[:, 2 * pairs : 4 * pairs : 2] = q_keys  # each followed by a blank, never its answer
    targets = np.full((n, seq_len), IGNORE, dtype=np.int64)
    targets[:, 2 * pairs : 4 * pairs : 2] = q_values  # at each query key, predict its value
    return inputs, targets


class TrainExamples(Dataset):
    """`length` batches of examples drawn (with replacement) from a fixed generated train set."""

    def __init__(self, inputs, targets, batch_size: int, length: int, seed: int):
        self.inputs, self.targets = torch.from_numpy(inputs), torch.from_numpy(targets)
        self.batch_size, self.length, self.seed = batch_size, length, seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        idx = torch.from_numpy(
            np.random.default_rng([self.seed, i]).integers(0, len(self.inputs), self.batch_size)
        )
        return self.inputs[idx], self.targets[idx]


class ValExamples(Dataset):
    """The whole validation set, in order, in batches."""

    def __init__(self, inputs, targets, batch_size: int):
        self.inputs, self.targets, self.batch_size = (
            torch.from_numpy(inputs),
            torch.from_numpy(targets),
            batch_size,
        )

    def __len__(self) -> int:
        return math.ceil(len(self.inputs) / self.batch_size)

    def __getitem__(self, i: int):
        s = slice(i * self.batch_size, (i + 1) * self.batch_size)
        return self.inputs[s], self.targets[s]


@register_data(MQARDataConfig)
class MQARDataModule(LMDataModule):
    accuracy_metric = "mqar_acc"

    def __init__(self, cfg: MQARDataConfig, data_root=None, **kw):
        super().__init__(**kw)
        self.cfg = cfg

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        c = self.cfg
        train = generate(
            np.random.default_rng(self.seed), c.train_examples, c.seq_len, c.vocab, c.num_kv_pairs
        )
        val = generate(np.random.default_rng(VAL_SEED), c.val_examples, c.seq_len, c.vocab, c.num_kv_pairs)
        self.train_set = TrainExamples(*train, self.batch_size, self.train_batches, self.seed)
        self.val_set = ValExamples(*val, self.batch_size)
