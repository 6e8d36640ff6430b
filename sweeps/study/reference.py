"""The reference rule, in one place: what every point of a study is compared with.

A study's reference is its `reference:` (a point's params), else the first point whose design is
the baseline (`model.residual.kind: none`). A scaling ladder has one reference per rung: the
reference design (its params without `rung`) at that rung's size and budget, so that a paired
difference over shared seeds measures the design and not the size. The cost probe uses the same
idea per architecture: each architecture is timed against itself with the baseline residual
(`baseline_of`). Verdicts, adaptive seeds, ladder fits and the probe all read it from here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from arch import ModelConfig
from sweeps.study.rungs import RUNG, without_rung
from sweeps.study.space import point_id

BASELINE = {"kind": "none"}  # the residual of the baseline design


def is_baseline(study, params: Mapping) -> bool:
    """Whether the point with `params` trains the baseline design."""
    return study.trial_config(dict(params)).model.residual.kind == BASELINE["kind"]


def reference_design(study) -> dict | None:
    """The reference design as params without `rung`: the study's `reference:`, else the design of
    the first planned point that is the baseline; None when there is none (or no grid)."""
    if study.reference is not None:
        return without_rung(study.reference)
    for point in study.planned_points():
        if is_baseline(study, point):
            return without_rung(point)
    return None


def reference_point(study, trials: Iterable) -> str | None:
    """The point id of the study's reference among `trials` (Optuna trials, in trial order): the one
    whose params are `reference:`, else the first baseline. None for a scaling ladder, which has
    one reference per rung (`reference_points`)."""
    if study.rungs:
        return None
    for t in sorted(trials, key=lambda t: t.number):
        params = dict(t.params)
        if params == study.reference if study.reference is not None else is_baseline(study, params):
            return t.user_attrs.get("point")
    return None


def reference_points(study, trials: Iterable) -> dict[str, str]:
    """Each point's reference, {point id: reference point id} (a reference maps to itself)."""
    trials = list(trials)
    if not study.rungs:
        ref = reference_point(study, trials)
        return {} if ref is None else {t.user_attrs.get("point"): ref for t in trials} | {ref: ref}
    design = reference_design(study)
    if design is None:
        return {}
    per_rung = {p[RUNG]: point_id(p) for p in study.planned_points() if without_rung(p) == design}
    return {point_id(p): per_rung[p[RUNG]] for p in study.planned_points() if p[RUNG] in per_rung}


def baseline_of(arch: Mapping) -> dict:
    """The cost probe's reference for an architecture (`sweeps.study.architecture`): the same shape,
    batch and precision with the baseline residual."""
    model = ModelConfig.from_dict({**arch["model"], "residual": BASELINE}).to_dict()
    return {**arch, "model": model}
