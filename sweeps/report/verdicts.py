"""The verdict rule: a study's comparisons with the reference judged as one family.

One rule serves the launcher (fronts, adaptive seeds, the dry run) and the calibration
(`python -m sweeps.report.calibrate`), which calls these same functions on arrays of simulated
studies, so what the calibration measures is what a launch prints. Every function is vectorised:
the last axis is the family (the comparisons of one study), leading axes are simulated studies.

1. p-values: the paired t statistic of each seed-moved comparison against the planned looks'
   boundaries (`sweeps.report.sequential.Design`: valid whichever look a point stopped at); a
   timing-round comparison (the probe's rounds) by the sign test; an exact metric (memory,
   parameters) is no test and stays out of the family.
2. family: `holm` (default; Holm's step-down over the points x objectives compared with the
   reference, valid under any dependence between them, e.g. the shared reference), `bonferroni`
   (every comparison at level / family size: less power than Holm, but no comparison's level
   depends on another's p-value, so one noisy comparison cannot move another's word) or `none`
   (each comparison at the full level). Each comparison gets the level it is judged at: its own
   step if rejected, else the level where the step-down stopped.
3. interval at that level (the adjusted interval): it excludes 0 exactly when the comparison is
   rejected. Words: with a margin for the objective, `equivalent` when the interval lies inside
   +-margin (two one-sided tests, each at half the level), whether or not it excludes 0: a
   difference shown to be smaller than what the study calls a difference is the same for its
   user; else `better` / `worse` (rejected, by the objective's direction); else `undecided` with
   a margin and `indistinguishable` without; and `undecided` when there is no spread to test (one
   seed). A margin of a metric shown relative to the reference (throughput, memory, parameters:
   `shown: relative` in trainers.metrics) is a fraction of the reference's value (0.05: +-5%).
4. for a comparison that is not decided: the smallest difference its seeds could detect at 80%
   power at its level and, with a margin, the seeds a fixed-count study would need to decide it
   at the margin (interval inside +-margin with 80% power when there is no difference; the same
   count detects a difference of one margin).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np

from sweeps.report import exact_tests
from sweeps.report.sequential import SPENDING, Design, spent
from sweeps.report.stats import median_interval

FAMILIES = ("holm", "bonferroni", "none")
DECIDED = ("better", "worse", "equivalent")
OPEN = ("indistinguishable", "undecided")  # more seeds could still decide it
POWER = 0.8


@dataclasses.dataclass(frozen=True)
class Rule:
    """How verdicts are reached: level, family adjustment, the looks' design, margins."""

    level: float = 0.95
    family: str = "holm"
    spending: str = "obrien_fleming"
    margins: Mapping[str, float] = dataclasses.field(default_factory=dict)
    n_min: int = 1
    n_max: int = 1

    def __post_init__(self):
        if not 0.5 <= self.level < 1:
            raise ValueError(f"verdicts.level: given {self.level!r}; allowed: 0.5 <= level < 1")
        if self.family not in FAMILIES:
            raise ValueError(f"verdicts.family: given {self.family!r}; allowed: {', '.join(FAMILIES)}")
        if self.spending not in SPENDING:
            raise ValueError(f"verdicts.spending: given {self.spending!r}; allowed: {', '.join(SPENDING)}")

    @property
    def alpha(self) -> float:
        return 1 - self.level

    @property
    def design(self) -> Design:
        return Design(self.n_min, max(self.n_min, self.n_max), self.spending)

    def describe(self, family_size: int | None = None) -> str:
        """e.g. `95%, Holm over 8 comparisons, looks at 3..5 seeds, Lan-DeMets O'Brien-Fleming-type
        alpha spending, margins val_loss +-0.01`."""
        size = f" over {family_size} comparison(s)" if family_size is not None else ""
        family = {"holm": "Holm", "bonferroni": "Bonferroni"}.get(self.family, "no family adjustment") + size
        if family_size is not None and family_size <= 1:
            family = f"{family_size} comparison (nothing to adjust)"
        margins = ", ".join(f"{m} +-{v:g}" for m, v in self.margins.items())
        return f"{self.level:.0%}, {family}, {self.design.name()}" + (
            f", margins {margins}" if margins else ""
        )


def rule_for(study) -> Rule:
    """The rule of a study: its `verdicts:` and `margins:`, its seeds' planned looks (min..max)."""
    v = study.verdicts
    return Rule(v.level, v.family, v.spending, dict(study.margins), study.seeds.min, study.seeds.max)


def t_p_values(mean, sd, n, design: Design):
    """p-values of paired mean differences (mean, sd over n shared seeds) at look n of `design`."""
    mean, sd, n = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (mean, sd, n)))
    with np.errstate(divide="ignore", invalid="ignore"):
        t_abs = np.abs(mean) / (sd / np.sqrt(n))
    t_abs = np.where((sd == 0) & (mean != 0), np.inf, t_abs)
    return design.p_value(n.astype(int), t_abs)


def t_intervals(mean, sd, n, design: Design, levels):
    """mean -+ boundary(n, level) * sd / sqrt(n): the adjusted interval (nan for n < 2)."""
    mean, sd, n, levels = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (mean, sd, n, levels)))
    with np.errstate(invalid="ignore"):  # n < 2: an infinite boundary times no spread
        half = design.boundary(n.astype(int), levels) * sd / np.sqrt(np.maximum(n, 1))
    half = np.where((n >= 2) & np.isfinite(half), half, np.nan)
    return mean - half, mean + half


def sign_test_p(diffs) -> float:
    """Two-sided sign test of paired differences (zeros dropped): the timing rounds' p-value, the
    test their order-statistic interval inverts."""
    from scipy.stats import binom

    diffs = np.asarray(diffs, dtype=float)
    above, below = int(np.sum(diffs > 0)), int(np.sum(diffs < 0))
    if above + below == 0:
        return 1.0
    return float(min(1.0, 2 * binom.cdf(min(above, below), above + below, 0.5)))


def holm(p, alpha: float, family: str = "holm"):
    """(levels, rejected): the level each comparison of the family (last axis) is judged at, and
    whether it is rejected there. `bonferroni`: every comparison at alpha / m; `none`: at alpha."""
    p = np.asarray(p, dtype=float)
    if family not in FAMILIES:
        raise ValueError(f"verdicts.family: given {family!r}; allowed: {', '.join(FAMILIES)}")
    m = p.shape[-1] if p.ndim else 1
    if family == "none" or m <= 1:
        levels = np.full(p.shape, alpha)
        return levels, p <= levels
    if family == "bonferroni":
        levels = np.full(p.shape, alpha / m)
        return levels, p <= levels
    order = np.argsort(p, axis=-1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=-1)
    steps = alpha / (m - np.arange(m))  # alpha/m, alpha/(m-1), ..., alpha
    rejected = np.logical_and.accumulate(ranked <= steps, axis=-1)
    stopped = np.minimum(rejected.sum(axis=-1, keepdims=True), m - 1)  # the first step not passed
    ranked_levels = np.where(rejected, steps, alpha / (m - stopped))
    levels, out = np.empty_like(ranked), np.empty_like(rejected)
    np.put_along_axis(levels, order, ranked_levels, axis=-1)
    np.put_along_axis(out, order, rejected, axis=-1)
    return levels, out


def words(mean, lo, hi, rejected, lower_is_better, margin=math.nan):
    """The verdict per comparison (see the module docstring); arrays broadcast."""
    mean, lo, hi, margin = (np.asarray(a, dtype=float) for a in (mean, lo, hi, margin))
    rejected, lower_is_better = np.asarray(rejected, dtype=bool), np.asarray(lower_is_better, dtype=bool)
    better = (mean < 0) == lower_is_better
    inside = (lo > -margin) & (hi < margin)
    open_word = np.where(
        np.isfinite(margin), np.where(inside, "equivalent", "undecided"), "indistinguishable"
    )
    word = np.where(rejected, np.where(better, "better", "worse"), open_word)
    word = np.where(np.isfinite(margin) & inside, "equivalent", word)
    return np.where(np.isfinite(lo) | rejected, word, "undecided").astype(object)


def detectable(sd, n, design: Design, levels, power: float = POWER):
    """The smallest true difference these seeds would call better/worse with probability `power`
    at the comparison's level: (boundary + t_power) * sd / sqrt(n); nan for n < 2."""
    from scipy.stats import t

    sd, n, levels = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (sd, n, levels)))
    df = np.maximum(n - 1, 1)
    out = (design.boundary(n.astype(int), levels) + t.ppf(power, df)) * sd / np.sqrt(np.maximum(n, 1))
    return np.where(n >= 2, out, np.nan)


def seeds_to_decide(sd: float, margin: float, level_alpha: float, power: float = POWER, most: int = 10_000):
    """Seeds a fixed-count study needs so that, with no true difference, its interval at
    `level_alpha` lies inside +-margin with probability `power`: the smallest n with
    (t_{1-alpha/2} + t_{(1+power)/2}) * sd / sqrt(n) <= margin (None if more than `most`)."""
    from scipy.stats import t

    if not (math.isfinite(sd) and math.isfinite(margin)) or margin <= 0:
        return None
    if sd == 0:
        return 2
    ns = np.arange(2, most + 1)
    needed = (t.isf(level_alpha / 2, ns - 1) + t.ppf((1 + power) / 2, ns - 1)) * sd / np.sqrt(ns)
    fits = np.nonzero(needed <= margin)[0]
    return int(ns[fits[0]]) if len(fits) else None


KINDS = ("seeds", "rounds", "exact", *exact_tests.TESTS)
TEST_OF_KIND = {"seeds": "t", "rounds": "sign", "exact": "exact"}  # the others are their test's name


def judge(comparisons: list[dict], rule: Rule) -> dict:
    """Judges a study's comparisons with the reference as one family, in place. Each comparison:
    `metric`, `direction`, `kind` (`seeds`: a paired t over shared seeds at the planned looks;
    `rounds`: timing rounds, the sign test and an order-statistic interval of `diffs`; `exact`: no
    test, any difference decides; `permutation`: the exact paired permutation test of `diffs`,
    its interval within `bounds`; `logrank`: the paired log-rank of `pairs` ({"x", "ref"})
    censored at `censor_at`, no interval; `sweeps.report.exact_tests`), `mean`, `std`, `n` (and
    `diffs` for rounds; `scale`, the reference's value, for a metric whose margin is relative).
    Adds `test` (the test's name), `p`,
    `alpha` (the level it is judged at), `lo`, `hi` (the adjusted interval), `verdict`, and for a
    seeds comparison not decided `detectable` (80% power) and, with a margin, `seeds_to_decide`.
    Returns what the report names: {"rule": text, "family": size, "level", "adjustment", ...}."""

    design, alpha = rule.design, rule.alpha
    looks = len(design.looks)  # the exact tests' share of the level per look (Bonferroni over looks)
    p = np.ones(len(comparisons))
    for i, c in enumerate(comparisons):
        if c["kind"] not in KINDS:
            raise ValueError(f"comparison kind: given {c['kind']!r}; allowed: {', '.join(KINDS)}")
        if c["kind"] == "exact":
            p[i] = 0.0 if c["n"] >= 1 and c["mean"] != 0 else 1.0
        elif c["kind"] == "rounds":
            p[i] = sign_test_p(c["diffs"]) if c["n"] >= 1 else 1.0
        elif c["kind"] == "permutation":
            p[i] = min(1.0, exact_tests.permutation_p(c["diffs"]) * looks)
        elif c["kind"] == "logrank":
            found, later = exact_tests.logrank_p(c["pairs"]["x"], c["pairs"]["ref"], c["censor_at"])
            p[i], c["o_minus_e"] = min(1.0, found * looks), later
        else:
            p[i] = float(t_p_values(c["mean"], c["std"], c["n"], design))
    family = [i for i, c in enumerate(comparisons) if c["kind"] != "exact"]
    levels, rejected = np.full(len(comparisons), alpha), p <= alpha
    if family:
        levels[family], rejected[family] = holm(p[family], alpha, rule.family)
    for i, c in enumerate(comparisons):
        margin = rule.margins.get(c["metric"], math.nan) * abs(c.get("scale", 1.0))
        if c["kind"] == "seeds":
            lo, hi = (float(v) for v in t_intervals(c["mean"], c["std"], c["n"], design, levels[i]))
        elif c["kind"] == "rounds" and c["n"] >= 1:
            ci = median_interval(c["diffs"], 1 - levels[i])
            lo, hi = ci["lo"], ci["hi"]
        elif c["kind"] == "permutation":
            bounds = c.get("bounds", (-math.inf, math.inf))
            lo, hi = exact_tests.permutation_interval(c["diffs"], levels[i] / looks, bounds)
        elif c["kind"] == "logrank":  # no interval: the sign of observed minus expected events
            lo = hi = math.nan
        elif c["n"] >= 1:  # exact: the difference itself
            lo = hi = c["mean"]
        else:
            lo = hi = math.nan
        signed = -c.get("o_minus_e", 0.0) if c["kind"] == "logrank" else c["mean"]  # < 0: earlier
        said = str(words(signed, lo, hi, bool(rejected[i]), c["direction"] == "minimize", margin))
        test = TEST_OF_KIND.get(c["kind"], c["kind"])
        c.update(test=test, p=float(p[i]), alpha=float(levels[i]), lo=lo, hi=hi, verdict=said)
        if said in DECIDED or c["n"] < 2:
            continue
        level = float(levels[i])
        if c["kind"] == "seeds":
            c["detectable"] = float(detectable(c["std"], c["n"], design, levels[i]))
            if math.isfinite(margin):
                c["seeds_to_decide"] = seeds_to_decide(c["std"], margin, level)
        elif c["kind"] == "permutation" and math.isfinite(margin):
            c["seeds_to_decide"] = exact_tests.seeds_to_decide_permutation(c["diffs"], margin, level / looks)
        elif c["kind"] == "logrank":
            x, ref = c["pairs"]["x"], c["pairs"]["ref"]
            c["seeds_to_decide"] = exact_tests.seeds_to_decide_logrank(x, ref, c["censor_at"], level / looks)
    adjusted = rule.family != "none" and len(family) > 1
    tests = {c["metric"]: c["test"] for c in comparisons}
    return {
        "rule": rule.describe(len(family))
        + ("; tests: " + ", ".join(f"{m} {t}" for m, t in tests.items()) if tests else ""),
        "tests": tests,
        "level": rule.level,
        "family": len(family),
        "adjustment": rule.family if adjusted else "none",
        "looks": list(design.looks),
        "spending": rule.spending,
        "margins": dict(rule.margins),
    }


def looks_text(rule: Rule, family_size: int) -> list[str]:
    """The dry run's lines: the rule, then each look's |t| boundary for a paired comparison at the
    full level and at Holm's strictest step (level / family size; Bonferroni: every comparison's
    level), with the error spent so far."""

    design = rule.design
    lines = [rule.describe(family_size)]
    strictest = rule.alpha / max(family_size, 1) if rule.family != "none" else rule.alpha
    step = "Holm's first step" if rule.family == "holm" else "Bonferroni's level"
    for n in design.looks:
        if n < 2:
            lines.append(f"  look at {n} seed(s): no spread, no verdict (exact metrics only)")
            continue
        at_full, at_strict = design.boundary(n, rule.alpha), design.boundary(n, strictest)
        share = (
            rule.alpha if design.n_min == design.n_max else spent(n / design.n_max, rule.alpha, rule.spending)
        )
        text = f"  look at {n} seed(s): paired |t| >= {float(at_full):.3f}"
        text += f" (error spent {float(share):.4f} of {rule.alpha:g})"
        if strictest < rule.alpha:
            text += f"; {step} ({strictest:.4f}): |t| >= {float(at_strict):.3f}"
        lines.append(text)
    return lines


def verdict(
    diff: Mapping, direction: str, exact: bool = False, margin: float = math.nan, robust: bool = False
) -> str:
    """The word for one paired difference (`paired`'s) judged alone at 95% with one look."""
    n = diff["n"]
    kind = "exact" if exact else "rounds" if robust else "seeds"
    comparison = {"metric": "m", "direction": direction, "kind": kind, "mean": diff["mean"],
                  "std": diff["std"], "n": n, "diffs": diff.get("diffs", [])}  # fmt: skip
    rule = Rule(margins={"m": margin} if math.isfinite(margin) else {}, n_min=max(n, 1), n_max=max(n, 1))
    judge([comparison], rule)
    return comparison["verdict"]
