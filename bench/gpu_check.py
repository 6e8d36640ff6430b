"""`python -m bench.gpu_check` (`make gpu-check`): the CUDA paths of the project, checked in one run
of at most five minutes on one GPU: the paths the CPU tests cannot reach. It prints one table and
exits 0 when every check passed, 1 when one failed (or the time budget cut it short), 2 on a
machine without CUDA (nothing is run there).

Checks, in order (`CHECKS`):
- trials: a short training trial (trainers.fit, precision bf16-true, synthetic token shards) per
  paper design (`arch.paper_designs`) at presets mini and small; tokens/s as ratios to the baseline
  and to SATFormer (the paper's throughput table at small scale: Hyper-Connections and MUDDFormer
  against SATFormer);
- memory: one SATFormer training step (fp32, the same model, batch and seed) measured by the CUDA
  allocator and by the CPU meter (the profiler's allocation events, what every CPU figure of this
  project uses), side by side; they should agree up to kernel workspaces (`MEMORY_TOLERANCE`);
- precision: bf16-true against bf16-mixed on the same SATFormer small trial (tokens/s, peak
  memory; bf16-true's parameters must take half the bytes: the cast really happened);
- ray: a two-trial study through `python -m sweeps.launch` on local Ray with `gpus: 1` a trial;
- compile: eager against `train.compile` on the same SATFormer mini trial (tokens/s, val_loss);
- loss: one bf16 training step at vocab 32000 along each `train.loss` path (plain, chunked, chunked
  with block recomputation, and fused when liger-kernel is installed: `pip install -e '.[fused-loss]'`)
  side by side (bench.loss_paths): the losses must agree and chunked must lower the peak.
- plan: the memory plan (sweeps.run.memory: measured on this machine's CPU, extrapolated in tokens)
  against the CUDA allocator's peak (torch.cuda.max_memory_allocated) of one optimizer step of
  studies/paper/small.yaml's baseline and SATFormer at the real per-GPU micro-batch the plan lets fit
  this GPU (64 x 4096 when it fits, else the largest that does, with activation checkpointing when
  nothing does without), bf16-true, the trial's loss path (fused with liger-kernel: the plan measured
  chunked in its place). It also reads what the CPU meter cannot see: the allocator's reserved
  peak (fragmentation, cached blocks) and the device's whole use (total - free: + the CUDA context),
  and prints `headroom_needed` = plan peak / device use. Passes when `memory.HEADROOM` is at most
  that (docs/memory_plan.md: set HEADROOM from these rows). NEVER RUN ON A GPU YET (written
  without one; its Python is tested on CPU at a toy size, tests/bench/test_gpu_check.py).
Not checked: NCCL (data parallelism needs two GPUs; NCCL refuses two ranks on one device).
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from arch.paper_designs import BASELINE, PAPER_DESIGNS

REPO = Path(__file__).resolve().parents[1]
BUDGET_S = 300.0  # the whole run, on one GPU
NEEDS_CUDA = "bench.gpu_check needs CUDA: torch sees no CUDA device on this machine (nothing was run)"
EXIT_FAILED, EXIT_NO_CUDA = 1, 2
MEMORY_TOLERANCE = 0.15  # |allocator / CPU meter - 1| above this fails the memory check
VOCAB = 32000
# label -> the model preset and batch shape of its trials
SCALES = {
    "mini": {"preset": "mini", "seq_len": 256, "batch_size": 16},
    "small": {"preset": "small", "seq_len": 1024, "batch_size": 8},
}
STEPS = 30  # optimizer steps of a trial (the throughput meter skips the first ones)


@dataclasses.dataclass
class Result:
    check: str
    name: str
    ok: bool
    values: dict[str, str] = dataclasses.field(default_factory=dict)
    note: str = ""


# --- pure helpers (tested on CPU) ---------------------------------------------------------------


def ratio(value: float, reference: float) -> str:
    return f"{value / reference:.3f}x" if reference and math.isfinite(value) else "-"


def format_table(results: list[Result]) -> str:
    """One row per result: check, name, status, then its values as key=value, then the note."""
    rows = [("check", "name", "status", "values")]
    for r in results:
        values = "  ".join(f"{k}={v}" for k, v in r.values.items())
        rows.append((r.check, r.name, "ok" if r.ok else "FAILED", f"{values}  {r.note}".strip()))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3]
             for row in rows]  # fmt: skip
    return "\n".join(line.rstrip() for line in lines)


def exit_code(results: list[Result]) -> int:
    return 0 if results and all(r.ok for r in results) else EXIT_FAILED


def trial_tree(residual: dict, scale: str, shards: str, **train) -> dict:
    shape = SCALES[scale]
    tokens = STEPS * shape["batch_size"] * shape["seq_len"]
    return {
        "seed": 0,
        "model": {"preset": shape["preset"], "vocab_size": VOCAB, "residual": residual},
        "data": {"kind": "tokens", "path": shards, "seq_len": shape["seq_len"]},
        "train": {
            "tokens": tokens,
            "batch_size": shape["batch_size"],
            "lr": 1e-3,
            "warmup_frac": 0.1,
            "eval_every": 1000,
            "eval_batches": 2,
            "precision": "bf16-true",
            **train,
        },
    }


def two_trial_study(shards: str, out: str) -> dict:
    """The study the ray check launches: baseline and SATFormer at mini, one GPU a trial."""
    tree = trial_tree(PAPER_DESIGNS[BASELINE], "mini", shards)
    del tree["model"]["residual"]
    return {
        "name": "gpu_check_ray",
        "trial": tree,
        "space": {"model.residual": {"choices": {k: PAPER_DESIGNS[k] for k in (BASELINE, "satformer")}}},
        "sampler": {"kind": "grid"},
        "backend": "ray",
        "ray": {"num_cpus": 4, "num_gpus": 1},
        "resources": {"cpus": 2, "gpus": 1},
        "max_concurrent": 1,
        "probe": {"rounds": 1, "steps": 1},
        "output": {"dir": f"{out}/results", "mlflow_uri": f"sqlite:///{out}/mlflow.db", "checkpoints": False},
    }


# --- the checks (CUDA) --------------------------------------------------------------------------


def write_shards(folder: Path, vocab: int = VOCAB) -> str:
    """Random token shards in the layout trainers.data.shards reads (speed and memory do not
    depend on the text)."""
    import numpy as np

    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 4_000_000), ("val", 200_000)):
        rng.integers(0, vocab, n, dtype=np.uint16).tofile(folder / f"{split}_000.bin")
    (folder / "meta.json").write_text(json.dumps({"vocab_size": vocab, "dtype": "uint16"}))
    return str(folder)


def _fit(tree: dict) -> dict[str, float]:
    # Lazy: Lightning (trainers.fit loads it) only where CUDA is, not to answer "no CUDA"
    # (exit 2) or for the pure helpers the CPU tests import.
    from trainers import TrialConfig
    from trainers.fit import fit

    return fit(TrialConfig.from_dict(tree))


def check_trials(shards: str) -> list[Result]:
    out = []
    for scale in SCALES:
        metrics = {}
        for family, residual in PAPER_DESIGNS.items():
            try:
                metrics[family] = _fit(trial_tree(residual, scale, shards))
            except Exception as err:  # noqa: BLE001  (reported in the table, the run goes on)
                out.append(Result("trials", f"{scale}/{family}", False, note=f"{type(err).__name__}: {err}"))
        base = metrics.get(BASELINE, {}).get("train_tokens_per_s", 0.0)
        sat = metrics.get("satformer", {}).get("train_tokens_per_s", 0.0)
        for family, m in metrics.items():
            speed, loss = m.get("train_tokens_per_s", math.nan), m.get("val_loss", math.nan)
            values = {
                "tok/s": f"{speed:.0f}",
                "vs_baseline": ratio(speed, base),
                "vs_satformer": ratio(speed, sat),
                "peak_MiB": f"{m.get('peak_mem_mb', math.nan):.0f}",
                "val_loss": f"{loss:.3f}",
            }
            out.append(Result("trials", f"{scale}/{family}", math.isfinite(loss) and speed > 0, values))
    return out


def step_peak(device: str) -> int:
    """Peak bytes of SATFormer mini's second fp32 training step on `device`, by the project's meter."""
    import torch

    # Lazy, as in `_fit`: Lightning loads only where the checks run.
    from trainers.step_memory import StepMemoryMeter
    from trainers.synthetic_step import synthetic_step

    shape = SCALES["mini"]
    model = {"preset": shape["preset"], "vocab_size": VOCAB, "residual": PAPER_DESIGNS["satformer"]}
    meter = StepMemoryMeter(torch.device(device))
    built = synthetic_step(
        model, shape["batch_size"], shape["seq_len"], torch.device(device), mark=meter.backward_starts
    )
    built.step()  # optimizer state, allocator warm-up
    meter.start(built.model, built.optimizer, [built.tokens])
    built.step()
    return meter.stop().peak


def check_memory(shards: str) -> list[Result]:
    cuda, cpu = step_peak("cuda"), step_peak("cpu")
    ok = abs(cuda / cpu - 1) <= MEMORY_TOLERANCE
    values = {
        "allocator_MiB": f"{cuda / 2**20:.1f}",
        "cpu_meter_MiB": f"{cpu / 2**20:.1f}",
        "ratio": ratio(cuda, cpu),
    }
    return [Result("memory", "mini/satformer fp32 step", ok, values, f"tolerance {MEMORY_TOLERANCE:.0%}")]


def _paired(check: str, name: str, trees: dict[str, dict]) -> tuple[Result, dict | None, dict | None]:
    """Two trials of one design (two labels -> trees): the second's ratios to the first, and both
    trials' metrics (None when one failed)."""
    runs = {}
    for label, tree in trees.items():
        try:
            runs[label] = _fit(tree)
        except Exception as err:  # noqa: BLE001  (reported in the table, the run goes on)
            return Result(check, f"{name} {label}", False, note=f"{type(err).__name__}: {err}"), None, None
    (a, ma), (b, mb) = runs.items()
    values = {
        f"{a}_tok/s": f"{ma['train_tokens_per_s']:.0f}",
        f"{b}_tok/s": f"{mb['train_tokens_per_s']:.0f}",
        f"{b}/{a}_speed": ratio(mb["train_tokens_per_s"], ma["train_tokens_per_s"]),
        f"{b}/{a}_peak": ratio(mb["peak_mem_mb"], ma["peak_mem_mb"]),
        "val_loss": f"{ma['val_loss']:.3f} / {mb['val_loss']:.3f}",
    }
    ok = all(math.isfinite(m["val_loss"]) for m in (ma, mb))
    return Result(check, name, ok, values), ma, mb


def check_precision(shards: str) -> list[Result]:
    trees = {
        p: trial_tree(PAPER_DESIGNS["satformer"], "small", shards, precision=p)
        for p in ("bf16-mixed", "bf16-true")
    }
    result, mixed, true = _paired("precision", "small/satformer", trees)
    if mixed is not None:
        halved = abs(true["mem_params_mb"] * 2 / mixed["mem_params_mb"] - 1) < 0.01
        result.ok = result.ok and halved
        result.note = "bf16-true params: half the bytes" if halved else "bf16-true params NOT half: no cast?"
    return [result]


def check_compile(shards: str) -> list[Result]:
    trees = {
        mode: trial_tree(PAPER_DESIGNS["satformer"], "mini", shards, compile=mode == "compiled")
        for mode in ("eager", "compiled")
    }
    return [_paired("compile", "mini/satformer", trees)[0]]


def check_ray(shards: str) -> list[Result]:
    import yaml

    with tempfile.TemporaryDirectory(prefix="gpu_check_ray_") as out:
        path = Path(out) / "study.yaml"
        path.write_text(yaml.safe_dump(two_trial_study(shards, out), sort_keys=False))
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "sweeps.launch", str(path)], cwd=REPO,
                              capture_output=True, text=True, timeout=max(30.0, remaining()))  # fmt: skip
        took = time.perf_counter() - start
    tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
    note = "" if done.returncode == 0 else f"exit {done.returncode}: {tail[0]}"
    return [Result("ray", "2 trials, gpus: 1", done.returncode == 0, {"wall_s": f"{took:.0f}"}, note)]


LOSS_TOLERANCE = 0.01  # |loss / plain's - 1| above this fails the loss check (bf16 logits)


def check_loss(shards: str, device="cuda", batch=8, seq_len=1024, vocab=VOCAB, chunk=None, rounds=3):
    import torch

    from bench.loss_paths import compare  # torch and the model: loaded when the check runs

    found = compare(device, vocab, batch, seq_len, rounds, dtype=torch.bfloat16, chunk=chunk)
    plain = found["plain"]
    results = []
    for label, values in found.items():
        ok = abs(values["loss"] / plain["loss"] - 1) <= LOSS_TOLERANCE
        if label != "plain":
            ok = ok and values["peak_MiB"] < plain["peak_MiB"]
        shown = {k: str(v) for k, v in values.items()}
        results.append(Result("loss", f"mini-like bf16 step, {label}", ok, shown))
    if "fused" not in found:
        missing = "liger-kernel not installed (or no CUDA): the fused path was not run"
        results.append(Result("loss", "fused", False, note=missing))
    return results


PAPER_SMALL = REPO / "studies" / "paper" / "small.yaml"
PLAN_DESIGNS = ("baseline", "satformer")


def unseen_by_the_cpu(device, allocated_peak: int) -> tuple[int, int]:
    """(the caching allocator's reserved peak, the bytes in use on the whole device) right after a
    measured step: what the CPU meter cannot see. Reserved holds the allocated bytes plus the
    allocator's fragmentation and cached blocks (cuBLAS's workspaces come from it too); the
    device's use (total - free) adds the CUDA context and the loaded kernels. On CPU both are the
    allocated peak (nothing else to see)."""
    import torch

    if torch.device(device).type != "cuda":
        return allocated_peak, allocated_peak
    free, total = torch.cuda.mem_get_info(device)
    return torch.cuda.max_memory_reserved(device), total - free


def headroom_check(plan_peak: int, reserved: int, used: int, headroom: float) -> tuple[dict[str, str], bool]:
    """The plan's headroom against what a GPU really used: `needed` is the largest headroom that
    would still have covered the device's whole use (plan peak / used); ok when the headroom is
    at most that (what the plan let fit would have fitted)."""
    needed = plan_peak / used if used else math.inf
    values = {
        "reserved_GiB": f"{reserved / 2**30:.2f}",
        "device_used_GiB": f"{used / 2**30:.2f}",
        "headroom_needed": f"{needed:.3f}",
    }
    return values, headroom <= needed


def check_plan(shards: str, device="cuda", study_path=PAPER_SMALL, overrides=(), budget=None) -> list[Result]:
    """The plan against the allocator (see the module docstring); `budget`: bytes the plan may use
    (default: this GPU's size x the headroom)."""
    import torch

    # Lazy, as in `_fit`: the launcher's modules load only where the check runs.
    from sweeps.run import memory
    from sweeps.study import load_study
    from trainers.memory_probe import measure_at

    with tempfile.TemporaryDirectory(prefix="gpu_check_plan_") as out:
        study = load_study(study_path, [f"trial.data.path={shards}", f"output.dir={out}", *overrides])
        if budget is None:
            budget = torch.cuda.get_device_properties(0).total_memory * memory.HEADROOM
        plans = memory.Plans(study)
        results = []
        for point in study.planned_points():
            label = str(next(iter(point.values())))
            if label not in PLAN_DESIGNS:
                continue
            cfg = study.trial_config(point)
            setup = memory.setup_of(cfg)
            rows, seq = memory.rows_per_step(cfg), cfg.data.seq_len
            best = plans.fit_of(cfg, setup).largest_fitting(budget, rows, seq)
            if best is None:  # nothing fits without recomputing the blocks
                setup = memory.setup_of(cfg, blocks=True)
                best = plans.fit_of(cfg, setup).largest_fitting(budget, rows, seq)
            if best is None:
                results.append(Result("plan", label, False, note="no micro-batch fits, even with blocks"))
                continue
            loss = setup.loss_asked if torch.device(device).type == "cuda" else setup.loss
            step = measure_at(cfg, setup.precision, loss, setup.blocks, best.rows, seq, device)
            plan_peak = best.peak - (best.grads if best.grad_accum > 1 else 0)  # one step, no accumulation
            reserved, used = unseen_by_the_cpu(device, step.peak)
            values = {
                "micro_batch": f"{best.rows}x{seq} (accum {best.grad_accum})",
                "ckpt": "blocks" if setup.blocks else "none",
                "loss": loss,
                "plan_GiB": f"{plan_peak / 2**30:.2f}",
                "allocator_GiB": f"{step.peak / 2**30:.2f}",
                "ratio": ratio(step.peak, plan_peak),
            }
            extra, ok = headroom_check(plan_peak, reserved, used, memory.HEADROOM)
            values.update(extra)
            results.append(Result("plan", f"paper small {label}", ok, values, f"headroom {memory.HEADROOM}"))
        return results


CHECKS: list[tuple[str, Callable[[str], list[Result]]]] = [
    ("trials", check_trials),
    ("memory", check_memory),
    ("precision", check_precision),
    ("ray", check_ray),
    ("compile", check_compile),
    ("loss", check_loss),
    ("plan", check_plan),
]

_START = time.perf_counter()


def remaining() -> float:
    return BUDGET_S - (time.perf_counter() - _START)


def main(argv: list[str] | None = None) -> int:
    import torch

    if not torch.cuda.is_available():
        print(NEEDS_CUDA, file=sys.stderr)
        return EXIT_NO_CUDA
    global _START
    _START = time.perf_counter()
    device = torch.cuda.get_device_name(0)
    print(f"bench.gpu_check on {device}, torch {torch.__version__}, budget {BUDGET_S:.0f} s", flush=True)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        shards = write_shards(Path(tmp) / "shards")
        for name, check in CHECKS:
            if remaining() <= 0:
                results.append(Result(name, "-", False, note="not run: the time budget is spent"))
                continue
            try:
                results.extend(check(shards))
            except Exception as err:  # noqa: BLE001  (one broken check does not hide the others)
                results.append(Result(name, "-", False, note=f"{type(err).__name__}: {err}"))
            print(f"  {name} done at {BUDGET_S - remaining():.0f} s", flush=True)
    print(format_table(results))
    code = exit_code(results)
    print("all checks passed" if code == 0 else "FAILED: see the rows marked FAILED")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
