"""What a trained model's gates do: statistics, token categories, interventions.

`python -m analysis <mlflow run id | checkpoint.ckpt>` (see `analysis.cli`). Not part of sweeping:
it reads one trained trial, from its checkpoint or its MLflow run.
"""
