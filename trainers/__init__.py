"""Lightning training of one trial config (any residual design), with the metrics the fronts need.

from trainers import fit, TrialConfig, TrainingDiverged
metrics = fit(TrialConfig.from_dict(tree), loggers=[...], callbacks=[...])
"""

from trainers.config import TrialConfig
from trainers.errors import TrainingDiverged
from trainers.fit import fit
from trainers.records import METRICS

__all__ = ["METRICS", "TrainingDiverged", "TrialConfig", "fit"]
