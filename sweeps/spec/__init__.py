"""Defining a study: one YAML file -> a typed, validated `Study` (study.py), its search space
(space.py), the key paths it names (paths.py) and the samplers it can name (samplers.py)."""

from sweeps.spec.study import RUNG, SamplerConfig, Study, load_study, resource_issues, study_from_dict

__all__ = ["RUNG", "SamplerConfig", "Study", "load_study", "resource_issues", "study_from_dict"]
