"""Lightning callbacks for the metrics the Pareto fronts need: throughput, peak memory, gates.

Each callback logs with every validation (so a sweep scheduler sees the values next to
`val_loss` and `tokens`) and keeps its latest values in `.metrics()` for the final result.
"""

from __future__ import annotations

import time

import lightning.pytorch as pl
import torch

from trainers.costs import MIB, PeakMeter, flops_per_token


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
    """`tokens_per_s`: training tokens per wall-clock second in steady state.

    The clock runs between the ends of consecutive optimizer steps, skips the first
    `warmup_steps` (allocator growth, torch.compile) and stops during validation.
    """

    def __init__(self, tokens_per_step: int, warmup_steps: int = 5):
        self.tokens_per_step, self.warmup_steps = tokens_per_step, warmup_steps
        self.tokens, self.seconds = 0, 0.0
        self._last_step, self._t_prev, self._t_val = 0, None, None

    def _now(self, pl_module) -> float:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)
        return time.perf_counter()

    def on_train_start(self, trainer, pl_module) -> None:
        self._last_step, self._t_prev = trainer.global_step, None
        # at least one measured step even for tiny runs
        self._skip = min(self.warmup_steps, max(0, trainer.max_steps - trainer.global_step - 2))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step == self._last_step:  # inside gradient accumulation
            return
        now = self._now(pl_module)
        if self._t_prev is not None and step > self._skip:
            self.seconds += now - self._t_prev
            self.tokens += (step - self._last_step) * self.tokens_per_step
        self._t_prev, self._last_step = now, step

    def on_validation_start(self, trainer, pl_module) -> None:
        self._t_val = self._now(pl_module)

    def on_validation_end(self, trainer, pl_module) -> None:
        if self._t_prev is not None and self._t_val is not None:
            self._t_prev += self._now(pl_module) - self._t_val  # validation time does not count

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if self.seconds > 0 and trainer.state.fn == "fit":
            pl_module.log("tokens_per_s", self.value)

    @property
    def value(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")

    def metrics(self) -> dict[str, float]:
        return {"tokens_per_s": self.value}


class PeakMemory(pl.Callback):
    """`peak_mem_mb`: the measured peak memory while training, in MiB (`trainers.costs.PeakMeter`:
    the CUDA allocator's peak; on CPU the sampled peak RSS of the process). `peak_mem_delta_mb`:
    the same minus the memory in use when training started."""

    def __init__(self, interval: float = 0.002):
        self.interval = interval
        self.peak, self.start = 0, 0
        self._meter: PeakMeter | None = None

    def on_train_start(self, trainer, pl_module) -> None:
        self._meter = PeakMeter(pl_module.device, self.interval).__enter__()
        self.start = self._meter.start

    def on_train_end(self, trainer, pl_module) -> None:
        if self._meter is not None:
            self._meter.__exit__()
            self.peak = self._meter.peak
        self._meter = None

    def on_exception(self, trainer, pl_module, exception) -> None:
        if self._meter is not None:
            self._meter.__exit__()
            self._meter = None

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if trainer.state.fn == "fit" and self._meter is not None:
            pl_module.log("peak_mem_mb", self._meter.current_peak() / MIB)

    def metrics(self) -> dict[str, float]:
        return {"peak_mem_mb": self.peak / MIB, "peak_mem_delta_mb": (self.peak - self.start) / MIB}


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
