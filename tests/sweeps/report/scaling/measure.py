"""The measured example of docs/scaling/README.md: recovery, interval coverage and timing of the
fit and the bootstrap on synthetic ladders (tests/sweeps/report/scaling/synthetic.py: 5 sizes x 3 tokens-per-
parameter ratios x 3 seeds, 1% log-normal noise per run).

    OMP_NUM_THREADS=1 python -m tests.sweeps.report.scaling.measure [--draws 20] [--replicates 200] \
        [--resample seeds]
    # the optimiser check:
    OMP_NUM_THREADS=1 python -m tests.sweeps.report.scaling.measure --against-lbfgs 500 --seed 1
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from sweeps.report.scaling import fitting, intervals
from tests.sweeps.report.scaling import synthetic as syn

TARGET = (1e7, 2e8)  # 10x the largest rung's compute, along ratio 20


def main(argv=None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--draws", type=int, default=20)
    p.add_argument("--replicates", type=int, default=200)
    p.add_argument("--resample", default="seeds", choices=intervals.RESAMPLING)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--against-lbfgs", type=int, metavar="STARTS", help="compare with L-BFGS-B from STARTS grid points"
    )
    args = p.parse_args(argv)
    if args.against_lbfgs:
        return against_lbfgs(args.seed, args.against_lbfgs)
    rng = np.random.default_rng(args.seed)
    names = ["E", "A", "alpha", "B", "beta", "target"]
    truth = {**syn.TRUTH, "target": float(syn.law(syn.TRUTH, *TARGET))}
    est, width, hit = ({k: [] for k in names} for _ in range(3))
    clock = {"fit": [], "bootstrap": []}
    for i in range(args.draws):
        lad = syn.ladder(rng)
        t0, c0 = time.perf_counter(), time.process_time()
        result = fitting.fit(lad)
        t1, c1 = time.perf_counter(), time.process_time()
        boot = intervals.bootstrap(lad, result, args.replicates, seed=i, rungs=args.resample)
        t2, c2 = time.perf_counter(), time.process_time()
        clock["fit"].append((t1 - t0, c1 - c0))
        clock["bootstrap"].append((t2 - t1, c2 - c1))
        iv = intervals.parameter_intervals(boot, "all")
        iv["target"] = intervals.percentile(boot.predict("all", [TARGET[0]], [TARGET[1]])[:, 0])
        point = {**result.designs["all"].natural, "target": float(result.designs["all"].predict(*TARGET))}
        for k in names:
            est[k].append(point[k])
            width[k].append(iv[k][1] - iv[k][0])
            hit[k].append(iv[k][0] <= truth[k] <= iv[k][1])
    print(
        f"{args.draws} draws, {args.replicates} replicates, resampling {args.resample}; "
        f"load {os.getloadavg()}"
    )
    print(f"{'':8}{'truth':>9}{'mean':>9}{'sd':>9}{'width':>9}{'covered':>9}")
    for k in names:
        print(
            f"{k:8}{truth[k]:9.4g}{np.mean(est[k]):9.4g}{np.std(est[k], ddof=1):9.3g}"
            f"{np.mean(width[k]):9.3g}{np.mean(hit[k]):9.0%}"
        )
    for k, v in clock.items():
        wall, cpu = np.median(np.array(v), axis=0)
        print(f"{k}: median {wall:.2f} s wall, {cpu:.2f} s CPU")


def against_lbfgs(seed: int, starts: int) -> None:
    """`fitting.minimise` against the papers' loop: L-BFGS-B from `starts` points of the same grid."""
    from scipy.optimize import minimize

    from sweeps.report.scaling.law import Problem

    lad = syn.ladder(np.random.default_rng(seed))
    problem = Problem.build(
        "joint", ["all"], np.zeros(len(lad.loss), int), lad.params, lad.tokens, lad.loss, False
    )
    t = time.perf_counter()
    theta, value = fitting.minimise(problem, fitting.GRIDS["joint"])
    print(f"minimise: objective {value:.12g} in {time.perf_counter() - t:.2f} s; theta {np.round(theta, 6)}")

    def fun(x):
        v, g = problem.objective(x[None])
        return float(v[0]), g[0]

    grid = fitting.GRIDS["joint"]
    picked = grid[np.random.default_rng(0).choice(len(grid), starts, replace=False)]
    t, best = time.perf_counter(), (None, np.inf)
    for start in picked:
        res = minimize(
            fun,
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=fitting._bounds(problem),
            options={"ftol": 1e-14, "gtol": 1e-10},
        )
        if res.fun < best[1]:
            best = (res.x, res.fun)
    print(
        f"L-BFGS-B from {starts} starts: objective {best[1]:.12g} in {time.perf_counter() - t:.2f} s; ",
        end="",
    )
    print(f"theta {np.round(best[0], 6)}")


if __name__ == "__main__":
    main()
