"""The progress line's ETA follows the rate trials end at, with many at once (sweeps.run.progress)."""

import io

import pytest

from sweeps.run import progress as progress_module
from sweeps.run.progress import Progress


def replay(monkeypatch, concurrency: int, trials: list[tuple[float, float]], total: int) -> Progress:
    """Trials as (start, end) times, replayed in time order through a Progress at a fake clock."""
    now = [0.0]
    monkeypatch.setattr(progress_module.time, "time", lambda: now[0])
    p = Progress(total, 0, [("val_loss", "minimize")], concurrency, io.StringIO())
    events = sorted(
        [(s, 1, i) for i, (s, _) in enumerate(trials)] + [(e, 0, i) for i, (_, e) in enumerate(trials)]
    )
    for at, is_start, number in events:
        now[0] = at
        if is_start:
            p.started(number, {"model.residual": "sat"}, 0)
        else:
            start, end = trials[number]
            p.finished(number, {"model.residual": "sat"}, "ok", {"val_loss": 3.0}, end - start)
    return p


def first_wave_waited(n: int) -> list[tuple[float, float]]:
    """4 slots: the first 4 trials waited ~30 s for their workers, then each end starts a 2 s
    trial: from then on a trial ends every 0.5 s (2 a second)."""
    trials = [(0.0, 30.0 + 0.5 * k) for k in range(4)]
    while len(trials) < n:
        start = trials[len(trials) - 4][1]
        trials.append((start, start + 2.0))
    return trials


def held_back(n: int) -> list[tuple[float, float]]:
    """4 slots, but the searcher hands out one 10 s trial at a time (it waits on each result)."""
    return [(10.0 * k, 10.0 * (k + 1)) for k in range(n)]


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (first_wave_waited, 8.0),  # 16 left at 2 a second (mean wall / concurrency: 27 s)
        (held_back, 160.0),  # 16 left at one per 10 s (mean wall / concurrency: 40 s)
    ],
)
def test_the_eta_is_the_time_the_trials_left_take_at_the_recent_rate(monkeypatch, case, expected):
    p = replay(monkeypatch, 4, case(24), total=40)
    assert p.eta(16) == pytest.approx(expected)
    assert p.summary().split(" | ")[1] == f"eta {progress_module.duration(expected)}"


def test_before_many_trials_ended_the_rate_counts_from_the_first_start(monkeypatch):
    # 4 trials started together and ended together 10 s later: 4 per 10 s, so 8 left take 20 s
    p = replay(monkeypatch, 4, [(0.0, 10.0)] * 4, total=12)
    assert p.eta(8) == pytest.approx(20.0)
