"""trainers.trained: a trial's tokenizer from its config, and clear refusals (no lm-eval needed)."""

import pytest
import torch

from tests.factories import tiny_trial
from trainers.config import TrialConfig
from trainers.trained import TrialNotFound, load_checkpoint, load_trial, trial_tokenizer

MODEL = {"vocab_size": 300, "d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64, "max_seq_len": 128}


def trial(data: dict) -> TrialConfig:
    return TrialConfig.from_dict({"model": MODEL, "data": data, "train": {"tokens": 10_000}})


def test_a_bpe_trial_gets_the_bpe_it_trained_with(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text("".join(f"the quick brown fox {i % 13} jumps\n" for i in range(2000)))
    cfg = trial({"kind": "text", "corpus": "folder", "path": str(folder), "tokenizer": "bpe",
                 "bpe_vocab_size": 300})  # fmt: skip
    tok = trial_tokenizer(cfg, data_root=tmp_path / "cache")
    assert 256 < tok.vocab_size <= 300  # the byte alphabet plus merges (fewer when the corpus runs out)
    ids = tok.encode(b"the quick brown fox\n")
    assert len(ids) < len("the quick brown fox\n")  # merges learned from the corpus
    assert tok.decode(ids) == "the quick brown fox\n"
    assert len(tok.encode(b"\n")) == 1  # the adapter's prefix token
    again = trial_tokenizer(cfg, data_root=tmp_path / "cache")  # from the cache: the same merges
    assert list(again.encode(b"jumps over")) == list(tok.encode(b"jumps over"))


def test_mqar_trials_have_no_text_tokenizer():
    cfg = TrialConfig.from_dict(tiny_trial())  # the tests' tiny trial is an MQAR one
    with pytest.raises(ValueError, match="data kind 'mqar' has no text tokenizer; allowed: text, tokens"):
        trial_tokenizer(cfg)


def test_refuses_files_that_are_not_trial_checkpoints(tmp_path):
    other = tmp_path / "other.ckpt"
    torch.save({"state_dict": {}}, other)
    with pytest.raises(TrialNotFound, match="no trial_config in this checkpoint"):
        load_checkpoint(other)
    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint")
    with pytest.raises(TrialNotFound, match="notes.txt: not a readable checkpoint"):
        load_checkpoint(text)
    with pytest.raises(TrialNotFound, match="no such checkpoint file"):
        load_trial(str(tmp_path / "missing.ckpt"))
