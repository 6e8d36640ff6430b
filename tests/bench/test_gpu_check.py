"""bench.gpu_check on a machine without CUDA: the refusal (exit 2, the message), the pure helpers,
the study its ray check launches, and its trial and precision checks at a toy size on CPU (the
Python around the CUDA paths; the CUDA paths themselves need a GPU)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from arch import paper_designs
from bench import gpu_check
from bench.gpu_check import NEEDS_CUDA, Result, exit_code, format_table

REPO = Path(__file__).resolve().parents[2]


def test_without_cuda_it_says_so_and_exits_2():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, "-m", "bench.gpu_check"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert NEEDS_CUDA in done.stderr and "needs CUDA" in NEEDS_CUDA and done.stdout == ""


def test_the_checks_and_their_order():
    checks = [name for name, _ in gpu_check.CHECKS]
    assert checks == ["trials", "memory", "precision", "ray", "compile", "loss", "plan"]
    assert gpu_check.PAPER_DESIGNS is paper_designs.PAPER_DESIGNS  # every paper design, one list
    assert list(gpu_check.SCALES) == ["mini", "small"] and gpu_check.BUDGET_S <= 300


def test_table_and_exit_code():
    results = [
        Result("trials", "mini/baseline", True, {"tok/s": "1000", "vs_baseline": "1.000x"}),
        Result("ray", "2 trials, gpus: 1", False, {"wall_s": "40"}, "exit 1: boom"),
    ]
    lines = format_table(results).splitlines()
    assert lines[0].split() == ["check", "name", "status", "values"]
    assert lines[1].split() == ["trials", "mini/baseline", "ok", "tok/s=1000", "vs_baseline=1.000x"]
    assert lines[2].split()[-5:] == ["FAILED", "wall_s=40", "exit", "1:", "boom"]
    assert lines[1].index("ok") == lines[2].index("FAILED")  # aligned columns
    assert exit_code(results) == 1 and exit_code(results[:1]) == 0 and exit_code([]) == 1


def test_ratio_formats_and_refuses_nothing_to_compare_with():
    assert gpu_check.ratio(1.5, 1.0) == "1.500x"
    assert gpu_check.ratio(1.0, 0.0) == "-" and gpu_check.ratio(float("nan"), 1.0) == "-"


@pytest.fixture
def shards(tmp_path):
    return gpu_check.write_shards(tmp_path / "shards")


def test_the_ray_check_launches_a_valid_two_trial_study_with_a_gpu_each(shards, tmp_path):
    from sweeps.study import load_study

    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(gpu_check.two_trial_study(shards, str(tmp_path))))
    study = load_study(path)
    assert study.n_runs() == 2 and study.backend == "ray" and study.resources.gpus == 1
    assert study.base.train.precision == "bf16-true"


@pytest.fixture
def toy(monkeypatch):
    toy_shape = {"preset": "tiny", "seq_len": 32, "batch_size": 2}
    monkeypatch.setattr(gpu_check, "SCALES", {"mini": toy_shape, "small": toy_shape})
    monkeypatch.setattr(gpu_check, "STEPS", 2)
    # The recall probe's 2 x 128 windows at the paper's 32k vocabulary took 9 of a toy trial's 11
    # CPU seconds; these checks are about the training step, so a few windows show it runs.
    trial_tree = gpu_check.trial_tree
    monkeypatch.setattr(
        gpu_check, "trial_tree", lambda *a, **k: {**trial_tree(*a, **k), "recall": {"windows": 4}}
    )


def test_every_trial_of_the_check_is_a_valid_config(shards):
    from trainers.config import TrialConfig

    for scale in gpu_check.SCALES:
        for residual in gpu_check.PAPER_DESIGNS.values():
            cfg = TrialConfig.from_dict(gpu_check.trial_tree(residual, scale, shards))
            assert cfg.model.residual.kind == residual["kind"] and cfg.train.precision == "bf16-true"
            assert cfg.max_steps == gpu_check.STEPS


def trials_at_toy_size(shards, families, monkeypatch):
    monkeypatch.setattr(gpu_check, "SCALES", {"mini": gpu_check.SCALES["mini"]})
    monkeypatch.setattr(gpu_check, "PAPER_DESIGNS", {f: gpu_check.PAPER_DESIGNS[f] for f in families})
    results = gpu_check.check_trials(shards)
    assert [r.name for r in results] == [f"mini/{family}" for family in families]
    assert all(r.ok for r in results), format_table(results)
    assert {r.values["vs_baseline"] for r in results if r.name.endswith("/baseline")} == {"1.000x"}
    assert {r.values["vs_satformer"] for r in results if r.name.endswith("/satformer")} == {"1.000x"}


def test_trials_check_at_a_toy_size(toy, shards, monkeypatch):
    trials_at_toy_size(shards, ["baseline", "satformer"], monkeypatch)


@pytest.mark.slow
def test_trials_check_runs_every_family_at_a_toy_size(toy, shards, monkeypatch):
    trials_at_toy_size(shards, list(gpu_check.PAPER_DESIGNS), monkeypatch)


def test_precision_check_sees_bf16_true_halve_the_parameters(toy, shards):
    (result,) = gpu_check.check_precision(shards)
    assert result.ok and "half" in result.note, format_table([result])


def test_memory_meter_step_runs_on_cpu(toy):
    assert gpu_check.step_peak("cpu") > 0


def test_loss_check_at_a_toy_size_on_cpu(shards):
    """The Python around the loss paths' CUDA check; on CPU the fused path is absent and says so."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a toy bf16 model: two threads on a shared CPU are much slower
    try:
        results = gpu_check.check_loss(
            shards, device="cpu", batch=4, seq_len=64, vocab=4096, chunk=16, rounds=1
        )
    finally:
        torch.set_num_threads(threads)
    rows = {r.name.rsplit(" ", 1)[-1]: r for r in results}
    assert list(rows) == ["plain", "chunked", "chunked+blocks", "fused"]
    assert all(rows[k].ok for k in ("plain", "chunked", "chunked+blocks")), results
    assert not rows["fused"].ok and "not run" in rows["fused"].note


def test_plan_check_at_a_toy_size_on_cpu(tmp_path):
    """The Python around the plan-vs-allocator check (never run on a GPU yet): the paper's small study
    shrunk to a toy model, the CPU meter standing in for the allocator. A toy vocabulary too: at
    the paper's 32000 ids the logits' backward passes made the test take 29 s alone, against 10 s."""
    shards = gpu_check.write_shards(tmp_path / "shards", vocab=2048)
    toy = [
        "trial.model.n_layers=2", "trial.model.d_model=64", "trial.model.n_heads=2", "trial.model.d_ff=128",
        "trial.model.vocab_size=2048", "trial.data.seq_len=128", "trial.train.batch_size=16",
    ]  # fmt: skip
    results = gpu_check.check_plan(shards, device="cpu", overrides=toy, budget=2**40)
    assert [r.name for r in results] == ["paper small baseline", "paper small satformer"]
    for r in results:
        assert r.ok and r.values["micro_batch"] == "2x128 (accum 1)", format_table(results)
        assert 0.97 <= float(r.values["ratio"].rstrip("x")) <= 1.03  # the meter against its own plan
        assert r.values["device_used_GiB"] == r.values["allocator_GiB"]  # a CPU has nothing more to see


def test_the_headroom_is_checked_against_the_devices_whole_use():
    gib = 2**30
    # planned 68 GiB; the device used 76 (context, fragmentation): 0.85 would have let it fit 80
    values, ok = gpu_check.headroom_check(68 * gib, 74 * gib, 76 * gib, 0.85)
    assert ok and values["headroom_needed"] == "0.895" and values["reserved_GiB"] == "74.00"
    _, ok = gpu_check.headroom_check(68 * gib, 78 * gib, 82 * gib, 0.85)  # 0.829 needed: 0.85 too loose
    assert not ok
