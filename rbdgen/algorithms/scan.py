"""Inverse and forward dynamics as parallel prefix scans, traced and declared (issue 12).

The operators and the passes are those of :mod:`rbdgen.reference.scan` (read its docstring
first); the evaluation order comes from :mod:`rbdgen.scan`, shared with the reference. What
tracing adds is the usual: transforms built from the sparsity analysis, products with structural
zeros and with the identity folded away (the world element's transform is the identity, so the
round that reaches the world costs little), and every operator call tagged with its round and
body, so a cooperative (several threads per state) CUDA launch runs the bodies of one round side
by side and ``inspect --cost`` reports the depth.

:data:`METHOD` is the evaluation order of the registered kernels: Hillis–Steele pointer jumping,
the fewest rounds (⌈log₂(depth + 1)⌉ for the forward pass). :func:`traced` traces any of
:data:`rbdgen.scan.METHODS` for the depth and op-count studies (benchmarks/scan.py).
"""
from __future__ import annotations

import numpy as np

from .. import reference as ref
from ..registry import Arg, declare
from ..scan import paths, subtree_sums, tree_scan, with_world
from . import spatial as S
from .dynamics import _D
from .trace import Trace

#: evaluation order of the registered rnea_scan / aba_scan kernels
METHOD = "hillis_steele"


# ---- the operators over traced values --------------------------------------------------------------

def forward_op(g):
    """(X₁, v₁, a₁) ⊕ (X₂, v₂, a₂) = (X₂X₁, X₂v₁ + v₂, X₂a₁ + a₂ + (X₂v₁) × v₂); ``v``/``a`` may
    be None (a pass that does not carry them)."""
    def op(e1, e2):
        X1, v1, a1 = e1
        X2, v2, a2 = e2
        Xv1 = X2.motion(g, v1)
        v = S.vadd(Xv1, v2)
        a = None if a1 is None else S.vadd(S.vadd(X2.motion(g, a1), a2), S.crm(g, Xv1, v2))
        return X1.then(g, X2), v, a
    return op


def _identity_x(t):
    return S.XForm(t.consts([[1.0 if r == c else 0.0 for c in range(3)] for r in range(3)]), t.zeros(3))


def forward_identity(t, with_a=True):
    return lambda: (_identity_x(t), t.zeros(6), t.zeros(6) if with_a else None)


def affine_op(g):
    """(A₁, b₁) ⊕ (A₂, b₂) = (A₂A₁, A₂b₁ + b₂) for 6×6 A."""
    def op(e1, e2):
        A1, b1 = e1
        A2, b2 = e2
        return S.mat_mat(g, A2, A1), S.vadd(S.mat_vec(g, A2, b1), b2)
    return op


def affine_identity(t):
    return lambda: (t.consts([[1.0 if r == c else 0.0 for c in range(6)] for r in range(6)]), t.zeros(6))


def _hook(t, phase, body_of=lambda i: i):
    def hook(label, i):
        b = body_of(i)
        t.block(f"{phase}, {label}", b if b is not None and b >= 0 else None)
    return hook


def _forward_scan(t: Trace, q, v, a, method, a0):
    """(ⁱX₀, v_i, a_i) of every body: the world element (1, 0, a₀) then one per body; ``a``
    None: velocities only."""
    m = t.m
    elems = [(_identity_x(t), t.zeros(6), None if a is None else a0)]
    for i in range(m.nb):
        t.block("scan elements: joint transform, S q̇, S q̈", i)
        vs = m.v_slice(i)
        elems.append((t.X(i, q), t.S_times(i, v[vs]), None if a is None else t.S_times(i, a[vs])))
    out = tree_scan(elems, with_world(m.parent), forward_op(t.g), method, identity=forward_identity(t, a is not None),
                    round_hook=_hook(t, "forward scan", lambda i: i - 1))
    return out[1:]


# ---- inverse dynamics ---------------------------------------------------------------------------

def _rnea_scan_values(t: Trace, q, v, a, method=METHOD):
    m, g = t.m, t.g
    fwd = _forward_scan(t, q, v, a, method, t.a_gravity())
    f0 = []
    for i, (X0, vi, ai) in enumerate(fwd):
        t.block("body forces, into world coordinates", i)
        I = t.I(i)
        f = S.Inertia.from_matrix(I).body_force(g, vi, ai)
        f0.append(X0.force_T(g, f))
    F0 = subtree_sums(f0, m.parent, S.vadd, round_hook=_hook(t, "backward: subtree sums"))
    tau = [None] * m.nv
    for i, (X0, _, _) in enumerate(fwd):
        t.block("joint torques: world force back to the body, S_iᵀ", i)
        vs = m.v_slice(i)
        tau[vs] = t.ST_times(i, X0.force(g, F0[i]))
        arm = m.joint_armature(i)
        if np.any(arm):  # the joint's rotor: armature·q̈
            tau[vs] = [x + float(c) * a[vs.start + r] if c else x for r, (x, c) in enumerate(zip(tau[vs], arm))]
    return tau


def _rnea_scan(t: Trace, q, v, a, method=METHOD):
    return {"tau": _rnea_scan_values(t, q, v, a, method)}


def _c_rnea_scan(t, c, q, v, a):
    """Mimic joints coupled: the tree's scan on expanded inputs, torques contracted."""
    return {"tau": c.tau(_rnea_scan_values(t, c.q(q), c.v(v), c.v(a)))}


# ---- forward dynamics ----------------------------------------------------------------------------

def _aba_scan(t: Trace, q, v, tau, method=METHOD):
    m, g = t.m, t.g
    nb, parent = m.nb, m.parent
    eye6 = t.consts([[1.0 if r == c else 0.0 for c in range(6)] for r in range(6)])
    zero66 = [t.zeros(6) for _ in range(6)]
    # pass 1: velocities by the forward scan, then the local bias terms
    vel = [e[1] for e in _forward_scan(t, q, v, None, method, None)]
    c, p0 = [None] * nb, [None] * nb
    for i in range(nb):
        t.block("bias terms c, p", i)
        vJ = t.S_times(i, v[m.v_slice(i)])
        c[i] = S.crm(g, vel[i], vJ)
        p0[i] = S.crf(g, vel[i], S.mat_vec(g, t.I(i), vel[i]))
    # pass 2: articulated inertias, sequential (a Riccati recursion: no scan form here)
    IA = [t.I(i) for i in range(nb)]
    U, Dinv, Ia, UDinv = [None] * nb, [None] * nb, [None] * nb, [None] * nb
    for i in reversed(range(nb)):
        t.block("articulated inertias (sequential)", i)
        Si = t.Smat(i)
        U[i] = S.mat_mat(g, IA[i], Si)
        Dinv[i] = S.spd_inverse(g, _D(t, i, Si, U[i]))  # the joint's armature on D's diagonal
        UDinv[i] = S.mat_mat(g, U[i], Dinv[i])
        Ia[i] = t.articulated(i, IA[i], U[i], UDinv[i])
        if parent[i] >= 0:
            IA[parent[i]] = S.madd(IA[parent[i]], t.X(i, q).congruence(g, Ia[i]))
    # the per-body affine maps: B_i = X_iᵀ P_i carries a bias force to the parent, its
    # transpose P_iᵀ X_i an acceleration from the parent (P_i = 1 − U_i D_i⁻¹ S_iᵀ)
    B, b, P = [None] * nb, [None] * nb, [None] * nb
    for i in range(nb):
        t.block("scan elements: X_iᵀ P_i and the bias it carries", i)
        X = t.X(i, q)
        P[i] = S.msub(eye6, S.mat_mat(g, UDinv[i], S.transpose(t.Smat(i))))
        P[i] = [[g.const(0.0) if r in t.null_axes(i) else x for x in row] for r, row in enumerate(P[i])]
        B[i] = S.transpose([X.force_T(g, col) for col in S.transpose(P[i])])
        k = S.vadd(S.mat_vec(g, Ia[i], c[i]), S.mat_vec(g, UDinv[i], tau[m.v_slice(i)]))
        b[i] = X.force_T(g, k)
    # pass 3: bias forces, a suffix scan along each path (deepest first)
    pA = [None] * nb
    const = list(p0)
    op, ident = affine_op(g), affine_identity(t)
    for path in reversed(paths(parent)):
        L = len(path) - 1
        elems = []
        for k in range(L, -1, -1):
            i = path[k]
            t.block("bias-force scan elements", i)
            if k == L:
                elems.append((zero66, const[i]))
            else:
                elems.append((B[path[k + 1]], S.vadd(const[i], b[path[k + 1]])))
        out = tree_scan(elems, [-1] + list(range(L)), op, method, identity=ident,
                        round_hook=_hook(t, "bias-force suffix scan", lambda j, path=path, L=L: path[L - j]))
        for j in range(L + 1):
            pA[path[L - j]] = out[j][1]
        h = path[0]
        if parent[h] >= 0:
            t.block("bias force of a branch into the body it hangs from", parent[h])
            const[parent[h]] = S.vadd(const[parent[h]], S.vadd(S.mat_vec(g, B[h], pA[h]), b[h]))
    u = [None] * nb
    elems = [(zero66, t.a_gravity())]
    for i in range(nb):
        t.block("acceleration scan elements", i)
        Si = t.Smat(i)
        u[i] = S.vsub(tau[m.v_slice(i)], S.matT_vec(g, Si, pA[i]))
        AT = S.transpose(B[i])  # P_iᵀ X_i
        elems.append((AT, S.vadd(S.matT_vec(g, P[i], c[i]), S.mat_vec(g, Si, S.mat_vec(g, Dinv[i], u[i])))))
    # pass 4: accelerations, a prefix scan from the world element (0, −g)
    acc = [e[1] for e in tree_scan(elems, with_world(parent), op, method, identity=ident,
                                   round_hook=_hook(t, "acceleration scan", lambda i: i - 1))]
    qdd = [None] * m.nv
    for i in range(nb):
        t.block("joint accelerations", i)
        ap = S.vadd(t.X(i, q).motion(g, acc[parent[i] + 1]), c[i])
        rhs = S.vsub(u[i], S.matT_vec(g, U[i], ap))
        qdd[m.v_slice(i)] = S.mat_vec(g, Dinv[i], rhs)
    return {"qdd": qdd}


def _c_aba_scan(t, c, q, v, tau):
    """Mimic joints coupled: no articulated-body recursion couples them, so — as aba does — the
    reduced system Gᵀ M G q̈ = τ − Gᵀ nle is solved by LDLᵀ, its bias from the scan."""
    from .dynamics import _crba_values

    qt = c.q(q)
    bias = c.tau(_rnea_scan_values(t, qt, c.v(v), t.zeros(t.m.nv)))
    M = c.mat(_crba_values(t, qt))
    return {"qdd": [r[0] for r in c.solve(M, [[tau[i] - bias[i]] for i in range(c.n)])]}


# ---- tracing any evaluation order (studies) ---------------------------------------------------------

_ALGORITHMS = {"rnea_scan": (_rnea_scan, ("q", "v", "a"), "tau"), "aba_scan": (_aba_scan, ("q", "v", "tau"), "qdd")}


def traced(model, name: str, method: str = METHOD, fold: bool = True):
    """The kernel IR of ``rnea_scan`` or ``aba_scan`` evaluated in ``method`` order (one of
    :data:`rbdgen.scan.METHODS`; ``sequential`` gives the scan operators applied body after
    body). The registered kernels use :data:`METHOD`."""
    from ..ir.graph import Array

    fn, ins, out = _ALGORITHMS[name]
    t = Trace(model, fold)
    args = [t.inputs(n, model.nq if n == "q" else model.nv) for n in ins]
    values = fn(t, *args, method=method)[out]
    arrs = [Array(n, (model.nq if n == "q" else model.nv,)) for n in ins]
    return t.kernel(f"{name}_{method}", arrs, [(Array(out, (model.nv,)), list(values))], f"{name} ({method})")


# ---- declarations ------------------------------------------------------------------------------------
#
# float32_tol: the IR interpreter in float32 over the 21 robot cases of the test suite (64 random
# states each) gives the same worst errors as the sequential kernels: rnea_scan 4.3e-7 (rnea
# 4.3e-7), aba_scan 1.1e-5 (aba 1.2e-5, icub floating): declared with rnea's and aba's margins.
# fixed_tol: HLS C simulation of iiwa14, 456 random states (seeds 7 and 31), with the CORDIC
# sin/cos (issue 18): rnea_scan worst 1.9e-4 in Q16.16 (rnea 1.9e-4) and 6.4e-7 in Q24.24;
# aba_scan 0.136 and 1.5e-5, equal to aba's on the same states, so aba's bounds are kept.
# The Pinocchio oracle and benchmark peer are rnea's and aba's own: the same quantities.

from ..registry import get as _declared  # noqa: E402  (the package imports dynamics first)

_RNEA, _ABA = _declared("rnea"), _declared("aba")

declare("rnea_scan", "inverse dynamics τ (as rnea) with the forward pass as a parallel prefix scan and "
        "the backward pass as subtree sums (log depth)",
        inputs=("q", "v", "a"), outputs=(Arg("tau", ("nv",), "joint torques"),),
        algorithm=_rnea_scan, coupled=_c_rnea_scan, reference=ref.rnea_scan,
        pinocchio=_RNEA.pinocchio, pinocchio_cpp=_RNEA.pinocchio_cpp,
        pinocchio_note="the same quantity as rnea: Pinocchio's rnea",
        float32_tol=4e-6, fixed_tol={(32, 16): 5e-4, (48, 24): 1.5e-6}, gpu_shape="block")
declare("aba_scan", "forward dynamics q̈ (as aba) with the two linear passes as parallel prefix scans and "
        "the articulated inertias sequential",
        inputs=("q", "v", "tau"), outputs=(Arg("qdd", ("nv",), "joint accelerations"),),
        algorithm=_aba_scan, coupled=_c_aba_scan, reference=ref.aba_scan,
        pinocchio=_ABA.pinocchio, pinocchio_cpp=_ABA.pinocchio_cpp,
        pinocchio_note="the same quantity as aba: Pinocchio's aba",
        float32_tol=2e-5, fixed_tol={(32, 16): 0.3, (48, 24): 4e-5}, gpu_shape="block", needs_minv=True)
