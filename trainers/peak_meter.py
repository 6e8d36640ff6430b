"""`PeakMeter`: the process's resident set size (CPU) or the allocator peak (CUDA) over a code
region. Informational (`rss_peak_mb`), never an objective, since libraries dominate it; the exact
tensor memory of a step is `trainers.step_memory`."""

from __future__ import annotations

import resource
import threading

import psutil
import torch


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
