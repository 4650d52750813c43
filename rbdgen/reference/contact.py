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

from dataclasses import dataclass

import numpy as np

from .. import spatial as sp
from ..errors import RbdgenError
from ..model import RobotModel
from .dynamics import _batched, _kinematics, aba, minv

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

CONTACT_MODELS = ("6d", "3d", "type1", "type2", "general")


@dataclass(frozen=True, eq=False)
class Contact:
    """A contact (or any closing constraint) at a frame, in Fijany's terms: the frame's motion
    space splits into free directions H (6 × n_f) and constrained directions W (6 × n_c), both
    orthonormal and complementary, in the frame's LOCAL coordinates ``[linear; angular]``.

    ``model``:

    * ``"6d"``: rigid, W = I: the frame's spatial acceleration (LOCAL) is held at zero;
    * ``"3d"``: a rigid point contact: the classical linear acceleration of the frame's origin is
      held at zero, the frame may rotate; the force has no torque (Pinocchio's ``CONTACT_3D``);
    * ``"type1"``: Wᵀ V̇ = G_C and the free-direction force K_F are given (defaults: 0);
    * ``"type2"``: Wᵀ V̇ = G_C, and K_F = φ K_C + d (φ: n_f × n_c; e.g. friction);
    * ``"general"``: V̇ = M₁Ω + κ₁ and F = M₂Ω + κ₂ with Ω (6) unknown (M₁, M₂: 6 × 6).

    W alone is enough for type1/type2 (H is then its orthonormal complement). Every number is
    checked here: shapes, finiteness, orthonormality (to 1e-9)."""

    frame: str
    model: str = "6d"
    H: np.ndarray | None = None
    W: np.ndarray | None = None
    G_C: np.ndarray | None = None
    K_F: np.ndarray | None = None
    phi: np.ndarray | None = None
    d: np.ndarray | None = None
    M1: np.ndarray | None = None
    kappa1: np.ndarray | None = None
    M2: np.ndarray | None = None
    kappa2: np.ndarray | None = None

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        if not isinstance(self.frame, str):
            raise ValueError(f"Contact: frame must be a URDF link name, got {self.frame!r}")
        where = f"Contact({self.frame!r}, {self.model!r})"
        if self.model not in CONTACT_MODELS:
            raise ValueError(f"{where}: unknown contact model; one of {', '.join(map(repr, CONTACT_MODELS))}")
        given = {k for k in ("H", "W", "G_C", "K_F", "phi", "d", "M1", "kappa1", "M2", "kappa2")
                 if getattr(self, k) is not None}
        takes = {"6d": set(), "3d": set(), "type1": {"H", "W", "G_C", "K_F"},
                 "type2": {"H", "W", "G_C", "phi", "d"}, "general": {"M1", "kappa1", "M2", "kappa2"}}[self.model]
        extra = sorted(given - takes)
        if extra:
            raise ValueError(f"{where}: does not take {', '.join(extra)} (it takes {', '.join(sorted(takes)) or 'no parameters'})")

        def arr(name, shape):
            x = getattr(self, name)
            try:
                a = np.array(x, dtype=float)
            except (TypeError, ValueError):
                raise ValueError(f"{where}: {name} is not an array of numbers") from None
            if a.shape != shape:
                raise ValueError(f"{where}: {name} has shape {a.shape}, expected {shape}")
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{where}: {name} has NaN or infinite entries")
            a.setflags(write=False)
            set_(name, a)
            return a

        if self.model in ("type1", "type2"):
            if self.W is None:
                raise ValueError(f"{where}: W (6 × n_c, the constrained directions) is required")
            try:
                W = np.array(self.W, dtype=float)
            except (TypeError, ValueError):
                raise ValueError(f"{where}: W is not an array of numbers") from None
            if W.shape == (6,):
                W = W.reshape(6, 1)
            if W.ndim != 2 or W.shape[0] != 6 or not 1 <= W.shape[1] <= 6:
                raise ValueError(f"{where}: W has shape {W.shape}, expected (6, n_c) with 1 ≤ n_c ≤ 6")
            nc = W.shape[1]
            set_("W", W)
            W = arr("W", (6, nc))
            if not np.allclose(W.T @ W, np.eye(nc), atol=1e-9):
                raise ValueError(f"{where}: W is not orthonormal (WᵀW ≠ I to 1e-9)")
            if self.H is None:
                u, _, _ = np.linalg.svd(W, full_matrices=True)
                H = u[:, nc:]
                set_("H", H)
            H = arr("H", (6, 6 - nc))
            if not np.allclose(np.hstack([H, W]).T @ np.hstack([H, W]), np.eye(6), atol=1e-9):
                raise ValueError(f"{where}: H and W are not orthonormal complements ([H W] is not orthogonal to 1e-9)")
            set_("G_C", np.zeros(nc) if self.G_C is None else self.G_C)
            arr("G_C", (nc,))
            if self.model == "type1":
                set_("K_F", np.zeros(6 - nc) if self.K_F is None else self.K_F)
                arr("K_F", (6 - nc,))
            else:
                if self.phi is None:
                    raise ValueError(f"{where}: phi (n_f × n_c) is required")
                arr("phi", (6 - nc, nc))
                set_("d", np.zeros(6 - nc) if self.d is None else self.d)
                arr("d", (6 - nc,))
        elif self.model == "general":
            for k in ("M1", "M2"):
                if getattr(self, k) is None:
                    raise ValueError(f"{where}: {k} (6 × 6) is required")
                arr(k, (6, 6))
            for k in ("kappa1", "kappa2"):
                set_(k, np.zeros(6) if getattr(self, k) is None else getattr(self, k))
                arr(k, (6,))

    @property
    def size(self) -> int:
        """Number of unknowns (and of equations) this contact adds."""
        return {"6d": 6, "3d": 3, "general": 6}.get(self.model) or self.W.shape[1]

    def rows(self):
        """(P, Q, A, b): the contact's equations P V̇ + Q x = r on the frame's LOCAL spatial
        acceleration V̇ (r: :meth:`rhs`) and its force F = A x + b, for its unknowns x."""
        z6 = np.zeros(6)
        if self.model == "6d":
            return np.eye(6), np.zeros((6, 6)), np.eye(6), z6
        if self.model == "3d":
            P = np.eye(6)[:3]
            return P, np.zeros((3, 3)), P.T, z6
        nc = self.size
        if self.model == "type1":
            return self.W.T, np.zeros((nc, nc)), self.W, self.H @ self.K_F
        if self.model == "type2":
            return self.W.T, np.zeros((nc, nc)), self.W + self.H @ self.phi, self.H @ self.d
        return np.eye(6), -self.M1, self.M2, self.kappa2

    def rhs(self, vf):
        """r of :meth:`rows` for the frame's LOCAL velocity ``vf`` (…, 6): the 3-D contact holds
        the classical acceleration a + ω × v of the point at zero, so r = −ω × v."""
        vf = np.asarray(vf)
        if self.model == "3d":
            return -_cross(vf[..., 3:], vf[..., :3])
        r = {"6d": np.zeros(6), "general": self.kappa1}.get(self.model)
        r = self.G_C if r is None else r
        return np.broadcast_to(r, vf.shape[:-1] + r.shape)


class ContactError(RbdgenError, ValueError):
    """A contact model the robot cannot satisfy (a singular contact system)."""


def _check_contacts(model, contacts):
    if isinstance(contacts, Contact):
        contacts = [contacts]
    try:
        contacts = list(contacts)
    except TypeError:
        raise ValueError(f"contacts must be a list of rbdgen.Contact, got {type(contacts).__name__}") from None
    if not contacts:
        raise ValueError("contacts: the list is empty (use aba for the unconstrained dynamics)")
    for c in contacts:
        if not isinstance(c, Contact):
            raise ValueError(f"contacts must be rbdgen.Contact objects, got {type(c).__name__}")
        model.frame(c.frame)
    return contacts


def _cross(a, b):
    """a × b over the last axis (np.cross costs ~10 µs a call on short vectors)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


class ContactSystem:
    """The stacked equations of a list of contacts, built once (see :func:`solve_contacts`):
    every contact's P V̇ + Q x = r on its frame's LOCAL spatial acceleration V̇ and its force
    F = A x + b, for its unknowns x."""

    def __init__(self, contacts):
        self.contacts = tuple(contacts)
        m = self.m = len(self.contacts)
        parts = [c.rows() for c in self.contacts]
        n = self.n = sum(Pk.shape[0] for Pk, *_ in parts)
        P, Q, A, b = np.zeros((n, 6 * m)), np.zeros((n, n)), np.zeros((6 * m, n)), np.zeros(6 * m)
        r0 = np.zeros(n)
        self._point = []  # (rows, contact index) of the 3-D contacts: r = −ω × v
        row = 0
        for k, (c, (Pk, Qk, Ak, bk)) in enumerate(zip(self.contacts, parts)):
            s = slice(row, row + Pk.shape[0])
            P[s, 6 * k : 6 * k + 6], Q[s, s], A[6 * k : 6 * k + 6, s], b[6 * k : 6 * k + 6] = Pk, Qk, Ak, bk
            if c.model == "3d":
                self._point.append((s, k))
            else:
                r0[s] = c.rhs(np.zeros(6))
            row += Pk.shape[0]
        self.P, self.Q, self.A, self.b, self.r0 = P, Q, A, b, r0
        self._pk = np.array([k for _, k in self._point], dtype=int)
        self._prows = np.array([list(range(s.start, s.stop)) for s, _ in self._point], dtype=int).reshape(-1, 3)
        self.PT, self.AT = P.T.copy(), A.T.copy()

    def solve(self, acc0, vf, Linv):
        P, m = self.P, self.m
        lead = acc0.shape[:-2]
        finite = np.isfinite(acc0).all(axis=(-2, -1)) & np.isfinite(vf).all(axis=(-2, -1)) \
            & np.isfinite(Linv).all(axis=(-2, -1))
        if not np.all(finite):  # not a singular system: nothing to solve (it was reported as "singular")
            at = "" if not lead else f" (state {int(np.flatnonzero(~np.asarray(finite).reshape(-1))[0])} of the batch)"
            raise ValueError(f"the contact terms (frame accelerations, velocities, Λ⁻¹) are NaN or infinite{at}: "
                             f"q, v and tau must be finite (and small enough not to overflow)")
        r = np.broadcast_to(self.r0, lead + (self.n,))
        if self._point:
            r = r.copy()
            w, v = vf[..., self._pk, 3:], vf[..., self._pk, :3]
            r[..., self._prows] = -_cross(w, v)
        S = P @ Linv @ self.A - self.Q
        rhs = (acc0.reshape(lead + (6 * m,)) - Linv @ self.b) @ self.PT - r
        with np.errstate(all="ignore"):
            try:
                Si = np.linalg.inv(S)
            except np.linalg.LinAlgError:
                Si = np.full_like(S, np.nan)
            # the 1-norm condition number, from the inverse the solution needs anyway
            cond = np.abs(S).sum(axis=-2).max(axis=-1) * np.abs(Si).sum(axis=-2).max(axis=-1)
        ok = np.isfinite(cond) & (cond < 1e12)
        if not np.all(ok):
            which = ", ".join(f"{c.frame} ({c.model}: {c.size} constrained)" for c in self.contacts)
            at = "" if not lead else f" (state {int(np.flatnonzero(~np.asarray(ok).reshape(-1))[0])} of the batch)"
            raise ContactError(f"the contact system is singular{at}: Wᵀ Λ⁻¹ W is not invertible, so the contacts "
                               f"{which} constrain directions the robot cannot move independently at this "
                               f"configuration (more constrained directions than it can move, or a singular posture)")
        x = (Si @ rhs[..., None])[..., 0]
        return (x @ self.AT + self.b).reshape(lead + (m, 6))


def solve_contacts(contacts, acc0, vf, Linv):
    """The contact forces F (…, m, 6), LOCAL ``[force; torque]``, from the open-chain terms of the
    m contact frames: ``acc0`` their LOCAL open-chain accelerations V̇₀ = J q̈₀ + J̇q̇ (…, m, 6),
    ``vf`` their LOCAL velocities (…, m, 6), ``Linv`` their Λ⁻¹ (…, 6m, 6m). Every contact's
    equations P V̇ + Q x = r with V̇ = V̇₀ − Λ⁻¹ F and F = A x + b, stacked:

        (P Λ⁻¹ A − Q) x = P V̇₀ − P Λ⁻¹ b − r

    (rigid contacts: Wᵀ Λ⁻¹ W K_C = Wᵀ V̇₀ − r, Fijany's system). Leading dimensions are a batch.
    A system whose 1-norm condition number exceeds 1e12 is a :class:`ContactError`."""
    return ContactSystem(contacts).solve(np.asarray(acc0, dtype=float), np.asarray(vf, dtype=float),
                                         np.asarray(Linv, dtype=float))


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
    """Forward dynamics with contacts: ``(q̈, F)``.

    Sign convention (Fijany's): F (m × 6, each ``[force; torque]`` in the contact frame's LOCAL
    coordinates) is the wrench the robot exerts *on the environment* at each contact, and

        q̈ = q̈₀ − M⁻¹ Jᵀ F,      q̈₀ = M⁻¹ (τ − b(q, q̇)),

    with J the stacked LOCAL frame Jacobians. Pinocchio's ``constraintDynamics`` returns the
    opposite, the wrench the environment exerts on the robot: ``lambda_c = −F`` (its 3-D
    contacts: the force part only)."""
    contacts = _check_contacts(model, contacts)
    names = [c.frame for c in contacts]
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
        F = solve_contacts(contacts, V0, vf, osim_inverse(model, q, names))
        return aba(model, q, v, tau - np.einsum("kij,ki->j", J, F)), F

    return _batched(model, one, [("q", q, model.nq), ("v", v, model.nv), ("tau", tau, model.nv)])
