"""The language-model loss from the final norm's output: `train.loss: auto | plain | chunked | fused`.

- plain: logits = h W^T for the whole micro-batch [B, T, V], upcast to fp32, cross-entropy.
  Holds about three [B*T, V] fp32 tensors at its peak (the logits, the log-softmax kept for
  backward, the gradient of the logits).
- chunked: `CHUNK_LOGIT_BYTES` of fp32 logits at a time (`chunk_positions`): each chunk's logits
  are made, reduced to a loss and freed in forward, made again in backward for their gradient
  (`ChunkedCrossEntropy`). The whole [B*T, V] logits never exist, in any dtype; what remains is
  one chunk's logits, the gradient of h [B*T, D] and of W [V, D].
- fused: liger-kernel's fused linear cross-entropy (Triton: CUDA only; the optional extra
  `fused-loss`). Refused at load on a machine without CUDA (trainers.config). Not run on this
  project's CPU machines: `python -m bench.gpu_check` exercises it on a GPU.
- auto: fused on CUDA when liger-kernel is installed, else chunked when one micro-batch's fp32
  logits would exceed `AUTO_CHUNKED_ABOVE` bytes, else plain (`resolve_loss`).

Evaluation uses the same path (`eval_sums`): plain makes the whole logits, chunked and fused go
a chunk of positions at a time (no gradient, so nothing is recomputed). Targets equal to
IGNORE (-100: MQAR's non-answers) do not count; the loss is the mean over the others.
"""

from __future__ import annotations

import importlib.util

import torch
import torch.nn.functional as F

IGNORE = -100
LOSSES = ("auto", "plain", "chunked", "fused")
CHUNK_LOGIT_BYTES = 64 << 20  # fp32 logits of one chunk
AUTO_CHUNKED_ABOVE = 1 << 30  # auto: chunked past 1 GiB of one micro-batch's fp32 logits
FUSED_PACKAGE = "liger_kernel"


def fused_available() -> bool:
    return importlib.util.find_spec(FUSED_PACKAGE) is not None


def logits_bytes(rows: int, seq_len: int, vocab: int) -> int:
    """fp32 bytes of one micro-batch's logits."""
    return rows * seq_len * vocab * 4


def resolve_loss(kind: str, device: torch.device, rows: int, seq_len: int, vocab: int) -> str:
    """`auto` -> the path it means on `device` for micro-batches of `rows` x `seq_len`."""
    if kind != "auto":
        return kind
    if torch.device(device).type == "cuda" and fused_available():
        return "fused"
    return "chunked" if logits_bytes(rows, seq_len, vocab) > AUTO_CHUNKED_ABOVE else "plain"


def chunk_positions(vocab: int, chunk_bytes: int = CHUNK_LOGIT_BYTES) -> int:
    return max(1, chunk_bytes // (4 * vocab))


def _upcast(x: torch.Tensor) -> torch.Tensor:
    """At least fp32 (bf16 logits are upcast, fp64 ones kept)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def _compute_dtype(h: torch.Tensor) -> torch.dtype:
    """The dtype the head's matmul runs in: autocast's when it is on (as for nn.Linear), else h's."""
    device = h.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else h.dtype


class ChunkedCrossEntropy(torch.autograd.Function):
    """sum over valid positions of CE(h W^T, targets), a chunk of positions at a time; saves only
    h [N, D], W [V, D] and targets [N] for backward, where each chunk's logits are made again."""

    @staticmethod
    def forward(ctx, h, weight, targets, chunk: int, dtype: torch.dtype):
        total = torch.zeros((), dtype=torch.promote_types(dtype, torch.float32), device=h.device)
        with torch.autocast(h.device.type, enabled=False):
            w = weight.to(dtype)
            for start in range(0, h.shape[0], chunk):
                logits = _upcast(F.linear(h[start : start + chunk].to(dtype), w))  # [c, V]
                t = targets[start : start + chunk]
                total += F.cross_entropy(logits, t, ignore_index=IGNORE, reduction="sum")
        ctx.save_for_backward(h, weight, targets)
        ctx.chunk, ctx.dtype = chunk, dtype
        return total

    @staticmethod
    def backward(ctx, grad_total):
        h, weight, targets = ctx.saved_tensors
        chunk, dtype = ctx.chunk, ctx.dtype
        grad_h = torch.empty_like(h) if ctx.needs_input_grad[0] else None
        accumulate = torch.promote_types(weight.dtype, torch.float32)
        grad_w = torch.zeros_like(weight, dtype=accumulate) if ctx.needs_input_grad[1] else None
        with torch.autocast(h.device.type, enabled=False):
            w = weight.to(dtype)
            for start in range(0, h.shape[0], chunk):
                h_c = h[start : start + chunk].to(dtype)
                t = targets[start : start + chunk]
                # d(sum CE)/d logits = softmax - onehot on valid rows, 0 on ignored ones
                g = torch.softmax(_upcast(F.linear(h_c, w)), dim=-1)  # [c, V]
                valid = t != IGNORE
                g[torch.arange(len(t), device=t.device)[valid], t[valid]] -= 1.0
                g.mul_((valid.to(g.dtype) * grad_total).unsqueeze(1))
                g = g.to(dtype)
                if grad_h is not None:
                    grad_h[start : start + chunk] = g @ w
                if grad_w is not None:
                    grad_w += g.t() @ h_c
                del g
        if grad_w is not None:
            grad_w = grad_w.to(weight.dtype)
        return grad_h, grad_w, None, None, None


def _fused_sum(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """liger-kernel's fused linear cross-entropy, summed over valid positions (CUDA only; not run
    on the CPU machines this project is developed on: bench.gpu_check runs it)."""
    from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss  # optional, CUDA only

    fn = LigerFusedLinearCrossEntropyLoss(ignore_index=IGNORE, reduction="sum")
    dtype = _compute_dtype(h)
    return _upcast(fn(weight.to(dtype), h.to(dtype), targets))


def lm_loss(kind: str, h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk=None):
    """Mean cross-entropy over valid targets of the logits h W^T (h [B, T, D], targets [B, T])
    along path `kind` (plain, chunked or fused; resolve `auto` first)."""
    h, targets = h.flatten(0, 1), targets.flatten()
    if kind == "plain":
        return F.cross_entropy(_upcast(F.linear(h, weight)), targets, ignore_index=IGNORE)
    n = (targets != IGNORE).sum()
    if kind == "chunked":
        step = chunk or chunk_positions(weight.shape[0])
        total = ChunkedCrossEntropy.apply(h, weight, targets, step, _compute_dtype(h))
    elif kind == "fused":
        total = _fused_sum(h, weight, targets)
    else:
        raise ValueError(f"loss {kind!r}; allowed: plain, chunked, fused (resolve auto first)")
    return total / n


@torch.no_grad()
def eval_sums(kind: str, h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, chunk=None):
    """(summed loss, valid targets, right argmax predictions) as float64 tensors, for validation."""
    h, targets = h.flatten(0, 1), targets.flatten()
    step = h.shape[0] if kind == "plain" else chunk or chunk_positions(weight.shape[0])
    sums = torch.zeros(3, dtype=torch.float64, device=h.device)
    for start in range(0, h.shape[0], step):
        logits = F.linear(h[start : start + step], weight)
        t = targets[start : start + step]
        valid = t != IGNORE
        n = valid.sum()
        if kind == "plain":  # the mean times the count, as the loss of training is a mean
            loss = F.cross_entropy(_upcast(logits), t, ignore_index=IGNORE).double() * n.double()
        else:
            loss = F.cross_entropy(_upcast(logits), t, ignore_index=IGNORE, reduction="sum").double()
        right = ((logits.argmax(-1) == t) & valid).sum()
        sums += torch.stack([loss, n.double(), right.double()])
    return sums
