"""The SATFormer paper's runs as its official repository defines them (github.com/SkyeGunasekaran/
SATFormer at HEAD), written out by hand from its files as test data: tests/sweeps/study/test_paper_studies.py
compares every design x scale of studies/paper/ with these rows, so a change to either side shows.

Each row names its file, configs/<design>/<scale>.json. Columns: model.config_overrides' hidden_size,
num_hidden_layers, num_heads, num_kv_heads (None: num_heads), intermediate_size; training's
learning_rate, min_lr, warmup_tokens and max_tokens (billions), batch_size (per process) and
gradient_accumulation_steps. Every file also has seq_length 4096, vocab 32000, qk_norm, rope_theta
1e4, initializer_range 0.02, norm_eps 1e-6, cosine decay, weight_decay 0.1, betas (0.9, 0.95),
grad_clip 1.0, dtype bfloat16, seed 42, eval_interval 500, eval_iters 100 (checked in the test).
"""

from __future__ import annotations

import dataclasses

# README.md "Reproducing the primary training experiments": every run is
#   torchrun --standalone --nproc_per_node=8 train.py --config configs/<design>/<scale>.json
# and train.py: effective_batch = batch_size * gradient_accumulation_steps * world_size;
# model.to(dtype=bfloat16) before the optimizer (weights and AdamW state in bf16, autocast on top).
WORLD_SIZE = 8
PRECISION = "bf16-true"
SEQ_LEN = 4096

# Official design directory -> the label of the design in studies/paper/.
DESIGNS = {
    "transformer": "baseline",
    "resformer": "resformer",
    "satformer": "satformer",
    "denseformer": "denseformer",
    "muddformer": "muddformer",
    "hyperconnections": "hyper_connections",
}
SCALES = ("small", "medium", "large", "xl")


@dataclasses.dataclass(frozen=True)
class Row:
    file: str
    hidden_size: int
    layers: int
    heads: int
    kv_heads: int | None
    intermediate_size: int
    lr: float
    min_lr: float
    warmup_tokens_b: float
    max_tokens_b: float
    batch_per_process: int
    grad_accum: int


def _scale_rows(design: str) -> dict[str, Row]:
    """small, medium and large are the same numbers in every design's files (but kv_heads)."""
    return {
        "small": Row(f"configs/{design}/small.json", 768, 11, 12, None, 3072, 2e-3, 2e-4, 0.05, 5.0, 64, 1),
        "medium": Row(
            f"configs/{design}/medium.json", 1024, 18, 16, None, 4096, 1.5e-3, 1.5e-4, 0.1, 10.0, 32, 2
        ),
        "large": Row(f"configs/{design}/large.json", 1536, 19, 24, None, 6144, 1e-3, 1e-4, 0.2, 20.0, 16, 4),
    }


OFFICIAL: dict[tuple[str, str], Row] = {
    (design, scale): row for design in DESIGNS for scale, row in _scale_rows(design).items()
}
# configs/transformer/medium.json alone has num_kv_heads 4 (grouped-query attention).
OFFICIAL["transformer", "medium"] = dataclasses.replace(OFFICIAL["transformer", "medium"], kv_heads=4)
# xl differs per design; denseformer, muddformer and hyperconnections have no xl file.
OFFICIAL["transformer", "xl"] = Row(
    "configs/transformer/xl.json", 2048, 24, 32, None, 5632, 5e-4, 5e-5, 0.3, 30.0, 1, 128
)
OFFICIAL["resformer", "xl"] = Row(
    "configs/resformer/xl.json", 2048, 24, 32, None, 5632, 8e-4, 8e-5, 0.3, 30.0, 8, 8
)
OFFICIAL["satformer", "xl"] = Row(
    "configs/satformer/xl.json", 2048, 24, 24, None, 5504, 8e-4, 8e-5, 0.3, 30.0, 8, 8
)

# Where studies/paper/ departs from a file, and why (the test checks the study holds these instead).
# 24 heads do not divide hidden_size 2048: the official attention reshapes q_proj's 2048 outputs in
# heads of 2048 // 24 = 85 and fails, so that config cannot run as written; 32 heads of 64 kept.
DEVIATIONS: dict[tuple[str, str], dict[str, int]] = {("satformer", "xl"): {"heads": 32}}

# Runs the official code has no config for: this project's extrapolation, the xl recipe that
# ResFormer and SATFormer share (configs/{resformer,satformer}/xl.json: lr 8e-4, 8 x 8 per
# process) on the xl shape that the transformer and ResFormer share (32 heads, d_ff 5632).
EXTRAPOLATED: dict[tuple[str, str], Row] = {
    (design, "xl"): dataclasses.replace(OFFICIAL["resformer", "xl"], file="(none: extrapolated)")
    for design in ("denseformer", "muddformer", "hyperconnections")
}
