"""The data modules: a data kind's config (`trainers.config.data_configs`) -> the Lightning data
module that serves it.

A data module registers itself with its config class, the way arch/ registers designs:

    @register_data(TextDataConfig)
    class TextDataModule(WindowDataModule): ...

Configs are parsed by `trainers.config`; modules are built by
`trainers.data.build.build_datamodule` (`datamodule_class`).
"""

from __future__ import annotations

from trainers.config import data_configs

_MODULES: dict[str, type] = {}


def register_data(config_cls: type):
    """Class decorator of a data module: registers it under its config's `kind` (no duplicates,
    and only for a data kind the config knows)."""
    kind = config_cls.__dataclass_fields__["kind"].default
    if data_configs().get(kind) is not config_cls:
        raise ValueError(f"{config_cls.__name__} is not a data kind of trainers.config.data_configs()")

    def wrap(module_cls: type) -> type:
        if kind in _MODULES:
            raise ValueError(f"data kind {kind!r} is already registered")
        _MODULES[kind] = module_cls
        return module_cls

    return wrap


def registered_kinds() -> list[str]:
    return sorted(_MODULES)


def datamodule_class(config) -> type:
    return _MODULES[config.kind]
