"""The orchestrator benchmark: its cost arithmetic, and a run end to end at a toy size (asserts
nothing about speed)."""

import json

import pytest

from bench import orchestrator


def test_per_trial_cost_is_cycle_minus_fit_plus_logging_plus_the_larger_in_fit_slowdown():
    runs = [
        {"start": 100.0, "end": 110.0, "fit_s": 9.0, "logging_s": 0.1},
        {"start": 111.0, "end": 122.0, "fit_s": 10.0, "logging_s": 0.2},  # cycle 12: 2 outside fit
        {"start": 123.0, "end": 136.0, "fit_s": 11.0, "logging_s": 0.4},  # cycle 14: 3 outside fit
    ]
    parts = orchestrator.split_costs(wall=40.0, start=95.0, runs=runs, background_cpu=2.0, cpus=2)
    assert parts["per_trial"] == pytest.approx(13.0) and parts["fit_s"] == pytest.approx(10.5)
    assert parts["outside_fit_s"] == pytest.approx(2.5) and parts["logging_s"] == pytest.approx(0.3)
    assert parts["background_s"] == pytest.approx(0.5)  # 2 CPU s on 2 cores over 2 cycles
    assert parts["fixed"] == pytest.approx(40.0 - 3 * 13.0)
    assert parts["to_first_trial"] == pytest.approx(5.0) and parts["after_last_trial"] == pytest.approx(-1.0)

    # the direct loops' slower trial took 10.0 s: fit ran 0.5 s slower, as large as the background
    cost = orchestrator.per_trial_cost(parts, slowest_direct_s=10.0)
    assert cost["in_fit_s"] == pytest.approx(0.5) and cost["cost_per_trial_s"] == pytest.approx(3.3)
    assert cost["cost_of_60s_trial_s"] == pytest.approx(2.5 + 0.8 * 60 / 10.5) and not cost["met"]
    # a drift-slowed direct loop: the background CPU is the floor of the in-fit slowdown
    assert orchestrator.per_trial_cost(parts, slowest_direct_s=12.0)["in_fit_s"] == pytest.approx(0.5)
    cheap = {**parts, "outside_fit_s": 0.1, "logging_s": 0.0, "background_s": 0.1}
    assert orchestrator.per_trial_cost(cheap, 12.0)["cost_of_60s_trial_s"] == pytest.approx(
        0.1 + 0.1 * 60 / 10.5
    )
    assert orchestrator.per_trial_cost(cheap, 12.0)["met"]
    with pytest.raises(RuntimeError, match="at least 2"):
        orchestrator.split_costs(wall=40.0, start=95.0, runs=runs[:1])


def test_orchestrator_benchmark_runs_and_writes_json(tmp_path, capsys):
    out = tmp_path / "orch.json"
    args = ["--trials", "2", "--tokens", "2048", "--backends", "local", "--json", str(out)]
    assert orchestrator.main(args) == 0
    result = json.loads(out.read_text())
    assert result["direct"]["per_trial"] > 0 and len(result["direct"]["trial_walls"]) == 2
    local = result["local"]
    assert local["fit_s"] > 0 and local["logging_s"] > 0 and local["background_s"] == 0.0
    assert local["cost_per_trial_s"] >= local["outside_fit_s"] + local["logging_s"]
    assert len(result["direct_after"]["trial_walls"]) == 2  # the drift bracket
    assert "launcher (local)" in capsys.readouterr().out
