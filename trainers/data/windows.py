"""Batches of `seq_len + 1` tokens over one or more token arrays, in one of two orders (`order`):

- windows: random windows, starting anywhere. Batch `i` is drawn by
  `numpy.random.default_rng([seed, i])`, so it depends only on the seed and its index.
- chunks: shuffled non-overlapping chunks, as the SATFormer code reads its data: chunk c of an array
  starts at token c * seq_len (inputs never overlap; its last target is the next chunk's first
  token); each epoch is a permutation of every chunk of every array, drawn by
  `numpy.random.default_rng([seed, epoch])`, and batch `i` takes the next `batch_size` chunks, so
  no chunk repeats before all were seen. Batch `i` again depends only on the seed and its index.

Either way the batches are identical across runs, independent of workers or restarts. Validation
uses a fixed seed of its own, so every trial (any seed, any design) is evaluated on the same data.
"""

from __future__ import annotations

from collections.abc import Sequence

import lightning.pytorch as pl
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Subset

VAL_SEED = 0x5A7  # fixed: the validation windows do not depend on the trial seed


class WindowSampler:
    """Draws window starts uniformly over all valid positions of all arrays."""

    def __init__(self, arrays: Sequence[np.ndarray], seq_len: int):
        self.arrays = list(arrays)
        self.width = seq_len + 1
        counts = np.array([max(0, len(a) - self.width + 1) for a in self.arrays], dtype=np.int64)
        if counts.sum() == 0:
            sizes = [len(a) for a in self.arrays]
            raise ValueError(f"no window of {self.width} tokens fits in arrays of sizes {sizes}")
        self.bounds = np.cumsum(counts)

    def draw(self, rng: np.random.Generator, n: int) -> torch.Tensor:
        flat = rng.integers(0, self.bounds[-1], size=n)
        which = np.searchsorted(self.bounds, flat, side="right")
        starts = flat - np.concatenate([[0], self.bounds[:-1]])[which]
        rows = [
            np.asarray(self.arrays[w][s : s + self.width], dtype=np.int64)
            for w, s in zip(which, starts, strict=True)
        ]
        return torch.from_numpy(np.stack(rows))  # [n, seq_len + 1]


class ChunkBatches(Dataset):
    """`length` batches of (inputs [B, T], targets [B, T]): shuffled non-overlapping chunks of
    `arrays` (module docstring), epoch after epoch."""

    def __init__(self, arrays: Sequence[np.ndarray], seq_len: int, batch_size: int, length: int, seed: int):
        self.arrays, self.seq_len, self.batch_size, self.length, self.seed = (
            list(arrays),
            seq_len,
            batch_size,
            length,
            seed,
        )
        counts = np.array([max(0, (len(a) - 1) // seq_len) for a in self.arrays], dtype=np.int64)
        if counts.sum() == 0:
            sizes = [len(a) for a in self.arrays]
            raise ValueError(f"no chunk of {seq_len + 1} tokens fits in arrays of sizes {sizes}")
        self.bounds = np.cumsum(counts)
        self._epochs: dict[int, np.ndarray] = {}

    @property
    def chunks(self) -> int:
        return int(self.bounds[-1])

    def __len__(self) -> int:
        return self.length

    def order(self, epoch: int) -> np.ndarray:
        """The chunk order of one epoch (the last two are kept: a batch may straddle them)."""
        if epoch not in self._epochs:
            self._epochs = {e: p for e, p in self._epochs.items() if e == epoch - 1}
            self._epochs[epoch] = np.random.default_rng([self.seed, epoch]).permutation(self.chunks)
        return self._epochs[epoch]

    def __getitem__(self, i: int):
        flat = np.arange(i * self.batch_size, (i + 1) * self.batch_size, dtype=np.int64)
        chunk = np.array([self.order(int(f // self.chunks))[f % self.chunks] for f in flat])
        which = np.searchsorted(self.bounds, chunk, side="right")
        starts = (chunk - np.concatenate([[0], self.bounds[:-1]])[which]) * self.seq_len
        rows = [
            np.asarray(self.arrays[w][s : s + self.seq_len + 1], dtype=np.int64)
            for w, s in zip(which, starts, strict=True)
        ]
        batch = torch.from_numpy(np.stack(rows))
        return batch[:, :-1], batch[:, 1:]


ORDERS = ("windows", "chunks")


class WindowBatches(Dataset):
    """`length` batches of (inputs [B, T], targets [B, T]) drawn from `sampler`."""

    def __init__(self, sampler: WindowSampler, batch_size: int, length: int, seed: int):
        self.sampler, self.batch_size, self.length, self.seed = sampler, batch_size, length, seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        rows = self.sampler.draw(np.random.default_rng([self.seed, i]), self.batch_size)
        return rows[:, :-1], rows[:, 1:]


class LMDataModule(pl.LightningDataModule):
    """Base of every data module: subclasses fill `self.train_set` and `self.val_set` in `setup`.

    `accuracy_metric`: the name under which the module logs answer accuracy (None: not logged).
    """

    accuracy_metric: str | None = None
    # UTF-8 bytes each token id stands for, once `setup` ran (None: the data has no text bytes):
    # the module logs val_bpb with it.
    token_bytes: np.ndarray | None = None
    # The validation token arrays, once `setup` ran (None: the data is not text, e.g. MQAR).
    val_arrays: list[np.ndarray] | None = None

    def __init__(self, batch_size: int, train_batches: int, val_batches: int, seed: int):
        super().__init__()
        self.batch_size, self.train_batches, self.val_batches, self.seed = (
            batch_size,
            train_batches,
            val_batches,
            seed,
        )
        self.train_set: Dataset | None = None
        self.val_set: Dataset | None = None

    def train_dataloader(self) -> DataLoader:
        trainer = getattr(self, "trainer", None)

        def position() -> int:  # the batches the optimizer steps so far have taken
            return trainer.global_step * trainer.accumulate_grad_batches if trainer is not None else 0

        return ResumableLoader(self._share(self.train_set), position)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self._share(self.val_set), batch_size=None, shuffle=False, num_workers=0)

    def _share(self, batches: Dataset) -> Dataset:
        trainer = getattr(self, "trainer", None)
        if trainer is None or trainer.world_size == 1:
            return batches
        return WorkerShare(batches, trainer.global_rank, trainer.world_size)


class ResumableLoader(DataLoader):
    """The batches of `batches` in order, one at a time, from the data position a checkpoint
    recorded on: Lightning saves `state_dict()` with a checkpoint and hands it to
    `load_state_dict` on resume, before the first batch is drawn. Batch `i` depends only on the
    seed and `i`, so the position (the number of batches the optimizer steps so far have taken,
    `position()`) is the whole state."""

    def __init__(self, batches: Dataset, position):
        super().__init__(batches, batch_size=None, shuffle=False, num_workers=0)
        self.position, self.start = position, 0

    def __iter__(self):
        if not self.start:
            return super().__iter__()
        rest = Subset(self.dataset, range(self.start, len(self.dataset)))
        return iter(DataLoader(rest, batch_size=None, shuffle=False, num_workers=0))

    def state_dict(self) -> dict:
        return {"next_batch": int(self.position())}

    def load_state_dict(self, state: dict) -> None:
        self.start = int(state["next_batch"])


class WorkerShare(Dataset):
    """Worker `rank`'s rows of every (global) batch of `batches`: data-parallel workers draw the
    same batch and each keeps its own contiguous slice (even slices when `world` divides B)."""

    def __init__(self, batches: Dataset, rank: int, world: int):
        self.batches, self.rank, self.world = batches, rank, world

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int):
        return tuple(t.tensor_split(self.world)[self.rank] for t in self.batches[i])


class WindowDataModule(LMDataModule):
    """Language modelling over token arrays: subclasses implement `arrays() -> (train, val)`."""

    def __init__(self, seq_len: int, order: str = "windows", **kw):
        super().__init__(**kw)
        if order not in ORDERS:
            raise ValueError(f"order {order!r}; allowed: {', '.join(ORDERS)}")
        self.seq_len, self.order = seq_len, order

    def arrays(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        raise NotImplementedError

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        train, val = self.arrays()
        self.val_arrays = val  # the validation tokens, for probes of the trained model (trainers.recall)
        if self.order == "chunks":
            self.train_set = ChunkBatches(train, self.seq_len, self.batch_size, self.train_batches, self.seed)
            self.val_set = ChunkBatches(val, self.seq_len, self.batch_size, self.val_batches, VAL_SEED)
            return
        self.train_set = WindowBatches(
            WindowSampler(train, self.seq_len), self.batch_size, self.train_batches, self.seed
        )
        self.val_set = WindowBatches(
            WindowSampler(val, self.seq_len), self.batch_size, self.val_batches, VAL_SEED
        )
