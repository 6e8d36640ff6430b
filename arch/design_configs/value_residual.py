"""The value residual's config: ResidualFormer's static mix and SATFormer's gate
(arch.designs.value_residual: the design, arXiv 2410.17897 and 2605.03953)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from arch.configtree import Issue, choices, join, not_one_of
from arch.design_configs.base import ResidualConfig, residual_config

# the gate activations (arch.designs.value_residual.ACTIVATIONS holds their functions, in this order)
ACTIVATION_NAMES = (
    "relu",
    "sigmoid",
    "sigmoid2",
    "softplus",
    "tanh",
    "identity",
    "softmax",
    "softmax_sigmoid",
)
ZERO_AT_ZERO = {"relu", "tanh", "identity"}  # activations for which W_a = 0 is the baseline
HEAD_NORMALISED = {"softmax", "softmax_sigmoid"}  # need one gate per KV head (token_head)

GRANULARITIES = {"static": ("layer", "head"), "gated": ("token", "token_head")}
DEFAULT_GRANULARITY = {"static": "layer", "gated": "token_head"}
MODE_ONLY_KEYS = {
    "gated": ("activation", "gate_init", "gate_init_std", "gate_bias"),
    "static": ("coefficient", "lambda_tap", "lambda_self"),
}


@residual_config
@dataclasses.dataclass(frozen=True)
class ValueResidualConfig(ResidualConfig):
    kind: Literal["value_residual"] = "value_residual"
    mode: Literal["static", "gated"] = "gated"
    granularity: Literal["layer", "head", "token", "token_head"] | None = None  # None: by mode
    tap_layer: int = dataclasses.field(default=1, metadata={"ge": 1})
    consumers: Literal["all"] | int = "all"  # all later layers, or the last k
    # gated only
    activation: str = "relu"  # a name of ACTIVATION_NAMES
    gate_init: Literal["normal", "zero"] = "normal"
    gate_init_std: float = dataclasses.field(default=0.02, metadata={"gt": 0})
    gate_bias: bool = False  # b_a: the official value_residual_proj_bias
    # static only
    coefficient: Literal["fixed", "learned", "softmax"] = "fixed"
    lambda_tap: float = 0.5
    lambda_self: float = 0.5

    def __post_init__(self):
        if self.granularity is None:
            object.__setattr__(self, "granularity", DEFAULT_GRANULARITY[self.mode])

    def check(self, path: str) -> list[Issue]:
        if self.activation not in ACTIVATION_NAMES:
            return [
                Issue(
                    join(path, "activation"),
                    not_one_of(self.activation, ACTIVATION_NAMES),
                )
            ]
        issues = []
        if self.granularity not in GRANULARITIES[self.mode]:
            pairs = "; ".join(f"{m}: {choices(g)}" for m, g in GRANULARITIES.items())
            issues.append(
                Issue(
                    join(path, "granularity"),
                    f"given {self.granularity!r} with mode {self.mode!r}; allowed pairs: {pairs}",
                )
            )
        defaults = ValueResidualConfig()
        for mode, keys in MODE_ONLY_KEYS.items():
            if mode == self.mode:
                continue
            for key in keys:
                if getattr(self, key) != getattr(defaults, key):
                    issues.append(Issue(join(path, key), f"applies only to mode {mode!r}, not {self.mode!r}"))
        if self.mode == "gated" and self.activation in HEAD_NORMALISED and self.granularity != "token_head":
            issues.append(
                Issue(
                    join(path, "activation"),
                    f"given {self.activation!r} with granularity {self.granularity!r}; it normalises "
                    "over the KV heads of a token: allowed with granularity 'token_head'",
                )
            )
        if self.coefficient == "softmax" and self.lambda_tap != defaults.lambda_tap:
            issues.append(
                Issue(
                    join(path, "lambda_tap"),
                    "not used by coefficient 'softmax' (l_tap = s softmax(z) starts at N / (N - tap_layer))",
                )
            )
        if isinstance(self.consumers, int) and self.consumers < 1:
            issues.append(Issue(join(path, "consumers"), f"given {self.consumers}; allowed: 'all' or k >= 1"))
        return issues

    def consumer_layers(self, n_layers: int) -> list[int]:
        """The layers (0-based) that mix the tapped V in: every later one, or the last k."""
        first = self.tap_layer if self.consumers == "all" else n_layers - self.consumers
        return list(range(first, n_layers))

    def param_count(self, model) -> int:
        c = len(self.consumer_layers(model.n_layers))
        if self.mode == "gated":
            return (
                c
                * (model.d_model + self.gate_bias)
                * (model.n_kv_heads if self.granularity == "token_head" else 1)
            )
        width = model.n_kv_heads if self.granularity == "head" else 1
        if self.coefficient == "fixed":
            return 0
        if self.coefficient == "softmax":  # s, the logits of every layer after the tap, l_self
            return 1 + (model.n_layers - self.tap_layer) * width + c * width
        return 2 * c * width

    def descriptors(self) -> dict[str, str]:
        keys = ("kind", "mode", "granularity", "tap_layer", "consumers")
        keys += ("activation",) if self.mode == "gated" else ("coefficient",)
        return {k: str(getattr(self, k)) for k in keys}

    def check_against(self, model, path: str) -> list[Issue]:
        issues = []
        if self.tap_layer >= model.n_layers:
            issues.append(
                Issue(
                    join(path, "tap_layer"),
                    f"given {self.tap_layer} with n_layers {model.n_layers}; allowed: 1 to "
                    f"{model.n_layers - 1} (a later layer must consume the tap)",
                )
            )
        elif self.mode == "gated" and self.activation in HEAD_NORMALISED and model.n_kv_heads == 1:
            issues.append(
                Issue(
                    join(path, "activation"),
                    f"given {self.activation!r} with n_kv_heads 1: a softmax over one head is constant; "
                    "allowed with n_kv_heads >= 2",
                )
            )
        if isinstance(self.consumers, int) and self.consumers > model.n_layers - self.tap_layer:
            issues.append(
                Issue(
                    join(path, "consumers"),
                    f"given {self.consumers}; allowed: 'all' or 1 to "
                    f"{model.n_layers - self.tap_layer} (layers after tap_layer {self.tap_layer})",
                )
            )
        return issues
