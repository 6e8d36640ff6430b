"""Baseline: the plain pre-norm residual stream, h <- h + f(norm(h)). Adds no parameters."""

from __future__ import annotations

from arch.design_configs.none import NoResidualConfig
from arch.designs.base import ResidualDesign, register


@register("none")
class PlainResidual(ResidualDesign):
    config_cls = NoResidualConfig
