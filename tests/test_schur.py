"""Fijany's Schur-complement forward dynamics, M⁻¹ and Λ⁻¹ (issue 41; seed 002 §IV–§VI).

Oracles: the ABA-based reference (aba, minv, osim_inverse), J M⁻¹ Jᵀ, Pinocchio, and a dense
solve for the block cyclic reduction. The reference builds the paper's global operators densely;
the traced kernels use the per-body formulas, so the two check each other."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import rbdgen
from rbdgen import reference as ref
from rbdgen import registry
from rbdgen.algorithms import KERNELS, OPT_IN
from rbdgen.errors import UnsupportedError
from rbdgen.ir.interp import run
from rbdgen.ir.schedule import critical_path
from rbdgen.reference import schur
from rbdgen.robots import chain_urdf
from rbdgen.spatial import complement, inertia_inverse, spatial_inertia

from conftest import (ROBOT_CASES, TOL32, TOL64, assert_one_error_line, kernel_errors, load_case, random_state, relerr,
                      run_main)

SCHUR = ("fd_schur", "minv_schur", "osim_inverse_schur")
OPT = SCHUR + ("constrained_fd_schur",)
#: the serial chains among the robot cases (the others are trees and are refused: test below)
CHAIN_CASES = [c for c in ROBOT_CASES if registry.supports(load_case(*c.values), "fd_schur")]


def _chain(tmp_path, n, types=("revolute",), floating=False, seed=3, frames=True):
    p = tmp_path / f"chain{n}_{'_'.join(types)}_{int(floating)}.urdf"
    p.write_text(chain_urdf(n, seed=seed, joint_types=types))
    m = rbdgen.load_urdf(p, floating_base=floating)
    return m.with_frames(list(m.leaf_links[:1]) + [m.body_names[m.nb // 2]]) if frames else m


def _call(kernel, *args, dtype=np.float64):
    out = run(kernel, *args, dtype=dtype)
    return out[0] if isinstance(out, (tuple, list)) else out


def test_the_opt_in_kernels_are_declared_and_left_out_of_default_builds():
    # the Schur kernels among the opt-in ones (fd_derivatives_minv is too: test_fd_derivatives_minv.py)
    assert tuple(k for k in OPT_IN if k in OPT) == OPT and not set(OPT_IN) & set(KERNELS)
    m = load_case(*[c.values for c in ROBOT_CASES if c.id == "iiwa14-fixed"][0])
    assert not set(OPT) & set(registry.applicable(m))
    assert not set(OPT) & set(registry.applicable(m.with_constraints([rbdgen.Contact(m.frames[0], "3d")])))
    assert registry.applicable(m, "fd_schur") == ("fd_schur",)
    assert len(CHAIN_CASES) >= 4, [c.id for c in CHAIN_CASES]  # ur5, ur10, kinova, double pendulum, iiwa


# ---- the building blocks ------------------------------------------------------------------------------

def test_inertia_inverse_is_eq_76_and_refuses_what_is_not_a_body():
    rng = np.random.default_rng(0)
    for _ in range(20):
        A = rng.normal(size=(3, 3))
        I = spatial_inertia(float(rng.uniform(0.01, 10)), rng.normal(size=3), A @ A.T + 0.01 * np.eye(3))
        assert relerr(inertia_inverse(I) @ I, np.eye(6)) < 1e-12
        assert relerr(inertia_inverse(I), np.linalg.inv(I)) < 1e-10
    with pytest.raises(ValueError, match="mass"):
        inertia_inverse(spatial_inertia(0.0, np.zeros(3), np.eye(3)))
    with pytest.raises(ValueError, match="not positive definite"):
        inertia_inverse(spatial_inertia(1.0, np.zeros(3), np.diag([1.0, 1.0, 0.0])))


def test_complement_is_fijany_w():
    rng = np.random.default_rng(1)
    S = np.zeros((6, 1))
    S[2, 0] = 1.0  # revolute about z: W selects the other five rows exactly (§V.A)
    W = complement(S)
    assert W.shape == (6, 5) and set(np.unique(W)) == {0.0, 1.0} and not W[2].any()
    for _ in range(10):
        a = rng.normal(size=3)
        a /= np.linalg.norm(a)
        for S in (np.r_[a, np.zeros(3)][:, None], np.r_[np.zeros(3), a][:, None], np.eye(6)[:, [0, 1, 2]],
                  np.eye(6)[:, [3, 4, 2]]):
            W = complement(S)
            assert W.shape == (6, 6 - S.shape[1])
            assert np.abs(W.T @ S).max() < 1e-15 and relerr(W.T @ W, np.eye(W.shape[1])) < 1e-15  # Eqs. 41, 43
            assert relerr(S @ S.T + W @ W.T, np.eye(6)) < 1e-15  # Eq. 44
    assert complement(np.eye(6)).shape == (6, 0)  # a free-flyer holds nothing


@pytest.mark.parametrize("sizes", [[5], [5, 5], [5, 3, 0, 5, 4, 5, 5], [5] * 9, [3, 5, 0, 0, 5] * 3 + [2]])
def test_odd_even_elimination_solves_a_block_tridiagonal_system(sizes):
    """Eqs. (90)–(93) against a dense solve: any number of blocks (not a power of two), empty
    blocks (a free-flyer's), several right-hand sides."""
    rng = np.random.default_rng(len(sizes))
    n = sum(sizes)
    ends = np.cumsum(sizes)
    blocks = [slice(e - s, e) for s, e in zip(sizes, ends)]
    owner = np.searchsorted(ends, np.arange(n), side="right")
    G = rng.normal(size=(n, n))
    A = G @ G.T + n * np.eye(n)
    A[np.abs(owner[:, None] - owner[None, :]) > 1] = 0.0  # block tridiagonal, still SPD (diagonal dominance)
    rhs = rng.normal(size=(n, 3))
    assert relerr(schur.oee_solve(A, blocks, rhs), np.linalg.solve(A, rhs)) < 1e-12


# ---- the reference against the ABA-based reference and Pinocchio -----------------------------------------

@pytest.mark.parametrize("robot,floating", CHAIN_CASES)
def test_reference_matches_aba_minv_osim_and_pinocchio(robot, floating):
    m = load_case(robot, floating)
    q, v, _, tau = random_state(m, seed=11, n=4)
    assert relerr(schur.fd_schur(m, q, v, tau), ref.aba(m, q, v, tau)) <= TOL64
    Mi = schur.minv_schur(m, q)
    assert relerr(Mi, ref.minv(m, q)) <= TOL64
    L = schur.osim_inverse_schur(m, q)
    assert relerr(L, ref.osim_inverse(m, q)) <= TOL64
    J = ref.frame_jacobian(m, q, list(m.frames), "local").reshape(len(q), 6 * m.nf, m.nv)
    assert relerr(L, J @ Mi @ np.swapaxes(J, 1, 2)) <= TOL64  # Λ⁻¹ = J M⁻¹ Jᵀ
    pm = pin.buildModelFromUrdf(str(robot.path))
    data = pm.createData()
    for k in range(len(q)):
        qp = m.to_pinocchio_q(q[k])
        assert relerr(schur.fd_schur(m, q[k], v[k], tau[k]), pin.aba(pm, data, qp, v[k], tau[k])) <= TOL64
        Mp = pin.computeMinverse(pm, data, qp)
        assert relerr(schur.minv_schur(m, q[k]), np.triu(Mp) + np.triu(Mp, 1).T) <= TOL64


def test_reference_on_random_chains_of_64_and_256_links(tmp_path):
    """M⁻¹ and Λ⁻¹ to 1e-9 of the ABA-based ones, and fd_schur as shipped (one step of iterative
    refinement) too. The paper's procedure alone (refine=0) is not: q̈ = 𝒞f − ℬᵀ𝒜⁻¹ℬf (Eq. (72))
    subtracts two vectors |𝒞f| / |q̈| times bigger than the result (~10³ on 64 links, ~6·10⁵ on
    256: f = τ − b carries the chain's gravity loads), so its error is bounded by the size of 𝒞f,
    not of q̈: ≤ 1e-13 |𝒞f|, which is ≤ 1e-9 |q̈| on 64 links but up to 8·10⁻⁹ |q̈| (measured) on
    256 — the method's, not the arithmetic's: 𝒜's solve alone is good to 1e-13."""
    worst0 = 0.0
    for n, types in ((64, ("revolute", "prismatic")), (256, ("revolute",))):
        m = _chain(tmp_path, n, types)
        rng = np.random.default_rng(n)
        for _ in range(2):
            q, v, tau = m.random_q(rng), rng.normal(size=m.nv), rng.normal(size=m.nv)
            assert relerr(schur.minv_schur(m, q), ref.minv(m, q)) <= TOL64, n
            assert relerr(schur.osim_inverse_schur(m, q), ref.osim_inverse(m, q)) <= TOL64, n
            a = ref.aba(m, q, v, tau)
            assert relerr(schur.fd_schur(m, q, v, tau), a) <= TOL64, n
            got = schur.fd_schur(m, q, v, tau, refine=0)
            A, B, C, _ = schur._minv_parts(m, q)
            Cf = C @ (tau - ref.nle(m, q, v))
            assert np.max(np.abs(got - a)) <= 1e-13 * np.max(np.abs(Cf)), n
            assert relerr(got, a) <= (TOL64 if n == 64 else 5e-8), n
            worst0 = max(worst0, relerr(got, a))
    assert worst0 > TOL64  # what the refinement is for (if this fails, update docs/fijany.md)


def test_reference_global_operators_are_the_papers(tmp_path):
    """Eqs. (41)–(50) hold for the operators built, and on a chain 𝒜 is block tridiagonal."""
    m = _chain(tmp_path, 9, ("revolute", "prismatic", "planar"), floating=True)
    q = m.random_q(np.random.default_rng(2))
    Pt, Jinv, H, W = schur.schur_operators(m, q)
    assert np.abs(W.T @ H).max() < 1e-15 and relerr(H.T @ H, np.eye(m.nv)) < 1e-15
    assert relerr(H @ H.T + W @ W.T, np.eye(6 * m.nb)) < 1e-15
    M = ref.crba(m, q)  # M = ℋᵀ𝒫⁻¹𝒥𝒫⁻ᵀℋ (Eq. (10) with Eq. (45)'s operators), so M⁻¹ from Eq. (61) inverts it
    assert relerr(schur.minv_schur(m, q) @ M, np.eye(m.nv)) < 1e-10
    schur._check_tridiagonal(W.T @ Pt @ Jinv @ Pt.T @ W, schur._blocks(m))


# ---- the traced kernels ----------------------------------------------------------------------------------

def _traced_models(tmp_path):
    iiwa = load_case(*[c.values for c in ROBOT_CASES if c.id == "iiwa14-fixed"][0])
    return {"iiwa14 (flange + link 3)": iiwa.with_frames(list(iiwa.frames) + ["iiwa_link_3"]),
            "revolute/prismatic/planar chain, random axes": _chain(tmp_path, 7, ("revolute", "prismatic", "planar")),
            "floating chain (free-flyer: an empty W)": _chain(tmp_path, 5, floating=True)}


def test_traced_kernels_match_the_reference(tmp_path):
    for label, m in _traced_models(tmp_path).items():
        q, v, _, tau = random_state(m, seed=4, n=6)
        for k, args in (("fd_schur", (q, v, tau)), ("minv_schur", (q,)), ("osim_inverse_schur", (q,))):
            exp = registry.reference(m, k, dict(zip(registry.get(k).input_names, args)))[0]
            kern = registry.trace(m, k)
            got = _call(kern, *args).reshape(exp.shape)
            assert relerr(got, exp) <= TOL64, (label, k)
            if label.startswith("iiwa14") or k == "fd_schur":
                # the float32 bounds are measured on the robot cases (rbdgen/algorithms/schur.py). On the
                # synthetic chain with light links minv_schur's float32 error is 7.3e-5 (minv's 1.1e-7):
                # the cancellation of Eq. (61), so no bound is claimed there; fd_schur's refinement step
                # recovers it (4.7e-7; 1.2e-4 without: docs/fijany.md)
                got32 = _call(kern, *args, dtype=np.float32).reshape(exp.shape)
                assert relerr(got32, exp) <= TOL32[k], (label, k)


def test_compiled_cpu_float64_and_float32(tmp_path):
    m = _traced_models(tmp_path)["iiwa14 (flange + link 3)"]
    for dtype, tol in (("float64", {k: TOL64 for k in SCHUR}), ("float32", TOL32)):
        kern = rbdgen.build(m, kernels=SCHUR, dtype=dtype, opt="-O0")
        errs = kernel_errors(kern, m, dtype, seed=8, n=40, single=3)
        assert set(errs) == set(SCHUR) and all(errs[k] <= tol[k] for k in SCHUR), errs


def test_cuda_emulated_and_hls_csim(tmp_path):
    """The CUDA build (nvcc, host emulation of both launch shapes) and the HLS C simulation in
    ap_fixed<32,16> within the declared bounds (and not exact)."""
    m = _traced_models(tmp_path)["iiwa14 (flange + link 3)"]
    # PTX only: emulated here, the device code checked by nvcc's front end (ptxas: a third more).
    # minv_schur is fd_schur's factorization (_Chain.minv_apply) applied to the identity's columns
    # (test_compiled_cpu_float64_and_float32 and the HLS build below run it): left out of this
    # build, a third of its 40 s
    on_cuda = ("fd_schur", "osim_inverse_schur")
    cu = rbdgen.build(m, target="cuda", kernels=on_cuda, opt="-O0", arch="compute_80", werror=True)
    for shape in ("thread", "block"):
        errs = kernel_errors(cu.emulated(shape), m, np.float64, seed=5, n=12, single=3)
        assert set(errs) == set(on_cuda) and all(e <= TOL64 for e in errs.values()), (shape, errs)
    hls = rbdgen.build(m, target="hls", kernels=SCHUR, fixed=(32, 16), opt="-O0")
    errs = kernel_errors(hls, m, np.float64, seed=31, n=32, single=3)
    for k in SCHUR:
        assert 1e-9 < errs[k] <= registry.get(k).fixed_tol[(32, 16)], (k, errs)


def test_depth_grows_like_log_n(tmp_path):
    """The critical path of fd_schur grows by about the same amount at every doubling of the
    chain (one more level of block cyclic reduction, one more round of the Newton–Euler scan),
    where aba's grows in proportion to the chain."""
    ns = (8, 16, 32, 64)
    d = {k: [] for k in ("fd_schur", "aba")}
    for n in ns:
        m = _chain(tmp_path, n, frames=False, seed=n)
        for k in d:
            d[k].append(critical_path(registry.trace(m, k, cached=False)).depth)
    steps = np.diff(d["fd_schur"])
    assert steps.min() > 0 and steps.max() <= 1.25 * steps.min(), d  # log: a constant step per doubling
    assert d["aba"][-1] / d["aba"][-2] > 1.8 and d["aba"][-1] > 3 * d["fd_schur"][-1], d  # linear, and far above


# ---- what the factorization does not cover: refused, one line naming the link ------------------------------

def test_trees_mimic_armature_and_massless_links_are_refused(tmp_path, capsys):
    quad = load_case(*[c.values for c in ROBOT_CASES if c.id == "quadruped-floating"][0])
    for k in SCHUR:  # (constrained_fd_schur: the same check, below)
        with pytest.raises(UnsupportedError, match="link 'trunk' branches into 'FL_hip'"):
            registry.trace(quad, k, cached=False)
        with pytest.raises(UnsupportedError, match="branches"):
            registry.reference(quad, k, registry.random_inputs(quad, 1))
    rc, out, err = run_main(capsys, "generate", quad.source, "--floating-base", "--kernels", "fd_schur",
                            "--out", tmp_path / "o", "-q")
    assert rc == 2 and not (tmp_path / "o").exists()
    assert_one_error_line(err, out, "trunk", "branches", "serial chain")
    iiwa = load_case(*[c.values for c in ROBOT_CASES if c.id == "iiwa14-fixed"][0])
    with pytest.raises(UnsupportedError, match="joint 'iiwa_joint_1' has armature"):
        registry.trace(iiwa.with_armature(np.full(iiwa.nv, 0.1)), "fd_schur", cached=False)
    p = tmp_path / "massless.urdf"
    p.write_text(chain_urdf(3, seed=1).replace("</robot>", '<link name="tip"/><joint name="jt" type="revolute">'
                                               '<parent link="l2"/><child link="tip"/><axis xyz="0 0 1"/>'
                                               '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>'))
    rc, out, err = run_main(capsys, "generate", p, "--kernels", "minv_schur", "--out", tmp_path / "o2", "-q")
    assert rc == 2
    assert_one_error_line(err, out, str(p), "minv_schur", "link 'tip'", "inverse inertia")
    panda = [c.values for c in ROBOT_CASES if c.id == "panda_coupled-fixed"]
    if panda:
        with pytest.raises(UnsupportedError, match="mimic"):
            registry.trace(load_case(*panda[0]), "fd_schur", cached=False)


# ---- Table I: the closed chain (contacts and loops) ---------------------------------------------------------

def _constrained_cases(tmp_path):
    iiwa = load_case(*[c.values for c in ROBOT_CASES if c.id == "iiwa14-fixed"][0])
    ee = iiwa.frames[0]
    return {"iiwa flange welded (6d)": iiwa.with_constraints([rbdgen.Contact(ee, "6d")]),
            "iiwa flange on a point (3d)": iiwa.with_constraints([rbdgen.Contact(ee, "3d")]),
            "iiwa flange looped to link 3 (3d, Baumgarte)": iiwa.with_constraints(
                [rbdgen.Loop(ee, "iiwa_link_3", "3d", baumgarte=(4.0, 2.0))])}


def test_constrained_fd_schur_matches_contact_fd_and_pinocchio(tmp_path):
    """Table I's procedure with the Schur pieces (reference and traced) against contact_fd (the
    ABA-based reference) and Pinocchio's constraintDynamics; and on a tree, refused."""
    from rbdgen.algorithms.constrained import pin_constraint_dynamics

    pm = pin.buildModelFromUrdf(str(load_case(*[c.values for c in ROBOT_CASES if c.id == "iiwa14-fixed"][0]).source))
    for label, m in _constrained_cases(tmp_path).items():
        cons = list(m.constraints)
        q, v, _, tau = random_state(m, seed=21, n=5)
        qdd, F = ref.contact_fd(m, q, v, tau, cons)
        qs, Fs = schur.contact_fd_schur(m, q, v, tau, cons)
        assert relerr(qs, qdd) <= TOL64 and relerr(Fs, F) <= TOL64, label
        out = run(registry.trace(m, "constrained_fd_schur"), q, v, tau)
        assert relerr(out[0], qdd) <= TOL64 and relerr(out[1].reshape(F.shape), F) <= TOL64, label
        if not any(getattr(c, "stabilised", False) for c in cons):
            for k in range(2):
                qp, Fp = pin_constraint_dynamics(pin, pm, m.to_pinocchio_q(q[k]), v[k], tau[k], cons)
                assert relerr(qs[k], qp) <= 1e-8 and relerr(Fs[k], Fp) <= 1e-8, label
    quad = load_case(*[c.values for c in ROBOT_CASES if c.id == "quadruped-floating"][0])
    quad = quad.with_constraints([rbdgen.Contact(f, "3d") for f in quad.frames])
    with pytest.raises(UnsupportedError, match="constrained_fd_schur: link 'trunk' branches"):
        registry.trace(quad, "constrained_fd_schur", cached=False)


def test_constrained_fd_schur_compiled_and_refusing_singular_states(tmp_path):
    m = _constrained_cases(tmp_path)["iiwa flange welded (6d)"]
    kern = rbdgen.build(m, kernels=["constrained_fd_schur", "constrained_fd"], opt="-O1", simd=False)
    q, v, _, tau = random_state(m, seed=2, n=16)
    a, F = kern.constrained_fd_schur(q, v, tau)
    b, G = kern.constrained_fd(q, v, tau)
    assert relerr(a, b) <= 1e-9 and relerr(F, G) <= 1e-9
    q0 = np.zeros(m.nq)  # stretched out: the weld leaves a singular S (joints 1, 3, 5, 7 on one axis)
    with pytest.raises(rbdgen.ContactError, match="constrained_fd_schur: the constraint system is singular"):
        kern.constrained_fd_schur(q0, np.zeros(m.nv), np.zeros(m.nv))


def test_constrained_depth_grows_like_log_n(tmp_path):
    d = {"constrained_fd": [], "constrained_fd_schur": []}
    for n in (8, 16, 32):
        m = _chain(tmp_path, n, frames=False, seed=n)
        m = m.with_constraints([rbdgen.Contact(m.leaf_links[0], "3d")])
        for k in d:
            d[k].append(critical_path(registry.trace(m, k, cached=False)).depth)
    steps = np.diff(d["constrained_fd_schur"])
    assert 0 < steps.min() and steps.max() <= 1.25 * steps.min(), d
    assert d["constrained_fd"][-1] / d["constrained_fd"][-2] > 1.8 and d["constrained_fd"][-1] > 3 * d["constrained_fd_schur"][-1], d
