"""Residual designs; importing this package registers every design under its `kind`."""

from arch.designs import denseformer, hyper_connections, muddformer, none, value_residual  # noqa: F401  (registration side effect)
from arch.designs.base import ResidualConfig, ResidualDesign, State, register, registered_kinds

__all__ = ["ResidualConfig", "ResidualDesign", "State", "register", "registered_kinds"]
