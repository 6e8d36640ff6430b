"""The study spec: one YAML file -> a typed, validated `Study`.

    name: gate_granularity           # required; names the MLflow experiment and results/<name>/
    extends: base.yaml               # optional; this file overrides only what differs
    trial: {seed, model, data, train}   # the base trial config (trainers.TrialConfig)
    space: {<trial key path>: {choices | low/high/log/step, when}}
    sampler: {kind: grid | random | tpe | nsga2 | gp, seed}
    objectives: [{metric: val_loss, direction: minimize}, ...]
    n_trials, repeats, max_concurrent, scheduler, resources, probe, backend, ray, output
    verdicts: {level: 0.95, family: holm | none, spending: obrien_fleming | pocock}
    margins: {val_loss: 0.01}        # per objective: within +-margin of the reference is `equivalent`
    scaling: {sizes, tokens | tokens_per_param, token_scale, targets}   # a ladder (sweeps.scaling.ladder)

Loading (`load_study`) reads YAML with the safe loader, resolves `extends:` chains, applies
`--set key.path=value` overrides, parses the tree strictly (arch.configtree) and then validates
the base trial config and every point of the search space with `TrialConfig.from_dict`, so a
study that cannot run fails here, naming the file and the full key path, before anything runs.

The `Study` is the one home of what follows from its file: the parsed base trial (`base`), the
search space over that base (`search_space`), the grid (`grid`, computed once with the trial as
its base: validation, the point count, `--dry-run` and the launcher read this one list) and the
resolved trial config of each point and seed (`trial_config`). Nothing else parses `study.trial`.

A `scaling:` section is expanded at load (`sweeps.scaling.ladder.expand`) into one grid parameter,
`rung` (a bundle: each label r0, r1, ... sets the rung's model keys and `train.tokens`), placed
first in the space and crossed with the other parameters and the seeds: every rung is an ordinary
point, so the grid, resume, the fingerprint (the rungs are in `space.rung`), MLflow params and run
names (`rung=r2`) need nothing else. `Study.rungs` keeps the expansion (N, D, FLOPs, epochs).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml

from arch.configtree import (
    ConfigError,
    Issue,
    choices,
    dump,
    join,
    load_yaml,
    parse,
    parse_override,
    set_path,
)
from sweeps import backends
from sweeps.paths import KeyPaths
from sweeps.samplers import SAMPLERS, taking
from sweeps.space import Param, SearchSpace, point_id
from trainers import metrics as metrics_table
from trainers.records import DEFAULT_TRACKING_URI


def _field(default, **bounds):
    return dataclasses.field(default=default, metadata=bounds)


@dataclasses.dataclass(frozen=True)
class SamplerConfig:
    kind: str = "grid"  # a name of sweeps.samplers.SAMPLERS
    seed: int = 0
    n_startup_trials: int | None = None  # tpe, gp: random points before the model kicks in
    population_size: int | None = None  # nsga2

    def check(self, path: str) -> list[Issue]:
        if self.kind not in SAMPLERS:
            return [Issue(join(path, "kind"), f"given {self.kind!r}; allowed: {choices(SAMPLERS)}")]
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
        """Without `direction`, the metric's own (trainers.metrics)."""
        metric = data.get("metric", cls.metric)
        record = metrics_table.get(metric) if isinstance(metric, str) else None
        if "direction" in data or record is None or record.direction is None:
            return dict(data)
        return {**data, "direction": record.direction}


def _default_objectives() -> list[Objective]:
    return [Objective(name, metrics_table.get(name).direction) for name in metrics_table.DEFAULT_OBJECTIVES]


@dataclasses.dataclass(frozen=True)
class SchedulerConfig:
    """Early stopping with Ray Tune's ASHA on one metric; time is tokens seen."""

    kind: Literal["none", "asha"] = "none"
    metric: str = "val_loss"
    mode: Literal["min", "max"] = "min"
    grace_tokens: int | None = _field(None, ge=1)  # None: an eighth of the budget
    reduction_factor: float = _field(3.0, gt=1)


@dataclasses.dataclass(frozen=True)
class ResourcesConfig:
    """What one trial gets: `workers` data-parallel processes (trainers.distributed), each with
    `cpus` and `gpus` (fractions allowed, e.g. gpus: 0.5 packs two single-worker trials per GPU).
    The launcher sets every trial's `train.workers` from `workers`."""

    workers: int = _field(1, ge=1)
    cpus: float = _field(1.0, gt=0)
    gpus: float = _field(0.0, ge=0)

    @property
    def total_cpus(self) -> float:
        return self.workers * self.cpus

    @property
    def total_gpus(self) -> float:
        return self.workers * self.gpus


@dataclasses.dataclass(frozen=True)
class ProbeConfig:
    """The cost probe (sweeps.probe): interleaved rounds x timed steps per architecture, with
    every model built once (`max_models` at a time; None: all of a baseline's group at once)."""

    rounds: int = _field(20, ge=1)
    steps: int = _field(2, ge=1)
    max_models: int | None = _field(None, ge=2)  # models that do not fit the device together: 2


@dataclasses.dataclass(frozen=True)
class VerdictsConfig:
    """How the paired verdicts against the reference are reached (sweeps.pareto.verdicts): the
    level, the adjustment over the family of points x objectives compared with the reference, and
    how adaptive seeds' planned looks spend the error (sweeps.pareto.sequential)."""

    level: float = _field(0.95, ge=0.5, lt=1)
    family: Literal["holm", "none"] = "holm"
    spending: Literal["obrien_fleming", "pocock"] = "obrien_fleming"


@dataclasses.dataclass(frozen=True)
class RayConfig:
    address: str | None = None  # None: start Ray locally; "auto" or ray://host:port joins a cluster
    num_cpus: int | None = _field(None, ge=1)  # local Ray only; None: every CPU of this machine
    num_gpus: int | None = _field(None, ge=0)  # local Ray only; None: every GPU of this machine
    temp_dir: str | None = None  # Ray's session files (None: Ray's default under /tmp)
    # Reuse trial processes (saves a new worker's start-up and imports, several seconds a trial);
    # nothing a trial measures depends on a fresh process. A shared study never reuses (ray.py).
    reuse_actors: bool = True


@dataclasses.dataclass(frozen=True)
class OutputConfig:
    """Where results go. Relative paths are taken from the working directory of the launch."""

    mlflow_uri: str = DEFAULT_TRACKING_URI
    experiment: str | None = None  # None: the study name
    storage: str | None = None  # Optuna: None -> journal file results/<name>/optuna.journal; or an RDB URL
    dir: str = "results"  # results/<name>/: the Optuna journal, Ray's trial folders, the lock
    data_root: str | None = None  # passed to trainers.fit (corpus caches, token shards)
    checkpoints: bool = (
        True  # keep each trial's final weights (artifact trainers.records.CHECKPOINT_ARTIFACT)
    )


@dataclasses.dataclass(frozen=True)
class Study:
    name: str
    description: str = ""
    trial: dict[str, Any] = dataclasses.field(default_factory=dict)
    space: dict[str, Param] = dataclasses.field(default_factory=dict)
    sampler: SamplerConfig = SamplerConfig()
    objectives: list[Objective] = dataclasses.field(default_factory=_default_objectives)
    # The point verdicts compare against, by its params ({model.residual: baseline}); None: the
    # first point whose design is the baseline (kind none).
    reference: dict[str, Any] | None = None
    n_trials: int | None = _field(None, ge=1)  # points to run; None: the whole grid (grid) / 20
    repeats: int = _field(1, ge=1)  # runs per point, seeds trial.seed + 0..repeats-1
    # Adaptive seeds (`repeats: {min: 2, max: 8}` in YAML sets repeats = min and this): after each
    # round, one more seed only for the points still undecided (sweeps.adaptive), up to max.
    repeats_max: int | None = _field(None, ge=1)
    verdicts: VerdictsConfig = VerdictsConfig()
    # Equivalence margins per objective ({val_loss: 0.01}): a point whose adjusted difference
    # interval lies inside +-margin is `equivalent`; one it does not decide is `undecided`.
    margins: dict[str, float] = dataclasses.field(default_factory=dict)
    # A scaling ladder (sweeps.scaling.ladder): its rungs become the grid parameter RUNG at load.
    scaling: dict[str, Any] | None = None
    max_concurrent: int | None = _field(None, ge=1)  # None: as many as the resources allow
    # Wall-clock limit of one trial's training, after which it is stopped and recorded as failed
    # (status timeout). None: 10 x the time the cost probe expects for the budget, plus 10 minutes.
    trial_timeout_s: float | None = _field(None, gt=0)
    scheduler: SchedulerConfig = SchedulerConfig()
    resources: ResourcesConfig = ResourcesConfig()
    probe: ProbeConfig = ProbeConfig()
    backend: str = "ray"  # a name of sweeps.backends.BACKENDS
    ray: RayConfig = RayConfig()
    output: OutputConfig = OutputConfig()

    @classmethod
    def prepare(cls, data: Mapping, path: str, issues: list[Issue]) -> dict:
        """Shorthand: a list under a space key means {choices: [...]}."""
        data = dict(data)
        space = data.get("space")
        if isinstance(space, Mapping):
            data["space"] = {k: {"choices": v} if isinstance(v, list) else v for k, v in space.items()}
        repeats = data.get("repeats")
        if isinstance(repeats, Mapping):  # {min, max}: adaptive seeds
            unknown = sorted(set(repeats) - {"min", "max"})
            if unknown or "min" not in repeats or "max" not in repeats:
                issues.append(
                    Issue("repeats", f"given {dict(repeats)}; allowed: an integer or {{min: m, max: M}}")
                )
                return None
            data["repeats"], data["repeats_max"] = repeats["min"], repeats["max"]
        return _workers_into_trial(data, issues)

    def check(self, path: str) -> list[Issue]:
        issues = []
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", self.name):
            issues.append(Issue("name", f"given {self.name!r}; allowed: letters, digits, '_', '-', '.'"))
        metrics = [o.metric for o in self.objectives]
        if not metrics:
            issues.append(Issue("objectives", "given []; allowed: at least one objective"))
        if len(set(metrics)) != len(metrics):
            issues.append(Issue("objectives", f"given {metrics}; each metric at most once"))
        issues.extend(_check_backend(self))
        if self.ray.address is not None and (self.ray.num_cpus is not None or self.ray.num_gpus is not None):
            issues.append(Issue("ray.num_cpus", "applies only to a local Ray (ray.address: null)"))
        if self.repeats_max is not None:
            if self.repeats_max < self.repeats:
                issues.append(
                    Issue("repeats.max", f"given {self.repeats_max}; allowed: at least min {self.repeats}")
                )
            if self.sampler.kind != "grid":
                issues.append(
                    Issue("repeats", f"adaptive seeds with sampler {self.sampler.kind!r}; allowed: grid")
                )
        if self.scaling is not None:
            if "val_loss" not in metrics:
                issues.append(
                    Issue("scaling", f"fits val_loss; allowed: objectives that include it, given {metrics}")
                )
            if self.sampler.kind != "grid":
                issues.append(
                    Issue(
                        "scaling",
                        f"its rungs are grid points; allowed: sampler.kind grid, given {self.sampler.kind!r}",
                    )
                )
        for metric, margin in self.margins.items():
            if metric not in metrics:
                issues.append(
                    Issue(
                        f"margins.{metric}",
                        f"given {metric!r}; allowed: an objective ({', '.join(metrics)})",
                    )
                )
            elif not margin > 0:
                issues.append(Issue(f"margins.{metric}", f"given {margin!r}; allowed: a number > 0"))
        return issues

    # --- derived (computed once; the frozen fields never change) ------------------------------
    @functools.cached_property
    def base(self):
        """The base trial config (`trainers.TrialConfig`), parsed once (valid after loading)."""
        from trainers.config import TrialConfig

        return TrialConfig.from_dict(self.trial)

    @functools.cached_property
    def verdict_rule(self):
        """The verdicts' rule (`sweeps.pareto.verdicts.Rule`): level, family, the planned looks
        (repeats min..max; one look for a fixed count) and the margins."""
        from sweeps.pareto.verdicts import Rule

        v = self.verdicts
        return Rule(v.level, v.family, v.spending, dict(self.margins), self.repeats,
                    self.repeats_max or self.repeats)  # fmt: skip

    @functools.cached_property
    def rungs(self) -> list[dict]:
        """The scaling ladder's rungs (label, overrides, params N, tokens D, flops, epochs), smallest
        compute first; [] without `scaling:`. Filled in at load (the expansion is checked there)."""
        if self.scaling is None:
            return []
        return ladder_rungs(self.scaling, self.trial, "the study")

    def rung_of(self, point: Mapping) -> dict | None:
        """The rung of a point (by its `rung` label), None without a ladder."""
        label = point.get(RUNG)
        return next((r for r in self.rungs if r["label"] == label), None)

    @functools.cached_property
    def search_space(self) -> SearchSpace:
        return SearchSpace(self.space, self.trial, resolve=self._resolved_config)

    @functools.cached_property
    def grid(self) -> list[dict]:
        """Every point of the grid sampler, in YAML order ([] for the other samplers)."""
        return self.search_space.grid() if self.sampler.kind == "grid" else []

    @functools.cached_property
    def paths(self) -> KeyPaths:
        """Every path this study can name (sweeps.paths): its parameters, the paths of its base
        trial and of every point it can run (the grid, or the corners of a sampled space), and
        the objective metrics. Valid once the points parse (after loading)."""
        points = self.grid if self.sampler.kind == "grid" else self.search_space.corners()
        trees = [self.base.to_dict(), *(self.trial_config(p).to_dict() for p in points)]
        return KeyPaths(self.space, trees, metrics_table.objective_names())

    def planned_points(self) -> list[dict]:
        """The grid points this study runs (the first `n_trials` of the grid)."""
        return self.grid[: self.n_points()]

    def trial_config(self, point: dict, seed: int | None = None):
        """The resolved `TrialConfig` of one point (and seed); each point is parsed once."""
        pid = point_id(point)
        cfg = self._point_configs.get(pid)
        if cfg is None:
            from trainers.config import TrialConfig

            cfg = self._point_configs[pid] = TrialConfig.from_dict(self.search_space.apply(point))
        return cfg if seed is None else dataclasses.replace(cfg, seed=seed)

    def _resolved_config(self, point: dict):
        """The point's trial config, or None when it does not parse (for `when:` look-ups)."""
        try:
            return self.trial_config(point)
        except ConfigError:
            return None

    def seed_of(self, repeat: int) -> int:
        return self.base.seed + repeat

    @functools.cached_property
    def _point_configs(self) -> dict:
        return {}

    @property
    def experiment_name(self) -> str:
        return self.output.experiment or self.name

    def results_dir(self) -> Path:
        return Path(self.output.dir).absolute() / self.name

    def storage_url(self) -> str:
        return self.output.storage or f"journal:{self.results_dir() / 'optuna.journal'}"

    def mlflow_uri(self) -> str:
        uri = self.output.mlflow_uri
        if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
            return "sqlite:///" + str(Path(uri[len("sqlite:///") :]).absolute())
        return uri

    def n_points(self) -> int:
        if self.n_trials is not None:
            return self.n_trials
        if self.sampler.kind == "grid":
            return len(self.grid)
        return 20

    def n_runs(self) -> int:
        """Runs the study makes at least (exactly, without adaptive seeds)."""
        return self.n_points() * self.repeats

    def n_runs_max(self) -> int:
        return self.n_points() * (self.repeats_max or self.repeats)

    def to_dict(self) -> dict[str, Any]:
        """The study as a file would give it (a ladder as its `scaling:` section, without the
        `rung` parameter it expands into, so that the dump loads again)."""
        tree = dump(self)
        if self.scaling is not None:
            tree["space"] = {k: v for k, v in tree["space"].items() if k != RUNG}
        return tree

    def fingerprint(self) -> dict[str, str]:
        """What defines this study's results, flattened to key paths -> JSON values: the resolved
        base trial, the space, sampler, objectives, counts, scheduler, reference and probe.
        Not in it (changing them changes no result): max_concurrent, resources (but its workers,
        in the trial: they change the memory of a worker), probe.max_models, backend, ray, output,
        name and description."""
        trial = self.base.to_dict()
        if trial["train"]["workers"] == 1:  # the default: older studies' fingerprints stay as they were
            del trial["train"]["workers"]
        parts = {
            "trial": trial,
            "sampler": dump(self.sampler),
            "objectives": dump(self.objectives),
            "n_trials": self.n_trials,
            "repeats": self.repeats,
            **(
                {"repeats_max": self.repeats_max} if self.repeats_max is not None else {}
            ),  # old studies resume
            "scheduler": dump(self.scheduler),
            "reference": self.reference,
            "probe": {k: v for k, v in dump(self.probe).items() if k != "max_models"},  # grouping only
        }
        space = {f"space.{name}": json.dumps(dump(p), sort_keys=True) for name, p in self.space.items()}
        flat = _flatten(parts)
        for key, default in LATER_DEFAULTS.items():  # at their defaults: older studies still resume
            if flat.get(key) == json.dumps(default):
                del flat[key]
        return {**flat, **space}

    def trial_timeout(self, config, tokens_per_s: float | None) -> float | None:
        """The wall-clock limit of one run (the study's, else derived from the probe's speed for
        that run's architecture and its own budget `config.train.tokens`)."""
        if self.trial_timeout_s is not None:
            return self.trial_timeout_s
        if not tokens_per_s:
            return None
        return 10 * config.train.tokens / tokens_per_s + 600

    @functools.cached_property
    def budgets(self) -> list[int]:
        """The token budget of every point the study can run: the planned grid points, or every
        corner of a sampled space (its choices and the bounds of its ranges), in that order."""
        points = self.planned_points() if self.sampler.kind == "grid" else self.search_space.corners()
        return [self.trial_config(p).train.tokens for p in points] or [self.base.train.tokens]

    def asha_rungs(self) -> tuple[int, int]:
        """ASHA's (grace period, horizon) in tokens. ASHA has one horizon for all trials: the
        largest budget, so that no run is stopped before its own budget (a run with a smaller one
        simply ends there); + 1 so that the last validation (at the budget) is not a stop. The
        grace period defaults to an eighth of the smallest budget (load checks a given one is below it)."""
        grace = self.scheduler.grace_tokens or max(1, min(self.budgets) // 8)
        return grace, max(self.budgets) + 1


# --- loading ------------------------------------------------------------------------------------


def _workers_into_trial(data: dict, issues: list[Issue]) -> dict:
    """`resources.workers` is the one home of a study's worker count: copied into the trial."""
    resources, trial = data.get("resources"), data.get("trial")
    train = trial.get("train") if isinstance(trial, Mapping) else None
    if isinstance(train, Mapping) and "workers" in train:
        issues.append(Issue("trial.train.workers", "a study sets it with resources.workers"))
        return data
    space = data.get("space")
    if isinstance(space, Mapping) and "train.workers" in space:
        issues.append(Issue("space.train.workers", "a study sets it with resources.workers (one value)"))
        return data
    workers = resources.get("workers", 1) if isinstance(resources, Mapping) else 1
    if workers == 1 or not isinstance(trial if trial is not None else {}, Mapping):
        return data  # 1 is the trial's default (and keeps older studies' fingerprints)
    trial = copy.deepcopy(dict(trial or {}))
    trial["train"] = {**(trial.get("train") or {}), "workers": workers}
    return {**data, "trial": trial}


def _read_yaml(path: Path, issues_path: str = "") -> dict:
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(
            [Issue(issues_path or "extends", f"cannot read {str(path)!r}: {err.strerror}")]
        ) from None
    try:
        data = load_yaml(text, str(path))
    except yaml.YAMLError as err:
        raise ConfigError([Issue("", f"not valid YAML: {err}")], str(path)) from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            [Issue("", f"given {type(data).__name__}; allowed: a mapping at the top")], str(path)
        )
    return dict(data)


def deep_merge(base: Mapping, over: Mapping) -> dict:
    """Mappings merge key by key; anything else (lists included) is replaced; null deletes a key."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if value is None and key in out and isinstance(out[key], Mapping):
            del out[key]
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def resolve_extends(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """The raw tree of `path` with its `extends:` chain merged in (relative to each file)."""
    path = path.absolute()
    if path in seen:
        chain = " -> ".join(str(p) for p in (*seen, path))
        raise ConfigError([Issue("extends", f"cycle: {chain}")], str(seen[-1]))
    data = _read_yaml(path, "extends" if seen else "")
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise ConfigError([Issue("extends", f"given {parent!r}; allowed: a path to a study file")], str(path))
    parent_path = (path.parent / parent).resolve()
    if not parent_path.is_file():
        raise ConfigError(
            [Issue("extends", f"given {parent!r}; no such file {str(parent_path)!r}")], str(path)
        )
    return deep_merge(resolve_extends(parent_path, (*seen, path)), data)


def apply_override(tree: dict, text: str) -> None:
    """`--set key.path=value`; under `space.` the longest existing parameter name wins."""
    path, value = parse_override(text)
    if path.startswith("space.") and isinstance(tree.get("space"), Mapping):
        rest = path[len("space.") :]
        names = sorted((n for n in tree["space"] if rest == n or rest.startswith(n + ".")), key=len)
        if names:
            name = names[-1]
            space = tree["space"]
            if rest == name:
                space[name] = value
            else:
                entry = space[name] if isinstance(space[name], dict) else {"choices": space[name]}
                set_path(entry, rest[len(name) + 1 :], value)
                space[name] = entry
            return
        tree["space"][rest] = value
        return
    set_path(tree, path, value)


def load_study(path: str | os.PathLike, overrides: list[str] = ()) -> Study:
    """Reads, merges, overrides, parses and validates one study file; raises ConfigError."""
    source = str(path)
    try:
        tree = resolve_extends(Path(path))
        for text in overrides:
            apply_override(tree, text)
    except ConfigError as err:
        raise err if err.source else err.with_source(source) from None
    return study_from_dict(tree, source)


def study_from_dict(tree: Mapping, source: str | None = None) -> Study:
    rungs = None
    if isinstance(tree, Mapping) and tree.get("scaling") is not None:
        tree, rungs = _with_rungs(tree, source)
    study = parse(Study, tree, "", source)
    if rungs is not None:
        study.__dict__["rungs"] = rungs  # the cached_property's slot: expanded once, here
    issues = validate_points(study)
    if issues:
        raise ConfigError(issues, source)
    return study


RUNG = "rung"  # the grid parameter of a scaling ladder's rungs


def ladder_rungs(section, trial: Mapping, source: str) -> list[dict]:
    """`sweeps.scaling.ladder.expand` over the trial's model, with the corpus's training split
    size (for the epochs of each rung). Raises LadderError."""
    from sweeps.scaling import ladder

    model = trial.get("model") if isinstance(trial, Mapping) else None
    data = trial.get("data") if isinstance(trial, Mapping) else None
    return ladder.expand(section, dict(model or {}), source, ladder.split_tokens(data))


def _with_rungs(tree: Mapping, source: str | None) -> tuple[dict, list[dict]]:
    """The tree with the ladder's rungs as the first parameter of `space:` (a bundle named RUNG);
    a bad `scaling:` section is a ConfigError naming its key."""
    from sweeps.scaling.ladder import targets
    from sweeps.scaling.table import LadderError

    try:
        rungs = ladder_rungs(tree["scaling"], tree.get("trial") or {}, source or "the study")
        targets(tree["scaling"], source or "the study")
    except LadderError as err:
        key = getattr(err, "key", "scaling")
        problem = getattr(err, "problem", str(err))
        raise ConfigError([Issue(key, problem)], source) from None
    space = tree.get("space") or {}
    if not isinstance(space, Mapping):
        return dict(tree), rungs  # parse reports the space
    if RUNG in space:
        raise ConfigError(
            [Issue(f"space.{RUNG}", "the name of the scaling ladder's rungs; allowed: any other name")],
            source,
        )
    choices_ = {r["label"]: r["overrides"] for r in rungs}
    return {**tree, "space": {RUNG: {"type": "bundle", "choices": choices_}, **space}}, rungs


def validate_points(study: Study) -> list[Issue]:
    """The base trial config and every point of the space (grid) or every choice and bound."""
    issues: list[Issue] = _check_names(study)
    space = study.search_space
    issues.extend(space.check_structure("space"))
    if issues:
        return issues
    try:
        base = study.base
    except ConfigError as err:
        return [Issue(join("trial", i.path) if i.path else "trial", i.problem) for i in err.issues]
    if study.sampler.kind == "grid":
        issues.extend(space.check_grid("space", study.n_trials, study.grid))
    points = study.grid if study.sampler.kind == "grid" else space.corners()
    seen: set[str] = set()
    for point in points:
        try:
            study.trial_config(point)
        except ConfigError as err:
            for issue in err.issues:
                key = (issue.path, issue.problem)
                if str(key) in seen:
                    continue
                seen.add(str(key))
                where = space.param_for(issue.path, point) or "space"
                shown = ", ".join(f"{k}={v!r}" for k, v in point.items())
                issues.append(Issue(join("space", where), f"at point {{{shown}}}: trial.{issue}"))
    for i, objective in enumerate(study.objectives):
        if problem := metrics_table.data_issue(objective.metric, base.data.kind):
            issues.append(Issue(f"objectives[{i}].metric", problem))
    if study.scheduler.kind == "asha":
        grace, smallest = study.scheduler.grace_tokens, min(study.budgets)
        if grace is not None and grace >= smallest:
            where = (
                "trial.train.tokens"
                if len(set(study.budgets)) == 1
                else "the smallest train.tokens of the points"
            )
            issues.append(
                Issue("scheduler.grace_tokens", f"given {grace}; allowed: below {where} {smallest}")
            )
    if study.reference is not None and study.rungs:  # a design, compared within each rung
        issues.extend(_check_ladder_reference(study))
    elif study.reference is not None and study.sampler.kind == "grid" and study.reference not in study.grid:
        issues.append(
            Issue(
                "reference",
                f"given {study.reference!r}; allowed: a point of the grid, e.g. {study.grid[0]!r}",
            )
        )
    if not issues:
        issues.extend(_check_paths(study))
    issues.extend(_check_resources(study))
    return issues


def _check_ladder_reference(study: Study) -> list[Issue]:
    """A ladder's `reference:` names a design (its params without `rung`): each rung's points are
    compared with that design at the same rung."""
    if RUNG in study.reference:
        why = "a ladder compares designs within each rung; allowed: the other keys"
        return [Issue(f"reference.{RUNG}", why)]
    designs = [{k: v for k, v in p.items() if k != RUNG} for p in study.grid]
    if study.reference not in designs:
        allowed = f"allowed: a design of the grid (its keys without {RUNG}), e.g. {designs[0]!r}"
        return [Issue("reference", f"given {study.reference!r}; {allowed}")]
    return []


def _check_backend(study: Study) -> list[Issue]:
    """The backend is one of the registry's, can run the scheduler, and accepts the rest."""
    if study.backend not in backends.BACKENDS:
        return [Issue("backend", f"given {study.backend!r}; allowed: {choices(backends.BACKENDS)}")]
    backend = backends.get(study.backend)
    kind = study.scheduler.kind
    if kind not in backend.schedulers:
        needs = " or ".join(backends.supporting(kind))
        return [
            Issue(
                "scheduler.kind",
                f"given {kind!r} with backend {study.backend!r}; allowed: {choices(backend.schedulers)}"
                f" ({kind} needs backend {needs})",
            )
        ]
    return backend.check(study)


def _check_names(study: Study) -> list[Issue]:
    """The paths that need no trial config: metrics (objectives, scheduler) and reference keys."""
    names = KeyPaths(study.space, (), metrics_table.objective_names())
    issues = [
        issue
        for i, objective in enumerate(study.objectives)
        for issue in names.check(objective.metric, f"objectives[{i}].metric", kinds=("metric",))
    ]
    issues += names.check(study.scheduler.metric, "scheduler.metric", kinds=("metric",))
    for key in study.reference or {}:
        issues += names.check(key, f"reference.{key}", kinds=("param",))
    return issues


def _check_paths(study: Study) -> list[Issue]:
    """The paths of `space:` and of every `when:`, against the trial configs of the points (once
    they parse): a parameter that sets nothing, or a condition on a path no trial has."""
    paths = study.paths
    issues = []
    for name, param in study.space.items():
        sets = param.sets(name)
        for path in sets:
            issues += paths.check(
                path, f"space.{name}" + (f" ({path})" if sets != [name] else ""), ("trial",)
            )
        for key in param.when:
            issues += paths.check(key, f"space.{name}.when.{key}", kinds=("param", "trial"))
    return issues


# Trial keys added after studies were run, at the value that computes what they computed before.
LATER_DEFAULTS = {
    "trial.data.order": "windows",
    "trial.model.residual.gate_bias": False,
    "trial.model.residual.use_tanh": True,
    "trial.model.residual.norm_eps": "model",
}


def _flatten(tree: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(tree, Mapping) and tree:
        out: dict[str, str] = {}
        for key, value in tree.items():
            out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: json.dumps(tree, sort_keys=True, default=str)}


def _check_resources(study: Study) -> list[Issue]:
    """Resources a local run can check at load time (a cluster is checked once joined)."""
    if study.backend not in backends.BACKENDS or not backends.get(study.backend).checks_machine(study):
        return []
    cpus = study.ray.num_cpus or os.cpu_count() or 1
    gpus = study.ray.num_gpus if study.ray.num_gpus is not None else local_gpu_count()
    return resource_issues(study.resources, cpus, gpus, "this machine")


def resource_issues(resources: ResourcesConfig, cpus: float, gpus: float, where: str) -> list[Issue]:
    """What one trial (all its workers) asks for beyond `cpus` / `gpus` of `where`."""
    issues = []
    for kind, per_worker, total, have in (
        ("cpus", resources.cpus, resources.total_cpus, cpus),
        ("gpus", resources.gpus, resources.total_gpus, gpus),
    ):
        if total <= have:
            continue
        if resources.workers == 1:
            issues.append(
                Issue(f"resources.{kind}", f"given {per_worker}; allowed: at most {have:g} ({where})")
            )
        else:
            issues.append(
                Issue(
                    "resources.workers",
                    f"given {resources.workers} workers x {per_worker:g} {kind} = {total:g} {kind} a trial; "
                    f"allowed: at most {have:g} {kind} ({where})",
                )
            )
    return issues


def local_gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:
        return 0
