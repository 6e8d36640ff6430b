"""The orchestrator benchmark: its cost arithmetic, its parts (reading a launch's child runs, the
launch's CPU, the report) without a launch, and a run end to end at a toy size (`slow`: three
Python start-ups and a launch; asserts nothing about speed)."""

import json
import os
import subprocess
import sys
import time

import pytest

from bench import orchestrator
from sweeps.run.backends.ray import kept
from sweeps.run.store_template import seed_store


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


def test_child_runs_read_each_finished_child_by_end_time_with_its_clocks(tmp_path):
    from mlflow.tracking import MlflowClient

    db = tmp_path / "mlflow.db"
    seed_store(f"sqlite:///{db}")  # the tables: a copy of the launcher's empty store
    client = MlflowClient(f"sqlite:///{db}")
    experiment = client.create_experiment("overhead_local")
    parent = client.create_run(experiment).info.run_id
    for start, fit_s, pid in ((2000, 1.5, "7"), (1000, 2.5, None)):
        tags = {"mlflow.parentRunId": parent, **({"ray.pid": pid} if pid else {})}
        run = client.create_run(experiment, start_time=start, tags=tags).info.run_id
        client.log_metric(run, "final/fit_s", fit_s)
        client.log_metric(run, "final/logging_s", 0.25)
        client.set_terminated(run, end_time=start + 500)
    client.create_run(experiment, tags={"mlflow.parentRunId": parent})  # still running: left out
    client.set_terminated(parent, end_time=3000)  # the parent: left out
    runs = orchestrator.child_runs(db)
    assert [(r["start"], r["end"], r["fit_s"], r["logging_s"], r["pid"]) for r in runs] == [
        (1.0, 1.5, 2.5, 0.25, None),
        (2.0, 2.5, 1.5, 0.25, "7"),
    ]


def test_tree_cpu_counts_a_childs_cpu_between_two_times_and_leaves_out_excluded_pids():
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\ntime.sleep(0.6)"
    proc = subprocess.Popen([sys.executable, "-c", spin])
    tree = orchestrator.TreeCPU(proc.pid)
    proc.wait()
    tree.stop()
    start, end = tree.samples[0][0] - 1, time.time()
    assert 0.3 < tree.between(start, end, exclude=set()) < 2.0  # the 0.6 s spin, read every 0.5 s
    assert tree.between(start, end, exclude={proc.pid}) == 0.0


def test_main_writes_every_backends_costs_and_the_drift_bracket(tmp_path, monkeypatch, capsys):
    """The report without its subprocesses: two direct loops and a launch, as the real ones return."""
    walls = iter([[10.0, 9.0], [9.5, 9.5]])  # the direct loop before and after the launches
    monkeypatch.setattr(
        orchestrator, "run_direct", lambda trial, n: {"trial_walls": next(walls), "total": 19.5, "wall": 21.0}
    )
    runs = [
        {"start": 105.0, "end": 115.0, "fit_s": 9.0, "logging_s": 0.1},
        {"start": 116.0, "end": 127.0, "fit_s": 10.0, "logging_s": 0.2},
    ]
    launched = []

    def run_launcher(trial, n, backend, folder, keep_ray=False):
        launched.append((trial["train"]["tokens"], n, backend))
        return {"wall": 30.0, **orchestrator.split_costs(30.0, 100.0, runs), "background_cpu_s": 0.0,
                "cpu_to_first_trial_s": 3.0}  # fmt: skip

    monkeypatch.setattr(orchestrator, "run_launcher", run_launcher)
    out = tmp_path / "orch.json"
    assert (
        orchestrator.main(["--trials", "2", "--tokens", "2048", "--backends", "local", "--json", str(out)])
        == 0
    )
    assert launched == [(2048, 2, "local")]
    result = json.loads(out.read_text())
    assert result["direct"]["per_trial"] == 9.0 and result["direct_after"]["per_trial"] == 9.5
    local = result["local"]
    assert local["in_fit_s"] == pytest.approx(0.5)  # fit 10.0 s against the slower direct loop's 9.5
    assert local["wall_diff_per_trial_s"] == pytest.approx(12.0 - 9.0)  # one cycle: 115 -> 127 s
    assert local["cost_per_trial_s"] == pytest.approx(local["outside_fit_s"] + 0.2 + 0.5)
    printed = capsys.readouterr().out
    assert "direct loop again: 9.5 s per trial (drift since the first: +0.50 s)" in printed
    assert "launcher (local): 30.0 s; per trial: cost" in printed
    assert "CPU to the first trial 3.0 s" in printed


@pytest.mark.slow
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


def test_keep_ray_measures_a_launch_that_joins_the_kept_ray_and_stops_it(tmp_path, monkeypatch, capsys):
    """--keep-ray: a first launch (it starts the kept Ray) reported apart, then the measured one."""
    walls = iter([[10.0, 9.0], [9.5, 9.5]])
    monkeypatch.setattr(
        orchestrator, "run_direct", lambda trial, n: {"trial_walls": next(walls), "total": 19.5, "wall": 21.0}
    )
    runs = [{"start": 105.0, "end": 115.0, "fit_s": 9.0, "logging_s": 0.1},
            {"start": 116.0, "end": 127.0, "fit_s": 10.0, "logging_s": 0.2}]  # fmt: skip
    launched, stopped = [], []

    def run_launcher(trial, n, backend, folder, keep_ray=False):
        launched.append((backend, keep_ray, os.environ[kept.RECORD_ENV]))
        return {"wall": 30.0, **orchestrator.split_costs(30.0, 100.0, runs), "background_cpu_s": 0.0,
                "cpu_to_first_trial_s": 3.0}  # fmt: skip

    monkeypatch.setattr(orchestrator, "run_launcher", run_launcher)
    monkeypatch.setattr(kept, "stop", lambda: stopped.append(os.environ[kept.RECORD_ENV]) or "stopped")
    monkeypatch.delenv(kept.RECORD_ENV, raising=False)
    out = tmp_path / "orch.json"
    assert orchestrator.main(["--trials", "2", "--backends", "ray", "--keep-ray", "--json", str(out)]) == 0
    record = launched[0][2]
    assert launched == [("ray", True, record), ("ray", True, record)] and stopped == [record]
    assert set(json.loads(out.read_text())) >= {"ray_first", "ray"}
    assert "launcher (ray_first)" in capsys.readouterr().out
