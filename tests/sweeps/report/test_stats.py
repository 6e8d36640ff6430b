"""Front statistics against hand-computed values: t intervals, pairing, verdicts, p_front."""

import math

import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from sweeps.report.fronts import compute
from sweeps.report.outputs import conclusions_text, table_text
from sweeps.report.stats import interval, p_front, paired
from sweeps.report.verdicts import verdict

T_975_2 = 4.302652729911275  # Student t, 97.5% quantile, 2 degrees of freedom


def test_t_interval_by_hand():
    ci = interval([1.0, 2.0, 3.0])
    assert ci["mean"] == 2.0 and ci["std"] == pytest.approx(1.0)
    assert ci["hi"] - ci["mean"] == pytest.approx(T_975_2 / math.sqrt(3))
    one = interval([5.0])
    assert one["mean"] == 5.0 and math.isnan(one["lo"])


REF = {0: 2.0, 1: 2.5, 2: 3.0}  # seed -> val_loss: the seeds differ a lot
X = {0: 1.9, 1: 2.45, 2: 2.88}  # ... and X is a little better on every one of them


def test_pairing_turns_an_indistinguishable_pair_into_a_decided_one():
    x, ref = interval(list(X.values())), interval(list(REF.values()))
    assert x["lo"] < ref["mean"] < x["hi"] and ref["lo"] < x["mean"] < ref["hi"]  # unpaired: overlap
    diff = paired(X, REF)  # differences -0.10, -0.05, -0.12
    assert diff["mean"] == pytest.approx(-0.09)
    std = math.sqrt((0.01**2 + 0.04**2 + 0.03**2) / 2)
    assert diff["std"] == pytest.approx(std)
    assert diff["hi"] == pytest.approx(-0.09 + T_975_2 * std / math.sqrt(3))
    assert diff["hi"] < 0
    assert verdict(diff, "minimize") == "better" and verdict(diff, "maximize") == "worse"
    # shuffled pairing (seed labels swapped): the same values no longer decide anything
    shuffled = paired({0: 1.9, 1: 2.88, 2: 2.45}, REF)
    assert verdict(shuffled, "minimize") == "indistinguishable"


def test_one_pair_decides_only_exact_metrics():
    one = paired({0: 101.0}, {0: 100.0})
    assert verdict(one, "minimize") == "undecided"
    assert verdict(one, "minimize", exact=True) == "worse"
    same = paired({0: 100.0, 1: 100.0}, {0: 100.0, 1: 100.0})
    assert verdict(same, "minimize", exact=True) == "indistinguishable"


def test_p_front_by_construction():
    metrics, directions = ["loss", "speed"], ["minimize", "maximize"]
    dominant = {"loss": {0: 1.0, 1: 1.1}, "speed": {0: 10.0, 1: 10.0}}
    dominated = {"loss": {0: 2.0, 1: 2.1}, "speed": {0: 5.0, 1: 5.0}}
    assert p_front([dominant, dominated], metrics, directions, replicates=200) == [1.0, 0.0]
    # a twin within seed noise: on the front in some replicates, not in all
    twin = {"loss": {0: 0.9, 1: 1.3}, "speed": {0: 10.0, 1: 10.0}}
    p = p_front([dominant, twin], metrics, directions, replicates=400)
    assert 0.2 < p[0] < 0.9 and 0.2 < p[1] < 0.9


def trial(number, label, seed, values):
    return create_trial(
        state=TrialState.COMPLETE,
        values=values,
        params={"design": label},
        distributions={"design": CategoricalDistribution(["base", "x", "slow", "far"])},
        user_attrs={"point": label, "seed": seed},
    )


def test_compute_gives_verdicts_against_the_reference_and_says_them():
    objectives = [("val_loss", "minimize"), ("peak_mem_mb", "minimize")]
    trials = [trial(i, "base", s, [REF[s], 100.0]) for i, s in enumerate(REF)]
    trials += [trial(3 + i, "x", s, [X[s], 101.0]) for i, s in enumerate(X)]
    result = compute(trials, objectives, reference="base", replicates=200)
    rows = {r["point"]: r for r in result["points"]}
    assert rows["x"]["verdict"] == {"val_loss": "better", "peak_mem_mb": "worse"}
    assert rows["base"]["verdict"] == {} and result["reference"] == "base"
    assert rows["x"]["val_loss_ci"][0] < 2.41 < rows["x"]["val_loss_ci"][1]
    assert rows["x"]["p_front"] == 1.0 and rows["base"]["p_front"] == 1.0  # a trade-off: both on it
    text = conclusions_text(result)
    assert "val_loss -0.0900 ± 0.0896 (better, 3 seed(s))" in text and "peak_mem_mb 1.010x (worse)" in text
    assert "reference" in table_text(result)
    # one tested comparison (memory is exact, no test): the plain 95% t interval
    assert "verdicts and ± at 95%, 1 comparison (nothing to adjust), one look (t test)" in text


NEAR = {0: 2.01, 1: 2.49, 2: 3.005}  # within 0.01 of REF on every seed
FAR = {0: 1.93, 1: 2.46, 2: 2.91}  # better by 0.07, 0.04, 0.09: p = 0.044


def family_trials(points):
    out = [trial(i, "base", s, [REF[s]]) for i, s in enumerate(REF)]
    for label, values in points.items():
        out += [trial(len(out) + i, label, s, [values[s]]) for i, s in enumerate(values)]
    return out


def test_holm_judges_the_points_as_one_family_and_says_so():
    """X alone is better at 95%; among three comparisons Holm asks for p <= 0.05/3 first, which
    its three seeds do not reach (p = 0.0496); without the adjustment it stays better."""
    from sweeps.report.verdicts import Rule

    trials = family_trials({"x": X, "slow": NEAR, "far": FAR})
    result = compute(trials, [("val_loss", "minimize")], reference="base", replicates=50,
                     rule=Rule(n_min=3, n_max=3))  # fmt: skip
    rows = {r["point"]: r for r in result["points"]}
    assert rows["x"]["verdict"] == {"val_loss": "indistinguishable"}
    assert rows["x"]["diff"]["val_loss"]["p"] == pytest.approx(0.0496, abs=1e-4)
    assert result["verdicts"]["adjustment"] == "holm" and result["verdicts"]["family"] == 3
    assert "Holm over 3 comparison(s)" in conclusions_text(result) and "Holm over 3" in table_text(result)
    plain = compute(trials, [("val_loss", "minimize")], reference="base", replicates=50,
                    rule=Rule(family="none", n_min=3, n_max=3))  # fmt: skip
    assert {r["point"]: r["verdict"]["val_loss"] for r in plain["points"] if r["verdict"]}["x"] == "better"
    assert "no family adjustment over 3 comparison(s)" in conclusions_text(plain)


def test_margins_separate_equivalent_from_undecided_and_say_what_the_seeds_could_see():
    from sweeps.report.verdicts import Rule

    trials = family_trials({"x": NEAR})
    wide = compute(trials, [("val_loss", "minimize")], reference="base", replicates=50,
                   rule=Rule(margins={"val_loss": 0.1}, n_min=3, n_max=3))  # fmt: skip
    assert {r["point"]: r["verdict"] for r in wide["points"]}["x"] == {"val_loss": "equivalent"}
    tight = compute(trials, [("val_loss", "minimize")], reference="base", replicates=50,
                    rule=Rule(margins={"val_loss": 0.01}, n_min=3, n_max=3))  # fmt: skip
    x = next(r for r in tight["points"] if r["point"] == "x")
    diff = x["diff"]["val_loss"]
    assert x["verdict"] == {"val_loss": "undecided"}
    sd = diff["std"]  # differences +0.01, -0.01, +0.005
    assert diff["detectable"] == pytest.approx((T_975_2 + 1.0607) * sd / math.sqrt(3), rel=1e-3)
    assert diff["seeds_to_decide"] > 3
    text = conclusions_text(tight)
    assert f"(undecided, 3 seed(s); detectable at 80% power: ±{diff['detectable']:.4f};" in text
    assert f"{diff['seeds_to_decide']} seeds to decide at the margin)" in text
    none = compute(trials, [("val_loss", "minimize")], reference="base", replicates=50)
    assert {r["point"]: r["verdict"] for r in none["points"]}["x"] == {"val_loss": "indistinguishable"}


def test_a_ratio_that_rounds_to_one_says_the_difference():
    """Exact memory 100.03 against 100.00 MiB is worse, and 1.000x alone would hide why."""
    objectives = [("peak_mem_mb", "minimize")]
    trials = [trial(0, "base", 0, [100.0]), trial(1, "x", 0, [100.03]), trial(2, "slow", 0, [100.0])]
    text = conclusions_text(compute(trials, objectives, reference="base", replicates=50))
    assert "x: peak_mem_mb 1.000x (+0.03) (worse)" in text
    assert "slow: peak_mem_mb 1.000x (indistinguishable)" in text


def test_without_a_reference_there_are_no_verdicts():
    trials = [trial(0, "x", 0, [1.0]), trial(1, "slow", 0, [2.0])]
    result = compute(trials, [("val_loss", "minimize")], reference=None, replicates=50)
    assert result["reference"] is None and all(r["verdict"] == {} for r in result["points"])
    assert "no reference point" in conclusions_text(result)


def test_timing_rounds_use_medians_so_one_disturbed_round_flips_nothing():
    base = {f"round{r}": 1000.0 for r in range(5)}
    slow = {"round0": 900.0, "round1": 910.0, "round2": 3000.0, "round3": 905.0, "round4": 895.0}
    assert interval(list(slow.values()))["mean"] > 1000  # the mean is fooled by the one outlier
    diff = paired(slow, base, robust=True)
    assert diff["mean"] == -95.0 and (diff["lo"], diff["hi"]) == (-105.0, 2000.0)
    four = {**slow, "round2": 920.0}  # every round slower: the sign test's p = 2/32, not below 5%
    assert verdict(paired(four, base, robust=True), "maximize", robust=True) == "indistinguishable"
    six = {**four, "round5": 930.0}
    six_base = {**base, "round5": 1000.0}
    assert verdict(paired(six, six_base, robust=True), "maximize", robust=True) == "worse"  # p = 2/64


def test_loss_at_equal_time_interpolates_every_curve_at_the_fastest_budget():
    from sweeps.report.equal_cost import add_equal_time

    budget = 4000.0
    curve = lambda final: [(budget * s / 4, final + (4 - s) * 0.5) for s in (1, 2, 3, 4)]  # noqa: E731
    rows = [{"point": "fast", "tokens_per_s": 1000.0}, {"point": "slow", "tokens_per_s": 800.0}]
    horizon = add_equal_time(rows, {"fast": curve(3.0), "slow": curve(2.8)})
    assert horizon == 4.0  # the fast design's whole budget
    assert rows[0]["val_loss_curve_at_equal_time"] == 3.0
    # slow has seen 3200 tokens by then: a fifth of the way from 3000 (loss 3.3) to 4000 (2.8)
    assert rows[1]["val_loss_curve_at_equal_time"] == pytest.approx(3.3 - 0.5 * 0.2)
    # a point validated only at its end, after the horizon: nothing measured there, no value
    late = [{"point": "fast", "tokens_per_s": 1000.0}, {"point": "once", "tokens_per_s": 800.0}]
    add_equal_time(late, {"fast": curve(3.0), "once": [(budget, 2.8)]})
    assert "val_loss_curve_at_equal_time" not in late[1]
    assert late[1]["equal_time_left_out"] == "first validation at 5 s, after the horizon (4 s)"
    assert "equal_time_left_out" not in late[0]


def test_a_front_of_one_point_writes_its_table_and_no_figures(tmp_path):
    from sweeps.report.outputs import write_files

    objectives = [("val_loss", "minimize"), ("peak_mem_mb", "minimize")]
    result = compute([trial(i, "base", s, [REF[s], 100.0]) for i, s in enumerate(REF)], objectives, "base")
    assert [r["p_front"] for r in result["points"]] == [1.0]  # alone on the front, no bootstrap needed
    assert sorted(p.name for p in write_files(result, tmp_path)) == ["pareto.csv", "pareto.json"]


def test_labels_of_points_drawn_on_one_another_are_stacked():
    from sweeps.report.outputs import label_stack

    # three designs with one memory value and close losses, one apart: the three labels stack
    xs, ys = [1.740, 1.7401, 1.80, 1.7402], [110.7, 110.7, 120.0, 110.7]
    assert label_stack(xs, ys) == [0, 1, 0, 2]
    assert label_stack([1.0], [5.0]) == [0] and label_stack([2.0, 2.0], [3.0, 3.0]) == [0, 1]
