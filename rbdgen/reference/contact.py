"""Frames, the operational-space inverse inertia Λ⁻¹ and contact dynamics, in plain NumPy.

Frames are URDF links (a body's own link, or a link merged into it by fixed joints) selected on
the model (:meth:`~rbdgen.model.RobotModel.with_frames`). 6-vectors facing the user are ordered
``[linear; angular]`` as in Pinocchio; inside, Featherstone's ``[ω; v]``. ``reference`` means what
it means in Pinocchio:

* ``"local"``: the frame's own axes, linear part at the frame's origin;
* ``"local_world_aligned"``: the world's axes, linear part at the frame's origin;
* ``"world"``: the world's axes, linear part at the world's origin (the velocity of the body
  point that passes through it).

Λ⁻¹ is computed by the O(n) recursion of the articulated-body factorisation of M⁻¹ (the
"innovations" form M⁻¹-in-operational-space = Φ K Φᵀ of Rodriguez, Jain and Kreutz-Delgado, the
factorisation Fijany et al. use for the closed chain): with the articulated inertias I^A_i,
U_i = I^A_i S_i, D_i = S_iᵀ U_i, the acceleration propagator Ψ_i = (1 − S_i D_i⁻¹ U_iᵀ) X_i and
K_i = S_i D_i⁻¹ S_iᵀ, the response of body i to a unit force on itself is

    Ω_i = Ψ_i Ω_parent Ψ_iᵀ + K_i          (Ω of the world = 0),

and between bodies i and j whose deepest common ancestor is c, Λ⁻¹_ij = Φ_ic Ω_c Φ_jcᵀ with
Φ_ic = Ψ_i Ψ_parent(i) ⋯ (down the path from c to i). M⁻¹ is never formed.
"""
from __future__ import annotations

import numpy as np

from .. import spatial as sp
from ..errors import RbdgenError
from ..model import RobotModel
from ..model.constraints import Contact, Loop, _cross, check_constraints, constraint_slots
from .dynamics import _batched, _kinematics, aba, minv

_check_contacts = check_constraints  # the name rbdgen.kernels.frames imports

#: Pinocchio's reference frames, by the names rbdgen takes (and, in any case, Pinocchio's
#: spellings LOCAL, WORLD, LOCAL_WORLD_ALIGNED, or its ``pin.ReferenceFrame`` values: :func:`reference_name`)
REFERENCES = ("local", "local_world_aligned", "world")
#: [ω; v] ↔ [v; ω]
_SWAP = np.r_[3:6, 0:3]


def _frames(model, frames):
    """Selected frames as (indices into model.frames, LinkFrames); None: all selected."""
    if frames is None:
        names = list(model.frames)
        if not names:
            raise ValueError("no frames selected on this model: model.with_frames([...]) (URDF link names)")
    elif isinstance(frames, str):
        names = [frames]
    else:
        names = list(frames)
    for n in names:
        if not isinstance(n, str):
            raise ValueError(f"a frame is named by its URDF link name, got {n!r}")
    return [model.frame(n) for n in names]


def reference_name(reference) -> str:
    """``reference`` as one of :data:`REFERENCES`: a name in any case (Pinocchio's ``"LOCAL"``,
    ``"WORLD"``, ``"LOCAL_WORLD_ALIGNED"``), or a value with such a ``name`` (``pin.LOCAL``)."""
    name = reference if isinstance(reference, str) else getattr(reference, "name", None)
    key = name.lower() if isinstance(name, str) else None
    if key not in REFERENCES:
        raise ValueError(f"reference must be one of {', '.join(map(repr, REFERENCES))} (any case, as Pinocchio's "
                         f"LOCAL, WORLD, LOCAL_WORLD_ALIGNED, or pin.ReferenceFrame values), got {reference!r}")
    return key


_reference = reference_name


def _body_kinematics(model: RobotModel, q, v=None):
    """World placements (R, p) of every body, and with v: body velocities and the bias
    accelerations at q̈ = 0 (no gravity), in body coordinates (Featherstone order)."""

    Xs, Ss = _kinematics(model, q)
    nb = model.nb
    R, p = [None] * nb, [None] * nb
    vel, acc = [None] * nb, [None] * nb
    for i in range(nb):
        E = Xs[i][:3, :3]
        rx = -E.T @ Xs[i][3:, :3]
        r = np.array([rx[2, 1], rx[0, 2], rx[1, 0]])
        par = model.parent[i]
        if par < 0:
            R[i], p[i] = E.T, r
        else:
            R[i], p[i] = R[par] @ E.T, p[par] + R[par] @ r
        if v is not None:
            vJ = Ss[i] @ v[model.v_slice(i)]
            if par < 0:
                vel[i], acc[i] = vJ, np.zeros(6)
            else:
                vel[i] = Xs[i] @ vel[par] + vJ
                acc[i] = Xs[i] @ acc[par] + sp.crm(vel[i]) @ vJ
    return Xs, Ss, R, p, vel, acc


def _placement(R, p, f):
    """(R, p) of frame f in the world."""
    if f.body < 0:
        return f.R, f.p
    return R[f.body] @ f.R, p[f.body] + R[f.body] @ f.p


def _to_reference(x_local, Rf, pf, reference):
    """A LOCAL spatial motion (or 6 × k columns) [lin; ang] in another reference."""
    lin, ang = x_local[:3], x_local[3:]
    if reference == "local":
        return x_local
    lin_w, ang_w = Rf @ lin, Rf @ ang
    if reference == "world":  # the body point at the world's origin: v_O = v_f + p_f × ω
        lin_w = lin_w + np.cross(pf, ang_w, axis=0)
    return np.concatenate([lin_w, ang_w])


def _frame_placement(model, q, frames):
    _, _, R, p, _, _ = _body_kinematics(model, q)
    out = np.zeros((len(frames), 4, 4))
    for k, f in enumerate(frames):
        Rf, pf = _placement(R, p, f)
        out[k, :3, :3], out[k, :3, 3], out[k, 3, 3] = Rf, pf, 1.0
    return out


def _body_jacobian(model, Xs, Ss, b):
    """Spatial Jacobian of body b in its own coordinates, Featherstone order (6 × nv)."""
    J = np.zeros((6, model.nv))
    if b < 0:
        return J
    X = np.eye(6)  # body b ← body j
    j = b
    while j >= 0:
        J[:, model.v_slice(j)] = X @ Ss[j]
        X = X @ Xs[j]
        j = model.parent[j]
    return J


def _frame_jacobian(model, q, frames, reference):
    Xs, Ss, R, p, _, _ = _body_kinematics(model, q)
    out = np.zeros((len(frames), 6, model.nv))
    for k, f in enumerate(frames):
        Jl = (f.X @ _body_jacobian(model, Xs, Ss, f.body))[_SWAP]
        Rf, pf = _placement(R, p, f)
        out[k] = _to_reference(Jl, Rf, pf, reference)
    return out


def _frame_motion(model, q, v, frames, reference, what):
    Xs, Ss, R, p, vel, acc = _body_kinematics(model, q, v)
    src = vel if what == "velocity" else acc
    out = np.zeros((len(frames), 6))
    for k, f in enumerate(frames):
        xl = np.zeros(6) if f.body < 0 else (f.X @ src[f.body])[_SWAP]
        Rf, pf = _placement(R, p, f)
        out[k] = _to_reference(xl, Rf, pf, reference)
    return out


def frame_placement(model: RobotModel, q, frame=None):
    """Placement ᵒM_f of a frame in the world (4×4); ``frame=None``: every selected frame,
    stacked ``(nf, 4, 4)``. Pinocchio's ``data.oMf`` after ``updateFramePlacements``."""
    fr = _frames(model, frame)
    if getattr(model, "coupled", False):
        return frame_placement(model.tree, model.expand_q(q), frame)
    out = _batched_q(model, lambda q: _frame_placement(model, q, fr), q)
    return out[..., 0, :, :] if isinstance(frame, str) else out


def frame_jacobian(model: RobotModel, q, frame=None, reference="local"):
    """The frame's Jacobian (6 × nv, rows ``[linear; angular]``) in ``reference`` (see the module
    docstring); ``frame=None``: every selected frame, ``(nf, 6, nv)``. Pinocchio's
    ``getFrameJacobian(model, data, frame_id, reference)``."""
    fr, ref = _frames(model, frame), _reference(reference)
    if getattr(model, "coupled", False):
        return frame_jacobian(model.tree, model.expand_q(q), frame, reference) @ model.G
    out = _batched_q(model, lambda q: _frame_jacobian(model, q, fr, ref), q)
    return out[..., 0, :, :] if isinstance(frame, str) else out


def frame_velocity(model: RobotModel, q, v, frame=None, reference="local"):
    """The frame's spatial velocity ``[linear; angular]`` = J q̇, in ``reference``."""
    fr, ref = _frames(model, frame), _reference(reference)
    if getattr(model, "coupled", False):
        return frame_velocity(model.tree, model.expand_q(q), model.expand_v(v), frame, reference)
    out = _batched_qv(model, lambda q, v: _frame_motion(model, q, v, fr, ref, "velocity"), q, v)
    return out[..., 0, :] if isinstance(frame, str) else out


def frame_bias_acceleration(model: RobotModel, q, v, frame=None, reference="local"):
    """J̇ q̇: the frame's spatial acceleration ``[linear; angular]`` at q̈ = 0 without gravity, in
    ``reference`` (Pinocchio's ``getFrameAcceleration`` after ``forwardKinematics(q, v, 0)``).
    It is the spatial acceleration: the classical acceleration of the frame's origin adds
    ω × v (see :func:`frame_classical_bias`)."""
    fr, ref = _frames(model, frame), _reference(reference)
    if getattr(model, "coupled", False):
        return frame_bias_acceleration(model.tree, model.expand_q(q), model.expand_v(v), frame, reference)
    out = _batched_qv(model, lambda q, v: _frame_motion(model, q, v, fr, ref, "acceleration"), q, v)
    return out[..., 0, :] if isinstance(frame, str) else out


def _batched_q(model, fn, q):

    return _batched(model, fn, [("q", q, model.nq)])


def _batched_qv(model, fn, q, v):

    return _batched(model, fn, [("q", q, model.nq), ("v", v, model.nv)])


# ---- Λ⁻¹ ------------------------------------------------------------------------------------------

def _articulated(model, Xs, Ss):
    """Ψ_i and K_i of every body (the articulated-body factorisation of M⁻¹; module docstring)."""
    nb = model.nb
    IA = [model.inertia[i].copy() for i in range(nb)]
    Psi, K = [None] * nb, [None] * nb
    for i in reversed(range(nb)):
        U = IA[i] @ Ss[i]
        Dinv = np.linalg.inv(Ss[i].T @ U + np.diag(model.joint_armature(i)))  # armature: D_i's diagonal
        K[i] = Ss[i] @ Dinv @ Ss[i].T
        Psi[i] = (np.eye(6) - Ss[i] @ Dinv @ U.T) @ Xs[i]
        p = model.parent[i]
        if p >= 0:
            IA[p] = IA[p] + Xs[i].T @ (IA[i] - U @ Dinv @ U.T) @ Xs[i]
    return Psi, K


def _osim_inverse(model, q, frames):
    Xs, Ss = _kinematics_only(model, q)
    Psi, K = _articulated(model, Xs, Ss)
    Omega = [None] * model.nb
    for i in range(model.nb):
        p = model.parent[i]
        Omega[i] = K[i] if p < 0 else Psi[i] @ Omega[p] @ Psi[i].T + K[i]
    m = len(frames)
    L = np.zeros((m, 6, m, 6))
    for a, fa in enumerate(frames):
        for b in range(a, m):
            fb = frames[b]
            if fa.body < 0 or fb.body < 0:
                continue
            c = model.common_ancestor(fa.body, fb.body)
            if c < 0:
                continue  # on trees hanging from the world separately: no coupling
            B = Omega[c]
            for k in model.path_down(c, fb.body):
                B = B @ Psi[k].T
            for k in model.path_down(c, fa.body):
                B = Psi[k] @ B
            blk = (fa.X @ B @ fb.X.T)[np.ix_(_SWAP, _SWAP)]
            L[a, :, b, :] = blk
            L[b, :, a, :] = blk.T
    return L.reshape(6 * m, 6 * m)


def _kinematics_only(model, q):

    return _kinematics(model, q)


def osim_inverse(model: RobotModel, q, frames=None):
    """Λ⁻¹ = J M⁻¹ Jᵀ of the stacked LOCAL Jacobians of ``frames`` (default every selected frame):
    ``(6m, 6m)`` with m frames, rows and columns ``[linear; angular]`` per frame. Computed by the
    O(n) recursion of the module docstring (plus one propagation per pair of frames), never by
    forming M⁻¹; with coupled mimic joints, J M⁻¹ Jᵀ of the reduced model (dense)."""
    fr = _frames(model, frames)
    if getattr(model, "coupled", False):
        J = frame_jacobian(model, q, [f.name for f in fr], "local")
        J = J.reshape(J.shape[:-3] + (6 * len(fr), model.nv))

        return J @ minv(model, q) @ np.swapaxes(J, -1, -2)
    return _batched_q(model, lambda q: _osim_inverse(model, q, fr), q)


# ---- contact dynamics -------------------------------------------------------------------------------

class ContactError(RbdgenError, ValueError):
    """A contact model the robot cannot satisfy (a singular contact system)."""


#: a constraint system whose 1-norm condition number passes this is solved rank-revealing (below)
COND_LIMIT = 1e12
#: singular values below this fraction of the largest are taken as zero in the rank-revealing solve
RANK_RCOND = 1e-12
#: a redundant system's least-squares solution is accepted when its residual is within this
#: fraction of ‖S‖‖x‖ + ‖rhs‖ (max norms): the redundant rows agree; else the constraints conflict
CONSISTENT = 1e-8


class ContactSystem:
    """The stacked equations of a list of constraints (:class:`Contact`, :class:`Loop`), built
    once (see :func:`solve_contacts`). Each constraint owns slots of the stacked frame terms
    (:func:`constraint_slots`: a contact one, a loop two). Every constraint's equations
    P V̇ + Q x = r on its slots' LOCAL spatial accelerations V̇, and the wrenches its unknowns x
    put on its slots, W = A x + b (what the robot exerts there). A contact's P, Q, A, b are
    constants; a loop's are A = Pᵀ, Q = 0, b = 0, with P's frame-b block −ᵃX_b (6d) or −[ᵃR_b 0]
    (3d), set per state from the frames' placements."""

    def __init__(self, contacts):
        self.contacts = tuple(contacts)
        self.slots = constraint_slots(self.contacts)
        m = self.m = len(self.slots)
        parts = [c.rows() if isinstance(c, Contact) else None for c in self.contacts]
        n = self.n = sum(c.size for c in self.contacts)
        P, Q, A, b = np.zeros((n, 6 * m)), np.zeros((n, n)), np.zeros((6 * m, n)), np.zeros(6 * m)
        r0 = np.zeros(n)
        self._point = []  # (rows, slot) of the 3-D contacts: r = −ω × v
        self._loops = []  # (rows, slot a, slot b, model) of the loops
        self._loop_index = {}  # a loop's first row → its index in contacts
        self.first_slot = []  # each constraint's first slot: where its force is read
        row = slot = 0
        for c, part in zip(self.contacts, parts):
            s = slice(row, row + c.size)
            self.first_slot.append(slot)
            if part is None:  # a loop: frame a's block here, frame b's per state
                sel = np.eye(6)[:c.size]
                P[s, 6 * slot:6 * slot + 6], A[6 * slot:6 * slot + 6, s] = sel, sel.T
                self._loops.append((s, slot, slot + 1, c.model))
                self._loop_index[s.start] = len(self.first_slot) - 1
                slot += 2
            else:
                Pk, Qk, Ak, bk = part
                P[s, 6 * slot:6 * slot + 6], Q[s, s], A[6 * slot:6 * slot + 6, s], b[6 * slot:6 * slot + 6] = Pk, Qk, Ak, bk
                if c.model == "3d":
                    self._point.append((s, slot))
                else:
                    r0[s] = c.rhs(np.zeros(6))
                slot += 1
            row += c.size
        self.P, self.Q, self.A, self.b, self.r0 = P, Q, A, b, r0
        self._pk = np.array([k for _, k in self._point], dtype=int)
        self._prows = np.array([list(range(s.start, s.stop)) for s, _ in self._point], dtype=int).reshape(-1, 3)
        self.PT, self.AT = P.T.copy(), A.T.copy()

    @property
    def has_loops(self) -> bool:
        """Whether the system needs the frames' placements (``oMf`` of :meth:`solve`)."""
        return bool(self._loops)

    def forces(self, W):
        """Each constraint's force (…, n_constraints, 6) from the slots' wrenches W (…, m, 6): a
        contact's is its wrench, a loop's the wrench at its frame a."""
        return W[..., self.first_slot, :]

    def row_matrix(self, lead, oMf):
        """P (…, n, 6m), the loops' frame-b blocks set from the slots' placements ``oMf``
        (…, m, 4, 4): J_c = P J for the slots' stacked LOCAL Jacobians J."""
        if not self._loops:
            return np.broadcast_to(self.P, lead + self.P.shape)
        return self._loop_rows(lead, np.zeros(lead + (self.m, 6)), oMf)[0]

    def _loop_rows(self, lead, vf, oMf):
        """(P, A, r) with the loops' per-state blocks: P (…, n, 6m), A (…, 6m, n), r (…, n)."""
        P = np.broadcast_to(self.P, lead + self.P.shape).copy()
        A = np.broadcast_to(self.A, lead + self.A.shape).copy()
        r = np.zeros(lead + (self.n,))
        for s, ka, kb, model in self._loops:
            Ra, pa, Rb, pb = oMf[..., ka, :3, :3], oMf[..., ka, :3, 3], oMf[..., kb, :3, :3], oMf[..., kb, :3, 3]
            R = np.swapaxes(Ra, -1, -2) @ Rb                                   # ᵃR_b
            p = (np.swapaxes(Ra, -1, -2) @ (pb - pa)[..., None])[..., 0]     # b's origin in a
            va, vb = vf[..., ka, :], vf[..., kb, :]
            if model == "6d":
                X = np.zeros(lead + (6, 6))                                     # ᵃX_b, [linear; angular]
                X[..., :3, :3] = X[..., 3:, 3:] = R
                X[..., :3, 3:] = _skew(p) @ R
                blk = -X
                vrel = va - (X @ vb[..., None])[..., 0]
                # v_rel × v_a (motion cross product, [linear; angular])
                drift = np.concatenate([_cross(vrel[..., 3:], va[..., :3]) + _cross(vrel[..., :3], va[..., 3:]),
                                        _cross(vrel[..., 3:], va[..., 3:])], axis=-1)
            else:
                blk = np.concatenate([-R, np.zeros(lead + (3, 3))], axis=-1)
                wvb = (R @ _cross(vb[..., 3:], vb[..., :3])[..., None])[..., 0]
                drift = _cross(va[..., 3:], va[..., :3]) - wvb
            P[..., s, 6 * kb:6 * kb + 6] = blk
            A[..., 6 * kb:6 * kb + 6, s] = np.swapaxes(blk, -1, -2)
            r[..., s] = -drift
            kp, kd = self.contacts[self._loop_index[s.start]].baumgarte
            if kp or kd:  # held at −kd ė − kp e instead of 0
                if model == "6d":
                    edot, e = vrel, -log6(R, p)
                else:
                    edot, e = va[..., :3] - (R @ vb[..., :3, None])[..., 0], -p
                r[..., s] -= kd * edot + kp * e
        return P, A, r

    def solve(self, acc0, vf, Linv, oMf=None):
        """The wrenches W (…, m, 6) of every slot, from the slots' open-chain accelerations
        ``acc0`` (…, m, 6), velocities ``vf`` (…, m, 6), Λ⁻¹ ``Linv`` (…, 6m, 6m) and, where
        there are loops, placements ``oMf`` (…, m, 4, 4) — all LOCAL, [linear; angular]."""
        m = self.m
        lead = acc0.shape[:-2]
        arrays = [acc0, vf, Linv] + ([oMf] if self._loops else [])
        finite = np.logical_and.reduce([np.isfinite(x).all(axis=(-2, -1)) if x.ndim - len(lead) == 2
                                        else np.isfinite(x).all(axis=(-3, -2, -1)) for x in arrays])
        if not np.all(finite):  # not a singular system: nothing to solve (it was reported as "singular")
            at = "" if not lead else f" (state {int(np.flatnonzero(~np.asarray(finite).reshape(-1))[0])} of the batch)"
            raise ValueError(f"the contact terms (frame accelerations, velocities, Λ⁻¹) are NaN or infinite{at}: "
                             f"q, v and tau must be finite (and small enough not to overflow)")
        if self._loops:
            if oMf is None:
                raise ValueError("a system with loops needs the frames' placements (oMf)")
            P, A, r = self._loop_rows(lead, vf, oMf)
            PT = np.swapaxes(P, -1, -2)
        else:
            P, A, PT = self.P, self.A, self.PT
            r = np.zeros(lead + (self.n,))
        r = r + self.r0
        if self._point:
            w, v = vf[..., self._pk, 3:], vf[..., self._pk, :3]
            r[..., self._prows] = -_cross(w, v)
        S = P @ Linv @ A - self.Q
        rhs = ((acc0.reshape(lead + (1, 6 * m)) - (Linv @ self.b)[..., None, :]) @ PT)[..., 0, :] - r
        x = self._solve(S, rhs, lead)
        W = (A @ x[..., None])[..., 0] + self.b
        return W.reshape(lead + (m, 6))

    def _solve(self, S, rhs, lead):
        """x with S x = rhs: the inverse where S is well conditioned; elsewhere the least-squares
        solution of least norm (singular values under RANK_RCOND of the largest dropped), kept
        where it satisfies the system (redundant constraints that agree: a planar linkage's
        out-of-plane rows); a system whose constraints conflict is a :class:`ContactError`."""
        with np.errstate(all="ignore"):
            try:
                Si = np.linalg.inv(S)
            except np.linalg.LinAlgError:
                Si = np.full_like(S, np.nan)
            # the 1-norm condition number, from the inverse the solution needs anyway
            cond = np.abs(S).sum(axis=-2).max(axis=-1) * np.abs(Si).sum(axis=-2).max(axis=-1)
        x = (Si @ rhs[..., None])[..., 0]
        ok = np.isfinite(cond) & (cond < COND_LIMIT)
        if np.all(ok):
            return x
        bad = np.flatnonzero(~np.asarray(ok).reshape(-1))
        Sb, rb = S.reshape((-1,) + S.shape[-2:])[bad], rhs.reshape((-1, self.n))[bad]
        xb = (np.linalg.pinv(Sb, rcond=RANK_RCOND) @ rb[..., None])[..., 0]
        res = np.abs((Sb @ xb[..., None])[..., 0] - rb).max(axis=-1)
        scale = np.abs(Sb).max(axis=(-2, -1)) * np.abs(xb).max(axis=-1) + np.abs(rb).max(axis=-1)
        agree = np.isfinite(res) & (res <= CONSISTENT * scale)
        if not np.all(agree):
            which = ", ".join(_describe(c) for c in self.contacts)
            at = "" if not lead else f" (state {int(bad[np.flatnonzero(~agree)[0]])} of the batch)"
            raise ContactError(f"the contact system is singular{at}: Wᵀ Λ⁻¹ W is not invertible and its redundant "
                               f"rows disagree, so the constraints {which} ask for motions the robot cannot make at "
                               f"this configuration (more constrained directions than it can move, or a singular "
                               f"posture)")
        x = x.reshape((-1, self.n)).copy()
        x[bad] = xb
        return x.reshape(lead + (self.n,))


def _describe(c) -> str:
    if isinstance(c, Loop):
        return f"loop {c.frame_a}–{c.frame_b} ({c.model}: {c.size} constrained)"
    return f"{c.frame} ({c.model}: {c.size} constrained)"


def log6(R, p):
    """log₆ of placements (R (…, 3, 3), p (…, 3)): the screw ``[v; ω]`` (…, 6) with
    exp(ξ) = (R, p), ω = θ u, v = V(ω)⁻¹ p (Pinocchio's ``log6``); θ < π."""
    c = np.clip((np.trace(R, axis1=-2, axis2=-1) - 1.0) / 2.0, -1.0, 1.0)
    th = np.arccos(c)
    s = np.sin(th)
    vee = np.stack([R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]], -1)
    small = th < 1e-4
    with np.errstate(all="ignore"):
        f = np.where(small, 0.5 + th * th / 12.0, th / (2.0 * np.where(small, 1.0, s)))
        w = f[..., None] * vee
        # V⁻¹ = I − ½[ω]× + (1/θ²)(1 − θ sinθ / (2(1 − cosθ))) [ω]×²
        g = np.where(small, 1.0 / 12.0 + th * th / 720.0,
                     (1.0 - th * s / (2.0 * np.where(small, 1.0, 1.0 - c))) / np.where(small, 1.0, th * th))
    W = _skew(w)
    v = p - 0.5 * (W @ p[..., None])[..., 0] + g[..., None] * (W @ (W @ p[..., None]))[..., 0]
    return np.concatenate([v, w], axis=-1)


def _skew(p):
    """[p]× of 3-vectors (…, 3) → (…, 3, 3)."""
    z = np.zeros(p.shape[:-1])
    x, y, w = p[..., 0], p[..., 1], p[..., 2]
    return np.stack([np.stack([z, -w, y], -1), np.stack([w, z, -x], -1), np.stack([-y, x, z], -1)], -2)


def solve_contacts(contacts, acc0, vf, Linv, oMf=None):
    """The wrenches W (…, m, 6) the robot exerts at each slot (:func:`constraint_slots`: a frame
    per contact, two per loop), LOCAL ``[force; torque]``, from the slots' open-chain terms:
    ``acc0`` their LOCAL open-chain accelerations V̇₀ = J q̈₀ + J̇q̇ (…, m, 6), ``vf`` their LOCAL
    velocities (…, m, 6), ``Linv`` their Λ⁻¹ (…, 6m, 6m) and, with loops, ``oMf`` their
    placements (…, m, 4, 4). Every constraint's equations P V̇ + Q x = r with V̇ = V̇₀ − Λ⁻¹ W and
    W = A x + b, stacked:

        (P Λ⁻¹ A − Q) x = P V̇₀ − P Λ⁻¹ b − r

    (rigid contacts: Wᵀ Λ⁻¹ W K_C = Wᵀ V̇₀ − r, Fijany's system). Leading dimensions are a batch.
    A system whose 1-norm condition number exceeds :data:`COND_LIMIT` is solved rank-revealing
    (:meth:`ContactSystem._solve`); one whose constraints conflict is a :class:`ContactError`."""
    return ContactSystem(contacts).solve(np.asarray(acc0, dtype=float), np.asarray(vf, dtype=float),
                                         np.asarray(Linv, dtype=float), None if oMf is None else np.asarray(oMf, dtype=float))


def check_finite_state(what: str, **arrays) -> None:
    """A ValueError naming the first of ``arrays`` (NumPy arrays or lists; others, such as device
    arrays, are left to :meth:`ContactSystem.solve`) with a NaN or infinite entry, and where."""
    for name, x in arrays.items():
        if not isinstance(x, (np.ndarray, list, tuple)):
            continue
        try:
            a = np.asarray(x, dtype=float)
        except (TypeError, ValueError):
            continue  # not numbers: the shape and type checks say so
        bad = ~np.isfinite(a)
        if bad.any():
            at = f" (state {int(np.flatnonzero(bad.any(axis=-1))[0])} of the batch)" if a.ndim == 2 else ""
            raise ValueError(f"{what}: {name} has a NaN or infinite entry{at}")


def contact_fd(model: RobotModel, q, v, tau, contacts):
    """Forward dynamics with contacts and loops: ``(q̈, F)``.

    Sign convention (Fijany's): F (one row per constraint, each ``[force; torque]`` in the LOCAL
    coordinates of the contact's frame, or of a loop's frame a) is the wrench the robot exerts
    *on the environment* at each contact (a loop: frame a's body on frame b's, :class:`Loop`), and

        q̈ = q̈₀ − M⁻¹ J_cᵀ F,      q̈₀ = M⁻¹ (τ − b(q, q̇)),

    with J_c the constraints' Jacobian (a contact's: its rows of the LOCAL frame Jacobian; a
    loop's: J_a − ᵃX_b J_b, 3d: the linear rows of J_a − ᵃR_b J_b's). Pinocchio's
    ``constraintDynamics`` returns the opposite, the wrench the environment exerts on the robot:
    ``lambda_c = −F`` (its 3-D contacts and loops: the force part only). Redundant constraints
    that agree (a planar linkage's out-of-plane rows) get the forces of least norm."""
    contacts = check_constraints(model, contacts)
    names = constraint_slots(contacts)
    system = ContactSystem(contacts)
    check_finite_state("contact_fd", q=q, v=v, tau=tau)
    q_ = np.asarray(q)
    if q_.ndim == 2 and q_.shape[0] == 0:  # a batch of no states: no states out (as the kernels)
        for name, x, w in (("q", q, model.nq), ("v", v, model.nv), ("tau", tau, model.nv)):
            if np.shape(x) != (0, w):
                raise ValueError(f"{name}: expected shape (0, {w}) like q's {q_.shape}, got {np.shape(x)}")
        return np.zeros((0, model.nv)), np.zeros((0, len(contacts), 6))

    def one(q, v, tau):
        qdd0 = aba(model, q, v, tau)
        J = frame_jacobian(model, q, names, "local")
        vf = frame_velocity(model, q, v, names, "local")
        V0 = J @ qdd0 + frame_bias_acceleration(model, q, v, names, "local")
        oMf = frame_placement(model, q, names) if system.has_loops else None
        W = system.solve(V0, vf, osim_inverse(model, q, names), oMf)
        return aba(model, q, v, tau - np.einsum("kij,ki->j", J, W)), system.forces(W)

    return _batched(model, one, [("q", q, model.nq), ("v", v, model.nv), ("tau", tau, model.nv)])
