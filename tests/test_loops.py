"""Loops inside the robot and the generated constrained forward dynamics (issue 42).

Oracles: Pinocchio's ``constraintDynamics`` with ``RigidConstraintModel`` between two joints
(loops) or one joint and the world (contacts), LOCAL reference — at arbitrary states, not only
closed ones, so the drift terms are compared too; the NumPy reference (rbdgen.reference.contact_fd)
for the generated kernel's outputs; for redundant constraints, the same mechanism constrained
without the redundant rows (the accelerations must not change). Mechanisms: rbdgen.robots.closed.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

import rbdgen
from rbdgen import reference as ref
from rbdgen import robots
from rbdgen.robots import closed as cc
from rbdgen.algorithms.constrained import _ref_pivots, pin_constraint_dynamics
from rbdgen.model.constraints import constraint_slots
from rbdgen.reference import Contact, ContactError, Loop

from conftest import TOL64, assert_one_error_line, relerr, run_main

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def urdfs(tmp_path_factory):
    d = tmp_path_factory.mktemp("closed")
    out = {}
    for name, text in (("four_bar", cc.four_bar()), ("two_arms", cc.two_arms())):
        p = d / f"{name}.urdf"
        p.write_text(text)
        out[name] = str(p)
    return out


def _models(urdfs, name):
    """(our model, Pinocchio's) of a closed mechanism of the fixture, or of a bundled robot (the
    quadruped with a free-flyer)."""
    if name in urdfs:
        return rbdgen.load_urdf(urdfs[name]), pin.buildModelFromUrdf(urdfs[name])
    path, fb = str(robots.path(name)), name == "quadruped"
    m = rbdgen.load_urdf(path, floating_base=fb)
    return m, (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if fb else pin.buildModelFromUrdf(path))


def _state(m, seed, n=None):
    rng = np.random.default_rng(seed)
    shape = () if n is None else (n,)
    return (rng.uniform(-1.5, 1.5, size=shape + (m.nq,)), rng.normal(size=shape + (m.nv,)),
            3.0 * rng.normal(size=shape + (m.nv,)))


FB = ("coupler_tip", "rocker_tip")
ARMS = ("left_tip", "right_tip")
CASES = [
    ("four_bar", [Loop(*FB, "3d")]),          # the out-of-plane row is redundant
    ("four_bar", [Loop(*FB, "6d")]),          # locked: three rows of six are redundant
    ("two_arms", [Loop(*ARMS, "3d")]),
    ("two_arms", [Loop(*ARMS, "6d")]),
    ("two_arms", [Loop(*ARMS, "3d"), Contact("left_hand", "3d")]),   # a loop and a contact together
    ("two_arms", [Loop("right_tip", "left_tip", "6d")]),             # frames the other way round
]
IDS = ["four_bar-3d", "four_bar-6d", "two_arms-3d", "two_arms-6d", "two_arms-3d+contact", "two_arms-6d-swapped"]


@pytest.mark.parametrize("name,cons", CASES, ids=IDS)
def test_reference_loops_match_pinocchio(urdfs, name, cons):
    m, pm = _models(urdfs, name)
    for seed in range(3):
        q, v, tau = _state(m, seed)
        qdd, F = ref.contact_fd(m, q, v, tau, cons)
        qdd_p, F_p = pin_constraint_dynamics(pin, pm, q, v, tau, cons, iterations=50)
        assert relerr(qdd, qdd_p) <= TOL64
        assert relerr(F, F_p) <= 1e-8  # (the proximal iterations settle to ~1e-10 on the redundant rows)
        for k, c in enumerate(cons):
            if c.size == 3:
                assert np.all(F[k, 3:] == 0.0)  # a point constraint transmits no torque
    # the constraint holds along the motion: the loop's velocity error (its convention's
    # coordinates, _loop_velocity) does not change, by central differences along
    # q(t) = q + v t + q̈ t²/2, v(t) = v + q̈ t (every joint revolute: q's coordinates are the tangent)
    q, v, tau = _state(m, 7)
    qdd, _ = ref.contact_fd(m, q, v, tau, cons)
    h = 1e-5
    for c in cons:
        if isinstance(c, Loop):
            e = [_loop_velocity(m, q + s * h * v + 0.5 * h * h * qdd, v + s * h * qdd, c) for s in (-1, 1)]
            scale = np.abs(qdd).max() + np.abs(v).max() ** 2
            assert np.abs(e[1] - e[0]).max() / (2 * h) <= 1e-6 * scale


def _loop_velocity(m, q, v, c):
    """The loop's velocity error in the coordinates whose rate the loop holds at zero
    (:class:`rbdgen.Loop`): 6d, v_a − ᵃX_b v_b in frame a's (moving) coordinates; 3d, the two
    points' velocity difference in the world (its rate is what a 3d loop holds, seen in a's axes)."""
    J = ref.frame_jacobian(m, q, [c.frame_a, c.frame_b], "local")
    oMf = ref.frame_placement(m, q, [c.frame_a, c.frame_b])
    R = oMf[0, :3, :3].T @ oMf[1, :3, :3]
    p = oMf[0, :3, :3].T @ (oMf[1, :3, 3] - oMf[0, :3, 3])
    va, vb = J[0] @ v, J[1] @ v
    if c.model == "3d":
        return oMf[0, :3, :3] @ (va[:3] - R @ vb[:3])
    px = np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]])
    X = np.block([[R, px @ R], [np.zeros((3, 3)), R]])
    return va - X @ vb


@pytest.mark.parametrize("name,cons", CASES[:4], ids=IDS[:4])
def test_loaded_contact_fd_with_loops(urdfs, name, cons):
    m, pm = _models(urdfs, name)
    frames = [f for c in cons for f in c.frames]
    kern = rbdgen.build(m, frames=frames, kernels=["aba", "frame_placement", "contact_terms"], opt="-O0", simd=False)
    q, v, tau = _state(m, 11, n=3)
    qdd, F = kern.contact_fd(q, v, tau, cons)
    assert qdd.shape == (3, m.nv) and F.shape == (3, len(cons), 6)
    for k in range(3):
        qdd_p, F_p = pin_constraint_dynamics(pin, pm, q[k], v[k], tau[k], cons, iterations=50)
        assert relerr(qdd[k], qdd_p) <= TOL64 and relerr(F[k], F_p) <= 1e-8
        one = kern.contact_fd(q[k], v[k], tau[k], cons)
        assert relerr(one[0], qdd[k]) <= TOL64 and relerr(one[1], F[k]) <= TOL64
    # loops need the placements: without the frame_placement kernel, an error that says so
    kern2 = rbdgen.build(m, frames=frames, kernels=["aba", "contact_terms"], opt="-O0", simd=False)
    with pytest.raises(ValueError, match="frame_placement"):
        kern2.contact_fd(q, v, tau, cons)


def test_redundant_contacts_agree_with_the_minimal_set():
    """The same body held twice (flange and link 7, welded by a fixed joint): 12 rows of rank 6.
    The run-time solve is rank-revealing (least-norm forces, the same q̈ as one contact); the
    generated kernel, whose rows depend only at some states, raises ContactError instead of a
    silent NaN or garbage."""
    m = rbdgen.load_urdf(robots.path("iiwa14"))
    two = [Contact("iiwa_link_ee", "6d"), Contact("iiwa_link_7", "6d")]
    q, v, tau = _state(m, 3)
    qdd2, F2 = ref.contact_fd(m, q, v, tau, two)
    qdd1, F1 = ref.contact_fd(m, q, v, tau, two[:1])
    assert relerr(qdd2, qdd1) <= 1e-8
    # the least-norm split carries the same total wrench on the body as the one contact
    kern = rbdgen.build(m, constraints=two, kernels=["constrained_fd", "contact_terms", "aba", "frame_placement"],
                        opt="-O0", simd=False)
    assert relerr(kern.contact_fd(q, v, tau, two)[0], qdd1) <= 1e-8
    with pytest.raises(ContactError, match="singular"):
        kern.constrained_fd(q, v, tau)
    with pytest.raises(ContactError, match=r"state 0 of the batch"):
        qb = np.stack([q, q]); kern.constrained_fd(qb, np.stack([v, v]), np.stack([tau, tau]))
    # conflicting constraints (a 6d contact and a 6d loop between the arm and its own flange
    # that disagree) stay an error in the run-time path too
    with pytest.raises(ContactError):
        ref.contact_fd(m, q, v, tau, [Contact("iiwa_link_ee", "6d"), Contact("iiwa_link_1", "6d"),
                                      Contact("iiwa_link_2", "6d"), Contact("iiwa_link_3", "6d")])


GEN = [("four_bar", [Loop(*FB, "3d")]), ("two_arms", [Loop(*ARMS, "6d")]),
       ("iiwa14", [Contact("iiwa_link_ee", "6d")]),
       ("quadruped", [Contact(f, "3d") for f in ("FL_foot", "FR_foot", "RL_foot", "RR_foot")])]


@pytest.mark.parametrize("name,cons", GEN, ids=[g[0] for g in GEN])
def test_constrained_fd_kernel_matches_pinocchio(urdfs, name, cons):
    m, pm = _models(urdfs, name)
    m = m.with_constraints(cons)
    assert m.nc == len(cons) and all(f in m.frames for f in constraint_slots(cons))
    kern = rbdgen.build(m, kernels=["constrained_fd"], opt="-O0")
    n = 5
    rng = np.random.default_rng(21)
    q = m.random_q(rng, n) if name in ("iiwa14", "quadruped") else _state(m, 21, n)[0]
    v, tau = rng.normal(size=(n, m.nv)), 5.0 * rng.normal(size=(n, m.nv))
    qdd, F = kern.constrained_fd(q, v, tau)
    raw = kern.kernel("constrained_fd")(q, v, tau)  # the generated kernel: q̈, forces and pivots
    assert np.array_equal(raw[0], qdd) and np.array_equal(raw[1], F)
    assert relerr(raw[2], _ref_pivots(m, q)) <= 1e-8
    assert np.all((raw[2] > 0) & (raw[2] <= 1 + 1e-12))
    for k in range(n):
        qdd_p, F_p = pin_constraint_dynamics(pin, pm, m.to_pinocchio_q(q[k]), v[k], tau[k], cons, iterations=50)
        assert relerr(qdd[k], qdd_p) <= TOL64 and relerr(F[k], F_p) <= 1e-8
        one = kern.constrained_fd(q[k], v[k], tau[k])
        assert relerr(one[0], qdd[k]) <= TOL64 and relerr(one[1], F[k]) <= TOL64
    want = ref.contact_fd(m, q, v, tau, cons)
    assert relerr(qdd, want[0]) <= TOL64 and relerr(F, want[1]) <= TOL64


def test_constrained_fd_drops_structurally_redundant_rows(urdfs):
    """The planar four-bar's out-of-plane rows are zero in J_c for every state: the trace drops
    them (their force is exactly 0 and their pivot 1), and the LDLᵀ is over the rest."""
    m, _ = _models(urdfs, "four_bar")
    for kind, dropped in (("3d", [2]), ("6d", [2, 3, 4])):
        mk = m.with_constraints([Loop(*FB, kind)])
        kern = rbdgen.build(mk, kernels=["constrained_fd"], opt="-O0", simd=False)
        q, v, tau = _state(mk, 4, n=4)
        _, F, piv = kern.kernel("constrained_fd")(q, v, tau)
        assert np.all(F[:, 0, dropped] == 0.0) and np.all(piv[:, 0, dropped] == 1.0)
        kept = [r for r in range(mk.constraints[0].size) if r not in dropped]
        assert np.all(piv[:, 0, kept] < 1.0 + 1e-12) and np.all(piv[:, 0, kept] > 0)
        # the LDLᵀ has as many pivots (divisions of the solve) as rows kept: fewer than with them
        ops = rbdgen.registry.trace(mk, "constrained_fd").op_counts()
        assert ops["div"] < rbdgen.registry.trace(mk, "aba").op_counts()["div"] + 2 * mk.constraints[0].size


def test_constrained_fd_float32(urdfs):
    m, _ = _models(urdfs, "two_arms")
    m = m.with_constraints([Loop(*ARMS, "3d")])
    k32 = rbdgen.build(m, "cpu", "float32", kernels=["constrained_fd"], opt="-O0", simd=False)
    q, v, tau = _state(m, 5, n=16)
    qdd, F = k32.constrained_fd(q.astype(np.float32), v.astype(np.float32), tau.astype(np.float32))
    want = ref.contact_fd(m, q.astype(np.float32).astype(float), v.astype(np.float32).astype(float),
                          tau.astype(np.float32).astype(float), list(m.constraints))
    assert relerr(qdd, want[0]) <= rbdgen.registry.get("constrained_fd").float32_tol
    assert relerr(F, want[1]) <= rbdgen.registry.get("constrained_fd").float32_tol


def test_baumgarte_matches_pinocchio(urdfs):
    """Baumgarte gains on a loop: the held acceleration −kd ė − kp e, against Pinocchio's
    corrector Kp, Kd on the same constraint, with the loop open (e ≠ 0): the reference (3d and
    6d, whose error is log₆) and the generated kernel (3d); a generated 6d loop with gains is
    refused with the way out."""
    m, pm = _models(urdfs, "two_arms")
    for kind in ("3d", "6d"):
        cons = [Loop(*ARMS, kind, baumgarte=(40.0, 9.0))]
        for seed in range(2):
            q, v, tau = _state(m, 30 + seed)
            qdd_p, F_p = pin_constraint_dynamics(pin, pm, q, v, tau, cons, iterations=50)
            qdd, F = ref.contact_fd(m, q, v, tau, cons)
            assert relerr(qdd, qdd_p) <= TOL64 and relerr(F, F_p) <= 1e-8
            plain = ref.contact_fd(m, q, v, tau, [Loop(*ARMS, kind)])[0]
            assert relerr(qdd, plain) > 1e-3  # the gains do act
    cons = [Loop(*ARMS, "3d", baumgarte=(40.0, 9.0))]
    kern = rbdgen.build(m, constraints=cons, kernels=["constrained_fd"], opt="-O0", simd=False)
    q, v, tau = _state(m, 33, n=3)
    for k in range(3):
        qdd_p, F_p = pin_constraint_dynamics(pin, pm, q[k], v[k], tau[k], cons, iterations=50)
        got = kern.constrained_fd(q[k], v[k], tau[k])
        assert relerr(got[0], qdd_p) <= TOL64 and relerr(got[1], F_p) <= 1e-8
    with pytest.raises(ValueError, match="kern.contact_fd takes 6d loops with Baumgarte"):
        m.with_constraints([Loop(*ARMS, "6d", baumgarte=(1.0, 1.0))])
    with pytest.raises(ValueError, match="finite and ≥ 0"):
        Loop(*ARMS, "3d", baumgarte=(-1.0, 0.0))
    with pytest.raises(ValueError, match="two numbers"):
        Loop(*ARMS, "3d", baumgarte=3.0)


# ---- bad input -------------------------------------------------------------------------------------

def test_loop_and_constraint_errors(urdfs):
    m, _ = _models(urdfs, "four_bar")
    with pytest.raises(ValueError, match="two different frames"):
        Loop("crank", "crank")
    with pytest.raises(ValueError, match="unknown loop model"):
        Loop("crank", "rocker", "5d")
    with pytest.raises(ValueError, match="frame_b must be a URDF link name"):
        Loop("crank", 3)
    with pytest.raises(ValueError, match="nope"):
        ref.contact_fd(m, np.zeros(3), np.zeros(3), np.zeros(3), [Loop("crank", "nope", "3d")])
    with pytest.raises(ValueError, match="rigid contacts"):
        m.with_constraints([Contact("crank", "type1", W=np.eye(6)[:, :2])])
    with pytest.raises(ValueError, match="nope"):
        m.with_constraints([Loop("crank", "nope")])
    with pytest.raises(ValueError, match="constraints=.*--loop"):
        rbdgen.build(m, kernels=["constrained_fd"])
    assert m.with_constraints([]).nc == 0 and "constrained_fd" not in rbdgen.registry.applicable(m)
    assert "constrained_fd" in rbdgen.registry.applicable(m.with_constraints([Loop(*FB, "3d")]))


@pytest.mark.parametrize("flag,needle", [("--loop=coupler_tip:rocker_tip", "LINK_A:LINK_B:3d"),
                                         ("--contact=crank:7d", "LINK:3d"),
                                         ("--loop=coupler_tip:nope:3d", "nope"),
                                         ("--loop=coupler_tip:rocker_tip:3d:1", "KP,KD")])
def test_cli_constraint_flags_errors(urdfs, capsys, flag, needle):
    rc, out, err = run_main(capsys, "generate", urdfs["four_bar"], flag, "--out", "/tmp")
    assert rc == 2
    assert_one_error_line(err, out, needle)


def test_package_carries_constraints(urdfs, tmp_path):
    """A package generated with --loop: from a new process in another folder, constrained_fd,
    contact_fd (loops need the placements, which the package has) and the frames by name."""
    rc = subprocess.run([sys.executable, "-m", "rbdgen", "generate", urdfs["four_bar"], "--loop",
                         "coupler_tip:rocker_tip:3d:25,10", "--dtype", "float64", "--out", str(tmp_path / "pkgs"), "-q"],
                        capture_output=True, text=True)
    assert rc.returncode == 0, rc.stderr
    import json
    man = json.loads((tmp_path / "pkgs" / "four_bar" / "manifest.json").read_text())
    assert man["constraints"] == [{"loop": ["coupler_tip", "rocker_tip"], "model": "3d", "baumgarte": [25.0, 10.0]}]
    assert "--loop coupler_tip:rocker_tip:3d:25.0,10.0" in man["regenerate"] and "--frames" not in man["regenerate"]
    m = rbdgen.load_urdf(urdfs["four_bar"])
    q, v, tau = _state(m, 9)
    loop = Loop(*FB, "3d", baumgarte=(25.0, 10.0))
    want = ref.contact_fd(m, q, v, tau, [loop])
    script = (
        "import sys, json, numpy as np, rbdgen\n"
        f"sys.path.insert(0, {str(tmp_path / 'pkgs')!r})\n"
        "import four_bar\n"
        "k = four_bar.load(opt='-O0')\n"  # the package's constraints are the subject, not its -O3
        f"q, v, tau = np.array({q.tolist()}), np.array({v.tolist()}), np.array({tau.tolist()})\n"
        "a = k.constrained_fd(q, v, tau)\n"
        "b = k.contact_fd(q, v, tau, [rbdgen.Loop('coupler_tip', 'rocker_tip', '3d', (25.0, 10.0))])\n"
        "c = k.frame_placement(q, 'rocker_tip')\n"
        "print(json.dumps([a[0].tolist(), a[1].tolist(), b[0].tolist(), b[1].tolist(), c.tolist(), "
        "[str(x) for x in k.model.constraints]]))\n")
    other = tmp_path / "elsewhere"
    other.mkdir()
    env = {k: v_ for k, v_ in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", script], cwd=other, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    import json as _j
    a0, a1, b0, b1, c, cons = _j.loads(r.stdout.strip().splitlines()[-1])
    assert relerr(np.array(a0), want[0]) <= TOL64 and relerr(np.array(a1), want[1]) <= TOL64
    assert relerr(np.array(b0), want[0]) <= TOL64 and relerr(np.array(b1), want[1]) <= TOL64
    assert relerr(np.array(c), ref.frame_placement(m, q, "rocker_tip")) <= TOL64
    assert cons == [str(loop)]


# ---- the other targets: the same kernel through the shared IR ---------------------------------------

def test_constrained_fd_cuda_emulated_and_hls_csim(urdfs):
    """constrained_fd on the GPU target (built with nvcc for sm_90, -Werror; run by the CPU
    emulation of the CUDA program, both launch shapes) and the HLS target (C simulation: double,
    and ap_fixed<48,24> within its declared bound), against the NumPy reference. On a real GPU:
    `make gpu-check` (tests marked gpu) runs every kernel of the quadruped, this one included."""
    from conftest import kernel_errors

    m, _ = _models(urdfs, "two_arms")
    m = m.with_constraints([Loop(*ARMS, "3d", baumgarte=(25.0, 10.0)), Contact("left_hand", "3d")])
    cu = rbdgen.build(m, target="cuda", kernels=["constrained_fd"], opt="-O0", arch="compute_90", werror=True)
    for shape in ("thread", "block"):
        errs = kernel_errors(cu.emulated(shape), m, np.float64, seed=3, n=9, single=4)
        assert errs["constrained_fd"] <= TOL64, (shape, errs)
    hls = rbdgen.build(m, target="hls", dtype="float64", kernels=["constrained_fd"])
    assert kernel_errors(hls, m, np.float64, seed=3, n=6, single=2)["constrained_fd"] <= TOL64
    fx = rbdgen.build(m, target="hls", kernels=["constrained_fd"], fixed=(48, 24))
    e = kernel_errors(fx, m, np.float64, seed=3, n=6, single=2)["constrained_fd"]
    assert 1e-12 < e <= rbdgen.registry.get("constrained_fd").fixed_tol[(48, 24)]


def test_the_documented_loop_simulation_holds_its_stated_bounds():
    """docs/examples/loop_sim.py (the numbers docs/contact.md shows), shortened: the four-bar
    moves, Baumgarte keeps its loop closed to about a millimetre and tighter than without."""
    import importlib.util

    path = HERE.parent / "docs" / "examples" / "loop_sim.py"
    spec = importlib.util.spec_from_file_location("loop_sim", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--seconds", "1", "--check"]) == 0


def test_constrained_fd_rolled_lowering():
    """The quadruped on four feet with the kernel printed as loops over the bodies (unroll=False,
    issue 44): the same numbers as the reference."""
    m = rbdgen.load_urdf(robots.path("quadruped"), floating_base=True)
    m = m.with_constraints([Contact(f, "3d") for f in ("FL_foot", "FR_foot", "RL_foot", "RR_foot")])
    kern = rbdgen.build(m, kernels=["constrained_fd"], unroll=False, opt="-O0", simd=False)
    rng = np.random.default_rng(2)
    q, v, tau = m.random_q(rng, 3), rng.normal(size=(3, m.nv)), rng.normal(size=(3, m.nv))
    got, want = kern.constrained_fd(q, v, tau), ref.contact_fd(m, q, v, tau, list(m.constraints))
    assert relerr(got[0], want[0]) <= TOL64 and relerr(got[1], want[1]) <= TOL64


# ---- derivatives -----------------------------------------------------------------------------------

DERIV = [("iiwa14", [Contact("iiwa_link_ee", "6d")], True),
         ("quadruped", [Contact(f, "3d") for f in ("FL_foot", "FR_foot", "RL_foot", "RR_foot")], True),
         ("two_arms", [Loop(*ARMS, "6d")], True),
         ("two_arms", [Loop(*ARMS, "3d", baumgarte=(25.0, 10.0)), Contact("left_hand", "3d")], False),
         ("four_bar", [Loop(*FB, "3d")], False)]


@pytest.mark.parametrize("name,cons,with_pin", DERIV, ids=["iiwa-6d", "quadruped-4x3d", "arms-6d", "arms-3d+B+contact",
                                                           "four_bar-3d"])
def test_constrained_fd_derivatives(urdfs, name, cons, with_pin):
    """∂q̈/∂(q, v, τ) and ∂F/∂(q, v, τ) along the tangent: against fourth-order central
    differences of the NumPy contact_fd (the registry's reference) everywhere, and against
    Pinocchio's computeConstraintDynamicsDerivatives for contacts and 6d loops (for 3d loops
    Pinocchio 4.1's disagrees with differences of its own constraintDynamics: measured, noted in
    the kernel's declaration). Batch and single state; the first outputs are constrained_fd's."""
    m, pm = _models(urdfs, name)
    m = m.with_constraints(cons)
    pm.rbdgen_constraints = tuple(cons)
    kern = rbdgen.build(m, kernels=["constrained_fd_derivatives", "constrained_fd"], opt="-O0", simd=False)
    rng = np.random.default_rng(8)
    n = 2
    q = m.random_q(rng, n) if name in ("iiwa14", "quadruped") else _state(m, 8, n)[0]
    v, tau = rng.normal(size=(n, m.nv)), 3.0 * rng.normal(size=(n, m.nv))
    got = kern.constrained_fd_derivatives(q, v, tau)
    assert len(got) == 8
    fd = kern.constrained_fd(q, v, tau)
    assert relerr(got[0], fd[0]) <= TOL64 and relerr(got[1], fd[1]) <= TOL64
    decl = rbdgen.registry.get("constrained_fd_derivatives")
    want = decl.reference(m, q, v, tau)  # (qdd, F, 6 derivatives by differences, pivots)
    for k in range(n):
        one = kern.constrained_fd_derivatives(q[k], v[k], tau[k])
        for j in range(8):
            assert relerr(one[j], got[j][k]) <= TOL64, j
        for j, w in zip(range(2, 8), want[2:8]):
            assert relerr(got[j][k], w[k]) <= 1e-7, (j, relerr(got[j][k], w[k]))
        if with_pin:
            exp = decl.pinocchio(pin, pm, None, m.to_pinocchio_q(q[k]), v[k], tau[k])
            for j, e in zip(range(2, 8), exp[2:8]):
                assert relerr(got[j][k], e) <= 1e-9, (j, relerr(got[j][k], e))
    if not with_pin and any(isinstance(c, Loop) and c.model == "3d" for c in cons):
        with pytest.raises(NotImplementedError, match="disagrees"):
            decl.pinocchio(pin, pm, None, m.to_pinocchio_q(q[0]), v[0], tau[0])


def test_constrained_fd_derivatives_float32(urdfs):
    """float32 within the declared bound (float32_tol) of the registry's reference (central
    differences of the NumPy contact_fd) at the same float32-rounded states: the iiwa held 6d,
    the floating quadruped on four feet (3d)."""
    decl = rbdgen.registry.get("constrained_fd_derivatives")
    for name, cons, _ in DERIV[:2]:
        m, _ = _models(urdfs, name)
        m = m.with_constraints(cons)
        k32 = rbdgen.build(m, "cpu", "float32", kernels=["constrained_fd_derivatives"], opt="-O0", simd=False)
        rng = np.random.default_rng(11)
        q, v, tau = (x.astype(np.float32) for x in (m.random_q(rng, 2), rng.normal(size=(2, m.nv)),
                                                      3.0 * rng.normal(size=(2, m.nv))))
        got = k32.constrained_fd_derivatives(q, v, tau)
        want = decl.reference(m, q.astype(float), v.astype(float), tau.astype(float))
        for j in range(8):
            assert relerr(got[j], want[j]) <= decl.float32_tol, (name, j, relerr(got[j], want[j]))


def test_constrained_fd_derivatives_drops_the_rows_constrained_fd_drops(tmp_path):
    """A 3d contact on a random tree of continuous and prismatic joints has a direction its leaf
    never moves in: constrained_fd drops that row (a structural zero of Λ⁻¹'s diagonal, pivot 1).
    The derivative kernel must drop it too: built from J M⁻¹ Jᵀ instead, the zero was only
    numerical, the row was kept and divided by ~0 (forces off by 1e15). Interpreted, against the
    reference's central differences and constrained_fd's pivots."""
    from rbdgen.ir.interp import run

    path = tmp_path / "tree.urdf"
    path.write_text(robots.tree_urdf(10, seed=5, joint_types=("continuous", "prismatic"), fixed_every=None))
    m = rbdgen.load_urdf(path)
    parents = {m.parent[i] for i in range(m.nb)}
    leaf = m.body_names[max(i for i in range(m.nb) if i not in parents)]
    m = m.with_constraints([Contact(leaf, "3d")])
    rng = np.random.default_rng(5)
    q, v, tau = m.random_q(rng, 2), rng.normal(size=(2, m.nv)), rng.normal(size=(2, m.nv))
    got = run(rbdgen.registry.trace(m, "constrained_fd_derivatives", cached=False), q, v, tau)
    piv = run(rbdgen.registry.trace(m, "constrained_fd", cached=False), q, v, tau)[2]
    assert np.any(piv == 1.0)  # the case this test is for: a dropped row
    np.testing.assert_array_equal(got[-1], piv)
    want = rbdgen.registry.get("constrained_fd_derivatives").reference(m, q, v, tau)
    for j in range(8):
        assert relerr(np.reshape(got[j], np.shape(want[j])), want[j]) <= 1e-7, j


def test_constrained_fd_derivatives_cuda_emulated_and_hls_csim(urdfs):
    """The derivative kernel on the GPU target (nvcc sm_90, -Werror, CPU emulation of the CUDA
    program) and the HLS target (double C simulation), on the four-bar closed 3d with Baumgarte
    gains, against the CPU build (itself checked against differences and Pinocchio above)."""
    m, _ = _models(urdfs, "four_bar")
    m = m.with_constraints([Loop(*FB, "3d", baumgarte=(25.0, 10.0))])
    q, v, tau = _state(m, 12, n=5)
    name = "constrained_fd_derivatives"
    want = rbdgen.build(m, kernels=[name], opt="-O0", simd=False).kernel(name)(q, v, tau)
    cu = rbdgen.build(m, target="cuda", kernels=[name], opt="-O0", arch="compute_90", werror=True)
    hls = rbdgen.build(m, target="hls", dtype="float64", kernels=[name])
    for got in (cu.emulated("block").kernel(name)(q, v, tau), cu.emulated("thread").kernel(name)(q, v, tau),
                hls.kernel(name)(q, v, tau)):
        for g_, w in zip(got, want):
            assert relerr(g_, w) <= TOL64
