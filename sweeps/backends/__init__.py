"""Where the runs of a study execute: `local` (Optuna's study.optimize in the launcher's process,
one run at a time) or `ray` (Ray Tune trials, on this machine or a cluster).

Every backend module has the same three functions; `sweeps.launch` only picks one:

    connect(study) -> (cpus, gpus) | None    # start or join what it needs; ConfigError when the
                                             # cluster lacks what one trial asks for
    run(plan, driver, concurrency, fit=None) # runs plan.remaining() runs through driver.begin/end;
                                             # KeyboardInterrupt when stopped (Ctrl-C)
    run_task(study, fn, *args)               # fn(*args) where a trial would run (cost probe)
    disconnect()
"""

from __future__ import annotations

import importlib

BACKENDS = ("ray", "local")


def get(name: str):
    if name not in BACKENDS:
        raise ValueError(f"backend {name!r}; allowed: {', '.join(BACKENDS)}")
    return importlib.import_module(f"sweeps.backends.{name}")
