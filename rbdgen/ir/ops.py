"""The IR's operations: one record per op, the only place that says what an op is.

Constant folding (``graph.py``), the NumPy interpreter (``interp.py``), op counts
(``Kernel.op_counts``), the C printer (``codegen/printer.py``) and the HLS cost model
(``targets/hls/cost.py``) all read :data:`OPS`, so adding an op, or changing how one is counted or
spelled, is one edit here instead of five that have to agree.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Callable

import numpy as np

#: what op counts and hardware cost models tally, in report order; every op is one of these
COST_CLASSES = ("mul", "add", "div", "sincos")


@dataclass(frozen=True)
class Op:
    """One IR operation.

    ``fold`` evaluates it on Python floats (constant folding) and ``numpy`` on arrays (the
    interpreter). They are kept apart on purpose: folded constants are printed into generated
    code, so they must not depend on how NumPy was built, and NumPy's SIMD sin/cos can differ
    from libm's in the last bit (AVX-512 builds do; numpy/numpy#23523). Python arithmetic also
    raises on a constant 1/0 where NumPy would return inf.

    ``spelling`` is the C expression: ``{0}``, ``{1}`` are the operands; any other name (``{sin}``)
    is a field of the target's :class:`~rbdgen.codegen.printer.Dialect`, e.g. its sin function.
    """

    name: str
    arity: int
    commutative: bool
    fold: Callable
    numpy: np.ufunc
    cost: str
    spelling: str

    def __post_init__(self):
        if self.cost not in COST_CLASSES:
            raise ValueError(f"op {self.name}: cost class {self.cost!r} is not one of {COST_CLASSES}")


OPS: dict[str, Op] = {op.name: op for op in (
    Op("add", 2, True, operator.add, np.add, "add", "{0} + {1}"),
    Op("sub", 2, False, operator.sub, np.subtract, "add", "{0} - {1}"),
    Op("mul", 2, True, operator.mul, np.multiply, "mul", "{0} * {1}"),
    Op("div", 2, False, operator.truediv, np.divide, "div", "{0} / {1}"),
    # a negation is a sign flip: in hardware it is an adder (0 − a), so it is counted as one
    Op("neg", 1, False, operator.neg, np.negative, "add", "-{0}"),
    Op("sin", 1, False, math.sin, np.sin, "sincos", "{sin}({0})"),
    Op("cos", 1, False, math.cos, np.cos, "sincos", "{cos}({0})"),
)}
