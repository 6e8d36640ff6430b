"""Hyper-Connections' config (arch.designs.hyper_connections: the design, arXiv 2409.19606)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from arch.configtree import Issue, join
from arch.design_configs.base import ResidualConfig, residual_config


@residual_config
@dataclasses.dataclass(frozen=True)
class HyperConnectionsConfig(ResidualConfig):
    kind: Literal["hyper_connections"] = "hyper_connections"
    expansion_rate: int = dataclasses.field(default=4, metadata={"ge": 1})  # n
    mode: Literal["static", "dynamic"] = "dynamic"
    stream_index: Literal["sublayer", "block"] = "sublayer"
    dynamic_scale: float = dataclasses.field(default=0.01, metadata={"gt": 0})  # s_a, s_b at init
    norm: Literal["rms", "layer"] = "rms"  # H_bar's norm (the official code's hc_norm_type)
    norm_eps: Literal["model", "torch_default"] = "model"  # H_bar's eps (docstring)
    use_tanh: bool = True  # tanh on H_bar W_a and H_bar W_b (the official use_tanh)
    # o_proj and down_proj at init: x 1/sqrt(n) (the SATFormer repository at HEAD), x sqrt(n) (its
    # first release's rescale code), none (the backbone's init as is)
    out_proj_scale: Literal["none", "inv_sqrt_n", "sqrt_n"] = "none"

    def param_count(self, model) -> int:
        n, d, layers = self.expansion_rate, model.d_model, model.n_layers
        dynamic = d * (n + 3) + 2 + (d if self.norm == "layer" else 0)  # + LayerNorm's bias
        per_wrapper = n * (n + 2) + (dynamic if self.mode == "dynamic" else 0)
        return 2 * layers * per_wrapper

    def check(self, path: str) -> list[Issue]:
        issues = []
        defaults = HyperConnectionsConfig()
        for key in ("dynamic_scale", "norm", "norm_eps", "use_tanh"):
            if self.mode == "static" and getattr(self, key) != getattr(defaults, key):
                issues.append(Issue(join(path, key), "applies only to mode 'dynamic', not 'static'"))
        return issues
