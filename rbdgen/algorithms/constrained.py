"""Constrained forward dynamics as one generated kernel (issue 42): ``constrained_fd``.

The constraints are chosen when generating (:meth:`RobotModel.with_constraints`,
``rbdgen.build(model, constraints=[...])``): rigid contacts (:class:`~rbdgen.Contact` ``"3d"``,
``"6d"``) and loops inside the robot (:class:`~rbdgen.Loop`). Their equations are those of
:mod:`rbdgen.reference.contact` (its docstring, :class:`~rbdgen.reference.contact.Loop`'s and
:class:`~rbdgen.reference.contact.ContactSystem`'s), traced over the constraints' frames:

1. the open-chain terms, as ``contact_terms``: q̈₀ = ABA(q, q̇, τ), the frames' LOCAL Jacobians,
   velocities and open-chain accelerations V̇₀ = J q̈₀ + J̇q̇, and Λ⁻¹ by the O(n) recursion;
2. the constraint rows P (n × 6·frames): a contact's rows of the identity; a loop's
   ``[I  −ᵃX_b]`` (6d) or ``[I₃ 0  −ᵃR_b 0]`` (3d), ᵃX_b from the frames' placements; the
   drift r (3d contact: −ω × v; loops: minus the terms of :class:`~rbdgen.Loop`);
3. S = P Λ⁻¹ Pᵀ and S x = P V̇₀ − r, solved by an unrolled LDLᵀ (no square roots, one division
   per pivot). A row whose diagonal of S is a structural zero — a direction the mechanism can
   never move in, such as a planar linkage's out-of-plane rows — is dropped when tracing (its
   force is 0: the least-norm answer, since the row of J_c is zero). Other singular systems
   (constraints that are dependent only at some configurations) divide by ~0: the loaded
   method raises :class:`~rbdgen.ContactError` where the result is not finite, and
   ``kern.contact_fd`` (solved rank-revealing at run time) is the fallback;
4. q̈ = q̈₀ + M⁻¹ J_cᵀ(−x), the second term by the articulated-body passes with the constraint
   wrenches as external forces on the frames' bodies and no velocity or gravity terms: the
   articulated inertias, U and D⁻¹ are the first pass's (the graph shares them), so this costs a
   backward bias-force pass and a forward acceleration pass.

Forces are returned per constraint, ``[force; torque]`` in the contact's frame (a loop: its frame
a), the wrench the robot exerts on the environment (a loop: frame a's body on frame b's); a 3-D
constraint's torque is 0. Pinocchio's ``lambda_c`` is −F.
"""
from __future__ import annotations

import numpy as np

from .. import reference as ref
from ..reference import contact as rc
from ..registry import Arg, Product, declare
from . import spatial as S
from .contact import _frame_X, _frame_motions, _frame_pose, _frames, _jacobians, _osim_values
from ..ir.forward import tangents
from .dynamics import _aba_values, _rnea_derivative_values, _rnea_values
from .kinematics import placements
from .trace import Trace


def _rows(t: Trace, q, vel, body_poses=None):
    """The constraint rows: a list of (coefficients {frame index: 6 Values}, r Value) per row,
    and the number of rows of each constraint. ``body_poses``: the bodies' (ᵒR_i, ᵒp_i) where
    the caller has them (the Schur form's, from the scan); None: forward kinematics."""
    m, g = t.m, t.g
    zero, one = g.const(0.0), g.const(1.0)
    frames = _frames(t)
    fi = {f.name: k for k, f in enumerate(frames)}
    poses = None
    rows, sizes = [], []

    def unit(r):
        return [one if c == r else zero for c in range(6)]

    for c in m.constraints:
        if isinstance(c, rc.Contact):
            k = fi[c.frame]
            t.frame_block(f"constraint rows ({c.model} contact)", frames[k])
            if c.model == "6d":
                rows += [({k: unit(r)}, zero) for r in range(6)]
            else:  # the point's classical acceleration a + ω × v at zero: r = −ω × v
                w = S.cross(vel[k][3:], vel[k][:3])
                rows += [({k: unit(r)}, -w[r]) for r in range(3)]
            sizes.append(c.size)
            continue
        ka, kb = fi[c.frame_a], fi[c.frame_b]
        if poses is None:
            R, p = placements(t, q) if body_poses is None else body_poses
            poses = [_frame_pose(t, R, p, f) for f in frames]
        t.frame_block(f"constraint rows ({c.model} loop)", frames[ka], frames[kb])
        (Ra, pa), (Rb, pb) = poses[ka], poses[kb]
        Rab = S.mat_mat(g, S.transpose(Ra), Rb)                         # ᵃR_b
        pab = S.mat3T_vec(g, Ra, S.vsub(pb, pa))                         # b's origin in a
        va, vb = vel[ka], vel[kb]                                        # [lin; ang]
        if c.model == "3d":
            # (a_a + ω_a × v_a) − ᵃR_b (a_b + ω_b × v_b) = 0 on the linear parts
            drift = S.vsub(S.cross(va[3:], va[:3]), S.mat3_vec(g, Rab, S.cross(vb[3:], vb[:3])))
            kp, kd = c.baumgarte
            if kp or kd:  # held at −kd ė − kp e, ė = v_a − ᵃR_b v_b, e = −ᵃp_b (constants folded in)
                edot = S.vsub(va[:3], S.mat3_vec(g, Rab, vb[:3]))
                drift = [d + g.const(kd) * ed - g.const(kp) * pp for d, ed, pp in zip(drift, edot, pab)]
            for r in range(3):
                rows.append(({ka: unit(r), kb: [-x for x in Rab[r]] + [zero] * 3}, -drift[r]))
        else:
            # ᵃX_b = [[R, [p]R], [0, R]] ([linear; angular]); its columns c ≥ 3: [p × R_c; R_c]
            Rc = S.transpose(Rab)
            pR = S.transpose([S.cross(pab, Rc[col]) for col in range(3)])
            Xab = [list(Rab[r]) + list(pR[r]) for r in range(3)] + [[zero] * 3 + list(Rab[r]) for r in range(3)]
            vb_a = [S.dot(g, Xab[r], vb) for r in range(6)]
            vrel = S.vsub(va, vb_a)
            # v_rel × v_a, the motion cross product in [linear; angular]
            drift = S.vadd(S.cross(vrel[3:], va[:3]), S.cross(vrel[:3], va[3:])) + S.cross(vrel[3:], va[3:])
            for r in range(6):
                rows.append(({ka: unit(r), kb: [-x for x in Xab[r]]}, -drift[r]))
        sizes.append(c.size)
    return rows, sizes


def _constrained(t: Trace, q, v, tau):
    """(q̈, forces, pivots per constraint as 6-lists) of the model's constraints."""
    p = _parts(t, q, v, tau)
    return p["qdd"], p["forces"], p["pivots"]


def _parts(t: Trace, q, v, tau, schur=None) -> dict:
    """Everything of the constrained solve: q̈, the forces and pivots per constraint (6-lists),
    and for the derivatives the rows, the row unknowns x, the rows kept, S's LDLᵀ factors, the
    frames' Jacobians and bias accelerations, and the constraint wrenches on the bodies.

    ``schur``: the open-chain terms by Fijany's factorization instead (Table I of seed 002,
    :mod:`rbdgen.algorithms.schur`): a callable (t, q, v, tau) → dict with ``qdd0``, ``vel``,
    ``acc0``, ``Linv``, ``poses`` and ``minv_ext`` (M⁻¹ of body forces), every piece O(log N)
    deep; then no Jacobian is formed (J and bias are None).

    Λ⁻¹ is the O(n) recursion's even where the caller has M⁻¹ (the derivatives): J M⁻¹ Jᵀ is
    fewer operations there, but a direction the mechanism never moves in is a structural zero of
    the recursion's Λ⁻¹ and only a numerical one of J M⁻¹ Jᵀ (whose rows are sums that cancel), so
    its row would be kept and divided by ~0 (measured on a random tree of continuous and prismatic
    joints: the forces wrong by 1e15; tests/test_loops.py holds it)."""
    m, g = t.m, t.g
    zero = g.const(0.0)
    frames = _frames(t)
    if schur is None:
        qdd0 = [r[0] for r in _aba_values(t, q, v, [[x] for x in tau])]
        J = _jacobians(t, q, "local")
        vel = _frame_motions(t, q, v, "local", "velocity")
        bias = _frame_motions(t, q, v, "local", "acceleration")
        Linv = _osim_values(t, q)
        acc0 = []
        for k, Jf in enumerate(J):
            t.frame_block("open-chain frame acceleration", frames[k])
            acc0.append([S.dot(g, row, qdd0) + bias[k][r] for r, row in enumerate(Jf)])
        poses = None
    else:
        sp = schur(t, q, v, tau)
        qdd0, vel, acc0, Linv, poses = sp["qdd0"], sp["vel"], sp["acc0"], sp["Linv"], sp["poses"]
        J = bias = None
    rows, sizes = _rows(t, q, vel, poses)

    t.block("constraint system S = P Λ⁻¹ Pᵀ")
    n = len(rows)
    PL = []  # P Λ⁻¹, each row as {frame: 6 Values}
    for coef, _ in rows:
        out = {}
        for kl in range(len(frames)):
            acc = [zero] * 6
            for k, cf in coef.items():
                for s in range(6):
                    acc[s] = acc[s] + S.dot(g, cf, [Linv[6 * k + r][6 * kl + s] for r in range(6)])
            out[kl] = acc
        PL.append(out)
    Smat = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            x = zero
            for k, cf in rows[j][0].items():
                x = x + S.dot(g, PL[i][k], cf)
            Smat[i][j] = Smat[j][i] = x
    rhs = []
    for coef, r in rows:
        x = zero
        for k, cf in coef.items():
            x = x + S.dot(g, cf, acc0[k])
        rhs.append(x - r)
    # a structurally zero diagonal: a direction the mechanism never moves in (its row of J_c is
    # zero) — dropped, its force 0
    keep = [i for i in range(n) if not Smat[i][i].is_zero()]
    t.block("constraint system: LDLᵀ solve")
    Sk = [[Smat[i][j] for j in keep] for i in keep]
    L, dk, Dinv = S.ldlt(g, Sk) if keep else ([], [], [])  # (no square roots, one division per pivot)
    xk = [row[0] for row in S.ldlt_substitute(L, Dinv, [[rhs[i]] for i in keep])]
    x, piv = [zero] * n, [g.const(1.0)] * n
    for i, val, d in zip(keep, xk, dk):
        x[i] = val
        piv[i] = d / Smat[i][i]  # in (0, 1] for a positive-definite S; ~0 where rows depend on others

    # the wrench the robot exerts at each frame, W_k = Σ rows P_row,kᵀ x_row; the robot takes −W_k
    t.block("constraint wrenches on the bodies")
    fext = [zero] * (6 * m.nb)
    for k, f in enumerate(frames):
        W = [zero] * 6
        for (coef, _), xi in zip(rows, x):
            cf = coef.get(k)
            if cf is not None:
                W = [W[s] + cf[s] * xi for s in range(6)]
        if f.body < 0 or all(w.is_zero() for w in W):
            continue
        t.frame_block("constraint wrench on its body", f)
        fb = _frame_X(t, f).force_T(g, [-w for w in W[3:]] + [-w for w in W[:3]])  # [n; f] on the body
        for s, val in enumerate(fb[3:] + fb[:3]):                                 # → [force; torque]
            fext[6 * f.body + s] = fext[6 * f.body + s] + val
    if schur is None:
        dqdd = [r[0] for r in _aba_values(t, q, v, [[zero] for _ in range(m.nv)], gravity=False, velocity=False,
                                          f_ext=fext)]
    else:
        dqdd = sp["minv_ext"](fext)
    t.block("q̈ = q̈₀ − M⁻¹ J_cᵀ F")
    qdd = [a + b for a, b in zip(qdd0, dqdd)]
    forces, pivots, row = [], [], 0
    one = g.const(1.0)
    for size in sizes:
        forces += x[row:row + size] + [zero] * (6 - size)
        pivots += piv[row:row + size] + [one] * (6 - size)
        row += size
    return {"qdd": qdd, "forces": forces, "pivots": pivots, "x": x, "rows": rows, "sizes": sizes, "keep": keep,
            "L": L, "Dinv": Dinv, "J": J, "bias": bias, "fext": fext, "vel": vel}


def _constrained_fd(t: Trace, q, v, tau):
    qdd, forces, pivots = _constrained(t, q, v, tau)
    return {"qdd": qdd, "forces": forces, "pivots": pivots}


def _ref_constrained_fd(model, q, v, tau):
    qdd, F = ref.contact_fd(model, q, v, tau, list(model.constraints))
    return qdd, F, _ref_pivots(model, q)


def _ref_pivots(model, q):
    """The pivots output from the reference: the unpivoted LDLᵀ of S = J_c M⁻¹ J_cᵀ over its
    rows with a nonzero diagonal (a row of J_c that is structurally zero is exactly zero in
    floating point too: the rows the kernel drops when tracing), d_k / S_kk; 1 elsewhere."""
    q = np.asarray(q, dtype=float)
    lead = q.shape[:-1]
    qs = q.reshape(-1, model.nq)
    Jc = _ref_jc(model, qs)                                    # (N, n, nv)
    Smat = Jc @ ref.minv(model, qs) @ np.swapaxes(Jc, -1, -2)
    rows = [(k, r) for k, c in enumerate(model.constraints) for r in range(c.size)]
    out = np.ones((qs.shape[0], model.nc, 6))
    for s in range(qs.shape[0]):
        keep = [i for i in range(len(rows)) if Smat[s, i, i] != 0.0]
        A = Smat[s][np.ix_(keep, keep)]
        diag = np.diag(A).copy()
        for j, i in enumerate(keep):
            out[s][rows[i]] = A[j, j] / diag[j]
            A[j + 1:, j + 1:] -= np.outer(A[j + 1:, j], A[j, j + 1:]) / A[j, j]
    return out.reshape(lead + (model.nc, 6))


def _ref_jc(model, q):
    """The constraints' Jacobian J_c (N, n, nv) from the reference's frame Jacobians and placements."""
    cons = list(model.constraints)
    slots = rc.constraint_slots(cons)
    J = ref.frame_jacobian(model, q, slots, "local")       # (N, m, 6, nv)
    oMf = ref.frame_placement(model, q, slots)             # (N, m, 4, 4)
    N = q.shape[0]
    return rc.ContactSystem(cons).row_matrix((N,), oMf) @ J.reshape(N, 6 * len(slots), model.nv)


def pin_constraint_models(pin, pm, constraints):
    """Pinocchio's RigidConstraintModels of our constraints (LOCAL): a contact on its frame's
    joint, a loop between its two frames' joints, each at the frame's placement, a loop's
    Baumgarte gains as its corrector's Kp, Kd."""
    out = []
    for c in constraints:
        ct = pin.ContactType.CONTACT_6D if c.model == "6d" else pin.ContactType.CONTACT_3D
        if isinstance(c, rc.Loop):
            A, B = pm.frames[pm.getFrameId(c.frame_a)], pm.frames[pm.getFrameId(c.frame_b)]
            cm = pin.RigidConstraintModel(ct, pm, A.parentJoint, A.placement, B.parentJoint, B.placement,
                                          pin.ReferenceFrame.LOCAL)
            if c.stabilised:
                bp = cm.m_baumgarte_parameters
                bp.Kp, bp.Kd = c.baumgarte
                cm.m_baumgarte_parameters = bp
            out.append(cm)
        else:
            A = pm.frames[pm.getFrameId(c.frame)]
            out.append(pin.RigidConstraintModel(ct, pm, A.parentJoint, A.placement, pin.ReferenceFrame.LOCAL))
    return out


def pin_constraint_dynamics(pin, pm, q, v, tau, constraints, iterations: int = 1):
    """(q̈, our forces) from Pinocchio's ``constraintDynamics`` (its lambda_c is −F; its 3-D
    constraints give the force part only). ``iterations`` > 1: the proximal iterations (mu 1e-12)
    converge on redundant constraints."""
    data = pm.createData()
    cms = pin_constraint_models(pin, pm, constraints)
    cds = pin.StdVec_RigidConstraintData([c.createData() for c in cms])
    cms = pin.StdVec_RigidConstraintModel(cms)
    pin.initConstraintDynamics(pm, data, cms, cds)
    prox = pin.ProximalSettings(1e-14, 0.0, 1) if iterations == 1 else pin.ProximalSettings(1e-14, 1e-12, iterations)
    qdd = np.array(pin.constraintDynamics(pm, data, q, v, tau, cms, cds, prox))
    lam, F, at = np.array(data.lambda_c), np.zeros((len(constraints), 6)), 0
    for k, c in enumerate(constraints):
        F[k, :c.size] = -lam[at:at + c.size]
        at += c.size
    return qdd, F


def _pin_constrained_fd(pin, pm, data, q, v, tau):
    # redundant rows (a planar linkage's) need the proximal iterations to settle on least-norm forces
    return pin_constraint_dynamics(pin, pm, q, v, tau, pm.rbdgen_constraints, iterations=50)


# ---- derivatives ------------------------------------------------------------------------------------

def _q_tangent_seeds(t: Trace, q, k: int) -> dict:
    """Seeds of forward-mode tangents: q's input nodes → their change along each of the nv
    tangent directions (columns 0 … nv−1 of ``k``), q ⊕ ε e_j (:meth:`RobotModel.integrate`):
    a 1-DoF joint's coordinate moves by ε; a free-flyer's position by R ε_lin (R its rotation)
    and its quaternion u by ½ u ⊗ (ε_ang, 0), a spherical joint's likewise; a planar joint's
    (x, y) by R(θ) (ε_x, ε_y) and θ by ε_ω. The tangent convention of the ∇ID/∇FD kernels
    (rbdgen.autodiff)."""
    m, g = t.m, t.g
    one, half = g.const(1.0), g.const(0.5)
    seeds: dict = {}

    def put(x, col, val):
        seeds.setdefault(x.node.id, [None] * k)[col] = val

    for i in range(m.nb):
        kind, qs, vs = m.joint_types[i], m.q_start[i], m.v_start[i]
        if kind in ("revolute", "continuous", "prismatic"):
            put(q[qs], vs, one)
        elif kind == "planar":
            c, s_ = g.op("cos", q[qs + 2]), g.op("sin", q[qs + 2])
            put(q[qs], vs, c)
            put(q[qs + 1], vs, s_)
            put(q[qs], vs + 1, -s_)
            put(q[qs + 1], vs + 1, c)
            put(q[qs + 2], vs + 2, one)
        else:  # floating, spherical: a quaternion (x y z w), after the position for a free-flyer
            u0, w0 = (qs + 3, vs + 3) if kind == "floating" else (qs, vs)
            if kind == "floating":
                R = t._quat_rotation(*q[qs + 3:qs + 7])
                for a in range(3):
                    for b in range(3):
                        put(q[qs + a], vs + b, R[a][b])
            uv, w = q[u0:u0 + 3], q[u0 + 3]
            for b in range(3):  # ½ u ⊗ (e_b, 0) = ½ (w e_b + u_v × e_b, −u_v · e_b)
                cross = [uv[(b + 2) % 3] if a == (b + 1) % 3 else (-uv[(b + 1) % 3] if a == (b + 2) % 3 else None)
                         for a in range(3)]
                for a in range(3):
                    val = w if a == b else cross[a]
                    if val is not None:
                        put(q[u0 + a], w0 + b, half * val)
                put(q[u0 + 3], w0 + b, -(half * uv[b]))
    return seeds


def _frame_tangents(t: Trace, v, qdd, J, body: int) -> tuple[list, list]:
    """The tangents of a frame's LOCAL spatial velocity v_f and spatial acceleration
    a_f = J q̈ + J̇ q̇ (q̈ held) along the 2·nv directions (q's tangent, then v): two lists of six
    rows ([lin; ang]) of 2·nv Values, from the frame's LOCAL Jacobian ``J`` (6 rows × nv).

    In one frame fixed at this instant (the frame's own axes: every identity below is a sum of
    cross products of motion vectors, which a fixed transform carries over), with J_e the column
    of DoF e of joint i, λ = i's parent body, v_x and a_x the velocity and acceleration (no
    gravity) of body x, and a joint's columns attached to its child body, so that moving DoF e
    moves the subtree of i by the twist J_e (q ⊕ ε e_e) and ∂J_c/∂q_e = J_e × J_c below it:

        ∂v_f/∂q_e = dV_e = v_λ × J_e,               ∂v_f/∂q̇_e = J_e,
        ∂a_f/∂q_e = a_λ × J_e − (v_f − v_λ) × dV_e,  ∂a_f/∂q̇_e = dV_e − (v_f − v_i) × J_e,

    (a_b = Σ_c J_c q̈_c + (v_{j(c)} × J_c) q̇_c over the columns c on the path, differentiated; the
    last two include the change of the frame's own axes, −J_e × a_f and −J_e × v_f). The path's
    velocities are partial sums of J's columns times q̇, a_i = a_λ + Σ_c J_c q̈_c + v_λ × vJ_i:
    O(path) per frame instead of forward-mode tangents through the kinematics."""
    m, g = t.m, t.g
    nv = m.nv
    zero = g.const(0.0)
    dvel = [[zero] * (2 * nv) for _ in range(6)]
    dacc = [[zero] * (2 * nv) for _ in range(6)]

    def column(e):  # Featherstone's [ang; lin]
        return [J[3][e], J[4][e], J[5][e], J[0][e], J[1][e], J[2][e]]

    def put(rows, c, x):  # [ang; lin] → rows [lin; ang]
        for r, val in enumerate(x[3:] + x[:3]):
            rows[r][c] = val

    path = []  # (the joint's DoFs, v_λ, a_λ, v_i) per joint on the path, root first
    vl, al = t.zeros(6), t.zeros(6)
    for j in reversed(m.ancestors(body)):
        dofs = range(m.v_start[j], m.v_start[j] + m.nv_joint(j))
        vJ, aJ = t.zeros(6), t.zeros(6)
        for e in dofs:
            Je = column(e)
            vJ = [x + y * v[e] for x, y in zip(vJ, Je)]
            aJ = [x + y * qdd[e] for x, y in zip(aJ, Je)]
        vi = S.vadd(vl, vJ)
        path.append((dofs, vl, al, vi))
        vl, al = vi, S.vadd(S.vadd(al, aJ), S.crm(g, vl, vJ))
    vf = vl
    for dofs, vl, al, vi in path:
        wl, wi = S.vsub(vf, vl), S.vsub(vf, vi)
        for e in dofs:
            Je = column(e)
            dV = S.crm(g, vl, Je)
            put(dvel, e, dV)
            put(dvel, nv + e, Je)
            put(dacc, e, S.vsub(S.crm(g, al, Je), S.crm(g, wl, dV)))
            put(dacc, nv + e, S.vsub(dV, S.crm(g, wi, Je)))
    return dvel, dacc


def _constrained_fd_derivatives(t: Trace, q, v, tau):
    """q̈, F and their derivatives along the tangent of q, v and τ by the implicit-function
    theorem on the KKT system of :func:`_parts` (see docs/contact.md):

        dq̈ = −[C  (S⁻¹J_cM⁻¹)ᵀ] [∂E₁; ∂E₂],   dF = −[S⁻¹J_cM⁻¹  −S⁻¹] [∂E₁; ∂E₂],
        C = ∂q̈/∂τ = M⁻¹ − M⁻¹J_cᵀ S⁻¹ J_c M⁻¹,   ∂F/∂τ = S⁻¹ J_c M⁻¹,

    ∂E₁ (inverse dynamics at the solution, the constraint wrenches on their bodies) by the
    analytical RNEA derivatives, ∂E₂ (the constraint accelerations J_c q̈ + γ) by forward-mode
    tangents; the four products with [∂E₁; ∂E₂] are the epilogue's loops (:class:`Product`)."""
    m, g = t.m, t.g
    nv = m.nv
    zero, one = g.const(0.0), g.const(1.0)
    t.block("M⁻¹")
    Minv = _aba_values(t, q, v, [[one if c == d else zero for d in range(nv)] for c in range(nv)],
                       gravity=False, velocity=False, symmetric=True)
    p = _parts(t, q, v, tau)
    qdd, x, rows, keep = p["qdd"], p["x"], p["rows"], p["keep"]
    k = 2 * nv
    seeds = _q_tangent_seeds(t, q, k)
    for i, vi in enumerate(v):
        seeds.setdefault(vi.node.id, [None] * k)[nv + i] = one
    held = {a.node.id for a in qdd} | {a.node.id for a in x}  # the solution, held while differentiating
    # ∂E₁: M q̈ + b + J_cᵀ F with q̈ and F held. The analytical derivatives hold the wrenches fixed
    # in their bodies' frames; a loop's wrench on its second body is −ᵇX_a F, which turns with q:
    # its tangent δf enters E₁ linearly, as inverse dynamics of δf alone (no motion, no gravity)
    dq, dv = _rnea_derivative_values(t, q, v, qdd, f_ext=p["fext"])
    fext = p["fext"]
    dfext = tangents(g, fext, seeds, held, k)
    assert all(te[d].is_zero() for te in dfext for d in range(nv, k)), "a constraint wrench depends on v"
    for d in range(nv):
        col = [te[d] for te in dfext]
        if all(c.is_zero() for c in col):
            continue
        t.block(f"∂/∂q of the loop wrenches, column {d}")
        tau_d = _rnea_values(t, q, t.zeros(nv), t.zeros(nv), gravity=False, f_ext=col)[0]
        for r in range(nv):
            dq[r][d] = dq[r][d] + tau_d[r]
    t.block("∂/∂(q, v) of the constraint accelerations J_c q̈ + γ")
    # the frames' LOCAL velocities and accelerations carry their tangents from _frame_tangents;
    # forward mode does the rest (the rows' coefficients and drift terms: a loop's ᵃX_b, ω × v)
    frames, accs = _frames(t), {}
    for i in keep:
        for fk in rows[i][0]:
            if fk in accs:
                continue
            accs[fk] = [S.dot(g, row, qdd) + p["bias"][fk][rr] for rr, row in enumerate(p["J"][fk])]
            if frames[fk].body < 0:
                continue
            t.frame_block("∂/∂(q, v) of the frame's velocity and acceleration", frames[fk])
            dvel, dacc = _frame_tangents(t, v, qdd, p["J"][fk], frames[fk].body)
            for val, dval in list(zip(p["vel"][fk], dvel)) + list(zip(accs[fk], dacc)):
                if val.node.op not in ("const", "input"):
                    seeds.setdefault(val.node.id, dval)
    t.block("∂/∂(q, v) of the constraint accelerations J_c q̈ + γ")
    E2 = []
    for i in keep:                                                  # J_c q̈ + γ (drift, Baumgarte)
        coef, r = rows[i]
        e = zero
        for fk, cf in coef.items():
            e = e + S.dot(g, cf, accs[fk])
        E2.append(e - r)
    B = tangents(g, E2, seeds, held, k)                             # kept rows × 2nv
    Jc = []
    for i in keep:
        row = [zero] * nv
        for fk, cf in rows[i][0].items():
            for c in range(nv):
                row[c] = row[c] + S.dot(g, cf, [p["J"][fk][rr][c] for rr in range(6)])
        Jc.append(row)
    nk = len(keep)
    t.block("M⁻¹ J_cᵀ")
    MiJ = [[S.dot(g, Minv[a], Jc[r]) for r in range(nk)] for a in range(nv)]
    t.block("S⁻¹, S⁻¹ J_c M⁻¹ and ∂q̈/∂τ")
    Sinv = S.ldlt_substitute(p["L"], p["Dinv"], [[one if r == c else zero for c in range(nk)] for r in range(nk)])
    SiJM = [[S.dot(g, Sinv[r], [MiJ[c][s] for s in range(nk)]) for c in range(nv)] for r in range(nk)]
    C = [[None] * nv for _ in range(nv)]                            # ∂q̈/∂τ, symmetric: one triangle
    for a in range(nv):
        for c in range(a, nv):
            C[a][c] = C[c][a] = Minv[a][c] - S.dot(g, MiJ[a], [SiJM[r][c] for r in range(nk)])
    # the products' operands: left factors (rows of the output) and the partials [∂E₁; ∂E₂]
    # (columns of q, then of v), scratch arrays of the straight-line code
    left_qdd = [y for a in range(nv) for y in C[a] + [SiJM[r][a] for r in range(nk)]]
    n = len(rows)
    kept_at = {i: r for r, i in enumerate(keep)}
    left_F, dF_dtau, row = [], [], 0
    for size in p["sizes"]:
        for s_ in range(6):
            r = kept_at.get(row + s_) if s_ < size else None
            if r is None:
                left_F += [zero] * (nv + nk)
                dF_dtau += [zero] * nv
            else:
                left_F += SiJM[r] + [-y for y in Sinv[r]]
                dF_dtau += SiJM[r]
        row += size
    assert row == n
    part_q = [y for rr in dq for y in rr] + [B[r][d] for r in range(nk) for d in range(nv)]
    part_v = [y for rr in dv for y in rr] + [B[r][nv + d] for r in range(nk) for d in range(nv)]
    return {"qdd": p["qdd"], "forces": p["forces"], "pivots": p["pivots"],  # (pivots: declared last)
            "dqdd_dq": Product(("kkt_qdd_left", left_qdd), ("kkt_partials_q", part_q), -1.0),
            "dqdd_dv": Product(("kkt_qdd_left", left_qdd), ("kkt_partials_v", part_v), -1.0),
            "dqdd_dtau": [y for rr in C for y in rr],
            "dF_dq": Product(("kkt_force_left", left_F), ("kkt_partials_q", part_q), -1.0),
            "dF_dv": Product(("kkt_force_left", left_F), ("kkt_partials_v", part_v), -1.0),
            "dF_dtau": dF_dtau}


def _ref_constrained_fd_derivatives(model, q, v, tau):
    """The reference: the NumPy contact_fd and its derivatives by a sixth-order central
    difference along the tangent (q ⊕ h e_j, v + h e_j, τ + h e_j; h = 1e-3: measured ≤ 2e-11
    relative against Pinocchio's on the iiwa), independent of the kernel's implicit-function form."""
    q = np.asarray(q, dtype=float)
    if q.ndim == 2:
        outs = [_ref_constrained_fd_derivatives(model, a, b, c) for a, b, c in zip(q, v, tau)]
        return tuple(np.stack(x) for x in zip(*outs))
    v, tau = np.asarray(v, dtype=float), np.asarray(tau, dtype=float)
    cons, nv, h = list(model.constraints), model.nv, 1e-3

    def f(q_, v_, t_):
        a, b = ref.contact_fd(model, q_, v_, t_, cons)
        return np.concatenate([a, b.reshape(-1)])

    def d(step):
        cols = []
        for j in range(nv):
            y = [f(*step(j, s * h)) for s in (3, 2, 1, -1, -2, -3)]
            cols.append((y[0] - 9 * y[1] + 45 * y[2] - 45 * y[3] + 9 * y[4] - y[5]) / (60 * h))
        return np.stack(cols, axis=1)

    e = np.eye(nv)
    Dq = d(lambda j, s: (model.integrate(q, s * e[j]), v, tau))
    Dv = d(lambda j, s: (q, v + s * e[j], tau))
    Dt = d(lambda j, s: (q, v, tau + s * e[j]))
    qdd, F, piv = _ref_constrained_fd(model, q, v, tau)
    nc = model.nc
    return (qdd, F, Dq[:nv], Dv[:nv], Dt[:nv], Dq[nv:].reshape(nc, 6, nv), Dv[nv:].reshape(nc, 6, nv),
            Dt[nv:].reshape(nc, 6, nv), piv)


def _pin_constrained_fd_derivatives(pin, pm, data, q, v, tau):
    cons = pm.rbdgen_constraints
    if any(isinstance(c, rc.Loop) and c.model == "3d" for c in cons):
        # measured: on two 4-joint arms joined 3d, and on the four-bar closed at rest, Pinocchio
        # 4.1's ddq_dq differs from central differences of its own constraintDynamics by 1.8×
        # and 3× its size (its 6d loops and contacts agree to 1e-10 … 1e-14)
        raise NotImplementedError("Pinocchio's computeConstraintDynamicsDerivatives disagrees with central "
                                  "differences of its own constraintDynamics for 3d loops: not compared")
    data = pm.createData()
    cms = pin.StdVec_RigidConstraintModel(pin_constraint_models(pin, pm, cons))
    cds = pin.StdVec_RigidConstraintData([c.createData() for c in cms])
    pin.initConstraintDynamics(pm, data, cms, cds)
    prox = pin.ProximalSettings(1e-14, 1e-12, 50)
    qdd = np.array(pin.constraintDynamics(pm, data, q, v, tau, cms, cds, prox))
    pin.computeConstraintDynamicsDerivatives(pm, data, cms, cds, prox)
    nv = pm.nv

    def per_constraint(M):
        out, at = np.zeros((len(cons), 6, M.shape[-1])), 0
        for k_, c in enumerate(cons):
            out[k_, :c.size] = -M[at:at + c.size]
            at += c.size
        return out

    lam = np.array(data.lambda_c)
    F, at = np.zeros((len(cons), 6)), 0
    for k_, c in enumerate(cons):
        F[k_, :c.size] = -lam[at:at + c.size]
        at += c.size
    # (no pivots: the last output, which zip() in the comparisons leaves out)
    return (qdd, F, np.array(data.ddq_dq)[:, :nv], np.array(data.ddq_dv), np.array(data.ddq_dtau),
            per_constraint(np.array(data.dlambda_dq)), per_constraint(np.array(data.dlambda_dv)),
            per_constraint(np.array(data.dlambda_dtau)))


declare("constrained_fd", "forward dynamics under the contacts and loops chosen when generating: q̈ and the "
        "constraint forces (KKT, Λ⁻¹ by the O(n) recursion, unrolled LDLᵀ)",
        inputs=("q", "v", "tau"),
        outputs=(Arg("qdd", ("nv",), "constrained joint accelerations"),
                 Arg("forces", ("nc", 6), "each constraint's wrench, [force; torque] in its (frame a's) LOCAL "
                     "coordinates, what the robot exerts (Pinocchio's lambda_c is −F; 3d: torque 0)"),
                 Arg("pivots", ("nc", 6), "each constraint row's LDLᵀ pivot over its diagonal of S = J_c M⁻¹ J_cᵀ, "
                     "d_k / S_kk in (0, 1]; ~0: rows dependent at this state (the loaded method raises "
                     "ContactError); 1 for rows dropped when tracing and padding")),
        algorithm=_constrained_fd,
        reference=_ref_constrained_fd,
        pinocchio=_pin_constrained_fd, pinocchio_note="constraintDynamics with RigidConstraintModel (LOCAL) per "
        "contact and loop; lambda_c = −F",
        # measured (300 float32, 100 ap_fixed<48,24> states; iiwa 6d, quadruped 4×3d, two_arms 3d, four_bar 3d):
        # worst 2.0e-3 and 2.4e-3 (both the iiwa's). Q16.16 leaves ~no digits (0.49 on the iiwa): use Q24.24.
        # Locked mechanisms at random postures (a 6d weld leaving ≤ 2 DoF) lose digits with cond(S):
        # the pivots output says how many (docs/contact.md).
        float32_tol=5e-3, fixed_tol={(32, 16): 0.6, (48, 24): 1e-2}, gpu_shape="block", frames=True,
        needs_minv=True, constraints=True,
        # the harness (benchmarks/pinocchio_bench.cpp) builds rbd_cmodels from the bench's contacts
        pinocchio_cpp=("pinocchio/algorithm/constrained-dynamics.hpp",
                       "pin::constraintDynamics(model, data, q[i], v[i], tau[i], rbd_cmodels, rbd_cdatas, rbd_prox)"))

declare("constrained_fd_derivatives", "constrained_fd and its derivatives along the tangent of q, v and τ (the "
        "implicit-function theorem on the KKT system; Pinocchio's computeConstraintDynamicsDerivatives)",
        inputs=("q", "v", "tau"),
        outputs=(Arg("qdd", ("nv",), "constrained joint accelerations (as constrained_fd)"),
                 Arg("forces", ("nc", 6), "each constraint's wrench (as constrained_fd)"),
                 Arg("dqdd_dq", ("nv", "nv"), "∂q̈/∂q along the tangent (q ⊕ ε e_j)"),
                 Arg("dqdd_dv", ("nv", "nv"), "∂q̈/∂v"),
                 Arg("dqdd_dtau", ("nv", "nv"), "∂q̈/∂τ"),
                 Arg("dF_dq", ("nc", 6, "nv"), "∂F/∂q along the tangent"),
                 Arg("dF_dv", ("nc", 6, "nv"), "∂F/∂v"),
                 Arg("dF_dtau", ("nc", 6, "nv"), "∂F/∂τ"),
                 Arg("pivots", ("nc", 6), "the LDLᵀ pivot ratios (as constrained_fd)")),
        algorithm=_constrained_fd_derivatives,
        reference=_ref_constrained_fd_derivatives,
        pinocchio=_pin_constrained_fd_derivatives,
        pinocchio_note="computeConstraintDynamicsDerivatives after constraintDynamics (LOCAL RigidConstraintModels; "
        "dlambda = −dF); not for 3d loops, where Pinocchio's disagrees with differences of its own dynamics",
        # measured: float32 worst 2.3e-3 (iiwa 6d, 40 states; quadruped 4×3d 5.8e-6); states whose S is
        # ill-conditioned lose ~cond(S)² × 6e-8 (two arms joined 3d at random postures: all digits at
        # cond 1e5), which the loaded method refuses (PIVOT_MIN). Fixed point leaves no digits (Q16.16:
        # 1.0; Q24.24 overflows, 76): no Q24.24 bound, use float or double on the FPGA.
        float32_tol=1e-2, fixed_tol={(32, 16): 1.0}, gpu_shape="block", frames=True,
        needs_minv=True, constraints=True,
        pinocchio_cpp=("pinocchio/algorithm/constrained-dynamics-derivatives.hpp",
                       "pin::constraintDynamics(model, data, q[i], v[i], tau[i], rbd_cmodels, rbd_cdatas, rbd_prox); "
                       "pin::computeConstraintDynamicsDerivatives(model, data, rbd_cmodels, rbd_cdatas, rbd_prox)"))
