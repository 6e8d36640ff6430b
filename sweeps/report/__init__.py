"""Reporting a study: what its completed trials say. Imports `sweeps.study`, never `sweeps.run`.

Fronts and verdicts: `dominance` (Pareto maths), `stats` (intervals, paired differences, the
bootstrap of front membership), `sequential` (boundaries of planned looks), `verdicts` (the rule:
family, margins, words), `fronts` (per point statistics, verdicts, ranks, p_front), `costs` (the
cost probe's cache, read for the throughput axis), `analysis` (`fronts_for`: the statistics of a
study's trials; `report_fronts`: its files, printed table and MLflow records), `outputs` (the
files and the table), `summary` (the report as markdown: summary.md and the parent run's MLflow
description), `equal_cost` (val_loss curves against probe time; the equal-time budget's
label), `calibrate` (the verdicts' error rates, simulated: `python -m sweeps.report.calibrate`).
Scaling ladders: `scaling/`.
"""
