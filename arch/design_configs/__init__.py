"""The typed config of every residual design (`model.residual:` of a trial), one module per
design beside its nn.Module in arch/designs/ (which imports torch; these do not, so a trial's
config parses without it). Importing this package lists every config under its `kind`
(`residual_configs`); `arch.designs.base.register` refuses a design whose config is not listed."""

# noqa: F401 below: imported for the listing side effect.
from arch.design_configs import (  # noqa: F401
    denseformer,
    hyper_connections,
    muddformer,
    none,
    value_residual,
)
from arch.design_configs.base import ResidualConfig, residual_configs

__all__ = ["ResidualConfig", "residual_configs"]
