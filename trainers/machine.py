"""What decides a run's digits besides its config: the CPU model, torch and the CPU kernel level
torch dispatches to (`torch.backends.cpu.get_cpu_capability()`: AVX512, AVX2, ...).

One machine, build and thread count repeats a seed's losses to the last bit
(tests/sweeps/study/test_reproducible.py); another CPU model or kernel level rounds differently and
prints other digits, with the same distribution of verdicts (docs/verdicts/recipe.md). So every
figure a study prints is shown with the machine it came from.
"""

from __future__ import annotations

import os
import platform
import socket


def cpu_model() -> str:
    """The CPU's model name as /proc/cpuinfo gives it (elsewhere: platform's processor)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def kernels() -> dict[str, str]:
    """{cpu, cpus, torch, cpu_capability} of this process's machine."""
    import torch

    return {
        "cpu": cpu_model(),
        "cpus": str(os.cpu_count()),
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def machine_key(num_threads: int | None = None) -> str:
    """The speed cache's key of this process's machine: host, device (the GPU's name, else the CPU's
    architecture), CPUs and the thread count a trial trains with."""
    import torch

    if torch.cuda.is_available():
        device = torch.cuda.get_device_name(0)
    else:
        device = platform.processor() or platform.machine()
    threads = num_threads or torch.get_num_threads()
    return f"{socket.gethostname()}|{device}|{os.cpu_count()} cpus|{threads} threads"


def where_trials_run(num_threads: int | None) -> tuple[str, dict]:
    """(`machine_key`, `kernels`) of the machine this runs on."""
    return machine_key(num_threads), kernels()


def describe(info: dict[str, str]) -> str:
    """`AMD EPYC (2 CPUs), torch 2.13.0+cpu, AVX512 kernels`."""
    cpus = f" ({info['cpus']} CPUs)" if info.get("cpus") else ""
    level = info.get("cpu_capability", "?")
    return f"{info.get('cpu', 'unknown CPU')}{cpus}, torch {info.get('torch', '?')}, {level} kernels"


def resolve_precision(precision: str) -> str:
    """`train.precision: auto` (a config parses it as written, on any machine) -> bf16-mixed on
    CUDA, 32-true elsewhere; the others (32-true, bf16-mixed, bf16-true) are Lightning's precision
    names, passed through. Here, not beside the LightningModule: the cost probe reads it in the
    launcher, which never imports Lightning."""
    if precision != "auto":
        return precision
    import torch

    return "bf16-mixed" if torch.cuda.is_available() else "32-true"
