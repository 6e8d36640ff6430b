"""The names other packages read from a trial's records: one home for each contract.

Metric names are what `trainers.fit` returns and logs, what a study may name as an objective or
as ASHA's metric, and what MLflow shows (every metric's properties: `trainers.metrics`). The MLflow
defaults and the checkpoint artifact path are shared by `python -m trainers.train`, the sweep
launcher and `python -m gates`.
"""

from __future__ import annotations

from trainers import metrics as _metrics

# Final metrics of every trial (trainers.fit's result and MLflow metrics) and the names a study may
# use as an objective or scheduler metric: both read from the one table, trainers.metrics.
METRICS = _metrics.trial_names()
OBJECTIVE_METRICS = _metrics.objective_names()

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"  # MLflow 3 refuses plain ./mlruns file stores
# MLflow 3.x opens an experiment without this tag in its GenAI (traces) view, where no run shows.
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}
CHECKPOINT_FOLDER = "checkpoint"  # a trial's final weights: artifact checkpoint/final.ckpt
CHECKPOINT_NAME = "final.ckpt"
CHECKPOINT_ARTIFACT = f"{CHECKPOINT_FOLDER}/{CHECKPOINT_NAME}"
