"""bench.throughput_verdict: the chance that one launch's sign test over the probe's rounds says
`worse`, given how often a round is slower."""

import pytest

from bench import throughput_verdict as tv


def test_worse_needs_16_of_20_slower_rounds_at_holms_first_step():
    # two-sided sign test, 20 rounds: 16 slower gives p = 0.0118, 15 gives 0.0414 (> 0.025)
    assert tv.worse_probability(1.0, 20, 0.025) == 1.0
    assert tv.worse_probability(0.8, 20, 0.025) == pytest.approx(0.6296, abs=1e-4)  # P(Bin(20,.8) >= 16)
    assert tv.worse_probability(0.8, 20, 0.05) == pytest.approx(0.8042, abs=1e-4)  # >= 15 at 5%
    assert tv.worse_probability(0.5, 20, 0.025) < 0.01


def test_report_names_the_machine_and_each_launch():
    ratio = {"launch": 0, "ratio": 0.97, "slower_rounds": 17, "rounds": 20, "p": 0.003, "verdict": "worse"}
    report = {
        "machine": {"cpu": "AMD EPYC", "torch": "2.13.0+cpu", "cpu_capability": "AVX512"},
        "rounds": 20,
        "points": {"satformer": {"launches": [ratio], "pooled_ratio": 0.97, "slower_fraction": 0.85,
                                 "p_worse_per_launch": 0.83}},
    }  # fmt: skip
    text = tv.format_report(report)
    assert "AMD EPYC" in text and "AVX512" in text
    assert "17/20 rounds slower" in text and "P(worse) per launch of 20 rounds: 83%" in text
