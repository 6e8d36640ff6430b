"""AdamW parameter groups: which parameters get weight decay.

`train.no_decay` lists the groups that are never decayed:

- design:     `model.residual.no_decay_parameters()` (gates, mixing scalars, dense weights)
- norms:      the weights of every RMSNorm (block norms, final norm, q/k norms)
- biases:     every parameter named `*.bias`
- embeddings: the token embedding (a tied head shares it; an untied head is a 2-D weight and decays)

Every parameter in none of the listed groups decays (with the default list: exactly the 2-D
projection weights of attention and MLP, and an untied head).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from arch.layers import RMSNorm
from trainers.config import TrainConfig


def _norms(model: nn.Module) -> list[nn.Parameter]:
    return [p for m in model.modules() if isinstance(m, RMSNorm) for p in m.parameters(recurse=False)]


def _biases(model: nn.Module) -> list[nn.Parameter]:
    return [p for name, p in model.named_parameters() if name.rsplit(".", 1)[-1] == "bias"]


GROUPS = {
    "design": lambda model: model.residual.no_decay_parameters(),
    "norms": _norms,
    "biases": _biases,
    "embeddings": lambda model: [model.embed.weight],
}


def split_decay(model: nn.Module, no_decay: Iterable[str]) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """(decay, no_decay) lists of trainable parameters, each parameter exactly once, model order."""
    excluded = {id(p) for group in no_decay for p in GROUPS[group](model)}
    decay, keep = [], []
    for p in model.parameters():  # de-duplicates tied weights
        if p.requires_grad:
            (keep if id(p) in excluded else decay).append(p)
    return decay, keep


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
