"""`TextDataModule`: a real text corpus, tokenised (byte or BPE) and cached as .npy arrays.

    <cache>/text/<sha256[:16]>-<tokenizer>[<vocab>]-val<fraction>/{train,val}.npy, meta.json

The split is by position: val is the last `val_fraction` of the corpus bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from arch.configtree import ConfigError, Issue
from trainers.config import TextDataConfig
from trainers.data.cache import cache_root, save_json, save_npy
from trainers.data.corpora import load_corpus, sha256
from trainers.data.records import PlantedRecords, alphabet, reserved
from trainers.data.registry import register_data
from trainers.data.repeats import PlantedRepeats
from trainers.data.tokenizer import make_tokenizer
from trainers.data.windows import WindowDataModule


def split(data: bytes, val_fraction: float) -> tuple[bytes, bytes]:
    cut = len(data) - max(1, round(len(data) * val_fraction))
    return data[:cut], data[cut:]


def tokenized_corpus(cfg: TextDataConfig, root: Path) -> tuple[np.ndarray, np.ndarray, dict]:
    """(train ids, val ids, meta) of the corpus in `cfg`, from the cache when it is there."""
    data = load_corpus(cfg.corpus, cfg.path, cfg.max_bytes)
    digest = sha256(data)
    tag = "byte" if cfg.tokenizer == "byte" else f"bpe{cfg.bpe_vocab_size}"
    folder = root / "text" / f"{digest[:16]}-{tag}-val{cfg.val_fraction:g}"
    meta_path = folder / "meta.json"
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        return np.load(folder / "train.npy", mmap_mode="r"), np.load(folder / "val.npy", mmap_mode="r"), meta
    train_bytes, val_bytes = split(data, cfg.val_fraction)
    tok = make_tokenizer(cfg.tokenizer, train_bytes, cfg.bpe_vocab_size, root)
    train, val = tok.encode(train_bytes), tok.encode(val_bytes)
    meta = {
        "corpus": cfg.corpus,
        "sha256": digest,
        "bytes": len(data),
        "tokenizer": cfg.tokenizer,
        "vocab_size": tok.vocab_size,
        "train_tokens": len(train),
        "val_tokens": len(val),
    }
    save_npy(folder / "train.npy", train)
    save_npy(folder / "val.npy", val)
    save_json(meta_path, meta)  # written last: its presence means the entry is complete
    return train, val, meta


def token_byte_lengths(cfg: TextDataConfig, root: Path) -> np.ndarray:
    """UTF-8 bytes of text each token id stands for (val_bpb's denominator), from the tokenizer
    (the BPE one from its cache)."""
    if cfg.tokenizer == "byte":
        return make_tokenizer("byte", b"", 256, root).byte_lengths()
    train_bytes, _ = split(load_corpus(cfg.corpus, cfg.path, cfg.max_bytes), cfg.val_fraction)
    return make_tokenizer(cfg.tokenizer, train_bytes, cfg.bpe_vocab_size, root).byte_lengths()


def unigram_entropy(ids: np.ndarray, vocab_size: int) -> float:
    """Entropy in nats per token of the empirical unigram distribution of `ids`."""
    counts = np.bincount(np.asarray(ids, dtype=np.int64), minlength=vocab_size).astype(np.float64)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def reserved_symbols(cfg: TextDataConfig, arrays) -> np.ndarray:
    """`data.records.symbols: reserved`'s ids for this text (ConfigError naming the key when the
    text leaves too few free)."""
    try:
        return reserved(arrays, cfg.vocab_size())
    except ValueError as err:
        allowed = "allowed: text, or a corpus and tokenizer that leave ids unused (byte-level ASCII text)"
        raise ConfigError([Issue("data.records.symbols", f"given 'reserved'; {err}; {allowed}")]) from None


@register_data(TextDataConfig)
class TextDataModule(WindowDataModule):
    def __init__(self, cfg: TextDataConfig, data_root=None, **kw):
        super().__init__(seq_len=cfg.seq_len, **kw)
        self.cfg, self.root = cfg, cache_root(data_root)
        self.meta: dict = {}
        self.train_arrays: list[np.ndarray] = []  # the training tokens, once `setup` ran
        self.reserved_symbols: np.ndarray | None = (
            None  # data.records.symbols reserved: the recall probe's too
        )

    def setup(self, stage: str | None = None) -> None:
        fresh = self.train_set is None
        super().setup(stage)
        if fresh and self.cfg.repeats:
            vocab = self.cfg.vocab_size() if self.cfg.repeat_tokens == "uniform" else None
            self.train_set = PlantedRepeats(self.train_set, self.cfg.repeats, self.seed, vocab)
        records = self.cfg.records
        if fresh and records.fraction:
            if records.symbols == "reserved":
                symbols = self.reserved_symbols = reserved_symbols(
                    self.cfg, [*self.train_arrays, *self.val_arrays]
                )
            else:
                symbols = alphabet(self.train_arrays)  # the training text's own: validation stays unread
            self.train_set = PlantedRecords(
                self.train_set, symbols, records.fraction, records.per_window, records.loss, self.seed
            )

    def arrays(self):
        train, val, self.meta = tokenized_corpus(self.cfg, self.root)
        self.token_bytes = token_byte_lengths(self.cfg, self.root)
        self.train_arrays = [train]
        return [train], [val]
