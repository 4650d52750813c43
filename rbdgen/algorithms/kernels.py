"""The dynamics algorithms, written once against traced scalars; each returns a Kernel.

They mirror :mod:`rbdgen.reference` equation for equation, with three differences that are
what code generation is for: transforms are built from the sparsity analysis (E linear in
cos q, sin q), every product with a structural zero vanishes in the graph, and each block of
work is tagged with its body and tree level.
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Array, Block, Graph, Kernel, MatMul
from ..model import RobotModel
from ..symbolic import joint_transform
from . import spatial as S

KERNELS = ("rnea", "nle", "gravity", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives")


class Trace:
    """Per-kernel tracing context: the graph, the inputs, and X_i / S_i / I_i as Values."""

    def __init__(self, model: RobotModel, fold: bool = True):
        self.m = model
        self.g = Graph(fold=fold)
        self.depth = model.depth
        self._X: dict[int, S.XForm] = {}

    def block(self, phase: str, i: int | None = None):
        m = self.m
        if i is None:
            self.g.block = Block(phase)
        else:
            self.g.block = Block(phase, i, self.depth[i], f"{m.body_names[i]} (joint {m.joint_names[i]})")

    def inputs(self, name: str, n: int):
        return [self.g.input(name, k) for k in range(n)]

    def consts(self, arr):
        a = np.asarray(arr, dtype=float)
        if a.ndim == 1:
            return [self.g.const(x) for x in a]
        return [[self.g.const(x) for x in row] for row in a]

    def zeros(self, n: int):
        return [self.g.const(0.0)] * n

    # ---- model quantities as Values ---------------------------------------------------------
    def X(self, i: int, q) -> S.XForm:
        if i in self._X:
            return self._X[i]
        g, m = self.g, self.m
        jt = joint_transform(m, i)
        qs = m.q_start[i]
        if jt.kind == "revolute":
            c, s = g.op("cos", q[qs]), g.op("sin", q[qs])
            E = [[jt.Ec[a, b] * c + jt.Es[a, b] * s + jt.E0[a, b] for b in range(3)] for a in range(3)]
            E = [[g.lift(e) for e in row] for row in E]
            r = self.consts(jt.r0)
        elif jt.kind == "prismatic":
            E = self.consts(jt.E0)
            r = [g.lift(jt.r0[k] + jt.rq[k] * q[qs]) for k in range(3)]
        else:  # free-flyer: q = [p; quaternion (x y z w)], assumed unit (as Pinocchio does)
            p = q[qs : qs + 3]
            x, y, z, w = q[qs + 3 : qs + 7]
            two = 2.0
            R = [
                [1.0 - two * (y * y + z * z), two * (x * y - z * w), two * (x * z + y * w)],
                [two * (x * y + z * w), 1.0 - two * (x * x + z * z), two * (y * z - x * w)],
                [two * (x * z - y * w), two * (y * z + x * w), 1.0 - two * (x * x + y * y)],
            ]
            E0 = self.consts(jt.E0)
            RT = S.transpose(R)
            E = S.mat_mat(g, RT, E0)
            r = S.vadd(self.consts(jt.r0), S.mat3T_vec(g, E0, p))
        self._X[i] = S.XForm(E, r)
        return self._X[i]

    def Smat(self, i: int):
        """S_i as a 6×nv_i list of constant Values."""
        return self.consts(self.m.motion_subspace(i))

    def S_times(self, i, x):
        """S_i · x (x: nv_i Values) → 6 Values."""
        return S.mat_vec(self.g, self.Smat(i), x)

    def ST_times(self, i, f):
        """S_iᵀ · f → nv_i Values."""
        return S.matT_vec(self.g, self.Smat(i), f)

    def I(self, i: int):
        return self.consts(self.m.inertia[i])

    def a_gravity(self):
        return self.consts(np.concatenate([np.zeros(3), -self.m.gravity]))

    def kernel(self, name, inputs, outputs, doc=""):
        return Kernel(name, self.g, inputs, outputs, doc=doc, meta={"robot": self.m.name})


def _flat(M):
    return [x for row in M for x in row]


# ---- RNEA ----------------------------------------------------------------------------------------

def _rnea_values(t: Trace, q, v, a, gravity=True):
    """Forward and backward RNEA passes; returns (tau Values, per-body v, a, f, total f)."""
    m, g = t.m, t.g
    nb = m.nb
    vel, acc, f, vJ = [None] * nb, [None] * nb, [None] * nb, [None] * nb
    a0 = t.a_gravity() if gravity else t.zeros(6)
    for i in range(nb):
        t.block("rnea forward", i)
        X = t.X(i, q)
        p = m.parent[i]
        vs = m.v_slice(i)
        vJ[i] = t.S_times(i, v[vs])
        if p < 0:
            vel[i] = vJ[i]
            acc[i] = S.vadd(X.motion(g, a0), t.S_times(i, a[vs]))
        else:
            vel[i] = S.vadd(X.motion(g, vel[p]), vJ[i])
            acc[i] = S.vadd(S.vadd(X.motion(g, acc[p]), t.S_times(i, a[vs])), S.crm(g, vel[i], vJ[i]))
        I = t.I(i)
        f[i] = S.vadd(S.mat_vec(g, I, acc[i]), S.crf(g, vel[i], S.mat_vec(g, I, vel[i])))
    ftot = list(f)
    tau = [None] * m.nv
    for i in reversed(range(nb)):
        t.block("rnea backward", i)
        vs = m.v_slice(i)
        tau[vs] = t.ST_times(i, ftot[i])
        p = m.parent[i]
        if p >= 0:
            ftot[p] = S.vadd(ftot[p], t.X(i, q).force_T(g, ftot[i]))
    return tau, vel, acc, vJ, ftot


def rnea(model: RobotModel, fold=True) -> Kernel:
    t = Trace(model, fold)
    q, v, a = t.inputs("q", model.nq), t.inputs("v", model.nv), t.inputs("a", model.nv)
    tau = _rnea_values(t, q, v, a)[0]
    return t.kernel("rnea", [Array("q", (model.nq,)), Array("v", (model.nv,)), Array("a", (model.nv,))],
                    [(Array("tau", (model.nv,)), tau)], "inverse dynamics τ = M a + C v + g")


def nle(model: RobotModel, fold=True) -> Kernel:
    t = Trace(model, fold)
    q, v = t.inputs("q", model.nq), t.inputs("v", model.nv)
    tau = _rnea_values(t, q, v, t.zeros(model.nv))[0]
    return t.kernel("nle", [Array("q", (model.nq,)), Array("v", (model.nv,))],
                    [(Array("tau", (model.nv,)), tau)], "nonlinear effects C v + g")


def gravity(model: RobotModel, fold=True) -> Kernel:
    t = Trace(model, fold)
    q = t.inputs("q", model.nq)
    tau = _rnea_values(t, q, t.zeros(model.nv), t.zeros(model.nv))[0]
    return t.kernel("gravity", [Array("q", (model.nq,))], [(Array("tau", (model.nv,)), tau)],
                    "generalised gravity g(q)")


# ---- CRBA ----------------------------------------------------------------------------------------

def _crba_values(t: Trace, q):
    m, g = t.m, t.g
    Ic = [t.I(i) for i in range(m.nb)]
    for i in reversed(range(m.nb)):
        p = m.parent[i]
        if p >= 0:
            t.block("crba composite inertia", i)
            Ic[p] = S.madd(Ic[p], S.congruence(g, t.X(i, q).matrix(g), Ic[i]))
    zero = g.const(0.0)
    M = [[zero] * m.nv for _ in range(m.nv)]  # bodies on different branches: structural zeros
    for i in range(m.nb):
        t.block("crba columns", i)
        F = S.mat_mat(g, Ic[i], t.Smat(i))  # 6 × nv_i
        si = m.v_slice(i)
        Mii = S.mat_mat(g, S.transpose(t.Smat(i)), F)
        for a_, ra in enumerate(range(si.start, si.stop)):
            for b_, rb in enumerate(range(si.start, si.stop)):
                M[ra][rb] = Mii[a_][b_]
        j = i
        while m.parent[j] >= 0:
            Xj = t.X(j, q)
            F = S.transpose([Xj.force_T(g, col) for col in S.transpose(F)])
            j = m.parent[j]
            sj = m.v_slice(j)
            Mji = S.mat_mat(g, S.transpose(t.Smat(j)), F)
            for a_, ra in enumerate(range(sj.start, sj.stop)):
                for b_, rb in enumerate(range(si.start, si.stop)):
                    M[ra][rb] = Mji[a_][b_]
                    M[rb][ra] = Mji[a_][b_]
    return M


def crba(model: RobotModel, fold=True) -> Kernel:
    t = Trace(model, fold)
    q = t.inputs("q", model.nq)
    M = _crba_values(t, q)
    return t.kernel("crba", [Array("q", (model.nq,))], [(Array("M", (model.nv, model.nv)), _flat(M))],
                    "joint-space inertia matrix M(q), full (row-major, symmetric)")


# ---- ABA and M⁻¹ -------------------------------------------------------------------------------

def _aba_values(t: Trace, q, v, tau_cols, gravity=True, velocity=True, symmetric=False):
    """Articulated-body algorithm with k right-hand sides. ``tau_cols``: nv lists of k Values.
    Returns q̈ as nv lists of k Values.

    ``symmetric`` (M⁻¹: τ = identity, so q̈ is symmetric): the forward pass computes, for body
    i, only the columns from i's first DoF on — all its descendants need — and mirrors the
    rest, halving the pass."""
    m, g = t.m, t.g
    nb = m.nb
    k = len(tau_cols[0])
    zero = g.const(0.0)
    vel, c, IA, pA = [None] * nb, [None] * nb, [None] * nb, [None] * nb
    for i in range(nb):
        t.block("aba forward", i)
        X = t.X(i, q)
        p = m.parent[i]
        IA[i] = t.I(i)
        if velocity:
            vJ = t.S_times(i, v[m.v_slice(i)])
            vel[i] = vJ if p < 0 else S.vadd(X.motion(g, vel[p]), vJ)
            c[i] = S.crm(g, vel[i], vJ)
            pb = S.crf(g, vel[i], S.mat_vec(g, IA[i], vel[i]))
        else:
            c[i] = [zero] * 6
            pb = [zero] * 6
        pA[i] = [[x] * k for x in pb]  # 6 × k
    U, Dinv, u = [None] * nb, [None] * nb, [None] * nb
    for i in reversed(range(nb)):
        t.block("aba backward", i)
        Si = t.Smat(i)
        U[i] = S.mat_mat(g, IA[i], Si)
        Dinv[i] = S.spd_inverse(g, S.mat_mat(g, S.transpose(Si), U[i]))
        vs = m.v_slice(i)
        p = m.parent[i]
        if p >= 0:
            UDinv = S.mat_mat(g, U[i], Dinv[i])
            Ia = S.msub(IA[i], S.mat_mat(g, UDinv, S.transpose(U[i])))
            Ia = [[Ia[a][b] if a <= b else Ia[b][a] for b in range(6)] for a in range(6)]  # symmetric
            Iac = S.mat_vec(g, Ia, c[i])
            X = t.X(i, q)
            IA[p] = S.madd(IA[p], S.congruence(g, X.matrix(g), Ia))
        # the bias force of each right-hand side: with several (M⁻¹), each column is its own
        # block, so a scheduler can run the columns side by side
        u[i] = [[None] * k for _ in range(len(Si[0]))]
        for col in range(k):
            if k > 1:
                t.block(f"aba backward, column {col}", i)
            pcol = [pA[i][r][col] for r in range(6)]
            STp = S.mat_vec(g, S.transpose(Si), pcol)
            ucol = [tau_cols[vs.start + r][col] - STp[r] for r in range(len(Si[0]))]
            for r, val in enumerate(ucol):
                u[i][r][col] = val
            if p >= 0:
                Uu = S.mat_vec(g, UDinv, ucol)
                pa = [pcol[r] + Iac[r] + Uu[r] for r in range(6)]
                XTpa = X.force_T(g, pa)
                for r in range(6):
                    pA[p][r][col] = pA[p][r][col] + XTpa[r]
    qdd = [[None] * k for _ in range(m.nv)]
    acc = [None] * nb
    a0 = t.a_gravity() if gravity else t.zeros(6)
    for i in range(nb):
        t.block("aba forward 2", i)
        X = t.X(i, q)
        p = m.parent[i]
        vs = m.v_slice(i)
        cols = range(vs.start, k) if symmetric else range(k)
        if p < 0:
            ap_col = S.vadd(X.motion(g, a0), c[i])
            ap = {col: ap_col for col in cols}
        else:
            ap = {}
        acc[i] = {}
        for col in cols:
            if k > 1:
                t.block(f"aba forward 2, column {col}", i)
            if p >= 0:
                ap[col] = S.vadd(X.motion(g, acc[p][col]), c[i])
            rhs = [u[i][r][col] - S.dot(g, [U[i][a_][r] for a_ in range(6)], ap[col]) for r in range(len(u[i]))]
            qi = S.mat_vec(g, Dinv[i], rhs)
            for r, val in enumerate(qi):
                qdd[vs.start + r][col] = val
                if symmetric:
                    qdd[col][vs.start + r] = val
            acc[i][col] = S.vadd(ap[col], t.S_times(i, qi))
    return qdd


def aba(model: RobotModel, fold=True) -> Kernel:
    t = Trace(model, fold)
    q, v, tau = t.inputs("q", model.nq), t.inputs("v", model.nv), t.inputs("tau", model.nv)
    qdd = _aba_values(t, q, v, [[x] for x in tau])
    return t.kernel("aba", [Array("q", (model.nq,)), Array("v", (model.nv,)), Array("tau", (model.nv,))],
                    [(Array("qdd", (model.nv,)), [r[0] for r in qdd])], "forward dynamics q̈ (articulated-body algorithm)")


def _minv_values(t: Trace, q):
    n = t.m.nv
    eye = [[t.g.const(1.0 if r == c else 0.0) for c in range(n)] for r in range(n)]
    return _aba_values(t, q, None, eye, gravity=False, velocity=False, symmetric=True)


def minv(model: RobotModel, fold=True) -> Kernel:
    t = Trace(model, fold)
    q = t.inputs("q", model.nq)
    Mi = _minv_values(t, q)
    return t.kernel("minv", [Array("q", (model.nq,))], [(Array("Minv", (model.nv, model.nv)), _flat(Mi))],
                    "M(q)⁻¹ directly (articulated-body recursions on the identity)")


# ---- derivatives -------------------------------------------------------------------------------------

def _rnea_derivative_values(t: Trace, q, v, a):
    m, g = t.m, t.g
    nb, nv = m.nb, m.nv
    _, vel, acc, vJ, ftot = _rnea_values(t, q, v, a)
    a0 = t.a_gravity()
    zero6 = t.zeros(6)
    zero = g.const(0.0)  # rows of bodies that joint b's motion cannot reach stay zero
    dtau_dq = [[zero] * nv for _ in range(nv)]
    dtau_dv = [[zero] * nv for _ in range(nv)]
    for b in range(nb):
        Sb = m.motion_subspace(b)
        for kk in range(m.nv_joint(b)):
            col = m.v_start[b] + kk
            s = t.consts(Sb[:, kk])
            for wrt, out in (("q", dtau_dq), ("v", dtau_dv)):
                dv, da, df = [None] * nb, [None] * nb, [None] * nb
                sub = set(m.subtree(b))
                affected = sub | set(m.ancestors(b))
                for i in range(nb):
                    p = m.parent[i]
                    if i not in sub:
                        dv[i] = da[i] = df[i] = zero6  # unaffected by joint b's motion
                        continue
                    t.block(f"d/d{wrt}[{col}] forward", i)
                    X = t.X(i, q)
                    vp = zero6 if p < 0 else vel[p]
                    ap = a0 if p < 0 else acc[p]
                    dvp = zero6 if p < 0 else dv[p]
                    dap = zero6 if p < 0 else da[p]
                    dvJ = s if (wrt == "v" and i == b) else zero6
                    moved = wrt == "q" and i == b
                    dXv = S.crm(g, X.motion(g, vp), s) if moved else zero6  # −s × (X v_p)
                    dXa = S.crm(g, X.motion(g, ap), s) if moved else zero6
                    dv[i] = S.vadd(S.vadd(X.motion(g, dvp), dXv), dvJ)
                    da[i] = S.vadd(S.vadd(S.vadd(X.motion(g, dap), dXa), S.crm(g, dv[i], vJ[i])), S.crm(g, vel[i], dvJ))
                    I = t.I(i)
                    df[i] = S.vadd(S.vadd(S.mat_vec(g, I, da[i]), S.crf(g, dv[i], S.mat_vec(g, I, vel[i]))),
                                   S.crf(g, vel[i], S.mat_vec(g, I, dv[i])))
                for i in reversed(range(nb)):
                    if i not in affected:
                        continue
                    t.block(f"d/d{wrt}[{col}] backward", i)
                    vs = m.v_slice(i)
                    d = t.ST_times(i, df[i])
                    for r, val in enumerate(d):
                        out[vs.start + r][col] = val
                    p = m.parent[i]
                    if p >= 0 and i in affected:
                        src = df[i]
                        if wrt == "q" and i == b:
                            src = S.vadd(src, S.crf(g, s, ftot[i]))
                        df[p] = S.vadd(df[p], t.X(i, q).force_T(g, src))
    return dtau_dq, dtau_dv


def rnea_derivatives(model: RobotModel, fold=True) -> Kernel:
    t = Trace(model, fold)
    q, v, a = t.inputs("q", model.nq), t.inputs("v", model.nv), t.inputs("a", model.nv)
    dq, dv = _rnea_derivative_values(t, q, v, a)
    n = model.nv
    return t.kernel("rnea_derivatives",
                    [Array("q", (model.nq,)), Array("v", (n,)), Array("a", (n,))],
                    [(Array("dtau_dq", (n, n)), _flat(dq)), (Array("dtau_dv", (n, n)), _flat(dv))],
                    "∂τ/∂q and ∂τ/∂v of inverse dynamics (∂τ/∂a = M)")


def aba_derivatives(model: RobotModel, fold=True) -> Kernel:
    t = Trace(model, fold)
    q, v, tau = t.inputs("q", model.nq), t.inputs("v", model.nv), t.inputs("tau", model.nv)
    qdd = [r[0] for r in _aba_values(t, q, v, [[x] for x in tau])]
    dq, dv = _rnea_derivative_values(t, q, v, qdd)
    Mi = _minv_values(t, q)
    n = model.nv
    k = t.kernel("aba_derivatives",
                 [Array("q", (model.nq,)), Array("v", (n,)), Array("tau", (n,))],
                 [(Array("dqdd_dtau", (n, n)), _flat(Mi))],
                 "∂q̈/∂q, ∂q̈/∂v and ∂q̈/∂τ = M⁻¹ of forward dynamics (−M⁻¹ ∂τ/∂u at q̈)")
    # −M⁻¹ ∂τ/∂u: dense, nothing to prune, so a loop rather than n³ unrolled lines
    k.temps = [(Array("dtau_dq", (n, n)), _flat(dq)), (Array("dtau_dv", (n, n)), _flat(dv))]
    k.post = [MatMul("dqdd_dq", "dqdd_dtau", "dtau_dq", n, n, n, -1.0),
              MatMul("dqdd_dv", "dqdd_dtau", "dtau_dv", n, n, n, -1.0)]
    k.epilogue_outputs = [Array("dqdd_dq", (n, n)), Array("dqdd_dv", (n, n))]
    k.output_order = ["dqdd_dq", "dqdd_dv", "dqdd_dtau"]
    return k


BUILDERS = {
    "rnea": rnea,
    "nle": nle,
    "gravity": gravity,
    "crba": crba,
    "aba": aba,
    "minv": minv,
    "rnea_derivatives": rnea_derivatives,
    "aba_derivatives": aba_derivatives,
}


def trace(model: RobotModel, name: str, fold: bool = True) -> Kernel:
    if name not in BUILDERS:
        raise ValueError(f"unknown kernel {name!r}; known: {', '.join(KERNELS)}")
    return BUILDERS[name](model, fold)
