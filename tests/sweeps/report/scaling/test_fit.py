"""The fitting core: gradients, recovery of known laws, refusals, shared exponents."""

import numpy as np
import pytest

from sweeps.report.scaling import fitting as F
from sweeps.report.scaling.law import Problem
from sweeps.report.scaling.table import Ladder
from sweeps.study.ladder import LadderError
from tests.sweeps.report.scaling import synthetic as syn


@pytest.mark.parametrize(("law", "shared"), [("joint", False), ("joint", True), ("compute", True)])
def test_analytic_gradient_matches_finite_differences(law, shared):
    rng = np.random.default_rng(0)
    lad = syn.ladder(rng, {"x": syn.TRUTH, "y": syn.TRUTH}, seeds=1)
    group = np.array([0 if d == "x" else 1 for d in lad.design])
    problem = Problem.build(law, ["x", "y"], group, lad.params, lad.tokens, lad.loss, shared)
    theta = rng.uniform(0.2, 3.0, size=(3, len(problem.names)))
    counts = rng.integers(0, 3, size=(3, len(lad.loss))).astype(float)
    _, grad = problem.objective(theta, counts)
    for j in range(len(problem.names)):
        step = np.zeros(len(problem.names))
        step[j] = 1e-6
        up, _ = problem.objective(theta + step, counts)
        down, _ = problem.objective(theta - step, counts)
        np.testing.assert_allclose(grad[:, j], (up - down) / 2e-6, rtol=1e-4, atol=1e-3)


def test_fit_recovers_a_known_law_from_a_noisy_ladder():
    rng = np.random.default_rng(3)
    lad = syn.ladder(rng, noise=0.005)
    result = F.fit(lad)
    got = result.designs["all"].natural
    assert result.law == "joint"
    assert abs(got["alpha"] - syn.TRUTH["alpha"]) < 0.05
    assert abs(got["beta"] - syn.TRUTH["beta"]) < 0.05
    assert abs(got["E"] - syn.TRUTH["E"]) < 0.05
    # the prediction 100x beyond the largest rung, within 2%
    n, d = 1e8, 2e9
    assert result.designs["all"].predict(n, d) == pytest.approx(syn.law(syn.TRUTH, n, d), rel=0.02)
    # the residuals are the noise's size (0.5% of losses near 2-4)
    assert result.designs["all"].residual_rms < 0.03


def test_one_ratio_is_reduced_to_the_compute_law_with_a_note():
    rng = np.random.default_rng(4)
    lad = syn.ladder(rng, ratios=(20,), noise=0.003)
    result = F.fit(lad)
    assert result.law == "compute"
    assert "alpha and beta" in result.notes[0] and "D/N = 20" in result.notes[0]
    fitted = result.designs["all"]
    c = 6 * 1e7 * 2e8  # 10x beyond the largest rung, along the ratio
    assert fitted.predict(1e7, 2e8) == pytest.approx(syn.law(syn.TRUTH, 1e7, 2e8), rel=0.02)
    assert 0 < fitted.natural["gamma"] < 1 and c > 0


@pytest.mark.parametrize(
    ("sizes", "ratios", "words"),
    [
        ((1e6,), (5, 20, 80), "alpha and A cannot be identified: every rung has N = 1e+06"),
        ((1e5, 1e6), (20,), "E, K and gamma"),
        ((1e6,), (20,), "one rung"),
        ((1e5, 1e6), (5, 20), "need 6 or more distinct (N, D) rungs; this ladder has 4"),
    ],
)
def test_unidentifiable_ladders_are_refused_naming_the_parameter(sizes, ratios, words):
    lad = syn.ladder(np.random.default_rng(0), sizes=sizes, ratios=ratios)
    with pytest.raises(LadderError, match="synthetic") as err:
        F.fit(lad)
    assert words in str(err.value)


def test_one_budget_is_refused_naming_beta():
    n = np.array([1e5, 3e5, 1e6, 3e6, 1e7, 3e7])
    lad = Ladder(["x"] * 6, n, np.full(6, 1e8), syn.law(syn.TRUTH, n, 1e8), None, "t.csv")
    with pytest.raises(
        LadderError, match=r"t.csv: beta and B cannot be identified: every rung has D = 1e\+08"
    ):
        F.fit(lad)


def test_batched_refits_agree_with_one_lbfgs_run_per_replicate():
    from scipy.optimize import minimize

    rng = np.random.default_rng(5)
    lad = syn.ladder(rng)
    problem = Problem.build(
        "joint", ["all"], np.zeros(len(lad.loss), int), lad.params, lad.tokens, lad.loss, False
    )
    full, _ = F.minimise(problem, F.GRIDS["joint"], top=4)
    counts = rng.multinomial(len(lad.loss), np.full(len(lad.loss), 1 / len(lad.loss)), size=6).astype(float)
    batched, values = F.refit_many(problem, full, counts)
    for s in range(len(counts)):

        def fun(theta, s=s):
            v, g = problem.objective(theta[None, :], counts[s])
            return float(v[0]), g[0]

        one = minimize(
            fun, full, jac=True, method="L-BFGS-B", bounds=F._bounds(problem), options={"ftol": 1e-14}
        )
        assert values[s] <= one.fun * (1 + 1e-4)
        assert abs(batched[s][3] - one.x[3]) < 0.01  # alpha


def test_shared_exponents_are_preferred_when_the_designs_share_them():
    rng = np.random.default_rng(6)
    other = {**syn.TRUTH, "A": 50.0, "E": 0.97}
    lad = syn.ladder(rng, {"base": syn.TRUTH, "other": other}, noise=0.005)
    shared = F.fit(lad, shared=True)
    assert shared.designs["base"].values["alpha"] == shared.designs["other"].values["alpha"]
    assert shared.designs["base"].values["a"] != shared.designs["other"].values["a"]
    report = F.compare_shared(lad)
    assert report["shared"]["parameters"] == 8 and report["separate"]["parameters"] == 10
    assert report["preferred_by_aic"] == "shared"
    assert report["rungs_held_out"] == 15
    assert report["shared"]["heldout_rms"] < 0.05
