"""AdamW parameter groups: which parameters get weight decay.

`train.no_decay` lists the groups that are never decayed:

- design:     `model.residual.no_decay_parameters()` (gates, mixing scalars, dense weights)
- norms:      the weights of every RMSNorm (block norms, final norm, q/k norms)
- biases:     every parameter named `*.bias`
- embeddings: the token embedding (a tied head shares it; an untied head is a 2-D weight and decays)

Every parameter in none of the listed groups decays (with the default list: exactly the 2-D
projection weights of attention and MLP, and an untied head). The config validates
`train.no_decay` against `GROUPS` and the optimizer splits by it: this module sits below both.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import nn


def _norms(model: nn.Module) -> list[nn.Parameter]:
    # arch.layers imports torch: the config reads GROUPS' names as it parses, which imports no torch
    from arch.layers import RMSNorm

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
