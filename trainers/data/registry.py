"""The data kinds: `kind` in YAML -> (its typed config, the Lightning data module that serves it).

A data module registers itself with its config class, the way arch/ registers designs:

    @register_data(TextDataConfig)
    class TextDataModule(WindowDataModule): ...

Configs are parsed by `trainers.config` (which asks `data_configs()` for the kinds) and built by
`trainers.data.build_datamodule` (`datamodule_class`). Error messages list the kinds sorted.
"""

from __future__ import annotations

_KINDS: dict[str, tuple[type, type]] = {}


def register_data(config_cls: type):
    """Class decorator of a data module: registers it under its config's `kind` (no duplicates)."""
    kind = config_cls.__dataclass_fields__["kind"].default

    def wrap(module_cls: type) -> type:
        if kind in _KINDS:
            raise ValueError(f"data kind {kind!r} is already registered")
        _KINDS[kind] = (config_cls, module_cls)
        return module_cls

    return wrap


def data_configs() -> dict[str, type]:
    return {kind: _KINDS[kind][0] for kind in sorted(_KINDS)}


def datamodule_class(config) -> type:
    return _KINDS[config.kind][1]
