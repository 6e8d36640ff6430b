"""What one trial asks of a machine (its resources), checked against this machine before a launch
and against a cluster once joined."""

from __future__ import annotations

import os

from arch.configtree import Issue


def check_resources(study) -> list[Issue]:
    """What one trial asks beyond this machine's CPUs and GPUs (`ray.num_cpus` / `num_gpus` when
    set: a local Ray of that size)."""
    cpus = study.ray.num_cpus or os.cpu_count() or 1
    gpus = study.ray.num_gpus
    if gpus is None:  # counted only when a trial asks for one: torch's import is 2.4 s of a launch
        gpus = local_gpu_count() if study.resources.total_gpus else 0
    return resource_issues(study.resources, cpus, gpus, "this machine")


def resource_issues(resources, cpus: float, gpus: float, where: str) -> list[Issue]:
    """What one trial (all its workers) asks for beyond `cpus` / `gpus` of `where`."""
    issues = []
    for kind, per_worker, total, have in (
        ("cpus", resources.cpus, resources.total_cpus, cpus),
        ("gpus", resources.gpus, resources.total_gpus, gpus),
    ):
        if total <= have:
            continue
        if resources.workers == 1:
            issues.append(
                Issue(f"resources.{kind}", f"given {per_worker}; allowed: at most {have:g} ({where})")
            )
        else:
            issues.append(
                Issue(
                    "resources.workers",
                    f"given {resources.workers} workers x {per_worker:g} {kind} = {total:g} {kind} a trial; "
                    f"allowed: at most {have:g} {kind} ({where})",
                )
            )
    return issues


def local_gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return 0
