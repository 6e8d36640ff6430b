"""Per-point budgets: a study whose space varies `train.tokens` runs every point for its own budget.

The ASHA horizon, the trial timeout, the grace-period check and the dry run read each point's own
resolved trial config, never the study's base trial.
"""

from __future__ import annotations

import pytest
from optuna.trial import TrialState

from arch.configtree import ConfigError
from sweeps.run import launch as launcher
from sweeps.run.launch import launch
from sweeps.study import load_study
from tests.sweeps import fake_fit
from tests.sweeps.helpers import mlflow_runs, optuna_trials, write_study

BUDGETS = [8192, 24576]


def budget_study(tmp_path, **extra):
    return write_study(tmp_path, space={"train.tokens": BUDGETS}, repeats=1, **extra)


def ran_their_own_budgets(study) -> None:
    trials = optuna_trials(study)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    assert sorted(t.params["train.tokens"] for t in trials) == BUDGETS
    runs = mlflow_runs(study, "trial")
    assert len(runs) == 2
    for run in runs:
        budget = int(run.data.params["train.tokens"])
        assert run.data.tags["sweep.status"] == "ok" and run.info.status == "FINISHED"
        assert run.data.metrics["final/tokens"] == budget
        assert run.data.metrics["tokens"] == budget  # the last step the run logged


def test_dry_run_rungs_and_timeouts_read_each_points_own_budget(tmp_path):
    study = load_study(budget_study(tmp_path, backend="ray", ray={"num_cpus": 2}, scheduler={"kind": "asha"}))
    assert study.base.train.tokens == 4096 and study.budgets == BUDGETS
    assert study.asha_rungs() == (1024, 24577)  # grace: an eighth of the smallest; horizon: the largest
    small, large = (study.trial_config(p) for p in study.planned_points())
    assert study.trial_timeout(small, 1000.0) == 10 * 8192 / 1000 + 600
    assert study.trial_timeout(large, 1000.0) == 10 * 24576 / 1000 + 600
    text = launcher.plan_text(study)
    assert "budget       8192..24576 tokens per trial (each point's below)" in text
    assert "point   1  train.tokens=24576  (24576 tokens)" in text
    assert "horizon 24576 tokens (the largest budget: one horizon for every run)" in text


def test_sampled_space_takes_its_budgets_from_the_bounds(tmp_path):
    study = load_study(
        write_study(
            tmp_path, space={"train.tokens": {"low": 8192, "high": 24576}}, sampler={"kind": "random"}
        )
    )
    assert study.budgets == BUDGETS
    assert "budget       8192..24576 tokens per trial (over the corners of the space)" in launcher.plan_text(
        study
    )


def test_grace_tokens_must_be_below_the_smallest_budget(tmp_path):
    path = budget_study(
        tmp_path, backend="ray", ray={"num_cpus": 2}, scheduler={"kind": "asha", "grace_tokens": 8192}
    )
    with pytest.raises(ConfigError) as err:
        load_study(path)
    assert (
        "scheduler.grace_tokens: given 8192; allowed: below the smallest train.tokens of the points 8192"
        in str(err.value)
    )


def test_every_point_trains_its_own_budget_with_the_default_scheduler(tmp_path):
    """The real trainer (tiny MQAR), one run a point: `tokens` ends at each point's own budget."""
    study = load_study(budget_study(tmp_path))
    assert launch(study, probe=fake_fit.PROBE) == 0
    ran_their_own_budgets(study)


def test_asha_lets_every_point_reach_its_own_budget(tmp_path, shared_ray):
    """ASHA's one horizon is the largest budget: the 24576-token run is not stopped at 8192 (a
    base-budget horizon stopped it there). The runs go one at a time, the small one first, and the
    loss falls with the tokens seen, so no rung stops either run on its merits."""
    study = load_study(
        budget_study(
            tmp_path,
            backend="ray",
            max_concurrent=1,
            ray={"num_cpus": 2, "reuse_actors": True},
            scheduler={"kind": "asha"},
        )
    )
    assert launch(study, fit=fake_fit.fit_by_tokens, probe=fake_fit.PROBE) == 0
    ran_their_own_budgets(study)
