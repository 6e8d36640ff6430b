"""The default targets: the SATFormer paper's four scales (arch presets small, medium, large, xl
with the model overrides and token budgets of studies/paper/*.yaml), N counted as the fits count
it: non-embedding parameters of the baseline model (`non_embedding_params`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from arch.config import ModelConfig
from arch.configtree import load_yaml


@dataclasses.dataclass(frozen=True)
class Target:
    """A scale to predict at: N (counted as the ladder counts it) and D."""

    name: str
    params: float  # N, counted as the ladder counts it
    tokens: float  # D

    @property
    def flops(self) -> float:
        return 6.0 * self.params * self.tokens


PAPER = Path(__file__).resolve().parents[2] / "studies" / "paper"
PAPER_SCALES = ("small", "medium", "large", "xl")


def non_embedding_params(model: dict) -> int:
    """Parameters of the model under `model:` (preset and overrides) less its vocabulary tables:
    the token embedding and, when untied, the output head. From the config's shapes
    (`ModelConfig.param_count`): nothing built."""
    cfg = ModelConfig.from_dict(model)
    return cfg.param_count() - cfg.embedding_params()


def paper_targets(folder: Path = PAPER) -> list[Target]:
    base = load_yaml((folder / "base.yaml").read_text())
    out = []
    for scale in PAPER_SCALES:
        spec = load_yaml((folder / f"{scale}.yaml").read_text())
        model = {**base["trial"]["model"], **spec["trial"]["model"]}
        out.append(Target(scale, float(non_embedding_params(model)), float(spec["trial"]["train"]["tokens"])))
    return out
