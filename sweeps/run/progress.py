"""Terminal progress of a launch: one line per finished trial, counts, ETA and the best point."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence

from sweeps.study.space import point_name


def duration(seconds: float) -> str:
    """42s, 3m05s, 5h07m, 4.2 days: elapsed times, ETAs and the dry run's estimates."""
    if seconds >= 3 * 86400:
        return f"{seconds / 86400:.1f} days"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def fmt_value(value: float) -> str:
    return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"


class Progress:
    def __init__(
        self,
        total: int,
        done_before: int,
        objectives: Sequence[tuple[str, str]],
        concurrency: int,
        stream=None,
    ):
        self.total = total
        self.done_before = done_before
        self.objectives = list(objectives)
        self.concurrency = max(1, concurrency)
        self.stream = stream
        self.start = time.time()
        self.running: set[int] = set()
        self.counts = {"ok": 0, "failed": 0, "pruned": 0}
        self.first_start: float | None = None
        self.ended: list[float] = []  # when each trial of this launch ended
        self.best: tuple[float, int, str] | None = None

    def __getstate__(self):  # Ray Tune pickles its search algorithm (and so this) with the Tuner
        return {**self.__dict__, "stream": None}

    def say(self, text: str) -> None:
        print(f"[{duration(time.time() - self.start):>7}] {text}", file=self.stream or sys.stdout, flush=True)

    def started(self, number: int, point: Mapping, seed: int) -> None:
        self.running.add(number)
        if self.first_start is None:
            self.first_start = time.time()
        self.say(f"trial {number} started: {point_name(point)}, seed {seed}")

    def finished(
        self,
        number: int,
        point: Mapping,
        status: str,
        metrics: Mapping,
        wall_s: float,
        error="",
        train_s=None,
    ):
        self.running.discard(number)
        key = "ok" if status == "ok" else "pruned" if status == "pruned" else "failed"
        self.counts[key] += 1
        self.ended.append(time.time())
        shown = " ".join(f"{m}={fmt_value(metrics[m])}" for m, _ in self.objectives if m in metrics)
        if status == "ok" and self.objectives and self.objectives[0][0] in metrics:
            metric, direction = self.objectives[0]
            value = metrics[metric] * (1 if direction == "minimize" else -1)
            if self.best is None or value < self.best[0]:
                self.best = (value, number, point_name(point))
        detail = shown if status in ("ok", "pruned") else error.splitlines()[0][:120] if error else ""
        inner = f" (training {duration(train_s)})" if train_s is not None else ""
        self.say(f"trial {number} {status} in {duration(wall_s)}{inner}: {detail}")
        self.say(self.summary())

    def eta(self, left: int) -> float:
        """Seconds until `left` more trials end, at the rate trials ended lately: the last
        `2 x concurrency` (at least 10) ends over the time they took, or every end of this launch
        over the time since its first trial started. Not the mean trial's wall over the
        concurrency: that holds only while `concurrency` trials are always under way and their
        walls stay alike. A first wave that waited for its worker processes holds the mean up
        long after (those walls include the wait: 32 at once on 2 cores, minutes), and fewer
        trials under way than the concurrency (a searcher waiting on results) make it too short."""
        window = max(10, 2 * self.concurrency)
        if len(self.ended) > window:
            count, since = window, self.ended[-1 - window]
        else:
            count, since = len(self.ended), self.first_start or self.start
        return left * max(self.ended[-1] - since, 0.0) / count

    def summary(self) -> str:
        done = self.done_before + sum(self.counts.values())
        left = max(0, self.total - done)
        eta = f" | eta {duration(self.eta(left))}" if left and self.ended else ""
        best = ""
        if self.best is not None:
            metric, direction = self.objectives[0]
            value = self.best[0] * (1 if direction == "minimize" else -1)
            best = f" | best {metric} {fmt_value(value)} (trial {self.best[1]}: {self.best[2]})"
        return (
            f"{done}/{self.total} done ({self.counts['ok']} ok, {self.counts['failed']} failed, "
            f"{self.counts['pruned']} pruned), {len(self.running)} running{eta}{best}"
        )
