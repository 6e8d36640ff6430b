"""The study resolved once into its runs (sweeps.study.study_plan): every run a study makes has a
RunKey and a config; the plan never changes, and nothing writes into the Study."""

import dataclasses

import pytest

from sweeps.study import study_from_dict
from sweeps.study.run_key import TUNE, RunKey
from sweeps.study.study_plan import Split, resolve
from tests.sweeps.helpers import TRIAL

DESIGNS = {"model.residual": {"choices": {"baseline": {"kind": "none"}, "sat": {"kind": "value_residual"}}}}
TUNE_LR = {"train.lr": {"low": 1.0e-3, "high": 1.0e-2, "points": 3, "log": True}, "seeds": 2}


def study(**extra):
    tree = {"name": "t", "trial": TRIAL, "space": DESIGNS, "repeats": 2, "backend": "local", **extra}
    return study_from_dict(tree)


def test_a_run_key_has_one_id_whatever_the_order_of_its_point():
    a = RunKey.of({"model.residual": "sat", "train.lr": 0.01})
    b = RunKey.of({"train.lr": 0.01, "model.residual": "sat"})
    assert a == b and hash(a) == hash(b) and a.id == b.id and len({a, b}) == 1
    assert a.point_id == b.point_id  # what a run's record stores as its point
    tune = RunKey.of(a.point, TUNE)
    confirming = RunKey.of({"model.residual": "sat"}, overrides={"train.lr": 0.01})
    assert len({a, tune, confirming}) == 3  # stage and overrides are part of what the run is
    assert confirming.point_id == RunKey.of({"model.residual": "sat"}).point_id  # its point's seeds


def test_every_run_of_a_tuned_study_is_planned_with_its_config_and_seeds():
    s = study(tune=TUNE_LR)
    plan = resolve(s)
    values = s.tune.range.values()
    assert [k.point for k in plan.grid] == s.planned_points()
    assert len(plan.tune) == len(plan.grid) * len(values) and {k.stage for k in plan.tune} == {TUNE}
    assert len(plan.confirming) == len(plan.grid) * len(values)
    for key in plan.tune:
        assert plan.config(key).train.lr == key.point["train.lr"]
        assert [plan.seed(key, r) for r in range(plan.repeats(key))] == [0, 1]
    for key in plan.confirming:
        assert "train.lr" not in key.point and plan.config(key).train.lr == key.overrides["train.lr"]
        assert [plan.seed(key, r) for r in range(plan.repeats(key))] == [2, 3]  # after the tune seeds
    assert plan.config(plan.grid[0], seed=7).seed == 7
    assert plan.planned(plan.tune[0].point_id) == plan.tune[0]  # an enqueued run found by its record


def test_adaptive_seeds_plan_every_round_up_to_max():
    plan = resolve(study(repeats={"min": 2, "max": 5}))
    assert all(plan.repeats(k) == 5 for k in plan.grid)


def test_a_sampled_study_plans_its_points_as_they_come():
    s = study(sampler={"kind": "random", "seed": 0}, n_trials=3)
    plan = resolve(s)
    assert plan.grid == () and plan.runs() == ()
    key = RunKey.of({"model.residual": "sat"})
    assert plan.config(key).model.residual.kind == "value_residual"


def test_splits_make_a_new_plan_and_leave_the_study_and_the_old_plan_as_they_were():
    s = study(trial={**TRIAL, "train": {**TRIAL["train"], "micro_batch": "auto"}}, tune=TUNE_LR)
    plan = resolve(s)
    key = plan.confirming[0]
    assert plan.config(key).train.micro_batch == "auto"  # not measured yet
    split = Split(batch_size=4, grad_accum=2, eval_batches=4)
    split_plan = plan.with_splits({k: split for k in plan.runs()}, memory=())
    train = split_plan.config(key).train
    assert (train.micro_batch, train.batch_size, train.grad_accum, train.eval_batches) == (None, 4, 2, 4)
    assert plan.config(key).train.micro_batch == "auto"  # the plan it came from is unchanged
    assert s.trial_config(key.point, overrides=key.overrides).train.micro_batch == "auto"  # the study too
    with pytest.raises(dataclasses.FrozenInstanceError):
        split_plan.splits = {}
    with pytest.raises(TypeError):
        split_plan.splits[key] = split
    with pytest.raises(ValueError, match="changes the global batch"):
        Split(4, 4, 4).apply(plan.config(key))
