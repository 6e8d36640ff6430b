"""`ModelConfig`: the typed config of one decoder-only Transformer and its residual design."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any

import yaml

from arch.backbone import BackboneConfig
from arch.configtree import Issue, choices, dump, join, parse
from arch.design_configs import ResidualConfig
from arch.design_configs.none import NoResidualConfig


@functools.cache
def presets() -> dict[str, dict[str, Any]]:
    text = resources.files("arch").joinpath("presets.yaml").read_text()
    return yaml.safe_load(text)


@dataclasses.dataclass(frozen=True)
class ModelConfig(BackboneConfig):
    """The backbone and its residual design (`model:` of a trial)."""

    residual: ResidualConfig = NoResidualConfig()

    def check(self, path: str) -> list[Issue]:
        issues = super().check(path)
        issues.extend(self.residual.check_against(self, join(path, "residual")))
        return issues

    @classmethod
    def prepare(cls, data: Mapping, path: str, issues: list[Issue]) -> dict | None:
        """Expands `preset`: its dimensions fill every key not given next to it."""
        data = dict(data)
        preset = data.get("preset")
        if preset is None:
            return data
        table = presets()
        if preset not in table:
            issues.append(Issue(join(path, "preset"), f"given {preset!r}; allowed: {choices(table)}"))
            return None
        return {**table[preset], **data}

    @classmethod
    def from_dict(
        cls, mapping: Mapping | None, path: str = "model", source: str | None = None
    ) -> ModelConfig:
        """Builds the config from the mapping under `model:`; raises ConfigError on any problem."""
        return parse(cls, mapping or {}, path, source)

    def to_dict(self) -> dict[str, Any]:
        return dump(self)
