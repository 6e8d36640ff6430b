"""The names other packages read from a trial's records: one home for each contract.

Metric names are what `trainers.fit` returns and logs, what a study may name as an objective or
as ASHA's metric, and what MLflow shows. The MLflow defaults and the checkpoint artifact path are
shared by `python -m trainers.train`, the sweep launcher and `python -m analysis`.
"""

from __future__ import annotations

# Final metrics of every trial (trainers.fit's result and MLflow metrics).
METRICS = (
    "train_loss",
    "val_loss",
    "val_ppl",
    "tokens",
    "tokens_per_s",
    "peak_mem_mb",
    "params_total",
    "params_design",
    "flops_per_token",
)
# Names a study may use as an objective or scheduler metric (mqar_acc needs MQAR data).
OBJECTIVE_METRICS = (
    "val_loss",
    "val_ppl",
    "train_loss",
    "mqar_acc",
    "tokens_per_s",
    "peak_mem_mb",
    "peak_mem_delta_mb",
    "params_total",
    "params_design",
    "flops_per_token",
)

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"  # MLflow 3 refuses plain ./mlruns file stores
CHECKPOINT_FOLDER = "checkpoint"  # a trial's final weights: artifact checkpoint/final.ckpt
CHECKPOINT_NAME = "final.ckpt"
CHECKPOINT_ARTIFACT = f"{CHECKPOINT_FOLDER}/{CHECKPOINT_NAME}"
