"""``kern.rnea_stale_start(q, v, a)``: the exact state a stale-data kernel starts from.

The generated ``rnea_stale`` kernels take the previous call's ``stale_next``. The reference's
``state=None`` (start from the exact quantities at (q, v, a)) has no place in a fixed C
signature, so the loaded kernels get this method instead: it runs a built stale kernel at
(q, v, a) from a zero state until the exact values have travelled the whole tree — the forward
quantities one level per call, then the forces one level per call back,
2 · (tree depth) + 2 calls in all (``rbdgen.reference.stale.settle_calls``), the fixed point
the tests check — and returns its
``stale_next``. The next call of that kernel then returns rnea's torque (to rounding).

The spatial kernels (``rnea_stale``, ``rnea_stale_yamakita``) share one state layout (24 values
per body), the Luh–Walker–Paul ones (``rnea_stale_hamilton``, ``rnea_stale_binder_herzog_lwp``)
another (18 per body): ``kernel=`` names the kernel the state is for (default: the first built
spatial one, else the first built).
"""
from __future__ import annotations

import numpy as np

from ..reference.stale import SCHEME_KERNELS, per_body, settle_calls

#: the stale-data kernels, in the order the start method prefers them
STALE_KERNELS = tuple(SCHEME_KERNELS.values())
_SCHEME_OF = {k: s for s, k in SCHEME_KERNELS.items()}


def install(owner) -> None:
    built = [k for k in STALE_KERNELS if k in owner.kernels]
    if not built:
        return
    model = owner.model
    # tree depth + 1 ≤ nb (a package's model carries sizes only): nb levels always suffice
    depth = max(model.depth) + 1 if hasattr(model, "depth") else model.nb

    def rnea_stale_start(q, v, a, kernel: str | None = None):
        """The exact stale-data state at (q, v, a) for ``kernel`` (default: the first built of
        ``rnea_stale``, ``rnea_stale_yamakita``, else of the others): ``(k·nb,)`` or
        ``(N, k·nb)``, k = 24 or 18 values per body; pass it as the state of that kernel's first
        call (see :mod:`rbdgen.kernels.stale`)."""
        if kernel is None:
            kernel = built[0]
        if kernel not in built:
            raise ValueError(f"kernel: {kernel!r} is not a stale-data kernel of this build (built: {', '.join(built)})")
        scheme = _SCHEME_OF[kernel]
        f = getattr(owner, kernel)
        if isinstance(q, (list, tuple)):
            q, v, a = (np.asarray(x, dtype=owner.dtype) for x in (q, v, a))
        xp = np
        if not isinstance(q, np.ndarray) and hasattr(q, "__cuda_array_interface__"):
            import cupy as xp  # device arrays in, device arrays out
        lead = tuple(q.shape[:-1])
        state = xp.zeros(lead + (per_body(scheme) * model.nb,), dtype=owner.dtype)
        for _ in range(settle_calls(depth)):
            _, state = f(q, v, a, state)
        return state

    owner.__dict__["rnea_stale_start"] = rnea_stale_start
