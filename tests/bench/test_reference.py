"""The plain reference GPT: with the backbone's three features it is the backbone's function."""

import pytest
import torch

from arch import ModelConfig, build_model
from arch.layers import interleave
from bench import reference
from trainers.flops import flops_per_token


def plain_weights(model, cfg) -> dict:
    """The backbone's weights under the reference's names; each head's Q and K dims go from the
    backbone's interleaved rotary pairs (2i, 2i + 1) to rotate-half pairs (i, i + hd / 2)."""
    hd, d = cfg.head_dim, cfg.d_model
    to_half = torch.argsort(interleave(hd))
    sd = model.state_dict()
    out = {"tok.weight": sd["embed.weight"], "ln.weight": sd["norm.weight"]}
    for i in range(cfg.n_layers):
        p = f"blocks.{i}."
        q, k, v = sd[p + "attn.qkv_proj.weight"].split(d)
        q, k = (w.view(-1, hd, d)[:, to_half].reshape(d, d) for w in (q, k))
        gate, up = sd[p + "mlp.gate_up_proj.weight"].chunk(2)
        out.update({
            p + "ln1.weight": sd[p + "attn_norm.weight"], p + "ln2.weight": sd[p + "mlp_norm.weight"],
            p + "qkv.weight": torch.cat([q, k, v]), p + "proj.weight": sd[p + "attn.o_proj.weight"],
            p + "gate.weight": gate, p + "up.weight": up, p + "out.weight": sd[p + "mlp.down_proj.weight"],
        })  # fmt: skip
    return out


def test_with_all_features_it_computes_the_backbone():
    cfg = ModelConfig.from_dict({"preset": "tiny", "max_seq_len": 64, "residual": {"kind": "none"}})
    torch.manual_seed(0)
    model = build_model(cfg)
    plain = reference.like(cfg, reference.FEATURES)
    plain.load_state_dict(plain_weights(model, cfg))  # strict: the same parameters, no more, no fewer
    assert sum(p.numel() for p in plain.parameters()) == model.param_counts()["total"]
    norms = sum(p.numel() for p in model.parameters() if p.dim() == 1)  # the backbone counts them too
    assert plain.flops_per_token(64) + 6 * norms == flops_per_token(model, 64)
    tokens = torch.randint(0, cfg.vocab_size, (2, 48), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(plain(tokens), model(tokens), rtol=1e-4, atol=1e-4)


def test_each_feature_changes_the_plain_model_and_unknown_ones_are_refused():
    cfg = ModelConfig.from_dict({"preset": "tiny", "max_seq_len": 64})
    names = {f: {n for n, _ in reference.like(cfg, (f,)).named_parameters()} for f in reference.FEATURES}
    plain = {n for n, _ in reference.like(cfg).named_parameters()}
    assert "pos.weight" in plain and "pos.weight" not in names["rope"]
    assert "blocks.0.ln1.bias" in plain and "blocks.0.ln1.bias" not in names["rmsnorm"]
    assert "blocks.0.gate.weight" in names["swiglu"] and "blocks.0.fc.weight" in plain
    with pytest.raises(ValueError, match="alibi"):
        reference.like(cfg, ("alibi",))
