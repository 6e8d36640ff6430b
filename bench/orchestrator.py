"""`python -m bench.orchestrator`: what the launcher costs over the same trainings run directly.

Runs N identical short trials (one point, N seeds) three ways, each as a fresh process so that
imports and start-up are paid the same way a user pays them, one trial at a time:

- direct: a plain Python loop calling `trainers.fit` N times (what a hand-written script does);
- launcher, backend local: `python -m sweeps.launch` with Optuna in-process;
- launcher, backend ray: the same through Ray Tune (starts a local Ray).

The launcher's cost per trial (what grows with the study) is measured inside each launch, so
that the machine's drift cannot pass for it (a direct trial's time moves between runs of the same
command by as much as the quantity measured: docs/bench/README.md). For every trial
after the first, from the MLflow child runs:

    per-trial cost = (cycle - fit_s)   previous trial's end to this one's, less its `fit` call
                   + logging_s         the launcher's MLflow logger and Tune reports inside `fit`
                   + in-fit slowdown   the larger of: the CPU time of the launch's other processes
                                       (Ray's daemons, the idle driver) over the CPU count, and
                                       how much slower `fit` ran than in the slower of two direct
                                       loops, one before and one after the launches (both measure
                                       other processes taking cores from the training)

`fit_s` is the trial's own `trainers.fit` call (exactly one pass of the direct loop). The last
two terms grow with the trial's length, so the cost of a 60 s trial (the target's) is
(cycle - fit_s) + (logging_s + slowdown) x 60 / fit_s.

Also reported, for context, the plain comparison: launcher cycle minus the direct loop's trial
time, which drift moves. Fixed cost (once per launch): the rest of the wall time, against the
direct loop's start-up; the launcher's includes MLflow's new database, the cost probe, Ray's
start and the fronts. Writes the numbers as JSON (`--json`). Every launch uses a fresh temporary
results folder, MLflow database and Optuna journal. Target: < 2 s per trial and < 5% of a
60 s trial.
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

from sweeps.run.backends.ray import kept

TRIAL = {
    "seed": 0,
    "model": {"preset": "tiny"},
    "data": {"kind": "text", "corpus": "shakespeare", "tokenizer": "byte", "seq_len": 128},
    "train": {"batch_size": 16, "lr": 3.0e-3, "eval_every": 40, "eval_batches": 8, "num_threads": 2},
}
DIRECT = """
import json, sys, time
t0 = time.perf_counter()
from trainers.fit import fit
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
    p.add_argument(
        "--keep-ray",
        action="store_true",
        help="backend ray with ray.keep: a first launch starts the kept Ray (reported apart as ray_first), "
        "the measured one joins it; a record of its own ($SWEEPS_KEPT_RAY), stopped at the end",
    )
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
TARGET_FRACTION = 0.05  # of a 60 s trial
SAMPLE_S = 0.5  # how often the launch's process tree is read for its CPU times


def child_runs(db: Path) -> list[dict]:
    """Every finished child run of an MLflow SQLite store, by end time: start and end (s), its
    fit_s and logging_s, and the Ray worker's pid where it ran in one."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    runs = []
    for experiment in client.search_experiments():
        for run in client.search_runs([experiment.experiment_id], max_results=10_000):
            if "mlflow.parentRunId" in run.data.tags and run.info.end_time:
                m = run.data.metrics
                runs.append(
                    {
                        "start": run.info.start_time / 1000,
                        "end": run.info.end_time / 1000,
                        "fit_s": m.get("final/fit_s", float("nan")),
                        "logging_s": m.get("final/logging_s", 0.0),
                        "pid": run.data.tags.get("ray.pid"),
                    }
                )
    return sorted(runs, key=lambda r: r["end"])


class TreeCPU:
    """CPU seconds of a process and its descendants, sampled every SAMPLE_S by a thread:
    [(time, {pid: user + system seconds})]. A process that exits keeps its last reading."""

    def __init__(self, pid: int, others: tuple[int, ...] = ()):
        import threading

        import psutil

        self.root = psutil.Process(pid)
        self.others = [psutil.Process(p) for p in others if psutil.pid_exists(p)]  # a kept Ray's
        self.samples: list[tuple[float, dict[int, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        seen: dict[int, float] = {}
        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                break
            for other in self.others:
                try:
                    procs += [other, *other.children(recursive=True)]
                except psutil.Error:
                    continue
            for proc in procs:
                try:
                    t = proc.cpu_times()
                    seen[proc.pid] = t.user + t.system
                except psutil.Error:
                    continue
            self.samples.append((time.time(), dict(seen)))
            self._stop.wait(SAMPLE_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, t0: float, t1: float, exclude: set[int]) -> float:
        """CPU seconds used between t0 and t1 by the processes not in `exclude`."""

        def at(t: float) -> dict[int, float]:
            before = [s for when, s in self.samples if when <= t]
            return before[-1] if before else {}

        a, b = at(t0), at(t1)
        return sum(cpu - a.get(pid, 0.0) for pid, cpu in b.items() if pid not in exclude)


def split_costs(
    wall: float, start: float, runs: list[dict], background_cpu: float = 0.0, cpus: int = 1
) -> dict:
    """The parts of a launch's cost from its child runs (see the module docstring).
    `background_cpu`: CPU seconds of processes other than the trials' between the first and the
    last trial's end."""
    n = len(runs)
    if n < 2:
        raise RuntimeError(f"need at least 2 finished child runs to measure a cycle, found {n}")
    later = runs[1:]
    cycles = [b["end"] - a["end"] for a, b in zip(runs[:-1], later, strict=True)]
    cycle = sum(cycles) / (n - 1)
    return {
        "per_trial": cycle,
        "fit_s": sum(r["fit_s"] for r in later) / (n - 1),
        "outside_fit_s": sum(c - r["fit_s"] for c, r in zip(cycles, later, strict=True)) / (n - 1),
        "logging_s": sum(r["logging_s"] for r in later) / (n - 1),
        "background_s": background_cpu / cpus / (n - 1),
        "fixed": wall - n * cycle,
        "to_first_trial": runs[0]["start"] - start,
        "first_trial": runs[0]["end"] - runs[0]["start"],
        "after_last_trial": start + wall - runs[-1]["end"],
    }


def per_trial_cost(parts: dict, slowest_direct_s: float) -> dict:
    """The launcher's cost per trial at the measured trial length and at 60 s, and the verdict."""
    slower = max(0.0, parts["fit_s"] - slowest_direct_s)
    in_fit = max(parts["background_s"], slower)  # two measures of the same thing: take the larger
    growing = parts["logging_s"] + in_fit  # grows with the trial's length
    cost_60 = parts["outside_fit_s"] + growing * 60.0 / parts["fit_s"]
    return {
        "fit_slower_than_direct_s": slower,
        "in_fit_s": in_fit,
        "cost_per_trial_s": parts["outside_fit_s"] + growing,
        "cost_of_60s_trial_s": cost_60,
        "met": cost_60 < TARGET_PER_TRIAL_S and cost_60 / 60.0 < TARGET_FRACTION,
    }


def run_launcher(trial: dict, n: int, backend: str, folder: Path, keep_ray: bool = False) -> dict:
    study = {
        "name": f"overhead_{backend}",
        "trial": trial,
        "repeats": n,
        "max_concurrent": 1,
        "backend": backend,
        "resources": {"cpus": 2},
        "output": {"mlflow_uri": f"sqlite:///{folder}/mlflow.db", "dir": str(folder / "results")},
        **({"ray": {"keep": True}} if keep_ray else {}),
    }
    path = folder / f"{backend}.yaml"
    path.write_text(yaml.safe_dump(study))
    t = time.time()
    with open(folder / "out.txt", "w+") as out:
        cmd = [sys.executable, "-m", "sweeps.launch", str(path)]
        proc = subprocess.Popen(cmd, stdout=out, stderr=out, cwd=folder)
        record = kept.read()  # a kept Ray this launch joins: its processes (and workers) count too
        tree = TreeCPU(proc.pid, tuple(int(p) for p in record.processes) if record else ())
        code = proc.wait()
        wall = time.time() - t
        tree.stop()
        out.seek(0)
        text = out.read()
    if code != 0:
        raise RuntimeError(f"launch ({backend}) failed:\n{text[-6000:]}")
    runs = child_runs(folder / "mlflow.db")
    if len(runs) != n:
        raise RuntimeError(f"expected {n} finished child runs, found {len(runs)}")
    trial_pids = {int(r["pid"]) for r in runs if r["pid"]} | ({proc.pid} if backend == "local" else set())
    background = tree.between(runs[0]["end"], runs[-1]["end"], exclude=trial_pids)
    parts = split_costs(wall, t, runs, background, cpus=os.cpu_count() or 1)
    # CPU seconds until the first trial's run opened (load moves wall times, much less these): the
    # launcher, the Ray it started or the kept one it joined (a kept Ray started within the launch
    # leaves its process tree and is not counted)
    to_first = tree.between(t, runs[0]["start"], exclude=set())
    return {"wall": wall, **parts, "background_cpu_s": background, "cpu_to_first_trial_s": to_first,
            "stdout_tail": text[-1500:]}  # fmt: skip


def direct_loop(trial: dict, n: int) -> dict:
    direct = run_direct(trial, n)
    walls = direct["trial_walls"]
    per_trial = sum(walls[1:]) / (n - 1) if n > 1 else walls[0]
    return {**direct, "per_trial": per_trial, "fixed": direct["wall"] - n * per_trial}


def main(argv=None) -> int:
    args = parse_args(argv)
    trial = {**TRIAL, "train": {**TRIAL["train"], "tokens": args.tokens}}
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    results: dict = {"trials": args.trials, "tokens": args.tokens}
    n = args.trials
    direct = results["direct"] = direct_loop(trial, n)
    per_trial = direct["per_trial"]
    print(
        f"direct loop: {direct['wall']:.1f} s for {n} trials ({per_trial:.1f} s per trial, "
        f"{direct['fixed']:.1f} s fixed)"
    )
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if args.keep_ray and "ray" in backends:  # the first launch starts the kept Ray, the next joins it
        backends.insert(backends.index("ray"), "ray_first")
    with tempfile.TemporaryDirectory(prefix="bench-orch-kept-") as record:
        if args.keep_ray:
            os.environ[kept.RECORD_ENV] = str(Path(record) / "kept-ray.json")
        try:
            for backend in backends:
                with tempfile.TemporaryDirectory(prefix=f"bench-orch-{backend}-") as tmp:
                    name = backend.removesuffix("_first")
                    results[backend] = run_launcher(trial, args.trials, name, Path(tmp), args.keep_ray)
        finally:
            if args.keep_ray:
                print(kept.stop())
    # The direct loop again: its two trial times bracket the drift over the launches, so a
    # launcher's training (fit_s) slower than both is a cost of the launcher, not the machine's
    after = results["direct_after"] = direct_loop(trial, n)
    slowest = max(per_trial, after["per_trial"])
    print(
        f"direct loop again: {after['per_trial']:.1f} s per trial (drift since the first: "
        f"{after['per_trial'] - per_trial:+.2f} s), {after['fixed']:.1f} s fixed"
    )
    for backend in backends:
        got = results[backend]
        got.update(per_trial_cost(got, slowest))
        got.update(
            wall_diff_per_trial_s=got["per_trial"] - per_trial,
            extra_fixed_s=got["fixed"] - direct["fixed"],
            # the direct loop's own fixed part moves by seconds between its two runs (a trial's
            # drift times N): against their mean, the figure the first loop alone moves less
            extra_fixed_mean_s=got["fixed"] - (direct["fixed"] + after["fixed"]) / 2,
            extra_amortised_s=(got["wall"] - direct["wall"]) / n,
        )
        cost, cost_60 = got["cost_per_trial_s"], got["cost_of_60s_trial_s"]
        print(
            f"launcher ({backend}): {got['wall']:.1f} s; per trial: cost {cost:.2f} s = outside fit "
            f"{got['outside_fit_s']:.2f} + logging in fit {got['logging_s']:.2f} + in-fit slowdown "
            f"{got['in_fit_s']:.2f} (background CPU {got['background_s']:.2f}, fit {got['fit_s']:.1f} s "
            f"against the direct loops' {per_trial:.1f}/{after['per_trial']:.1f} s: "
            f"{got['fit_slower_than_direct_s']:+.2f}); a 60 s trial: {cost_60:.2f} s = "
            f"{cost_60 / 60:.1%} (target < {TARGET_PER_TRIAL_S:.0f} s and < {TARGET_FRACTION:.0%}: "
            f"{'met' if got['met'] else 'MISSED'})"
        )
        print(
            f"  context (moved by drift): cycle {got['per_trial']:.1f} s vs the first direct loop's "
            f"{per_trial:.1f} s ({got['wall_diff_per_trial_s']:+.2f} s); fixed extra "
            f"{got['extra_fixed_s']:+.1f} s (against both direct loops' mean "
            f"{got['extra_fixed_mean_s']:+.1f} s; to the first trial {got['to_first_trial']:.1f} s, after "
            f"the last {got['after_last_trial']:.1f} s); (wall - direct) / N "
            f"{got['extra_amortised_s']:+.2f} s; CPU to the first trial {got['cpu_to_first_trial_s']:.1f} s"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
