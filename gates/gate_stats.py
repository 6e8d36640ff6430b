"""Gate statistics on held-out data: per layer and KV head, mean, exact-zero fraction, quantiles.

A gate of SATFormer is a_{t,j} = act(x_t W_a)_j for token t and KV head j of a consuming layer
(arXiv 2605.03953, eq. for V'); ReLU makes many of them exactly zero (the paper's sparsity claim).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)


@torch.no_grad()
def collect_gates(model, batches: Iterable[torch.Tensor]) -> tuple[dict[int, torch.Tensor], torch.Tensor]:
    """Runs the model on token batches [B, T]; returns ({layer: gates [N, width]}, tokens [N])."""
    model.eval()
    device = next(model.parameters()).device
    per_layer: dict[int, list[torch.Tensor]] = {}
    seen = []
    for tokens in batches:
        _, gates = model.hidden(tokens.to(device), return_gates=True)  # no logits: no head needed
        for layer, g in gates.items():
            per_layer.setdefault(layer, []).append(g.reshape(-1, g.shape[-1]).float().cpu())  # [B*T, width]
        seen.append(tokens.reshape(-1))
    if not per_layer:
        raise ValueError("the model returned no gates: only gated designs (mode: gated) have them")
    return {layer: torch.cat(chunks) for layer, chunks in sorted(per_layer.items())}, torch.cat(seen)


def gate_statistics(gates: dict[int, torch.Tensor]) -> dict[int, dict[str, list[float]]]:
    """{layer: {"mean": [width], "zero_frac": [width], "q0.5": [width], ...}} over all tokens."""
    out = {}
    q = torch.tensor(QUANTILES)
    for layer, g in gates.items():
        quantiles = torch.quantile(g, q, dim=0)  # [len(QUANTILES), width]
        stats = {"mean": g.mean(0).tolist(), "zero_frac": (g == 0).float().mean(0).tolist()}
        stats.update({f"q{p:g}": quantiles[i].tolist() for i, p in enumerate(QUANTILES)})
        out[layer] = stats
    return out


def summary_rows(stats: dict[int, dict[str, list[float]]]) -> list[dict[str, float]]:
    """One row per layer (1-based, as in configs): mean gate and zero fraction over heads."""
    rows = []
    for layer, s in stats.items():
        width = len(s["mean"])
        rows.append(
            {
                "layer": layer + 1,
                "mean_gate": sum(s["mean"]) / width,
                "zero_frac": sum(s["zero_frac"]) / width,
                "median": sum(s["q0.5"]) / width,
                "q0.9": sum(s["q0.9"]) / width,
            }
        )
    return rows
