"""Backend ray: each run is a Ray Tune trial; Optuna proposes points through an ask/tell searcher.

`connect(study)` starts (or joins) Ray and checks the cluster's resources; `run(plan, driver,
concurrency, fit)` runs the study's remaining runs through `tune.Tuner` (reusing trial processes:
seeded runs are bit-identical in a fresh or a reused one); `run_task` runs one function with a
trial's resources (the cost probe); `disconnect()`.

`PlanSearcher` is a Ray Tune `Searcher` over the study's `Plan`: `suggest` claims the next run
(`Plan.claim`: enqueued grid points and repeats first, atomic among launchers sharing an RDB
study; while other launchers' last runs are still going it returns None and Tune asks again),
opens its MLflow child run and hands the worker a plain task; `sweeps.storage.Heartbeats`
records the Optuna heartbeats of the open runs (RDB storages); `on_trial_complete` records the outcome and
tells Optuna (COMPLETE with the objective values, PRUNED when ASHA stopped it, FAIL with the
reason otherwise). The worker (`trainable`) tags its MLflow run with its Ray node, trains with
`trainers.fit`, reporting to Tune after every validation (`tokens` is ASHA's time), and ends
with one last report carrying `sweep_status`: a run whose last result lacks it was stopped
early and never enters a front. A data-parallel trial (`workers > 1`) only drives a Ray Train
run (`sweeps.backends.ray_train`) whose workers hold the resources and report through it; the
searcher frees the placement group of one that Tune stopped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import threading
import time
import warnings
from concurrent.futures import Future
from pathlib import Path

from arch.configtree import ConfigError
from sweeps.backends.base import Backend
from sweeps.backends.ray_train import PLACEMENT_GROUP, free_placement_group
from sweeps.trial import Outcome, TrialTask, execute

FINAL_KEYS = ("sweep_status", "sweep_error", "sweep_wall_s", "sweep_metrics")
WAIT_POLL_S = 5.0  # how often a launcher with nothing to claim looks at the shared study again


def connect(study) -> tuple[float, float]:
    """Starts (or joins) Ray; refuses a cluster without what one trial asks for."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # local Ray: no token-auth warning
    # Ray starts workers at niceness 15: any other job on the machine then slows a trial (and the
    # cost probe) about tenfold (measured: 0.4 s -> 4.3 s a step next to one busy loop). Trials are
    # the work; run them at normal priority. (A cluster's nodes take it from `ray start`'s env.)
    os.environ.setdefault("RAY_worker_niceness", "0")
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    os.environ.setdefault(
        "TUNE_DISABLE_STRICT_METRIC_CHECKING", "1"
    )  # a failed run's last report has no loss
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # with verbose=0: no tables; sweeps.progress reports
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import ray

    kwargs = {"log_to_driver": False, "logging_level": logging.WARNING, "configure_logging": True}
    if study.ray.address is None:
        kwargs.update(include_dashboard=False, num_cpus=study.ray.num_cpus, num_gpus=study.ray.num_gpus)
        if study.ray.temp_dir:
            kwargs["_temp_dir"] = str(Path(study.ray.temp_dir).absolute())
        root = str(Path(__file__).resolve().parents[1])
        kwargs["runtime_env"] = {
            "env_vars": {"PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
        }
    else:
        kwargs["address"] = study.ray.address
    if not ray.is_initialized():
        if study.ray.address is None:
            end_leftovers(study.results_dir() / RAY_PROCESSES)
        ray.init(**kwargs)
        if study.ray.address is None:
            remember_processes(study.results_dir() / RAY_PROCESSES)
    res = ray.cluster_resources()
    cpus, gpus = float(res.get("CPU", 0)), float(res.get("GPU", 0))
    from sweeps.spec import resource_issues

    issues = resource_issues(study.resources, cpus, gpus, "cluster")
    if issues:
        ray.shutdown()
        raise ConfigError(issues)
    return cpus, gpus


RAY_PROCESSES = "ray-processes.json"  # the local Ray this launch started (pid, start time)


def remember_processes(path: Path) -> None:
    """Writes the processes of the local Ray just started here (all children of this launcher)."""
    import json

    import psutil

    procs = [{"pid": p.pid, "started": p.create_time()} for p in psutil.Process().children(recursive=True)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"launcher": os.getpid(), "processes": procs}))


def end_leftovers(path: Path) -> int:
    """Kills what is left of the local Ray of an earlier launch that died (kill -9 leaves Ray's
    dashboard and runtime-env agents behind, which ignore SIGTERM for a while); returns how many."""
    import json

    import psutil

    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return 0
    if psutil.pid_exists(record.get("launcher", -1)):
        return 0  # its launcher lives: not ours to end
    killed = 0
    for entry in record.get("processes", []):
        try:
            proc = psutil.Process(entry["pid"])
            if abs(proc.create_time() - entry["started"]) < 1e-3:  # the same process, not a reused pid
                proc.kill()
                killed += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    path.unlink(missing_ok=True)
    return killed


class _TrainingThread:
    """One daemon thread running the jobs handed to it, one at a time."""

    def __init__(self):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="satsweep-train", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            fn, args, kwargs, future = self.jobs.get()
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as err:  # noqa: BLE001 - the caller re-raises it
                future.set_exception(err)


_training_thread: _TrainingThread | None = None


def on_training_thread(fn, *args, **kwargs):
    """`fn(*args, **kwargs)` on one long-lived thread of this worker process.

    Tune runs every trial in a new thread of its (reused) actor, and torch's OpenMP thread team
    belongs to the thread that runs the parallel regions: measured here in one Ray actor (tiny,
    150k tokens, 2 threads), `fit` took 7.5-8.5 s on the thread that had trained before and
    9.1 s on a new thread each time, and trials under Tune trained 3-6% slower than the same
    `fit` in a plain loop. Every trial of a worker trains on this one thread instead (tune.report
    works from any thread: Ray keeps one session per process); a new one replaces it if it died."""
    global _training_thread
    if _training_thread is None or not _training_thread.thread.is_alive():
        _training_thread = _TrainingThread()
    future: Future = Future()
    _training_thread.jobs.put((fn, args, kwargs, future))
    return future.result()


def trainable(config: dict, fit=None) -> None:
    from ray import tune

    task: TrialTask = config["task"]
    tag_node(task)
    if task.workers > 1 and fit is None:  # data-parallel: Ray Train's workers, reporting through it
        from sweeps.backends.ray_train import fit_on_ray_train

        outcome = execute(task, fit=fit_on_ray_train(task))
    else:
        outcome = on_training_thread(execute, task, report=tune.report, fit=fit)
    tune.report(
        {**outcome.metrics, "sweep_status": outcome.status, "sweep_error": outcome.error[:4000],
         "sweep_wall_s": outcome.wall_s, "sweep_metrics": json.dumps(sorted(outcome.metrics))}
    )  # fmt: skip


def tag_node(task: TrialTask) -> None:
    """The Ray node, host and worker process a trial runs in, as tags of its MLflow child run."""
    import socket

    import ray

    from sweeps.tracking import client

    try:
        c = client(task.tracking_uri)
        c.set_tag(task.run_id, "ray.node_id", ray.get_runtime_context().get_node_id())
        c.set_tag(task.run_id, "ray.host", socket.gethostname())
        c.set_tag(task.run_id, "ray.pid", str(os.getpid()))  # equal pids: a reused worker
    except Exception as err:  # bookkeeping only: the trial trains regardless
        logging.getLogger(__name__).warning("could not tag the Ray node: %s", err)


def _searcher_class():
    from ray.tune.search import Searcher

    class PlanSearcher(Searcher):
        def __init__(self, plan, driver, limit: int, metric: str, mode: str):
            super().__init__(metric=metric, mode=mode)
            self.plan = plan
            self.driver = driver
            self.limit = limit
            self.asked = 0
            self.runs = {}
            self.finals = {}  # trial id -> its final report (the one with sweep_status)
            self.groups = {}  # trial id -> the placement group of its Ray Train workers
            self.next_look = 0.0

        def suggest(self, trial_id: str):
            from sweeps.plan import WAIT

            if self.asked >= self.limit:
                return Searcher.FINISHED
            if time.time() < self.next_look:
                return None
            run = self.plan.claim()
            if run is None:
                return Searcher.FINISHED
            if run == WAIT:  # every run is taken; other launchers' may still come back
                self.next_look = time.time() + WAIT_POLL_S
                return None
            task = self.driver.begin(run)
            self.runs[trial_id] = run
            self.asked += 1
            return {"task": task}  # the frozen task itself: the worker parses nothing

        def on_trial_result(self, trial_id: str, result: dict) -> None:
            # A Ray Train trial's last intermediate report can reach Tune after the trial's final
            # one (it travels through Ray Train's callback queue): the final report is kept here.
            if "sweep_status" in result:
                self.finals[trial_id] = result
            if result.get(PLACEMENT_GROUP):
                self.groups[trial_id] = result[PLACEMENT_GROUP]

        def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False):
            run = self.runs.pop(trial_id, None)
            final = self.finals.pop(trial_id, None)
            # A trial ASHA stops hands its last result here, not to on_trial_result.
            group = self.groups.pop(trial_id, None) or (result or {}).get(PLACEMENT_GROUP)
            if group and final is None:  # stopped by Tune: its Ray Train workers would stay
                free_placement_group(group)
            if run is None:
                return
            outcome = outcome_of(final or result, error)
            values = self.driver.end(run, outcome)
            self.tell(run, outcome, values)

        def tell(self, run, outcome: Outcome, values) -> None:
            from optuna.trial import TrialState

            if values is not None:
                self.plan.optuna.tell(run.trial, values)
            elif outcome.status == "pruned":
                self.plan.optuna.tell(run.trial, state=TrialState.PRUNED)
            else:
                self.plan.optuna.tell(run.trial, state=TrialState.FAIL)

        def save(self, checkpoint_path: str) -> None:  # the state lives in the Optuna storage
            pass

        def restore(self, checkpoint_path: str) -> None:
            pass

        def abandon(self, reason: str) -> int:
            """Runs still open when Tune stopped (Ctrl-C): interrupted, queued again next launch."""
            from optuna.trial import TrialState

            n = 0
            for group in self.groups.values():
                with contextlib.suppress(Exception):  # Ray may be going down already (Ctrl-C)
                    free_placement_group(group)
            self.groups.clear()
            for run in self.runs.values():
                self.driver.interrupt(run, reason)
                self.plan.optuna.tell(run.trial, state=TrialState.FAIL)
                n += 1
            self.runs.clear()
            return n

    return PlanSearcher


def outcome_of(result: dict | None, error: bool) -> Outcome:
    """The trial's outcome from its last Tune result: exactly the metrics the trial named in its
    final report (Ray adds its own keys and the flattened `config/...` to every result); a trial
    stopped early (ASHA) reported only its training metrics."""
    result = dict(result or {})
    if "sweep_metrics" in result:
        names = json.loads(result["sweep_metrics"])
    else:
        from ray.tune.result import AUTO_RESULT_KEYS

        ray_keys = {
            *AUTO_RESULT_KEYS,
            *FINAL_KEYS,
            PLACEMENT_GROUP,
            "done",
            "trial_id",
            "experiment_tag",
            "should_checkpoint",
        }
        names = [k for k in result if k not in ray_keys and not k.startswith("config/")]
    metrics = {k: float(result[k]) for k in names if _number(result.get(k))}
    if "sweep_status" in result:
        return Outcome(
            str(result["sweep_status"]),
            metrics,
            str(result.get("sweep_error", "")),
            float(result.get("sweep_wall_s", 0.0)),
        )
    wall = float(result.get("time_total_s", 0.0))
    if error:
        return Outcome(
            "error", metrics, "the Ray trial failed outside training (see Ray's trial folder)", wall
        )
    return Outcome("pruned", metrics, "", wall)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def disconnect() -> None:
    import ray

    ray.shutdown()


def run_task(study, fn, *args):
    """`fn(*args)` as a Ray task with one trial's resources (the cost probe: on a trial's device)."""
    import ray

    remote = ray.remote(num_cpus=study.resources.cpus, num_gpus=study.resources.gpus)(fn)
    return ray.get(remote.remote(*args))


def run(plan, driver, concurrency: int, fit=None) -> None:
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler
    from ray.tune.search import ConcurrencyLimiter

    from sweeps.storage import Heartbeats

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
    searcher = _searcher_class()(plan, driver, limit, metric, mode)
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
        ),
    )
    try:
        with Heartbeats(plan.storage, searcher.runs):
            tuner.fit()
    finally:
        left = searcher.abandon("Ray Tune stopped before this trial finished")
    if left:
        raise KeyboardInterrupt


class RayBackend(Backend):
    """Ray Tune trials on a local Ray started here or on a cluster (`ray.address`)."""

    name = "ray"
    schedulers = ("none", "asha")

    def checks_machine(self, study) -> bool:
        return study.ray.address is None  # a cluster is checked once joined (connect)

    def describe(self, study) -> str:
        return f"ray (Ray at {study.ray.address or 'a local Ray started here'})"

    connect = staticmethod(connect)
    run = staticmethod(run)
    run_task = staticmethod(run_task)
    disconnect = staticmethod(disconnect)


BACKEND = RayBackend()
