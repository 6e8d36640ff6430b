"""The one interface every cross-layer residual design implements, and its registry.

A design owns the residual stream from the embeddings to the final norm. The block never
branches on the design: it asks the design for its attention and MLP inputs, lets it mix the
values inside attention, and hands it each sublayer's output. Designs that carry state across
layers (a tapped V, a history of block outputs, several streams) keep it in their `State`,
which lives for one forward pass.

    state = design.begin(h0)                        # h0 = token embeddings [B, T, D]
    for layer i:
        q_in, k_in, v_in = design.attn_inputs(i, state)     # un-normed [B, T, D] each,
                                                            # normed by design.norm_attn_inputs
        v' = design.mix_values(i, v, x_v, state, x_v W^T)   # v: [B, T, N_kv, hd], x_v normed,
                                                            # W = design.value_input_weight(i)
        design.add_attn(i, state, attn_out)
        design.add_mlp(i, state, mlp(norm(design.mlp_input(i, state))))
    h = design.end(state)                           # -> final norm -> head

Incremental decoding (arch/decoding.py) runs the same calls on the new tokens only: attention
reads the earlier tokens' K and V' from the cache, and a `State` covers the new tokens. That is
exact because every design mixes within a position (a tapped V, a depth history or n streams of
the same token); a design that mixed across positions would have to keep its own cache of them,
and the harness (tests/arch/test_decoding.py) would fail until it did.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import torch
from torch import nn

from arch.backbone import BackboneConfig
from arch.design_configs import ResidualConfig, residual_configs


@dataclasses.dataclass
class State:
    """Per-forward state of the residual stream. `gates` collects gate activations on request."""

    h: torch.Tensor
    gates: dict[int, torch.Tensor] | None = None

    def fork(self) -> State:
        """A copy whose updates leave this one as it is: the same tensors, new lists and dicts
        (a design updates its state by assigning fields and adding to its lists and dicts)."""
        fields = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            fields[f.name] = type(value)(value) if isinstance(value, (list, dict)) else value
        return dataclasses.replace(self, **fields)


class ResidualDesign(nn.Module):
    """Plain pre-norm residual: h <- h + sublayer(norm(h)). Other designs override pieces."""

    config_cls: ClassVar[type[ResidualConfig]] = ResidualConfig

    def __init__(self, cfg: ResidualConfig, model: BackboneConfig):
        super().__init__()
        self.cfg = cfg
        self.model_cfg = model

    def begin(self, h0: torch.Tensor, record_gates: bool = False) -> State:
        return State(h=h0, gates={} if record_gates else None)

    def attn_inputs(self, layer: int, state: State):
        return state.h, state.h, state.h

    def norm_attn_inputs(self, layer: int, q_in, k_in, v_in, norm: nn.Module):
        """The normed attention inputs: the block's attention norm on each stream, computed once
        for a stream that feeds several of Q, K, V (a design may norm them separately)."""
        xq = norm(q_in)
        xk = xq if k_in is q_in else norm(k_in)
        xv = xq if v_in is q_in else xk if v_in is k_in else norm(v_in)
        return xq, xk, xv

    def value_input_weight(self, layer: int) -> torch.Tensor | None:
        """Rows [k, d_model] of a linear map of the layer's normed value input that `mix_values`
        needs (SATFormer's gate logits x_v W_a): the attention computes x_v W^T in the same GEMM
        as Q, K and V when one stream feeds all three, and hands it to `mix_values`."""
        return None

    def mix_values(self, layer: int, v: torch.Tensor, x: torch.Tensor, state: State, x_proj=None):
        """v: the layer's V [B, T, N_kv, hd]; x: its normed value input; x_proj: x times the
        transposed `value_input_weight(layer)` (None when the design asks for none)."""
        return v

    def add_attn(self, layer: int, state: State, out: torch.Tensor) -> None:
        state.h = state.h + out

    def mlp_input(self, layer: int, state: State) -> torch.Tensor:
        return state.h

    def add_mlp(self, layer: int, state: State, out: torch.Tensor) -> None:
        state.h = state.h + out

    def end(self, state: State) -> torch.Tensor:
        return state.h

    # Contracts the shared test harness checks for every design.
    def expected_param_count(self) -> int:
        """Parameters the design adds, from its paper's formula (its config's `param_count`)."""
        return self.cfg.param_count(self.model_cfg)

    @torch.no_grad()
    def adjust_backbone_init_(self, blocks: nn.ModuleList) -> None:
        """Called once after the backbone's init: a design whose paper rescales backbone weights
        at init (e.g. the residual projections) does it here."""

    @torch.no_grad()
    def make_neutral_(self) -> bool:
        """Sets the design to its neutral point (computes the baseline); False if it has none."""
        return True

    def no_decay_parameters(self) -> list[nn.Parameter]:
        """Gates, mixing coefficients and dense weights: never weight-decayed."""
        return list(self.parameters())

    # Hooks of the gate analysis (`python -m gates`).
    has_gates = False  # True (set per instance): `gate_hook` applies and forward returns gates

    def coefficients(self) -> list[dict[str, float]]:
        """Learned or fixed mixing coefficients worth reporting per layer ([] when none)."""
        return []


@dataclasses.dataclass(frozen=True)
class _Entry:
    config_cls: type[ResidualConfig]
    design_cls: type[ResidualDesign]


_REGISTRY: dict[str, _Entry] = {}


def register(kind: str):
    """Class decorator: registers a ResidualDesign subclass under `kind` (refuses duplicates)."""

    def wrap(design_cls: type[ResidualDesign]) -> type[ResidualDesign]:
        if kind in _REGISTRY:
            raise ValueError(f"residual design kind {kind!r} is already registered")
        default_kind = design_cls.config_cls.__dataclass_fields__["kind"].default
        if default_kind != kind:
            raise ValueError(
                f"{design_cls.config_cls.__name__}.kind defaults to {default_kind!r}, not {kind!r}"
            )
        if residual_configs().get(kind) is not design_cls.config_cls:
            raise ValueError(f"{design_cls.config_cls.__name__} is not in arch.design_configs")
        _REGISTRY[kind] = _Entry(design_cls.config_cls, design_cls)
        return design_cls

    return wrap


def registered_kinds() -> list[str]:
    return sorted(_REGISTRY)


def build_design(cfg: ResidualConfig, model: BackboneConfig) -> ResidualDesign:
    return _REGISTRY[cfg.kind].design_cls(cfg, model)
