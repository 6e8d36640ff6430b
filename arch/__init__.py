"""The residual design space of decoder-only Transformers.

Public entry points: `ModelConfig.from_dict(mapping)` / `.to_dict()` and
`build_model(config) -> nn.Module` with `forward(tokens [B, T]) -> logits [B, T, vocab]`.
"""

from arch.config import ModelConfig, presets
from arch.configtree import ConfigError
from arch.designs import ResidualConfig, ResidualDesign, register, registered_kinds
from arch.model import Transformer, build_model

__all__ = [
    "ConfigError",
    "ModelConfig",
    "ResidualConfig",
    "ResidualDesign",
    "Transformer",
    "build_model",
    "presets",
    "register",
    "registered_kinds",
]
