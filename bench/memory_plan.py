"""`python -m bench.memory_plan [--model JSON] [--rows R --seq-len T]`: how well the memory plan
(trainers.memory_probe + trainers.memory_fit) predicts a larger batch. For each (design, precision,
loss path, activation checkpointing) it measures the plan's small samples on this CPU, predicts the
peak at R x T, measures R x T with the same exact meter, and prints both, the held-out check
(another number of rows) and whether every allocation event lined up across the samples."""

from __future__ import annotations

import argparse
import json
import time

import torch

from trainers.config import TrialConfig
from trainers.memory_fit import fit
from trainers.memory_probe import measure, measure_at

MODEL = {"preset": "tiny", "max_seq_len": 512, "vocab_size": 512, "d_model": 64, "d_ff": 256}
CASES = [
    ("none", "32-true", "plain", False),
    ("none", "bf16-true", "chunked", False),
    ("value_residual", "bf16-true", "chunked", False),
    ("value_residual", "bf16-true", "chunked", True),
    ("denseformer", "bf16-true", "chunked", False),
    ("muddformer", "bf16-true", "chunked", False),
    ("hyper_connections", "bf16-mixed", "chunked", False),
    ("hyper_connections", "32-true", "plain", False),
]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.memory_plan", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=json.loads, default=MODEL)
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=256)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    data = {"kind": "mqar", "vocab": 64, "seq_len": 32}
    print(f"model {args.model}; predicted vs measured peak at {args.rows} x {args.seq_len}")
    for kind, precision, loss, blocks in CASES:
        cfg = TrialConfig.from_dict({"model": {**args.model, "residual": {"kind": kind}}, "data": data})
        start = time.process_time()
        plan = fit(measure(cfg, precision, loss, blocks, up_to=args.rows * args.seq_len), loss)
        cpu_s = time.process_time() - start
        predicted = plan.predict(args.rows, args.seq_len)
        measured = measure_at(cfg, precision, loss, blocks, args.rows, args.seq_len)
        check = plan.check
        print(
            f"{kind:18s} {precision:10s} {loss:8s} {'blocks' if blocks else 'none':6s} "
            f"predicted {predicted.peak / 2**20:9.3f} MiB  measured {measured.peak / 2**20:9.3f} MiB  "
            f"ratio {predicted.peak / measured.peak:.4f}  held-out {check['rows']}x{check['seq_len']} "
            f"{check['predicted'] / check['measured']:.4f}  aligned {plan.aligned}  plan cpu {cpu_s:.1f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
