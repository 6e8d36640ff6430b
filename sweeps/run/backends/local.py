"""Backend local: Optuna's `study.optimize` in the launcher's process, one run at a time."""

from __future__ import annotations

import gc
import signal
import threading
import time

from arch.configtree import Issue
from sweeps.run.backends.base import Backend
from sweeps.run.worker import execute
from sweeps.study.run_record import INTERRUPTED, RunRecord


class StopFlag:
    """Ctrl-C: raises KeyboardInterrupt and remembers it, so that an interrupt Python swallows
    (one landing in a weakref callback or a __del__) still stops the launch after the current trial."""

    def __init__(self):
        self.set = False
        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum, frame):
        self.set = True
        raise KeyboardInterrupt

    def restore(self) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None


class Collector:
    """Optuna's `gc_after_trial`, amortised: a full collection frees what a trial's reference cycles
    hold (a Lightning trainer keeps its model alive until then), but costs a fraction of a second
    in a process holding torch, Ray and MLflow, growing with the study: after every trial that ran
    `LONG_S` or more (or failed), otherwise once the short trials since the last collection have
    run 1 / `SHARE` times as long as it took (before the first: `FIRST_S`), so that collections
    cost thousands of short trials about `SHARE` of their time (every 20th trial: 0.29 s each,
    12 ms a 0.1 s trial; issue 52)."""

    LONG_S = 5.0
    SHARE = 0.02
    FIRST_S = 0.25  # what one took in a launcher holding torch and MLflow (0.23-0.29 s, 2 cores)

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.since = 0.0  # seconds of short trials since the last collection
        self.cost = self.FIRST_S  # the last collection's seconds

    def __call__(self, study, trial) -> None:
        start, end = trial.datetime_start, trial.datetime_complete
        took = (end - start).total_seconds() if start is not None and end is not None else None
        self.since += took or 0.0
        if took is None or took >= self.LONG_S or self.since * self.SHARE >= self.cost:
            began = self.clock()
            gc.collect()
            self.cost, self.since = self.clock() - began, 0.0


class LocalBackend(Backend):
    """Every run in the launcher's process, one at a time: no scheduler, at most one GPU."""

    name = "local"

    def check(self, study) -> list[Issue]:
        issues = []
        if (study.max_concurrent or 1) > 1:
            issues.append(
                Issue("max_concurrent", f"given {study.max_concurrent}; backend local runs 1 at a time")
            )
        if study.resources.gpus not in (0, 1):
            issues.append(
                Issue("resources.gpus", f"given {study.resources.gpus}; backend local allows 0 or 1")
            )
        return issues

    def concurrency(self, study, cpus=None, gpus=None) -> int:
        return 1

    def connect(self, study) -> None:
        """Nothing to start; this machine's resources were checked before the launch."""
        return None

    def run(self, plan, driver, concurrency: int = 1, fit=None) -> None:
        """Runs the remaining runs with `study.optimize`; Ctrl-C stops after the current run."""
        import optuna

        class TrialFailed(Exception):
            pass

        def objective(trial: optuna.Trial):
            run = None
            try:  # Ctrl-C may land before the run is begun: Optuna fails the trial, we say why
                run = plan.prepare(trial)
                outcome = execute(driver.begin(run), fit=fit, hand_back=True)  # one request fewer a trial
            except BaseException:
                if run is None:
                    RunRecord.write(trial, fail_reason=INTERRUPTED)
                else:
                    driver.interrupt(run)
                raise
            values = driver.end(run, outcome)
            if values is None:
                raise TrialFailed(outcome.error.splitlines()[0] if outcome.error else outcome.status)
            return values

        grid = plan.study.sampler.kind == "grid"
        stop = StopFlag()
        collect = Collector()
        try:
            # grid: the enqueued runs, round after round (adaptive seeds decide the next one when
            # one ends); sampled: the remaining count
            while n := plan.enqueue_next_round() if grid else plan.remaining():
                plan.optuna.optimize(
                    objective,
                    n_trials=n,
                    catch=(TrialFailed,),
                    callbacks=[lambda study, trial: study.stop() if stop.set else None, collect],
                )
                if stop.set or not grid:
                    break
        finally:
            stop.restore()
        if stop.set:
            raise KeyboardInterrupt

    def run_task(self, study, fn, *args):
        """`fn(*args)` here: the launcher's process is where local trials run."""
        return fn(*args)

    def disconnect(self) -> None:
        pass
