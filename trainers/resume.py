"""Trials that resume where they stopped: `train.checkpoint_every` (tokens), through Lightning.

A `ModelCheckpoint` saves every `checkpoint_every` tokens' worth of optimizer steps into the
trial's checkpoint folder, keeping the last two (`step000000020.ckpt`, ...), and
`trainer.fit(ckpt_path=...)` resumes from the newest valid one (`trainers.checkpoint_files.
latest_valid`). A checkpoint holds what Lightning saves (weights, optimizer state, LR schedule,
loop progress, hence the step) and what the project adds: the RNG states
(`checkpoint_files.rng_states`, saved and restored by `LanguageModel.on_save_checkpoint` /
`on_load_checkpoint`) and the data position (the train loader is stateful,
`trainers.data.windows.ResumableLoader`).

Writes are atomic (`AtomicCheckpointIO`, Lightning's CheckpointIO plugin: written then renamed,
then a digest file; see trainers.checkpoint_files). Lightning's own save goes through an fsspec
transaction whose temporary file is made by `tempfile.mkstemp()` (in /tmp) and moved: not a
rename when /tmp is another filesystem.
"""

from __future__ import annotations

import os

from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.callbacks import ModelCheckpoint

from trainers.checkpoint_files import remove_checkpoint, write_checkpoint

KEEP = 2  # checkpoints kept: the newest, and the one before in case the newest is damaged


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's torch.save checkpoint IO, written then renamed, with a digest file after."""

    def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
        write_checkpoint(checkpoint, path)

    def remove_checkpoint(self, path) -> None:
        remove_checkpoint(path)


def periodic_checkpoint(folder: str | os.PathLike, every_steps: int) -> ModelCheckpoint:
    """Every `every_steps` optimizer steps, the last `KEEP` kept (ranked by step)."""
    return ModelCheckpoint(
        dirpath=str(folder),
        filename="step{step:09d}",
        auto_insert_metric_name=False,
        every_n_train_steps=every_steps,
        save_top_k=KEEP,
        monitor="step",
        mode="max",
        save_last=False,
        enable_version_counter=False,
    )


def every_steps(checkpoint_every_tokens: int, tokens_per_step: int) -> int:
    return max(1, checkpoint_every_tokens // tokens_per_step)
