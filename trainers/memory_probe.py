"""What the memory plan (trainers.memory_fit) extrapolates: the exact tensor memory
(trainers.step_memory) of a trial's training step on this machine's CPU at a few small
micro-batches, with the trial's model, optimizer, precision, loss path and activation checkpointing.

`measure(cfg, precision, loss, blocks)` builds the model once (seed 0), takes one warm-up step (it
creates AdamW's state), then measures:
- `FIT_SIZES` (rows, sequence length in `seq0`s): one whole step (forward, loss, backward,
  clipping, AdamW) from zero gradients, with the live bytes after every allocation and free;
- `CHECK_SIZE`: the same, held out of the fit (how well the fit predicts a larger batch);
- the loss path alone (`measure_loss`, the trial's chunk): its peak over its inputs at positions
  doubling from 64 to the chunk (64 MiB of fp32 logits) and at twice the chunk. These small batches
  are a fraction of one chunk, so the step's own loss window cannot be extrapolated in tokens.
Precision bf16-true casts the model (weights, gradients, AdamW state); bf16-mixed runs the step in
CPU autocast (its op list is not CUDA's: docs/memory_plan.md).
"""

from __future__ import annotations

import dataclasses

import torch

from arch import build_model
from trainers.config import TrialConfig
from trainers.loss import chunk_positions, lm_loss
from trainers.optim import build_optimizer
from trainers.step_memory import OPTIMIZER_MARK, StepMemoryMeter, optimizer_state_tensors, tensor_bytes
from trainers.train_step import BACKWARD_STARTS_OF_BLOCKS, LOSS_STARTS, TrialStep

# (rows, x seq0). The fit varies the length at 2 rows, from 64 positions: the same kernels then make
# the same sequence of allocations once brief workspace spikes are folded (trainers.memory_fit.collapse;
# 1 row takes other paths, and CPU attention in bf16 changes its blocking at 32 positions), so each
# event can be followed from one size to the next.
FIT_SIZES = ((2, 2), (2, 3), (2, 4))
CHECK_SIZE = (4, 3)  # held out: another number of rows, more tokens (is it tokens that count?)
SEQ0 = 32  # the unit of the measuring lengths (at most a quarter of the model's max_seq_len)
WINDOWS = ("forward", "backward", "optimizer")


@dataclasses.dataclass(frozen=True)
class Sample:
    """One measured step at `rows` x `seq_len`: the live bytes after every allocation and free of
    each window (forward through the blocks; backward through the blocks; the optimizer step with
    clipping), the live bytes when the loss starts, the whole step's peak and what forward left
    alive for backward."""

    rows: int
    seq_len: int
    windows: dict[str, list[int]]
    loss_start: int
    peak: int
    activations: int

    @property
    def tokens(self) -> int:
        return self.rows * self.seq_len


@dataclasses.dataclass(frozen=True)
class Measurements:
    """A design's samples and the exact sizes of its parameters, gradients and AdamW state;
    `loss_samples`: the loss path alone, {"positions/chunk": peak bytes over its inputs}; `chunk`:
    the chunked loss's positions a chunk in the trial (and in these measurements)."""

    params: int
    grads: int
    optimizer: int
    samples: list[Sample]
    loss_samples: dict[str, int]
    seq0: int
    chunk: int

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Measurements:
        return cls(**{**data, "samples": [Sample(**s) for s in data["samples"]]})


def param_dtype(precision: str):
    return torch.bfloat16 if precision == "bf16-true" else None


def autocast_dtype(precision: str):
    return torch.bfloat16 if precision == "bf16-mixed" else None


def seq0_for(cfg: TrialConfig, seq0: int = SEQ0) -> int:
    return max(1, min(seq0, cfg.model.max_seq_len // 4))


def measure(
    cfg: TrialConfig, precision: str, loss: str, blocks: bool, up_to: int, seq0: int = SEQ0, check=True
):
    """The samples of `cfg`'s step (see the module docstring); `loss`: plain or chunked; `up_to`:
    the most positions a micro-batch will be asked about (the loss alone is measured that far, or
    to two chunks)."""
    seq0 = seq0_for(cfg, seq0)
    torch.manual_seed(0)
    model = build_model(cfg.model).to(dtype=param_dtype(precision))
    optimizer = build_optimizer(model, cfg.train)
    vocab = cfg.model.vocab_size
    chunk = chunk_positions(cfg.model.vocab_size)
    step = _step(model, optimizer, loss, blocks, precision, cfg.train.grad_clip, chunk)
    step.run([_batch(vocab, 1, seq0)])  # warm-up: AdamW's state exists from here on
    sizes = [*FIT_SIZES, *([CHECK_SIZE] if check else [])]
    samples = [measured(step, _batch(vocab, rows, k * seq0)) for rows, k in sizes]
    params = list(model.parameters())
    sizes = (
        tensor_bytes(params),
        tensor_bytes([p for p in params if p.requires_grad]),  # a gradient is its parameter's size
        tensor_bytes(optimizer_state_tensors(optimizer)),
    )
    del model, optimizer, step, params
    losses = measure_loss(cfg, precision, loss, [(n, chunk) for n in loss_positions(chunk, up_to)])
    return Measurements(*sizes, samples=samples, loss_samples=losses, seq0=seq0, chunk=chunk)


def loss_positions(chunk: int, up_to: int, first: int = 64) -> list[int]:
    """64, 128, ... below the chunk, the chunk, twice the chunk; or doubling to `up_to` when that
    is less than the chunk."""
    out, n = [], first
    while n < chunk and n < 2 * up_to:
        out.append(n)
        n *= 2
    return [*out, chunk, 2 * chunk] if n >= chunk else out


def _batch(vocab: int, rows: int, seq_len: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, vocab, (rows, seq_len + 1), generator=g)


def _step(model, optimizer, loss, blocks, precision, grad_clip, chunk) -> TrialStep:
    """The trial's step (trainers.train_step) on one micro-batch, measured by `measured`."""
    return TrialStep(model, optimizer, [], loss, blocks, autocast_dtype(precision), grad_clip, chunk)


def measured(step: TrialStep, x) -> Sample:
    """The step at x's shape, measured on x's device (the allocator's peak on CUDA: no trace)."""
    meter = StepMemoryMeter(x.device, keep_trace=x.device.type == "cpu")
    meter.start(step.model, step.optimizer, x)
    step.run([x], meter)
    reading = meter.stop()
    rows, width = x.shape
    if not meter.trace:
        return Sample(rows, width - 1, {}, 0, reading.peak, reading.activations)
    trace, marks = meter.trace, meter.marks
    bounds = [marks[LOSS_STARTS], marks[BACKWARD_STARTS_OF_BLOCKS], marks[OPTIMIZER_MARK]]
    windows = {
        "forward": trace[: bounds[0]],
        "backward": trace[bounds[1] : bounds[2]],
        "optimizer": trace[bounds[2] :],
    }
    loss_start = trace[bounds[0] - 1] if bounds[0] else meter.static
    return Sample(rows, width - 1, windows, loss_start, reading.peak, reading.activations)


def measure_loss(cfg: TrialConfig, precision: str, loss: str, sizes) -> dict[str, int]:
    """Peak bytes the loss path alone adds over its inputs (h [N, D], the head's weight, the
    targets) in one forward and backward, at each (positions N, chunk): {"N/chunk": bytes}."""
    dtype = param_dtype(precision) or torch.float32
    auto = autocast_dtype(precision)
    d, vocab = cfg.model.d_model, cfg.model.vocab_size
    torch.manual_seed(0)
    head = torch.nn.Linear(d, vocab, bias=False).to(dtype=dtype)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.0)  # holds no state
    out = {}
    for n, chunk in sizes:
        h = torch.randn(1, n, d, dtype=dtype, requires_grad=True)
        targets = torch.randint(0, vocab, (1, n))
        meter = StepMemoryMeter("cpu")
        meter.start(head, optimizer, [h, targets])
        with torch.autocast("cpu", dtype=auto, enabled=auto is not None):
            value = lm_loss(loss, h, head.weight, targets, chunk=chunk)
        meter.backward_starts()
        value.backward()
        reading = meter.stop()
        out[f"{n}/{chunk}"] = reading.peak - meter.static
        head.weight.grad = None
    return out


def measure_at(
    cfg: TrialConfig, precision: str, loss: str, blocks: bool, rows: int, seq_len: int, device="cpu"
):
    """One step measured at `rows` x `seq_len` on `device` (after a warm-up step), with the trial's
    chunk: what the plan predicts, measured (tests, docs/memory_plan.md, bench.gpu_check on CUDA)."""
    torch.manual_seed(0)
    model = build_model(cfg.model).to(device, dtype=param_dtype(precision))
    optimizer = build_optimizer(model, cfg.train)
    chunk = chunk_positions(cfg.model.vocab_size)
    step = _step(model, optimizer, loss, blocks, precision, cfg.train.grad_clip, chunk)
    step.run([_batch(cfg.model.vocab_size, 2, min(seq_len, 2 * SEQ0)).to(device)])
    return measured(step, _batch(cfg.model.vocab_size, rows, seq_len).to(device))
