"""`ModelConfig`: the typed config of one decoder-only Transformer and its residual design."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any

from arch.backbone import BackboneConfig
from arch.configtree import Issue, dump, join, load_yaml, not_one_of, parse
from arch.design_configs import ResidualConfig
from arch.design_configs.none import NoResidualConfig


@functools.cache
def presets() -> dict[str, dict[str, Any]]:
    text = resources.files("arch").joinpath("presets.yaml").read_text()
    return load_yaml(text)


@dataclasses.dataclass(frozen=True)
class ModelConfig(BackboneConfig):
    """The backbone and its residual design (`model:` of a trial)."""

    residual: ResidualConfig = NoResidualConfig()

    def check(self, path: str) -> list[Issue]:
        issues = super().check(path)
        issues.extend(self.residual.check_against(self, join(path, "residual")))
        return issues

    def param_count(self) -> int:
        """Every parameter of the built model (a tied head counted once), from its shapes alone, so
        that matched baselines and ladders count without building (or importing torch). The harness
        checks it against every built design (tests/arch/test_designs.py)."""
        d, hd, layers = self.d_model, self.head_dim, self.n_layers
        attention = d * (self.n_heads + 2 * self.n_kv_heads) * hd + self.n_heads * hd * d  # qkv, o
        attention += 2 * hd if self.qk_norm else 0  # q_norm, k_norm
        mlps = sum(3 * d * width for width in self.residual.ffn_widths(self))  # gate, up, down
        norms = 2 * d * layers + d  # two per block, the final one
        return self.embedding_params() + layers * attention + mlps + norms + self.residual.param_count(self)

    def embedding_params(self) -> int:
        """The vocabulary tables: the token embedding, and the head when it is not tied to it."""
        return self.vocab_size * self.d_model * (1 if self.tie_embeddings else 2)

    @classmethod
    def prepare(cls, data: Mapping, path: str, issues: list[Issue]) -> dict | None:
        """Expands `preset`: its dimensions fill every key not given next to it."""
        data = dict(data)
        preset = data.get("preset")
        if preset is None:
            return data
        table = presets()
        if preset not in table:
            issues.append(Issue(join(path, "preset"), not_one_of(preset, table)))
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
