"""The Optuna side of a study: storage, sampler, the run plan and resume bookkeeping.

One Optuna trial is one run of one point with one seed. Runs of a point share its params and
its `point` user attribute; `repeat` r uses seed `trial.seed + r`. The grid is enqueued
(every point x repeat exactly once); for other samplers, the first run of a sampled point
enqueues its other repeats, so a point's seeds are always run as one set.

Grid runs are enqueued seed-major (every point with seed 0 first). Each run's stored
attributes are its RunRecord, and when it counts as done is `is_done` (sweeps.study.run_record).
Journal storage (one launch per study at a time, see `launch.lock`): a RUNNING trial
found at start-up belongs to an earlier launch that died: it is marked FAIL with reason
`interrupted` and its point and seed are enqueued again, so the total ends exactly at
n_points x repeats.

RDB storage (SQLite, PostgreSQL): several launchers may share one study. Open trials carry
Optuna heartbeats; only trials whose heartbeat went stale are failed and their run queued
again (`sweeps.run.storage` holds the storage, heartbeat and lock mechanics). `Plan.claim` takes
the next run under a study lock (a PostgreSQL advisory lock; a file lock beside a SQLite or
journal file): enqueueing the grid,
counting and asking happen as one step, so two launchers never run one (point, repeat) twice
and together stop at exactly n_points x repeats.
"""

from __future__ import annotations

import dataclasses
import warnings

import optuna
from optuna.trial import TrialState

from arch.configtree import ConfigError, Issue
from sweeps.run import adaptive
from sweeps.run import storage as storages
from sweeps.study import Study, samplers, tuning
from sweeps.study.run_key import RunKey
from sweeps.study.run_record import INTERRUPTED, RunRecord, is_done
from sweeps.study.space import point_id
from sweeps.study.study_plan import StudyPlan

WAIT = "wait"  # Plan.claim: nothing to claim now, but other launchers' runs may still fail


def sampler(study: Study):
    return samplers.build(study.sampler)


def directions(study: Study) -> list[str]:
    return [o.direction for o in study.objectives]


@dataclasses.dataclass
class RunSpec:
    """One asked run: the Optuna trial, its point, repeat and seed (`key`: what the run is, the
    StudyPlan's name for it)."""

    trial: optuna.Trial
    point: dict
    point_id: str
    repeat: int
    seed: int
    stage: str | None = None  # TUNE for a tune run (`tune:`); None: a run the verdicts read
    overrides: dict = dataclasses.field(default_factory=dict)  # a confirming run's tuned value

    @property
    def number(self) -> int:
        return self.trial.number

    @property
    def key(self) -> RunKey:
        return RunKey.of(self.point, self.stage, self.overrides)


class Plan:
    """The Optuna side of a StudyPlan's runs (`resolved`: sweeps.study.study_plan)."""

    def __init__(self, resolved: StudyPlan, launch: str):
        study = resolved.study
        self.resolved = resolved
        self.study = study
        self.launch = launch
        self.space = study.search_space
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        self.storage = storages.open_storage(study.storage_url())
        self.optuna = optuna.create_study(
            study_name=study.name,
            storage=self.storage,
            sampler=sampler(study),
            directions=directions(study),
            load_if_exists=True,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            self.optuna.set_metric_names([o.metric for o in study.objectives])
        self.shared = storages.shared(self.storage)

    @property
    def target(self) -> int:
        """Runs the study makes: every point's seeds (adaptive: as decided so far)."""
        if not self.study.seeds.adaptive:
            return self.study.n_runs() + self.study.n_tune_runs()
        return sum(adaptive.seed_counts(self).values())

    def max_remaining(self) -> int:
        """The most runs still to come (adaptive seeds: if every point went to `max`; `tune:` its
        tune stage too)."""
        return max(0, self.study.n_runs_max() + self.study.n_tune_runs() - self.done())

    def lock(self):
        return storages.study_lock(self.storage, self.study.storage_url(), self.study.name)

    def check_fingerprint(self, source: str | None = None) -> None:
        """Refuses to resume a study whose defining parts changed since runs of it finished
        (one front would mix two experiments): ConfigError naming the changed keys. Records the
        fingerprint while the study has no finished run."""
        now = self.study.fingerprint()
        before = self.optuna.user_attrs.get("fingerprint")
        if before is None or not self.done():
            self.optuna.set_user_attr("fingerprint", now)
            return
        changed = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
        if not changed:
            return
        issues = [
            Issue(key, f"was {before.get(key, '(absent)')}, now {now.get(key, '(absent)')}")
            for key in changed
        ]
        issues.append(
            Issue(
                "name",
                f"study {self.study.name!r} has {self.done()} finished run(s) of the earlier version; to "
                f"run the new one give it a new name, or remove {self.study.results_dir()} (and its "
                "MLflow experiment) to start over",
            )
        )
        raise ConfigError(issues, source)

    # --- start-up ---------------------------------------------------------------------------
    def recover(self) -> list[int]:
        """Journal: marks RUNNING trials of earlier launches FAIL (interrupted) and enqueues them
        again. RDB (shared): only trials whose heartbeat is stale; other launchers' live trials stay."""
        if self.shared:
            with self.lock():
                return self._fail_stale()
        recovered = []
        for t in self.optuna.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            storages.mark_failed(self.storage, t, INTERRUPTED)
            recovered.append(t.number)
            repeat = RunRecord.of(t).repeat
            if self.study.sampler.kind != "grid" and repeat is not None:
                attrs = RunRecord.attrs(repeat=repeat, point=point_id(t.params))
                self.optuna.enqueue_trial(dict(t.params), user_attrs=attrs)
        if self.study.sampler.kind == "grid":
            self._enqueue_grid()
        return recovered

    def _fail_stale(self) -> list[int]:
        before = {t.number for t in self.trials() if t.state == TrialState.RUNNING}
        storages.fail_stale(self.optuna)
        stale = sorted(t.number for t in self.trials() if t.number in before and t.state == TrialState.FAIL)
        if self.study.sampler.kind == "grid":
            self._enqueue_grid()
        return stale

    def claim(self) -> RunSpec | str | None:
        """The next run of the study, taken atomically among launchers; WAIT when every run is
        taken but some still run elsewhere (they may go stale and come back); None when done."""
        with self.lock():
            if self.shared:
                self._fail_stale()
            elif self.study.sampler.kind == "grid":
                self._enqueue_grid()
            trials = self.trials()
            waiting = sum(t.state == TrialState.WAITING for t in trials)
            running = sum(t.state == TrialState.RUNNING for t in trials)
            done = sum(is_done(t) for t in trials)
            if waiting or (self.study.sampler.kind != "grid" and done + running < self.target):
                with warnings.catch_warnings():  # ask/tell with heartbeats: we beat (storage.Heartbeats)
                    warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
                    run = self.ask()
                if self.shared:  # alive from now on; the launcher keeps beating (storage.Heartbeats)
                    storages.beat(self.storage, run.trial)
                return run
            return WAIT if running else None

    def requeue(self, run: RunSpec) -> None:
        """An interrupted run of a sampled point is run again (the grid re-enqueues at start-up)."""
        if self.study.sampler.kind != "grid":
            self.optuna.enqueue_trial(run.point, user_attrs=RunRecord.queued(run.key, run.repeat))

    def _enqueue_grid(self) -> None:
        trials = self.optuna.get_trials(deepcopy=False)
        taken = {
            (r.point, r.repeat)
            for t in trials
            if is_done(t) or t.state in (TrialState.WAITING, TrialState.RUNNING)
            for r in [RunRecord.of(t)]
        }
        counts = adaptive.extend(self, trials)  # adaptive seeds: the next round, once decided
        chosen = self._enqueue_tuning(trials, taken)
        # Seed-major: every point with seed 0, then every point with seed 1, ...: a slow minute
        # of the machine is spread over the designs instead of landing on one point's seeds.
        for r in range(max(counts.values(), default=0)):
            for key in self.resolved.grid:
                pid = key.point_id
                if r >= counts[pid] or (pid, r) in taken:
                    continue
                if self.study.tune is not None:  # its confirming runs wait for its tune runs
                    if chosen.get(pid) is None:
                        continue
                    key = RunKey.of(key.point, overrides={self.study.tune.path: chosen[pid].value})
                self.optuna.enqueue_trial(key.point, user_attrs=RunRecord.queued(key, r))

    def _enqueue_tuning(self, trials, taken) -> dict:
        """`tune:`: enqueues the tune runs not yet taken (seed-major); returns each point's choice
        so far (`sweeps.study.tuning.choices`: None while its tune runs are not all done)."""
        if self.study.tune is None:
            return {}
        for r in range(self.study.tune.seeds):
            for key in self.resolved.tune:
                if (key.point_id, r) not in taken:
                    self.optuna.enqueue_trial(key.point, user_attrs=RunRecord.queued(key, r))
        return tuning.choices(self.study, trials)

    def enqueue_next_round(self) -> int:
        """Grid: enqueues what is planned (adaptive: the next round once one is decided); returns
        how many runs wait."""
        with self.lock():
            self._enqueue_grid()
            return sum(t.state == TrialState.WAITING for t in self.trials())

    # --- counts -----------------------------------------------------------------------------
    def trials(self):
        return self.optuna.get_trials(deepcopy=False)

    def done(self) -> int:
        return sum(is_done(t) for t in self.trials())

    def remaining(self) -> int:
        return max(0, self.target - self.done())

    # --- one run ----------------------------------------------------------------------------
    def ask(self) -> RunSpec:
        return self.prepare(self.optuna.ask())

    def prepare(self, trial: optuna.Trial) -> RunSpec:
        """Samples (or reads the enqueued) point of an asked trial and fixes its repeat and seed."""
        record = RunRecord.of(trial)
        planned = self.resolved.planned(record.point or "")  # an enqueued grid point or tune run
        point = self.space.suggest(trial, planned and planned.point)
        key = record.key(point)
        repeat = record.repeat
        if repeat is None:  # a sampled point's first run: its other seeds are enqueued with it
            repeat = 0
            RunRecord.write(trial, repeat=0)
            for r in range(1, self.study.repeats):
                self.optuna.enqueue_trial(point, user_attrs=RunRecord.queued(key, r))
        seed = self.resolved.seed(key, int(repeat))
        RunRecord.write(trial, point=key.point_id, seed=seed, launch=self.launch)
        return RunSpec(trial, point, key.point_id, int(repeat), seed, key.stage, key.overrides)

    def trial_config(self, run: RunSpec):
        """The resolved `TrialConfig` of a run (its point, split, seed and tuned value)."""
        return self.resolved.config(run.key, run.seed)

    def values(self, metrics: dict) -> list[float] | None:
        out = []
        for o in self.study.objectives:
            if o.metric not in metrics:
                return None
            out.append(float(metrics[o.metric]))
        return out
