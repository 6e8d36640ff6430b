"""`python -m gates` end to end on a tiny trained trial."""

import json

import pytest

from gates import cli as analyze
from sweeps.run.store_template import seed_store
from tests.factories import text_data, tiny_trial
from trainers.fit import fit

TRIAL = {
    **tiny_trial(model={"n_layers": 3}, train={"tokens": 20 * 8 * 32, "eval_every": 20, "lr": 1e-2}),
    "data": text_data(corpus="shakespeare", max_bytes=200_000),
}


def trained(tmp_path, residual):
    ckpt = tmp_path / "final.ckpt"
    fit({**TRIAL, "model": {**TRIAL["model"], "residual": residual}}, checkpoint_path=ckpt)
    return ckpt


def test_gated_trial_gets_statistics_categories_and_interventions(tmp_path, capsys):
    ckpt = trained(tmp_path, {"kind": "value_residual", "mode": "gated"})
    out = tmp_path / "analysis"
    assert analyze.main([str(ckpt), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["gate_stats"]) == {"L2", "L3"}
    assert len(summary["gate_stats"]["L2"]["mean"]) == 2  # one per KV head
    assert set(summary["by_category"]["L2"]) == {"structural", "functional", "semantic"}
    rows = {r["intervention"].split("=")[0]: r for r in summary["interventions"]}
    assert rows["trained"]["val_loss"] == pytest.approx(summary["val_loss"])
    assert set(rows) == {"trained", "zero", "layer_head_mean", "constant"}
    for name in (
        "gate_mean_heatmap.png",
        "gate_depth_profile.png",
        "gate_by_category.png",
        "interventions.csv",
    ):
        assert (out / name).stat().st_size > 0
    assert "mean gate" in capsys.readouterr().out


def test_static_trial_reports_its_coefficients(tmp_path):
    ckpt = trained(tmp_path, {"kind": "value_residual", "mode": "static", "coefficient": "learned"})
    out = tmp_path / "analysis"
    assert analyze.main([str(ckpt), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [c["layer"] for c in summary["static_coefficients"]] == [2, 3]
    assert "interventions" not in summary
    assert (out / "static_coefficients.png").is_file()


def test_missing_target_exits_2(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path}/m.db"
    run_id = "0123456789abcdef0123456789abcdef"
    for target, why in [
        ("no-such-run-or-file", "neither a checkpoint file nor an MLflow run id (32 hex digits)"),
        (str(tmp_path / "final.ckpt"), "no such checkpoint file"),
        (run_id, f"no MLflow store at {uri} to find the run in"),
    ]:
        assert analyze.main([target, "--tracking-uri", uri]) == 2
        assert f"cannot load {target!r}: {target}: {why}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no store made by asking
    seed_store(uri)  # the tables from the launcher's empty store, not MLflow's migrations (seconds)
    for found in (uri, f"{uri}?timeout=30"):  # a store without that run (its URI's query aside): MLflow says
        assert analyze.main([run_id, "--tracking-uri", found]) == 2
        assert f"Run with id={run_id} not found" in capsys.readouterr().err


def test_a_bpe_shard_trial_is_analysed_within_a_token_budget(tmp_path, capsys):
    """At scale: a token budget in micro-batches, a device and a precision; token categories for a
    BPE-tokenised shard trial (its tokenizer.json)."""
    from trainers.prepare import prepare

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("The cat sat on the mat, and the dog sat on the log by the door.\n" * 600)
    shards = tmp_path / "shards"
    prepare(str(corpus), shards, tokenizer="bpe", vocab_size=300, data_root=tmp_path / "cache")
    trial = {
        **TRIAL,
        "model": {**TRIAL["model"], "residual": {"kind": "value_residual", "mode": "gated"}},
        "data": {"kind": "tokens", "path": str(shards), "seq_len": 32},
    }
    ckpt = tmp_path / "final.ckpt"
    fit(trial, checkpoint_path=ckpt)
    summaries = {}
    for precision in ("32-true", "bf16-true"):
        out = tmp_path / precision
        argv = [str(ckpt), "--out", str(out), "--tokens", "200", "--micro-batch", "2", "--device", "cpu"]
        assert analyze.main([*argv, "--precision", precision]) == 0
        summaries[precision] = json.loads((out / "summary.json").read_text())
    full = summaries["32-true"]
    assert full["tokens"] == 192 and full["device"] == "cpu" and full["precision"] == "32-true"  # 6 x 32
    assert set(full["by_category"]["L2"]) == {"structural", "functional", "semantic"}
    assert all(n > 0 for n in full["category_counts"])
    assert summaries["bf16-true"]["val_loss"] == pytest.approx(full["val_loss"], rel=0.05)
    assert "192 held-out tokens on cpu, 32-true" in capsys.readouterr().out
