"""``kern.rnea_stale_start(q, v, a)``: the exact state a stale-data kernel starts from.

The generated ``rnea_stale`` kernels take the previous call's ``stale_next``. The reference's
``state=None`` (start from the exact quantities at (q, v, a)) has no place in a fixed C
signature, so the loaded kernels get this method instead: it runs the built stale kernel at
(q, v, a) from a zero state until the exact values have travelled the whole tree — the forward
quantities one level per call, then the forces one level per call back, 2 · (tree depth) + 2 calls
in all, the fixed point the tests check — and returns its ``stale_next``. The next
``kern.rnea_stale(q, v, a, state)`` then returns rnea's torque (to rounding).
"""
from __future__ import annotations

import numpy as np

from ..reference.stale import SCHEME_KERNELS

#: the stale-data kernels, in the order the start method prefers them (any gives the same state)
STALE_KERNELS = tuple(SCHEME_KERNELS.values())


def install(owner) -> None:
    built = [k for k in STALE_KERNELS if k in owner.kernels]
    if not built:
        return
    model = owner.model
    # tree depth + 1 ≤ nb (a package's model carries sizes only): 2 · nb + 2 calls always suffice
    depth = max(model.depth) + 1 if hasattr(model, "depth") else model.nb
    calls = 2 * depth + 2
    size = 24 * model.nb

    def rnea_stale_start(q, v, a):
        """The exact stale-data state at (q, v, a), ``(24·nb,)`` or ``(N, 24·nb)``: pass it as
        ``stale`` to the first ``rnea_stale`` call (see :mod:`rbdgen.kernels.stale`)."""
        f = getattr(owner, built[0])
        if isinstance(q, (list, tuple)):
            q, v, a = (np.asarray(x, dtype=owner.dtype) for x in (q, v, a))
        xp = np
        if not isinstance(q, np.ndarray) and hasattr(q, "__cuda_array_interface__"):
            import cupy as xp  # device arrays in, device arrays out
        lead = tuple(q.shape[:-1])
        state = xp.zeros(lead + (size,), dtype=owner.dtype)
        for _ in range(calls):
            _, state = f(q, v, a, state)
        return state

    owner.__dict__["rnea_stale_start"] = rnea_stale_start
