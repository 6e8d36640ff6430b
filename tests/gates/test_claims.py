"""The gate claims (gates.claims): each value on gates whose answer is known by construction, the
verdicts on seeds whose answer is known, and `python -m gates claims` end to end."""

import json
import math

import pytest
import torch

from arch import build_model
from gates import claims_cli
from gates.claims import CLAIMS, gate_measures, judge, layer_profile
from gates.gate_stats import collect_gates
from gates.interventions import run_interventions
from tests.factories import text_data, tiny_trial
from trainers.config import TrialConfig


def test_values_of_constructed_gates():
    # layer 1 (0-based): head 0 always 0, head 1 always 2; layer 2: both heads 1 on semantic tokens,
    # 0 elsewhere. Categories: 2 structural, 2 functional, 4 semantic tokens.
    categories = torch.tensor([0, 0, 1, 1, 2, 2, 2, 2])
    first = torch.tensor([[0.0, 2.0]] * 8)
    second = (categories == 2).double()[:, None].expand(8, 2)
    values = gate_measures({1: first, 2: second}, categories)
    assert values["zero_frac"] == pytest.approx((8 + 8) / 32)
    assert values["depth_slope"] == pytest.approx(0.5 - 1.0)  # mean gate 1.0 at layer 2, 0.5 at layer 3
    assert values["head_share"] == pytest.approx(
        (1.0 + 0.0) / 2
    )  # the head is all of layer 2's variance, none of 3's
    # per token (over layers and heads): structural and functional 0.5, semantic 1.0
    assert values["log_sem_vs_func"] == pytest.approx(math.log(2))
    assert values["log_sem_vs_struct"] == pytest.approx(math.log(2))
    profile = layer_profile({1: first, 2: second})
    assert [r["layer"] for r in profile] == [2, 3]
    assert profile[0]["head_share"] == pytest.approx(1.0) and profile[1]["head_share"] == 0.0


def test_a_category_with_no_gate_has_no_ratio():
    gates = {1: torch.tensor([[0.0], [1.0]])}
    values = gate_measures(gates, torch.tensor([1, 2]))
    assert math.isnan(values["log_sem_vs_func"]) and math.isnan(values["log_sem_vs_struct"])
    assert "log_sem_vs_func" not in gate_measures(gates, None)


def _run(**over):
    base = {c.key: c.null for c in CLAIMS}
    return {**base, **over}


def test_verdicts_over_seeds():
    runs = [
        _run(zero_frac=0.80, depth_slope=-0.10, delta_zero=0.030, delta_mean=-0.001),
        _run(zero_frac=0.82, depth_slope=-0.11, delta_zero=0.031, delta_mean=0.004),
        _run(zero_frac=0.81, depth_slope=-0.12, delta_zero=0.032, delta_mean=0.0),
    ]
    rows = {r["claim"]: r for r in judge(runs)}
    assert rows["zero_frac"]["verdict"] == "holds"
    assert rows["depth_slope"]["verdict"] == "contradicted"
    assert rows["delta_zero"]["verdict"] == "holds"
    assert rows["delta_mean"]["verdict"] == "undecided"
    assert rows["head_share"]["verdict"] == "undecided"  # every seed exactly on the null
    for row in rows.values():
        if row["verdict"] != "undecided":  # a decided claim's interval excludes its null
            assert not row["lo"] <= row["null"] <= row["hi"]
            assert row["level"] >= 0.95  # Holm: judged at 95% or stricter
    assert rows["delta_mean"]["lo"] < 0 < rows["delta_mean"]["hi"]


def test_one_seed_gives_no_verdict():
    rows = judge([_run(zero_frac=0.9)])
    assert all(r["verdict"] == "undecided" and math.isnan(r["lo"]) for r in rows)


def frozen_stream_model(n_layers=4):
    """A SATFormer whose attention and MLP outputs are zero: every layer reads the embeddings, so
    layer l's gate is ReLU(x W_l) on the same x, and with W_l = (l + 1) W its mean is (l + 1) m."""
    model = build_model(
        {"preset": "tiny", "n_layers": n_layers, "d_model": 32, "n_heads": 2, "d_ff": 64, "max_seq_len": 32,
         "residual": {"kind": "value_residual", "mode": "gated", "granularity": "token_head"}}
    )  # fmt: skip
    with torch.no_grad():
        for block in model.blocks:
            block.attn.o_proj.weight.zero_()
            block.mlp.down_proj.weight.zero_()
        shared = model.residual.mix.weight[0].clone()
        for j, layer in enumerate(model.residual.consumers):
            model.residual.mix.weight[j] = (layer + 1) * shared
    return model.eval()


def test_a_constructed_model_gives_the_known_slope_and_no_loss_from_its_gates():
    torch.manual_seed(0)
    model = frozen_stream_model()
    inputs = torch.randint(0, 256, (4, 32))
    batches = [(inputs, torch.roll(inputs, -1, dims=1))]
    gates, _ = collect_gates(model, [inputs])
    first = min(gates)
    m = float(gates[first].double().mean()) / (first + 1)  # the unscaled gate's mean
    values = gate_measures(gates, None)
    assert m > 0
    assert values["depth_slope"] == pytest.approx(m, rel=1e-5)
    assert values["zero_frac"] == pytest.approx(float((gates[first] == 0).double().mean()))
    means = {layer: g.mean(0).tolist() for layer, g in gates.items()}
    rows = {r["intervention"].split("=")[0]: r for r in run_interventions(model, batches, means)}
    assert rows["zero"]["delta_loss"] == 0.0 and rows["layer_head_mean"]["delta_loss"] == 0.0


TRIAL = {
    **tiny_trial(model={"n_layers": 3}),
    "data": text_data(corpus="shakespeare", max_bytes=200_000),
}


def checkpoint(path, seed: int, residual: dict) -> str:
    """A checkpoint as trainers.fit writes it (its trial config and the model's weights), of an
    untrained model: the command's plumbing does not need trained gates."""
    cfg = TrialConfig.from_dict({**TRIAL, "seed": seed, "model": {**TRIAL["model"], "residual": residual}})
    torch.manual_seed(seed)
    model = build_model(cfg.model)
    state = {f"model.{k}": v for k, v in model.state_dict().items()}
    torch.save({"trial_config": cfg.to_dict(), "state_dict": state}, path)
    return str(path)


def test_claims_command_over_seeds_leaves_out_runs_without_gates(tmp_path, capsys):
    gated = {"kind": "value_residual", "mode": "gated"}
    ckpts = [checkpoint(tmp_path / "a.ckpt", 0, gated), checkpoint(tmp_path / "b.ckpt", 1, gated),
             checkpoint(tmp_path / "c.ckpt", 0, {"kind": "none"})]  # fmt: skip
    out = tmp_path / "claims"
    assert claims_cli.main([*ckpts, "--batches", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"left out (no gates): {ckpts[2]}" in printed
    result = json.loads((out / "claims.json").read_text())
    assert [r["seed"] for r in result["runs"]] == [0, 1]
    assert [r["claim"] for r in result["claims"]] == [c.key for c in CLAIMS]
    assert all(r["n"] == 2 for r in result["claims"])
    assert result["runs"][0]["layers"][0]["layer"] == 2  # layer 1 is tapped, 2 and 3 consume
    assert "| layer | mean gate |" in (out / "claims.md").read_text()
    kept = json.loads((out / "runs" / "a.json").read_text())  # a second call reads each run's values back
    kept["measured"]["values"]["zero_frac"] = 0.125
    (out / "runs" / "a.json").write_text(json.dumps(kept))
    assert claims_cli.main([*ckpts, "--batches", "2", "--out", str(out)]) == 0
    assert json.loads((out / "claims.json").read_text())["runs"][0]["values"]["zero_frac"] == 0.125


def test_claims_command_needs_two_gated_runs(tmp_path, capsys):
    one = checkpoint(tmp_path / "a.ckpt", 0, {"kind": "value_residual", "mode": "gated"})
    assert claims_cli.main([one, "--batches", "1", "--out", str(tmp_path / "claims")]) == 2
    assert "1 run(s) with gates; intervals over seeds need at least 2" in capsys.readouterr().err
