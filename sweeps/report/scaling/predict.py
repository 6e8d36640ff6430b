"""What a fitted ladder says beyond itself: the loss at target scales with intervals, the paired
difference to the reference design and its verdict, the compute at which two designs' curves
cross, and the backtest (refit without the largest rung, predict it).

Verdict words are the fronts' (`sweeps.report.stats`): better / worse / indistinguishable (the
interval of the difference covers 0), plus "beyond this ladder" when the target's compute is more
than `max_factor` times the largest rung's, where no interval from the ladder is worth a verdict.
"""

from __future__ import annotations

import math

import numpy as np

from sweeps.report.scaling.fitting import LadderFit, fit, identify
from sweeps.report.scaling.intervals import SEEDS, Bootstrap, bootstrap, percentile
from sweeps.report.scaling.table import Ladder
from sweeps.study.ladder import LadderError
from sweeps.study.targets import Target

MAX_FACTOR = 1000.0
BEYOND = "beyond this ladder"
NO_CROSSOVER = "no crossover between C_min and the largest target"


def parse_target(text: str) -> Target:
    """`name=N:D`, e.g. `large=6.5e8:2e10`."""
    name, _, rest = text.partition("=")
    n, _, d = rest.partition(":")
    try:
        target = Target(name.strip(), float(n), float(d))
    except ValueError:
        raise LadderError(f"--targets: {text!r} is not NAME=PARAMS:TOKENS (e.g. large=6.5e8:2e10)") from None
    if not target.name or target.params <= 0 or target.tokens <= 0:
        raise LadderError(f"--targets: {text!r} needs a name and positive PARAMS and TOKENS")
    return target


def verdict(lo: float, hi: float, extrapolation: float, max_factor: float = MAX_FACTOR) -> str:
    if extrapolation > max_factor:
        return BEYOND
    if hi < 0:
        return "better"
    if lo > 0:
        return "worse"
    return "indistinguishable"


def predictions(
    ladder: Ladder,
    result: LadderFit,
    boot: Bootstrap,
    targets: list[Target],
    reference: str | None = None,
    max_factor: float = MAX_FACTOR,
) -> list[dict]:
    """One row per design and target (the predictions.csv columns)."""
    largest = float(ladder.flops.max())
    reference = reference or ladder.designs[0]
    rows = []
    for t in targets:
        ref_point = float(result.designs[reference].predict(t.params, t.tokens))
        ref_samples = boot.predict(reference, [t.params], [t.tokens])[:, 0]
        for d in ladder.designs:
            point = float(result.designs[d].predict(t.params, t.tokens))
            samples = boot.predict(d, [t.params], [t.tokens])[:, 0]
            lo, hi = percentile(samples)
            extrapolation = t.flops / largest
            row = dict(design=d, target=t.name, params=t.params, tokens=t.tokens, flops=t.flops)
            row.update(loss=point, lo=lo, hi=hi, extrapolation=extrapolation)
            if d == reference:
                row.update(diff=0.0, diff_lo=0.0, diff_hi=0.0, verdict="reference")
            else:
                diff_lo, diff_hi = percentile(samples - ref_samples)
                row.update(diff=point - ref_point, diff_lo=diff_lo, diff_hi=diff_hi)
                row["verdict"] = verdict(diff_lo, diff_hi, extrapolation, max_factor)
            rows.append(row)
    return rows


def summary_lines(rows: list[dict], reference: str) -> list[str]:
    """One plain-language line per design and target, as the launch prints them."""
    out = []
    for r in rows:
        if r["verdict"] == "reference":
            continue
        below = r["diff"] < 0
        lo, hi = (-r["diff_hi"], -r["diff_lo"]) if below else (r["diff_lo"], r["diff_hi"])
        out.append(
            f"at {r['target']} ({r['params']:.3g} params, {r['tokens']:.3g} tokens) {r['design']} is "
            f"predicted {abs(r['diff']):.3f} [{lo:.3f}, {hi:.3f}] {'below' if below else 'above'} "
            f"{reference}, {r['extrapolation']:.3g}x beyond the largest rung: {r['verdict']}"
        )
    return out


def backtest_line(test: dict, reference: str) -> str:
    """The backtest in one line: designs whose held-out rung fell inside its prediction interval,
    and differences to the reference likewise (a law can hold per design and miss the gap)."""
    if not test.get("possible"):
        return f"backtest: {test['reason']}"
    designs = test["designs"].values()
    inside = sum(e["inside"] for e in designs)
    diffs = [e["diff"]["inside"] for e in designs if "diff" in e]
    line = f"backtest (largest rung held out): {inside}/{len(designs)} designs inside"
    if diffs:
        line += f", differences to {reference} {sum(diffs)}/{len(diffs)} inside"
    return line + " their 95% prediction intervals"


def path_ratio(ladder: Ladder, result: LadderFit, targets: list[Target]) -> float:
    """Tokens per parameter of the compute axis: the ladder's own ratio for the compute law (it
    holds only there), else the largest target's (else the largest rung's)."""
    if result.law == "compute" or not targets:
        i = int(np.argmax(ladder.flops))
        return float(ladder.tokens[i] / ladder.params[i])
    biggest = max(targets, key=lambda t: t.flops)
    return biggest.tokens / biggest.params


def along(compute, ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """(N, D) with 6 N D = compute and D = ratio N."""
    n = np.sqrt(np.asarray(compute, float) / (6.0 * ratio))
    return n, ratio * n


def _first_crossing(compute: np.ndarray, diff: np.ndarray) -> float:
    sign = np.sign(diff)
    change = np.flatnonzero(sign[1:] * sign[:-1] < 0)
    if not len(change):
        return math.nan
    i = change[0]  # interpolate in log compute between the grid points around the sign change
    x0, x1, y0, y1 = np.log(compute[i]), np.log(compute[i + 1]), diff[i], diff[i + 1]
    return float(np.exp(x0 - y0 * (x1 - x0) / (y1 - y0)))


def crossovers(ladder: Ladder, result: LadderFit, boot: Bootstrap, targets: list[Target], points: int = 400):
    """Per pair of designs: the compute where their fitted curves cross along the path ratio, in
    [C_min (the smallest rung), the largest target], with a percentile interval over the
    replicates that cross there, and the share of replicates that do."""
    ratio = path_ratio(ladder, result, targets)
    c_min = float(ladder.flops.min())
    c_max = max([t.flops for t in targets] + [float(ladder.flops.max())])
    compute = np.geomspace(c_min, c_max, points)
    n, d = along(compute, ratio)
    curves = {x: result.designs[x].predict(n, d) for x in ladder.designs}
    reps = {x: boot.predict(x, n, d) for x in ladder.designs}
    out = {"path_tokens_per_param": ratio, "c_min": c_min, "c_max": c_max, "pairs": {}}
    designs = ladder.designs
    for i, x in enumerate(designs):
        for y in designs[i + 1 :]:
            point = _first_crossing(compute, curves[x] - curves[y])
            crossing = np.array(
                [_first_crossing(compute, dx - dy) for dx, dy in zip(reps[x], reps[y], strict=True)]
            )
            share = float(np.mean(np.isfinite(crossing)))
            entry = {"replicates_crossing": share}
            if math.isnan(point):
                entry.update(flops=None, interval=None, message=NO_CROSSOVER)
            else:
                before = "x" if curves[x][0] < curves[y][0] else "y"
                lower, upper = (x, y) if before == "x" else (y, x)
                entry.update(
                    flops=point,
                    interval=percentile(crossing[np.isfinite(crossing)]),
                    message=f"{lower} is lower below {point:.3g} FLOPs, {upper} above",
                )
            out["pairs"][f"{x} vs {y}"] = entry
    return out


def backtest(
    ladder: Ladder,
    law: str,
    shared: bool,
    reference: str | None = None,
    replicates: int = 200,
    seed: int = 0,
    rungs: str = SEEDS,
) -> dict:
    """Refit without the largest rung (by compute), predict it: the measured mean of its runs against
    a prediction interval for that mean (the law's bootstrap plus run-to-run noise drawn from the
    refit's residuals; `mean_interval` is the law's alone), per design and for the paired difference
    to the reference."""
    reference = reference or ladder.designs[0]
    keys = ladder.rung_keys()
    held = keys[-1]
    rung = ladder.rung_of_row()
    train, test = (
        ladder.take(np.flatnonzero(rung != len(keys) - 1)),
        ladder.take(np.flatnonzero(rung == len(keys) - 1)),
    )
    out = {"rung": {"params": held[0], "tokens": held[1], "flops": 6 * held[0] * held[1]}}
    try:
        for d in ladder.designs:
            identify(train.only(d), law)
        result = fit(train, law, shared)
    except LadderError as err:
        return {**out, "possible": False, "reason": f"without its largest rung: {err}"}
    boot = bootstrap(train, result, replicates, seed, rungs)
    rng = np.random.default_rng(seed + 1)
    measured = {d: test.only(d) for d in ladder.designs}
    samples = {d: boot.predict(d, [held[0]], [held[1]])[:, 0] for d in ladder.designs}
    residuals = {d: _residuals(train.only(d), result.designs[d]) for d in ladder.designs}
    out.update(possible=True, extrapolation=6 * held[0] * held[1] / float(train.flops.max()), designs={})
    for d in ladder.designs:
        # What the measured mean of k runs should fall in: the law's mean at the rung (bootstrap)
        # plus the mean of k run-to-run residuals drawn from the fit's own residuals.
        k = len(measured[d].loss)
        noise = _mean_draws(rng, residuals[d], k, replicates)
        lo, hi = percentile(samples[d] + noise)
        value = float(np.mean(measured[d].loss))
        entry = {"measured": value, "predicted": float(result.designs[d].predict(*held)), "lo": lo, "hi": hi}
        entry["inside"] = bool(lo <= value <= hi)
        entry["mean_interval"] = percentile(samples[d])
        if d != reference:
            diff = _paired_mean(measured[d], measured[reference])
            paired = _paired_residuals(train, d, reference, residuals)
            if paired is not None:  # seeds: the difference's noise is that of paired differences
                noise = _mean_draws(rng, paired, k, replicates)
            else:
                k_ref = len(measured[reference].loss)
                noise = noise - _mean_draws(rng, residuals[reference], k_ref, replicates)
            delta = samples[d] - samples[reference]
            dlo, dhi = percentile(delta + noise)
            entry["diff"] = {
                "measured": diff,
                "predicted": entry["predicted"] - float(result.designs[reference].predict(*held)),
                "lo": dlo,
                "hi": dhi,
                "inside": bool(dlo <= diff <= dhi),
                "mean_interval": percentile(delta),
            }
        out["designs"][d] = entry
    return out


def _residuals(part: Ladder, fitted) -> dict:
    """Measured minus fitted loss per run, keyed by (N, D, seed) (by row without seeds)."""
    resid = part.loss - fitted.predict(part.params, part.tokens)
    seeds = part.seed if part.seed is not None else np.arange(len(resid)).astype(str)
    keys = zip(part.params.tolist(), part.tokens.tolist(), seeds.tolist(), strict=True)
    return dict(zip(keys, resid.tolist(), strict=True))


def _paired_residuals(train: Ladder, d: str, reference: str, residuals: dict):
    if train.seed is None:
        return None
    shared = set(residuals[d]) & set(residuals[reference])
    return {key: residuals[d][key] - residuals[reference][key] for key in shared} or None


def _mean_draws(rng: np.random.Generator, residuals: dict, k: int, replicates: int) -> np.ndarray:
    values = np.array(list(residuals.values()))
    return values[rng.integers(0, len(values), size=(replicates, k))].mean(axis=1)


def _paired_mean(x: Ladder, ref: Ladder) -> float:
    """Mean of x - ref over the seeds both have (difference of means without seeds)."""
    if x.seed is None or ref.seed is None:
        return float(np.mean(x.loss) - np.mean(ref.loss))
    ref_by_seed = dict(zip(ref.seed.tolist(), ref.loss.tolist(), strict=True))
    diffs = [
        v - ref_by_seed[s] for s, v in zip(x.seed.tolist(), x.loss.tolist(), strict=True) if s in ref_by_seed
    ]
    return float(np.mean(diffs)) if diffs else math.nan
