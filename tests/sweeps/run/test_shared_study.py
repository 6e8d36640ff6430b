"""Several launchers on one RDB study (sweeps.run.plan): claims are atomic, the total is exact, a dead
launcher's runs come back through Optuna's heartbeats. SQLite here; PostgreSQL in tests/cluster."""

import time
from collections import Counter

import pytest
from optuna.trial import TrialState

from sweeps.run import storage as storage_module
from sweeps.run.plan import WAIT, Plan
from sweeps.study import study_from_dict
from sweeps.study.run_record import RunRecord
from sweeps.study.study_plan import resolve
from tests.sweeps.helpers import TRIAL

SPACE = {"model.residual": {"choices": {"baseline": {"kind": "none"}, "sat": {"kind": "value_residual"}}}}


def make_study(tmp_path, **extra):
    tree = {
        "name": "shared",
        "trial": TRIAL,
        "space": SPACE,
        "repeats": 2,
        "backend": "local",
        "output": {"dir": str(tmp_path / "results"), "storage": f"sqlite:///{tmp_path / 'optuna.db'}"},
        **extra,
    }
    return study_from_dict(tree)


def tell_ok(p: Plan, run) -> None:
    p.optuna.tell(run.trial, [1.0] * len(p.study.objectives))


@pytest.mark.parametrize("sampler", ["grid", "tpe"])
def test_two_launchers_claim_every_run_once_and_stop_at_the_total(tmp_path, sampler):
    extra = {} if sampler == "grid" else {"sampler": {"kind": "tpe", "seed": 0}, "n_trials": 2}
    a, b = (Plan(resolve(make_study(tmp_path, **extra)), launch) for launch in ("a", "b"))
    assert a.shared and b.shared
    a.recover(), b.recover()  # both enqueue the grid: under the lock, once
    claimed = [a.claim(), b.claim(), a.claim(), b.claim()]
    assert all(run not in (None, WAIT) for run in claimed)
    assert a.claim() == WAIT and b.claim() == WAIT  # all taken, some still running
    for run in claimed[:3]:
        tell_ok(a, run)
    assert b.claim() == WAIT
    tell_ok(b, claimed[3])
    assert a.claim() is None and b.claim() is None
    trials = a.trials()
    assert Counter(t.state for t in trials) == {TrialState.COMPLETE: 4}
    assert len({(RunRecord.of(t).point, RunRecord.of(t).repeat) for t in trials}) == 4
    assert a.done() == 4 and a.remaining() == 0


def test_a_dead_launchers_run_goes_stale_and_runs_again_elsewhere(tmp_path, monkeypatch):
    monkeypatch.setattr(storage_module, "HEARTBEAT_S", 1)
    monkeypatch.setattr(storage_module, "GRACE_S", 1)
    study = make_study(tmp_path, sampler={"kind": "tpe", "seed": 0}, n_trials=1, repeats=1)
    dead, alive = Plan(resolve(study), "dead"), Plan(resolve(study), "alive")
    lost = dead.claim()  # claimed, one heartbeat, then its launcher "dies"
    assert alive.claim() == WAIT and alive.recover() == []  # not stale yet: left alone
    time.sleep(2.5)
    assert alive.recover() == [lost.number]  # stale: failed and its run queued again
    again = alive.claim()
    assert (again.point_id, again.repeat, again.seed) == (lost.point_id, lost.repeat, lost.seed)
    tell_ok(alive, again)
    assert alive.claim() is None
    states = {t.number: t.state for t in alive.trials()}
    assert states == {lost.number: TrialState.FAIL, again.number: TrialState.COMPLETE}
    assert alive.done() == 1  # the stale FAIL does not count as a finished run


def test_launchers_tagging_the_same_runs_at_once_do_not_collide(tmp_path):
    """Both launchers of a shared study analyse the front at the end and tag every child run
    (pareto_rank, verdicts), and both may close the same orphan: a plain `set_tag` from two writers
    fails on the tag's unique key (seen on PostgreSQL in CI; SQLite shows it too)."""
    import threading

    from sweeps.run.tracking import Tracker

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = Tracker(uri, "shared", "shared", "a")
    runs = [first.client.create_run(first.experiment_id).info.run_id for _ in range(12)]
    trackers = [first] + [Tracker(uri, "shared", "shared", who) for who in "bcd"]
    start, errors = threading.Barrier(len(trackers)), []

    def tag_all(tracker):
        start.wait()
        for run_id in runs:
            try:
                tracker.set_tags(run_id, {"pareto_rank": "0", "p_front": "0.5", "verdict": tracker.launch})
            except Exception as error:  # noqa: BLE001 - collected for the assertion
                errors.append(error)

    threads = [threading.Thread(target=tag_all, args=(t,)) for t in trackers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:2]
    for run_id in runs:
        tags = first.client.get_run(run_id).data.tags
        assert tags["pareto_rank"] == "0" and tags["verdict"] in "abcd"
