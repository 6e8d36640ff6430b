"""The memory plan's arithmetic: a design's measured samples (trainers.memory_probe) -> its peak
tensor memory per GPU at any micro-batch, with the breakdown, and the largest micro-batch that fits.

Every allocation of a step is either of a fixed size (weights' copies, gradients, AdamW's
temporaries) or proportional to the micro-batch's tokens N (activations; attention runs without a
[T, T] matrix). So the live bytes after the i-th allocation or free is a line a_i + b_i N, and the
step's peak is the largest of these lines at the N planned: at small N the end of backward (all
gradients) is the peak, at large N the start of backward (all activations) or, with activation
checkpointing, a block's recomputation. `fit` follows each event through the samples (the same
kernels make the same sequence of events at 2 rows and any of the measured lengths from 64, once
brief workspace spikes are folded: `collapse`) and keeps the lines no other line exceeds. A window
whose events do not line up across the samples (another kernel path at another size) falls back to
the lines through its first, last and largest values (`aligned` False: printed). The loss is its
own window: the live bytes when it starts plus what the loss path alone adds, measured alone at
positions doubling up to one chunk and at two chunks, read between them on straight lines (the peak
is convex in N, so the chord is above it), and past two chunks along the last segment (a chunk's
logits stay one chunk's; what grows is the gradient of h). Held out: `CHECK_SIZE` (other rows).

Gradient accumulation (grad_accum > 1): a later micro-batch starts with the gradients of the earlier
ones alive; counted as the whole gradients on top of every event (an upper bound: the step's own
peak already holds the gradients made by then). Data-parallel workers add DDP's gradient buckets (one
more copy of the gradients, as `trainers.step_memory` counts them).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from trainers.memory_probe import CHECK_SIZE, FIT_SIZES, WINDOWS, Measurements

GIB = 1 << 30


@dataclasses.dataclass(frozen=True)
class Prediction:
    """Bytes per GPU of one worker's step at `rows` x `seq_len` (grad_accum micro-batches a step)."""

    rows: int
    seq_len: int
    grad_accum: int
    peak: int
    params: int
    grads: int
    optimizer: int
    activations: int
    loss: int  # what the loss path alone adds at its peak (its logits, their gradient, grad of h and W)
    ddp_buckets: int = 0

    @property
    def tokens(self) -> int:
        return self.rows * self.seq_len


@dataclasses.dataclass(frozen=True)
class MemoryFit:
    params: int
    grads: int
    optimizer: int
    lines: list[tuple[float, float]]  # (a, b): live bytes a + b N at some event; the peak is their max
    loss_start: tuple[float, float]  # live bytes when the loss starts
    loss_points: list[tuple[int, int]]  # the loss alone: (positions, peak bytes over its inputs)
    activations: tuple[float, float]  # what forward leaves alive for backward
    chunk: int
    loss_kind: str
    aligned: bool
    linearity: float  # the largest residual of any kept line through the fit samples, in bytes
    check: dict  # the held-out sample: rows, seq_len, predicted, measured

    def loss_bytes(self, n: int) -> float:
        """What the loss path alone adds at n positions (see the module docstring)."""
        points = sorted(self.loss_points)
        if n <= points[0][0]:
            return float(points[0][1])
        for (n0, v0), (n1, v1) in zip(points, points[1:], strict=False):
            if n <= n1 or (n1, v1) == points[-1]:
                return v0 + (v1 - v0) * (n - n0) / (n1 - n0)
        return float(points[-1][1])

    def predict(self, rows: int, seq_len: int, grad_accum: int = 1, workers: int = 1) -> Prediction:
        n = rows * seq_len
        loss = self.loss_bytes(n)
        a, b = self.loss_start
        peak = max([a + b * n + loss, *(a + b * n for a, b in self.lines)])
        ddp = self.grads if workers > 1 else 0
        later = self.grads if grad_accum > 1 else 0
        aa, ab = self.activations
        return Prediction(
            rows=rows,
            seq_len=seq_len,
            grad_accum=grad_accum,
            peak=round(peak + later + ddp),
            params=self.params,
            grads=self.grads,
            optimizer=self.optimizer,
            activations=round(aa + ab * n),
            loss=round(loss),
            ddp_buckets=ddp,
        )

    def largest_fitting(self, budget: float, rows_per_step: int, seq_len: int, workers: int = 1):
        """The largest micro-batch m dividing `rows_per_step` (one worker's rows of an optimizer
        step) whose peak is within `budget` bytes, as its Prediction (grad_accum rows_per_step / m),
        or None when not even one row fits."""
        for m in sorted((m for m in range(1, rows_per_step + 1) if rows_per_step % m == 0), reverse=True):
            p = self.predict(m, seq_len, rows_per_step // m, workers)
            if p.peak <= budget:
                return p
        return None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _line(tokens, values) -> tuple[tuple[float, float], float]:
    """Least-squares (a, b) of values = a + b N, and the largest residual."""
    x = np.array([[1.0, float(n)] for n in tokens])
    y = np.array([float(v) for v in values])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return (float(coef[0]), float(coef[1])), float(np.max(np.abs(x @ coef - y)))


def _upper(lines: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The lines no other line is at or above everywhere for N >= 0 (both a and b no larger)."""
    kept: list[tuple[float, float]] = []
    for a, b in sorted(set(lines), key=lambda ab: (-ab[0], -ab[1])):
        if not any(ka >= a and kb >= b for ka, kb in kept):
            kept.append((a, b))
    return kept


def collapse(trace: list[int]) -> list[int]:
    """The trace without its brief spikes: an allocation freed by the very next event (a kernel's
    workspace, whose count can follow the kernel's blocking and so the size), folded into the level
    it returns to as that level plus the spike's height (nested spikes add up)."""
    out: list[int] = []
    above: list[int] = []
    for v in trace:
        if len(out) >= 2 and v == out[-2] and out[-1] > v:
            height = out.pop() - v + above.pop()
            above[-1] = max(above[-1], height)
            continue
        out.append(v)
        above.append(0)
    return [v + a for v, a in zip(out, above, strict=True)]


def _window_lines(samples, name) -> tuple[list, float, bool]:
    tokens = [s.tokens for s in samples]
    traces = [collapse(s.windows[name]) for s in samples]
    if len({len(t) for t in traces}) == 1 and traces[0]:
        fitted = [_line(tokens, values) for values in zip(*traces, strict=True)]
        lines = _upper([f[0] for f in fitted])
        worst = max((r for f, r in fitted if f[0] in lines), default=0.0)
        return lines, worst, True
    picks = [lambda t: t[0], lambda t: t[-1], max]  # not lined up: its ends and its largest value
    fitted = [_line(tokens, [pick(t) if t else 0 for t in traces]) for pick in picks]
    lines = [f[0] for f in fitted]
    # ... and each event followed through the samples that do line up, when two or more do (a
    # kernel that changes its path at the largest length leaves the smaller ones comparable)
    by_length: dict[int, list[int]] = {}
    for i, t in enumerate(traces):
        by_length.setdefault(len(t), []).append(i)
    groups = [g for n, g in by_length.items() if n and len(g) >= 2]
    if groups:
        group = max(groups, key=lambda g: (len(g), max(tokens[i] for i in g)))
        together = zip(*(traces[i] for i in group), strict=True)
        lines += [_line([tokens[i] for i in group], values)[0] for values in together]
    return _upper(lines), max(f[1] for f in fitted), False


def fit(m: Measurements, loss_kind: str) -> MemoryFit:
    """The plan of one design from its measurements (see the module docstring)."""
    by_size = {(s.rows, s.seq_len // m.seq0): s for s in m.samples}
    samples = [by_size[size] for size in FIT_SIZES]
    tokens = [s.tokens for s in samples]
    lines, worst, aligned = [], 0.0, True
    for name in WINDOWS:
        window, residual, lined_up = _window_lines(samples, name)
        lines += window
        worst, aligned = max(worst, residual), aligned and lined_up
    points = [(int(key.split("/")[0]), value) for key, value in m.loss_samples.items()]
    result = MemoryFit(
        params=m.params,
        grads=m.grads,
        optimizer=m.optimizer,
        lines=_upper(lines),
        loss_start=_line(tokens, [s.loss_start for s in samples])[0],
        loss_points=sorted(points),
        activations=_line(tokens, [s.activations for s in samples])[0],
        chunk=m.chunk,
        loss_kind=loss_kind,
        aligned=aligned,
        linearity=worst,
        check={},
    )
    held = by_size.get(CHECK_SIZE)
    if held is not None:
        predicted = result.predict(held.rows, held.seq_len).peak
        check = {"rows": held.rows, "seq_len": held.seq_len, "predicted": predicted, "measured": held.peak}
        result = dataclasses.replace(result, check=check)
    return result
