"""Sparsity analysis: the joint-to-parent transform X_i(q_i) = X_J(q_i)·X_tree of every joint,
symbolically, and the class of every entry of X_i, S_i and I_i.

A Plücker transform is kept as a rotation E (3×3) and a translation r (3): ``X = plux(E, r)``.
For a revolute joint about unit axis a, Rodrigues gives ``R_Jᵀ = c (1 − a aᵀ) − s [a]× + a aᵀ``,
so ``E = R_Jᵀ E_tree`` is *linear* in (c, s, 1) with constant 3×3 coefficient matrices and r is
constant. For a prismatic joint E is constant and r is linear in q. A planar joint is both at
once: E that of a revolute joint about its frame's z, r linear in (x, y). A spherical joint's E
comes from its quaternion, as the free-flyer's, with r constant. The coefficients are
computed once in float64 (so generated constants are bit-identical to the reference's
transforms, and only exact zeros vanish), with :func:`rbdgen.spatial.mm`'s fixed-order products
(the same bits on every machine); sympy holds the symbolic form — entries as
expressions in the symbols ``c_i, s_i`` or ``q_i`` — for classification and display.

Entry classes: ``0`` (structural zero: never emitted), ``±1`` (no multiply), ``const``
(a constant multiply), ``q`` (depends on the joint's position).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .. import spatial as sp
from ..model import CoupledModel, RobotModel

ZERO, ONE, CONST, QDEP = "0", "±1", "const", "q"


@dataclass(frozen=True)
class JointTransform:
    """E(q) = c·Ec + s·Es + E0 and r(q) = r0 + q·rq (revolute: rq = 0; prismatic: Ec = Es = 0).

    ``kind``: "revolute" (also continuous), "prismatic", "planar" (q = (x, y, θ): c, s of θ, and
    r = r0 + x·rq + y·ry), "spherical" (E = Rᵀ·E0 with R the quaternion's rotation, r = r0) or
    "floating" (E, r from the quaternion and position: every entry depends on q; E0, r0 hold
    X_tree's part)."""

    kind: str
    Ec: np.ndarray
    Es: np.ndarray
    E0: np.ndarray
    r0: np.ndarray
    rq: np.ndarray
    ry: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(3))


def tree_parts(model: RobotModel, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(E_tree, r_tree) of body i's X_tree = plux(E_tree, r_tree)."""
    Xt = model.X_tree[i]
    Et = Xt[:3, :3]
    # r_tree from the lower-left block −E·[r]×
    rx = -sp.mm(Et.T, Xt[3:, :3])
    return Et, np.array([rx[2, 1], rx[0, 2], rx[1, 0]])


def joint_transform(model: RobotModel, i: int) -> JointTransform:
    Et, rt = tree_parts(model, i)
    t = model.joint_types[i]
    Z = np.zeros((3, 3))
    if t in ("floating", "spherical"):
        return JointTransform(t, Z, Z, Et.copy(), rt, np.zeros(3))
    if t == "planar":
        # X_J = plux(Rz(θ)ᵀ, (x, y, 0)) after X_tree = plux(E_t, r_t): E = Rz(θ)ᵀ E_t, linear in
        # (c, s, 1) as a revolute joint's about z; r = r_t + E_tᵀ (x, y, 0) = r_t + x E_tᵀe_x + y E_tᵀe_y
        zzT = np.diag([0.0, 0.0, 1.0])
        return JointTransform("planar", sp.mm(np.eye(3) - zzT, Et), sp.mm(-sp.skew([0.0, 0.0, 1.0]), Et),
                              sp.mm(zzT, Et), rt, Et[0].copy(), Et[1].copy())
    a = model.axis[i]
    if t == "prismatic":
        return JointTransform("prismatic", Z, Z, Et.copy(), rt, sp.mm(Et.T, a))
    aaT = np.outer(a, a)
    return JointTransform("revolute", sp.mm(np.eye(3) - aaT, Et), sp.mm(-sp.skew(a), Et), sp.mm(aaT, Et), rt, np.zeros(3))


def numeric_X(jt: JointTransform, qi) -> np.ndarray:
    """X_i at a given joint position (for checking the decomposition against the model)."""
    if jt.kind == "floating":
        R = sp.quat_to_rot(qi[3:7])
        return sp.plux(sp.mm(R.T, jt.E0), jt.r0 + sp.mm(jt.E0.T, np.asarray(qi[:3])))
    if jt.kind == "spherical":
        return sp.plux(sp.mm(sp.quat_to_rot(qi[0:4]).T, jt.E0), jt.r0)
    if jt.kind == "planar":
        c, s = math.cos(qi[2]), math.sin(qi[2])
        return sp.plux(c * jt.Ec + s * jt.Es + jt.E0, jt.r0 + qi[0] * jt.rq + qi[1] * jt.ry)
    if jt.kind == "prismatic":
        return sp.plux(jt.E0, jt.r0 + qi[0] * jt.rq)
    c, s = math.cos(qi[0]), math.sin(qi[0])
    return sp.plux(c * jt.Ec + s * jt.Es + jt.E0, jt.r0)


def symbolic_X(model: RobotModel, i: int) -> sympy.Matrix:
    """X_i(q_i) as a 6×6 sympy matrix in the symbols c_i, s_i (revolute), q_i (prismatic), c_i, s_i,
    x_i, y_i (planar), or the rotation's entries E{i}_rc (spherical, and the floating base's
    translation p{i}_k)."""
    import sympy  # here, not at import: sympy takes 0.3 s to import, and a warm build needs none of it
    jt = joint_transform(model, i)
    F = lambda x: sympy.Float(float(x)) if x != 0 else sympy.S.Zero  # noqa: E731
    if jt.kind == "floating":
        E = sympy.Matrix(3, 3, lambda r, c: sympy.Symbol(f"E{i}_{r}{c}"))
        r = sympy.Matrix(3, 1, lambda k, _: sympy.Symbol(f"p{i}_{k}"))
    elif jt.kind == "spherical":
        E = sympy.Matrix(3, 3, lambda r, c: sympy.Symbol(f"E{i}_{r}{c}"))
        r = sympy.Matrix(3, 1, lambda k, _: F(jt.r0[k]))
    elif jt.kind == "planar":
        c, s, x, y = sympy.symbols(f"c{i} s{i} x{i} y{i}")
        E = sympy.Matrix(3, 3, lambda a, b: F(jt.Ec[a, b]) * c + F(jt.Es[a, b]) * s + F(jt.E0[a, b]))
        r = sympy.Matrix(3, 1, lambda k, _: F(jt.r0[k]) + F(jt.rq[k]) * x + F(jt.ry[k]) * y)
    elif jt.kind == "prismatic":
        q = sympy.Symbol(f"q{i}")
        E = sympy.Matrix(3, 3, lambda a, b: F(jt.E0[a, b]))
        r = sympy.Matrix(3, 1, lambda k, _: F(jt.r0[k]) + F(jt.rq[k]) * q)
    else:
        c, s = sympy.symbols(f"c{i} s{i}")
        E = sympy.Matrix(3, 3, lambda a, b: F(jt.Ec[a, b]) * c + F(jt.Es[a, b]) * s + F(jt.E0[a, b]))
        r = sympy.Matrix(3, 1, lambda k, _: F(jt.r0[k]))
    rx = sympy.Matrix([[0, -r[2], r[1]], [r[2], 0, -r[0]], [-r[1], r[0], 0]])
    X = sympy.zeros(6, 6)
    X[:3, :3] = E
    X[3:, 3:] = E
    X[3:, :3] = (-E * rx).expand()
    return X


def classify(expr) -> str:
    import sympy
    expr = sympy.sympify(expr)
    if expr.is_zero:  # (sympy ≥ 1.13: Float(0.0) == 0 is False)
        return ZERO
    if expr.free_symbols:
        return QDEP
    if abs(float(expr)) == 1.0:
        return ONE
    return CONST


def pattern(M) -> list[list[str]]:
    return [[classify(M[r, c]) for c in range(M.shape[1])] for r in range(M.shape[0])]


@dataclass(frozen=True)
class JointSparsity:
    body: str
    joint: str
    X: list          # 6×6 classes
    S: list          # 6×nv classes
    I: list          # 6×6 classes
    dense_mults: int  # a dense 6×6 X·v
    pruned_mults: int  # multiplies left in X·v after pruning (q-dependent or const entries)


def sparsity(model: RobotModel) -> list[JointSparsity]:
    import sympy
    out = []
    for i in range(model.nb):
        X = symbolic_X(model, i)
        S = sympy.Matrix(model.motion_subspace(i))
        I = sympy.Matrix(6, 6, lambda a, b: sympy.Float(model.inertia[i][a, b]) if model.inertia[i][a, b] != 0 else 0)
        pX = pattern(X)
        pruned = sum(1 for row in pX for e in row if e in (CONST, QDEP))
        out.append(JointSparsity(model.body_names[i], model.joint_names[i], pX, pattern(S), pattern(I), 36, pruned))
    return out


# ---- snapping near-structural values ---------------------------------------------------------

@dataclass(frozen=True)
class SnapReport:
    tol: float
    snapped: list  # (body, what, index, old, new)

    def __bool__(self):
        return bool(self.snapped)


def _snap_array(a: np.ndarray, tol: float):
    out = a.copy()
    changes = []
    for idx in np.ndindex(a.shape):
        x = a[idx]
        for target in (0.0, 1.0, -1.0):
            if x != target and abs(x - target) <= tol:
                out[idx] = target
                changes.append((idx, float(x), target))
                break
    return out, changes


#: the largest snap tolerance: it absorbs numbers printed with too few digits (rpy 1.5708 leaves
#: 3.7e-6, 1.57 leaves 8e-4); a larger one changes the geometry (10 snapped every rotation entry)
MAX_SNAP = 1e-2


def snap_model(model: RobotModel, tol: float):
    """Snap entries of each X_tree's rotation and translation within ``tol`` of 0 or ±1 (URDF
    angles written as 1.5708 leave 3.7e-6 where the designer meant 0). Returns the new model and
    a :class:`SnapReport`; ``tol <= 0`` changes nothing; above :data:`MAX_SNAP`, or not a finite
    number, a ``ValueError``."""
    try:
        ok = math.isfinite(tol) and tol <= MAX_SNAP
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"snap tolerance must be a number up to {MAX_SNAP:g} (a rounding of printed numbers, "
                         f"not a change of geometry), got {tol!r}")
    if tol <= 0:
        return model, SnapReport(tol, [])
    if getattr(model, "coupled", False):  # mimic joints coupled: snap the tree, keep the coupling
        tree, report = snap_model(model.tree, tol)
        return CoupledModel(tree, model.mimic), report
    X_new = np.array(model.X_tree)
    snapped = []
    for i in range(model.nb):
        Xt = model.X_tree[i]
        E = Xt[:3, :3]
        rx = -sp.mm(E.T, Xt[3:, :3])
        r = np.array([rx[2, 1], rx[0, 2], rx[1, 0]])
        E2, ce = _snap_array(E, tol)
        r2, cr = _snap_array(r, tol)
        snapped += [(model.body_names[i], "E_tree", idx, o, n) for idx, o, n in ce]
        snapped += [(model.body_names[i], "r_tree", idx, o, n) for idx, o, n in cr]
        if ce or cr:
            X_new[i] = sp.plux(E2, r2)
    X_new.flags.writeable = False
    return dataclasses.replace(model, X_tree=X_new), SnapReport(tol, snapped)
