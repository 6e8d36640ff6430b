"""The baseline's config: the plain pre-norm residual stream (arch.designs.none)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from arch.design_configs.base import ResidualConfig, residual_config


@residual_config
@dataclasses.dataclass(frozen=True)
class NoResidualConfig(ResidualConfig):
    kind: Literal["none"] = "none"
