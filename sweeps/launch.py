"""`python -m sweeps.launch studies/<name>.yaml [--set key.path=value ...] [--dry-run]`

Validates the study (exit 2 on any problem, creating nothing), then runs it: Ray Tune trials
(backend ray, the default) or Optuna's `study.optimize` in this process (backend local), one
Lightning training per run, recorded in MLflow and the Optuna storage, and ends with the
Pareto fronts. The same command resumes an interrupted study. Exit status: 0 when the study
ended with at least one completed run (failed runs are recorded and allowed), 2 for a study that
cannot run (nothing created), 4 when no run completed its budget, 130 when interrupted.

This module only parses, locks and dispatches: the study (`sweeps.spec`) owns its grid and
trial configs, the plan (`sweeps.plan`) the Optuna side, the driver (`sweeps.runner`) each run's
records, and the backends (`sweeps.backends`) where runs execute.
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from arch.configtree import ConfigError
from sweeps import backends
from sweeps.spec import Study, load_study

EXIT_CONFIG = 2  # the study file (or the cluster) cannot run it; nothing was created
EXIT_NOTHING_COMPLETED = 4  # the study ran to its end but no run completed its budget
EXIT_INTERRUPTED = 130  # Ctrl-C; the same command resumes


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m sweeps.launch", description=__doc__.split("\n\n")[0])
    p.add_argument("study", help="a study YAML file")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    p.add_argument("--dry-run", action="store_true", help="validate, print the trial plan, start nothing")
    p.add_argument("--print-config", action="store_true", help="print the resolved study and exit")
    p.add_argument("--backend", choices=tuple(backends.BACKENDS), help="same as --set backend=...")
    p.add_argument("--ray-address", help="join this Ray cluster (same as --set ray.address=...)")
    p.add_argument("--max-concurrent", type=int, help="same as --set max_concurrent=...")
    return p.parse_args(argv)


def overrides_of(args) -> list[str]:
    out = list(args.overrides)
    if args.backend:
        out.append(f"backend={args.backend}")
    if args.ray_address:
        out.append(f"ray.address={args.ray_address}")
    if args.max_concurrent:
        out.append(f"max_concurrent={args.max_concurrent}")
    return out


def concurrency(study: Study, cpus: float | None = None, gpus: float | None = None) -> int:
    return backends.get(study.backend).concurrency(study, cpus, gpus)


def _resources_text(resources) -> str:
    each = f"{resources.cpus:g} CPU, {resources.gpus:g} GPU"
    if resources.workers == 1:
        return f"{each} per trial"
    return f"{resources.workers} data-parallel workers x ({each}) per trial"


def plan_text(study: Study) -> str:
    space = study.search_space
    lines = [
        f"study        {study.name}: {study.description}".rstrip(": "),
        f"sampler      {study.sampler.kind} (seed {study.sampler.seed})",
        f"space        {len(space)} parameter(s): {', '.join(space.params) or '-'}",
    ]
    if study.sampler.kind == "grid":
        lines.append(f"grid         {len(study.grid)} point(s)")
    lines += [
        f"points       {study.n_points()} x {study.repeats} seed(s) = {study.n_runs()} trial(s)"
        if study.repeats_max is None
        else f"points       {study.n_points()} x {study.repeats} to {study.repeats_max} seeds (adaptive) ="
        f" {study.n_runs()} to {study.n_runs_max()} trial(s)",
        f"objectives   {', '.join(f'{o.metric} ({o.direction})' for o in study.objectives)}",
        *_verdicts_lines(study),
        _budget_text(study),
        _scheduler_text(study),
        f"backend      {backends.get(study.backend).describe(study)}",
        f"resources    {_resources_text(study.resources)}; {concurrency(study)} at a time",
        f"mlflow       {study.mlflow_uri()} experiment {study.experiment_name!r}",
        f"optuna       {study.storage_url()} study {study.name!r}",
        f"results      {study.results_dir()}",
    ]
    from sweeps.scaling.study import dry_run_lines

    lines += dry_run_lines(study)
    varies = len(set(study.budgets)) > 1
    if study.sampler.kind == "grid":
        for i, point in enumerate(study.planned_points()):
            budget = f"  ({study.trial_config(point).train.tokens} tokens)" if varies else ""
            lines.append(f"  point {i:3d}  " + ", ".join(f"{k}={v}" for k, v in point.items()) + budget)
    return "\n".join(lines)


def _verdicts_lines(study: Study) -> list[str]:
    """The verdicts' rule and each planned look's boundary (sweeps.pareto.verdicts)."""
    from sweeps.pareto.verdicts import looks_text
    from trainers.metrics import is_exact

    tested = [o for o in study.objectives if not is_exact(o.metric)]  # exact: no test
    family = max(study.n_points() - 1, 0) * len(tested)
    first, *looks = looks_text(study.verdict_rule, family)
    return [f"verdicts     {first}", *(f"           {line}" for line in looks)]


def _budget_text(study: Study) -> str:
    """Each run trains for its own point's `train.tokens`: one number, or the range and where."""
    budgets = study.budgets
    if len(set(budgets)) == 1:
        base = study.base
        return (
            f"budget       {budgets[0]} tokens per trial = {base.max_steps} steps of {base.tokens_per_step}"
        )
    where = "each point's below" if study.sampler.kind == "grid" else "over the corners of the space"
    return f"budget       {min(budgets)}..{max(budgets)} tokens per trial ({where})"


def _scheduler_text(study: Study) -> str:
    if study.scheduler.kind != "asha":
        return f"scheduler    {study.scheduler.kind}"
    grace, horizon = study.asha_rungs()
    return (
        f"scheduler    asha on {study.scheduler.metric} ({study.scheduler.mode}): grace {grace} tokens, "
        f"horizon {horizon - 1} tokens (the largest budget: one horizon for every run)"
    )


class LaunchLock:
    """One launch per study and results folder at a time (on this host): results/<name>/launch.lock.
    Launchers sharing an RDB study each use their own `output.dir` (see sweeps.plan)."""

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


def launch(study: Study, fit: Callable | None = None, stream=None, probe=None) -> int:
    """Runs (or resumes) the study; returns the process exit status. `fit` and `probe` replace
    trainers.fit and the cost probe (tests)."""
    stream = stream or sys.stdout
    launch_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-{time.time_ns() % 1000:03d}"
    backend = backends.get(study.backend)
    cluster = backend.connect(study)  # checks the cluster's resources before creating anything
    try:
        with LaunchLock(study.results_dir()):
            return _run(study, fit, stream, launch_id, backend, cluster, probe)
    finally:
        backend.disconnect()


def _run(study, fit, stream, launch_id, backend, cluster, probe) -> int:
    from sweeps import pareto
    from sweeps.plan import Plan
    from sweeps.probe import Probe
    from sweeps.progress import Progress
    from sweeps.runner import Driver
    from sweeps.tracking import Tracker

    plan = Plan(study, launch_id)
    plan.check_fingerprint()  # before anything is recorded: an edited study is refused (exit 2)
    if study.rungs:  # `python -m sweeps.scaling fit results/<name>` fits the folder alone
        from sweeps.scaling.study import save

        save(study)
    recovered = plan.recover()
    tracker = Tracker(study.mlflow_uri(), study.experiment_name, study.name, launch_id)
    from optuna.trial import TrialState

    open_runs = {t.user_attrs.get("mlflow_run_id") for t in plan.trials() if t.state == TrialState.RUNNING}
    orphans = tracker.close_orphans(keep=open_runs, parents=not plan.shared)
    done_before = plan.done()
    n = concurrency(study, *(cluster or (None, None)))
    tracker.start_parent(
        study.to_dict(),
        {"n_points": study.n_points(), "repeats": study.repeats, "n_runs": study.n_runs(),
         "sampler": study.sampler.kind, "backend": study.backend, "concurrency": n,
         "done_before": done_before, "objectives": ",".join(o.metric for o in study.objectives)},
    )  # fmt: skip
    progress = Progress(
        plan.target, done_before, [(o.metric, o.direction) for o in study.objectives], n, stream
    )
    if done_before or recovered or orphans:
        progress.say(
            f"resuming {study.name}: {done_before} of {plan.target} trials done; "
            f"{len(recovered)} interrupted trial(s) marked failed and queued again; "
            f"{len(orphans)} orphaned MLflow run(s) closed"
        )
    progress.say(f"{plan.remaining()} trial(s) to run, {n} at a time; MLflow parent run {tracker.parent_id}")
    if probe is None:
        probe = Probe(study, functools.partial(backend.run_task, study), stream)
    driver = Driver(plan, tracker, progress, probe)
    status, scaling = "FINISHED", []
    try:
        if plan.max_remaining():  # grid: every architecture timed in one interleaved session
            probe.ensure(study.trial_config(p) for p in study.planned_points())
        backend.run(plan, driver, n, fit)
    except (KeyboardInterrupt, SystemExit):  # Ctrl-C (Lightning turns it into SystemExit)
        status = "KILLED"
        progress.say("interrupted; the same command resumes the study")
    except Exception:
        status = "FAILED"
        raise
    finally:
        summary = (
            pareto.analyse(study, plan=plan, tracker=tracker, stream=stream) if status == "FINISHED" else {}
        )
        if status == "FINISHED" and study.rungs:  # the ladder's fits and predictions, after the fronts
            from sweeps.scaling.study import analyse as analyse_ladder

            scaling = analyse_ladder(study, plan.trials(), tracker, stream)
        wall = time.time() - progress.start
        summary["probe_s"] = getattr(probe, "seconds", 0.0)
        tracker.finish_parent(status, {"wall_s": wall, **summary})
    progress.say(progress.summary())
    for line in scaling:
        print(line, file=stream)
    say_links(tracker, stream)
    if status != "FINISHED":
        return EXIT_INTERRUPTED
    return EXIT_NOTHING_COMPLETED if not summary.get("points") else 0


def say_links(tracker, stream) -> None:
    from sweeps.tracking import ui_hint, ui_links

    links = ui_links(tracker.uri, tracker.experiment_id, tracker.parent_id)
    hint = ui_hint(tracker.uri)
    print(f"MLflow runs:       {links['runs']}", file=stream)
    print(f"MLflow parent run: {links['run']}", file=stream)
    if hint:
        print(f"  (start the UI first: {hint})", file=stream)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        study = load_study(args.study, overrides_of(args))
    except ConfigError as err:
        print(err, file=sys.stderr)
        return EXIT_CONFIG
    if args.print_config:
        print(yaml.safe_dump(study.to_dict(), sort_keys=False), end="")
        return 0
    if args.dry_run:
        print(plan_text(study))
        return 0
    try:
        return launch(study)
    except ConfigError as err:  # a cluster without the resources a trial asks for
        print(err, file=sys.stderr)
        return EXIT_CONFIG


if __name__ == "__main__":
    sys.exit(main())
