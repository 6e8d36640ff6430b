"""Interleaved side-by-side timing: rotation, fastest step per round, threads, paired ratios."""

import statistics
import time

import torch

from trainers.timing import interleaved, paired_ratios


def test_rounds_rotate_keep_the_fastest_step_and_set_each_models_threads():
    calls, threads = [], {}

    def sleeper(name, *seconds):  # cycles through `seconds`, one per call
        def step():
            calls.append(name)
            threads.setdefault(name, set()).add(torch.get_num_threads())
            time.sleep(seconds[calls.count(name) % len(seconds)])

        return step

    before = torch.get_num_threads()
    got = interleaved(
        {"a": sleeper("a", 0.01), "b": sleeper("b", 0.03), "c": sleeper("c", 0.01, 0.1)},
        rounds=3, per_round=2, device="cpu", threads={"a": 1},
    )  # fmt: skip
    assert (
        calls
        == ["a"] * 2
        + ["b"] * 2
        + ["c"] * 2
        + ["b"] * 2
        + ["c"] * 2
        + ["a"] * 2
        + ["c"] * 2
        + ["a"] * 2
        + ["b"] * 2
    )
    assert threads["a"] == {1} and threads["b"] == {before} and torch.get_num_threads() == before
    assert all(len(v) == 3 for v in (*got.wall.values(), *got.cpu.values()))
    assert max(got.wall["c"]) < 0.06  # one slow step of two in every round: the fast one is kept
    assert (
        0.2 < statistics.median(paired_ratios(got.wall["a"], got.wall["b"])) < 0.5
    )  # b takes three times a's time (a sleep's overshoot under load: up to 10 ms passes)
    assert all(c < w for c, w in zip(got.cpu["b"], got.wall["b"], strict=True))  # sleeping is not CPU
    assert all(t < 0.002 for t in got.thread["c"])  # nor this thread's CPU, the slow step's included


def test_thread_cpu_time_leaves_out_what_other_threads_take_from_the_core():
    import threading

    def spin():  # 20 ms of this thread's CPU, whatever else runs
        start = time.thread_time()
        while time.thread_time() - start < 0.02:
            pass

    stop = threading.Event()

    def rival():
        while not stop.is_set():
            pass

    rivals = [threading.Thread(target=rival) for _ in range(3)]
    for r in rivals:
        r.start()
    try:  # the GIL and the rivals take the core away for most of each step's wall time
        got = interleaved({"spin": spin}, rounds=3, per_round=1, device="cpu")
    finally:
        stop.set()
        for r in rivals:
            r.join()
    assert all(0.02 <= t < 0.03 for t in got.thread["spin"])
    assert min(got.wall["spin"]) > 0.03


def test_paired_ratios_pair_by_round():
    assert paired_ratios([1.0, 2.0, 4.0], [2.0, 2.0, 2.0]) == [0.5, 1.0, 2.0]
    assert statistics.median(paired_ratios([1.0, 2.0, 4.0], [2.0, 2.0, 2.0])) == 1.0


def test_a_range_of_rounds_keeps_those_rounds_rotation():
    calls = []
    steps = {n: (lambda n=n: calls.append(n)) for n in "abc"}
    got = interleaved(steps, rounds=range(1, 5, 2), per_round=1, device="cpu")
    assert calls == ["b", "c", "a", "a", "b", "c"]  # round 1 starts at b, round 3 at a
    assert all(len(got.wall[n]) == 2 for n in "abc")
