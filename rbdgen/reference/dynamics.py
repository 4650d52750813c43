"""Featherstone's algorithms on one robot, dense 6×6 algebra: RNEA, CRBA, ABA, M⁻¹, the
derivatives, forward kinematics, and their mimic-coupled forms (see the package docstring,
:mod:`rbdgen.reference`)."""
from __future__ import annotations

import numpy as np

from .. import spatial as sp
from ..spatial import mm
from ..model import RobotModel

__all__ = ["rnea", "nle", "gravity", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives",
           "forward_kinematics"]


# ---- argument handling -------------------------------------------------------------------------

def _arg(name: str, x, width: int):
    a = np.asarray(x)
    if a.dtype.kind not in "fiu":
        raise ValueError(f"{name}: expected a real array, got dtype {a.dtype}")
    a = a.astype(float, copy=False)
    if a.ndim not in (1, 2) or a.shape[-1] != width:
        raise ValueError(f"{name}: expected shape ({width},) or (N, {width}), got {a.shape}")
    return a


def _batched(model: RobotModel, fn, named_args, f_ext=None):
    """Run ``fn(*states)`` per state. ``named_args``: list of (name, array, width)."""
    arrs = [_arg(n, x, w) for n, x, w in named_args]
    batch = arrs[0].ndim == 2
    n = arrs[0].shape[0] if batch else None
    for (name, _, _), a in zip(named_args, arrs):
        if (a.ndim == 2) != batch or (batch and a.shape[0] != n):
            raise ValueError(f"{name}: shape {a.shape} does not match {named_args[0][0]} shape {arrs[0].shape}")
    if f_ext is not None:
        f_ext = np.asarray(f_ext, dtype=float)
        want = (model.nb, 6) if not batch else (n, model.nb, 6)
        if f_ext.shape != want:
            raise ValueError(f"f_ext: expected shape {want}, got {f_ext.shape}")
    if not batch:
        return fn(*arrs, f_ext) if f_ext is not None else fn(*arrs)
    if n == 0:  # no states: the outputs' shapes, from one state of zeros (its values unused)
        with np.errstate(all="ignore"):
            one = fn(*(np.zeros(a.shape[1:]) for a in arrs), *(() if f_ext is None else (np.zeros((model.nb, 6)),)))
        return tuple(np.empty((0,) + np.shape(o)) for o in one) if isinstance(one, tuple) else np.empty((0,) + np.shape(one))
    outs = [fn(*(a[k] for a in arrs), *(() if f_ext is None else (f_ext[k],))) for k in range(n)]
    if isinstance(outs[0], tuple):
        return tuple(np.stack(o) for o in zip(*outs))
    return np.stack(outs)


# ---- shared pieces --------------------------------------------------------------------------

def _kinematics(model: RobotModel, q):
    """X_i (parent → body i) and S_i for every body."""
    Xs, Ss = [], []
    for i in range(model.nb):
        Xs.append(sp.mm(model.joint_transform(i, q[model.q_slice(i)]), model.X_tree[i]))
        Ss.append(model.motion_subspace(i))
    return Xs, Ss


def _a_gravity(model: RobotModel) -> np.ndarray:
    """Spatial acceleration of the world that stands in for gravity: a₀ = −g."""
    return np.concatenate([np.zeros(3), -model.gravity])


def _fext_featherstone(f):
    """[force; torque] (Pinocchio) → [torque; force] (Featherstone)."""
    return np.concatenate([f[3:], f[:3]])


def _armature(model):
    """The model's armature (nv,), or None where it is all zeros (then nothing is added, so the
    numbers are those of a model without it, to the bit)."""
    arm = getattr(model, "armature", None)
    return arm if arm is not None and np.any(arm) else None


# ---- inverse dynamics ---------------------------------------------------------------------------

def _rnea(model, q, v, a, f_ext=None, with_gravity=True):
    Xs, Ss = _kinematics(model, q)
    nb = model.nb
    vel, acc, f = [None] * nb, [None] * nb, [None] * nb
    a0 = _a_gravity(model) if with_gravity else np.zeros(6)
    for i in range(nb):
        p = model.parent[i]
        vJ = mm(Ss[i], v[model.v_slice(i)])
        if p < 0:
            vel[i] = vJ
            acc[i] = mm(Xs[i], a0) + mm(Ss[i], a[model.v_slice(i)])
        else:
            vel[i] = mm(Xs[i], vel[p]) + vJ
            acc[i] = mm(Xs[i], acc[p]) + mm(Ss[i], a[model.v_slice(i)]) + mm(sp.crm(vel[i]), vJ)
        I = model.inertia[i]
        f[i] = mm(I, acc[i]) + mm(mm(sp.crf(vel[i]), I), vel[i])
        if f_ext is not None:
            f[i] = f[i] - _fext_featherstone(f_ext[i])
    tau = np.zeros(model.nv)
    for i in reversed(range(nb)):
        tau[model.v_slice(i)] = mm(Ss[i].T, f[i])
        p = model.parent[i]
        if p >= 0:
            f[p] = f[p] + mm(Xs[i].T, f[i])
    arm = _armature(model)
    if arm is not None:  # each DOF's rotor: τ += armature·q̈ (M's diagonal)
        tau = tau + arm * a
    return tau


def rnea(model: RobotModel, q, v, a, f_ext=None):
    """Inverse dynamics τ = M(q) a + C(q, v) v + g(q) − Σ Jᵢᵀ f_ext,i."""
    if getattr(model, "coupled", False):
        return _coupled_rnea(model, q, v, a, f_ext)
    return _batched(model, lambda q, v, a, *fe: _rnea(model, q, v, a, *fe),
                    [("q", q, model.nq), ("v", v, model.nv), ("a", a, model.nv)], f_ext)


def nle(model: RobotModel, q, v):
    """Nonlinear effects C(q, v) v + g(q)."""
    if getattr(model, "coupled", False):
        return _coupled_nle(model, q, v)
    return _batched(model, lambda q, v: _rnea(model, q, v, np.zeros(model.nv)),
                    [("q", q, model.nq), ("v", v, model.nv)])


def gravity(model: RobotModel, q):
    """Generalised gravity g(q)."""
    if getattr(model, "coupled", False):
        return _coupled_gravity(model, q)
    return _batched(model, lambda q: _rnea(model, q, np.zeros(model.nv), np.zeros(model.nv)),
                    [("q", q, model.nq)])


# ---- mass matrix ---------------------------------------------------------------------------

def _composite(model, Xs):
    """The composite inertia I^c_i of every body (its subtree's, in its frame)."""
    Ic = [model.inertia[i].copy() for i in range(model.nb)]
    for i in reversed(range(model.nb)):
        p = model.parent[i]
        if p >= 0:
            Ic[p] = Ic[p] + mm(mm(Xs[i].T, Ic[i]), Xs[i])
    return Ic


def _crba(model, q):
    Xs, Ss = _kinematics(model, q)
    Ic = _composite(model, Xs)
    M = np.zeros((model.nv, model.nv))
    for i in range(model.nb):
        F = mm(Ic[i], Ss[i])
        si = model.v_slice(i)
        M[si, si] = mm(Ss[i].T, F)
        j = i
        while model.parent[j] >= 0:
            F = mm(Xs[j].T, F)
            j = model.parent[j]
            sj = model.v_slice(j)
            M[sj, si] = mm(Ss[j].T, F)
            M[si, sj] = M[sj, si].T
    arm = _armature(model)
    if arm is not None:
        M[np.diag_indices(model.nv)] += arm
    return M


def crba_diagonal(model: RobotModel, q) -> np.ndarray:
    """diag M(q), one q (nv,): M_ii's blocks S_iᵀ I^c_i S_i from the composite inertias alone, O(n)
    where :func:`crba` is O(n·depth) (a 1000-link chain: ms instead of seconds). What
    :func:`rbdgen.registry.check_invertible` needs; coupled models take the full matrix."""
    if getattr(model, "coupled", False):
        return np.diag(crba(model, q)).copy()
    Xs, Ss = _kinematics(model, q)
    Ic = _composite(model, Xs)
    d = np.zeros(model.nv)
    for i in range(model.nb):
        d[model.v_slice(i)] = np.diag(mm(Ss[i].T, mm(Ic[i], Ss[i])))
    arm = _armature(model)
    return d if arm is None else d + arm


def crba(model: RobotModel, q):
    """Joint-space inertia matrix M(q), full and symmetric (composite-rigid-body algorithm)."""
    if getattr(model, "coupled", False):
        return _coupled_crba(model, q)
    return _batched(model, lambda q: _crba(model, q), [("q", q, model.nq)])


# ---- forward dynamics ---------------------------------------------------------------------------

def _aba(model, q, v, tau, f_ext=None, with_gravity=True):
    """Articulated-body algorithm. ``tau`` may be a vector (nv,) or a matrix (nv, k): with a
    matrix, each column is solved at once (used by :func:`minv` with v = 0, no gravity)."""
    Xs, Ss = _kinematics(model, q)
    nb = model.nb
    tau = np.asarray(tau, dtype=float)
    cols = tau.shape[1:]  # () or (k,)
    vel = [None] * nb
    c = [None] * nb
    IA = [None] * nb
    pA = [None] * nb
    for i in range(nb):
        p = model.parent[i]
        vJ = Ss[i] @ v[model.v_slice(i)]
        vel[i] = vJ if p < 0 else Xs[i] @ vel[p] + vJ
        c[i] = sp.crm(vel[i]) @ vJ
        IA[i] = model.inertia[i].copy()
        pb = sp.crf(vel[i]) @ model.inertia[i] @ vel[i]
        if f_ext is not None:
            pb = pb - _fext_featherstone(f_ext[i])
        pA[i] = pb.reshape((6,) + (1,) * len(cols)) * np.ones((6,) + cols)
    U, Dinv, u = [None] * nb, [None] * nb, [None] * nb
    for i in reversed(range(nb)):
        U[i] = IA[i] @ Ss[i]
        Dinv[i] = np.linalg.inv(Ss[i].T @ U[i] + np.diag(model.joint_armature(i)))  # armature: D_i's diagonal
        u[i] = tau[model.v_slice(i)] - Ss[i].T @ pA[i]
        p = model.parent[i]
        if p >= 0:
            Ia = IA[i] - U[i] @ Dinv[i] @ U[i].T
            pa = pA[i] + (Ia @ c[i]).reshape((6,) + (1,) * len(cols)) + U[i] @ Dinv[i] @ u[i]
            IA[p] = IA[p] + Xs[i].T @ Ia @ Xs[i]
            pA[p] = pA[p] + Xs[i].T @ pa
    qdd = np.zeros((model.nv,) + cols)
    acc = [None] * nb
    a0 = _a_gravity(model) if with_gravity else np.zeros(6)
    for i in range(nb):
        p = model.parent[i]
        if p < 0:
            ap = (Xs[i] @ a0).reshape((6,) + (1,) * len(cols))
        else:
            ap = Xs[i] @ acc[p]
        ap = ap + c[i].reshape((6,) + (1,) * len(cols))
        qdd_i = Dinv[i] @ (u[i] - U[i].T @ ap)
        qdd[model.v_slice(i)] = qdd_i
        acc[i] = ap + Ss[i] @ qdd_i
    return qdd


def aba(model: RobotModel, q, v, tau, f_ext=None):
    """Forward dynamics q̈ = M⁻¹ (τ − C v − g + Σ Jᵢᵀ f_ext,i) by the articulated-body algorithm."""
    if getattr(model, "coupled", False):
        return _coupled_aba(model, q, v, tau, f_ext)
    return _batched(model, lambda q, v, t, *fe: _aba(model, q, v, t, *fe),
                    [("q", q, model.nq), ("v", v, model.nv), ("tau", tau, model.nv)], f_ext)


def _minv(model, q):
    return _aba(model, q, np.zeros(model.nv), np.eye(model.nv), with_gravity=False)


def minv(model: RobotModel, q):
    """M(q)⁻¹ computed directly: the articulated-body recursions applied to the columns of the
    identity (zero velocity, no gravity), never by inverting :func:`crba`'s output."""
    if getattr(model, "coupled", False):
        return _coupled_minv(model, q)
    return _batched(model, lambda q: _minv(model, q), [("q", q, model.nq)])


# ---- derivatives ------------------------------------------------------------------------------

def _rnea_derivatives(model, q, v, a, f_ext=None):
    """(∂τ/∂q, ∂τ/∂v) by differentiating RNEA one tangent direction at a time.

    Perturbing joint j along its motion subspace column s (in body j's frame) changes only
    X_j, with ∂X_j = −(s×) X_j — for revolute and prismatic joints and for the free-flyer,
    spherical and planar joints with Pinocchio's right-multiplied integration q ⊕ δ = q · exp(δ)
    (S constant in the body frame) alike. External forces are
    fixed in their bodies' frames (they move with the body), so they enter only through the
    forces transmitted across the joints (the ``extra`` term); the armature, through ∂τ/∂a = M
    alone.
    """
    Xs, Ss = _kinematics(model, q)
    nb, nv = model.nb, model.nv
    a0 = _a_gravity(model)
    vel, acc, f, vJ = [None] * nb, [None] * nb, [None] * nb, [None] * nb
    for i in range(nb):
        p = model.parent[i]
        vJ[i] = Ss[i] @ v[model.v_slice(i)]
        vp = np.zeros(6) if p < 0 else vel[p]
        ap = a0 if p < 0 else acc[p]
        vel[i] = Xs[i] @ vp + vJ[i]
        acc[i] = Xs[i] @ ap + Ss[i] @ a[model.v_slice(i)] + sp.crm(vel[i]) @ vJ[i]
        f[i] = model.inertia[i] @ acc[i] + sp.crf(vel[i]) @ model.inertia[i] @ vel[i]
        if f_ext is not None:
            f[i] = f[i] - _fext_featherstone(f_ext[i])
    # total forces transmitted across each joint (after children are added)
    ftot = [x.copy() for x in f]
    for i in reversed(range(nb)):
        p = model.parent[i]
        if p >= 0:
            ftot[p] = ftot[p] + Xs[i].T @ ftot[i]

    dtau_dq = np.zeros((nv, nv))
    dtau_dv = np.zeros((nv, nv))
    for b in range(nb):
        for k in range(model.nv_joint(b)):
            col = model.v_start[b] + k
            s = Ss[b][:, k]
            for wrt, out in (("q", dtau_dq), ("v", dtau_dv)):
                dv, da, df = [None] * nb, [None] * nb, [None] * nb
                for i in range(nb):
                    p = model.parent[i]
                    vp = np.zeros(6) if p < 0 else vel[p]
                    ap = a0 if p < 0 else acc[p]
                    dvp = np.zeros(6) if p < 0 else dv[p]
                    dap = np.zeros(6) if p < 0 else da[p]
                    dvJ = s if (wrt == "v" and i == b) else np.zeros(6)
                    moved = wrt == "q" and i == b  # ∂X_b = −(s×) X_b
                    dXv = -sp.crm(s) @ Xs[i] @ vp if moved else np.zeros(6)
                    dXa = -sp.crm(s) @ Xs[i] @ ap if moved else np.zeros(6)
                    dv[i] = Xs[i] @ dvp + dXv + dvJ
                    da[i] = Xs[i] @ dap + dXa + sp.crm(dv[i]) @ vJ[i] + sp.crm(vel[i]) @ dvJ
                    I = model.inertia[i]
                    df[i] = I @ da[i] + sp.crf(dv[i]) @ I @ vel[i] + sp.crf(vel[i]) @ I @ dv[i]
                for i in reversed(range(nb)):
                    out[model.v_slice(i), col] = Ss[i].T @ df[i]
                    p = model.parent[i]
                    if p >= 0:
                        extra = sp.crf(s) @ ftot[i] if (wrt == "q" and i == b) else 0.0
                        df[p] = df[p] + Xs[i].T @ (df[i] + extra)
    return dtau_dq, dtau_dv


def rnea_derivatives(model: RobotModel, q, v, a, f_ext=None):
    """(∂τ/∂q, ∂τ/∂v) of inverse dynamics; ∂τ/∂a is M(q). Floating base: with respect to the
    tangent space, as Pinocchio defines them. ``f_ext``: as :func:`rnea`'s, held fixed in the
    bodies' frames (Pinocchio's ``computeRNEADerivatives(…, fext)``)."""
    if getattr(model, "coupled", False):
        return _coupled_rnea_derivatives(model, q, v, a, f_ext)
    return _batched(model, lambda q, v, a, *fe: _rnea_derivatives(model, q, v, a, *fe),
                    [("q", q, model.nq), ("v", v, model.nv), ("a", a, model.nv)], f_ext)


def _aba_derivatives(model, q, v, tau, f_ext=None):
    qdd = _aba(model, q, v, tau, f_ext)
    dtau_dq, dtau_dv = _rnea_derivatives(model, q, v, qdd, f_ext)
    Mi = _minv(model, q)
    return -Mi @ dtau_dq, -Mi @ dtau_dv, Mi


def aba_derivatives(model: RobotModel, q, v, tau, f_ext=None):
    """(∂q̈/∂q, ∂q̈/∂v, ∂q̈/∂τ = M⁻¹), analytically: ∂q̈/∂u = −M⁻¹ ∂τ/∂u at (q, v, q̈). ``f_ext``:
    as :func:`aba`'s, held fixed in the bodies' frames (Pinocchio's
    ``computeABADerivatives(…, fext)``)."""
    if getattr(model, "coupled", False):
        return _coupled_aba_derivatives(model, q, v, tau, f_ext)
    return _batched(model, lambda q, v, t, *fe: _aba_derivatives(model, q, v, t, *fe),
                    [("q", q, model.nq), ("v", v, model.nv), ("tau", tau, model.nv)], f_ext)


# ---- kinematics ---------------------------------------------------------------------------------

def _forward_kinematics(model, q):
    """ᵒT_i = ᵒT_parent · ᵖT_i, where ᵖT_i is read off the 6×6 Plücker transform
    X_i = [E 0; −E r× E] (parent → body): rotation Eᵀ, translation r (r× = −Eᵀ X_lower-left)."""
    Xs, _ = _kinematics(model, q)
    T = np.zeros((model.nb, 4, 4))
    for i, X in enumerate(Xs):
        E = X[:3, :3]
        rx = -E.T @ X[3:, :3]
        pTi = np.eye(4)
        pTi[:3, :3] = E.T
        pTi[:3, 3] = [rx[2, 1], rx[0, 2], rx[1, 0]]
        p = model.parent[i]
        T[i] = pTi if p < 0 else T[p] @ pTi
    return T


def forward_kinematics(model: RobotModel, q):
    """Placement of every body in the world: ``(nb, 4, 4)`` homogeneous transforms in
    ``model.body_names`` order (``(N, nb, 4, 4)`` for a batch)."""
    if getattr(model, "coupled", False):
        return _coupled_forward_kinematics(model, q)
    return _batched(model, lambda q: _forward_kinematics(model, q), [("q", q, model.nq)])


# ---- mimic joints coupled (rbdgen.model.coupled) -------------------------------------------------
#
# The tree's algorithms on expanded coordinates (q_tree = Gq q + bq, v_tree = G v, a_tree = G a),
# outputs contracted by virtual work: τ = Gᵀ τ_tree, M = Gᵀ M_tree G, ∂τ/∂q = Gᵀ ∂τ_tree/∂q_tree G.
# Forward dynamics has no coupled articulated-body recursion: M q̈ = τ − nle, solved densely.

def _gt(cm, x):
    """Gᵀ x over the last axis."""
    return mm(x, cm.G)


def _gtg(cm, A):
    """Gᵀ A G over the last two axes."""
    return mm(mm(cm.G.T, A), cm.G)


def _coupled_rnea(cm, q, v, a, f_ext=None):
    return _gt(cm, rnea(cm.tree, cm.expand_q(q), cm.expand_v(v), cm.expand_v(a), f_ext))


def _coupled_nle(cm, q, v):
    return _gt(cm, nle(cm.tree, cm.expand_q(q), cm.expand_v(v)))


def _coupled_gravity(cm, q):
    return _gt(cm, gravity(cm.tree, cm.expand_q(q)))


def _coupled_crba(cm, q):
    return _gtg(cm, crba(cm.tree, cm.expand_q(q)))


def _coupled_minv(cm, q):
    return np.linalg.inv(_coupled_crba(cm, q))


def _coupled_aba(cm, q, v, tau, f_ext=None):
    zero = np.zeros_like(np.asarray(v, dtype=float))
    bias = _coupled_rnea(cm, q, v, zero, f_ext)
    return np.linalg.solve(_coupled_crba(cm, q), (np.asarray(tau, dtype=float) - bias)[..., None])[..., 0]


def _coupled_rnea_derivatives(cm, q, v, a, f_ext=None):
    dq, dv = rnea_derivatives(cm.tree, cm.expand_q(q), cm.expand_v(v), cm.expand_v(a), f_ext)
    return _gtg(cm, dq), _gtg(cm, dv)


def _coupled_aba_derivatives(cm, q, v, tau, f_ext=None):
    qdd = _coupled_aba(cm, q, v, tau, f_ext)
    dq, dv = _coupled_rnea_derivatives(cm, q, v, qdd, f_ext)
    Mi = _coupled_minv(cm, q)
    return -Mi @ dq, -Mi @ dv, Mi


def _coupled_forward_kinematics(cm, q):
    return forward_kinematics(cm.tree, cm.expand_q(q))
