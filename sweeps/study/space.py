"""The search space: parameters named by trial-config key paths, and conditional entries.

    space:
      model.residual.mode: [static, gated]                     # shorthand for {choices: [...]}
      model.residual.activation:                               # exists only under mode: gated
        choices: [relu, sigmoid, tanh]
        when: {model.residual.mode: gated}
      train.lr: {low: 1.0e-4, high: 1.0e-2, log: true}         # float (ints give an int range)
      model.residual:                                          # labelled choices: whole sub-trees
        choices:
          baseline: {kind: none}
          static_layer: {kind: value_residual, mode: static, granularity: layer}
      rung:                                                    # a bundle: each label sets several paths
        type: bundle
        choices:
          r0: {model.d_model: 64, train.tokens: 300000}
          r1: {model.d_model: 128, train.tokens: 1000000}

A parameter's name is the key path it sets, so YAML keys, Optuna params and MLflow params are
the same strings. Labelled choices set the whole mapping at that path (replacing, not merging)
and the label is what Optuna and MLflow record. `when` maps key paths to a value (or a list of
values): an earlier parameter's value (its label for labelled choices) or, for any other path,
the value the trial config holds at that point (defaults included). The space only proposes
values; `apply` turns a point into a resolved trial tree.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from arch.configtree import Issue, join, not_one_of, set_path

_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_SCALAR = (type(None), bool, int, float, str)
GRID_LIMIT = 100_000


@dataclasses.dataclass(frozen=True)
class Param:
    type: str = "categorical"
    when: dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def prepare(cls, data: Mapping, path: str, issues: list[Issue]) -> dict:
        data = dict(data)
        if "type" not in data:
            if "choices" in data:
                data["type"] = "categorical"
            elif all(
                isinstance(data.get(k), int) and not isinstance(data.get(k), bool) for k in ("low", "high")
            ):
                data["type"] = "int"
            else:
                data["type"] = "float"
        return data

    @classmethod
    def resolve_variant(cls, data, path: str, issues: list[Issue]):
        kinds = {"categorical": CategoricalParam, "int": IntParam, "float": FloatParam, "bundle": BundleParam,
                 "matched": MatchedParam}  # fmt: skip
        kind = data.get("type")
        if kind not in kinds:
            issues.append(Issue(join(path, "type"), not_one_of(kind, kinds)))
            return None
        return kinds[kind]

    # An optional parameter is also left out of a point where it is active (the grid has the
    # point without it too), and is never sampled: only a planned point sets it (MatchedParam).
    optional = False
    # A planned-only parameter is never in the grid nor sampled: the plan sets it on the points it
    # enqueues itself (the tune stage's values, sweeps.study.tuning.TunedParam).
    planned_only = False

    # Interface of every parameter kind.
    def suggest(self, trial, name: str):
        raise NotImplementedError

    def grid_values(self) -> list | None:
        """Every value of a finite parameter; None when it is a continuous range."""
        raise NotImplementedError

    def corner_values(self) -> list:
        return self.grid_values() or []

    def value(self, label):
        """The config value that the sampled value (a label for labelled choices) stands for."""
        return label

    def sets(self, name: str) -> list[str]:
        """The trial key paths this parameter sets (its name; a bundle's listed paths)."""
        return [name]

    def set_into(self, tree: dict, name: str, label) -> None:
        set_path(tree, name, self.value(label))

    def active(self, point: Mapping, lookup) -> bool:
        for key, wanted in self.when.items():
            have = point[key] if key in point else lookup(key)
            allowed = wanted if isinstance(wanted, list) else [wanted]
            if have not in allowed:
                return False
        return True


@dataclasses.dataclass(frozen=True)
class CategoricalParam(Param):
    type: Literal["categorical"] = "categorical"
    choices: list[Any] | dict[str, Any] = dataclasses.field(default_factory=list)

    def check(self, path: str) -> list[Issue]:
        labels = self.labels()
        if not labels:
            return [Issue(join(path, "choices"), "given no choices; allowed: at least one")]
        if isinstance(self.choices, list):
            bad = [c for c in self.choices if not isinstance(c, _SCALAR)]
            if bad:
                return [
                    Issue(
                        join(path, "choices"),
                        f"given {bad[0]!r}; list choices must be scalars (use labelled choices "
                        "`choices: {label: value}` for mappings and lists)",
                    )
                ]
        if len({json.dumps(c, sort_keys=True) for c in labels}) != len(labels):
            return [Issue(join(path, "choices"), f"given {labels!r}; each choice at most once")]
        return []

    def labels(self) -> list:
        return list(self.choices) if isinstance(self.choices, dict) else list(self.choices)

    def suggest(self, trial, name: str):
        return trial.suggest_categorical(name, self.labels())

    def grid_values(self) -> list:
        return self.labels()

    def value(self, label):
        return copy.deepcopy(self.choices[label]) if isinstance(self.choices, dict) else label


@dataclasses.dataclass(frozen=True)
class BundleParam(CategoricalParam):
    """Labelled choices that each set several trial key paths: {label: {key.path: value}}."""

    type: Literal["bundle"] = "bundle"
    choices: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def check(self, path: str) -> list[Issue]:
        if not self.choices:
            return [Issue(join(path, "choices"), "given no choices; allowed: at least one")]
        for label, paths in self.choices.items():
            bad = [k for k in paths if not _NAME.fullmatch(str(k))] or ([] if paths else ["(none)"])
            if bad:
                return [Issue(join(path, f"choices.{label}"), f"given {bad[0]!r}; allowed: trial key paths")]
        return []

    def sets(self, name: str) -> list[str]:
        return list(dict.fromkeys(k for paths in self.choices.values() for k in paths))

    def set_into(self, tree: dict, name: str, label) -> None:
        for path, value in self.choices[label].items():
            set_path(tree, path, copy.deepcopy(value))


@dataclasses.dataclass(frozen=True)
class MatchedParam(BundleParam):
    """The matched baselines of `reference: {match: ...}` (sweeps.study.reference), written by the
    launcher at load, not by hand: each label widens the reference point (`when:` its params), which
    also stays in the grid without it."""

    type: Literal["matched"] = "matched"
    optional = True


@dataclasses.dataclass(frozen=True)
class IntParam(Param):
    type: Literal["int"] = "int"
    low: int = 0
    high: int = 0
    step: int = dataclasses.field(default=1, metadata={"ge": 1})
    log: bool = False

    def check(self, path: str) -> list[Issue]:
        if self.high < self.low:
            return [Issue(join(path, "high"), f"given {self.high}; allowed: at least low {self.low}")]
        if self.log and (self.low < 1 or self.step != 1):
            return [Issue(join(path, "log"), "log scale needs low >= 1 and step 1")]
        return []

    def suggest(self, trial, name: str):
        return trial.suggest_int(name, self.low, self.high, step=self.step, log=self.log)

    def grid_values(self) -> list:
        return list(range(self.low, self.high + 1, self.step))

    def corner_values(self) -> list:
        return sorted({self.low, self.high - (self.high - self.low) % self.step})


@dataclasses.dataclass(frozen=True)
class FloatParam(Param):
    type: Literal["float"] = "float"
    low: float = 0.0
    high: float = 0.0
    step: float | None = dataclasses.field(default=None, metadata={"gt": 0})
    log: bool = False

    def check(self, path: str) -> list[Issue]:
        if self.high <= self.low:
            return [Issue(join(path, "high"), f"given {self.high}; allowed: above low {self.low}")]
        if self.log and self.low <= 0:
            return [Issue(join(path, "low"), f"given {self.low}; allowed: above 0 with log: true")]
        if self.log and self.step is not None:
            return [Issue(join(path, "step"), "given a step with log: true; allowed: one of the two")]
        return []

    def suggest(self, trial, name: str):
        return trial.suggest_float(name, self.low, self.high, step=self.step, log=self.log)

    def grid_values(self) -> list | None:
        if self.step is None:
            return None
        n = int(math.floor((self.high - self.low) / self.step + 1e-9))
        return [round(self.low + i * self.step, 12) for i in range(n + 1)]

    def corner_values(self) -> list:
        return [self.low, self.high]


def point_id(point: Mapping) -> str:
    """A short, stable id of a point (the same params give the same id in every launch)."""
    text = json.dumps(dict(sorted(point.items())), sort_keys=True, default=str)
    return "p" + hashlib.sha1(text.encode()).hexdigest()[:8]


def point_name(point: Mapping) -> str:
    """A point's short name, the same in the terminal, MLflow run names and the fronts: its value
    when one parameter defines it (`gated_token_head`), else `key=value` pairs by last path key."""
    if len(point) == 1:
        return str(next(iter(point.values())))
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in point.items()) or "base"


def get_path(tree, path: str):
    """The value at `path` in a plain tree or a config object (its dataclass fields); _ABSENT if none."""
    node: Any = tree
    for key in path.split("."):
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif dataclasses.is_dataclass(node) and key in {f.name for f in dataclasses.fields(node)}:
            node = getattr(node, key)
        else:
            return _ABSENT
    return node


_ABSENT = object()


class SearchSpace:
    """An ordered mapping of parameter name (a trial key path) -> Param, over one base trial tree.

    `resolve(point)` returns the point's resolved trial config, every default filled in (None when
    it does not parse); `when:` conditions on paths that are not parameters read from it. The space never
    sees a point without its base, so the grid is the same wherever it is asked for.
    """

    def __init__(self, params: Mapping[str, Param], base: Mapping | None = None, resolve=None):
        self.params = dict(params)
        self.base = copy.deepcopy(dict(base or {}))
        self.resolve = resolve

    def __len__(self) -> int:
        return len(self.params)

    def check_structure(self, path: str) -> list[Issue]:
        issues = []
        names = list(self.params)
        for i, (name, param) in enumerate(self.params.items()):
            if not _NAME.fullmatch(name):
                issues.append(Issue(join(path, name), "not a key path (allowed: names joined by '.')"))
            for key in param.when:
                if key == name:
                    issues.append(
                        Issue(join(path, f"{name}.when.{key}"), "a parameter cannot depend on itself")
                    )
                elif key in self.params and names.index(key) > i:
                    issues.append(
                        Issue(
                            join(path, f"{name}.when.{key}"),
                            f"{key} comes later in space; list it before {name}",
                        )
                    )
                elif key in self.params:
                    allowed = self.params[key].grid_values()
                    wanted = param.when[key] if isinstance(param.when[key], list) else [param.when[key]]
                    for value in wanted:
                        if allowed is not None and value not in allowed:
                            issues.append(
                                Issue(
                                    join(path, f"{name}.when.{key}"),
                                    not_one_of(value, allowed),
                                )
                            )
        return issues

    def check_grid(self, path: str, n_trials: int | None, grid: list[dict]) -> list[Issue]:
        issues = []
        for name, param in self.params.items():
            if param.grid_values() is None:
                issues.append(
                    Issue(
                        join(path, name),
                        "a continuous range cannot be a grid; allowed: a step, choices, "
                        "or sampler.kind random, tpe, nsga2, gp",
                    )
                )
        if issues:
            return issues
        size = len(grid)
        if n_trials is not None and n_trials > size:
            issues.append(Issue("n_trials", f"given {n_trials}; allowed: at most the grid size {size}"))
        return issues

    def _points(self, values_of) -> Iterator[dict]:
        def expand(i: int, point: dict) -> Iterator[dict]:
            if i == len(self.params):
                yield dict(point)
                return
            name, param = list(self.params.items())[i]
            if param.planned_only or not param.active(point, self._lookup(point)):
                yield from expand(i + 1, point)
                return
            if param.optional:
                yield from expand(i + 1, point)
            for value in values_of(param):
                point[name] = value
                yield from expand(i + 1, point)
                del point[name]

        return expand(0, {})

    def grid(self) -> list[dict]:
        """Every point exactly once, in YAML order (inactive parameters left out)."""
        out: list[dict] = []
        seen: set[str] = set()
        for point in self._points(lambda p: p.grid_values() or []):
            key = point_id(point)
            if key not in seen:
                seen.add(key)
                out.append(point)
            if len(out) > GRID_LIMIT:
                raise ValueError(f"grid larger than {GRID_LIMIT} points")
        return out

    def corners(self, limit: int = 2000) -> list[dict]:
        """Every categorical choice and both bounds of ranges (all combinations up to `limit`)."""
        points = list(itertools.islice(self._points(lambda p: p.corner_values()), limit + 1))
        if len(points) <= limit:
            return points
        out = []
        for name, param in self.params.items():
            for value in param.corner_values():
                out.append({name: value})
        return out

    def _lookup(self, point: Mapping):
        def lookup(path: str):
            tree = self.apply(point)
            value = get_path(tree, path)
            if value is _ABSENT and self.resolve is not None:
                resolved = self.resolve(point)
                value = _ABSENT if resolved is None else get_path(resolved, path)
            return None if value is _ABSENT else value

        return lookup

    def apply(self, point: Mapping) -> dict:
        """The trial tree of a point: the base tree with each parameter's value set at its path."""
        tree = copy.deepcopy(self.base)
        for name, label in point.items():
            self.params[name].set_into(tree, name, label)
        return tree

    def suggest(self, trial, planned: Mapping | None = None) -> dict:
        """Define-by-run sampling with an Optuna trial; returns the point (labels). `planned`: the
        grid point the trial was enqueued with, whose params are exactly the ones suggested (an
        optional parameter it leaves out is not)."""
        point: dict = {}
        for name, param in self.params.items():
            if planned is not None and name not in planned:
                continue
            if planned is None and (
                param.optional or param.planned_only or not param.active(point, self._lookup(point))
            ):
                continue
            point[name] = param.suggest(trial, name)
        return point

    def param_for(self, issue_path: str, point: Mapping) -> str | None:
        """The parameter of `point` that an issue at `issue_path` (in the trial tree) comes from."""
        best, longest = None, -1
        for name in point:
            for path in self.params[name].sets(name) if name in self.params else [name]:
                if (issue_path == path or issue_path.startswith(path + ".")) and len(path) > longest:
                    best, longest = name, len(path)
        if best is None:
            for name in point:
                if name.startswith(issue_path + "."):
                    return name
        return best
