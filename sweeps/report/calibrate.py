"""Does a verdict keep its stated error rate? Simulated studies under the launcher's own rule.

    python -m sweeps.report.calibrate --repeats 3..5 --points 4 --effect 0 --sims 20000 --json out.json

K points are compared with a reference over paired seeds; each point's paired differences are
normal with mean `effect` paired standard deviations (0: the null, no point differs), or, with
`--shape FILE`, drawn with replacement from measured differences centred and scaled to SD 1 (the
measured shape: a t interval's odds under it, where the differences are skewed or heavy-tailed,
need not be the normal's; `normal_same_size` in the output: the same rates from normal samples of
as many values, the range that resampling so few values gives by itself). Adaptive seeds follow the
launcher (`sweeps.run.adaptive`): every point starts at `min` seeds; after each round the verdicts
of the whole family are computed with the same functions the fronts use (`sweeps.report.verdicts`:
the planned looks' p-values, Holm, the adjusted intervals, the words) and each point still open
(neither better, worse nor equivalent) below `max` gets one more seed. The verdicts reported are
those of the last round, as the final analysis reports them.

Written (and printed) as JSON: `false_verdict_rate` (per comparison: better or worse under the
null; at an effect, the wrong direction), `familywise_rate` (studies with any false verdict),
`power` (per comparison, the right direction, at the effect), `equivalent_rate`, `undecided_rate`,
`mean_seeds`, and `mc_error` (one standard error of each rate). `--spending naive --family none`
is the rule before planned looks (each look at the full level) for comparison.

`--recall auc|tokens --repeats N` calibrates the recall metrics' own tests
(`sweeps.report.exact_tests`: the exact paired permutation test of reserved_recall_auc, the paired
permutation log-rank of reserved_recall_tokens censored at the budget) beside the paired t test
on the same simulated studies: each seed's value of both designs drawn from the trials on record
(`--trials`, docs/verdicts/data/recall_study_trials.csv: 12 trials of studies/recall.yaml, pooled:
the null, no design differs), and with `--alternative emerged` the design's from the trials
that recalled by the budget only (a design that always recalls).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from sweeps.report import exact_tests
from sweeps.report.sequential import NAIVE, SPENDING, Design
from sweeps.report.verdicts import FAMILIES, OPEN, holm, t_intervals, t_p_values, words
from sweeps.study.tuning import choose


def simulate(
    design: Design,
    points: int,
    effect: float,
    sims: int,
    level: float = 0.95,
    family: str = "holm",
    margin: float = math.nan,
    correlation: float = 0.0,
    seed: int = 0,
    sample: np.ndarray | None = None,
) -> dict:
    """Rates over `sims` simulated studies (see the module docstring); `margin` and `effect` in
    paired standard deviations; `correlation` between the points' differences (a shared
    reference's noise makes them correlated; Holm holds under any dependence); `sample`: measured
    differences whose shape replaces the normal (`standardized`)."""
    rng = np.random.default_rng(seed)
    shape = (sims, points, design.n_max)
    unit = None if sample is None else standardized(sample)

    def draw(size: tuple[int, ...]) -> np.ndarray:
        return rng.standard_normal(size) if unit is None else rng.choice(unit, size=size)

    noise = draw(shape)
    if correlation:
        common = draw((sims, 1, design.n_max))
        noise = math.sqrt(1 - correlation) * noise + math.sqrt(correlation) * common
    diffs = effect + noise
    sums, squares = np.cumsum(diffs, axis=2), np.cumsum(diffs**2, axis=2)
    n = np.full((sims, points), design.n_min)
    while True:
        at = (n - 1)[..., None]
        total, square = np.take_along_axis(sums, at, 2)[..., 0], np.take_along_axis(squares, at, 2)[..., 0]
        mean = total / n
        with np.errstate(invalid="ignore", divide="ignore"):
            sd = np.sqrt(np.maximum(square - n * mean**2, 0) / (n - 1))
        p = t_p_values(mean, sd, n, design)
        levels, rejected = holm(p, 1 - level, family)
        lo, hi = t_intervals(mean, sd, n, design, levels)
        said = words(mean, lo, hi, rejected, lower_is_better=True, margin=margin)
        still_open = np.isin(said, OPEN) & (n < design.n_max)  # as sweeps.run.adaptive decides
        if not still_open.any():
            break
        n = n + still_open
    # lower is better: a positive effect is a worse point; at the null any better/worse is false
    right = "worse" if effect > 0 else "better"
    false = (
        np.isin(said, ("better", "worse"))
        if effect == 0
        else np.isin(said, ("better", "worse")) & (said != right)
    )
    rates = {
        "false_verdict_rate": float(false.mean()),
        "familywise_rate": float(false.any(axis=1).mean()),
        "power": float((said == right).mean()) if effect != 0 else 0.0,
        "equivalent_rate": float((said == "equivalent").mean()),
        "undecided_rate": float(np.isin(said, ("undecided", "indistinguishable")).mean()),
        "mean_seeds": float(n.mean()),
    }
    comparisons = sims * points
    rates["mc_error"] = {
        key: math.sqrt(value * (1 - value) / (sims if key == "familywise_rate" else comparisons))
        for key, value in rates.items()
        if key.endswith("_rate") or key == "power"
    }
    rates["settings"] = {
        "repeats": f"{design.n_min}..{design.n_max}", "points": points, "effect": effect, "sims": sims,
        "level": level, "family": family, "spending": design.spending,
        "margin": None if math.isnan(margin) else margin, "correlation": correlation, "seed": seed,
        "rule": design.name(), "shape": "normal" if sample is None else f"{len(sample)} measured values",
    }  # fmt: skip
    return rates


def simulate_tuned(
    points: int,
    rates: int,
    tune_seeds: int,
    seeds: int,
    sims: int,
    split: bool = True,
    level: float = 0.95,
    family: str = "holm",
    seed: int = 0,
    peak: float = 0.0,
) -> dict:
    """A `tune:` study where no design is better than the reference at its best rate
    (sweeps.study.tuning): each run is its curve's value at its rate, plus a seed effect shared by
    all, plus noise of its own (in paired SDs). The designs' curves are flat; the reference's is 0
    at the middle rate and `peak` worse elsewhere (0: flat too). The reference and each of `points`
    designs pick their rate from `rates` by `tuning.choose` over `tune_seeds` seeds, then are
    compared on `seeds` fresh seeds (`split`), or on the very tune seeds that made the choice (not
    split), by the launcher's verdict functions. A verdict is false when it says better or worse
    and the true difference at the chosen rates is 0 or of the other sign. Returns the false-verdict
    rates (per comparison and per study) and their MC errors."""
    rng = np.random.default_rng(seed)
    n_seeds = tune_seeds + (seeds if split else 0)
    curves = np.zeros((points + 1, rates))  # design 0 is the reference
    curves[0] = peak
    curves[0, rates // 2] = 0.0
    noise = rng.standard_normal((sims, points + 1, rates, n_seeds))
    values = curves[None, :, :, None] + rng.standard_normal((sims, 1, 1, n_seeds)) + noise
    tune = values[..., :tune_seeds]
    chosen = np.array(
        [
            [choose(dict(enumerate(map(list, tune[s, d]))), "minimize") for d in range(points + 1)]
            for s in range(sims)
        ]
    )
    at = values[np.arange(sims)[:, None], np.arange(points + 1)[None, :], chosen]  # [sims, designs, seeds]
    confirm = at[..., tune_seeds:] if split else at
    diffs = confirm[:, 1:] - confirm[:, :1]  # each design against the reference
    n = diffs.shape[-1]
    mean, sd = diffs.mean(axis=2), diffs.std(axis=2, ddof=1)
    _, rejected = holm(t_p_values(mean, sd, n, Design(n, n)), 1 - level, family)
    truth = curves[np.arange(1, points + 1)[None, :], chosen[:, 1:]] - curves[0, chosen[:, :1]]
    false = rejected & ((truth == 0) | (np.sign(mean) != np.sign(truth)))
    out = {"false_verdict_rate": float(false.mean()), "familywise_rate": float(false.any(axis=1).mean())}
    sizes = {"false_verdict_rate": sims * points, "familywise_rate": sims}
    out["mc_error"] = {k: math.sqrt(out[k] * (1 - out[k]) / sizes[k]) for k in sizes}
    out["settings"] = {"points": points, "rates": rates, "tune_seeds": tune_seeds, "seeds": n,
                       "peak": peak, "split": split, "sims": sims, "level": level, "family": family,
                       "seed": seed}  # fmt: skip
    return out


RECALL_TRIALS = Path("docs/verdicts/data/recall_study_trials.csv")


def recall_trials(path: Path = RECALL_TRIALS) -> dict[str, np.ndarray]:
    """The recall study's trials: `auc`, `tokens` (the budget where recall never came), `emerged`,
    and the `budget` they were censored at (the largest value, the last validation)."""
    import csv

    rows = list(csv.DictReader(line for line in path.read_text().splitlines() if not line.startswith("#")))
    emerged_at = [float(r["emerged_at"]) if r["emerged_at"] else math.nan for r in rows]
    budget = float(np.nanmax(emerged_at))
    tokens = np.array([budget if math.isnan(t) else t for t in emerged_at])
    return {"auc": np.array([float(r["auc"]) for r in rows]), "tokens": tokens,
            "emerged": tokens < budget, "budget": np.array(budget)}  # fmt: skip


def simulate_recall(metric: str, seeds: int, sims: int, level: float = 0.95, alternative: str = "null",
                    seed: int = 0, path: Path = RECALL_TRIALS) -> dict:  # fmt: skip
    """Rejection rates of a recall metric's own test and of the paired t test on the same studies
    of `seeds` paired seeds (`alternative`: `null`, or `emerged`: the design always recalls).
    Under the null every rejection is false; under `emerged` the right one is `better`."""
    trials = recall_trials(path)
    values, budget = trials[metric], float(trials["budget"])
    pool_x = values[trials["emerged"]] if alternative == "emerged" else values
    rng = np.random.default_rng(seed)
    x, ref = rng.choice(pool_x, (sims, seeds)), rng.choice(values, (sims, seeds))
    diffs = x - ref
    alpha = 1 - level
    mean, sd = diffs.mean(axis=1), diffs.std(axis=1, ddof=1)
    t_p = t_p_values(mean, sd, seeds, Design(seeds, seeds))
    better = mean > 0 if metric == "auc" else mean < 0  # auc: higher is better; tokens: fewer
    if metric == "auc":
        test = "permutation"
        arranged = np.abs(exact_tests.signs(seeds) @ diffs.T)  # [arrangement, study]
        p = np.mean(arranged >= np.abs(diffs.sum(axis=1))[None, :] - 1e-12, axis=0)
    else:
        test = "logrank"
        found = [exact_tests.logrank_p(a, b, budget) for a, b in zip(x, ref, strict=True)]
        p = np.array([f[0] for f in found])
        better = np.array([f[1] > 0 for f in found])  # more early events than expected: earlier
    out = {"metric": f"reserved_recall_{metric}", "test": test, "seeds": seeds, "sims": sims, "level": level,
           "alternative": alternative}  # fmt: skip
    for name, rejected, right in ((test, p <= alpha, better), ("t", t_p <= alpha, mean > 0 if metric == "auc"
                                                                else mean < 0)):  # fmt: skip
        rate = float(rejected.mean()) if alternative == "null" else float((rejected & right).mean())
        key = "false_verdict_rate" if alternative == "null" else "power"
        out[name] = {key: rate, "mc_error": math.sqrt(rate * (1 - rate) / sims)}
    return out


def standardized(sample) -> np.ndarray:
    """Values centred and scaled to mean 0 and SD 1 as a distribution (ddof 0), so that drawing from
    them with replacement has the measured shape and unit variance, as the normal draws have."""
    x = np.asarray(sample, dtype=float)
    if x.ndim != 1 or len(x) < 3 or not np.isfinite(x).all() or x.min() == x.max():
        raise ValueError(f"a shape needs at least 3 finite values that are not all equal; given {x.tolist()}")
    return (x - x.mean()) / x.std()


REFERENCE_SETS = 20  # normal samples of the measured size: the yardstick of a measured shape


def normal_same_size(design: Design, size: int, sims: int, sets: int = REFERENCE_SETS, **rule) -> dict:
    """The rates with `sets` samples of `size` normal draws in the measured values' place (each
    run on `sims // sets` studies): drawing from a few values alone adds ties and moves the rates,
    so a measured shape differs from the normal only where its rates leave this range."""
    runs = [
        simulate(design, sims=max(sims // sets, 1), seed=k,
                 sample=np.random.default_rng(1_000 + k).standard_normal(size), **rule)
        for k in range(sets)
    ]  # fmt: skip
    out: dict = {"sets": sets, "size": size}
    for key in ("false_verdict_rate", "power", "equivalent_rate", "undecided_rate"):
        values = [run[key] for run in runs]
        out[key] = {"mean": float(np.mean(values)), "min": min(values), "max": max(values)}
    return out


def read_sample(path: Path) -> np.ndarray:
    """Numbers separated by whitespace or commas (`#` starts a comment); bad input exits 2 naming
    the file and what is allowed."""
    allowed = "allowed: a text file of at least 3 numbers, not all equal, separated by whitespace or commas"
    try:
        text = path.read_text()
    except OSError as error:
        _refuse(f"--shape {path}: cannot read it ({error.strerror}); {allowed}")
    tokens = [w for line in text.splitlines() for w in line.split("#")[0].replace(",", " ").split()]
    try:
        values = np.array([float(w) for w in tokens])
        standardized(values)
    except ValueError as error:
        _refuse(f"--shape {path}: {error}; {allowed}")
    return values


def _refuse(message: str) -> None:
    print(message, file=sys.stderr)
    sys.exit(2)


def parse_repeats(text: str) -> tuple[int, int]:
    """`3..5` -> (3, 5); `3` -> (3, 3)."""
    low, _, high = text.partition("..")
    try:
        n_min, n_max = int(low), int(high or low)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--repeats: given {text!r}; allowed: MIN..MAX or N") from None
    if not 2 <= n_min <= n_max:
        raise argparse.ArgumentTypeError(f"--repeats: given {text!r}; allowed: 2 <= MIN <= MAX")
    return n_min, n_max


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sweeps.report.calibrate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--repeats", type=parse_repeats, default=(3, 5), help="MIN..MAX seeds (or N)")
    parser.add_argument("--points", type=int, default=4, help="points compared with the reference")
    parser.add_argument("--effect", type=float, default=0.0, help="true difference, paired SDs")
    parser.add_argument("--sims", type=int, default=20_000)
    parser.add_argument("--level", type=float, default=0.95)
    parser.add_argument("--family", choices=FAMILIES, default="holm")
    parser.add_argument("--spending", choices=(*SPENDING, NAIVE), default="obrien_fleming")
    parser.add_argument("--margin", type=float, default=math.nan, help="equivalence margin, paired SDs")
    parser.add_argument("--correlation", type=float, default=0.0, help="between the points' differences")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shape", type=Path, help="measured differences (a text file of numbers) "
                        "whose shape replaces the normal")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the rates here")
    parser.add_argument(
        "--tune", metavar="RATESxSEEDS", help="a tune: stage at the null, e.g. 5x2 (--repeats: fresh seeds)"
    )
    parser.add_argument(
        "--no-split", action="store_true", help="with --tune: confirm on the tune seeds themselves"
    )
    parser.add_argument(
        "--peak", type=float, default=0.0, help="with --tune: the reference's curve off its best"
    )
    parser.add_argument("--recall", choices=("auc", "tokens"), help="calibrate a recall metric's own test")
    parser.add_argument("--alternative", choices=("null", "emerged"), default="null",
                        help="with --recall: no difference, or a design that always recalls")  # fmt: skip
    args = parser.parse_args(argv)
    if args.recall:
        rates = simulate_recall(
            args.recall, args.repeats[1], args.sims, args.level, args.alternative, args.seed
        )
        return _write(rates, args.json)
    sample = read_sample(args.shape) if args.shape else None
    if sample is not None and args.tune:
        _refuse("--shape and --tune: the tune stage's simulation draws normal values only; give one of them")
    design = Design(*args.repeats, args.spending)
    if args.tune:
        n_rates, tune_seeds = (int(x) for x in args.tune.split("x"))
        rates = simulate_tuned(args.points, n_rates, tune_seeds, args.repeats[0], args.sims,
                               not args.no_split, args.level, args.family, args.seed, args.peak)  # fmt: skip
    else:
        rates = simulate(design, args.points, args.effect, args.sims, args.level, args.family, args.margin,
                         args.correlation, args.seed, sample)  # fmt: skip
        if sample is not None:
            rates["normal_same_size"] = normal_same_size(
                design, len(sample), args.sims, points=args.points, effect=args.effect, level=args.level,
                family=args.family, margin=args.margin, correlation=args.correlation,
            )  # fmt: skip
    return _write(rates, args.json)


def _write(rates: dict, path: Path | None) -> int:
    text = json.dumps(rates, indent=2)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    print(text, file=sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
