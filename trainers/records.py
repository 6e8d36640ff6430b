"""The names other packages read from a trial's records: one home for each contract.

Metric names are what `trainers.fit` returns and logs, what a study may name as an objective or
as ASHA's metric, and what MLflow shows. The MLflow defaults and the checkpoint artifact path are
shared by `python -m trainers.train`, the sweep launcher and `python -m analysis`.
"""

from __future__ import annotations

# Final metrics of every trial (trainers.fit's result and MLflow metrics). Memory is exact
# (trainers.costs.StepMemoryMeter); train_tokens_per_s is the trial's own clock, rss_peak_mb the
# process's resident set: both informational. A sweep adds tokens_per_s from its cost probe.
METRICS = (
    "train_loss",
    "val_loss",
    "val_ppl",
    "tokens",
    "train_tokens_per_s",
    "peak_mem_mb",
    "mem_params_mb",
    "mem_grads_mb",
    "mem_optimizer_mb",
    "mem_activations_mb",
    "rss_peak_mb",
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
    "tokens_per_s_ratio",
    "peak_mem_mb",
    "mem_activations_mb",
    "params_total",
    "params_design",
    "flops_per_token",
)

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"  # MLflow 3 refuses plain ./mlruns file stores
# MLflow 3.x opens an experiment without this tag in its GenAI (traces) view, where no run shows.
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}
CHECKPOINT_FOLDER = "checkpoint"  # a trial's final weights: artifact checkpoint/final.ckpt
CHECKPOINT_NAME = "final.ckpt"
CHECKPOINT_ARTIFACT = f"{CHECKPOINT_FOLDER}/{CHECKPOINT_NAME}"
