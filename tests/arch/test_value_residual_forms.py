"""The official SATFormer code's forms of the value-residual family, against hand computations:
ResFormer's softmax coefficients, the head-normalised gates, and consumers reaching every layer."""

import math

import pytest
import torch

from arch import ConfigError, ModelConfig, build_model
from tests.arch.design_examples import HARNESS_MODEL


def model_with(seed=0, **residual):
    torch.manual_seed(seed)
    return build_model({**HARNESS_MODEL, "residual": {"kind": "value_residual", **residual}})


def softmax_resformer(**extra):
    return model_with(mode="static", coefficient="softmax", **extra)


def test_softmax_coefficients_start_at_n_over_n_minus_1_and_one_half():
    model = softmax_resformer()  # 4 layers, tap 1: three consumers
    coeffs = model.residual.coefficients()
    assert [c["layer"] for c in coeffs] == [2, 3, 4]
    for c in coeffs:
        assert c["lambda_tap"] == pytest.approx(4 / 3) and c["lambda_self"] == pytest.approx(0.5)


def test_softmax_coefficients_match_the_hand_formula():
    model = softmax_resformer()
    mix = model.residual.mix
    with torch.no_grad():
        mix.lambda_scale.fill_(2.5)
        mix.lambda_logits.copy_(torch.tensor([[0.3], [-1.0], [0.7]]))
        mix.lambda_self.copy_(torch.tensor([[0.2], [0.9], [1.1]]))
    z = [0.3, -1.0, 0.7]
    total = sum(math.exp(v) for v in z)
    v, v_tap = torch.randn(2, 5, 2, 8), torch.randn(2, 5, 2, 8)
    for j, (logit, lam_self) in enumerate(zip(z, [0.2, 0.9, 1.1], strict=True)):
        lam_tap = 2.5 * math.exp(logit) / total
        out, gate = mix(j, v, None, v_tap)
        assert gate is None
        torch.testing.assert_close(out, lam_tap * v_tap + lam_self * v)


def test_softmax_coefficients_with_last_k_keep_the_unused_logits_in_the_softmax():
    # official code: logits for every layer after the tap, only the last k consume
    model = softmax_resformer(consumers=2)
    mix = model.residual.mix
    assert mix.lambda_logits.shape == (3, 1) and mix.lambda_self.shape == (2, 1)
    with torch.no_grad():
        mix.lambda_logits.copy_(torch.tensor([[2.0], [0.0], [1.0]]))
    total = math.exp(2.0) + 1 + math.exp(1.0)
    got = [c["lambda_tap"] for c in model.residual.coefficients()]
    assert got == pytest.approx([4 * 1 / total, 4 * math.exp(1.0) / total])


def test_softmax_coefficients_per_head_normalise_over_layers_per_head():
    model = softmax_resformer(granularity="head")
    lam = model.residual.mix.tap_coefficients()
    assert lam.shape == (3, HARNESS_MODEL["n_kv_heads"])
    with torch.no_grad():
        model.residual.mix.lambda_logits.normal_()
    lam = model.residual.mix.tap_coefficients()
    torch.testing.assert_close(lam.sum(0), torch.full((2,), 4.0))  # s = N on every head


def head_gate(activation, z):
    model = model_with(activation=activation, gate_init="zero")
    mix = model.residual.mix
    d = HARNESS_MODEL["d_model"]
    x = torch.zeros(1, 1, d)
    x[0, 0, 0] = 1.0
    with torch.no_grad():
        mix.weight[0, 0] = torch.tensor(z)  # x W_a = z for this one token
    v, v_tap = torch.randn(1, 1, 2, 4), torch.randn(1, 1, 2, 4)
    with torch.no_grad():
        out, gate = mix(0, v, x, v_tap)
    return out, gate, v, v_tap


def test_softmax_gate_is_n_kv_times_the_softmax_over_heads():
    z = [0.5, -0.25]
    out, gate, v, v_tap = head_gate("softmax", z)
    e = [math.exp(t) for t in z]
    expected = [2 * t / sum(e) for t in e]
    assert gate.flatten().tolist() == pytest.approx(expected)
    assert float(gate.sum()) == pytest.approx(2.0)  # mean 1 over the heads, whatever W_a is
    torch.testing.assert_close(out, v + torch.tensor(expected).view(1, 1, 2, 1) * v_tap)


def test_gate_bias_adds_b_to_the_logits_zero_at_init_and_in_the_fused_path():
    """gate_bias (the official value_residual_proj_bias): a = relu(x W_a + b), b = 0 at init."""
    model = model_with(activation="relu", gate_init="zero", gate_bias=True)
    mix = model.residual.mix
    assert mix.bias.shape == (3, 2) and not mix.bias.any()  # 3 consumers x 2 KV heads
    x = torch.zeros(1, 1, HARNESS_MODEL["d_model"])
    x[0, 0, 0] = 1.0
    v, v_tap = torch.randn(1, 1, 2, 4), torch.randn(1, 1, 2, 4)
    with torch.no_grad():
        mix.weight[1, 0] = torch.tensor([0.5, -0.25])
        mix.bias[1] = torch.tensor([0.25, 0.5])
        out, gate = mix(1, v, x, v_tap)  # relu(0.5 + 0.25) = 0.75, relu(-0.25 + 0.5) = 0.25
        fused_out, _ = mix(1, v, x, v_tap, logits=x @ mix.weight[1])  # logits from the QKV GEMM
    assert gate.flatten().tolist() == [0.75, 0.25]
    torch.testing.assert_close(out, v + torch.tensor([0.75, 0.25]).view(1, 1, 2, 1) * v_tap)
    torch.testing.assert_close(fused_out, out)
    assert model.residual.expected_param_count() == 3 * (HARNESS_MODEL["d_model"] + 1) * 2


def test_gate_bias_is_gated_only():
    with pytest.raises(ConfigError, match=r"model\.residual\.gate_bias: applies only to mode 'gated'"):
        ModelConfig.from_dict(
            {**HARNESS_MODEL, "residual": {"kind": "value_residual", "mode": "static", "gate_bias": True}}
        )


def test_softmax_sigmoid_gate_is_the_softmax_times_each_heads_sigmoid():
    z = [0.5, -0.25]
    _, gate, _, _ = head_gate("softmax_sigmoid", z)
    e = [math.exp(t) for t in z]
    expected = [2 * t / sum(e) / (1 + math.exp(-zz)) for t, zz in zip(e, z, strict=True)]
    assert gate.flatten().tolist() == pytest.approx(expected)


@pytest.mark.parametrize("activation", ["softmax", "softmax_sigmoid"])
def test_head_normalised_gates_have_no_neutral_point(activation):
    assert model_with(activation=activation).residual.make_neutral_() is False


@pytest.mark.parametrize(
    "model, message",
    [
        (
            {"residual": {"kind": "value_residual", "granularity": "token", "activation": "softmax"}},
            "model.residual.activation: given 'softmax' with granularity 'token'; it normalises over the KV"
            " heads of a token: allowed with granularity 'token_head'",
        ),
        (
            {"n_kv_heads": 1, "residual": {"kind": "value_residual", "activation": "softmax_sigmoid"}},
            "model.residual.activation: given 'softmax_sigmoid' with n_kv_heads 1",
        ),
        (
            {"residual": {"kind": "value_residual", "mode": "static", "coefficient": "softmax",
                          "lambda_tap": 0.3}},
            "model.residual.lambda_tap: not used by coefficient 'softmax'",
        ),
    ],
)  # fmt: skip
def test_forms_that_cannot_apply_are_refused(model, message):
    with pytest.raises(ConfigError) as err:
        ModelConfig.from_dict({**HARNESS_MODEL, **model})
    assert message in str(err.value)


@pytest.mark.parametrize("mode", ["gated", "static"])
def test_consumers_equal_to_every_layer_after_the_tap_is_all(mode):
    x = torch.randint(0, 64, (2, 8))
    for tap in (1, 2):
        every = model_with(seed=3, mode=mode, tap_layer=tap, consumers=HARNESS_MODEL["n_layers"] - tap)
        all_ = model_with(seed=3, mode=mode, tap_layer=tap, consumers="all")
        assert every.residual.consumers == all_.residual.consumers
        with torch.no_grad():
            assert torch.equal(every(x), all_(x))
