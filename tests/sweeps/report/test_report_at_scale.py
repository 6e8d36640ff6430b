"""A report over a search's hundreds of points: every point in the CSV and JSON, the figures
label only the references, the front and the likeliest points on it (issue 52)."""

import csv

import numpy as np
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from sweeps.report.fronts import compute
from sweeps.report.outputs import PLOT_CAP, most_relevant, write_files


def search_trials(n):
    """n TPE-like points (one seed each): lr x design, loss and memory; design `none` first."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        design = "none" if i % 2 == 0 else "sat"
        lr = float(10 ** rng.uniform(-4, -2))
        loss = 3.0 - 0.2 * (design == "sat") + (np.log10(lr) + 3) ** 2 * 0.1 + 0.01 * rng.normal()
        out.append(create_trial(
            state=TrialState.COMPLETE, values=[loss, 110.0 if design == "sat" else 100.0 + i % 3],
            params={"design": design, "lr": lr},
            distributions={"design": CategoricalDistribution(["none", "sat"]),
                           "lr": FloatDistribution(1e-4, 1e-2, log=True)},
            user_attrs={"point": f"p{i}", "seed": 0},
        ))  # fmt: skip
    return out


def test_a_search_reports_every_point_and_draws_the_ones_a_reader_wants(tmp_path):
    trials = search_trials(3 * PLOT_CAP)
    result = compute(trials, [("val_loss", "minimize"), ("peak_mem_mb", "minimize")], "p0", replicates=50)
    paths = write_files(result, tmp_path)
    with (tmp_path / "pareto.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == len(trials)
    assert (tmp_path / "front_val_loss_vs_peak_mem_mb.png") in paths and (tmp_path / "pareto.html") in paths
    shown = most_relevant(result["points"])
    assert len(shown) == PLOT_CAP
    ids = [r["point"] for r in shown]
    assert "p0" in ids and set(result["front"]) <= set(ids)  # the reference and the whole front
    rest = [r for r in result["points"] if r["point"] not in ids]
    assert max(r["p_front"] for r in rest) <= min(r["p_front"] for r in shown if r["point"] != "p0")


def test_at_most_the_cap_every_point_is_drawn_in_its_order():
    rows = [{"point": f"p{i}", "rank": i % 3, "p_front": 0.1} for i in range(PLOT_CAP)]
    assert most_relevant(rows) == rows
