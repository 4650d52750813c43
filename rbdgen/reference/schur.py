"""Fijany's Schur-complement factorization of M⁻¹ and Λ⁻¹ and its block cyclic reduction, in
plain NumPy (seed 002: Fijany, §IV–§VI; the oracle of the ``*_schur`` kernels).

The interbody force of joint i is split into the part the joint transmits and the part it
holds, F_i = H_i F_Ti + W_i F_Si (Eq. (40)), with W_i the orthonormal complement of the joint's
motion subspace H_i = S_i (Eqs. (41)–(44); :func:`rbdgen.spatial.complement`). In global form
(Eqs. (45)–(50)), with 𝒫ᵀ the bidiagonal operator of the velocity recursion
(𝒫ᵀV)_i = V_i − X_i V_p(i), 𝒥 = diag(I_i), ℋ = diag(H_i), 𝒲 = diag(W_i):

    𝒜 = 𝒲ᵀ𝒫ᵀ𝒥⁻¹𝒫𝒲,  ℬ = 𝒲ᵀ𝒫ᵀ𝒥⁻¹𝒫ℋ,  𝒞 = ℋᵀ𝒫ᵀ𝒥⁻¹𝒫ℋ,  M⁻¹ = 𝒞 − ℬᵀ𝒜⁻¹ℬ          (Eq. (61))

and, for frames with LOCAL velocity V_f = ᶠX_b V_b (β the block row of those transforms),

    Λ⁻¹ = β𝒦βᵀ,  𝒦 = 𝒥⁻¹ − 𝒥⁻¹𝒫𝒲𝒜⁻¹𝒲ᵀ𝒫ᵀ𝒥⁻¹                                          (Eq. (66), §IV.C)

𝒜 is symmetric positive definite and, on a serial chain, block tridiagonal (Eqs. (73)–(74)).
Here the operators are built as the dense global matrices the paper writes — deliberately not
the per-body formulas the traced kernels use (Eqs. (75)–(80)), so the one checks the other —
and 𝒜 is solved by odd–even elimination, the parallel block cyclic reduction of §VI.B
(Eqs. (90)–(93)), with the neighbour at distance 2^(j−1) at level j as the multilevel steps of
§VI.D write it (the text of Eqs. (90)–(92) reads i ± 2 at every level, which is only level 2's
stride: the extraction lost the exponent).

Forward dynamics (``fd_schur``) is Table I's open-chain part: Step I the bias
b = RNEA(q, q̇, 0) by the Newton–Euler algorithm, Step II q̈ = M⁻¹(τ − b) applied as the operator
of Eq. (72), never forming M⁻¹; then (ours, not the paper's) one step of iterative refinement,
q̈ += M⁻¹(τ − RNEA(q, q̇, q̈)): Eq. (72) subtracts two terms |𝒞f|/|q̈| times bigger than q̈, which
costs digits on long chains, and the residual is small.

Scope, as the paper's: a serial chain (each body at most one child, one body on the world),
rigid bodies with mass (𝒥⁻¹ must exist: Eq. (76)), joints whose motion subspace has orthonormal
columns (Eq. (42): revolute, prismatic, spherical, planar, free-flyer), no armature and no mimic
coupling. :func:`check_chain` refuses anything else with one line naming the link.
"""
from __future__ import annotations

import numpy as np

from .. import spatial as sp
from ..errors import UnsupportedError
from ..model import RobotModel
from .contact import (_SWAP, ContactSystem, _frames, check_constraints, check_finite_state, constraint_slots,
                      frame_bias_acceleration, frame_jacobian, frame_placement, frame_velocity)
from .dynamics import _batched, _kinematics, _rnea

__all__ = ["check_chain", "oee_solve", "fd_schur", "minv_schur", "osim_inverse_schur", "contact_fd_schur",
           "schur_operators"]


def check_chain(model: RobotModel, kernel: str = "the Schur-complement kernels") -> None:
    """Refuse (UnsupportedError, one line naming the link) a model the factorization of seed 002
    does not cover: a branch, mimic coupling, armature, a body without a positive-definite
    spatial inertia, or a joint whose S has columns that are not orthonormal."""
    src = getattr(model, "source", None)
    if getattr(model, "coupled", False):
        raise UnsupportedError(f"{kernel}: the Schur-complement factorization (seed 002) has no form for coupled "
                               f"mimic joints ({', '.join(model.followers)}); load with mimic='independent'", file=src)
    roots = [i for i in range(model.nb) if model.parent[i] < 0]
    if len(roots) > 1:
        raise UnsupportedError(f"{kernel}: links {', '.join(repr(model.body_names[i]) for i in roots)} all hang from "
                               f"the world: the Schur-complement factorization (seed 002) is written for one serial "
                               f"chain, and block cyclic reduction needs its block-tridiagonal 𝒜", file=src)
    for i in range(model.nb):
        kids = model.children(i)
        if len(kids) > 1:
            raise UnsupportedError(
                f"{kernel}: link '{model.body_names[i]}' branches into "
                f"{', '.join(repr(model.body_names[c]) for c in kids)}: the Schur-complement factorization "
                f"(seed 002) is written for a serial chain (its 𝒜 is block tridiagonal only there); use aba, "
                f"minv and osim_inverse on trees", file=src)
    arm = getattr(model, "armature", None)
    if arm is not None and np.any(arm):
        j = int(np.flatnonzero(arm)[0])
        b = next(b for b in range(model.nb) if model.v_start[b] <= j < model.v_start[b] + model.nv_joint(b))
        raise UnsupportedError(f"{kernel}: joint '{model.joint_names[b]}' has armature, which the interbody-force "
                               f"decomposition of seed 002 does not model; use aba/minv", file=src)
    for i in range(model.nb):
        try:
            sp.inertia_inverse(model.inertia[i])
        except ValueError as e:
            raise UnsupportedError(f"{kernel}: link '{model.body_names[i]}': {e}, and the Schur-complement "
                                   f"factorization needs every link's inverse inertia (seed 002 Eq. (76)); give it "
                                   f"an <inertial> with mass or merge it with a fixed joint", file=src) from None
        S = model.motion_subspace(i)
        if np.max(np.abs(sp.mm(S.T, S) - np.eye(S.shape[1]))) > 1e-12:
            raise UnsupportedError(f"{kernel}: joint '{model.joint_names[i]}': its motion subspace's columns are "
                                   f"not orthonormal (seed 002 Eq. (42))", file=src)


def schur_operators(model: RobotModel, q):
    """The global operators of §IV.B at q: (𝒫ᵀ, 𝒥⁻¹, ℋ, 𝒲) as dense matrices (6nb × 6nb,
    6nb × 6nb, 6nb × nv, 6nb × Σ(6 − nv_i)), the body blocks in model order."""
    Xs, Ss = _kinematics(model, q)
    nb = model.nb
    Pt = np.eye(6 * nb)
    Jinv = np.zeros((6 * nb, 6 * nb))
    Ws = [sp.complement(S) for S in Ss]
    H = np.zeros((6 * nb, model.nv))
    W = np.zeros((6 * nb, sum(w.shape[1] for w in Ws)))
    col = 0
    for i in range(nb):
        b = slice(6 * i, 6 * i + 6)
        p = model.parent[i]
        if p >= 0:
            Pt[b, 6 * p : 6 * p + 6] = -Xs[i]
        Jinv[b, b] = sp.inertia_inverse(model.inertia[i])
        H[b, model.v_slice(i)] = Ss[i]
        W[b, col : col + Ws[i].shape[1]] = Ws[i]
        col += Ws[i].shape[1]
    return Pt, Jinv, H, W


def _blocks(model):
    """The constraint-force block of each body in 𝒜's rows: slices, empty for a 6-DOF joint."""
    out, start = [], 0
    for i in range(model.nb):
        w = 6 - model.nv_joint(i)
        out.append(slice(start, start + w))
        start += w
    return out


def oee_solve(A: np.ndarray, blocks, rhs: np.ndarray) -> np.ndarray:
    """𝒜⁻¹ rhs for a symmetric positive-definite block-tridiagonal 𝒜 (``blocks``: its diagonal
    blocks' slices, in chain order) by odd–even elimination (seed 002 §VI.B, Eqs. (90)–(93)):
    at level j every block row i eliminates its neighbours at distance s = 2^(j−1),

        A_i ← A_i − B_i A_{i+s}⁻¹ B_iᵀ − B_{i−s}ᵀ A_{i−s}⁻¹ B_{i−s}        (90)
        B_i ← −B_i A_{i+s}⁻¹ B_{i+s}                                        (91)
        ψ_i ← ψ_i − B_i A_{i+s}⁻¹ ψ_{i+s} − B_{i−s}ᵀ A_{i−s}⁻¹ ψ_{i−s}     (92)

    (B_i the block coupling i and i + s), until after ⌈log₂ n⌉ levels none is left and each
    block row is solved alone (93). Empty blocks (a free-flyer holds nothing) are dropped."""
    idx = [b for b in blocks if b.stop > b.start]
    n = len(idx)
    Ad = [A[b, b].copy() for b in idx]
    Bu = [A[idx[k], idx[k + 1]].copy() if k + 1 < n else None for k in range(n)]
    psi = [np.array(rhs[b], dtype=float) for b in idx]
    s = 1
    while s < n:
        inv = [np.linalg.inv(a) for a in Ad]
        nA, nB, npsi = [], [], []
        for i in range(n):
            a, y = Ad[i].copy(), psi[i].copy()
            if i + s < n:
                a -= Bu[i] @ inv[i + s] @ Bu[i].T
                y -= Bu[i] @ inv[i + s] @ psi[i + s]
            if i - s >= 0:
                a -= Bu[i - s].T @ inv[i - s] @ Bu[i - s]
                y -= Bu[i - s].T @ inv[i - s] @ psi[i - s]
            nA.append(a)
            npsi.append(y)
            nB.append(-Bu[i] @ inv[i + s] @ Bu[i + s] if i + 2 * s < n else None)
        Ad, Bu, psi, s = nA, nB, npsi, 2 * s
    out = np.zeros(np.shape(rhs))
    for b, a, y in zip(idx, Ad, psi):
        out[b] = np.linalg.solve(a, y)
    return out


def _check_tridiagonal(A, blocks):
    """𝒜 has nothing outside its block tridiagonal (a serial chain's, Eqs. (73)–(74))."""
    ends = np.cumsum([b.stop - b.start for b in blocks])
    owner = np.searchsorted(ends, np.arange(A.shape[0]), side="right")
    far = np.abs(owner[:, None] - owner[None, :]) > 1
    assert not np.any(A[far]), "𝒜 is not block tridiagonal"


def _minv_parts(model, q):
    Pt, Jinv, H, W = schur_operators(model, q)
    JP = Jinv @ Pt.T           # 𝒥⁻¹𝒫
    A = W.T @ Pt @ JP @ W      # 𝒜
    B = W.T @ Pt @ JP @ H      # ℬ
    C = H.T @ Pt @ JP @ H      # 𝒞
    blocks = _blocks(model)
    _check_tridiagonal(A, blocks)
    return A, B, C, blocks


def _minv_schur(model, q):
    A, B, C, blocks = _minv_parts(model, q)
    return C - B.T @ oee_solve(A, blocks, B)  # Eq. (61)


def _open_chain_qdd(model, q, v, tau, minv_apply, refine):
    b = _rnea(model, q, v, np.zeros(model.nv))  # Table I, Step I: Newton–Euler with q̈ = 0
    qdd = minv_apply(tau - b)                   # Step II: Eq. (72) applied to τ − b
    for _ in range(refine):                     # ours, not the paper's: iterative refinement
        qdd = qdd + minv_apply(tau - _rnea(model, q, v, qdd))
    return qdd


def _minv_operator(model, q):
    """f ↦ M⁻¹f by Eq. (72): 𝒞f − ℬᵀ𝒜⁻¹ℬf, 𝒜 by odd–even elimination."""
    A, B, C, blocks = _minv_parts(model, q)
    return lambda f: C @ f - B.T @ oee_solve(A, blocks, B @ f)


def _fd_schur(model, q, v, tau, refine):
    return _open_chain_qdd(model, q, v, tau, _minv_operator(model, q), refine)


def _osim_inverse_schur(model, q, frames):
    Pt, Jinv, H, W = schur_operators(model, q)
    A = W.T @ Pt @ Jinv @ Pt.T @ W
    blocks = _blocks(model)
    E = W.T @ Pt @ Jinv                              # 𝒲ᵀ𝒫ᵀ𝒥⁻¹ (ℰ of Eq. (67) before β)
    K = Jinv - E.T @ oee_solve(A, blocks, E)         # 𝒦 of §IV.C
    m = len(frames)
    beta = np.zeros((6 * m, 6 * model.nb))
    for k, f in enumerate(frames):
        if f.body >= 0:
            beta[6 * k : 6 * k + 6, 6 * f.body : 6 * f.body + 6] = f.X
    L = beta @ K @ beta.T                            # Eq. (66) for frames on any body
    perm = np.concatenate([6 * k + _SWAP for k in range(m)])
    return L[np.ix_(perm, perm)]


def minv_schur(model: RobotModel, q):
    """M(q)⁻¹ by the Schur-complement factorization, Eq. (61), 𝒜 by odd–even elimination."""
    check_chain(model, "minv_schur")
    return _batched(model, lambda q: _minv_schur(model, q), [("q", q, model.nq)])


#: steps of iterative refinement after Step II (not in seed 002; the kernels' REFINE, same reason:
#: rbdgen.algorithms.schur)
REFINE = 1


def fd_schur(model: RobotModel, q, v, tau, refine: int = REFINE):
    """q̈ = M⁻¹(τ − C q̇ − g) as Table I's open chain: Newton–Euler bias, then Eq. (72); then
    ``refine`` steps of iterative refinement, q̈ += M⁻¹(τ − RNEA(q, q̇, q̈)) (ours: 0 is the
    paper's procedure alone, which loses digits on long chains — docs/fijany.md)."""
    check_chain(model, "fd_schur")
    return _batched(model, lambda q, v, tau: _fd_schur(model, q, v, tau, refine),
                    [("q", q, model.nq), ("v", v, model.nv), ("tau", tau, model.nv)])


def osim_inverse_schur(model: RobotModel, q, frames=None):
    """Λ⁻¹ = J M⁻¹ Jᵀ of the selected frames' LOCAL Jacobians (as :func:`osim_inverse`: rows and
    columns [linear; angular] per frame) by Eq. (66), 𝒜 by odd–even elimination."""
    check_chain(model, "osim_inverse_schur")
    fr = _frames(model, frames)
    return _batched(model, lambda q: _osim_inverse_schur(model, q, fr), [("q", q, model.nq)])


def contact_fd_schur(model: RobotModel, q, v, tau, contacts):
    """``(q̈, F)`` as :func:`rbdgen.reference.contact_fd` (same conventions), by the procedure of
    Table I with the Schur-complement factorization: Step I the bias by Newton–Euler, Step II
    q̈₀ = M⁻¹(τ − b) (Eq. (72)), Step III Λ⁻¹ of the constraint frames (Eq. (66)), Step IV the
    constraint system for the forces (Eq. (29): P Λ⁻¹ Pᵀ x = P V̇₀ − r, contacts and loops as
    :class:`~rbdgen.reference.contact.ContactSystem` states them), Step V q̈ = q̈₀ − M⁻¹ J_cᵀ F
    by Eq. (72) again."""
    check_chain(model, "constrained_fd_schur")
    contacts = check_constraints(model, contacts)
    names = constraint_slots(contacts)
    system = ContactSystem(contacts)
    check_finite_state("contact_fd_schur", q=q, v=v, tau=tau)

    def one(q, v, tau):
        minv_apply = _minv_operator(model, q)
        qdd0 = _open_chain_qdd(model, q, v, tau, minv_apply, REFINE)                          # Steps I, II
        J = frame_jacobian(model, q, names, "local")
        V0 = J @ qdd0 + frame_bias_acceleration(model, q, v, names, "local")
        Linv = _osim_inverse_schur(model, q, [model.frame(n) for n in names])                # Step III
        oMf = frame_placement(model, q, names) if system.has_loops else None
        W = system.solve(V0, frame_velocity(model, q, v, names, "local"), Linv, oMf)        # Step IV
        return qdd0 - minv_apply(np.einsum("kij,ki->j", J, W)), system.forces(W)            # Step V

    return _batched(model, one, [("q", q, model.nq), ("v", v, model.nv), ("tau", tau, model.nv)])
