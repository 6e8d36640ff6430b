"""Lightning callbacks for the metrics the Pareto fronts need: throughput, peak memory, gates.

Each callback logs with every validation (so a sweep scheduler sees the values next to
`val_loss` and `tokens`) and keeps its latest values in `.metrics()` for the final result.
"""

from __future__ import annotations

import resource
import threading
import time

import lightning.pytorch as pl
import psutil
import torch

MIB = 1 << 20


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


class _RSSSampler(threading.Thread):
    """Samples the resident set size of this process every `interval` seconds."""

    def __init__(self, interval: float):
        super().__init__(daemon=True, name="rss-sampler")
        self.interval, self.peak = interval, 0
        self._proc = psutil.Process()
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            self._halt.wait(self.interval)

    def stop(self) -> int:
        self._halt.set()
        self.join()
        return max(self.peak, self._proc.memory_info().rss)


class PeakMemory(pl.Callback):
    """`peak_mem_mb`: the measured peak memory while training, in MiB.

    CUDA: `torch.cuda.max_memory_allocated` (reset at train start). CPU: the peak resident set
    size of the process, from a thread sampling psutil every 2 ms, combined with the kernel's
    high-water mark (`getrusage` maxrss) when that rose during training (it then is the exact
    peak). `peak_mem_delta_mb`: the same minus the memory in use when training started.
    """

    def __init__(self, interval: float = 0.002):
        self.interval = interval
        self.peak, self.start = 0, 0
        self._sampler: _RSSSampler | None = None
        self._cuda = False

    @staticmethod
    def _maxrss() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB

    def on_train_start(self, trainer, pl_module) -> None:
        self._cuda = pl_module.device.type == "cuda"
        if self._cuda:
            torch.cuda.reset_peak_memory_stats(pl_module.device)
            self.start = torch.cuda.memory_allocated(pl_module.device)
            return
        self.start = psutil.Process().memory_info().rss
        self._maxrss_start = self._maxrss()
        self._sampler = _RSSSampler(self.interval)
        self._sampler.start()

    def _current_peak(self, pl_module) -> int:
        if self._cuda:
            return torch.cuda.max_memory_allocated(pl_module.device)
        sampled = self._sampler.peak if self._sampler else 0
        maxrss = self._maxrss()
        return max(sampled, maxrss if maxrss > self._maxrss_start else 0)

    def on_train_end(self, trainer, pl_module) -> None:
        if self._sampler is not None:
            self._sampler.stop()
        self.peak = self._current_peak(pl_module)
        self._sampler = None

    def on_exception(self, trainer, pl_module, exception) -> None:
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if trainer.state.fn == "fit" and (self._sampler is not None or self._cuda):
            pl_module.log("peak_mem_mb", self._current_peak(pl_module) / MIB)

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


class LossHistory(pl.Callback):
    """Records the training loss of every micro-batch (tests, debugging)."""

    def __init__(self):
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.losses.append(float(outputs["loss"].detach()))
