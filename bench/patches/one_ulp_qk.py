"""Every Q and K weight one or two float steps larger at init: a control for the rotary layout
experiment (docs/bench/rotary_layout.md).

Same layout, same kernels, same data; the weights differ from the unpatched run's by rounding
size (`w * (1 + 2^-23)` moves every fp32 value outward by one or two ulps). The runs then differ by float
rounding carried through training, the size of effect any kernel change (a new summation
order, a fused optimizer, a permuted layout) can have. (`rotary_real_path` is no such control:
its fp32 result is bit-identical to the complex multiply.)
"""

import torch

from arch import layers, model


def nudge_qk_(transformer: torch.nn.Module) -> None:
    with torch.no_grad():
        for block in transformer.blocks:
            q, k, _ = block.attn.qkv_weights()
            for w in (q, k):
                w.mul_(1 + 2.0**-23)
            for norm in (block.attn.q_norm, block.attn.k_norm):
                if isinstance(norm, layers.RMSNorm):
                    norm.weight.mul_(1 + 2.0**-23)


def apply(set_attribute=setattr) -> None:
    init = model.Transformer._init_backbone

    def init_then_nudge(self):
        init(self)
        nudge_qk_(self)

    set_attribute(model.Transformer, "_init_backbone", init_then_nudge)


if __name__ == "__patch__":
    apply()
