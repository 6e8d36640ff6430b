"""Pareto fronts of a study: the maths (`fronts`), the statistics (`stats`), the study's fronts and
their report (`analysis`), the files (`outputs`), the CLI (`__main__`).

`analyse(study, plan, tracker)` computes the fronts from the study's Optuna storage, with every
point's 95% intervals, its paired differences and verdicts against the reference point (the
study's `reference:`, else the first baseline design) and `p_front`; writes results/<name>/pareto/
(pareto.csv, pareto.json, a PNG per pair, pareto.html), prints the table and one plain-language
line per point, logs the files to the launch's parent MLflow run and tags every child run with
`pareto_rank` (-1 for runs in no front: failed, pruned, interrupted), `p_front` and `verdict`.
`fronts_for(study, trials)` is the statistics alone (what adaptive seeds decide on).
"""

from __future__ import annotations

from sweeps.pareto.analysis import analyse, fronts_for, probe_samples, probe_scales, reference_point
from sweeps.pareto.fronts import compute, dominates, hypervolume, nondominated_ranks
from sweeps.pareto.outputs import table_text, write_files

__all__ = [
    "analyse",
    "compute",
    "dominates",
    "fronts_for",
    "hypervolume",
    "nondominated_ranks",
    "probe_samples",
    "probe_scales",
    "reference_point",
    "table_text",
    "write_files",
]
