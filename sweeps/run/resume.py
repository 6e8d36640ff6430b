"""Resumable runs (`train.checkpoint_every`): a run's checkpoint folder and the MLflow run it
reports to, across launches.

A run (one point, one repeat) keeps its checkpoints (trainers.resume) in
`results/<study>/checkpoints/<point id>-r<repeat>/`, named by what the run is, not by its Optuna
trial number (a launch queues an interrupted run again as a new Optuna trial). Beside them,
`mlflow_run_id` names its MLflow child run. When a launch begins a run whose folder holds a valid
checkpoint and that id, the same child run is reopened (`Tracker.reopen_child`: status RUNNING,
`sweep.resumes` counted up, `sweep.resumed_from` the checkpoint) and trainers.fit resumes from the
checkpoint, so its curves continue in that run. When the run ends (ok, or failed through its own
fault) its folder is removed; an interrupted run's stays for the next launch.

The folder lives under the study's results folder: on a multi-node Ray cluster that folder must be
shared (as the Optuna journal beside it already must be); Ray Tune's own checkpoint API is not used.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from trainers.checkpoint_files import latest_valid

RUN_ID = "mlflow_run_id"


def checkpoint_folder(study, run, config) -> Path | None:
    """The run's checkpoint folder, or None when its trial config writes no checkpoints."""
    if config.train.checkpoint_every is None:
        return None
    return study.results_dir() / "checkpoints" / f"{run.point_id}-r{run.repeat}"


def resumable(folder: Path | None) -> tuple[str, Path] | None:
    """(the MLflow run id, the newest valid checkpoint) when the run can resume from `folder`."""
    if folder is None or not (folder / RUN_ID).is_file():
        return None
    checkpoint = latest_valid(folder, log=lambda line: None)  # fit says which ones it skips
    if checkpoint is None:
        return None
    return (folder / RUN_ID).read_text().strip(), checkpoint


def remember(folder: Path | None, run_id: str) -> None:
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / RUN_ID).write_text(run_id)


def forget(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
