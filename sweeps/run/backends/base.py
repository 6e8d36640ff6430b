"""The interface every backend implements: what a study may ask of it (checked at load) and how
it runs a study's runs. `sweeps.launch` and `sweeps.study` only talk to a backend through this."""

from __future__ import annotations

import abc
import os
from typing import ClassVar

from arch.configtree import Issue


class Backend(abc.ABC):
    name: ClassVar[str]
    schedulers: ClassVar[tuple[str, ...]] = ("none",)  # the scheduler kinds it can run

    # --- at load (no process started) --------------------------------------------------------
    def check(self, study) -> list[Issue]:
        """What this backend refuses in a study, beyond the scheduler kind (at load)."""
        return []

    def checks_machine(self, study) -> bool:
        """Whether one trial runs on this machine, so its CPUs and GPUs bound a trial at load."""
        return True

    def concurrency(self, study, cpus: float | None = None, gpus: float | None = None) -> int:
        """Runs at a time: the study's `max_concurrent`, else as many as the resources hold."""
        if study.max_concurrent:
            return study.max_concurrent
        cpus = cpus or study.ray.num_cpus or os.cpu_count() or 1
        n = int(cpus // study.resources.total_cpus)
        if study.resources.gpus:
            n = min(n, int((gpus or 0) // study.resources.total_gpus))
        return max(1, n)

    def describe(self, study) -> str:
        """Where the runs go, for the dry run's `backend` line."""
        return self.name

    # --- running ----------------------------------------------------------------------------
    @abc.abstractmethod
    def connect(self, study) -> tuple[float, float] | None:
        """Starts or joins what it needs; (cpus, gpus) of a cluster, None for this machine;
        ConfigError when the cluster lacks what one trial asks for."""

    @abc.abstractmethod
    def run(self, plan, driver, concurrency: int, fit=None) -> None:
        """Runs plan.remaining() runs through driver.begin/end; KeyboardInterrupt when stopped."""

    @abc.abstractmethod
    def run_task(self, study, fn, *args):
        """fn(*args) where a trial would run (the cost probe: on a trial's device)."""

    @abc.abstractmethod
    def disconnect(self) -> None:
        """Ends what connect started."""
