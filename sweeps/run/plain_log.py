"""A trial's metrics written to MLflow in batches, without Lightning.

`MetricBatch` holds the metrics a trial logs and says when to write them: one `log_batch` at most
every `FLUSH_EVERY_S` seconds and at the end (each request costs the launcher a database
transaction, the most of a short trial's cost: docs/bench/scale.md). Lightning's logger of a
trial (`sweeps.run.trial_log.TrialLogger`) writes through it; so does `PlainTrialLogger`, the
logger of a fit that trains without Lightning (`fit.without_lightning`: the stand-in fits of the
tests and of bench.scale), whose worker processes then never import Lightning (seconds of every
worker's start: docs/bench/scale.md, "Dozens at once").
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping

from sweeps.run.tracking import client

FLUSH_EVERY_S = 2.0  # the longest a logged metric waits before MLflow has it
BATCH_LIMIT = 1000  # MLflow's metrics per log_batch


class MetricBatch:
    def __init__(self):
        self.pending: list = []
        self.flushed_at = time.monotonic()

    def add(self, metrics: Mapping, step: int | None) -> bool:
        """Holds the numeric metrics; True when the held ones are due to be written."""
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        for key, value in metrics.items():
            if isinstance(value, str):
                continue  # Lightning's logger discards these too
            key = re.sub("[^a-zA-Z0-9_/. -]+", "", key)  # MLflow's allowed characters, as Lightning's
            self.pending.append(Metric(key=key, value=float(value), timestamp=stamp, step=step or 0))
        return time.monotonic() - self.flushed_at >= FLUSH_EVERY_S

    def take(self) -> list:
        """What is held, handed over to be written elsewhere (and no longer held here)."""
        pending, self.pending = self.pending, []
        return pending

    def flush(self, mlflow_client, run_id: str) -> None:
        """Writes what is held, synchronously: a flushed metric is in the store on return."""
        pending, self.pending = self.pending, []
        self.flushed_at = time.monotonic()
        for i in range(0, len(pending), BATCH_LIMIT):
            mlflow_client.log_batch(run_id=run_id, metrics=pending[i : i + BATCH_LIMIT])


class HandsBack:
    """The end of both trial loggers (this module's and `sweeps.run.trial_log.TrialLogger`), which
    hold their metrics in `batch` and write them with `flush`: `finalize` writes what is held, or
    with `hand_back` keeps it for `take_held` (sweeps.run.worker.execute: the driver writes it)."""

    hand_back = False

    def finalize(self, status: str = "success") -> None:
        if not self.hand_back:
            self.flush()

    def take_held(self) -> list:
        """The metrics still held, for the driver to write with the run's final ones."""
        return self.batch.take()


class PlainTrialLogger(HandsBack):
    """What a fit without Lightning calls on its logger (`log_metrics`, `finalize`) and what the
    worker reads from it (`experiment`, `run_id`, `flush`), as `TrialLogger` does them; like it,
    it never ends the run (the driver does)."""

    def __init__(self, run_id: str, tracking_uri: str):
        self.run_id = run_id
        self.tracking_uri = tracking_uri
        self.batch = MetricBatch()
        self._client = None

    @property
    def experiment(self):
        if self._client is None:
            self._client = client(self.tracking_uri)
        return self._client

    def log_hyperparams(self, params: Mapping) -> None:
        from mlflow.entities import Param

        self.experiment.log_batch(self.run_id, params=[Param(k, str(v)) for k, v in params.items()])

    def log_metrics(self, metrics: Mapping, step: int | None = None) -> None:
        if self.batch.add(metrics, step):
            self.flush()

    def flush(self) -> None:
        self.batch.flush(self.experiment, self.run_id)
