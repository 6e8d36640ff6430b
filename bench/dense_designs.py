"""Training-step throughput and peak memory of the dense vs selective residual designs, on CPU.

    python bench/dense_designs.py [--presets tiny mini] [--batch 8] [--seq-len 128] [--rounds 3]

Throughput: every design of a preset is built in this one process (same seed) and measured
interleaved, `--rounds` times in a rotated order, each measurement `--steps` full training steps
(forward + cross-entropy + backward + AdamW step) after warm-up. Time is the process's CPU time
(time.process_time) with `--threads 1` by default, so that other work on a shared machine does
not count; tokens/s is the median over rounds and the ratio the median of the per-round ratios
to the baseline measured in the same round.
Peak memory: a fresh subprocess per design (so allocator state does not leak between designs)
builds the model, reads its peak RSS (VmHWM in /proc/self/status), runs `--steps` training steps and reads it
again (glibc's MALLOC_MMAP_THRESHOLD_ pinned to 64 KiB so freed tensors leave the RSS); `peak` is
the process's peak RSS, `step` the growth the training steps added (activations, gradients, AdamW
state), which is the part the design changes. Ratios are to the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arch import build_model  # noqa: E402

DESIGNS = {
    "baseline": {"kind": "none"},
    "resformer": {"kind": "value_residual", "mode": "static"},
    "satformer": {"kind": "value_residual", "mode": "gated"},
    "denseformer": {"kind": "denseformer"},
    "muddformer": {"kind": "muddformer"},
    "hc_static_n4": {"kind": "hyper_connections", "mode": "static", "expansion_rate": 4},
    "hc_dynamic_n4": {"kind": "hyper_connections", "mode": "dynamic", "expansion_rate": 4},
}


def setup(preset: str, design: str, batch: int, seq_len: int):
    torch.manual_seed(0)
    model = build_model({"preset": preset, "residual": DESIGNS[design]})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    g = torch.Generator().manual_seed(0)
    data = torch.randint(0, model.cfg.vocab_size, (batch, seq_len + 1), generator=g)
    return model, opt, data


def train_steps(model, opt, data, steps: int) -> None:
    x, y = data[:, :-1], data[:, 1:]
    for _ in range(steps):
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def peak_rss_kib() -> int:
    """This address space's high-water RSS (VmHWM). Not ru_maxrss: Linux carries that over a
    fork + exec, so a child would report at least its parent's RSS."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def memory_child(preset: str, design: str, batch: int, seq_len: int, steps: int) -> None:
    model, opt, data = setup(preset, design, batch, seq_len)
    before = peak_rss_kib()
    train_steps(model, opt, data, steps)
    after = peak_rss_kib()
    print(json.dumps({"peak_mib": after / 1024, "step_mib": (after - before) / 1024}))


def measure_memory(preset: str, design: str, args) -> dict:
    cmd = [sys.executable, __file__, "--memory-child", preset, design, "--batch", str(args.batch)]
    cmd += ["--seq-len", str(args.seq_len), "--steps", str(args.steps), "--threads", str(args.threads)]
    # Large tensors are mmapped and go back to the OS when freed, so RSS follows live tensors.
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure_throughput(preset: str, args) -> tuple[dict[str, float], dict[str, float]]:
    runs = {name: setup(preset, name, args.batch, args.seq_len) for name in DESIGNS}
    for model, opt, data in runs.values():
        train_steps(model, opt, data, 2)  # warm-up
    names, rates = list(DESIGNS), {name: [] for name in DESIGNS}
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # rotated order per round
            model, opt, data = runs[name]
            start = time.process_time()
            train_steps(model, opt, data, args.steps)
            rates[name].append(args.batch * args.seq_len * args.steps / (time.process_time() - start))
    ratios = {
        n: statistics.median(a / b for a, b in zip(v, rates["baseline"], strict=True))
        for n, v in rates.items()
    }
    return {name: statistics.median(v) for name, v in rates.items()}, ratios


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", nargs="+", default=["tiny", "mini"])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--memory-child", nargs=2, metavar=("PRESET", "DESIGN"), help=argparse.SUPPRESS)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.memory_child:
        memory_child(*args.memory_child, args.batch, args.seq_len, args.steps)
        return
    print(
        f"batch {args.batch}, seq_len {args.seq_len}, {args.rounds} rounds x {args.steps} steps, "
        f"{args.threads} threads, torch {torch.__version__}"
    )
    for preset in args.presets:
        mem = {name: measure_memory(preset, name, args) for name in DESIGNS}
        tps, tps_ratio = measure_throughput(preset, args)
        params = {
            name: build_model({"preset": preset, "residual": DESIGNS[name]}).param_counts()
            for name in DESIGNS
        }
        base_m = mem["baseline"]
        print(f"\n### preset {preset}\n")
        ratio = "x base"
        print(
            f"| design | design params | tokens/CPU-s | {ratio} "
            f"| peak RSS MiB | {ratio} | step MiB | {ratio} |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name in DESIGNS:
            t, m, r = tps[name], mem[name], tps_ratio[name]
            print(
                f"| {name} | {params[name]['design']} | {t:,.0f} | {r:.2f} | {m['peak_mib']:.0f} | "
                f"{m['peak_mib'] / base_m['peak_mib']:.2f} | {m['step_mib']:.0f} | "
                f"{m['step_mib'] / max(base_m['step_mib'], 1e-9):.2f} |"
            )


if __name__ == "__main__":
    main()
