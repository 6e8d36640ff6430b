"""Pareto fronts on hand-made points: ranks, per-point means, hypervolume, early-stopped runs."""

import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from sweeps.report.dominance import dominates, hypervolume, nondominated_ranks
from sweeps.report.fronts import compute
from sweeps.report.outputs import table_text


def test_dominance_and_ranks():
    assert dominates([1, 1], [2, 1]) and not dominates([1, 1], [1, 1]) and not dominates([1, 2], [2, 1])
    pts = [[1, 5], [2, 2], [5, 1], [3, 3], [4, 4], [2, 2]]
    assert nondominated_ranks(pts) == [0, 0, 0, 1, 2, 0]


def test_hypervolume_by_hand():
    assert hypervolume([[0.5, 0.5]], [1, 1]) == pytest.approx(0.25)
    # union of [0,1]x[0.5,1] and [0.5,1]x[0,1] minus nothing: 0.5 + 0.5 - 0.25
    assert hypervolume([[0, 0.5], [0.5, 0]], [1, 1]) == pytest.approx(0.75)
    assert hypervolume([[0.5, 0.5, 0.5]], [1, 1, 1]) == pytest.approx(0.125)
    assert hypervolume([[0, 0.5, 0.5], [0.5, 0, 0.5]], [1, 1, 1]) == pytest.approx(0.375)
    assert hypervolume([[2, 0]], [1, 1]) == 0.0


def trial(number, label, values, state=TrialState.COMPLETE):
    return create_trial(
        state=state,
        values=values if state == TrialState.COMPLETE else None,
        params={"design": label},
        distributions={"design": CategoricalDistribution(["a", "b", "c", "d"])},
        user_attrs={"point": label},
    )


def test_fronts_use_per_point_means_and_skip_early_stopped_runs():
    objectives = [("val_loss", "minimize"), ("tokens_per_s", "maximize")]
    trials = [
        trial(0, "a", [3.0, 100.0]),
        trial(1, "a", [3.2, 100.0]),  # a: mean loss 3.1, fastest
        trial(2, "b", [2.0, 50.0]),
        trial(3, "b", [2.2, 70.0]),  # b: mean 2.1 / 60: best loss
        trial(4, "c", [3.5, 40.0]),  # c: dominated by a and b
        trial(5, "d", None, TrialState.PRUNED),  # stopped early by ASHA: never in a front
        trial(6, "d", None, TrialState.FAIL),
    ]
    result = compute(trials, objectives)
    rows = {r["point"]: r for r in result["points"]}
    assert set(rows) == {"a", "b", "c"}
    assert rows["a"]["val_loss"] == pytest.approx(3.1) and rows["a"]["seeds"] == 2
    assert rows["b"]["tokens_per_s"] == pytest.approx(60.0)
    assert rows["b"]["val_loss_std"] == pytest.approx(0.1414, abs=1e-3)
    assert {p: r["rank"] for p, r in rows.items()} == {"a": 0, "b": 0, "c": 1}
    assert sorted(result["front"]) == ["a", "b"]
    assert sorted(result["pairs"]["val_loss_vs_tokens_per_s"]) == ["a", "b"]
    # normalised (minimisation): a=(0.786, 0), b=(0, 0.667), c=(1, 1); ref 1.1
    a, b = (1.0 / 1.4, 0.0), (0.0, 2.0 / 3.0)
    expected = hypervolume([a, b], [1.1, 1.1]) / 1.21
    assert result["hypervolume"] == pytest.approx(expected)
    assert "hypervolume" in table_text(result)
