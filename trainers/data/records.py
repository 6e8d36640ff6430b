"""Key-value records planted in real text: the one record format of the recall probe
(trainers.recall's lookups) and of the training mix that teaches it (`data.records`).

A record is `key value`: KEY_TOKENS then VALUE_TOKENS tokens drawn uniformly from ALPHABET
symbols, the keys of one window distinct (`draw_records`). The symbols are the text's most
frequent tokens (`alphabet`), or ids the text never uses (`reserved`: the records' own, so a
model cannot half-guess a value from the text's statistics and must look it up; the recall probe
then scores lookups in them too, as `reserved_recall_*`).
A query repeats a record's key, then its value, which nothing but the record predicts.

The mix (`PlantedRecords`): in `fraction` of each training batch's windows (a fixed count per
batch, so the answers' share of every batch's loss is the same), `per_window` records are
planted at random places in the text and each is queried once later in the window, in random
order (MQAR's layout, Arora et al. 2023, arXiv 2312.04927, inside real text): 2 x per_window
non-overlapping slots, the first half records, the second half their queries. With
`loss: values` those windows are scored on the queried values only (every other target is
IGNORE: the keys and values are random, and the text around them is cut up), as MQAR is; with
`loss: all` on every token, as plain text. The validation windows are untouched. The records of
batch `i` depend only on the seed and `i`, like the batches themselves (trainers.data.windows),
so runs and resumes draw the same ones; the stream differs from the probe's fixed seeds, so the
probe scores records the model never trained on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from trainers.data.record_layout import KEY_TOKENS, RECORD, VALUE_TOKENS, planted_count
from trainers.loss import IGNORE

ALPHABET = 32
STREAM = 0x4EC  # the mix's random stream, apart from the windows' and the repeats' draws
LOSSES = ("values", "all")


def alphabet(arrays: Sequence[np.ndarray], size: int = ALPHABET) -> np.ndarray:
    """The `size` most frequent token ids of `arrays` (ties: the smaller id first)."""
    width = max(int(np.max(a)) for a in arrays) + 1
    counts = np.zeros(width, dtype=np.int64)
    for a in arrays:
        counts += np.bincount(np.asarray(a, dtype=np.int64), minlength=width)
    return np.argsort(-counts, kind="stable")[:size]


def reserved(arrays: Sequence[np.ndarray], vocab_size: int, size: int = ALPHABET) -> np.ndarray:
    """The `size` highest ids below `vocab_size` that no array of `arrays` uses: symbols of records
    alone (`data.records.symbols: reserved`), which the text around them never predicts. Raises
    ValueError when fewer ids are free."""
    used = np.zeros(vocab_size, dtype=bool)
    for a in arrays:
        used |= np.bincount(np.asarray(a, dtype=np.int64), minlength=vocab_size)[:vocab_size] > 0
    free = np.flatnonzero(~used)
    if len(free) < size:
        raise ValueError(
            f"the text uses {vocab_size - len(free)} of the vocabulary's {vocab_size} ids, "
            f"leaving {len(free)} free; reserved symbols need {size}"
        )
    return free[-size:]


def draw_records(rng: np.random.Generator, symbols: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """`n` records of `symbols`: keys [n, KEY_TOKENS], pairwise distinct (one answer per key),
    and values [n, VALUE_TOKENS]."""
    keys = rng.choice(symbols, (n, KEY_TOKENS))
    while len({tuple(k) for k in keys}) < n:
        keys = rng.choice(symbols, (n, KEY_TOKENS))
    return keys, rng.choice(symbols, (n, VALUE_TOKENS))


def slots(rng: np.random.Generator, width: int, count: int) -> np.ndarray:
    """`count` sorted starts of non-overlapping RECORD-wide slots in a row of `width` tokens."""
    free = width - count * RECORD  # the text left over, split at random between the slots
    return np.sort(rng.integers(0, free + 1, count)) + np.arange(count) * RECORD


def plant_records(
    rows: np.ndarray, rng: np.random.Generator, symbols: np.ndarray, count: int, per_window: int, loss: str
) -> np.ndarray:
    """Plants records and their queries in `count` of `rows` [n, T + 1], in place; returns the
    targets [n, T] (rows[:, 1:], with IGNORE off the queried values of the planted rows when
    `loss` is `values`)."""
    n, width = rows.shape
    targets = rows[:, 1:].copy()
    for r in np.sort(rng.choice(n, count, replace=False)):
        keys, values = draw_records(rng, symbols, per_window)
        starts = slots(rng, width, 2 * per_window)
        order = rng.permutation(per_window)  # which record each query asks for
        records = np.concatenate([keys, values], axis=1)  # [per_window, RECORD]
        for s, rec in zip(starts[:per_window], records, strict=True):
            rows[r, s : s + RECORD] = rec
        for s, k in zip(starts[per_window:], order, strict=True):
            rows[r, s : s + RECORD] = records[k]
        targets[r] = rows[r, 1:]
        if loss == "values":
            values_at = [np.arange(q + KEY_TOKENS - 1, q + RECORD - 1) for q in starts[per_window:]]
            keep = np.concatenate(values_at)  # the targets at which each query's value is next
            answers = targets[r, keep]
            targets[r] = IGNORE
            targets[r, keep] = answers
    return targets


class PlantedRecords(Dataset):
    """The (inputs [B, T], targets [B, T]) batches of `batches`, with records planted in
    `planted_count(fraction, B)` windows of each (module docstring)."""

    def __init__(
        self, batches: Dataset, symbols: np.ndarray, fraction: float, per_window: int, loss: str, seed: int
    ):
        self.batches, self.symbols, self.seed = batches, symbols, seed
        self.fraction, self.per_window, self.loss = fraction, per_window, loss

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int):
        inputs, targets = self.batches[i]
        rows = torch.cat([inputs, targets[:, -1:]], dim=1).numpy().copy()  # [B, T + 1]
        count = planted_count(self.fraction, len(rows))
        rng = np.random.default_rng([self.seed, i, STREAM])
        planted = plant_records(rows, rng, self.symbols, count, self.per_window, self.loss)
        return torch.from_numpy(rows[:, :-1]), torch.from_numpy(planted)
