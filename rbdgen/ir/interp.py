"""A NumPy interpreter of the kernel IR: the living definition of what the IR means.

Runs any traced kernel with no compiler, one state or a batch (vectorised across states).
"""
from __future__ import annotations

import numpy as np

from .graph import Kernel
from .ops import OPS


def run(kernel: Kernel, *args, dtype=np.float64):
    """Evaluate ``kernel`` on its inputs (each ``(size,)`` or ``(N, size)``); returns the
    outputs, shaped like the kernel's output arrays (with a leading N for a batch)."""
    if len(args) != len(kernel.inputs):
        raise ValueError(f"{kernel.name}: expected {len(kernel.inputs)} inputs, got {len(args)}")
    arrays = {}
    batch = None
    for spec, a in zip(kernel.inputs, args):
        a = np.asarray(a, dtype=dtype)
        if a.shape[-1] != spec.size or a.ndim not in (1, 2):
            raise ValueError(f"{spec.name}: expected shape ({spec.size},) or (N, {spec.size}), got {a.shape}")
        if a.ndim == 2:
            batch = a.shape[0]
        arrays[spec.name] = a
    shape = () if batch is None else (batch,)
    val: dict[int, np.ndarray] = {}
    with np.errstate(all="ignore"):
        for n in kernel.live_nodes():
            if n.op == "const":
                val[n.id] = np.full(shape, n.value, dtype=dtype)
            elif n.op == "input":
                a = arrays[n.name]
                val[n.id] = (a[..., n.index] * np.ones(shape, dtype=dtype)).astype(dtype)
            else:
                val[n.id] = OPS[n.op].numpy(*[val[a.id] for a in n.args]).astype(dtype, copy=False)
    named = {}
    for spec, vals in kernel.traced_arrays():
        o = np.stack([val[v.node.id] for v in vals], axis=-1) if vals else np.zeros(shape + (0,), dtype)
        named[spec.name] = o.reshape(shape + spec.shape)
    for mm in kernel.post:
        A = named[mm.a].reshape(shape + (mm.n, mm.k))
        B = named[mm.b].reshape(shape + (mm.k, mm.m))
        if mm.b_spans is not None:  # the product reads B's nonzero spans only
            B = np.where(_span_mask(mm), B, dtype(0.0))
        named[mm.out] = (dtype(mm.scale) * (A @ B)).astype(dtype)
    outs = [named[a.name] for a in kernel.all_outputs]
    return outs[0] if len(outs) == 1 else tuple(outs)


def _span_mask(mm) -> np.ndarray:
    """(k, m) booleans: the entries of B that the product ``mm`` reads."""
    mask = np.zeros((mm.k, mm.m), dtype=bool)
    for r in range(mm.k):
        for lo, hi in mm.row_spans(r):
            mask[r, lo:hi] = True
    return mask
