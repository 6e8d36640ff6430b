"""`TokenDataModule`: pre-tokenised shards, memory-mapped (nanoGPT / FineWeb layout).

    <path>/meta.json       {"vocab_size": V, "dtype": "uint16" | "uint32", ...}
    <path>/train_*.bin     raw little-endian token ids
    <path>/val_*.bin

Written by `python -m trainers.prepare`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from trainers.config import TokenDataConfig
from trainers.data.registry import register_data
from trainers.data.tokenizer import BPETokenizer, ByteTokenizer
from trainers.data.windows import WindowDataModule

DTYPES = ("uint16", "uint32")


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


@register_data(TokenDataConfig)
class TokenDataModule(WindowDataModule):
    def __init__(self, cfg: TokenDataConfig, data_root=None, **kw):
        super().__init__(seq_len=cfg.seq_len, order=cfg.order, **kw)
        self.folder = Path(cfg.path).expanduser().absolute()

    def arrays(self):
        self.token_bytes = shard_token_bytes(self.folder)
        return open_shards(self.folder, "train"), open_shards(self.folder, "val")


def shard_token_bytes(folder: Path) -> np.ndarray | None:
    """UTF-8 bytes per token id of shards written by `trainers.prepare` (from their tokenizer:
    `meta.json`'s tokenizer byte, or bpe with its `tokenizer.json`); None for shards of another
    origin (their tokenizer is unknown here, and so is val_bpb)."""
    kind = read_meta(folder).get("tokenizer")
    if kind == "byte":
        return ByteTokenizer().byte_lengths()
    if kind == "bpe" and (folder / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        return BPETokenizer(Tokenizer.from_file(str(folder / "tokenizer.json"))).byte_lengths()
    return None
