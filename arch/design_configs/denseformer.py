"""DenseFormer's config (arch.designs.denseformer: the design, arXiv 2402.02622)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from arch.configtree import Issue, join
from arch.design_configs.base import ResidualConfig, residual_config


@residual_config
@dataclasses.dataclass(frozen=True)
class DenseFormerConfig(ResidualConfig):
    kind: Literal["denseformer"] = "denseformer"
    dilation: int = dataclasses.field(default=1, metadata={"ge": 1})  # k
    period: int = dataclasses.field(default=1, metadata={"ge": 1})  # p

    def param_count(self, model) -> int:
        k, p, n = self.dilation, self.period, model.n_layers
        return sum((m * p) // k + 1 for m in range(1, n // p + 1))

    def check_against(self, model, path: str) -> list[Issue]:
        issues = []
        for key in ("dilation", "period"):
            value = getattr(self, key)
            if value > model.n_layers:
                issues.append(
                    Issue(
                        join(path, key),
                        f"given {value} with n_layers {model.n_layers}; allowed: 1 to {model.n_layers}",
                    )
                )
        return issues
