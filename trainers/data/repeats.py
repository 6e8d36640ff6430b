"""Induction practice mixed into real text (`data.repeats`): in that fraction of the training
windows, a span of 4..seq_len/4 random tokens is written at a random place and again later in the
same window, so that copying from the context pays (the repeated-random-tokens task of Olsson et
al. 2022, arXiv 2209.11895, inside real text). `data.repeat_tokens` says where its tokens come
from: `window`, drawn from the window itself (its unigram statistics; with bytes a token recurs
every few positions, so copying needs a match on more than one token), or `uniform`, uniformly
from the whole vocabulary (a one-token match is then nearly unique: the classic task). The
validation windows are untouched. The plants of batch `i` depend only on the seed and `i`, like
the batches themselves (trainers.data.windows), so runs and resumes draw the same ones.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

STREAM = 0x2E9  # the plants' random stream, apart from the windows' own draws
MIN_SPAN = 4


def plant(rows: np.ndarray, rng: np.random.Generator, fraction: float, vocab: int | None = None) -> None:
    """Plants a repeated span in about `fraction` of `rows` [n, width], in place; its tokens from
    the row itself, or uniformly from range(vocab) when `vocab` is given."""
    n, width = rows.shape
    longest = max(MIN_SPAN, width // 4)
    for r in np.nonzero(rng.random(n) < fraction)[0]:
        span = int(rng.integers(MIN_SPAN, longest + 1))
        second = int(rng.integers(span, width - span + 1))
        first = int(rng.integers(0, second - span + 1))
        tokens = rng.choice(rows[r], span) if vocab is None else rng.integers(0, vocab, span)
        rows[r, first : first + span] = tokens
        rows[r, second : second + span] = tokens


class PlantedRepeats(Dataset):
    """The (inputs [B, T], targets [B, T]) batches of `batches`, with repeats planted."""

    def __init__(self, batches: Dataset, fraction: float, seed: int, vocab: int | None = None):
        self.batches, self.fraction, self.seed, self.vocab = batches, fraction, seed, vocab

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int):
        inputs, targets = self.batches[i]
        rows = torch.cat([inputs, targets[:, -1:]], dim=1).numpy().copy()  # [B, T + 1]
        plant(rows, np.random.default_rng([self.seed, i, STREAM]), self.fraction, self.vocab)
        rows = torch.from_numpy(rows)
        return rows[:, :-1], rows[:, 1:]
