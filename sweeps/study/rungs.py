"""A study's `scaling:` section, expanded at load into the grid parameter RUNG.

A `scaling:` section is expanded at load (`sweeps.study.ladder.expand`) into one grid parameter,
`rung` (a bundle: each label r0, r1, ... sets the rung's model keys and `train.tokens`), placed
first in the space and crossed with the other parameters and the seeds: every rung is an ordinary
point, so the grid, resume, the fingerprint (the rungs are in `space.rung`), MLflow params and run
names (`rung=r2`) need nothing else. `Study.rungs` keeps the expansion (N, D, FLOPs, epochs).
"""

from __future__ import annotations

from collections.abc import Mapping

from arch.configtree import ConfigError, Issue
from sweeps.study import ladder
from sweeps.study.ladder import LadderError, targets

RUNG = "rung"  # the grid parameter of a scaling ladder's rungs


def without_rung(params: Mapping) -> dict:
    """A point's params without its rung: the design it trains, the same at every rung."""
    return {k: v for k, v in params.items() if k != RUNG}


def ladder_rungs(section, trial: Mapping, source: str) -> list[dict]:
    """`sweeps.study.ladder.expand` over the trial's model, with the corpus's training split
    size (for the epochs of each rung). Raises LadderError."""
    model = trial.get("model") if isinstance(trial, Mapping) else None
    data = trial.get("data") if isinstance(trial, Mapping) else None
    return ladder.expand(section, dict(model or {}), source, ladder.split_tokens(data))


def with_rungs(tree: Mapping, source: str | None) -> tuple[dict, list[dict]]:
    """The tree with the ladder's rungs as the first parameter of `space:` (a bundle named RUNG);
    a bad `scaling:` section is a ConfigError naming its key."""
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
