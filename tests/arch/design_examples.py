"""Configs the shared design harness runs: every registered `kind` must appear here.

Each entry: (test id, residual mapping): the paper's forms (`arch.paper_designs`) under their
names, then the variants a study can sweep.
"""

from arch.paper_designs import PAPER_DESIGNS

DESIGN_EXAMPLES = [
    *((name, dict(residual)) for name, residual in PAPER_DESIGNS.items()),
    ("resformer_fixed_layer", {"kind": "value_residual", "mode": "static"}),
    (
        "resformer_learned_head",
        {"kind": "value_residual", "mode": "static", "granularity": "head", "coefficient": "learned"},
    ),
    (
        "resformer_softmax_head_last2",
        {
            "kind": "value_residual",
            "mode": "static",
            "granularity": "head",
            "coefficient": "softmax",
            "consumers": 2,
        },
    ),  # fmt: skip
    ("satformer_softmax", {"kind": "value_residual", "activation": "softmax"}),
    (
        "satformer_softmax_sigmoid_tap2",
        {"kind": "value_residual", "activation": "softmax_sigmoid", "tap_layer": 2},
    ),
    ("satformer_gate_bias", {"kind": "value_residual", "gate_bias": True}),
    ("satformer_token_gate_bias", {"kind": "value_residual", "granularity": "token", "gate_bias": True}),
    ("satformer_token_sigmoid", {"kind": "value_residual", "granularity": "token", "activation": "sigmoid"}),
    (
        "satformer_tap2_last1",
        {"kind": "value_residual", "tap_layer": 2, "consumers": 1, "activation": "tanh"},
    ),
    # DenseFormer (k x p: dilation x period)
    ("denseformer_dilation2", {"kind": "denseformer", "dilation": 2}),
    ("denseformer_period2", {"kind": "denseformer", "period": 2}),
    ("denseformer_2x2", {"kind": "denseformer", "dilation": 2, "period": 2}),
    ("denseformer_3x1", {"kind": "denseformer", "dilation": 3}),
    # MUDDFormer
    ("muddformer_default", {"kind": "muddformer"}),
    ("muddformer_single_way_unrounded", {"kind": "muddformer", "streams": "r", "hidden_round": False}),
    ("muddformer_sepln", {"kind": "muddformer", "sepln": True}),
    ("muddformer_pre_post_da_norm", {"kind": "muddformer", "pre_post_da_norm": True}),
    ("muddformer_sepln_after_first", {"kind": "muddformer", "sepln": True, "sepln_layers": "after_first"}),
    (
        "muddformer_caiyun_da_norm",
        {"kind": "muddformer", "pre_post_da_norm": True, "da_norm_form": "caiyun"},
    ),
    (
        "muddformer_caiyun_da_norm_single_way",
        {"kind": "muddformer", "streams": "r", "pre_post_da_norm": True, "da_norm_form": "caiyun"},
    ),
    # Hyper-Connections, static and dynamic, expansion rates 1, 2, 4
    ("hc_static_n1", {"kind": "hyper_connections", "mode": "static", "expansion_rate": 1}),
    ("hc_static_n2", {"kind": "hyper_connections", "mode": "static", "expansion_rate": 2}),
    ("hc_static_n4", {"kind": "hyper_connections", "mode": "static", "expansion_rate": 4}),
    ("hc_dynamic_n1", {"kind": "hyper_connections", "mode": "dynamic", "expansion_rate": 1}),
    ("hc_dynamic_n2", {"kind": "hyper_connections", "mode": "dynamic", "expansion_rate": 2}),
    ("hc_dynamic_n4", {"kind": "hyper_connections", "mode": "dynamic", "expansion_rate": 4}),
    ("hc_dynamic_n4_out_proj_inv_sqrt_n", {"kind": "hyper_connections", "out_proj_scale": "inv_sqrt_n"}),
    ("hc_dynamic_n2_layernorm", {"kind": "hyper_connections", "expansion_rate": 2, "norm": "layer"}),
    (
        "hc_dynamic_n2_no_tanh_torch_eps",
        {"kind": "hyper_connections", "expansion_rate": 2, "use_tanh": False, "norm_eps": "torch_default"},
    ),
    ("hc_dynamic_n2_per_block", {"kind": "hyper_connections", "expansion_rate": 2, "stream_index": "block"}),
]

# Small model the harness builds every design on: GQA (2 KV heads for 4 heads) and qk-norm on.
HARNESS_MODEL = {
    "preset": "tiny",
    "vocab_size": 64,
    "d_model": 32,
    "n_layers": 4,
    "n_heads": 4,
    "n_kv_heads": 2,
    "d_ff": 64,
    "max_seq_len": 32,
    "qk_norm": True,
}
