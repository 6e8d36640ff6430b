"""The AdamW optimizer of a trial: decayed and undecayed groups (`trainers.decay_groups`), fused
where the parameters allow it."""

from __future__ import annotations

import torch
from torch import nn

from trainers.config import TrainConfig
from trainers.decay_groups import split_decay


def build_optimizer(model: nn.Module, train: TrainConfig) -> torch.optim.AdamW:
    decay, keep = split_decay(model, train.no_decay)
    groups = [
        {"params": decay, "weight_decay": train.weight_decay},
        {"params": keep, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        [g for g in groups if g["params"]],
        lr=train.lr,
        betas=(train.beta1, train.beta2),
        fused=fusable(decay + keep),
    )


FUSED_DEVICES = ("cpu", "cuda")


def fusable(params: list[nn.Parameter]) -> bool:
    """AdamW's fused kernel (one pass over each parameter) where every parameter is a float on a
    CPU or CUDA device: on CPU torch otherwise steps parameter by parameter, op by op, several
    times slower (figures: docs/bench/backbone.md). Elsewhere torch's default."""
    return bool(params) and all(p.device.type in FUSED_DEVICES and p.is_floating_point() for p in params)
