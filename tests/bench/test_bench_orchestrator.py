"""The orchestrator benchmark runs end to end at a toy size (asserts nothing about speed)."""

import json

from bench import orchestrator


def test_orchestrator_benchmark_runs_and_writes_json(tmp_path, capsys):
    out = tmp_path / "orch.json"
    args = ["--trials", "1", "--tokens", "2048", "--backends", "local", "--json", str(out)]
    assert orchestrator.main(args) == 0
    result = json.loads(out.read_text())
    assert result["direct"]["per_trial"] > 0 and len(result["direct"]["trial_walls"]) == 1
    assert "extra_per_trial_s" in result["local"]
    assert "launcher (local)" in capsys.readouterr().out
