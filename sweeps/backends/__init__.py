"""Where the runs of a study execute: `local` (Optuna's study.optimize in the launcher's process,
one run at a time) or `ray` (Ray Tune trials, on this machine or a cluster).

A backend is one module with one `Backend` subclass (sweeps.backends.base: what a study may ask
of it, checked at load, and connect / run / run_task / disconnect). BACKENDS is the one list:
the study's `backend:` key, the launcher's --backend flag and the load-time checks read it.
Adding a backend = its module and one line here.
"""

from __future__ import annotations

import importlib

from sweeps.backends.base import Backend

BACKENDS = {  # name -> the module holding its Backend subclass, as `BACKEND`
    "ray": "sweeps.backends.ray",
    "local": "sweeps.backends.local",
}


def get(name: str) -> Backend:
    if name not in BACKENDS:
        raise ValueError(f"backend {name!r}; allowed: {', '.join(BACKENDS)}")
    return importlib.import_module(BACKENDS[name]).BACKEND


def supporting(scheduler: str) -> list[str]:
    """The backends that can run a scheduler kind (for error messages)."""
    return [name for name in BACKENDS if scheduler in get(name).schedulers]
