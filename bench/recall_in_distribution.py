"""`python -m bench.recall_in_distribution TRIAL.yaml [--set key.path=value ...] [--span L]`: does
a trained model copy the kind of span it was trained to copy? Trains the trial (its final
weights), then plants a span of L uniformly random tokens twice in each of 256 validation windows
and prints the mean NLL of tokens 2..L at the first and at the second occurrence, and top-1 on
the second: an induction head shows as second << first. A check on `data.repeats` training that
the recall probe (trainers.recall) reads flat: is it the probe's items, or no copying at all?
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from arch import build_model
from trainers.data.build import build_datamodule
from trainers.data.windows import WindowSampler
from trainers.fit import fit
from trainers.train import load_config


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.recall_in_distribution", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("trial")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    p.add_argument("--span", type=int, default=12)
    args = p.parse_args(argv)
    cfg = load_config(args.trial, [*args.overrides, "recall.windows=0"])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "final.ckpt"
        fit(cfg, checkpoint_path=path)
        state = torch.load(path, map_location="cpu", weights_only=False)["state_dict"]
    model = build_model(cfg.model)
    model.load_state_dict({k.removeprefix("model."): v for k, v in state.items()})
    model.eval()
    data = build_datamodule(cfg)
    data.setup()
    rng, t, span = np.random.default_rng(1), cfg.data.seq_len, args.span
    rows = WindowSampler(data.val_arrays, t).draw(rng, 256).numpy()
    starts = []
    for row in rows:
        a = int(rng.integers(0, t + 1 - 3 * span))
        b = int(rng.integers(a + span, t + 2 - span))
        row[a : a + span] = row[b : b + span] = rng.integers(0, cfg.model.vocab_size, span)
        starts.append((a, b))
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.from_numpy(rows[:, :-1])).float(), dim=-1)
    targets = torch.from_numpy(rows[:, 1:])
    nll = -logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    hit = (logp.argmax(-1) == targets).float()
    first = torch.stack([nll[i, a : a + span - 1] for i, (a, _) in enumerate(starts)]).mean().item()
    second = torch.stack([nll[i, b : b + span - 1] for i, (_, b) in enumerate(starts)]).mean().item()
    top1 = torch.stack([hit[i, b : b + span - 1] for i, (_, b) in enumerate(starts)]).mean().item()
    print(f"{cfg.train.tokens} tokens: random span of {span}: NLL first {first:.3f}, second {second:.3f}; "
          f"top-1 on the second {top1:.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
