"""Lightning callbacks for the metrics the Pareto fronts need: throughput, exact memory, gates.

Each callback logs with every validation (so a sweep scheduler sees the values next to
`val_loss` and `tokens`) and keeps its latest values in `.metrics()` for the final result.
"""

from __future__ import annotations

import time

import lightning.pytorch as pl
import torch

from trainers.flops import flops_per_token
from trainers.peak_meter import PeakMeter
from trainers.step_memory import MIB, StepMemoryMeter, ddp_bucket_bytes


class ModelStats(pl.Callback):
    """Logs `params_total`, `params_design` and `flops_per_token` with every validation."""

    def __init__(self, seq_len: int):
        self.seq_len = seq_len
        self.values: dict[str, float] = {}

    def on_fit_start(self, trainer, pl_module) -> None:
        counts = pl_module.model.param_counts()
        self.values = {
            "params_total": float(counts["total"]),
            "params_design": float(counts["design"]),
            "flops_per_token": flops_per_token(pl_module.model, self.seq_len),
        }

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if trainer.state.fn == "fit":
            for k, v in self.values.items():
                pl_module.log(k, v)

    def metrics(self) -> dict[str, float]:
        return dict(self.values)


class Throughput(pl.Callback):
    """`train_tokens_per_s`: this trial's training tokens per second of its own training steps.

    It shares the machine with whatever else runs, so a sweep does not rank designs by it: the
    sweep's `tokens_per_s` comes from its cost probe (`sweeps.run.probe`), timed side by side; the
    report prints the two ratios side by side (`sweeps.report.throughput`).

    The clock runs over each micro-batch, from Lightning's `on_train_batch_start` to its
    `on_train_batch_end` (forward, loss, backward and, on a step's last micro-batch, clipping and
    the optimizer step: what the probe times), so validation, the recall probe, checkpoint writes
    and data loading between batches do not count. It skips the first `warmup_steps` optimizer
    steps (allocator growth, torch.compile).
    """

    def __init__(self, tokens_per_step: int, warmup_steps: int = 5):
        self.tokens_per_step, self.warmup_steps = tokens_per_step, warmup_steps
        self.tokens, self.seconds = 0, 0.0
        self._last_step, self._started = 0, None

    def _now(self, pl_module) -> float:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)
        return time.perf_counter()

    def on_train_start(self, trainer, pl_module) -> None:
        self._last_step, self._started = trainer.global_step, None
        # at least one measured step even for tiny runs
        self._skip = min(self.warmup_steps, max(0, trainer.max_steps - trainer.global_step - 2))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        # the micro-batches of optimizer step n run while global_step is n - 1
        self._started = self._now(pl_module) if trainer.global_step + 1 > self._skip else None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._started is not None:
            self.seconds += self._now(pl_module) - self._started
            self._started = None
        step = trainer.global_step
        if step != self._last_step:  # an optimizer step ended with this micro-batch
            if step > self._skip:
                self.tokens += (step - self._last_step) * self.tokens_per_step
            self._last_step = step

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if self.seconds > 0 and trainer.state.fn == "fit":
            pl_module.log("train_tokens_per_s", self.value)

    @property
    def value(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 and self.tokens else float("nan")

    def metrics(self) -> dict[str, float]:
        return {"train_tokens_per_s": self.value}


class StepMemory(pl.Callback):
    """`peak_mem_mb`: the exact peak of live tensor memory over one training step, and its breakdown
    (`mem_params_mb`, `mem_grads_mb`, `mem_optimizer_mb`, `mem_activations_mb`), measured once on
    optimizer step `measure_step` (default 1: after the warm-up step that creates the optimizer
    state; 0 for one-step runs) with `trainers.step_memory.StepMemoryMeter`. The same architecture and
    batch shape give the same bytes whatever the seed. `rss_peak_mb`: the process's peak resident
    set size over training (CPU; the allocator peak on CUDA), for information only.

    Data-parallel (DDP): measured on step 2, after DDP has rebuilt its gradient buckets (it does so
    in the second step's forward); the buckets are counted (`mem_ddp_buckets_mb`: on CUDA the
    allocator sees them, on CPU they are added, since they were allocated before the step).
    """

    def __init__(self, measure_step: int = 1):
        self.measure_step = measure_step
        self.values: dict[str, float] = {}
        self._meter: StepMemoryMeter | None = None
        self._rss: PeakMeter | None = None
        self._target = measure_step

    def on_train_start(self, trainer, pl_module) -> None:
        # counted from the step training starts at (a resumed run starts past 0)
        step = trainer.global_step + self.measure_step + (1 if trainer.world_size > 1 else 0)
        self._target = min(step, max(0, trainer.max_steps - 1))
        self._rss = PeakMeter(pl_module.device).__enter__()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        first_micro_batch = batch_idx % trainer.accumulate_grad_batches == 0
        due = trainer.global_step == self._target and first_micro_batch and "peak_mem_mb" not in self.values
        if due and self._meter is None:
            # The step would free the last step's gradients first; the profiler cannot see a
            # free of a block allocated before it started, so free them before it starts.
            trainer.optimizers[0].zero_grad(set_to_none=True)
            self._meter = StepMemoryMeter(pl_module.device)
            buckets = ddp_bucket_bytes(trainer.strategy.model)
            self._meter.start(pl_module, trainer.optimizers[0], batch, comm_buckets=buckets)

    def on_before_backward(self, trainer, pl_module, loss) -> None:
        if self._meter is not None:
            self._meter.backward_starts()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._meter is not None and trainer.global_step > self._target:
            self.values.update(self._meter.stop().metrics())
            self._meter = None

    def on_train_end(self, trainer, pl_module) -> None:
        if self._rss is not None:
            self._rss.__exit__()
            self.values["rss_peak_mb"] = self._rss.peak / MIB
            self._rss = None

    def on_exception(self, trainer, pl_module, exception) -> None:
        if self._meter is not None:
            self._meter.abandon()
        self._meter = None
        if self._rss is not None:
            self._rss.__exit__()
            self._rss = None

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if trainer.state.fn == "fit" and "peak_mem_mb" in self.values:
            pl_module.log("peak_mem_mb", self.values["peak_mem_mb"])

    def metrics(self) -> dict[str, float]:
        return dict(self.values)


class GateStats(pl.Callback):
    """Every `every` optimizer steps: `gate_mean/L{i}` and `gate_zero_frac/L{i}` per consuming layer.

    `i` is the 0-based block index (the key of `model(tokens, return_gates=True)[1]`). Designs
    without gates return none and nothing is logged. Gates are requested only on those steps.
    Written straight to the loggers at that step (not tied to `log_every`).
    """

    def __init__(self, every: int, grad_accum: int):
        self.every, self.grad_accum = every, grad_accum
        self.latest: dict[str, float] = {}
        self._step = 0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._step = trainer.global_step
        pl_module.record_gates = batch_idx % self.grad_accum == 0 and self._step % self.every == 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        gates = pl_module.last_gates
        pl_module.record_gates, pl_module.last_gates = False, None
        if not gates:
            return
        stats = {}
        for layer, gate in sorted(gates.items()):
            g = gate.float()
            stats[f"gate_mean/L{layer}"] = g.mean().item()
            stats[f"gate_zero_frac/L{layer}"] = (g == 0).float().mean().item()
        self.latest = stats
        for logger in trainer.loggers:
            logger.log_metrics(stats, step=self._step)

    def metrics(self) -> dict[str, float]:
        return dict(self.latest)
