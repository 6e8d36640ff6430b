"""Does a change train like what it replaces? Final val_loss over seeds, before and after.

    python -m bench.training_equivalence --before 72aa97f --after 56732e3 --seeds 0-7 \\
        --tokens 300000 --margin 0.01 --jobs 2 --runs docs/bench/runs.jsonl --json -

Trains a recipe (default: the trial of studies/cpu_base.yaml, 1 thread a run; `--set KEY=VALUE`
changes it for both arms, `--before-set` / `--after-set` for one: a design against the baseline is
`--after-set 'model.residual={kind: value_residual, mode: gated}'`) for each seed in two arms,
each a git revision (`git archive` into a temp folder; `.` is this working tree as it is) and
optionally a patch file run first in the training process (`bench/patches/`). Seed s
gives both arms the same data order (and the same init, where the change leaves the parameter
shapes alone), so the runs pair by seed. Reports:

- the paired difference after - before of final val_loss: mean, its 95% t interval
  (`sweeps.report.stats.paired`), and each arm's mean and spread (`interval`);
- the spread ratio std(after) / std(before), its 95% F interval, the F test's and Levene's
  (Brown-Forsythe, median-centred) p-values;
- the power reached: the smallest mean difference and spread ratio these seeds detect with 80%
  probability at the 5% level (from the measured spread of the differences);
- the verdict against `--margin`: `equivalent` when the 95% interval lies inside +-margin (two
  one-sided tests at 2.5% each), else `better` / `worse` when it excludes 0, else `undecided`.

Patch files (bench/patches/): `reference_model` (the plain `bench.reference` GPT with rmsnorm,
rope, swiglu in the backbone's place: `--before HEAD --after HEAD --after-patch
bench/patches/reference_model.py`), `rotate_half_permuted` (the rotary layout's paired experiment), and
the rounding controls `one_ulp_qk` and `heads_reversed`: the same model with only float rounding
changed, the yardstick for how far rounding alone moves a seed's final loss
(docs/bench/rotary_layout.md).

Every run goes to the `--runs` file (JSON lines, keyed by commit, patch content and trial), and
is reused from it: more seeds later cost only the new runs. A benchmark, not a CI test: a tiny
run of 1M tokens takes minutes on one CPU thread. Run it for every change that touches a kernel,
an init or the optimizer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import yaml

from sweeps.report.stats import LEVEL, interval, paired, t_quantile

WORKER = Path(__file__).with_name("training_worker.py")
REPO = Path(__file__).resolve().parents[1]
DEFAULT_RECIPE = REPO / "studies" / "cpu_base.yaml"
WORKING_TREE = "."
POWER = 0.8
LIVE: set[subprocess.Popen] = set()  # runs in flight, killed when the benchmark stops early


# ---- statistics -----------------------------------------------------------------------------


def spread_ratio(after: list[float], before: list[float]) -> dict[str, float]:
    """std(after) / std(before), its 95% interval from the F distribution of the variance ratio,
    the two-sided F test's p and Levene's (median-centred) p. Normal samples assumed by F."""
    from scipy.stats import f, levene

    na, nb = len(after), len(before)
    if na < 2 or nb < 2:
        return {"ratio": math.nan, "lo": math.nan, "hi": math.nan, "p_f": math.nan, "p_levene": math.nan}
    va, vb = float(np.var(after, ddof=1)), float(np.var(before, ddof=1))
    if vb == 0 or va == 0:
        return {"ratio": math.nan, "lo": math.nan, "hi": math.nan, "p_f": math.nan, "p_levene": math.nan}
    ratio = va / vb
    tail = (1 - LEVEL) / 2
    lo = ratio / f.ppf(1 - tail, na - 1, nb - 1)
    hi = ratio / f.ppf(tail, na - 1, nb - 1)
    cdf = f.cdf(ratio, na - 1, nb - 1)
    p_f = float(min(1.0, 2 * min(cdf, 1 - cdf)))
    # Levene on 2 values a side is 0/0 (each deviation from the median is the same)
    p_levene = float(levene(after, before, center="median").pvalue) if min(na, nb) > 2 else math.nan
    stds = {"ratio": math.sqrt(ratio), "lo": math.sqrt(lo), "hi": math.sqrt(hi)}
    return {**stds, "p_f": p_f, "p_levene": p_levene}


def detectable_difference(std_diff: float, n: int, power: float = POWER) -> float:
    """The mean paired difference a two-sided 5% t test on n pairs finds with `power`."""
    if n < 2 or not math.isfinite(std_diff):
        return math.nan
    from scipy.stats import t

    return float((t_quantile(n - 1) + t.ppf(power, n - 1)) * std_diff / math.sqrt(n))


def detectable_spread_ratio(n_after: int, n_before: int, power: float = POWER) -> float:
    """The std ratio (> 1) a two-sided 5% F test finds with `power`: var ratio R with
    P(F * R > F_crit) = power, F ~ F(n_after - 1, n_before - 1)."""
    if n_after < 2 or n_before < 2:
        return math.nan
    from scipy.stats import f

    df = (n_after - 1, n_before - 1)
    return float(math.sqrt(f.ppf(0.5 + LEVEL / 2, *df) / f.ppf(1 - power, *df)))


def equivalence_verdict(diff: dict[str, float], margin: float, direction: str = "minimize") -> str:
    """equivalent (95% interval inside +-margin), better / worse (it excludes 0), undecided."""
    lo, hi = diff["lo"], diff["hi"]
    if diff["n"] < 2 or not (math.isfinite(lo) and math.isfinite(hi)):
        return "undecided"
    if -margin < lo and hi < margin:
        return "equivalent"
    if lo <= 0 <= hi:
        return "undecided"
    return "better" if (hi < 0) == (direction == "minimize") else "worse"


def compare(before: dict[int, float], after: dict[int, float], margin: float) -> dict:
    """The report's numbers for two {seed: final val_loss} arms."""
    diff = paired(after, before)
    shared = sorted(set(before) & set(after))
    return {
        "metric": "val_loss",
        "margin": margin,
        "seeds": shared,
        "before": interval([before[s] for s in shared]) if shared else {},
        "after": interval([after[s] for s in shared]) if shared else {},
        "difference": diff,
        "spread_ratio": spread_ratio([after[s] for s in shared], [before[s] for s in shared]),
        "detectable": {
            "power": POWER,
            "difference": detectable_difference(diff["std"], diff["n"]),
            "spread_ratio": detectable_spread_ratio(len(shared), len(shared)),
        },
        "verdict": equivalence_verdict(diff, margin),
    }


# ---- arguments ------------------------------------------------------------------------------


def parse_seeds(text: str) -> list[int]:
    """'0-7' or '0,3,5' or '0-3,8' -> sorted seeds."""
    seeds: set[int] = set()
    try:
        for part in text.split(","):
            if "-" in part.strip()[1:]:
                lo, hi = part.split("-", 1)
                if int(hi) < int(lo):
                    raise ValueError
                seeds.update(range(int(lo), int(hi) + 1))
            else:
                seeds.add(int(part))
    except ValueError:
        raise SystemExit(f"--seeds {text!r}: expected seeds like 0-7 or 0,3,5") from None
    return sorted(seeds)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.training_equivalence", description=__doc__.split("\n")[0]
    )
    p.add_argument("--before", default="HEAD~1", help="git revision of the 'before' arm ('.': this tree)")
    p.add_argument("--after", default=WORKING_TREE, help="git revision of the 'after' arm ('.': this tree)")
    p.add_argument("--before-patch", type=Path, default=None, help="Python file run before each 'before' run")
    p.add_argument("--after-patch", type=Path, default=None, help="Python file run before each 'after' run")
    p.add_argument("--recipe", type=Path, default=DEFAULT_RECIPE, help="study YAML whose `trial:` is trained")
    p.add_argument(
        "--set",
        dest="set_both",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a trial key of both arms, value read as YAML (repeatable)",
    )
    p.add_argument(
        "--before-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a trial key of the 'before' arm only (repeatable)",
    )
    p.add_argument("--after-set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a trial key of the 'after' arm only, e.g. "
                   "'model.residual={kind: value_residual, mode: gated}' (repeatable)")  # fmt: skip
    p.add_argument("--seeds", default="0-5", help="seeds: 0-7, 0,3,5 (default 0-5)")
    p.add_argument("--tokens", type=int, default=None, help="training tokens a run (default: the recipe's)")
    p.add_argument(
        "--recipe-evals", action="store_true", help="validate as the recipe does, not at the end only"
    )
    p.add_argument("--threads", type=int, default=1, help="torch threads a run (default 1)")
    p.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    p.add_argument("--margin", type=float, default=0.01, help="equivalence margin on val_loss (default 0.01)")
    p.add_argument("--runs", type=Path, default=None, help="JSON lines of runs: reused, and appended to")
    p.add_argument("--cached-only", action="store_true", help="report the --runs file's runs, train none")
    p.add_argument("--json", default=None, help="write the report as JSON to this path ('-': stdout)")
    p.add_argument("--python", default=sys.executable, help="interpreter of the runs")
    args = p.parse_args(argv)
    args.seed_list = parse_seeds(args.seeds)
    for name in ("before_patch", "after_patch"):
        path = getattr(args, name)
        if path is not None and not path.is_file():
            p.error(f"--{name.replace('_', '-')} {path}: no such file")
    for name in ("set_both", "before_set", "after_set"):
        setattr(args, name, [parse_override(text, p) for text in getattr(args, name)])
    if args.cached_only and args.runs is None:
        p.error("--cached-only reports the runs of --runs FILE: give one")
    if not args.recipe.is_file():
        p.error(f"--recipe {args.recipe}: no such file")
    if (
        (args.tokens is not None and args.tokens <= 0)
        or args.threads <= 0
        or args.jobs <= 0
        or args.margin <= 0
    ):
        p.error("--tokens, --threads, --jobs and --margin must be positive")
    return args


def parse_override(text: str, parser: argparse.ArgumentParser) -> tuple[list[str], object]:
    """'train.lr=2e-3' -> (['train', 'lr'], 0.002): the key path and its value read as YAML."""
    key, sep, value = text.partition("=")
    path = key.strip().split(".")
    if not sep or not all(path):
        parser.error(f"--set {text!r}: expected KEY.PATH=VALUE, e.g. train.lr=2.0e-3")
    return path, yaml.safe_load(value)


def apply_overrides(trial: dict, overrides: list[tuple[list[str], object]]) -> dict:
    """`trial` with each (key path, value) set, in order; mappings on the way are created."""
    for path, value in overrides:
        node = trial
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise SystemExit(f"--set {'.'.join(path)}: {part!r} is not a mapping in the trial")
        node[path[-1]] = value
    return trial


def recipe_trial(
    recipe: Path,
    tokens: int | None,
    threads: int,
    seed: int,
    final_eval_only: bool = True,
    overrides: list[tuple[list[str], object]] = (),
) -> dict:
    """The recipe's `trial:` mapping with `overrides` (--set, then the arm's own), this run's
    budget, threads and seed; with `final_eval_only`, validation at the end only (eval_every =
    the run's steps): only the final val_loss is compared, and the recipe's evaluations on the
    way cost ~10% of a tiny run."""
    study = yaml.safe_load(recipe.read_text())
    if not isinstance(study, dict) or not isinstance(study.get("trial"), dict):
        raise SystemExit(f"{recipe}: expected a study with a `trial:` mapping")
    trial = apply_overrides(json.loads(json.dumps(study["trial"])), overrides)
    trial["seed"] = seed
    train = trial.setdefault("train", {})
    tokens = train["tokens"] = tokens or train.get("tokens", 1_000_000)
    train["num_threads"] = threads
    if final_eval_only:
        per_step = train.get("batch_size", 32) * train.get("grad_accum", 1) * trial["data"]["seq_len"]
        train["eval_every"] = max(50, tokens // per_step)  # TrainConfig's least eval_every: 50
    return trial


# ---- revisions ------------------------------------------------------------------------------


def resolve(rev: str, repo: Path = REPO) -> str:
    """The commit of `rev`, or '.' for the working tree; exits naming the revision if unknown."""
    if rev == WORKING_TREE:
        return WORKING_TREE
    out = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                         capture_output=True, text=True)  # fmt: skip
    if out.returncode:
        raise SystemExit(f"revision {rev!r}: not a commit of {repo}")
    return out.stdout.strip()


def export_tree(commit: str, into: Path, repo: Path = REPO) -> Path:
    """The files of `commit` under `into` (git archive: no worktree metadata left behind)."""
    if commit == WORKING_TREE:
        return repo
    dest = into / commit[:12]
    if not dest.exists():
        dest.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", commit],
                                 capture_output=True, check=True).stdout  # fmt: skip
        tar_path = into / f"{commit[:12]}.tar"
        tar_path.write_bytes(archive)
        with tarfile.open(tar_path) as tar:
            tar.extractall(dest, filter="data")
        tar_path.unlink()
    return dest


# ---- runs -----------------------------------------------------------------------------------


def run_key(commit: str, patch: Path | None, trial: dict) -> str:
    """The identity of a run: commit, patch content and trial (the working tree is never reused)."""
    patch_hash = hashlib.sha256(patch.read_bytes()).hexdigest()[:16] if patch else None
    return json.dumps({"commit": commit, "patch": patch_hash, "trial": trial}, sort_keys=True)


def load_runs(path: Path | None) -> dict[str, dict]:
    if path is None or not path.exists():
        return {}
    runs = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            runs[row["key"]] = row
    return runs


def train(python: str, tree: Path, trial: dict, patch: Path | None, worker: Path = WORKER) -> dict:
    """One run in a fresh process on `tree`'s code; its final metrics."""
    spec = {"trial": trial, "patch": str(patch.resolve()) if patch else None}
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": str(trial["train"]["num_threads"])}
    command = [python, str(worker), json.dumps(spec)]
    with subprocess.Popen(
        command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        LIVE.add(proc)
        try:
            stdout, stderr = proc.communicate()
        finally:
            LIVE.discard(proc)
    out = subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode or not lines:
        raise RuntimeError(f"run failed (seed {trial['seed']}, tree {tree}):\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def run_arms(args, arms: dict[str, tuple[str, Path | None]]) -> dict[str, dict[int, float]]:
    """{arm: {seed: final val_loss}}, training what the runs file does not have."""
    cached = load_runs(args.runs)
    results: dict[str, dict[int, float]] = {arm: {} for arm in arms}
    todo = []
    with tempfile.TemporaryDirectory(prefix="training_equivalence-") as tmp:
        trees = {arm: export_tree(commit, Path(tmp)) for arm, (commit, _) in arms.items()}
        # the worker script as it is now: a checkout or rebase of this tree during a benchmark of
        # hours (a conflict marker in it) must not fail the runs that start later
        worker = Path(shutil.copy(WORKER, Path(tmp) / WORKER.name))
        for seed in args.seed_list:  # interleaved by seed: a partial run still pairs
            for arm, (commit, patch) in arms.items():
                overrides = [*args.set_both, *getattr(args, f"{arm}_set")]
                trial = recipe_trial(
                    args.recipe, args.tokens, args.threads, seed, not args.recipe_evals, overrides
                )
                key = run_key(commit, patch, trial)
                if commit != WORKING_TREE and key in cached:
                    results[arm][seed] = cached[key]["val_loss"]
                else:
                    todo.append((arm, seed, commit, patch, trial, key))
        if args.cached_only:
            todo = []
        reused = sum(map(len, results.values()))
        print(f"{len(todo)} runs to train, {reused} from {args.runs}", file=sys.stderr)

        lock = threading.Lock()

        def one(item):
            arm, seed, commit, patch, trial, key = item
            metrics = train(args.python, trees[arm], trial, patch, worker)
            row = {"key": key, "arm": arm, "commit": commit, "patch": str(patch) if patch else None,
                   "seed": seed, "tokens": trial["train"]["tokens"], "val_loss": metrics["val_loss"],
                   "train_loss": metrics.get("train_loss"), "wall_s": metrics.get("wall_s"),
                   "date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                   "machine": metrics.get("machine"), "loss_curve": metrics.get("loss_curve")}  # fmt: skip
            done = f"val_loss {row['val_loss']:.4f} ({row['wall_s']:.0f} s)"
            print(f"  {arm} seed {seed}: {done}", file=sys.stderr)
            if args.runs is not None and commit != WORKING_TREE:
                with lock:  # written as each run ends: an interrupted benchmark keeps its runs
                    args.runs.parent.mkdir(parents=True, exist_ok=True)
                    with args.runs.open("a") as f:
                        f.write(json.dumps(row) + "\n")
            return row

        with ThreadPoolExecutor(args.jobs) as pool:
            try:
                for row in pool.map(one, todo):
                    results[row["arm"]][row["seed"]] = row["val_loss"]
            except BaseException:  # before the pool's exit waits for its runs: stop them (map's
                for proc in list(LIVE):  # own clean-up has cancelled the runs not started)
                    proc.kill()
                raise
    return results


# ---- report ---------------------------------------------------------------------------------


def format_report(report: dict) -> str:
    b, a, d, s, det = (report[k] for k in ("before", "after", "difference", "spread_ratio", "detectable"))
    lines = [f"before: {report['arms']['before']}", f"after:  {report['arms']['after']}",
             "seed  before    after     after-before"]  # fmt: skip
    if not report["seeds"]:
        return "\n".join([*lines[:2], "no seed has a run in both arms"])
    for seed in report["seeds"]:
        x, y = report["per_seed"]["before"][seed], report["per_seed"]["after"][seed]
        lines.append(f"{seed:<5} {x:.4f}    {y:.4f}    {y - x:+.4f}")
    lines += [
        f"before mean {b['mean']:.4f} std {b['std']:.4f}; after mean {a['mean']:.4f} std {a['std']:.4f}",
        f"paired difference {d['mean']:+.4f}, 95% [{d['lo']:+.4f}, {d['hi']:+.4f}],"
        f" std {d['std']:.4f}, n {d['n']}",
        f"spread ratio {s['ratio']:.2f}, 95% [{s['lo']:.2f}, {s['hi']:.2f}],"
        f" F p {s['p_f']:.3f}, Levene p {s['p_levene']:.3f}",
        f"detectable at {det['power']:.0%} power: difference {det['difference']:.4f},"
        f" spread ratio {det['spread_ratio']:.2f}",
        f"verdict (margin +-{report['margin']}): {report['verdict']}",
    ]
    return "\n".join(lines)


def _stop(signum, frame):
    raise SystemExit(f"stopped by signal {signum}")


def main(argv=None) -> dict:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    try:
        return report_arms(args)
    finally:
        for proc in list(LIVE):  # Lightning ignores SIGTERM in its runs: SIGKILL
            proc.kill()


def report_arms(args) -> dict:
    arms = {
        "before": (resolve(args.before), args.before_patch),
        "after": (resolve(args.after), args.after_patch),
    }
    results = run_arms(args, arms)
    report = compare(results["before"], results["after"], args.margin)
    report["arms"] = {
        arm: f"{commit}" + (f" + {patch}" if patch else "") for arm, (commit, patch) in arms.items()
    }
    report["per_seed"] = {arm: {s: results[arm][s] for s in report["seeds"]} for arm in arms}
    report["recipe"] = {"path": str(args.recipe), "tokens": args.tokens, "threads": args.threads}
    print(format_report(report))
    if args.json == "-":
        print(json.dumps(report, indent=1))
    elif args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return report


if __name__ == "__main__":
    main()
