"""A run's end held on disk until MLflow has it (the kill between Optuna and MLflow, end to end:
tests/sweeps/run/test_launch.py)."""

import math

import pytest
from mlflow.entities import Metric

from sweeps.run.pending_finishes import PendingFinishes
from sweeps.run.tracking import Tracker


@pytest.fixture
def tracker(tmp_path):
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "e", "s", "l")
    tracker.start_parent({}, {})
    return tracker


def test_a_held_end_left_by_a_killed_launch_is_written_whole_by_the_next(tmp_path, tracker):
    run_id = tracker.start_child(0, {"train.lr": 0.1}, 0, "p", {}, {})
    curves = [Metric("val_loss", 3.0 - step, 1000 + step, step) for step in range(3)]
    held = PendingFinishes(tmp_path / "results")
    path = held.hold(run_id, "ok", {"val_loss": 1.0, "grad_norm": math.nan}, "", 2.5, curves)
    assert tracker.client.get_run(run_id).info.status == "RUNNING"  # the launch died here

    assert PendingFinishes(tmp_path / "results").write_left(tracker) == [run_id]
    run = tracker.client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["sweep.status"] == "ok"
    assert run.data.metrics["final/val_loss"] == 1.0 and math.isnan(run.data.metrics["final/grad_norm"])
    assert run.data.metrics["sweep/wall_s"] == 2.5
    history = tracker.client.get_metric_history(run_id, "val_loss")
    assert [(m.step, m.value, m.timestamp) for m in history] == [(s, 3.0 - s, 1000 + s) for s in range(3)]
    assert not path.exists()


def test_an_end_mlflow_already_has_is_not_written_twice(tmp_path, tracker):
    run_id = tracker.start_child(0, {}, 0, "p", {}, {})
    held = PendingFinishes(tmp_path)
    path = held.hold(run_id, "diverged", {"val_loss": 9.0}, "loss is nan", 1.0, [])
    # the write landed, then the launch was killed before it removed the file
    tracker.finish_child(run_id, "diverged", {"val_loss": 9.0}, "loss is nan", wall_s=1.0)
    assert held.write_left(tracker) == []
    assert len(tracker.client.get_metric_history(run_id, "final/val_loss")) == 1
    assert tracker.client.get_run(run_id).info.status == "FAILED"
    assert not path.exists()


def test_a_held_end_of_a_deleted_run_is_dropped(tmp_path, tracker):
    run_id = tracker.start_child(0, {}, 0, "p", {}, {})
    held = PendingFinishes(tmp_path)
    held.hold(run_id, "ok", {}, "", 1.0, [])
    held.hold("0" * 32, "ok", {}, "", 1.0, [])  # no such run
    (held.folder / "1234.part").write_text("{")  # a hold the kill cut short
    assert held.write_left(tracker) == [run_id]
    assert not list(held.folder.iterdir())


def test_no_folder_no_writes(tmp_path, tracker):
    assert PendingFinishes(tmp_path / "nothing").write_left(tracker) == []
