"""Armature and external forces in the kernels (issue 43, items 3 and 4).

Armature: each DOF's rotor inertia on M's diagonal, in every kernel that involves M (rnea's
armature·q̈, crba's diagonal, the articulated-body D_i of aba, minv, the scans and Λ⁻¹, the
stale-data kernels' own joint term; ∂τ/∂a = M and ∂q̈/∂τ = M⁻¹ of the derivatives). Oracles:
Pinocchio with ``model.armature`` set (every declared kernel's counterpart), and the reference's
own identities. External forces: the opt-in variants ``rnea_fext``, ``aba_fext``,
``rnea_derivatives_fext``, ``aba_derivatives_fext`` (f_ext (nb, 6): per body [force; torque] in its
frame, Pinocchio's fext[i + 1]) against the reference, Pinocchio's rnea/aba/derivatives with
fext, and central finite differences of the reference (f_ext held fixed in the bodies' frames).
The two cases are the quick loop's: a fixed serial arm and a floating branched tree.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import rbdgen
import rbdgen.robots
from rbdgen import reference as ref
from rbdgen import registry
from rbdgen.algorithms import KERNELS
from rbdgen.ir import run

from conftest import (ROBOT_CASES, ROBOTS, TOL32, TOL64, kernel_args, kernel_err, kernel_errors, load_case,
                      random_state, ref_out, relerr)

FEXT = ("rnea_fext", "aba_fext", "rnea_derivatives_fext", "aba_derivatives_fext")
CASES = [c for c in ROBOT_CASES if c.id in ("iiwa14-fixed", "quadruped-floating")]
#: central differences (as tests/test_reference_derivatives.py): truncation ~1e-12, round-off ~1e-10
EPS, FD_TOL = 1e-6, 1e-6


def _path(robot):
    return str(robot.path)


def _armature(nv, floating):
    """Rotor inertias of the size of real ones (0.05 … 0.5), one DOF left at zero (mixed bodies),
    and on a floating base the free-flyer's six too (Pinocchio's armature covers every DOF)."""
    arm = np.random.default_rng(nv).uniform(0.05, 0.5, nv)
    arm[-2] = 0.0
    return arm


def _model(robot, floating, armature=True):
    m = rbdgen.load_urdf(_path(robot), floating_base=floating,
                         armature=_armature(7 if not floating else 18, floating) if armature else None)
    return m.with_frames(m.leaf_links[:2])


def _pin_model(robot, floating, armature=None):
    pm = pin.buildModelFromUrdf(_path(robot), pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(_path(robot))
    if armature is not None:
        pm.armature = np.asarray(armature, dtype=float)
    return pm


def _state(model, seed, n=None):
    rng = np.random.default_rng(seed)
    shape = () if n is None else (n,)
    q = model.random_q(rng, n)
    v, a = rng.normal(size=shape + (model.nv,)), rng.normal(size=shape + (model.nv,))
    tau = 10.0 * rng.normal(size=shape + (model.nv,))
    f = 5.0 * rng.normal(size=shape + (model.nb, 6))
    return q, v, a, tau, f


def _pin_fext(f):
    return [pin.Force.Zero()] + [pin.Force(x[:3].copy(), x[3:].copy()) for x in np.reshape(f, (-1, 6))]


def _sym(U):
    return np.triu(U) + np.triu(U, 1).T


# ---- armature: the model -------------------------------------------------------------------------

def test_armature_from_the_urdf_and_load_urdf(tmp_path):
    """The URDF extension <dynamics armature="…"/>, and load_urdf(armature=…) as a dict (joints
    named; the others keep the URDF's), one number (every DOF but a free-flyer's) or an array of
    nv; zeros by default; bad values refused with the joint or index named."""
    src = rbdgen.robots.path("iiwa14").read_text()
    src = src.replace('<joint name="iiwa_joint_3" type="revolute">',
                      '<joint name="iiwa_joint_3" type="revolute">\n    <dynamics damping="0.5" armature="0.25"/>', 1)
    assert 'armature="0.25"' in src
    urdf = tmp_path / "iiwa_arm.urdf"
    urdf.write_text(src)
    m = rbdgen.load_urdf(urdf)
    assert m.armature.tolist() == [0, 0, 0.25, 0, 0, 0, 0]
    assert rbdgen.load_urdf(rbdgen.robots.path("iiwa14")).armature.tolist() == [0.0] * 7
    assert rbdgen.load_urdf(urdf, armature={"iiwa_joint_1": 0.1}).armature.tolist() == [0.1, 0, 0.25, 0, 0, 0, 0]
    assert rbdgen.load_urdf(urdf, armature=0.3).armature.tolist() == [0.3] * 7
    assert rbdgen.load_urdf(urdf, armature=np.arange(7.0)).armature.tolist() == list(range(7))
    quad = rbdgen.load_urdf(rbdgen.robots.path("quadruped"), floating_base=True, armature=0.2)
    assert quad.armature.tolist() == [0.0] * 6 + [0.2] * 12  # the free-flyer has no rotor
    assert not quad.armature.flags.writeable
    assert m.with_armature({"iiwa_joint_3": 0.0}).armature.tolist() == [0.0] * 7
    import pickle
    assert pickle.loads(pickle.dumps(m)).armature.tolist() == m.armature.tolist()
    for bad, needle in (({"no_such_joint": 1.0}, "unknown joint 'no_such_joint'"), (-0.1, "≥ 0"),
                        (np.ones(3), r"shape \(7,\)"), ([0.1] * 6 + [np.nan], r"armature\[6\]"),
                        ({"iiwa_joint_1": "x"}, "must be a number")):
        with pytest.raises(ValueError, match=needle):
            rbdgen.load_urdf(urdf, armature=bad)
    urdf.write_text(src.replace('armature="0.25"', 'armature="-1"'))
    with pytest.raises(rbdgen.errors.URDFError, match="negative armature"):
        rbdgen.load_urdf(urdf)


def test_armature_of_coupled_mimic_joints():
    """Coupled mimic joints: the armature is the tree's (a follower's rotor too), contracted like
    the rest: M = Gᵀ (M_tree + diag(armature)) G, so the reduced M gains diag(cm.armature); one
    number or an array sets the free joints' DOFs."""
    robot = next(r for r in ROBOTS if r.name == "panda_coupled")
    plain = rbdgen.load_urdf(robot.path)
    cm = rbdgen.load_urdf(robot.path, armature={"panda_finger_joint2": 0.5, "panda_joint1": 0.1})
    assert cm.coupled and cm.tree.armature[-1] == 0.5 and cm.nv == 8
    assert np.allclose(cm.armature, [0.1] + [0.0] * 6 + [0.5])  # the follower's rotor on its leader (m = 1)
    q = cm.random_q(np.random.default_rng(0))
    assert np.allclose(ref.crba(cm, q) - ref.crba(plain, q), np.diag(cm.armature), atol=1e-12)
    assert cm.with_armature(0.2).armature.tolist() == [0.2] * 8
    assert np.allclose(cm.with_armature(np.arange(8.0)).armature, np.arange(8.0))
    for k in ("rnea", "crba", "aba", "minv", "rnea_fext"):  # the traced coupled forms carry it
        args = kernel_args(k, *_state(cm, 1, n=3)[:4], cm)
        assert kernel_err(run(registry.trace(cm, k), *args), ref_out(cm, k, *args)) <= TOL64, k


# ---- armature: the reference against Pinocchio, the traced kernels against the reference -------

@pytest.mark.parametrize("robot,floating", CASES)
def test_armature_reference_matches_pinocchio(robot, floating):
    """Every declared kernel's reference with armature against its Pinocchio counterpart with
    ``model.armature`` set (rnea, crba, aba, minv, the derivatives, the scans, Λ⁻¹, contact terms,
    the stale-data kernels at their exact state, the f_ext variants); and the armature is really
    there: rnea, crba, aba and minv move by it, nle and gravity do not."""
    m = _model(robot, floating)
    plain = _model(robot, floating, armature=False)
    pm = _pin_model(robot, floating, m.armature)
    pm.rbdgen_frames = m.frames
    data = pm.createData()
    q, v, a, tau, _ = _state(m, 3, n=3)
    env = registry.complete_inputs(m, {"q": q, "v": v, "a": a, "tau": tau})
    errs = {}
    for name in registry.kernels():
        decl = registry.get(name)
        if decl.constraints:  # generated for contacts chosen per robot: tests/test_loops.py compares it
            continue
        if decl.check is not None:  # the Schur kernels model no armature: refused (test_schur.py)
            assert not registry.supports(m, name)
            continue
        env_k = decl.pinocchio_env(m, env) if decl.pinocchio_env else env
        got = registry.reference(m, name, env_k)
        for k in range(3):
            exp = decl.pinocchio(pin, pm, data, m.to_pinocchio_q(q[k]), *(env_k[x][k] for x in decl.input_names[1:]))
            errs[name] = max([errs.get(name, 0.0)] + [relerr(g[k], x) for g, x in zip(got, exp, strict=True)])
    bad = {k: e for k, e in errs.items() if not e <= TOL64}
    assert not bad, bad
    assert relerr(ref.rnea(m, q, v, a) - ref.rnea(plain, q, v, a), m.armature * a) <= TOL64
    assert relerr(ref.crba(m, q[0]) - ref.crba(plain, q[0]), np.diag(m.armature)) <= TOL64
    assert relerr(ref.aba(m, q, v, tau), ref.aba(plain, q, v, tau)) > 1e-3
    assert relerr(ref.minv(m, q[0]) @ ref.crba(m, q[0]), np.eye(m.nv)) <= TOL64
    assert relerr(ref.nle(m, q, v), ref.nle(plain, q, v)) == 0.0
    assert relerr(ref.gravity(m, q), ref.gravity(plain, q)) == 0.0


@pytest.mark.parametrize("robot,floating", CASES)
def test_armature_in_the_traced_kernels(robot, floating):
    """Every kernel (variants included) traced for a model with armature, run by the IR
    interpreter, against the reference: float64 to TOL64, float32 within the declared bounds."""
    m = _model(robot, floating)
    q, v, a, tau, _ = _state(m, 21, n=3)
    errs, errs32 = {}, {}
    for k in KERNELS + FEXT:
        args = kernel_args(k, q, v, a, tau, m)
        kern = registry.trace(m, k)
        exp = ref_out(m, k, *args)
        errs[k] = kernel_err(run(kern, *args), exp)
        errs32[k] = kernel_err(run(kern, *(x.astype(np.float32) for x in args), dtype=np.float32), exp)
    assert not {k: e for k, e in errs.items() if not e <= TOL64}
    assert not {k: e for k, e in errs32.items() if not e <= TOL32[k]}, errs32


def test_zero_armature_generates_the_same_code():
    """A model whose armature is zeros (the default, or set to 0 in any form) prints the same
    bytes as before the armature existed; a nonzero one changes exactly the kernels with M in
    them (nle, gravity and forward kinematics stay the same)."""
    from rbdgen.targets.cpu import generate_cpu

    m = rbdgen.load_urdf(rbdgen.robots.path("quadruped"), floating_base=True).with_frames(["FL_foot"])
    kernels = ("rnea", "nle", "gravity", "crba", "aba", "minv", "forward_kinematics", "rnea_scan", "aba_scan",
               "osim_inverse", "rnea_stale", "rnea_fext")
    files = lambda model: generate_cpu(model, kernels=kernels, name="x").files  # noqa: E731
    base = files(m)
    assert files(m.with_armature(0.0)) == base
    assert files(m.with_armature(np.zeros(m.nv))) == base
    changed = files(m.with_armature(0.1))
    differ = {k for k in kernels if changed[f"rbd_x_{k}_f64.cpp"] != base[f"rbd_x_{k}_f64.cpp"]}
    assert differ == set(kernels) - {"nle", "gravity", "forward_kinematics"}


# ---- external forces ---------------------------------------------------------------------------

def test_the_f_ext_variants_are_declared_once_and_opt_in():
    """f_ext is one declared input (nb, 6) with a sampler; the variants take their base kernel's
    inputs and then f_ext, are left out of the default selection (builds and packages without
    them keep their size) and are what kern.rnea(…, f_ext=…) calls."""
    from rbdgen.algorithms import VARIANTS

    m = _model(*CASES[0].values, armature=False)
    a = registry.INPUTS["f_ext"]
    assert a.shape == ("nb", 6) and a.dims(m) == (m.nb, 6)
    assert registry.random_inputs(m, 4)["f_ext"].shape == (4, 6 * m.nb)
    assert VARIANTS == FEXT
    for k in FEXT:
        base = registry.get(k).variant_of[0]
        assert registry.get(k).input_names == registry.get(base).input_names + ("f_ext",)
        assert registry.variants(base) == {"f_ext": k}
    assert not set(FEXT) & set(registry.applicable(m)) and set(registry.applicable(m)) == set(KERNELS)
    assert registry.resolve("rnea_fext,rnea") == ("rnea", "rnea_fext")


@pytest.mark.parametrize("robot,floating", CASES)
def test_fext_kernels_match_pinocchio(robot, floating):
    """The four variants, traced and interpreted, against Pinocchio's rnea, aba,
    computeRNEADerivatives and computeABADerivatives with fext (and against the reference), with
    and without armature."""
    for armature in (False, True):
        m = _model(robot, floating, armature)
        pm = _pin_model(robot, floating, m.armature)
        data = pm.createData()
        q, v, a, tau, f = _state(m, 5, n=2)
        for k in range(2):
            qp, pf = m.to_pinocchio_q(q[k]), _pin_fext(f[k])
            want = {
                "rnea_fext": (pin.rnea(pm, data, qp, v[k], a[k], pf).copy(),),
                "aba_fext": (pin.aba(pm, data, qp, v[k], tau[k], pf).copy(),),
                "rnea_derivatives_fext": tuple(x.copy() for x in pin.computeRNEADerivatives(pm, data, qp, v[k], a[k], pf)[:2]),
                "aba_derivatives_fext": tuple(x.copy() for x in pin.computeABADerivatives(pm, data, qp, v[k], tau[k], pf)),
            }
            want["aba_derivatives_fext"] = want["aba_derivatives_fext"][:2] + (_sym(want["aba_derivatives_fext"][2]),)
            for name, exp in want.items():
                second = a[k] if name.startswith("rnea") else tau[k]
                got = run(registry.trace(m, name), q[k], v[k], second, f[k].ravel())
                got = got if isinstance(got, tuple) else (got,)
                err = max(relerr(g, x) for g, x in zip(got, exp, strict=True))
                assert err <= TOL64, (name, armature, err)
                refd = registry.reference(m, name, {"q": q[k], "v": v[k], "a": a[k], "tau": tau[k], "f_ext": f[k].ravel()})
                assert max(relerr(g, x) for g, x in zip(refd, exp)) <= TOL64, (name, "reference")
        # f_ext matters, and f_ext = 0 is the plain kernel
        zero = np.zeros(6 * m.nb)
        assert relerr(run(registry.trace(m, "rnea_fext"), q[0], v[0], a[0], zero), ref.rnea(m, q[0], v[0], a[0])) <= TOL64
        assert relerr(ref.rnea(m, q[0], v[0], a[0], f_ext=f[0]), ref.rnea(m, q[0], v[0], a[0])) > 1e-2


@pytest.mark.parametrize("robot,floating", ROBOT_CASES)
def test_fext_variants_interpreted_on_every_robot(robot, floating):
    """The variants on every robot case of the suite (tests/test_ir.py's matrix runs KERNELS,
    which leaves the variants out): the IR against the reference in float64, and in float32
    within the declared bounds (measured, 2 states per case: rnea_fext 3.4e-7, aba_fext 5.8e-7,
    rnea_derivatives_fext 3.3e-7, aba_derivatives_fext 3.7e-5 on icub floating)."""
    m = load_case(robot, floating)
    q, v, a, tau = random_state(m, seed=23, n=2)
    for k in FEXT:
        args = kernel_args(k, q, v, a, tau, m)
        exp, kern = ref_out(m, k, *args), registry.trace(m, k)
        assert kernel_err(run(kern, *args), exp) <= TOL64, k
        assert kernel_err(run(kern, *(x.astype(np.float32) for x in args), dtype=np.float32), exp) <= TOL32[k], k


def _fd(f, x, plus, n):
    cols = []
    for k in range(n):
        e = np.zeros(n)
        e[k] = EPS
        cols.append((f(plus(x, e)) - f(plus(x, -e))) / (2 * EPS))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("robot,floating", CASES)
def test_fext_derivatives_match_finite_differences(robot, floating):
    """∂τ/∂q, ∂τ/∂v (and ∂τ/∂a = M, armature included) of rnea with f_ext, and ∂q̈/∂q, ∂q̈/∂v,
    ∂q̈/∂τ of aba with f_ext — reference and traced variants — against central differences of
    the reference's rnea/aba in the tangent space (q ⊕ ε e_k), f_ext fixed in the bodies' frames.
    On a floating base the forces then enter ∂/∂q through the base's rotation too."""
    m = _model(robot, floating)
    q, v, a, tau, f = _state(m, 13)
    fl = f.ravel()
    fd_q = _fd(lambda x: ref.rnea(m, x, v, a, f_ext=f), q, m.integrate, m.nv)
    fd_v = _fd(lambda x: ref.rnea(m, q, x, a, f_ext=f), v, np.add, m.nv)
    fd_a = _fd(lambda x: ref.rnea(m, q, v, x, f_ext=f), a, np.add, m.nv)
    dq, dv = ref.rnea_derivatives(m, q, v, a, f_ext=f)
    tq, tv = run(registry.trace(m, "rnea_derivatives_fext"), q, v, a, fl)
    for got, want in ((dq, fd_q), (dv, fd_v), (tq, fd_q), (tv, fd_v), (ref.crba(m, q), fd_a)):
        assert relerr(got, want) <= FD_TOL
    # without the forces ∂τ/∂q differs: the test sees them
    assert relerr(ref.rnea_derivatives(m, q, v, a)[0], fd_q) > 1e-3
    fa_q = _fd(lambda x: ref.aba(m, x, v, tau, f_ext=f), q, m.integrate, m.nv)
    fa_v = _fd(lambda x: ref.aba(m, q, x, tau, f_ext=f), v, np.add, m.nv)
    fa_t = _fd(lambda x: ref.aba(m, q, v, x, f_ext=f), tau, np.add, m.nv)
    r = ref.aba_derivatives(m, q, v, tau, f_ext=f)
    t = run(registry.trace(m, "aba_derivatives_fext"), q, v, tau, fl)
    for got in (r, t):
        for g, want in zip(got, (fa_q, fa_v, fa_t), strict=True):
            assert relerr(g, want) <= FD_TOL


# ---- compiled ------------------------------------------------------------------------------------

_built: dict = {}

#: the armature and the forces in compiled C++: the kernels with M in them, the f_ext variants
COMPILED = {"iiwa14-fixed": ("rnea", "crba", "aba", "minv", "aba_derivatives", "aba_scan", "rnea_stale",
                             "osim_inverse") + FEXT,
            "quadruped-floating": ("rnea", "crba", "aba", "minv", "rnea_scan") + FEXT}


def _compiled(case_id, robot, floating):
    if case_id not in _built:
        m = _model(robot, floating)
        _built[case_id] = m, rbdgen.build(m, kernels=COMPILED[case_id], opt="-O0", simd=False)
    return _built[case_id]


@pytest.mark.parametrize("robot,floating", CASES)
def test_compiled_kernels_with_armature_and_fext(robot, floating, request):
    """The C++ kernels of a model with armature, the f_ext variants among them, against the
    reference (batch and single state; f_ext drawn by the registry's sampler), and the
    variants against Pinocchio directly."""
    m, kern = _compiled(request.node.callspec.id, robot, floating)
    errs = kernel_errors(kern, m, np.float64, seed=31, n=5, single=2)
    assert set(errs) == set(COMPILED[request.node.callspec.id])
    bad = {k: e for k, e in errs.items() if not e <= TOL64}
    assert not bad, bad
    pm = _pin_model(robot, floating, m.armature)
    data = pm.createData()
    q, v, a, tau, f = _state(m, 9)
    qp, pf = m.to_pinocchio_q(q), _pin_fext(f)
    assert relerr(kern.rnea_fext(q, v, a, f), pin.rnea(pm, data, qp, v, a, pf)) <= TOL64
    assert relerr(kern.aba_fext(q, v, tau, f), pin.aba(pm, data, qp, v, tau, pf)) <= TOL64
    assert relerr(kern.crba(q), _sym(pin.crba(pm, data, qp))) <= TOL64
    d = pin.computeABADerivatives(pm, data, qp, v, tau, pf)
    for g, x in zip(kern.aba_derivatives_fext(q, v, tau, f), (d[0], d[1], _sym(d[2])), strict=True):
        assert relerr(g, x) <= TOL64


def test_rnea_takes_f_ext_where_rnea_fext_was_built():
    """kern.rnea(q, v, a, f_ext=…) calls rnea_fext (f_ext (nb, 6) or flat, one state or a batch,
    a list too; f_ext=None is rnea itself); aba and the derivatives likewise. A build without the
    variant says, in one ValueError, which kernel to add; an unknown keyword is a TypeError."""
    m, kern = _compiled("iiwa14-fixed", *CASES[0].values)
    q, v, a, tau, f = _state(m, 4, n=3)
    want = kern.rnea_fext(q, v, a, f)
    np.testing.assert_array_equal(kern.rnea(q, v, a, f_ext=f), want)
    np.testing.assert_array_equal(kern.rnea(q, v, a, f_ext=f.reshape(3, -1)), want)
    np.testing.assert_array_equal(kern.rnea(q[1], v[1], a[1], f_ext=f[1].tolist()), want[1])
    np.testing.assert_array_equal(kern.rnea(q[1], v[1], a[1], f_ext=f[1].ravel()), want[1])
    out = np.empty((3, m.nv))
    assert kern.rnea(q, v, a, f_ext=f, out=out) is out
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(kern.rnea(q, v, a, f_ext=None), kern.rnea(q, v, a))
    assert relerr(kern.rnea(q, v, a, f_ext=f), ref.rnea(m, q, v, a, f_ext=f)) <= TOL64
    assert relerr(kern.aba(q, v, tau, f_ext=f), ref.aba(m, q, v, tau, f_ext=f)) <= TOL64
    for g, x in zip(kern.aba_derivatives(q, v, tau, f_ext=f), ref.aba_derivatives(m, q, v, tau, f_ext=f), strict=True):
        assert relerr(g, x) <= TOL64
    with pytest.raises(TypeError, match="unexpected keyword argument 'fext'.*f_ext="):
        kern.rnea(q, v, a, fext=f)
    with pytest.raises(ValueError, match=r"f_ext' has shape \(3, 2, 6\), expected \(7, 6\) or \(N, 7, 6\)"):
        kern.rnea_fext(q, v, a, f[:, :2])
    with pytest.raises(TypeError, match=r"crba\(\) got an unexpected keyword argument 'f_ext'"):
        kern.crba(q, f_ext=f)  # no variant of crba takes forces
    plain = rbdgen.build(m, kernels=("rnea",), opt="-O0", simd=False)
    with pytest.raises(ValueError, match=r"rnea\(…, f_ext=…\) calls the kernel rnea_fext, which this build does "
                                         r"not have \(built: rnea\); add it: rbdgen.build\(model, kernels=\[..., 'rnea_fext'\]\)"):
        plain.rnea(q, v, a, f_ext=f)
    np.testing.assert_array_equal(plain.rnea(q, v, a, f_ext=None), kern.rnea(q, v, a))


def test_f_ext_keyword_takes_the_binding_s_fast_path(monkeypatch):
    """kern.rnea(q, v, a, f_ext=x) on plain ndarrays goes from the C binding straight to
    rnea_fext, as rnea_fext(q, v, a, x) does: through the Python method it cost ~6 µs a call
    against ~0.35 (iiwa, one state). The method's variant lookup is made to fail here, so only the
    binding can answer: one state, a batch, out=, the states-last layout, f_ext=None (rnea)."""
    from rbdgen.kernels import loaded

    m, kern = _compiled("iiwa14-fixed", *CASES[0].values)
    q, v, a, tau, f = _state(m, 7, n=5)
    want, want_aba, plain = kern.rnea_fext(q, v, a, f), kern.aba_fext(q, v, tau, f), kern.rnea(q, v, a)

    def no_fallback(*args, **kw):
        raise AssertionError("the Python method ran")
    monkeypatch.setattr(loaded, "call_variant", no_fallback)
    np.testing.assert_array_equal(kern.rnea(q, v, a, f_ext=f), want)
    np.testing.assert_array_equal(kern.rnea(q[2], v[2], a[2], f_ext=f[2]), want[2])
    np.testing.assert_array_equal(kern.aba(q, v, tau, f_ext=f), want_aba)
    out = np.empty((5, m.nv))
    assert kern.rnea(q, v, a, f_ext=f, out=out) is out
    np.testing.assert_array_equal(out, want)
    T = kern.rnea(*(np.ascontiguousarray(np.moveaxis(x, 0, -1)) for x in (q, v, a)),
                  f_ext=np.ascontiguousarray(np.moveaxis(f, 0, -1)), layout="states_last")
    np.testing.assert_array_equal(T.T, want)
    np.testing.assert_array_equal(kern.rnea(q, v, a, f_ext=None), plain)
    with pytest.raises(AssertionError, match="the Python method ran"):  # a list: the method converts it
        kern.rnea(q[1], v[1], a[1], f_ext=f[1].tolist())


def test_a_package_routes_f_ext_too(tmp_path):
    """A generated package compiles each kernel alone on its first call; kern.rnea(…, f_ext=…)
    there asks the package for rnea_fext."""
    from rbdgen.package import generate_package, load_package

    m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    generate_package(m, tmp_path, urdf=str(rbdgen.robots.path("iiwa14")), load_options={}, name="iw_fext",
                     kernels=("rnea", "rnea_fext"), dtypes=("float64",))
    kern = load_package(tmp_path / "iw_fext", opt="-O0")
    q, v, a, _, f = _state(m, 6, n=2)
    assert relerr(kern.rnea(q, v, a, f_ext=f), ref.rnea(m, q, v, a, f_ext=f)) <= TOL64
    assert relerr(kern.rnea(q, v, a), ref.rnea(m, q, v, a)) <= TOL64


def test_fext_variants_on_the_cuda_and_hls_targets(tmp_path):
    """The other targets print the same traced variants: the CUDA program emulated on the CPU
    (both launch shapes; f_ext (nb, 6) through the numpy path, and kern.rnea(…, f_ext=…)), and
    the HLS testbench compiled with g++ and run in ap_fixed<32, 16> (f_ext in its states) — both
    with armature."""
    import re
    import subprocess

    from rbdgen.targets.hls import emit as H
    from rbdgen.targets.hls.csim import ap_types_dir

    m = _model(*CASES[0].values)
    kern = rbdgen.build(m, target="cuda", kernels=("rnea", "rnea_fext", "aba_fext"), opt="-O0",
                        arch="compute_90", werror=True)  # PTX only: emulated here
    q, v, a, tau, f = _state(m, 8, n=5)
    for shape in ("thread", "block"):
        emu = kern.emulated(shape)
        assert relerr(emu.rnea_fext(q, v, a, f), ref.rnea(m, q, v, a, f_ext=f)) <= TOL64
        assert relerr(emu.aba_fext(q, v, tau, f.reshape(5, -1)), ref.aba(m, q, v, tau, f_ext=f)) <= TOL64
        np.testing.assert_array_equal(emu.rnea(q, v, a, f_ext=f), emu.rnea_fext(q, v, a, f))
    gen = H.generate_hls(m, H.numeric_type(fixed=(32, 16)), ("rnea_fext", "aba_fext"))
    for fn, text in gen.files.items():
        (tmp_path / fn).write_text(text)
    assert "tb_f_ext[NSTATES * 42]" in gen.files[gen.testbench] and "tb_stale" not in gen.files[gen.testbench]
    cmd = ["g++", "-std=c++14", "-O0", "-isystem", str(ap_types_dir()), gen.testbench, *gen.sources, "-o", "tb"]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    ok = subprocess.run([str(tmp_path / "tb")], capture_output=True, text=True)
    assert ok.returncode == 0 and "all kernels within tolerance" in ok.stdout, ok.stdout
    assert set(re.findall(r"^\s+(\w+)\s+\S+\s+\(tolerance", ok.stdout, re.M)) == {"rnea_fext", "aba_fext"}
