"""The paired val_loss difference at each evaluation, over shared seeds, with its 95% band."""

import csv
import math

import pytest

from sweeps.report.paired_curves import differences
from sweeps.run.launch import launch
from sweeps.study import load_study
from tests.sweeps import fake_fit
from tests.sweeps.helpers import artifacts, mlflow_runs, write_study

T_975_1 = 12.706204736  # the t quantile of a 95% interval with 2 seeds (df 1)


def growing_gap_fit(config, *, loggers=(), callbacks=(), data_root=None, checkpoint_path=None):
    """The gated design's gap to the baseline grows by 0.05 an evaluation; seed s adds 0.01 s to it."""
    gated = config.model.residual.kind != "none"
    steps, loss = 4, 0.0
    for step in range(1, steps + 1):
        loss = 3.0 + 1.0 / step + gated * (-0.05 * step + 0.01 * config.seed)
        fake_fit.evaluate(
            {"val_loss": loss, "tokens": config.train.tokens * step / steps}, step, loggers, callbacks
        )
    fake_fit.finish(loggers)
    final = {"val_loss": loss, "peak_mem_mb": 100.0 + 10 * gated, "train_tokens_per_s": 800.0}
    return {**final, "params_total": 1000.0, "tokens": float(config.train.tokens)}


def test_differences_by_hand():
    point = {0: {10: 1.0, 20: 0.5}, 1: {10: 1.2, 20: 0.7}, 2: {10: 9.0}}  # seed 2: the reference lacks it
    reference = {0: {10: 1.5, 20: 1.0, 30: 0.9}, 1: {10: 1.5, 20: 1.0}}
    rows = differences(point, reference)
    assert [r["tokens"] for r in rows] == [10, 20] and all(r["seeds"] == 2 for r in rows)
    assert rows[0]["diff"] == pytest.approx(-0.4) and rows[1]["diff"] == pytest.approx(-0.4)
    half = T_975_1 * math.sqrt(0.02) / math.sqrt(2)  # the diffs -0.5, -0.3: sd sqrt(0.02)
    assert rows[0]["lo"] == pytest.approx(-0.4 - half) and rows[0]["hi"] == pytest.approx(-0.4 + half)
    one = differences({0: {10: 1.0}}, {0: {10: 2.0}})
    assert one[0]["diff"] == -1.0 and math.isnan(one[0]["lo"])  # one seed: no band
    assert differences({0: {10: 1.0}}, {1: {10: 2.0}}) == []  # no shared seed


def test_the_launch_writes_the_csv_and_figure_into_the_parent_run(tmp_path):
    study = load_study(write_study(tmp_path))  # baseline and sat, seeds 0 and 1
    assert launch(study, fit=growing_gap_fit, probe=fake_fit.PROBE) == 0
    (parent,) = mlflow_runs(study, "parent")
    assert {"pareto/paired_curves.csv", "pareto/paired_curves.png"} <= set(artifacts(study, parent))
    with (study.results_dir() / "pareto" / "paired_curves.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["name"] for r in rows] == ["sat"] * 4 and {r["metric"] for r in rows} == {"val_loss"}
    half = T_975_1 * math.sqrt(0.01**2 / 2) / math.sqrt(2)  # diffs differ by 0.01 between the seeds
    for k, r in enumerate(rows, start=1):
        assert float(r["tokens"]) == 4096 * k / 4 and r["seeds"] == "2"
        assert float(r["diff"]) == pytest.approx(-0.05 * k + 0.005)  # the gap opens with training
        assert float(r["hi"]) - float(r["diff"]) == pytest.approx(half)


def test_histories_read_in_bulk_equal_the_per_run_reads_in_fewer_requests(tmp_path):
    """paired_curves.prefetch: MLflow's SQL store's bulk query gives each run's {step: value} as
    get_metric_history does (a step logged twice keeps the later value; a run without the metric
    is empty), in one query per metric per BULK_RUNS runs instead of one request per run."""
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    from sweeps.report import paired_curves
    from sweeps.run.tracking import client

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    writer = client(uri)  # a new store: a copy of the empty one (sweeps.run.store_template)
    experiment = writer.create_experiment("bulk")
    runs = [writer.create_run(experiment).info.run_id for _ in range(7)]
    for i, run_id in enumerate(runs[:-1]):  # the last run logs nothing
        rows = [Metric("val_loss", 3.0 - s / 10 + i, 1000 + s, s) for s in range(5)]
        rows += [Metric("tokens", 128.0 * s, 1000 + s, s) for s in range(5)]
        rows.append(Metric("val_loss", 9.0 + i, 2000, 2))  # step 2 again, later
        writer.log_batch(run_id, metrics=rows)

    bulk_client, plain_client = MlflowClient(uri), MlflowClient(uri)
    store = bulk_client._tracking_client.store
    calls = []
    original = store.get_metric_history_bulk
    store.get_metric_history_bulk = lambda *a, **k: calls.append(a[1]) or original(*a, **k)
    paired_curves.BULK_RUNS, before = 4, paired_curves.BULK_RUNS
    try:
        paired_curves.prefetch(bulk_client, [*runs, runs[0], ""], ["val_loss", "tokens"])
    finally:
        paired_curves.BULK_RUNS = before
    assert calls == ["val_loss", "val_loss", "tokens", "tokens"]  # 7 runs in chunks of 4
    for run_id in runs:
        for metric in ("val_loss", "tokens"):
            expected = paired_curves.history(plain_client, run_id, metric)  # one request per run
            assert paired_curves.history(bulk_client, run_id, metric) == expected
    assert paired_curves.history(bulk_client, runs[0], "val_loss")[2] == 9.0
    assert paired_curves.history(bulk_client, runs[-1], "val_loss") == {}
    assert len(calls) == 4  # every read above came from the prefetched cache
