"""`python -m gates` end to end on a tiny trained trial."""

import json

import pytest

from gates import cli as analyze
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
    assert analyze.main(["no-such-run-or-file", "--tracking-uri", f"sqlite:///{tmp_path}/m.db"]) == 2
    assert "cannot load 'no-such-run-or-file'" in capsys.readouterr().err
