"""Model-level contracts: presets, the value-residual facts of the papers, gate read-out."""

import pytest
import torch
import yaml

from arch import ModelConfig, build_model, presets
from arch.layers import RMSNorm, Rotary, _RMSNormCPU, interleave
from tests.arch.design_examples import HARNESS_MODEL

NOMINAL_PARAMS = {
    "tiny": 0.9e6,
    "mini": 5.2e6,
    "small": 130e6,
    "medium": 340e6,
    "large": 760e6,
    "xl": 1.3e9,
}


def test_every_preset_has_a_nominal_size():
    assert set(presets()) == set(NOMINAL_PARAMS)


@pytest.mark.parametrize("preset", sorted(NOMINAL_PARAMS))
def test_preset_parameter_count_within_5_percent(preset):
    with torch.device("meta"):  # no memory for the 1.3B model
        model = build_model({"preset": preset})
    total = model.param_counts()["total"]
    assert abs(total - NOMINAL_PARAMS[preset]) / NOMINAL_PARAMS[preset] < 0.05, total


def gated(**residual):
    torch.manual_seed(0)
    return build_model({**HARNESS_MODEL, "residual": {"kind": "value_residual", **residual}})


def test_satformer_adds_consumers_times_d_model_times_n_kv():
    model = gated(tap_layer=1)
    cfg = model.cfg
    assert model.param_counts()["design"] == (cfg.n_layers - 1) * cfg.d_model * cfg.n_kv_heads
    last2 = gated(tap_layer=1, consumers=2)
    assert last2.param_counts()["design"] == 2 * cfg.d_model * cfg.n_kv_heads
    token = gated(granularity="token")
    assert token.param_counts()["design"] == (cfg.n_layers - 1) * cfg.d_model


def test_issue_yaml_is_accepted_as_written():
    text = """
model:
  preset: tiny          # fills the dimensions; any of them can be overridden next to it
  n_layers: 6
  residual:
    kind: value_residual
    mode: gated         # static | gated
    granularity: token_head
    activation: relu
    tap_layer: 1
"""
    cfg = ModelConfig.from_dict(yaml.safe_load(text)["model"])
    assert cfg.n_layers == 6 and cfg.d_model == 128
    assert cfg.residual.kind == "value_residual" and cfg.residual.granularity == "token_head"


def test_preset_alone_is_the_baseline_and_round_trips():
    cfg = ModelConfig.from_dict({"preset": "tiny"})
    assert cfg.residual.kind == "none"
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert ModelConfig.from_dict({"preset": "tiny", "d_model": 64}).d_model == 64


def _capture_values(model):
    seen = []
    original = model.residual.mix_values

    def spy(layer, v, x, state, x_proj=None):
        out = original(layer, v, x, state, x_proj)
        seen.append((layer, v.shape, getattr(state, "v_tap", None)))
        return out

    model.residual.mix_values = spy
    return seen


def test_v_tap_is_the_raw_v_proj_on_kv_heads_before_gqa_repeat():
    model = gated()
    seen = _capture_values(model)
    x = torch.randint(0, 64, (2, 8))
    model(x)
    cfg = model.cfg
    assert cfg.n_kv_heads < cfg.n_heads
    for _, shape, _ in seen:
        assert shape == (2, 8, cfg.n_kv_heads, cfg.head_dim)
    # The tap is exactly layer 1's v_proj output on its normed input.
    block = model.blocks[0]
    w_v = block.attn.qkv_weights()[2]
    expected = torch.nn.functional.linear(block.attn_norm(model.embed(x)), w_v).view(2, 8, cfg.n_kv_heads, -1)
    torch.testing.assert_close(seen[-1][2], expected)


@pytest.mark.parametrize("qk_norm", [True, False])
@pytest.mark.parametrize("granularity", ["token_head", "token"])
def test_gate_logits_from_the_qkv_gemm_are_the_separate_projections(granularity, qk_norm):
    """The gate logits x_v W_a ride along in the QKV GEMM: outputs, gates and every gradient
    (W_a's and the backbone's) as with a separate x_v @ W_a. Without qk-norm rotary reads Q and
    K as views of the fused output (one gate row, token granularity, would make its stride odd)."""
    outputs = []
    for fused in (True, False):
        torch.manual_seed(0)
        model = build_model({**HARNESS_MODEL, "qk_norm": qk_norm,
                             "residual": {"kind": "value_residual", "granularity": granularity}})  # fmt: skip
        with torch.no_grad():
            model.residual.mix.weight.normal_(std=0.5)  # gates away from ReLU's zero
        if not fused:
            model.residual.value_input_weight = lambda layer: None
        x = torch.randint(0, 64, (2, 8))
        logits, gates = model(x, return_gates=True)
        logits.square().mean().backward()
        outputs.append((logits, gates, {n: p.grad for n, p in model.named_parameters()}))
    (a, gates_a, grads_a), (b, gates_b, grads_b) = outputs
    torch.testing.assert_close(a, b)
    assert gates_a.keys() == gates_b.keys() and len(gates_a) == model.cfg.n_layers - 1
    for layer in gates_a:
        torch.testing.assert_close(gates_a[layer], gates_b[layer])
        assert gates_a[layer].gt(0).any()
    assert grads_a.keys() == grads_b.keys()
    for name in grads_a:
        torch.testing.assert_close(grads_a[name], grads_b[name], msg=name)
    assert grads_a["residual.mix.weight"].abs().sum() > 0


def test_gate_logits_from_the_qkv_gemm_under_autocast():
    """Under autocast (bf16 here on CPU; the CUDA path) the fused projection's backward runs in
    forward's precision, as F.linear's does: gradients close to the separate projections'."""
    grads = []
    for fused in (True, False):
        model = gated()
        with torch.no_grad():
            model.residual.mix.weight.normal_(std=0.5)
        if not fused:
            model.residual.value_input_weight = lambda layer: None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(torch.randint(0, 64, (2, 8)))
        assert logits.dtype == torch.bfloat16
        logits.float().square().mean().backward()
        grads.append({n: p.grad for n, p in model.named_parameters()})
    for name, grad in grads[0].items():
        assert grad.dtype == torch.float32, name
        torch.testing.assert_close(grad, grads[1][name], rtol=0.05, atol=2e-3, msg=name)


def test_gate_logits_from_separate_value_streams():
    """A design feeding V its own stream keeps three projections; the gate rows then project x_v."""
    from arch.layers import Attention

    attn = Attention(ModelConfig.from_dict(HARNESS_MODEL))
    xq, xv = torch.randn(2, 8, attn.qkv_proj.in_features), torch.randn(2, 8, attn.qkv_proj.in_features)
    extra = torch.randn(3, attn.qkv_proj.in_features)
    q, k, v, x_proj = attn.project(xq, xq, xv, extra)
    torch.testing.assert_close(x_proj, xv @ extra.t())
    torch.testing.assert_close(v, torch.nn.functional.linear(xv, attn.qkv_weights()[2]))
    *_, fused_proj = attn.project(xv, xv, xv, extra)
    torch.testing.assert_close(fused_proj, xv @ extra.t())


def v_rows_grad(model):
    attn = model.blocks[0].attn
    return attn.qkv_proj.weight.grad.split(attn.widths)[2]  # the W_V rows of layer 1


def test_v_tap_is_not_detached():
    # Silence layer 1's own attention output: its v_proj then reaches the loss only through V_tap.
    model = gated(tap_layer=1)
    with torch.no_grad():
        model.blocks[0].attn.o_proj.weight.zero_()
    model(torch.randint(0, 64, (2, 8))).square().mean().backward()
    assert v_rows_grad(model).abs().sum() > 0

    torch.manual_seed(0)
    baseline = build_model(HARNESS_MODEL)
    with torch.no_grad():
        baseline.blocks[0].attn.o_proj.weight.zero_()
    baseline(torch.randint(0, 64, (2, 8))).square().mean().backward()
    assert v_rows_grad(baseline).abs().sum() == 0


def test_tapped_layer_does_not_consume_and_earlier_layers_are_untouched():
    model = gated(tap_layer=2)
    logits, gates = model(torch.randint(0, 64, (2, 8)), return_gates=True)
    assert sorted(gates) == [2, 3]  # 0-based consumers after the 0-based tap 1


def test_gates_are_returned_only_on_request_and_match_the_equation():
    model = gated(activation="relu")
    x = torch.randint(0, 64, (2, 8))
    assert isinstance(model(x), torch.Tensor)
    logits, gates = model(x, return_gates=True)
    torch.testing.assert_close(logits, model(x))
    assert set(gates) == {1, 2, 3}
    for g in gates.values():
        assert g.shape == (2, 8, model.cfg.n_kv_heads) and (g >= 0).all()
        assert 0 < (g == 0).float().mean() < 1  # ReLU gates: some exactly zero, not all


def test_gate_weights_are_not_touched_by_the_backbone_init():
    model = gated(gate_init="zero")
    assert model.residual.mix.weight.abs().sum() == 0


@pytest.mark.parametrize(("init", "factor"), [("depth_scaled", 1 / 4), ("normal", 1.0)])
def test_init_scales_residual_projections_only_when_depth_scaled(init, factor):
    torch.manual_seed(0)
    model = build_model(
        {"preset": "tiny", "d_model": 256, "n_heads": 4, "d_ff": 512, "n_layers": 8, "init": init}
    )
    block = model.blocks[3]
    for weight, expected in [
        (block.attn.o_proj.weight, 0.02 * factor),  # 1 / sqrt(2 x 8 layers) = 1/4
        (block.mlp.down_proj.weight, 0.02 * factor),
        (block.attn.qkv_proj.weight, 0.02),
    ]:
        assert float(weight.detach().std()) == pytest.approx(expected, rel=0.03)


@pytest.mark.parametrize("preset", ["small", "medium", "large", "xl"])
def test_paper_presets_have_the_official_backbone(preset):
    cfg = ModelConfig.from_dict({"preset": preset})
    assert (cfg.qk_norm, cfg.max_seq_len, cfg.init, cfg.init_std) == (True, 4096, "normal", 0.02)


@pytest.mark.parametrize("preset", ["tiny", "mini"])
def test_cpu_presets_keep_their_backbone(preset):
    cfg = ModelConfig.from_dict({"preset": preset})
    assert (cfg.qk_norm, cfg.init) == (False, "depth_scaled")


def test_checkpoints_with_separate_projections_still_load():
    """Before the fused projections, W_Q, W_K, W_V and W_gate, W_up were weights of their own."""
    model = gated(tap_layer=1)
    hd = model.cfg.head_dim
    to_half = torch.argsort(interleave(hd))  # the rotate-half dim order of those checkpoints

    def rotate_half_rows(w):
        return w.view(-1, hd, w.shape[-1])[:, to_half].reshape(w.shape)

    old = {}
    for name, tensor in model.state_dict().items():
        if name.endswith("attn.qkv_proj.weight"):
            prefix = name.removesuffix("qkv_proj.weight")
            q, k, v = tensor.split(model.blocks[0].attn.widths)
            q, k = rotate_half_rows(q), rotate_half_rows(k)
            old.update(
                {prefix + "q_proj.weight": q, prefix + "k_proj.weight": k, prefix + "v_proj.weight": v}
            )
        elif name.endswith(("q_norm.weight", "k_norm.weight")):
            old[name] = tensor[to_half]
        elif name.endswith("mlp.gate_up_proj.weight"):
            prefix = name.removesuffix("gate_up_proj.weight")
            gate, up = tensor.chunk(2)
            old.update({prefix + "gate_proj.weight": gate, prefix + "up_proj.weight": up})
        else:
            old[name] = tensor
    fresh = gated(tap_layer=1)
    assert model.cfg.qk_norm  # the harness model: the qk-norm weights are permuted too
    torch.manual_seed(9)
    for p in fresh.parameters():
        p.data.normal_()
    fresh.load_state_dict({k: v.clone() for k, v in old.items()})
    x = torch.randint(0, 64, (2, 8))
    with torch.no_grad():
        torch.testing.assert_close(fresh(x), model(x), rtol=0, atol=0)


def rotate_half(x, angles):
    """The rotate-half rotary the backbone used before (pairs i, i + hd/2), written out."""
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def test_rotary_is_rotate_half_up_to_the_interleaving_permutation_in_both_paths():
    hd, t = 16, 12
    rotary = Rotary(hd, 32, 10000.0)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    angles = torch.outer(torch.arange(t, dtype=torch.float64), inv_freq)
    x = torch.randn(2, 3, t, hd, dtype=torch.float64)
    order = interleave(hd)
    expected = rotate_half(x, angles)[..., order]
    # the real path (float64 input; the tables are fp32), then the complex one
    torch.testing.assert_close(rotary(x[..., order]), expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(rotary(x[..., order].float()), expected.float())
    # scores are what attention sees: q.k unchanged by the permutation
    q, k = torch.randn(2, 1, t, hd, dtype=torch.float64), torch.randn(2, 1, t, hd, dtype=torch.float64)
    old = rotate_half(q, angles) @ rotate_half(k, angles).transpose(-1, -2)
    new = rotary(q[..., order]) @ rotary(k[..., order]).transpose(-1, -2)
    torch.testing.assert_close(new, old, rtol=1e-5, atol=1e-6)


def test_cpu_rmsnorm_is_f_rms_norm_forward_and_backward():
    x = torch.randn(3, 5, 16, dtype=torch.float64, requires_grad=True)
    w = torch.randn(16, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: _RMSNormCPU.apply(a, b, 1e-6), (x, w))
    assert torch.autograd.gradcheck(lambda a: _RMSNormCPU.apply(a, None, 1e-6), (x,))  # no scale
    norm = RMSNorm(16, 1e-6)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(16))
    x32 = torch.randn(4, 7, 16, requires_grad=True)
    g = torch.randn(4, 7, 16)
    got = norm(x32)  # the CPU fp32 path
    (dx, dw) = torch.autograd.grad(got, (x32, norm.weight), g)
    want = torch.nn.functional.rms_norm(x32, (16,), norm.weight, 1e-6)
    (wx, ww) = torch.autograd.grad(want, (x32, norm.weight), g)
    assert torch.allclose(got, want, atol=1e-6) and torch.allclose(dx, wx, atol=1e-5)
    assert torch.allclose(dw, ww, atol=1e-5)


def test_rotary_tables_survive_a_dtype_cast_of_the_model():
    """precision bf16-true casts the model: the rotation tables keep fp32 / complex64 (a real cast
    would drop cis's imaginary part), so a model cast there and back rotates exactly as before."""
    from arch.layers import Rotary

    rotary = Rotary(8, 16, 10000.0)
    x = torch.randn(1, 1, 16, 8)
    expected = rotary(x)
    rotary.to(torch.bfloat16)
    assert (rotary.cis.dtype, rotary.cos.dtype) == (torch.complex64, torch.float32)
    assert torch.equal(rotary.float()(x), expected)
