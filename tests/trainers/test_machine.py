"""trainers.machine: what a run's digits depend on, named for the reports."""

import torch

from trainers.machine import cpu_model, describe, kernels


def test_kernels_names_this_cpu_and_torchs_kernel_level():
    info = kernels()
    assert info["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert info["torch"] == torch.__version__ and info["cpu"] == cpu_model() and info["cpu"]


def test_describe():
    info = {"cpu": "AMD EPYC", "cpus": "2", "torch": "2.13.0+cpu", "cpu_capability": "AVX512"}
    assert describe(info) == "AMD EPYC (2 CPUs), torch 2.13.0+cpu, AVX512 kernels"
