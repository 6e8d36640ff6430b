"""Interventions on trained gates: are they functional? (the paper's ablation of SATFormer's gate)

Validation loss with the gates as trained, zeroed (the model then computes its baseline from the
same weights), replaced by their per-layer-per-head mean on held-out data, and by a constant.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable

import torch

from trainers.loss import eval_sums


@contextlib.contextmanager
def gate_hook(model, hook: Callable[[int, torch.Tensor], torch.Tensor] | None):
    design = model.residual
    if not design.has_gates:
        raise ValueError(f"design {model.cfg.residual.kind!r} has no gates to intervene on")
    previous, design.gate_hook = design.gate_hook, hook
    try:
        yield
    finally:
        design.gate_hook = previous


@torch.no_grad()
def mean_loss(model, batches: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """Token-weighted mean cross-entropy (nats) over (inputs [B, T], targets [B, T]) batches;
    targets of -100 (MQAR's non-answer positions) do not count. The logits are made a chunk of
    positions at a time (trainers.loss, the chunked path), on the model's device."""
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for inputs, targets in batches:
        h = model.hidden(inputs.to(device))
        loss, n, _ = eval_sums("chunked", h, model.head.weight, targets.to(device)).tolist()
        total, count = total + loss, count + int(n)
    return total / count


def run_interventions(
    model,
    batches: list[torch.Tensor],
    layer_head_means: dict[int, list[float]],
    constant: float | None = None,
) -> list[dict[str, float | str]]:
    """Rows (intervention, val_loss, val_ppl, delta_loss) for trained / zero / mean / constant gates."""
    means = {layer: torch.tensor(m) for layer, m in layer_head_means.items()}
    if constant is None:  # the global mean gate: keeps the average amount of V_tap, drops selectivity
        constant = float(torch.cat(list(means.values())).mean())
    hooks = {
        "trained": None,
        "zero": lambda layer, g: torch.zeros_like(g),
        "layer_head_mean": lambda layer, g: means[layer].to(g).expand_as(g),
        f"constant={constant:.4g}": lambda layer, g: torch.full_like(g, constant),
    }
    rows = []
    for name, hook in hooks.items():
        with gate_hook(model, hook):
            loss = mean_loss(model, batches)
        rows.append({"intervention": name, "val_loss": loss, "val_ppl": math.exp(loss)})
    for row in rows:
        row["delta_loss"] = row["val_loss"] - rows[0]["val_loss"]
    return rows
