"""Weight-decay groups and learning-rate schedule shapes."""

from __future__ import annotations

import math

import pytest

from arch import ModelConfig, build_model
from tests.trainers.conftest import GATED, STATIC_LEARNED
from trainers.config import TrainConfig
from trainers.decay_groups import GROUPS, split_decay
from trainers.optim import build_optimizer
from trainers.schedules import lr_multiplier

DIMS = {"d_model": 32, "n_layers": 3, "n_heads": 2, "d_ff": 64, "max_seq_len": 32}


def _names(model, params):
    ids = {id(p) for p in params}
    return {n for n, p in model.named_parameters() if id(p) in ids}


@pytest.mark.parametrize(
    "residual", [{"kind": "none"}, GATED, STATIC_LEARNED], ids=["baseline", "gated", "static"]
)
@pytest.mark.parametrize("tie", [True, False])
def test_decay_groups_are_exact(residual, tie):
    model = build_model(ModelConfig.from_dict({**DIMS, "tie_embeddings": tie, "residual": residual}))
    decay, keep = split_decay(model, ["design", "norms", "biases", "embeddings"])
    decay_names, keep_names = _names(model, decay), _names(model, keep)
    projections = {
        f"blocks.{i}.{m}.{p}.weight"
        for i in range(3)
        for m, ps in (
            ("attn", ("qkv_proj", "o_proj")),
            ("mlp", ("gate_up_proj", "down_proj")),
        )
        for p in ps
    }
    expected_decay = projections | (set() if tie else {"head.weight"})
    assert decay_names == expected_decay
    norms = {f"blocks.{i}.{n}.weight" for i in range(3) for n in ("attn_norm", "mlp_norm")} | {"norm.weight"}
    design = {f"residual.{n}" for n, _ in model.residual.named_parameters()}
    assert keep_names == norms | design | {"embed.weight"}
    assert len(decay) + len(keep) == len(list(model.parameters()))  # each parameter once
    if residual["kind"] != "none":
        assert design  # the design really has parameters, and none of them decays


def test_design_group_is_the_designs_own_list():
    model = build_model(ModelConfig.from_dict({**DIMS, "residual": GATED}))
    decay, keep = split_decay(model, ["norms", "embeddings"])  # design omitted: its gate decays
    assert id(model.residual.mix.weight) in {id(p) for p in decay}
    decay_all, keep_none = split_decay(model, [])
    assert not keep_none and len(decay_all) == len(list(model.parameters()))


def test_optimizer_groups_carry_the_weight_decay():
    model = build_model(ModelConfig.from_dict({**DIMS, "residual": GATED}))
    opt = build_optimizer(model, TrainConfig(weight_decay=0.05, lr=1e-3))
    assert [g["weight_decay"] for g in opt.param_groups] == [0.05, 0.0]
    assert all(g["lr"] == 1e-3 for g in opt.param_groups)


def test_cpu_optimizer_is_fused_and_steps_like_torchs_default():
    import torch

    torch.manual_seed(0)
    model = build_model(ModelConfig.from_dict({**DIMS, "residual": GATED}))
    twin = build_model(ModelConfig.from_dict({**DIMS, "residual": GATED}))
    twin.load_state_dict(model.state_dict())
    train = TrainConfig(weight_decay=0.1, lr=1e-2)
    fused = build_optimizer(model, train)
    twins = dict(twin.named_parameters())
    plain = torch.optim.AdamW(  # the same groups, torch's CPU default (parameter by parameter)
        [{"params": [twins[n] for n in _names(model, g["params"])], "weight_decay": g["weight_decay"]}
         for g in fused.param_groups], lr=train.lr, betas=(train.beta1, train.beta2),
    )  # fmt: skip
    assert all(g["fused"] for g in fused.param_groups) and not any(g["fused"] for g in plain.param_groups)
    tokens = torch.randint(0, model.cfg.vocab_size, (2, 16))
    for _ in range(3):
        for m, opt in ((model, fused), (twin, plain)):
            opt.zero_grad()
            m(tokens).square().mean().backward()
            opt.step()
    for (name, a), b in zip(model.named_parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)


def _curve(**kw):
    train = TrainConfig(**{"warmup_frac": 0.1, "min_lr_ratio": 0.1, **kw})
    f = lr_multiplier(train, 100)
    return [f(s) for s in range(100)]


def test_cosine_shape():
    c = _curve(schedule="cosine")
    assert c[0] == pytest.approx(0.1) and c[9] == pytest.approx(1.0)  # linear warmup over 10 steps
    assert all(a < b for a, b in zip(c[:9], c[1:10], strict=False))
    assert all(a >= b for a, b in zip(c[10:], c[11:], strict=False))  # monotone decay
    assert c[10] == pytest.approx(1.0) and c[-1] == pytest.approx(0.1)  # min_lr at the last step
    assert c[55] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 45 / 89)))


def test_wsd_shape():
    c = _curve(schedule="wsd", decay_frac=0.2)
    assert c[9] == pytest.approx(1.0)
    assert all(v == 1.0 for v in c[10:80])  # stable
    decay = c[80:]
    assert all(a > b for a, b in zip(decay, decay[1:], strict=False))
    assert decay[-1] == pytest.approx(0.1)
    steps = [a - b for a, b in zip(decay, decay[1:], strict=False)]
    assert max(steps) == pytest.approx(min(steps))  # linear


def test_constant_shape():
    c = _curve(schedule="constant")
    assert c[:10] == pytest.approx([(s + 1) / 10 for s in range(10)])
    assert all(v == 1.0 for v in c[10:])


def test_no_warmup():
    f = lr_multiplier(TrainConfig(warmup_frac=0.0, schedule="constant"), 10)
    assert f(0) == 1.0


def test_no_decay_groups_are_the_optimizers_registry():
    from arch.configtree import ConfigError
    from trainers.config import TrialConfig

    assert TrainConfig().no_decay == list(GROUPS)
    with pytest.raises(
        ConfigError, match=r"train.no_decay\[1\]: given 'weights'; allowed: " + ", ".join(GROUPS)
    ):
        TrialConfig.from_dict({"train": {"no_decay": ["norms", "weights"]}})
