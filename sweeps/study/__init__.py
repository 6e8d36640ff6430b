"""The study as data: one YAML file -> a typed, validated `Study`.

load.py reads a file (extends, --set) into a Study (definition.py), which study_plan.py resolves
once into the runs it makes (RunKey, StudyPlan); the Study's sections are in
sections.py; checks.py validates it, rungs.py and ladder.py expand `scaling:` (targets.py: the
paper's scales), fingerprint.py says what defines its results; space.py is its search space,
paths.py the key paths it names, samplers.py the samplers it can name, seeds.py its seeds (fixed
or adaptive), reference.py what its points are compared with, architecture.py what a step's cost
depends on. Imports arch and trainers, nothing else of sweeps.
"""

from sweeps.study.definition import Study
from sweeps.study.load import load_study, study_from_dict
from sweeps.study.rungs import RUNG
from sweeps.study.sections import SamplerConfig

__all__ = ["RUNG", "SamplerConfig", "Study", "load_study", "study_from_dict"]
