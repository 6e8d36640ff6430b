"""Studies of the residual design space, in three rooms: `study` (a YAML file as a validated
Study), `run` (launching it: Optuna, a backend, MLflow) and `report` (what its trials say: fronts,
verdicts, scaling fits). study <- report <- run; nothing imports back up.

`python -m sweeps.launch studies/<name>.yaml` runs a study; `python -m sweeps.pareto <name>` reads its
fronts again; `python -m sweeps.scaling fit ...` fits a ladder; `python -m sweeps.dashboard <name>`
serves its Optuna storage in optuna-dashboard. The gate analysis of a trained trial
is its own package: `python -m gates <run id | checkpoint>`.
"""
