"""A plain GPT written from scratch, the yardstick `bench.designs` measures the backbone against.

GPT-2's shape, the way one writes it without a framework: learned positions, pre-LayerNorm
blocks with one fused QKV projection and causal SDPA, a 4x GELU MLP, tied embeddings. Same
width, depth and heads as the preset it stands next to; its own FLOPs per token (Kaplan's
6 N + 6 L T D, N = the matmul weights) make the comparison per FLOP.

`features` swap in the backbone's architecture one piece at a time, each written the plain way:
`rmsnorm` (torch's nn.RMSNorm), `rope` (rotate-half rotary on Q and K, as in Llama's reference
code; no position table), `swiglu` (separate gate, up and down projections of the preset's d_ff).
With all three it is the backbone's function written plainly (same parameters, same outputs for
the same weights), so `bench.designs` can tell what the architecture costs from what the
implementation does.
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F
from torch import nn

FEATURES = ("rmsnorm", "rope", "swiglu")


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class Block(nn.Module):
    def __init__(self, d: int, heads: int, d_ff: int, features: frozenset, eps: float):
        super().__init__()
        self.heads = heads
        norm = (lambda: nn.RMSNorm(d, eps=eps)) if "rmsnorm" in features else (lambda: nn.LayerNorm(d))
        self.ln1, self.ln2 = norm(), norm()
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.swiglu = "swiglu" in features
        if self.swiglu:
            self.gate, self.up = nn.Linear(d, d_ff, bias=False), nn.Linear(d, d_ff, bias=False)
            self.out = nn.Linear(d_ff, d, bias=False)
        else:
            self.fc, self.out = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

    def forward(self, x: torch.Tensor, cos_sin: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if cos_sin is not None:
            cos, sin = cos_sin
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        h = self.ln2(x)
        return x + self.out(F.silu(self.gate(h)) * self.up(h) if self.swiglu else F.gelu(self.fc(h)))


class ReferenceGPT(nn.Module):
    def __init__(
        self,
        vocab: int,
        d: int,
        layers: int,
        heads: int,
        max_seq_len: int,
        d_ff: int | None = None,
        features: tuple[str, ...] = (),
        rope_base: float = 10000.0,
        eps: float = 1e-6,
    ):
        super().__init__()
        unknown = set(features) - set(FEATURES)
        if unknown:
            raise ValueError(f"reference features {sorted(unknown)}: allowed {', '.join(FEATURES)}")
        self.features = frozenset(features)
        self.tok = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, d_ff or 4 * d, self.features, eps) for _ in range(layers))
        self.ln = nn.RMSNorm(d, eps=eps) if "rmsnorm" in self.features else nn.LayerNorm(d)
        if "rope" in self.features:
            hd = d // heads
            inv_freq = 1.0 / (rope_base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
            angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), inv_freq)
            angles = torch.cat([angles, angles], dim=-1)  # [T, hd]: angle i on dims i and i + hd/2
            self.register_buffer("cos", angles.cos().float(), persistent=False)
            self.register_buffer("sin", angles.sin().float(), persistent=False)
        else:
            self.pos = nn.Embedding(max_seq_len, d)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.linear(self.hidden(tokens), self.tok.weight)  # tied head

    @property
    def head(self) -> types.SimpleNamespace:
        """The tied head as the trainer's step reads it (`head.weight`, trainers.train_step)."""
        return types.SimpleNamespace(weight=self.tok.weight)

    def hidden(self, tokens: torch.Tensor, checkpoint_blocks: bool = False) -> torch.Tensor:
        """The final norm's output [B, T, d], what the tied head maps to logits (no activation
        checkpointing: the plain way)."""
        if checkpoint_blocks:
            raise ValueError("the reference GPT does not recompute its blocks")
        t = tokens.shape[1]
        x = self.tok(tokens)
        if "rope" in self.features:
            cos_sin = (self.cos[:t], self.sin[:t])
        else:
            x, cos_sin = x + self.pos(torch.arange(t, device=tokens.device)), None
        for block in self.blocks:
            x = block(x, cos_sin)
        return self.ln(x)

    def flops_per_token(self, seq_len: int) -> float:
        matmul = sum(
            p.numel() for n, p in self.named_parameters() if p.dim() == 2 and not n.startswith("pos")
        )
        d, layers = self.tok.weight.shape[1], len(self.blocks)
        return float(6 * matmul + 6 * layers * seq_len * d)


def like(model_cfg, features: tuple[str, ...] = ()) -> ReferenceGPT:
    """The reference of the same vocabulary, width, depth and heads as a `ModelConfig`, with
    `features` of its architecture (and then its d_ff, rotary base and norm eps)."""
    return ReferenceGPT(
        model_cfg.vocab_size, model_cfg.d_model, model_cfg.n_layers, model_cfg.n_heads, model_cfg.max_seq_len,
        d_ff=model_cfg.d_ff, features=features, rope_base=model_cfg.rope_base, eps=model_cfg.norm_eps,
    )  # fmt: skip
