"""The decoder-only Transformer; its residual stream is delegated to a `ResidualDesign`."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from arch.config import ModelConfig
from arch.decoding import DecodeStep, KVCache
from arch.designs.base import ResidualDesign, build_design
from arch.layers import Attention, RMSNorm, Rotary, SwiGLU


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, index: int):
        super().__init__()
        self.index = index
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = SwiGLU(cfg.d_model, cfg.residual.ffn_widths(cfg)[index])

    def forward(self, design: ResidualDesign, state, rotary: Rotary, step: DecodeStep | None = None) -> None:
        i = self.index
        xq, xk, xv = design.norm_attn_inputs(i, *design.attn_inputs(i, state), self.attn_norm)
        mix = lambda v, x, x_proj: design.mix_values(i, v, x, state, x_proj)  # noqa: E731
        out = self.attn(xq, xk, xv, rotary, mix, design.value_input_weight(i), step, i)
        design.add_attn(i, state, out)
        design.add_mlp(i, state, self.mlp(self.mlp_norm(design.mlp_input(i, state))))


def _checkpointed(block: Block, design: ResidualDesign, state, rotary: Rotary):
    """`block` on `state`, its activations recomputed in backward instead of kept (activation
    checkpointing). A block updates the design's state in place, so the recomputation must start
    from the state as it was: it runs on a fork of a snapshot taken now. Returns the new state."""
    before = state.fork()
    after = []

    def run() -> None:
        forked = before.fork()
        block(design, forked, rotary)
        if not after:  # the forward pass; the recomputation in backward builds the same again
            after.append(forked)

    checkpoint(run, use_reentrant=False)
    return after[0]


class Transformer(nn.Module):
    """forward(tokens [B, T]) -> logits [B, T, vocab]; with return_gates also {layer: gate}.

    `hidden(tokens)` is the final norm's output [B, T, D], what the head maps to logits (a loss
    can take it and the head's weight, and never build the whole logits). With
    `checkpoint_blocks`, every block's activations are recomputed in backward (same values)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.head.weight = self.embed.weight
        self.rotary = Rotary(cfg.head_dim, cfg.max_seq_len, cfg.rope_base)
        self._init_backbone()
        # Built after the backbone init so that init never overwrites the design's own.
        self.residual = build_design(cfg.residual, cfg)
        self.residual.adjust_backbone_init_(self.blocks)

    def _init_backbone(self) -> None:
        std = self.cfg.init_std
        # GPT-2: residual projections scaled by depth (init: depth_scaled), else all N(0, std)
        scaled = std / math.sqrt(2 * self.cfg.n_layers) if self.cfg.init == "depth_scaled" else std
        nn.init.normal_(self.embed.weight, std=std)
        if not self.cfg.tie_embeddings:
            nn.init.normal_(self.head.weight, std=std)
        for block in self.blocks:
            for name, module in block.named_modules():
                if isinstance(module, nn.Linear):
                    last = name.rsplit(".", 1)[-1]
                    nn.init.normal_(module.weight, std=scaled if last in ("o_proj", "down_proj") else std)

    def forward(
        self,
        tokens: torch.Tensor,
        return_gates: bool = False,
        checkpoint_blocks: bool = False,
        cache: KVCache | None = None,
        attention_mask: torch.Tensor | None = None,
    ):
        """tokens [B, T] -> logits [B, T, vocab]. With `cache` (`new_cache`): the tokens follow
        the cached ones (prefill, then one token at a time), and their K and V' join the cache;
        `attention_mask` [B, T] (1: real token, 0: left padding) marks the padding of a batch."""
        h, gates = self.hidden(tokens, True, checkpoint_blocks, cache, attention_mask)
        logits = self.head(h)
        return (logits, gates) if return_gates else logits

    def hidden(
        self,
        tokens: torch.Tensor,
        return_gates: bool = False,
        checkpoint_blocks: bool = False,
        cache: KVCache | None = None,
        attention_mask: torch.Tensor | None = None,
    ):
        """The final norm's output [B, T, D]; with return_gates also {layer: gate}."""
        if cache is None and attention_mask is not None:
            cache = self.new_cache(tokens.shape[0], tokens.shape[1])
        step = None if cache is None else cache.step(attention_mask, tokens.shape[1], tokens.device)
        if step is None and tokens.shape[1] > self.cfg.max_seq_len:
            raise ValueError(f"sequence length {tokens.shape[1]} exceeds max_seq_len {self.cfg.max_seq_len}")
        state = self.residual.begin(self.embed(tokens), record_gates=return_gates)
        recompute = checkpoint_blocks and torch.is_grad_enabled()
        for block in self.blocks:
            if recompute and step is None:  # decoding runs without gradients: nothing to recompute
                state = _checkpointed(block, self.residual, state, self.rotary)
            else:
                block(self.residual, state, self.rotary, step)
        h = self.norm(self.residual.end(state))
        return (h, state.gates) if return_gates else h

    def new_cache(self, batch: int, capacity: int | None = None) -> KVCache:
        """An empty key/value cache for `batch` rows of up to `capacity` tokens (max_seq_len)."""
        return KVCache(self.cfg.n_layers, batch, capacity or self.cfg.max_seq_len, self.cfg.max_seq_len)

    def param_counts(self) -> dict[str, int]:
        total = sum(p.numel() for p in self.parameters())
        design = sum(p.numel() for p in self.residual.parameters())
        return {"total": total, "design": design, "backbone": total - design}


def build_model(config: ModelConfig | dict) -> Transformer:
    """Builds the model from a ModelConfig or from the plain mapping under `model:`."""
    if not isinstance(config, ModelConfig):
        config = ModelConfig.from_dict(config)
    return Transformer(config)
