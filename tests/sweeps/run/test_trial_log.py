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
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
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
