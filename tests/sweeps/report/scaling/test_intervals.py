"""Bootstrap intervals: pairing across designs, and coverage of the truth over repeated draws."""

import numpy as np
import pytest

from sweeps.report.scaling import fitting as F
from sweeps.report.scaling import intervals as B
from sweeps.report.scaling.table import Ladder
from tests.sweeps.report.scaling import synthetic as syn


@pytest.mark.parametrize("rungs", B.RESAMPLING)
def test_every_design_draws_the_same_seeds_at_every_rung(rungs):
    lad = syn.ladder(np.random.default_rng(0), {"x": syn.TRUTH, "y": syn.TRUTH})
    rng = np.random.default_rng(1)
    for _ in range(5):
        counts = B.draw_counts(lad, rng, rungs)
        x, y = counts[lad.design == "x"], counts[lad.design == "y"]
        np.testing.assert_array_equal(x, y)  # rows are in the same (rung, seed) order for both
        assert counts.sum() == len(lad.loss)
        if rungs == B.WITHIN_SIZE:  # every size keeps its share of the draws
            for n in syn.SIZES:
                assert counts[lad.params == n].sum() == len(syn.RATIOS) * 3 * 2


def test_without_seeds_rows_are_resampled_within_each_design():
    lad = syn.ladder(np.random.default_rng(0), {"x": syn.TRUTH, "y": syn.TRUTH})
    lad = Ladder(lad.design, lad.params, lad.tokens, lad.loss, None, "t")
    counts = B.draw_counts(lad, np.random.default_rng(2))
    assert counts[lad.design == "x"].sum() == counts[lad.design == "y"].sum() == len(lad.loss) / 2
    result = F.fit(lad, top=4)
    assert B.bootstrap(lad, result, 20).unit == "rows"


def _coverage(draws: int, replicates: int, seed: int) -> dict[str, float]:
    """Share of draws whose 95% intervals cover the true alpha, beta, E and the true loss at a
    target 10x beyond the ladder."""
    rng = np.random.default_rng(seed)
    target = (1e7, 2e8)
    hits = {"alpha": 0, "beta": 0, "E": 0, "target": 0}
    for i in range(draws):
        lad = syn.ladder(rng)
        result = F.fit(lad, top=4)
        boot = B.bootstrap(lad, result, replicates, seed=i)
        iv = B.parameter_intervals(boot, "all")
        for k in ("alpha", "beta", "E"):
            hits[k] += iv[k][0] <= syn.TRUTH[k] <= iv[k][1]
        lo, hi = B.percentile(boot.predict("all", [target[0]], [target[1]])[:, 0])
        hits["target"] += lo <= syn.law(syn.TRUTH, *target) <= hi
    return {k: v / draws for k, v in hits.items()}


def test_intervals_cover_the_truth_about_as_often_as_they_claim():
    # 6 draws of 40 replicates: a 95% interval that covers at its rate misses 3 or more of 6 with
    # probability 0.002; intervals shrunk towards a point, or off the truth's scale, fail.
    coverage = _coverage(draws=6, replicates=40, seed=11)
    assert min(coverage.values()) >= 4 / 6, coverage


@pytest.mark.slow
def test_intervals_calibration_over_many_draws():
    coverage = _coverage(draws=100, replicates=200, seed=12)
    assert all(0.88 <= c <= 0.995 for c in coverage.values()), coverage


def test_compute_law_replicates_bracket_the_fit_and_the_truth():
    lad = syn.ladder(np.random.default_rng(9), ratios=(20,), noise=0.005)
    result = F.fit(lad, top=4)
    boot = B.bootstrap(lad, result, 60)
    iv = B.parameter_intervals(boot, "all")
    assert set(iv) == {"E", "K", "gamma"}
    assert iv["gamma"][0] < result.designs["all"].natural["gamma"] < iv["gamma"][1]
    n, d = 1e7, 2e8  # 10x beyond the largest rung along its ratio
    lo, hi = B.percentile(boot.predict("all", [n], [d])[:, 0])
    assert lo <= syn.law(syn.TRUTH, n, d) <= hi
