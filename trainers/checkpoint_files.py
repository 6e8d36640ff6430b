"""Resumable checkpoints as files, without Lightning (the launcher reads them too): writing one
atomically with its digest, finding the newest valid one, and the RNG states a checkpoint carries.

A checkpoint `step<N>.ckpt` is valid when `step<N>.ckpt.sha256` exists and matches its bytes:
written to a hidden temporary file in the same folder, flushed to disk and renamed, then its
digest beside it (`write_checkpoint`). An invalid one (corrupt, truncated, a save killed before
its digest) is skipped for the previous one with a message, never loaded (`latest_valid`).
trainers.resume plugs this into Lightning's checkpointing.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import sys
from pathlib import Path

import numpy as np

PATTERN = re.compile(r"^step(\d+)\.ckpt$")
DIGEST = ".sha256"


def rng_states() -> dict:
    """torch's (CPU and every CUDA device's), numpy's and Python's global RNG states, in types that
    `torch.load(weights_only=True)` (Lightning's default on resume) accepts."""
    import torch  # here, not at the top: the launcher finds checkpoints without torch

    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached],
        "python": random.getstate(),
    }


def set_rng_states(states: dict) -> None:
    import torch  # here, not at the top: the launcher finds checkpoints without torch

    torch.set_rng_state(states["torch"])
    if states["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
    name, keys, pos, has_gauss, cached = states["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def _write_atomically(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_checkpoint(checkpoint: dict, path: str | os.PathLike) -> None:
    """torch.save, written then renamed, then the digest file."""
    import torch  # here, not at the top: the launcher finds checkpoints without torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(path, lambda f: torch.save(checkpoint, f))
    digest = sha256_file(path)
    _write_atomically(path.with_name(path.name + DIGEST), lambda f: f.write(digest.encode()))


def remove_checkpoint(path: str | os.PathLike) -> None:
    path = Path(path)
    for p in (path.with_name(path.name + DIGEST), path):
        p.unlink(missing_ok=True)


def defect(path: Path) -> str | None:
    """Why the checkpoint at `path` cannot be loaded, or None when it is valid."""
    digest_file = path.with_name(path.name + DIGEST)
    if not digest_file.is_file():
        return f"no {digest_file.name} (its save did not finish)"
    expected = digest_file.read_text().strip()
    if sha256_file(path) != expected:
        return f"its bytes do not match {digest_file.name} (corrupt or half-written)"
    return None


def checkpoints(folder: str | os.PathLike) -> list[Path]:
    """The checkpoints in `folder`, newest (highest step) first."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := PATTERN.match(p.name))]
    return [p for _, p in sorted(found, reverse=True)]


def latest_valid(folder: str | os.PathLike, log=None) -> Path | None:
    """The newest valid checkpoint in `folder` (None: start from step 0); every newer invalid one
    is reported through `log` (default: stderr) and skipped."""
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    for path in checkpoints(folder):
        problem = defect(path)
        if problem is None:
            return path
        log(f"checkpoint {path} skipped: {problem}; trying the previous one")
    return None
