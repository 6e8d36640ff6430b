"""Which throughput verdict should a user of a study expect? The cost probe run several times.

    python -m bench.throughput_verdict studies/satformer_vs_baseline.yaml --launches 3 [--json out.json]

The verdict on `tokens_per_s` is a sign test over the probe's rounds (each round: the design's
step time against the baseline's, interleaved; `sweeps/run/probe.py`): with 20 rounds and the Holm
family of the default study (val_loss and tokens_per_s), the design is `worse` when at least 16
rounds of 20 are slower (two-sided p <= 0.025 at Holm's first step), else `indistinguishable`.
So the word depends on the fraction q of rounds in which the design is slower, a property of the
machine (how the gate's small GEMM and elementwise ops compare with the tiny layer's others on
that CPU's kernels) more than of the design: this runs the probe `--launches` times (fresh cache
each, the study's own rounds and steps), pools the rounds, and gives each launch's ratio and
word, the pooled q, and the probability that one launch of the study says `worse`
(binomial over its rounds). Prints the machine (CPU model, torch's CPU kernel level) with it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from scipy.stats import binom

from sweeps.report.verdicts import sign_test_p
from sweeps.run.probe import Probe
from sweeps.study.architecture import arch_key, architecture
from sweeps.study.load import load_study
from sweeps.study.reference import baseline_of
from trainers.machine import describe, kernels


def worse_probability(q: float, rounds: int, level: float) -> float:
    """P(a sign test over `rounds` rounds, each slower with probability q, rejects at `level`
    on the slower side): the chance one launch's word is `worse`."""
    k_needed = next(k for k in range(rounds + 1) if 2 * binom.sf(k - 1, rounds, 0.5) <= level)
    return float(binom.sf(k_needed - 1, rounds, q))


def launch(path: Path) -> dict[str, list[float]]:
    """One fresh probe of the study's architectures (an empty cache): {point: per-round ratios}."""
    with tempfile.TemporaryDirectory(prefix="throughput-verdict-") as tmp:
        study = load_study(path, [f"output.dir={tmp}"])
        probe = Probe(study)
        configs = {label_of(p): study.trial_config(p) for p in study.planned_points()}
        probe.ensure(configs.values())
        table = next(iter(probe.entries.values()))
        out = {}
        for label, cfg in configs.items():
            key = arch_key(architecture(cfg))
            if key != arch_key(baseline_of(architecture(cfg))):
                out[label] = table[key]["ratios"]
        return out


def label_of(point: dict) -> str:
    return ",".join(str(v) for v in point.values())


def format_report(report: dict) -> str:
    lines = [f"machine: {describe(report['machine'])}"]
    for label, point in report["points"].items():
        for run in point["launches"]:
            lines.append(
                f"{label} launch {run['launch']}: ratio {run['ratio']:.3f}, "
                f"{run['slower_rounds']}/{run['rounds']} rounds slower, "
                f"sign test p {run['p']:.3f}: {run['verdict']}"
            )
        lines.append(
            f"{label} pooled: ratio {point['pooled_ratio']:.3f}, slower in "
            f"{point['slower_fraction']:.0%} of rounds; P(worse) per launch of {report['rounds']} "
            f"rounds: {point['p_worse_per_launch']:.0%}"
        )
    return "\n".join(lines)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.throughput_verdict", description=__doc__.split("\n")[0])
    p.add_argument("study", type=Path)
    p.add_argument("--launches", type=int, default=3)
    p.add_argument(
        "--level", type=float, default=0.025, help="the sign test's level (Holm's first step of 2)"
    )
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if not args.study.is_file():
        p.error(f"{args.study}: no such file")
    if args.launches < 1 or not 0 < args.level < 1:
        p.error("--launches must be >= 1 and --level in (0, 1)")
    study = load_study(args.study)
    launches = [launch(args.study) for _ in range(args.launches)]
    report = {"machine": kernels(), "rounds": study.probe.rounds, "level": args.level, "points": {}}
    for label in launches[0]:
        runs = []
        for i, ratios in enumerate(x[label] for x in launches):
            p_value = sign_test_p([r - 1 for r in ratios])
            slower = sum(r < 1 for r in ratios)
            word = (
                ("worse" if slower * 2 > len(ratios) else "better")
                if p_value <= args.level
                else "indistinguishable"
            )
            runs.append({"launch": i, "ratio": statistics.median(ratios), "slower_rounds": slower,
                         "rounds": len(ratios), "p": p_value, "verdict": word, "ratios": ratios})  # fmt: skip
        pooled = [r for run in runs for r in run["ratios"]]
        q = sum(r < 1 for r in pooled) / len(pooled)
        report["points"][label] = {
            "launches": runs,
            "pooled_ratio": statistics.median(pooled),
            "slower_fraction": q,
            "p_worse_per_launch": worse_probability(q, study.probe.rounds, args.level),
        }
    print(format_report(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return report


if __name__ == "__main__":
    sys.exit(main() and 0)
