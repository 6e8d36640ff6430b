"""MLflow's system metrics: on for CUDA trials, off on CPU studies. No GPU has run this here: the
test forces the CUDA decision to check the wiring (a real monitor, its CPU part, in each run)."""

import dataclasses
import threading
import time

import pytest
from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

from sweeps.run import worker
from sweeps.run.launch import launch
from sweeps.study import load_study
from tests.sweeps import fake_fit
from tests.sweeps.helpers import mlflow_runs, write_study

TASK = worker.TrialTask(number=0, run_id="r", tracking_uri="sqlite:///x.db", config=None)


@pytest.mark.parametrize(
    ("mode", "gpus", "cuda", "wanted"),
    [
        ("auto", 0.0, True, False),  # a CPU trial on a machine with CUDA: off
        ("auto", 1.0, False, False),  # asked for a GPU, no CUDA where it runs: off
        ("auto", 0.5, True, True),
        ("on", 1.0, False, True),
        ("off", 1.0, True, False),
        ("on", 0.0, True, False),  # never on a CPU trial (load refuses `on` there anyway)
    ],
)
def test_wanted_on_cuda_trials_only(monkeypatch, mode, gpus, cuda, wanted):
    monkeypatch.setattr(worker, "cuda_available", lambda: cuda)
    task = dataclasses.replace(TASK, system_metrics=mode, worker_gpus=gpus)
    assert worker.system_metrics_wanted(task) is wanted


def system_keys(study) -> list[set[str]]:
    return [{k for k in r.data.metrics if k.startswith("system/")} for r in mlflow_runs(study, "trial")]


def test_a_cpu_study_logs_none_and_a_cuda_trial_logs_them_in_its_run(tmp_path, monkeypatch):
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cuda").mkdir()
    cpu = load_study(write_study(tmp_path / "cpu", repeats=1))
    assert cpu.output.system_metrics == "auto"
    assert launch(cpu, fit=fake_fit.fit, probe=fake_fit.PROBE) == 0
    assert system_keys(cpu) == [set(), set()]

    # as a CUDA trial decides (this machine has no GPU): a real monitor, sampled every 0.2 s. Each
    # fit returns once its run's monitor has published a sample: a fixed sleep raced the monitor's
    # first store read on a loaded CI machine (the run ended before any sample was published).
    published, changed = set(), threading.Condition()
    publish = SystemMetricsMonitor.publish_metrics

    def noted(monitor, metrics):
        publish(monitor, metrics)
        with changed:
            published.add(monitor._run_id)
            changed.notify_all()

    def fit_until_sampled(config, *, loggers=(), **kwargs):
        result = fake_fit.fit(config, loggers=loggers, **kwargs)
        run_id, deadline = loggers[0].run_id, time.monotonic() + 60
        with changed:
            while run_id not in published and time.monotonic() < deadline:
                changed.wait(0.5)
        return result

    fit_until_sampled.without_lightning = True
    monkeypatch.setattr(SystemMetricsMonitor, "publish_metrics", noted)
    monkeypatch.setattr(worker, "system_metrics_wanted", lambda task: task.system_metrics == "auto")
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.2")
    cuda = load_study(write_study(tmp_path / "cuda", repeats=1))
    assert launch(cuda, fit=fit_until_sampled, probe=fake_fit.PROBE) == 0
    for keys in system_keys(cuda):
        assert "system/cpu_utilization_percentage" in keys
