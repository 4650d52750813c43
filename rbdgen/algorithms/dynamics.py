"""The dynamics algorithms, written once against traced scalars, and their declarations.

They mirror :mod:`rbdgen.reference` equation for equation, with three differences that are
what code generation is for: transforms are built from the sparsity analysis (E linear in
cos q, sin q), every product with a structural zero vanishes in the graph, and each block of
work is tagged with its body and tree level.
"""
from __future__ import annotations

import numpy as np

from .. import reference as ref
from ..registry import Arg, Gradient, Product, declare
from . import spatial as S
from .trace import Trace


def _flat(M):
    return [x for row in M for x in row]


def _D(t: Trace, i: int, Si, U):
    """D_i = S_iᵀ U_i (U_i = I^A_i S_i) with body i's armature on its diagonal: the joint's
    rotor inertia (none where the armature is zero: then no node changes)."""
    D = S.mat_mat(t.g, S.transpose(Si), U)
    arm = t.m.joint_armature(i)
    return [[x + float(arm[r]) if r == c and arm[r] else x for c, x in enumerate(row)] for r, row in enumerate(D)]


def _fext_values(f_ext, i: int):
    """Body i's external force from the flat ``f_ext`` input ([force; torque] per body, the
    reference's and Pinocchio's order) in Featherstone's [torque; force]."""
    fe = f_ext[6 * i:6 * i + 6]
    return list(fe[3:]) + list(fe[:3])


# ---- RNEA ----------------------------------------------------------------------------------------

def _rnea_values(t: Trace, q, v, a, gravity=True, aba_order=False, f_ext=None):
    """Forward and backward RNEA passes; returns (tau Values, per-body v, a, f, total f).

    ``aba_order``: sum each body's acceleration as the articulated-body pass does,
    (X a_λ + v × vJ) + S a, so that ∇FD's RNEA at a = q̈ reuses the accelerations ABA has
    already formed rather than recomputing them in another order. ``f_ext``: the flat input
    (per body [force; torque] in its frame), subtracted from each body's force. The model's
    armature adds armature·a to τ (not to the transmitted forces: it is each joint's rotor)."""
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
            if aba_order:
                acc[i] = S.vadd(S.vadd(X.motion(g, acc[p]), S.crm(g, vel[i], vJ[i])), t.S_times(i, a[vs]))
            else:
                acc[i] = S.vadd(S.vadd(X.motion(g, acc[p]), t.S_times(i, a[vs])), S.crm(g, vel[i], vJ[i]))
        I = t.I(i)
        if aba_order:
            # ∇FD: ABA has formed I·v for its bias forces already, and I·a + v ×* (I·v) reuses
            # it (the Newton-Euler form below would add ~2 % to ∇FD's operations)
            f[i] = S.vadd(S.mat_vec(g, I, acc[i]), S.crf(g, vel[i], S.mat_vec(g, I, vel[i])))
        else:
            f[i] = S.Inertia.from_matrix(I).body_force(g, vel[i], acc[i])
        if f_ext is not None:
            f[i] = S.vsub(f[i], _fext_values(f_ext, i))
    ftot = list(f)
    tau = [None] * m.nv
    for i in reversed(range(nb)):
        t.block("rnea backward", i)
        vs = m.v_slice(i)
        tau[vs] = t.ST_times(i, ftot[i])
        arm = m.joint_armature(i)
        if np.any(arm):  # the joint's rotor: armature·q̈
            tau[vs] = [x + float(c) * a[vs.start + r] if c else x for r, (x, c) in enumerate(zip(tau[vs], arm))]
        p = m.parent[i]
        if p >= 0:
            ftot[p] = S.vadd(ftot[p], t.X(i, q).force_T(g, ftot[i]))
    return tau, vel, acc, vJ, ftot


# ---- CRBA ----------------------------------------------------------------------------------------

def _crba_values(t: Trace, q):
    m, g = t.m, t.g
    # composite inertias as ten parameters (a third of a 6×6 congruence to carry one to the parent)
    Ic = [S.Inertia.from_matrix(t.I(i)) for i in range(m.nb)]
    for i in reversed(range(m.nb)):
        p = m.parent[i]
        if p >= 0:
            t.block("crba composite inertia", i)
            Ic[p] = Ic[p] + Ic[i].to_parent(g, t.X(i, q))
    zero = g.const(0.0)
    M = [[zero] * m.nv for _ in range(m.nv)]  # bodies on different branches: structural zeros
    for i in range(m.nb):
        t.block("crba columns", i)
        F = S.transpose([Ic[i].apply(g, s) for s in S.transpose(t.Smat(i))])  # 6 × nv_i
        si = m.v_slice(i)
        Mii = _D(t, i, t.Smat(i), F)  # Sᵀ I^c S, the joint's armature on the diagonal
        for a_, ra in enumerate(range(si.start, si.stop)):
            for b_, rb in enumerate(range(si.start, si.stop)):
                M[ra][rb] = Mii[a_][b_]
        j = i
        while m.parent[j] >= 0:
            # each step up a block of its own (the same comment): one kind of code per joint
            # kind in the rolled lowering, not one per depth (rbdgen.ir.roll)
            t.block("crba columns", i)
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


# ---- M⁻¹ from M's sparse factorisation ----------------------------------------------------------
#
# Featherstone's LTDL factorisation (Rigid Body Dynamics Algorithms, 2008, ch. 6, on the sparsity
# of the joint-space inertia matrix): with the DoFs numbered parents first, M = Lᵀ D L where L is
# unit lower triangular and L[k][i] is nonzero only for DoF i an ancestor of DoF k (λ(k) its
# parent DoF; a multi-DoF joint's DoFs chained in order).
# Eliminating leaves first fills nothing in, so the factorisation costs Σ_k d_k (d_k + 1) / 2
# multiply-adds, d_k the number of k's ancestor DoFs. Then M⁻¹ = L⁻¹ D⁻¹ L⁻ᵀ: L⁻¹ has L's
# pattern, and M⁻¹[i][j] = Σ_k L⁻¹[i][k] D⁻¹_k L⁻¹[j][k] over the DoFs k common to both paths to
# the root, so two branches meet through their common ancestors alone (the base's six DoFs for
# a humanoid's two legs). On the robots of the test suite this is 0.41-0.73 of the operations of
# the articulated-body recursion on the identity (iiwa 608 against 1 134, the floating quadruped
# 3 609 against 4 935, floating TALOS 18 983 against 26 375; docs/performance.md §53), whose
# per-(body, column) work is O(n²) where this is O(Σ d²): on a long serial chain (d ~ n) the
# recursion wins again (a 45-DoF chain: 128 270 against 105 617). FACTOR_MACS_PER_PAIR chooses.

#: M⁻¹ (and ∇FD's M⁻¹ and q̈) come from the LTDL factorisation when its multiply-adds (factor,
#: L⁻¹, and the product) are at most this many per (body, column) pair of the articulated-body
#: recursion's forward pass; otherwise from the recursion. Operations of the two measured on
#: random serial chains: 0.70 of the recursion's at 19 multiply-adds a pair (20 DoFs), 0.90 at
#: 29 (30 DoFs), 1.21 at 44 (45 DoFs); every robot of the suite is at 0.8-15.3.
FACTOR_MACS_PER_PAIR = 32.0


def _dof_parents(m) -> list:
    """λ(k) for each DoF k (−1 at a root): the last DoF of the nearest ancestor body that has
    any, or the previous DoF of the same joint."""
    lam = []
    for b in range(m.nb):
        vs = m.v_slice(b)
        p = m.parent[b]
        while p >= 0 and m.nv_joint(p) == 0:
            p = m.parent[p]
        last = m.v_slice(p).stop - 1 if p >= 0 else -1
        for r in range(vs.stop - vs.start):
            lam.append(last if r == 0 else vs.start + r - 1)
    assert all(p < k for k, p in enumerate(lam)), "DoFs are numbered parents first"
    return lam


def _dof_ancestors(lam) -> list:
    """Per DoF, its ancestor DoFs, nearest first."""
    out = []
    for k in range(len(lam)):
        a, j = [], lam[k]
        while j >= 0:
            a.append(j)
            j = lam[j]
        out.append(a)
    return out


def factor_pays(m) -> bool:
    """Whether M⁻¹ is computed from M's LTDL factorisation (True) or by the articulated-body
    recursion on the identity (False): :data:`FACTOR_MACS_PER_PAIR`. Depends on the model's
    tree alone, so every lowering and target traces the same algorithm."""
    lam = _dof_parents(m)
    n = len(lam)
    if n == 0:
        return False
    depth, size = [0] * n, [1] * n  # ancestor DoFs; DoFs in the subtree, the DoF included
    for k in range(n):
        depth[k] = depth[lam[k]] + 1 if lam[k] >= 0 else 0
    for k in reversed(range(n)):
        if lam[k] >= 0:
            size[lam[k]] += size[k]
    # the factorisation Σ d(d+1)/2; L⁻¹: a pair of ancestors of k per multiply-add, Σ d(d−1)/2; the
    # entries i ≤ j: each common ancestor-or-self k of the pair once, and the pairs of DoFs in k's
    # subtree are s(s+1)/2 (O(n) sums of what the traced loops do, so a 10⁴-body model costs
    # nothing to ask)
    macs = sum(d * d + s * (s + 1) // 2 for d, s in zip(depth, size))
    pairs = sum(n - m.v_start[b] for b in range(m.nb) if m.nv_joint(b))
    return macs <= FACTOR_MACS_PER_PAIR * pairs


class _Factor:
    """M = Lᵀ D L (Featherstone's LTDL) of the traced M: ``L[k][i]`` for i an ancestor DoF of k,
    ``dinv[k]`` = 1 / D_k. Each step is a block of the DoF's body (the rolled lowering's and
    the GPU block shape's unit of work)."""

    def __init__(self, t: Trace, M):
        m = t.m
        self.t = t
        self.lam = _dof_parents(m)
        self.anc = _dof_ancestors(self.lam)
        self.body = [b for b in range(m.nb) for _ in range(m.nv_joint(b))]
        n = len(self.lam)
        H = [list(row) for row in M]
        self.dinv = [None] * n
        for k in reversed(range(n)):  # leaves first: no fill-in
            t.block("ltdl pivot", self.body[k])
            self.dinv[k] = 1.0 / H[k][k]
            for i in self.anc[k]:
                self._block("ltdl elimination", f"ancestor DoF {i}", k, True)
                a = H[k][i] * self.dinv[k]
                for j in [i] + self.anc[i]:
                    H[i][j] = H[i][j] - a * H[k][j]
                H[k][i] = a
        self.L = H  # its strictly lower entries on the ancestors are L's; the rest is not read

    def _block(self, phase: str, detail: str, k: int, first: bool):
        """A block of DoF k's body. Unrolled, each entry (an ancestor's row of an elimination,
        an entry of L⁻¹ or of M⁻¹) is a task of its own: they are independent, and the GPU block
        shape shares tasks out over its lanes (the floating quadruped's minv: 731 statements on
        the busiest lanes against 1 841 with a task per DoF). Rolled, each block is a call of a
        kind through its tables, and a block opens at each ``first`` entry only: L⁻¹ a row a call
        (TALOS's rolled minv 12.4 µs, ∇FD 33.5, against 16.6 and 49.7 with a call per entry; with
        every step a row a call, 9.3 and 38.6 µs, but 3.2 and 1.7 times the code; docs/performance.md
        §53)."""
        if not self.t.rolled:
            self.t.block(f"{phase}, {detail}", self.body[k])
        elif first:
            self.t.block(phase, self.body[k])

    def solve(self, b):
        """M⁻¹ b: Lᵀ y = b (leaves first), then L x = D⁻¹ y (root first); O(Σ d)."""
        t = self.t
        n = len(self.lam)
        y = list(b)
        for k in reversed(range(n)):
            t.block("ltdl solve, up", self.body[k])
            for i in self.anc[k]:
                y[i] = y[i] - self.L[k][i] * y[k]
        x = [None] * n
        for k in range(n):
            t.block("ltdl solve, down", self.body[k])
            s = y[k] * self.dinv[k]
            for j in self.anc[k]:
                s = s - self.L[k][j] * x[j]
            x[k] = s
        return x

    def inverse(self):
        """M⁻¹ = L⁻¹ D⁻¹ L⁻ᵀ, both triangles. L⁻¹[k][j] (j an ancestor of k) from L L⁻¹ = 1:
        −(L[k][j] + Σ L[k][i] L⁻¹[i][j]) over the DoFs i between j and k; then each entry
        Σ_k (L⁻¹[i][k] D⁻¹_k) L⁻¹[j][k] over the common ancestors k (and i itself when i is
        one of j's), a block per entry (:meth:`_block`)."""
        g, L, dinv = self.t.g, self.L, self.dinv
        n = len(self.lam)
        Li = [dict() for _ in range(n)]
        W = [dict() for _ in range(n)]  # L⁻¹[i][k] / D_k
        for k in range(n):
            for r, j in enumerate(reversed(self.anc[k])):
                self._block("ltdl inverse of L", f"column {j}", k, r == 0)
                acc = -L[k][j]
                for i in reversed(self.anc[k]):
                    if j in Li[i]:  # i between j and k: its row is done (rows root first)
                        acc = acc - L[k][i] * Li[i][j]
                Li[k][j] = acc
                W[k][j] = acc * dinv[j]
            W[k][k] = dinv[k]
        zero = g.const(0.0)
        Z = [[zero] * n for _ in range(n)]
        path = [set(W[k]) for k in range(n)]  # each DoF's ancestors and itself
        for i in range(n):
            for j in range(i, n):
                common = sorted(path[i] & path[j])
                if not common:
                    continue  # two roots' subtrees: a structural zero
                self._block("ltdl inverse", f"column {j}", i, True)
                Z[i][j] = Z[j][i] = S.dot(g, [W[i][k] for k in common],
                                          [Li[j][k] if k != j else g.const(1.0) for k in common])
        return Z


def _reference_frames(t: Trace, q, phase: str):
    """T[i]: the transform from a common reference frame to body i's (motion coordinates),
    composed root to leaf (each body's in a block of ``phase``). The reference is the root
    body's frame at this q when the tree has a single root (its T is the identity, so its
    columns stay the sparse S), the world frame otherwise."""
    m, g = t.m, t.g
    roots = [i for i in range(m.nb) if m.parent[i] < 0]
    eye = S.XForm(t.consts(np.eye(3)), t.zeros(3))
    T = [None] * m.nb
    for i in range(m.nb):
        t.block(phase, i)
        p = m.parent[i]
        if p < 0:
            T[i] = eye if len(roots) == 1 else t.X(i, q)
        else:
            T[i] = T[p].then(g, t.X(i, q))
    return T


# ---- ABA and M⁻¹ -------------------------------------------------------------------------------

def _aba_values(t: Trace, q, v, tau_cols, gravity=True, velocity=True, symmetric=False, f_ext=None):
    """Articulated-body algorithm with k right-hand sides. ``tau_cols``: nv lists of k Values.
    Returns q̈ as nv lists of k Values. ``f_ext``: the flat input (per body [force; torque] in
    its frame), subtracted from each body's bias force. The armature is on D_i's diagonal.

    ``symmetric`` (M⁻¹: τ = identity, so q̈ is symmetric): the forward pass computes, for body
    i, only the columns from i's first DoF on — all its descendants need — and mirrors the
    rest, halving the pass."""
    m, g = t.m, t.g
    nb = m.nb
    k = len(tau_cols[0])
    zero = g.const(0.0)
    vel, c, IA, pA = [None] * nb, [None] * nb, [None] * nb, [None] * nb
    a0 = t.a_gravity() if gravity else t.zeros(6)
    for i in range(nb):
        t.block("aba forward", i)
        X = t.X(i, q)
        p = m.parent[i]
        IA[i] = t.I(i)
        if velocity:
            vJ = t.S_times(i, v[m.v_slice(i)])
            vel[i] = vJ if p < 0 else S.vadd(X.motion(g, vel[p]), vJ)
            # a root's v × vJ is v × v = 0, whose linear part the graph would trace as
            # (a − b) + (b − a): not folded, so say it
            c[i] = S.crm(g, vel[i], vJ) if p >= 0 else [zero] * 6
            pb = S.crf(g, vel[i], S.mat_vec(g, IA[i], vel[i]))
        else:
            c[i] = [zero] * 6
            pb = [zero] * 6
        if f_ext is not None:
            pb = S.vsub(pb, _fext_values(f_ext, i))
        pA[i] = [[x] * k for x in pb]  # 6 × k
    U, Dinv, u = [None] * nb, [None] * nb, [None] * nb
    for i in reversed(range(nb)):
        t.block("aba backward", i)
        Si = t.Smat(i)
        U[i] = S.mat_mat(g, IA[i], Si)
        Dinv[i] = S.spd_inverse(g, _D(t, i, Si, U[i]))
        vs = m.v_slice(i)
        p = m.parent[i]
        if p >= 0:
            UDinv = S.mat_mat(g, U[i], Dinv[i])
            Ia = t.articulated(i, IA[i], U[i], UDinv)  # symmetric, Ia·S_i = 0 made exact
            Iac = S.mat_vec(g, Ia, c[i])
            X = t.X(i, q)
            IA[p] = S.madd(IA[p], X.congruence(g, Ia))
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
            # U_iᵀ a is on the pass's critical path (each body's q̈ waits for its parent's
            # acceleration): summed as a tree, iiwa14 aba 207 -> 197 ns (docs/performance.md §24)
            rhs = [u[i][r][col] - S.dot(g, [U[i][a_][r] for a_ in range(6)], ap[col], tree=True)
                   for r in range(len(u[i]))]
            qi = S.mat_vec(g, Dinv[i], rhs)
            for r, val in enumerate(qi):
                qdd[vs.start + r][col] = val
                if symmetric:
                    qdd[col][vs.start + r] = val
            acc[i][col] = S.vadd(ap[col], t.S_times(i, qi))
    return qdd


def _minv_values(t: Trace, q):
    """M⁻¹: from M's LTDL factorisation where that is cheaper (:func:`factor_pays`), otherwise
    the articulated-body recursion with the identity as its right-hand sides."""
    if factor_pays(t.m):
        return _Factor(t, _crba_values(t, q)).inverse()
    n = t.m.nv
    eye = [[t.g.const(1.0 if r == c else 0.0) for c in range(n)] for r in range(n)]
    return _aba_values(t, q, None, eye, gravity=False, velocity=False, symmetric=True)


# ---- derivatives -------------------------------------------------------------------------------------

def _rnea_derivative_values(t: Trace, q, v, a, aba_order=False, f_ext=None):
    """∂τ/∂q and ∂τ/∂v in O(n·d): one forward and one backward sweep over the bodies, then a
    few dot products per pair of joints on one root-to-leaf path (Carpentier and Mansard's
    analytical RNEA derivatives, here with body-local composites).

    All pair quantities live in one reference frame: the root body's frame at this q when the
    tree has a single root (the base's own columns are then unit vectors, so most of their
    products vanish in the graph), the world frame otherwise. Perturbing joint column j moves
    its subtree rigidly by the twist J_j (columns attached to the child body, as q ⊕ δ does for
    the free-flyer); with v_λ, a_λ the velocity and acceleration (gravity included) of joint
    j's parent body and, over bodies k in subtree(i),

        dV_j = v_λ × J_j,  c_j = a_λ × J_j + v_λ × dV_j,  dAdv_j = dV_j + v_j × J_j,
        Ic_i = Σ I_k,  Hc_i = Σ I_k v_k,  Fc_i = Σ f_k,  B'c_i = Σ (v_k ×* I_k − I_k v_k ×),
        B_i x = B'c_i x + x ×* Hc_i   (B'c symmetric, so Bᵀ y = B'c y − y ×* Hc),

    the partials of τ_i = J_iᵀ Fc_i are, for j an ancestor of i or i itself,
        ∂τ_i/∂q_j = (Ic_i J_i)·c_j + (Bᵀ_i J_i)·dV_j,   ∂τ_i/∂v_j = (Bᵀ_i J_i)·J_j + (Ic_i J_i)·dAdv_j,
    and for i a strict ancestor of j
        ∂τ_i/∂q_j = J_i·(Ic_j c_j + B_j dV_j + J_j ×* Fc_j),   ∂τ_i/∂v_j = J_i·(B_j J_j + Ic_j dAdv_j).
    Each vector is formed in its body's frame (where S_j is a sparse constant) and carried to
    the reference frame once; the composites are accumulated body to parent like CRBA's.

    ``f_ext`` (fixed in the bodies' frames, so they move with their subtree) enters through Fc
    alone: the transmitted forces ``ftot`` include it. The armature does not depend on q or v."""
    m, g = t.m, t.g
    nb, nv = m.nb, m.nv
    _, vel, acc, _, ftot = _rnea_values(t, q, v, a, aba_order=aba_order, f_ext=f_ext)
    a0 = t.a_gravity()
    zero6 = t.zeros(6)
    zero = g.const(0.0)  # pairs of joints on different branches: structural zeros
    T = _reference_frames(t, q, "rnea derivatives forward")  # reference frame → body i
    cols = [None] * nb    # per body: list of (J, dV, c, dAdv) in the reference frame, one per column
    for i in range(nb):
        t.block("rnea derivatives forward", i)
        X = t.X(i, q)
        p = m.parent[i]
        if p < 0:
            vp, ap = zero6, X.motion(g, a0)
        else:
            vp, ap = X.motion(g, vel[p]), X.motion(g, acc[p])
        cols[i] = []
        subspace = m.motion_subspace(i).T
        for k, s in enumerate(t.consts(c) for c in subspace):
            if len(subspace) > 1:  # a multi-DOF joint's columns are independent tasks
                t.block(f"rnea derivatives forward, column {k}", i)
            dV = S.crm(g, vp, s)
            c = S.vadd(S.crm(g, ap, s), S.crm(g, vp, dV))
            dAdv = S.vadd(dV, S.crm(g, vel[i], s))
            t.block(f"rnea derivatives forward, column {k}, to the reference frame", i)
            cols[i].append((s, dV, c, dAdv, *(T[i].motion_inv(g, x) for x in (s, dV, c, dAdv))))
            t.block("rnea derivatives forward", i)
    Ic, Bc, Hc = [None] * nb, [None] * nb, [None] * nb
    rows = [None] * nb    # per body: list of (P, R, QA, W) in the reference frame, one per column
    # the three composites are three independent chains (separate blocks, so a cooperative
    # schedule runs them side by side), and each column's row vectors depend only on its own
    # body's composites: the backward chain is the composites' carries alone
    for i in reversed(range(nb)):
        I_i = S.Inertia.from_matrix(t.I(i))
        t.block("rnea derivatives backward, inertia", i)
        Ic[i] = I_i
        for ch in m.children(i):
            Ic[i] = Ic[i] + Ic[ch].to_parent(g, t.X(ch, q))
        t.block("rnea derivatives backward, inertia rate", i)
        Bc[i] = I_i.rate(g, vel[i])
        for ch in m.children(i):
            Bc[i] = Bc[i] + Bc[ch].to_parent(g, t.X(ch, q))
        t.block("rnea derivatives backward, momentum", i)
        Hc[i] = I_i.apply(g, vel[i])
        for ch in m.children(i):
            Hc[i] = S.vadd(Hc[i], t.X(ch, q).force_T(g, Hc[ch]))
        rows[i] = []
        for k, (s, dV, c, dAdv, *_) in enumerate(cols[i]):
            # P, QA and (R, W) are independent tasks (each carried to the reference frame)
            t.block(f"rnea derivatives backward, column {k}, P", i)
            P = T[i].force_T(g, Ic[i].apply(g, s))
            t.block(f"rnea derivatives backward, column {k}, QA", i)
            QA = S.vadd(S.vadd(Ic[i].apply(g, c), Bc[i].apply(g, dV)),
                        S.vadd(S.crf(g, dV, Hc[i]), S.crf(g, s, ftot[i])))
            QA = T[i].force_T(g, QA)
            t.block(f"rnea derivatives backward, column {k}, R and W", i)
            Bs = Bc[i].apply(g, s)
            sH = S.crf(g, s, Hc[i])
            R = T[i].force_T(g, S.vsub(Bs, sH))
            W = T[i].force_T(g, S.vadd(S.vadd(Bs, sH), Ic[i].apply(g, dAdv)))
            rows[i].append((P, R, QA, W))
    dtau_dq = [[zero] * nv for _ in range(nv)]
    dtau_dv = [[zero] * nv for _ in range(nv)]
    for i in range(nb):
        for ki, (P, R, QA, W) in enumerate(rows[i]):
            ci = m.v_start[i] + ki
            for j in m.ancestors(i):
                t.block(f"rnea derivatives entries, column {ki}, ancestor body {j}", i)
                for kj, (*_, J, dV, c, dAdv) in enumerate(cols[j]):
                    cj = m.v_start[j] + kj
                    dtau_dq[ci][cj] = S.dot(g, P, c) + S.dot(g, R, dV)
                    dtau_dv[ci][cj] = S.dot(g, R, J) + S.dot(g, P, dAdv)
                    if j != i:
                        dtau_dq[cj][ci] = S.dot(g, J, QA)
                        dtau_dv[cj][ci] = S.dot(g, J, W)
    return dtau_dq, dtau_dv


# ---- the algorithms as the registry calls them: (Trace, *inputs) → {output: values} --------------

def _rnea(t: Trace, q, v, a):
    return {"tau": _rnea_values(t, q, v, a)[0]}


def _nle(t: Trace, q, v):
    return {"tau": _rnea_values(t, q, v, t.zeros(t.m.nv))[0]}


def _gravity(t: Trace, q):
    return {"tau": _rnea_values(t, q, t.zeros(t.m.nv), t.zeros(t.m.nv))[0]}


def _crba(t: Trace, q):
    return {"M": _flat(_crba_values(t, q))}


def _aba(t: Trace, q, v, tau):
    return {"qdd": [r[0] for r in _aba_values(t, q, v, [[x] for x in tau])]}


def _minv(t: Trace, q):
    return {"Minv": _flat(_minv_values(t, q))}


def _rnea_derivatives(t: Trace, q, v, a):
    dq, dv = _rnea_derivative_values(t, q, v, a)
    return {"dtau_dq": _flat(dq), "dtau_dv": _flat(dv)}


def _aba_derivatives(t: Trace, q, v, tau, f_ext=None):
    if factor_pays(t.m):
        # one LTDL factorisation of M for both q̈ = M⁻¹ (τ − c) and M⁻¹ (c the RNEA at q̈ = 0, whose
        # velocities and v ×* I v the RNEA at q̈ below shares): iiwa 7 193 → 6 537 operations,
        # TALOS 161 647 → 153 727 against ABA and its recursion on the identity (§53)
        F = _Factor(t, _crba_values(t, q))
        Mi = F.inverse()
        c = _rnea_values(t, q, v, t.zeros(t.m.nv), f_ext=f_ext)[0]
        qdd = F.solve([tau[i] - c[i] for i in range(t.m.nv)])
        dq, dv = _rnea_derivative_values(t, q, v, qdd, f_ext=f_ext)
    else:
        qdd = [r[0] for r in _aba_values(t, q, v, [[x] for x in tau], f_ext=f_ext)]
        dq, dv = _rnea_derivative_values(t, q, v, qdd, aba_order=True, f_ext=f_ext)
        Mi = _minv_values(t, q)
    # −M⁻¹ ∂τ/∂u: dense, nothing to prune, so a loop rather than n³ unrolled lines
    return {"dqdd_dq": Product("dqdd_dtau", ("dtau_dq", _flat(dq)), -1.0),
            "dqdd_dv": Product("dqdd_dtau", ("dtau_dv", _flat(dv)), -1.0),
            "dqdd_dtau": _flat(Mi)}


def _fd_derivatives_minv(t: Trace, q, v, a, Minv):
    """Seed 001's Algorithm 3 as the paper states it (its footnote 1: M⁻¹ "can be cached from a
    previous step in many nonlinear MPC implementations"): line 1 the RNEA at (q, q̇, q̈), line 2
    its analytical derivatives ∂c'/∂u, line 3 ∂q̈/∂u = −M⁻¹ ∂c'/∂u, with M⁻¹ an input. The given
    M⁻¹ is copied to the product's scratch operand (nv² moves; the products read only scratch and
    outputs on every target)."""
    dq, dv = _rnea_derivative_values(t, q, v, a)
    given = ("minv_given", list(Minv))
    return {"dqdd_dq": Product(given, ("dtau_dq", _flat(dq)), -1.0),
            "dqdd_dv": Product(given, ("dtau_dv", _flat(dv)), -1.0)}


def _ref_fd_derivatives_minv(model, q, v, a, Minv):
    dq, dv = ref.rnea_derivatives(model, q, v, a)
    Mi = np.asarray(Minv, dtype=float).reshape(np.shape(dq))
    return -Mi @ dq, -Mi @ dv


def _pin_fd_derivatives_minv(pin, pm, data, q, v, a, Minv):
    """Pinocchio's own forward-dynamics derivatives at q̈ = a: τ = rnea(q, v, a), then
    computeABADerivatives(q, v, τ) (with M⁻¹(q) given: :func:`_minv_env`)."""
    tau = pin.rnea(pm, data, q, v, a).copy()
    ddq, ddv, _ = pin.computeABADerivatives(pm, data, q, v, tau)
    return ddq.copy(), ddv.copy()


def _minv_env(model, env):
    """The Pinocchio comparison's inputs: M⁻¹ set to M(q)⁻¹, where the kernel's outputs are
    Pinocchio's ∂q̈/∂q and ∂q̈/∂v at q̈ = a."""
    q = np.asarray(env["q"])
    return dict(env, Minv=ref.minv(model, q).reshape(q.shape[0], -1))


# ---- with external forces (the *_fext variants: f_ext, (nb, 6), one more input) ----------------

def _rnea_fext(t: Trace, q, v, a, f_ext):
    return {"tau": _rnea_values(t, q, v, a, f_ext=f_ext)[0]}


def _aba_fext(t: Trace, q, v, tau, f_ext):
    return {"qdd": [r[0] for r in _aba_values(t, q, v, [[x] for x in tau], f_ext=f_ext)]}


def _rnea_derivatives_fext(t: Trace, q, v, a, f_ext):
    dq, dv = _rnea_derivative_values(t, q, v, a, f_ext=f_ext)
    return {"dtau_dq": _flat(dq), "dtau_dv": _flat(dv)}


def _aba_derivatives_fext(t: Trace, q, v, tau, f_ext):
    return _aba_derivatives(t, q, v, tau, f_ext)


# ---- mimic joints coupled: the tree's algorithms on expanded inputs, outputs contracted --------
# (c: rbdgen.algorithms.trace.Coupling). Forward dynamics solves M q̈ = τ − nle with the
# contracted M, since the articulated-body recursion has no coupled form.

def _c_rnea(t, c, q, v, a):
    return {"tau": c.tau(_rnea_values(t, c.q(q), c.v(v), c.v(a))[0])}


def _c_nle(t, c, q, v):
    return {"tau": c.tau(_rnea_values(t, c.q(q), c.v(v), t.zeros(t.m.nv))[0])}


def _c_gravity(t, c, q):
    return {"tau": c.tau(_rnea_values(t, c.q(q), t.zeros(t.m.nv), t.zeros(t.m.nv))[0])}


def _c_crba(t, c, q):
    return {"M": _flat(c.mat(_crba_values(t, c.q(q))))}


def _c_qdd(t, c, q, v, tau, f_ext=None):
    qt = c.q(q)
    bias = c.tau(_rnea_values(t, qt, c.v(v), t.zeros(t.m.nv), f_ext=f_ext)[0])
    M = c.mat(_crba_values(t, qt))
    return [r[0] for r in c.solve(M, [[tau[i] - bias[i]] for i in range(c.n)])], M


def _c_aba(t, c, q, v, tau):
    return {"qdd": _c_qdd(t, c, q, v, tau)[0]}


def _identity(t, n):
    return [[t.g.const(1.0 if r == k else 0.0) for k in range(n)] for r in range(n)]


def _c_minv(t, c, q):
    return {"Minv": _flat(c.solve(c.mat(_crba_values(t, c.q(q))), _identity(t, c.n)))}


def _c_rnea_derivatives(t, c, q, v, a):
    dq, dv = _rnea_derivative_values(t, c.q(q), c.v(v), c.v(a))
    return {"dtau_dq": _flat(c.mat(dq)), "dtau_dv": _flat(c.mat(dv))}


def _c_aba_derivatives(t, c, q, v, tau, f_ext=None):
    qdd, M = _c_qdd(t, c, q, v, tau, f_ext)
    dq, dv = _rnea_derivative_values(t, c.q(q), c.v(v), c.v(qdd), f_ext=f_ext)
    Mi = c.solve(M, _identity(t, c.n))
    return {"dqdd_dq": Product("dqdd_dtau", ("dtau_dq", _flat(c.mat(dq))), -1.0),
            "dqdd_dv": Product("dqdd_dtau", ("dtau_dv", _flat(c.mat(dv))), -1.0),
            "dqdd_dtau": _flat(Mi)}


# the f_ext variants (f_ext: the tree's bodies, as the reference's coupled forms take it)

def _c_rnea_fext(t, c, q, v, a, f_ext):
    return {"tau": c.tau(_rnea_values(t, c.q(q), c.v(v), c.v(a), f_ext=f_ext)[0])}


def _c_aba_fext(t, c, q, v, tau, f_ext):
    return {"qdd": _c_qdd(t, c, q, v, tau, f_ext)[0]}


def _c_rnea_derivatives_fext(t, c, q, v, a, f_ext):
    dq, dv = _rnea_derivative_values(t, c.q(q), c.v(v), c.v(a), f_ext=f_ext)
    return {"dtau_dq": _flat(c.mat(dq)), "dtau_dv": _flat(c.mat(dv))}


# ---- Pinocchio's names for the same quantities ------------------------------------------------

def _sym(U):
    """Pinocchio fills only the upper triangle of M and M⁻¹."""
    U = np.array(U, dtype=float)
    return np.triu(U) + np.triu(U, 1).T


def _pin_crba(pin, pm, data, q):
    # Pinocchio 4.1's crba on a model with mimic joints gives another (wrong) M when it reuses a
    # Data that an earlier crba call filled (off by O(1) on a ×2 mimic; zeroing data.M does not
    # help); a fresh Data gives the right one. Seen in tests/test_mimic.py.
    if len(getattr(pm, "mimicking_joints", ())):
        data = pm.createData()
    return (_sym(pin.crba(pm, data, q)),)


def _pin_rnea_derivatives(pin, pm, data, q, v, a):
    dq, dv, _ = pin.computeRNEADerivatives(pm, data, q, v, a)
    return dq.copy(), dv.copy()


def _pin_aba_derivatives(pin, pm, data, q, v, tau):
    ddq, ddv, dtau = pin.computeABADerivatives(pm, data, q, v, tau)
    return ddq.copy(), ddv.copy(), _sym(dtau)


def _pin_fext(pin, pm, f_ext):
    """Our f_ext (flat or (nb, 6): per body [force; torque] in its frame) as Pinocchio's fext: a
    pin.Force per joint in its local frame, the universe's zero (our body i is joint i + 1)."""
    f = np.reshape(np.asarray(f_ext, dtype=float), (-1, 6))
    return [pin.Force.Zero()] + [pin.Force(x[:3].copy(), x[3:].copy()) for x in f]


def _pin_rnea_fext(pin, pm, data, q, v, a, f_ext):
    return (pin.rnea(pm, data, q, v, a, _pin_fext(pin, pm, f_ext)).copy(),)


def _pin_aba_fext(pin, pm, data, q, v, tau, f_ext):
    return (pin.aba(pm, data, q, v, tau, _pin_fext(pin, pm, f_ext)).copy(),)


def _pin_rnea_derivatives_fext(pin, pm, data, q, v, a, f_ext):
    dq, dv, _ = pin.computeRNEADerivatives(pm, data, q, v, a, _pin_fext(pin, pm, f_ext))
    return dq.copy(), dv.copy()


def _pin_aba_derivatives_fext(pin, pm, data, q, v, tau, f_ext):
    ddq, ddv, dtau = pin.computeABADerivatives(pm, data, q, v, tau, _pin_fext(pin, pm, f_ext))
    return ddq.copy(), ddv.copy(), _sym(dtau)


def _bodies(model, f_ext):
    """The flat f_ext input ((6·nb,) or (N, 6·nb), as the registry draws every input) as the
    reference takes it: (nb, 6) or (N, nb, 6)."""
    f = np.asarray(f_ext, dtype=float)
    return f.reshape(f.shape[:-1] + (model.nb, 6))


# ---- declarations ---------------------------------------------------------------------------------
#
# float32_tol: the worst relative error measured with the IR interpreter in float32 over the 21
# robot cases of the test suite (random states), with ~8× margin: 5e-7 for the recursive
# kernels, 1.4e-6 for aba/minv and 1.5e-5 for ∇FD (solo12 floating, cond(M) = 3e4: forward
# dynamics amplifies round-off by the conditioning of M).
# fixed_tol: the HLS C simulation in ap_fixed<W, I> on iiwa14 over 456 random states (seeds 7
# and 31), ~2× margin; re-measured when sin/cos became the hardware's CORDIC (issue 18: about
# half a quantum more per sine than the ideal rounded sin/cos of before, which moved the
# recursions' worst case from 1.8e-4 to 3.7e-4). Q16.16 worst seen: 3.7e-4 recursions (nle),
# 2.2e-4 ∇ID, 8.0e-4 minv, 5.4e-2 ∇FD, 0.136 aba (a small articulated inertia of a wrist joint,
# quantised to 2^-16, is divided by). Q24.24: 6.8e-7 recursions, 1.0e-6 ∇ID, 2.1e-6 minv,
# 1.5e-5 aba, 1.6e-4 ∇FD.

TAU = Arg("tau", ("nv",), "joint torques")
_RECURSION_FIXED = {(32, 16): 8e-4, (48, 24): 1.5e-6}

def _rnea_partials(kern, q, v, a):
    """∂τ/∂q (tangent), ∂τ/∂v and ∂τ/∂a = M from the built ∇ID and CRBA kernels."""
    dq, dv = kern.rnea_derivatives(q, v, a)
    return dq, dv, kern.crba(q)


def _aba_partials(kern, q, v, tau):
    """∂q̈/∂q (tangent), ∂q̈/∂v and ∂q̈/∂τ = M⁻¹ from the built ∇FD kernel."""
    return kern.aba_derivatives(q, v, tau)


declare("rnea", "inverse dynamics τ = M a + C v + g",
        inputs=("q", "v", "a"), outputs=(TAU,), coupled=_c_rnea, algorithm=_rnea, reference=ref.rnea,
        gradient=Gradient(("rnea_derivatives", "crba"), _rnea_partials),
        pinocchio=lambda pin, pm, data, q, v, a: (pin.rnea(pm, data, q, v, a).copy(),),
        float32_tol=4e-6, fixed_tol=_RECURSION_FIXED, gpu_shape="thread",
        pinocchio_cpp=("pinocchio/algorithm/rnea.hpp", "pin::rnea(model, data, q[i], v[i], a[i])"))
declare("nle", "nonlinear effects C v + g",
        inputs=("q", "v"), outputs=(TAU,), coupled=_c_nle, algorithm=_nle, reference=ref.nle,
        pinocchio=lambda pin, pm, data, q, v: (pin.nonLinearEffects(pm, data, q, v).copy(),),
        float32_tol=4e-6, fixed_tol=_RECURSION_FIXED, gpu_shape="thread",
        pinocchio_cpp=("pinocchio/algorithm/rnea.hpp", "pin::nonLinearEffects(model, data, q[i], v[i])"))
declare("gravity", "generalised gravity g(q)",
        inputs=("q",), outputs=(TAU,), coupled=_c_gravity, algorithm=_gravity, reference=ref.gravity,
        pinocchio=lambda pin, pm, data, q: (pin.computeGeneralizedGravity(pm, data, q).copy(),),
        float32_tol=4e-6, fixed_tol=_RECURSION_FIXED, gpu_shape="thread",
        pinocchio_cpp=("pinocchio/algorithm/rnea.hpp", "pin::computeGeneralizedGravity(model, data, q[i])"))
declare("crba", "joint-space inertia matrix M(q), full (row-major, symmetric)",
        inputs=("q",), outputs=(Arg("M", ("nv", "nv"), "joint-space inertia matrix"),),
        coupled=_c_crba, algorithm=_crba, reference=ref.crba,
        pinocchio=_pin_crba,
        pinocchio_note="Pinocchio fills the upper triangle; compared after mirroring it",
        float32_tol=4e-6, fixed_tol=_RECURSION_FIXED, gpu_shape="thread",
        pinocchio_cpp=("pinocchio/algorithm/crba.hpp", "pin::crba(model, data, q[i])"))
declare("aba", "forward dynamics q̈ (articulated-body algorithm)",
        inputs=("q", "v", "tau"), outputs=(Arg("qdd", ("nv",), "joint accelerations"),),
        coupled=_c_aba, algorithm=_aba, reference=ref.aba,
        gradient=Gradient(("aba_derivatives",), _aba_partials),
        pinocchio=lambda pin, pm, data, q, v, tau: (pin.aba(pm, data, q, v, tau).copy(),),
        float32_tol=2e-5, fixed_tol={(32, 16): 0.3, (48, 24): 4e-5}, gpu_shape="thread",
        needs_minv=True,
        pinocchio_cpp=("pinocchio/algorithm/aba.hpp", "pin::aba(model, data, q[i], v[i], tau[i])"))
declare("minv", "M(q)⁻¹ directly (M's sparse LTDL factorisation; on long chains articulated-body recursions on the identity)",
        inputs=("q",), outputs=(Arg("Minv", ("nv", "nv"), "inverse of the joint-space inertia matrix"),),
        coupled=_c_minv, algorithm=_minv, reference=ref.minv,
        pinocchio=lambda pin, pm, data, q: (_sym(pin.computeMinverse(pm, data, q)),),
        pinocchio_note="Pinocchio fills the upper triangle; compared after mirroring it",
        float32_tol=2e-5, fixed_tol={(32, 16): 2e-3, (48, 24): 5e-6}, gpu_shape="block",
        needs_minv=True,
        pinocchio_cpp=("pinocchio/algorithm/aba.hpp", "pin::computeMinverse(model, data, q[i])"))
declare("rnea_derivatives", "∂τ/∂q and ∂τ/∂v of inverse dynamics (∂τ/∂a = M)",
        inputs=("q", "v", "a"),
        outputs=(Arg("dtau_dq", ("nv", "nv")), Arg("dtau_dv", ("nv", "nv"))),
        coupled=_c_rnea_derivatives, algorithm=_rnea_derivatives, reference=ref.rnea_derivatives, pinocchio=_pin_rnea_derivatives,
        float32_tol=4e-6, fixed_tol={(32, 16): 6e-4, (48, 24): 2e-6}, gpu_shape="block",
        pinocchio_cpp=("pinocchio/algorithm/rnea-derivatives.hpp", "pin::computeRNEADerivatives(model, data, q[i], v[i], a[i])"))
declare("aba_derivatives", "∂q̈/∂q, ∂q̈/∂v and ∂q̈/∂τ = M⁻¹ of forward dynamics (−M⁻¹ ∂τ/∂u at q̈)",
        inputs=("q", "v", "tau"),
        outputs=(Arg("dqdd_dq", ("nv", "nv")), Arg("dqdd_dv", ("nv", "nv")), Arg("dqdd_dtau", ("nv", "nv"))),
        coupled=_c_aba_derivatives, algorithm=_aba_derivatives, reference=ref.aba_derivatives, pinocchio=_pin_aba_derivatives,
        float32_tol=1.2e-4, fixed_tol={(32, 16): 0.12, (48, 24): 4e-4}, gpu_shape="block",
        needs_minv=True,
        pinocchio_cpp=("pinocchio/algorithm/aba-derivatives.hpp", "pin::computeABADerivatives(model, data, q[i], v[i], tau[i])"))

# ---- with external forces: f_ext (nb, 6), per body [force; torque] in its frame (the reference's
# and Pinocchio's fext, our body i being Pinocchio's joint i + 1). Variants of the kernels above
# (variant_of): built only when named, so builds without them keep their size and speed, and
# kern.rnea(q, v, a, f_ext=…) calls rnea_fext where it was built. The bounds are their base
# kernels', which the measurements keep: float32 (IR interpreter, every robot case of the suite,
# f_ext as the registry draws it) worst rnea_fext 3.4e-7, aba_fext 5.8e-7, rnea_derivatives_fext
# 3.3e-7, aba_derivatives_fext 3.7e-5 (icub floating); HLS C simulation on iiwa14 (128 states,
# seeds 7 and 31) Q16.16 2.4e-5, 7.7e-4, 8.1e-5, 1.0e-2 and Q24.24 7.9e-8, 1.4e-6, 2.9e-7, 3.3e-5,
# at most 1.3× its base kernel's on the same states. Pinocchio's C++ calls take an fext
# the benchmark's table does not draw: no C++ peer.

declare("rnea_fext", "inverse dynamics with external forces τ = M a + C v + g − Σ Jᵢᵀ f_ext,i",
        inputs=("q", "v", "a", "f_ext"), outputs=(TAU,), variant_of=("rnea", "f_ext"),
        algorithm=_rnea_fext, coupled=_c_rnea_fext,
        reference=lambda model, q, v, a, f_ext: ref.rnea(model, q, v, a, f_ext=_bodies(model, f_ext)),
        pinocchio=_pin_rnea_fext, pinocchio_note="Pinocchio's rnea(…, fext), fext[i + 1] = body i's force",
        float32_tol=4e-6, fixed_tol=_RECURSION_FIXED, gpu_shape="thread")
declare("aba_fext", "forward dynamics with external forces q̈ = M⁻¹ (τ − C v − g + Σ Jᵢᵀ f_ext,i)",
        inputs=("q", "v", "tau", "f_ext"), outputs=(Arg("qdd", ("nv",), "joint accelerations"),),
        variant_of=("aba", "f_ext"), algorithm=_aba_fext, coupled=_c_aba_fext,
        reference=lambda model, q, v, tau, f_ext: ref.aba(model, q, v, tau, f_ext=_bodies(model, f_ext)),
        pinocchio=_pin_aba_fext, pinocchio_note="Pinocchio's aba(…, fext), fext[i + 1] = body i's force",
        float32_tol=2e-5, fixed_tol={(32, 16): 0.3, (48, 24): 4e-5}, gpu_shape="thread", needs_minv=True)
declare("rnea_derivatives_fext", "∂τ/∂q and ∂τ/∂v of inverse dynamics with external forces (fixed in the bodies' frames)",
        inputs=("q", "v", "a", "f_ext"),
        outputs=(Arg("dtau_dq", ("nv", "nv")), Arg("dtau_dv", ("nv", "nv"))),
        variant_of=("rnea_derivatives", "f_ext"), algorithm=_rnea_derivatives_fext, coupled=_c_rnea_derivatives_fext,
        reference=lambda model, q, v, a, f_ext: ref.rnea_derivatives(model, q, v, a, f_ext=_bodies(model, f_ext)),
        pinocchio=_pin_rnea_derivatives_fext, pinocchio_note="Pinocchio's computeRNEADerivatives(…, fext)",
        float32_tol=4e-6, fixed_tol={(32, 16): 6e-4, (48, 24): 2e-6}, gpu_shape="block")
declare("aba_derivatives_fext", "∂q̈/∂q, ∂q̈/∂v and ∂q̈/∂τ = M⁻¹ of forward dynamics with external forces "
        "(fixed in the bodies' frames)",
        inputs=("q", "v", "tau", "f_ext"),
        outputs=(Arg("dqdd_dq", ("nv", "nv")), Arg("dqdd_dv", ("nv", "nv")), Arg("dqdd_dtau", ("nv", "nv"))),
        variant_of=("aba_derivatives", "f_ext"), algorithm=_aba_derivatives_fext,
        coupled=lambda t, c, q, v, tau, f_ext: _c_aba_derivatives(t, c, q, v, tau, f_ext),
        reference=lambda model, q, v, tau, f_ext: ref.aba_derivatives(model, q, v, tau, f_ext=_bodies(model, f_ext)),
        pinocchio=_pin_aba_derivatives_fext, pinocchio_note="Pinocchio's computeABADerivatives(…, fext)",
        float32_tol=1.2e-4, fixed_tol={(32, 16): 0.12, (48, 24): 4e-4}, gpu_shape="block", needs_minv=True)

# ---- seed 001's Algorithm 3: the gradient with M⁻¹ given (built only when named) -------------------
# Bounds measured: float32 (IR interpreter, every uncoupled robot case of the suite, 64 states,
# M⁻¹ as the registry draws it) worst 9.3e-7 (tiago); the HLS C simulation on iiwa14 (128 states,
# seeds 7 and 31), against the reference / against Pinocchio with M⁻¹ = M(q)⁻¹ (entries to ~10²):
# Q16.16 5.0e-5 / 4.7e-2, Q24.24 3.6e-7 / 2.1e-4 — aba_derivatives' bounds hold them.

declare("fd_derivatives_minv", "∂q̈/∂q and ∂q̈/∂v of forward dynamics at (q, v, q̈) with M(q)⁻¹ given: "
        "−M⁻¹ ∂τ/∂u at q̈ (seed 001's Algorithm 3, M⁻¹ cached)",
        inputs=("q", "v", "a", "Minv"),
        outputs=(Arg("dqdd_dq", ("nv", "nv")), Arg("dqdd_dv", ("nv", "nv"))),
        algorithm=_fd_derivatives_minv, reference=_ref_fd_derivatives_minv,
        pinocchio=_pin_fd_derivatives_minv, pinocchio_env=_minv_env,
        pinocchio_note="with M⁻¹ = M(q)⁻¹: Pinocchio's computeABADerivatives at τ = rnea(q, v, a)",
        float32_tol=5e-6, fixed_tol={(32, 16): 0.12, (48, 24): 4e-4}, gpu_shape="block", opt_in=True)
