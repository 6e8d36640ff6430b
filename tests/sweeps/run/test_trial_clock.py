"""A trial reports the seconds of its `fit` call and the launcher's part of them (bench.orchestrator
subtracts the first and adds the second to measure the launcher's cost per trial)."""

import time

from sweeps.run.tracking import client as tracking_client
from sweeps.run.worker import TrialTask, execute
from tests.sweeps import fake_fit
from trainers.config import TrialConfig


def test_fit_s_and_logging_s_time_the_fit_call_and_the_launchers_work_inside_it(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = tracking_client(uri)  # a new store: a copy of the empty one
    run = client.create_run(client.create_experiment("clock"))
    config = TrialConfig.from_dict({"model": {"preset": "tiny"}, "train": {"tokens": 4096}})

    def fit(cfg, *, loggers, callbacks, data_root, checkpoint_path):
        time.sleep(0.2)  # the training itself
        fake_fit.evaluate({"val_loss": 2.0}, 1, loggers, callbacks)  # reported to the (slow) launcher
        return {"val_loss": 2.0}

    task = TrialTask(number=0, run_id=run.info.run_id, tracking_uri=uri, config=config)
    outcome = execute(task, report=lambda metrics: time.sleep(0.1), fit=fit)
    assert outcome.status == "ok", outcome.error
    m = outcome.metrics
    assert 0.3 <= m["fit_s"] < outcome.wall_s + 1e-6
    assert 0.1 <= m["logging_s"] < m["fit_s"] - 0.2 + 0.05  # the report and the logger call, not the training


def test_a_task_travels_to_workers_with_its_frozen_config_as_is():
    """Backends and workers pass the TrialConfig object itself (pickled), never a dumped tree."""
    import pickle

    config = TrialConfig.from_dict(
        {"model": {"preset": "tiny", "residual": {"kind": "value_residual"}}, "data": {"kind": "mqar"}}
    )
    task = TrialTask(number=3, run_id="r", tracking_uri="sqlite:///x.db", config=config)
    again = pickle.loads(pickle.dumps(task))
    assert again == task and again.config == config and again.workers == 1
