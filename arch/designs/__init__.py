"""Residual designs; importing this package registers every design under its `kind`."""

# noqa: F401 below: imported for the registration side effect.
from arch.designs import (  # noqa: F401
    denseformer,
    hyper_connections,
    muddformer,
    none,
    value_residual,
)
from arch.designs.base import ResidualConfig, ResidualDesign, State, register, registered_kinds

__all__ = ["ResidualConfig", "ResidualDesign", "State", "register", "registered_kinds"]
