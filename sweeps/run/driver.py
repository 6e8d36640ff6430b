"""The driver side of one run, shared by both backends: open the child run, record the outcome.

task = driver.begin(run)          # MLflow child run + params + resolved config; progress line;
                                  # the cost probe times the run's architecture if it is new;
                                  # `budget.time`: its tokens for the time (sweeps.run.time_budget);
                                  # a run with a checkpoint to resume reopens its child run
                                  # (sweeps.run.resume)
... the worker trains (sweeps.run.worker.execute) ...
driver.end(run, outcome)          # the probe's tokens_per_s joins the trial's metrics; MLflow
                                  # status/metrics/error, Optuna user attrs; values or None
driver.flush()                    # after the last run, before the report reads MLflow

MLflow requests that nothing waits on (a child's params and config, its final metrics and end)
are made in order on one thread of their own: with Ray they were most of the Tune loop's time
a trial (each request waits on SQLite's lock while trials write their metrics), which held up
every slot's next trial (docs/bench/scale.md, "Dozens at once"). The run itself is created at
once: the trial needs its id. A run's end is held on disk until it lands
(sweeps.run.pending_finishes): Optuna is told before it, and a kill in between loses none of it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from concurrent.futures import Future, ThreadPoolExecutor

from sweeps.report.costs import OWN_SPEED
from sweeps.run import resume
from sweeps.run.eval_checks import include_path
from sweeps.run.pending_finishes import PendingFinishes
from sweeps.run.plan import Plan, RunSpec
from sweeps.run.progress import Progress
from sweeps.run.time_budget import TimeBudget
from sweeps.run.tracking import Tracker
from sweeps.run.worker import Outcome, TrialTask
from sweeps.study.run_record import INTERRUPTED, RunRecord
from trainers.metrics import TOKENS_PER_S


class Driver:
    def __init__(self, plan: Plan, tracker: Tracker, progress: Progress, probe=None):
        self.plan = plan
        self.probe = probe
        self.tracker = tracker
        self.progress = progress
        self.run_ids: dict[int, str] = {}
        self.began: dict[int, float] = {}
        self.folders: dict[int, object] = {}  # run number -> its checkpoint folder (or None)
        evals = plan.study.evals  # its task folder absolute: a Ray trial has its own working directory
        self.evals = evals and dataclasses.replace(evals, include_path=include_path(evals))
        self.time_budget = TimeBudget(plan.study, probe) if plan.study.budget.time is not None else None
        self.writes: ThreadPoolExecutor | None = None
        self.pending: list[Future] = []
        self.held = PendingFinishes(plan.study.results_dir())

    def __getstate__(self):  # Ray Tune pickles its searcher (and so this) with the Tuner
        return {**self.__dict__, "writes": None, "pending": []}

    def later(self, fn, *args, **kwargs) -> None:
        """`fn(*args, **kwargs)` on the MLflow thread, after the requests handed to it before."""
        if self.writes is None:
            self.writes = ThreadPoolExecutor(max_workers=1, thread_name_prefix="satsweep-mlflow")
        self.pending.append(self.writes.submit(fn, *args, **kwargs))
        self.pending = [f for f in self.pending if not f.done() or f.exception() is not None]

    def flush(self) -> None:
        """Waits for every request handed to `later` and ends the thread (`exit_now` joins every
        thread). One that failed leaves its run as it was (RUNNING runs are closed by the next
        launch, `Tracker.close_orphans`): said, not raised."""
        pending, self.pending = self.pending, []
        if self.writes is not None:
            self.writes.shutdown(wait=True)
            self.writes = None
        for future in pending:
            err = future.exception()
            if err is not None:
                logging.getLogger(__name__).warning("an MLflow write of a trial failed: %s", err)

    def begin(self, run: RunSpec) -> TrialTask:
        config = self.plan.trial_config(run)
        expected = {}
        if self.probe is not None:
            self.probe.ensure([config])
            expected = self.probe.metrics(config)
        if self.time_budget is not None:  # equal time: a new config with this design's own tokens
            config = self.time_budget.config(config)
        resolved = config.to_dict()
        design = config.model.residual.descriptors()
        folder = resume.checkpoint_folder(self.plan.study, run, config)
        previous = resume.resumable(folder)
        if previous is not None:
            run_id, checkpoint = previous
            self.tracker.reopen_child(run_id, run.number, checkpoint.name)
            RunRecord.write(run.trial, resumed_from=checkpoint.name)
            self.progress.say(f"trial {run.number} resumes from {checkpoint.name} (MLflow run {run_id})")
        else:
            shown = {**run.point, **run.overrides}  # a confirming run's tuned value is one of its params
            stage = {"sweep.stage": run.stage or "verdict"} if self.plan.study.tune is not None else {}
            run_id = self.tracker.start_child(
                run.number, shown, run.seed, run.point_id, resolved, {**design, **stage}, later=self.later
            )
            resume.forget(folder)  # checkpoints without their run: started afresh
            resume.remember(folder, run_id)
        self.folders[run.number] = folder
        RunRecord.write(run.trial, mlflow_run_id=run_id)
        self.run_ids[run.number] = run_id
        self.began[run.number] = time.time()
        self.progress.started(run.number, run.point, run.seed)
        return TrialTask(
            number=run.number,
            run_id=run_id,
            tracking_uri=self.tracker.uri,
            config=config,
            data_root=self.plan.study.output.data_root,
            keep_checkpoint=self.plan.study.output.checkpoints,
            timeout_s=self.plan.study.trial_timeout(config, expected.get(TOKENS_PER_S)),
            worker_cpus=self.plan.study.resources.cpus,
            worker_gpus=self.plan.study.resources.gpus,
            system_metrics=self.plan.study.output.system_metrics,
            checkpoint_dir=str(folder) if folder is not None else None,
            evals=self.evals,
        )

    def end(self, run: RunSpec, outcome: Outcome) -> list[float] | None:
        """Records the outcome; returns the objective values when the run counts for the fronts."""
        values = None
        status, error = outcome.status, outcome.error
        if self.probe is not None and outcome.metrics:
            config = self.plan.trial_config(run)
            if status == "ok":  # a study whose speed is its trials' own (sweeps.run.probe)
                self.probe.record(config, outcome.metrics, outcome.machine)
            outcome.metrics.update(self.probe.metrics(config))
        if status == "ok":
            values = self.plan.values(outcome.metrics)
            if values is None:
                missing = [o.metric for o in self.plan.study.objectives if o.metric not in outcome.metrics]
                status, error = "error", f"objective metrics not reported: {', '.join(missing)}"
        own = outcome.metrics.get(OWN_SPEED) if outcome.metrics else None
        if own is not None and math.isfinite(own):  # the report sets it beside the probe's ratio
            RunRecord.write(run.trial, train_tokens_per_s=own)
        wall = time.time() - self.began.pop(run.number, time.time())
        RunRecord.write(run.trial, status=status, train_s=round(outcome.wall_s, 2), wall_s=round(wall, 2))
        if status not in ("ok", "pruned"):
            RunRecord.write(run.trial, fail_reason=status, error=error[:2000])
        run_id = self.run_ids.pop(run.number)
        resume.forget(self.folders.pop(run.number, None))  # ended: nothing to resume
        curves = outcome.unwritten  # the logger's last metrics, if held
        end = (run_id, status, dict(outcome.metrics), error, wall, curves)
        self.later(self._finish, self.held.hold(*end), *end)  # on disk before Optuna is told
        self.progress.total = self.plan.target  # adaptive seeds may have planned more runs
        self.progress.finished(run.number, run.point, status, outcome.metrics, wall, error, outcome.wall_s)
        return values

    def _finish(self, held, run_id, status, metrics, error, wall_s, curves) -> None:
        self.tracker.finish_child(run_id, status, metrics, error, wall_s=wall_s, curves=curves)
        self.held.done(held)

    def interrupt(self, run: RunSpec, reason: str = "launch interrupted") -> None:
        RunRecord.write(run.trial, fail_reason=INTERRUPTED)
        self.plan.requeue(run)
        self.progress.running.discard(run.number)
        self.folders.pop(run.number, None)  # kept: the next launch resumes from its checkpoints
        run_id = self.run_ids.pop(run.number, None)
        if run_id is not None:
            self.later(self.tracker.finish_child, run_id, "interrupted", {}, f"interrupted: {reason}")
