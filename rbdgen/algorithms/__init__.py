"""Algorithms traced into kernel IR. Importing this package declares every kernel in
:mod:`rbdgen.registry` (one module per family; declaration order is the canonical order)."""
from . import dynamics, kinematics, scan
from ..registry import kernels as _kernels, trace

KERNELS = _kernels()

__all__ = ["KERNELS", "dynamics", "kinematics", "scan", "trace"]
