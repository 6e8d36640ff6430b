"""Trial checkpoints written by the converters: what `trainers.fit` writes and every reader of a
trial needs (`trainers.trained.load_checkpoint`, python -m evals, python -m gates, the export):
the resolved trial config beside the model's state dict under `model.`. No optimizer state, no
data order, no RNG states: a converted model is for evaluation, analysis and export, and a
training run started from it starts its own (docs/interop.md)."""

from __future__ import annotations

from pathlib import Path

import torch

from arch import build_model
from trainers.config import TrialConfig

DEFAULT_SEQ_LEN = 256


def trial_for(model_cfg: dict, trial: dict | None = None) -> TrialConfig:
    """The trial config of a converted model: `trial` (a trial mapping, e.g. the data section
    that names the model's tokenizer) with its model section replaced; by default byte text data."""
    tree = dict(trial or {})
    tree["model"] = model_cfg
    if "data" not in tree:
        tree["data"] = {"kind": "text", "seq_len": min(DEFAULT_SEQ_LEN, model_cfg["max_seq_len"])}
    return TrialConfig.from_dict(tree)


def write_checkpoint(cfg: TrialConfig, state: dict[str, torch.Tensor], out: Path, source: str) -> Path:
    """Loads `state` into the model `cfg` builds (strict: every tensor has its place) and saves the
    trial checkpoint at `out`; returns it."""
    model = build_model(cfg.model)
    model.load_state_dict(state, strict=True)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    weights = {f"model.{k}": v.detach().clone() for k, v in model.state_dict().items()}
    torch.save({"trial_config": cfg.to_dict(), "state_dict": weights, "converted_from": source}, out)
    return out
