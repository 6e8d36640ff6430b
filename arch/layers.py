"""Backbone layers of the pre-norm decoder: RMSNorm, rotary embedding, GQA attention, SwiGLU."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x^2) + eps) * weight over the last dim (weight None: no scale); every
    RMSNorm of the model and its designs goes through here, so a design's neutral point stays
    bit-identical to the baseline.

    On CPU in fp32 eager, `_RMSNormCPU`: F.rms_norm is a chain of elementwise kernels there, and
    one fused reduction forward with a written-out backward is less than half its time and keeps
    less for backward (figures: docs/bench/backbone.md). Elsewhere F.rms_norm (a fused kernel on
    CUDA; what inductor fuses when compiled)."""
    if x.device.type == "cpu" and x.dtype == torch.float32 and not torch.compiler.is_compiling():
        return _RMSNormCPU.apply(x, weight, eps)
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


class _RMSNormCPU(torch.autograd.Function):
    """RMSNorm with its backward written out: one fused reduction forward, and it keeps x and
    the [.., 1] rstd for backward (the composite keeps x and x * rstd)."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        rstd = (
            torch.linalg.vector_norm(x, dim=-1, keepdim=True).square_().div_(x.shape[-1]).add_(eps).rsqrt_()
        )
        ctx.save_for_backward(x, rstd, weight)
        y = x * rstd
        return y if weight is None else y.mul_(weight)

    @staticmethod
    def backward(ctx, grad):
        x, rstd, weight = ctx.saved_tensors
        d = x.shape[-1]
        x_hat = x * rstd
        gx = grad * x_hat  # shared by both gradients
        # dx = rstd * (g - x_hat * mean(g * x_hat)), g = grad * weight; mean(g * x_hat) = gx @ weight / d
        if weight is None:
            dot, g = gx.sum(-1, keepdim=True), grad.clone()
        else:
            dot, g = (gx @ weight).unsqueeze_(-1), grad * weight
        grad_x = g.addcmul_(x_hat, dot.div_(d), value=-1).mul_(rstd)
        grad_weight = gx.reshape(-1, d).sum(0) if weight is not None and ctx.needs_input_grad[1] else None
        return grad_x, grad_weight, None


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


class Rotary(nn.Module):
    """Rotary position embedding over the head dimension, pairs of adjacent dims (2i, 2i + 1)
    rotated by angle t * base^(-2i / hd): one complex multiply in fp32, and the same rotation
    written in reals for other dtypes (complex bf16 does not exist). The rotate-half form pairs
    (i, i + hd / 2) instead: the same model up to a fixed permutation of each head's Q and K dims
    (`INTERLEAVE`, applied to checkpoints written before this layout)."""

    def __init__(self, head_dim: int, max_seq_len: int, base: float):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), inv_freq)  # [T, hd/2]
        self.register_buffer("cis", torch.polar(torch.ones_like(angles), angles).to(torch.complex64),
                             persistent=False)  # fmt: skip
        pairs = angles.repeat_interleave(2, dim=-1)  # [T, hd]: each angle on its two dims
        sign = torch.tensor([-1.0, 1.0], dtype=torch.float64).repeat(head_dim // 2)
        self.register_buffer("cos", pairs.cos().float(), persistent=False)
        self.register_buffer("signed_sin", (pairs.sin() * sign).float(), persistent=False)

    def _apply(self, fn, recurse=True):
        # Moves follow the model, dtype casts do not (precision bf16-true casts the model): a
        # complex cis cast to a real dtype would lose its imaginary part for good, and forward casts
        # the tables to x's dtype anyway. A probe tensor tells where `fn` sends things.
        device = fn(torch.empty(0, device=self.cos.device)).device
        for name, buf in self._buffers.items():
            self._buffers[name] = buf.to(device)
        return self

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """x: [B, H, T, hd]; positions: [B, T] per row (incremental decoding, left padding), or
        None for 0..T-1 in every row."""
        t = x.shape[-2]
        if positions is None:
            cis, cos, signed_sin = self.cis[:t], self.cos[:t], self.signed_sin[:t]  # [T, hd/2 or hd]
        else:  # [B, T, ...] -> [B, 1, T, ...]: one table row per token, broadcast over heads
            cis, cos, signed_sin = (
                table[positions].unsqueeze(1) for table in (self.cis, self.cos, self.signed_sin)
            )
        if x.dtype == torch.float32:
            z = torch.view_as_complex(x.unflatten(-1, (-1, 2)))
            return torch.view_as_real(z * cis).flatten(-2)
        swapped = x.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)  # (x1, x0, x3, x2, ...)
        return x * cos.to(x.dtype) + swapped * signed_sin.to(x.dtype)


def interleave(head_dim: int) -> torch.Tensor:
    """New dim order of a head: dims (i, i + hd/2) of the rotate-half layout become (2i, 2i + 1)."""
    half = head_dim // 2
    return torch.stack([torch.arange(half), torch.arange(half) + half], dim=-1).flatten()


def fuse_old_weights(state_dict: dict, prefix: str, parts: tuple[str, ...], fused: str, fix=None) -> None:
    """Checkpoints from before the fused projections: `parts` weights (each through `fix`, which
    maps a part's name and weight to its current form) stacked into `fused`."""
    names = [f"{prefix}{part}.weight" for part in parts]
    if all(n in state_dict for n in names):
        weights = [state_dict.pop(n) for n in names]
        if fix is not None:
            weights = [fix(part, w) for part, w in zip(parts, weights, strict=True)]
        state_dict[f"{prefix}{fused}.weight"] = torch.cat(weights)


class _LinearWithRows(torch.autograd.Function):
    """x @ [W; R]^T in one GEMM, without keeping the stacked weight for backward: F.linear on
    torch.cat([W, R]) saves that copy, one per gated layer (figures: docs/bench/backbone.md);
    backward stacks it again for its one GEMM. Autocast: backward runs under forward's."""

    @staticmethod
    def forward(ctx, x, weight, rows):
        ctx.autocast = (x.device.type, torch.is_autocast_enabled(x.device.type),
                        torch.get_autocast_dtype(x.device.type))  # fmt: skip
        ctx.save_for_backward(x, weight, rows)
        return F.linear(x, torch.cat([weight, rows]))

    @staticmethod
    def backward(ctx, grad):
        x, weight, rows = ctx.saved_tensors
        device, enabled, dtype = ctx.autocast
        with torch.autocast(device, dtype=dtype, enabled=enabled):
            stacked = torch.cat([weight, rows])
            grad_x = grad @ stacked if ctx.needs_input_grad[0] else None
            grad_stacked = grad.flatten(0, -2).t() @ x.flatten(0, -2)
        grad_weight, grad_rows = grad_stacked.split([weight.shape[0], rows.shape[0]])
        return grad_x, grad_weight, grad_rows


class Attention(nn.Module):
    """Causal grouped-query attention; the residual design may rewrite V before the kernel.

    W_Q, W_K, W_V are the row blocks of one `qkv_proj` weight: one GEMM when one stream feeds
    Q, K and V (most designs), three on the row blocks when a design feeds separate streams."""

    def __init__(self, cfg):
        super().__init__()
        self.n_heads, self.n_kv, self.hd = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.widths = (self.n_heads * self.hd, self.n_kv * self.hd, self.n_kv * self.hd)  # Q, K, V rows
        self.qkv_proj = nn.Linear(cfg.d_model, sum(self.widths), bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.hd, cfg.d_model, bias=False)
        eps = cfg.norm_eps if cfg.qk_norm_eps is None else cfg.qk_norm_eps
        self.q_norm = RMSNorm(self.hd, eps) if cfg.qk_norm else nn.Identity()
        self.k_norm = RMSNorm(self.hd, eps) if cfg.qk_norm else nn.Identity()
        self._register_load_state_dict_pre_hook(self._load_separate_projections)

    def _load_separate_projections(self, state_dict, prefix, *_):
        """Checkpoints with q_proj, k_proj, v_proj also predate the interleaved rotary layout:
        each head's Q and K rows (and qk-norm weights) take the interleaved order."""
        if f"{prefix}q_proj.weight" not in state_dict:
            return
        order = interleave(self.hd)

        def fix(part, w):
            if part == "v_proj":
                return w
            return w.view(-1, self.hd, w.shape[-1])[:, order].reshape(w.shape)

        fuse_old_weights(state_dict, prefix, ("q_proj", "k_proj", "v_proj"), "qkv_proj", fix)
        for norm in ("q_norm", "k_norm"):
            if f"{prefix}{norm}.weight" in state_dict:
                state_dict[f"{prefix}{norm}.weight"] = state_dict[f"{prefix}{norm}.weight"][order]

    def qkv_weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.qkv_proj.weight.split(self.widths)

    def project(self, xq, xk, xv, extra: torch.Tensor | None = None):
        """Q, K, V and xv @ extra^T (None without `extra`, rows [k, d_model] a design asks for)."""
        if not (xq is xk and xk is xv):
            wq, wk, wv = self.qkv_weights()
            x_proj = None if extra is None else F.linear(xv, extra)
            return F.linear(xq, wq), F.linear(xk, wk), F.linear(xv, wv), x_proj
        # The design's rows ride along in the QKV GEMM when they keep its rows an even number of
        # floats apart (rotary views Q and K as complex pairs, which needs even strides); not when
        # compiled: inductor then saves the stacked weight for backward, more peak memory for no
        # gain (docs/bench/backbone.md).
        if extra is not None and extra.shape[0] % 2 == 0 and not torch.compiler.is_compiling():
            fused = _LinearWithRows.apply(xq, self.qkv_proj.weight, extra)
            q, k, v, x_proj = fused.split([*self.widths, extra.shape[0]], dim=-1)
        else:
            q, k, v = self.qkv_proj(xq).split(self.widths, dim=-1)
            x_proj = None if extra is None else F.linear(xv, extra)
        # V is saved for attention's backward: a view would keep all of Q K V alive (measured
        # +2 B T D floats a layer); its own copy keeps only V, as separate projections do
        return q, k, v.contiguous(), x_proj

    def forward(self, xq, xk, xv, rotary: Rotary, mix_values, extra=None, step=None, layer: int = 0):
        """mix_values(v, xv, xv @ extra^T) rewrites V before the kernel; `extra`: rows of the
        design's own projection of xv (`ResidualDesign.value_input_weight`). `step`: an
        `arch.decoding.DecodeStep` (incremental decoding): the new tokens' K and mixed V join
        layer `layer`'s cache, and the queries attend over every cached slot under its mask."""
        b, t, _ = xq.shape
        q, k, v, x_proj = self.project(xq, xk, xv, extra)
        q = self.q_norm(q.view(b, t, self.n_heads, self.hd))
        k = self.k_norm(k.view(b, t, self.n_kv, self.hd))
        v = v.view(b, t, self.n_kv, self.hd)  # raw V on KV heads
        v = mix_values(v, xv, x_proj)  # [B, T, N_kv, hd], before any GQA repeat
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))  # -> [B, H, T, hd]
        gqa = self.n_kv != self.n_heads
        if step is None:
            q, k = rotary(q), rotary(k)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        else:
            q, k = rotary(q, step.positions), rotary(k, step.positions)
            k, v = step.extend(layer, k, v)  # [B, N_kv, L, hd]: cached slots and these
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=step.allowed, enable_gqa=gqa)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, self.n_heads * self.hd))


class SwiGLU(nn.Module):
    """down(silu(x W_gate) * x W_up), W_gate and W_up the two row blocks of `gate_up_proj`."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.gate_up_proj = nn.Linear(d_model, 2 * d_ff, bias=False)
        self.down_proj = nn.Linear(d_ff, d_model, bias=False)
        self._register_load_state_dict_pre_hook(
            lambda sd, prefix, *_: fuse_old_weights(sd, prefix, ("gate_proj", "up_proj"), "gate_up_proj")
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)
