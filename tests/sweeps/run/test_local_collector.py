"""The local backend's garbage collection between trials: after every long trial, after every
EVERY-th short one (a full collection costs a fixed fraction of a second; issue 52)."""

import datetime
from types import SimpleNamespace

from sweeps.run.backends import local

T0 = datetime.datetime(2026, 12, 6)


def ended(seconds):
    return SimpleNamespace(datetime_start=T0, datetime_complete=T0 + datetime.timedelta(seconds=seconds))


def test_short_trials_share_one_collection_and_long_ones_each_get_theirs(monkeypatch):
    collections = []
    monkeypatch.setattr(local.gc, "collect", lambda: collections.append(1))
    collector = local.Collector()
    for _ in range(2 * local.Collector.EVERY):
        collector(None, ended(0.1))
    assert len(collections) == 2
    for _ in range(3):
        collector(None, ended(local.Collector.LONG_S))
    assert len(collections) == 5
    collector(None, SimpleNamespace(datetime_start=T0, datetime_complete=None))  # failed: collect
    assert len(collections) == 6
