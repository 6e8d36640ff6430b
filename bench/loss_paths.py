"""`python -m bench.loss_paths [--vocab V] [--batch B] [--seq-len T] [--rounds R]`: one training
step of the same model and batch along each `train.loss` path (and with `activation_checkpointing:
blocks`), side by side in one process: the loss, the exact peak of live tensor memory
(trainers.step_memory.StepMemoryMeter) and the step time as a paired ratio to the plain path (interleaved
rounds, trainers.timing; thread CPU seconds on CPU, wall seconds on CUDA). On CUDA the fused path
(liger-kernel) joins when it is installed; `bench.gpu_check` calls `compare` there.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from arch import build_model
from trainers.config import TrainConfig
from trainers.loss import fused_available, lm_loss
from trainers.optim import build_optimizer
from trainers.step_memory import MIB, StepMemoryMeter
from trainers.timing import interleaved, paired_ratios

MODEL = {"preset": "tiny", "d_model": 128, "n_layers": 4, "n_heads": 4, "d_ff": 512}


def variants(device) -> dict[str, tuple[str, bool]]:
    """label -> (loss path, recompute blocks)."""
    out = {"plain": ("plain", False), "chunked": ("chunked", False), "chunked+blocks": ("chunked", True)}
    if torch.device(device).type == "cuda" and fused_available():
        out["fused"] = ("fused", False)
    return out


def _step(device, vocab: int, batch: int, seq_len: int, kind: str, blocks: bool, dtype=None, chunk=None):
    torch.manual_seed(0)
    model = build_model({**MODEL, "vocab_size": vocab, "max_seq_len": seq_len}).to(device, dtype=dtype)
    opt = build_optimizer(model, TrainConfig())
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, vocab, (batch, seq_len + 1), generator=g).to(device)
    losses = []

    def step(meter=None):
        h = model.hidden(x[:, :-1], checkpoint_blocks=blocks)
        loss = lm_loss(kind, h, model.head.weight, x[:, 1:], chunk=chunk)
        if meter is not None:
            meter.backward_starts()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())

    return model, opt, x, step, losses


def compare(device, vocab=32000, batch=8, seq_len=256, rounds=5, dtype=None, chunk=None) -> dict[str, dict]:
    """label -> {loss (first step), peak_MiB, activations_MiB, time_ratio_to_plain}; `chunk`:
    positions per chunk (default: trainers.loss's, 64 MiB of fp32 logits)."""
    results, steps = {}, {}
    for label, (kind, blocks) in variants(device).items():
        model, opt, x, step, losses = _step(device, vocab, batch, seq_len, kind, blocks, dtype, chunk)
        step()  # the warm-up step creates the optimizer state
        meter = StepMemoryMeter(device)
        meter.start(model, opt, x)
        step(meter)
        mem = meter.stop()
        results[label] = {
            "loss": losses[0],
            "peak_MiB": round(mem.peak / MIB, 1),
            "activations_MiB": round(mem.activations / MIB, 1),
        }
        steps[label] = step
    timings = interleaved(steps, rounds, 1, device)
    clock = timings.wall if torch.device(device).type == "cuda" else timings.thread
    for label in steps:
        ratios = paired_ratios(clock[label], clock["plain"])  # label's seconds / plain's
        results[label]["time_ratio_to_plain"] = round(statistics.median(ratios), 3)
        results[label]["step_s_median"] = round(statistics.median(clock[label]), 3)
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.loss_paths", description=__doc__.split("\n\n")[0])
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    results = compare(device, args.vocab, args.batch, args.seq_len, args.rounds)
    n = args.batch * args.seq_len
    print(f"device {device}, model {MODEL}, vocab {args.vocab}, micro-batch {args.batch} x {args.seq_len}")
    print(f"one [N, V] fp32 logits tensor: {n * args.vocab * 4 / MIB:.1f} MiB")
    for label, values in results.items():
        print(f"{label:<16} {json.dumps(values)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
