"""Rotate-half rotary started from the adjacent-pairs model's permuted Q/K rows
(docs/bench/rotary_layout.md).

For a tree with the adjacent-pairs rotary (56732e3 and later): `Rotary` takes the rotate-half
form again (pairs (i, i + hd/2)), and after the backbone init each head's Q and K rows (and
qk-norm weights) are put in rotate-half order, so the model computes the same function as the
adjacent-pairs model of the same seed, and the RNG draws (init, data order) are the same. The
two runs of a seed then differ only by float rounding; `bench.training_equivalence` measures
how far that carries.
"""

import torch

from arch import layers, model


def to_rotate_half(weight: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Rows of an adjacent-pairs Q (or K) weight, head by head, in rotate-half order: row
    `interleave[j]` of a head takes the adjacent-pairs row j (the inverse of the checkpoint fix)."""
    order = layers.interleave(head_dim)
    heads = weight.view(-1, head_dim, *weight.shape[1:])
    out = torch.empty_like(heads)
    out[:, order] = heads
    return out.reshape(weight.shape)


def _rotary_init(self, head_dim: int, max_seq_len: int, base: float):
    torch.nn.Module.__init__(self)
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)  # angle i on dims i and i + hd/2
    self.register_buffer("cos", angles.cos().float(), persistent=False)
    sign = torch.cat([-torch.ones(head_dim // 2), torch.ones(head_dim // 2)]).double()
    self.register_buffer("signed_sin", (angles.sin() * sign).float(), persistent=False)


def _rotary_forward(self, x: torch.Tensor) -> torch.Tensor:
    # the rotate-half formula of the parent of 56732e3: [-x2, x1] = roll(x, hd/2) * sign
    t = x.shape[-2]
    cos, sin = self.cos[:t].to(x.dtype), self.signed_sin[:t].to(x.dtype)
    return x * cos + x.roll(x.shape[-1] // 2, dims=-1) * sin


def permute_qk_(transformer: torch.nn.Module) -> None:
    """Each attention's Q and K rows (and qk-norm weights) into rotate-half order, in place."""
    with torch.no_grad():
        for block in transformer.blocks:
            attn = block.attn
            q, k, _ = attn.qkv_weights()
            for w in (q, k):
                w.copy_(to_rotate_half(w.clone(), attn.hd))
            for norm in (attn.q_norm, attn.k_norm):
                if isinstance(norm, layers.RMSNorm):
                    norm.weight.copy_(to_rotate_half(norm.weight.clone(), attn.hd))


def apply(set_attribute=setattr) -> None:
    """Patches the classes (`set_attribute`: a test passes pytest's monkeypatch.setattr)."""
    set_attribute(layers.Rotary, "__init__", _rotary_init)
    set_attribute(layers.Rotary, "forward", _rotary_forward)
    init = model.Transformer._init_backbone

    def init_then_permute(self):
        init(self)
        permute_qk_(self)

    set_attribute(model.Transformer, "_init_backbone", init_then_permute)


if __name__ == "__patch__":
    apply()
