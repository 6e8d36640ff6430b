"""The MLflow logger a trial trains with: Lightning's, except that it never ends the run and that
it writes its metrics in batches (sweeps.run.plain_log)."""

from __future__ import annotations

from lightning.fabric.utilities.logger import _add_prefix
from lightning.pytorch.loggers import MLFlowLogger
from lightning.pytorch.utilities.rank_zero import rank_zero_only

from sweeps.run.plain_log import FLUSH_EVERY_S, HandsBack, MetricBatch

__all__ = ["FLUSH_EVERY_S", "TrialLogger"]


class TrialLogger(HandsBack, MLFlowLogger):
    """The driver owns a child run's status (`sweeps.run.driver.Driver.end`: FINISHED, FAILED, or
    KILLED for a run ASHA stopped). Lightning's logger sets FINISHED when training returns, and in
    a data-parallel trial on Ray Train that can land after the driver's KILLED (seen in the
    cluster test). No checkpoints go through the logger, so ending nothing loses nothing.

    Metrics are held and written in one request at most every `FLUSH_EVERY_S` seconds, and at the
    end (`finalize`, which Lightning calls on success and on failure, and `sweeps.run.worker`
    calls again after every fit): `MetricBatch`; `HandsBack` for the end."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.batch = MetricBatch()

    @rank_zero_only
    def log_metrics(self, metrics, step: int | None = None) -> None:
        if self.batch.add(_add_prefix(metrics, self._prefix, self.LOGGER_JOIN_CHAR), step):
            self.flush()

    @rank_zero_only
    def flush(self) -> None:
        self.batch.flush(self.experiment, self.run_id)
