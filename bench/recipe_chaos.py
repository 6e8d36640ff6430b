"""How chaotic is a training recipe, and how many seeds does it cost? A summary of the runs that
`bench.training_equivalence` wrote to its `--runs` file, one row per recipe.

    python -m bench.recipe_chaos docs/verdicts/recipe_runs.jsonl [--json out.json]

A recipe is a run's trial without its seed and residual design; it is named by the keys where it
differs from the reference (`--recipe`, default the trial of studies/cpu_base.yaml at the runs'
budget). Per recipe, from the runs that pair by seed:

- **one-ulp move**: the baseline run of a seed minus the same seed with every initial Q/K weight
  moved one ulp (`bench/patches/one_ulp_qk.py`): how far float rounding alone moves the final
  val_loss. A recipe that is not chaotic moves nothing; at cpu_base's 3e-3 one seed moves 0.02.
- **baseline**: the baseline's final val_loss over seeds (mean, SD): does the recipe train as well.
- **paired**: SATFormer (any gated `value_residual` run) minus the baseline of the same seed: the
  mean, its SD, a one-sided 95% upper bound of that SD (chi-square; a study's seeds are chosen
  from it, not from the point estimate), and the shape of the differences (skewness, excess
  kurtosis, Shapiro-Wilk p, the largest |z|): heavy tails would make a t interval spend its
  width on one seed.
- **spikes**: training-loss spikes per run (`spikes`): steps whose loss rises above the median of
  the previous `WINDOW` steps by more than `SPIKE_NATS` and by more than `SPIKE_MADS` robust
  deviations of that window, after warmup.
- **wall**: the median wall seconds of a run (1 thread): under load this is the machine's load,
  not the recipe; compare recipes at equal tokens, never by this column on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from bench.training_equivalence import DEFAULT_RECIPE, recipe_trial

ULP_PATCH = "one_ulp_qk.py"
UPPER = 0.95  # one-sided level of the paired SD's upper bound
WINDOW, SPIKE_NATS, SPIKE_MADS = 20, 0.05, 6.0


def flatten(tree: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, path + "."))
        else:
            out[path] = value
    return out


def recipe_of(trial: dict) -> dict:
    """The trial without what varies inside one recipe's comparisons: seed and residual design."""
    tree = json.loads(json.dumps(trial))
    tree.pop("seed", None)
    tree.get("model", {}).pop("residual", None)
    return tree


def label(recipe: dict, reference: dict) -> str:
    """`train.lr=0.002, model.qk_norm=True`: where `recipe` differs from `reference`."""
    a, b = flatten(recipe), flatten(reference)
    diff = [f"{k}={a.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    return ", ".join(diff) or "reference"


def arm_of(row: dict, trial: dict) -> str | None:
    """baseline | ulp (baseline + one-ulp Q/K) | satformer (gated value residual) | None."""
    residual = trial.get("model", {}).get("residual") or {"kind": "none"}
    patch = row.get("patch") or ""
    if residual.get("kind", "none") == "none":
        if not patch:
            return "baseline"
        return "ulp" if Path(patch).name == ULP_PATCH else None
    if residual.get("kind") == "value_residual" and residual.get("mode") == "gated" and not patch:
        return "satformer"
    return None


def spikes(curve: list[float], warmup: int) -> list[tuple[int, float]]:
    """(step, excess over the window's median) of each spike in a training-loss curve."""
    found = []
    for t in range(max(WINDOW, warmup), len(curve)):
        window = np.asarray(curve[t - WINDOW : t])
        median = float(np.median(window))
        mad = 1.4826 * float(np.median(np.abs(window - median)))
        excess = curve[t] - median
        if excess > SPIKE_NATS and excess > SPIKE_MADS * mad:
            found.append((t, excess))
    return found


def sd_upper(sd: float, n: int, level: float = UPPER) -> float:
    """One-sided `level` upper confidence bound of a normal SD from n values (chi-square)."""
    from scipy.stats import chi2

    if n < 2:
        return math.nan
    return sd * math.sqrt((n - 1) / chi2.ppf(1 - level, n - 1))


def shape(values: list[float]) -> dict[str, float]:
    """Skewness, excess kurtosis, Shapiro-Wilk p and the largest |z| of a sample."""
    from scipy.stats import kurtosis, shapiro, skew

    x = np.asarray(values)
    if len(x) < 3 or np.std(x) == 0:
        return {"skew": math.nan, "excess_kurtosis": math.nan, "shapiro_p": math.nan, "max_abs_z": math.nan}
    z = (x - x.mean()) / x.std(ddof=1)
    return {
        "skew": float(skew(x)),
        "excess_kurtosis": float(kurtosis(x)),
        "shapiro_p": float(shapiro(x).pvalue),
        "max_abs_z": float(np.abs(z).max()),
    }


def summarize(rows: list[dict], reference_recipe: Path = DEFAULT_RECIPE) -> list[dict]:
    """One summary per recipe (see the module docstring), in the order recipes first appear."""
    groups: dict[str, dict] = {}
    for row in rows:
        trial = json.loads(row["key"])["trial"]
        arm = arm_of(row, trial)
        if arm is None:
            continue
        recipe = recipe_of(trial)
        key = json.dumps(recipe, sort_keys=True)
        group = groups.setdefault(key, {"recipe": recipe, "runs": defaultdict(dict)})
        group["runs"][arm][row["seed"]] = row
    return [_recipe_summary(group, reference_recipe) for group in groups.values()]


def _paired(runs: dict, arm: str) -> dict[int, float]:
    """{seed: the arm's val_loss minus the baseline's} over the seeds both have."""
    base, other = runs["baseline"], runs[arm]
    return {s: other[s]["val_loss"] - base[s]["val_loss"] for s in sorted(set(base) & set(other))}


def _recipe_summary(group: dict, reference_recipe: Path) -> dict:
    recipe, runs = group["recipe"], group["runs"]
    train = recipe.get("train", {})
    ref = recipe_of(recipe_trial(reference_recipe, train.get("tokens"), train.get("num_threads", 1), 0))
    ref["train"]["eval_every"] = train.get("eval_every")  # the runs' own (final evaluation only)
    every = [r for arm in runs.values() for r in arm.values()]
    base = [r["val_loss"] for r in runs["baseline"].values()]
    m = np.asarray(list(_paired(runs, "ulp").values()))
    diffs = _paired(runs, "satformer")
    d = np.asarray(list(diffs.values()))
    curves = [r["loss_curve"] for r in every if r.get("loss_curve")]
    warmup = math.ceil(train.get("warmup_frac", 0.05) * max(map(len, curves), default=0))
    spike_counts = [len(spikes(curve, warmup)) for curve in curves]
    sd = float(d.std(ddof=1)) if len(d) > 1 else math.nan
    return {
        "recipe": label(recipe, ref),
        "trial": recipe,
        "ulp": {
            "seeds": list(_paired(runs, "ulp")),
            "moves": [round(float(v), 5) for v in m],
            "mean_abs": float(np.abs(m).mean()) if len(m) else math.nan,
            "sd": float(m.std(ddof=1)) if len(m) > 1 else math.nan,
            "max_abs": float(np.abs(m).max()) if len(m) else math.nan,
            "moved": int((np.abs(m) >= 1e-4).sum()),  # 1e-4: the digits the docs print
        },
        "baseline": {
            "seeds": sorted(runs["baseline"]),
            "mean": float(np.mean(base)) if base else math.nan,
            "sd": float(np.std(base, ddof=1)) if len(base) > 1 else math.nan,
        },
        "paired": {
            "seeds": list(diffs),
            "diffs": [round(float(v), 5) for v in d],
            "mean": float(d.mean()) if len(d) else math.nan,
            "sd": sd,
            "sd_upper95": sd_upper(sd, len(d)),
            "n": len(d),
            **shape(list(d)),
        },
        "spikes_per_run": float(np.mean(spike_counts)) if spike_counts else math.nan,
        "median_wall_s": float(np.nanmedian([r.get("wall_s") or math.nan for r in every])),
        "machines": sorted({json.dumps(r["machine"], sort_keys=True) for r in every if r.get("machine")}),
    }


def format_table(summaries: list[dict]) -> str:
    head = ("recipe | ulp moves (seeds) | ulp SD | baseline mean ± SD (n) | paired mean, SD [95% upper] (n)"
            " | skew, ex. kurtosis, Shapiro p | spikes/run | median wall s")  # fmt: skip
    lines = [head]
    for s in summaries:
        u, b, p = s["ulp"], s["baseline"], s["paired"]
        moves = " ".join(f"{v:+.4f}" for v in u["moves"]) or "-"
        lines.append(
            f"{s['recipe']} | {moves} | {u['sd']:.4f} | {b['mean']:.4f} ± {b['sd']:.4f} ({len(b['seeds'])})"
            f" | {p['mean']:+.4f}, {p['sd']:.4f} [{p['sd_upper95']:.4f}] ({p['n']})"
            f" | {p['skew']:+.2f}, {p['excess_kurtosis']:+.2f}, {p['shapiro_p']:.2f}"
            f" | {s['spikes_per_run']:.2f} | {s['median_wall_s']:.0f}"
        )
    return "\n".join(lines)


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(prog="python -m bench.recipe_chaos", description=__doc__.split("\n")[0])
    p.add_argument("runs", type=Path, help="a --runs file of bench.training_equivalence")
    p.add_argument("--recipe", type=Path, default=DEFAULT_RECIPE, help="the reference recipe (labels)")
    p.add_argument("--json", default=None, help="write the summaries as JSON here ('-': stdout)")
    args = p.parse_args(argv)
    if not args.runs.is_file():
        p.error(f"{args.runs}: no such file")
    rows = [json.loads(line) for line in args.runs.read_text().splitlines() if line.strip()]
    summaries = summarize(rows, args.recipe)
    print(format_table(summaries))
    if args.json == "-":
        json.dump(summaries, sys.stdout, indent=1)
    elif args.json:
        Path(args.json).write_text(json.dumps(summaries, indent=1) + "\n")
    return summaries


if __name__ == "__main__":
    main()
