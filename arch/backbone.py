"""`BackboneConfig`: the Transformer's dimensions and init, everything but its residual design.

It sits below the designs: a design reads the model it is built into through this type, and
`arch.config.ModelConfig` adds the design on top (so neither imports the other).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from arch.configtree import Issue, join


def _positive(default):
    return dataclasses.field(default=default, metadata={"ge": 1})


@dataclasses.dataclass(frozen=True)
class BackboneConfig:
    preset: str | None = None
    vocab_size: int = _positive(256)
    d_model: int = _positive(128)
    n_layers: int = _positive(4)
    n_heads: int = _positive(4)
    n_kv_heads: int | None = None  # None: n_heads (multi-head attention)
    d_ff: int = _positive(384)
    max_seq_len: int = _positive(256)
    rope_base: float = dataclasses.field(default=10000.0, metadata={"gt": 0})
    qk_norm: bool = False
    # The qk norms' eps; None: norm_eps. The official SATFormer code's are fla's RMSNorm at its
    # default 1e-5 whatever its norm_eps (trainers.convert official sets it; docs/interop.md).
    qk_norm_eps: float | None = dataclasses.field(default=None, metadata={"gt": 0})
    tie_embeddings: bool = True
    norm_eps: float = dataclasses.field(default=1e-6, metadata={"gt": 0})
    init_std: float = dataclasses.field(default=0.02, metadata={"gt": 0})
    # depth_scaled: GPT-2's N(0, init_std / sqrt(2 n_layers)) for o_proj and down_proj, N(0, init_std)
    # elsewhere; normal: N(0, init_std) everywhere (the SATFormer code's init, its paper presets').
    init: Literal["depth_scaled", "normal"] = "depth_scaled"

    def __post_init__(self):
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def check(self, path: str) -> list[Issue]:
        issues = []
        if self.d_model % self.n_heads:
            issues.append(
                Issue(
                    join(path, "d_model"),
                    f"given {self.d_model}; must be divisible by n_heads {self.n_heads}",
                )
            )
        elif self.head_dim % 2:
            issues.append(
                Issue(join(path, "n_heads"), f"head_dim {self.head_dim} must be even for rotary embedding")
            )
        if self.n_kv_heads < 1 or self.n_heads % self.n_kv_heads:
            issues.append(
                Issue(
                    join(path, "n_kv_heads"),
                    f"given {self.n_kv_heads}; allowed: a divisor of n_heads {self.n_heads}",
                )
            )
        return issues
