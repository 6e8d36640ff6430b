"""Loading a study file: YAML, `extends:` chains, `--set` overrides, then parsing and validation.

Loading (`load_study`) reads YAML with the safe loader, resolves `extends:` chains, applies
`--set key.path=value` overrides, parses the tree strictly (arch.configtree) and then validates
the base trial config and every point of the search space with `TrialConfig.from_dict`, so a
study that cannot run fails here, naming the file and the full key path, before anything runs.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

import yaml

from arch.configtree import ConfigError, Issue, load_yaml, parse, parse_override, set_path
from sweeps.study.checks import validate_points
from sweeps.study.definition import Study
from sweeps.study.reference import MATCH, find_matches, matched_space
from sweeps.study.rungs import with_rungs


def _read_yaml(path: Path, issues_path: str = "") -> dict:
    try:
        text = path.read_text()
    except OSError as err:
        raise ConfigError(
            [Issue(issues_path, f"cannot read {str(path)!r}: {err.strerror}")]  # "": the study file itself
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


def study_path(text: str) -> Path:
    """A study file as the commands take it: a path, else the name of a file in studies/."""
    path = Path(text)
    return path if path.is_file() else Path("studies") / f"{text}.yaml"


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
    if isinstance(tree, Mapping) and tree.get("scaling") is not None:
        tree, _ = with_rungs(tree, source)  # checked here; `Study.rungs` expands it again
    study = _parsed(tree, source)
    if study.reference_match is not None:  # the design points first, then their matched baselines
        matched, matches = with_matched(study, tree, source)
        study = _parsed(matched, source, matches)
    return study


def _parsed(tree: Mapping, source: str | None, matches: tuple = ()) -> Study:
    """The study of `tree`, validated; `matches`: its design points' matched baselines (found on
    the same study before they joined its space)."""
    study = parse(Study, tree, "", source)
    if matches:
        study = dataclasses.replace(study, matches=matches)
    issues = validate_points(study)
    if issues:
        raise ConfigError(issues, source)
    return study


def with_matched(study: Study, tree: Mapping, source: str | None) -> tuple[dict, tuple]:
    """(the tree with the matched baselines of `study` (sweeps.study.reference) as the last
    parameter of `space:`, the matches)."""
    if MATCH in (tree.get("space") or {}):
        why = "the name of the matched baselines (reference.match); allowed: any other name"
        raise ConfigError([Issue(f"space.{MATCH}", why)], source)
    try:
        matches = tuple(find_matches(study))
    except ConfigError as err:
        raise err.with_source(source) if source else err from None
    param = matched_space(study, matches)
    if param is None:
        return dict(tree), matches
    return {**tree, "space": {**(tree.get("space") or {}), MATCH: param}}, matches


STUDY_FILE = "study.yaml"  # results/<name>/study.yaml: the resolved study (`sweeps.scaling fit <folder>`)


def save_resolved(study) -> Path:
    """The resolved study (its ladder as `scaling:`, not as the expanded `rung` parameter, and
    absolute output paths) in results/<name>/study.yaml, so that the folder alone can be fitted."""
    tree = study.to_dict()  # the ladder as its scaling: section
    tree["trial"].get("train", {}).pop("workers", None)  # copied there from resources.workers at load
    tree["output"] = {
        **tree["output"],
        "dir": str(study.results_dir().parent),
        "mlflow_uri": study.mlflow_uri(),
    }
    path = study.results_dir() / STUDY_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(tree, sort_keys=False))
    return path


def find_study(name: str):
    """A study from a study file, a results folder (its study.yaml, written by every ladder
    launch) or a name (results/<name>/, else studies/<name>.yaml or studies/**/<name>.yaml);
    None when `name` is none of these."""
    path = Path(name)
    if path.is_dir() and (path / STUDY_FILE).is_file():
        return load_study(path / STUDY_FILE)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return load_study(path)
    if path.suffix or path.is_dir():
        return None
    if (Path("results") / name / STUDY_FILE).is_file():
        return load_study(Path("results") / name / STUDY_FILE)
    found = sorted(Path("studies").glob(f"{name}.yaml")) + sorted(Path("studies").glob(f"**/{name}.yaml"))
    return load_study(found[0]) if found else None
