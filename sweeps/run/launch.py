"""`python -m sweeps.launch studies/<name>.yaml [--set key.path=value ...] [--dry-run]`

Validates the study (exit 2 on any problem, creating nothing), then runs it: Ray Tune trials
(backend ray, the default) or Optuna's `study.optimize` in this process (backend local), one
Lightning training per run, recorded in MLflow and the Optuna storage, and ends with the
Pareto fronts. The same command resumes an interrupted study. Exit status: 0 when the study
ended with at least one completed run (failed runs are recorded and allowed), 2 for a study that
cannot run (nothing created), 4 when no run completed its budget, 130 when interrupted.

This module only parses, locks and dispatches: the study (`sweeps.study`) owns its grid and is
resolved once, at load, into the StudyPlan of its runs (`sweeps.study.study_plan`; the memory plan
returns a new one with each run's micro-batch split), the dry run (`sweeps.run.dry_run`) prints
it, the plan (`sweeps.run.plan`) the Optuna side, the driver (`sweeps.run.driver`) each run's
records, the backends (`sweeps.run.backends`) where runs execute, and `sweeps.report` the fronts
and ladder fits.
"""

from __future__ import annotations

import argparse
import atexit
import fcntl
import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import psutil
import yaml
from optuna.trial import TrialState

from arch.configtree import ConfigError
from sweeps.report.analysis import report_fronts
from sweeps.report.history import log_history
from sweeps.report.scaling.of_study import report_ladder
from sweeps.run import backends
from sweeps.run.backends.ray import kept
from sweeps.run.driver import Driver
from sweeps.run.dry_run import plan_text
from sweeps.run.memory import memory_plan, table_lines
from sweeps.run.pending_finishes import PendingFinishes
from sweeps.run.plan import Plan
from sweeps.run.preflight import preflight
from sweeps.run.probe import Probe, speed_from_trials
from sweeps.run.probe_device import resident_on_device
from sweeps.run.progress import Progress
from sweeps.run.tracking import Tracker, open_store, ui_hint, ui_links
from sweeps.study import Study, load_study
from sweeps.study.load import save_resolved
from sweeps.study.run_record import RunRecord
from sweeps.study.study_plan import StudyPlan, resolve

EXIT_CONFIG = 2  # the study file (or the cluster) cannot run it; nothing was created
EXIT_NOTHING_COMPLETED = 4  # the study ran to its end but no run completed its budget
EXIT_INTERRUPTED = 130  # Ctrl-C; the same command resumes


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m sweeps.launch", description=__doc__.split("\n\n")[0])
    p.add_argument("study", nargs="?", help="a study YAML file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="change one key of the study, its value read as YAML (repeatable): "
                   "--set trial.train.tokens=20000")  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="validate, print the trial plan, start nothing")
    p.add_argument("--print-config", action="store_true", help="print the resolved study and exit")
    p.add_argument("--backend", choices=tuple(backends.BACKENDS), help="same as --set backend=...")
    p.add_argument("--ray-address", help="join this Ray cluster (same as --set ray.address=...)")
    p.add_argument("--max-concurrent", type=int, help="same as --set max_concurrent=...")
    p.add_argument("--keep-ray", action="store_true", help="keep the local Ray for later launches (ray.keep)")
    p.add_argument("--stop-ray", action="store_true", help="end the kept local Ray (no study: only that)")
    args = p.parse_args(argv)
    if args.study is None and not args.stop_ray:
        p.error("a study YAML file is required (or --stop-ray alone)")
    return args


def load(path, overrides=()) -> StudyPlan:
    """The study (`sweeps.study.load_study`, which parses it the same on any machine) resolved into
    its runs, then its preflight (`sweeps.run.preflight`: what its backend, this machine, its files
    and lm-eval refuse): every problem a launch can know before it starts anything, as one
    ConfigError naming the file. The memory plan measures this machine (a GPU study): the plan
    returned is the one with each run's split."""
    study = load_study(path, overrides)
    plan = resolve(study)
    issues = preflight(study)
    if not issues:  # the memory plan measures: only for a study that can otherwise run
        issues, plan = memory_plan(plan, stream=sys.stderr)
    if issues:
        raise ConfigError(issues, str(path))
    return plan


def overrides_of(args) -> list[str]:
    out = list(args.overrides)
    if args.backend:
        out.append(f"backend={args.backend}")
    if args.ray_address:
        out.append(f"ray.address={args.ray_address}")
    if args.max_concurrent:
        out.append(f"max_concurrent={args.max_concurrent}")
    if args.keep_ray:
        out.append("ray.keep=true")
    return out


class LaunchLock:
    """One launch per study and results folder at a time (on this host): results/<name>/launch.lock.
    Launchers sharing an RDB study each use their own `output.dir` (see sweeps.run.plan)."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "launch.lock"
        self.handle = open(self.path, "a+")  # noqa: SIM115 (held for the launch)

    def __enter__(self):
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.handle.seek(0)
            raise SystemExit(  # noqa: B904
                f"another launch of this study is running (lock {self.path}, {self.handle.read()})"
            )
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(f"pid {os.getpid()}")
        self.handle.flush()
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def launch(plan: StudyPlan | Study, fit: Callable | None = None, stream=None, probe=None) -> int:
    """Runs (or resumes) the study of `plan` (a Study is resolved here, without the machine's checks
    that `load` makes); returns the process exit status. `fit` and `probe` replace trainers.fit and
    the cost probe (tests)."""
    resolved = plan if isinstance(plan, StudyPlan) else resolve(plan)
    study = resolved.study
    stream = stream or sys.stdout
    launch_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-{time.time_ns() % 1000:03d}"
    backend = backends.get(study.backend)
    # The launch's fixed costs, each a metric of the parent run: the process's start (imports and
    # loading the study), starting or joining the backend, the probe (probe_s), the fronts' report.
    costs = {"start_s": time.time() - psutil.Process().create_time()}
    connect = time.time()
    # MLflow's store opens (its imports, a new database's tables) while Ray starts, where the
    # machine was checked at load; a cluster's resources are checked before anything is created.
    # A new SQLite store is a copy of an empty one (sweeps.run.store_template), not MLflow's migrations.
    store = threading.Thread(target=open_store, args=(study.mlflow_uri(),), daemon=True)
    if backend.checks_machine(study):
        store.start()
    try:
        cluster = backend.connect(study)
    finally:
        if store.is_alive():
            store.join()  # one store set-up at a time (the tracker's comes next)
    costs["connect_s"] = time.time() - connect
    try:
        with LaunchLock(study.results_dir()):
            return _run(resolved, fit, stream, launch_id, backend, cluster, probe, costs)
    finally:
        backend.disconnect()


def _run(resolved, fit, stream, launch_id, backend, cluster, probe, costs: dict) -> int:
    study = resolved.study
    plan = Plan(resolved, launch_id)
    plan.check_fingerprint()  # before anything is recorded: an edited study is refused (exit 2)
    if study.rungs:  # `python -m sweeps.scaling fit results/<name>` fits the folder alone
        save_resolved(study)
    recovered = plan.recover()
    tracker = Tracker(study.mlflow_uri(), study.experiment_name, study.name, launch_id)
    running = [t for t in plan.trials() if t.state == TrialState.RUNNING]
    open_runs = {RunRecord.of(t).mlflow_run_id for t in running}
    ended = PendingFinishes(study.results_dir()).write_left(tracker)  # runs' ends a kill cut off
    orphans = tracker.close_orphans(keep=open_runs, parents=not plan.shared)
    done_before = plan.done()
    n = backend.concurrency(study, *(cluster or (None, None)))
    tracker.start_parent(
        study.to_dict(),
        {"n_points": study.n_points(), "repeats": study.repeats, "n_runs": study.n_runs(),
         "sampler": study.sampler.kind, "backend": study.backend, "concurrency": n,
         "done_before": done_before, "objectives": ",".join(o.metric for o in study.objectives),
         **({"n_tune_runs": study.n_tune_runs()} if study.tune is not None else {})},
    )  # fmt: skip
    progress = Progress(
        plan.target, done_before, [(o.metric, o.direction) for o in study.objectives], n, stream
    )
    if done_before or recovered or orphans:
        progress.say(
            f"resuming {study.name}: {done_before} of {plan.target} trials done; "
            f"{len(recovered)} interrupted trial(s) marked failed and queued again; "
            f"{len(orphans)} orphaned MLflow run(s) closed"
            + (f"; {len(ended)} ended run(s) written to MLflow" if ended else "")
        )
    progress.say(f"{plan.remaining()} trial(s) to run, {n} at a time; MLflow parent run {tracker.parent_id}")
    if probe is None:
        run_task = functools.partial(backend.run_task, study)
        # One architecture: no ratio to pair, so its speed is its trials' own (sweeps.run.probe)
        probe = Probe(study, run_task, stream, resident_on_device(study), speed_from_trials(resolved))
    driver = Driver(plan, tracker, progress, probe)
    status, scaling = "FINISHED", []
    try:
        if plan.max_remaining():  # grid: every architecture timed in one interleaved session
            probe.ensure(resolved.config(key) for key in resolved.grid)
        backend.run(plan, driver, n, fit)
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C (Lightning turns it into SystemExit)
        status = "KILLED"
        progress.say("interrupted; the same command resumes the study")
    except Exception:
        status = "FAILED"
        raise
    finally:
        driver.flush()  # the children's last MLflow writes, before the report reads them
        reporting = time.time()
        summary = (
            report_fronts(study, plan.trials(), tracker=tracker, stream=stream, plan=resolved)
            if status == "FINISHED"
            else {}
        )
        if status == "FINISHED" and study.rungs:  # the ladder's fits and predictions, after the fronts
            scaling = report_ladder(study, plan.trials(), tracker, stream)
        verdict_runs = [t for t in plan.trials() if not RunRecord.of(t).is_tune]  # tune runs: other rates
        if hv := log_history(tracker, study, verdict_runs):  # every launch, interrupted ones too
            print(f"hypervolume history (fixed bounds): {len(hv)} trials, last {hv[-1]:.4f}", file=stream)
        costs["report_s"] = time.time() - reporting
        wall = time.time() - progress.start
        summary["probe_s"] = getattr(probe, "seconds", 0.0)
        tracker.finish_parent(
            status, {"wall_s": wall, **summary, **{f"launch_{k}": v for k, v in costs.items()}}
        )
    progress.say(progress.summary())
    for line in scaling:
        print(line, file=stream)
    say_links(tracker, stream)
    if status != "FINISHED":
        return EXIT_INTERRUPTED
    return EXIT_NOTHING_COMPLETED if not summary.get("points") else 0


def say_links(tracker, stream) -> None:
    links = ui_links(tracker.uri, tracker.experiment_id, tracker.parent_id)
    hint = ui_hint(tracker.uri)
    print(f"MLflow runs:       {links['runs']}", file=stream)
    print(f"MLflow parent run: {links['run']}", file=stream)
    if hint:
        print(f"  (start the UI first: {hint})", file=stream)


def exit_now(code: int) -> NoReturn:
    """Ends the launcher's process with `code` once everything it started has finished: its
    threads are joined, the exit handlers run (Ray's, MLflow's, logging's), the standard streams
    are flushed. Only the interpreter's own teardown is skipped: freeing, one by one, every object
    of a process that holds torch, Ray and MLflow, seconds at the end of every launch (measured in
    docs/bench/launch_costs.md), which the operating system does at once."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    try:
        atexit._run_exitfuncs()  # what the interpreter runs at exit, before its teardown
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.stop_ray:  # before the study: a launch with both runs on a Ray of its own
        print(kept.stop(), file=sys.stderr)
        if args.study is None:
            return 0
    try:
        plan = load(args.study, overrides_of(args))
    except ConfigError as err:
        print(err, file=sys.stderr)
        return EXIT_CONFIG
    if args.print_config:
        print(yaml.safe_dump(plan.study.to_dict(), sort_keys=False), end="")
        return 0
    if args.dry_run:
        print(plan_text(plan))
        return 0
    print("\n".join(table_lines(plan.study, plan.memory)))  # before any trial starts
    try:
        return launch(plan)
    except ConfigError as err:  # a cluster without the resources a trial asks for
        print(err, file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    exit_now(main())
