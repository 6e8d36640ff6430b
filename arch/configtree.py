"""Typed config trees: frozen dataclasses parsed strictly from plain mappings.

Every config in the project (model, trainer, study) is a tree of frozen dataclasses.
`parse` turns a plain mapping (from YAML) into that tree and refuses anything it does not
know, naming the full key path, what was given and what is allowed; `dump` turns it back
into a plain mapping so that `parse(dump(c)) == c`.

Supported field types: bool, int, float, str, Literal[...], unions of those (Optional
included), list[X], dict[str, X], Any, nested config dataclasses, and polymorphic configs
(a class with a `resolve_variant(data, path, issues)` classmethod picks the subclass, e.g. by
`kind`). A `prepare(data, path, issues)` classmethod may rewrite the mapping first (presets; a
variant's own `prepare` runs after its `kind` is resolved).
Range limits come from field metadata: `field(default=1, metadata={"ge": 1})`.
A class's `KEYS_ELSEWHERE` ({key: "where it goes; "}) tells a user who wrote a key of another
section there (`sampler: {n_trials: 50}`) where it goes.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

_MISSING = object()


@dataclasses.dataclass(frozen=True)
class Issue:
    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}" if self.path else self.problem


class ConfigError(ValueError):
    """One or more problems in a config; each names its full key path."""

    def __init__(self, issues: list[Issue], source: str | None = None):
        self.issues = list(issues)
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        prefix = f"{self.source}: " if self.source else ""
        return "\n".join(prefix + str(issue) for issue in self.issues)

    def with_source(self, source: str) -> ConfigError:
        return ConfigError(self.issues, source)


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def choices(values) -> str:
    return ", ".join(repr(v) if not isinstance(v, str) else v for v in values)


def near(given, allowed) -> str:
    """'did you mean 'x'? ' for a misspelt name (the closest of `allowed`, difflib's ratio >= 0.8),
    else '': for the messages that list what is allowed."""
    names = [a for a in allowed if isinstance(a, str)]
    if not isinstance(given, str) or not names:
        return ""
    close = difflib.get_close_matches(given, names, n=1, cutoff=0.8)  # gelu is not a typo of relu
    return f"did you mean {close[0]!r}? " if close else ""


def not_one_of(given, allowed) -> str:
    """The message for a value that is not one of `allowed`: "given 'tinny'; did you mean 'tiny'?
    allowed: tiny, mini, ..."."""
    return f"given {given!r}; {near(given, allowed)}allowed: {choices(allowed)}"


def _type_name(tp) -> str:
    if tp is type(None):
        return "null"
    if typing.get_origin(tp) is Literal:
        return "one of " + choices(typing.get_args(tp))
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    return getattr(tp, "__name__", str(tp))


def _is_union(tp) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def _parse_value(tp, value, path: str, issues: list[Issue]):
    """Returns the parsed value, or _MISSING after appending an Issue."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value in allowed and type(value) in {type(a) for a in allowed}:
            return value
        issues.append(Issue(path, not_one_of(value, allowed)))
        return _MISSING
    if _is_union(tp):
        members = typing.get_args(tp)
        for member in members:
            trial: list[Issue] = []
            parsed = _parse_value(member, value, path, trial)
            if not trial:
                return parsed
        sections = [m for m in members if dataclasses.is_dataclass(m)]
        if isinstance(value, Mapping) and len(sections) == 1:  # an optional section: its own issues
            return _parse_value(sections[0], value, path, issues)
        allowed = " or ".join(_type_name(m) for m in members)
        issues.append(Issue(path, f"given {value!r}; allowed: {allowed}"))
        return _MISSING
    if tp is type(None):
        if value is None:
            return None
        issues.append(Issue(path, f"given {value!r}; allowed: null"))
        return _MISSING
    if tp is bool:
        if isinstance(value, bool):
            return value
        issues.append(Issue(path, f"given {value!r}; allowed: true or false"))
        return _MISSING
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        hint = f" (write {int(value)})" if isinstance(value, float) and value.is_integer() else ""
        issues.append(Issue(path, f"given {value!r}; allowed: an integer{hint}"))  # tokens: 1e6
        return _MISSING
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        issues.append(Issue(path, f"given {value!r}; allowed: a number"))
        return _MISSING
    if tp is str:
        if isinstance(value, str):
            return value
        issues.append(Issue(path, f"given {value!r}; allowed: a string"))
        return _MISSING
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            issues.append(Issue(path, f"given {value!r}; allowed: a list"))
            return _MISSING
        (item_tp, *_) = typing.get_args(tp) or (Any,)
        before = len(issues)
        items = [_parse_value(item_tp, v, join(path, i), issues) for i, v in enumerate(value)]
        return _MISSING if len(issues) > before else origin(items)
    if origin is dict:
        if not isinstance(value, Mapping):
            issues.append(Issue(path, f"given {value!r}; allowed: a mapping"))
            return _MISSING
        _, item_tp = typing.get_args(tp) or (str, Any)
        before = len(issues)
        out = {str(k): _parse_value(item_tp, v, join(path, str(k)), issues) for k, v in value.items()}
        return _MISSING if len(issues) > before else out
    if dataclasses.is_dataclass(tp):
        return _parse_dataclass(tp, value, path, issues)
    raise TypeError(f"configtree cannot parse fields of type {tp!r} (at {path})")


@functools.cache
def _type_hints(cls) -> dict:
    """`typing.get_type_hints(cls)`, once a class: it evaluates every annotation each call (a
    launch parses a trial's config for every trial). Read only."""
    return typing.get_type_hints(cls)


def _parse_dataclass(cls, data, path: str, issues: list[Issue]):
    if not isinstance(data, Mapping):
        issues.append(Issue(path, f"given {data!r}; allowed: a mapping"))
        return _MISSING
    prepare = getattr(cls, "prepare", None)
    if prepare is not None:
        data = prepare(data, path, issues)
        if data is None:
            return _MISSING
    resolve = getattr(cls, "resolve_variant", None)
    if resolve is not None:
        variant = resolve(data, path, issues)
        if variant is None:
            return _MISSING
        own = getattr(variant, "prepare", None)
        if own is not None and own != prepare:  # the variant's own presets (e.g. a design's)
            data = own(data, path, issues)
            if data is None:
                return _MISSING
        cls = variant
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = _type_hints(cls)
    before = len(issues)
    for key in data:
        if key not in fields:
            # a typo (residul -> residual), or a key the class says lives elsewhere
            guess = getattr(cls, "KEYS_ELSEWHERE", {}).get(key, "") or near(str(key), fields)
            allowed = ", ".join(fields)
            issues.append(Issue(join(path, str(key)), f"unknown key; {guess}allowed keys: {allowed}"))
    kwargs = {}
    for name, f in fields.items():
        sub = join(path, name)
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                issues.append(Issue(sub, "required key is missing"))
            continue
        value = _parse_value(hints[name], data[name], sub, issues)
        if value is _MISSING:
            continue
        _check_range(f, value, sub, issues)
        kwargs[name] = value
    if len(issues) > before:
        return _MISSING
    obj = cls(**kwargs)
    check = getattr(obj, "check", None)
    if check is not None:
        issues.extend(check(path))
    return obj if len(issues) == before else _MISSING


_BOUNDS = {
    "ge": (lambda v, b: v >= b, ">="),
    "gt": (lambda v, b: v > b, ">"),
    "le": (lambda v, b: v <= b, "<="),
    "lt": (lambda v, b: v < b, "<"),
}


def _check_range(f: dataclasses.Field, value, path: str, issues: list[Issue]) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    for key, (ok, symbol) in _BOUNDS.items():
        bound = f.metadata.get(key)
        if bound is not None and not ok(value, bound):
            issues.append(Issue(path, f"given {value!r}; allowed: a number {symbol} {bound}"))


def variant_by_kind(cls, variants: Mapping[str, type], data: Mapping, path: str, issues: list[Issue]):
    """For `resolve_variant`: the class in `variants` named by `data["kind"]` (default: cls's kind)."""
    kind = data.get("kind", cls.__dataclass_fields__["kind"].default)
    if kind not in variants:
        issues.append(Issue(join(path, "kind"), not_one_of(kind, variants)))
        return None
    return variants[kind]


def parse(cls, data: Mapping, path: str = "", source: str | None = None):
    """Parses `data` into the config dataclass `cls`; raises ConfigError listing every problem."""
    issues: list[Issue] = []
    obj = _parse_dataclass(cls, data, path, issues)
    if issues:
        raise ConfigError(issues, source)
    return obj


def dump(obj) -> Any:
    """Plain-data form of a config tree (dicts, lists, scalars), field order kept."""
    if dataclasses.is_dataclass(obj):
        return {f.name: dump(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init}
    if isinstance(obj, (list, tuple)):
        return [dump(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: dump(v) for k, v in obj.items()}
    return obj


def set_path(tree: dict, path: str, value) -> None:
    """Sets `a.b.c` in a plain nested mapping, creating the mappings on the way."""
    node = tree
    *parents, leaf = path.split(".")
    for key in parents:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {} if child is None else _refuse(path, key, child)
        node = child
    node[leaf] = value


def _refuse(path: str, key: str, value):
    raise ConfigError([Issue(path, f"cannot set below {key!r}: it holds {value!r}, not a mapping")])


@functools.cache
def yaml_loader():
    """PyYAML's safe loader, reading `1e-3`, `3e-4` and `1.0e3` as the numbers they are: PyYAML
    follows YAML 1.1, where a float needs a dot and a signed exponent, so those came back as
    strings and `lr: 3e-4` was refused as "not a number". YAML 1.2 (and JSON) read them as floats."""
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver(  # copies SafeLoader's resolvers first: SafeLoader is untouched
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$"),
        list("-+0123456789."),
    )
    return Loader


def load_yaml(text: str, source: str | None = None) -> Any:
    """YAML with the safe loader (numbers as YAML 1.2 reads them: `yaml_loader`), refusing a
    mapping key written twice (YAML requires unique keys; PyYAML would keep the last one
    silently): ConfigError naming the key path and both lines. Raises yaml.YAMLError for text
    that is not YAML."""
    loader = yaml_loader()(text)
    try:  # parsed once: the node tree is checked, then built (what yaml.load does in one call)
        node = loader.get_single_node()
        issues: list[Issue] = []
        _duplicate_keys(node, "", issues)
        if issues:
            raise ConfigError(issues, source)
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


def _duplicate_keys(node, path: str, issues: list[Issue]) -> None:
    import yaml

    if isinstance(node, yaml.MappingNode):
        first_line: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in first_line:
                issues.append(Issue(join(path, key), f"written twice, at lines {first_line[key]} and {line}"))
            else:
                first_line[key] = line
            _duplicate_keys(value_node, join(path, key), issues)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _duplicate_keys(item, join(path, i), issues)


def parse_override(text: str) -> tuple[str, Any]:
    """`key.path=value` (value read as YAML: 3, 1e-3, true, [a, b], relu) -> (path, value)."""
    import yaml

    if "=" not in text:
        raise ConfigError([Issue("--set", f"given {text!r}; allowed: key.path=value")])
    path, raw = text.split("=", 1)
    return path.strip(), yaml.load(raw, Loader=yaml_loader())
