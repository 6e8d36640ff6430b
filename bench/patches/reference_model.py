"""The plain reference GPT with the backbone's architecture in place of the backbone.

For `bench.training_equivalence --after-patch`: the trial's model becomes
`bench.reference.like(cfg.model, rmsnorm, rope, swiglu)` (the backbone's function written
plainly), trained by the same trainer, data and optimizer. Its norm weights go to the no-decay
group, as the backbone's RMSNorm weights do. It differs from the backbone by its init (all
matrices N(0, 0.02): no depth scaling of o_proj and down_proj) and its RNG draws, so seeds pair
by data order only. Run it in a tree that has `bench/reference.py` with features (47123d5 on).
The plain GPT has no qk-norm: on cpu_base's recipe (qk-norm since issue 41) add
`--set model.qk_norm=false`, or the two arms would not be the same function.
"""

import torch
from torch import nn

import trainers.module
from arch.config import ModelConfig
from bench import reference


class _NoDesign:
    """The residual-design face the trainer asks of a model: which parameters never decay."""

    def __init__(self, gpt: nn.Module):
        self.gpt = gpt

    def no_decay_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.gpt.parameters() if p.dim() == 1]  # the norm weights


class ReferenceBackbone(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg.qk_norm:
            raise ValueError(
                "reference_model: the plain GPT has no qk-norm; run with --set model.qk_norm=false"
            )
        self.cfg = cfg
        self.gpt = reference.like(cfg, reference.FEATURES)
        self.embed = self.gpt.tok  # the optimizer's `embeddings` group
        self.head = self.gpt.tok  # tied: the trainer's loss takes `head.weight` (trainers.loss)
        self.residual = _NoDesign(self.gpt)

    def forward(self, tokens: torch.Tensor, return_gates: bool = False):
        logits = self.gpt(tokens)
        return (logits, {}) if return_gates else logits

    def hidden(self, tokens: torch.Tensor, return_gates: bool = False, checkpoint_blocks: bool = False):
        if checkpoint_blocks:
            raise ValueError(
                "the reference model has no block recomputation (activation_checkpointing: none)"
            )
        h = self.gpt.hidden(tokens)
        return (h, {}) if return_gates else h

    def param_counts(self) -> dict[str, int]:
        total = sum(p.numel() for p in self.parameters())
        return {"total": total, "design": 0, "backbone": total}


def build_reference(config):
    cfg = config if isinstance(config, ModelConfig) else ModelConfig.from_dict(config)
    return ReferenceBackbone(cfg)


def apply(set_attribute=setattr) -> None:
    set_attribute(trainers.module, "build_model", build_reference)


if __name__ == "__patch__":
    apply()
