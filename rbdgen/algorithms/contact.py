"""Frames, Λ⁻¹ and the open-chain terms of contact dynamics, traced and declared (issue 13).

The equations are those of :mod:`rbdgen.reference.contact` (read its docstring first); here they
are traced over the model's selected frames (``model.frames``), so each kernel's outputs are
stacked over those frames in their order. 6-vectors facing the user are ``[linear; angular]``.

* ``frame_placement``: ᵒM_f = ᵒM_b · ᵇM_f (ᵇM_f a constant of the URDF).
* ``frame_jacobian_<reference>``: each joint's motion axis in world coordinates (ω = ᵒR_j ω_s,
  v = ᵒR_j v_s), moved to the frame's origin (``local_world_aligned``: v + ω × (p_f − p_j)) or to
  the world's (``world``: v + p_j × ω), or rotated into the frame's axes (``local``).
* ``frame_bias_acceleration_<reference>``: J̇q̇, the frame's spatial acceleration at q̈ = 0
  without gravity: aᵢ = Xᵢ a_parent + vᵢ × Sᵢ q̇ᵢ, carried into the frame.
* ``osim_inverse``: Λ⁻¹ of the stacked LOCAL Jacobians by the O(n) recursion
  Ω_i = Ψ_i Ω_p Ψ_iᵀ + S_i D_i⁻¹ S_iᵀ, written as Y − S Zᵀ − Z Sᵀ + S (D⁻¹Uᵀ Z + D⁻¹) Sᵀ with
  Y = X_i Ω_p X_iᵀ and Z = Y U_i D_i⁻¹ (a rank-n_i update of one congruence per body); cross
  blocks by Ψ applications down each frame's path from the deepest common ancestor.
* ``contact_terms``: everything ``contact_fd`` needs from the robot in one pass — q̈₀, the LOCAL
  Jacobians, the frames' open-chain accelerations V̇₀ = J q̈₀ + J̇q̇ and velocities, and Λ⁻¹; the
  small contact system (its size is the number of constrained directions) is solved by the
  caller (:func:`rbdgen.reference.contact.solve_contacts`), since the contact models are given
  at run time.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import reference as ref
from ..reference import contact as rc
from ..registry import Arg, declare
from . import spatial as S
from .dynamics import _D, _aba_values, _c_qdd, _crba_values
from .kinematics import placements
from .trace import Trace

_SWAP = (3, 4, 5, 0, 1, 2)  # [ω; v] ↔ [v; ω]


def _frames(t: Trace):
    return [t.m.frame(n) for n in t.m.frames]


def _frame_X(t: Trace, f) -> S.XForm:
    """Body → frame motion transform as constants: plux(Rᵀ, p)."""
    return S.XForm(t.consts(f.R.T), t.consts(f.p))


def _frame_pose(t, R, p, f):
    g = t.g
    Rb, pb = t.consts(f.R), t.consts(f.p)
    if f.body < 0:
        return Rb, pb
    return S.mat_mat(g, R[f.body], Rb), S.vadd(p[f.body], S.mat3_vec(g, R[f.body], pb))


def _to_reference(g, x_lin, x_ang, Rf, pf, reference):
    """A LOCAL_WORLD_ALIGNED motion (lin, ang) in ``reference`` → [lin; ang]."""
    if reference == "local_world_aligned":
        return x_lin + x_ang
    if reference == "world":  # v_O = v_f + p_f × ω
        return S.vadd(x_lin, S.cross(pf, x_ang)) + x_ang
    return S.mat3T_vec(g, Rf, x_lin) + S.mat3T_vec(g, Rf, x_ang)


def _frame_placement(t: Trace, q):
    g = t.g
    R, p = placements(t, q)
    zero, one = g.const(0.0), g.const(1.0)
    out = []
    for f in _frames(t):
        t.frame_block("frame placement", f)
        Rf, pf = _frame_pose(t, R, p, f)
        for r in range(3):
            out += list(Rf[r]) + [pf[r]]
        out += [zero, zero, zero, one]
    return {"oMf": out}


def _jacobians(t: Trace, q, reference):
    """Per frame: 6 rows × nv Values of the frame Jacobian in ``reference``."""
    m, g = t.m, t.g
    R, p = placements(t, q)
    zero = g.const(0.0)
    axes = {}  # body → list of (ω, v) world-coordinate columns (v: of the body point at p_j)

    def axis(j):
        if j not in axes:
            t.block("joint axes in the world", j)
            Sj = m.motion_subspace(j)
            axes[j] = [(S.mat3_vec(g, R[j], t.consts(Sj[:3, k])), S.mat3_vec(g, R[j], t.consts(Sj[3:, k])))
                       for k in range(Sj.shape[1])]
        return axes[j]

    out = []
    for f in _frames(t):
        J = [[zero] * m.nv for _ in range(6)]
        if f.body >= 0:
            Rf, pf = _frame_pose(t, R, p, f)
            t.frame_block(f"frame jacobian ({reference})", f)
            for j in m.ancestors(f.body):
                for k, (w, v) in enumerate(axis(j)):
                    if reference == "world":
                        col = S.vadd(v, S.cross(p[j], w)) + w
                    else:
                        lwa = S.vadd(v, S.cross(w, S.vsub(pf, p[j])))
                        col = _to_reference(g, lwa, w, Rf, pf, reference)
                    for r in range(6):
                        J[r][m.v_start[j] + k] = col[r]
        out.append(J)
    return out


def _frame_jacobian(reference):
    def algorithm(t: Trace, q):
        return {"J": [x for J in _jacobians(t, q, reference) for row in J for x in row]}
    return algorithm


def _body_motion(t: Trace, q, v):
    """Body velocities and bias accelerations (q̈ = 0, no gravity), body coordinates."""
    m, g = t.m, t.g
    vel, acc = [None] * m.nb, [None] * m.nb
    for i in range(m.nb):
        t.block("velocities and bias accelerations", i)
        X = t.X(i, q)
        par = m.parent[i]
        vJ = t.S_times(i, v[m.v_slice(i)])
        if par < 0:
            vel[i], acc[i] = vJ, t.zeros(6)
        else:
            vel[i] = S.vadd(X.motion(g, vel[par]), vJ)
            acc[i] = S.vadd(X.motion(g, acc[par]), S.crm(g, vel[i], vJ))
    return vel, acc


def _frame_motions(t: Trace, q, v, reference, what):
    g = t.g
    vel, acc = _body_motion(t, q, v)
    src = vel if what == "velocity" else acc
    R, p = placements(t, q) if reference != "local" else (None, None)
    out = []
    for f in _frames(t):
        if f.body < 0:
            out.append(t.zeros(6))
            continue
        t.frame_block(f"frame {what} ({reference})", f)
        x = _frame_X(t, f).motion(g, src[f.body])  # [ω; v] in the frame's axes, at its origin
        if reference == "local":
            out.append(x[3:] + x[:3])
            continue
        Rf, pf = _frame_pose(t, R, p, f)
        out.append(_to_reference(g, S.mat3_vec(g, Rf, x[3:]), S.mat3_vec(g, Rf, x[:3]), Rf, pf, reference))
    return out


def _frame_bias_acceleration(reference):
    def algorithm(t: Trace, q, v):
        return {"a": [x for a in _frame_motions(t, q, v, reference, "acceleration") for x in a]}
    return algorithm


# ---- Λ⁻¹ -----------------------------------------------------------------------------------------

def _articulated(t: Trace, q):
    """U_i, D_i⁻¹ of every body (the articulated-body backward pass, no velocity terms)."""
    m, g = t.m, t.g
    IA = [t.I(i) for i in range(m.nb)]
    U, Dinv = [None] * m.nb, [None] * m.nb
    for i in reversed(range(m.nb)):
        t.block("articulated inertias", i)
        Si = t.Smat(i)
        U[i] = S.mat_mat(g, IA[i], Si)
        Dinv[i] = S.spd_inverse(g, _D(t, i, Si, U[i]))  # the joint's armature on D's diagonal
        par = m.parent[i]
        if par >= 0:
            Ia = t.articulated(i, IA[i], U[i], S.mat_mat(g, U[i], Dinv[i]))
            IA[par] = S.madd(IA[par], t.X(i, q).congruence(g, Ia))
    return U, Dinv


def _X_cols(g, X, M):
    """X·M for a 6 × k M given as rows."""
    cols = [X.motion(g, c) for c in S.transpose(M)]
    return S.transpose(cols)


def _psi_left(t, q, U, Dinv, k, M):
    """Ψ_k M = X_k M − S_k D_k⁻¹ (U_kᵀ (X_k M)) for a 6 × c M (rows)."""
    g = t.g
    H = _X_cols(g, t.X(k, q), M)
    corr = S.mat_mat(g, Dinv[k], S.mat_mat(g, S.transpose(U[k]), H))  # n_k × c
    return S.msub(H, S.mat_mat(g, t.Smat(k), corr))


def _omega(t: Trace, q, U, Dinv, bodies):
    """Ω_i for the bodies given and their ancestors."""
    m, g = t.m, t.g
    need = sorted({a for b in bodies if b >= 0 for a in m.ancestors(b)})
    Om = {}
    for i in need:
        t.block("operational-space inverse inertia Ω", i)
        Si = t.Smat(i)
        K = S.mat_mat(g, S.mat_mat(g, Si, Dinv[i]), S.transpose(Si))
        par = m.parent[i]
        if par < 0:
            Om[i] = K
            continue
        X = t.X(i, q)
        Y = _X_cols(g, X, S.transpose(_X_cols(g, X, Om[par])))  # X Ω Xᵀ (Ω symmetric)
        Z = S.mat_mat(g, S.mat_mat(g, Y, U[i]), Dinv[i])
        inner = S.madd(S.mat_mat(g, S.mat_mat(g, Dinv[i], S.transpose(U[i])), Z), Dinv[i])
        SZ = S.mat_mat(g, Si, S.transpose(Z))
        SIS = S.mat_mat(g, S.mat_mat(g, Si, inner), S.transpose(Si))
        Om[i] = [[None] * 6 for _ in range(6)]
        for a in range(6):
            for b in range(a, 6):
                Om[i][a][b] = Om[i][b][a] = Y[a][b] - SZ[a][b] - SZ[b][a] + SIS[a][b]
    return Om


def _osim_values(t: Trace, q):
    """Λ⁻¹ as 6nf rows of 6nf Values."""
    m, g = t.m, t.g
    fr = _frames(t)
    U, Dinv = _articulated(t, q)
    Om = _omega(t, q, U, Dinv, [f.body for f in fr])
    n = 6 * len(fr)
    zero = g.const(0.0)
    L = [[zero] * n for _ in range(n)]
    for a, fa in enumerate(fr):
        for b in range(a, len(fr)):
            fb = fr[b]
            if fa.body < 0 or fb.body < 0:
                continue
            c = m.common_ancestor(fa.body, fb.body)
            if c < 0:
                continue
            t.frame_block("Λ⁻¹ block", fa, fb)
            B = Om[c]
            for k in m.path_down(c, fb.body):
                B = S.transpose(_psi_left(t, q, U, Dinv, k, S.transpose(B)))
            for k in m.path_down(c, fa.body):
                B = _psi_left(t, q, U, Dinv, k, B)
            Xa, Xb = _frame_X(t, fa), _frame_X(t, fb)
            put_block(L, a, b, S.transpose(_X_cols(g, Xb, S.transpose(_X_cols(g, Xa, B)))))  # X_a B X_bᵀ
    return L


def put_block(L, a: int, b: int, blk) -> None:
    """Λ⁻¹'s block of frames a ≤ b (6×6 in [ω; v]) into L as [linear; angular], and its
    transpose at (b, a); a == b: the upper triangle, mirrored."""
    for r in range(6):
        for s in range(6):
            if a == b and s < r:
                continue
            x = blk[_SWAP[r]][_SWAP[s]]
            L[6 * a + r][6 * b + s] = x
            L[6 * b + s][6 * a + r] = x


def _osim_inverse(t: Trace, q):
    return {"Linv": [x for row in _osim_values(t, q) for x in row]}


# ---- contact terms ----------------------------------------------------------------------------------

def _contact_outputs(t: Trace, qdd0, J, Linv, vel_local, bias_local):
    g = t.g
    acc0 = []
    for k, Jf in enumerate(J):
        t.frame_block("open-chain frame acceleration", t.m.frame(t.m.frames[k]))
        acc0 += [S.dot(g, row, qdd0) + bias_local[k][r] for r, row in enumerate(Jf)]
    return {"qdd0": list(qdd0), "J": [x for Jf in J for row in Jf for x in row], "acc0": acc0,
            "vf": [x for vf in vel_local for x in vf], "Linv": [x for row in Linv for x in row]}


def _contact_terms(t: Trace, q, v, tau):
    qdd0 = [r[0] for r in _aba_values(t, q, v, [[x] for x in tau])]
    J = _jacobians(t, q, "local")
    return _contact_outputs(t, qdd0, J, _osim_values(t, q),
                            _frame_motions(t, q, v, "local", "velocity"),
                            _frame_motions(t, q, v, "local", "acceleration"))


# ---- mimic joints coupled: the tree's frame terms on expanded inputs, J contracted (J G);
# Λ⁻¹ = J M⁻¹ Jᵀ with the contracted M solved densely (no coupled articulated recursion) --------

def _c_jac(c, J):
    return [[c.tau(row) for row in Jf] for Jf in J]


def _c_frame_jacobian(reference):
    def algorithm(t, c, q):
        return {"J": [x for Jf in _c_jac(c, _jacobians(t, c.q(q), reference)) for row in Jf for x in row]}
    return algorithm


def _c_frame_bias_acceleration(reference):
    def algorithm(t, c, q, v):
        return {"a": [x for a in _frame_motions(t, c.q(q), c.v(v), reference, "acceleration") for x in a]}
    return algorithm


def _c_osim(t, c, qt, J):
    Jr = [row for Jf in J for row in Jf]  # 6nf × n
    M = c.mat(_crba_values(t, qt))
    X = c.solve(M, S.transpose(Jr))        # M⁻¹ Jᵀ, n × 6nf
    t.block("Λ⁻¹ = J M⁻¹ Jᵀ (coupled)")
    return S.mat_mat(t.g, Jr, X)


def _c_osim_inverse(t, c, q):
    qt = c.q(q)
    return {"Linv": [x for row in _c_osim(t, c, qt, _c_jac(c, _jacobians(t, qt, "local"))) for x in row]}


def _c_contact_terms(t, c, q, v, tau):
    qt, vt = c.q(q), c.v(v)
    qdd0 = _c_qdd(t, c, q, v, tau)[0]
    J = _c_jac(c, _jacobians(t, qt, "local"))
    return _contact_outputs(t, qdd0, J, _c_osim(t, c, qt, J),
                            _frame_motions(t, qt, vt, "local", "velocity"),
                            _frame_motions(t, qt, vt, "local", "acceleration"))


# ---- Pinocchio counterparts (frames by name: pm.rbdgen_frames, set by whoever built pm) -------------

def _pin_frames(pm):
    return [pm.getFrameId(n) for n in pm.rbdgen_frames]


_PIN_REF = {"local": "LOCAL", "local_world_aligned": "LOCAL_WORLD_ALIGNED", "world": "WORLD"}


def _pin_placement(pin, pm, data, q):
    pin.framesForwardKinematics(pm, data, q)
    return (np.stack([np.array(data.oMf[f].homogeneous) for f in _pin_frames(pm)]),)


def _pin_jacobian(reference):
    def f(pin, pm, data, q):
        pin.computeJointJacobians(pm, data, q)
        pin.updateFramePlacements(pm, data)
        rf = getattr(pin.ReferenceFrame, _PIN_REF[reference])
        return (np.stack([pin.getFrameJacobian(pm, data, k, rf) for k in _pin_frames(pm)]),)
    return f


def _pin_bias(reference):
    def f(pin, pm, data, q, v):
        pin.forwardKinematics(pm, data, q, v, np.zeros(pm.nv))
        pin.updateFramePlacements(pm, data)
        rf = getattr(pin.ReferenceFrame, _PIN_REF[reference])
        return (np.stack([pin.getFrameAcceleration(pm, data, k, rf).vector for k in _pin_frames(pm)]),)
    return f


def _pin_J_stack(pin, pm, data, q):
    pin.computeJointJacobians(pm, data, q)
    pin.updateFramePlacements(pm, data)
    return np.vstack([pin.getFrameJacobian(pm, data, k, pin.ReferenceFrame.LOCAL) for k in _pin_frames(pm)])


def _pin_osim(pin, pm, data, q):
    J = _pin_J_stack(pin, pm, data, q)
    Mi = pin.computeMinverse(pm, data, q)
    Mi = np.triu(Mi) + np.triu(Mi, 1).T
    n = J.shape[0] // 6
    return ((J @ Mi @ J.T).reshape(n, 6, n, 6),)


def _pin_contact_terms(pin, pm, data, q, v, tau):
    qdd0 = np.array(pin.aba(pm, data, q, v, tau))
    J = _pin_J_stack(pin, pm, data, q)
    ks = _pin_frames(pm)
    n = len(ks)
    pin.forwardKinematics(pm, data, q, v, np.zeros(pm.nv))
    pin.updateFramePlacements(pm, data)
    LOCAL = pin.ReferenceFrame.LOCAL
    bias = np.concatenate([pin.getFrameAcceleration(pm, data, k, LOCAL).vector for k in ks])
    vf = np.stack([pin.getFrameVelocity(pm, data, k, LOCAL).vector for k in ks])
    Linv = _pin_osim(pin, pm, data, q)[0]
    return qdd0, J.reshape(n, 6, pm.nv), (J @ qdd0 + bias).reshape(n, 6), vf, Linv


# ---- declarations -----------------------------------------------------------------------------------

declare("frame_placement", "placement of every selected frame in the world (homogeneous 4×4)",
        inputs=("q",), outputs=(Arg("oMf", ("nf", 4, 4), "frame placements in the world"),),
        algorithm=_frame_placement,
        coupled=lambda t, c, q: _frame_placement(t, c.q(q)),
        reference=lambda model, q: ref.frame_placement(model, q),
        pinocchio=_pin_placement, pinocchio_note="Pinocchio's data.oMf after framesForwardKinematics",
        float32_tol=4e-6, fixed_tol={(32, 16): 4e-4, (48, 24): 1e-6}, gpu_shape="thread", frames=True,
        pinocchio_cpp=None)

for _r in rc.REFERENCES:
    declare(f"frame_jacobian_{_r}", f"Jacobian of every selected frame, {_r.replace('_', ' ')} ([linear; angular] × nv)",
            inputs=("q",), outputs=(Arg("J", ("nf", 6, "nv"), f"frame Jacobians ({_r})"),),
            algorithm=_frame_jacobian(_r), coupled=_c_frame_jacobian(_r),
            reference=functools.partial(lambda model, q, r: ref.frame_jacobian(model, q, None, r), r=_r),
            pinocchio=_pin_jacobian(_r), pinocchio_note=f"getFrameJacobian(…, {_PIN_REF[_r]})",
            float32_tol=4e-6, fixed_tol={(32, 16): 4e-4, (48, 24): 1e-6}, gpu_shape="thread", frames=True,
            pinocchio_cpp=None)

for _r in rc.REFERENCES:
    declare(f"frame_bias_acceleration_{_r}",
            f"J̇q̇ of every selected frame, {_r.replace('_', ' ')} (spatial acceleration at q̈ = 0, [linear; angular])",
            inputs=("q", "v"), outputs=(Arg("a", ("nf", 6), f"frame bias accelerations ({_r})"),),
            algorithm=_frame_bias_acceleration(_r), coupled=_c_frame_bias_acceleration(_r),
            reference=functools.partial(lambda model, q, v, r: ref.frame_bias_acceleration(model, q, v, None, r), r=_r),
            pinocchio=_pin_bias(_r), pinocchio_note=f"getFrameAcceleration(…, {_PIN_REF[_r]}) after forwardKinematics(q, v, 0)",
            float32_tol=2e-5, fixed_tol={(32, 16): 2e-2, (48, 24): 1e-5}, gpu_shape="thread", frames=True,
            pinocchio_cpp=None)

declare("osim_inverse", "Λ⁻¹ = J M⁻¹ Jᵀ of the selected frames (LOCAL, [linear; angular]) by an O(n) recursion",
        inputs=("q",), outputs=(Arg("Linv", ("nf", 6, "nf", 6), "operational-space inverse inertia (6nf × 6nf)"),),
        algorithm=_osim_inverse, coupled=_c_osim_inverse,
        reference=lambda model, q: ref.osim_inverse(model, q).reshape(np.shape(q)[:-1] + (model.nf, 6, model.nf, 6)),
        pinocchio=_pin_osim, pinocchio_note="J M⁻¹ Jᵀ from getFrameJacobian(LOCAL) and computeMinverse",
        float32_tol=1e-4, fixed_tol={(32, 16): 0.3, (48, 24): 4e-5}, gpu_shape="block", frames=True, needs_minv=True,
        pinocchio_cpp=None)

declare("contact_terms", "what contact_fd needs: q̈₀, LOCAL Jacobians, open-chain frame accelerations J q̈₀ + J̇q̇, "
        "frame velocities, Λ⁻¹",
        inputs=("q", "v", "tau"),
        outputs=(Arg("qdd0", ("nv",), "unconstrained forward dynamics M⁻¹(τ − b)"),
                 Arg("J", ("nf", 6, "nv"), "frame Jacobians (LOCAL)"),
                 Arg("acc0", ("nf", 6), "open-chain frame accelerations J q̈₀ + J̇q̇ (LOCAL, spatial)"),
                 Arg("vf", ("nf", 6), "frame velocities (LOCAL)"),
                 Arg("Linv", ("nf", 6, "nf", 6), "Λ⁻¹ of the frames (LOCAL)")),
        algorithm=_contact_terms, coupled=_c_contact_terms,
        reference=lambda model, q, v, tau: _ref_contact_terms(model, q, v, tau),
        pinocchio=_pin_contact_terms, pinocchio_note="aba, getFrameJacobian/Velocity/Acceleration(LOCAL), computeMinverse",
        # Q24.24 on iiwa14 with the CORDIC sin/cos (issue 18): worst 3.9e-5 over 456 states (q̈₀ as aba)
        float32_tol=2e-4, fixed_tol={(32, 16): 0.3, (48, 24): 8e-5}, gpu_shape="block", frames=True, needs_minv=True,
        pinocchio_cpp=None)


def _ref_contact_terms(model, q, v, tau):
    qdd0 = ref.aba(model, q, v, tau)
    J = ref.frame_jacobian(model, q, None, "local")
    acc0 = np.einsum("...kij,...j->...ki", J, qdd0) + ref.frame_bias_acceleration(model, q, v, None, "local")
    lead = np.shape(q)[:-1]
    Linv = ref.osim_inverse(model, q).reshape(lead + (model.nf, 6, model.nf, 6))
    return qdd0, J, acc0, ref.frame_velocity(model, q, v, None, "local"), Linv

