"""fla.modules in plain torch: RMSNorm (with fla's fused residual add), RotaryEmbedding
(rotate-half), GatedMLP (SwiGLU); the fused losses are never called (no labels)."""

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, hidden_size, elementwise_affine=True, bias=False, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.hidden_size, self.eps = hidden_size, eps
        self.weight = (
            nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype)) if elementwise_affine else None
        )
        self.bias = nn.Parameter(torch.zeros(hidden_size, device=device, dtype=dtype)) if bias else None

    def reset_parameters(self):
        if self.weight is not None:
            nn.init.ones_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x, residual=None, prenorm=False, residual_in_fp32=False):
        if residual is not None:
            x = x + residual
        y = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        if self.weight is not None:
            y = y * self.weight.float()
        if self.bias is not None:
            y = y + self.bias.float()
        y = y.to(x.dtype)
        return (y, x) if prenorm else y


class RotaryEmbedding(nn.Module):
    """Rotate-half rotary (fla's default, interleaved=False) on [B, T, H, D]."""

    def __init__(
        self, dim, base=10000.0, scale_base=None, interleaved=False, pos_idx_in_fp32=True, device=None
    ):
        super().__init__()
        assert not interleaved and scale_base is None
        self.dim, self.base = dim, float(base)

    def forward(self, q, k, seqlen_offset=0, max_seqlen=None, cu_seqlens=None, **kwargs):
        assert cu_seqlens is None and isinstance(seqlen_offset, int)
        t = q.shape[1]
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, dtype=torch.float32) / self.dim))
        freqs = torch.outer(torch.arange(seqlen_offset, seqlen_offset + t, dtype=torch.float32), inv_freq)
        cos, sin = (f.repeat(1, 2)[None, :, None, :] for f in (freqs.cos(), freqs.sin()))

        def rotate(x):
            x1, x2 = x.float().chunk(2, dim=-1)
            return (x.float() * cos + torch.cat([-x2, x1], dim=-1) * sin).to(x.dtype)

        return rotate(q), rotate(k)


class GatedMLP(nn.Module):
    def __init__(
        self,
        hidden_size,
        hidden_ratio=None,
        intermediate_size=None,
        hidden_act="swish",
        fuse_swiglu=True,
        powglu_power=3.0,
    ):
        super().__init__()
        assert hidden_act == "swish"
        if hidden_ratio is None:
            hidden_ratio = 4
        if intermediate_size is None:
            intermediate_size = int(hidden_size * hidden_ratio * 2 / 3)
            intermediate_size = 256 * ((intermediate_size + 256 - 1) // 256)
        self.intermediate_size = intermediate_size
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x, **kwargs):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class FusedCrossEntropyLoss(nn.CrossEntropyLoss):
    def __init__(self, inplace_backward=False, **kwargs):
        super().__init__()


class FusedLinearCrossEntropyLoss(nn.Module):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("the CPU shim has no fused linear cross entropy")
