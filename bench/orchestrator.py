"""`python -m bench.orchestrator`: what the launcher costs over the same trainings run directly.

Runs N identical short trials (one point, N seeds) three ways, each as a fresh process so that
imports and start-up are paid the same way a user pays them, one trial at a time:

- direct: a plain Python loop calling `trainers.fit` N times (what a hand-written script does);
- launcher, backend local: `python -m sweeps.launch` with Optuna in-process;
- launcher, backend ray: the same through Ray Tune (starts a local Ray).

Reports the launcher's cost in two parts, from the MLflow child runs' start and end times:

- per trial (what grows with the study): the cycle from one trial's end to the next one's end,
  against one trial of the direct loop (both after the first, which pays first-use costs);
- fixed (once per launch): the rest of the wall time, against the direct loop's start-up
  (imports); the launcher's includes MLflow's new database, the cost probe of the study's
  architecture, Ray's start and the fronts.

Also the plain (wall time difference) / N, which mixes the two. Writes the numbers as JSON
(`--json`). Every launch uses a fresh temporary results folder, MLflow database and Optuna
journal. Target (issue 12): < 2 s per trial (< 5% of a 60 s trial).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

TRIAL = {
    "seed": 0,
    "model": {"preset": "tiny"},
    "data": {"kind": "text", "corpus": "shakespeare", "tokenizer": "byte", "seq_len": 128},
    "train": {"batch_size": 16, "lr": 3.0e-3, "eval_every": 40, "eval_batches": 8, "num_threads": 2},
}
DIRECT = """
import json, sys, time
t0 = time.perf_counter()
from trainers import fit
trial, n = json.loads(sys.argv[1]), int(sys.argv[2])
walls = []
for seed in range(n):
    t = time.perf_counter()
    fit({**trial, "seed": trial["seed"] + seed})
    walls.append(time.perf_counter() - t)
print(json.dumps({"trial_walls": walls, "total": time.perf_counter() - t0}))
"""


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.orchestrator", description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=4, help="N identical trials (seeds)")
    p.add_argument("--tokens", type=int, default=400_000, help="training budget of one trial")
    p.add_argument("--backends", default="local,ray", help="launcher backends to measure")
    p.add_argument("--json", default=None)
    return p.parse_args(argv)


def run_direct(trial: dict, n: int) -> dict:
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", DIRECT, json.dumps(trial), str(n)], capture_output=True, text=True, check=True
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["wall"] = time.perf_counter() - t
    return out


TARGET_PER_TRIAL_S = 2.0


def child_spans(db: Path) -> list[tuple[float, float]]:
    """(start, end) in seconds of every finished child run in an MLflow SQLite store."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    spans = []
    for experiment in client.search_experiments():
        for run in client.search_runs([experiment.experiment_id], max_results=10_000):
            if "mlflow.parentRunId" in run.data.tags and run.info.end_time:
                spans.append((run.info.start_time / 1000, run.info.end_time / 1000))
    return sorted(spans)


def split_costs(wall: float, n: int, spans: list[tuple[float, float]], start: float) -> dict:
    """Per-trial cycle and fixed cost of a launch from its child runs' spans."""
    if len(spans) != n:
        raise RuntimeError(f"expected {n} finished child runs, found {len(spans)}")
    cycle = (spans[-1][1] - spans[0][1]) / (n - 1) if n > 1 else spans[0][1] - spans[0][0]
    return {
        "per_trial": cycle,
        "fixed": wall - n * cycle,
        "to_first_trial": spans[0][0] - start,
        "first_trial": spans[0][1] - spans[0][0],
        "after_last_trial": start + wall - spans[-1][1],
    }


def run_launcher(trial: dict, n: int, backend: str, folder: Path) -> dict:
    study = {
        "name": f"overhead_{backend}",
        "trial": trial,
        "repeats": n,
        "max_concurrent": 1,
        "backend": backend,
        "resources": {"cpus": 2},
        "output": {"mlflow_uri": f"sqlite:///{folder}/mlflow.db", "dir": str(folder / "results")},
    }
    path = folder / f"{backend}.yaml"
    path.write_text(yaml.safe_dump(study))
    t = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "sweeps.launch", str(path)], capture_output=True, text=True, cwd=folder
    )
    wall = time.time() - t
    if proc.returncode != 0:
        raise RuntimeError(f"launch ({backend}) failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    costs = split_costs(wall, n, child_spans(folder / "mlflow.db"), t)
    return {"wall": wall, **costs, "stdout_tail": proc.stdout[-1500:]}


def main(argv=None) -> int:
    args = parse_args(argv)
    trial = {**TRIAL, "train": {**TRIAL["train"], "tokens": args.tokens}}
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    results: dict = {"trials": args.trials, "tokens": args.tokens}
    n = args.trials
    direct = run_direct(trial, n)
    walls = direct["trial_walls"]
    per_trial = sum(walls[1:]) / (n - 1) if n > 1 else walls[0]
    results["direct"] = {**direct, "per_trial": per_trial, "fixed": direct["wall"] - n * per_trial}
    print(
        f"direct loop: {direct['wall']:.1f} s for {n} trials ({per_trial:.1f} s per trial, "
        f"{results['direct']['fixed']:.1f} s fixed)"
    )
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        with tempfile.TemporaryDirectory(prefix=f"bench-orch-{backend}-") as tmp:
            got = run_launcher(trial, args.trials, backend, Path(tmp))
        extra = got["per_trial"] - per_trial
        got.update(
            extra_per_trial_s=extra,
            extra_fraction=extra / per_trial,
            extra_fixed_s=got["fixed"] - results["direct"]["fixed"],
            extra_amortised_s=(got["wall"] - direct["wall"]) / n,
        )
        results[backend] = got
        verdict = "met" if extra < TARGET_PER_TRIAL_S else "MISSED"
        print(
            f"launcher ({backend}): {got['wall']:.1f} s; per trial {got['per_trial']:.1f} s, "
            f"extra {extra:+.2f} s = {extra / per_trial:+.1%} of a {per_trial:.1f} s trial "
            f"(target < {TARGET_PER_TRIAL_S:.0f} s: {verdict}); fixed extra {got['extra_fixed_s']:+.1f} s "
            f"(to the first trial {got['to_first_trial']:.1f} s, after the last "
            f"{got['after_last_trial']:.1f} s); (wall - direct) / N {got['extra_amortised_s']:+.2f} s"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
