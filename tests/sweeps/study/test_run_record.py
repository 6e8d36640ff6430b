"""A run's record (sweeps.study.run_record): the one reader and writer of a trial's user_attrs,
and the one rule for a run that counts as done."""

import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from sweeps.study.run_key import TUNE, RunKey
from sweeps.study.run_record import INTERRUPTED, RunRecord, is_done

POINT = {"model.residual": "sat", "train.lr": 0.01}


def stored(state=TrialState.COMPLETE, **attrs):
    return create_trial(
        state=state,
        values=[1.0] if state == TrialState.COMPLETE else None,
        params={"train.lr": 0.01},
        distributions={"train.lr": FloatDistribution(1e-4, 1.0)},
        user_attrs=attrs,
    )


@pytest.mark.parametrize(
    "key",
    [
        RunKey.of(POINT),
        RunKey.of(POINT, TUNE),
        RunKey.of({"model.residual": "sat"}, overrides={"train.lr": 0.01}),
    ],
    ids=["grid", "tune", "confirming"],
)
def test_an_enqueued_run_gives_its_key_back(key):
    record = RunRecord.of(stored(**RunRecord.queued(key, repeat=1)))
    assert record.key(key.point) == key and record.point == key.point_id and record.repeat == 1
    assert record.is_tune == (key.stage == TUNE)


def test_a_field_that_is_not_one_is_refused():
    with pytest.raises(TypeError, match="not a field of RunRecord: statu"):
        RunRecord.attrs(statu="ok")


def test_an_unrecorded_attribute_reads_as_none():
    record = RunRecord.of(stored(point="p1"))
    assert record.point == "p1" and record.seed is None and record.status is None and record.tuned is None


@pytest.mark.parametrize(
    "state, attrs, done",
    [
        (TrialState.COMPLETE, {"status": "ok"}, True),
        (TrialState.PRUNED, {"status": "pruned"}, True),
        (TrialState.FAIL, {"status": "diverged", "fail_reason": "diverged"}, True),  # its own fault
        (TrialState.FAIL, {"fail_reason": INTERRUPTED}, False),  # its launcher died: it runs again
        (TrialState.FAIL, {}, False),  # a heartbeat gone stale
        (TrialState.RUNNING, {}, False),
    ],
)
def test_what_counts_as_done(state, attrs, done):
    assert is_done(stored(state, **attrs)) is done
