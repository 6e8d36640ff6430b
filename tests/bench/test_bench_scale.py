"""bench.scale's studies are valid studies for every sampler it names, its synthetic search
points form a report, and the sampler meter runs (the launches themselves: `python -m bench.scale`)."""

import os

import pytest
import yaml

from bench import scale, stamped_fit
from sweeps.report.fronts import compute
from sweeps.run.backends.ray.backend import RayBackend
from sweeps.study import load_study
from tests.factories import tiny_trial
from trainers.config import TrialConfig


@pytest.mark.parametrize("sampler", ["grid", "tpe", "nsga2", "random", "gp", "asha"])
def test_every_sampler_gives_a_valid_study(tmp_path, sampler):
    backend = "ray" if sampler == "asha" else "local"
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(scale.study_tree(tmp_path, sampler, 40, backend, 3)))
    study = load_study(path)
    assert [o.metric for o in study.objectives] == ["val_loss", "peak_mem_mb", "tokens_per_s"]
    if sampler == "grid":
        assert study.n_points() == 40  # lr rates x two designs


def test_the_synthetic_search_reports_one_row_per_point():
    trials = scale.search_trials(30, objectives=2, seeds=2)
    result = compute(trials, [("val_loss", "minimize"), ("peak_mem_mb", "minimize")], replicates=20)
    assert len(result["points"]) == 30 and all(r["seeds"] == 2 for r in result["points"])
    assert result["front"]


def test_the_sampler_meter_times_suggestions():
    line = scale.measure_sampler("random", 20, asks=2)
    assert line["trials"] == 20 and line["cpu_per_suggestion_s"] >= 0.0


def test_ray_concurrency_splits_the_local_rays_cpus_over_the_slots(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(
        yaml.safe_dump(scale.study_tree(tmp_path, "tpe", 64, "ray", 2, concurrency=32, ray_cpus=2))
    )
    study = load_study(path)
    assert study.max_concurrent == 32 and study.ray.num_cpus == 2
    assert study.resources.cpus == pytest.approx(2 / 32)
    assert RayBackend().concurrency(study) == 32  # the slots all fit on the Ray's 2 CPUs


def test_a_tracking_server_gets_an_experiment_a_launch(tmp_path):
    a, b = tmp_path / "bench-scale-tpe-8-aaa", tmp_path / "bench-scale-tpe-8-bbb"
    trees = [scale.study_tree(f, "tpe", 8, "ray", 2, mlflow_uri="http://127.0.0.1:5777") for f in (a, b)]
    assert [t["output"]["mlflow_uri"] for t in trees] == ["http://127.0.0.1:5777"] * 2
    assert trees[0]["name"] != trees[1]["name"]  # the server outlives a launch: no shared experiment
    assert scale.study_tree(a, "tpe", 8, "ray", 2)["output"]["mlflow_uri"].startswith("sqlite:///")


def test_a_local_bench_refuses_concurrency(capsys):
    assert scale.main(["--concurrency", "4", "--trials", "2"]) == 2
    assert "one trial at a time" in capsys.readouterr().err


def stamps(*spans):
    return [{"pid": 1, "start": s, "end": e, "cpu": 0.0, "process_cpu": 0.0} for s, e in spans]


def test_slots_count_trials_at_once_over_the_run_and_its_steady_part():
    # 2 slots; a ramp (the second trial starts 4 s late), then both busy until the last start at 10
    ran = stamps((0, 4), (4, 8), (4, 6), (6, 10), (8, 12), (10, 12))
    slots = stamped_fit.slots(ran, concurrency=2)
    assert slots["max_at_once"] == 2
    assert slots["busy_mean"] == pytest.approx(20 / 12)  # 20 trial-seconds over 12 s
    assert slots["idle"] == pytest.approx(1 - 20 / 24)
    assert slots["busy_steady"] == pytest.approx(2.0)  # from the 2nd start (4) to the last (10)
    assert slots["idle_steady"] == pytest.approx(0.0)
    # back to back in one slot of two: half idle, and one at a time at most
    slots = stamped_fit.slots(stamps((0, 1), (1, 2), (2, 3)), concurrency=2)
    assert slots["max_at_once"] == 1 and slots["idle"] == pytest.approx(0.5)
    assert stamped_fit.slots([], 4)["max_at_once"] == 0


def test_the_stamped_fit_writes_one_line_a_trial(tmp_path):
    path = tmp_path / "stamps.jsonl"
    config = TrialConfig.from_dict(tiny_trial())
    for _ in range(2):
        stamped_fit.fit(config, stamps=str(path), loggers=(), callbacks=())
    lines = stamped_fit.read(path)
    assert len(lines) == 2 and all(line["end"] >= line["start"] and line["cpu"] >= 0 for line in lines)


@pytest.mark.slow  # 48 s of the Ray group in CI (2026-12-06); the slots' arithmetic is tested above
def test_a_ray_launch_measures_its_slots(shared_ray):
    """8 stand-in trials, 4 at once on a local Ray: every trial stamped, the slots counted."""
    line = scale.measure("random", 8, "ray", 0.0, 2, keep=False, concurrency=4, ray_cpus=2)
    assert line["exit"] == 0 and line["finished"] == 8 and line["concurrency"] == 4
    assert 1 <= line["slots_max_at_once"] <= 4 and 0.0 < line["slots_busy_mean"] <= 4
    assert 0.0 < line["slots_busy_phase"] <= line["slots_busy_mean"]  # the wait for workers: idle
    assert 1 <= line["workers"] <= 4 and line["worker_start_cpu_s"] > 0
    assert (
        line["launcher_cpu_per_trial_s"] > 0
        and line["ray_total_cpu_per_trial_s"] > line["launcher_cpu_per_trial_s"]
    )


def test_a_local_launch_says_what_each_mlflow_request_costs_a_trial():
    """The per-request breakdown sums to the MLflow total, and counts the launcher's usual
    requests: the child's creation, its batches, its config.yaml and its end. With the lr bowl,
    the points stop tying: a front of at most one point a design (memory is the design's)."""
    line = scale.measure("random", 4, "local", 0.0, 2, keep=False, loss="lr-bowl")
    assert line["exit"] == 0 and line["finished"] == 4
    assert line["loss"] == "lr-bowl" and 1 <= line["front_size"] <= 2
    assert os.environ.get("FAKE_FIT_LR_BOWL") != "1"  # the tests' stand-in after it: flat again
    per = line["mlflow_ms_per_trial"]
    used = {k for k, v in per.items() if v > 0}
    assert {"create_run", "log_batch", "write_artifact", "set_terminated"} <= used
    assert sum(per.values()) == pytest.approx(1000 * line["mlflow_cpu_per_trial_s"], abs=0.05)
    # a trial's requests: its creation, params, config.yaml, one batch at its end (its last
    # metrics, handed back by the local worker, with the final ones) and its end
    calls = line["mlflow_calls_by_kind"]  # a trial's, and the parent's spread over the 4 trials
    assert calls["create_run"] == 1 + 1 / 4 and calls["set_terminated"] == 1 and calls["write_artifact"] == 1
    assert calls["log_batch"] == 2 + 1 / 4  # 3 a trial before the local worker handed its last metrics back
