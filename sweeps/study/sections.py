"""The typed sections of a study file (sampler, objectives, scheduler, resources, probe, verdicts,
evals, ray, output), each parsed and checked by arch.configtree."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

from arch.configtree import Issue, join, not_one_of
from sweeps.study.samplers import SAMPLERS, taking
from trainers import metrics as metrics_table
from trainers.mlflow_names import DEFAULT_TRACKING_URI


def bounded(default, **bounds):
    return dataclasses.field(default=default, metadata=bounds)


@dataclasses.dataclass(frozen=True)
class SamplerConfig:
    KEYS_ELSEWHERE = {"n_trials": "n_trials is a key of the study's top level (beside sampler:); "}

    kind: str = "grid"  # a name of sweeps.study.samplers.SAMPLERS
    seed: int = 0
    n_startup_trials: int | None = None  # tpe, gp: random points before the model kicks in
    population_size: int | None = None  # nsga2

    def check(self, path: str) -> list[Issue]:
        if self.kind not in SAMPLERS:
            return [Issue(join(path, "kind"), not_one_of(self.kind, SAMPLERS))]
        issues = []
        for option in ("n_startup_trials", "population_size"):
            if getattr(self, option) is not None and option not in SAMPLERS[self.kind].options:
                kinds = " and ".join(taking(option))
                issues.append(Issue(join(path, option), f"applies only to {kinds}, not {self.kind}"))
        return issues


@dataclasses.dataclass(frozen=True)
class Objective:
    metric: str = "val_loss"
    direction: Literal["minimize", "maximize"] = "minimize"

    @classmethod
    def prepare(cls, data: Mapping, path: str, issues: list[Issue]) -> dict:
        """Without `direction`, the metric's own (trainers.metrics); an lm-eval task metric has
        none of its own, so the study states it."""
        metric = data.get("metric", cls.metric)
        record = metrics_table.get(metric) if isinstance(metric, str) else None
        if "direction" in data or record is None:
            return dict(data)
        if record.direction is None and record.source == "eval":
            why = "an lm-eval metric's direction is the study's to state (e.g. maximize for acc)"
            issues.append(
                Issue(
                    join(path, "direction"), f"missing for {metric!r}; allowed: minimize or maximize ({why})"
                )
            )
            return None
        if record.direction is None:
            return dict(data)
        return {**data, "direction": record.direction}


def default_objectives() -> list[Objective]:
    return [Objective(name, metrics_table.get(name).direction) for name in metrics_table.DEFAULT_OBJECTIVES]


@dataclasses.dataclass(frozen=True)
class SchedulerConfig:
    """Early stopping with Ray Tune's ASHA on one metric; time is tokens seen."""

    kind: Literal["none", "asha"] = "none"
    metric: str = "val_loss"
    mode: Literal["min", "max"] = "min"
    grace_tokens: int | None = bounded(None, ge=1)  # None: an eighth of the budget
    reduction_factor: float = bounded(3.0, gt=1)


@dataclasses.dataclass(frozen=True)
class ResourcesConfig:
    """What one trial gets: `workers` data-parallel processes (trainers.distributed), each with
    `cpus` and `gpus` (fractions allowed, e.g. gpus: 0.5 packs two single-worker trials per GPU).
    The launcher sets every trial's `train.workers` from `workers`."""

    workers: int = bounded(1, ge=1)
    cpus: float = bounded(1.0, gt=0)
    gpus: float = bounded(0.0, ge=0)
    # GiB of one GPU: the memory plan (sweeps.run.memory) refuses a point whose predicted peak,
    # with headroom, exceeds it. None: the CUDA device's own size when there is one, else no check.
    gpu_memory_gb: float | None = bounded(None, gt=0)

    @property
    def total_cpus(self) -> float:
        return self.workers * self.cpus

    @property
    def total_gpus(self) -> float:
        return self.workers * self.gpus


@dataclasses.dataclass(frozen=True)
class ProbeConfig:
    """The cost probe (sweeps.run.probe): interleaved rounds x timed steps per architecture, with
    every model built once (`max_models` at a time; None: all of a baseline's group at once)."""

    rounds: int = bounded(20, ge=1)
    steps: int = bounded(2, ge=1)
    max_models: int | None = bounded(None, ge=2)  # models that do not fit the device together: 2


@dataclasses.dataclass(frozen=True)
class BudgetConfig:
    """`budget: {time: S | reference}`: every design trains for the same time instead of the same
    tokens. The launcher turns the time into each design's own `train.tokens` at the cost probe's
    speed (sweeps.run.time_budget), so each runs its whole schedule over its own steps and the
    verdicts compare finished runs. `reference`: the time the reference design needs for
    `trial.train.tokens`; a number: that many seconds of training steps at the probe's speed.
    None (the default): every design trains `train.tokens`."""

    time: float | Literal["reference"] | None = None

    def check(self, path: str) -> list[Issue]:
        if isinstance(self.time, float | int) and not isinstance(self.time, bool) and self.time <= 0:
            return [Issue(join(path, "time"), f"given {self.time!r}; allowed: seconds > 0 or 'reference'")]
        return []


@dataclasses.dataclass(frozen=True)
class VerdictsConfig:
    """How the paired verdicts against the reference are reached (sweeps.report.verdicts): the
    level, the adjustment over the family of points x objectives compared with the reference, and
    how adaptive seeds' planned looks spend the error (sweeps.report.sequential)."""

    level: float = bounded(0.95, ge=0.5, lt=1)
    family: Literal["holm", "bonferroni", "none"] = "holm"
    spending: Literal["obrien_fleming", "pocock"] = "obrien_fleming"


@dataclasses.dataclass(frozen=True)
class EvalsConfig:
    """lm-evaluation-harness tasks scored on each trial's final weights, in the trial's worker and
    on its device (sweeps.run.worker -> evals.in_trial); every task metric is logged to the child
    run as `eval/<task>/<metric>` and may be an objective. What needs lm-eval itself or the files
    (lm-eval installed, the task folder, task names, datasets offline, each objective's direction)
    is checked at launch (sweeps.run.eval_checks)."""

    tasks: list[str] = dataclasses.field(default_factory=list)  # lm-eval task names or suites (evals.suites)
    limit: int | None = bounded(None, ge=1)  # documents per task (None: every document)
    include_path: str | None = (
        None  # a folder of task YAMLs (local data), as `python -m evals --include-path`
    )
    batch_size: int = bounded(8, ge=1)
    every: Literal["end"] = "end"  # when: on the final weights (the one time there is today)

    def check(self, path: str) -> list[Issue]:
        issues = []
        if not self.tasks or not all(isinstance(t, str) and t.strip() for t in self.tasks):
            issues.append(
                Issue(join(path, "tasks"), f"given {self.tasks!r}; allowed: lm-eval task names or suites")
            )
        if len(set(self.tasks)) != len(self.tasks):
            issues.append(Issue(join(path, "tasks"), f"given {self.tasks!r}; each task at most once"))
        return issues


@dataclasses.dataclass(frozen=True)
class RayConfig:
    address: str | None = None  # None: start Ray locally; "auto" or ray://host:port joins a cluster
    num_cpus: int | None = bounded(None, ge=1)  # local Ray only; None: every CPU of this machine
    num_gpus: int | None = bounded(None, ge=0)  # local Ray only; None: every GPU of this machine
    temp_dir: str | None = None  # Ray's session files (None: Ray's default under /tmp)
    # Reuse trial processes (saves a new worker's start-up and imports, several seconds a trial);
    # nothing a trial measures depends on a fresh process. A shared study never reuses
    # (sweeps.run.backends.ray.backend).
    reuse_actors: bool = True
    # Local Ray only: keep the local Ray running after the launch for the next ones, which join it
    # (its start is most of a launch's fixed cost); `python -m sweeps.launch --stop-ray` ends it
    # (sweeps.run.backends.ray.kept).
    keep: bool = False


@dataclasses.dataclass(frozen=True)
class OutputConfig:
    """Where results go. Relative paths are taken from the working directory of the launch."""

    mlflow_uri: str = DEFAULT_TRACKING_URI
    experiment: str | None = None  # None: the study name
    storage: str | None = None  # Optuna: None -> journal file results/<name>/optuna.journal; or an RDB URL
    dir: str = "results"  # results/<name>/: the Optuna journal, Ray's trial folders, the lock
    data_root: str | None = None  # passed to trainers.fit (corpus caches, token shards)
    checkpoints: bool = (
        True  # keep each trial's final weights (artifact trainers.mlflow_names.CHECKPOINT_ARTIFACT)
    )
    # MLflow's system metrics (system/*: GPU utilisation and memory, CPU, disk, network, every
    # 10 s) in each trial's run: auto = on for a trial that trains on CUDA, off on CPU (where they
    # only add noise beside the exact peak_mem_mb); on (a GPU study only); off.
    system_metrics: Literal["auto", "on", "off"] = "auto"
