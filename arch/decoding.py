"""Incremental decoding: a key/value cache and the positions and mask of the tokens it is fed.

What a step needs from earlier positions is only what attention reads across positions: each
layer's K (after qk-norm and rotary) and V (after the residual design's mix, on KV heads, before
any GQA repeat). Every design in `arch.designs` mixes within a position: SATFormer's
V'_t = V_t + a_t V1_t and ResFormer's V'_t = l_tap V1_t + l_self V_t read the tap's V1 of the
same token t, and the dense designs (DenseFormer's depth average, MUDDFormer's dynamic streams,
Hyper-Connections' n streams) mix the outputs of earlier layers at the same token. So the cache
holds K and the mixed V' of every layer, and a design's per-forward `State` covers the new tokens
only (the tap's V1 of cached positions is never read again, and is not kept). The design harness
(tests/arch/test_decoding.py) checks this for every registered design: prefill and then one
token at a time equal the full forward; a design that mixed across positions would fail it.

Slots and positions. The cache has `capacity` slots per row; a forward over t new tokens writes
slots [length, length + t). Rows are left-padded: `valid[b, s]` says slot s of row b holds a
real token. The rotary position of a real token is the number of real tokens before it in its
row, so a left-padded row gets positions 0, 1, ... from its first real token, exactly as when it
is run alone:

    position[b, s] = (sum_{s' <= s} valid[b, s']) - 1        (clamped at 0 for padding)

Attention of new slot q over cached and new slots k (queries [B, H, t, hd], keys [B, N_kv, L, hd]):

    allowed[b, q, k] = (k <= q and valid[b, k]) or k == q

A padding query attends to itself only (its output is never read; a row of a softmax with every
key masked would be NaN).
"""

from __future__ import annotations

import torch


class KVCache:
    """K and V' of every layer for `capacity` slots of `batch` rows, allocated on first write with
    the dtype and device of what is written: keys[i], values[i] are [B, N_kv, capacity, hd]."""

    def __init__(self, n_layers: int, batch: int, capacity: int, max_positions: int):
        if capacity < 1 or batch < 1:
            raise ValueError(f"KVCache needs batch >= 1 and capacity >= 1; given {batch}, {capacity}")
        self.batch, self.capacity, self.length = batch, capacity, 0
        self.max_positions = max_positions  # the model's max_seq_len: real tokens a row may hold
        self.keys: list[torch.Tensor | None] = [None] * n_layers
        self.values: list[torch.Tensor | None] = [None] * n_layers
        self.valid = torch.zeros(batch, capacity, dtype=torch.bool)
        self.seen = torch.zeros(batch, dtype=torch.long)  # real tokens so far per row

    def step(self, attention_mask: torch.Tensor | None, t: int, device) -> DecodeStep:
        """Reserves slots for t new tokens (attention_mask [B, t], 1 for real tokens; None: all
        real) and returns their positions and attention mask."""
        if self.length + t > self.capacity:
            raise ValueError(f"KVCache holds {self.capacity} slots; {self.length} used, {t} more asked")
        new_valid = (
            torch.ones(self.batch, t, dtype=torch.bool)
            if attention_mask is None
            else attention_mask.to(device="cpu", dtype=torch.bool)
        )
        if new_valid.shape != (self.batch, t):
            raise ValueError(f"attention_mask is {tuple(new_valid.shape)}; expected ({self.batch}, {t})")
        longest = int((self.seen + new_valid.sum(1)).max())
        if longest > self.max_positions:
            raise ValueError(f"sequence length {longest} exceeds max_seq_len {self.max_positions}")
        start, end = self.length, self.length + t
        self.valid[:, start:end] = new_valid
        positions = (self.seen[:, None] + new_valid.cumsum(1) - 1).clamp_(min=0)  # [B, t]
        self.seen += new_valid.sum(1)
        q = torch.arange(start, end)[:, None]  # [t, 1] query slots
        k = torch.arange(end)[None, :]  # [1, L] key slots
        allowed = ((k <= q) & self.valid[:, None, :end]) | (k == q)  # [B, t, L]
        self.length = end
        return DecodeStep(self, start, positions.to(device), allowed[:, None].to(device))


class DecodeStep:
    """One forward's view of the cache: the new tokens' rotary `positions` [B, t], the attention
    mask `allowed` [B, 1, t, L] (True: attend) and the slots [start, start + t) they fill."""

    def __init__(self, cache: KVCache, start: int, positions: torch.Tensor, allowed: torch.Tensor):
        self.cache, self.start, self.positions, self.allowed = cache, start, positions, allowed

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Writes this step's k, v [B, N_kv, t, hd] of `layer`; returns the layer's K, V of every
        slot so far, [B, N_kv, L, hd] with L = start + t."""
        cache = self.cache
        if cache.keys[layer] is None:
            shape = (k.shape[0], k.shape[1], cache.capacity, k.shape[-1])
            cache.keys[layer] = k.new_zeros(shape)
            cache.values[layer] = v.new_zeros(shape)
        end = self.start + k.shape[2]
        cache.keys[layer][:, :, self.start : end] = k
        cache.values[layer][:, :, self.start : end] = v
        return cache.keys[layer][:, :, :end], cache.values[layer][:, :, :end]
