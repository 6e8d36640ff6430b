"""The memory plan at load (sweeps.run.memory): the dry run prints every point's predicted memory
per GPU with its breakdown; `resources.gpu_memory_gb` refuses a point that will not fit, naming the
micro-batch, grad_accum and activation checkpointing that fit; `train.micro_batch: auto` runs with
the split it chose, the global batch unchanged. Tiny models on CPU, measurements cached once."""

from __future__ import annotations

import shutil

import pytest

from sweeps.run import launch as launcher
from sweeps.run import memory
from sweeps.run.launch import launch
from sweeps.study import load_study
from tests.factories import tiny_trial
from tests.sweeps import fake_fit
from tests.sweeps.helpers import write_study
from trainers import memory_probe
from trainers.memory_fit import GIB

MODEL = {"max_seq_len": 512, "vocab_size": 512, "d_model": 64, "d_ff": 256}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """One results folder for the module: the plan's cache (memory.json) is measured once."""
    return tmp_path_factory.mktemp("memory-results")


def gpu_study(tmp_path, results, gpu_memory_gb=80.0, **train):
    return write_study(
        tmp_path,
        trial=tiny_trial(model=MODEL, train=train),
        repeats=1,
        resources={"gpu_memory_gb": gpu_memory_gb},
        output={"dir": str(results), "mlflow_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
    )


def peaks(tmp_path, results) -> list[float]:
    """Each point's predicted peak at its own micro-batch (8 x 32) and at half of it (4 x 32)."""
    plans = launcher.load(gpu_study(tmp_path, results)).memory
    return [(pp.prediction.peak, pp.fit.predict(4, 32, 2).peak) for pp in plans]


def test_the_dry_run_prints_every_points_memory_with_its_breakdown(tmp_path, results, capsys):
    assert launcher.main([str(gpu_study(tmp_path, results)), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "memory       per GPU at each point's per-worker micro-batch, GiB" in out
    assert "budget: 68.00 GiB = 80 GiB (resources.gpu_memory_gb) x 0.85 headroom" in out
    header = next(line for line in out.splitlines() if "PEAK" in line)
    for column in ("params", "grads", "adamw", "activ", "loss", "ddp"):
        assert column in header
    rows = [line for line in out.splitlines() if line.strip().startswith(("0 ", "1 ")) and "8x32" in line]
    assert len(rows) == 2 and all(row.endswith("fits") for row in rows)


def test_a_second_dry_run_reads_the_cache(tmp_path, results, monkeypatch):
    launcher.load(gpu_study(tmp_path, results))  # measured here (or before, by another test)

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured again")

    monkeypatch.setattr(memory_probe, "measure", no_measuring)
    assert len(launcher.load(gpu_study(tmp_path, results)).memory) == 2


def test_a_point_that_does_not_fit_is_refused_naming_what_fits(tmp_path, results, capsys):
    (whole, half), _ = peaks(tmp_path, results)
    gib = (whole + half) / 2 / memory.HEADROOM / GIB  # between micro-batch 4 and 8 of the baseline
    path = gpu_study(tmp_path, results, gpu_memory_gb=gib)
    assert launcher.main([str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err
    assert "trial.train.batch_size: point 0 (model.residual=baseline): one worker's micro-batch 8 x 32" in err
    assert "micro-batch 4 with grad_accum 2 fits" in err and "train.batch_size 4, train.grad_accum 2" in err
    assert "activation_checkpointing: blocks" in err  # measured with blocks too: fits or not, said
    assert "or train.micro_batch: auto" in err


def test_micro_batch_auto_runs_with_the_split_it_chose(tmp_path, results, capsys):
    (whole, half), (whole_sat, half_sat) = peaks(tmp_path, results)
    gib = (max(whole, whole_sat) + max(half, half_sat)) / 2 / memory.HEADROOM / GIB
    path = gpu_study(tmp_path, results, gpu_memory_gb=gib, micro_batch="auto")
    assert launcher.main([str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "(micro_batch auto: train.batch_size 4 x grad_accum 2 = global batch 8, as given 8 x 1;" in out
    study = launcher.load(path)
    seen = []

    def recording_fit(config, **kwargs):
        seen.append((config.train.batch_size, config.train.grad_accum, config.train.eval_batches))
        return fake_fit.fit(config, **kwargs)

    assert launch(study, fit=recording_fit, probe=fake_fit.PROBE) == 0
    assert seen == [(4, 2, 4), (4, 2, 4)]  # the global batch 8 and the evaluations' tokens kept


def test_a_cpu_study_has_no_plan_and_measures_nothing(tmp_path, monkeypatch):
    def no_measuring(*args, **kwargs):
        raise AssertionError("a CPU study measured")

    monkeypatch.setattr(memory_probe, "measure", no_measuring)
    study = launcher.load(write_study(tmp_path, trial=tiny_trial(model=MODEL), repeats=1))
    assert "memory       no plan: a CPU study" in launcher.plan_text(study)


def test_auto_needs_the_gpus_size(tmp_path, monkeypatch):
    path = write_study(tmp_path, trial=tiny_trial(model=MODEL, train={"micro_batch": "auto"}), repeats=1)
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(launcher.ConfigError) as err:
        load_study(path) and launcher.load(path)
    assert "trial.train.micro_batch: given 'auto'; needs the GPU's size" in str(err.value)


def _budget_between_micro_batch_4_and_8(tmp_path, results) -> float:
    (whole, half), (whole_sat, half_sat) = peaks(tmp_path, results)
    return (max(whole, whole_sat) + max(half, half_sat)) / 2 / memory.HEADROOM / GIB


RUN_KINDS = {  # every kind of run a study makes besides a plain grid point's seeds
    "tune": {"tune": {"train.lr": {"low": 1.0e-3, "high": 1.0e-2, "points": 2}, "seeds": 1}},
    "adaptive": {"repeats": {"min": 1, "max": 2}},
    "random": {"sampler": {"kind": "random", "seed": 0}, "n_trials": 2},
    "tpe": {  # a sampled continuous range beside the design
        "sampler": {"kind": "tpe", "seed": 0},
        "n_trials": 2,
        "space": {
            "model.residual": {"choices": {"baseline": {"kind": "none"}}},
            "train.lr": {"low": 1.0e-3, "high": 1.0e-2},
        },
    },
}


@pytest.mark.parametrize("kind", list(RUN_KINDS))
def test_micro_batch_auto_is_resolved_for_every_run_kind(tmp_path, results, kind):
    """Tune runs, confirming runs, adaptive seeds and sampled points all train at the split the
    memory plan chose: none reaches trainers.fit with `micro_batch: auto` (which it refuses)."""
    gib = _budget_between_micro_batch_4_and_8(tmp_path, results)
    extra = {"repeats": 1, **RUN_KINDS[kind]}
    path = write_study(
        tmp_path,
        trial=tiny_trial(model=MODEL, train={"micro_batch": "auto"}),
        resources={"gpu_memory_gb": gib},
        output={"dir": str(results / kind), "mlflow_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
        **extra,
    )
    # the module's measurements (the same model and setups): each kind does not measure them again
    cache = memory.cache_path(load_study(path))
    cache.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(results / cache.parent.name / cache.name, cache)
    plan = launcher.load(path)
    seen = []

    def recording_fit(config, **kwargs):
        seen.append((config.train.micro_batch, config.train.batch_size, config.train.grad_accum))
        return fake_fit.fit(config, **kwargs)

    assert launch(plan, fit=recording_fit, probe=fake_fit.PROBE) == 0
    assert len(seen) >= {"tune": 6}.get(kind, 2)  # tune: 2 points x 2 values, then 2 confirming runs
    assert all(s == (None, 4, 2) for s in seen), seen
