"""Fijany's Schur-complement forward dynamics, M⁻¹ and Λ⁻¹ in log depth, traced and declared
(issue 41; seed 002: Fijany, §IV–§VI).

The mathematics is in :mod:`rbdgen.reference.schur` (read its docstring first); the reference
builds the paper's global operators densely, this module the per-body formulas the paper
derives from them, each in the body's own frame as §V.A advises (a joint's W_i is then a
selection of five of six rows for an axis along x, y or z, and the graph prunes the rest):

* 𝒜's blocks (Eqs. (73)–(75), (80)) with ᵖI⁻¹ carried into body i's frame, X_i I_p⁻¹ X_iᵀ:
  A_i = W_iᵀ (I_i⁻¹ + X_i I_p⁻¹ X_iᵀ) W_i and B_i = −W_iᵀ I_i⁻¹ X_{i+1}ᵀ W_{i+1}, each a few
  products of one body and its neighbour — no recursion, depth O(1). I_i⁻¹ is a constant
  (Eq. (76), :func:`rbdgen.spatial.inertia_inverse`).
* 𝒜 solved by odd–even elimination (§VI.B, Eqs. (90)–(93), with the strides 2^(j−1) of
  §VI.D): ⌈log₂ N⌉ levels, each an LDLᵀ of every block (the paper's advice: factor rather than
  invert) and the products of every block row with its two neighbours, all side by side.
* M⁻¹ f as the operator of Eqs. (72)/(81): 𝒫ℋf, 𝒥⁻¹, 𝒲ᵀ𝒫ᵀ, the solve, 𝒥⁻¹𝒫𝒲λ, ℋᵀ𝒫ᵀ — each
  a product with a block-diagonal or block-bidiagonal operator, depth O(1).
* ``fd_schur``: Table I's open chain, Step I the bias b = RNEA(q, q̇, 0) by the Newton–Euler
  prefix scan of ``rnea_scan`` (log depth, seed 000's forward scan), Step II q̈ = M⁻¹(τ − b).
* ``minv_schur``: the operator on the identity's columns; ``osim_inverse_schur``: Λ⁻¹ = β𝒦βᵀ
  (Eqs. (66), (82)–(85), for frames on any body: the right-hand sides ℰ X_gᵀ of Eq. (84) are
  nonzero in two block rows).

So every pass is O(1) or O(log N) deep: the critical path grows like log N where aba's grows like
N (docs/fijany.md measures it). Serially it is worse than ABA — N log N block operations, and the
constraint forces it computes are what the articulated-body recursion avoids (§V.D: "less
efficient (by a factor of ≈ 3.4 for large N)" for the LDLᵀ solve; odd–even elimination costs
more) — and numerically it subtracts ℬᵀ𝒜⁻¹ℬf from 𝒞f, which are |𝒞f|/|q̈| times bigger than
the result (6·10⁵ on a 256-link chain): docs/fijany.md states the accuracy measured.

These kernels are built only when named (``opt_in``), and refuse what the factorization does not
cover (:func:`rbdgen.reference.schur.check_chain`: trees, mimic coupling, armature, massless
links) with one line naming the link.
"""
from __future__ import annotations

import numpy as np

from ..reference import schur as ref
from ..registry import Arg, declare, get as _declared
from ..spatial import complement, inertia_inverse
from . import spatial as S
from .contact import _X_cols, _frame_X, _frames, put_block
from .constrained import _parts, _ref_pivots
from .scan import METHOD, _forward_scan, _rnea_scan_values
from .trace import Trace


def _xmxt(g, X, M):
    """X M Xᵀ for a symmetric 6×6 M: an inverse inertia carried from the parent's frame into the
    child's (the motion transform on both sides)."""
    return _X_cols(g, X, S.transpose(_X_cols(g, X, M)))


def _sym_mm(g, P, Q):
    """P Q for a product known to be symmetric: its upper triangle computed and mirrored."""
    n = len(P)
    out = [[None] * n for _ in range(n)]
    for r in range(n):
        for c in range(r, n):
            out[r][c] = out[c][r] = S.dot(g, P[r], [Q[k][c] for k in range(len(Q))])
    return out


def _WT(g, W, D):
    """Wᵀ D for D given as 6 rows."""
    return S.mat_mat(g, S.transpose(W), D)


class _Chain:
    """One serial chain's per-body pieces of the factorization at q (body i's parent is i − 1)."""

    def __init__(self, t: Trace, q, kernel: str):
        m, g = t.m, t.g
        ref.check_chain(m, kernel)
        self.t, self.g, self.n = t, g, m.nb
        self.X = [t.X(i, q) for i in range(m.nb)]
        self.Iinv = [t.consts(inertia_inverse(m.inertia[i])) for i in range(m.nb)]
        self.Wn = [complement(m.motion_subspace(i)) for i in range(m.nb)]
        self.W = [t.consts(w) for w in self.Wn]
        self.w = [w.shape[1] for w in self.Wn]
        #: the bodies whose joint holds something (a free-flyer's W is empty): 𝒜's block rows
        self.nodes = [i for i in range(m.nb) if self.w[i]]
        self._factor()

    def WT(self, i, x):
        """W_iᵀ x for a 6-vector x."""
        return S.matT_vec(self.g, self.W[i], x)

    def _factor(self):
        t, g, n = self.t, self.g, self.n
        A, B = {}, {}
        for i in self.nodes:
            t.block("𝒜's diagonal block A_i = W_iᵀ(I_i⁻¹ + X_i I_p⁻¹ X_iᵀ)W_i (Eqs. 73, 75)", i)
            M = self.Iinv[i]
            if i > 0:
                M = S.madd(M, _xmxt(g, self.X[i], self.Iinv[i - 1]))
            A[i] = _sym_mm(g, S.transpose(self.W[i]), S.mat_mat(g, M, self.W[i]))
            if i + 1 < n and self.w[i + 1]:
                t.block("𝒜's coupling block B_i = −W_iᵀ I_i⁻¹ X_{i+1}ᵀ W_{i+1} (Eqs. 74, 80)", i)
                cols = [S.vscale(-1.0, self.WT(i, S.mat_vec(g, self.Iinv[i], self.X[i + 1].force_T(g, c))))
                        for c in S.transpose(self.W[i + 1])]
                B[i] = S.transpose(cols)
        # odd–even elimination (Eqs. 90–91): the matrix part, kept for every right-hand side
        nodes = self.nodes
        k = len(nodes)
        Ad = [A[i] for i in nodes]
        Bu = [B.get(nodes[j]) if j + 1 < k and nodes[j + 1] == nodes[j] + 1 else None for j in range(k)]
        self.levels = []
        s, level = 1, 1
        while s < k:
            fac = []
            for j in range(k):
                t.block(f"block cyclic reduction, level {level}: LDLᵀ of A_i", nodes[j])
                L, _, Dinv = S.ldlt(g, Ad[j])
                fac.append((L, Dinv))
            # C_j = A_j⁻¹ B_j (to the neighbour below), F_j = A_j⁻¹ B_{j−s}ᵀ (to the one above)
            Cm, Fm = [None] * k, [None] * k
            for j in range(k):
                t.block(f"block cyclic reduction, level {level}: A_i⁻¹ B (Eqs. 90–91)", nodes[j])
                if Bu[j] is not None and j + s < k:
                    Cm[j] = S.ldlt_substitute(*fac[j], Bu[j])
                if j - s >= 0 and Bu[j - s] is not None:
                    Fm[j] = S.ldlt_substitute(*fac[j], S.transpose(Bu[j - s]))
            nA, nB = [], []
            for j in range(k):
                t.block(f"block cyclic reduction, level {level}: A_i, B_i updated (Eqs. 90–91)", nodes[j])
                a = Ad[j]
                if j + s < k and Bu[j] is not None:
                    a = S.msub(a, _sym_mm(g, Bu[j], Fm[j + s]))          # B_j A_{j+s}⁻¹ B_jᵀ
                if j - s >= 0 and Bu[j - s] is not None:
                    a = S.msub(a, _sym_mm(g, S.transpose(Bu[j - s]), Cm[j - s]))  # B_{j−s}ᵀ A_{j−s}⁻¹ B_{j−s}
                nA.append(a)
                nB.append(S.mscale(-1.0, S.mat_mat(g, Bu[j], Cm[j + s]))
                          if j + 2 * s < k and Bu[j] is not None and Cm[j + s] is not None else None)
            self.levels.append((s, level, Bu, Cm, Fm))
            Ad, Bu, s, level = nA, nB, 2 * s, level + 1
        self.final = []
        for j in range(k):
            t.block("block cyclic reduction: LDLᵀ of the diagonalised A_i (Eq. 93)", nodes[j])
            L, _, Dinv = S.ldlt(g, Ad[j])
            self.final.append((L, Dinv))

    def solve(self, rhs):
        """𝒜⁻¹ ψ for ψ given per body of :attr:`nodes` as w_i × r rows (Eqs. 92–93)."""
        t, g, nodes = self.t, self.g, self.nodes
        k = len(nodes)
        psi = [rhs[i] for i in nodes]
        for s, level, Bu, Cm, Fm in self.levels:
            new = []
            for j in range(k):
                t.block(f"block cyclic reduction, level {level}: right-hand side (Eq. 92)", nodes[j])
                y = psi[j]
                if j + s < k and Bu[j] is not None:   # − B_j A_{j+s}⁻¹ ψ_{j+s} = − F_{j+s}ᵀ ψ_{j+s}
                    y = S.msub(y, S.mat_mat(g, S.transpose(Fm[j + s]), psi[j + s]))
                if j - s >= 0 and Bu[j - s] is not None:  # − B_{j−s}ᵀ A_{j−s}⁻¹ ψ_{j−s} = − C_{j−s}ᵀ ψ_{j−s}
                    y = S.msub(y, S.mat_mat(g, S.transpose(Cm[j - s]), psi[j - s]))
                new.append(y)
            psi = new
        out = {}
        for j in range(k):
            t.block("block cyclic reduction: the block rows solved (Eq. 93)", nodes[j])
            out[nodes[j]] = S.ldlt_substitute(*self.final[j], psi[j])
        return out

    def osim(self, frames):
        """Λ⁻¹ = β𝒦βᵀ of ``frames`` (Eqs. (66), (82)–(85)): 6·len(frames) rows of Values, each
        frame's rows and columns [linear; angular] (as osim_inverse)."""
        chain, t, g = self, self.t, self.g
        nf = len(frames)
        # the right-hand sides of Eq. (84) for every frame g on body b: ℰ_{·,b} X_gᵀ, with
        # ℰ = 𝒲ᵀ𝒫ᵀ𝒥⁻¹ nonzero in block rows b (W_bᵀ I_b⁻¹) and b + 1 (−W_{b+1}ᵀ X_{b+1} I_b⁻¹)
        G, col = {}, {}
        rhs = {i: [[] for _ in range(chain.w[i])] for i in chain.nodes}
        for k, f in enumerate(frames):
            if f.body < 0:
                continue
            b = f.body
            t.frame_block("Λ⁻¹: right-hand sides ℰ X_fᵀ (Eqs. 83–84)", f)
            G[k] = S.transpose(_X_cols(g, _frame_X(t, f), chain.Iinv[b]))   # I_b⁻¹ X_fᵀ, 6 × 6
            col[k] = slice(6 * len(col), 6 * len(col) + 6)
            for i, blk in ((b, G[k]), (b + 1, None)):
                if i not in rhs:
                    continue
                if blk is None:
                    blk = S.mscale(-1.0, _X_cols(g, chain.X[b + 1], G[k]))
                part = _WT(g, chain.W[i], blk)
                for r in range(chain.w[i]):
                    rhs[i][r] += part[r]
            for i in rhs:
                if i not in (b, b + 1):
                    for r in range(chain.w[i]):
                        rhs[i][r] += [g.const(0.0)] * 6
        Om = chain.solve(rhs) if chain.nodes and G else {}
        L = [[g.const(0.0)] * (6 * nf) for _ in range(6 * nf)]
        for a, fa in enumerate(frames):
            if a not in G:
                continue
            ba = fa.body
            Xa = _frame_X(t, fa)
            for c, fc in enumerate(frames[a:], start=a):
                if c not in G:
                    continue
                t.frame_block("Λ⁻¹ = X_a (δ I⁻¹ − ℰᵀ𝒜⁻¹ℰ) X_bᵀ (Eqs. 82, 85)", fa, fc)
                cols = col[c]
                # ℰ_{·,ba}ᵀ Ω for the columns of frame c: I⁻¹ (W_b Ω_b − X_{b+1}ᵀ W_{b+1} Ω_{b+1})
                acc = None
                if ba in Om:
                    acc = S.mat_mat(g, chain.W[ba], [row[cols] for row in Om[ba]])
                if ba + 1 in Om:
                    low = S.mat_mat(g, chain.W[ba + 1], [row[cols] for row in Om[ba + 1]])
                    low = S.transpose([chain.X[ba + 1].force_T(g, cc) for cc in S.transpose(low)])
                    acc = S.mscale(-1.0, low) if acc is None else S.msub(acc, low)
                K = S.mscale(-1.0, S.mat_mat(g, chain.Iinv[ba], acc)) if acc is not None else None
                if fc.body == ba:
                    K = G[c] if K is None else S.madd(K, G[c])
                if K is None:
                    continue
                put_block(L, a, c, _X_cols(g, Xa, K))
        return L

    # ---- M⁻¹ applied (Eqs. 72, 81) ---------------------------------------------------------
    def minv_apply(self, F, ext=None):
        """M⁻¹ F for F given per body as nv_i × r rows (joint forces, r right-hand sides):
        the columns of q̈ per body, nv_i × r rows. ``ext``: spatial forces on the bodies as well
        (per body [n; f] as 6 × r rows, or None), which enter 𝒥V̇ = 𝒫F + F_ext beside 𝒫ℋF:
        M⁻¹ Jᵀ w without forming J (Table I, Step V)."""
        t, g, n = self.t, self.g, self.n
        f = []
        for i in range(n):
            t.block("ℋF: joint forces as spatial forces", i)
            f.append(S.mat_mat(g, t.Smat(i), F[i]))          # 6 × r
        y = []
        for i in range(n):
            t.block("𝒥⁻¹𝒫ℋF: each body's acceleration under its joint forces alone", i)
            x = f[i]
            if i + 1 < n:
                x = S.msub(x, S.transpose([self.X[i + 1].force_T(g, c) for c in S.transpose(f[i + 1])]))
            if ext is not None and ext[i] is not None:
                x = S.madd(x, ext[i])
            y.append(S.mat_mat(g, self.Iinv[i], x))
        rhs = {}
        for i in self.nodes:
            t.block("𝒲ᵀ𝒫ᵀ𝒥⁻¹𝒫ℋF: what the joint must hold (Eq. 81's right-hand side)", i)
            d = y[i] if i == 0 else S.msub(y[i], S.transpose([self.X[i].motion(g, c) for c in S.transpose(y[i - 1])]))
            rhs[i] = _WT(g, self.W[i], d)
        lam = self.solve(rhs)
        z = []
        for i in range(n):
            t.block("𝒥⁻¹𝒫𝒲λ: the constraint forces' accelerations, subtracted", i)
            x = S.mat_mat(g, self.W[i], lam[i]) if i in lam else None
            if i + 1 < n and i + 1 in lam:
                c = S.transpose([self.X[i + 1].force_T(g, col) for col in S.transpose(S.mat_mat(g, self.W[i + 1], lam[i + 1]))])
                x = S.mscale(-1.0, c) if x is None else S.msub(x, c)
            z.append(y[i] if x is None else S.msub(y[i], S.mat_mat(g, self.Iinv[i], x)))
        out = []
        for i in range(n):
            t.block("ℋᵀ𝒫ᵀ: joint accelerations from the body accelerations", i)
            d = z[i] if i == 0 else S.msub(z[i], S.transpose([self.X[i].motion(g, c) for c in S.transpose(z[i - 1])]))
            out.append(S.mat_mat(g, S.transpose(t.Smat(i)), d))
        return out


#: steps of iterative refinement after Table I's Step II — ours, not seed 002's: q̈ += M⁻¹(τ − RNEA(q, q̇, q̈)),
#: the residual by the Newton–Euler scan and M⁻¹ by Eq. (72) on the factorization already made. Eq. (72)
#: subtracts terms |𝒞f|/|q̈| times bigger than q̈ (6·10⁵ on a 256-link chain: errors of 8·10⁻⁹ |q̈|); the
#: residual is small, so one step takes the error to ABA's (3.7·10⁻¹³ there), for O(log N) more depth
#: (docs/fijany.md: what it costs). 0: the paper's procedure alone (:func:`traced`).
REFINE = 1


def _qdd_open_chain(t: Trace, chain: "_Chain", q, v, tau, refine: int):
    """Table I's Steps I–II (and ``refine`` steps of refinement): q̈ = M⁻¹(τ − b)."""
    m = t.m
    bias = _rnea_scan_values(t, q, v, t.zeros(m.nv))  # Table I, Step I: Newton–Euler, q̈ = 0
    F = []
    for i in range(m.nb):
        t.block("F_T = τ − b", i)
        F.append([[tau[k] - bias[k]] for k in range(m.v_start[i], m.v_start[i] + m.nv_joint(i))])
    qdd = [row[0] for rows in chain.minv_apply(F) for row in rows]  # Step II: Eq. (72)
    for _ in range(refine):
        res = _rnea_scan_values(t, q, v, qdd)  # the residual's torques, log depth
        F = []
        for i in range(m.nb):
            t.block("iterative refinement: r = τ − RNEA(q, q̇, q̈) (not in seed 002)", i)
            F.append([[tau[k] - res[k]] for k in range(m.v_start[i], m.v_start[i] + m.nv_joint(i))])
        corr = [row[0] for rows in chain.minv_apply(F) for row in rows]
        t.block("iterative refinement: q̈ + M⁻¹ r")
        qdd = [a + b for a, b in zip(qdd, corr)]
    return qdd


def _fd_schur(t: Trace, q, v, tau, refine: int = REFINE):
    chain = _Chain(t, q, "fd_schur")
    return {"qdd": _qdd_open_chain(t, chain, q, v, tau, refine)}


def traced(model, refine: int = REFINE, fold: bool = True):
    """fd_schur's kernel IR with ``refine`` steps of refinement (0: Table I alone), for the depth
    and op-count studies (benchmarks/scan.py)."""
    from ..ir.graph import Array

    t = Trace(model, fold)
    q, v, tau = (t.inputs(n, model.nq if n == "q" else model.nv) for n in ("q", "v", "tau"))
    qdd = _fd_schur(t, q, v, tau, refine)["qdd"]
    arrs = [Array(n, (model.nq if n == "q" else model.nv,)) for n in ("q", "v", "tau")]
    return t.kernel(f"fd_schur_refine{refine}", arrs, [(Array("qdd", (model.nv,)), qdd)], f"fd_schur ({refine} refinements)")


def _minv_schur(t: Trace, q):
    m, g = t.m, t.g
    chain = _Chain(t, q, "minv_schur")
    F = [[[g.const(1.0 if m.v_start[i] + r == c else 0.0) for c in range(m.nv)] for r in range(m.nv_joint(i))]
         for i in range(m.nb)]
    cols = [row for rows in chain.minv_apply(F) for row in rows]  # row r of M⁻¹
    return {"Minv": [cols[r][c] if r <= c else cols[c][r] for r in range(m.nv) for c in range(m.nv)]}


def _osim_inverse_schur(t: Trace, q):
    chain = _Chain(t, q, "osim_inverse_schur")
    return {"Linv": [x for row in chain.osim(_frames(t)) for x in row]}


def _per_body(t, values):
    """A flat nv list as per-body nv_i × 1 rows."""
    m = t.m
    return [[[values[k]] for k in range(m.v_start[i], m.v_start[i] + m.nv_joint(i))] for i in range(m.nb)]


def _open_chain_terms(t: Trace, q, v, tau) -> dict:
    """Table I's Steps I–III on a chain, each piece O(1) or O(log N) deep, for
    :func:`rbdgen.algorithms.constrained._parts`: q̈₀ by Eq. (72) after the Newton–Euler scan;
    the frames' LOCAL velocities and open-chain accelerations V̇₀ = J q̈₀ + J̇q̇ from the forward
    scan run with q̈₀ and no gravity (Eq. (86) as a prefix scan: no Jacobian formed); Λ⁻¹ by
    Eq. (66); the bodies' placements for loops from the same scan; and M⁻¹ of the constraint
    wrenches on the bodies (Step V: 𝒥V̇ = 𝒫F + F_ext, Eqs. (87)–(88) never formed)."""
    m, g = t.m, t.g
    chain = _Chain(t, q, "constrained_fd_schur")
    qdd0 = _qdd_open_chain(t, chain, q, v, tau, REFINE)
    fwd = _forward_scan(t, q, v, qdd0, METHOD, t.zeros(6))   # (ⁱX₀, v_i, J q̈₀ + J̇q̇ at body i)
    frames = _frames(t)
    vel, acc0 = [], []
    for f in frames:
        if f.body < 0:
            vel.append(t.zeros(6))
            acc0.append(t.zeros(6))
            continue
        t.frame_block("frame velocity and open-chain acceleration (LOCAL)", f)
        Xf = _frame_X(t, f)
        x, a = Xf.motion(g, fwd[f.body][1]), Xf.motion(g, fwd[f.body][2])
        vel.append(x[3:] + x[:3])
        acc0.append(a[3:] + a[:3])
    poses = ([S.transpose(X0.E) for X0, _, _ in fwd], [list(X0.r) for X0, _, _ in fwd])
    zero = g.const(0.0)

    def minv_ext(fext):
        """M⁻¹ of the body forces ``fext`` ([force; torque] per body, on the bodies)."""
        ext = [[[x] for x in fext[6 * b + 3 : 6 * b + 6] + fext[6 * b : 6 * b + 3]] for b in range(m.nb)]
        ext = [None if all(x[0].is_zero() for x in e) else e for e in ext]
        rows = chain.minv_apply(_per_body(t, [zero] * m.nv), ext)
        return [row[0] for r in rows for row in r]

    return {"qdd0": qdd0, "vel": vel, "acc0": acc0, "Linv": chain.osim(frames), "poses": poses, "minv_ext": minv_ext}


def _constrained_fd_schur(t: Trace, q, v, tau):
    p = _parts(t, q, v, tau, schur=_open_chain_terms)
    return {"qdd": p["qdd"], "forces": p["forces"], "pivots": p["pivots"]}


def _ref_constrained_fd_schur(model, q, v, tau):
    qdd, F = ref.contact_fd_schur(model, q, v, tau, list(model.constraints))
    return qdd, F, _ref_pivots(model, q)


# ---- declarations ------------------------------------------------------------------------------
#
# Built only when named (opt_in): a study of parallel depth (docs/fijany.md), slower than aba on
# a CPU and less accurate on long chains. Pinocchio's counterparts are aba's, minv's and
# osim_inverse's own: the same quantities.
#
# float32_tol: the IR interpreter in float32 on the five serial-chain robot cases of the test suite
# (ur5, ur10, kinova, double pendulum, iiwa14; 64 random states each, seed 5): worst fd_schur
# 9.3e-7 with its refinement step (5.2e-6 without; aba 4.6e-7 on the same states), minv_schur
# 5.4e-6 (minv 3.2e-7), osim_inverse_schur 9.6e-7 (osim_inverse 5.3e-7), all on the kinova: the
# subtraction of Eq. (61)/(72) loses what |𝒞f| / |q̈| says. Declared with aba's kind of margin.
# fixed_tol: HLS C simulation of iiwa14 (flange frame), 456 random states (seed 7): fd_schur worst
# 0.012 in Q16.16 and 1.9e-5 in Q24.24 with the refinement (0.020 and 1.8e-4 without; aba 0.0065
# and 1.3e-5 on the same states), minv_schur 1.3e-3 and 5.3e-6, osim_inverse_schur 0.015 and
# 6.1e-5: declared at about twice that.

_ABA, _MINV, _OSIM, _CFD = _declared("aba"), _declared("minv"), _declared("osim_inverse"), _declared("constrained_fd")


def _check(model, kernel):
    ref.check_chain(model, kernel)


declare("fd_schur", "forward dynamics q̈ (as aba) by Fijany's Schur-complement factorization of M⁻¹, 𝒜 by block "
        "cyclic reduction: every pass O(1) or O(log N) deep (serial chains)",
        inputs=("q", "v", "tau"), outputs=(Arg("qdd", ("nv",), "joint accelerations"),),
        algorithm=_fd_schur, reference=ref.fd_schur, pinocchio=_ABA.pinocchio, pinocchio_cpp=_ABA.pinocchio_cpp,
        pinocchio_note="the same quantity as aba: Pinocchio's aba",
        float32_tol=4e-6, fixed_tol={(32, 16): 0.03, (48, 24): 4e-5}, gpu_shape="block", opt_in=True, check=_check)
declare("minv_schur", "M(q)⁻¹ (as minv) by Fijany's Schur-complement factorization, Eq. (61), 𝒜 by block cyclic "
        "reduction (serial chains)",
        inputs=("q",), outputs=(Arg("Minv", ("nv", "nv"), "inverse joint-space inertia"),),
        algorithm=_minv_schur, reference=ref.minv_schur, pinocchio=_MINV.pinocchio, pinocchio_cpp=_MINV.pinocchio_cpp,
        pinocchio_note="the same quantity as minv: Pinocchio's computeMinverse",
        float32_tol=3e-5, fixed_tol={(32, 16): 3e-3, (48, 24): 1.2e-5}, gpu_shape="block", opt_in=True, check=_check)
declare("osim_inverse_schur", "Λ⁻¹ = J M⁻¹ Jᵀ of the selected frames (as osim_inverse) by Fijany's factorization, "
        "Eq. (66), 𝒜 by block cyclic reduction (serial chains)",
        inputs=("q",), outputs=_OSIM.outputs,
        algorithm=_osim_inverse_schur,
        reference=lambda model, q: ref.osim_inverse_schur(model, q).reshape(np.shape(q)[:-1] + (model.nf, 6, model.nf, 6)),
        pinocchio=_OSIM.pinocchio, pinocchio_cpp=_OSIM.pinocchio_cpp, pinocchio_note=_OSIM.pinocchio_note,
        float32_tol=1e-5, fixed_tol={(32, 16): 0.03, (48, 24): 1.5e-4}, gpu_shape="block", frames=True, opt_in=True,
        check=_check)
declare("constrained_fd_schur", "constrained_fd by Table I of seed 002 with the Schur-complement factorization: "
        "q̈₀, Λ⁻¹ and M⁻¹ J_cᵀ F by Eqs. (66), (72), 𝒜 by block cyclic reduction, every pass O(1) or O(log N) "
        "deep (serial chains)",
        inputs=("q", "v", "tau"), outputs=_CFD.outputs,
        algorithm=_constrained_fd_schur, reference=_ref_constrained_fd_schur,
        pinocchio=_CFD.pinocchio, pinocchio_cpp=_CFD.pinocchio_cpp, pinocchio_note=_CFD.pinocchio_note,
        # measured on the iiwa (300 states, seed 3, those the loaded method accepts: pivots ≥ 1e-5):
        # float32 worst 3.7e-3 with the flange welded 6d (constrained_fd 3.2e-4 on the same states),
        # 6.4e-5 with a 3d contact, 7.2e-5 with a 3d loop to link 3 (q̈₀ refined once). Fixed point leaves no digits
        # (6d weld, 100 states: Q16.16 1.0, Q24.24 0.86 where constrained_fd keeps 2.6e-3): the
        # Λ⁻¹ of Eq. (66) is a difference of large terms and S = PΛ⁻¹Pᵀ amplifies its error by
        # cond(S). No Q24.24 bound: use float or double on the FPGA.
        float32_tol=1e-2, fixed_tol={(32, 16): 1.0}, gpu_shape="block", frames=True, constraints=True,
        opt_in=True, check=_check)
