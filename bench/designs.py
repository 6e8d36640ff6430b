"""`python -m bench.designs`: the cost of every residual design, as ratios to the baseline.

Builds every design once and times them in one process, interleaved (`trainers.timing`: round r
runs every design's step `--steps` times in a rotated order and keeps the fastest), so that
machine drift cancels out in the per-round ratios:

- train tokens/s: forward + backward + AdamW step (the trainer's parameter groups), per second of
  wall time and per second of this process's CPU time (`cpu x`: robust when other work shares
  the machine; on CUDA only the wall time means anything);
- forward tokens/s: inference forward under no_grad;
- peak memory of a training step, exact (`trainers.step_memory.StepMemoryMeter`, the definition the
  trials use: live tensors at the step's peak, from the CUDA allocator or from the profiler's
  allocation events on CPU), with its activation part, measured once per design;
- parameters (total, added by the design), model FLOPs per token (6N + attention term) and the
  achieved fraction of this machine's matmul peak, measured in the same run with a large GEMM.

The `reference` row is `bench.reference.ReferenceGPT` (a plain GPT-2 of the preset's width, depth
and heads), measured the same way; the targets (backbone per FLOP vs the reference, MFU at mini
on CPU, SATFormer and ResFormer against the baseline) are printed met, MISSED or undecided.
`reference+rmsnorm+rope+swiglu` is the same plain code with the backbone's architecture (the
backbone's function, written plainly: tests/bench/test_reference.py), so the two rows separate
what the architecture costs from what the implementation does; any subset of the features
(`reference+rope`, ...) is a row of its own.

Writes the same numbers as JSON (`--json`), optionally logs them to MLflow (`--mlflow-uri`).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time

import torch

from arch import ModelConfig
from arch.paper_designs import BASELINE, PAPER_DESIGNS
from bench import reference
from sweeps.report.stats import median_interval
from trainers.config import TrainConfig
from trainers.flops import flops_per_token
from trainers.host import keep_freed_memory
from trainers.optim import fusable
from trainers.step_memory import MIB, StepMemoryMeter
from trainers.synthetic_step import SyntheticStep, synthetic_step, synthetic_step_of
from trainers.timing import interleaved, sync

# The SATFormer paper's forms (`arch.paper_designs`) first, then other representative
# configurations of each family; `--designs` picks a subset.
DESIGNS = {
    **PAPER_DESIGNS,
    "resformer_fixed": {"kind": "value_residual", "mode": "static"},
    "resformer_learned": {"kind": "value_residual", "mode": "static", "coefficient": "learned"},
    "satformer_token": {"kind": "value_residual", "mode": "gated", "granularity": "token"},
    "muddformer_default": {"kind": "muddformer"},
    "hc_static": {"kind": "hyper_connections", "mode": "static", "expansion_rate": 4},
    "hc_dynamic": {"kind": "hyper_connections", "mode": "dynamic", "expansion_rate": 4},
}
REFERENCE = "reference"  # bench.reference: a plain GPT of the preset's width and depth
SAME_ARCHITECTURE = "+".join([REFERENCE, *reference.FEATURES])  # the backbone's function, plainly
TARGETS = {"satformer": (0.98, 1.01), "resformer": (0.97, 1.03)}  # (min train speed, max memory)
BACKBONE_PER_FLOP = 1.0  # the baseline's FLOP-normalised throughput over the reference's, at least
MFU_AT_MINI_ON_CPU = 0.50


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.designs", description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="mini")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--steps", type=int, default=2, help="steps per design per round (the fastest is kept)")
    p.add_argument("--repeats", type=int, default=20, help="interleaved rounds")
    p.add_argument(
        "--designs",
        default=",".join([*DESIGNS, REFERENCE, SAME_ARCHITECTURE]),
        help="comma-separated names of DESIGNS or reference[+feature...]"
        f" (features: {', '.join(reference.FEATURES)})",
    )
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--compile", action="store_true", help="torch.compile each model")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: as is)")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--mlflow-uri", default=None, help="log the results as one MLflow run")
    return p.parse_args(argv)


def matmul_peak_flops(device: torch.device, dtype: torch.dtype) -> float:
    """Achieved FLOP/s of a large square GEMM (the best of a few), this run's hardware ceiling."""
    n = 8192 if device.type == "cuda" else 2048
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(4):
        sync(device)
        t = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best


def model_config(args, residual) -> dict:
    return {"preset": args.preset, "max_seq_len": max(args.seq_len, 256), "residual": residual}


def reference_features(name: str) -> tuple[str, ...] | None:
    """The features of a reference row (`reference+rope` -> ("rope",)); None: not a reference."""
    head, *features = name.split("+")
    if head != REFERENCE or not set(features) <= set(reference.FEATURES):
        return None
    return tuple(features)


def reference_step(args, device, autocast_dtype, mark, features=()) -> SyntheticStep:
    """The reference GPT's training step, built like `synthetic_step` builds a design's (seed 0,
    AdamW with the trainer's defaults, decay on the matrices, a seed-0 batch)."""
    torch.manual_seed(0)
    model = reference.like(ModelConfig.from_dict(model_config(args, {"kind": "none"})), features).to(device)
    train = TrainConfig()
    groups = [{"params": [p for p in model.parameters() if p.dim() == 2], "weight_decay": train.weight_decay},
              {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]  # fmt: skip
    opt = torch.optim.AdamW(
        groups, lr=train.lr, betas=(train.beta1, train.beta2), fused=fusable(list(model.parameters()))
    )
    vocab = model.tok.weight.shape[0]
    return synthetic_step_of(
        model, opt, vocab, args.batch, args.seq_len, device, autocast_dtype, args.compile, mark
    )


def build_design(name, residual, args, device, autocast_dtype) -> tuple[dict[str, float], object, object]:
    """Builds one design, warms it up and measures what is exact (memory, parameters, FLOPs);
    returns those and its training step and inference forward, ready to be timed."""
    gc.collect()
    meter = StepMemoryMeter(device)
    features = reference_features(name)
    if features is not None:
        built = reference_step(args, device, autocast_dtype, meter.backward_starts, features)
    else:
        built = synthetic_step(model_config(args, residual), args.batch, args.seq_len, device, autocast_dtype,
                               args.compile, mark=meter.backward_starts)  # fmt: skip
    model, opt, x, forward, step = built.model, built.optimizer, built.tokens, built.forward, built.step
    inputs = x[:, :-1]

    step()  # optimizer state, allocator warm-up, compile
    meter.start(model, opt, [x])
    step()
    memory = meter.stop()

    def infer():
        with (
            torch.no_grad(),
            torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None),
        ):
            forward(inputs)

    infer()
    if features is not None:
        counts = {"total": sum(p.numel() for p in model.parameters()), "design": 0}
        flops = model.flops_per_token(args.seq_len)
    else:
        counts, flops = model.param_counts(), flops_per_token(model, args.seq_len)
    exact = {
        "peak_mem_mb": memory.peak / MIB,
        "activations_mb": memory.activations / MIB,
        "params_total": counts["total"],
        "params_design": counts["design"],
        "flops_per_token": flops,
    }
    return exact, step, infer


def measure(names, args, device, autocast_dtype) -> dict[str, list[dict]]:
    """Every design built once, then timed in interleaved rounds (`trainers.timing`): per design,
    one dict per round (its tokens/s in that round, and the exact numbers)."""
    exact, train, infer = {}, {}, {}
    for name in names:
        built = build_design(name, DESIGNS.get(name), args, device, autocast_dtype)
        exact[name], train[name], infer[name] = built
    trained = interleaved(train, args.repeats, args.steps, device)
    inferred = interleaved(infer, args.repeats, args.steps, device)
    tokens = args.batch * args.seq_len
    return {
        name: [
            {
                "train_tokens_per_s": tokens / wall,
                "train_tokens_per_cpu_s": tokens / cpu,
                "forward_tokens_per_s": tokens / fwd,
                **exact[name],
            }
            for wall, cpu, fwd in zip(trained.wall[name], trained.cpu[name], inferred.wall[name], strict=True)
        ]
        for name in names
    }


def summarize(rounds: dict[str, list[dict]], peak_flops: float) -> dict[str, dict]:
    """Medians per design, and per-round ratios to the baseline (median, min-max spread and the
    95% order-statistic interval of the median: `sweeps.report.stats.median_interval`)."""
    base = rounds[BASELINE]
    out = {}
    for name, rs in rounds.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        speed = [r["train_tokens_per_s"] / b["train_tokens_per_s"] for r, b in zip(rs, base, strict=True)]
        flop_rate = [  # achieved model FLOP/s over the baseline's in the same round
            r["train_tokens_per_s"] * r["flops_per_token"] / (b["train_tokens_per_s"] * b["flops_per_token"])
            for r, b in zip(rs, base, strict=True)
        ]
        speed_ci, flop_ci = median_interval(speed), median_interval(flop_rate)
        cpu = [
            r["train_tokens_per_cpu_s"] / b["train_tokens_per_cpu_s"] for r, b in zip(rs, base, strict=True)
        ]
        fwd = [r["forward_tokens_per_s"] / b["forward_tokens_per_s"] for r, b in zip(rs, base, strict=True)]
        mem = [r["peak_mem_mb"] / b["peak_mem_mb"] for r, b in zip(rs, base, strict=True)]
        med.update(
            train_speed_ratio=statistics.median(speed),
            train_speed_spread=[min(speed), max(speed)],
            train_speed_interval=[speed_ci["lo"], speed_ci["hi"]],
            train_flop_rate_ratio=flop_ci["mean"],  # the median
            train_flop_rate_interval=[flop_ci["lo"], flop_ci["hi"]],
            train_cpu_ratio=statistics.median(cpu),
            train_cpu_spread=[min(cpu), max(cpu)],
            forward_speed_ratio=statistics.median(fwd),
            memory_ratio=statistics.median(mem),
            mfu=med["flops_per_token"] * med["train_tokens_per_s"] / peak_flops,
        )
        out[name] = med
    return out


def table(summary: dict[str, dict]) -> str:
    w = max(18, *map(len, summary))
    head = (
        f"{'design':{w}s} {'params':>9s} {'+design':>8s} {'train tok/s':>11s} {'x base':>6s} {'spread':>13s}"
        f" {'cpu x':>6s} {'fwd x':>6s} {'peak MiB':>9s} {'act MiB':>9s} {'x base':>6s}"
        f" {'MFU':>6s}"
    )
    lines = [head, "-" * len(head)]
    for name, s in summary.items():
        sp = s["train_speed_spread"]
        lines.append(
            f"{name:{w}s} {s['params_total']:>9.0f} {s['params_design']:>8.0f}"
            f" {s['train_tokens_per_s']:>11.0f}"
            f" {s['train_speed_ratio']:>6.3f} {sp[0]:>6.3f}-{sp[1]:<6.3f} {s['train_cpu_ratio']:>6.3f}"
            f" {s['forward_speed_ratio']:>6.3f}"
            f" {s['peak_mem_mb']:>9.1f} {s['activations_mb']:>9.1f} {s['memory_ratio']:>6.3f}"
            f" {s['mfu']:>6.2%}"
        )
    return "\n".join(lines)


def verdict(interval: list[float], target: float, at_least: bool = True) -> str:
    """met / MISSED when the 95% interval of the median lies on one side of the target, else
    `undecided`: this run cannot tell (more rounds, or one thread, narrow the interval)."""
    lo, hi = interval
    if (lo >= target) if at_least else (hi <= target):
        return "met"
    if (hi < target) if at_least else (lo > target):
        return "MISSED"
    return "undecided"


def target_lines(summary, meta) -> list[str]:
    """The targets with the median over rounds, its 95% interval and met / MISSED / undecided;
    memory is exact (one number), so it decides alone."""
    lines = []
    for name in summary:
        if reference_features(name) is None:
            continue
        ref = summary[name]
        # the baseline's FLOP rate over the reference's: the reciprocal of the reference's ratio
        per_flop = 1 / ref["train_flop_rate_ratio"]
        lo, hi = (1 / x for x in reversed(ref["train_flop_rate_interval"]))
        what = {REFERENCE: "target", SAME_ARCHITECTURE: "check"}.get(name, "where")
        lines.append(
            f"{what} backbone vs {name} (tokens/s x FLOPs/token): {per_flop:.3f} [{lo:.3f}-{hi:.3f}]"
            f" (>= {BACKBONE_PER_FLOP}) [tokens/s {1 / ref['train_speed_ratio']:.3f}x]:"
            f" {verdict([lo, hi], BACKBONE_PER_FLOP)}"
        )
    if SAME_ARCHITECTURE in summary:
        lines.append(
            f"check: {SAME_ARCHITECTURE} is the backbone's function in plain code: against it, the"
            " implementation; against reference, the architecture too"
        )
    if meta["preset"] == "mini" and meta["precision"] == "fp32":  # fp32: the CPU path (CUDA autocasts)
        mfu = summary[BASELINE]["mfu"]
        ok = mfu >= MFU_AT_MINI_ON_CPU
        lines.append(f"target baseline MFU at mini on CPU: {mfu:.1%} (>= {MFU_AT_MINI_ON_CPU:.0%}): "
                     f"{'met' if ok else 'MISSED'}")  # fmt: skip
    for name, (speed, memory) in TARGETS.items():
        if name in summary:
            s = summary[name]
            lo, hi = s["train_speed_interval"]
            words = {verdict([lo, hi], speed), verdict([s["memory_ratio"]] * 2, memory, at_least=False)}
            word = "MISSED" if "MISSED" in words else "undecided" if "undecided" in words else "met"
            lines.append(
                f"target {name} (wall-time ratios): train speed {s['train_speed_ratio']:.3f}"
                f" [{lo:.3f}-{hi:.3f}] (>= {speed}), step memory {s['memory_ratio']:.3f} (<= {memory}):"
                f" {word}"
            )
    if lines:
        lines.append("[lo-hi]: 95% interval of the median over rounds; undecided: the target lies inside it")
    return lines


def main(argv=None) -> int:
    args = parse_args(argv)
    names = [n.strip() for n in args.designs.split(",") if n.strip()]
    unknown = [n for n in names if n not in DESIGNS and reference_features(n) is None]
    if unknown or BASELINE not in names:
        print(
            f"--designs: unknown {unknown}; allowed: {', '.join(DESIGNS)}, {REFERENCE}[+feature...] with"
            f" features {', '.join(reference.FEATURES)} (baseline required)"
        )
        return 2
    keep_freed_memory()  # as the trials run (trainers.host)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    autocast_dtype = torch.bfloat16 if device.type == "cuda" else None
    peak = matmul_peak_flops(device, autocast_dtype or torch.float32)
    rounds = measure(names, args, device, autocast_dtype)
    peak = max(peak, matmul_peak_flops(device, autocast_dtype or torch.float32))
    summary = summarize(rounds, peak)
    meta = {
        "preset": args.preset,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "steps": args.steps,
        "repeats": args.repeats,
        "device": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else platform.processor() or "cpu",
        "threads": torch.get_num_threads(),
        "compile": args.compile,
        "precision": "bf16-autocast" if autocast_dtype else "fp32",
        "matmul_peak_gflops": peak / 1e9,
        "torch": torch.__version__,
    }
    print(f"{meta}\n{table(summary)}")
    print("\n".join(target_lines(summary, meta)))
    configs = {
        n: DESIGNS.get(n) or {"bench.reference.ReferenceGPT": list(reference_features(n))} for n in names
    }
    result = {"meta": meta, "designs": summary, "rounds": rounds, "configs": configs}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    if args.mlflow_uri:
        log_to_mlflow(result, args.mlflow_uri)
    return 0


def log_to_mlflow(result: dict, uri: str) -> None:
    import mlflow

    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("bench.designs")
    with mlflow.start_run(run_name=f"designs-{result['meta']['preset']}"):
        mlflow.log_params(result["meta"])
        for name, s in result["designs"].items():
            mlflow.log_metrics(
                {f"{k}/{name}": v for k, v in s.items() if isinstance(v, (int, float))},
            )
        mlflow.log_dict(result, "bench_designs.json")


if __name__ == "__main__":
    sys.exit(main())
