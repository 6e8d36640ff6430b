"""MUDDFormer: multiway dynamic dense connections (arXiv 2502.12170, Caiyun-AI/MUDDFormer).

Layers are numbered i = 0..L-1; X_0 is the token embedding and X_{i+1} the output of layer i
(R stream + attention + MLP). After layer i, a per-token MLP of X_{i+1} gives, for each stream
c in (Q, K, V, R), weights over the i + 2 outputs so far:

    A_i = GELU(RMSNorm(X_{i+1}) W1_i) W2_i + a_i          # [B, T, C * (i + 2)] -> [C, B, T, i + 2]
    X^c = sum_{j <= i+1} A_i[c, :, :, j] X_j              # per token, per stream

Layer i + 1 reads its attention inputs from the Q, K and V streams (each normed by the layer's
attention norm: the official `sepln=False` form; `sepln: true` gives K and V norms of their own)
and its residual from the R stream; the last layer makes only the R stream (C = 1), which goes to
the final norm.

Whose form is whose: the defaults are Caiyun's code (Caiyun-AI/MUDDFormer) with its constructor
defaults (sepln=False), not its released configuration, which sets sepln, always reallocates FFN
widths (rounded to 128), norms K and V from layer 1 only and has a pre/post norm of its own: that
release is not implemented here. The options below are the SATFormer repository's baseline
(models/muddformer; `preset: satformer_paper` sets them all):
- `pre_post_da_norm`: X^c = RMSNorm_c(sum_j A_i[c, j] RMSNorm_j(X_j)) + X_{i+1}, with a scaled
  norm per history entry (weight 1) and per stream (weight 1e-3), the prior a_i = 0.
- `param_realloc`: layer i (1-based) gets the MLP width (0.5 (L - i) + 1.5 (i - 1)) / (L - 1) D_f,
  rounded as the official code does, max(256, (w + 127) // 256 * 256) (the total moves with it).
- `w1_init`: `muddformer` W1 ~ N(0, 1/D) in variance (MUDDFormer's code), `satformer` std 1/D
  (the SATFormer baseline's).
- `preset: satformer_paper` sets the SATFormer paper's MUDDFormer (configs/muddformer/*.json):
  sepln, pre_post_da_norm, param_realloc, w1_init satformer, hidden widths C (i + 2) (no
  rounding, no last-layer expansion). Keys given next to it win.

Official choices kept: RMSNorm without scale; W1 ~ N(0, 1/D) (fan-in, scale 1.0); W2 = 0;
a_i = (0, ..., 0, 1) per stream (prior on the current layer, so init == baseline); hidden width
H_i = C_i (i + 2), times 4 on the last layer (`expand_last`), then rounded as the official code
does, H <- (H // 64 + 1) * 64 (`hidden_round`; always rounds up, even from a multiple of 64).
`streams: r` is the paper's single-way (DDFormer) ablation: one dynamic stream feeds Q, K, V, R.
Parameters per layer: D H_i + H_i C_i (i + 2) + C_i (i + 2), + 2 D (sepln), + (i + 2 + C_i) D
(pre_post_da_norm). Neutral point: W2 = 0 and a_i on the current layer (pre_post_da_norm: the
stream norms' weights 0; sepln: K, V norm weights equal to the attention norm's, 1 at init); none
with param_realloc (other MLP shapes than the baseline's).

The weighted sum loops over the history (no stacked copy of all outputs per layer).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from arch.configtree import Issue, choices, join
from arch.designs.base import ResidualConfig, ResidualDesign, State, register
from arch.layers import rms_norm

WAYS = {"qkvr": 4, "r": 1}
LAST_EXPAND = 4  # official: the last layer's hidden width is multiplied by 4
POST_NORM_INIT = 1e-3  # official: the stream norms start almost closed (X^c ~ X_{i+1})
PRESETS = {
    "satformer_paper": {"sepln": True, "pre_post_da_norm": True, "param_realloc": True,
                        "w1_init": "satformer", "hidden_round": False, "expand_last": False},
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class MuddFormerConfig(ResidualConfig):
    kind: Literal["muddformer"] = "muddformer"
    preset: str | None = None  # a named set of the options below (PRESETS)
    streams: Literal["qkvr", "r"] = "qkvr"
    hidden_round: bool = True
    expand_last: bool = True
    sepln: bool = False
    pre_post_da_norm: bool = False
    param_realloc: bool = False
    w1_init: Literal["muddformer", "satformer"] = "muddformer"

    @classmethod
    def prepare(cls, data, path: str, issues: list[Issue]):
        data = dict(data)
        preset = data.get("preset")
        if preset is None:
            return data
        if preset not in PRESETS:
            issues.append(Issue(join(path, "preset"), f"given {preset!r}; allowed: {choices(PRESETS)}"))
            return None
        return {**PRESETS[preset], **data}

    def ffn_widths(self, model) -> list[int]:
        if not self.param_realloc or model.n_layers == 1:
            return [model.d_ff] * model.n_layers
        n = model.n_layers
        widths = []
        for i in range(1, n + 1):
            w = int(round((0.5 * (n - i) + 1.5 * (i - 1)) / (n - 1) * model.d_ff))
            widths.append(max(256, (w + 127) // 256 * 256))
        return widths


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
        # sepln: the K and V norms' weights per layer (Q keeps the block's attention norm)
        self.kv_norm = nn.Parameter(torch.empty(n, 2, d)) if cfg.sepln else None
        if cfg.pre_post_da_norm:
            self.pre_norm = nn.ParameterList(nn.Parameter(torch.empty(i + 2, d)) for i in range(n))
            self.post_norm = nn.ParameterList(nn.Parameter(torch.empty(self.ways[i], d)) for i in range(n))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        d = self.model_cfg.d_model
        std = d**-0.5 if self.cfg.w1_init == "muddformer" else 1.0 / d
        for w in self.w1:
            nn.init.normal_(w, std=std)
        self.make_neutral_()
        with torch.no_grad():
            if self.cfg.pre_post_da_norm:
                for post in self.post_norm:
                    post.fill_(POST_NORM_INIT)

    def begin(self, h0, record_gates: bool = False) -> MuddState:
        return MuddState(h=h0, gates={} if record_gates else None, history=[h0], q=h0, k=h0, v=h0)

    def attn_inputs(self, layer: int, state: MuddState):
        return state.q, state.k, state.v

    def norm_attn_inputs(self, layer: int, q_in, k_in, v_in, norm):
        if self.kv_norm is None:
            return super().norm_attn_inputs(layer, q_in, k_in, v_in, norm)
        xk = rms_norm(k_in, self.kv_norm[layer, 0], self.eps)
        return norm(q_in), xk, rms_norm(v_in, self.kv_norm[layer, 1], self.eps)

    def dense_weights(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        """A_i from X_{i+1} [B, T, D] -> [C, B, T, i + 2] (not gates: they stay out of `State.gates`)."""
        b, t, d = x.shape
        z = F.gelu(F.linear(rms_norm(x, None, self.eps), self.w1[layer]))  # [B, T, H_i]
        dw = F.linear(z, self.w2[layer]).view(b, t, self.ways[layer], layer + 2) + self.prior[layer]
        return dw.permute(2, 0, 1, 3)

    def add_mlp(self, layer: int, state: MuddState, out: torch.Tensor) -> None:
        x = state.h + out  # X_{i+1}
        state.history.append(x)
        c, span = self.ways[layer], layer + 2
        dw = self.dense_weights(layer, x).unsqueeze(-1)  # [C, B, T, i+2, 1]
        history = state.history
        if self.cfg.pre_post_da_norm:
            history = [rms_norm(h, w, self.eps) for h, w in zip(history, self.pre_norm[layer], strict=True)]
        mixed = dw[..., 0, :] * history[0]  # [C, B, T, D]
        for j in range(1, span):
            mixed = mixed + dw[..., j, :] * history[j]
        if self.cfg.pre_post_da_norm:
            post = self.post_norm[layer].view(c, 1, 1, -1)
            mixed = rms_norm(mixed, None, self.eps) * post + x
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
            total += (2 * d if cfg.sepln else 0) + ((i + 2 + c) * d if cfg.pre_post_da_norm else 0)
        return total

    @torch.no_grad()
    def make_neutral_(self) -> bool:
        for w2, a in zip(self.w2, self.prior, strict=True):
            w2.zero_()
            a.zero_()
            if not self.cfg.pre_post_da_norm:
                a[:, -1] = 1.0  # with the norms, X_{i+1} is added after them instead
        if self.kv_norm is not None:
            self.kv_norm.fill_(1.0)
        if self.cfg.pre_post_da_norm:
            for pre, post in zip(self.pre_norm, self.post_norm, strict=True):
                pre.fill_(1.0)
                post.zero_()
        return not self.cfg.param_realloc
