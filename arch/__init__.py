"""The residual design space of decoder-only Transformers.

Public entry points: `ModelConfig.from_dict(mapping)` / `.to_dict()` and
`build_model(config) -> nn.Module` with `forward(tokens [B, T]) -> logits [B, T, vocab]`.

The configs import no torch; the model's side (`build_model`, `Transformer`, the designs'
modules and their registry) is imported on first use, so a config parses without torch.
"""

from arch.config import ModelConfig, presets
from arch.configtree import ConfigError
from arch.design_configs import ResidualConfig


def __getattr__(name: str):
    """`from arch import build_model` and the like: the torch side, imported when first asked for."""
    if name in ("Transformer", "build_model"):
        from arch import model  # torch: only where a model is built, never to parse a config

        return getattr(model, name)
    if name in ("ResidualDesign", "register", "registered_kinds"):
        from arch import designs  # torch: the designs' modules, which register themselves

        return getattr(designs, name)
    raise AttributeError(f"module 'arch' has no attribute {name!r}")


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
