"""Studies of the residual design space: YAML spec -> Optuna + Ray Tune trials -> MLflow -> Pareto fronts.

`python -m sweeps.launch studies/<name>.yaml` runs a study; `python -m sweeps.pareto <name>` reads its fronts.
"""
