"""`ResidualConfig`, the base of every residual design's typed config, and the table of them by
`kind` (what `model.residual.kind` selects). Torch-free: a trial's config parses without torch."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from arch.configtree import Issue, variant_by_kind

if TYPE_CHECKING:
    from arch.backbone import BackboneConfig

_CONFIGS: dict[str, type[ResidualConfig]] = {}


@dataclasses.dataclass(frozen=True)
class ResidualConfig:
    """Base of every design's typed config; `kind` selects the design in YAML."""

    kind: str = "none"

    @classmethod
    def resolve_variant(cls, data, path: str, issues: list[Issue]):
        return variant_by_kind(cls, residual_configs(), data, path, issues)

    def check_against(self, model: BackboneConfig, path: str) -> list[Issue]:
        """Problems that only show with the model's dimensions (e.g. a tap beyond the depth)."""
        return []

    def param_count(self, model: BackboneConfig) -> int:
        """Parameters the design adds, from its paper's formula (not by counting: the harness,
        tests/arch/test_designs.py, checks every built design against it)."""
        return 0

    def ffn_widths(self, model: BackboneConfig) -> list[int]:
        """The MLP width of every layer (a design may reallocate them across depth)."""
        return [model.d_ff] * model.n_layers

    def descriptors(self) -> dict[str, str]:
        """The keys that say which design this is (MLflow tags of a trial): by default every
        scalar field; designs with mode-specific keys show only those of their mode."""
        return {
            f.name: str(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), (str, int, float, bool))
        }


def residual_config(cls: type[ResidualConfig]) -> type[ResidualConfig]:
    """Class decorator: lists a design's config under its `kind` default (refuses duplicates)."""
    kind = cls.__dataclass_fields__["kind"].default
    if kind in _CONFIGS:
        raise ValueError(f"residual design kind {kind!r} already has a config ({_CONFIGS[kind].__name__})")
    _CONFIGS[kind] = cls
    return cls


def residual_configs() -> dict[str, type[ResidualConfig]]:
    """`kind` -> its config class, sorted (every design's, once `arch.design_configs` is imported)."""
    return dict(sorted(_CONFIGS.items()))
