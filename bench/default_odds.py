"""What will `make sweep` print on another machine? The default study's verdicts, simulated.

    python -m bench.default_odds [--machines 4000] [--set KEY=VALUE] [--json out.json]

Each simulated machine reruns the default study (studies/satformer_vs_baseline.yaml) and judges it
with the launcher's own functions: the study's rule (`verdicts.rule_for`: level, family, margins,
seeds), each comparison built as the fronts build it (`fronts._comparison`, from per-seed and
per-round samples) and judged as one family (`verdicts.judge`); with adaptive seeds
(`repeats: {min, max}`), a point whose val_loss word is open gets the next seed, as
`sweeps.run.adaptive` decides (its other reason, p_front, is not simulated). What a machine draws:

- **val_loss**: the study's seeds are fixed (trial.seed 0, 1, ...), so a machine trains the same
  seeds as the runs on record (docs/verdicts/recipe_runs.jsonl: the qk-norm baseline and
  SATFormer, seeds 0-11, AMD EPYC) up to its own rounding. The rounding is drawn from the one
  cross-machine comparison on record (docs/verdicts/data/cross_machine_2026-12-06.csv: seeds
  0-5 on an Intel Xeon against the EPYC): per machine a shift of the paired difference shared by
  all its seeds, normal with SD the mean Intel-EPYC difference (their differences all lean one
  way), plus per seed a normal of their SD. `--rounding-scale` multiplies both. Seeds past the
  runs on record (adaptive studies) are drawn from the measured paired differences (their mean
  and SD). `--fresh-seeds` draws every seed that way: what a study with other seeds
  (`trial.seed`) would print, the seed-to-seed spread itself.
- **tokens_per_s**: the probe's rounds (docs/verdicts/data/throughput_verdict_*.json: fresh
  probes of this study, each 20 interleaved rounds). A machine's gate cost is normal around the
  launches' median ratios with their SD; its rounds scatter around it as the rounds of one
  launch on record did (a launch drawn at random, its ratios over their median resampled), so
  quiet and loaded launches both enter.
- **peak_mem_mb**: exact (the allocator's count: the same on every machine), `--memory`.

Prints each objective's words with their probabilities (and one standard error), the odds that
every word is the most likely one, the seeds a study ran, and the measured runs' own verdicts
(`replay`: the EPYC's seeds and the Intel's, judged by the same rule).
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np

from sweeps.report.fronts import _comparison
from sweeps.report.verdicts import OPEN, judge, rule_for
from sweeps.study.load import load_study

STUDY = Path("studies/satformer_vs_baseline.yaml")
RUNS = Path("docs/verdicts/recipe_runs.jsonl")
CROSS = Path("docs/verdicts/data/cross_machine_2026-12-06.csv")
PROBES = sorted(Path("docs/verdicts/data").glob("throughput_verdict_*.json"))
MEMORY_MB = (110.70, 110.90)  # baseline, SATFormer: the default study's peak_mem_mb (default_study.md)
OBJECTIVES = (("val_loss", "minimize"), ("tokens_per_s", "maximize"), ("peak_mem_mb", "minimize"))
BASE_TOKENS_PER_S = 10_000.0  # any scale: the words depend on ratios only


def recorded_diffs(path: Path = RUNS) -> dict[int, float]:
    """SATFormer minus baseline final val_loss per seed, from the recipe runs with qk-norm and no
    patch (the default study's two designs)."""
    arms: dict[str, dict[int, float]] = {"baseline": {}, "satformer": {}}
    for line in path.read_text().splitlines():
        run = json.loads(line)
        model = json.loads(run["key"])["trial"]["model"]
        if run.get("patch") or not model.get("qk_norm"):
            continue
        residual = model.get("residual", {})
        if not residual:
            arms["baseline"][run["seed"]] = run["val_loss"]
        elif residual.get("mode") == "gated" and residual.get("granularity") == "token_head":
            arms["satformer"][run["seed"]] = run["val_loss"]
    seeds = sorted(set(arms["baseline"]) & set(arms["satformer"]))
    return {s: arms["satformer"][s] - arms["baseline"][s] for s in seeds}


def table_rows(path: Path) -> list[dict]:
    return list(csv.DictReader(line for line in path.read_text().splitlines() if not line.startswith("#")))


def cross_machine(path: Path = CROSS) -> np.ndarray:
    """Per seed: (Intel difference) - (EPYC difference), from the cross-machine table."""
    rows = table_rows(path)
    intel = np.array([float(r["satformer_intel"]) - float(r["baseline_intel"]) for r in rows])
    amd = np.array([float(r["satformer_amd"]) - float(r["baseline_amd"]) for r in rows])
    return intel - amd


def probe_launches(paths) -> list[list[float]]:
    """Every recorded launch's per-round ratios (SATFormer's step time over the baseline's, inverted)."""
    out = []
    for path in paths:
        for point in json.loads(Path(path).read_text())["points"].values():
            out += [run["ratios"] for run in point["launches"]]
    return out


def comparisons(diffs, ratios, memory) -> list[dict]:
    """The study's three comparisons, built by the fronts' own code from samples: per seed (the
    baseline at 0, so its pairs give `diffs`), per probe round, and the exact memory."""
    seeds = {f"s{i}": float(d) for i, d in enumerate(diffs)}
    rounds = {f"round{i}": r * BASE_TOKENS_PER_S for i, r in enumerate(ratios)}
    row = {"samples": {"val_loss": seeds, "tokens_per_s": rounds, "peak_mem_mb": {"s0": memory[1]}}}
    ref = {"samples": {"val_loss": dict.fromkeys(seeds, 0.0),
                       "tokens_per_s": dict.fromkeys(rounds, BASE_TOKENS_PER_S),
                       "peak_mem_mb": {"s0": memory[0]}}}  # fmt: skip
    out = []
    for metric, direction in OBJECTIVES:
        c = _comparison(row, ref, metric, direction, frozenset({"tokens_per_s"}), "")
        c.pop("row"), c.pop("against")
        out.append(c)
    return out


def judge_study(rule, diffs_all: np.ndarray, ratios, memory, n_min: int, n_max: int) -> tuple[dict, int]:
    """The words of one simulated launch and the seeds it ran (adaptive: one more seed while the
    val_loss word is open, up to n_max)."""
    n = n_min
    while True:
        family = comparisons(diffs_all[:n], ratios, memory)
        judge(family, rule)
        words = {c["metric"]: c["verdict"] for c in family}
        if words["val_loss"] not in OPEN or n >= n_max:
            return words, n
        n += 1


def simulate(study, machines: int, seed: int = 0, rounding_scale: float = 1.0, fresh_seeds: bool = False,
             probes=PROBES, memory=MEMORY_MB) -> dict:  # fmt: skip
    rule = rule_for(study)
    n_min, n_max = study.seeds.min, study.seeds.max
    first = study.seed_of(0)
    recorded = recorded_diffs()
    measured = np.array(list(recorded.values()))
    dd = cross_machine()
    bias_sd, seed_sd = abs(float(dd.mean())) * rounding_scale, float(dd.std(ddof=1)) * rounding_scale
    launches = probe_launches(probes)
    medians = [statistics.median(r) for r in launches]
    cost_mean, cost_sd = float(np.mean(medians)), float(np.std(medians, ddof=1))
    rounds = study.probe.rounds
    rng = np.random.default_rng(seed)
    counts = {m: collections.Counter() for m, _ in OBJECTIVES}
    lines, seeds_run = collections.Counter(), collections.Counter()
    for _ in range(machines):
        diffs = np.empty(n_max)
        for i in range(n_max):
            s = first + i
            if not fresh_seeds and s in recorded:
                diffs[i] = recorded[s]
            else:
                diffs[i] = rng.normal(measured.mean(), measured.std(ddof=1))
        diffs += rng.normal(0, bias_sd) + rng.normal(0, seed_sd, n_max)
        launch = np.asarray(launches[rng.integers(len(launches))])
        scatter = launch / np.median(launch)
        ratios = rng.normal(cost_mean, cost_sd) * rng.choice(scatter, rounds)
        words, n = judge_study(rule, diffs, ratios, memory, n_min, n_max)
        for metric, word in words.items():
            counts[metric][word] += 1
        lines[tuple(words.values())] += 1
        seeds_run[n] += 1

    def share(k: int) -> dict:
        p = k / machines
        return {"p": p, "se": math.sqrt(p * (1 - p) / machines)}

    modal = tuple(c.most_common(1)[0][0] for c in counts.values())
    return {
        "study": study.name,
        "rule": rule.describe(len(OBJECTIVES) - 1),
        "machines": machines,
        "mode": "fresh seeds" if fresh_seeds else f"seeds {first}..{first + n_max - 1} as recorded",
        "rounding": {"machine_shift_sd": bias_sd, "per_seed_sd": seed_sd, "scale": rounding_scale},
        "probe": {"cost_mean": cost_mean, "cost_sd": cost_sd, "launches": len(launches), "rounds": rounds},
        "words": {m: {w: share(k) for w, k in c.most_common()} for m, c in counts.items()},
        "lines": {", ".join(k): share(v) for k, v in lines.most_common()},
        "all_modal": {"words": list(modal), **share(lines[modal])},
        "seeds_run": {str(n): share(k) for n, k in sorted(seeds_run.items())},
    }


def replay(study) -> dict:
    """The study's rule on the runs on record: the EPYC's seeds (recipe_runs.jsonl) and the Intel's
    (cross-machine table), the probe's recorded launches, the exact memory."""
    rule = rule_for(study)
    recorded = recorded_diffs()
    rows = table_rows(CROSS)
    intel = [float(r["satformer_intel"]) - float(r["baseline_intel"]) for r in rows]
    n = study.seeds.min
    out = {}
    for name, diffs in (("AMD EPYC", [recorded[s] for s in sorted(recorded)]), ("Intel Xeon", intel)):
        for i, ratios in enumerate(probe_launches(PROBES)):
            if len(diffs) < n:
                continue
            family = comparisons(diffs[:n], ratios, MEMORY_MB)
            judge(family, rule)
            out[f"{name} seeds, probe launch {i}"] = {c["metric"]: c["verdict"] for c in family}
    return out


def format_report(report: dict) -> str:
    head = f"{report['study']}: {report['machines']} simulated machines, {report['mode']}"
    lines = [f"{head}; {report['rule']}"]
    for metric, words in report["words"].items():
        shown = ", ".join(f"{w} {v['p']:.1%} (±{v['se']:.1%})" for w, v in words.items())
        lines.append(f"  {metric}: {shown}")
    modal = report["all_modal"]
    likeliest = ", ".join(modal["words"])
    lines.append(f"  every word the likeliest ({likeliest}): {modal['p']:.1%} (±{modal['se']:.1%})")
    lines.append("  seeds run: " + ", ".join(f"{n}: {v['p']:.1%}" for n, v in report["seeds_run"].items()))
    return "\n".join(lines)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.default_odds", description=__doc__.split("\n")[0])
    p.add_argument("--study", type=Path, default=STUDY)
    p.add_argument("--machines", type=int, default=4000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounding-scale", type=float, default=1.0, help="multiplies the drawn rounding")
    p.add_argument("--fresh-seeds", action="store_true", help="draw every seed from the measured spread")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key of the study, as sweeps.launch --set (a candidate rule)")  # fmt: skip
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if not args.study.is_file():
        p.error(f"--study {args.study}: no such file")
    if args.machines < 1 or args.rounding_scale < 0:
        p.error("--machines must be >= 1 and --rounding-scale >= 0")
    study = load_study(args.study, args.set)
    report = simulate(study, args.machines, args.seed, args.rounding_scale, args.fresh_seeds)
    report["replay"] = replay(study)
    print(format_report(report))
    for name, words in report["replay"].items():
        print(f"  recorded, {name}: " + ", ".join(f"{m} {w}" for m, w in words.items()))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return report


if __name__ == "__main__":
    sys.exit(main() and 0)
