"""Lightning training of one trial config (any residual design), with the metrics the fronts need.

    from trainers import TrialConfig
    from trainers.fit import fit
    metrics = fit(TrialConfig.from_dict(tree), loggers=[...], callbacks=[...])

The package face does not import `trainers.fit`: Lightning (seconds to import) is then loaded only
by the processes that train, not by a launcher or a study's validation.
"""

from trainers.config import TrialConfig
from trainers.errors import TrainingDiverged
from trainers.metrics import trial_names

METRICS = trial_names()  # the final metrics every trial returns and logs

__all__ = ["METRICS", "TrainingDiverged", "TrialConfig"]
