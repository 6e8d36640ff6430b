"""What qk-norm costs a step of the CPU recipe: the tiny baseline with and without it, timed by the
cost probe's own interleaved rounds (`sweeps.run.probe.time_architectures`: one thread, thread CPU
time, 20 rounds of 2 steps), `--launches` times.

    python -m bench.qk_norm_speed --launches 2 --json docs/verdicts/data/qk_norm_speed_2026-12-05.json

Prints each launch's median ratio (the step without qk-norm over the step with it: its tokens/s
relative to the recipe before issue 41) and the machine. Used by docs/verdicts/recipe.md to say
what "at the same tokens" costs in time.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from sweeps.run.probe import time_architectures
from sweeps.study.architecture import arch_key, architecture
from trainers import TrialConfig
from trainers.machine import describe, kernels


def recipe_arch(qk_norm: bool) -> dict:
    cfg = TrialConfig.from_dict({
        "model": {"preset": "tiny", "qk_norm": qk_norm},
        "data": {"kind": "text", "corpus": "shakespeare", "seq_len": 128},
        "train": {"batch_size": 16, "num_threads": 1},
    })  # fmt: skip
    return architecture(cfg)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(prog="python -m bench.qk_norm_speed", description=__doc__.split("\n")[0])
    p.add_argument("--launches", type=int, default=2)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    if args.launches < 1:
        p.error(f"--launches: given {args.launches}; allowed: 1 or more")
    plain, normed = recipe_arch(False), recipe_arch(True)
    kp, kn = arch_key(plain), arch_key(normed)
    launches = []
    for i in range(args.launches):
        timed = time_architectures({kp: plain, kn: normed}, 20, 2, kp)
        base, own = timed["base_seconds_per_step"][kn], timed["seconds_per_step"][kn]
        ratios = [b / s for b, s in zip(base, own, strict=True)]  # round by round, paired
        slower = sum(r < 1 for r in ratios)
        launches.append(
            {"median_ratio": statistics.median(ratios), "slower_rounds": slower, "ratios": ratios}
        )
        print(f"launch {i}: qk-norm step ratio {launches[-1]['median_ratio']:.3f},"
              f" {launches[-1]['slower_rounds']}/{len(ratios)} rounds slower")  # fmt: skip
    print(f"machine: {describe(kernels())}")
    report = {"machine": kernels(), "launches": launches}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return report


if __name__ == "__main__":
    main()
