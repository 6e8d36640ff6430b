"""The MLflow logger a trial trains with: Lightning's, except that it never ends the run and that
it writes its metrics in batches."""

from __future__ import annotations

import re
import time

from lightning.fabric.utilities.logger import _add_prefix
from lightning.pytorch.loggers import MLFlowLogger
from lightning.pytorch.utilities.rank_zero import rank_zero_only

FLUSH_EVERY_S = 2.0  # the longest a logged metric waits before MLflow has it
BATCH_LIMIT = 1000  # MLflow's metrics per log_batch


class TrialLogger(MLFlowLogger):
    """The driver owns a child run's status (`sweeps.run.driver.Driver.end`: FINISHED, FAILED, or
    KILLED for a run ASHA stopped). Lightning's logger sets FINISHED when training returns, and in
    a data-parallel trial on Ray Train that can land after the driver's KILLED (seen in the
    cluster test). No checkpoints go through the logger, so ending nothing loses nothing.

    Metrics are held and written in one request at most every `FLUSH_EVERY_S` seconds, and at the
    end (`finalize`, which Lightning calls on success and on failure, and `sweeps.run.worker`
    calls again after every fit): each request costs the launcher a database transaction, the
    most of a short trial's cost (docs/bench/scale.md). Written synchronously, so a flushed
    metric is in the store when the call returns."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._pending: list = []
        self._flushed_at = time.monotonic()

    @rank_zero_only
    def log_metrics(self, metrics, step: int | None = None) -> None:
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        for key, value in _add_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR).items():
            if isinstance(value, str):
                continue  # Lightning's logger discards these too
            key = re.sub("[^a-zA-Z0-9_/. -]+", "", key)  # MLflow's allowed characters, as Lightning's
            self._pending.append(Metric(key=key, value=float(value), timestamp=stamp, step=step or 0))
        if time.monotonic() - self._flushed_at >= FLUSH_EVERY_S:
            self.flush()

    @rank_zero_only
    def flush(self) -> None:
        pending, self._pending = self._pending, []
        self._flushed_at = time.monotonic()
        for i in range(0, len(pending), BATCH_LIMIT):
            self.experiment.log_batch(run_id=self.run_id, metrics=pending[i : i + BATCH_LIMIT])

    def finalize(self, status: str = "success") -> None:
        self.flush()
