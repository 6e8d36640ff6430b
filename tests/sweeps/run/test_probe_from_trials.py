"""A study of one architecture times nothing before its trials: its tokens_per_s is its trials' own
clock (sweeps.run.probe.speed_from_trials, Probe.record), and the report says so."""

import io
import json

import pytest

from sweeps.report.costs import TRIALS_CLOCK
from sweeps.run.backends.ray.outcome import final_report, outcome_of
from sweeps.run.launch import launch
from sweeps.run.probe import Probe, speed_from_trials
from sweeps.run.worker import Outcome
from sweeps.study import load_study
from sweeps.study.study_plan import resolve
from tests.sweeps import fake_fit
from tests.sweeps.helpers import mlflow_runs, write_study

LR = {"train.lr": [1.0e-3, 3.0e-3]}  # two points, one architecture


@pytest.mark.parametrize(
    ("extra", "from_trials"),
    [
        ({"space": {}}, True),
        ({"space": LR}, True),
        ({}, False),  # two designs: a ratio to pair
        ({"space": {}, "budget": {"time": 10}}, False),  # each run's tokens from the speed, before it
        ({"space": {}, "resources": {"workers": 2, "cpus": 1}}, False),  # the all-reduce: not the probe's
        ({"space": LR, "sampler": {"kind": "tpe"}, "n_trials": 2}, False),  # architectures come with trials
    ],
)
def test_which_studies_take_their_speed_from_their_trials(tmp_path, extra, from_trials):
    study = load_study(write_study(tmp_path, **extra))
    assert speed_from_trials(resolve(study)) is from_trials


def test_the_trials_speeds_make_the_entry_and_a_probed_one_is_kept(tmp_path):
    study = load_study(write_study(tmp_path, space={}))
    (point,) = study.planned_points()
    cfg = study.trial_config(point)
    calls = []
    probe = Probe(study, lambda fn, *args: calls.append(fn.__name__) or fn(*args), from_trials=True)
    probe.ensure([cfg])
    assert calls == [] and probe.metrics(cfg) == {}  # nothing timed before the trials
    probe.record(cfg, {"train_tokens_per_s": 900.0})
    probe.record(cfg, {"train_tokens_per_s": float("nan")})  # no reading: nothing recorded
    probe.record(cfg, {"train_tokens_per_s": 1100.0})
    assert calls == ["where_trials_run"]  # once
    assert probe.metrics(cfg) == {"tokens_per_s": 1000.0, "tokens_per_s_ratio": 1.0}
    (table,) = json.loads((study.results_dir() / "costs.json").read_text()).values()
    (entry,) = table.values()
    assert entry["clock"] == TRIALS_CLOCK and entry["baseline_tokens_per_s_samples"] == [900.0, 1100.0]
    assert entry["kernels"]["torch"]
    entry["clock"] = "wall"  # as a probe of an earlier launch wrote it
    (study.results_dir() / "costs.json").write_text(json.dumps({probe.machine: table}))
    again = Probe(study, from_trials=True)
    again.record(cfg, {"train_tokens_per_s": 5000.0})
    assert again.metrics(cfg)["tokens_per_s"] == 1000.0


WHERE = ("host|x86_64|2 cpus|2 threads", {"cpu": "AMD EPYC", "cpus": "2", "torch": "2.13.0+cpu",
                                          "cpu_capability": "AVX512"})  # fmt: skip


def test_a_trial_that_says_where_it_trained_is_not_asked_again(tmp_path):
    """The trial's own word (`Outcome.machine`, read in its worker) keys its speed: no task asks
    where trials run, so a Ray launcher imports no torch for it (docs/bench/launch_costs.md)."""
    study = load_study(write_study(tmp_path, space={}))
    (point,) = study.planned_points()
    cfg = study.trial_config(point)
    calls = []
    probe = Probe(study, lambda fn, *args: calls.append(fn.__name__) or fn(*args), from_trials=True)
    probe.record(cfg, {"train_tokens_per_s": 900.0}, WHERE)
    probe.record(cfg, {"train_tokens_per_s": 1100.0}, ("elsewhere|x|1 cpus|1 threads", {}))  # the first's
    assert calls == [] and probe.machine == WHERE[0]
    entries = json.loads((study.results_dir() / "costs.json").read_text())
    (entry,) = entries[WHERE[0]].values()
    assert list(entries) == [WHERE[0]] and entry["kernels"] == WHERE[1]
    assert entry["baseline_tokens_per_s_samples"] == [900.0, 1100.0]


@pytest.mark.parametrize("machine", [WHERE, None])
def test_where_a_ray_trial_trained_comes_back_with_its_outcome(machine):
    outcome = Outcome("ok", {"val_loss": 2.5, "train_tokens_per_s": 900.0}, "", 1.0, machine=machine)
    back = outcome_of(final_report(outcome), error=False)
    assert (back.machine, back.metrics) == (machine, outcome.metrics)


def test_a_one_architecture_launch_runs_no_probe_and_reports_its_trials_speed(tmp_path):
    study = load_study(write_study(tmp_path, space={}, repeats=2))
    out = io.StringIO()
    assert launch(study, fit=fake_fit.fit, stream=out) == 0  # the launcher's own probe
    text = out.getvalue()
    assert "cost probe:" not in text
    assert "one architecture, so no probe: the median of its trials' own train_tokens_per_s" in text
    (parent,) = mlflow_runs(study, "parent")
    assert parent.data.metrics["probe_s"] == 0.0
    assert all(c.data.metrics["final/tokens_per_s"] == 800.0 for c in mlflow_runs(study, "trial"))
    (row,) = json.loads((study.results_dir() / "pareto" / "pareto.json").read_text())["points"]
    assert row["tokens_per_s"] == 800.0 and row["seeds"] == 2
