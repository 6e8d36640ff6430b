"""The value-residual family: ResFormer's static mix and SATFormer's selective gate.

Layer `tap` (1-based `tap_layer`) exposes its raw value projection V_tap (on KV heads, before
any GQA repeat, not detached); it does not consume it. Each consuming layer n mixes it into
its own values before the attention kernel (so a KV cache would hold the mixed V'):

- static (ResFormer, arXiv 2410.17897):  V'_n = l_tap,n * V_tap + l_self,n * V_n, one pair per
  layer or per KV head, by `coefficient`:
    fixed    (l_tap, l_self) constants (ResFormer's official 0.5 / 0.5);
    learned  independent learned (l_tap, l_self) per consuming layer, from (lambda_tap, lambda_self);
    softmax  the SATFormer paper's ResFormer baseline: l_tap,n = s * softmax(z)_n over the N - tap
             layers after the tap (z = 0 and one shared s = N at init, so l_tap starts at
             N / (N - tap); with `consumers: k` the unused layers' logits stay in the softmax, as in
             the official code), l_self,n learned per layer from lambda_self (0.5).
- gated (SATFormer, arXiv 2605.03953):    a_{t,j} = act(x_t W_a)_j,  V'_{t,j} = V_{t,j} + a_{t,j} V_tap_{t,j}
  x_t is the normed input of that attention layer, W_a is d_model x N_kv (`token_head`) or
  d_model x 1 (`token`, one gate per token shared by all heads). No bias by default; `gate_bias:
  true` adds b_a per gate, a = act(x_t W_a + b_a), zero at init (the official
  `value_residual_proj_bias`, a bias on its alpha_proj, zeroed by its init). The official code's
  head-normalised gates need `token_head`: softmax a = N_kv softmax_j(z) (mean 1 over the heads),
  softmax_sigmoid a = N_kv softmax_j(z) sigmoid(z_j).

The neutral point (W_a = 0 and b_a = 0 with act(0) = 0, or l_tap = 0, l_self = 1; softmax coefficients: s = 0,
l_self = 1) computes the baseline. sigmoid, sigmoid2, softplus, softmax and softmax_sigmoid gates
have none: act(0) != 0, and softmax gates sum to N_kv over the heads whatever W_a is.
"""

from __future__ import annotations

import dataclasses
import functools

import torch
import torch.nn.functional as F
from torch import nn

from arch.design_configs.value_residual import ACTIVATION_NAMES, ZERO_AT_ZERO, ValueResidualConfig
from arch.designs.base import ResidualDesign, State, register

_FUNCTIONS = {
    "relu": F.relu,
    "sigmoid": torch.sigmoid,
    "sigmoid2": lambda z: 2.0 * torch.sigmoid(z),
    "softplus": F.softplus,
    "tanh": torch.tanh,
    "identity": lambda z: z,
    # over the KV heads of a token (the last dim), scaled so the mean over heads is 1 (softmax)
    "softmax": lambda z: z.shape[-1] * torch.softmax(z, dim=-1),
    "softmax_sigmoid": lambda z: z.shape[-1] * torch.softmax(z, dim=-1) * torch.sigmoid(z),
}
ACTIVATIONS = {name: _FUNCTIONS[name] for name in ACTIVATION_NAMES}  # the config's names, in order


@dataclasses.dataclass
class ValueResidualState(State):
    v_tap: torch.Tensor | None = None  # [B, T, N_kv, hd]


class GatedMix(nn.Module):
    """V' = V + act(x W_a + b_a) * V_tap, W_a per consuming layer: [C, d_model, N_kv or 1], b_a [C, N_kv
    or 1] with `gate_bias` (else none)."""

    def __init__(self, cfg: ValueResidualConfig, n_consumers: int, d_model: int, n_kv: int):
        super().__init__()
        self.cfg = cfg
        width = n_kv if cfg.granularity == "token_head" else 1
        self.weight = nn.Parameter(torch.empty(n_consumers, d_model, width))
        self.bias = nn.Parameter(torch.empty(n_consumers, width)) if cfg.gate_bias else None
        self.act = ACTIVATIONS[cfg.activation]
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.cfg.gate_init == "zero":
            nn.init.zeros_(self.weight)
        else:
            nn.init.normal_(self.weight, std=self.cfg.gate_init_std)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, j: int, v, x, v_tap, gate_hook=None, logits=None):
        """logits: x W_a when the attention computed them with Q, K, V (one GEMM)."""
        if logits is None:
            logits = x @ self.weight[j]  # [B, T, D] @ [D, width] -> [B, T, width]
        if self.bias is not None:
            logits = logits + self.bias[j]
        gate = self.act(logits)
        if gate_hook is not None:
            gate = gate_hook(gate)
        return torch.addcmul(v, gate.unsqueeze(-1), v_tap), gate  # one fused kernel; broadcast over hd

    def make_neutral_(self) -> bool:
        self.weight.zero_()
        if self.bias is not None:
            self.bias.zero_()
        return self.cfg.activation in ZERO_AT_ZERO


class StaticMix(nn.Module):
    """V' = l_tap * V_tap + l_self * V with (l_tap, l_self) per layer [C, 1] or per KV head [C, N_kv]."""

    def __init__(self, cfg: ValueResidualConfig, n_consumers: int, d_model: int, n_kv: int):
        super().__init__()
        width = n_kv if cfg.granularity == "head" else 1
        lam_tap = torch.full((n_consumers, width), cfg.lambda_tap)
        lam_self = torch.full((n_consumers, width), cfg.lambda_self)
        if cfg.coefficient == "learned":
            self.lambda_tap = nn.Parameter(lam_tap)
            self.lambda_self = nn.Parameter(lam_self)
        else:
            self.register_buffer("lambda_tap", lam_tap)
            self.register_buffer("lambda_self", lam_self)

    def tap_coefficients(self):
        """l_tap of every consuming layer: [C, width]."""
        return self.lambda_tap

    def forward(self, j: int, v, x, v_tap, gate_hook=None, logits=None):
        lam_tap = self.tap_coefficients()[j].view(-1, 1)  # [width, 1] broadcasts over [B, T, N_kv, hd]
        lam_self = self.lambda_self[j].view(-1, 1)
        return torch.addcmul(lam_self * v, lam_tap, v_tap), None

    def make_neutral_(self) -> bool:
        self.lambda_tap.zero_()
        self.lambda_self.fill_(1.0)
        return True


class SoftmaxMix(StaticMix):
    """The SATFormer paper's ResFormer: l_tap = s * softmax(z) over the layers after the tap, one
    shared s (init N), logits z [N - tap, width] (init 0), l_self learned per layer (init 0.5).
    The consuming layers read the last C rows of the softmax (`first_row` on)."""

    def __init__(self, cfg: ValueResidualConfig, n_consumers: int, d_model: int, n_kv: int, n_layers: int):
        nn.Module.__init__(self)
        width = n_kv if cfg.granularity == "head" else 1
        after_tap = n_layers - cfg.tap_layer
        self.lambda_scale = nn.Parameter(torch.tensor(float(n_layers)))
        self.lambda_logits = nn.Parameter(torch.zeros(after_tap, width))
        self.lambda_self = nn.Parameter(torch.full((n_consumers, width), cfg.lambda_self))
        self.first_row = after_tap - n_consumers

    def tap_coefficients(self):
        # recomputed per consuming layer: a softmax over ~N logits, negligible next to a projection
        weights = torch.softmax(self.lambda_logits, dim=0)[self.first_row :]
        return self.lambda_scale * weights

    def make_neutral_(self) -> bool:
        self.lambda_scale.zero_()
        self.lambda_self.fill_(1.0)
        return True


MIXERS = {"gated": GatedMix, "static": StaticMix}


@register("value_residual")
class ValueResidual(ResidualDesign):
    config_cls = ValueResidualConfig

    def __init__(self, cfg: ValueResidualConfig, model):
        super().__init__(cfg, model)
        self.tap = cfg.tap_layer - 1  # 0-based
        n = model.n_layers
        self.consumers = cfg.consumer_layers(n)
        self.slot = {layer: j for j, layer in enumerate(self.consumers)}
        if cfg.mode == "static" and cfg.coefficient == "softmax":
            self.mix = SoftmaxMix(cfg, len(self.consumers), model.d_model, model.n_kv_heads, n)
        else:
            self.mix = MIXERS[cfg.mode](cfg, len(self.consumers), model.d_model, model.n_kv_heads)
        self.has_gates = cfg.mode == "gated"
        # Analyses set this to rewrite gates (zeroed, mean, constant): f(layer, gate) -> gate.
        self.gate_hook = None

    def begin(self, h0, record_gates: bool = False) -> ValueResidualState:
        return ValueResidualState(h=h0, gates={} if record_gates else None)

    def value_input_weight(self, layer: int):
        """W_a^T of a gated consumer: its gate logits come out of the QKV GEMM, because a separate
        [D, N_kv] GEMM is a thin one that uses the hardware poorly; riding along costs no memory
        (the stacked weight is rebuilt in backward). Figures: docs/bench/backbone.md."""
        j = self.slot.get(layer)
        return self.mix.weight[j].t() if self.has_gates and j is not None else None

    def mix_values(self, layer: int, v, x, state: ValueResidualState, x_proj=None):
        if layer == self.tap:
            state.v_tap = v
            return v
        j = self.slot.get(layer)
        if j is None:
            return v
        hook = None if self.gate_hook is None else functools.partial(self.gate_hook, layer)
        mixed, gate = self.mix(j, v, x, state.v_tap, hook, logits=x_proj)
        if gate is not None and state.gates is not None:
            state.gates[layer] = gate.detach()
        return mixed

    @torch.no_grad()
    def make_neutral_(self) -> bool:
        return self.mix.make_neutral_()

    @torch.no_grad()
    def coefficients(self) -> list[dict[str, float]]:
        """ResFormer's (lambda_tap, lambda_self) per consuming layer (1-based; head mean)."""
        if self.cfg.mode != "static":
            return []
        lam_tap = self.mix.tap_coefficients()
        return [
            {
                "layer": layer + 1,
                "lambda_tap": float(lam_tap[j].mean()),
                "lambda_self": float(self.mix.lambda_self[j].mean()),
            }
            for j, layer in enumerate(self.consumers)
        ]
