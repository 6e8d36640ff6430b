"""MUDDFormer: multiway dynamic dense connections (arXiv 2502.12170, Caiyun-AI/MUDDFormer).

Layers are numbered i = 0..L-1; X_0 is the token embedding and X_{i+1} the output of layer i
(R stream + attention + MLP). After layer i, a per-token MLP of X_{i+1} gives, for each stream
c in (Q, K, V, R), weights over the i + 2 outputs so far:

    A_i = GELU(RMSNorm(X_{i+1}) W1_i) W2_i + a_i          # [B, T, C * (i + 2)] -> [C, B, T, i + 2]
    X^c = sum_{j <= i+1} A_i[c, :, :, j] X_j              # per token, per stream

Layer i + 1 reads its attention inputs from the Q, K and V streams (each normed by the layer's
attention norm, or with `sepln` K and V by norms of their own) and its residual from the R
stream; the last layer makes only the R stream (C = 1), which goes to the final norm.

Whose form is whose. Three sources: Caiyun's PyTorch release (pytorch/muddformer: modeling file
and the released config.json, the architecture of its published checkpoints), Caiyun's JAX
training code (jax/MaxText: exp.py `MUDDLlama2Medium`, layers/llama2.py, layers/models.py) and
the SATFormer repository's baseline (SkyeGunasekaran/SATFormer models/muddformer,
configs/muddformer/*.json). Every option names its form; the defaults are none of the three
whole: the paper's equations as Caiyun's modeling file computes them with `sepln: false` and its
FFN reallocation off (hidden widths rounded and the last one expanded as its config.json).
- `sepln` (all three sources): K and V get norms of their own (Q keeps the block's attention
  norm). `sepln_layers`: `all` (the SATFormer repository's baseline and Caiyun's JAX code: every
  layer) or `after_first` (Caiyun's PyTorch release: layer 0 reads the embedding once through its
  attention norm; K/V norms from layer 1 on, L - 1 pairs).
- `param_realloc`: layer i (0-based) gets the MLP width (i / (L - 1) + 0.5) D_f (0.5x to 1.5x),
  rounded by `realloc_rounding`: `satformer` (the SATFormer repository's: w = round(that), then
  max(256, (w + 127) // 256 * 256)) or `caiyun` (Caiyun's PyTorch FeedForward and JAX
  `dynamic_mlp_dim`: round(D_f (i / (L - 1) + 0.5) / 128) * 128, Python's round, ties to even;
  a width of 0 is refused). Caiyun's release always reallocates. The total moves with it.
- `pre_post_da_norm` with `da_norm_form`:
  `satformer` (the SATFormer repository's `use_pre_post_da_norm`):
      X^c = RMSNorm_c(sum_j A_i[c, j] RMSNorm_{i,j}(X_j)) + X_{i+1}, a scaled norm per layer per
      history entry (weight 1) and per layer per stream (weight 1e-3);
  `caiyun` (Caiyun's JAX `mudd_prenorm` + `mudd_postnorm`, not in its PyTorch release):
      Y_j = RMSNorm_j(X_j), one scaled norm per output (weight 1), shared by every later layer;
      X^c = sum_j A_i[c, j] Y_j + X_{i+1} for Q, K, V and
      X^R = RMSNorm_i(sum_j A_i[R, j] Y_j) + X_{i+1} (weight 1e-3; the only stream of the last
      layer), and the dense-weight MLP's input norm gets a scale (weight 1).
  Both start with the prior a_i = 0 (X_{i+1} is added after the sum).
- `w1_init`: `muddformer` W1 ~ N(0, 1/D) in variance (Caiyun's JAX code: fan-in, scale 1.0),
  `satformer` std 1/D (the SATFormer repository's).
- `hidden_round` / `expand_last`: Caiyun's `round64` / `expand_last` (both on in its released
  config and JAX code; the SATFormer repository's baseline has neither: hidden widths C (i + 2)).
Presets (keys given next to one win):
- `satformer_paper`: the SATFormer paper's MUDDFormer (configs/muddformer/*.json): sepln (all
  layers), pre_post_da_norm satformer, param_realloc satformer, w1_init satformer, no rounding, no
  last-layer expansion.
- `caiyun_release`: Caiyun's PyTorch release (config.json: sepln, round64, expand_last; the
  modeling file always reallocates): sepln after_first, param_realloc caiyun, no DA norms.
- `caiyun_jax`: Caiyun's JAX training code (MUDDLlama2Medium): sepln on every layer (its q, k, v
  norms), pre_post_da_norm caiyun, param_realloc caiyun, rounded and expanded hidden widths.

Official choices kept: the weight MLP's input RMSNorm without scale (but see `caiyun`); W2 = 0;
a_i = (0, ..., 0, 1) per stream (prior on the current layer, so init == baseline); hidden width
H_i = C_i (i + 2), times 4 on the last layer (`expand_last`), then rounded as Caiyun's code does,
H <- (H // 64 + 1) * 64 (`hidden_round`; always rounds up, even from a multiple of 64).
`streams: r` is the paper's single-way (DDFormer) ablation: one dynamic stream feeds Q, K, V, R.
Parameters per layer: D H_i + H_i C_i (i + 2) + C_i (i + 2), + 2 D (sepln; none at layer 0 with
after_first), + (i + 2 + C_i) D (pre_post_da_norm satformer) or + 3 D (caiyun, + D once for X_0).
Neutral point: W2 = 0 and a_i on the current layer (pre_post_da_norm: a_i = 0 and the post
norms' weights 0; sepln: K, V norm weights equal to the attention norm's, 1 at init); none with
param_realloc (other MLP shapes than the baseline's).

The weighted sum loops over the history (no stacked copy of all outputs per layer).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from arch.design_configs.muddformer import LAST_EXPAND, WAYS, MuddFormerConfig
from arch.designs.base import ResidualDesign, State, register
from arch.layers import rms_norm

POST_NORM_INIT = 1e-3  # both DA-norm forms: the post norms start almost closed (X^c ~ X_{i+1})


def hidden_width(ways: int, layer: int, n_layers: int, cfg: MuddFormerConfig) -> int:
    width = ways * (layer + 2)
    if cfg.expand_last and layer == n_layers - 1:
        width *= LAST_EXPAND
    return (width // 64 + 1) * 64 if cfg.hidden_round else width


@dataclasses.dataclass
class MuddState(State):
    history: list[torch.Tensor] = dataclasses.field(default_factory=list)  # X_0 .. X_i (caiyun: normed)
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
        # sepln: the K and V norms' weights of layers sepln_first.. (Q keeps the block's attention norm)
        self.kv_norm = nn.Parameter(torch.empty(n - cfg.sepln_first, 2, d)) if cfg.sepln else None
        self.da_norm = cfg.da_norm
        if self.da_norm == "satformer":  # per layer: a norm per history entry, one per stream
            self.pre_norm = nn.ParameterList(nn.Parameter(torch.empty(i + 2, d)) for i in range(n))
            self.post_norm = nn.ParameterList(nn.Parameter(torch.empty(self.ways[i], d)) for i in range(n))
        elif self.da_norm == "caiyun":
            self.history_norm = nn.Parameter(torch.empty(n + 1, d))  # X_0..X_L, normed once
            self.r_post_norm = nn.Parameter(torch.empty(n, d))  # per layer, the R stream only
            self.dw_norm = nn.Parameter(torch.empty(n, d))  # scale of the weight MLP's input norm
        self.reset_parameters()

    def reset_parameters(self) -> None:
        d = self.model_cfg.d_model
        std = d**-0.5 if self.cfg.w1_init == "muddformer" else 1.0 / d
        for w in self.w1:
            nn.init.normal_(w, std=std)
        self.make_neutral_()
        with torch.no_grad():
            if self.da_norm == "satformer":
                for post in self.post_norm:
                    post.fill_(POST_NORM_INIT)
            elif self.da_norm == "caiyun":
                self.r_post_norm.fill_(POST_NORM_INIT)

    def _entry(self, j: int, x: torch.Tensor) -> torch.Tensor:
        """History entry j as kept: X_j, or with da_norm_form caiyun RMSNorm_j(X_j)."""
        return rms_norm(x, self.history_norm[j], self.eps) if self.da_norm == "caiyun" else x

    def begin(self, h0, record_gates: bool = False) -> MuddState:
        history = [self._entry(0, h0)]
        return MuddState(h=h0, gates={} if record_gates else None, history=history, q=h0, k=h0, v=h0)

    def attn_inputs(self, layer: int, state: MuddState):
        return state.q, state.k, state.v

    def norm_attn_inputs(self, layer: int, q_in, k_in, v_in, norm):
        row = layer - self.cfg.sepln_first
        if self.kv_norm is None or row < 0:
            return super().norm_attn_inputs(layer, q_in, k_in, v_in, norm)
        xk = rms_norm(k_in, self.kv_norm[row, 0], self.eps)
        return norm(q_in), xk, rms_norm(v_in, self.kv_norm[row, 1], self.eps)

    def dense_weights(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        """A_i from X_{i+1} [B, T, D] -> [C, B, T, i + 2] (not gates: they stay out of `State.gates`)."""
        b, t, d = x.shape
        scale = self.dw_norm[layer] if self.da_norm == "caiyun" else None
        z = F.gelu(F.linear(rms_norm(x, scale, self.eps), self.w1[layer]))  # [B, T, H_i]
        dw = F.linear(z, self.w2[layer]).view(b, t, self.ways[layer], layer + 2) + self.prior[layer]
        return dw.permute(2, 0, 1, 3)

    def add_mlp(self, layer: int, state: MuddState, out: torch.Tensor) -> None:
        x = state.h + out  # X_{i+1}
        state.history.append(self._entry(layer + 1, x))
        c, span = self.ways[layer], layer + 2
        dw = self.dense_weights(layer, x).unsqueeze(-1)  # [C, B, T, i+2, 1]
        history = state.history
        if self.da_norm == "satformer":
            history = [rms_norm(h, w, self.eps) for h, w in zip(history, self.pre_norm[layer], strict=True)]
        mixed = dw[..., 0, :] * history[0]  # [C, B, T, D]
        for j in range(1, span):
            mixed = mixed + dw[..., j, :] * history[j]
        if self.da_norm == "satformer":
            post = self.post_norm[layer].view(c, 1, 1, -1)
            mixed = rms_norm(mixed, None, self.eps) * post + x
        elif self.da_norm == "caiyun":  # Q, K, V: the sum + X_{i+1}; R: normed first
            r = rms_norm(mixed[-1], self.r_post_norm[layer], self.eps) + x
            mixed = torch.cat([mixed[:-1] + x, r[None]]) if c > 1 else r[None]
        if c == 4:
            state.q, state.k, state.v, state.h = mixed.unbind(0)
        else:
            state.h = state.q = state.k = state.v = mixed[0]
        if layer == self.model_cfg.n_layers - 1:
            state.history.clear()

    @torch.no_grad()
    def make_neutral_(self) -> bool:
        for w2, a in zip(self.w2, self.prior, strict=True):
            w2.zero_()
            a.zero_()
            if self.da_norm is None:
                a[:, -1] = 1.0  # with the DA norms, X_{i+1} is added after them instead
        if self.kv_norm is not None:
            self.kv_norm.fill_(1.0)
        if self.da_norm == "satformer":
            for pre, post in zip(self.pre_norm, self.post_norm, strict=True):
                pre.fill_(1.0)
                post.zero_()
        elif self.da_norm == "caiyun":
            self.history_norm.fill_(1.0)
            self.dw_norm.fill_(1.0)
            self.r_post_norm.zero_()
        return not self.cfg.param_realloc
