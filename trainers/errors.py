"""Typed errors of the training loop."""


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite; the message names the step and the value.

    Sweep launchers catch this to mark a trial as failed (diverged) rather than crashed.
    """

    def __init__(self, step: int, value: float):
        self.step = step
        self.value = value
        super().__init__(f"training diverged at step {step}: loss is {value}")

    def __reduce__(self):  # crosses process boundaries (data-parallel workers) as itself
        return type(self), (self.step, self.value)
