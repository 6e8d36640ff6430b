"""Training speed of a ladder's sizes on this machine, for the dry run's CPU-time estimate
(`sweeps.run.dry_run.CPU_SECONDS_PER_TOKEN`):

    OMP_NUM_THREADS=2 python -m bench.ladder_speeds studies/scaling_ladder.yaml

Every size x design of the study is built once and its synthetic training step (the trial's
batch) timed in interleaved rounds (`trainers.timing.interleaved`, as the cost probe does), twice:
at the trial's thread count by the wall clock, its fastest round (a busy neighbour only ever adds
time, so the fastest round is the closest to the machine alone), and on one thread by that
thread's CPU time, which a neighbour sharing the core cannot lengthen (the probe's clock). Their
ratio is the speed-up of the trial's threads over one; on a loaded machine it is a lower bound.
Then seconds per token = c0 + c1 N is fitted to each clock's speeds (all designs) by least
squares. Prints the load before and after.

    python -m bench.ladder_speeds studies/scaling_ladder.yaml --from-runs

fits the calibration to a finished ladder's own trials instead (their Optuna start and end times):
wall seconds = start + (c0 + c1 N) x tokens, tokens being `effective_tokens` (training, plus
evaluations at EVAL_TOKEN_COST), by least squares over every completed trial; then prints each
rung's measured and fitted seconds.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch
from optuna.trial import TrialState

from sweeps.run.dry_run import effective_tokens
from sweeps.run.probe import _warm_step
from sweeps.run.storage import load_trials
from sweeps.study import load_study
from sweeps.study.architecture import architecture
from trainers.timing import interleaved


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.ladder_speeds")
    p.add_argument("study")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=4, help="steps per round (the fastest is kept)")
    p.add_argument("--designs", action="store_true", help="every design, not only the baselines")
    p.add_argument("--from-runs", action="store_true", help="fit to the study's completed trials")
    args = p.parse_args(argv)
    if args.from_runs:
        return from_runs(load_study(args.study))

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


def from_runs(study) -> int:
    """Least squares of wall = start + c0 T + c1 N T over the study's completed trials."""
    rows = []
    for t in load_trials(study.name, study.storage_url()):
        if t.state != TrialState.COMPLETE or t.datetime_complete is None:
            continue
        point = dict(t.params)
        rung = study.rung_of(point)
        wall = (t.datetime_complete - t.datetime_start).total_seconds()
        rows.append((rung["label"], rung["params"], effective_tokens(study.trial_config(point)), wall))
    if len(rows) < 3:
        print(f"{study.name}: {len(rows)} completed trial(s); 3 or more are needed")
        return 1
    label, n, tokens, wall = (np.array(x) for x in zip(*rows, strict=True))
    design = np.stack([np.ones_like(n), tokens, n * tokens], axis=1)
    (start, c0, c1), *_ = np.linalg.lstsq(design, wall, rcond=None)
    fitted = design @ np.array([start, c0, c1])
    print(f"{len(rows)} trials: wall seconds = {start:.3g} + ({c0:.4g} + {c1:.4g} N) x tokens")
    print(f"  {'rung':4s}  {'N':>9s}  {'tokens':>9s}  {'measured s':>10s}  {'fitted s':>8s}  trials")
    for r in dict.fromkeys(label.tolist()):
        i = label == r
        print(
            f"  {r:4s}  {n[i][0]:9.3g}  {tokens[i][0]:9.3g}  {wall[i].mean():10.1f}  "
            f"{fitted[i].mean():8.1f}  {i.sum()}"
        )
    print(f"  total: measured {wall.sum() / 60:.1f} min, fitted {fitted.sum() / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
