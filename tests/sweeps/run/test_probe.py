"""The cost probe: interleaved timing, its cache, what reaches the fronts; seed-major order; reused
Ray workers that leak nothing into the next trial."""

import json
from collections import Counter

from optuna.trial import TrialState

from sweeps.report.analysis import machines
from sweeps.run.launch import launch
from sweeps.run.probe import Probe
from sweeps.study import load_study
from sweeps.study.architecture import arch_key, architecture
from sweeps.study.run_record import RunRecord
from tests.sweeps import fake_fit
from tests.sweeps.helpers import TRIAL, mlflow_runs, optuna_trials, write_study
from trainers.machine import describe

SPACE = {
    "model.residual": {
        "choices": {"baseline": {"kind": "none"}, "hc4": {"kind": "hyper_connections", "expansion_rate": 4}}
    }
}


def counting(calls):
    def run_task(fn, *args):
        calls.append(fn.__name__)
        return fn(*args)

    return run_task


def test_probe_times_each_architecture_once_against_its_baseline_and_caches_it(tmp_path):
    study = load_study(write_study(tmp_path, space=SPACE, probe={"rounds": 3, "steps": 2}))
    configs = [study.trial_config(p, seed) for p in study.planned_points() for seed in (0, 1)]
    calls = []
    probe = Probe(study, counting(calls))
    probe.ensure(configs)
    assert calls == ["machine_key", "time_architectures"]  # one interleaved session for all
    base, hc = (probe.metrics(study.trial_config(p)) for p in study.planned_points())
    assert base["tokens_per_s_ratio"] == 1.0 and base["tokens_per_s"] > 0
    assert hc["tokens_per_s_ratio"] < 0.95  # four residual streams cost time
    assert probe.metrics(configs[1]) == probe.metrics(configs[0])  # the seed is not the architecture

    cached = json.loads((study.results_dir() / "costs.json").read_text())
    (table,) = cached.values()
    entry = table[arch_key(architecture(configs[-1]))]
    assert len(entry["ratios"]) == 3 and entry["tokens_per_s"] == hc["tokens_per_s"]
    scale = table[arch_key(architecture(configs[0]))]["baseline_tokens_per_s_samples"]
    assert len(scale) == 3 and min(scale) <= base["tokens_per_s"] <= max(scale)  # one-thread trial
    assert "baseline_tokens_per_s_samples" not in entry
    import torch

    assert (
        entry["kernels"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    )  # printed with verdicts
    assert machines(cached) == [describe(entry["kernels"])]

    again = Probe(study, counting(calls := []))
    again.ensure(configs)
    assert calls == ["machine_key"] and again.metrics(configs[-1]) == hc  # nothing re-timed


def test_a_study_of_the_baseline_alone_times_only_its_absolute_speed(tmp_path, monkeypatch):
    import sweeps.run.probe as probe_module

    def no_child(*args):
        raise AssertionError("a second timing process for a ratio that is 1 by definition")

    monkeypatch.setattr(probe_module, "_RoundsChild", no_child)
    trial = {**TRIAL, "train": {**TRIAL["train"], "num_threads": 2}}
    study = load_study(write_study(tmp_path, space={}, trial=trial, probe={"rounds": 4, "steps": 1}))
    (point,) = study.planned_points()
    probe = Probe(study, counting(calls := []))
    probe.ensure([study.trial_config(point)])
    assert calls == ["machine_key", "time_architectures"]
    values = probe.metrics(study.trial_config(point))
    assert values["tokens_per_s_ratio"] == 1.0 and values["tokens_per_s"] > 0
    (table,) = json.loads((study.results_dir() / "costs.json").read_text()).values()
    (entry,) = table.values()
    assert entry["ratios"] == [1.0, 1.0] and entry["clock"] == "wall"  # ceil(4 x 0.5) samples, 2 threads
    assert len(entry["baseline_tokens_per_s_samples"]) == 2


def test_front_throughput_is_the_probe_and_the_trial_clock_stays_informational(tmp_path):
    study = load_study(write_study(tmp_path, repeats=2, probe={"rounds": 2, "steps": 1}))
    assert launch(study, fit=fake_fit.fit) == 0
    children = mlflow_runs(study, "trial")
    by_kind = {}
    for c in children:
        by_kind.setdefault(c.data.tags["kind"], set()).add(c.data.metrics["final/tokens_per_s"])
        assert c.data.metrics["final/train_tokens_per_s"] == 800.0  # the stand-in's own clock
    assert all(len(v) == 1 for v in by_kind.values())  # both seeds of a point: the same probe value
    trials = optuna_trials(study)
    for t in trials:
        assert t.values[1] in by_kind["none"] | by_kind["value_residual"]
    (parent,) = mlflow_runs(study, "parent")
    assert parent.data.metrics["probe_s"] > 0
    # the probe's baseline is the reference: its interval is its own timings', not a ratio's ±0
    rows = json.loads((study.results_dir() / "pareto" / "pareto.json").read_text())["points"]
    (ref,) = [r for r in rows if r["params"]["model.residual"] == "baseline"]
    lo, hi = ref["tokens_per_s_ci"]
    assert lo < hi and lo <= ref["tokens_per_s"] <= hi
    # the report sets the probe's ratio beside the trials' own (the stand-in's clock: 800 for all)
    checks = json.loads((study.results_dir() / "pareto" / "pareto.json").read_text())["throughput_check"]
    (table,) = json.loads((study.results_dir() / "costs.json").read_text()).values()
    (design,) = [e for e in table.values() if e["arch"]["model"]["residual"]["kind"] != "none"]
    (check,) = checks.values()
    assert check["probe"] == design["tokens_per_s_ratio"] and check["trials"] == 1.0 and check["seeds"] == 2
    assert all(t.user_attrs["train_tokens_per_s"] == 800.0 for t in trials)


def test_grid_runs_seed_major(tmp_path):
    study = load_study(write_study(tmp_path, repeats=2))
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    trials = sorted(optuna_trials(study), key=lambda t: t.number)
    assert [RunRecord.of(t).repeat for t in trials] == [0, 0, 1, 1]  # point-major would be 0, 1, 0, 1


def test_reused_ray_worker_trains_bit_identically_to_a_fresh_one(tmp_path, shared_ray):
    # Two points that differ only in logging train the same model on the same data with the same
    # seed: the second runs in the worker the first used, and must give the very same numbers.
    path = write_study(
        tmp_path,
        space={"train.log_every": [2, 3]},
        trial={**TRIAL, "model": {**TRIAL["model"], "residual": {"kind": "value_residual"}}},
        repeats=1,
        backend="ray",
        max_concurrent=1,
        ray={"num_cpus": 2},
        output={"dir": str(tmp_path / "results"), "mlflow_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
                "checkpoints": False},
        probe={"rounds": 1, "steps": 1},
    )  # fmt: skip
    study = load_study(path)
    assert launch(study) == 0
    assert Counter(t.state for t in optuna_trials(study)) == {TrialState.COMPLETE: 2}
    first, second = sorted(mlflow_runs(study, "trial"), key=lambda r: int(r.data.tags["sweep.trial"]))
    assert first.data.tags["ray.pid"] == second.data.tags["ray.pid"]  # reused
    for key in ("final/val_loss", "final/train_loss", "final/peak_mem_mb", "final/mem_activations_mb"):
        assert first.data.metrics[key] == second.data.metrics[key], key


def test_max_models_times_groups_each_against_its_own_baseline(tmp_path, monkeypatch):
    import weakref

    import sweeps.run.probe as probe_module

    alive, most = [0], [0]
    warm = probe_module._warm_step

    def counted(arch, device):
        step = warm(arch, device)
        alive[0] += 1
        most[0] = max(most[0], alive[0])
        weakref.finalize(step, lambda: alive.__setitem__(0, alive[0] - 1))
        return step

    monkeypatch.setattr(probe_module, "_warm_step", counted)
    space = {
        "model.residual": {
            "choices": {**SPACE["model.residual"]["choices"], "sat": {"kind": "value_residual"}}
        }
    }
    study = load_study(write_study(tmp_path, space=space, probe={"rounds": 3, "steps": 1, "max_models": 2}))
    archs = {arch_key(a): a for a in (architecture(study.trial_config(p)) for p in study.planned_points())}
    base_key = next(k for k, a in archs.items() if a["model"]["residual"]["kind"] == "none")
    result = probe_module.time_architectures(archs, 3, 1, base_key, max_models=2)
    assert most[0] == 2  # the baseline and one other, never more
    others = [k for k in archs if k != base_key]
    paired = result["base_seconds_per_step"]
    assert paired[others[0]] is not paired[others[1]]  # each group timed its own baseline
    assert paired[base_key] == paired[others[0]]  # the first group's baseline is the baseline's own
    assert all(len(s) == 3 for s in result["seconds_per_step"].values())
    assert result["processes"] == 1  # a one-thread trial: its one core times every round
    assert result["trial_threads_seconds"] == result["seconds_per_step"][base_key]  # no duplicate


def test_a_trials_cores_share_the_rounds_and_then_time_the_baseline_at_its_threads(tmp_path):
    import sweeps.run.probe as probe_module

    trial = {**TRIAL, "train": {**TRIAL["train"], "num_threads": 2}}
    study = load_study(write_study(tmp_path, trial=trial))
    archs = {arch_key(a): a for a in (architecture(study.trial_config(p)) for p in study.planned_points())}
    base_key = next(k for k, a in archs.items() if a["model"]["residual"]["kind"] == "none")
    result = probe_module.time_architectures(archs, 3, 1, base_key)
    assert result["processes"] == 2  # rounds 0 and 2 here, round 1 in a child process
    assert all(len(s) == 3 for s in result["seconds_per_step"].values())  # the child's round joined
    assert result["base_seconds_per_step"] == dict.fromkeys(archs, result["seconds_per_step"][base_key])
    assert len(result["trial_threads_seconds"]) == 2  # ceil(3 x 0.5 samples a round), on 2 threads
    assert result["machine"].endswith("2 threads")


def test_a_failing_child_of_the_probe_says_why():
    import pytest

    from sweeps.run.probe import _RoundsChild

    arch = {"model": {"preset": "no-such-preset"}, "batch_size": 2, "seq_len": 8, "precision": "32",
            "compile": False, "num_threads": 1, "train": {}}  # fmt: skip
    child = _RoundsChild([{"a": arch}, [1, 2, 1], 1, "a", None])
    with pytest.raises(RuntimeError, match="(?s)child process timing rounds failed.*no-such-preset"):
        child.result()
    child.close()
    assert not child.dir.exists()


def test_a_probe_child_ends_when_its_parent_is_killed(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    import psutil

    # A stand-in parent hands a child endless rounds of a small model, prints its pid and is
    # killed once the child is timing: the orphan must stop by itself.
    model = {"preset": "tiny", "n_layers": 1, "d_model": 32, "n_heads": 2, "d_ff": 64, "max_seq_len": 16,
             "vocab_size": 64}  # fmt: skip
    arch = {"model": model, "batch_size": 2, "seq_len": 8, "precision": "auto", "compile": False,
            "num_threads": 1, "train": {}}  # fmt: skip
    args = json.dumps([{"a": arch}, [0, 10**7, 1], 1, "a", None])
    code = "\n".join([
        "import subprocess, sys, time",
        "code = 'from sweeps.run.probe import _rounds_child_main; _rounds_child_main()'",
        f"p = subprocess.Popen([sys.executable, '-c', code, {str(tmp_path / 'r.json')!r}],",
        "                      stdin=subprocess.PIPE, text=True)",
        f"p.stdin.write({args!r}); p.stdin.close()",
        "print(p.pid, flush=True)",
        "time.sleep(300)",
    ])  # fmt: skip
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    child = psutil.Process(int(parent.stdout.readline()))
    deadline = time.time() + 60
    while sum(child.cpu_times()[:2]) < 6 and time.time() < deadline:  # imports take ~3.5 s of CPU
        time.sleep(0.2)
    assert child.is_running() and (tmp_path / "r.json").exists() is False  # timing, not done
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 20
    while time.time() < deadline and _alive(child):
        time.sleep(0.2)
    alive = _alive(child)
    if alive:
        child.kill()
    assert not alive


def _alive(proc) -> bool:
    import psutil

    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
