"""Scoring a trained trial: the lm-evaluation-harness adapter (`evals.adapter`, model `satsweep`),
named task suites (`evals.suites`) and `python -m evals` (`evals.cli`).

lm-eval is an optional extra (`pip install -e ".[evals]"`): importing `evals.adapter` needs it.
"""
