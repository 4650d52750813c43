"""Algorithms traced into kernel IR. Importing this package declares every kernel in
:mod:`rbdgen.registry` (one module per family; declaration order is the canonical order)."""
from . import dynamics, kinematics, scan
from . import contact  # after the others: declaration order is the canonical order
from . import stale
from . import constrained
from . import schur  # last: declaration order is the canonical order
from ..registry import get as _get, kernels as _kernels, trace

#: every kernel but the variants and the constrained ones: what a default build of a model without
#: constraints has (the frame kernels with frames selected)
KERNELS = tuple(k for k in _kernels() if _get(k).variant_of is None and not _get(k).constraints
                and not _get(k).opt_in)
#: the variants (``*_fext``: one more input), built only when named (rbdgen.registry.variants)
VARIANTS = tuple(k for k in _kernels() if _get(k).variant_of is not None)
#: the kernels generated for the model's constraints (constrained_fd), in a default build only
#: when it has some (:meth:`RobotModel.with_constraints`)
CONSTRAINED = tuple(k for k in _kernels() if _get(k).constraints)
#: the kernels built only when named (:attr:`rbdgen.registry.KernelDecl.opt_in`): Fijany's
#: Schur-complement forward dynamics, M⁻¹ and Λ⁻¹ (issue 41; serial chains)
OPT_IN = tuple(k for k in _kernels() if _get(k).opt_in)

__all__ = ["KERNELS", "VARIANTS", "CONSTRAINED", "OPT_IN", "constrained", "contact", "dynamics", "kinematics", "scan", "schur", "stale", "trace"]
