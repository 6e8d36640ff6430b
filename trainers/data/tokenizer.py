"""Tokenisers: `byte` (vocab 256, the raw UTF-8 bytes) and `bpe` (byte-level BPE, trained offline).

The BPE tokenizer is trained with the `tokenizers` library on the train split only and cached
under `<cache>/tokenizers/bpe-<sha256 of the train split>-<vocab>.json`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from trainers.data.cache import save_text
from trainers.data.corpora import sha256

HUB_OFFLINE_BY_DEFAULT = "HF_HUB_OFFLINE" not in os.environ  # (python -m trainers.prepare hf undoes it)
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never wait on the hub

CHUNK = 1 << 16


def dtype_for(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint8 if vocab_size <= 256 else np.uint16 if vocab_size <= 65536 else np.uint32)


def _chunks(text: str) -> list[str]:
    """Line-aligned pieces of ~64 KiB, so that encode_batch can use every core."""
    out, buf, size = [], [], 0
    for line in text.splitlines(keepends=True):
        buf.append(line)
        size += len(line)
        if size >= CHUNK:
            out.append("".join(buf))
            buf, size = [], 0
    if buf:
        out.append("".join(buf))
    return out


class ByteTokenizer:
    vocab_size = 256

    def encode(self, data: bytes) -> np.ndarray:
        return np.frombuffer(data, dtype=np.uint8).copy()

    def decode(self, ids) -> str:
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")

    def byte_lengths(self) -> np.ndarray:
        """UTF-8 bytes each token id stands for: one."""
        return np.ones(self.vocab_size, dtype=np.int64)


class BPETokenizer:
    """Byte-level BPE (GPT-2 style pre-tokenisation, no special tokens)."""

    def __init__(self, tok):
        self.tok = tok
        self.vocab_size = tok.get_vocab_size()

    @classmethod
    def train(cls, train_bytes: bytes, vocab_size: int, cache_dir: Path) -> BPETokenizer:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        path = cache_dir / "tokenizers" / f"bpe-{sha256(train_bytes)[:16]}-{vocab_size}.json"
        if path.is_file():
            return cls(Tokenizer.from_file(str(path)))
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            special_tokens=[],
            show_progress=False,
        )
        tok.train_from_iterator(_chunks(train_bytes.decode("utf-8", errors="replace")), trainer=trainer)
        save_text(path, tok.to_str())
        return cls(tok)

    def encode(self, data: bytes) -> np.ndarray:
        pieces = self.tok.encode_batch(_chunks(data.decode("utf-8", errors="replace")))
        ids = [i for enc in pieces for i in enc.ids]
        return np.asarray(ids, dtype=dtype_for(self.vocab_size))

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids])

    def byte_lengths(self) -> np.ndarray:
        """UTF-8 bytes each token id stands for: byte-level BPE writes every byte as one character
        of its alphabet (GPT-2's byte-to-unicode map), so a token's length in characters is its
        length in bytes."""
        from tokenizers import pre_tokenizers

        alphabet = set(pre_tokenizers.ByteLevel.alphabet())
        out = np.zeros(self.vocab_size, dtype=np.int64)
        for i in range(self.vocab_size):
            token = self.tok.id_to_token(i)
            if not set(token) <= alphabet:
                raise ValueError(f"token {i} ({token!r}) is not byte-level: its byte count is unknown")
            out[i] = len(token)
        return out


def make_tokenizer(kind: str, train_bytes: bytes, vocab_size: int, cache_dir: Path):
    """`byte` or `bpe`; the BPE is trained on `train_bytes` (and cached)."""
    if kind == "byte":
        return ByteTokenizer()
    if kind == "bpe":
        return BPETokenizer.train(train_bytes, vocab_size, cache_dir)
    raise ValueError(f"unknown tokenizer {kind!r}; allowed: byte, bpe")
