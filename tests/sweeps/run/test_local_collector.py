"""The local backend's garbage collection between trials: after every long or failed trial, and
after short ones once they have run 1 / SHARE times the last collection's own time (a full
collection costs a fraction of a second, growing with the study; issue 52)."""

import datetime
from types import SimpleNamespace

from sweeps.run.backends import local

T0 = datetime.datetime(2026, 12, 6)


def ended(seconds):
    return SimpleNamespace(datetime_start=T0, datetime_complete=T0 + datetime.timedelta(seconds=seconds))


def test_short_trials_share_collections_by_their_cost_and_long_ones_each_get_theirs(monkeypatch):
    now, collections = [0.0], []

    def collect():  # each collection takes 0.2 s of the fake clock
        collections.append(now[0])
        now[0] += 0.2

    monkeypatch.setattr(local.gc, "collect", collect)
    collector = local.Collector(clock=lambda: now[0])
    first = local.Collector.FIRST_S / local.Collector.SHARE  # 12.5 s before the first (none measured)
    for _ in range(int(first / 0.1) - 5):
        collector(None, ended(0.1))
    assert not collections  # a study of a few short trials collects none
    for _ in range(10):
        collector(None, ended(0.1))
    assert len(collections) == 1  # it took 0.2 s: the next after 0.2 / SHARE = 10 s of trials
    for _ in range(95):
        collector(None, ended(0.1))
    assert len(collections) == 1
    for _ in range(10):  # past 10 s: one collection, 2% of their time
        collector(None, ended(0.1))
    assert len(collections) == 2
    for _ in range(3):
        collector(None, ended(local.Collector.LONG_S))
    assert len(collections) == 5
    collector(None, SimpleNamespace(datetime_start=T0, datetime_complete=None))  # failed: collect
    assert len(collections) == 6
