"""The SATFormer paper's six design forms (arXiv 2605.03953), as its official configs build them:
name -> the `model.residual` mapping. The one list that bench/ (design costs, the GPU check), the
design harness's tests and the paper's studies (studies/paper/base.yaml, checked equal by
tests/arch/test_paper_designs.py) compare; `baseline` is the plain residual stream (the official
code's `transformer`)."""

BASELINE = "baseline"

PAPER_DESIGNS: dict[str, dict] = {
    BASELINE: {"kind": "none"},
    # lambda2 starts at 0.5, lambda1 = N softmax(logits) over the consuming layers
    "resformer": {
        "kind": "value_residual",
        "mode": "static",
        "granularity": "layer",
        "coefficient": "softmax",
    },
    "satformer": {
        "kind": "value_residual",
        "mode": "gated",
        "granularity": "token_head",
        "activation": "relu",
    },
    "denseformer": {"kind": "denseformer", "dilation": 1, "period": 1},
    "muddformer": {"kind": "muddformer", "preset": "satformer_paper"},
    "hyper_connections": {
        "kind": "hyper_connections",
        "expansion_rate": 4,
        "mode": "dynamic",
        "use_tanh": True,
        "norm": "rms",
        "norm_eps": "torch_default",
        "out_proj_scale": "inv_sqrt_n",
    },
}
