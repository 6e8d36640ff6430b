"""The orchestrator benchmark: its cost arithmetic, and a run end to end at a toy size (asserts
nothing about speed)."""

import json

import pytest

from bench import orchestrator


def test_per_trial_cost_is_cycle_minus_fit_plus_logging_plus_background():
    runs = [
        {"start": 100.0, "end": 110.0, "fit_s": 9.0, "logging_s": 0.1},
        {"start": 111.0, "end": 122.0, "fit_s": 10.0, "logging_s": 0.2},  # cycle 12: 2 outside fit
        {"start": 123.0, "end": 136.0, "fit_s": 11.0, "logging_s": 0.4},  # cycle 14: 3 outside fit
    ]
    got = orchestrator.split_costs(wall=40.0, start=95.0, runs=runs, background_cpu=4.0, cpus=2)
    assert got["per_trial"] == pytest.approx(13.0)
    assert got["outside_fit_s"] == pytest.approx(2.5)
    assert got["logging_s"] == pytest.approx(0.3)
    assert got["background_s"] == pytest.approx(1.0)  # 4 CPU s on 2 cores over 2 cycles
    assert got["cost_per_trial_s"] == pytest.approx(3.8)
    assert got["fixed"] == pytest.approx(40.0 - 3 * 13.0)
    assert got["to_first_trial"] == pytest.approx(5.0) and got["after_last_trial"] == pytest.approx(-1.0)
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
    assert local["cost_per_trial_s"] == pytest.approx(local["outside_fit_s"] + local["logging_s"])
    assert local["total_cost_s"] >= local["cost_per_trial_s"]
    assert len(result["direct_after"]["trial_walls"]) == 2  # the drift bracket
    assert "launcher (local)" in capsys.readouterr().out
