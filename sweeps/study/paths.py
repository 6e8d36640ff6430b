"""Every key path a study names, resolved in one place at load.

A study names paths in several places: the parameter names of `space:` (trial-config paths), the
keys of every `when:` (an earlier parameter or a trial-config path), the keys of `reference:`
(parameters), and the metrics of `objectives:` and of the scheduler. `KeyPaths.check` resolves
one such path against what the study holds and returns an Issue naming the key and the allowed
paths when it names nothing, so a misspelt path stops the study at load instead of silently
never matching (a `when:` on a path no trial has was simply never true).

What a path can name:
  param   a parameter of the space, by its name
  trial   a path of the trial config, defaults included, in the base trial or in any point the
          study can run (a design's own keys exist only in the points that choose that design)
  metric  a metric an objective (or the scheduler) can read (trainers.metrics.objective_names)

Later sections of a study (margins, scaling ladders) check their paths with the same call:
`study.paths.check(path, "margins.val_loss.metric", kinds=("metric",))`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from arch.configtree import Issue, choices, near

KINDS = ("param", "trial", "metric")


class KeyPaths:
    def __init__(self, params: Iterable[str], trials: Iterable[Mapping], metrics: Iterable[str]):
        self.params = list(params)
        self.trial: set[str] = set()
        for tree in trials:
            self.trial.update(_paths(tree))
        self.metrics = list(metrics)

    def names(self, path: str, kinds: Sequence[str]) -> bool:
        """Whether `path` names something of one of `kinds`."""
        return (
            ("param" in kinds and path in self.params)
            or ("trial" in kinds and path in self.trial)
            or ("metric" in kinds and path in self.metrics)
        )

    def check(self, path: str, where: str, kinds: Sequence[str] = ("param", "trial")) -> list[Issue]:
        """[] when `path` names something of one of `kinds`; else one Issue at `where`."""
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"kinds {unknown}; allowed: {', '.join(KINDS)}")
        if self.names(path, kinds):
            return []
        known = {"param": self.params, "trial": sorted(self.trial), "metric": self.metrics}
        known = [name for kind in kinds for name in known[kind]]
        return [Issue(where, f"given {path!r}; {near(path, known)}allowed: {self.allowed(path, kinds)}")]

    def allowed(self, path: str, kinds: Sequence[str]) -> str:
        """What could stand at `path`: every parameter and metric, and the trial paths beside the
        longest part of `path` that exists (the keys under `model.residual` for a misspelt
        `model.residual.actvation`)."""
        parts = []
        if "metric" in kinds:
            metrics = choices(self.metrics)
            parts.append(metrics if tuple(kinds) == ("metric",) else f"metrics {metrics}")
        if "param" in kinds:
            parts.append(f"parameters {choices(self.params) if self.params else '(none)'}")
        if "trial" in kinds:
            prefix = _longest_prefix(path, self.trial)
            under = sorted(p for p in self.trial if _parent(p) == prefix)
            keys = ", ".join(_last(p) for p in under)
            parts.append(f"trial paths {prefix + '.' if prefix else ''}{{{keys}}}")
        return "; ".join(parts)


def _paths(tree: Mapping, prefix: str = "") -> Iterable[str]:
    """Every path of a tree, its inner mappings included (`model`, `model.residual`, ...)."""
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        yield path
        if isinstance(value, Mapping):
            yield from _paths(value, path)


def _parent(path: str) -> str:
    return path.rsplit(".", 1)[0] if "." in path else ""


def _last(path: str) -> str:
    return path.rsplit(".", 1)[-1]


def _longest_prefix(path: str, known: set[str]) -> str:
    parts = path.split(".")
    for n in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in known:
            return prefix
    return ""
