"""Training-step throughput and peak memory of the dense vs selective residual designs, on CPU.

    python bench/dense_designs.py [--presets tiny mini] [--batch 8] [--seq-len 128] [--rounds 3]

Throughput: every design of a preset is built in this one process (same seed) and measured
interleaved, `--rounds` times in a rotated order, each measurement `--steps` full training steps
(forward + cross-entropy + backward + AdamW step) after warm-up; tokens/s is the median over rounds.
Peak memory: a fresh subprocess per design (so allocator state does not leak between designs)
builds the model, reads `ru_maxrss` (resource.getrusage), runs `--steps` training steps and reads it
again; `peak` is the process's peak RSS, `step` the growth the training steps added (activations,
gradients, AdamW state), which is the part the design changes. Ratios are to the baseline.
"""

from __future__ import annotations

import argparse
import json
import resource
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


def memory_child(preset: str, design: str, batch: int, seq_len: int, steps: int) -> None:
    model, opt, data = setup(preset, design, batch, seq_len)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    train_steps(model, opt, data, steps)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_mib": after / 1024, "step_mib": (after - before) / 1024}))


def measure_memory(preset: str, design: str, args) -> dict:
    cmd = [sys.executable, __file__, "--memory-child", preset, design, "--batch", str(args.batch)]
    cmd += ["--seq-len", str(args.seq_len), "--steps", str(args.steps), "--threads", str(args.threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure_throughput(preset: str, args) -> dict[str, float]:
    runs = {name: setup(preset, name, args.batch, args.seq_len) for name in DESIGNS}
    for model, opt, data in runs.values():
        train_steps(model, opt, data, 2)  # warm-up
    names, rates = list(DESIGNS), {name: [] for name in DESIGNS}
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # rotated order per round
            model, opt, data = runs[name]
            start = time.perf_counter()
            train_steps(model, opt, data, args.steps)
            rates[name].append(args.batch * args.seq_len * args.steps / (time.perf_counter() - start))
    return {name: statistics.median(v) for name, v in rates.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", nargs="+", default=["tiny", "mini"])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
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
        tps = measure_throughput(preset, args)
        params = {
            name: build_model({"preset": preset, "residual": DESIGNS[name]}).param_counts()
            for name in DESIGNS
        }
        base_t, base_m = tps["baseline"], mem["baseline"]
        print(f"\n### preset {preset}\n")
        ratio = "x baseline"
        print(
            f"| design | design params | tokens/s | {ratio} | peak RSS MiB | {ratio} | step MiB | {ratio} |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name in DESIGNS:
            t, m = tps[name], mem[name]
            print(
                f"| {name} | {params[name]['design']} | {t:,.0f} | {t / base_t:.2f} | {m['peak_mib']:.0f} | "
                f"{m['peak_mib'] / base_m['peak_mib']:.2f} | {m['step_mib']:.0f} | "
                f"{m['step_mib'] / base_m['step_mib']:.2f} |"
            )


if __name__ == "__main__":
    main()
