"""Frames, Λ⁻¹ and contact dynamics (issue 13).

Oracles: Pinocchio (placements, Jacobians and bias accelerations in its three references;
J M⁻¹ Jᵀ from its own Jacobian and M⁻¹; ``constraintDynamics`` for rigid 6-D and 3-D
contacts), the dense product J·minv·Jᵀ of our reference (for the O(n) recursion, on random
trees), and the defining equations of Fijany's Type I / Type II / general contact models (their
residuals, and M q̈ + b = τ − Jᵀ F through our RNEA). Every frame kernel is also run on every
robot case against the reference by test_cpu_kernels / test_ir / test_reference_vs_pinocchio
(conftest.case_frames selects the frames there).
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import rbdgen
from rbdgen import reference as ref
from rbdgen import robots
from rbdgen.reference import Contact, ContactError

from conftest import ROBOT_CASES, TOL64, assert_one_error_line, load_case, random_state, relerr, run_main

LEGS = ("FL_foot", "FR_foot", "RL_foot", "RR_foot")
KERNELS = ("aba", "frame_placement", "frame_jacobian_local", "frame_jacobian_local_world_aligned", "frame_jacobian_world",
           "frame_bias_acceleration_local", "frame_bias_acceleration_local_world_aligned",
           "frame_bias_acceleration_world", "osim_inverse", "contact_terms")


def _case(case_id):
    return load_case(*[c for c in ROBOT_CASES if c.id == case_id][0].values)


def _pin_model(model):
    pm = pin.buildModelFromUrdf(model.source, pin.JointModelFreeFlyer()) if model.floating_base \
        else pin.buildModelFromUrdf(model.source)
    pm.gravity.linear = np.asarray(model.gravity)
    return pm


def _pin_contact_fd(model, q, v, tau, frames, kind):
    pm = _pin_model(model)
    data = pm.createData()
    ct = pin.ContactType.CONTACT_6D if kind == "6d" else pin.ContactType.CONTACT_3D
    cms = []
    for f in frames:
        fr = pm.frames[pm.getFrameId(f)]
        cms.append(pin.RigidConstraintModel(ct, pm, fr.parentJoint, fr.placement, pin.ReferenceFrame.LOCAL))
    cds = pin.StdVec_RigidConstraintData([c.createData() for c in cms])
    cms = pin.StdVec_RigidConstraintModel(cms)
    pin.initConstraintDynamics(pm, data, cms, cds)
    prox = pin.ProximalSettings(1e-14, 0.0, 1)  # no regularisation: the exact rigid solution
    qdd = pin.constraintDynamics(pm, data, model.to_pinocchio_q(q), v, tau, cms, cds, prox)
    return np.array(qdd), np.array(data.lambda_c)


# ---- rigid contacts against Pinocchio's constraintDynamics ------------------------------------------

RIGID = [("iiwa14-fixed", ("iiwa_link_ee",), "6d"), ("quadruped-floating", LEGS, "3d"),
         ("solo12-floating", ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"), "3d"), ("ur5-fixed", ("tool0",), "3d")]


@pytest.mark.parametrize("case,frames,kind", RIGID, ids=[r[0] + "-" + r[2] for r in RIGID])
def test_reference_contact_fd_matches_pinocchio(case, frames, kind):
    m = _case(case).with_frames(frames)
    q, v, _, tau = random_state(m, seed=5, n=3)
    for k in range(3):
        qdd, F = ref.contact_fd(m, q[k], v[k], tau[k], [Contact(f, kind) for f in frames])
        qdd_p, lam = _pin_contact_fd(m, q[k], v[k], tau[k], frames, kind)
        assert relerr(qdd, qdd_p) <= TOL64
        # F is what the robot exerts on the environment; Pinocchio's lambda_c the opposite
        assert relerr(-(F if kind == "6d" else F[:, :3]).reshape(-1), lam) <= TOL64
        if kind == "3d":
            assert np.all(F[:, 3:] == 0.0)  # a point contact transmits no torque


@pytest.fixture(scope="module")
def quadruped_kernels():
    m = _case("quadruped-floating").with_frames(LEGS)
    return m, rbdgen.build(m, kernels=KERNELS, opt="-O0", simd=False)


@pytest.fixture(scope="module")
def iiwa_kernels():
    m = _case("iiwa14-fixed").with_frames(["iiwa_link_ee", "iiwa_link_3"])
    return m, rbdgen.build(m, kernels=KERNELS, opt="-O0", simd=False)


def test_compiled_contact_fd_matches_pinocchio(quadruped_kernels, iiwa_kernels):
    m, kern = quadruped_kernels
    q, v, _, tau = random_state(m, seed=6, n=4)
    feet = [Contact(f, "3d") for f in LEGS]
    qdd, F = kern.contact_fd(q, v, tau, feet)  # a batch
    assert qdd.shape == (4, m.nv) and F.shape == (4, 4, 6)
    for k in range(4):
        qdd_p, lam = _pin_contact_fd(m, q[k], v[k], tau[k], LEGS, "3d")
        assert relerr(qdd[k], qdd_p) <= TOL64
        assert relerr(-F[k, :, :3].reshape(-1), lam) <= TOL64
        one = kern.contact_fd(q[k], v[k], tau[k], feet)  # one state: the same numbers
        assert relerr(one[0], qdd[k]) <= TOL64 and relerr(one[1], F[k]) <= TOL64
    # two feet of four: the kernel's terms restricted to them
    two = [Contact("RL_foot", "3d"), Contact("FR_foot", "3d")]
    qdd_p, lam = _pin_contact_fd(m, q[0], v[0], tau[0], ["RL_foot", "FR_foot"], "3d")
    got = kern.contact_fd(q[0], v[0], tau[0], two)
    assert relerr(got[0], qdd_p) <= TOL64 and relerr(-got[1][:, :3].reshape(-1), lam) <= TOL64

    m, kern = iiwa_kernels
    q, v, _, tau = random_state(m, seed=7, n=2)
    qdd, F = kern.contact_fd(q, v, tau, [Contact("iiwa_link_ee", "6d")])
    for k in range(2):
        qdd_p, lam = _pin_contact_fd(m, q[k], v[k], tau[k], ["iiwa_link_ee"], "6d")
        assert relerr(qdd[k], qdd_p) <= TOL64 and relerr(-F[k].reshape(-1), lam) <= TOL64


def test_by_name_methods_match_pinocchio(iiwa_kernels, quadruped_kernels):
    for m, kern in (iiwa_kernels, quadruped_kernels):
        pm = _pin_model(m)
        data = pm.createData()
        q, v, _, _ = random_state(m, seed=8, n=2)
        for k in range(2):
            qp = m.to_pinocchio_q(q[k])
            pin.forwardKinematics(pm, data, qp, v[k], np.zeros(m.nv))
            pin.updateFramePlacements(pm, data)
            pin.computeJointJacobians(pm, data, qp)
            for f in m.frames:
                fid = pm.getFrameId(f)
                assert relerr(kern.frame_placement(q[k], f), data.oMf[fid].homogeneous) <= TOL64
                for r, rf in (("local", pin.LOCAL), ("local_world_aligned", pin.LOCAL_WORLD_ALIGNED),
                              ("world", pin.WORLD)):
                    assert relerr(kern.frame_jacobian(q[k], f, r), pin.getFrameJacobian(pm, data, fid, rf)) <= TOL64
                    exp = pin.getFrameAcceleration(pm, data, fid, rf).vector
                    assert relerr(kern.frame_bias_acceleration(q[k], v[k], f, r), exp) <= TOL64
                    # the batch call, then the frame picked: the same
                    assert relerr(kern.frame_jacobian(q, f, r)[k], pin.getFrameJacobian(pm, data, fid, rf)) <= TOL64
            # Λ⁻¹ of any subset, in the order asked, against Pinocchio's J M⁻¹ Jᵀ
            sub = list(m.frames[::-1])
            J = np.vstack([pin.getFrameJacobian(pm, data, pm.getFrameId(f), pin.LOCAL) for f in sub])
            Mi = pin.computeMinverse(pm, data, qp)
            Mi = np.triu(Mi) + np.triu(Mi, 1).T
            assert relerr(kern.osim_inverse(q[k], sub), J @ Mi @ J.T) <= TOL64
        assert kern.osim_inverse(q).shape == (2, 6 * m.nf, 6 * m.nf)
        assert kern.frame_placement(q).shape == (2, m.nf, 4, 4)


def test_by_name_methods_pass_keywords_to_the_kernel(iiwa_kernels):
    """out= reaches the generated kernel where the whole output is returned, and is refused,
    naming the method, where frames are picked; unknown keywords are the kernel's to refuse.
    (On the GPU shape= and stream= travel the same way: found missing on the first H100 run.)"""
    m, kern = iiwa_kernels
    q, v, _, tau = random_state(m, seed=9, n=3)
    buf = np.empty((3, m.nf, 4, 4))
    got = kern.frame_placement(q, out=buf)
    assert np.shares_memory(got, buf) and relerr(buf, kern.kernel("frame_placement")(q)) == 0
    jb = np.empty((3, m.nf, 6, m.nv))
    kern.frame_jacobian(q, None, "world", out=jb)
    assert relerr(jb, kern.frame_jacobian(q, reference="world")) == 0
    with pytest.raises(ValueError, match="frame_placement: out= takes the kernel's whole output"):
        kern.frame_placement(q, "iiwa_link_ee", out=buf)
    with pytest.raises(ValueError, match="osim_inverse: out="):
        kern.osim_inverse(q, ["iiwa_link_ee"], out=np.empty((3, m.nf, 6, m.nf, 6)))
    with pytest.raises(ValueError, match="contact_fd: out= is not taken"):
        kern.contact_fd(q, v, tau, [Contact("iiwa_link_ee", "6d")], out=buf)
    with pytest.raises(TypeError):
        kern.frame_bias_acceleration(q, v, "iiwa_link_ee", shapes="block")


# ---- the O(n) Λ⁻¹ recursion on trees it was not written for ------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_osim_recursion_equals_the_dense_product_on_random_trees(seed, tmp_path):
    """Random branched trees with revolute and prismatic joints, fixed and floating; frames on
    leaves, on inner bodies, two on one body, on links merged by fixed joints: the recursion
    (no M⁻¹) equals J·minv·Jᵀ. The traced kernel (IR interpreter) equals the recursion."""
    from rbdgen.ir.interp import run
    from rbdgen.registry import trace

    rng = np.random.default_rng(seed)
    path = tmp_path / "t.urdf"
    path.write_text(robots.tree_urdf(int(rng.integers(3, 12)), branching=int(rng.integers(2, 4)), seed=seed,
                                     joint_types=("revolute", "prismatic", "continuous"), fixed_every=2))
    m = rbdgen.load_urdf(str(path), floating_base=bool(seed % 2))
    links = [f.name for f in m.link_frames]
    chosen = list(rng.choice(links, size=min(4, len(links)), replace=False))
    m = m.with_frames(chosen)
    q = m.random_q(rng)
    J = ref.frame_jacobian(m, q, None, "local").reshape(-1, m.nv)
    dense = J @ ref.minv(m, q) @ J.T
    L = ref.osim_inverse(m, q)
    assert relerr(L, dense) <= TOL64
    got = run(trace(m, "osim_inverse"), q)
    assert relerr(np.asarray(got).reshape(L.shape), L) <= TOL64


# ---- Fijany's contact models, by the residuals of their defining equations -------------------------

def _open_chain(m, q, v, frame):
    J = ref.frame_jacobian(m, q, frame, "local")
    return J, ref.frame_bias_acceleration(m, q, v, frame, "local")


def _dynamics_residual(m, q, v, tau, qdd, frames, F):
    """M q̈ + b − (τ − Σ Jᵀ F): zero when q̈ and F are consistent (RNEA, an independent path)."""
    JtF = sum(ref.frame_jacobian(m, q, f, "local").T @ F[k] for k, f in enumerate(frames))
    return relerr(ref.rnea(m, q, v, qdd), tau - JtF)


def _orthonormal(rng, nc):
    Qm, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    return Qm[:, nc:], Qm[:, :nc]  # H (6 × n_f), W (6 × n_c)


@pytest.mark.parametrize("nc", [1, 3, 5])
def test_type1_type2_and_general_models_satisfy_their_equations(nc):
    m = _case("iiwa14-fixed").with_frames(["iiwa_link_ee"])
    rng = np.random.default_rng(nc)
    q, v, _, tau = random_state(m, seed=nc, n=None)
    f = "iiwa_link_ee"
    H, W = _orthonormal(rng, nc)
    G_C, K_F = rng.normal(size=nc), rng.normal(size=6 - nc)

    qdd, F = ref.contact_fd(m, q, v, tau, [Contact(f, "type1", H=H, W=W, G_C=G_C, K_F=K_F)])
    J, bias = _open_chain(m, q, v, f)
    Vd = J @ qdd + bias
    assert relerr(W.T @ Vd, G_C) <= 1e-9          # the constrained directions move as prescribed
    assert relerr(H.T @ F[0], K_F) <= 1e-9        # the free directions carry the given force
    assert _dynamics_residual(m, q, v, tau, qdd, [f], F) <= 1e-9

    phi, d = rng.normal(size=(6 - nc, nc)), rng.normal(size=6 - nc)
    qdd, F = ref.contact_fd(m, q, v, tau, [Contact(f, "type2", W=W, G_C=G_C, phi=phi, d=d)])  # H derived
    Vd = J @ qdd + bias
    Hd = Contact(f, "type2", W=W, phi=phi).H
    assert relerr(W.T @ Vd, G_C) <= 1e-9
    assert relerr(Hd.T @ F[0], phi @ (W.T @ F[0]) + d) <= 1e-9
    assert _dynamics_residual(m, q, v, tau, qdd, [f], F) <= 1e-9

    M1, M2 = rng.normal(size=(6, 6)), rng.normal(size=(6, 6))
    k1, k2 = rng.normal(size=6), rng.normal(size=6)
    qdd, F = ref.contact_fd(m, q, v, tau, [Contact(f, "general", M1=M1, kappa1=k1, M2=M2, kappa2=k2)])
    Vd = J @ qdd + bias
    Om = np.linalg.solve(M2, F[0] - k2)
    assert relerr(Vd, M1 @ Om + k1) <= 1e-9
    assert _dynamics_residual(m, q, v, tau, qdd, [f], F) <= 1e-9


def test_point_contact_holds_the_classical_acceleration_and_mixed_contacts(quadruped_kernels):
    m, kern = quadruped_kernels
    q, v, _, tau = random_state(m, seed=9, n=None)
    H, W = _orthonormal(np.random.default_rng(0), 2)
    cs = [Contact("FL_foot", "3d"), Contact("RR_foot", "6d"), Contact("FR_foot", "type1", W=W, G_C=[0.3, -0.1])]
    qdd, F = ref.contact_fd(m, q, v, tau, cs)
    got = kern.contact_fd(q, v, tau, cs)
    assert relerr(got[0], qdd) <= TOL64 and relerr(got[1], F) <= TOL64
    J, bias = _open_chain(m, q, v, "FL_foot")
    a = J @ qdd + bias
    vf = ref.frame_velocity(m, q, v, "FL_foot", "local")
    assert relerr(a[:3] + np.cross(vf[3:], vf[:3]), np.zeros(3)) <= 1e-9
    J, bias = _open_chain(m, q, v, "RR_foot")
    assert relerr(J @ qdd + bias, np.zeros(6)) <= 1e-9
    J, bias = _open_chain(m, q, v, "FR_foot")
    assert relerr(W.T @ (J @ qdd + bias), [0.3, -0.1]) <= 1e-9
    assert _dynamics_residual(m, q, v, tau, qdd, ["FL_foot", "RR_foot", "FR_foot"], F) <= 1e-9


# ---- bad input: one clear error each ---------------------------------------------------------------

def test_bad_contact_models_are_refused_clearly(quadruped_kernels):
    m, kern = quadruped_kernels
    q, v, _, tau = random_state(m, seed=10, n=None)
    H, W = _orthonormal(np.random.default_rng(1), 3)
    with pytest.raises(ValueError, match="not orthonormal"):
        Contact("FL_foot", "type1", W=2.0 * W)
    with pytest.raises(ValueError, match="complements"):
        Contact("FL_foot", "type1", H=np.roll(W, 1, axis=0), W=W)
    with pytest.raises(ValueError, match=r"W has shape \(3, 3\)"):
        Contact("FL_foot", "type1", W=W[:3])
    with pytest.raises(ValueError, match=r"G_C has shape"):
        Contact("FL_foot", "type1", W=W, G_C=[1.0])
    with pytest.raises(ValueError, match="NaN"):
        Contact("FL_foot", "type1", W=W, K_F=[np.nan, 0, 0])
    with pytest.raises(ValueError, match="unknown contact model"):
        Contact("FL_foot", "sliding")
    with pytest.raises(ValueError, match="does not take"):
        Contact("FL_foot", "6d", W=W)
    with pytest.raises(ValueError, match="phi .* is required"):
        Contact("FL_foot", "type2", W=W)
    with pytest.raises(ValueError, match="unknown frame 'nose'.*URDF link names"):
        kern.contact_fd(q, v, tau, [Contact("nose", "3d")])
    with pytest.raises(ValueError, match="'trunk' was not selected"):
        kern.contact_fd(q, v, tau, [Contact("trunk", "3d")])
    with pytest.raises(ValueError, match="reference must be one of"):
        kern.frame_jacobian(q, "FL_foot", "body")
    with pytest.raises(ValueError, match="argument 'q' has shape"):
        kern.contact_fd(q[:-1], v, tau, [Contact("FL_foot", "3d")])
    with pytest.raises(ValueError, match="contacts must be"):
        kern.contact_fd(q, v, tau, ["FL_foot"])
    # the same foot constrained twice: Λ⁻¹ repeats, the system is singular but its rows agree —
    # solved rank-revealing (issue 42): the same q̈ as once, the force split evenly (least norm)
    once = kern.contact_fd(q, v, tau, [Contact("FL_foot", "3d")])
    twice = kern.contact_fd(q, v, tau, [Contact("FL_foot", "3d"), Contact("FL_foot", "3d")])
    assert relerr(twice[0], once[0]) <= 1e-8
    assert relerr(twice[1][..., 0, :], 0.5 * once[1][..., 0, :]) <= 1e-8
    assert relerr(twice[1][..., 1, :], twice[1][..., 0, :]) <= 1e-8
    # a 6-D contact on every foot: 24 rows on 18 DoF that disagree — a singular system
    with pytest.raises(ContactError, match="singular.*FL_foot"):
        kern.contact_fd(q, v, tau, [Contact(f, "6d") for f in LEGS])


def test_more_constraints_than_the_arm_can_move_is_a_singular_system(tmp_path):
    """A 6-D contact on a 3-joint arm: Wᵀ Λ⁻¹ W has rank 3."""
    p = tmp_path / "arm3.urdf"
    p.write_text(robots.chain_urdf(3, seed=2))
    m = rbdgen.load_urdf(str(p)).with_frames("leaves")
    q, v, _, tau = random_state(m, seed=1, n=None)
    with pytest.raises(ContactError, match="singular"):
        ref.contact_fd(m, q, v, tau, [Contact(m.frames[0], "6d")])
    ref.contact_fd(m, q, v, tau, [Contact(m.frames[0], "type1", W=np.eye(6)[:, :2])])  # two directions: fine


def test_frames_are_checked_where_they_are_chosen(tmp_path, capsys):
    m = _case("iiwa14-fixed")
    with pytest.raises(ValueError, match="unknown frame 'tool0'.*iiwa_link_0"):
        m.with_frames(["tool0"])
    with pytest.raises(ValueError, match="more than once"):
        m.with_frames(["iiwa_link_ee", "iiwa_link_ee"])
    bare = rbdgen.load_urdf(robots.path("iiwa14"))
    from rbdgen import registry

    # no frames selected: the default selection leaves the frame kernels out, asking is an error
    assert not any(registry.get(k).frames for k in registry.applicable(bare))
    with pytest.raises(ValueError, match="none is selected.*frames="):
        rbdgen.build(bare, kernels=["frame_jacobian_local"])
    rc, out, err = run_main(capsys, "generate", robots.path("iiwa14"), "--frames", "nose", "--out", tmp_path / "o", "-q")
    assert rc == 2
    assert_one_error_line(err, out, "iiwa14.urdf", "unknown frame 'nose'")
    rc, out, err = run_main(capsys, "generate", robots.path("iiwa14"), "--kernels", "osim_inverse", "--out", tmp_path / "o", "-q")
    assert rc == 2
    assert_one_error_line(err, out, "osim_inverse", "--frames")
    rc, out, err = run_main(capsys, "inspect", robots.path("quadruped"), "--frames", "leaves")
    assert rc == 0 and "frames (--frames): FL_foot, FR_foot, RL_foot, RR_foot" in out


def test_the_documented_simulations_hold_their_stated_bounds():
    """docs/examples/contact_sim.py (the numbers docs/contact.md shows), shortened: the stabilised
    flange stays on its plane and slides, the plane takes the pressing force, the quadruped's
    feet carry its weight."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "docs" / "examples" / "contact_sim.py"
    spec = importlib.util.spec_from_file_location("contact_sim", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--seconds", "1", "--check"]) == 0
