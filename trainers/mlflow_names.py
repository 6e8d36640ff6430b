"""The MLflow names shared by `python -m trainers.train`, the sweep launcher, `python -m gates` and
`python -m evals`: the default tracking URI, the experiment tags, and where a trial's final weights
are logged. (Metric names: `trainers.metrics`, their one home.)"""

from __future__ import annotations

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"  # MLflow 3 refuses plain ./mlruns file stores
# MLflow 3.x opens an experiment without this tag in its GenAI (traces) view, where no run shows.
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}
CHECKPOINT_FOLDER = "checkpoint"  # a trial's final weights: artifact checkpoint/final.ckpt
CHECKPOINT_NAME = "final.ckpt"
CHECKPOINT_ARTIFACT = f"{CHECKPOINT_FOLDER}/{CHECKPOINT_NAME}"
