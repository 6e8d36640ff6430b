"""One long-lived training thread per Ray worker process.

Tune runs every trial in a new thread of its (reused) actor, and torch's OpenMP thread team
belongs to the thread that runs the parallel regions: a new thread per trial trains measurably
slower than the thread that trained before, and slower than the same `fit` in a plain loop.
Every trial of a worker therefore trains on one thread (docs/fronts/README.md has the
measurements, under the launcher's cost).
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future


class _TrainingThread:
    """One daemon thread running the jobs handed to it, one at a time."""

    def __init__(self):
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="satsweep-train", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            fn, args, kwargs, future = self.jobs.get()
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as err:  # noqa: BLE001 - the caller re-raises it
                future.set_exception(err)


_training_thread: _TrainingThread | None = None


def on_training_thread(fn, *args, **kwargs):
    """`fn(*args, **kwargs)` on one long-lived thread of this worker process (see the module
    docstring for why). tune.report works from any thread: Ray keeps one session per process.
    A new thread replaces it if it died."""
    global _training_thread
    if _training_thread is None or not _training_thread.thread.is_alive():
        _training_thread = _TrainingThread()
    future: Future = Future()
    _training_thread.jobs.put((fn, args, kwargs, future))
    return future.result()
