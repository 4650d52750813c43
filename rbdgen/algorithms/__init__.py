"""Algorithms traced into kernel IR. Importing this package declares every kernel in
:mod:`rbdgen.registry` (one module per family; declaration order is the canonical order)."""
from . import dynamics, kinematics, scan
from . import contact  # after the others: declaration order is the canonical order
from . import stale
from ..registry import get as _get, kernels as _kernels, trace

#: every kernel but the variants: what a default build has (the frame kernels with frames selected)
KERNELS = tuple(k for k in _kernels() if _get(k).variant_of is None)
#: the variants (``*_fext``: one more input), built only when named (rbdgen.registry.variants)
VARIANTS = tuple(k for k in _kernels() if _get(k).variant_of is not None)

__all__ = ["KERNELS", "VARIANTS", "contact", "dynamics", "kinematics", "scan", "stale", "trace"]
