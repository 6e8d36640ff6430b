"""The MLflow logger a trial trains with: Lightning's, except that it never ends the run."""

from lightning.pytorch.loggers import MLFlowLogger


class TrialLogger(MLFlowLogger):
    """The driver owns a child run's status (`sweeps.run.driver.Driver.end`: FINISHED, FAILED, or
    KILLED for a run ASHA stopped). Lightning's logger sets FINISHED when training returns, and in
    a data-parallel trial on Ray Train that can land after the driver's KILLED (seen in the
    cluster test). Metrics are logged synchronously, and no checkpoints go through the logger,
    so ending nothing loses nothing."""

    def finalize(self, status: str = "success") -> None:
        pass
