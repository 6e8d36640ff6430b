"""`synthetic_step`: a model's training step on a fixed batch (the trainer's optimizer groups), what
bench/ and the sweep's cost probe time (`trainers.timing`) and measure (`trainers.step_memory`)."""

from __future__ import annotations

import dataclasses

import torch

from arch import build_model
from trainers.config import TrainConfig
from trainers.optim import build_optimizer


@dataclasses.dataclass
class SyntheticStep:
    """A model, its optimizer (the trainer's parameter groups), one fixed random batch and the
    training step on it: what bench/ and the sweep's cost probe time."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    tokens: torch.Tensor  # [B, T + 1]
    forward: torch.nn.Module
    step: object  # () -> None


def synthetic_step(
    model_cfg,
    batch: int,
    seq_len: int,
    device,
    autocast_dtype=None,
    compile: bool = False,
    mark=None,
    param_dtype=None,
) -> SyntheticStep:
    """Builds `model_cfg` (a ModelConfig or its mapping) on `device` with seed 0 and a seed-0 batch;
    `param_dtype` (e.g. bf16 for precision bf16-true) casts the model, so its optimizer state too."""
    torch.manual_seed(0)
    model = build_model(model_cfg).to(device, dtype=param_dtype)
    opt = build_optimizer(model, TrainConfig())
    return synthetic_step_of(
        model, opt, model.cfg.vocab_size, batch, seq_len, device, autocast_dtype, compile, mark
    )


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
) -> SyntheticStep:
    """The fixed-batch training step of a built model and optimizer (a seed-0 batch of `vocab`)."""
    forward = torch.compile(model) if compile else model
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, vocab, (batch, seq_len + 1), generator=g).to(device)
    step = train_step_fn(model, opt, x[:, :-1], x[:, 1:], autocast_dtype, forward, mark)
    return SyntheticStep(model, opt, x, forward, step)


def train_step_fn(model, optimizer, inputs, targets, autocast_dtype=None, forward=None, mark=None):
    """One training step on a fixed batch (forward, loss, backward, optimizer step, zero grads)."""
    forward = model if forward is None else forward  # not `or`: a compiled module has no truth value
    device_type = inputs.device.type

    def step():
        with torch.autocast(device_type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            logits = forward(inputs)
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        if mark is not None:
            mark()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step
