"""MUDDFormer's config and its named presets (arch.designs.muddformer: the design, arXiv 2502.12170)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from arch.configtree import Issue, join, not_one_of
from arch.design_configs.base import ResidualConfig, residual_config

WAYS = {"qkvr": 4, "r": 1}
LAST_EXPAND = 4  # Caiyun's code: the last layer's hidden width is multiplied by 4
PRESETS = {
    "satformer_paper": {"sepln": True, "sepln_layers": "all", "pre_post_da_norm": True,
                        "da_norm_form": "satformer", "param_realloc": True, "realloc_rounding": "satformer",
                        "w1_init": "satformer", "hidden_round": False, "expand_last": False},
    "caiyun_release": {"sepln": True, "sepln_layers": "after_first", "pre_post_da_norm": False,
                       "param_realloc": True, "realloc_rounding": "caiyun", "w1_init": "muddformer",
                       "hidden_round": True, "expand_last": True},
    "caiyun_jax": {"sepln": True, "sepln_layers": "all", "pre_post_da_norm": True, "da_norm_form": "caiyun",
                   "param_realloc": True, "realloc_rounding": "caiyun", "w1_init": "muddformer",
                   "hidden_round": True, "expand_last": True},
}  # fmt: skip
# Form keys that mean something only with their switch on: key -> (switch, its default form)
FORM_SWITCHES = {
    "sepln_layers": ("sepln", "all"),
    "realloc_rounding": ("param_realloc", "satformer"),
    "da_norm_form": ("pre_post_da_norm", "satformer"),
}


@residual_config
@dataclasses.dataclass(frozen=True)
class MuddFormerConfig(ResidualConfig):
    kind: Literal["muddformer"] = "muddformer"
    preset: str | None = None  # a named set of the options below (PRESETS)
    streams: Literal["qkvr", "r"] = "qkvr"  # r: the paper's single-way ablation
    hidden_round: bool = True  # Caiyun's round64 (on in its release; the SATFormer repository: off)
    expand_last: bool = True  # Caiyun's expand_last (on in its release; the SATFormer repository: off)
    sepln: bool = False  # on in all three sources; which layers: sepln_layers
    # all: the SATFormer repository's and Caiyun's JAX code; after_first: Caiyun's PyTorch release
    sepln_layers: Literal["all", "after_first"] = "all"
    pre_post_da_norm: bool = False  # the SATFormer repository's and Caiyun's JAX code; which: da_norm_form
    # satformer: the SATFormer repository's use_pre_post_da_norm; caiyun: Caiyun's JAX mudd_prenorm/postnorm
    da_norm_form: Literal["satformer", "caiyun"] = "satformer"
    param_realloc: bool = False  # all three sources; how rounded: realloc_rounding
    # satformer: the SATFormer repository's (to 256, at least 256); caiyun: both Caiyun codes' (nearest 128)
    realloc_rounding: Literal["satformer", "caiyun"] = "satformer"
    # muddformer: Caiyun's JAX fan-in init (std D^-1/2); satformer: the SATFormer repository's (std 1/D)
    w1_init: Literal["muddformer", "satformer"] = "muddformer"

    @classmethod
    def prepare(cls, data, path: str, issues: list[Issue]):
        data = dict(data)
        preset = data.get("preset")
        if preset is None:
            return data
        if preset not in PRESETS:
            issues.append(Issue(join(path, "preset"), not_one_of(preset, PRESETS)))
            return None
        return {**PRESETS[preset], **data}

    def check(self, path: str) -> list[Issue]:
        issues = []
        for key, (switch, default) in FORM_SWITCHES.items():
            if getattr(self, key) != default and not getattr(self, switch):
                issues.append(
                    Issue(join(path, key), f"given {getattr(self, key)!r}; applies only with {switch}: true")
                )
        return issues

    def check_against(self, model, path: str) -> list[Issue]:
        widths = self.ffn_widths(model)
        if min(widths) > 0:
            return []
        layer = widths.index(min(widths))
        return [
            Issue(
                join(path, "realloc_rounding"),
                f"given 'caiyun' with d_ff {model.d_ff}: layer {layer} gets an MLP width of 0 "
                "(round(d_ff / 2 / 128) x 128); allowed with d_ff > 128",
            )
        ]

    @property
    def da_norm(self) -> str | None:
        """The DA norms' form (satformer, caiyun), None without pre_post_da_norm."""
        return self.da_norm_form if self.pre_post_da_norm else None

    def param_count(self, model) -> int:
        n, d = model.n_layers, model.d_model
        total = d if self.da_norm == "caiyun" else 0  # the embedding's history norm
        for i in range(n):
            c = 1 if i == n - 1 else WAYS[self.streams]
            h = c * (i + 2) * (LAST_EXPAND if self.expand_last and i == n - 1 else 1)
            h = 64 * (h // 64 + 1) if self.hidden_round else h
            total += d * h + h * c * (i + 2) + c * (i + 2)
            total += 2 * d if self.sepln and i >= self.sepln_first else 0
            total += {"satformer": (i + 2 + c) * d, "caiyun": 3 * d, None: 0}[self.da_norm]
        return total

    @property
    def sepln_first(self) -> int:
        """The first layer whose K and V get norms of their own with sepln (after_first: 1)."""
        return 1 if self.sepln_layers == "after_first" else 0

    def ffn_widths(self, model) -> list[int]:
        # one layer keeps d_ff (both reallocations divide by L - 1; Caiyun's code raises there)
        if not self.param_realloc or model.n_layers == 1:
            return [model.d_ff] * model.n_layers
        n = model.n_layers
        if self.realloc_rounding == "caiyun":  # Caiyun's expression, evaluated in its order
            return [round(model.d_ff * (i / (n - 1) + 0.5) / 128) * 128 for i in range(n)]
        widths = []
        for i in range(1, n + 1):
            w = int(round((0.5 * (n - i) + 1.5 * (i - 1)) / (n - 1) * model.d_ff))
            widths.append(max(256, (w + 127) // 256 * 256))
        return widths
