"""Baseline: the plain pre-norm residual stream, h <- h + f(norm(h)). Adds no parameters."""

from __future__ import annotations

import dataclasses
from typing import Literal

from arch.designs.base import ResidualConfig, ResidualDesign, register


@dataclasses.dataclass(frozen=True)
class NoResidualConfig(ResidualConfig):
    kind: Literal["none"] = "none"


@register("none")
class PlainResidual(ResidualDesign):
    config_cls = NoResidualConfig
