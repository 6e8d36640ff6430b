"""What a trained model's gates do: statistics, token categories, interventions.

`python -m gates <mlflow run id | checkpoint.ckpt>` (see `gates.cli`). Not part of sweeping:
it reads one trained trial, from its checkpoint or its MLflow run.
"""
