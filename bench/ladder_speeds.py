"""Training speed of a ladder's sizes on this machine, for the dry run's CPU-time estimate
(`sweeps.scaling.study.CPU_SECONDS_PER_TOKEN`):

    OMP_NUM_THREADS=2 python -m bench.ladder_speeds studies/scaling_ladder.yaml

Every size x design of the study is built once and its synthetic training step (the trial's
batch) timed in interleaved rounds (`trainers.timing.interleaved`, as the cost probe does), twice:
at the trial's thread count by the wall clock, its fastest round (a busy neighbour only ever adds
time, so the fastest round is the closest to the machine alone), and on one thread by that
thread's CPU time, which a neighbour sharing the core cannot lengthen (the probe's clock). Their
ratio is the speed-up of the trial's threads over one; on a loaded machine it is a lower bound.
Then seconds per token = c0 + c1 N is fitted to each clock's speeds (all designs) by least
squares. Prints the load before and after.
"""

from __future__ import annotations

import argparse
import os

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ladder_speeds")
    p.add_argument("study")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=4, help="steps per round (the fastest is kept)")
    p.add_argument("--designs", action="store_true", help="every design, not only the baselines")
    args = p.parse_args(argv)

    import torch

    from sweeps.probe import _warm_step, architecture
    from sweeps.spec import load_study
    from trainers.timing import interleaved

    study = load_study(args.study)
    print(f"load before: {os.getloadavg()}", flush=True)
    built, sizes = {}, {}
    for point in study.planned_points():
        rung = study.rung_of(point)
        cfg = study.trial_config(point)
        key = f"N={rung['params']:.3g} {point.get('model.residual', '')}"
        if key not in built and (args.designs or cfg.model.residual.kind == "none"):
            built[key] = _warm_step(architecture(cfg), torch.device("cpu"))
            sizes[key] = (rung["params"], cfg.tokens_per_step, cfg.model.residual.kind == "none")
    threads = study.base.train.num_threads or torch.get_num_threads()
    one = interleaved(built, args.rounds, args.steps, "cpu", dict.fromkeys(built, 1))
    print(f"1 thread done, load {os.getloadavg()}", flush=True)
    many = interleaved(built, args.rounds, args.steps, "cpu", dict.fromkeys(built, threads))
    print(f"load after: {os.getloadavg()}; {args.rounds} rounds of {args.steps} steps")
    for clock, timings in (
        ("1 thread, CPU", one.thread),
        (f"{threads} threads, wall", many.wall),
    ):
        speed = {k: sizes[k][1] / min(timings[k]) for k in built}
        base = {sizes[k][0]: speed[k] for k in built if sizes[k][2]}
        print(f"{clock}: tokens/s (fastest round; x the baseline of its size)")
        for k in built:
            print(f"  {k:26s} {speed[k]:9.0f}  x{speed[k] / base[sizes[k][0]]:.3f}", flush=True)
        n = np.array([sizes[k][0] for k in built])
        c1, c0 = np.polyfit(n, np.array([1 / speed[k] for k in built]), 1)
        shown = ", ".join(f"{x:.3g}: {1 / (c0 + c1 * x):.0f}" for x in sorted(base))
        print(f"  seconds per token = {c0:.4g} + {c1:.4g} N  (tokens/s at each size: {shown})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
