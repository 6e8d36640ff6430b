"""The hypervolume history: fixed bounds, completion order, by hand; in the parent run, the same
curve again on a resume; the bounds are part of the study's fingerprint."""

import datetime

import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import FrozenTrial, TrialState

from sweeps.report.history import METRIC, history
from sweeps.run.dry_run import plan_text
from sweeps.run.launch import launch
from sweeps.run.tracking import client
from sweeps.study import load_study
from tests.sweeps import fake_fit
from tests.sweeps.helpers import mlflow_runs, optuna_trials, write_study

T0 = datetime.datetime(2026, 12, 5, 12, 0, 0)
BOUNDS = {"val_loss": [2.0, 4.0], "tokens_per_s": [1000.0, 0.0]}  # minimise, maximise


def trial(number, values, completed_s, state=TrialState.COMPLETE):
    return FrozenTrial(
        number=number, state=state, value=None, values=values if state == TrialState.COMPLETE else None,
        datetime_start=T0, datetime_complete=T0 + datetime.timedelta(seconds=completed_s),
        params={"x": 0.0}, distributions={"x": FloatDistribution(0, 1)}, user_attrs={}, system_attrs={},
        intermediate_values={}, trial_id=number,
    )  # fmt: skip


def test_history_by_hand_in_completion_order_with_fixed_bounds():
    trials = [
        trial(0, [5.0, 900.0], 30),  # beyond the worst val_loss: adds nothing (completed last)
        trial(1, [2.5, 250.0], 20),  # (0.25, 0.75): adds 0.25 x 0.25
        trial(2, [3.0, 500.0], 10),  # (0.5, 0.5): 0.25, completed first
        trial(3, [2.0, 1000.0], 5, state=TrialState.FAIL),  # failed: not a step
    ]
    assert history(trials, ["val_loss", "tokens_per_s"], BOUNDS) == pytest.approx([0.25, 0.3125, 0.3125])
    # the same trials alone give the same numbers: the bounds, not the trials, set the scale
    assert history(trials[2:3], ["val_loss", "tokens_per_s"], BOUNDS) == pytest.approx([0.25])
    assert history([trial(0, [2.0, 1000.0], 1)], ["val_loss", "tokens_per_s"], BOUNDS) == [1.0]


def test_the_parent_run_logs_one_step_per_completed_trial_and_a_resume_logs_the_same_curve(tmp_path):
    hv = {"val_loss": [2.0, 4.0], "peak_mem_mb": [50.0, 150.0]}
    path = write_study(
        tmp_path, objectives=[{"metric": "val_loss"}, {"metric": "peak_mem_mb"}], hypervolume=hv
    )
    study = load_study(path)
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    # seed-major grid: baseline s0 (0.5, 0.5), sat s0 (0.4, 0.6), baseline s1, sat s1 (dominated)
    expected = [0.25, 0.25 + 0.1 * 0.4, 0.29, 0.29]
    assert history(optuna_trials(study), ["val_loss", "peak_mem_mb"], hv) == pytest.approx(expected)
    assert launch(load_study(path), fit=fake_fit.fit, probe=fake_fit.PROBE) == 0  # a resume: nothing to run
    parents = mlflow_runs(study, "parent")
    assert len(parents) == 2
    for parent in parents:
        points = client(study.mlflow_uri()).get_metric_history(parent.info.run_id, METRIC)
        assert [p.step for p in sorted(points, key=lambda p: p.step)] == [1, 2, 3, 4]
        assert [p.value for p in sorted(points, key=lambda p: p.step)] == pytest.approx(expected)


def test_a_study_without_bounds_logs_no_history(tmp_path):
    study = load_study(write_study(tmp_path))
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    (parent,) = mlflow_runs(study, "parent")
    assert METRIC not in parent.data.metrics


def test_the_bounds_are_part_of_the_fingerprint(tmp_path):
    objectives = [{"metric": "val_loss"}, {"metric": "peak_mem_mb"}]
    one = load_study(
        write_study(
            tmp_path, objectives=objectives, hypervolume={"val_loss": [2, 4], "peak_mem_mb": [50, 150]}
        )
    )
    two = load_study(
        write_study(
            tmp_path, objectives=objectives, hypervolume={"val_loss": [2, 5], "peak_mem_mb": [50, 150]}
        )
    )
    assert one.fingerprint() != two.fingerprint()
    assert "hypervolume  history on fixed bounds [best, worst]: val_loss [2, 4], peak_mem_mb [50, 150]" in (
        plan_text(one)
    )
    assert "hypervolume" not in " ".join(
        load_study(write_study(tmp_path, objectives=objectives)).fingerprint()
    )
