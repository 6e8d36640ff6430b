"""The recall metrics' own tests (sweeps.report.exact_tests) and how a study's rule uses them."""

import math

import numpy as np
import pytest

from sweeps.report import calibrate, exact_tests
from sweeps.report.verdicts import Rule, judge
from trainers import metrics
from trainers.metrics import Metric


def test_the_permutation_test_is_exact_by_hand():
    assert exact_tests.permutation_p([0.1] * 6) == pytest.approx(2 / 64)  # only all-kept or all-flipped
    assert exact_tests.permutation_p([0.5, 0.6, 0.4]) == pytest.approx(2 / 8)  # three seeds: never below 0.25
    assert exact_tests.permutation_p([0.3, -0.3]) == 1.0
    assert exact_tests.permutation_p([]) == 1.0
    big = np.random.default_rng(0).normal(0.2, 0.1, 20)  # past EXACT_UP_TO: a sample of arrangements
    assert exact_tests.permutation_p(big) < 0.01


def test_the_permutation_interval_stays_in_the_metric_range_and_shrinks_with_seeds():
    assert exact_tests.permutation_interval([-0.35, 0.2, -0.5], 0.05, (-1, 1)) == (
        -1,
        1,
    )  # 3 seeds: all of it
    d = np.random.default_rng(1).normal(0.1, 0.05, 10)
    lo, hi = exact_tests.permutation_interval(d, 0.05, (-1, 1))
    assert -1 < lo < d.mean() < hi < 1 and hi - lo < 0.2
    assert exact_tests.permutation_p(d - (lo - 0.01)) <= 0.05 < exact_tests.permutation_p(d - (lo + 0.01))
    assert all(math.isnan(v) for v in exact_tests.permutation_interval([0.1], 0.05))


def test_the_log_rank_sees_earlier_events_and_censors_at_the_budget():
    budget = 16.0
    earlier, later = [1.0, 2, 3, 4, 5, 6], [10.0, 11, 12, 13, 14, 15]
    p, o_minus_e = exact_tests.logrank_p(earlier, later, budget)
    assert p == pytest.approx(2 / 64) and o_minus_e > 0  # the design's events come first
    p, o_minus_e = exact_tests.logrank_p([budget] * 6, later, budget)  # never, against always
    assert p == pytest.approx(2 / 64) and o_minus_e < 0
    assert exact_tests.logrank_p([budget] * 3, [budget + 5] * 3, budget) == (1.0, 0.0)  # no event at all
    # observed minus expected by hand: times 1 (design) and 2 (reference), both events
    stat = exact_tests.logrank_statistic(np.array([1.0, 2.0]), np.array([True, True]), np.array([[1, 0]]))
    assert stat.tolist() == pytest.approx([1 - 1 / 2])  # at t=1 two at risk, one of them the design's


def test_seeds_to_decide_come_from_the_same_tests():
    needed = exact_tests.seeds_to_decide_logrank([1.0, 2, 3], [10.0, 11, 12], 16.0, 0.05)
    assert needed is not None and 5 <= needed <= 8  # 2/2^n <= 0.05 needs n >= 6; resampling ties cost a few
    assert exact_tests.seeds_to_decide_logrank([16.0] * 3, [16.0] * 3, 16.0, 0.05) is None
    near = exact_tests.seeds_to_decide_permutation([0.01, -0.02, 0.015, -0.005], 0.1, 0.05)
    far = exact_tests.seeds_to_decide_permutation([0.5, -0.5, 0.4, -0.45], 0.1, 0.05)
    assert near is not None and (far is None or far > near)


def test_judge_names_each_test_and_keeps_intervals_in_range():
    auc = {"metric": "reserved_recall_auc", "direction": "maximize", "kind": "permutation",
           "diffs": [-0.5, 0.1, -0.05], "mean": -0.15, "std": 0.3, "n": 3, "bounds": (-1.0, 1.0)}  # fmt: skip
    tokens = {"metric": "reserved_recall_tokens", "direction": "minimize", "kind": "logrank", "mean": -9.0,
              "std": 1.0, "n": 6, "pairs": {"x": [1.0, 2, 3, 4, 5, 6], "ref": [16.0] * 6},
              "censor_at": 16.0}  # fmt: skip
    summary = judge([auc, tokens], Rule(family="none", margins={"reserved_recall_auc": 0.1}))
    assert (auc["lo"], auc["hi"], auc["verdict"], auc["test"]) == (-1.0, 1.0, "undecided", "permutation")
    assert tokens["verdict"] == "better" and tokens["test"] == "logrank" and math.isnan(tokens["lo"])
    assert summary["tests"] == {"reserved_recall_auc": "permutation", "reserved_recall_tokens": "logrank"}
    assert "tests: reserved_recall_auc permutation, reserved_recall_tokens logrank" in summary["rule"]
    adaptive = dict(tokens, pairs={"x": [1.0, 2, 3, 4, 5, 6], "ref": [16.0] * 6})
    judge([adaptive], Rule(n_min=4, n_max=6))  # three looks: the exact tests at a third of the level each
    assert adaptive["p"] == pytest.approx(3 * 2 / 64) and adaptive["verdict"] == "undecided"


def test_metrics_declare_their_test():
    assert metrics.test_of("reserved_recall_auc") == "permutation"
    assert metrics.test_of("reserved_recall_tokens") == "logrank"
    assert (metrics.test_of("val_loss"), metrics.test_of("tokens_per_s"), metrics.test_of("peak_mem_mb")) == (
        "t", "sign", "exact")  # fmt: skip
    assert metrics.test_of("made_up") == "t"
    bad = Metric("x", "u", "minimize", "exact", "same", test="logrank")
    assert bad.problems() == ["metric x: test: exact metrics are judged by the exact test"]
    assert (
        Metric("y", "u", "minimize", "seed", "same", test="anova").problems()[0].startswith("metric y: test:")
    )


def test_the_recall_tests_keep_their_level_on_the_recorded_trials():
    """Under the null (both designs drawn from the recall study's 12 trials) the exact tests reject
    at most at their level; a design that always recalls is found more often with more seeds."""
    for metric, sims in (("auc", 3000), ("tokens", 300)):
        null = calibrate.simulate_recall(metric, 6, sims, seed=1)
        test = null["test"]
        assert null[test]["false_verdict_rate"] <= 0.05 + 3 * null[test]["mc_error"] + 1e-9
    few = calibrate.simulate_recall("auc", 4, 2000, alternative="emerged", seed=2)
    many = calibrate.simulate_recall("auc", 10, 2000, alternative="emerged", seed=2)
    assert many["permutation"]["power"] > few["permutation"]["power"] + 0.1


def test_the_fronts_judge_recall_metrics_by_their_tests_and_censor_at_the_budget():
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import TrialState, create_trial

    from sweeps.report.fronts import compute
    from sweeps.report.outputs import conclusions_text

    def trial(label, seed, values):
        return create_trial(state=TrialState.COMPLETE, values=values, params={"design": label},
                            distributions={"design": CategoricalDistribution(["base", "x"])},
                            user_attrs={"point": label, "seed": seed})  # fmt: skip

    budget = 16.0
    base = {s: ([0.05, budget] if s < 3 else [0.6, 6.0]) for s in range(6)}  # recalls on half its seeds
    design = {s: [0.7 + 0.01 * s, 2.0 + s] for s in range(6)}  # recalls early on every seed
    trials = [trial("base", s, v) for s, v in base.items()] + [trial("x", s, v) for s, v in design.items()]
    objectives = [("reserved_recall_auc", "maximize"), ("reserved_recall_tokens", "minimize")]
    result = compute(
        trials, objectives, reference="base", replicates=50, budgets={"base": budget, "x": budget}
    )
    x = next(r for r in result["points"] if r["point"] == "x")
    auc, tokens = x["diff"]["reserved_recall_auc"], x["diff"]["reserved_recall_tokens"]
    assert auc["test"] == "permutation" and -1 <= auc["lo"] <= auc["hi"] <= 1
    assert tokens["test"] == "logrank" and tokens["censor_at"] == budget
    text = conclusions_text(result)
    assert "exact paired permutation test" in text and "paired log-rank test" in text
    assert "tests: reserved_recall_auc permutation, reserved_recall_tokens logrank" in text
    # without a budget nothing is censored: the baseline's 16s count as events, a weaker contrast
    plain = compute(trials, objectives, reference="base", replicates=50)
    plain_x = next(r for r in plain["points"] if r["point"] == "x")
    assert plain_x["diff"]["reserved_recall_tokens"]["censor_at"] == math.inf


def test_a_recall_study_censors_at_the_tokens_its_trials_train():
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import TrialState, create_trial

    from sweeps.report.analysis import budgets_of
    from sweeps.study.load import load_study

    study = load_study("studies/recall.yaml")
    point = study.planned_points()[0]
    t = create_trial(state=TrialState.COMPLETE, values=[0.5, 1.6], params=point,
                     distributions={k: CategoricalDistribution([v]) for k, v in point.items()},
                     user_attrs={"point": "p0", "seed": 0})  # fmt: skip
    assert budgets_of(study, [t]) == {"p0": 7812 * 2048}  # 16M tokens in whole steps of 16 x 128
