"""The data cache root and atomic writes (several Ray trials may build the same entry at once)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

ENV = "SATSWEEP_DATA"


def cache_root(override: str | os.PathLike | None = None) -> Path:
    """`override`, else `$SATSWEEP_DATA`, else `~/.cache/satsweep`; always absolute (Ray moves the cwd)."""
    raw = override or os.environ.get(ENV) or "~/.cache/satsweep"
    return Path(raw).expanduser().absolute()


def _atomic(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def save_npy(path: Path, array: np.ndarray) -> None:
    def write(tmp):
        with open(tmp, "wb") as f:
            np.save(f, array)

    _atomic(path, write)


def save_text(path: Path, text: str) -> None:
    _atomic(path, lambda tmp: Path(tmp).write_text(text))


def save_json(path: Path, obj) -> None:
    save_text(path, json.dumps(obj, indent=2, sort_keys=True))
