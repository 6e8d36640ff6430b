"""Backend ray: each run is a Ray Tune trial; Optuna proposes points through an ask/tell searcher.

`connect(study)` starts (or joins) Ray and checks the cluster's resources; `run(plan, driver,
concurrency, fit)` runs the study's remaining runs through `tune.Tuner` (reusing trial processes:
seeded runs are bit-identical in a fresh or a reused one); `run_task` runs one function with a
trial's resources (the cost probe); `disconnect()`. The parts live beside it:

    head        the local Ray's head without the daemons that do no work for a launch
    kept        a local Ray kept between launches (`ray.keep`), recorded, joined, stopped
    processes   the local Ray a launch started, and ending what a dead launch left
    searcher    PlanSearcher: claims runs from the Plan, records outcomes, tells Optuna
    trainable   the worker side of one trial (tags its node, trains, reports)
    thread      the one long-lived training thread of a worker process
    outcome     the final report and the outcome read back from Tune's result
    train       data-parallel trials on Ray Train

`sweeps.run.storage.Heartbeats` records the Optuna heartbeats of the open runs (RDB storages).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import warnings
from pathlib import Path

import sweeps
from arch.configtree import ConfigError
from sweeps.report.analysis import warm_imports
from sweeps.run.backends.base import Backend
from sweeps.run.backends.ray import kept
from sweeps.run.backends.ray.head import bare_head
from sweeps.run.backends.ray.processes import RAY_PROCESSES, end_leftovers, remember_processes
from sweeps.run.backends.ray.searcher import searcher_class
from sweeps.run.backends.ray.trainable import trainable
from sweeps.run.resources import resource_issues
from sweeps.run.storage import Heartbeats


def warm_report():
    """A Tune callback: once the first trial has started (its process importing Ray, torch and
    Lightning for seconds, while this launcher waits), the report's heaviest imports are made on a
    thread of their own (`sweeps.report.analysis.warm_imports`), so the report after the last trial
    takes less; trials that train in this process (backend local) are not slowed by it."""
    from ray.tune import Callback

    class WarmReport(Callback):
        started = False

        def on_trial_start(self, iteration, trials, trial, **info):
            if not self.started:
                self.started = True
                threading.Thread(target=warm_imports, name="warm-report", daemon=True).start()

    return WarmReport()


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


STARTUP_ENV = "RAY_worker_maximum_startup_concurrency"


def startup_concurrency(backend: Backend, study) -> int:
    """How many workers a local Ray may start at once: one per slot when the trials ask for a part
    of a CPU each. Ray's own limit is its CPU count, and Tune hands an ended trial's worker to a
    waiting trial and drops the one that trial had asked for (often halfway through its imports),
    so with 32 slots on 2 CPUs about half the slots stayed idle (docs/bench/scale.md, "A worker a
    slot"). The launch never asks for more trial workers than it has slots. The price on few
    cores is the ramp: every slot's worker imports at once before the first trial runs.
    `RAY_worker_maximum_startup_concurrency` in the environment is taken as it is."""
    if os.environ.get(STARTUP_ENV):  # the user's own choice (Ray reads it)
        return int(os.environ[STARTUP_ENV])
    cpus = study.ray.num_cpus or os.cpu_count() or 1
    return max(cpus, backend.concurrency(study))


class RayBackend(Backend):
    """Ray Tune trials on a local Ray started here or on a cluster (`ray.address`)."""

    name = "ray"
    schedulers = ("none", "asha")
    joined: kept.KeptRay | None = None  # the kept Ray this launch joined (`ray.keep`)

    def checks_machine(self, study) -> bool:
        return study.ray.address is None  # a cluster is checked once joined (connect)

    def describe(self, study) -> str:
        return f"ray (Ray at {study.ray.address or 'a local Ray started here'})"

    def connect(self, study) -> tuple[float, float]:
        """Starts (or joins) Ray; refuses a cluster without what one trial asks for."""
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # local Ray: no token-auth warning
        # Ray starts workers at niceness 15, so any other job on the machine slows a trial (and the
        # cost probe) many times over (docs/fronts/README.md has the measurement). Trials are the
        # work; run them at normal priority. (A cluster's nodes take it from `ray start`'s env.)
        os.environ.setdefault("RAY_worker_niceness", "0")
        os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
        os.environ.setdefault(
            "TUNE_DISABLE_STRICT_METRIC_CHECKING", "1"
        )  # a failed run's last report has no loss
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # verbose=0: no tables (progress reports)
        # Of Tune's result files under results/<name>/ray, only result.json (`run`'s callbacks): no
        # progress.csv and no TensorBoard events (MLflow holds the record), whose writer imports
        # torch into a launcher that needs none (2.4 s of its start, docs/bench/launch_costs.md).
        os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        import ray

        kwargs = {"log_to_driver": False, "logging_level": logging.WARNING, "configure_logging": True}
        if study.ray.address is None:
            # "local", not None: ray.init() with no address joins the last `ray start` cluster on this
            # machine (Ray's /tmp/ray/ray_current_cluster), so a study meant to run alone would land
            # on someone else's cluster. Joining one is what ray.address / --ray-address are for.
            kwargs.update(address="local", include_dashboard=False)
            kwargs.update(num_cpus=study.ray.num_cpus, num_gpus=study.ray.num_gpus)
            if study.ray.temp_dir:
                kwargs["_temp_dir"] = str(Path(study.ray.temp_dir).absolute())
            # Workers import the project from this checkout. The Ray started here inherits this
            # process's environment, so PYTHONPATH is set here rather than as a runtime_env: a job
            # runtime_env sends every worker start through Ray's runtime-env agent, ~3 s for the
            # first task and the first trial each (docs/bench/launch_costs.md).
            root = str(Path(sweeps.__file__).resolve().parents[1])  # the checkout holding the project
            paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if root not in paths:
                os.environ["PYTHONPATH"] = os.pathsep.join([root, *filter(None, paths)])
            kwargs["_system_config"] = kept.system_config(startup_concurrency(self, study))
        else:
            kwargs["address"] = study.ray.address
        if not ray.is_initialized() and study.ray.address is None and study.ray.keep:
            self.joined = self._join_kept(study, kwargs)
        if not ray.is_initialized() and study.ray.address is None:  # a local Ray, started here
            end_leftovers(study.results_dir() / RAY_PROCESSES)
            with bare_head():
                ray.init(**kwargs)
            remember_processes(study.results_dir() / RAY_PROCESSES)
        elif not ray.is_initialized():
            ray.init(**kwargs)
        res = ray.cluster_resources()
        cpus, gpus = float(res.get("CPU", 0)), float(res.get("GPU", 0))
        issues = resource_issues(study.resources, cpus, gpus, "cluster")
        if issues:
            ray.shutdown()
            raise ConfigError(issues)
        return cpus, gpus

    def _join_kept(self, study, kwargs: dict) -> kept.KeptRay | None:
        """Joins the kept Ray (`ray.keep`; started by this launch when there is none), or None when
        the one running does not fit this launch (said; a Ray of its own starts instead)."""
        import ray

        want = kept.wanted(study.ray.num_cpus, study.ray.num_gpus, startup_concurrency(self, study))
        found = kept.join_or_start(want, kwargs.get("_temp_dir"), say)
        if found is not None:
            ray.init(address=found.address, log_to_driver=False, logging_level=logging.WARNING,
                     configure_logging=True)  # fmt: skip
        return found

    def disconnect(self) -> None:
        import ray

        ray.shutdown()  # a kept Ray: this driver leaves it, its processes stay
        if self.joined is not None:
            say(f"the kept {self.joined.describe()} stays up for the next launch; `{kept.STOP_HINT}` ends it")
            self.joined = None

    def run_task(self, study, fn, *args):
        """`fn(*args)` where a trial would run (the cost probe: on a trial's device): a Ray task with
        one trial's resources on a cluster; here, in this process, for CPU trials of a Ray started
        here (the same machine and CPUs; a task would first start a worker and import torch)."""
        import ray

        if study.ray.address is None and not study.resources.gpus:
            return fn(*args)
        remote = ray.remote(num_cpus=study.resources.cpus, num_gpus=study.resources.gpus)(fn)
        return ray.get(remote.remote(*args))

    def run(self, plan, driver, concurrency: int, fit=None) -> None:
        from ray import tune
        from ray.tune.logger import JsonLoggerCallback
        from ray.tune.schedulers import ASHAScheduler
        from ray.tune.search import ConcurrencyLimiter

        study = plan.study
        limit = plan.max_remaining()  # adaptive seeds: an upper bound; the searcher says when it is done
        if not limit:
            return
        first = study.objectives[0]
        metric = study.scheduler.metric if study.scheduler.kind == "asha" else first.metric
        mode = (
            study.scheduler.mode
            if study.scheduler.kind == "asha"
            else ("min" if first.direction == "minimize" else "max")
        )
        searcher = searcher_class()(plan, driver, limit, metric, mode)
        scheduler = None
        if study.scheduler.kind == "asha":
            grace, horizon = study.asha_rungs()  # one horizon for all: the largest budget of the points
            scheduler = ASHAScheduler(
                time_attr="tokens",
                metric=metric,
                mode=mode,
                max_t=horizon,
                grace_period=grace,
                reduction_factor=study.scheduler.reduction_factor,
            )
        resources = {"cpu": study.resources.cpus, "gpu": study.resources.gpus}
        reuse = study.ray.reuse_actors
        if study.resources.workers > 1 and fit is None:
            # The Tune trial only drives a Ray Train run, whose workers hold the resources (Tune refuses
            # an empty request; 1 MiB of memory asks for nothing). A fresh driver per trial: a stopped
            # trial's Ray Train run ends with the process that owns it.
            resources, reuse = {"cpu": 0, "memory": 2**20}, False
        elif study.resources.workers > 1:  # a stand-in fit (tests): the trial's own processes
            resources = {"cpu": study.resources.total_cpus, "gpu": study.resources.total_gpus}
        # A shared study never reuses: Tune keeps cached actors (and their CPUs/GPUs) while its searcher
        # is not finished, so a launcher waiting on another's last runs would starve them (deadlock).
        reuse = reuse and not plan.shared
        tuner = tune.Tuner(
            tune.with_resources(tune.with_parameters(trainable, fit=fit), resources),
            tune_config=tune.TuneConfig(
                search_alg=ConcurrencyLimiter(searcher, max_concurrent=concurrency),
                scheduler=scheduler,
                num_samples=limit,
                reuse_actors=reuse,
                trial_name_creator=lambda t: f"trial_{t.config['task'].number:03d}",
                trial_dirname_creator=lambda t: f"trial_{t.config['task'].number:03d}",
            ),
            run_config=tune.RunConfig(
                name=f"launch-{plan.launch}",
                storage_path=str(study.results_dir() / "ray"),
                verbose=0,
                failure_config=tune.FailureConfig(max_failures=0),
                callbacks=[JsonLoggerCallback(), warm_report()],  # Tune's result.json alone (see `connect`)
            ),
        )
        try:
            with Heartbeats(plan.storage, searcher.runs):
                tuner.fit()
        finally:
            left = searcher.abandon("Ray Tune stopped before this trial finished")
        if left:
            raise KeyboardInterrupt
