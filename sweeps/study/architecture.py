"""What the cost of a training step depends on: a trial config without seed, data or budget.

The cost probe times each distinct architecture once and caches it under `arch_key`; the fronts
and the dry run read that cache by the same key."""

from __future__ import annotations

import hashlib
import json


def architecture(cfg) -> dict:
    """The architecture of a `TrialConfig`.

    Data-parallel trials (`train.workers` k > 1) are timed as one worker's step, on its share of
    the batch (`batch_size` / k); `workers` scales the tokens/s back to the global batch."""
    workers = cfg.train.workers
    return {
        "model": cfg.model.to_dict(),
        "batch_size": cfg.train.batch_size // workers,
        "seq_len": cfg.data.seq_len,
        "precision": cfg.train.precision,
        "compile": cfg.train.compile,
        "num_threads": cfg.train.num_threads,
        **({"workers": workers} if workers > 1 else {}),  # single-worker cache keys stay as they were
    }


def arch_key(arch: dict) -> str:
    return hashlib.sha1(json.dumps(arch, sort_keys=True).encode()).hexdigest()[:16]
