"""The study spec: one YAML file -> a typed, validated `Study`.

    name: gate_granularity           # required; names the MLflow experiment and results/<name>/
    extends: base.yaml               # optional; this file overrides only what differs
    trial: {seed, model, data, train}   # the base trial config (trainers.TrialConfig)
    space: {<trial key path>: {choices | low/high/log/step, when}}
    sampler: {kind: grid | random | tpe | nsga2 | gp, seed}
    objectives: [{metric: val_loss, direction: minimize}, ...]
    n_trials, repeats, max_concurrent, scheduler, resources, probe, backend, ray, output
    evals: {tasks: [...], limit, include_path, batch_size, every: end}   # lm-eval on final weights
    verdicts: {level: 0.95, family: holm | none, spending: obrien_fleming | pocock}
    margins: {val_loss: 0.01}        # per objective: within +-margin of the reference is `equivalent`
    budget: {time: reference | S}    # equal time: each design's train.tokens from the probe's speed
    hypervolume: {val_loss: [2.0, 4.0], ...}   # per objective [best, worst]: the hypervolume history
    scaling: {sizes, tokens | tokens_per_param, token_scale, targets}   # a ladder (sweeps.study.ladder)

The `Study` is the one home of what follows from its file: the parsed base trial (`base`), the
search space over that base (`search_space`), the grid (`grid`, computed once with the trial as
its base: validation, the point count, `--dry-run` and the launcher read this one list) and the
parsed trial config of each point and seed (`trial_config`). Nothing else parses `study.trial`.
Nothing writes into a Study once it is built: the runs it makes, with each one's config and
micro-batch split, are resolved once into a StudyPlan (sweeps.study.study_plan).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from arch.configtree import ConfigError, Issue, dump, not_one_of, set_path
from sweeps.study import tuning
from sweeps.study.checks import study_issues
from sweeps.study.fingerprint import fingerprint
from sweeps.study.paths import KeyPaths
from sweeps.study.reference import MATCH, MATCH_KINDS, Match, MatchConfig, split_reference
from sweeps.study.rungs import RUNG, ladder_rungs
from sweeps.study.sections import (
    BudgetConfig,
    EvalsConfig,
    Objective,
    OutputConfig,
    ProbeConfig,
    RayConfig,
    ResourcesConfig,
    SamplerConfig,
    SchedulerConfig,
    VerdictsConfig,
    bounded,
    default_objectives,
)
from sweeps.study.seeds import Seeds
from sweeps.study.space import Param, SearchSpace, point_id
from sweeps.study.tuning import TuneConfig
from trainers import metrics as metrics_table
from trainers.config import TrialConfig


@dataclasses.dataclass(frozen=True)
class Study:
    KEYS_ELSEWHERE = {"seeds": "a point's seeds are repeats: (runs per point) from trial.seed; "}

    name: str
    description: str = ""
    trial: dict[str, Any] = dataclasses.field(default_factory=dict)
    space: dict[str, Param] = dataclasses.field(default_factory=dict)
    sampler: SamplerConfig = SamplerConfig()
    objectives: list[Objective] = dataclasses.field(default_factory=default_objectives)
    # The point verdicts compare against, by its params ({model.residual: baseline}); None: the
    # first point whose design is the baseline (kind none).
    reference: dict[str, Any] | None = None
    # `reference: {match: params | flops}` (split from `reference:` as written): each design is
    # also compared with a baseline widened to its own budget (sweeps.study.reference).
    reference_match: MatchConfig | None = None
    # Each design point's matched baseline (`sweeps.study.reference.Match`), () without
    # `reference.match`: found at load (where the shapes are found and checked), never in a file.
    matches: tuple[Match, ...] = ()
    # `tune: {train.lr: {low, high, points, log}, seeds: k}`: each point at its own best value of
    # that path, confirmed with fresh seeds (sweeps.study.tuning).
    tune: TuneConfig | None = None
    n_trials: int | None = bounded(None, ge=1)  # points to run; None: the whole grid (grid) / 20
    repeats: int = bounded(1, ge=1)  # runs per point, seeds trial.seed + 0..repeats-1
    # Adaptive seeds (`repeats: {min: 2, max: 8}` in YAML sets repeats = min and this): after each
    # round, one more seed only for the points still undecided (sweeps.run.adaptive), up to max.
    repeats_max: int | None = bounded(None, ge=1)
    verdicts: VerdictsConfig = VerdictsConfig()
    # Equivalence margins per objective ({val_loss: 0.01}): a point whose adjusted difference
    # interval lies inside +-margin is `equivalent`; one it does not decide is `undecided`. For a
    # metric shown relative to the reference (tokens_per_s, peak_mem_mb), a fraction of its value.
    margins: dict[str, float] = dataclasses.field(default_factory=dict)
    # The hypervolume history's fixed normalisation (sweeps.report.history): per objective
    # [best, worst], declared before the launch; None: no history is logged.
    hypervolume: dict[str, list[float]] | None = None
    # A scaling ladder (sweeps.study.ladder): its rungs become the grid parameter RUNG at load.
    scaling: dict[str, Any] | None = None
    # Equal time instead of equal tokens (sweeps.run.time_budget): `budget: {time: reference | S}`.
    budget: BudgetConfig = BudgetConfig()
    max_concurrent: int | None = bounded(None, ge=1)  # None: as many as the resources allow
    # Wall-clock limit of one trial's training, after which it is stopped and recorded as failed
    # (status timeout). None: 10 x the time the cost probe expects for the budget, plus 10 minutes.
    trial_timeout_s: float | None = bounded(None, gt=0)
    scheduler: SchedulerConfig = SchedulerConfig()
    resources: ResourcesConfig = ResourcesConfig()
    probe: ProbeConfig = ProbeConfig()
    # lm-evaluation-harness tasks scored on each run's final weights (None: none); their metrics
    # `eval/<task>/<metric>` may be objectives.
    evals: EvalsConfig | None = None
    backend: str = "ray"  # a name of sweeps.run.backends.BACKENDS
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
        for derived in ("reference_match", "matches"):
            if derived in data:
                issues.append(Issue(derived, "given; allowed: reference: {match: params | flops}"))
                return None
        data["reference"], data["reference_match"] = split_reference(data.get("reference"))
        options = data["reference_match"] or {}
        if options.get("match", MATCH_KINDS[0]) not in MATCH_KINDS:
            issues.append(Issue("reference.match", not_one_of(options["match"], MATCH_KINDS)))
            return None
        multiple = options.get("multiple")
        if multiple is not None and (
            not isinstance(multiple, int) or isinstance(multiple, bool) or multiple < 1
        ):
            issues.append(Issue("reference.multiple", f"given {multiple!r}; allowed: an integer >= 1"))
            return None
        return _workers_into_trial(data, issues)

    def check(self, path: str) -> list[Issue]:
        return study_issues(self)

    # --- derived (computed once; the frozen fields never change) ------------------------------
    @functools.cached_property
    def base(self):
        """The base trial config (`trainers.TrialConfig`), parsed once (valid after loading)."""
        return TrialConfig.from_dict(self.trial)

    @functools.cached_property
    def seeds(self) -> Seeds:
        """The one seeds policy (sweeps.study.seeds): fixed `repeats`, or adaptive `{min, max}`."""
        adaptive = self.repeats_max is not None
        return Seeds(self.repeats, self.repeats_max if adaptive else self.repeats, adaptive)

    @functools.cached_property
    def rungs(self) -> list[dict]:
        """The scaling ladder's rungs (label, overrides, params N, tokens D, flops, epochs), smallest
        compute first; [] without `scaling:` (load checked the expansion)."""
        if self.scaling is None:
            return []
        return ladder_rungs(self.scaling, self.trial, "the study")

    def rung_of(self, point: Mapping) -> dict | None:
        """The rung of a point (by its `rung` label), None without a ladder."""
        label = point.get(RUNG)
        return next((r for r in self.rungs if r["label"] == label), None)

    @functools.cached_property
    def search_space(self) -> SearchSpace:
        tuned = tuning.tuned_param(self.tune) if self.tune is not None else {}
        return SearchSpace({**self.space, **tuned}, self.trial, resolve=self._resolved_config)

    @functools.cached_property
    def grid(self) -> list[dict]:
        """Every point of the grid sampler, in YAML order ([] for the other samplers)."""
        return self.search_space.grid() if self.sampler.kind == "grid" else []

    @functools.cached_property
    def paths(self) -> KeyPaths:
        """Every path this study can name (sweeps.study.paths): its parameters, the paths of its base
        trial and of every point it can run (the grid, or the corners of a sampled space), and
        the objective metrics. Valid once the points parse (after loading)."""
        points = self.grid if self.sampler.kind == "grid" else self.search_space.corners()
        trees = [self.base.to_dict(), *(self.trial_config(p).to_dict() for p in points)]
        return KeyPaths(self.space, trees, metrics_table.objective_names())

    def planned_points(self) -> list[dict]:
        """The grid points this study runs (the first `n_trials` of the grid)."""
        return self.grid[: self.n_points()]

    def trial_config(self, point: dict, seed: int | None = None, overrides: Mapping | None = None):
        """The parsed `TrialConfig` of one point (and seed; `overrides`: {key path: value} set on
        top, a confirming run's tuned value), as the file gives it; each is parsed once. A run's
        config, with its micro-batch split, is the StudyPlan's (sweeps.study.study_plan)."""
        pid = (point_id(point), point_id(overrides or {}))
        cfg = self._point_configs.get(pid)
        if cfg is None:
            tree = self.search_space.apply(point)
            for path, value in (overrides or {}).items():
                set_path(tree, path, value)
            cfg = self._point_configs[pid] = TrialConfig.from_dict(tree)
        return cfg if seed is None else dataclasses.replace(cfg, seed=seed)

    def _resolved_config(self, point: dict):
        """The point's trial config, or None when it does not parse (for `when:` look-ups)."""
        try:
            return self.trial_config(point)
        except ConfigError:
            return None

    def seed_of(self, repeat: int) -> int:
        """The seed of a point's `repeat`-th run; with `tune:`, after the tune stage's (split sample)."""
        return self.base.seed + (self.tune.seeds if self.tune is not None else 0) + repeat

    def tune_seed_of(self, repeat: int) -> int:
        return self.base.seed + repeat

    def n_tune_runs(self) -> int:
        """Runs of the tune stage: points x tuned values x its seeds (0 without `tune:`)."""
        if self.tune is None:
            return 0
        return self.n_points() * self.tune.range.points * self.tune.seeds

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
        return self.n_points() * self.seeds.max

    def to_dict(self) -> dict[str, Any]:
        """The study as a file would give it (a ladder as its `scaling:` section, without the
        `rung` parameter it expands into, so that the dump loads again)."""
        tree = dump(self)
        if self.scaling is not None:
            tree["space"] = {k: v for k, v in tree["space"].items() if k != RUNG}
        if self.tune is not None:  # in its YAML form
            tree["tune"] = self.tune.as_written(tree["tune"])
        tree.pop("matches")  # found again at load
        match = tree.pop("reference_match")
        if match is not None:  # as written: in `reference:`, its shapes found again at load
            tree["space"] = {k: v for k, v in tree["space"].items() if k != MATCH}
            given = {k: v for k, v in match.items() if v is not None}
            tree["reference"] = {**(tree["reference"] or {}), **given}
        return tree

    def fingerprint(self) -> dict[str, str]:
        """What defines this study's results (sweeps.study.fingerprint)."""
        return fingerprint(self)

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
