"""Predictions, verdicts, crossover, backtest, the files and the CLI."""

import csv
import json

import numpy as np
import pytest

from sweeps.report.scaling.pipeline import fit_and_predict
from sweeps.report.scaling.predict import BEYOND, NO_CROSSOVER, parse_target
from sweeps.scaling import main
from sweeps.study.targets import Target
from tests.sweeps.report.scaling import synthetic as syn

BETTER = {**syn.TRUTH, "E": 0.9}  # lower everywhere
# Worse than the truth at small scale (larger A), better at large scale (lower E): the curves cross.
CROSSING = {**syn.TRUTH, "A": 150.0, "E": 0.93}


def _write(path, lad, with_seed=True):
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["arch", "n", "d", "val_loss", "seed"])
        for row in zip(lad.design, lad.params, lad.tokens, lad.loss, lad.seed, strict=True):
            w.writerow(row if with_seed else [*row[:4], ""])


def test_fit_and_predict_writes_verdicts_crossover_and_backtest(tmp_path):
    lad = syn.ladder(
        np.random.default_rng(7), {"base": syn.TRUTH, "better": BETTER, "late": CROSSING}, noise=0.004
    )
    targets = [Target("near", 1e7, 2e8), Target("far", 1e9, 3e10)]
    out = fit_and_predict(lad, tmp_path, targets, reference="base", replicates=60, max_factor=1000)
    rows = {(r["design"], r["target"]): r for r in out["predictions"]}
    assert rows[("base", "near")]["verdict"] == "reference"
    assert rows[("better", "near")]["verdict"] == "better"
    assert rows[("better", "near")]["diff_hi"] < 0 < rows[("better", "near")]["hi"]
    assert rows[("better", "far")]["extrapolation"] > 1000 and rows[("better", "far")]["verdict"] == BEYOND
    truth_near = syn.law(syn.TRUTH, 1e7, 2e8)
    assert rows[("base", "near")]["lo"] <= truth_near <= rows[("base", "near")]["hi"]
    cross = out["crossover"]["pairs"]
    assert cross["base vs better"]["message"] == NO_CROSSOVER
    late = cross["base vs late"]
    assert late["flops"] is not None and late["interval"][0] <= late["flops"] <= late["interval"][1]
    assert late["message"].startswith("base is lower below")
    fits = json.loads((tmp_path / "fits.json").read_text())
    assert set(fits) == {"base", "better", "late", "backtest", "fit"}
    assert set(fits["base"]["intervals"]) == {"E", "A", "alpha", "B", "beta"}
    test = fits["backtest"]
    assert test["possible"] and test["extrapolation"] > 1
    for d in ("base", "better", "late"):  # the held-out largest rung falls inside its interval
        assert test["designs"][d]["inside"], test["designs"][d]
    assert test["designs"]["better"]["diff"]["measured"] < 0
    header = (tmp_path / "predictions.csv").read_text().splitlines()[0]
    assert header == "design,target,params,tokens,flops,loss,lo,hi,diff,diff_lo,diff_hi,verdict,extrapolation"
    for name in ("crossover.json", "loss_vs_compute.png", "residuals.png"):
        assert (tmp_path / name).stat().st_size > 0


def test_cli_fits_a_csv_without_designs_into_one_key(tmp_path, capsys):
    table = tmp_path / "ladder.csv"
    _write(table, syn.ladder(np.random.default_rng(8), noise=0.005), with_seed=False)
    out = tmp_path / "out"
    argv = ["fit", str(table), "--params", "n", "--tokens", "d", "--loss", "val_loss", "--out", str(out)]
    rc = main([*argv, "--targets", "big=1e8:2e9", "--replicates", "40", "--no-plots"])
    assert rc == 0
    fits = json.loads((out / "fits.json").read_text())
    assert set(fits) - {"backtest", "fit"} == {"all"}
    assert fits["fit"]["bootstrap"]["resampled"] == "rows"
    assert abs(fits["all"]["alpha"] - syn.TRUTH["alpha"]) < 0.06
    lo, hi = fits["all"]["intervals"]["alpha"]
    assert lo < fits["all"]["alpha"] < hi
    assert "backtest (largest rung held out)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--params", "nope", "--tokens", "d", "--loss", "val_loss"], "no column 'nope' (--params)"),
        (["--params", "n", "--tokens", "d", "--loss", "val_loss", "--design", "model"], "no column 'model'"),
        (["--params", "n", "--tokens", "d", "--loss", "arch"], "column 'arch', line 2: 'x' is not a number"),
    ],
)
def test_cli_refuses_bad_columns_naming_file_and_column(tmp_path, capsys, args, words):
    table = tmp_path / "runs.csv"
    _write(table, syn.ladder(np.random.default_rng(0), {"x": syn.TRUTH}))
    assert main(["fit", str(table), *args, "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(table) in err and words in err


def test_cli_refuses_too_few_rungs_naming_file_and_columns(tmp_path, capsys):
    table = tmp_path / "small.csv"
    _write(table, syn.ladder(np.random.default_rng(0), sizes=(1e5, 1e6), ratios=(5, 20)))
    argv = ["fit", str(table), "--params", "n", "--tokens", "d", "--loss", "val_loss", "--out", str(tmp_path)]
    assert main([*argv, "--targets", "x=1e8:1e9"]) == 2
    err = capsys.readouterr().err
    assert str(table) in err and "this ladder has 4" in err and "column 'n'" in err


def test_targets_parse_and_refuse():
    assert parse_target("large=6.5e8:2e10") == Target("large", 6.5e8, 2e10)
    with pytest.raises(ValueError, match="NAME=PARAMS:TOKENS"):
        parse_target("large=lots")


def _fixed_budgets(rng, truths, budgets=(1e6, 4e6), seeds=2):
    """Every size at the same token budgets (a `tokens:` ladder): the ratios differ per rung."""
    from sweeps.report.scaling.table import Ladder

    rows = []
    for design, truth in truths.items():
        for n in syn.SIZES:
            for d in budgets:
                for s in range(seeds):
                    rows.append(
                        (
                            design,
                            n,
                            d,
                            float(syn.law(truth, n, d)) * float(np.exp(rng.normal(0, 0.004))),
                            str(s),
                        )
                    )
    return Ladder(*zip(*rows, strict=True), "fixed budgets")


def test_the_fit_is_drawn_through_the_ladders_own_rungs(tmp_path):
    """A ratio ladder gets one line per tokens-per-parameter ratio, a budget ladder one per token
    budget (the joint law where the rungs measured it), and the loss-vs-compute plot builds."""
    from sweeps.report.scaling.outputs import ladder_series

    by_ratio = syn.ladder(np.random.default_rng(3), seeds=2)
    lines = ladder_series(by_ratio)
    assert [label for label, _, _ in lines] == ["5 tokens/param", "20 tokens/param", "80 tokens/param"]
    for _, n, d in lines:
        assert np.allclose(d / n, d[0] / n[0]) and n.min() == pytest.approx(min(syn.SIZES))
    by_budget = _fixed_budgets(np.random.default_rng(4), {"base": syn.TRUTH, "better": BETTER})
    lines = ladder_series(by_budget)
    assert [label for label, _, _ in lines] == ["D 1e+06", "D 4e+06"]
    assert all(np.all(d == d[0]) for _, _, d in lines) and lines[0][1].max() == pytest.approx(max(syn.SIZES))
    for name, lad in (("ratio", by_ratio), ("budget", by_budget)):
        out = fit_and_predict(lad, tmp_path / name, [Target("far", 1e8, 2e9)], replicates=20)
        assert (tmp_path / name / "loss_vs_compute.png").stat().st_size > 10_000, out["files"]


def test_the_backtest_line_counts_designs_and_their_differences_apart():
    from sweeps.report.scaling.predict import backtest_line

    test = {
        "possible": True,
        "designs": {
            "base": {"inside": True},
            "res": {"inside": True, "diff": {"inside": False}},  # the CPU ladder's first cut
            "sat": {"inside": True, "diff": {"inside": True}},
        },
    }
    assert backtest_line(test, "base") == (
        "backtest (largest rung held out): 3/3 designs inside, differences to base 1/2 inside their 95% "
        "prediction intervals"
    )
    assert backtest_line({"possible": False, "reason": "why"}, "base") == "backtest: why"
