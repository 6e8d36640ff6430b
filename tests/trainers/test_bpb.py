"""val_bpb: bits per UTF-8 byte of the validation text, from exact byte counts per token."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.trainers.conftest import TEXT
from trainers import TrialConfig
from trainers.data.build import build_datamodule
from trainers.data.cache import cache_root
from trainers.data.corpora import load_corpus
from trainers.data.shards import shard_token_bytes
from trainers.data.text import split
from trainers.data.tokenizer import FastTokenizer, make_tokenizer
from trainers.fit import fit
from trainers.prepare import main as prepare_main

UNICODE = "café naïve — ∑ 日本語 🙂 plain ascii\n"


@pytest.mark.parametrize("kind", ["byte", "bpe"])
def test_byte_counts_per_token_add_up_to_the_text_exactly(tmp_path, kind):
    tok = make_tokenizer(kind, TEXT.encode(), 300, tmp_path)
    lengths = tok.byte_lengths()
    assert lengths.shape == (tok.vocab_size,) and lengths.min() >= 1
    for text in (UNICODE, TEXT[:5000] + UNICODE):
        ids = tok.encode(text.encode())
        assert int(lengths[ids.astype(np.int64)].sum()) == len(text.encode())
    if kind == "bpe":
        assert lengths.max() > 1  # merges: a token of several bytes


def val_bytes_per_token(cfg) -> float:
    """The validation targets' bytes per token, counted by decoding them (not by the table)."""
    data = build_datamodule(cfg)
    data.setup("validate")
    tok = make_tokenizer(cfg.data.tokenizer, b"", 256, None) if cfg.data.tokenizer == "byte" else None
    n = nbytes = 0
    for _, targets in data.val_dataloader():
        for row in targets.tolist():
            n += len(row)
            text = bytes(row) if tok is not None else data_tokenizer(cfg).decode(row).encode()
            nbytes += len(text)
    return nbytes / n


def data_tokenizer(cfg):

    train, _ = split(load_corpus(cfg.data.corpus, cfg.data.path, None), cfg.data.val_fraction)
    return FastTokenizer.train_bpe(train, cfg.data.bpe_vocab_size, cache_root(None))


@pytest.mark.parametrize("kind", ["byte", "bpe"])
def test_val_bpb_is_the_validation_loss_in_bits_over_its_bytes(tiny_tree, kind):
    cfg = TrialConfig.from_dict(tiny_tree(data={"tokenizer": kind, "bpe_vocab_size": 300}))
    metrics = fit(cfg)
    per_byte = val_bytes_per_token(cfg)
    assert metrics["val_bpb"] == pytest.approx(metrics["val_loss"] / math.log(2) / per_byte, rel=1e-6)
    if kind == "byte":
        assert per_byte == 1.0
    else:
        assert per_byte > 1.5  # BPE tokens of this corpus stand for several bytes each


def test_prepared_shards_give_the_same_table(corpus_dir, tmp_path):
    assert (
        prepare_main([str(corpus_dir), str(tmp_path / "s"), "--tokenizer", "bpe", "--vocab-size", "300"]) == 0
    )
    table = shard_token_bytes(tmp_path / "s")
    assert table is not None and table.shape == (300,) and table.max() > 1
