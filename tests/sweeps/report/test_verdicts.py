"""Verdicts keep their stated error rate: planned looks, Holm, equivalence words, calibration.

The calibration tests simulate null studies with the launcher's own verdict functions
(`sweeps.report.calibrate.simulate`) and hold the false-verdict rates to the level plus three
Monte Carlo standard errors; the naive rule (every look at the full level) must fail the same check.
"""

import json
import math

import numpy as np
import pytest
from scipy.stats import t

from sweeps.report import calibrate
from sweeps.report.sequential import Design
from sweeps.report.verdicts import (
    Rule,
    detectable,
    holm,
    looks_text,
    rule_for,
    seeds_to_decide,
    sign_test_p,
    words,
)

SIMS = 20_000


def within_level(rates, key, level=0.05):
    return rates[key] <= level + 3 * rates["mc_error"][key]


@pytest.mark.parametrize("repeats", [(3, 3), (3, 5), (2, 5), (3, 8)])
@pytest.mark.parametrize("points", [1, 4])
def test_null_verdicts_stay_within_the_level(repeats, points):
    rates = calibrate.simulate(Design(*repeats), points, effect=0.0, sims=SIMS, seed=1)
    assert within_level(rates, "false_verdict_rate"), rates
    assert within_level(rates, "familywise_rate"), rates  # Holm over the K points


def test_the_naive_rule_fails_the_same_check():
    """Each look at the full level (the rule before planned looks): about 10% with 3 to 5 seeds."""
    rates = calibrate.simulate(Design(3, 5, "naive"), 1, effect=0.0, sims=SIMS, family="none", seed=1)
    assert not within_level(rates, "false_verdict_rate") and rates["false_verdict_rate"] > 0.08
    four = calibrate.simulate(Design(3, 3), 4, effect=0.0, sims=SIMS, family="none", seed=1)
    assert not within_level(four, "familywise_rate")  # four comparisons without Holm: ~18%


def test_a_real_effect_is_found_and_in_the_right_direction():
    rates = calibrate.simulate(Design(3, 5), 4, effect=2.0, sims=4000, seed=2)
    assert rates["power"] > 0.3 and rates["false_verdict_rate"] == 0.0
    assert rates["mean_seeds"] < 5  # decided points stop adding seeds


def test_equivalence_needs_a_margin_and_is_found_when_there_is_none_to_see():
    none = calibrate.simulate(Design(5, 5), 1, effect=0.0, sims=4000, seed=3)
    assert none["equivalent_rate"] == 0.0 and none["undecided_rate"] > 0.9
    wide = calibrate.simulate(Design(3, 5), 1, effect=0.0, sims=4000, margin=3.0, seed=3)
    assert wide["equivalent_rate"] > 0.5 and wide["mean_seeds"] < 5  # equivalent points stop too


def test_cli_writes_the_rates(tmp_path):
    out = tmp_path / "rates.json"
    assert calibrate.main(["--repeats", "3..4", "--points", "2", "--sims", "500", "--json", str(out)]) == 0
    rates = json.loads(out.read_text())
    assert {"false_verdict_rate", "familywise_rate", "power", "equivalent_rate"} <= set(rates)
    assert rates["settings"]["repeats"] == "3..4" and "O'Brien-Fleming" in rates["settings"]["rule"]


def test_a_measured_shape_is_drawn_at_unit_spread():
    """A normal sample of any location and scale gives the normal's rates; one far value (a heavy
    tail) changes them: the shape, not the measured SD, is what `--shape` adds."""
    normal = calibrate.simulate(Design(6, 6), 1, effect=0.0, sims=8000, margin=1.5, seed=4)
    draws = 3.0 + 5.0 * np.random.default_rng(0).standard_normal(4000)
    drawn = calibrate.simulate(Design(6, 6), 1, effect=0.0, sims=8000, margin=1.5, seed=4, sample=draws)
    error = normal["mc_error"]["equivalent_rate"] + drawn["mc_error"]["equivalent_rate"]
    assert abs(drawn["equivalent_rate"] - normal["equivalent_rate"]) < 3 * error
    assert within_level(normal, "false_verdict_rate", 0.05)
    heavy = [*np.random.default_rng(1).standard_normal(19), 8.0]  # one seed far out
    # no margin: a rejection inside one would read `equivalent`, which is no false verdict at the null
    tail = calibrate.simulate(Design(6, 6), 1, effect=0.0, sims=8000, seed=4, sample=heavy)
    assert tail["false_verdict_rate"] > 0.1  # the t test's level does not hold there
    assert drawn["settings"]["shape"] == "4000 measured values" and normal["settings"]["shape"] == "normal"


def test_resampling_few_values_moves_the_level_by_itself():
    """Why `--shape` prints `normal_same_size`: 12 normal values resampled give the t test at 6
    seeds a false rate of ~4% at a 2.5% level (ties lower the sample SD), many values ~2.5%."""
    rule = {"sims": 40_000, "level": 0.975, "points": 1, "effect": 0.0}
    few = calibrate.normal_same_size(Design(6, 6), 12, **rule)["false_verdict_rate"]["mean"]
    many = calibrate.normal_same_size(Design(6, 6), 2000, **rule)["false_verdict_rate"]["mean"]
    assert few > 0.031 and abs(many - 0.025) < 0.005  # measured 0.036 and 0.025


def test_cli_reads_a_shape_and_refuses_a_bad_file_with_exit_2(tmp_path, capsys):
    values = tmp_path / "diffs.txt"
    values.write_text("# paired differences\n-0.02, -0.01\n0.005 0.01\n")
    out = tmp_path / "rates.json"
    assert calibrate.main(["--repeats", "4", "--points", "1", "--sims", "500", "--shape", str(values),
                           "--json", str(out)]) == 0  # fmt: skip
    rates = json.loads(out.read_text())
    assert rates["settings"]["shape"] == "4 measured values"
    reference = rates["normal_same_size"]  # the yardstick: normal samples of 4 values
    assert reference["size"] == 4 and reference["sets"] == calibrate.REFERENCE_SETS
    low, high = reference["false_verdict_rate"]["min"], reference["false_verdict_rate"]["max"]
    assert low <= reference["false_verdict_rate"]["mean"] <= high and low < high
    capsys.readouterr()
    for text in ("0.1 0.1 0.1\n", "0.1 x 0.2\n", "0.1 0.2\n"):
        values.write_text(text)
        with pytest.raises(SystemExit) as exit_:
            calibrate.main(["--repeats", "4", "--sims", "10", "--shape", str(values)])
        assert exit_.value.code == 2
        message = capsys.readouterr().err
        assert f"--shape {values}" in message and "allowed: a text file of at least 3 numbers" in message
    with pytest.raises(SystemExit) as exit_:
        calibrate.main(["--repeats", "4", "--sims", "10", "--shape", str(tmp_path / "missing.txt")])
    assert exit_.value.code == 2 and "cannot read it" in capsys.readouterr().err


def test_one_look_is_the_plain_t_test():
    design = Design(3, 3)
    assert design.boundary(3, 0.05) == pytest.approx(t.isf(0.025, 2), rel=1e-3)
    assert design.p_value(3, t.isf(0.005, 2)) == pytest.approx(0.01, rel=1e-2)
    assert design.p_value(3, np.inf) == 0.0 and design.p_value(1, 5.0) == 1.0


def test_planned_looks_raise_the_bar_and_invert_to_p_values():
    design = Design(3, 5)
    bounds = design.boundary([3, 4, 5], 0.05)
    assert bounds[0] > bounds[1] > bounds[2] > t.isf(0.025, 4)  # O'Brien-Fleming: strict early
    assert np.allclose(design.p_value([3, 4, 5], bounds), 0.05, rtol=1e-6)
    pocock = Design(3, 5, "pocock").boundary([3, 4, 5], 0.05)
    assert pocock[0] < bounds[0] and pocock[2] > bounds[2]  # spends more early, less at the end
    with pytest.raises(ValueError, match="spending: given 'linear'; allowed: obrien_fleming, pocock"):
        Design(3, 5, "linear")


def test_holm_by_hand():
    levels, rejected = holm([0.01, 0.04, 0.03], 0.05)
    # sorted 0.01 <= 0.05/3: rejected; 0.03 > 0.05/2: stop, the rest judged at 0.05/2
    assert rejected.tolist() == [True, False, False]
    assert levels == pytest.approx([0.05 / 3, 0.025, 0.025])
    levels, rejected = holm([0.01, 0.02], 0.05)
    assert rejected.tolist() == [True, True] and levels == pytest.approx([0.025, 0.05])
    levels, rejected = holm([0.01, 0.04, 0.03], 0.05, "none")
    assert rejected.all() and (levels == 0.05).all()
    # Bonferroni: each at 0.05/3, whatever the others' p-values
    levels, rejected = holm([0.01, 0.04, 0.03], 0.05, "bonferroni")
    assert rejected.tolist() == [True, False, False] and levels == pytest.approx([0.05 / 3] * 3)
    assert holm([0.9, 0.03], 0.05, "bonferroni")[0] == pytest.approx([0.025, 0.025])


def test_words_separate_equivalent_from_too_few_seeds():
    lo, hi = np.array([-0.004, -0.03, -0.03, 0.01]), np.array([0.006, 0.05, 0.05, 0.02])
    rejected = np.array([False, False, False, True])
    margin = np.array([0.01, 0.01, np.nan, 0.01])
    said = words((lo + hi) / 2, lo, hi, rejected, True, margin).tolist()
    assert said == ["equivalent", "undecided", "indistinguishable", "worse"]
    # a difference shown smaller than the margin is `equivalent`, whether or not it excludes 0
    inside = words(-0.005, -0.008, -0.002, True, True, 0.01).tolist()
    assert inside == "equivalent" and words(-0.005, -0.012, -0.002, True, True, 0.01).tolist() == "better"
    assert words(0.1, np.nan, np.nan, False, True).tolist() == "undecided"  # one seed: no interval


def test_power_and_seeds_by_hand():
    # 3 seeds, paired sd 0.03, one look at 5%: (t_{.975,2} + t_{.8,2}) * 0.03 / sqrt(3)
    mdd = detectable(0.03, 3, Design(3, 3), 0.05)
    assert mdd == pytest.approx((t.isf(0.025, 2) + t.ppf(0.8, 2)) * 0.03 / math.sqrt(3), rel=1e-3)
    n = seeds_to_decide(0.03, 0.01, 0.05)
    need = lambda k: (t.isf(0.025, k - 1) + t.ppf(0.9, k - 1)) * 0.03 / math.sqrt(k)  # noqa: E731
    assert need(n) <= 0.01 < need(n - 1)
    assert seeds_to_decide(0.03, math.nan, 0.05) is None


def test_sign_test_and_rule_checks():
    assert sign_test_p([-1.0] * 6) == pytest.approx(2 / 64)
    assert sign_test_p([-1.0] * 5) == pytest.approx(2 / 32)  # five rounds cannot reach 5%
    with pytest.raises(ValueError, match="verdicts.family: given 'sidak'; allowed: holm, bonferroni, none"):
        Rule(family="sidak")
    rule = Rule(n_min=3, n_max=5, margins={"val_loss": 0.01})
    assert rule.describe(4) == (
        "95%, Holm over 4 comparison(s), looks at 3..5 seeds, Lan-DeMets O'Brien-Fleming-type alpha"
        " spending, margins val_loss +-0.01"
    )


def test_the_study_file_sets_the_rule_and_refuses_what_it_cannot_use(tmp_path):
    from arch.configtree import ConfigError
    from sweeps.run import launch
    from sweeps.study import load_study
    from tests.sweeps.helpers import write_study

    study = load_study(
        write_study(tmp_path, repeats={"min": 2, "max": 4}, verdicts={"family": "none", "spending": "pocock"},
                    margins={"val_loss": 0.01})
    )  # fmt: skip
    rule = rule_for(study)
    assert (rule.family, rule.spending, rule.design.looks, dict(rule.margins)) == (
        "none", "pocock", range(2, 5), {"val_loss": 0.01})  # fmt: skip
    plan = launch.plan_text(study)
    assert "verdicts     95%, no family adjustment over 2 comparison(s), looks at 2..4 seeds" in plan
    assert plan.count("look at ") == 3 and "paired |t| >= " in plan
    bad = {
        "margins": ({"tokens": 0.01}, r"margins\.tokens: given 'tokens'; allowed: an objective \(val_loss,"),
        "verdicts": ({"family": "sidak"}, r"verdicts\.family: given 'sidak'; allowed: holm, bonferroni,"),
    }
    for i, (key, (value, message)) in enumerate(bad.items()):
        with pytest.raises(ConfigError, match=message):
            load_study(write_study(tmp_path, name=f"bad{i}", **{key: value}))
    with pytest.raises(ConfigError, match=r"margins\.val_loss: given 0\.0; allowed: a number > 0"):
        load_study(write_study(tmp_path, name="bad9", margins={"val_loss": 0}))


def test_a_relative_margin_is_a_fraction_of_the_reference_and_decides_first():
    """The default study's throughput: 3% slower in every probe round is `worse` without a margin
    and `equivalent` within +-10% of the baseline's speed (the margin a fraction, not tokens/s)."""
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import TrialState, create_trial

    from sweeps.report.fronts import compute

    def trial(label, seed):
        return create_trial(state=TrialState.COMPLETE, values=[2.0 + 0.01 * seed], params={"design": label},
                            distributions={"design": CategoricalDistribution(["base", "x"])},
                            user_attrs={"point": label, "seed": seed})  # fmt: skip

    trials = [trial(label, s) for label in ("base", "x") for s in range(3)]
    speed = 10_000.0
    slower = {f"round{r}": speed * (0.97 + 0.001 * (r % 3)) for r in range(20)}
    same = {f"round{r}": speed for r in range(20)}
    rounds = {"base": {"tokens_per_s": same}, "x": {"tokens_per_s": slower}}
    objectives = [("tokens_per_s", "maximize")]
    robust = frozenset({"tokens_per_s"})

    def word(margins):
        rule = Rule(margins=margins, n_min=3, n_max=3)
        result = compute(trials, objectives, "base", rounds, 50, robust, rule)
        return next(r for r in result["points"] if r["point"] == "x")["verdict"]["tokens_per_s"]

    assert word({}) == "worse"
    assert word({"tokens_per_s": 0.1}) == "equivalent"  # +-1000 tokens/s around 10000
    assert word({"tokens_per_s": 0.02}) == "worse"  # 3% is outside +-2%
    assert looks_text(Rule(family="bonferroni", n_min=6, n_max=6), 2)[1].endswith(
        "Bonferroni's level (0.0250): |t| >= 3.163")  # fmt: skip
