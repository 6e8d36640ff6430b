"""bench.recall_curve: the probe's curve over one short training run, and at init."""

from __future__ import annotations

import json

import yaml

from bench import recall_curve


def _trial(tmp_path, monkeypatch):
    monkeypatch.setenv("SATSWEEP_DATA", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("".join(f"Line {i}: the quick brown fox {i % 7}.\n" for i in range(2000)))
    trial = {
        "model": {"n_layers": 2, "d_model": 32, "n_heads": 2, "d_ff": 64, "max_seq_len": 32},
        "data": {"kind": "text", "corpus": "folder", "path": str(corpus), "seq_len": 32, "repeats": 0.5},
        "train": {
            "tokens": 8 * 4 * 32,
            "batch_size": 4,
            "eval_every": 4,
            "eval_batches": 1,
            "num_threads": 1,
        },
        "recall": {"windows": 8},
    }
    path = tmp_path / "trial.yaml"
    path.write_text(yaml.safe_dump(trial))
    return path


def test_curve_has_a_row_per_validation_with_the_probe_and_val_loss(tmp_path, monkeypatch, capsys):
    out = tmp_path / "curve.jsonl"
    assert recall_curve.main([str(_trial(tmp_path, monkeypatch)), "--json", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["step"] for r in rows] == [4, 8] and [r["tokens"] for r in rows] == [512, 1024]
    for row in rows:
        assert {"val_loss", "copy_gain", "recall_acc", "recall_loss"} <= row.keys()


def test_init_measures_the_untrained_model_only(tmp_path, monkeypatch):
    out = tmp_path / "init.jsonl"
    assert recall_curve.main([str(_trial(tmp_path, monkeypatch)), "--init", "--json", str(out)]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["tokens"] == 0 and abs(row["copy_gain"]) < 0.1 and row["recall_loss"] > 3


def test_bad_key_exits_2(tmp_path, monkeypatch, capsys):
    assert recall_curve.main([str(_trial(tmp_path, monkeypatch)), "--set", "recall.windows=-1"]) == 2
    assert "recall.windows" in capsys.readouterr().err


def test_symbols_from_must_be_ids_the_text_never_uses(tmp_path, monkeypatch, capsys):
    trial = str(_trial(tmp_path, monkeypatch))
    assert recall_curve.main([trial, "--init", "--symbols-from", "32"]) == 2  # ' ' and digits are text
    assert "--symbols-from 32: the text uses ids [32, " in capsys.readouterr().err
    assert recall_curve.main([trial, "--init", "--symbols-from", "240"]) == 2
    assert "must lie in 0..255" in capsys.readouterr().err


def test_symbols_from_moves_the_mix_and_the_probe_to_those_ids(tmp_path, monkeypatch):
    from trainers import recall
    from trainers.data import text

    monkeypatch.setattr(recall, "alphabet", recall.alphabet)  # restored after the test
    monkeypatch.setattr(text, "alphabet", text.alphabet)
    out = tmp_path / "init.jsonl"
    trial = str(_trial(tmp_path, monkeypatch))
    assert recall_curve.main([trial, "--init", "--symbols-from", "200", "--json", str(out)]) == 0
    assert recall.alphabet([]).tolist() == text.alphabet([]).tolist() == list(range(200, 232))
    assert json.loads(out.read_text())["symbols_from"] == 200
