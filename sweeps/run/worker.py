"""One trial, worker side: its TrialConfig -> trainers.fit with MLflow logging and progress reports.

`execute` never raises for a failing trial: divergence (NaN/inf), out-of-memory, a trial that
runs past its wall-clock limit (`timeout`) and any other error come back as an outcome with a
status and the error text, so the study goes on and the driver records the failure in MLflow
and Optuna.

The wall-clock limit is a watchdog thread that raises `TrialTimeout` inside the training thread
(`PyThreadState_SetAsyncExc`): it stops a trial stuck in Python code (a data loader waiting on
dead workers, a polling loop); a thread blocked inside one C call (a collective that never
returns) sees it only when that call returns.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import gc
import logging
import math
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from sweeps.run.plain_log import PlainTrialLogger
from sweeps.study.sections import EvalsConfig
from trainers.config import TrialConfig
from trainers.errors import TrainingDiverged
from trainers.machine import where_trials_run
from trainers.mlflow_names import CHECKPOINT_FOLDER, CHECKPOINT_NAME

Report = Callable[[dict[str, Any]], None]


@dataclasses.dataclass(frozen=True)
class TrialTask:
    """Everything a worker needs for one run (frozen, picklable: it travels to Ray workers as is)."""

    number: int
    run_id: str
    tracking_uri: str
    config: TrialConfig  # the run's resolved trial config (its point and seed)
    data_root: str | None = None
    keep_checkpoint: bool = False  # log the final weights (trainers.mlflow_names.CHECKPOINT_ARTIFACT)
    timeout_s: float | None = None  # wall-clock limit of the training (None: none)
    worker_cpus: float = 1.0  # each data-parallel worker's share (resources.cpus / gpus; Ray Train)
    worker_gpus: float = 0.0
    system_metrics: str = "off"  # output.system_metrics: auto | on | off (`system_metrics_wanted`)
    checkpoint_dir: str | None = None  # the run's resumable checkpoints (sweeps.run.resume; None: none)
    evals: EvalsConfig | None = None  # lm-eval tasks scored on the final weights (include_path absolute)

    @property
    def workers(self) -> int:
        return self.config.train.workers


class TrialTimeout(Exception):
    """Raised inside a trial's thread when it runs past its wall-clock limit."""


class Watchdog:
    """Raises TrialTimeout in the thread that entered it, `seconds` later (unless it left)."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.fired = False
        self._timer: threading.Timer | None = None

    def __enter__(self):
        if self.seconds:
            target = threading.get_ident()
            self._timer = threading.Timer(self.seconds, self._fire, args=(target,))
            self._timer.daemon = True
            self._timer.start()
        return self

    def _fire(self, thread_id: int) -> None:
        self.fired = True
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(TrialTimeout))

    def __exit__(self, *exc):
        if self._timer is not None:
            self._timer.cancel()


@dataclasses.dataclass
class Outcome:
    status: str  # ok | diverged | oom | timeout | error
    metrics: dict[str, float]
    error: str = ""
    wall_s: float = 0.0
    unwritten: list = dataclasses.field(default_factory=list)  # the logger's last metrics (`hand_back`)
    # where it trained (`trainers.machine.where_trials_run`): the key of the speed cache and the
    # kernel level, which a one-architecture study records with the trial's own speed (`Probe.record`)
    machine: tuple[str, dict] | None = None


class Stopwatch:
    """Adds up the seconds spent in the functions it wraps: the launcher's own work inside a
    trial's `fit` (its MLflow logger, its progress reports), which a plain loop does not pay."""

    def __init__(self):
        self.seconds = 0.0

    def timed(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return wrapper


def scalar_metrics(source: Mapping) -> dict[str, float]:
    out = {}
    for key, value in source.items():
        try:
            number = float(value.item() if hasattr(value, "item") else value)
        except (TypeError, ValueError, RuntimeError):
            continue
        out[key] = number
    return out


def report_callback(report: Report):
    """A Lightning callback that hands the logged metrics to `report` after each validation."""
    import lightning.pytorch as pl

    class ReportOnValidation(pl.Callback):
        def on_validation_end(self, trainer, pl_module):
            report_validation(report, trainer)

    return ReportOnValidation()


class ReportHook:
    """`report_callback`'s work for a fit without Lightning, which calls `on_validation_end`
    itself (the stand-in fits: tests.sweeps.fake_fit)."""

    def __init__(self, report: Report):
        self.report = report

    def on_validation_end(self, trainer, pl_module) -> None:
        report_validation(self.report, trainer)


def report_validation(report: Report, trainer) -> None:
    if trainer.sanity_checking:
        return
    metrics = scalar_metrics(trainer.callback_metrics)
    if "val_loss" in metrics:
        report(metrics)


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def system_metrics_wanted(task: TrialTask) -> bool:
    """MLflow's system metrics for this run: `on`, or `auto` on a trial that trains on CUDA (it
    asks for GPUs and this worker has CUDA); never on a CPU trial."""
    if task.system_metrics == "off" or task.worker_gpus == 0:
        return False
    return task.system_metrics == "on" or cuda_available()


def system_metrics(task: TrialTask):
    """A started `mlflow.system_metrics.SystemMetricsMonitor` on the run (None when not wanted).
    Its GPU part needs nvidia-ml-py (the extra `gpu`); its interval is MLflow's (10 s, or
    MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL)."""
    if not system_metrics_wanted(task):
        return None
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    monitor = SystemMetricsMonitor(task.run_id, tracking_uri=task.tracking_uri)
    monitor.start()
    return monitor


def default_fit():
    from trainers.fit import fit  # Lightning: loaded where a trial trains, not in a Ray launcher

    return fit


def execute(
    task: TrialTask, report: Report | None = None, fit: Callable | None = None, hand_back: bool = False
) -> Outcome:
    """Runs `fit` (trainers.fit by default) on the task. A fit that trains without Lightning says
    so (`fit.without_lightning = True`): it gets a logger and a report hook with the same methods
    that do not import Lightning, which then stays out of the worker's process.

    `hand_back` (the local backend, whose driver shares this process): the metrics the logger still
    holds at the end come back in `Outcome.unwritten`, and the driver writes them with the run's
    final metrics in one request (`Tracker.finish_child`), not in a request of their own
    (docs/bench/scale.md). A trial interrupted meanwhile writes them here, as before."""
    start = time.time()
    fit = fit or default_fit()
    plain = getattr(fit, "without_lightning", False)
    if plain:
        logger = PlainTrialLogger(run_id=task.run_id, tracking_uri=task.tracking_uri)
    else:
        from sweeps.run.trial_log import TrialLogger  # Lightning's logger: where the trial trains

        logger = TrialLogger(run_id=task.run_id, tracking_uri=task.tracking_uri)
    logger.hand_back = hand_back and task.config.train.workers == 1  # spawned ranks log on their own
    freeze_imports()
    try:
        outcome = _execute(task, report, fit, logger, start, plain)
    except BaseException:  # Ctrl-C: the driver gets no outcome, so the held metrics go now
        if logger.hand_back:
            _flush(logger)
        raise
    if logger.hand_back:
        outcome.unwritten = logger.take_held()
    return outcome


@functools.cache  # once per process
def freeze_imports() -> None:
    """Once per process, after the first trial's imports: a full collection, then `gc.freeze`, so
    that the collections a training loop sets off no longer walk the objects the imports left
    (~450k for torch and Lightning; ~620k in a Ray worker, with Ray, Tune and MLflow). They took
    0.5 s of a 7.5 s CPU fit in a Ray worker, 0.01 s after (docs/bench/launch_costs.md). Frozen
    objects are still freed when their last reference goes; what trials make later is collected
    as before."""
    gc.collect()
    gc.freeze()


def _execute(
    task: TrialTask, report: Report | None, fit: Callable, logger, start: float, plain: bool
) -> Outcome:
    config = task.config
    clock = Stopwatch()
    if config.train.workers == 1:  # spawned data-parallel workers pickle the logger: left plain
        for name in ("log_metrics", "log_hyperparams", "flush"):
            setattr(logger, name, clock.timed(getattr(logger, name)))
        report = clock.timed(report) if report is not None else None
    callbacks = [(ReportHook if plain else report_callback)(report)] if report is not None else []
    weights = task.keep_checkpoint or task.evals is not None  # the harness scores the final weights' file
    folder = tempfile.TemporaryDirectory(prefix="satsweep-ckpt-") if weights else None
    checkpoint = Path(folder.name) / CHECKPOINT_NAME if folder else None
    watchdog = Watchdog(task.timeout_s)
    monitor = system_metrics(task)
    resumable = {"checkpoint_dir": task.checkpoint_dir} if task.checkpoint_dir is not None else {}
    try:
        with watchdog:
            fit_start = time.perf_counter()
            metrics = scalar_metrics(
                fit(
                    config,
                    loggers=[logger],
                    callbacks=callbacks,
                    data_root=task.data_root,
                    checkpoint_path=checkpoint,
                    **resumable,
                )
                or {}
            )
            # what a plain loop calling trainers.fit would have paid, and the launcher's part of it
            metrics["fit_s"] = time.perf_counter() - fit_start
            if config.train.workers == 1:
                metrics["logging_s"] = clock.seconds
        if task.keep_checkpoint and checkpoint.is_file() and not _logged(logger.experiment, task.run_id):
            # for `python -m gates <run id>` (a Ray Train trial's rank 0 has logged it already)
            logger.experiment.log_artifact(task.run_id, str(checkpoint), artifact_path=CHECKPOINT_FOLDER)
        bad = [k for k, v in metrics.items() if k.endswith("loss") and not math.isfinite(v)]
        if bad:
            return Outcome("diverged", metrics, f"{bad[0]} is {metrics[bad[0]]}", time.time() - start)
        if task.evals is not None:  # after the watchdog: trial_timeout_s limits the training
            try:
                metrics.update(score_final_weights(task, checkpoint))
            except Exception as err:  # a trained run whose scores are missing: failed, with why
                return Outcome("error", metrics, f"evals: {_describe(err)}", time.time() - start)
        return Outcome("ok", metrics, "", time.time() - start, machine=_where(config))
    except Exception as err:  # the study goes on; the driver records why this trial failed
        if watchdog.fired:  # TrialTimeout, or what it turned into on its way out of Lightning
            limit = f"ran past its wall-clock limit of {task.timeout_s:.0f} s (trial_timeout_s)"
            return Outcome("timeout", {}, f"TrialTimeout: {limit}\n\n{_describe(err)}", time.time() - start)
        return Outcome(classify(err), {}, _describe(err), time.time() - start)
    finally:
        if not logger.hand_back:
            _flush(logger)  # what the logger still holds (a fit that failed before Lightning's finalize)
        if monitor is not None:  # its last samples, before the driver ends the run
            monitor.finish()
        if folder is not None:
            folder.cleanup()


def _where(config: TrialConfig) -> tuple[str, dict] | None:
    """Where the trial trained, read here, where torch is already imported, so the launcher of a
    Ray study needs no torch of its own to ask (None for a stand-in fit that never imported it)."""
    if "torch" not in sys.modules:
        return None
    return where_trials_run(config.train.num_threads)


def _flush(logger) -> None:
    try:
        logger.flush()
    except Exception as err:  # the outcome stands; the metrics it held are lost, and said so
        logging.getLogger(__name__).warning("could not write the trial's last metrics to MLflow: %s", err)


def _logged(client, run_id: str) -> bool:
    """Whether the run already has its final weights as an artifact."""
    return any(Path(a.path).name == CHECKPOINT_NAME for a in client.list_artifacts(run_id, CHECKPOINT_FOLDER))


def score_final_weights(task: TrialTask, checkpoint: Path) -> dict[str, float]:
    """The study's lm-eval tasks on the run's final weights, on the trial's device (a GPU when it
    asked for one and has CUDA), logged to its child run; `eval/<task>/<metric>` -> value."""
    if not checkpoint.is_file():
        raise RuntimeError(f"training left no final weights at {checkpoint}")
    from evals.in_trial import score_trial  # lm-eval: the optional extra, only a study with evals: needs it

    start = time.perf_counter()
    evals = task.evals
    metrics = score_trial(
        checkpoint,
        evals.tasks,
        limit=evals.limit,
        include_path=evals.include_path,
        batch_size=evals.batch_size,
        device="cuda" if task.worker_gpus > 0 and cuda_available() else "cpu",
        data_root=task.data_root,
        run_id=task.run_id,
        tracking_uri=task.tracking_uri,
    )
    return {**metrics, "evals_s": time.perf_counter() - start}


def classify(err: BaseException) -> str:
    if isinstance(err, TrainingDiverged):
        return "diverged"
    try:
        import torch

        if isinstance(err, torch.OutOfMemoryError):
            return "oom"
    except (ImportError, AttributeError):  # pragma: no cover
        pass
    if isinstance(err, MemoryError) or "out of memory" in str(err).lower():
        return "oom"
    return "error"


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}\n\n" + "".join(traceback.format_exception(err))
