"""MUDDFormer: multiway dynamic dense connections (arXiv 2502.12170, Caiyun-AI/MUDDFormer).

Layers are numbered i = 0..L-1; X_0 is the token embedding and X_{i+1} the output of layer i
(R stream + attention + MLP). After layer i, a per-token MLP of X_{i+1} gives, for each stream
c in (Q, K, V, R), weights over the i + 2 outputs so far:

    A_i = GELU(RMSNorm(X_{i+1}) W1_i) W2_i + a_i          # [B, T, C * (i + 2)] -> [C, B, T, i + 2]
    X^c = sum_{j <= i+1} A_i[c, :, :, j] X_j              # per token, per stream

Layer i + 1 reads its attention inputs from the Q, K and V streams (each normed by the layer's
attention norm: the official `sepln=False` form) and its residual from the R stream; the last
layer makes only the R stream (C = 1), which goes to the final norm.

Official choices kept: RMSNorm without scale; W1 ~ N(0, 1/D) (fan-in, scale 1.0); W2 = 0;
a_i = (0, ..., 0, 1) per stream (prior on the current layer, so init == baseline); hidden width
H_i = C_i (i + 2), times 4 on the last layer (`expand_last`), then rounded as the official code
does, H <- (H // 64 + 1) * 64 (`hidden_round`; always rounds up, even from a multiple of 64).
`streams: r` is the paper's single-way (DDFormer) ablation: one dynamic stream feeds Q, K, V, R.
Parameters per layer: D H_i + H_i C_i (i + 2) + C_i (i + 2).

The weighted sum loops over the history (no stacked copy of all outputs per layer).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from arch.designs.base import ResidualConfig, ResidualDesign, State, register

WAYS = {"qkvr": 4, "r": 1}
LAST_EXPAND = 4  # official: the last layer's hidden width is multiplied by 4


@dataclasses.dataclass(frozen=True)
class MuddFormerConfig(ResidualConfig):
    kind: Literal["muddformer"] = "muddformer"
    streams: Literal["qkvr", "r"] = "qkvr"
    hidden_round: bool = True
    expand_last: bool = True


def hidden_width(ways: int, layer: int, n_layers: int, cfg: MuddFormerConfig) -> int:
    width = ways * (layer + 2)
    if cfg.expand_last and layer == n_layers - 1:
        width *= LAST_EXPAND
    return (width // 64 + 1) * 64 if cfg.hidden_round else width


@dataclasses.dataclass
class MuddState(State):
    history: list[torch.Tensor] = dataclasses.field(default_factory=list)  # X_0 .. X_i, [B, T, D]
    q: torch.Tensor | None = None
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None


@register("muddformer")
class MuddFormer(ResidualDesign):
    config_cls = MuddFormerConfig

    def __init__(self, cfg: MuddFormerConfig, model):
        super().__init__(cfg, model)
        n, d = model.n_layers, model.d_model
        self.eps = model.norm_eps
        self.ways = [1 if i == n - 1 else WAYS[cfg.streams] for i in range(n)]
        widths = [hidden_width(self.ways[i], i, n, cfg) for i in range(n)]
        # Plain parameters, not nn.Linear: no module-wide Linear init can overwrite them.
        self.w1 = nn.ParameterList(nn.Parameter(torch.empty(h, d)) for h in widths)  # [H_i, D]
        self.w2 = nn.ParameterList(
            nn.Parameter(torch.empty(self.ways[i] * (i + 2), h)) for i, h in enumerate(widths)
        )  # [C_i (i + 2), H_i]
        self.prior = nn.ParameterList(nn.Parameter(torch.empty(self.ways[i], i + 2)) for i in range(n))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        std = self.model_cfg.d_model**-0.5
        for w in self.w1:
            nn.init.normal_(w, std=std)
        self.make_neutral_()

    def begin(self, h0, record_gates: bool = False) -> MuddState:
        return MuddState(h=h0, gates={} if record_gates else None, history=[h0], q=h0, k=h0, v=h0)

    def attn_inputs(self, layer: int, state: MuddState):
        return state.q, state.k, state.v

    def dense_weights(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        """A_i from X_{i+1} [B, T, D] -> [C, B, T, i + 2] (not gates: they stay out of `State.gates`)."""
        b, t, d = x.shape
        z = F.gelu(F.linear(F.rms_norm(x, (d,), None, self.eps), self.w1[layer]))  # [B, T, H_i]
        dw = F.linear(z, self.w2[layer]).view(b, t, self.ways[layer], layer + 2) + self.prior[layer]
        return dw.permute(2, 0, 1, 3)

    def add_mlp(self, layer: int, state: MuddState, out: torch.Tensor) -> None:
        x = state.h + out  # X_{i+1}
        state.history.append(x)
        c, span = self.ways[layer], layer + 2
        dw = self.dense_weights(layer, x).unsqueeze(-1)  # [C, B, T, i+2, 1]
        mixed = dw[..., 0, :] * state.history[0]  # [C, B, T, D]
        for j in range(1, span):
            mixed = mixed + dw[..., j, :] * state.history[j]
        if c == 4:
            state.q, state.k, state.v, state.h = mixed.unbind(0)
        else:
            state.h = state.q = state.k = state.v = mixed[0]
        if layer == self.model_cfg.n_layers - 1:
            state.history.clear()

    def expected_param_count(self) -> int:
        n, d, cfg = self.model_cfg.n_layers, self.model_cfg.d_model, self.cfg
        total = 0
        for i in range(n):
            c = 1 if i == n - 1 else WAYS[cfg.streams]
            h = c * (i + 2) * (LAST_EXPAND if cfg.expand_last and i == n - 1 else 1)
            h = 64 * (h // 64 + 1) if cfg.hidden_round else h
            total += d * h + h * c * (i + 2) + c * (i + 2)
        return total

    @torch.no_grad()
    def make_neutral_(self) -> bool:
        for w2, a in zip(self.w2, self.prior, strict=True):
            w2.zero_()
            a.zero_()
            a[:, -1] = 1.0
        return True
