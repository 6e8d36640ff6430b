"""The Ray Tune trainable: one run of a study in a Ray worker.

It tags its MLflow child run with its Ray node, trains with `trainers.fit` on the worker's one
training thread (sweeps.run.backends.ray.thread), reporting to Tune after every validation (`tokens`
is ASHA's time), and ends with its final report (sweeps.run.backends.ray.outcome). A data-parallel
trial (`workers > 1`) only drives a Ray Train run (sweeps.run.backends.ray.train) whose workers hold
the resources and report through it.
"""

from __future__ import annotations

import logging
import os

from sweeps.run.backends.ray.outcome import final_report
from sweeps.run.backends.ray.thread import on_training_thread
from sweeps.run.backends.ray.train import fit_on_ray_train
from sweeps.run.tracking import client
from sweeps.run.worker import TrialTask, execute


def trainable(config: dict, fit=None) -> None:
    from ray import tune

    task: TrialTask = config["task"]
    tag_node(task)
    if task.workers > 1 and fit is None:  # data-parallel: Ray Train's workers, reporting through it
        outcome = execute(task, fit=fit_on_ray_train(task))
    else:
        outcome = on_training_thread(execute, task, report=tune.report, fit=fit)
    tune.report(final_report(outcome))


def tag_node(task: TrialTask) -> None:
    """The Ray node, host and worker process a trial runs in, as tags of its MLflow child run."""
    import socket

    import ray

    try:
        c = client(task.tracking_uri)
        c.set_tag(task.run_id, "ray.node_id", ray.get_runtime_context().get_node_id())
        c.set_tag(task.run_id, "ray.host", socket.gethostname())
        c.set_tag(task.run_id, "ray.pid", str(os.getpid()))  # equal pids: a reused worker
    except Exception as err:  # bookkeeping only: the trial trains regardless
        logging.getLogger(__name__).warning("could not tag the Ray node: %s", err)
