"""`python -m bench.memory_plan [--model JSON] [--scales 16 64] [--designs ...] [--markdown]`: how well
the memory plan (trainers.memory_probe + trainers.memory_fit) predicts larger batches.

For every paper design (`arch.paper_designs`), fp32 (32-true, loss plain) and bf16 (bf16-true, the
paper's precision, loss chunked), without and with activation checkpointing (`blocks`), it measures
the plan's small samples on this CPU once, predicts the peak at each scale (tokens = scale x the
largest fit sample's tokens), measures a step of that size with the same exact meter, and prints
predicted, measured and their ratio, the held-out check (another number of rows) and whether every
allocation event lined up across the samples. Table and commands: docs/memory_plan.md."""

from __future__ import annotations

import argparse
import json
import time

import torch

from arch.paper_designs import PAPER_DESIGNS
from trainers.config import TrialConfig
from trainers.memory_fit import fit
from trainers.memory_probe import FIT_SIZES, measure, measure_at, seq0_for

MODEL = {"preset": "tiny", "max_seq_len": 512, "vocab_size": 512, "d_model": 64, "d_ff": 256}
# (precision, loss): the fp32 trial of a CPU study and the paper's bf16-true with the chunked loss
PRECISIONS = (("32-true", "plain"), ("bf16-true", "chunked"))
SCALES = (16, 64)
MIB = 1 << 20


def shape_at(scale: int, sample_tokens: int, seq_len: int) -> tuple[int, int]:
    """(rows, seq_len) of `scale` x `sample_tokens` tokens at the model's longest sequence."""
    tokens = scale * sample_tokens
    return max(1, tokens // seq_len), min(seq_len, tokens)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.memory_plan", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=json.loads, default=MODEL)
    p.add_argument("--scales", type=int, nargs="+", default=list(SCALES))
    p.add_argument("--designs", nargs="+", default=list(PAPER_DESIGNS), choices=list(PAPER_DESIGNS))
    p.add_argument("--markdown", action="store_true", help="rows of a markdown table")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    data = {"kind": "mqar", "vocab": 64, "seq_len": 32}
    first = TrialConfig.from_dict({"model": args.model, "data": data})
    seq0 = seq0_for(first)
    sample_tokens = max(rows * k * seq0 for rows, k in FIT_SIZES)
    shapes = {s: shape_at(s, sample_tokens, first.model.max_seq_len) for s in args.scales}
    print(f"model {args.model}; largest fit sample {sample_tokens} tokens; scales {shapes}")
    if args.markdown:
        print("| design | precision | loss | ckpt | scale | rows x T | predicted MiB | measured MiB "
              "| predicted/measured | held-out | aligned | plan CPU s |")  # fmt: skip
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for name in args.designs:
        model = {**args.model, "residual": PAPER_DESIGNS[name]}
        cfg = TrialConfig.from_dict({"model": model, "data": data})
        for precision, loss in PRECISIONS:
            for blocks in (False, True):
                up_to = max(r * t for r, t in shapes.values())
                start = time.process_time()
                plan = fit(measure(cfg, precision, loss, blocks, up_to=up_to), loss)
                cpu_s = time.process_time() - start
                check = plan.check
                held = f"{check['rows']}x{check['seq_len']} {check['predicted'] / check['measured']:.4f}"
                for scale, (rows, seq_len) in shapes.items():
                    predicted = plan.predict(rows, seq_len).peak
                    measured = measure_at(cfg, precision, loss, blocks, rows, seq_len).peak
                    r = predicted / measured
                    worst = max(worst, abs(r - 1))
                    ckpt = "blocks" if blocks else "none"
                    if args.markdown:
                        print(f"| {name} | {precision} | {loss} | {ckpt} | {scale}x | {rows}x{seq_len} | "
                              f"{predicted / MIB:.2f} | {measured / MIB:.2f} | {r:.4f} | {held} | "
                              f"{plan.aligned} | {cpu_s:.1f} |", flush=True)  # fmt: skip
                    else:
                        print(f"{name:18s} {precision:10s} {loss:8s} {ckpt:6s} {scale:3d}x "
                              f"{rows}x{seq_len:<5d} predicted {predicted / MIB:9.3f} MiB  measured "
                              f"{measured / MIB:9.3f} MiB  ratio {r:.4f}  held-out {held}  aligned "
                              f"{plan.aligned}  plan cpu {cpu_s:.1f} s", flush=True)  # fmt: skip
    print(f"largest |predicted/measured - 1|: {worst:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
