"""Studies of the residual design space: YAML spec -> Optuna + a backend -> MLflow -> Pareto fronts.

`python -m sweeps.launch studies/<name>.yaml` runs a study; `python -m sweeps.pareto <name>` reads its fronts.
The gate analysis of a trained trial is its own package: `python -m gates <run id | checkpoint>`.
"""
