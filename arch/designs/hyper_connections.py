"""Hyper-Connections: n residual streams mixed by learned matrices (arXiv 2409.19606).

The hidden state is H = [h_1 .. h_n] in R^{n x D} per token, H_0 = the embedding copied n times.
Each sublayer T (attention and MLP separately) is wrapped by one hyper-connection with
A_m in R^{n x 1}, A_r in R^{n x n}, B in R^{1 x n}:

    width:  [h_in, H'] = [A_m A_r]^T H                  # h_in = A_m^T H feeds T (via its pre-norm)
    depth:  H <- B^T T(norm(h_in)) + H'                 # [n, D]

static: A_m, A_r, B learned, init (layer k) A_m = e_{k mod n}, A_r = I, B = 1 (paper Eq. 14);
dynamic (the paper's appendix code): with H_bar = RMSNorm(H) per stream,

    [A_m A_r](H) = s_a * tanh(H_bar W_a) + [A_m A_r],   W_a in R^{D x (n+1)}, zero init
    B(H)         = s_b * tanh(H_bar W_b)^T + B,          W_b in R^{D x 1},     zero init

with learnable scalars s_a = s_b = `dynamic_scale` (0.01) at init; `norm: layer` makes the
per-stream norm a LayerNorm (weight and bias, as the official code's `hc_norm_type: layer`).
`use_tanh: false` drops both tanh (the official `use_tanh`): [A_m A_r](H) = s_a H_bar W_a + [A_m A_r].
`norm_eps`: `model` (the model's norm_eps) or `torch_default` (the SATFormer repository's
HyperConnections, whose nn.RMSNorm / nn.LayerNorm take no eps: the input dtype's machine epsilon
for RMSNorm, 1e-5 for LayerNorm).
`out_proj_scale`: o_proj and down_proj at init divided by sqrt(n) (`inv_sqrt_n`: the SATFormer
repository at HEAD, models/hyperconnections/modeling_hyperconnections.py, to keep the output's
scale when the final collapse sums n copies), multiplied by sqrt(n) (`sqrt_n`: what its first
release's rescale code did) or left as the backbone draws them (`none`).
The streams are summed before the final norm. `stream_index` says what k counts: each sublayer
(attention 2i, MLP 2i + 1) or each block i (both of its sublayers read stream i mod n).

Neutral point: n = 1 at init is the baseline exactly. For n > 1 the init is the baseline up to
the final norm's scale (all n streams equal the baseline stream); `make_neutral_` sets the exact
one-live-stream point A_m = e_1, A_r = e_1 e_1^T, B = e_1 (dynamic W = 0), which the baseline
computes bit for bit. Parameters: 2 L [n (n + 2) + dynamic (D (n + 3) + 2)] (per wrapper: A_m,
A_r, B; plus W_a, W_b, the norm weight and s_a, s_b), + 2 L D for LayerNorm's bias.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from arch.design_configs.hyper_connections import HyperConnectionsConfig
from arch.designs.base import ResidualDesign, State, register
from arch.layers import rms_norm


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


@dataclasses.dataclass
class HyperState(State):
    mix: torch.Tensor | None = None  # [B, T, n + 1, D]: row 0 the sublayer input, rows 1.. H'
    beta: torch.Tensor | None = None  # [n] (static) or [B, T, n] (dynamic)


@register("hyper_connections")
class HyperConnections(ResidualDesign):
    config_cls = HyperConnectionsConfig

    def __init__(self, cfg: HyperConnectionsConfig, model):
        super().__init__(cfg, model)
        n, d, s = cfg.expansion_rate, model.d_model, 2 * model.n_layers  # s: one wrapper per sublayer
        self.n, self.eps = n, model.norm_eps
        self.static_alpha = nn.Parameter(torch.empty(s, n, n + 1))  # [A_m A_r] per wrapper
        self.static_beta = nn.Parameter(torch.empty(s, n))  # B per wrapper
        self.dynamic = cfg.mode == "dynamic"
        if self.dynamic:
            self.alpha_fn = nn.Parameter(torch.empty(s, d, n + 1))  # W_a
            self.beta_fn = nn.Parameter(torch.empty(s, d, 1))  # W_b
            self.alpha_scale = nn.Parameter(torch.empty(s))
            self.beta_scale = nn.Parameter(torch.empty(s))
            self.norm_weight = nn.Parameter(torch.empty(s, d))
            self.norm_bias = nn.Parameter(torch.empty(s, d)) if cfg.norm == "layer" else None
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        n = self.n
        per_block = self.cfg.stream_index == "block"
        self.static_alpha.zero_()
        for wrapper in range(self.static_alpha.shape[0]):
            k = wrapper // 2 if per_block else wrapper
            self.static_alpha[wrapper, k % n, 0] = 1.0  # A_m = e_{k mod n}
            self.static_alpha[wrapper, :, 1:] = torch.eye(n)  # A_r = I
        self.static_beta.fill_(1.0)  # B = 1
        if self.dynamic:
            self.alpha_fn.zero_()
            self.beta_fn.zero_()
            self.alpha_scale.fill_(self.cfg.dynamic_scale)
            self.beta_scale.fill_(self.cfg.dynamic_scale)
            self.norm_weight.fill_(1.0)
            if self.norm_bias is not None:
                self.norm_bias.zero_()

    @torch.no_grad()
    def adjust_backbone_init_(self, blocks) -> None:
        factor = {"none": 1.0, "inv_sqrt_n": self.n**-0.5, "sqrt_n": self.n**0.5}[self.cfg.out_proj_scale]
        if factor != 1.0:
            for block in blocks:
                block.attn.o_proj.weight.mul_(factor)
                block.mlp.down_proj.weight.mul_(factor)

    def begin(self, h0, record_gates: bool = False) -> HyperState:
        b, t, d = h0.shape
        return HyperState(h=h0.unsqueeze(2).expand(b, t, self.n, d), gates={} if record_gates else None)

    def _width(self, wrapper: int, state: HyperState) -> torch.Tensor:
        h = state.h  # [B, T, n, D]
        alpha, beta = self.static_alpha[wrapper], self.static_beta[wrapper]  # [n, n+1], [n]
        if self.dynamic:
            if self.norm_bias is None:
                eps = torch.finfo(h.dtype).eps if self.cfg.norm_eps == "torch_default" else self.eps
                h_bar = rms_norm(h, self.norm_weight[wrapper], eps)
            else:
                eps = 1e-5 if self.cfg.norm_eps == "torch_default" else self.eps
                h_bar = F.layer_norm(
                    h, (h.shape[-1],), self.norm_weight[wrapper], self.norm_bias[wrapper], eps
                )
            squash = torch.tanh if self.cfg.use_tanh else _identity
            alpha = self.alpha_scale[wrapper] * squash(h_bar @ self.alpha_fn[wrapper]) + alpha
            beta = self.beta_scale[wrapper] * squash(h_bar @ self.beta_fn[wrapper]).squeeze(-1) + beta
        if self.dynamic:  # [B, T, n+1, n] @ [B, T, n, D] -> [B, T, n+1, D]
            state.mix = alpha.transpose(-1, -2) @ h
        else:  # one GEMM: a broadcast [n+1, n] @ [B, T, n, D] matmul is slower on CPU (docs/bench)
            state.mix = torch.einsum("nm,btnd->btmd", alpha, h)
        state.beta = beta
        return state.mix[..., 0, :]

    def _depth(self, state: HyperState, out: torch.Tensor) -> None:
        # [(B, T,) n, 1] * [B, T, 1, D] + [B, T, n, D]
        state.h = state.beta.unsqueeze(-1) * out.unsqueeze(-2) + state.mix[..., 1:, :]
        state.mix = state.beta = None

    def attn_inputs(self, layer: int, state: HyperState):
        x = self._width(2 * layer, state)
        return x, x, x

    def add_attn(self, layer: int, state: HyperState, out: torch.Tensor) -> None:
        self._depth(state, out)

    def mlp_input(self, layer: int, state: HyperState) -> torch.Tensor:
        return self._width(2 * layer + 1, state)

    def add_mlp(self, layer: int, state: HyperState, out: torch.Tensor) -> None:
        self._depth(state, out)

    def end(self, state: HyperState) -> torch.Tensor:
        return state.h.sum(dim=2)

    @torch.no_grad()
    def make_neutral_(self) -> bool:
        self.reset_parameters()
        if self.n > 1:
            self.static_alpha.zero_()
            self.static_alpha[:, 0, 0] = 1.0  # A_m = e_1
            self.static_alpha[:, 0, 1] = 1.0  # A_r = e_1 e_1^T
            self.static_beta.zero_()
            self.static_beta[:, 0] = 1.0  # B = e_1
        return True
