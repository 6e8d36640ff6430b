"""The report's throughput check: the probe's ratio beside the trials' own, against the reference."""

import pytest

from sweeps.report.costs import throughput_check
from sweeps.report.outputs import throughput_text


def test_ratios_are_taken_against_each_points_reference():
    speeds = {"base": [100.0, 110.0, 90.0], "sat": [95.0, 93.0], "hc": [50.0], "new": []}
    refs = {"base": "base", "sat": "base", "hc": "base", "new": "base"}
    probe = {"base": 1.0, "sat": 0.96, "hc": 0.5, "new": 0.8}
    out = throughput_check(speeds, refs, probe)
    assert set(out) == {"sat", "hc", "new"}  # the reference is not compared with itself
    assert out["sat"] == {"probe": 0.96, "trials": pytest.approx(0.94), "seeds": 2, "reference_seeds": 3}
    assert out["hc"]["trials"] == 0.5 and "trials" not in out["new"]  # no clock recorded: probe only
    # a reference that is not the probe's baseline: the probe's ratios divide
    assert throughput_check(speeds, {"hc": "sat", "sat": "sat"}, probe)["hc"]["probe"] == pytest.approx(
        0.5 / 0.96
    )


def test_the_text_names_the_points_and_both_ratios():
    result = {
        "points": [{"point": "p1", "params": {"model.residual": "sat"}}],
        "throughput_check": {"p1": {"probe": 0.96, "trials": 0.94, "seeds": 2, "reference_seeds": 3}},
    }
    text = throughput_text(result)
    assert "  sat: probe 0.960x; trials 0.940x (2 vs 3 trial(s)); trials/probe 0.979" in text
