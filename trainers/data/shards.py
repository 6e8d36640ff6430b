"""`TokenDataModule`: pre-tokenised shards, memory-mapped (nanoGPT / FineWeb layout; the folder
and its checks: `trainers.data.shard_folder`). Written by `python -m trainers.prepare`."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainers.config import TokenDataConfig
from trainers.data.registry import register_data
from trainers.data.shard_folder import open_shards
from trainers.data.tokenizer import shard_tokenizer
from trainers.data.windows import WindowDataModule


@register_data(TokenDataConfig)
class TokenDataModule(WindowDataModule):
    def __init__(self, cfg: TokenDataConfig, data_root=None, **kw):
        super().__init__(seq_len=cfg.seq_len, order=cfg.order, **kw)
        self.folder = Path(cfg.path).expanduser().absolute()

    def arrays(self):
        # the tokenizer, its separator and byte counts, read back from the folder (None: unknown)
        self.tokenizer = shard_tokenizer(self.folder)
        self.token_bytes = None if self.tokenizer is None else self.tokenizer.byte_lengths()
        return open_shards(self.folder, "train"), open_shards(self.folder, "val")


def shard_token_bytes(folder: Path) -> np.ndarray | None:
    """UTF-8 bytes per token id of the shards' tokenizer (`shard_tokenizer`); None where it is
    unknown (and so is val_bpb)."""
    tok = shard_tokenizer(folder)
    return None if tok is None else tok.byte_lengths()
