"""The shared contract of every registered residual design (DESIGN.md principle 7)."""

import copy

import pytest
import torch

from arch import build_model, registered_kinds
from tests.arch.design_examples import DESIGN_EXAMPLES, HARNESS_MODEL
from trainers.flops import config_flops_per_token, flops_per_token

IDS = [name for name, _ in DESIGN_EXAMPLES]


def make(residual, seed=0, **overrides):
    torch.manual_seed(seed)
    return build_model({**HARNESS_MODEL, **overrides, "residual": copy.deepcopy(residual)})


def tokens(batch=2, length=16, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, HARNESS_MODEL["vocab_size"], (batch, length), generator=g)


def test_every_registered_kind_is_in_the_harness():
    covered = {residual["kind"] for _, residual in DESIGN_EXAMPLES}
    assert covered == set(registered_kinds())


@pytest.mark.parametrize("residual", [r for _, r in DESIGN_EXAMPLES], ids=IDS)
def test_forward_backward_shapes_and_finite_grads(residual):
    model = make(residual)
    x = tokens()
    logits = model(x)
    assert logits.shape == (2, 16, HARNESS_MODEL["vocab_size"])
    logits.logsumexp(-1).mean().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, f"{name} gets no gradient"
        assert torch.isfinite(p.grad).all(), name


@pytest.mark.parametrize("residual", [r for _, r in DESIGN_EXAMPLES], ids=IDS)
def test_causal(residual):
    model = make(residual).eval()
    x = tokens()
    t = 9
    y = x.clone()
    y[:, t] = (y[:, t] + 1) % HARNESS_MODEL["vocab_size"]
    with torch.no_grad():
        a, b = model(x), model(y)
    torch.testing.assert_close(a[:, :t], b[:, :t], rtol=0, atol=0)
    assert not torch.allclose(a[:, t:], b[:, t:])


@pytest.mark.parametrize("residual", [r for _, r in DESIGN_EXAMPLES], ids=IDS)
def test_deterministic_for_a_seed(residual):
    x = tokens()
    a = make(residual, seed=3)(x)
    b = make(residual, seed=3)(x)
    assert torch.equal(a, b)
    c = make(residual, seed=4)(x)
    assert not torch.equal(a, c)


@pytest.mark.parametrize("residual", [r for _, r in DESIGN_EXAMPLES], ids=IDS)
def test_neutral_point_computes_the_baseline(residual):
    model = make(residual, seed=5)
    if not model.residual.make_neutral_():
        pytest.skip("this configuration has no neutral point (e.g. sigmoid gate: act(0) != 0)")
    baseline = make({"kind": "none"}, seed=5)
    # Same backbone weights: copy everything the baseline has.
    missing, unexpected = baseline.load_state_dict(model.state_dict(), strict=False)
    assert not missing
    assert all(k.startswith("residual.") for k in unexpected)
    x = tokens()
    with torch.no_grad():
        torch.testing.assert_close(model(x), baseline(x), rtol=0, atol=0)


@pytest.mark.parametrize("residual", [r for _, r in DESIGN_EXAMPLES], ids=IDS)
def test_parameter_count_matches_the_formula(residual):
    model = make(residual)
    counts = model.param_counts()
    assert counts["design"] == model.residual.expected_param_count()
    # a design that reallocates MLP widths moves 3 D per unit of width (gate, up, down)
    cfg = model.cfg
    moved = 3 * cfg.d_model * (sum(cfg.residual.ffn_widths(cfg)) - cfg.n_layers * cfg.d_ff)
    assert counts["backbone"] == make({"kind": "none"}).param_counts()["total"] + moved
    assert counts["total"] == cfg.param_count()  # what matched baselines and ladders count, unbuilt
    assert config_flops_per_token(cfg, 64) == flops_per_token(model, 64)


@pytest.mark.parametrize("backbone", [{"tie_embeddings": False}, {"qk_norm": False}, {"n_kv_heads": 4}])
@pytest.mark.parametrize("residual", [r for _, r in DESIGN_EXAMPLES], ids=IDS)
def test_the_configs_parameter_count_holds_for_the_backbones_options(residual, backbone):
    model = make(residual, **backbone)
    assert model.param_counts()["total"] == model.cfg.param_count()
    assert config_flops_per_token(model.cfg, 32) == flops_per_token(model, 32)


@pytest.mark.parametrize("residual", [r for _, r in DESIGN_EXAMPLES], ids=IDS)
def test_config_round_trip(residual):
    model = make(residual)
    cfg = model.cfg
    assert type(cfg).from_dict(cfg.to_dict()) == cfg
