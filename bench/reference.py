"""A plain GPT written from scratch, the yardstick `bench.designs` measures the backbone against.

GPT-2's shape, the way one writes it without a framework: learned positions, pre-LayerNorm
blocks with one fused QKV projection and causal SDPA, a 4x GELU MLP, tied embeddings. Same
width, depth and heads as the preset it stands next to; its own FLOPs per token (Kaplan's
6 N + 6 L T D, N = the matmul weights) make the comparison per FLOP.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.fc, self.out = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class ReferenceGPT(nn.Module):
    def __init__(self, vocab: int, d: int, layers: int, heads: int, max_seq_len: int):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_seq_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return F.linear(self.ln(x), self.tok.weight)  # tied head

    def flops_per_token(self, seq_len: int) -> float:
        matmul = sum(
            p.numel() for n, p in self.named_parameters() if p.dim() == 2 and not n.startswith("pos")
        )
        d, layers = self.tok.weight.shape[1], len(self.blocks)
        return float(6 * matmul + 6 * layers * seq_len * d)


def like(model_cfg) -> ReferenceGPT:
    """The reference of the same vocabulary, width, depth and heads as a `ModelConfig`."""
    return ReferenceGPT(
        model_cfg.vocab_size, model_cfg.d_model, model_cfg.n_layers, model_cfg.n_heads, model_cfg.max_seq_len
    )
