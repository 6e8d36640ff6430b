"""A trial's training step, in one place.

`step_loss` is the loss of one micro-batch as the LightningModule computes it (forward to the final
norm, blocks recomputed in backward with activation checkpointing, the loss along `train.loss`'s
path: trainers.loss); `LanguageModel.training_step` calls it. `TrialStep` is the whole optimizer
step on fixed micro-batches as Lightning runs it for a trial: `grad_accum` micro-batches, each loss
divided by their count (Lightning's automatic optimization), backward, the global-norm clipping of
`LanguageModel.configure_gradient_clipping`, AdamW with the trainer's groups (trainers.optim),
gradients set to None. What times and measures a step outside Lightning uses it: the cost probe
(sweeps.run.probe), the memory plan (trainers.memory_probe), bench/.
"""

from __future__ import annotations

import contextlib

import torch

from trainers.loss import lm_loss

BACKWARD_STARTS_OF_BLOCKS = "satsweep.blocks_backward_starts"  # the gradient of h is made
LOSS_STARTS = "satsweep.loss_starts"


def step_loss(hidden, head_weight, inputs, targets, loss_kind: str, checkpoint_blocks: bool,
              return_gates: bool = False, chunk: int | None = None, meter=None):  # fmt: skip
    """(mean loss of the micro-batch, the gates when `return_gates`). `hidden`: the model's forward
    to the final norm (compiled or not); `meter`: a trainers.step_memory meter whose marks bracket
    the loss (the memory plan's windows)."""
    if return_gates:
        h, gates = hidden(inputs, return_gates=True, checkpoint_blocks=checkpoint_blocks)
    else:
        h, gates = hidden(inputs, checkpoint_blocks=checkpoint_blocks), None
    if meter is not None:
        h.register_hook(lambda grad: meter.mark(BACKWARD_STARTS_OF_BLOCKS))
        meter.mark(LOSS_STARTS)
    return lm_loss(loss_kind, h, head_weight, targets, chunk=chunk), gates


class TrialStep:
    """One optimizer step of a trial on fixed micro-batches (see the module docstring); calling it
    runs the step. `batches`: [rows, T + 1] token tensors, one per micro-batch (inputs and shifted
    targets); `autocast`: bf16-mixed's dtype (None: none); `hidden`: the forward to use (default the
    model's; a compiled one for `train.compile`); `meter`: what `run` marks when called."""

    def __init__(
        self,
        model,
        optimizer,
        batches,
        loss: str,
        blocks: bool,
        autocast=None,
        grad_clip: float | None = None,
        chunk: int | None = None,
        hidden=None,
        meter=None,
    ):
        self.model, self.optimizer, self.batches = model, optimizer, list(batches)
        self.loss, self.blocks, self.autocast = loss, blocks, autocast
        self.grad_clip, self.chunk, self.meter = grad_clip, chunk, meter
        self.hidden = hidden if hidden is not None else model.hidden

    def __call__(self) -> None:
        self.run(self.batches, self.meter)

    def run(self, batches, meter=None) -> None:
        """The step on `batches`; `meter` (trainers.step_memory): marks where backward and the
        optimizer start (the first micro-batch's backward)."""
        for i, x in enumerate(batches):
            device = x.device.type
            context = (
                torch.autocast(device, dtype=self.autocast)
                if self.autocast is not None
                else contextlib.nullcontext()
            )
            with context:
                marks = meter if i == 0 else None
                weight = self.model.head.weight
                loss, _ = step_loss(
                    self.hidden,
                    weight,
                    x[:, :-1],
                    x[:, 1:],
                    self.loss,
                    self.blocks,
                    chunk=self.chunk,
                    meter=marks,
                )
            if len(batches) > 1:
                loss = loss / len(batches)
            if meter is not None and i == 0:
                meter.backward_starts()
            loss.backward()
        if meter is not None:
            meter.optimizer_starts()
        if self.grad_clip:
            params = [p for group in self.optimizer.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(params, self.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def fixed_batches(vocab: int, rows: int, seq_len: int, micro_batches: int = 1, device="cpu") -> list:
    """`micro_batches` seed-0 random token batches [rows, seq_len + 1] on `device`."""
    g = torch.Generator().manual_seed(0)
    shape = (rows, seq_len + 1)
    return [torch.randint(0, vocab, shape, generator=g).to(device) for _ in range(micro_batches)]
