"""The trial's MLflow logger writes its metrics in batches: one request per `FLUSH_EVERY_S`, every
metric in the store at the end, in the order and at the steps logged; the same for the logger of a
fit without Lightning (sweeps.run.plain_log)."""

from __future__ import annotations

import pytest

from sweeps.run import plain_log
from sweeps.run.plain_log import PlainTrialLogger
from sweeps.run.trial_log import TrialLogger

LOGGERS = [TrialLogger, PlainTrialLogger]


@pytest.fixture
def run(tmp_path):
    from sweeps.run.tracking import client as mlflow_client

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = mlflow_client(uri)  # a new store: a copy of the empty one (sweeps.run.store_template)
    experiment = client.create_experiment("t")
    return uri, client, client.create_run(experiment).info.run_id


def _counting(logger):
    calls = []
    batch = logger.experiment.log_batch

    def log_batch(*args, **kwargs):
        calls.append(len(kwargs.get("metrics", [])))
        return batch(*args, **kwargs)

    logger.experiment.log_batch = log_batch
    return calls


@pytest.mark.parametrize("kind", LOGGERS)
def test_metrics_wait_for_one_request_and_all_reach_the_store(run, kind):
    uri, client, run_id = run
    logger = kind(run_id=run_id, tracking_uri=uri)
    calls = _counting(logger)
    for step in range(4):
        logger.log_metrics({"val_loss": 2.0 - step / 10, "tokens": 100.0 * step}, step=step)
    assert calls == []  # within FLUSH_EVERY_S of the start: held
    logger.finalize("success")
    assert calls == [8]
    history = client.get_metric_history(run_id, "val_loss")
    assert [(m.step, m.value) for m in history] == [(s, 2.0 - s / 10) for s in range(4)]
    assert client.get_run(run_id).info.status == "RUNNING"  # the driver ends the run, not the logger


@pytest.mark.parametrize("kind", LOGGERS)
def test_a_long_trial_writes_every_flush_interval(run, monkeypatch, kind):
    uri, client, run_id = run
    now = [1000.0]
    monkeypatch.setattr(plain_log.time, "monotonic", lambda: now[0])
    logger = kind(run_id=run_id, tracking_uri=uri)
    calls = _counting(logger)
    logger.log_metrics({"train_loss": 3.0}, step=1)
    now[0] += plain_log.FLUSH_EVERY_S
    logger.log_metrics({"train_loss": 2.5}, step=2)  # the interval has passed: both written
    assert calls == [2]
    logger.log_metrics({"train_loss": 2.0}, step=3)
    assert calls == [2]
    logger.flush()
    assert calls == [2, 1] and len(client.get_metric_history(run_id, "train_loss")) == 3


@pytest.mark.parametrize("kind", LOGGERS)
def test_a_logger_that_hands_back_keeps_its_last_metrics_for_the_driver(run, kind):
    """`hand_back` (the local backend): `finalize` writes nothing; what it held is taken, whole and
    in order, once."""
    uri, client, run_id = run
    logger = kind(run_id=run_id, tracking_uri=uri)
    logger.hand_back = True
    calls = _counting(logger)
    for step in range(3):
        logger.log_metrics({"val_loss": 2.0 - step / 10}, step=step)
    logger.finalize("success")
    assert calls == []
    held = logger.take_held()
    assert [(m.key, m.step, m.value) for m in held] == [("val_loss", s, 2.0 - s / 10) for s in range(3)]
    assert logger.take_held() == []


def test_a_runs_end_writes_the_curves_handed_back_with_its_final_metrics(tmp_path):
    """`finish_child` writes the trial logger's last metrics and the final ones in one request, and
    the curve reads back whole (the local backend's launch: tests/bench/test_bench_scale.py)."""
    from mlflow.entities import Metric

    from sweeps.run.tracking import Tracker

    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "e", "s", "l")
    tracker.start_parent({}, {})
    run_id = tracker.start_child(0, {"train.lr": 0.1}, 0, "p", {}, {})
    calls = _counting(type("L", (), {"experiment": tracker.client})())
    curves = [Metric("val_loss", 3.0 - step, 1000 + step, step) for step in range(3)]
    tracker.finish_child(run_id, "ok", {"val_loss": 1.0}, curves=curves)
    assert calls == [4]  # the three points and the final metric: one request
    history = tracker.client.get_metric_history(run_id, "val_loss")
    assert [(m.step, m.value) for m in history] == [(0, 3.0), (1, 2.0), (2, 1.0)]
    assert tracker.client.get_run(run_id).data.metrics["final/val_loss"] == 1.0


def test_a_trials_config_yaml_is_the_text_yaml_safe_dump_writes():
    import yaml

    from sweeps.run.tracking import yaml_text
    from sweeps.study import load_study

    tree = load_study("studies/gate_granularity.yaml").to_dict()  # every kind of value a config holds
    assert yaml_text(tree) == yaml.safe_dump(tree, sort_keys=False)
