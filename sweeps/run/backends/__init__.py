"""Where the runs of a study execute: `local` (Optuna's study.optimize in the launcher's process,
one run at a time) or `ray` (Ray Tune trials, on this machine or a cluster).

A backend is one `Backend` subclass (sweeps.run.backends.base: what a study may ask of it, checked
before anything starts, and connect / run / run_task / disconnect). BACKENDS is the one list: the
study's `backend:` key, the launcher's --backend flag and the checks read it. Adding a backend = its
module here and one line in BACKENDS.
"""

from __future__ import annotations

import importlib

from arch.configtree import Issue, choices, not_one_of
from sweeps.run.backends.base import Backend
from sweeps.run.resources import check_resources

BACKENDS = {  # name -> "module:class"; imported on use: the ray backend imports Ray (seconds)
    "ray": "sweeps.run.backends.ray.backend:RayBackend",
    "local": "sweeps.run.backends.local:LocalBackend",
}


def get(name: str) -> Backend:
    if name not in BACKENDS:
        raise ValueError(f"backend {name!r}; allowed: {', '.join(BACKENDS)}")
    module, _, cls = BACKENDS[name].partition(":")
    return getattr(importlib.import_module(module), cls)()


def supporting(scheduler: str) -> list[str]:
    """The backends that can run a scheduler kind (for error messages)."""
    return [name for name in BACKENDS if scheduler in get(name).schedulers]


def study_issues(study) -> list[Issue]:
    """What the study's backend refuses: its name, the scheduler kind, the backend's own rules, and
    what one trial asks beyond this machine (a cluster is checked once joined)."""
    if study.backend not in BACKENDS:
        return [Issue("backend", not_one_of(study.backend, BACKENDS))]
    backend = get(study.backend)
    kind = study.scheduler.kind
    if kind not in backend.schedulers:
        needs = " or ".join(supporting(kind))
        return [
            Issue(
                "scheduler.kind",
                f"given {kind!r} with backend {study.backend!r}; allowed: {choices(backend.schedulers)}"
                f" ({kind} needs backend {needs})",
            )
        ]
    issues = backend.check(study)
    if backend.checks_machine(study):
        issues += check_resources(study)
    return issues
