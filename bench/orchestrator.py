"""`python -m bench.orchestrator`: what the launcher costs over the same trainings run directly.

Runs N identical short trials (one point, N seeds) three ways, each as a fresh process so that
imports and start-up are paid the same way a user pays them, one trial at a time:

- direct: a plain Python loop calling `trainers.fit` N times (what a hand-written script does);
- launcher, backend local: `python -m sweeps.launch` with Optuna in-process;
- launcher, backend ray: the same through Ray Tune (starts a local Ray).

Reports the launcher's extra wall time per trial, and as a fraction of one trial's wall time in
the direct loop. Writes the numbers as JSON (`--json`). Every launch uses a fresh temporary
results folder, MLflow file and Optuna journal.
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
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "sweeps.launch", str(path)], capture_output=True, text=True, cwd=folder
    )
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"launch ({backend}) failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return {"wall": wall, "stdout_tail": proc.stdout[-1500:]}


def main(argv=None) -> int:
    args = parse_args(argv)
    trial = {**TRIAL, "train": {**TRIAL["train"], "tokens": args.tokens}}
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    results: dict = {"trials": args.trials, "tokens": args.tokens}
    direct = run_direct(trial, args.trials)
    per_trial = direct["wall"] / args.trials
    results["direct"] = {**direct, "per_trial": per_trial}
    print(f"direct loop: {direct['wall']:.1f} s for {args.trials} trials ({per_trial:.1f} s per trial)")
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        with tempfile.TemporaryDirectory(prefix=f"bench-orch-{backend}-") as tmp:
            launched = run_launcher(trial, args.trials, backend, Path(tmp))
        extra = (launched["wall"] - direct["wall"]) / args.trials
        launched.update(extra_per_trial_s=extra, extra_fraction=extra / per_trial)
        results[backend] = launched
        print(
            f"launcher ({backend}): {launched['wall']:.1f} s; extra {extra:+.2f} s per trial "
            f"= {extra / per_trial:+.1%} of a {per_trial:.1f} s trial (targets: < 2 s, < 5% of a 60 s trial)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
