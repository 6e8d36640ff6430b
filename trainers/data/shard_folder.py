"""A folder of pre-tokenised shards (nanoGPT / FineWeb layout), read with numpy alone: its
checks run in the launcher's preflight, which imports neither Lightning nor the data modules.

    <path>/meta.json       {"vocab_size": V, "dtype": "uint16" | "uint32", ...}
    <path>/train_*.bin     raw little-endian token ids
    <path>/val_*.bin

Written by `python -m trainers.prepare`; trained on by `trainers.data.shards.TokenDataModule`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

import numpy as np

DTYPES = ("uint16", "uint32")


SAMPLE_TOKENS = 1 << 16  # ids checked against the vocabulary at each end of every shard


def folder_defects(folder: Path) -> list[str]:
    """What a disk or a half-finished copy left wrong in a shard folder, each naming its file
    (empty: none found). Read at load: meta.json, the shard files it lists and their sizes, and
    the ids at both ends of every shard (not the whole of a large shard). Remembered per state of
    the folder (names, sizes and times of its files): every trial config of a study parses it."""
    folder = Path(folder)
    entries = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    state = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in entries)
    return list(_defects(folder, state))


@functools.lru_cache(maxsize=64)
def _defects(folder: Path, state: tuple) -> tuple[str, ...]:
    return tuple(_find_defects(folder))


def _find_defects(folder: Path) -> list[str]:
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        if (folder / "progress.json").is_file():
            return [
                f"{folder / 'progress.json'}: an unfinished preparation (no meta.json): run its command again"
            ]
        return []  # reported as a missing meta.json with the config's vocabulary
    try:
        meta = json.loads(meta_path.read_text())
        vocab, dtype = int(meta["vocab_size"]), meta["dtype"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        detail = f"no key {err}" if isinstance(err, KeyError) else f"{type(err).__name__}: {err}"
        return [f"{meta_path}: unreadable ({detail})"]
    if dtype not in DTYPES:
        return [f"{meta_path}: dtype {dtype!r}; allowed: {', '.join(DTYPES)}"]
    dt = np.dtype(dtype).newbyteorder("<")
    if vocab > np.iinfo(dt).max + 1:
        return [f"{meta_path}: vocab_size {vocab} does not fit dtype {dtype}"]
    defects = _tokenizer_defects(folder, meta)
    for split in ("train", "val"):
        on_disk = sorted(p.name for p in folder.glob(f"{split}_*.bin"))
        listed = meta.get(f"{split}_shards")
        if listed is not None:
            defects += [f"{folder / n}: listed in meta.json, missing" for n in listed if n not in on_disk]
            defects += [
                f"{folder / n}: not listed in meta.json (a stray file?)" for n in on_disk if n not in listed
            ]
        if not on_disk:
            defects.append(f"{folder}: no {split}_*.bin shards")
            continue
        tokens = 0
        for name in on_disk:
            path = folder / name
            size = path.stat().st_size
            if size == 0 or size % dt.itemsize:
                defects.append(
                    f"{path}: {size} bytes, not a positive multiple of {dt.itemsize} ({dtype}): cut short?"
                )
                continue
            tokens += size // dt.itemsize
            ids = np.memmap(path, dtype=dt, mode="r")
            ends = [ids[:SAMPLE_TOKENS], ids[-SAMPLE_TOKENS:]]
            top = max(int(e.max()) for e in ends)
            if top >= vocab:
                defects.append(f"{path}: id {top} is outside the vocabulary of meta.json ({vocab} ids)")
        expected = meta.get(f"{split}_tokens")
        if expected is not None and tokens != expected and not defects:
            defects.append(f"{folder}: {tokens} {split} tokens in the shards, meta.json says {expected}")
    return defects


def _tokenizer_defects(folder: Path, meta: dict) -> list[str]:
    """The tokenizer.json beside `prepare hf` shards must be the one meta.json names by hash."""
    recorded = meta.get("tokenizer")
    if not isinstance(recorded, dict) or not recorded.get("sha256"):
        return []
    path = folder / "tokenizer.json"  # trainers.data.tokenizer.TOKENIZER (not imported: numpy only here)
    if not path.is_file():
        return [f"{path}: missing (meta.json names tokenizer sha256 {recorded['sha256'][:12]}...)"]
    found = hashlib.sha256(path.read_bytes()).hexdigest()
    if found != recorded["sha256"]:
        return [f"{path}: sha256 {found[:12]}..., not the tokenizer these shards were written with "
                f"({recorded['sha256'][:12]}... in meta.json)"]  # fmt: skip
    return []


def read_meta(folder: Path) -> dict:
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        raise FileNotFoundError(f"{meta_path} not found (build shards with python -m trainers.prepare)")
    meta = json.loads(meta_path.read_text())
    if meta.get("dtype") not in DTYPES:
        raise ValueError(f"{meta_path}: dtype {meta.get('dtype')!r}; allowed: {', '.join(DTYPES)}")
    return meta


def open_shards(folder: Path, split: str) -> list[np.memmap]:
    meta = read_meta(folder)
    files = sorted(folder.glob(f"{split}_*.bin"))
    if not files:
        raise FileNotFoundError(f"no {split}_*.bin shards in {folder}")
    return [np.memmap(f, dtype=np.dtype(meta["dtype"]).newbyteorder("<"), mode="r") for f in files]
