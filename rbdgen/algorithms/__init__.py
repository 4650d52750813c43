"""Algorithms traced into kernel IR. Importing this package declares every kernel in
:mod:`rbdgen.registry` (one module per family; declaration order is the canonical order)."""
from . import dynamics, kinematics, scan
from . import contact  # after the others: declaration order is the canonical order
from . import stale
from ..registry import kernels as _kernels, trace

KERNELS = _kernels()

__all__ = ["KERNELS", "contact", "dynamics", "kinematics", "scan", "stale", "trace"]
