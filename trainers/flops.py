"""`flops_per_token(model, seq_len)`: training FLOPs per token, exact from the parameter count;
`config_flops_per_token(cfg, seq_len)` the same from a model's config, without building it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from arch.config import ModelConfig


def flops_per_token(model: torch.nn.Module, seq_len: int) -> float:
    """Training FLOPs per token (Kaplan et al. 2020, forward + backward = 3x forward):

        6 * N + 6 * n_layers * seq_len * d_model

    N counts the weights used in matrix multiplies: every parameter except an untied input
    embedding table (a lookup); with tied embeddings the shared table is the head's weight.
    The second term is the attention score and value products (QK^T and AV), without the
    causal-mask halving, as in Kaplan's table.
    """
    cfg = model.cfg
    n = sum(p.numel() for p in model.parameters())
    if not cfg.tie_embeddings:
        n -= model.embed.weight.numel()
    return _kaplan(n, cfg, seq_len)


def config_flops_per_token(cfg: ModelConfig, seq_len: int) -> float:
    """`flops_per_token` of the model `cfg` builds, its N from `ModelConfig.param_count`."""
    n = cfg.param_count() - (0 if cfg.tie_embeddings else cfg.vocab_size * cfg.d_model)
    return _kaplan(n, cfg, seq_len)


def _kaplan(n: int, cfg, seq_len: int) -> float:
    return float(6 * n + 6 * cfg.n_layers * seq_len * cfg.d_model)
