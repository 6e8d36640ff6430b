"""`python -m bench.recall_curve TRIAL.yaml [--set key.path=value ...] [--json OUT] [--init]`: the
emergence curve of in-context recall: one training run of the trial with the recall probe after
every validation (`recall.at: every_eval`), printed and written as one JSON line per validation
(tokens, val_loss, the probe's metrics, wall_s: seconds since the start). `--init`: the probe
on the trial's untrained model only (its seed's initial weights; 0 tokens).
`--symbols-from ID` (a diagnostic, not a trial option): the records of `data.records` and the
probe's lookups use token ids ID..ID+31, which the text must never use, instead of the text's 32
most frequent tokens (keys then occur nowhere else in a window). docs/verdicts/recall.md has the
curves it gave.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.loggers import Logger

from arch import build_model
from arch.configtree import ConfigError
from trainers import recall
from trainers.data import text
from trainers.data.build import build_datamodule
from trainers.data.cache import cache_root
from trainers.fit import fit
from trainers.train import load_config

SHOWN = ("val_loss", "copy_loss", "copy_gain", "copy_acc", "recall_loss", "recall_acc")


class CurveLogger(Logger):
    """Keeps every logged value by step: the probe's (after each validation) and val_loss."""

    def __init__(self):
        super().__init__()
        self.steps: dict[int, dict[str, float]] = {}
        self.start = time.perf_counter()

    @property
    def name(self) -> str:
        return "curve"

    @property
    def version(self) -> str:
        return "0"

    def log_hyperparams(self, params, *args, **kwargs) -> None:
        pass

    def log_metrics(self, metrics, step=None) -> None:
        values = self.steps.setdefault(int(step or 0), {})
        values.update({k: float(v) for k, v in metrics.items()})
        if "recall_acc" in metrics:  # as it comes: a long run shows its curve while it trains
            values["wall_s"] = round(time.perf_counter() - self.start, 1)  # what a point costs here
            print(
                f"step {step}: " + " ".join(f"{k} {values.get(k, float('nan')):.4f}" for k in SHOWN),
                flush=True,
            )


class ValLoss(pl.Callback):
    """val_loss by step, as the module computed it (Lightning hands it to loggers under its own step)."""

    def __init__(self, curve: CurveLogger):
        self.curve = curve

    def on_validation_end(self, trainer, pl_module) -> None:
        if "val_loss" in trainer.callback_metrics:
            value = float(trainer.callback_metrics["val_loss"])
            self.curve.steps.setdefault(trainer.global_step, {})["val_loss"] = value


def at_init(cfg) -> dict[str, float]:
    """The probe on the trial's initial weights, as `fit` would build them (same seed)."""
    if cfg.train.num_threads is not None:
        torch.set_num_threads(cfg.train.num_threads)
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    model = build_model(cfg.model).eval()
    data = build_datamodule(cfg)
    data.setup()
    start = time.process_time()
    values = recall.measure(
        model, data.val_arrays, cfg.data.seq_len, cfg.recall.windows, cfg.model.vocab_size
    )
    return {"step": 0, "tokens": 0, **values, "probe_cpu_s": time.process_time() - start}


def symbols_issue(cfg, first: int) -> str | None:
    """Why ids first..first+31 cannot be the records' symbols for `cfg` (None: they can)."""
    last = first + recall.ALPHABET - 1
    if cfg.data.kind != "text":
        return f"--symbols-from needs text data (data.kind text), given {cfg.data.kind!r}"
    if first < 0 or last >= cfg.model.vocab_size:
        return f"--symbols-from {first}: ids {first}..{last} must lie in 0..{cfg.model.vocab_size - 1}"
    train, val, _ = text.tokenized_corpus(cfg.data, cache_root(None))
    symbols = np.arange(first, last + 1)
    used = sorted({int(t) for a in (train, val) for t in symbols[np.isin(symbols, np.asarray(a))]})
    if used:
        return f"--symbols-from {first}: the text uses ids {used}; allowed: ids the text never uses"
    return None


def use_symbols(first: int) -> None:
    """Points the mix's and the probe's record alphabet at ids first..first+31, in this process."""

    def fixed(arrays, size: int = recall.ALPHABET) -> np.ndarray:
        return np.arange(first, first + size)

    recall.alphabet = text.alphabet = fixed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.recall_curve", description=__doc__.split("\n\n")[0])
    p.add_argument("trial")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    p.add_argument("--json", type=Path, help="write one JSON line per validation here")
    p.add_argument("--init", action="store_true", help="the probe on the untrained model only")
    p.add_argument("--symbols-from", type=int, metavar="ID", help="diagnostic: records on ids ID..ID+31")
    args = p.parse_args(argv)
    try:
        cfg = load_config(args.trial, [*args.overrides, "recall.at=every_eval"])
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    if args.symbols_from is not None:
        if issue := symbols_issue(cfg, args.symbols_from):
            print(f"{args.trial}: {issue}", file=sys.stderr)
            return 2
        use_symbols(args.symbols_from)
    logger, start = CurveLogger(), time.perf_counter()
    if args.init:
        rows = [at_init(cfg)]
    else:
        fit(cfg, loggers=[logger], callbacks=[ValLoss(logger)])
        rows = [
            {"step": step, "tokens": step * cfg.tokens_per_step, **values}
            for step, values in sorted(logger.steps.items())
            if "recall_acc" in values
        ]
    print(f"{'tokens':>9} " + " ".join(f"{k:>11}" for k in SHOWN))
    for row in rows:
        print(f"{row['tokens']:>9} " + " ".join(f"{row.get(k, float('nan')):>11.4f}" for k in SHOWN))
    print(f"{time.perf_counter() - start:.0f} s wall")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        shown = {"trial": args.trial, "set": args.overrides}
        if args.symbols_from is not None:
            shown["symbols_from"] = args.symbols_from
        args.json.write_text("".join(json.dumps({**shown, **r}) + "\n"
                                     for r in rows))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
