"""A run's record in the Optuna storage, typed: the only code that reads or writes a trial's
`user_attrs`.

One Optuna trial is one run (sweeps.run.plan). Its record says what the run is (the point's id,
repeat, seed, stage, tuned value: `key` gives its RunKey), where it was launched and logged, and how
it ended (status, fail_reason, error, its times). The plan writes the first part when a run is
enqueued or asked, the driver the rest; the report, the tune stage's choice, the references and
adaptive seeds read it. `is_done` is the one rule for a run that counts as done.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from optuna.trial import TrialState

from sweeps.study.run_key import TUNE, RunKey

INTERRUPTED = "interrupted"  # fail_reason of a run its launcher lost: it runs again


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """The stored attributes of one run (None: not recorded, or not yet)."""

    point: str | None = None  # the point's id (RunKey.point_id): every seed of a point shares it
    repeat: int | None = None  # which of the point's seeds
    seed: int | None = None
    stage: str | None = None  # TUNE for a tune run; None: a run the verdicts read
    tuned: Mapping[str, Any] | None = None  # a confirming run's tuned value {key path: value}
    launch: str | None = None  # the launch that asked it
    mlflow_run_id: str | None = None
    resumed_from: str | None = None  # the checkpoint a resumed run went on from
    status: str | None = None  # how it ended (ok, pruned, diverged, oom, timeout, error, ...)
    fail_reason: str | None = None  # a failed run's status, or INTERRUPTED
    error: str | None = None
    train_s: float | None = None
    wall_s: float | None = None
    train_tokens_per_s: float | None = None  # the run's own training speed (steps only)

    @classmethod
    def of(cls, trial) -> RunRecord:
        """The record of an Optuna trial (frozen or live)."""
        attrs = trial.user_attrs
        return cls(**{name: attrs.get(name) for name in _FIELDS})

    @staticmethod
    def attrs(**fields) -> dict[str, Any]:
        """The user_attrs of these fields ({name: value}; a name that is no field is a TypeError)."""
        unknown = sorted(set(fields) - set(_FIELDS))
        if unknown:
            raise TypeError(f"not a field of RunRecord: {', '.join(unknown)}")
        return dict(fields)

    @staticmethod
    def write(trial, **fields) -> None:
        """Records these fields on a live trial (`optuna.Trial`)."""
        for name, value in RunRecord.attrs(**fields).items():
            trial.set_user_attr(name, value)

    @staticmethod
    def queued(key: RunKey, repeat: int) -> dict[str, Any]:
        """The user_attrs an enqueued run of `key` starts with."""
        fields = {"repeat": repeat, "point": key.point_id}
        if key.stage is not None:
            fields["stage"] = key.stage
        if key.tuned:
            fields["tuned"] = key.overrides
        return RunRecord.attrs(**fields)

    @property
    def is_tune(self) -> bool:
        return self.stage == TUNE

    def key(self, params: Mapping) -> RunKey:
        """The run's RunKey (`params`: the trial's params, its point as proposed)."""
        return RunKey.of(params, self.stage, self.tuned)


_FIELDS = tuple(f.name for f in dataclasses.fields(RunRecord))


def is_done(trial) -> bool:
    """A run counts as done when COMPLETE, PRUNED, or FAIL through its own fault (its status
    recorded: diverged, oom, error, ...). A FAIL without a status was failed from outside (its
    launcher died: interrupted, or a heartbeat gone stale) and runs again."""
    if trial.state in (TrialState.COMPLETE, TrialState.PRUNED):
        return True
    record = RunRecord.of(trial)
    return trial.state == TrialState.FAIL and record.status is not None and record.fail_reason != INTERRUPTED
