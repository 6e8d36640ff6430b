"""Each layer's attention heads in reverse order at init: a control for the rotary layout
experiment (docs/bench/rotary_layout.md).

Same layout and kernels, the same function of the same draws (Q, K and V rows and o_proj's
columns move together, head by head), only the order in which o_proj sums over heads, and its
gradients' reduction orders, change: float rounding at every step, as the permuted rotary layout
(`rotate_half_permuted`) changes the order Q.K sums over a head's dims. Multi-head attention
only (n_kv_heads = n_heads, as the tiny preset).
"""

import torch

from arch import model


def reverse_heads_(transformer: torch.nn.Module) -> None:
    with torch.no_grad():
        for block in transformer.blocks:
            attn = block.attn
            if attn.n_kv != attn.n_heads:
                raise ValueError("heads_reversed: n_kv_heads must equal n_heads")
            order = torch.arange(attn.n_heads).flip(0)
            for w in attn.qkv_weights():
                w.copy_(w.view(attn.n_heads, attn.hd, -1)[order].reshape(w.shape))
            o = attn.o_proj.weight
            o.copy_(o.view(o.shape[0], attn.n_heads, attn.hd)[:, order].reshape(o.shape))


def apply(set_attribute=setattr) -> None:
    init = model.Transformer._init_backbone

    def init_then_reverse(self):
        init(self)
        reverse_heads_(self)

    set_attribute(model.Transformer, "_init_backbone", init_then_reverse)


if __name__ == "__patch__":
    apply()
