"""evals.harness without lm-eval: the environment lm-eval records in every result is read once per
process (torch's collect_env runs `pip list` and the drivers' tools: seconds a scored run)."""

from torch.utils import collect_env

from evals import harness


def test_the_environment_is_read_once_per_process(monkeypatch):
    calls = []

    def pretty_env_info():
        calls.append(1)
        return "PyTorch version: x"

    monkeypatch.setattr(collect_env, "get_pretty_env_info", pretty_env_info)
    harness._environment_read_once()
    harness._environment_read_once()  # not wrapped twice
    assert [collect_env.get_pretty_env_info() for _ in range(3)] == ["PyTorch version: x"] * 3
    assert calls == [1]
