"""`synthetic_step`: a trial's training step (trainers.train_step.TrialStep: its loss path,
activation checkpointing, grad_accum micro-batches, clipping and AdamW groups, from a TrainConfig)
on fixed seed-0 batches, what bench/ and the sweep's cost probe time (`trainers.timing`) and
measure (`trainers.step_memory`)."""

from __future__ import annotations

import dataclasses

import torch

from arch import build_model
from trainers.config import TrainConfig
from trainers.loss import resolve_loss
from trainers.optim import build_optimizer
from trainers.train_step import TrialStep, fixed_batches


@dataclasses.dataclass
class SyntheticStep:
    """A model, its optimizer (the trainer's parameter groups), fixed random micro-batches and the
    training step on them: what bench/ and the sweep's cost probe time."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    tokens: torch.Tensor  # the first micro-batch, [B, T + 1]
    forward: torch.nn.Module  # the whole model (compiled with `compile`), for inference
    step: TrialStep


def synthetic_step(
    model_cfg,
    batch: int,
    seq_len: int,
    device,
    autocast_dtype=None,
    compile: bool = False,
    mark=None,
    param_dtype=None,
    train: TrainConfig | None = None,
) -> SyntheticStep:
    """Builds `model_cfg` (a ModelConfig or its mapping) on `device` with seed 0 and seed-0 batches;
    `param_dtype` (e.g. bf16 for precision bf16-true) casts the model, so its optimizer state too;
    `train`: the trial's optimizer groups, loss path, checkpointing, grad_accum and clipping
    (default: TrainConfig's); `batch` is one micro-batch's rows."""
    torch.manual_seed(0)
    model = build_model(model_cfg).to(device, dtype=param_dtype)
    train = train or TrainConfig()
    opt = build_optimizer(model, train)
    return synthetic_step_of(
        model, opt, model.cfg.vocab_size, batch, seq_len, device, autocast_dtype, compile, mark, train
    )


class _BackwardMark:
    """The meter interface of TrialStep.run for a caller that only marks where backward starts."""

    def __init__(self, backward_starts):
        self.backward_starts = backward_starts

    def mark(self, name: str) -> None:
        pass

    def optimizer_starts(self) -> None:
        pass


def synthetic_step_of(
    model,
    opt,
    vocab: int,
    batch: int,
    seq_len: int,
    device,
    autocast_dtype=None,
    compile: bool = False,
    mark=None,
    train: TrainConfig | None = None,
) -> SyntheticStep:
    """The fixed-batch training step of a built model and optimizer (seed-0 batches of `vocab`);
    `mark`: called where backward starts."""
    train = train or TrainConfig()
    forward = torch.compile(model) if compile else model
    hidden = torch.compile(model.hidden) if compile else model.hidden
    batches = fixed_batches(vocab, batch, seq_len, train.grad_accum, device)
    loss = resolve_loss(train.loss, torch.device(device), batch, seq_len, vocab)
    blocks = train.activation_checkpointing == "blocks"
    marks = None if mark is None else _BackwardMark(mark)
    clip = train.grad_clip
    step = TrialStep(model, opt, batches, loss, blocks, autocast_dtype, clip, hidden=hidden, meter=marks)
    return SyntheticStep(model, opt, batches[0], forward, step)
