"""Every trial of a Ray worker trains on one long-lived thread (not on Tune's new thread each
time: torch's OpenMP team belongs to the thread that trains)."""

import threading

import pytest

from sweeps.run.backends.ray.thread import on_training_thread


def test_trials_of_a_worker_share_one_training_thread_and_errors_come_back():
    def ident(*_, **__):
        return threading.get_ident()

    first = [None]
    callers = [threading.Thread(target=lambda: first.__setitem__(0, on_training_thread(ident, 1, k=2)))]
    callers[0].start()
    callers[0].join()
    assert first[0] != callers[0].ident  # not the caller's (Tune's) thread
    assert on_training_thread(ident) == first[0] != threading.get_ident()  # the same one, every time

    def boom():
        raise ValueError("in training")

    with pytest.raises(ValueError, match="in training"):
        on_training_thread(boom)
    assert on_training_thread(ident) == first[0]  # still there after a failure
