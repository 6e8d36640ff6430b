"""Configs the shared design harness runs: every registered `kind` must appear here.

Each entry: (test id, residual mapping). Add the variants a study can sweep.
"""

DESIGN_EXAMPLES = [
    ("baseline", {"kind": "none"}),
    ("resformer_fixed_layer", {"kind": "value_residual", "mode": "static"}),
    (
        "resformer_learned_head",
        {"kind": "value_residual", "mode": "static", "granularity": "head", "coefficient": "learned"},
    ),
    ("satformer_token_head_relu", {"kind": "value_residual", "mode": "gated"}),
    ("satformer_token_sigmoid", {"kind": "value_residual", "granularity": "token", "activation": "sigmoid"}),
    (
        "satformer_tap2_last1",
        {"kind": "value_residual", "tap_layer": 2, "consumers": 1, "activation": "tanh"},
    ),
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
