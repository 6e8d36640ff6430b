"""The samplers a study can name (`sampler.kind`): one entry each, the one list that the study's
validation and the Optuna study read. Adding a sampler = one line here.

`grid` enqueues every point itself (sweeps.run.plan), so its Optuna sampler never samples; a random
one stands in. Options are fields of `SamplerConfig` passed to the Optuna sampler when set.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class SamplerKind:
    optuna: str  # the class in optuna.samplers
    options: tuple[str, ...] = ()  # the SamplerConfig fields it takes


SAMPLERS = {
    "grid": SamplerKind("RandomSampler"),
    "random": SamplerKind("RandomSampler"),
    "tpe": SamplerKind("TPESampler", ("n_startup_trials",)),
    "nsga2": SamplerKind("NSGAIISampler", ("population_size",)),
    "gp": SamplerKind("GPSampler", ("n_startup_trials",)),
}


def taking(option: str) -> list[str]:
    """The sampler kinds that take an option (for error messages)."""
    return [name for name, kind in SAMPLERS.items() if option in kind.options]


def build(config):
    """The Optuna sampler of a `SamplerConfig` (its kind, seed and the options it sets)."""
    import optuna

    kind = SAMPLERS[config.kind]
    options = {o: getattr(config, o) for o in kind.options if getattr(config, o) is not None}
    return getattr(optuna.samplers, kind.optuna)(seed=config.seed, **options)
