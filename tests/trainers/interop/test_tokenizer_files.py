"""The byte tokenizer as a tokenizer.json: AutoTokenizer gives the byte ids the trial trained on."""

import pytest

pytest.importorskip("transformers", reason="the interop extra (pip install -e '.[interop]')")

from transformers import AutoTokenizer  # noqa: E402

from trainers.data.tokenizer import ByteTokenizer  # noqa: E402
from trainers.export import main as export  # noqa: E402
from trainers.interop.tokenizer_files import byte_tokenizer_json, write_tokenizer  # noqa: E402

TEXT = "To be, or not\tto be:\r\n  Ünïcödé ✓ 漢字 \x00\x7f end.\n"


def test_autotokenizer_encodes_and_decodes_bytes_as_the_byte_tokenizer(tmp_path):
    write_tokenizer(tmp_path, byte_tokenizer_json(), max_length=64)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    expected = ByteTokenizer().encode(TEXT.encode()).tolist()
    assert tok(TEXT, add_special_tokens=False).input_ids == expected
    assert tok.decode(expected) == TEXT
    assert (tok.eos_token_id, tok.pad_token_id, len(tok)) == (10, 0, 256)


def test_export_refuses_a_missing_checkpoint_with_status_2(tmp_path, capsys):
    assert export([str(tmp_path / "none.ckpt"), "--out", str(tmp_path / "hf")]) == 2
    assert "none.ckpt: no such checkpoint file" in capsys.readouterr().err
    assert not (tmp_path / "hf").exists()


def test_autotokenizer_on_a_bpe_trials_tokenizer_json_gives_its_ids(tmp_path):
    from trainers.data.tokenizer import FastTokenizer

    corpus = ("the quick brown fox jumps over the lazy dog.\n" * 50 + TEXT).encode()
    bpe = FastTokenizer.train_bpe(corpus, 300, tmp_path / "cache")
    (tmp_path / "hf").mkdir()
    write_tokenizer(tmp_path / "hf", bpe.tok.to_str(), max_length=64)
    tok = AutoTokenizer.from_pretrained(tmp_path / "hf")
    for text in (TEXT, "the lazy fox.\nthe dog"):
        assert tok(text, add_special_tokens=False).input_ids == bpe.encode(text.encode()).tolist()
    assert tok.eos_token == bpe.tok.id_to_token(bpe.encode(b"\n")[0])
