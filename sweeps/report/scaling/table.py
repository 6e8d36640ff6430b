"""A ladder's measured rows: design, parameters N, tokens D, loss, and the seed when there is one;
read from a CSV with the columns named by the caller, every bad input refused with the file and
the column in the message."""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

import numpy as np

from sweeps.study.ladder import LadderError

ALL = "all"  # the design name of a table without a design column


@dataclasses.dataclass
class Ladder:
    design: np.ndarray  # (n,) str
    params: np.ndarray  # (n,) float, N
    tokens: np.ndarray  # (n,) float, D
    loss: np.ndarray  # (n,) float
    seed: np.ndarray | None = None  # (n,) str, or None: rows are the resampling unit
    source: str = "the ladder"

    def __post_init__(self):
        n = len(self.loss)
        self.design = np.asarray(self.design, dtype=str)
        self.params, self.tokens, self.loss = (
            np.asarray(x, float) for x in (self.params, self.tokens, self.loss)
        )
        if self.seed is not None:
            self.seed = np.asarray(self.seed, dtype=str)
        for name in ("design", "params", "tokens", "seed"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise LadderError(f"{self.source}: {name} has {len(value)} rows, loss has {n}")

    @property
    def designs(self) -> list[str]:
        return list(dict.fromkeys(self.design.tolist()))

    @property
    def flops(self) -> np.ndarray:
        return 6.0 * self.params * self.tokens

    def rung_keys(self) -> list[tuple[float, float]]:
        """The distinct (N, D) rungs, by compute."""
        return sorted(
            set(zip(self.params.tolist(), self.tokens.tolist(), strict=True)), key=lambda r: (r[0] * r[1], r)
        )

    def rung_of_row(self) -> np.ndarray:
        index = {r: i for i, r in enumerate(self.rung_keys())}
        return np.array([index[r] for r in zip(self.params.tolist(), self.tokens.tolist(), strict=True)])

    def take(self, rows) -> Ladder:
        rows = np.asarray(rows)
        seed = None if self.seed is None else self.seed[rows]
        return Ladder(
            self.design[rows], self.params[rows], self.tokens[rows], self.loss[rows], seed, self.source
        )

    def only(self, design: str) -> Ladder:
        part = self.take(np.flatnonzero(self.design == design))
        if len(self.designs) > 1:
            part.source = f"{self.source} (design {design!r})"
        return part


def _number(text: str, path, column: str, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise LadderError(f"{path}: column {column!r}, line {line}: {text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise LadderError(f"{path}: column {column!r}, line {line}: {text!r} must be a positive number")
    return value


def read_csv(path, params: str, tokens: str, loss: str, design: str | None = None, seed: str | None = None):
    """The rows of `path`; raises LadderError naming the file and the column on bad input."""
    path = Path(path)
    if not path.is_file():
        raise LadderError(f"{path}: no such file")
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        for role, column in (
            ("params", params),
            ("tokens", tokens),
            ("loss", loss),
            ("design", design),
            ("seed", seed),
        ):
            if column is not None and column not in header:
                raise LadderError(
                    f"{path}: no column {column!r} (--{role}); the columns are: {', '.join(header) or 'none'}"
                )
        rows = list(reader)
    if not rows:
        raise LadderError(f"{path}: no rows")
    cols = {"params": [], "tokens": [], "loss": [], "design": [], "seed": []}
    for line, row in enumerate(rows, start=2):
        for role, column in (("params", params), ("tokens", tokens), ("loss", loss)):
            cols[role].append(_number(row[column] or "", path, column, line))
        cols["design"].append(row[design] if design else ALL)
        if seed:
            cols["seed"].append(row[seed])
    return Ladder(
        cols["design"],
        cols["params"],
        cols["tokens"],
        cols["loss"],
        cols["seed"] if seed else None,
        str(path),
    )
