"""The stand-in fit (`tests.sweeps.fake_fit.fit`) with a time stamp of each trial's start and end.

`bench.scale --backend ray` runs trials in Ray's worker processes, so the stamps go to a file
(one JSON line a trial, appended: each line is one short write) that the bench reads after the
launch to count how many trials ran at once (`slots`). Small on purpose: every worker imports it.
"""

from __future__ import annotations

import json
import os
import time

from tests.sweeps import fake_fit


def fit(config, stamps: str | None = None, **kwargs):
    """`fake_fit.fit`, then one line appended to the file `stamps`: this process, the fit's start
    and end (wall clock), its own CPU, and the process's whole CPU so far (a worker's start-up
    and imports, Ray's and the trial logger's work included)."""
    start, cpu = time.time(), time.thread_time()  # the fit's own thread: not Ray's beside it
    try:
        return fake_fit.fit(config, **kwargs)
    finally:
        if stamps:
            own, now = time.thread_time() - cpu, time.process_time()
            line = {"pid": os.getpid(), "start": start, "end": time.time(), "cpu": own, "process_cpu": now}
            with open(stamps, "a") as handle:
                handle.write(json.dumps(line) + "\n")


def read(path) -> list[dict]:
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def slots(stamps: list[dict], concurrency: int) -> dict:
    """How busy `concurrency` slots were, from the trials' [start, end] stamps (seconds):

    - busy_mean: trials running on average from the first start to the last end;
    - busy_steady: the same from the `concurrency`-th start (every slot could have had a trial)
      to the last start (from there on slots empty because nothing is left to run); None when
      there are too few trials for such a window;
    - idle / idle_steady: 1 - busy / concurrency; max_at_once: the most trials running at one time.
    """
    if not stamps:
        return {"busy_mean": None, "busy_steady": None, "idle": None, "idle_steady": None, "max_at_once": 0}
    starts = sorted(s["start"] for s in stamps)
    first, last = starts[0], max(s["end"] for s in stamps)
    steady = (starts[concurrency - 1], starts[-1]) if len(starts) > concurrency else None
    busy = _busy(stamps, first, last)
    busy_steady = _busy(stamps, *steady) if steady and steady[1] > steady[0] else None
    events = sorted(
        [(s["start"], 1) for s in stamps] + [(s["end"], -1) for s in stamps], key=lambda e: (e[0], e[1])
    )
    running = most = 0
    for _, step in events:  # an end before a start at the same instant
        running += step
        most = max(most, running)
    return {
        "busy_mean": busy,
        "busy_steady": busy_steady,
        "idle": 1 - busy / concurrency if busy is not None else None,
        "idle_steady": 1 - busy_steady / concurrency if busy_steady is not None else None,
        "max_at_once": most,
        "fit_s_mean": sum(s["end"] - s["start"] for s in stamps) / len(stamps),
    }


def _busy(stamps: list[dict], low: float, high: float) -> float | None:
    """Trial-seconds inside [low, high] over its length: the mean number running."""
    if high <= low:
        return None
    inside = sum(max(0.0, min(s["end"], high) - max(s["start"], low)) for s in stamps)
    return inside / (high - low)
