"""`StepMemoryMeter`: the exact peak of live tensor memory over one training step, one definition
on CPU and CUDA, for the trainer's callback, the sweep's cost probe and bench/.

The peak is the tensors alive when the step starts (parameters, buffers, optimizer state, the
batch) plus the largest running sum of what the step allocates and frees. CUDA reads the caching
allocator's statistics (reset around the step); CPU sums the allocation and free events that
torch's profiler records with `profile_memory=True`, in time order. Both are exact to the byte and
do not depend on the seed; the breakdown (`StepMemoryReading`) is parameters, gradients, optimizer
state and activations (what the forward pass leaves alive for backward, read when backward starts).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import gc
import os
import sys
from collections.abc import Iterable

import torch

MIB = 1 << 20
MARK = "satsweep.backward_starts"  # the profiler annotation at the start of backward
OPTIMIZER_MARK = "satsweep.optimizer_starts"  # ... and at the start of the optimizer step


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
class StepMemoryReading:
    """Live tensor memory of one training step, in bytes."""

    peak: int
    params: int
    grads: int
    optimizer: int
    activations: int
    comm_buckets: int = 0  # data-parallel: DDP's flat gradient buckets (one more copy of the grads)
    # The peak before the optimizer step (forward and backward), when the step called
    # `optimizer_starts()`: the memory plan (trainers.memory_fit) extrapolates it in tokens, while
    # the optimizer step's own peak does not grow with the batch.
    before_optimizer: int | None = None

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
    backward), then `stop() -> StepMemoryReading`. See the module docstring for the definition."""

    def __init__(self, device, keep_trace: bool = False):
        self.device = torch.device(device)
        # CPU only: keep the live bytes after every allocation and free, in time order (`trace`),
        # and where each `mark(name)` fell in it (`marks`: the number of events before it).
        self.keep_trace = keep_trace
        self.trace: list[int] = []
        self.marks: dict[str, int] = {}
        self._profiler = None
        self._gc_was_enabled = False
        self.at_backward: int | None = None
        self.before_optimizer: int | None = None

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
        self.at_backward = self.before_optimizer = None
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

    def optimizer_starts(self) -> None:
        """Marks the end of forward and backward (optional; gives `before_optimizer`)."""
        if self.before_optimizer is not None or (self._profiler is None and not self.cuda):
            return
        if self.cuda:
            torch.cuda.synchronize(self.device)
            self.before_optimizer = torch.cuda.max_memory_allocated(self.device)
            return
        self.before_optimizer = -1  # read from the profiler's events at the end
        with torch.profiler.record_function(OPTIMIZER_MARK):
            pass

    def mark(self, name: str) -> None:
        """A named point of the step, for `trace` (CPU)."""
        if self._profiler is not None:
            with torch.profiler.record_function(name):
                pass

    def stop(self) -> StepMemoryReading:
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
            rise, activations, rise_before = _running_peak(self._profiler)
            if self.keep_trace:
                self.trace, self.marks = _trace(self._profiler, self.static)
            self._profiler = None
            peak = self.static + rise
            if self.before_optimizer is not None:
                self.before_optimizer = self.static + rise_before
        return StepMemoryReading(
            peak=peak,
            params=tensor_bytes(params),
            grads=tensor_bytes(trainable),  # a gradient is the size of its parameter
            optimizer=optimizer,
            activations=activations,
            comm_buckets=self.comm_buckets,
            before_optimizer=self.before_optimizer,
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


def _running_peak(prof) -> tuple[int, int, int]:
    """(largest running sum of allocations minus frees, the running sum at the backward mark, the
    largest running sum before the optimizer mark (the whole step's without that mark))."""
    events = prof.profiler.kineto_results.events()

    def first(name):
        return next(iter(sorted(e.start_ns() for e in events if e.name() == name)), None)

    mark, optimizer_mark = first(MARK), first(OPTIMIZER_MARK)
    running = peak = peak_before = 0
    at_mark = None
    for e in sorted((e for e in events if e.name() == "[memory]"), key=lambda e: e.start_ns()):
        if mark is not None and at_mark is None and e.start_ns() > mark:
            at_mark = running
        running += e.nbytes()
        peak = max(peak, running)
        if optimizer_mark is None or e.start_ns() < optimizer_mark:
            peak_before = peak
    return peak, (at_mark if at_mark is not None else 0), peak_before


def _trace(prof, static: int) -> tuple[list[int], dict[str, int]]:
    """(live bytes after each allocation or free in time order, {annotation: events before it})."""
    events = prof.profiler.kineto_results.events()
    memory = sorted((e for e in events if e.name() == "[memory]"), key=lambda e: e.start_ns())
    times = [e.start_ns() for e in memory]
    first: dict[str, int] = {}
    for e in events:
        if e.name().startswith("satsweep."):
            first[e.name()] = min(first.get(e.name(), e.start_ns()), e.start_ns())
    marks = {name: bisect.bisect_left(times, start) for name, start in first.items()}
    running, trace = static, []
    for e in memory:
        running += e.nbytes()
        trace.append(running)
    return trace, marks
