"""The reference rule, in one place: what every point of a study is compared with.

A study's reference is its `reference:` (a point's params), else the first point whose design is
the baseline (`model.residual.kind: none`). A scaling ladder has one reference per rung: the
reference design (its params without `rung`) at that rung's size and budget, so that a paired
difference over shared seeds measures the design and not the size. The cost probe uses the same
idea per architecture: each architecture is timed against itself with the baseline residual
(`baseline_of`). Verdicts, adaptive seeds, ladder fits and the probe all read it from here.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Iterable, Mapping
from typing import Literal

from arch import ModelConfig
from arch.configtree import ConfigError, Issue
from sweeps.study.run_record import RunRecord
from sweeps.study.rungs import RUNG, without_rung
from sweeps.study.space import point_id, point_name
from trainers.flops import config_flops_per_token

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
        if MATCH in params:  # a matched baseline (`reference.match`), compared with its design only
            continue
        if params == study.reference if study.reference is not None else is_baseline(study, params):
            return RunRecord.of(t).point
    return None


def reference_points(study, trials: Iterable) -> dict[str, str]:
    """Each point's reference, {point id: reference point id} (a reference maps to itself)."""
    trials = list(trials)
    if not study.rungs:
        ref = reference_point(study, trials)
        points = {RunRecord.of(t).point for t in trials if MATCH not in t.params}
        return {} if ref is None else dict.fromkeys(points, ref) | {ref: ref}
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


# --- matched baselines (`reference: {match: params | flops}`) ----------------------------------
#
# A design that adds parameters or FLOPs could win on val_loss for that reason alone. With
# `reference.match`, each design point is also compared with a baseline of its own budget: the
# reference point widened (d_ff first, then d_model, each a multiple of the hardware's tile) to
# within TOLERANCE of the design's non-embedding parameters or training FLOPs per token
# (trainers.flops). The widened shapes become one grid parameter, MATCH (`MatchedParam`), that only
# the reference point takes (as an optional extra: the plain reference keeps its params), so the
# grid, resume, the fingerprint and MLflow params need nothing else. A design already within
# TOLERANCE of the plain reference is matched by it (no extra point).

MATCH = "match"  # the grid parameter of the matched baselines; also the `reference:` key
MATCH_KEYS = ("match", "multiple")  # what `reference:` may hold beside a point's params
MATCH_KINDS = ("params", "flops")
TOLERANCE = 0.01  # |count - design's| / design's
# The multiple d_ff and d_model are rounded to: a GPU's tensor-core tiles want 64; a CPU's fp32
# vector lanes 8 (AVX2; AVX-512's 16 is a multiple of it).
MULTIPLE = {"gpu": 64, "cpu": 8}
WIDEST = 2.0  # d_model is widened up to this factor of the reference's before a match is refused


@dataclasses.dataclass(frozen=True)
class MatchConfig:
    """`reference: {match: params | flops, multiple: m}` (the rest of `reference:` names the point)."""

    match: Literal["params", "flops"] = "params"
    multiple: int | None = dataclasses.field(default=None, metadata={"ge": 1})  # None: MULTIPLE


@dataclasses.dataclass(frozen=True)
class Match:
    """A design point's matched baseline: its shape, label (None: the plain reference) and counts."""

    point: str  # the design's point id
    name: str  # the design's point name
    label: str | None  # the MATCH label of its baseline; None: the plain reference is within tolerance
    d_model: int
    d_ff: int
    design_params: int  # non-embedding parameters
    design_flops: float  # training FLOPs per token
    params: int  # the matched baseline's
    flops: float

    def gap(self, what: str) -> float:
        """(baseline - design) / design, for `params` or `flops`."""
        if what == "params":
            return (self.params - self.design_params) / self.design_params
        return (self.flops - self.design_flops) / self.design_flops


def split_reference(reference) -> tuple[dict | None, dict | None]:
    """`reference:` as written -> (the point's params or None, the match options or None)."""
    if not isinstance(reference, Mapping) or MATCH not in reference:
        return reference, None
    options = {k: v for k, v in reference.items() if k in MATCH_KEYS}
    params = {k: v for k, v in reference.items() if k not in MATCH_KEYS}
    return params or None, options


def multiple_of(study) -> int:
    """The multiple shapes are rounded to: `reference.multiple`, else the hardware's."""
    given = study.reference_match.multiple
    return given if given is not None else MULTIPLE["gpu" if study.resources.gpus > 0 else "cpu"]


def _counts(model: Mapping, seq_len: int) -> tuple[int, float]:
    """(non-embedding parameters, training FLOPs per token) of a model, from its config's shapes
    (once per shape: every design's search starts from the same reference shapes)."""
    return _config_counts(json.dumps(dict(model), sort_keys=True), seq_len)


@functools.lru_cache(maxsize=1024)
def _config_counts(model: str, seq_len: int) -> tuple[int, float]:
    cfg = ModelConfig.from_dict(json.loads(model))
    return cfg.param_count() - cfg.embedding_params(), config_flops_per_token(cfg, seq_len)


def _nearest(model: Mapping, seq_len: int, target: float, what: str, multiple: int) -> tuple:
    """(gap, d_model, d_ff, params, flops) of the baseline nearest `target` in `what` (params or
    flops): d_ff first (any multiple at the reference's d_model), then d_model widened in steps
    that keep the heads even, up to WIDEST x; the first shape within TOLERANCE wins. Both counts
    are affine in d_ff at a fixed d_model, so two builds give the d_ff to round."""
    index = MATCH_KINDS.index(what)
    d0, heads = int(model["d_model"]), int(model["n_heads"])
    step = math.lcm(multiple, 2 * heads)  # d_model / n_heads stays an even head_dim
    widths = [d0, *range((d0 // step + 1) * step, int(WIDEST * d0) + 1, step)]
    best = None
    for d in widths:
        f0 = max(multiple, int(model["d_ff"]) // multiple * multiple)
        low = _counts({**model, "d_model": d, "d_ff": f0}, seq_len)[index]
        slope = (_counts({**model, "d_model": d, "d_ff": f0 + multiple}, seq_len)[index] - low) / multiple
        exact = f0 + (target - low) / slope
        below = max(multiple, math.floor(exact / multiple) * multiple)
        for f in (below, below + multiple):
            params, flops = _counts({**model, "d_model": d, "d_ff": f}, seq_len)
            gap = abs((params, flops)[index] - target) / target
            if best is None or gap < best[0]:
                best = (gap, d, f, params, flops)
        if best[0] <= TOLERANCE:
            break
    return best


def label_of(d0: int, d_model: int, d_ff: int) -> str:
    """A matched baseline's MATCH label, from its shape: `d_ff448`, or `d_model136_d_ff320`."""
    return f"d_ff{d_ff}" if d_model == d0 else f"d_model{d_model}_d_ff{d_ff}"


def find_matches(study) -> list[Match]:
    """Each planned point's matched baseline (the reference itself excluded), by the study's
    `reference.match`; ConfigError naming `reference.match` when a study cannot have them or a
    point's budget cannot be reached within TOLERANCE."""
    cfg, where = study.reference_match, "reference.match"
    problem = None
    if study.rungs:
        problem = "a ladder compares designs at each rung's own size; allowed: a study without scaling:"
    elif study.sampler.kind != "grid":
        problem = f"matched baselines are grid points; allowed: sampler.kind grid, not {study.sampler.kind!r}"
    elif study.seeds.adaptive:
        problem = "adaptive seeds look at the plain comparisons only; allowed: a fixed repeats"
    elif (ref := reference_design(study)) is None:
        problem = "no reference point (a baseline design or reference: params); allowed: a study with one"
    if problem:
        raise ConfigError([Issue(where, f"given {cfg.match!r}: {problem}")])
    multiple = multiple_of(study)
    ref_model = study.trial_config(ref).model.to_dict()
    seq_len = study.base.data.seq_len
    plain = _counts(ref_model, seq_len)
    out, issues = [], []
    for point in study.planned_points():
        if point == ref:
            continue
        design = study.trial_config(point)
        counts = _counts(design.model.to_dict(), seq_len)
        target = counts[MATCH_KINDS.index(cfg.match)]
        name = point_name(point)
        if abs(plain[MATCH_KINDS.index(cfg.match)] - target) / target <= TOLERANCE:
            shape = (None, ref_model["d_model"], ref_model["d_ff"], *plain)
        else:
            gap, d, f, params, flops = _nearest(ref_model, seq_len, target, cfg.match, multiple)
            if gap > TOLERANCE:
                issues.append(
                    Issue(
                        where,
                        f"given {cfg.match!r}: no baseline within {TOLERANCE:.0%} of {name}'s "
                        f"{target:.6g} {_UNITS[cfg.match]}: the nearest, d_model {d} d_ff {f}, is "
                        f"{gap:.2%} away (d_ff and d_model in multiples of {multiple}, d_model up to "
                        f"{WIDEST:g}x); allowed: the other match, a finer reference.multiple, or no match",
                    )
                )
                continue
            shape = (label_of(ref_model["d_model"], d, f), d, f, params, flops)
        label, d, f, params, flops = shape
        out.append(Match(point_id(point), name, label, d, f, counts[0], counts[1], params, flops))
    if issues:
        raise ConfigError(issues)
    return out


_UNITS = {"params": "non-embedding parameters", "flops": "training FLOPs per token"}


def matched_space(study, matches: list[Match]) -> dict | None:
    """The MATCH parameter of `matches` ({type: matched, when: the reference's params, choices:
    {label: the shape's key paths}}), None when every design is matched by the plain reference."""
    ref = reference_design(study)
    d0 = study.trial_config(ref).model.d_model
    choices = {}
    for m in matches:
        if m.label is not None:
            widened = {"model.d_model": m.d_model} if m.d_model != d0 else {}
            choices[m.label] = {"model.d_ff": m.d_ff, **widened}
    if not choices:
        return None
    return {"type": "matched", "when": dict(ref), "choices": choices}


def matched_points(study, trials: Iterable) -> dict[str, str]:
    """{design point id: its matched baseline's point id} among `trials`' points (the plain
    reference's id for a design it matches already)."""
    if study.reference_match is None:
        return {}
    ref = reference_design(study)
    present = {RunRecord.of(t).point for t in trials}
    out = {}
    for m in study.matches:
        baseline = point_id(ref if m.label is None else {**ref, MATCH: m.label})
        if m.point in present and baseline in present:
            out[m.point] = baseline
    return out
