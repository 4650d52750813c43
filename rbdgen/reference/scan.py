"""Inverse and forward dynamics as prefix scans, in plain NumPy (the oracle of the scan kernels).

Forward pass of RNEA (Yang, Wu & Pan). Body i's velocity and acceleration are an affine function
of its parent's::

    v_i = X_i v_p + vJ_i                       vJ_i = S_i q̇_i
    a_i = X_i a_p + S_i q̈_i + v_i × vJ_i  =  X_i a_p + S_i q̈_i + (X_i v_p) × vJ_i

so a *segment* of the tree (the bodies between an ancestor and a descendant) acts on the state
entering it as the triple e = (X, v, a) — its composed transform and the velocity and
acceleration it adds — ``v_out = X v_in + v``, ``a_out = X a_in + a + (X v_in) × v``. Two
segments, e₁ nearer the root, make one (:func:`forward_op`)::

    e₁ ⊕ e₂ = (X₂X₁,  X₂v₁ + v₂,  X₂a₁ + a₂ + (X₂v₁) × v₂)       identity (1, 0, 0)

(associative: tests/test_scan.py checks it with hypothesis). The world is one more element,
(1, 0, −g), at the root, so the inclusive scan gives every body (ⁱX₀, v_i, a_i) — its placement
as a spatial transform comes for free.

Backward pass. f_i = I_i a_i + v_i ×* I_i v_i is local to the body once v_i and a_i are known;
the joint force F_i = Σ_{j ∈ subtree(i)} ⁱX*_j f_j is a suffix scan of the affine recursion
F_i = f_i + Σ_c X_cᵀ F_c. Its path products ⁱX*_j are exactly what the forward scan already
composed (ⁱX*_j = ⁱX*₀ · ⁰X*_j), so in world coordinates it is a plain sum: f⁰_j = (ʲX₀)ᵀ f_j,
F⁰_i = Σ_{subtree(i)} f⁰_j (:func:`rbdgen.scan.subtree_sums`), τ_i = S_iᵀ (ⁱX₀)⁻ᵀ F⁰_i.

ABA (:func:`aba_scan`) is three passes: velocities (the forward scan without accelerations); the
articulated inertias I^A, which stay sequential — I^A_p = I_p + Σ_c X_cᵀ (I^A_c − U_c D_c⁻¹ U_cᵀ) X_c
divides by D_c = S_cᵀ I^A_c S_c, a Riccati recursion with no associative form of bounded size
here — and then two *linear* passes that are scans once the inertias are known: the bias forces
p_i = p⁰_i + Σ_c X_cᵀ (P_c p_c + k_c) with P_c = 1 − U_c D_c⁻¹ S_cᵀ (a suffix scan with 6×6
matrices, segmented along the paths of the tree), and the accelerations
a_i = P_iᵀ X_i a_p + P_iᵀ c_i + S_i D_i⁻¹ u_i (a prefix scan with 6×6 matrices). Both use the
affine operator (:func:`affine_op`): (A₁, b₁) ⊕ (A₂, b₂) = (A₂A₁, A₂b₁ + b₂).
"""
from __future__ import annotations

import numpy as np

from .. import spatial as sp
from ..model import RobotModel
from ..scan import METHODS, paths, subtree_sums, tree_scan, with_world
from .dynamics import _a_gravity, _armature, _batched, _kinematics, crba

__all__ = ["rnea_scan", "aba_scan", "forward_op", "forward_identity", "affine_op", "affine_identity", "METHODS"]


# ---- the operators -------------------------------------------------------------------------------

def forward_op(e1, e2):
    """(X₁, v₁, a₁) ⊕ (X₂, v₂, a₂): segment 1, then segment 2 (further from the root)."""
    X1, v1, a1 = e1
    X2, v2, a2 = e2
    Xv1 = X2 @ v1
    return X2 @ X1, Xv1 + v2, X2 @ a1 + a2 + sp.crm(Xv1) @ v2


def forward_identity():
    return np.eye(6), np.zeros(6), np.zeros(6)


def affine_op(e1, e2):
    """(A₁, b₁) ⊕ (A₂, b₂) = (A₂A₁, A₂b₁ + b₂): the map x ↦ A₁x + b₁, then x ↦ A₂x + b₂."""
    A1, b1 = e1
    A2, b2 = e2
    return A2 @ A1, A2 @ b1 + b2


def affine_identity():
    return np.eye(6), np.zeros(6)


def _forward_scan(model, Xs, Ss, v, a, method, a0):
    elems = [(np.eye(6), np.zeros(6), a0)]
    for i in range(model.nb):
        vs = model.v_slice(i)
        elems.append((Xs[i], Ss[i] @ v[vs], Ss[i] @ a[vs]))
    out = tree_scan(elems, with_world(model.parent), forward_op, method, identity=forward_identity)
    return out[1:]  # (ⁱX₀, v_i, a_i) per body


# ---- inverse dynamics ---------------------------------------------------------------------------

def _rnea_scan(model, q, v, a, method):
    Xs, Ss = _kinematics(model, q)
    fwd = _forward_scan(model, Xs, Ss, v, a, method, _a_gravity(model))
    f0 = []
    for i, (X0, vi, ai) in enumerate(fwd):
        I = model.inertia[i]
        f = I @ ai + sp.crf(vi) @ I @ vi
        f0.append(X0.T @ f)  # into world coordinates
    F0 = subtree_sums(f0, model.parent, np.add)
    tau = np.zeros(model.nv)
    for i, (X0, _, _) in enumerate(fwd):
        tau[model.v_slice(i)] = Ss[i].T @ (np.linalg.inv(X0).T @ F0[i])
    arm = _armature(model)
    return tau if arm is None else tau + arm * a  # each DOF's rotor: armature·q̈


def rnea_scan(model: RobotModel, q, v, a, method: str = "hillis_steele"):
    """Inverse dynamics τ (as :func:`rbdgen.reference.rnea`), with the forward pass as a prefix
    scan and the backward pass as subtree sums; ``method``: one of
    :data:`rbdgen.scan.METHODS`."""
    _method(method)
    if getattr(model, "coupled", False):  # mimic joints: the tree's torques, contracted (Gᵀ τ)
        cm = model
        return rnea_scan(cm.tree, cm.expand_q(q), cm.expand_v(v), cm.expand_v(a), method) @ cm.G
    return _batched(model, lambda q, v, a: _rnea_scan(model, q, v, a, method),
                    [("q", q, model.nq), ("v", v, model.nv), ("a", a, model.nv)])


def _method(method):
    if method not in METHODS:
        raise ValueError(f"method: unknown scan method {method!r} (one of {', '.join(METHODS)})")


# ---- forward dynamics ----------------------------------------------------------------------------

def _aba_scan(model, q, v, tau, method):
    Xs, Ss = _kinematics(model, q)
    nb, parent = model.nb, model.parent
    # pass 1: velocities by the forward scan (no accelerations), then local bias terms
    fwd = _forward_scan(model, Xs, Ss, v, np.zeros(model.nv), method, np.zeros(6))
    vel = [e[1] for e in fwd]
    c, p0 = [], []
    for i in range(nb):
        vJ = Ss[i] @ v[model.v_slice(i)]
        c.append(sp.crm(vel[i]) @ vJ)
        p0.append(sp.crf(vel[i]) @ model.inertia[i] @ vel[i])
    # pass 2: articulated inertias, sequential (children before parents; branches independent)
    IA = [model.inertia[i].copy() for i in range(nb)]
    U, Dinv, Ia = [None] * nb, [None] * nb, [None] * nb
    for i in reversed(range(nb)):
        U[i] = IA[i] @ Ss[i]
        Dinv[i] = np.linalg.inv(Ss[i].T @ U[i] + np.diag(model.joint_armature(i)))  # armature: D_i's diagonal
        Ia[i] = IA[i] - U[i] @ Dinv[i] @ U[i].T
        if parent[i] >= 0:
            IA[parent[i]] = IA[parent[i]] + Xs[i].T @ Ia[i] @ Xs[i]
    P = [np.eye(6) - U[i] @ Dinv[i] @ Ss[i].T for i in range(nb)]
    # pass 3: bias forces, a suffix scan along each path (deepest paths first, their totals
    # folded into the body they hang from)
    B = [Xs[i].T @ P[i] for i in range(nb)]                                    # p_c ↦ parent
    b = [Xs[i].T @ (Ia[i] @ c[i] + U[i] @ Dinv[i] @ tau[model.v_slice(i)]) for i in range(nb)]
    pA = [None] * nb
    const = [x.copy() for x in p0]
    for path in reversed(paths(parent)):
        L = len(path) - 1
        elems = []
        for k in range(L, -1, -1):  # from the path's end up to its head
            i = path[k]
            if k == L:
                elems.append((np.zeros((6, 6)), const[i]))
            else:
                nxt = path[k + 1]
                elems.append((B[nxt], const[i] + b[nxt]))
        out = tree_scan(elems, [-1] + list(range(L)), affine_op, method, identity=affine_identity)
        for k in range(L + 1):
            i = path[L - k]
            pA[i] = out[k][1]
        h = path[0]
        if parent[h] >= 0:
            const[parent[h]] = const[parent[h]] + B[h] @ pA[h] + b[h]
    u = [tau[model.v_slice(i)] - Ss[i].T @ pA[i] for i in range(nb)]
    # pass 4: accelerations, a prefix scan with a world element (0, −g)
    elems = [(np.zeros((6, 6)), _a_gravity(model))]
    for i in range(nb):
        elems.append((P[i].T @ Xs[i], P[i].T @ c[i] + Ss[i] @ Dinv[i] @ u[i]))
    acc = [e[1] for e in tree_scan(elems, with_world(parent), affine_op, method, identity=affine_identity)]
    qdd = np.zeros(model.nv)
    for i in range(nb):
        ap = Xs[i] @ acc[parent[i] + 1] + c[i]  # acc[0] is the world's
        qdd[model.v_slice(i)] = Dinv[i] @ (u[i] - U[i].T @ ap)
    return qdd


def aba_scan(model: RobotModel, q, v, tau, method: str = "hillis_steele"):
    """Forward dynamics q̈ (as :func:`rbdgen.reference.aba`) with ABA's two linear passes as
    scans and the articulated-inertia recursion sequential. With coupled mimic joints, the
    reduced system is solved densely, as :func:`rbdgen.reference.aba` does."""
    _method(method)
    if getattr(model, "coupled", False):
        # mimic joints coupled: no articulated-body recursion couples them, so (as aba does) the
        # reduced system Gᵀ M G q̈ = τ − Gᵀ nle is solved densely, its bias from the scan
        cm = model
        zero = np.zeros_like(np.asarray(v, dtype=float))
        bias = rnea_scan(cm, q, v, zero, method)
        M = cm.G.T @ crba(cm.tree, cm.expand_q(q)) @ cm.G
        return np.linalg.solve(M, (np.asarray(tau, dtype=float) - bias)[..., None])[..., 0]
    return _batched(model, lambda q, v, t: _aba_scan(model, q, v, t, method),
                    [("q", q, model.nq), ("v", v, model.nv), ("tau", tau, model.nv)])
