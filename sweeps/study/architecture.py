"""What the cost of a training step depends on: a trial config without seed, data or budget.

The cost probe times each distinct architecture once and caches it under `arch_key`; the fronts
and the dry run read that cache by the same key. The probe's step is the trial's own
(trainers.train_step): `train_of` gives back the training settings it is built with."""

from __future__ import annotations

import hashlib
import json

from trainers.config import TrainConfig

# The training settings a step's cost depends on, as TrainConfig names them: the loss path,
# block recomputation, micro-batches a step, clipping and the optimizer's groups (learning rate,
# betas and the decay's value change numbers, not work).
STEP_SETTINGS = ("loss", "activation_checkpointing", "grad_accum", "grad_clip", "no_decay")


def architecture(cfg) -> dict:
    """The architecture of a `TrialConfig`.

    Data-parallel trials (`train.workers` k > 1) are timed as one worker's step, on its share of
    the batch (`batch_size` / k); `workers` scales the tokens/s back to the global batch. One
    step is `grad_accum` micro-batches of `batch_size` rows and one optimizer step, as the trial
    runs it."""
    workers = cfg.train.workers
    return {
        "model": cfg.model.to_dict(),
        "batch_size": cfg.train.batch_size // workers,
        "seq_len": cfg.data.seq_len,
        "precision": cfg.train.precision,
        "compile": cfg.train.compile,
        "num_threads": cfg.train.num_threads,
        "train": {name: _plain(getattr(cfg.train, name)) for name in STEP_SETTINGS},
        **({"workers": workers} if workers > 1 else {}),  # single-worker cache keys stay as they were
    }


def _plain(value):
    return list(value) if isinstance(value, (list, tuple)) else value


def train_of(arch: dict) -> TrainConfig:
    """The TrainConfig a probe step of `arch` is built with (its settings, the rest default)."""
    return TrainConfig(batch_size=arch["batch_size"], precision=arch["precision"], compile=arch["compile"],
                       num_threads=arch["num_threads"], **arch["train"])  # fmt: skip


def tokens_per_step(arch: dict) -> int:
    """Tokens of one optimizer step of all workers."""
    return arch["batch_size"] * arch["train"]["grad_accum"] * arch["seq_len"] * arch.get("workers", 1)


def without_split(arch: dict) -> dict:
    """`arch` with its micro-batch split (`batch_size` x `grad_accum`, which `train.micro_batch: auto`
    chooses per design) replaced by the rows of a whole step: designs with the same global batch."""
    train = {k: v for k, v in arch["train"].items() if k != "grad_accum"}
    rows = arch["batch_size"] * arch["train"]["grad_accum"]
    return {**{k: v for k, v in arch.items() if k != "batch_size"}, "rows_per_step": rows, "train": train}


def arch_key(arch: dict) -> str:
    return hashlib.sha1(json.dumps(arch, sort_keys=True).encode()).hexdigest()[:16]
