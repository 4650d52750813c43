"""Spherical (ball) and planar joints (issue 43, item 2), in every kernel, target, reference and
derivative, on synthetic trees that mix them with revolute and prismatic joints, fixed and
floating base.

The oracles are independent of what they check:

* Pinocchio, with the same robot built in Pinocchio's own API from the same numbers
  (``JointModelSpherical``, ``JointModelPlanar``, …, ``appendBodyToJoint``), never from our
  model, and for planar joints also Pinocchio's URDF parser on a URDF: every kernel's reference
  (forward kinematics, frames, dynamics, tangent-space derivatives) and ``integrate``;
* the NumPy reference, for the traced IR (every kernel), the compiled CPU kernels (every
  kernel), the CUDA emulation and the HLS C simulation in double (rnea, crba, aba);
* central finite differences, for the tangent map against ``integrate`` and for the composed
  partial derivatives along q's raw coordinates.

Trees are built in depth-first order, as URDF and MJCF documents give them: Pinocchio's
algorithms assume it (its CRBA and derivatives read a joint's subtree as a contiguous range of
v; a tree built in another order gives a wrong M there, not an error).
"""
from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

import rbdgen
from rbdgen import reference as ref
from rbdgen import registry
from rbdgen import spatial as sp
from rbdgen.algorithms import KERNELS, trace
from rbdgen.autodiff import aba_partials, rnea_partials, tangent_map
from rbdgen.errors import UnsupportedError
from rbdgen.ir import run
from rbdgen.model import ModelBuilder
from rbdgen.robots import chain_urdf, tree_urdf
from rbdgen.symbolic import joint_transform, numeric_X, pattern, symbolic_X

from conftest import TOL32, TOL64, kernel_args, kernel_err, kernel_errors, random_state, ref_out, relerr

# ---- the robots -------------------------------------------------------------------------------

#: name → (joint kinds after the base, floating base, seed)
CASES = {
    "mixed-fixed": (("spherical", "planar", "revolute", "prismatic", "spherical", "revolute", "planar",
                     "prismatic"), False, 3),
    "mixed-floating": (("spherical", "revolute", "planar", "prismatic", "spherical", "planar"), True, 5),
    # spherical joints only, one under another and siblings: the quaternion's rotation alone
    "balls-fixed": (("spherical", "spherical", "spherical"), False, 8),
    # the small robot the compiled targets build (few DoFs: compile time)
    "small-floating": (("spherical", "planar", "revolute", "prismatic"), True, 11),
}
#: URDF planar trees (Pinocchio's URDF parser is the oracle there): name → (URDF text, floating)
URDF_CASES = {
    "urdf-planar-fixed": (tree_urdf(6, branching=2, seed=3, joint_types=("planar", "revolute", "prismatic",
                                                                           "continuous")), False),
    "urdf-planar-floating": (chain_urdf(4, seed=7, joint_types=("revolute", "planar")), True),
}


def _rotation(rng, k):
    """Identity, an exact quarter turn, or a general rotation (the pruning sees all three)."""
    if k % 3 == 0:
        return np.eye(3)
    if k % 3 == 1:
        return sp.rot_x(math.pi / 2) if rng.random() < 0.5 else sp.rot_z(-math.pi / 2)
    u = rng.normal(size=4)
    return sp.quat_to_rot(u / np.linalg.norm(u))


def _link(rng):
    """(mass, COM, rotational inertia about the COM): physical (triangle inequality strict)."""
    s = rng.uniform(0.005, 0.05, 3)
    R = _rotation(rng, 2)
    return rng.uniform(0.3, 3.0), rng.uniform(-0.1, 0.1, 3), R @ np.diag([s[1] + s[2], s[0] + s[2], s[0] + s[1]]) @ R.T


def _spec(kinds, floating, seed):
    """The robot as plain numbers: joints in depth-first order (each parent is the last link or
    one of its ancestors), then one welded link with mass (a fixed joint) under the second body."""
    rng = np.random.default_rng(seed)
    joints, parent_of, last = [], {}, "world"
    if floating:
        joints.append(dict(name="root_joint", kind="floating", parent="world", child="base", R=np.eye(3),
                           p=np.zeros(3), axis=None, link=_link(rng)))
        parent_of["base"], last = "world", "base"
    for k, kind in enumerate(kinds):
        chain = [last]
        while chain[-1] != "world":
            chain.append(parent_of[chain[-1]])
        parent = chain[int(rng.integers(len(chain) - (1 if floating else 0)))]  # a floating base: one root
        axis = None
        if kind in ("revolute", "prismatic"):
            axis = rng.normal(size=3) if k % 2 else np.eye(3)[k % 3]
            axis = axis / np.linalg.norm(axis)
        child = f"l{k}"
        joints.append(dict(name=f"j{k}", kind=kind, parent=parent, child=child, R=_rotation(rng, k),
                           p=rng.uniform(-0.3, 0.3, 3), axis=axis, link=_link(rng)))
        parent_of[child], last = parent, child
    weld = dict(name="weld", parent=joints[1]["child"], child="tool", R=_rotation(rng, 2),
                p=rng.uniform(-0.1, 0.1, 3), link=_link(rng))
    return joints, weld


def _rbdgen_model(joints, weld, name):
    b = ModelBuilder(name)
    for j in joints:
        m, c, Ic = j["link"]
        b.add_joint(j["name"], j["kind"], j["parent"], j["child"], xyz=j["p"], rotation=j["R"], axis=j["axis"],
                    mass=m, com=c, inertia=Ic)
    m, c, Ic = weld["link"]
    b.add_fixed(weld["name"], weld["parent"], weld["child"], xyz=weld["p"], rotation=weld["R"], mass=m, com=c,
                inertia=Ic)
    return b.build()


_PIN_JOINTS = {"spherical": lambda a: pin.JointModelSpherical(), "planar": lambda a: pin.JointModelPlanar(),
               "floating": lambda a: pin.JointModelFreeFlyer(),
               "revolute": lambda a: pin.JointModelRevoluteUnaligned(a),
               "prismatic": lambda a: pin.JointModelPrismaticUnaligned(a)}


def _pinocchio_model(joints, weld):
    """The same robot in Pinocchio's API, from the same numbers; a frame per link (by name, as
    the frame kernels' counterparts look them up)."""
    pm = pin.Model()
    jid = {"world": 0}
    for j in joints:
        i = pm.addJoint(jid[j["parent"]], _PIN_JOINTS[j["kind"]](j["axis"]), pin.SE3(j["R"], j["p"]), j["name"])
        m, c, Ic = j["link"]
        pm.appendBodyToJoint(i, pin.Inertia(m, c, Ic), pin.SE3.Identity())
        pm.addFrame(pin.Frame(j["child"], i, pin.SE3.Identity(), pin.FrameType.BODY))
        jid[j["child"]] = i
    m, c, Ic = weld["link"]
    placement = pin.SE3(weld["R"], weld["p"])
    pm.appendBodyToJoint(jid[weld["parent"]], pin.Inertia(m, c, Ic), placement)
    pm.addFrame(pin.Frame(weld["child"], jid[weld["parent"]], placement, pin.FrameType.BODY))
    return pm


_models: dict = {}


def _case(name):
    """(our model with frames selected, Pinocchio's model)."""
    if name not in _models:
        if name in URDF_CASES:
            text, floating = URDF_CASES[name]
            path = Path(tempfile.mkdtemp()) / f"{name}.urdf"
            path.write_text(text)
            model = rbdgen.load_urdf(path, floating_base=floating)
            pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if floating \
                else pin.buildModelFromUrdf(str(path))
        else:
            kinds, floating, seed = CASES[name]
            joints, weld = _spec(kinds, floating, seed)
            model, pm = _rbdgen_model(joints, weld, name.replace("-", "_")), _pinocchio_model(joints, weld)
        frames = list(model.leaf_links[:2])
        if "tool" in [f.name for f in model.link_frames] and "tool" not in frames:
            frames.append("tool")
        model = model.with_frames(frames)
        pm.rbdgen_frames = model.frames
        _models[name] = (model, pm)
    return _models[name]


ALL_CASES = list(CASES) + list(URDF_CASES)


def test_the_cases_have_the_joints_they_say():
    for name in ALL_CASES:
        model, pm = _case(name)
        types = set(model.joint_types)
        assert "planar" in types or "spherical" in types, name
        assert list(pm.names[1:]) == list(model.joint_names), name
        assert pm.nv == model.nv and pm.nq == model.nq_pinocchio, name
        assert model.floating_base == (model.joint_types[0] == "floating")
    m, _ = _case("mixed-fixed")
    assert {"spherical", "planar", "revolute", "prismatic"} <= set(m.joint_types)
    assert m.parent != tuple(range(-1, m.nb - 1)), "a tree, not a chain"
    assert m.nq == m.nv + m.joint_types.count("spherical")


# ---- the reference against Pinocchio ----------------------------------------------------------

@pytest.mark.parametrize("name", ALL_CASES)
def test_reference_matches_pinocchio(name):
    """Every kernel's reference against its declared Pinocchio counterpart: rnea, crba, aba,
    minv, forward kinematics, the frame kernels, the tangent-space derivatives, …"""
    model, pm = _case(name)
    data = pm.createData()
    q, v, a, tau = random_state(model, seed=17, n=3)
    env = registry.complete_inputs(model, {"q": q, "v": v, "a": a, "tau": tau}, seed=17)
    errs = {}
    for k in registry.applicable(model):
        decl = registry.get(k)
        env_k = decl.pinocchio_env(model, env) if decl.pinocchio_env else env
        got = registry.reference(model, k, env_k)
        for s in range(len(q)):
            exp = decl.pinocchio(pin, pm, data, model.to_pinocchio_q(q[s]), *(env_k[x][s] for x in decl.input_names[1:]))
            errs[k] = max(errs.get(k, 0.0), max(relerr(g[s], e) for g, e in zip(got, exp, strict=True)))
    for k in ("rnea", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives", "forward_kinematics",
              "frame_placement", "frame_jacobian_local"):
        assert k in errs, k
    bad = {k: e for k, e in errs.items() if not e <= TOL64}
    assert not bad, f"{name}: relative errors above {TOL64}: {bad}"


@pytest.mark.parametrize("name", ["mixed-fixed", "mixed-floating", "urdf-planar-fixed"])
def test_configuration_space_matches_pinocchio(name):
    """neutral, integrate (q ⊕ v: a quaternion by the body-frame rotation, a planar joint by the
    SE(2) exponential of its body-frame velocity) and the q layout, against Pinocchio's."""
    model, pm = _case(name)
    rng = np.random.default_rng(4)
    assert np.array_equal(model.to_pinocchio_q(model.neutral()), pin.neutral(pm))
    for _ in range(4):
        q = model.random_q(rng)
        dv = rng.normal(size=model.nv)
        qp = model.to_pinocchio_q(q)
        assert qp.shape == (pm.nq,)
        assert np.allclose(model.from_pinocchio_q(qp), q, atol=1e-15, rtol=0)  # θ in (−π, π): atan2 gives it back
        mine = model.integrate(q, dv)
        if model.floating_base:  # the free-flyer's quaternion comes back with w ≥ 0 (rot_to_quat)
            qpin = pin.integrate(pm, qp, dv)
            if mine[6] * qpin[6] < 0:
                mine[3:7] *= -1
        assert relerr(model.to_pinocchio_q(mine), pin.integrate(pm, qp, dv)) <= 1e-14
    # batches of states, and random_q's quaternions are unit
    qs = model.random_q(rng, 5)
    for i, t in enumerate(model.joint_types):
        if t == "spherical":
            assert np.allclose(np.linalg.norm(qs[:, model.q_slice(i)], axis=1), 1.0)
    assert model.integrate(qs, np.zeros((5, model.nv))).shape == qs.shape


def test_a_non_unit_quaternion_is_read_normalised_as_the_free_flyers():
    """A spherical joint's u and c·u (c > 0) are one rotation, in the reference and the kernels."""
    model, _ = _case("balls-fixed")
    q, v, a, _ = random_state(model, seed=2)
    q2 = q * 3.0  # every coordinate of this model is a quaternion's
    assert relerr(ref.rnea(model, q2, v, a), ref.rnea(model, q, v, a)) <= 1e-14
    assert relerr(run(trace(model, "rnea"), q2, v, a), ref.rnea(model, q, v, a)) <= 1e-14


# ---- derivatives: the tangent space ------------------------------------------------------------

@pytest.mark.parametrize("name", ["mixed-fixed", "mixed-floating"])
def test_derivatives_are_along_the_tangent_space(name):
    """∂τ/∂q's column k is τ's change along q ⊕ ε e_k (central differences of the reference
    through integrate), ∂q̈/∂q the same for aba: what Pinocchio's derivatives mean."""
    model, _ = _case(name)
    q, v, a, tau = random_state(model, seed=9)
    h = 1e-6
    dq, _ = ref.rnea_derivatives(model, q, v, a)
    ddq, _, _ = ref.aba_derivatives(model, q, v, tau)
    num = np.zeros((model.nv, model.nv))
    numa = np.zeros((model.nv, model.nv))
    for k in range(model.nv):
        e = np.zeros(model.nv)
        e[k] = h
        qp, qm = model.integrate(q, e), model.integrate(q, -e)
        num[:, k] = (ref.rnea(model, qp, v, a) - ref.rnea(model, qm, v, a)) / (2 * h)
        numa[:, k] = (ref.aba(model, qp, v, tau) - ref.aba(model, qm, v, tau)) / (2 * h)
    assert relerr(dq, num) <= 1e-6
    assert relerr(ddq, numa) <= 1e-6


@pytest.mark.parametrize("name", ["mixed-fixed", "mixed-floating", "urdf-planar-fixed"])
def test_tangent_map_inverts_integrate_to_first_order(name):
    """T(q)·dq = δ where q ⊕ δ moves q by dq: a spherical joint's block is the free-flyer's
    angular one; a planar joint's is R(θ)ᵀ on (dx, dy), not the identity although nq = nv."""
    model, _ = _case(name)
    rng = np.random.default_rng(1)
    q0 = model.random_q(rng, 3)
    T = tangent_map(model, q0)
    assert T.shape == (3, model.nv, model.nq)
    eps = 1e-6
    for k in range(3):
        d = rng.normal(size=model.nv)
        ends = [model.integrate(q0[k], s * eps * d) for s in (1, -1)]
        for x in ends:  # the free-flyer's quaternion comes back with w ≥ 0: take q0's sign
            if model.floating_base and x[3:7] @ q0[k, 3:7] < 0:
                x[3:7] *= -1
        assert relerr(T[k] @ ((ends[0] - ends[1]) / (2 * eps)), d) <= 1e-8
    if model.nq == model.nv:  # the planar URDF: square, but not the identity
        assert not np.array_equal(T[0], np.eye(model.nv))
    for i, t in enumerate(model.joint_types):  # the radial direction of a ball's quaternion: no motion
        if t == "spherical":
            dq = np.zeros(model.nq)
            dq[model.q_slice(i)] = q0[0, model.q_slice(i)]
            assert np.max(np.abs(T[0] @ dq)) <= 1e-15


@pytest.mark.parametrize("name", ["mixed-fixed", "urdf-planar-fixed"])
def test_partials_equal_finite_differences_along_raw_coordinates(name):
    """rbdgen.autodiff's rules (tangent derivatives composed with T) against central differences
    along every raw coordinate of q (a quaternion component, a planar joint's x, y, θ)."""
    model, _ = _case(name)
    kern = type("K", (), dict(
        model=model, kernels=("rnea_derivatives", "crba", "aba_derivatives"),
        rnea_derivatives=staticmethod(lambda q, v, a: ref.rnea_derivatives(model, q, v, a)),
        crba=staticmethod(lambda q: ref.crba(model, q)),
        aba_derivatives=staticmethod(lambda q, v, tau: ref.aba_derivatives(model, q, v, tau))))()
    q, v, a, tau = random_state(model, seed=3)
    h = 1e-6
    for partials, fn, third in ((rnea_partials, ref.rnea, a), (aba_partials, ref.aba, tau)):
        Jq = partials(kern, q, v, third)[0]
        assert Jq.shape == (model.nv, model.nq)
        num = np.stack([(fn(model, q + h * e, v, third) - fn(model, q - h * e, v, third)) / (2 * h)
                        for e in np.eye(model.nq)], -1)
        assert relerr(Jq, num) <= 1e-6, fn.__name__


# ---- the traced kernels ----------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL_CASES)
def test_interpreted_kernels_match_reference(name):
    """Every kernel, traced and run by the IR's interpreter, against the reference."""
    model, _ = _case(name)
    q, v, a, tau = random_state(model, seed=21, n=3)
    errs = {}
    for k in KERNELS:
        args = kernel_args(k, q, v, a, tau, model)
        errs[k] = kernel_err(run(trace(model, k), *args), ref_out(model, k, *args))
    bad = {k: e for k, e in errs.items() if not e <= TOL64}
    assert not bad, f"{name}: {bad}"


@pytest.mark.parametrize("name", ["mixed-fixed", "mixed-floating", "urdf-planar-floating"])
def test_interpreted_kernels_in_float32(name):
    """Every kernel computed in float32 by the interpreter, within the bounds declared with each
    kernel (measured on the URDF robots; these joints stay below a tenth of them)."""
    model, _ = _case(name)
    q, v, a, tau = random_state(model, seed=23, n=2)
    errs = {}
    for k in KERNELS:
        args = kernel_args(k, q, v, a, tau, model)
        got = run(trace(model, k), *(x.astype(np.float32) for x in args), dtype=np.float32)
        errs[k] = kernel_err(got, ref_out(model, k, *args))
    bad = {k: e for k, e in errs.items() if not e <= TOL32[k]}
    assert not bad, f"{name}: {bad}"


def test_dense_and_pruned_ir_agree():
    model, _ = _case("mixed-floating")
    q, v, a, tau = random_state(model, seed=22, n=2)
    for k in ("rnea", "crba", "aba", "minv", "rnea_derivatives", "frame_jacobian_local"):
        args = kernel_args(k, q, v, a, tau, model)
        pruned, dense = trace(model, k), trace(model, k, fold=False)
        assert kernel_err(run(pruned, *args), run(dense, *args)) <= TOL64, k
        assert pruned.op_counts()["mul"] < dense.op_counts()["mul"], k


@pytest.mark.parametrize("name", ["mixed-fixed", "mixed-floating", "urdf-planar-fixed"])
def test_joint_transforms_decompose_as_the_model(name):
    """symbolic.joint_transform's (E, r) form (what the kernels trace) and its sympy form equal
    the model's X_J(q)·X_tree at random q."""
    model, _ = _case(name)
    rng = np.random.default_rng(6)
    for i in range(model.nb):
        qi = model.random_q(rng)[model.q_slice(i)]
        X = model.joint_transform(i, qi) @ model.X_tree[i]
        jt = joint_transform(model, i)
        assert np.allclose(numeric_X(jt, qi), X, atol=1e-14), model.joint_types[i]
        if model.joint_types[i] == "planar":
            c, s = math.cos(qi[2]), math.sin(qi[2])
            Xs = symbolic_X(model, i).subs({f"c{i}": c, f"s{i}": s, f"x{i}": qi[0], f"y{i}": qi[1]})
            assert np.allclose(np.array(Xs, dtype=float), X, atol=1e-14)


def test_structure_is_pruned_in_a_ball_and_a_planar_joint():
    """S of both is constant in the body frame: its zeros and ones cost nothing. A joint's X_J
    with an identity placement: a planar joint's E has the revolute-about-z pattern (4 entries of
    θ, the rest 0 or 1); a spherical joint's r is zero (constant)."""
    b = ModelBuilder("two")
    b.add_joint("ball", "spherical", "world", "a", mass=1.0, com=(0.0, 0.0, 0.1), inertia=np.eye(3) * 0.01)
    b.add_joint("plane", "planar", "a", "b", xyz=(0.0, 0.0, 0.2), mass=1.0, com=(0.1, 0.0, 0.0),
                inertia=np.eye(3) * 0.01)
    m = b.build()
    Xp = pattern(symbolic_X(m, 1))
    assert [Xp[r][c] for r in range(3) for c in range(3)].count("q") == 4
    assert all(Xp[r][c] == "0" for r in range(3) for c in range(3, 6))
    jt = joint_transform(m, 0)
    assert jt.kind == "spherical" and np.array_equal(jt.r0, np.zeros(3))


# ---- the targets ---------------------------------------------------------------------------------

_built: dict = {}


def _build(target, **kw):
    key = (target, tuple(sorted(kw.items())))
    if key not in _built:
        _built[key] = rbdgen.build(_case("small-floating")[0], target=target, **kw)
    return _built[key]


def test_compiled_cpu_kernels_match_reference():
    """Every kernel compiled (C++, float64), batch and single-state entry points."""
    model, _ = _case("small-floating")
    kern = _build("cpu", opt="-O0", simd=False)
    assert set(kern.kernels) == set(registry.applicable(model))
    errs = kernel_errors(kern, model, np.float64, seed=5, n=7, single=2)
    bad = {k: e for k, e in errs.items() if not e <= TOL64}
    assert not bad, bad


@pytest.mark.parametrize("shape", ["thread", "block"])
def test_cuda_emulation_matches_reference(shape):
    """The generated CUDA program (nvcc, every warning an error) run by its host emulation."""
    model, _ = _case("small-floating")
    kern = _build("cuda", kernels=("rnea", "crba", "aba"), opt="-O0", arch="90", werror=True)
    errs = kernel_errors(kern.emulated(shape), model, np.float64, seed=5, n=37, single=3)
    assert set(errs) == {"rnea", "crba", "aba"}
    assert all(e <= TOL64 for e in errs.values()), errs


def test_hls_double_csim_matches_reference():
    model, _ = _case("small-floating")
    kern = _build("hls", kernels=("rnea", "crba", "aba"), dtype="float64")
    errs = kernel_errors(kern, model, np.float64, seed=31, n=8, single=3)
    assert set(errs) == {"rnea", "crba", "aba"}
    assert all(e <= TOL64 for e in errs.values()), errs


# ---- the URDF loader and the builder ---------------------------------------------------------

def _planar_urdf(tmp_path, axis):
    ax = "" if axis is None else f'<axis xyz="{axis}"/>'
    text = ('<robot name="p"><link name="base"/>'
            '<link name="a"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" '
            'iyz="0"/></inertial></link>'
            f'<joint name="j" type="planar"><parent link="base"/><child link="a"/>{ax}</joint></robot>')
    p = tmp_path / "p.urdf"
    p.write_text(text)
    return p


@pytest.mark.parametrize("axis", [None, "0 0 1", "0 0 2"])
def test_urdf_planar_joint_moves_in_its_frames_xy_plane(tmp_path, axis):
    m = rbdgen.load_urdf(_planar_urdf(tmp_path, axis))
    assert m.joint_types == ("planar",) and (m.nq, m.nv, m.nq_pinocchio) == (3, 3, 4)


@pytest.mark.parametrize("axis", ["1 0 0", "0 0 -1", "0 1 1"])
def test_urdf_planar_joint_with_another_normal_is_refused(tmp_path, axis):
    with pytest.raises(UnsupportedError, match=r"joint 'j'.*planar.*0 0 1"):
        rbdgen.load_urdf(_planar_urdf(tmp_path, axis))


def test_builder_refuses_what_it_cannot_build():
    b = ModelBuilder("r")
    with pytest.raises(ValueError, match="unknown joint type 'ball'"):
        b.add_joint("j", "ball", "world", "a")
    with pytest.raises(ValueError, match="takes no axis"):
        b.add_joint("j", "spherical", "world", "a", axis=(0, 0, 1))
    with pytest.raises(ValueError, match="needs an axis"):
        b.add_joint("j", "revolute", "world", "a")
    with pytest.raises(ValueError, match="'nowhere' is not defined"):
        b.add_joint("j", "planar", "nowhere", "a")
    with pytest.raises(ValueError, match="rotation"):
        b.add_joint("j", "planar", "world", "a", rotation=np.diag([1.0, 1.0, -1.0]))
    b.add_joint("j", "spherical", "world", "a", mass=1.0, inertia=np.eye(3) * 0.1)
    with pytest.raises(ValueError, match="already defined"):
        b.add_joint("k", "planar", "world", "a")
    with pytest.raises(UnsupportedError, match="floating joint must hang from the world"):
        b.add_joint("f", "floating", "a", "b")
    with pytest.raises(ValueError, match="triangle inequality"):
        bad = ModelBuilder("bad")
        bad.add_joint("j", "spherical", "world", "a", mass=1.0, inertia=np.diag([0.1, 0.1, 0.5]))
        bad.build()


def _inertial_link(i):
    return (f'<link name="l{i}"><inertial><origin xyz="0.1 0.02 0.03"/><mass value="1"/><inertia ixx="0.1" '
            f'iyy="0.12" izz="0.15" ixy="0" ixz="0" iyz="0"/></inertial></link>')


def test_coupled_model_with_a_planar_joint(tmp_path):
    """Mimic joints beside a planar joint: the reduced q in Pinocchio's layout (mimic=True: the
    planar joint's (cos θ, sin θ) counted once), the references against Pinocchio's, and the
    tangent map of the reduced coordinates against integrate."""
    text = ('<robot name="m"><link name="base"/>' + "".join(_inertial_link(i) for i in range(3))
            + '<joint name="a" type="planar"><parent link="base"/><child link="l0"/>'
              '<origin xyz="0 0 0.1" rpy="0.3 0 0"/></joint>'
            + "".join(f'<joint name="{n}" type="revolute"><parent link="l{i}"/><child link="l{i + 1}"/>'
                      f'<origin xyz="0.2 0 0"/><axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" '
                      f'velocity="1"/>{extra}</joint>'
                      for i, (n, extra) in enumerate([("b", ""), ("c", '<mimic joint="b" multiplier="2" '
                                                                       'offset="0.1"/>')]))
            + "</robot>")
    p = tmp_path / "m.urdf"
    p.write_text(text)
    m = rbdgen.load_urdf(p)
    pm = pin.buildModelFromUrdf(str(p), mimic=True)
    assert getattr(m, "coupled", False) and (m.nq, m.nv) == (4, 4) and pm.nq == m.nq_pinocchio == 5
    q, v, a, _ = random_state(m, seed=4)
    qp = m.to_pinocchio_q(q)
    assert relerr(ref.rnea(m, q, v, a), pin.rnea(pm, pm.createData(), qp, v, a)) <= TOL64
    M = pin.crba(pm, pm.createData(), qp)
    assert relerr(ref.crba(m, q), np.triu(M) + np.triu(M, 1).T) <= TOL64
    d = np.random.default_rng(5).normal(size=m.nv)
    eps = 1e-6
    dq = (m.integrate(q, eps * d) - m.integrate(q, -eps * d)) / (2 * eps)
    assert relerr(tangent_map(m, q) @ dq, d) <= 1e-8


def test_mimic_of_a_planar_joint_is_refused(tmp_path):
    text = ('<robot name="m"><link name="base"/>'
            + "".join(f'<link name="l{i}"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" '
                      f'ixy="0" ixz="0" iyz="0"/></inertial></link>' for i in range(2))
            + '<joint name="p" type="planar"><parent link="base"/><child link="l0"/></joint>'
            + '<joint name="r" type="revolute"><parent link="l0"/><child link="l1"/><axis xyz="0 0 1"/>'
              '<limit lower="-1" upper="1" effort="1" velocity="1"/><mimic joint="p"/></joint></robot>')
    p = tmp_path / "m.urdf"
    p.write_text(text)
    with pytest.raises(UnsupportedError, match="one-degree-of-freedom"):
        rbdgen.load_urdf(p)
