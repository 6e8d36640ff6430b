"""The adjacent-pairs rotary through its real-arithmetic path in fp32 too.

For a tree with the adjacent-pairs rotary (56732e3 and later): fp32 takes the formula the
other dtypes use (`x * cos + swapped * signed_sin`) instead of one complex multiply. Measured
bit-identical to the complex multiply on CPU (tests/bench/test_training_equivalence.py), so it
trains the same numbers: no control for rounding (`one_ulp_qk` is).
"""

import torch

from arch import layers


def _real_forward(self, x: torch.Tensor) -> torch.Tensor:
    t = x.shape[-2]
    swapped = x.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)  # (x1, x0, x3, x2, ...)
    return x * self.cos[:t].to(x.dtype) + swapped * self.signed_sin[:t].to(x.dtype)


def apply(set_attribute=setattr) -> None:
    set_attribute(layers.Rotary, "forward", _real_forward)


if __name__ == "__patch__":
    apply()
