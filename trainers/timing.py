"""Side-by-side timing: the steps of several models, built once, interleaved in one process.

Every model is built and warmed up once. Then each round runs every model's step `per_round`
times, the models in a rotated order, and keeps each model's fastest step of the round (other
work on the machine only ever adds time). A ratio between two models is paired by round:

    ratio = median over rounds r of (seconds_r(base) / seconds_r(model))

so drift and a busy neighbour, which hit every model of a round alike, cancel out. This is the
one timing method of the cost probe (`sweeps.run.probe`) and `bench.designs`.

Why built once and finely interleaved: a model rebuilt in every round pays its warm-up again and
lands its tensors elsewhere, which moved the ratios between launches by more than most designs
differ; built once, with many short rounds, the ratios agree between launches, quiet or beside a
busy loop (the measurements, and the estimators compared: docs/fronts/README.md, "Throughput").
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping


@dataclasses.dataclass
class Timings:
    """Per model, per round: the wall seconds of its fastest step and the process CPU seconds of
    that same step; and the fewest CPU seconds of the calling thread over the round's steps.

    On one torch thread a CPU step runs wholly on the calling thread, so its thread CPU time is
    the step's wall time without the time the thread waited for a core: quiet, the two clocks
    agree; with more runnable processes than cores the wall time grows and the thread CPU time
    does not, and the paired ratios stay as tight as quiet ones by thread CPU where by wall they
    scatter several times wider (docs/fronts/README.md, "Throughput")."""

    wall: dict[str, list[float]]
    cpu: dict[str, list[float]]
    thread: dict[str, list[float]]


def sync(device) -> None:
    import torch  # here, not at the top: the launcher reads `paired_ratios` without torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def interleaved(
    steps: Mapping[str, Callable[[], object]],
    rounds: int | range,
    per_round: int,
    device,
    threads: Mapping[str, int] | None = None,
) -> Timings:
    """Times `steps` (name -> a warmed-up step) in `rounds` interleaved rounds of `per_round`
    steps each, or in the rounds a range numbers: a share of the rounds timed in its own process
    keeps those rounds' rotation. `threads`: torch CPU threads for some names (others run at the
    current setting). A step with `enter` and `leave` methods has them called, untimed, before and
    after its turn in a round (the cost probe parks a model off the device between its turns)."""
    import torch  # here, not at the top: the launcher reads `paired_ratios` without torch

    names = list(steps)
    default_threads = torch.get_num_threads()
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    thread: dict[str, list[float]] = {n: [] for n in names}
    try:
        for r in range(rounds) if isinstance(rounds, int) else rounds:
            for name in names[r % len(names) :] + names[: r % len(names)]:  # no model always first
                torch.set_num_threads((threads or {}).get(name, default_threads))
                step = steps[name]
                getattr(step, "enter", _nothing)()  # a step parked off the device between its turns
                timed = [_time_step(step, device) for _ in range(per_round)]
                getattr(step, "leave", _nothing)()
                best = min(timed)
                wall[name].append(best[0])
                cpu[name].append(best[1])
                thread[name].append(min(t[2] for t in timed))
    finally:
        torch.set_num_threads(default_threads)
    return Timings(wall, cpu, thread)


def _nothing() -> None:
    pass


def _time_step(step: Callable[[], object], device) -> tuple[float, float, float]:
    """(wall, process CPU, calling thread's CPU) seconds of one step."""
    sync(device)
    t, c, h = time.perf_counter(), time.process_time(), time.thread_time()
    step()
    sync(device)
    return time.perf_counter() - t, time.process_time() - c, time.thread_time() - h


def paired_ratios(base: list[float], other: list[float]) -> list[float]:
    """base seconds / other seconds, round by round (> 1: `other` is faster)."""
    return [b / o for b, o in zip(base, other, strict=True)]
