"""Launches end to end (stand-in fit): MLflow records, failing trials, resume after kills, Ray."""

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from optuna.trial import TrialState

from sweeps.run.launch import launch
from sweeps.run.tracking import client
from sweeps.study import load_study
from sweeps.study.run_record import RunRecord, is_done
from tests.sweeps import fake_fit
from tests.sweeps.helpers import artifacts, mlflow_runs, optuna_trials, start, wait_for_complete, write_study
from trainers import METRICS

ROOT = Path(__file__).resolve().parents[3]


def diverging_study(tmp_path, **extra):
    # baseline, sat (lr 3e-3) and sat with lr 5 (diverges): 3 points x 2 seeds = 6 runs, 2 fail
    return write_study(
        tmp_path,
        space={
            "model.residual": {"choices": {"baseline": {"kind": "none"}, "sat": {"kind": "value_residual"}}},
            "train.lr": {"choices": [0.003, 5.0], "when": {"model.residual": "sat"}},
        },
        **extra,
    )


def records(study):
    """What a launch left behind, in a backend-independent form."""
    children = sorted(mlflow_runs(study, "trial"), key=lambda r: int(r.data.tags["sweep.trial"]))
    return [
        (
            r.info.status,
            r.data.tags["sweep.status"],
            r.data.tags.get("kind"),
            r.data.tags.get("pareto_rank"),
            tuple(sorted(r.data.params.items())),
            round(r.data.metrics.get("final/val_loss", -1), 6),
            tuple(sorted(r.data.metrics)),  # the same metrics: none of Ray's own keys or the config
        )
        for r in children
    ]


@pytest.fixture(scope="module")
def diverged(tmp_path_factory):
    """One local launch of `diverging_study` (6 runs, 2 diverge), read by the tests below."""
    folder = tmp_path_factory.mktemp("diverged")
    study = load_study(diverging_study(folder))
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE, stream=io.StringIO()) == 0
    return folder, study


def test_every_run_is_recorded_and_a_diverging_one_fails_with_why(diverged):
    _, study = diverged
    records = [(t, RunRecord.of(t)) for t in optuna_trials(study)]
    assert Counter((t.state, r.status) for t, r in records) == {
        (TrialState.COMPLETE, "ok"): 4,
        (TrialState.FAIL, "diverged"): 2,
    }
    assert all(r.fail_reason == "diverged" for t, r in records if t.state == TrialState.FAIL)
    assert all(is_done(t) for t, _ in records)  # a run that failed through its own fault is done
    points = {r.point for _, r in records}
    assert len(points) == 3 and {(r.point, r.seed) for _, r in records} == {
        (p, s) for p in points for s in (0, 1)
    }
    children = {c.info.run_id: c for c in mlflow_runs(study, "trial")}
    assert {r.mlflow_run_id for _, r in records} == set(children)
    for t, r in records:
        child = children[r.mlflow_run_id]
        assert child.data.tags["sweep.status"] == r.status and child.data.tags["sweep.seed"] == str(r.seed)
        failed = t.state == TrialState.FAIL
        assert child.info.status == ("FAILED" if failed else "FINISHED")
        assert not failed or "diverged" in child.data.tags["sweep.error"]
        assert (child.data.tags["pareto_rank"] == "-1") == failed


def test_the_parent_run_holds_the_studys_files_costs_and_front(diverged):
    folder, study = diverged
    (parent,) = mlflow_runs(study, "parent")
    assert parent.info.status == "FINISHED" and parent.data.tags["git_commit"]
    assert (
        parent.data.metrics["points"] == 2 and "hypervolume" in parent.data.metrics
    )  # lr 5: no run completed
    experiment = client(study.mlflow_uri()).get_experiment_by_name(study.experiment_name)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"  # not the GenAI view
    assert experiment.artifact_location == (folder / "mlruns" / study.name).as_uri()  # beside the DB
    assert parent.data.params["n_runs"] == "6" and "version.torch" in parent.data.tags
    costs = {k: v for k, v in parent.data.metrics.items() if k.startswith("launch_")}
    assert set(costs) == {"launch_start_s", "launch_connect_s", "launch_report_s"}
    assert all(0 <= v < parent.data.metrics["wall_s"] + costs["launch_start_s"] for v in costs.values())
    files = artifacts(study, parent)
    assert "study.yaml" in files and "pareto/pareto.csv" in files and "pareto/pareto.html" in files
    assert "pareto/front_val_loss_vs_tokens_per_s.png" in files
    assert "pareto/loss_vs_cost.png" in files and "pareto/equal_time.json" in files


def test_each_child_run_names_its_point_seed_and_design(diverged):
    _, study = diverged
    (parent,) = mlflow_runs(study, "parent")
    children = mlflow_runs(study, "trial")
    assert len(children) == 6
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    names = ("baseline", "residual=sat, lr=0.003", "residual=sat, lr=5.0")
    assert sorted(c.data.tags["mlflow.runName"] for c in children) == [
        f"{name}/s{seed}" for name in names for seed in (0, 1)
    ]
    ok = [c for c in children if c.info.status == "FINISHED"]
    assert {c.data.tags["kind"] for c in ok} == {"none", "value_residual"}
    sat = next(c for c in ok if c.data.tags["kind"] == "value_residual")
    design = {
        k: sat.data.tags[k] for k in ("kind", "mode", "granularity", "activation", "tap_layer", "consumers")
    }
    assert sat.data.params == {
        "model.residual": "sat",
        "train.lr": "0.003",
        "seed": sat.data.tags["sweep.seed"],
        **design,  # the design's descriptors, as params for MLflow's charts
    }
    final = {f"final/{m}" for m in (*METRICS, "tokens_per_s", "tokens_per_s_ratio", "fit_s", "logging_s")}
    assert set(sat.data.metrics) <= {*final, *METRICS, "sweep/wall_s", "epoch", "pareto_rank", "p_front"}
    assert sat.data.metrics["final/fit_s"] >= sat.data.metrics["final/logging_s"] > 0
    assert sat.data.tags["pareto_rank"] == "0" and sat.data.tags["mode"] == "gated"
    assert "config.yaml" in artifacts(study, sat)
    curve = client(study.mlflow_uri()).get_metric_history(sat.info.run_id, "val_loss")
    assert len(curve) >= 4  # the curve streamed by the trainer's logger, not only the final value


def test_resume_after_ctrl_c_and_after_kill_9_ends_exactly_at_the_total(tmp_path):
    path = write_study(tmp_path)  # 2 points x 2 seeds = 4 runs, local backend
    study = load_study(path)

    first = start(path)
    wait_for_complete(study, 1, first)
    first.send_signal(signal.SIGINT)
    assert first.wait(60) == 130, first.stdout.read()

    second = start(path)
    wait_for_complete(study, 2, second)
    second.kill()  # SIGKILL: no chance to clean up
    second.wait(30)
    held = {p.stem for p in (study.results_dir() / "mlflow-pending").glob("*.json")}  # ends not yet written
    running = [r for r in mlflow_runs(study, "trial") if r.info.status == "RUNNING"]
    killed = [r for r in running if r.info.run_id not in held]
    assert len(killed) == 1

    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0

    trials = optuna_trials(study)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 4
    assert sorted((RunRecord.of(t).point, RunRecord.of(t).seed) for t in complete) == sorted(
        {(RunRecord.of(t).point, RunRecord.of(t).seed) for t in complete}
    )  # every point x seed exactly once
    assert all(RunRecord.of(t).fail_reason == "interrupted" for t in trials if t.state == TrialState.FAIL)
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]

    runs = mlflow_runs(study, "trial") + mlflow_runs(study, "parent")
    assert not [r for r in runs if r.info.status == "RUNNING"]  # no orphans
    interrupted = [r for r in mlflow_runs(study, "trial") if r.data.tags["sweep.status"] == "interrupted"]
    assert len(interrupted) == 2 and all(r.info.status == "KILLED" for r in interrupted)
    assert all("interrupted" in r.data.tags["sweep.error"] for r in interrupted)
    finished = [r for r in mlflow_runs(study, "trial") if r.info.status == "FINISHED"]
    assert len(finished) == 4
    parents = sorted(mlflow_runs(study, "parent"), key=lambda r: r.info.start_time)
    assert [p.info.status for p in parents] == ["KILLED", "KILLED", "FINISHED"]


def test_a_kill_before_a_finished_runs_mlflow_write_lands_loses_none_of_it(tmp_path):
    path = write_study(tmp_path, repeats=1)
    study = load_study(path)
    proc = start(path, FAKE_FINISH_DELAY="60")  # every child's final MLflow write waits past the kill
    wait_for_complete(study, 1, proc)  # Optuna holds trial 0 COMPLETE; its MLflow run is unwritten
    proc.kill()
    proc.wait(30)
    (done,) = [t for t in optuna_trials(study) if t.state == TrialState.COMPLETE]
    run_id = RunRecord.of(done).mlflow_run_id
    assert client(study.mlflow_uri()).get_run(run_id).info.status == "RUNNING"

    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0

    run = client(study.mlflow_uri()).get_run(run_id)  # written by the next launch, not closed as killed
    assert run.info.status == "FINISHED" and run.data.tags["sweep.status"] == "ok"
    assert run.data.metrics["final/val_loss"] == done.values[0]
    assert run.data.metrics["sweep/wall_s"] > 0
    statuses = Counter(r.data.tags["sweep.status"] for r in mlflow_runs(study, "trial"))
    assert statuses == {"ok": 2, "interrupted": 1}  # the run the kill cut short, run again
    assert not list((study.results_dir() / "mlflow-pending").iterdir())


def test_ray_backend_gives_the_same_records_as_local(tmp_path, shared_ray):
    # one seed a point: 3 runs, one of them diverging (the local test above runs both seeds)
    (tmp_path / "local").mkdir()
    local = load_study(diverging_study(tmp_path / "local", repeats=1))
    assert launch(local, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    (tmp_path / "ray").mkdir()
    ray_study = load_study(
        diverging_study(
            tmp_path / "ray",
            repeats=1,
            backend="ray",
            max_concurrent=2,
            ray={"num_cpus": 2, "reuse_actors": True},
        ),
    )
    assert launch(ray_study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    assert records(ray_study) == records(local)
    assert Counter(t.state for t in optuna_trials(ray_study)) == {TrialState.COMPLETE: 2, TrialState.FAIL: 1}


@pytest.mark.slow
def test_asha_stops_bad_trials_and_keeps_them_out_of_the_front(tmp_path, shared_ray):
    path = write_study(
        tmp_path,
        backend="ray",
        max_concurrent=1,
        ray={"num_cpus": 2, "reuse_actors": True},
        scheduler={"kind": "asha", "grace_tokens": 1024, "reduction_factor": 2},
        repeats=3,
    )
    study = load_study(path)
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    states = Counter(t.state for t in optuna_trials(study))
    assert states[TrialState.COMPLETE] + states[TrialState.PRUNED] == 6
    assert states[TrialState.PRUNED] >= 1  # seeds 1, 2 of a point are 0.01, 0.02 worse at every rung
    pruned = [r for r in mlflow_runs(study, "trial") if r.data.tags["sweep.status"] == "pruned"]
    assert all(r.data.tags["pareto_rank"] == "-1" and r.info.status == "KILLED" for r in pruned)


def test_real_trainer_end_to_end_on_the_local_backend(tmp_path, capsys):
    """trainers.fit itself (no stand-in): tiny MQAR, baseline vs SATFormer, one seed each."""
    study = load_study(write_study(tmp_path, repeats=1))
    assert launch(study) == 0
    trials = optuna_trials(study)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    for child in mlflow_runs(study, "trial"):
        assert child.info.status == "FINISHED"
        assert {"final/val_loss", "final/tokens_per_s", "final/peak_mem_mb", "tokens"} <= set(
            child.data.metrics
        )
    from sweeps.pareto import main as pareto_main

    assert pareto_main([str(tmp_path / "t.yaml")]) == 0
    assert "hypervolume" in capsys.readouterr().out
    # Each trial keeps its final weights; the gate analysis runs on the SATFormer trial by run id.
    from gates import cli as analyze

    sat = next(r for r in mlflow_runs(study, "trial") if r.data.tags["kind"] == "value_residual")
    assert "checkpoint/final.ckpt" in artifacts(study, sat)
    out = tmp_path / "analysis"
    assert analyze.main([sat.info.run_id, "--tracking-uri", study.mlflow_uri(), "--out", str(out)]) == 0
    assert "analysis/summary.json" in artifacts(study, sat)


def test_ray_launch_resumes_after_ctrl_c(tmp_path, shared_ray):
    path = write_study(  # 2 runs: one done before the Ctrl-C, one interrupted and run again
        tmp_path, repeats=1, backend="ray", max_concurrent=1, ray={"num_cpus": 2, "reuse_actors": True}
    )
    study = load_study(path)
    first = start(path)
    wait_for_complete(study, 1, first, timeout=180)
    first.send_signal(signal.SIGINT)
    assert first.wait(120) == 130, first.stdout.read()
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    trials = optuna_trials(study)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 2 and len({(RunRecord.of(t).point, RunRecord.of(t).seed) for t in complete}) == 2
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    runs = mlflow_runs(study, "trial") + mlflow_runs(study, "parent")
    assert not [r for r in runs if r.info.status == "RUNNING"]
    assert [r.data.tags["sweep.status"] for r in mlflow_runs(study, "trial")].count("ok") == 2


def test_experiment_created_by_another_launcher_in_between_is_reused(tmp_path):
    """Two launchers starting at once race to create the study's experiment: the loser reuses it."""
    from sweeps.run.tracking import client, experiment_id

    c = client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    created = c.create_experiment("race")
    lookups = iter([None])  # the first lookup misses, as if the other launcher had not yet committed
    real_lookup = c.get_experiment_by_name
    c.get_experiment_by_name = lambda name: next(lookups, None) or real_lookup(name)
    assert experiment_id(c, "race") == created


def test_a_study_where_nothing_completed_exits_4(tmp_path, capsys):
    study = load_study(write_study(tmp_path, repeats=1), ["trial.train.lr=300"])
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 4
    assert "pareto: no trial has completed its budget yet" in capsys.readouterr().out
    assert Counter(t.state for t in optuna_trials(study)) == {TrialState.FAIL: 2}


def test_resuming_an_edited_study_is_refused_with_the_changed_keys(tmp_path, capsys):
    from sweeps.run.launch import main

    path = write_study(tmp_path, repeats=1)
    assert launch(load_study(path), fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    # not a change of the experiment: where it runs and how many at a time
    same = load_study(
        path, ["max_concurrent=1", "ray.num_cpus=1", "output.checkpoints=false", "probe.max_models=2"]
    )
    assert launch(same, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    assert main([str(path), "--set", "trial.train.tokens=8192", "--set", "repeats=2"]) == 2
    err = capsys.readouterr().err
    assert "trial.train.tokens: was 4096, now 8192" in err and "repeats: was 1, now 2" in err
    assert "give it a new name, or remove" in err
    assert len(mlflow_runs(load_study(path), "parent")) == 2  # the refused launch recorded nothing


def test_a_journal_cut_in_the_middle_of_a_write_resumes(tmp_path):
    path = write_study(tmp_path, repeats=1)
    study = load_study(path)
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    journal = Path(study.storage_url()[len("journal:") :])
    whole = journal.read_bytes()
    journal.write_bytes(whole + b'{"op_code": 5, "worker_id": "x", "trial_id": 0, "par')  # crash mid-write
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0  # resumes: nothing left to run
    repaired = journal.read_bytes()
    assert repaired.startswith(whole)  # the fragment was cut; the resume appended clean records
    assert all(json.loads(line) for line in repaired.splitlines())
    assert Path(f"{journal}.fragment").read_bytes().startswith(b'{"op_code": 5')
    import optuna

    from sweeps.run.storage import open_storage

    optuna.load_study(study_name=study.name, storage=open_storage(study.storage_url())).enqueue_trial({})
    states = Counter(t.state for t in optuna_trials(study))  # later writes land on clean lines
    assert states == {TrialState.COMPLETE: 2, TrialState.WAITING: 1}


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_a_hung_trial_is_stopped_at_its_limit_and_the_study_goes_on(tmp_path, backend, shared_ray):
    space = {
        "model.residual": {"choices": {"baseline": {"kind": "none"}, "sat": {"kind": "value_residual"}}},
        "train.min_lr_ratio": {"choices": [0.1, 0.5], "when": {"model.residual": "sat"}},  # 0.5 hangs
    }
    extra = {"ray": {"num_cpus": 2}, "max_concurrent": 1} if backend == "ray" else {}
    path = write_study(tmp_path, space=space, repeats=1, backend=backend, trial_timeout_s=3, **extra)
    study = load_study(path)
    start = time.time()
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    assert time.time() - start < 120
    trials = optuna_trials(study)
    assert Counter(t.state for t in trials) == {TrialState.COMPLETE: 2, TrialState.FAIL: 1}
    (hung,) = [t for t in trials if t.state == TrialState.FAIL]
    assert (
        RunRecord.of(hung).fail_reason == "timeout" and "wall-clock limit of 3 s" in RunRecord.of(hung).error
    )
    (run,) = [r for r in mlflow_runs(study, "trial") if r.info.status == "FAILED"]
    assert run.data.tags["sweep.status"] == "timeout" and run.data.tags["pareto_rank"] == "-1"


@pytest.mark.slow
def test_three_kill_9_at_random_moments_end_exactly_at_the_total_and_leave_no_ray_behind(tmp_path):
    import random

    import psutil

    path = write_study(
        tmp_path,
        space={
            "model.residual": {"choices": {"baseline": {"kind": "none"}, "sat": {"kind": "value_residual"}}}
        },
        repeats=3,
        backend="ray",
        max_concurrent=1,
        ray={"num_cpus": 2},
    )
    study = load_study(path)
    rng = random.Random(0)
    earlier: list[psutil.Process] = []
    for _ in range(3):
        proc = start(path)
        time.sleep(rng.uniform(6.0, 25.0))  # start-up, the probe, a trial or between trials
        earlier += psutil.Process(proc.pid).children(recursive=True)
        proc.kill()
        proc.wait(30)
    assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    done = time.time()

    trials = optuna_trials(study)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 6
    assert len({(RunRecord.of(t).point, RunRecord.of(t).seed) for t in complete}) == 6  # no duplicate
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    runs = mlflow_runs(study, "trial") + mlflow_runs(study, "parent")
    assert not [r for r in runs if r.info.status == "RUNNING"]
    assert [r.data.tags["sweep.status"] for r in mlflow_runs(study, "trial")].count("ok") == 6

    def alive():
        out = []
        for p in earlier:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except psutil.NoSuchProcess:
                pass
        return out

    while alive() and time.time() < done + 60:
        time.sleep(1)
    assert not alive(), [p.cmdline()[:2] for p in alive()]


def test_a_study_resumes_while_mlflow_ui_holds_its_database_open(tmp_path):
    import socket
    import urllib.request

    study = load_study(write_study(tmp_path, repeats=1))
    client(study.mlflow_uri()).create_experiment("first")  # what the UI lists before the launch
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    mlflow_bin = str(Path(sys.executable).with_name("mlflow"))
    ui = subprocess.Popen(
        [mlflow_bin, "ui", "--backend-store-uri", study.mlflow_uri(), "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/search?max_results=10"
        deadline = time.time() + 90
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    assert "first" in response.read().decode()
                break
            except OSError:
                assert ui.poll() is None and time.time() < deadline, "mlflow ui did not come up"
                time.sleep(1)
        assert launch(study, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0  # writes while the UI reads
        with urllib.request.urlopen(url, timeout=5) as response:  # and the UI still reads it
            assert study.name in response.read().decode()
        assert [r.info.status for r in mlflow_runs(study, "trial")] == ["FINISHED"] * 2
    finally:
        os.killpg(ui.pid, signal.SIGTERM)
        ui.wait(30)
