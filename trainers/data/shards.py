"""`TokenDataModule`: pre-tokenised shards, memory-mapped (nanoGPT / FineWeb layout; the folder
and its checks: `trainers.data.shard_folder`). Written by `python -m trainers.prepare`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainers.config import TokenDataConfig
from trainers.data.registry import register_data
from trainers.data.shard_folder import open_shards, read_meta
from trainers.data.tokenizer import BPETokenizer, ByteTokenizer
from trainers.data.windows import WindowDataModule


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
