"""What a training step costs, measured one way for the trainer's callbacks, the sweep's cost
probe and bench/.

- `flops_per_token(model, seq_len)`: training FLOPs per token (exact, from the parameter count);
- `StepMemoryMeter`: the exact peak of live tensor memory over one training step, one definition
  on CPU and CUDA: the tensors alive when the step starts (parameters, buffers, optimizer state,
  the batch) plus the largest running sum of what the step allocates and frees. CUDA reads the
  caching allocator's statistics (reset around the step); CPU sums the allocation and free events
  that torch's profiler records with `profile_memory=True`, in time order. Both are exact to the
  byte and do not depend on the seed; the breakdown is parameters, gradients, optimizer state and
  activations (what the forward pass leaves alive for backward, read when backward starts);
- `PeakMeter`: the process's resident set size (CPU) or the allocator peak (CUDA) of a region:
  informational (`rss_peak_mb`), never an objective, since libraries dominate it;
- `synthetic_step`: a model's training step on a fixed batch, what bench/ and the cost probe time
  (`trainers.timing`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import resource
import sys
import threading
from collections.abc import Iterable

import psutil
import torch

MIB = 1 << 20
MARK = "satsweep.backward_starts"  # the profiler annotation at the start of backward


def flops_per_token(model: torch.nn.Module, seq_len: int) -> float:
    """Training FLOPs per token (Kaplan et al. 2020, forward + backward = 3x forward):

        6 * N + 6 * n_layers * seq_len * d_model

    N counts the weights used in matrix multiplies: every parameter except an untied input
    embedding table (a lookup); with tied embeddings the shared table is the head's weight.
    The second term is the attention score and value products (QK^T and AV), without the
    causal-mask halving, as in Kaplan's table.
    """
    cfg = model.cfg
    n = sum(p.numel() for p in model.parameters())
    if not cfg.tie_embeddings:
        n -= model.embed.weight.numel()
    return float(6 * n + 6 * cfg.n_layers * seq_len * cfg.d_model)


class PeakMeter:
    """Peak memory of a code region in bytes: `with PeakMeter(device) as m: ...; m.peak`.

    CUDA: `torch.cuda.max_memory_allocated` (reset on entry). CPU: the resident set size of the
    process, sampled every `interval` seconds by a thread, combined with the kernel's high-water
    mark (`getrusage` maxrss) when that rose inside the region (it then is the exact peak).
    `start` is the memory in use on entry.
    """

    def __init__(self, device: torch.device, interval: float = 0.001):
        self.device, self.interval = torch.device(device), interval
        self.proc = psutil.Process()
        self.start = self.peak = self._sampled = 0
        self._halt: threading.Event | None = None

    @staticmethod
    def _maxrss() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB

    def _rss(self) -> int:
        return self.proc.memory_info().rss

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.start = torch.cuda.memory_allocated(self.device)
            return self
        self.start = self._sampled = self._rss()
        self._maxrss_start = self._maxrss()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="rss-sampler")
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._halt.is_set():
            self._sampled = max(self._sampled, self._rss())
            self._halt.wait(self.interval)

    def current_peak(self) -> int:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device)
        maxrss = self._maxrss()
        return max(self._sampled, self._rss(), maxrss if maxrss > self._maxrss_start else 0)

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elif self._halt is not None:
            self._halt.set()
            self._thread.join()
            self._halt = None
        self.peak = self.current_peak()


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes held by `tensors`, each storage counted once (tied weights, views)."""
    seen, total = set(), 0
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            continue
        storage = t.untyped_storage()
        key = (storage.data_ptr(), t.device)
        if key not in seen:
            seen.add(key)
            total += storage.nbytes()
    return total


def optimizer_state_tensors(optimizer) -> list[torch.Tensor]:
    return [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]


@dataclasses.dataclass(frozen=True)
class StepMemory:
    """Live tensor memory of one training step, in bytes."""

    peak: int
    params: int
    grads: int
    optimizer: int
    activations: int
    comm_buckets: int = 0  # data-parallel: DDP's flat gradient buckets (one more copy of the grads)

    def metrics(self) -> dict[str, float]:
        out = {
            "peak_mem_mb": self.peak / MIB,
            "mem_params_mb": self.params / MIB,
            "mem_grads_mb": self.grads / MIB,
            "mem_optimizer_mb": self.optimizer / MIB,
            "mem_activations_mb": self.activations / MIB,
        }
        if self.comm_buckets:
            out["mem_ddp_buckets_mb"] = self.comm_buckets / MIB
        return out


def ddp_bucket_bytes(wrapped) -> int:
    """Bytes of the gradient buckets a DistributedDataParallel module holds for all-reduce (0 for
    anything else): allocated once, before any measured step, so the CPU meter adds them."""
    if not isinstance(wrapped, torch.nn.parallel.DistributedDataParallel):
        return 0
    sizes = wrapped._get_ddp_logging_data().get("bucket_sizes", "")
    return sum(int(size) for size in str(sizes).replace(",", " ").split())


class StepMemoryMeter:
    """`start(model, optimizer, batch)`, the step (calling `backward_starts()` just before the first
    backward), then `stop() -> StepMemory`. See the module docstring for the definition."""

    def __init__(self, device):
        self.device = torch.device(device)
        self._profiler = None
        self._gc_was_enabled = False
        self.at_backward: int | None = None

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def start(self, model: torch.nn.Module, optimizer, batch=(), comm_buckets: int = 0) -> None:
        self.model, self.optimizer, self.comm_buckets = model, optimizer, comm_buckets
        batch_tensors = [batch] if isinstance(batch, torch.Tensor) else list(batch or ())
        params = list(model.parameters())
        grads = [p.grad for p in params if p.grad is not None]  # the last step's, freed by zero_grad
        self.static = comm_buckets + tensor_bytes(
            [*params, *grads, *model.buffers(), *optimizer_state_tensors(optimizer), *batch_tensors]
        )
        self.at_backward = None
        # Garbage of earlier work (a previous trial in this process) collected in the middle of
        # the step would free memory the step never allocated: collect it now, and not during.
        gc.collect()
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        if self.cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
            return
        from torch.profiler import ProfilerActivity, profile

        self._profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        with _quiet_native_stderr():
            self._profiler.start()

    def backward_starts(self) -> None:
        if self.at_backward is not None or (self._profiler is None and not self.cuda):
            return
        if self.cuda:
            torch.cuda.synchronize(self.device)
            self.at_backward = torch.cuda.memory_allocated(self.device) - self.base
            return
        self.at_backward = -1  # read from the profiler's events at the end
        with torch.profiler.record_function(MARK):
            pass

    def stop(self) -> StepMemory:
        self._restore_gc()
        params = list(self.model.parameters())
        trainable = [p for p in params if p.requires_grad]
        optimizer = tensor_bytes(optimizer_state_tensors(self.optimizer))
        if self.cuda:
            torch.cuda.synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
            activations = max(0, self.at_backward or 0)
        else:
            with _quiet_native_stderr():
                self._profiler.stop()
            rise, activations = _running_peak(self._profiler)
            self._profiler = None
            peak = self.static + rise
        return StepMemory(
            peak=peak,
            params=tensor_bytes(params),
            grads=tensor_bytes(trainable),  # a gradient is the size of its parameter
            optimizer=optimizer,
            activations=activations,
            comm_buckets=self.comm_buckets,
        )

    def abandon(self) -> None:
        """Stops measuring without a result (the step raised)."""
        if self._profiler is not None:
            with _quiet_native_stderr():
                self._profiler.stop()
            self._profiler = None
        self._restore_gc()

    def _restore_gc(self) -> None:
        if self._gc_was_enabled:
            gc.enable()
            self._gc_was_enabled = False


@contextlib.contextmanager
def _quiet_native_stderr():
    """Kineto prints a `profiler_start` / `profiler_stop` line to the process's stderr (fd 2) on
    every start and stop, with no switch to turn it off; silence fd 2 for just those calls."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _running_peak(prof) -> tuple[int, int]:
    """(largest running sum of allocations minus frees, the running sum at the backward mark)."""
    events = prof.profiler.kineto_results.events()
    marks = [e.start_ns() for e in events if e.name() == MARK]
    mark = marks[0] if marks else None
    running = peak = 0
    at_mark = None
    for e in sorted((e for e in events if e.name() == "[memory]"), key=lambda e: e.start_ns()):
        if mark is not None and at_mark is None and e.start_ns() > mark:
            at_mark = running
        running += e.nbytes()
        peak = max(peak, running)
    return peak, (at_mark if at_mark is not None else 0)


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
    from arch import build_model
    from trainers.config import TrainConfig
    from trainers.optim import build_optimizer

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
