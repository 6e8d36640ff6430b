"""DenseFormer: a depth-weighted average (DWA) after blocks (arXiv 2402.02622).

Blocks are numbered b = 1..L; X_0 is the token embedding and X_b = Block_b(Y_{b-1}) the output
of block b (its residual stream after attention and MLP). After block b the next block reads

    Y_b = sum_{j in S(b)} alpha_{b,j} X_j        if b is a DWA block (b % period == 0)
    Y_b = X_b                                    otherwise

with S(b) = {j <= b : (b - j) % dilation == 0} (the paper's k x p DenseFormer: dilation k keeps
every k-th earlier output aligned on the current block, period p puts a DWA after every p-th
block; official `DWAModules(n_blocks, dilation, period)`). |S(b)| = b // k + 1.
Identity init: alpha_{b,b} = 1, all others 0 (the neutral point: Y_b = X_b, the baseline).
Parameters: sum over DWA blocks b of (b // k + 1); L (L + 3) / 2 for k = p = 1.

Only outputs a later DWA reads are kept (X_j with j in S(b) for some DWA block b > j), and each
is dropped after its last reader; the average is a running sum (no stack of the history).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from arch.design_configs.denseformer import DenseFormerConfig
from arch.designs.base import ResidualDesign, State, register


def dwa_inputs(block: int, dilation: int) -> tuple[int, ...]:
    """S(b): the outputs the DWA after block b averages, ascending; the last is b itself."""
    return tuple(range(block % dilation, block + 1, dilation))


@dataclasses.dataclass
class DenseState(State):
    outputs: dict[int, torch.Tensor] = dataclasses.field(default_factory=dict)  # j -> X_j [B, T, D]


@register("denseformer")
class DenseFormer(ResidualDesign):
    config_cls = DenseFormerConfig

    def __init__(self, cfg: DenseFormerConfig, model):
        super().__init__(cfg, model)
        n = model.n_layers
        self.inputs = {b: dwa_inputs(b, cfg.dilation) for b in range(cfg.period, n + 1, cfg.period)}
        # alphas["b"]: [|S(b)|], the weights of the DWA after block b.
        self.alphas = nn.ParameterDict(
            {str(b): nn.Parameter(torch.empty(len(js))) for b, js in self.inputs.items()}
        )
        self.last_reader: dict[int, int] = {}  # j -> the last DWA block that reads X_j (j < b)
        for b, js in self.inputs.items():
            for j in js[:-1]:
                self.last_reader[j] = max(self.last_reader.get(j, 0), b)
        self.make_neutral_()

    def begin(self, h0, record_gates: bool = False) -> DenseState:
        state = DenseState(h=h0, gates={} if record_gates else None)
        if 0 in self.last_reader:
            state.outputs[0] = h0
        return state

    def add_mlp(self, layer: int, state: DenseState, out: torch.Tensor) -> None:
        b = layer + 1
        x = state.h + out  # X_b
        if b in self.last_reader:
            state.outputs[b] = x
        js = self.inputs.get(b)
        if js is not None:
            w = self.alphas[str(b)]
            y = w[0] * (x if js[0] == b else state.outputs[js[0]])
            for slot, j in enumerate(js[1:], start=1):
                y = y + w[slot] * (x if j == b else state.outputs[j])
            x = y
            for j in js[:-1]:
                if self.last_reader[j] == b:
                    del state.outputs[j]
        state.h = x

    @torch.no_grad()
    def make_neutral_(self) -> bool:
        for w in self.alphas.values():
            w.zero_()
            w[-1] = 1.0
        return True
