"""Mechanistic analysis of trained value-residual gates: statistics, token categories, interventions."""
