"""Validation of a loaded study: the rules between its sections (as it parses) and, once parsed,
its base trial, every point and every key path it names. What its backend, the machine and the
files refuse is checked by the launch's preflight (`sweeps.run.preflight`), before anything is
created; these checks read neither."""

from __future__ import annotations

import math
import re

from arch.configtree import ConfigError, Issue, join
from evals.suites import expand
from sweeps.study import tuning
from sweeps.study.downstream import downstream_issues
from sweeps.study.paths import KeyPaths
from sweeps.study.reference import MATCH, reference_design
from sweeps.study.rungs import RUNG, without_rung
from trainers import metrics as metrics_table


def study_issues(study) -> list[Issue]:
    """The rules between sections (`Study.check`): name, objectives, backend, ray, repeats, scaling
    and margins."""
    metrics = [o.metric for o in study.objectives]
    issues = _name_and_objectives(study, metrics)
    if study.ray.address is not None and (study.ray.num_cpus is not None or study.ray.num_gpus is not None):
        issues.append(Issue("ray.num_cpus", "applies only to a local Ray (ray.address: null)"))
    if study.ray.address is not None and study.ray.keep:
        issues.append(Issue("ray.keep", "applies only to a local Ray (ray.address: null)"))
    issues += _hypervolume(study)
    if study.output.system_metrics == "on" and study.resources.gpus == 0:
        issues.append(
            Issue(
                "output.system_metrics",
                "given 'on' with resources.gpus 0; allowed: auto or off (a CPU study: system metrics "
                "would only add noise)",
            )
        )
    issues += _evals(study)
    for name, param in study.space.items():
        if param.type == "matched" and (name != MATCH or study.reference_match is None):
            issues.append(Issue(f"space.{name}.type", "given 'matched' (the launcher's own, from "
                                "reference.match); allowed: categorical, int, float, bundle"))  # fmt: skip
    issues += tuning.issues(study)
    return issues + _repeats(study) + _scaling(study, metrics) + _margins(study, metrics)


def _time_budget(study) -> list[Issue]:
    """`budget.time` sets each design's tokens at the launch: nothing else may fix them in tokens."""
    time = study.budget.time
    if time is None:
        return []
    if study.rungs:
        return [
            Issue("budget.time", "a scaling ladder's rungs are token budgets; allowed: null with scaling:")
        ]
    if study.scheduler.kind != "none":
        return [Issue("budget.time", f"scheduler {study.scheduler.kind!r} stops runs at token rungs; "
                      "allowed: null, or scheduler.kind none")]  # fmt: skip
    if len(set(study.budgets)) > 1:
        return [Issue("budget.time", "the points set train.tokens apart; allowed: null, or one train.tokens")]
    if time == "reference" and reference_design(study) is None:
        return [Issue("budget.time", "given 'reference' but the study has no reference design (no "
                      "baseline point, no `reference:`); allowed: seconds, e.g. 600")]  # fmt: skip
    return []


def eval_tasks(study) -> list[str]:
    """The lm-eval tasks a study scores (its `evals.tasks`, suites expanded); [] without evals:."""
    return expand(study.evals.tasks) if study.evals is not None else []


def _evals(study) -> list[Issue]:
    """An objective `eval/<task>/<metric>` names a task the study scores (`evals.tasks`)."""
    tasks = eval_tasks(study)
    issues = []
    for i, objective in enumerate(study.objectives):
        parts = metrics_table.eval_parts(objective.metric)
        if parts is None:
            continue
        if parts[1].split(".")[0].endswith("_stderr"):
            why = "a score, not the harness's standard error of one"
            issues.append(Issue(f"objectives[{i}].metric", f"given {objective.metric!r}; allowed: {why}"))
            continue
        if parts[0] in tasks:
            continue
        if tasks:
            allowed = f"eval/<task>/<metric> for a task of evals.tasks ({', '.join(tasks)})"
        else:
            allowed = "an lm-eval metric only with an evals: section that scores its task"
        issues.append(Issue(f"objectives[{i}].metric", f"given {objective.metric!r}; allowed: {allowed}"))
    return issues


def _name_and_objectives(study, metrics: list[str]) -> list[Issue]:
    issues = []
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", study.name):
        issues.append(Issue("name", f"given {study.name!r}; allowed: letters, digits, '_', '-', '.'"))
    if not metrics:
        issues.append(Issue("objectives", "given []; allowed: at least one objective"))
    if len(set(metrics)) != len(metrics):
        issues.append(Issue("objectives", f"given {metrics}; each metric at most once"))
    return issues


def _repeats(study) -> list[Issue]:
    """Adaptive seeds (`repeats: {min, max}`)."""
    if not study.seeds.adaptive:
        return []
    issues = []
    if study.repeats_max < study.repeats:
        issues.append(
            Issue("repeats.max", f"given {study.repeats_max}; allowed: at least min {study.repeats}")
        )
    if study.sampler.kind != "grid":
        issues.append(Issue("repeats", f"adaptive seeds with sampler {study.sampler.kind!r}; allowed: grid"))
    return issues


def _scaling(study, metrics: list[str]) -> list[Issue]:
    if study.scaling is None:
        return []
    issues = []
    if "val_loss" not in metrics:
        issues.append(
            Issue("scaling", f"fits val_loss; allowed: objectives that include it, given {metrics}")
        )
    if study.sampler.kind != "grid":
        issues.append(
            Issue(
                "scaling",
                f"its rungs are grid points; allowed: sampler.kind grid, given {study.sampler.kind!r}",
            )
        )
    return issues


def _margins(study, metrics: list[str]) -> list[Issue]:
    issues = []
    for metric, margin in study.margins.items():
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


def _hypervolume(study) -> list[Issue]:
    """`hypervolume:` gives every objective, and only them, a [best, worst] pair in its direction."""
    if study.hypervolume is None:
        return []
    directions = {o.metric: o.direction for o in study.objectives}
    issues = []
    for metric in directions.keys() - study.hypervolume.keys():
        issues.append(Issue(f"hypervolume.{metric}", "missing; allowed: [best, worst] for every objective"))
    for metric, pair in study.hypervolume.items():
        path = f"hypervolume.{metric}"
        if metric not in directions:
            issues.append(Issue(path, f"given {metric!r}; allowed: an objective ({', '.join(directions)})"))
        elif len(pair) != 2 or not all(math.isfinite(v) for v in pair):
            issues.append(Issue(path, f"given {pair}; allowed: [best, worst], two finite numbers"))
        elif (pair[0] < pair[1]) != (directions[metric] == "minimize") or pair[0] == pair[1]:
            order = "best < worst" if directions[metric] == "minimize" else "best > worst"
            issues.append(
                Issue(path, f"given {pair}; allowed: [best, worst] with {order} ({directions[metric]})")
            )
    return issues


def validate_points(study) -> list[Issue]:
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
    points = checked_points(study)
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
                issues.append(at_point(space, point, issue))
    for i, objective in enumerate(study.objectives):
        if problem := metrics_table.data_issue(objective.metric, base.data.kind):
            issues.append(Issue(f"objectives[{i}].metric", problem))
        elif problem := _recall_issue(base, objective.metric):
            issues.append(Issue(f"objectives[{i}].metric", f"given {objective.metric!r}; {problem}"))
    issues.extend(_evals_data(study, points))
    issues.extend(_per_token_across_tokenizers(study, points))
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
    issues.extend(_time_budget(study))
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
    if not issues and study.tune is not None:
        issues.extend(_check_tuned(study, points))
    return issues + downstream_issues(study)


def checked_points(study) -> list[dict]:
    """The points whose trial configs a study's checks parse: the grid, or the corners of a sampled
    space (every choice and bound)."""
    return study.grid if study.sampler.kind == "grid" else study.search_space.corners()


def at_point(space, point: dict, issue: Issue) -> Issue:
    """An issue of one point's trial config, named at the parameter that set the key (`space.<name>:
    at point {...}: trial.<path>: ...`)."""
    where = space.param_for(issue.path, point) or "space"
    shown = ", ".join(f"{k}={v!r}" for k, v in point.items())
    return Issue(join("space", where), f"at point {{{shown}}}: trial.{issue}")


def _evals_data(study, points) -> list[Issue]:
    """lm-eval reads text: every point's data must have a text tokenizer (not MQAR)."""
    if study.evals is None:
        return []
    configs = [study.base, *(c for c in map(study._resolved_config, points) if c is not None)]
    kinds = sorted({c.data.kind for c in configs} - {"text", "tokens"})
    if not kinds:
        return []
    why = f"lm-eval scores text; given trial.data.kind {', '.join(kinds)}; allowed: text or tokens"
    return [Issue("evals", why)]


def _check_tuned(study, points) -> list[Issue]:
    """Every point trains at the tuned path's lowest and highest value (a path that sets nothing,
    or a value it refuses, fails here rather than in the tune stage)."""
    path = study.tune.path
    if issues := study.paths.check(path, f"tune.{path}", ("trial",)):
        return issues
    for point in points:
        for value in (study.tune.range.values()[0], study.tune.range.values()[-1]):
            try:
                study.trial_config(point, overrides={path: value})
            except ConfigError as err:
                return [Issue(f"tune.{path}", f"at {value:g}: trial.{err.issues[0]}")]
    return []


PER_TOKEN = ("val_loss", "val_ppl", "train_loss")  # per token: a byte and a BPE model's differ in kind


def tokenization(config) -> str:
    """What a token is in a trial's data: its tokenizer and vocabulary (text), its shards (tokens)."""
    data = config.data
    if data.kind == "text":
        return "byte" if data.tokenizer == "byte" else f"bpe{data.bpe_vocab_size}"
    return f"{data.kind}:{getattr(data, 'path', '')}"


def _recall_issue(base, metric: str) -> str | None:
    """Why the recall probe would not measure `metric` for the study's base trial (None: it does,
    or the metric is not the probe's)."""
    if metric not in metrics_table.recall_names("text", "reserved", "curve"):
        return None
    if problem := base.recall.issue(base.data.kind, base.data.seq_len):
        return problem
    reserved = metrics_table.recall_names("reserved", "curve")
    return base.recall.reserved_issue(base.data, metric) if metric in reserved else None


def _per_token_across_tokenizers(study, points) -> list[Issue]:
    """A study whose points differ in what a token is cannot rank on a per-token loss."""
    configs = [c for c in map(study._resolved_config, points) if c is not None]  # others: reported
    kinds = sorted({tokenization(c) for c in configs})
    if len(kinds) < 2:
        return []
    why = (
        f"per token, and the points differ in tokenizer ({', '.join(kinds)}); "
        "allowed: val_bpb (bits per byte)"
    )
    named = [(f"objectives[{i}].metric", o.metric) for i, o in enumerate(study.objectives)]
    if study.scheduler.kind != "none":
        named.append(("scheduler.metric", study.scheduler.metric))
    return [Issue(path, f"given {metric!r}: {why}") for path, metric in named if metric in PER_TOKEN]


def _check_ladder_reference(study) -> list[Issue]:
    """A ladder's `reference:` names a design (its params without `rung`): each rung's points are
    compared with that design at the same rung."""
    if RUNG in study.reference:
        why = "a ladder compares designs within each rung; allowed: the other keys"
        return [Issue(f"reference.{RUNG}", why)]
    designs = [without_rung(p) for p in study.grid]
    if study.reference not in designs:
        allowed = f"allowed: a design of the grid (its keys without {RUNG}), e.g. {designs[0]!r}"
        return [Issue("reference", f"given {study.reference!r}; {allowed}")]
    return []


def _check_names(study) -> list[Issue]:
    """The paths that need no trial config: metrics (objectives, scheduler) and reference keys."""
    names = KeyPaths(study.space, (), metrics_table.objective_names())
    issues = [
        issue
        for i, objective in enumerate(study.objectives)
        if metrics_table.eval_parts(objective.metric) is None  # lm-eval's: checked against evals.tasks
        for issue in names.check(objective.metric, f"objectives[{i}].metric", kinds=("metric",))
    ]
    if metrics_table.eval_parts(study.scheduler.metric) is None:  # lm-eval's: refused by _asha
        issues += names.check(study.scheduler.metric, "scheduler.metric", kinds=("metric",))
    for key in study.reference or {}:
        issues += names.check(key, f"reference.{key}", kinds=("param",))
    return issues


def _check_paths(study) -> list[Issue]:
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
