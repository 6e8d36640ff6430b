"""bench.recipe_chaos: a runs file of bench.training_equivalence summarised per recipe."""

import json
import math

import pytest

from bench import recipe_chaos as rc
from bench import training_equivalence as te

GATED = {"kind": "value_residual", "mode": "gated", "granularity": "token_head"}


def _row(seed, val_loss, overrides=(), patch=None, curve=None):
    trial = te.recipe_trial(te.DEFAULT_RECIPE, 4096, 1, seed, overrides=list(overrides))
    key = te.run_key("c0ffee", None, trial)
    return {"key": key, "seed": seed, "val_loss": val_loss, "patch": patch, "wall_s": 10.0,
            "loss_curve": curve, "machine": {"cpu": "test"}}  # fmt: skip


def test_summary_pairs_ulp_and_satformer_runs_by_seed_per_recipe():
    lr2 = [(["train", "lr"], 0.002)]
    sat = [(["model", "residual"], GATED)]
    rows = []
    for seed, (base, ulp, gated) in enumerate([(2.0, 2.01, 1.99), (2.1, 2.1, 2.08), (2.2, 2.17, 2.21)]):
        rows += [_row(seed, base), _row(seed, ulp, patch="bench/patches/one_ulp_qk.py"),
                 _row(seed, gated, sat), _row(seed, base + 0.05, lr2)]  # fmt: skip
    rows.append(_row(9, 1.0, patch="bench/patches/heads_reversed.py"))  # another control: not counted
    first, second = rc.summarize(rows)
    assert first["recipe"] == "reference" and second["recipe"] == "train.lr=0.002"
    assert first["ulp"]["moves"] == pytest.approx([0.01, 0.0, -0.03])
    assert first["ulp"]["moved"] == 2
    assert first["paired"]["diffs"] == pytest.approx([-0.01, -0.02, 0.01])
    assert first["paired"]["n"] == 3 and first["paired"]["sd_upper95"] > first["paired"]["sd"]
    assert first["baseline"]["mean"] == pytest.approx(2.1)
    assert second["paired"]["n"] == 0 and math.isnan(second["ulp"]["sd"])


def test_sd_upper_bound_is_the_chi_square_bound():
    # 12 values: sqrt(11 / chi2.ppf(0.05, 11)) = sqrt(11 / 4.575) = 1.5506
    assert rc.sd_upper(0.01, 12) == pytest.approx(0.015506, abs=1e-5)
    assert math.isnan(rc.sd_upper(0.01, 1))


def test_spikes_finds_a_jump_above_the_recent_median_and_nothing_in_a_smooth_curve():
    smooth = [3.0 - 0.002 * t + 0.01 * ((t * 7) % 3 - 1) for t in range(200)]
    assert rc.spikes(smooth, warmup=10) == []
    spiked = list(smooth)
    spiked[120] += 0.4
    (found,) = rc.spikes(spiked, warmup=10)
    assert found[0] == 120 and found[1] == pytest.approx(0.4, abs=0.05)  # less the window's trend
    assert rc.spikes(spiked, warmup=150) == []  # inside warmup: not counted


def test_shape_flags_one_outlier():
    normalish = [-0.01, 0.004, -0.006, 0.002, -0.003, 0.008, -0.001, 0.005, -0.007, 0.0, 0.003, -0.004]
    outlier = [*normalish[:-1], 0.2]
    assert rc.shape(outlier)["excess_kurtosis"] > rc.shape(normalish)["excess_kurtosis"] + 3
    assert rc.shape(outlier)["shapiro_p"] < 0.01 < rc.shape(normalish)["shapiro_p"]


def test_cli_refuses_a_missing_file(tmp_path, capsys):
    with pytest.raises(SystemExit):
        rc.main([str(tmp_path / "none.jsonl")])
    assert "no such file" in capsys.readouterr().err


def test_cli_prints_a_table(tmp_path, capsys):
    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join(json.dumps(_row(s, 2.0 + s / 100)) for s in range(3)) + "\n")
    (summary,) = rc.main([str(runs)])
    assert summary["baseline"]["seeds"] == [0, 1, 2]
    assert "reference" in capsys.readouterr().out
