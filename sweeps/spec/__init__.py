"""Defining a study: one YAML file -> a typed, validated `Study`.

load.py reads a file (extends, --set) into a Study (study.py) whose sections are in sections.py;
checks.py and resources.py validate it, rungs.py expands `scaling:`, fingerprint.py says what
defines its results; space.py is its search space, paths.py the key paths it names, samplers.py
the samplers it can name.
"""

from sweeps.spec.load import load_study, study_from_dict
from sweeps.spec.resources import resource_issues
from sweeps.spec.rungs import RUNG
from sweeps.spec.sections import SamplerConfig
from sweeps.spec.study import Study

__all__ = ["RUNG", "SamplerConfig", "Study", "load_study", "resource_issues", "study_from_dict"]
