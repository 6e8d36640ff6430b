"""The in-context recall probe: how well a model retrieves what its own window already holds.

Run on every text trial at the end of training (`recall:` of the trial config; `RecallProbe`).
Two sets of sequences of `seq_len + 1` tokens are built from the validation tokens with a fixed
seed, so every trial, seed and design is scored on the same items (paired comparisons):

- copy (induction, Olsson et al. 2022, arXiv 2209.11895): a window of real validation text whose
  last L = clamp(seq_len / 8, 4, 32) tokens are replaced by a copy of L tokens from earlier in the
  same window (no overlap). Scored: tokens 2..L of each occurrence (the first token of the copy
  cannot be known to start one). `copy_loss` / `copy_acc`: NLL and top-1 accuracy on the second
  occurrence; `copy_gain` = NLL on the first occurrence minus `copy_loss`: 0 when nothing is
  copied (measured: -0.02 without induction heads), up to the first occurrence's NLL when the copy
  is perfect.
- lookup (needle): a window of real validation text with records `key value` planted in it (key
  and value KEY_TOKENS and VALUE_TOKENS tokens drawn uniformly from the ALPHABET most frequent
  validation tokens; the keys of a window distinct: trainers.data.records, the format that
  `data.records` trains on), one of them queried at the end: its key
  again, then its value, which nothing but the record predicts. The queried record lies at one of
  four distances before the query (cycled over the windows), up to DISTRACTORS other records
  elsewhere. `recall_loss` / `recall_acc`: NLL and top-1 accuracy on the value tokens of the query;
  `recall_acc/d{D}` per distance D (informational). Chance: a model without recall that knows
  the alphabet gets accuracy 1/ALPHABET and NLL ln(ALPHABET); a uniform model 1/vocab and ln(vocab).
- reserved lookups, for a trial trained on records in reserved symbols (`data.records.symbols:
  reserved`, ids the text never uses): the same windows and layout with the records' own
  symbols. `reserved_recall_loss` / `reserved_recall_acc`; with `at: every_eval`, from their
  accuracy after each validation (`emergence`): `reserved_recall_auc` (the curve's mean),
  `reserved_recall_tokens` (the tokens at which it first reached EMERGED; the budget when it never
  did, with `reserved_recall_emerged` 0).

Top-1 accuracy splits ties evenly (a token among k equal maxima counts 1/k), so a uniform model
scores exactly chance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import lightning.pytorch as pl
import numpy as np
import torch

from trainers.data.records import ALPHABET as ALPHABET  # the chance level 1/ALPHABET, named here too
from trainers.data.records import KEY_TOKENS, VALUE_TOKENS, alphabet, draw_records
from trainers.data.windows import WindowSampler
from trainers.loss import IGNORE

DISTRACTORS = 2
DISTANCE_FRACTIONS = (0.25, 0.5, 0.75, 1.0)  # of the room before the query
COPY_SEED, LOOKUP_SEED = 0x5EC0, 0x5EC1  # fixed: the items do not depend on the trial
EMERGED = 0.5  # reserved lookups' accuracy that counts as recall having emerged (chance: 1/ALPHABET)


def copy_span(seq_len: int) -> int:
    return min(32, max(4, seq_len // 8))


def distances(seq_len: int) -> tuple[int, ...]:
    """Tokens from a queried record's start to its query's start, one per window in turn."""
    record = KEY_TOKENS + VALUE_TOKENS
    room = seq_len + 1 - record  # the query's start: its value ends the window
    return tuple(sorted({max(record, round(f * room)) for f in DISTANCE_FRACTIONS}))


@dataclass(frozen=True)
class Items:
    """Probe sequences: inputs [N, T] and, per scored group, targets [N, T] (IGNORE off the
    group's tokens); `distance` [N]: the lookup's distance per window (None for copy)."""

    inputs: torch.Tensor
    targets: dict[str, torch.Tensor]
    distance: np.ndarray | None = None


def copy_items(arrays: Sequence[np.ndarray], seq_len: int, windows: int) -> Items:
    rng = np.random.default_rng(COPY_SEED)
    rows = WindowSampler(arrays, seq_len).draw(rng, windows).numpy()  # [N, T + 1]
    span = copy_span(seq_len)
    second = seq_len + 1 - span  # the copy ends the window
    first_at = rng.integers(0, second - span + 1, size=windows)
    first = np.full((windows, seq_len), IGNORE, dtype=np.int64)
    again = np.full((windows, seq_len), IGNORE, dtype=np.int64)
    for i, a in enumerate(first_at):
        rows[i, second:] = rows[i, a : a + span]
        first[i, a : a + span - 1] = rows[i, a + 1 : a + span]  # position j predicts token j + 1
        again[i, second:seq_len] = rows[i, second + 1 :]
    return Items(torch.from_numpy(rows[:, :-1].copy()), {"first": torch.from_numpy(first),
                                                          "second": torch.from_numpy(again)})  # fmt: skip


def _free_slot(rng: np.random.Generator, taken: list[tuple[int, int]], end: int, width: int) -> int | None:
    for _ in range(32):
        p = int(rng.integers(0, end - width + 1))
        if all(p + width <= s or p >= e for s, e in taken):
            return p
    return None


def lookup_items(
    arrays: Sequence[np.ndarray], seq_len: int, windows: int, symbols: np.ndarray | None = None
) -> Items:
    """The lookups in `symbols` (None: the text's ALPHABET most frequent tokens)."""
    rng = np.random.default_rng(LOOKUP_SEED)
    rows = WindowSampler(arrays, seq_len).draw(rng, windows).numpy()  # [N, T + 1]
    symbols = alphabet(arrays) if symbols is None else symbols
    record = KEY_TOKENS + VALUE_TOKENS
    query = seq_len + 1 - record
    choices = distances(seq_len)
    targets = np.full((windows, seq_len), IGNORE, dtype=np.int64)
    distance = np.array([choices[i % len(choices)] for i in range(windows)])
    for i, d in enumerate(distance):
        starts = [query - d]
        taken = [(query - d, query - d + record), (query, query + record)]
        for _ in range(DISTRACTORS):
            if (p := _free_slot(rng, taken, query, record)) is not None:
                starts.append(p)
                taken.append((p, p + record))
        keys, values = draw_records(rng, symbols, len(starts))
        for start, key, value in zip(starts, keys, values, strict=True):
            rows[i, start : start + record] = np.concatenate([key, value])
        rows[i, query:] = np.concatenate([keys[0], values[0]])  # the first record is the queried one
        targets[i, query + KEY_TOKENS - 1 : seq_len] = values[0]
    return Items(torch.from_numpy(rows[:, :-1].copy()), {"value": torch.from_numpy(targets)}, distance)


LogitsFn = Callable[[torch.Tensor], torch.Tensor]  # tokens [B, T] -> logits [B, T, V]


@torch.no_grad()
def score(
    logits_fn: LogitsFn, items: Items, vocab_size: int, device=None
) -> dict[str, dict[str, torch.Tensor]]:
    """Per group: `nll` and `acc` (ties split evenly) of every scored token, and its window `row`."""
    n, t = items.inputs.shape
    out = {g: {"nll": [], "acc": [], "row": []} for g in items.targets}
    batch = max(1, 2**26 // (t * vocab_size))  # at most 2^26 logits (256 MiB in fp32) at a time
    for s in range(0, n, batch):
        logits = logits_fn(items.inputs[s : s + batch].to(device)).float()
        logp = torch.log_softmax(logits, dim=-1)
        top = logits.max(dim=-1).values
        ties = (logits == top.unsqueeze(-1)).sum(dim=-1)
        for group, targets in items.targets.items():
            rows, cols = (targets[s : s + batch].to(logits.device) != IGNORE).nonzero(as_tuple=True)
            tok = targets[s : s + batch].to(logits.device)[rows, cols]
            out[group]["nll"].append(-logp[rows, cols, tok])
            hit = logits[rows, cols, tok] == top[rows, cols]
            out[group]["acc"].append(hit.float() / ties[rows, cols])
            out[group]["row"].append(rows + s)
    return {g: {k: torch.cat(v).cpu() for k, v in parts.items()} for g, parts in out.items()}


def measure(logits_fn: LogitsFn, arrays: Sequence[np.ndarray], seq_len: int, windows: int, vocab_size: int,
            device=None, items: tuple[Items, Items] | None = None,
            reserved: Items | None = None) -> dict[str, float]:  # fmt: skip
    """The probe's metrics (module docstring) for `logits_fn` on windows of `arrays`; with
    `reserved` (lookups in the records' reserved symbols) the `reserved_recall_*` too."""
    copy, lookup = items or (copy_items(arrays, seq_len, windows), lookup_items(arrays, seq_len, windows))
    c, v = score(logits_fn, copy, vocab_size, device), score(logits_fn, lookup, vocab_size, device)["value"]
    out = {
        "copy_loss": c["second"]["nll"].mean().item(),
        "copy_acc": c["second"]["acc"].mean().item(),
        "copy_gain": (c["first"]["nll"].mean() - c["second"]["nll"].mean()).item(),
        "recall_loss": v["nll"].mean().item(),
        "recall_acc": v["acc"].mean().item(),
    }
    at = torch.from_numpy(lookup.distance)[v["row"]]
    for d in distances(seq_len):
        out[f"recall_acc/d{d}"] = v["acc"][at == d].mean().item()
    if reserved is not None:
        r = score(logits_fn, reserved, vocab_size, device)["value"]
        out["reserved_recall_loss"] = r["nll"].mean().item()
        out["reserved_recall_acc"] = r["acc"].mean().item()
    return out


def emergence(curve: Sequence[tuple[int, float]]) -> dict[str, float]:
    """From the reserved lookups' accuracy after each validation, (tokens, acc) in training order:
    `reserved_recall_auc`, its mean over the curve (the area under it per token of the budget when
    validations are evenly spaced: 1/ALPHABET for a model that never recalls, near 1 for one that
    recalls from the start), and `reserved_recall_tokens`, the tokens trained when it first reached
    EMERGED (the last point's tokens, the budget, when it never did: censored, and
    `reserved_recall_emerged` says which)."""
    if not curve:
        return {}
    crossed = [tokens for tokens, acc in curve if acc >= EMERGED]
    return {
        "reserved_recall_auc": float(np.mean([acc for _, acc in curve])),
        "reserved_recall_tokens": float(crossed[0] if crossed else curve[-1][0]),
        "reserved_recall_emerged": float(bool(crossed)),
    }


class RecallProbe(pl.Callback):
    """Measures the probe after the final validation (`at: every_eval`: after every validation,
    logged to the trainer's loggers at that step: the emergence curve). The data module's
    `val_arrays` are the validation tokens; data without them (MQAR) is not probed. Where the data
    module has `reserved_symbols` (records in reserved symbols) the lookups in them are scored too,
    and their accuracy after each validation is kept (in checkpoints as well, so a resumed run
    keeps its curve) for `emergence`."""

    def __init__(self, windows: int, seq_len: int, at: str = "end", tokens_per_step: int = 0):
        self.windows, self.seq_len, self.at, self.tokens_per_step = windows, seq_len, at, tokens_per_step
        self.items: tuple[Items, Items] | None = None
        self.reserved: Items | None = None
        self.values: dict[str, float] = {}
        self.curve: list[tuple[int, float]] = []  # (tokens, reserved_recall_acc) after each probe

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        final = trainer.global_step >= trainer.max_steps
        arrays = getattr(trainer.datamodule, "val_arrays", None)
        if arrays is None or not (final or self.at == "every_eval"):
            return
        if self.items is None:
            self.items = (
                copy_items(arrays, self.seq_len, self.windows),
                lookup_items(arrays, self.seq_len, self.windows),
            )
            symbols = getattr(trainer.datamodule, "reserved_symbols", None)
            if symbols is not None:
                self.reserved = lookup_items(arrays, self.seq_len, self.windows, symbols)
        model = pl_module.model
        was_training = model.training
        model.eval()
        try:
            self.values = measure(model, arrays, self.seq_len, self.windows, model.cfg.vocab_size,
                                  pl_module.device, self.items, self.reserved)  # fmt: skip
        finally:
            model.train(was_training)
        tokens = trainer.global_step * self.tokens_per_step
        if "reserved_recall_acc" in self.values and (not self.curve or self.curve[-1][0] < tokens):
            self.curve.append((tokens, self.values["reserved_recall_acc"]))
        if not final:  # the final values go out with fit's result
            for logger in trainer.loggers:
                logger.log_metrics({k: v for k, v in self.values.items() if math.isfinite(v)},
                                   step=trainer.global_step)  # fmt: skip

    def state_dict(self) -> dict:
        return {"curve": list(self.curve)}

    def load_state_dict(self, state: dict) -> None:
        self.curve = [tuple(point) for point in state.get("curve", [])]

    def metrics(self) -> dict[str, float]:
        return {**self.values, **emergence(self.curve)}
