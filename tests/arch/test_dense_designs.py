"""Facts of the dense designs beyond the shared harness: patterns, inits, formulas, references."""

import pytest
import torch

from arch import ConfigError, ModelConfig
from arch.designs.denseformer import dwa_inputs
from tests.arch.design_examples import HARNESS_MODEL
from tests.arch.test_designs import make, tokens  # noqa: E402  (the harness builders)


def randomise_(module, seed=7):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)


# --- DenseFormer -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "dilation", "expected"),
    [
        (1, 1, (0, 1)),
        (4, 1, (0, 1, 2, 3, 4)),
        (4, 2, (0, 2, 4)),
        (5, 2, (1, 3, 5)),
        (5, 3, (2, 5)),
        (1, 4, (1,)),
    ],
)
def test_denseformer_dilation_keeps_every_kth_output_aligned_on_the_current_block(block, dilation, expected):
    assert dwa_inputs(block, dilation) == expected


@pytest.mark.parametrize(
    ("n_layers", "dilation", "period", "blocks", "kept"),
    [
        (4, 1, 1, ["1", "2", "3", "4"], {0, 1, 2, 3}),
        (4, 2, 1, ["1", "2", "3", "4"], {0, 1, 2}),  # X_3 and X_4 have no later reader
        (4, 1, 2, ["2", "4"], {0, 1, 2, 3}),
        (4, 2, 2, ["2", "4"], {0, 2}),  # odd outputs are never averaged
        (6, 3, 3, ["3", "6"], {0, 3}),
    ],
)
def test_denseformer_period_and_the_outputs_it_keeps_alive(n_layers, dilation, period, blocks, kept):
    design = make({"kind": "denseformer", "dilation": dilation, "period": period}, n_layers=n_layers).residual
    assert list(design.alphas) == blocks
    assert set(design.last_reader) == kept


@pytest.mark.parametrize("n_layers", [1, 4, 12, 48])
def test_denseformer_param_count_is_the_papers_l_l_plus_3_over_2(n_layers):
    design = make({"kind": "denseformer"}, n_layers=n_layers).residual
    assert sum(p.numel() for p in design.parameters()) == n_layers * (n_layers + 3) // 2


def test_denseformer_identity_init_survives_model_init():
    design = make({"kind": "denseformer", "dilation": 2}).residual
    for w in design.alphas.values():
        assert w[-1].item() == 1.0 and not w[:-1].any()


def reference_dwa(h0, outs, alphas, dilation, period):
    """The official DWAModules accumulators: group r holds X_j with j % k == r, in order."""
    groups = {r: [] for r in range(dilation)}
    groups[0].append(h0)
    x = h0
    for index, out in enumerate(outs):
        b = index + 1
        x = x + out
        groups[b % dilation].append(x)
        if b % period == 0:
            x = sum(w * xj for w, xj in zip(alphas[str(b)], groups[b % dilation], strict=True))
    return x


@pytest.mark.parametrize(("dilation", "period"), [(1, 1), (2, 1), (1, 2), (2, 2), (3, 1)])
def test_denseformer_matches_the_official_accumulators(dilation, period):
    n_layers = 6
    design = make({"kind": "denseformer", "dilation": dilation, "period": period}, n_layers=n_layers).residual
    randomise_(design)
    g = torch.Generator().manual_seed(0)
    h0 = torch.randn(2, 5, 32, generator=g)
    outs = [torch.randn(2, 5, 32, generator=g) for _ in range(n_layers)]
    state = design.begin(h0)
    peak = 0
    for i, out in enumerate(outs):
        design.add_mlp(i, state, out)
        peak = max(peak, len(state.outputs))
    expected = reference_dwa(h0, outs, dict(design.alphas), dilation, period)
    torch.testing.assert_close(design.end(state), expected)
    assert peak <= len(design.last_reader)
    assert not state.outputs  # every kept output is released after its last reader


def test_denseformer_rejects_dilation_beyond_depth():
    with pytest.raises(ConfigError, match=r"model\.residual\.dilation: given 5 with n_layers 4"):
        ModelConfig.from_dict({**HARNESS_MODEL, "residual": {"kind": "denseformer", "dilation": 5}})
    with pytest.raises(ConfigError, match=r"model\.residual\.period: given 0"):
        ModelConfig.from_dict({**HARNESS_MODEL, "residual": {"kind": "denseformer", "period": 0}})


# --- MUDDFormer --------------------------------------------------------------------------------


def test_muddformer_init_w2_zero_prior_on_current_layer_w1_fan_in():
    model = make({"kind": "muddformer"}, d_model=64, n_heads=4)
    design = model.residual
    for i, (w2, prior) in enumerate(zip(design.w2, design.prior, strict=True)):
        assert not w2.any()
        assert prior.shape == (1 if i == 3 else 4, i + 2)
        assert torch.equal(prior[:, -1], torch.ones(prior.shape[0])) and not prior[:, :-1].any()
    w1 = torch.cat([w.flatten() for w in design.w1])
    assert abs(w1.std().item() - 64**-0.5) < 0.1 * 64**-0.5


@pytest.mark.parametrize(
    ("residual", "widths"),
    [
        # qkvr: C (i + 2) = 8, 12, 16; last layer C = 1, (L + 1) x 4 = 20; each rounded up to 64
        ({"kind": "muddformer"}, [64, 64, 64, 64]),
        ({"kind": "muddformer", "hidden_round": False}, [8, 12, 16, 20]),
        ({"kind": "muddformer", "hidden_round": False, "expand_last": False}, [8, 12, 16, 5]),
        ({"kind": "muddformer", "streams": "r", "hidden_round": False}, [2, 3, 4, 20]),
    ],
)
def test_muddformer_hidden_widths_follow_the_official_code(residual, widths):
    design = make(residual).residual
    assert [w.shape[0] for w in design.w1] == widths


def test_muddformer_rounding_always_rounds_up_as_the_official_code():
    # 16 layers, qkvr: layer 14 has C (i + 2) = 64, which the official `(h // 64 + 1) * 64` makes 128
    design = make({"kind": "muddformer"}, n_layers=16).residual
    assert design.w1[14].shape[0] == 128
    assert design.w1[13].shape[0] == 64  # 60 -> 64


def test_muddformer_param_formula_by_hand():
    # D = 32, L = 4, qkvr, unrounded: sum_i D H_i + H_i C_i (i+2) + C_i (i+2)
    design = make({"kind": "muddformer", "hidden_round": False}).residual
    by_hand = sum(32 * h + h * o + o for h, o in [(8, 8), (12, 12), (16, 16), (20, 5)])
    assert sum(p.numel() for p in design.parameters()) == by_hand == design.expected_param_count()


def test_muddformer_streams_match_the_official_einsum():
    design = make({"kind": "muddformer"}).residual
    randomise_(design)
    g = torch.Generator().manual_seed(0)
    h0 = torch.randn(2, 5, 32, generator=g)
    state = design.begin(h0, record_gates=True)
    hiddens = [h0]
    for i in range(4):
        out = torch.randn(2, 5, 32, generator=g)
        hiddens.append(state.h + out)
        design.add_mlp(i, state, out)
        z = torch.nn.functional.gelu(
            torch.nn.functional.rms_norm(hiddens[-1], (32,), eps=1e-6) @ design.w1[i].T
        )
        dw = (z @ design.w2[i].T).view(2, 5, -1, i + 2) + design.prior[i]  # B T (C L) -> B T C L
        dw = dw.permute(2, 0, 1, 3)  # [C, B, T, L]
        expected = torch.einsum("LBTD,CBTL->CBTD", torch.stack(hiddens), dw)  # official training path
        got = torch.stack([state.q, state.k, state.v, state.h]) if i < 3 else state.h[None]
        # the model's CPU RMSNorm (arch.layers.rms_norm) rounds differently from F.rms_norm's
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-4)
        if i < 3:
            assert len({id(state.q), id(state.k), id(state.v), id(state.h)}) == 4
    assert not state.history  # released after the last layer
    assert state.gates == {}  # dense weights are not gates (GateStats would log them as such)


def test_muddformer_pre_post_da_norm_matches_the_official_equations():
    design = make({"kind": "muddformer", "pre_post_da_norm": True}).residual
    randomise_(design)
    g = torch.Generator().manual_seed(1)
    h0 = torch.randn(2, 5, 32, generator=g)
    state = design.begin(h0)
    hiddens = [h0]
    for i in range(4):
        out = torch.randn(2, 5, 32, generator=g)
        x = state.h + out
        hiddens.append(x)
        design.add_mlp(i, state, out)
        z = torch.nn.functional.gelu(hand_norm(x, 1.0, None) @ design.w1[i].T)
        dw = ((z @ design.w2[i].T).view(2, 5, -1, i + 2) + design.prior[i]).permute(2, 0, 1, 3)
        normed = torch.stack(
            [hand_norm(h, w, None) for h, w in zip(hiddens, design.pre_norm[i], strict=True)]
        )
        summed = torch.einsum("LBTD,CBTL->CBTD", normed, dw)
        expected = torch.stack(
            [hand_norm(summed[c], design.post_norm[i][c], None) + x for c in range(len(dw))]
        )
        got = torch.stack([state.q, state.k, state.v, state.h]) if i < 3 else state.h[None]
        # the model's CPU RMSNorm (arch.layers.rms_norm) rounds differently from F.rms_norm's
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-4)


def test_muddformer_pre_post_da_norm_init_prior_zero_and_stream_norms_nearly_closed():
    design = make({"kind": "muddformer", "pre_post_da_norm": True}).residual
    assert all(not a.any() for a in design.prior)
    assert all(torch.equal(p, torch.full_like(p, 1e-3)) for p in design.post_norm)
    assert all(torch.equal(p, torch.ones_like(p)) for p in design.pre_norm)


def test_muddformer_sepln_norms_k_and_v_with_their_own_weights():
    model = make({"kind": "muddformer", "sepln": True})
    design = model.residual
    randomise_(design)
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 5, 32, generator=g) for _ in range(3))
    norm = model.blocks[1].attn_norm
    xq, xk, xv = design.norm_attn_inputs(1, q, k, v, norm)
    torch.testing.assert_close(xq, norm(q))
    torch.testing.assert_close(xk, hand_norm(k, design.kv_norm[1, 0], None))
    torch.testing.assert_close(xv, hand_norm(v, design.kv_norm[1, 1], None))


@pytest.mark.parametrize(("w1_init", "std"), [("muddformer", 256**-0.5), ("satformer", 1 / 256)])
def test_muddformer_w1_init(w1_init, std):
    design = make({"kind": "muddformer", "w1_init": w1_init}, d_model=256, n_heads=4).residual
    w1 = torch.cat([w.flatten() for w in design.w1])
    assert w1.std().item() == pytest.approx(std, rel=0.05)


def test_muddformer_param_realloc_widths_by_hand():
    # small preset: L = 11, D_f = 3072; layer i gets (0.5 (L - i) + 1.5 (i - 1)) / (L - 1) D_f,
    # rounded as the official code: i = 1: 1536; i = 2: 1843 -> 1792; i = 3: 2150 -> 2048; i = 11: 4608
    cfg = ModelConfig.from_dict(
        {"preset": "small", "residual": {"kind": "muddformer", "param_realloc": True}}
    )
    widths = cfg.residual.ffn_widths(cfg)
    assert widths[:3] == [1536, 1792, 2048] and widths[-1] == 4608 and len(widths) == 11
    model = make({"kind": "muddformer", "param_realloc": True}, d_ff=512)  # L = 4: 0.5, 5/6, 7/6, 1.5 x
    assert [b.mlp.down_proj.in_features for b in model.blocks] == [256, 512, 512, 768]  # 256, 427, 597, 768


def test_muddformer_param_formula_with_every_option_by_hand():
    # D = 32, L = 4, unrounded, no last expansion: per layer D H + H C (i+2) + C (i+2) + 2 D + (i+2+C) D
    design = make({"kind": "muddformer", "preset": "satformer_paper"}).residual
    sizes = [(8, 4, 2), (12, 4, 3), (16, 4, 4), (5, 1, 5)]  # (H, C, i + 2)
    by_hand = sum(32 * h + h * c * n + c * n + 2 * 32 + (n + c) * 32 for h, c, n in sizes)
    assert sum(p.numel() for p in design.parameters()) == by_hand == design.expected_param_count()


def test_muddformer_satformer_paper_preset_sets_the_released_options_and_yields_to_given_keys():
    cfg = ModelConfig.from_dict(
        {**HARNESS_MODEL, "residual": {"kind": "muddformer", "preset": "satformer_paper"}}
    )
    r = cfg.residual
    assert (r.sepln, r.pre_post_da_norm, r.param_realloc, r.w1_init) == (True, True, True, "satformer")
    assert (r.hidden_round, r.expand_last) == (False, False)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    mine = {"kind": "muddformer", "preset": "satformer_paper", "sepln": False}
    assert ModelConfig.from_dict({**HARNESS_MODEL, "residual": mine}).residual.sepln is False
    with pytest.raises(
        ConfigError,
        match=r"model\.residual\.preset: given 'paper'; allowed: satformer_paper, caiyun_release, caiyun_jax",
    ):
        ModelConfig.from_dict({**HARNESS_MODEL, "residual": {"kind": "muddformer", "preset": "paper"}})


# MUDDFormer as Caiyun released it: its PyTorch release (sepln from layer 1, FFN widths rounded
# to 128) and its JAX training code (its own pre/post norm), beside the SATFormer repository's.


def test_muddformer_sepln_after_first_layer0_reads_one_normed_stream_later_layers_own_kv_norms():
    model = make({"kind": "muddformer", "sepln": True, "sepln_layers": "after_first"})
    design = model.residual
    assert design.kv_norm.shape == (3, 2, 32)  # layers 1..3 only (Caiyun's attention_norms)
    randomise_(design)
    g = torch.Generator().manual_seed(4)
    h0 = torch.randn(2, 5, 32, generator=g)
    norm0 = model.blocks[0].attn_norm
    xq, xk, xv = design.norm_attn_inputs(0, h0, h0, h0, norm0)
    assert xk is xq and xv is xq  # one norm, computed once, as Caiyun's layer 0
    torch.testing.assert_close(xq, hand_norm(h0, norm0.weight, None))
    q, k, v = (torch.randn(2, 5, 32, generator=g) for _ in range(3))
    norm2 = model.blocks[2].attn_norm
    xq, xk, xv = design.norm_attn_inputs(2, q, k, v, norm2)
    torch.testing.assert_close(xq, hand_norm(q, norm2.weight, None))
    torch.testing.assert_close(xk, hand_norm(k, design.kv_norm[1, 0], None))  # row 1 = layer 2
    torch.testing.assert_close(xv, hand_norm(v, design.kv_norm[1, 1], None))


def test_muddformer_caiyun_realloc_rounds_to_128_in_caiyuns_float_order_ties_to_even():
    # L = 4, D_f = 384: D_f (i / 3 + 0.5) / 128 = 1.5, 2.5, 3.4999999999999996 (448 exactly, but
    # 2 / 3 + 0.5 rounds below 7 / 6 in floats), 4.5; Python's round: 2, 2, 3, 4 (ties to even)
    model = make({"kind": "muddformer", "param_realloc": True, "realloc_rounding": "caiyun"}, d_ff=384)
    assert [b.mlp.down_proj.in_features for b in model.blocks] == [256, 256, 384, 512]
    # small preset, L = 11, D_f = 3072: layer 2 is 16.8 x 128 -> 2176 (SATFormer's rounding: 2048)
    cfg = ModelConfig.from_dict(
        {"preset": "small", "residual": {"kind": "muddformer", "preset": "caiyun_release"}}
    )
    assert cfg.residual.ffn_widths(cfg) == [1536, 1792, 2176, 2432, 2816, 3072, 3328, 3712, 3968, 4352, 4608]
    # Caiyun's released config: D_f 6912, L = 32: 0.5 x and 1.5 x are 27 x 128 and 81 x 128
    cfg = ModelConfig.from_dict(
        {"d_model": 2560, "n_heads": 32, "n_layers": 32, "d_ff": 6912,
         "residual": {"kind": "muddformer", "preset": "caiyun_release"}}
    )  # fmt: skip
    widths = cfg.residual.ffn_widths(cfg)
    assert (widths[0], widths[-1], sum(widths)) == (3456, 10368, 32 * 6912)


def test_muddformer_caiyun_realloc_refuses_a_zero_width():
    # d_ff 128: layer 0 gets round(64 / 128) = round(0.5) = 0 (ties to even)
    residual = {"kind": "muddformer", "param_realloc": True, "realloc_rounding": "caiyun"}
    with pytest.raises(
        ConfigError, match=r"model\.residual\.realloc_rounding: .*d_ff 128: layer 0 .* width of 0"
    ):
        ModelConfig.from_dict({**HARNESS_MODEL, "d_ff": 128, "residual": residual})
    assert ModelConfig.from_dict({**HARNESS_MODEL, "d_ff": 130, "residual": residual})  # 65 / 128 -> 1


def test_muddformer_caiyun_da_norm_matches_caiyuns_jax_equations():
    # jax/MaxText/layers/models.py (mudd_prenorm, mudd_postnorm) and llama2.py (pre_dense_proj1_norm)
    design = make({"kind": "muddformer", "pre_post_da_norm": True, "da_norm_form": "caiyun"}).residual
    randomise_(design)
    g = torch.Generator().manual_seed(5)
    h0 = torch.randn(2, 5, 32, generator=g)
    state = design.begin(h0)
    hids = [hand_norm(h0, design.history_norm[0], None)]  # each output normed once, by its own norm
    for i in range(4):
        out = torch.randn(2, 5, 32, generator=g)
        y = state.h + out
        design.add_mlp(i, state, out)
        hids.append(hand_norm(y, design.history_norm[i + 1], None))
        z = torch.nn.functional.gelu(hand_norm(y, design.dw_norm[i], None) @ design.w1[i].T)
        dw = ((z @ design.w2[i].T).view(2, 5, -1, i + 2) + design.prior[i]).permute(2, 0, 1, 3)
        sums = torch.einsum("LBTD,CBTL->CBTD", torch.stack(hids), dw)
        c = len(dw)  # y + (post_norm(wsum) if cidx == C - 1 else wsum)
        expected = torch.stack(
            [
                y + (hand_norm(sums[k], design.r_post_norm[i], None) if k == c - 1 else sums[k])
                for k in range(c)
            ]
        )
        got = torch.stack([state.q, state.k, state.v, state.h]) if i < 3 else state.h[None]
        # the model's CPU RMSNorm (arch.layers.rms_norm) rounds differently from the written-out one
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-4)


def test_muddformer_caiyun_da_norm_init_and_parameters():
    design = make({"kind": "muddformer", "pre_post_da_norm": True, "da_norm_form": "caiyun"}).residual
    assert all(not a.any() for a in design.prior)  # dense2_bias_init_value 0 with both norms
    assert torch.equal(design.r_post_norm, torch.full((4, 32), 1e-3))  # constant(0.001)
    assert torch.equal(design.history_norm, torch.ones(5, 32))
    assert torch.equal(design.dw_norm, torch.ones(4, 32))
    assert not hasattr(design, "pre_norm") and not hasattr(design, "post_norm")


@pytest.mark.parametrize(
    ("preset", "extra"),
    [
        # sepln after_first: 2 D on layers 1..3; no DA norms
        ("caiyun_release", lambda d, n: 2 * d * (n - 1)),
        # sepln on every layer: 2 D L; caiyun DA norms: (L + 1) history norms + L R norms + L scales
        ("caiyun_jax", lambda d, n: 2 * d * n + (3 * n + 1) * d),
    ],
)
def test_muddformer_caiyun_presets_param_formula_by_hand(preset, extra):
    # D = 32, L = 4, qkvr, hidden widths C (i + 2) = 8, 12, 16, last (L + 1) x 4 = 20, each -> 64
    model = make({"kind": "muddformer", "preset": preset}, d_ff=384)
    design = model.residual
    by_hand = sum(32 * 64 + 64 * o + o for o in (8, 12, 16, 5)) + extra(32, 4)
    assert sum(p.numel() for p in design.parameters()) == by_hand == design.expected_param_count()
    assert [b.mlp.down_proj.in_features for b in model.blocks] == [256, 256, 384, 512]


@pytest.mark.parametrize("preset", ["caiyun_release", "caiyun_jax"])
def test_muddformer_caiyun_presets_train_and_round_trip(preset):
    model = make({"kind": "muddformer", "preset": preset}, d_ff=384)
    x = tokens()
    loss = model(x).logsumexp(-1).mean()
    loss.backward()
    assert torch.isfinite(loss) and all(torch.isfinite(p.grad).all() for p in model.parameters())
    assert ModelConfig.from_dict(model.cfg.to_dict()) == model.cfg


def test_muddformer_caiyun_presets_set_their_forms_and_yield_to_given_keys():
    def residual(preset, **keys):
        mapping = {**HARNESS_MODEL, "d_ff": 384, "residual": {"kind": "muddformer", "preset": preset, **keys}}
        return ModelConfig.from_dict(mapping).residual

    r = residual("caiyun_release")
    assert (r.sepln, r.sepln_layers, r.pre_post_da_norm) == (True, "after_first", False)
    assert (r.param_realloc, r.realloc_rounding, r.hidden_round, r.expand_last) == (
        True,
        "caiyun",
        True,
        True,
    )
    r = residual("caiyun_jax")
    assert (r.sepln, r.sepln_layers, r.pre_post_da_norm, r.da_norm_form) == (True, "all", True, "caiyun")
    assert (r.param_realloc, r.realloc_rounding, r.w1_init) == (True, "caiyun", "muddformer")
    assert residual("caiyun_release", sepln_layers="all").sepln_layers == "all"
    r = residual("satformer_paper")  # the SATFormer repository's forms, named
    assert (r.sepln_layers, r.da_norm_form, r.realloc_rounding) == ("all", "satformer", "satformer")


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (
            {"sepln_layers": "after_first"},
            r"sepln_layers: given 'after_first'; applies only with sepln: true",
        ),
        (
            {"realloc_rounding": "caiyun"},
            r"realloc_rounding: given 'caiyun'; applies only with param_realloc: true",
        ),
        (
            {"da_norm_form": "caiyun"},
            r"da_norm_form: given 'caiyun'; applies only with pre_post_da_norm: true",
        ),
        (
            {"sepln": True, "sepln_layers": "second"},
            r"sepln_layers: given 'second'; allowed: all, after_first",
        ),
        (
            {"pre_post_da_norm": True, "da_norm_form": "jax"},
            r"da_norm_form: given 'jax'; allowed: satformer, caiyun",
        ),
        (
            {"param_realloc": True, "realloc_rounding": 128},
            r"realloc_rounding: given 128; allowed: satformer, caiyun",
        ),
    ],
)
def test_muddformer_form_keys_reject_bad_values_and_keys_without_their_switch(keys, message):
    with pytest.raises(ConfigError, match=r"model\.residual\." + message):
        ModelConfig.from_dict({**HARNESS_MODEL, "residual": {"kind": "muddformer", **keys}})


# --- Hyper-Connections -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stream_index", "reads"), [("sublayer", [0, 1, 2, 0, 1, 2, 0, 1]), ("block", [0, 0, 1, 1, 2, 2, 0, 0])]
)
def test_hc_static_init_layer_k_reads_stream_k_mod_n(stream_index, reads):
    design = make({"kind": "hyper_connections", "expansion_rate": 3, "stream_index": stream_index}).residual
    a_m, a_r = design.static_alpha[:, :, 0], design.static_alpha[:, :, 1:]
    assert a_m.argmax(dim=1).tolist() == reads and a_m.sum().item() == len(reads)
    assert torch.equal(a_r, torch.eye(3).expand_as(a_r))
    assert torch.equal(design.static_beta, torch.ones(8, 3))


def test_hc_dynamic_init_w_zero_scale_001():
    design = make({"kind": "hyper_connections", "mode": "dynamic"}).residual
    assert not design.alpha_fn.any() and not design.beta_fn.any()
    assert torch.equal(design.alpha_scale, torch.full((8,), 0.01))
    assert torch.equal(design.beta_scale, torch.full((8,), 0.01))


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_hc_n1_at_init_is_the_baseline_exactly(mode):
    model = make({"kind": "hyper_connections", "mode": mode, "expansion_rate": 1}, seed=2)
    baseline = make({"kind": "none"}, seed=2)
    baseline.load_state_dict(model.state_dict(), strict=False)
    with torch.no_grad():
        torch.testing.assert_close(model(tokens()), baseline(tokens()), rtol=0, atol=0)


@pytest.mark.parametrize("n", [2, 4])
def test_hc_init_with_n_streams_is_the_baseline_up_to_the_final_norm(n):
    # All n streams equal the baseline stream at init, so their sum is n h: RMSNorm undoes the n
    # up to its eps (which acts as eps / n^2; at init scale eps = 1e-6 moves logits by ~1e-3).
    model = make({"kind": "hyper_connections", "mode": "static", "expansion_rate": n}, seed=2, norm_eps=1e-12)
    baseline = make({"kind": "none"}, seed=2, norm_eps=1e-12)
    baseline.load_state_dict(model.state_dict(), strict=False)
    with torch.no_grad():
        torch.testing.assert_close(model(tokens()), baseline(tokens()), rtol=1e-4, atol=1e-5)


def hand_norm(h, weight, bias, eps=1e-6):
    """RMSNorm (bias None) or LayerNorm over the last dim, written out."""
    if bias is None:
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight
    centred = h - h.mean(-1, keepdim=True)
    return centred * torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + eps) * weight + bias


@pytest.mark.parametrize(
    ("norm", "norm_eps", "use_tanh", "eps"),
    [
        ("rms", "model", True, 1e-6),
        ("layer", "model", True, 1e-6),
        ("rms", "model", False, 1e-6),  # the official use_tanh: false
        ("rms", "torch_default", True, torch.finfo(torch.float32).eps),  # nn.RMSNorm(eps=None)
        ("layer", "torch_default", False, 1e-5),  # nn.LayerNorm's default
    ],
)
def test_hc_dynamic_width_and_depth_match_the_paper_equations(norm, norm_eps, use_tanh, eps):
    residual = {"kind": "hyper_connections", "mode": "dynamic", "expansion_rate": 3, "norm": norm}
    design = make({**residual, "norm_eps": norm_eps, "use_tanh": use_tanh}).residual
    randomise_(design)
    assert (design.norm_bias is not None) == (norm == "layer")
    g = torch.Generator().manual_seed(0)
    h = torch.randn(2, 5, 3, 32, generator=g) * torch.logspace(-4, 0, 3).view(3, 1)  # small: eps shows
    out = torch.randn(2, 5, 32, generator=g)
    state = design.begin(torch.zeros(2, 5, 32))
    state.h = h
    x = design.mlp_input(1, state)  # wrapper 3
    design.add_mlp(1, state, out)
    s = 3
    bias = None if design.norm_bias is None else design.norm_bias[s]
    h_bar = hand_norm(h, design.norm_weight[s], bias, eps)
    squash = torch.tanh if use_tanh else (lambda x: x)
    alpha = design.alpha_scale[s] * squash(torch.einsum("btnd,dm->btnm", h_bar, design.alpha_fn[s]))
    alpha = alpha + design.static_alpha[s]  # [B, T, n, n+1]
    beta = design.beta_scale[s] * squash(torch.einsum("btnd,d->btn", h_bar, design.beta_fn[s, :, 0]))
    beta = beta + design.static_beta[s]  # [B, T, n]
    torch.testing.assert_close(x, torch.einsum("btn,btnd->btd", alpha[..., 0], h))
    expected = torch.einsum("btn,btd->btnd", beta, out) + torch.einsum("btnm,btnd->btmd", alpha[..., 1:], h)
    torch.testing.assert_close(state.h, expected)


@pytest.mark.parametrize(
    ("mode", "n", "norm", "count"),
    [
        ("static", 1, "rms", 24),
        ("static", 4, "rms", 192),
        ("dynamic", 4, "rms", 2000),
        ("dynamic", 4, "layer", 2256),
    ],
)
def test_hc_param_formula_by_hand(mode, n, norm, count):
    # D = 32, L = 4 -> 8 wrappers; static n (n + 2); dynamic adds D (n + 1) + D + D + 2 (+ D: LN bias)
    design = make({"kind": "hyper_connections", "mode": mode, "expansion_rate": n, "norm": norm}).residual
    assert sum(p.numel() for p in design.parameters()) == count == design.expected_param_count()


@pytest.mark.parametrize(("scale", "factor"), [("none", 1.0), ("inv_sqrt_n", 0.5), ("sqrt_n", 2.0)])
def test_hc_out_proj_scale_rescales_only_the_residual_projections(scale, factor):
    residual = {"kind": "hyper_connections", "expansion_rate": 4, "out_proj_scale": scale}
    model, baseline = make(residual, seed=4), make({"kind": "none"}, seed=4)  # same backbone draw
    for mine, base in zip(model.blocks, baseline.blocks, strict=True):
        torch.testing.assert_close(mine.attn.o_proj.weight, factor * base.attn.o_proj.weight)
        torch.testing.assert_close(mine.mlp.down_proj.weight, factor * base.mlp.down_proj.weight)
        torch.testing.assert_close(mine.attn.qkv_proj.weight, base.attn.qkv_proj.weight)
        torch.testing.assert_close(mine.mlp.gate_up_proj.weight, base.mlp.gate_up_proj.weight)


def test_hc_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"model\.residual\.dynamic_scale: applies only to mode 'dynamic'"):
        ModelConfig.from_dict(
            {
                **HARNESS_MODEL,
                "residual": {"kind": "hyper_connections", "mode": "static", "dynamic_scale": 0.1},
            }
        )
    with pytest.raises(ConfigError, match=r"model\.residual\.expansion_rate: given 0"):
        ModelConfig.from_dict(
            {**HARNESS_MODEL, "residual": {"kind": "hyper_connections", "expansion_rate": 0}}
        )


# --- all three ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "residual",
    [{"kind": "denseformer"}, {"kind": "muddformer"}, {"kind": "hyper_connections", "mode": "dynamic"}],
)
def test_dense_weights_are_not_decayed(residual):
    design = make(residual).residual
    assert {id(p) for p in design.no_decay_parameters()} == {id(p) for p in design.parameters()}
