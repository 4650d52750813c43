"""The MJCF loader (issue 43, item 1): ``rbdgen.load_mjcf``, ``rbdgen.load_model``, the qpos/qvel
helpers, the CLI and the package pipeline on MuJoCo files.

Oracles, each independent of the loader:

* Pinocchio's ``buildModelFromMJCF`` of the same file: structure (nq, nv, joint types, composite
  joints), joint placements, inertias, armature, and every dynamics kernel's declared Pinocchio
  counterpart (rnea, crba with armature, aba, minv, the derivatives, frames) on synthetic files
  that use every feature, and on the corpus (dm_control's suite and locomotion walkers,
  ``make mjcf-corpus``). Where Pinocchio 4's parser reads a file differently from MuJoCo (listed
  in docs/mjcf.md), the test says which bodies differ and why, and gives Pinocchio a copy of the
  file with the difference written out, or the loader's numbers for those bodies only;
* closed forms written here (rotations from Euler angles, axis-angle, MuJoCo's kinematics of a
  joint about its anchor, solid and mesh inertias), where Pinocchio differs from MuJoCo or has no
  counterpart;
* the NumPy reference, for the compiled kernels of one corpus robot.

Relative errors are ``max|x − y| / max|y|`` (no absolute floor: the fruit fly's inertias are
1e-9 kg m², its torques 1e-4 N m).
"""
from __future__ import annotations

import math
import os
import signal
import struct
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rbdgen
import rbdgen.robots
from rbdgen import reference as ref
from rbdgen import registry
from rbdgen import spatial as sp
from rbdgen.errors import MJCFError, RbdgenError, RbdgenWarning, UnsupportedError

import mjcf_corpus
from conftest import TOL64, assert_one_error_line, run_main

#: kernels compared with Pinocchio: all but those with per-body inputs or outputs
#: (forward_kinematics, f_ext, the stale-data kernels' state), since a body with several joints is
#: one Pinocchio joint and several rbdgen bodies
COMPARED = [k for k in registry.kernels() if not registry.get(k).constraints  # (its contacts: per robot, test_loops)
            and not registry.get(k).opt_in  # (Fijany's: serial chains only; this robot is a tree: test_schur)
            and not any("nb" in str(d) for x in registry.get(k).inputs + registry.get(k).outputs for d in x.shape)]
DYNAMICS = ("rnea", "nle", "gravity", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives")


def srel(x, y) -> float:
    """max|x − y| / max|y| (NaN anywhere: inf)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    d = np.abs(x - y)
    if np.isnan(d).any():
        return math.inf
    return float(np.max(d) / max(float(np.max(np.abs(y))), 1e-300)) if d.size else 0.0


def write(tmp_path, text, name="robot.xml") -> Path:
    p = Path(tmp_path) / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def load(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RbdgenWarning)
        return rbdgen.load_mjcf(path, **kw)


def pin_model(path, gravity=None):
    pm = pin.buildModelFromMJCF(str(path))
    if gravity is not None:  # Pinocchio's parser does not read <option gravity>
        pm.gravity.linear = np.asarray(gravity, dtype=float)
    return pm


def groups(model, pm):
    """Pinocchio joint j → the rbdgen bodies of its DOFs (a composite joint: several)."""
    out = {}
    for j in range(1, pm.njoints):
        jm = pm.joints[j]
        out[j] = [b for b in range(model.nb) if jm.idx_v <= model.v_start[b] < jm.idx_v + jm.nv]
    return out


_PIN_KIND = {"RX": "revolute", "RY": "revolute", "RZ": "revolute", "RevoluteUnaligned": "revolute",
             "PX": "prismatic", "PY": "prismatic", "PZ": "prismatic", "PrismaticUnaligned": "prismatic",
             "Spherical": "spherical", "FreeFlyer": "floating"}


def pin_kinds(pm, j):
    jm = pm.joints[j]
    subs = list(jm.extract().joints) if jm.shortname() == "JointModelComposite" else [jm]
    return [_PIN_KIND[s.shortname().replace("JointModel", "")] for s in subs]


def xpose(X):
    E = X[:3, :3]
    rx = -E.T @ X[3:, :3]
    return E.T, np.array([rx[2, 1], rx[0, 2], rx[1, 0]])


def pin_inertia(model, b):
    m, c, Ic = sp.inertia_parts(model.inertia[b])
    return pin.Inertia(float(m), np.array(c), 0.5 * (Ic + Ic.T))


def check_structure(model, pm, *, nv=None):
    """Same joints in the same order: types (a composite's sub-joints one by one), nq, nv, solo
    joints' names; Pinocchio's armature equals ours."""
    nv = model.nv if nv is None else nv
    assert pm.nv == nv
    g = groups(model, pm)
    for j, grp in g.items():
        assert pin_kinds(pm, j) == [model.joint_types[b] for b in grp], pm.names[j]
        if len(grp) == 1:
            assert pm.names[j] == model.joint_names[grp[0]]
    assert sum(len(x) for x in g.values()) == len([b for b in range(model.nb) if model.v_start[b] < nv])
    assert np.array_equal(np.asarray(pm.armature), model.armature[:nv])
    return g


def placement_errors(model, pm, root=None):
    """Pinocchio joint j → max difference of its placement(s) (composite: every sub-joint's).
    ``root``: the name of a welded first body whose pose Pinocchio drops (its children's
    placements are then compared in its frame)."""
    errs = {}
    R0, p0 = (model.frame(root).R, model.frame(root).p) if root else (np.eye(3), np.zeros(3))
    for j, grp in groups(model, pm).items():
        R, p = xpose(model.X_tree[grp[0]])
        if pm.parents[j] == 0:
            R, p = R0.T @ R, R0.T @ (p - p0)
        jm = pm.joints[j]
        if len(grp) == 1:
            P = pm.jointPlacements[j]
            e = max(np.max(np.abs(P.rotation - R)), np.max(np.abs(P.translation - p)))
        else:
            subs = jm.extract().jointPlacements
            P = pm.jointPlacements[j] * subs[0]
            e = max(np.max(np.abs(P.rotation - R)), np.max(np.abs(P.translation - p)))
            for k in range(1, len(grp)):
                Rk, pk = xpose(model.X_tree[grp[k]])
                e = max(e, np.max(np.abs(subs[k].rotation - Rk)), np.max(np.abs(subs[k].translation - pk)))
        errs[j] = float(e)
    return errs


def inertia_errors(model, pm):
    return {j: srel(pin_inertia(model, grp[-1]).matrix(), pm.inertias[j].matrix()) if pm.inertias[j].mass > 0
            else float(np.max(np.abs(pin_inertia(model, grp[-1]).matrix())))
            for j, grp in groups(model, pm).items()}


def decompose(pm):
    """Pinocchio's model with each composite joint replaced by the chain of its sub-joints (the
    same placements; the body on the last), and its body and site frames moved along: Pinocchio
    4's rnea and aba derivatives are wrong for composite joints (the columns of a composite's
    second and later sub-joints; Pinocchio's own finite differences agree with rbdgen's
    derivatives and not with them — test_pinocchio_composite_derivatives_are_not_an_oracle), so
    the derivatives are compared with this model's."""
    out = pin.Model()
    out.name = pm.name
    out.gravity = pm.gravity
    new = {0: 0}
    for j in range(1, pm.njoints):
        jm, parent = pm.joints[j], new[pm.parents[j]]
        if jm.shortname() == "JointModelComposite":
            c = jm.extract()
            for k, (sub, P) in enumerate(zip(c.joints, c.jointPlacements)):
                parent = out.addJoint(parent, sub, pm.jointPlacements[j] * P if k == 0 else P, f"{pm.names[j]}#{k}")
        else:
            parent = out.addJoint(parent, jm, pm.jointPlacements[j], pm.names[j])
        out.appendBodyToJoint(parent, pm.inertias[j], pin.SE3.Identity())
        new[j] = parent
    out.armature = np.asarray(pm.armature)
    for f in pm.frames:
        if f.type in (pin.FrameType.BODY, pin.FrameType.OP_FRAME) and not out.existFrame(f.name):
            out.addFrame(pin.Frame(f.name, new[f.parentJoint], f.placement, f.type))
    return out


def compare_kernels(model, pm, kernels=DYNAMICS, *, seed=0, n=3):
    """Each kernel's reference against its declared Pinocchio counterpart at ``n`` random states
    (the derivatives against :func:`decompose`'s model when there are composite joints)."""
    if any("derivatives" in k for k in kernels) and \
            any(pm.joints[j].shortname() == "JointModelComposite" for j in range(1, pm.njoints)):
        plain = [k for k in kernels if "derivatives" not in k]
        errs = compare_kernels(model, pm, plain, seed=seed, n=n) if plain else {}
        return errs | compare_kernels(model, decompose(pm), [k for k in kernels if "derivatives" in k],
                                      seed=seed, n=n)
    data = pm.createData()
    rng = np.random.default_rng(seed)
    q = model.random_q(rng, n)
    env = registry.complete_inputs(model, {"q": q, "v": rng.normal(size=(n, model.nv)),
                                           "a": rng.normal(size=(n, model.nv)),
                                           "tau": rng.normal(size=(n, model.nv))}, seed=seed)
    pm.rbdgen_frames = tuple(model.frames)
    errs = {}
    for k in kernels:
        decl = registry.get(k)
        env_k = decl.pinocchio_env(model, env) if decl.pinocchio_env else env
        got = registry.reference(model, k, env_k)
        for s in range(n):
            exp = decl.pinocchio(pin, pm, data, model.to_pinocchio_q(env_k["q"][s]),
                                 *(env_k[x][s] for x in decl.input_names[1:]))
            errs[k] = max(errs.get(k, 0.0), max(srel(g[s], e) for g, e in zip(got, exp, strict=True)))
    return errs


# ---- a synthetic robot with every feature Pinocchio's parser reads as MuJoCo does --------------

SYNTHETIC = """
<mujoco model="synthetic">
  <compiler angle="degree"/>
  <option timestep="0.002" gravity="0.5 -0.3 -9.7"/>
  <default>
    <joint armature="0.05" damping="1"/>
    <geom density="800"/>
    <default class="leg">
      <joint axis="0 1 0" range="-60 60" armature="0.1"/>
      <geom type="capsule" size="0.04 0.2"/>
      <default class="foot">
        <geom type="sphere" size="0.05"/>
      </default>
    </default>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <light pos="0 0 3"/>
    <body name="torso" pos="0 0 1">
      <freejoint name="root"/>
      <geom type="box" size="0.2 0.1 0.05"/>
      <geom type="ellipsoid" size="0.1 0.08 0.06" pos="0.1 0 0.1" quat="0.9 0.1 0.2 0.3"/>
      <camera pos="0 -2 0" xyaxes="1 0 0 0 0 1"/>
      <body name="thigh" pos="0.1 0.1 -0.1" childclass="leg" axisangle="1 0 0 15">
        <joint name="hip_x" axis="1 0 0"/>
        <joint name="hip_y"/>
        <joint name="hip_z" axis="0 0 1" pos="0 0.01 0.02"/>
        <geom fromto="0 0 0 0 0 -0.3"/>
        <body name="shin" pos="0 0 -0.3" xyaxes="1 0 0 0 0.8 0.6">
          <joint name="knee" pos="0 0 0.05"/>
          <geom fromto="0 0 0 0.1 0 -0.3" size="0.03"/>
          <body name="foot" pos="0.1 0 -0.3" zaxis="0.2 0.3 1">
            <joint name="ankle" type="ball" pos="0 0.01 0"/>
            <joint name="toe" axis="1 0 0" pos="0.03 0 -0.04"/>
            <geom class="foot" pos="0 0 -0.02"/>
            <geom type="cylinder" size="0.02 0.05" mass="0.3"/>
            <site name="sole" pos="0 0 -0.07" euler="0 0 30"/>
          </body>
        </body>
      </body>
      <body name="arm" pos="0 -0.2 0.1" euler="30 -20 10">
        <joint name="slide" type="slide" axis="0 0.6 0.8" range="-0.1 0.1"/>
        <inertial pos="0.01 0.02 0.03" mass="1.2" diaginertia="0.01 0.02 0.025" quat="0.8 0.2 0.3 0.1"/>
        <body name="hand" pos="0 -0.1 0">
          <joint name="wrist" axis="0 0 1" armature="0.2"/>
          <inertial pos="0.01 0 0" mass="0.5" fullinertia="0.003 0.004 0.005 0.0001 0.0002 -0.0001"/>
          <body name="glove" pos="0 -0.05 0">
            <geom type="box" size="0.02 0.03 0.04"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="knee" gear="10"/>
  </actuator>
</mujoco>
"""


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    p = write(tmp_path_factory.mktemp("mjcf"), SYNTHETIC)
    return p, load(p), pin_model(p, gravity=(0.5, -0.3, -9.7))


def test_synthetic_structure_matches_pinocchio(synthetic):
    path, model, pm = synthetic
    # free (6) + thigh 3 hinges + knee + ball (3) + toe + slide + wrist = 16 DOFs
    assert (model.nq, model.nv) == (pm.nq, pm.nv) == (18, 16)
    assert model.floating_base and model.joint_types[0] == "floating"
    assert model.joint_names == ("root", "hip_x", "hip_y", "hip_z", "knee", "ankle", "toe", "slide", "wrist")
    assert model.joint_types == ("floating", "revolute", "revolute", "revolute", "revolute", "spherical", "revolute",
                                 "prismatic", "revolute")
    g = check_structure(model, pm)
    assert [len(x) for x in g.values()] == [1, 3, 1, 2, 1, 1]  # composite joints: thigh, foot
    assert model.gravity.tolist() == [0.5, -0.3, -9.7]
    # armature: main 0.05, class leg 0.1 (childclass), joint 0.2, freejoint none (MuJoCo: no defaults)
    assert model.armature.tolist() == [0.0] * 6 + [0.1] * 4 + [0.1] * 3 + [0.1, 0.05, 0.2]
    # limits from range (degrees), on the leg's hinges; the slide's in metres
    knee = model.joint_names.index("knee")
    assert math.isclose(model.lower[knee], -math.pi / 3) and math.isclose(model.upper[knee], math.pi / 3)
    sl = model.joint_names.index("slide")
    assert (model.lower[sl], model.upper[sl]) == (-0.1, 0.1)
    assert max(placement_errors(model, pm).values()) < 1e-12
    assert max(inertia_errors(model, pm).values()) < 1e-12
    # the welded glove is lumped into the hand; the intermediate links of composite joints are massless
    assert "glove" in [f.name for f in model.link_frames]
    assert model.body_names[1:3] == ("thigh/hip_x", "thigh/hip_y")
    assert not np.any(model.inertia[1]) and not np.any(model.inertia[2])


def test_synthetic_kernels_match_pinocchio(synthetic):
    path, model, pm = synthetic
    model = model.with_frames(["sole", "shin", "glove", "foot"])
    errs = compare_kernels(model, pm, COMPARED, seed=3, n=3)
    for k in ("rnea", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives", "frame_placement",
              "frame_jacobian_local", "osim_inverse"):
        assert k in errs
    bad = {k: e for k, e in errs.items() if not e <= TOL64}
    assert not bad, bad


def test_multi_joint_bodies_are_not_refused_and_match_pinocchio(tmp_path):
    """A body with three hinges and one with a ball and a hinge: a chain of massless links in
    rbdgen (Pinocchio: composite joints). The mass matrix is not singular (every DOF moves the
    body's inertia), so aba and minv are generated, and equal Pinocchio's."""
    p = write(tmp_path, """
<mujoco model="multi"><compiler angle="radian"/>
  <worldbody>
    <body name="base" pos="0 0 0.5">
      <joint name="a" axis="1 0 0"/><joint name="b" axis="0 1 0"/><joint name="c" axis="0 0 1" pos="0.1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.05"/>
      <body name="tip" pos="0.3 0 0">
        <joint name="ball" type="ball"/><joint name="twist" axis="0 1 0" pos="0.1 0 0.05"/>
        <geom type="box" size="0.1 0.05 0.02" pos="0.1 0 0"/>
      </body>
    </body>
  </worldbody>
</mujoco>""")
    model, pm = load(p), pin_model(p)
    check_structure(model, pm)
    assert [pin_kinds(pm, j) for j in (1, 2)] == [["revolute"] * 3, ["spherical", "revolute"]]
    assert not model.inertia[0].any() and not model.inertia[1].any()  # the massless intermediates
    registry.check_model(model, ["aba", "minv"])  # not refused
    errs = compare_kernels(model, pm, DYNAMICS, seed=1, n=4)
    assert max(errs.values()) <= TOL64, errs
    kern = rbdgen.build(model, kernels=["aba", "minv"], dtype="float64", progress=False)
    rng = np.random.default_rng(2)
    q, tau, v = model.random_q(rng, 3), rng.normal(size=(3, model.nv)), rng.normal(size=(3, model.nv))
    data = pm.createData()
    for s in range(3):
        qp = model.to_pinocchio_q(q[s])
        assert srel(kern.aba(q[s], v[s], tau[s]), pin.aba(pm, data, qp, v[s], tau[s])) <= TOL64
        Mi = pin.computeMinverse(pm, data, qp)
        assert srel(kern.minv(q[s]), np.triu(Mi) + np.triu(Mi, 1).T) <= TOL64


def test_pinocchio_composite_derivatives_are_not_an_oracle(synthetic):
    """Why :func:`decompose`: on the synthetic robot (two composite joints) Pinocchio's
    analytic ∂τ/∂q differs from its own central differences, which agree with rbdgen's
    reference and with the decomposed model's analytic derivatives."""
    path, model, pm = synthetic
    data, flat = pm.createData(), decompose(pm)
    fdata = flat.createData()
    rng = np.random.default_rng(9)
    q, v, a = model.random_q(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)
    qp = model.to_pinocchio_q(q)
    eps = 1e-6
    fd = np.stack([(pin.rnea(pm, data, pin.integrate(pm, qp, e), v, a) - pin.rnea(pm, data, pin.integrate(pm, qp, -e), v, a))
                   / (2 * eps) for e in np.eye(model.nv) * eps], axis=1)
    analytic = pin.computeRNEADerivatives(pm, data, qp, v, a)[0]
    assert np.max(np.abs(analytic - fd)) > 1e-2  # Pinocchio 4.1; if this fails, Pinocchio was fixed
    assert np.max(np.abs(ref.rnea_derivatives(model, q, v, a)[0] - fd)) < 1e-6
    assert np.max(np.abs(pin.computeRNEADerivatives(flat, fdata, qp, v, a)[0] - fd)) < 1e-6
    assert srel(pin.rnea(flat, fdata, qp, v, a), pin.rnea(pm, data, qp, v, a)) < 1e-14


# ---- orientation, angles, defaults ------------------------------------------------------------

def _one_body(attrs, compiler="", extra="", joint='<joint axis="1 0 0"/>'):
    return f"""<mujoco model="o">{compiler}<worldbody>
      <body name="a" pos="0.1 0.2 0.3" {attrs}>{joint}<geom type="box" size="0.1 0.2 0.3" pos="0.05 0 0"/>{extra}</body>
    </worldbody></mujoco>"""


def _rot(model, b=0):
    return xpose(model.X_tree[b])[0]


def _rx(t):
    return np.array([[1, 0, 0], [0, math.cos(t), -math.sin(t)], [0, math.sin(t), math.cos(t)]])


def _ry(t):
    return np.array([[math.cos(t), 0, math.sin(t)], [0, 1, 0], [-math.sin(t), 0, math.cos(t)]])


def _rz(t):
    return np.array([[math.cos(t), -math.sin(t), 0], [math.sin(t), math.cos(t), 0], [0, 0, 1]])


def _axis_angle_rot(u, t):
    u = np.asarray(u, float) / np.linalg.norm(u)
    K = np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
    return np.eye(3) + math.sin(t) * K + (1 - math.cos(t)) * K @ K


D = math.pi / 180


# (attributes, compiler, the rotation, whether Pinocchio 4's parser reads it as MuJoCo does)
ORIENTATIONS = [
    ('quat="0.5 0.5 0.5 0.5"', "", _rz(90 * D) @ _rx(90 * D), True),
    ('quat="2 0 0 2"', "", _rz(90 * D), True),                                   # normalised
    ('axisangle="0 0 1 90"', "", _rz(90 * D), True),
    ('axisangle="0 0 3 90"', "", _rz(90 * D), False),                            # the axis is normalised
    ('axisangle="0 1 0 0.5"', '<compiler angle="radian"/>', _ry(0.5), True),
    ('euler="10 20 30"', "", _rx(10 * D) @ _ry(20 * D) @ _rz(30 * D), True),     # default xyz: moving axes
    ('euler="10 20 30"', '<compiler eulerseq="zyx"/>', _rz(10 * D) @ _ry(20 * D) @ _rx(30 * D), True),
    ('euler="10 20 30"', '<compiler eulerseq="XYZ"/>', _rz(30 * D) @ _ry(20 * D) @ _rx(10 * D), False),  # fixed axes
    ('euler="10 20 30"', '<compiler eulerseq="ZXZ"/>', _rz(30 * D) @ _rx(20 * D) @ _rz(10 * D), False),
    ('euler="10 20 30"', '<compiler eulerseq="xYz"/>', _ry(20 * D) @ _rx(10 * D) @ _rz(30 * D), False),
    ('euler="0.1 0.2 0.3"', '<compiler angle="radian"/>', _rx(0.1) @ _ry(0.2) @ _rz(0.3), True),
    ('xyaxes="0 1 0 -1 0 0"', "", _rz(90 * D), True),
    ('xyaxes="0 2 0 -1 1 0"', "", _rz(90 * D), True),                            # y made orthogonal to x
    ('zaxis="0 0 1"', "", np.eye(3), True),
    ('zaxis="0 0 -1"', "", _rx(180 * D), True),                                  # MuJoCo turns about x
    ('zaxis="1 0 0"', "", _ry(90 * D), True),
    ('zaxis="0.2 0.3 1"', "", _axis_angle_rot((-0.3, 0.2, 0), math.atan2(math.hypot(0.2, 0.3), 1)), True),
]


@pytest.mark.parametrize("attrs, compiler, expected, pinocchio_agrees", ORIENTATIONS,
                         ids=[f"{a.split('=')[0]}-{k}" for k, (a, *_) in enumerate(ORIENTATIONS)])
def test_orientation_forms(tmp_path, attrs, compiler, expected, pinocchio_agrees):
    """Every orientation form against the rotation written here (MuJoCo's conventions: euler with
    lower-case axes that move with the frame, upper-case fixed ones; degrees by default)."""
    p = write(tmp_path, _one_body(attrs, compiler))
    model = load(p)
    assert np.allclose(_rot(model), expected, atol=1e-12)
    assert np.allclose(xpose(model.X_tree[0])[1], [0.1, 0.2, 0.3], atol=1e-15)
    # Pinocchio agrees except where its parser differs from MuJoCo (docs/mjcf.md): upper-case
    # (fixed-axes) Euler sequences, which it reads as moving axes, an axisangle's axis, which it
    # does not normalise, and a z axis opposite to z, which it turns about another axis
    assert np.allclose(pin_model(p).jointPlacements[1].rotation, expected, atol=1e-12) == pinocchio_agrees


def test_orientation_of_geoms_inertials_and_sites(tmp_path):
    """A geom's, an inertial's and a site's orientation rotate the inertia and the frame."""
    p = write(tmp_path, _one_body("", extra="""
        <site name="s" pos="0 0 0.1" axisangle="0 0 1 90"/>""", joint='<joint axis="1 0 0"/>').replace(
        '<geom type="box" size="0.1 0.2 0.3" pos="0.05 0 0"/>',
        '<geom type="box" size="0.1 0.2 0.3" pos="0.05 0 0" euler="0 0 90"/>'))
    model = load(p)
    m, c, Ic = sp.inertia_parts(model.inertia[0])
    box = m / 12 * np.array([0.4 ** 2 + 0.6 ** 2, 0.2 ** 2 + 0.6 ** 2, 0.2 ** 2 + 0.4 ** 2])
    assert np.allclose(Ic, _rz(90 * D) @ np.diag(box) @ _rz(90 * D).T, atol=1e-12)
    s = model.frame("s")
    assert s.body == 0 and np.allclose(s.R, _rz(90 * D)) and np.allclose(s.p, [0, 0, 0.1])


def test_defaults_classes_childclass(tmp_path):
    """Nested classes inherit; childclass applies to a body's elements and its descendants'; an
    element's class wins over the childclass entirely (MuJoCo); a partial size keeps the class's
    other numbers; a class's joint pos places the joint."""
    p = write(tmp_path, """
<mujoco model="d"><compiler angle="radian"/>
  <default>
    <joint axis="0 0 1" armature="0.01"/>
    <geom type="box" size="0.1 0.2 0.3" density="100"/>
    <default class="A">
      <joint axis="0 1 0" armature="0.02" pos="0 0 0.1"/>
      <geom density="200"/>
      <default class="B"><joint armature="0.03"/><geom size="0.3"/></default>
    </default>
    <default class="C"><geom type="sphere" size="0.05"/></default>
  </default>
  <worldbody>
    <body name="b0">
      <joint name="j0"/>
      <geom name="g0"/>
      <body name="b1" childclass="A">
        <joint name="j1"/>
        <geom name="g1"/>
        <body name="b2">
          <joint name="j2" class="B"/>
          <geom name="g2" class="B"/>
          <body name="b3" childclass="C">
            <joint name="j3"/>
            <geom name="g3"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>""")
    model = load(p)
    assert model.armature.tolist() == [0.01, 0.02, 0.03, 0.01]
    assert np.allclose(model.axis, [[0, 0, 1], [0, 1, 0], [0, 1, 0], [0, 0, 1]])
    # j1, j2 at z = 0.1 in their bodies (class A's pos): the joint frames sit there, the bodies' own
    # frames 0.1 below; j3 takes class C (no pos)
    R1, p1 = xpose(model.X_tree[1])
    assert np.allclose(p1, [0, 0, 0.1])
    assert model.frame("b1").body == 1 and np.allclose(model.frame("b1").p, [0, 0, -0.1])
    assert np.allclose(xpose(model.X_tree[2])[1], [0, 0, 0.0])  # (b2 at b1's origin) − 0.1 + 0.1
    assert np.allclose(xpose(model.X_tree[3])[1], [0, 0, -0.1])
    masses = [model.inertia[b][5, 5] for b in range(4)]
    box = lambda s, rho: rho * 8 * s[0] * s[1] * s[2]  # noqa: E731
    assert np.allclose(masses, [box((0.1, 0.2, 0.3), 100), box((0.1, 0.2, 0.3), 200), box((0.3, 0.2, 0.3), 200),
                                100 * 4 / 3 * math.pi * 0.05 ** 3])


def test_a_class_joint_pos_equals_the_same_pos_written_on_the_joint(tmp_path):
    """Pinocchio 4 ignores a joint ``pos`` that comes from a default class (docs/mjcf.md); with
    the pos written on the joint it agrees with rbdgen's reading of the class."""
    text = """<mujoco model="c"><default><default class="k"><joint pos="0.02 -0.01 0.05" axis="0 1 0"/></default>
      </default><worldbody><body name="a" pos="0 0 1"><joint name="j0" axis="1 0 0"/><geom type="capsule" size="0.05 0.2"/>
      <body name="b" pos="0.1 0 -0.3"><joint name="j1" class="k"{}/><joint name="j2" class="k" axis="1 0 0"{}/>
      <geom type="box" size="0.05 0.1 0.2" pos="0 0 -0.1"/></body></body></worldbody></mujoco>"""
    ours = load(write(tmp_path, text.format("", ""), "class.xml"))
    pm = pin_model(write(tmp_path, text.format(' pos="0.02 -0.01 0.05"', ' pos="0.02 -0.01 0.05"'), "explicit.xml"))
    check_structure(ours, pm)
    assert max(placement_errors(ours, pm).values()) < 1e-12
    assert max(inertia_errors(ours, pm).values()) < 1e-12
    assert max(compare_kernels(ours, pm, DYNAMICS).values()) <= TOL64


# ---- joints: anchors, ref, free, ball, slide ---------------------------------------------------

def _mujoco_fk(parts, q):
    """MuJoCo's kinematics of one chain of bodies, written out: each body (pos, R, joints) is placed
    in its parent, then each joint turns it about its anchor (hinge: by q − ref about the axis),
    or slides it along the axis by q − ref. Returns each body's (R, p) in the world."""
    R, p = np.eye(3), np.zeros(3)
    out, k = [], 0
    for pos, Rb, joints in parts:
        p, R = p + R @ np.asarray(pos, float), R @ Rb
        for kind, anchor, axis, ref_ in joints:
            axis = np.asarray(axis, float) / np.linalg.norm(axis)
            anchor_w = p + R @ np.asarray(anchor, float)
            if kind == "hinge":
                t = q[k] - ref_
                Rj = _axis_angle(axis, t)
                R = R @ Rj
                p = anchor_w - R @ np.asarray(anchor, float)
            else:
                p = p + R @ axis * (q[k] - ref_)
            k += 1
        out.append((R, p))
    return out


def _axis_angle(u, t):
    K = np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
    return np.eye(3) + math.sin(t) * K + (1 - math.cos(t)) * K @ K


def test_joint_anchors_and_ref_follow_mujoco_kinematics(tmp_path):
    """Joints turning about anchors away from the body origin (several in one body) and ``ref``
    (hinge, slide): the body frames rbdgen's kinematics gives, against MuJoCo's kinematics
    written out. q is MuJoCo's qpos: at q = ref each body is where the XML puts it."""
    p = write(tmp_path, """
<mujoco model="k"><worldbody>
  <body name="a" pos="0 0 1" euler="0 0 30">
    <joint name="h1" axis="0 0 1" pos="0.1 0 0" ref="30"/>
    <joint name="s1" type="slide" axis="1 0 0" pos="0 0.2 0" ref="0.5"/>
    <joint name="h2" axis="0 1 0" pos="0 0 0.3" ref="-20"/>
    <geom type="sphere" size="0.1" pos="0.2 0 0"/>
    <body name="b" pos="0 1 0" euler="10 0 0">
      <joint name="h3" axis="1 1 0" pos="0.05 0 0.02"/>
      <geom type="box" size=".1 .2 .3"/>
    </body>
  </body>
</worldbody></mujoco>""")
    model = load(p).with_frames(["a", "b"])
    parts = [((0, 0, 1), _rz(30 * D), [("hinge", (0.1, 0, 0), (0, 0, 1), 30 * D), ("slide", (0, 0.2, 0), (1, 0, 0), 0.5),
                                       ("hinge", (0, 0, 0.3), (0, 1, 0), -20 * D)]),
             ((0, 1, 0), _rx(10 * D), [("hinge", (0.05, 0, 0.02), (1, 1, 0), 0.0)])]
    rng = np.random.default_rng(0)
    for q in [np.array([30 * D, 0.5, -20 * D, 0.0])] + list(model.random_q(rng, 4)):
        want = _mujoco_fk(parts, q)
        got = registry.reference(model, "frame_placement", {"q": q[None]})[0][0]  # (nf, 4, 4)
        for f, (R, pw) in enumerate(want):
            assert np.allclose(got[f][:3, :3], R, atol=1e-12) and np.allclose(got[f][:3, 3], pw, atol=1e-12), (q, f)
    # q = ref: the XML's pose
    q0 = np.array([30 * D, 0.5, -20 * D, 0.0])
    placed = registry.reference(model, "frame_placement", {"q": q0[None]})[0][0]
    assert np.allclose(placed[0][:3, 3], [0, 0, 1], atol=1e-12) and np.allclose(placed[0][:3, :3], _rz(30 * D))


def test_ref_of_a_single_joint_matches_pinocchio(tmp_path):
    """One hinge and one slide with ``ref``, each alone in its body: Pinocchio applies ref as
    MuJoCo does (q = qpos). (In a body with several joints Pinocchio 4 drops the first joint's
    ref: the test above checks that case against MuJoCo's kinematics.)"""
    p = write(tmp_path, """<mujoco model="r"><worldbody><body name="a" pos="0 0 1">
      <joint name="h" axis="0 0 1" pos="0.1 0 0" ref="90"/><geom type="sphere" size="0.1" pos="0.2 0 0"/>
      <body name="b" pos="0 1 0"><joint name="s" type="slide" axis="0 1 0" ref="0.3"/><geom type="box" size=".1 .2 .3"/>
      </body></body></worldbody></mujoco>""")
    model, pm = load(p), pin_model(p)
    check_structure(model, pm)
    assert max(placement_errors(model, pm).values()) < 1e-12
    assert max(compare_kernels(model, pm, DYNAMICS).values()) <= TOL64


def test_free_joint_is_the_body_pose_in_the_world(tmp_path):
    """A free body's q is its pose in the world (MuJoCo's qpos; the XML pose is only the initial
    qpos): X_tree is the identity, even for a rotated body (Pinocchio 4 then adds a spurious
    translation p − R·p: docs/mjcf.md). A free joint's pos is ignored, as MuJoCo's kinematics does."""
    p = write(tmp_path, _one_body('euler="0 0 90"', joint='<joint type="free" pos="0.5 0 0" armature="0.3"/>'))
    model = load(p)
    assert model.joint_types == ("floating",) and np.array_equal(model.X_tree[0], np.eye(6))
    assert model.armature.tolist() == [0.3] * 6  # <joint type="free"> takes armature; <freejoint> none
    pm = pin_model(p)
    check_structure(model, pm)
    assert np.allclose(pm.jointPlacements[1].rotation, np.eye(3))  # Pinocchio also drops the rotation, …
    assert np.linalg.norm(pm.jointPlacements[1].translation) > 0.1  # … not the translation (a Pinocchio 4 quirk)


def test_qpos_and_qvel_helpers(synthetic, tmp_path):
    path, model, pm = synthetic
    rng = np.random.default_rng(5)
    q = model.random_q(rng, 4)
    qpos = rbdgen.q_to_mujoco_qpos(model, q)
    # free joint: x y z w x y z (MuJoCo) vs x y z x y z w; the ball joint (q_start 11) w x y z
    assert np.array_equal(qpos[:, :3], q[:, :3]) and np.array_equal(qpos[:, 3], q[:, 6])
    assert np.array_equal(qpos[:, 4:7], q[:, 3:6])
    b = model.joint_names.index("ankle")
    s = model.q_start[b]
    assert np.array_equal(qpos[:, s], q[:, s + 3]) and np.array_equal(qpos[:, s + 1: s + 4], q[:, s: s + 3])
    assert np.array_equal(rbdgen.mujoco_qpos_to_q(model, qpos), q)
    assert np.array_equal(rbdgen.mujoco_qpos_to_q(model, qpos[0]), q[0])
    # qvel: the free joint's linear velocity in world axes; Pinocchio's world-aligned velocity of the body
    v = rng.normal(size=model.nv)
    qvel = rbdgen.v_to_mujoco_qvel(model, q[0], v)
    assert np.allclose(rbdgen.mujoco_qvel_to_v(model, q[0], qvel), v, atol=1e-14)
    data = pm.createData()
    pin.forwardKinematics(pm, data, model.to_pinocchio_q(q[0]), v)
    vel = pin.getFrameVelocity(pm, data, pm.getFrameId("torso", pin.FrameType.BODY), pin.LOCAL_WORLD_ALIGNED)
    assert np.allclose(vel.linear, qvel[:3], atol=1e-12) and np.allclose(qvel[3:6], v[3:6])
    # the world pose of the free body is MuJoCo's qpos
    placed = registry.reference(model.with_frames(["torso"]), "frame_placement", {"q": q[:1]})[0][0][0]
    w, x, y, z = qpos[0, 3:7]
    assert np.allclose(placed[:3, 3], qpos[0, :3])
    assert np.allclose(placed[:3, :3], sp.quat_to_rot([x, y, z, w]), atol=1e-12)
    with pytest.raises(ValueError, match="qpos"):
        rbdgen.mujoco_qpos_to_q(model, np.zeros(model.nq + 1))


# ---- inertia from geoms ------------------------------------------------------------------------

def _solid(kind, size, mass):
    """Principal moments of a solid about its centre, textbook forms (the capsule: a cylinder and
    two half-balls by the parallel-axis theorem)."""
    if kind == "sphere":
        return np.full(3, 0.4 * mass * size[0] ** 2)
    if kind == "box":
        a, b, c = (2 * x for x in size)
        return mass / 12 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
    if kind == "ellipsoid":
        a, b, c = size
        return mass / 5 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])
    if kind == "cylinder":
        r, h = size[0], 2 * size[1]
        return np.array([mass * (3 * r * r + h * h) / 12] * 2 + [mass * r * r / 2])
    r, L = size[0], 2 * size[1]
    vc, vh = math.pi * r * r * L, 2 / 3 * math.pi * r ** 3
    mc, mh = mass * vc / (vc + 2 * vh), mass * vh / (vc + 2 * vh)
    d = L / 2 + 3 * r / 8                       # a half-ball's centroid from the capsule's centre
    ih_own = (2 / 5 - 9 / 64) * mh * r * r      # half-ball about its centroid, transverse
    ixx = mc * (3 * r * r + L * L) / 12 + 2 * (ih_own + mh * d * d)
    izz = mc * r * r / 2 + 2 * (2 / 5) * mh * r * r
    return np.array([ixx, ixx, izz])


def _volume(kind, size):
    r = size[0]
    if kind == "sphere":
        return 4 / 3 * math.pi * r ** 3
    if kind in ("box", "ellipsoid"):
        return (8 if kind == "box" else 4 / 3 * math.pi) * size[0] * size[1] * size[2]
    return math.pi * r * r * 2 * size[1] + (4 / 3 * math.pi * r ** 3 if kind == "capsule" else 0.0)


GEOMS = [("sphere", (0.11,), 'size="0.11"'), ("box", (0.1, 0.2, 0.3), 'size="0.1 0.2 0.3"'),
         ("ellipsoid", (0.1, 0.15, 0.2), 'size="0.1 0.15 0.2"'), ("cylinder", (0.05, 0.2), 'size="0.05 0.2"'),
         ("capsule", (0.05, 0.2), 'size="0.05 0.2"'),
         ("capsule", (0.05, 0.25), 'size="0.05" fromto="0.1 0.2 0.3 0.1 0.2 -0.2"'),
         ("cylinder", (0.04, 0.25), 'size="0.04" fromto="0 0 0.25 0 0 -0.25"'),
         ("box", (0.03, 0.03, 0.25), 'size="0.03" fromto="0 0 0 0 0 0.5"'),
         ("ellipsoid", (0.03, 0.03, 0.25), 'size="0.03" fromto="0 0 0 0 0.5 0"')]


@pytest.mark.parametrize("kind, size, attrs", GEOMS, ids=[f"{g[0]}-{'fromto' if 'fromto' in g[2] else 'size'}" for g in GEOMS])
@pytest.mark.parametrize("mass", [None, 2.5])
def test_inertia_from_each_geom_type(tmp_path, kind, size, attrs, mass):
    """A body's inertia from one geom (density 1000 by default, or mass=): the closed forms here,
    and Pinocchio's parser (which infers the same)."""
    mattr = f' mass="{mass}"' if mass else ""
    p = write(tmp_path, f"""<mujoco model="g"><worldbody><body name="a"><joint axis="1 0 0"/>
      <geom type="{kind}" {attrs}{mattr}/></body></worldbody></mujoco>""")
    model = load(p)
    m, c, Ic = sp.inertia_parts(model.inertia[0])
    want_m = mass if mass else 1000 * _volume(kind, size)
    assert math.isclose(m, want_m, rel_tol=1e-12)
    assert np.allclose(np.sort(np.linalg.eigvalsh(Ic)), np.sort(_solid(kind, size, want_m)), rtol=1e-12, atol=0)
    pm = pin_model(p)
    assert srel(pin_inertia(model, 0).matrix(), pm.inertias[1].matrix()) < 1e-12


def test_inertia_geoms_that_mujoco_counts_and_pinocchio_does_not(tmp_path):
    """MuJoCo's compiler counts every geom whose group is in ``inertiagrouprange`` (default 0 5)
    with a mass, collision or not; Pinocchio 4 leaves out geoms with contype = conaffinity = 0 and
    counts every group. <inertial> wins unless inertiafromgeom="true"; density="0" or mass="0"
    geoms weigh nothing; planes none."""
    body = """<body name="a"><joint axis="1 0 0"/>
      <geom type="sphere" size="0.1"/>
      <geom type="sphere" size="0.1" pos="1 0 0" contype="0" conaffinity="0"/>
      <geom type="sphere" size="0.1" pos="0 1 0" group="6"/>
      <geom type="sphere" size="0.1" pos="0 0 1" density="0"/>
      <geom type="sphere" size="0.1" pos="0 0 2" mass="0"/>
      {}</body>"""
    sphere = 1000 * 4 / 3 * math.pi * 0.001
    m = load(write(tmp_path, f'<mujoco model="v"><worldbody>{body.format("")}</worldbody></mujoco>'))
    assert math.isclose(m.inertia[0][5, 5], 2 * sphere, rel_tol=1e-12)
    m, c, _ = sp.inertia_parts(m.inertia[0])
    assert np.allclose(c, [0.5, 0, 0])
    m = load(write(tmp_path, '<mujoco model="v"><compiler inertiagrouprange="0 6"/><worldbody>'
                   f'{body.format("")}</worldbody></mujoco>', "g6.xml"))
    assert math.isclose(m.inertia[0][5, 5], 3 * sphere, rel_tol=1e-12)
    inertial = '<inertial pos="0 0 0" mass="2" diaginertia="0.1 0.1 0.1"/>'
    m = load(write(tmp_path, f'<mujoco model="v"><worldbody>{body.format(inertial)}</worldbody></mujoco>', "i.xml"))
    assert m.inertia[0][5, 5] == 2.0
    m = load(write(tmp_path, '<mujoco model="v"><compiler inertiafromgeom="true"/><worldbody>'
                   f'{body.format(inertial)}</worldbody></mujoco>', "t.xml"))
    assert math.isclose(m.inertia[0][5, 5], 2 * sphere, rel_tol=1e-12)
    m = load(write(tmp_path, '<mujoco model="v"><compiler inertiafromgeom="false"/><worldbody>'
                   f'{body.format("")}<body name="b"><joint/>{inertial}</body></worldbody></mujoco>', "f.xml"))
    assert m.inertia[0][5, 5] == 0.0 and m.inertia[1][5, 5] == 2.0


def test_settotalmass_boundmass_balanceinertia(tmp_path):
    text = """<mujoco model="s"><compiler {}/><worldbody><body name="a"><joint axis="1 0 0"/>
      <geom type="sphere" size="0.1"/><body name="b" pos="0 0 1"><joint axis="0 1 0"/>
      <geom type="box" size="0.1 0.2 0.3"/><body name="c"><joint/></body>
      <body name="d"><joint/><inertial pos="0 0 0" mass="1" diaginertia="1 1 3"/></body></body></body>
      </worldbody></mujoco>"""
    base = load(write(tmp_path, text.format('balanceinertia="true"'), "b.xml"))
    scaled = load(write(tmp_path, text.format('settotalmass="7" balanceinertia="true"'), "s.xml"))
    k = 7 / base.total_mass
    assert math.isclose(scaled.total_mass, 7.0, rel_tol=1e-12)
    assert np.allclose(scaled.inertia, base.inertia * k, rtol=1e-12, atol=0)
    # balanceinertia: d's 1 1 3 breaks A + B ≥ C, so MuJoCo sets all three to their mean
    assert np.allclose(np.diag(sp.inertia_parts(base.inertia[3])[2]), [5 / 3] * 3)
    with pytest.raises(MJCFError, match="triangle"):
        load(write(tmp_path, text.format(""), "n.xml"))
    # the same numbers on every Python: the masses added left to right, not by the builtin sum
    # (compensated from Python 3.12 on); with sum exactly rounded the scaled model is unchanged
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("builtins.sum", lambda it, start=0: start + math.fsum(it) + 1e-9)
        again = load(write(tmp_path, text.format('settotalmass="7" balanceinertia="true"'), "s2.xml"))
        assert np.array_equal(again.inertia, scaled.inertia) and again.total_mass == scaled.total_mass
    bounded = load(write(tmp_path, text.format('boundmass="0.5" boundinertia="0.01" balanceinertia="true"'), "m.xml"))
    mc, _, Ic = sp.inertia_parts(bounded.inertia[2])  # c: no geom, no inertial
    assert mc == 0.5 and np.allclose(np.diag(Ic), 0.01)
    assert np.allclose(bounded.inertia[0], base.inertia[0])  # already above the bounds


# ---- meshes ------------------------------------------------------------------------------------

_BOX = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)
_BOX_FACES = []
for _axis in range(3):  # two triangles per face, outward by the right-hand rule
    for _sgn in (-1, 1):
        _quad = [i for i in range(8) if _BOX[i, _axis] == _sgn]
        _c = _BOX[_quad].mean(axis=0)
        _o = sorted(_quad, key=lambda i: math.atan2(*(np.delete(_BOX[i] - _c, _axis))[::-1]))
        _n = np.cross(_BOX[_o[1]] - _BOX[_o[0]], _BOX[_o[2]] - _BOX[_o[0]])
        if _n[_axis] * _sgn < 0:
            _o = _o[::-1]
        _BOX_FACES.append(_o)


def _box_mesh(half, centre):
    v = _BOX * np.asarray(half) + np.asarray(centre)
    tris = [[q[0], q[1], q[2]] for q in _BOX_FACES] + [[q[0], q[2], q[3]] for q in _BOX_FACES]
    return v, np.array(tris), _BOX_FACES


def _write_stl_binary(path, v, f):
    with open(path, "wb") as fh:
        fh.write(b"\0" * 80 + struct.pack("<I", len(f)))
        for t in f:
            fh.write(struct.pack("<3f", 0, 0, 0) + b"".join(struct.pack("<3f", *v[i]) for i in t) + b"\0\0")


def _write_stl_ascii(path, v, f):
    lines = ["solid box"]
    for t in f:
        lines += ["facet normal 0 0 0", "outer loop"] + [f"vertex {v[i][0]} {v[i][1]} {v[i][2]}" for i in t]
        lines += ["endloop", "endfacet"]
    Path(path).write_text("\n".join(lines + ["endsolid box"]))


def _write_obj(path, v, quads):
    Path(path).write_text("# box\n" + "".join(f"v {a} {b} {c}\n" for a, b, c in v)
                          + "".join("f " + " ".join(str(i + 1) for i in q) + "\n" for q in quads))


def _write_msh(path, v, f):
    with open(path, "wb") as fh:
        fh.write(struct.pack("<4i", len(v), 0, 0, len(f)))
        fh.write(np.asarray(v, "<f4").tobytes() + np.asarray(f, "<i4").tobytes())


@pytest.mark.parametrize("fmt", ["stl", "stl-ascii", "obj", "msh", "inline"])
def test_mesh_inertia_of_a_box(tmp_path, fmt):
    """A closed box mesh, offset and scaled, in every format: volume, centre and inertia equal the
    solid box's closed form (legacy and exact modes agree on a convex mesh), through meshdir."""
    half, centre, scale = (0.5, 1.0, 1.5), (0.25, -0.5, 1.0), (0.1, 0.2, 0.1)
    v, f, quads = _box_mesh(half, centre)
    (tmp_path / "meshes").mkdir()
    ext = {"stl": "stl", "stl-ascii": "stl", "obj": "obj", "msh": "msh"}.get(fmt)
    if fmt == "stl":
        _write_stl_binary(tmp_path / "meshes" / "box.stl", v, f)
    elif fmt == "stl-ascii":
        _write_stl_ascii(tmp_path / "meshes" / "box.stl", v, f)
    elif fmt == "obj":
        _write_obj(tmp_path / "meshes" / "box.obj", v, quads)
    elif fmt == "msh":
        _write_msh(tmp_path / "meshes" / "box.msh", v, f)
    asset = (f'<mesh name="box" file="box.{ext}" scale="{" ".join(map(str, scale))}"/>' if ext else
             f'<mesh name="box" scale="{" ".join(map(str, scale))}" vertex="{" ".join(map(str, v.ravel()))}" '
             f'face="{" ".join(map(str, f.ravel()))}"/>')
    try:
        import scipy.spatial  # noqa: F401 — inertia="convex" takes the hull from SciPy
        modes = ("legacy", "exact", "convex")
    except ImportError:
        modes = ("legacy", "exact")
    for mode in modes:
        folder = "assetdir" if fmt in ("obj", "msh") else "meshdir"  # meshdir wins; assetdir also names it
        text = f"""<mujoco model="m"><compiler {folder}="meshes"/><asset>{asset.replace('/>', f' inertia="{mode}"/>')}</asset>
          <worldbody><body name="a"><joint axis="1 0 0"/><geom type="mesh" mesh="box" density="500" pos="0 0 1"
          euler="0 0 90"/></body></worldbody></mujoco>"""
        model = load(write(tmp_path, text, f"{mode}.xml"))
        m, c, Ic = sp.inertia_parts(model.inertia[0])
        h = np.array(half) * scale
        want_m = 500 * 8 * h.prod()
        assert math.isclose(m, want_m, rel_tol=1e-6), mode  # float32 vertices, as MuJoCo keeps them
        assert np.allclose(c, [0, 0, 1] + _rz(90 * D) @ (np.array(centre) * scale), atol=1e-7), mode
        Ib = _rz(90 * D) @ np.diag(_solid("box", h, want_m)) @ _rz(90 * D).T
        assert np.allclose(Ic, Ib, rtol=1e-5, atol=1e-12), mode


def test_mesh_inertia_modes_on_a_concave_mesh(tmp_path):
    """An L-shaped prism (two boxes): ``exact`` is the divergence theorem's exact volume and
    inertia; MuJoCo's ``legacy`` counts each face's pyramid positive, which overcounts a
    concave mesh; ``shell`` weighs the surface."""
    # the L: [0,4]x[0,1]x[0,1] ∪ [0,1]x[1,4]x[0,1], as an extruded polygon
    poly = [(0, 0), (4, 0), (4, 1), (1, 1), (1, 4), (0, 4)]
    n = len(poly)
    v = [(x, y, 0.0) for x, y in poly] + [(x, y, 1.0) for x, y in poly]
    f = [(0, 2, 1), (0, 3, 2), (0, 5, 3), (3, 5, 4)]             # bottom, in convex pieces, facing −z
    f += [(n + a, n + b, n + c) for a, c, b in f]                # top, +z
    for j in range(n):                                           # sides, outward (counter-clockwise polygon)
        a, b = j, (j + 1) % n
        f += [(a, b, n + b), (a, n + b, n + a)]
    path = tmp_path / "l.stl"
    _write_stl_binary(path, np.array(v), f)
    vol, com, I = rbdgen.model.geom_inertia.mesh_inertia(*rbdgen.model.geom_inertia.read_mesh(str(path)), "exact")
    assert math.isclose(vol, 7.0, rel_tol=1e-12)
    boxes = [((2, 0.5, 0.5), (4, 1, 1)), ((0.5, 2.5, 0.5), (1, 3, 1))]
    assert np.allclose(com, sum(np.array(c) * np.prod(s) for c, s in boxes) / 7.0, atol=1e-12)
    Iw = sum(np.diag(_solid("box", np.array(s) / 2, np.prod(s)))
             + np.prod(s) * (np.dot(np.array(c) - com, np.array(c) - com) * np.eye(3)
                             - np.outer(np.array(c) - com, np.array(c) - com)) for c, s in boxes)
    assert np.allclose(I, Iw, atol=1e-12)
    vol_l, _, _ = rbdgen.model.geom_inertia.mesh_inertia(*rbdgen.model.geom_inertia.read_mesh(str(path)), "legacy")
    assert vol_l > vol + 0.01  # the inner walls' pyramids, seen from behind, counted positive
    area, _, _ = rbdgen.model.geom_inertia.mesh_inertia(*rbdgen.model.geom_inertia.read_mesh(str(path)), "shell")
    assert math.isclose(area, 2 * 7 + 16 * 1, rel_tol=1e-12)


# ---- include, assets, gravity, sites, notes ----------------------------------------------------

def test_include_relative_to_the_including_file(tmp_path):
    write(tmp_path, '<mujoco><default><joint armature="0.25"/></default></mujoco>', "parts/defaults.xml")
    write(tmp_path, '<mujoco><include file="leg.xml"/></mujoco>', "parts/body.xml")
    write(tmp_path, '<mujoco><body name="leg" pos="0 0 -0.5"><joint name="knee" axis="0 1 0"/>'
                    '<geom type="capsule" size="0.05 0.2"/></body></mujoco>', "parts/leg.xml")
    p = write(tmp_path, """<mujoco model="inc"><include file="parts/defaults.xml"/><worldbody>
      <body name="hip" pos="0 0 1"><joint name="hip" axis="1 0 0"/><geom type="sphere" size="0.1"/>
      <include file="parts/body.xml"/></body></worldbody></mujoco>""")
    model = load(p)
    assert model.joint_names == ("hip", "knee") and model.armature.tolist() == [0.25, 0.25]
    assert model.body_names == ("hip", "leg")


def test_gravity_option_flag_and_override(tmp_path):
    text = '<mujoco model="g">{}<worldbody><body name="a"><joint/><geom size="0.1"/></body></worldbody></mujoco>'
    assert load(write(tmp_path, text.format(""), "a.xml")).gravity.tolist() == [0, 0, -9.81]
    assert load(write(tmp_path, text.format('<option gravity="0 0 -981"/>'), "b.xml")).gravity.tolist() == [0, 0, -981]
    off = '<option gravity="0 0 -981"><flag gravity="disable"/></option>'
    assert load(write(tmp_path, text.format(off), "c.xml")).gravity.tolist() == [0, 0, 0]
    assert load(write(tmp_path, text.format('<option gravity="0 0 -981"/>'), "d.xml"),
                gravity=(1, 2, 3)).gravity.tolist() == [1, 2, 3]


def test_one_note_lists_what_is_ignored(tmp_path):
    p = write(tmp_path, """<mujoco model="n"><worldbody>
      <body name="a"><joint name="j"/><geom size="0.1"/><site name="s"/>
      <body name="b" pos="1 0 0"><joint name="k"/><geom size="0.1"/></body></body></worldbody>
      <tendon><fixed name="t"><joint joint="j" coef="1"/></fixed></tendon>
      <equality><connect body1="a" body2="b" anchor="0 0 0"/><joint joint1="j" joint2="k"/></equality>
      <actuator><motor joint="j"/><position joint="k"/></actuator>
      <sensor><jointpos joint="j"/></sensor><contact><exclude body1="a" body2="b"/></contact>
      <keyframe><key qpos="0 0"/></keyframe></mujoco>""")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = rbdgen.load_mjcf(p)
    notes = [w for w in caught if issubclass(w.category, RbdgenWarning)]
    assert len(notes) == 1 and len(caught) == 1, [str(w.message) for w in caught]
    msg = str(notes[0].message)
    for needle in (str(p), "2 actuators", "1 tendon", "2 equality constraints", "1 connect", "issue 42"):
        assert needle in msg, msg
    assert "sensor" not in msg and "contact" not in msg
    assert model.nv == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_clean = rbdgen.load_mjcf(write(tmp_path, _one_body(""), "clean.xml"))
    assert not caught and load_clean.nv == 1


def test_sites_and_bodies_are_frames_and_floating_base_option(tmp_path):
    p = write(tmp_path, """<mujoco model="f"><worldbody><site name="origin" pos="1 0 0"/>
      <body name="base" pos="0 0 0.5"><geom type="box" size="0.2 0.1 0.05"/>
      <body name="leg"><joint name="hip" axis="0 1 0" pos="0 0 -0.05"/><geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
      <site name="foot" pos="0 0 -0.3"/></body></body></worldbody></mujoco>""")
    fixed = load(p)
    assert not fixed.floating_base and fixed.nv == 1
    assert {"origin", "base", "leg", "foot"} <= {f.name for f in fixed.link_frames}
    assert "foot" in fixed.leaf_links
    floating = load(p, floating_base=True)
    assert floating.joint_types == ("floating", "revolute") and floating.joint_names[0] == "root_joint"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Pinocchio 4: use buildModelAndLegacyConstraintsFromMjcf
        pm = pin.buildModelFromMJCF(str(p), pin.JointModelFreeFlyer(), "root_joint")
    pm = pm[0] if isinstance(pm, tuple) else pm
    check_structure(floating, pm)
    assert max(compare_kernels(floating.with_frames(["foot"]), pm,
                               DYNAMICS + ("frame_placement", "frame_jacobian_world")).values()) <= TOL64
    with pytest.raises(UnsupportedError, match="already has joints"):
        load(write(tmp_path, _one_body(""), "j.xml"), floating_base=True)


def test_load_model_chooses_by_content(tmp_path):
    urdf = rbdgen.load_model(rbdgen.robots.path("iiwa14"))
    assert urdf.nv == 7
    # the extension does not matter: content does
    p = write(tmp_path, _one_body(""), "robot.urdf")
    assert rbdgen.load_model(p).nv == 1 and rbdgen.load_model(p, mimic="couple").nv == 1
    with pytest.raises(ValueError, match="mimic"):
        rbdgen.load_model(p, mimic="refuse")
    with pytest.raises(RbdgenError, match=r"root element is <sdf>.*URDF.*MJCF"):
        rbdgen.load_model(write(tmp_path, "<sdf version='1.6'/>", "x.sdf"))
    with pytest.raises(RbdgenError, match="no such file"):
        rbdgen.load_model(tmp_path / "missing.xml")


# ---- errors ------------------------------------------------------------------------------------

ERRORS = [
    ("malformed", '<mujoco model="e"><worldbody><body name="a"></worldbody></mujoco>', MJCFError,
     "malformed XML"),
    ("not mujoco", '<robot name="r"/>', MJCFError, "expected <mujoco>"),
    ("joint type", '<mujoco><worldbody><body name="a"><joint name="j" type="screw"/><geom size=".1"/></body>'
                   '</worldbody></mujoco>', MJCFError, "<joint name=\"j\">: unknown joint type 'screw'"),
    ("zero axis", '<mujoco><worldbody><body name="a"><joint name="j" axis="0 0 0"/><geom size=".1"/></body>'
                  '</worldbody></mujoco>', MJCFError, "<joint name=\"j\">: zero axis"),
    ("nan axis", '<mujoco><worldbody><body name="a"><joint name="j" axis="nan 0 1"/><geom size=".1"/></body>'
                 '</worldbody></mujoco>', MJCFError, "not finite"),
    ("text axis", '<mujoco><worldbody><body name="a"><joint name="j" axis="x y z"/><geom size=".1"/></body>'
                  '</worldbody></mujoco>', MJCFError, "not a number"),
    ("negative mass", '<mujoco><worldbody><body name="a"><joint/><inertial pos="0 0 0" mass="-1" '
                      'diaginertia="1 1 1"/></body></worldbody></mujoco>', MJCFError, "negative mass"),
    ("negative geom mass", '<mujoco><worldbody><body name="a"><joint/><geom name="g" size=".1" mass="-2"/></body>'
                           '</worldbody></mujoco>', MJCFError, "<geom name=\"g\">: negative mass"),
    ("non-PSD inertia", '<mujoco><worldbody><body name="a"><joint/><inertial pos="0 0 0" mass="1" '
                        'fullinertia="1 1 1 2 0 0"/></body></worldbody></mujoco>', MJCFError,
     "not positive semi-definite"),
    ("triangle", '<mujoco><worldbody><body name="a"><joint/><inertial pos="0 0 0" mass="1" '
                 'diaginertia="1 1 5"/></body></worldbody></mujoco>', MJCFError, "triangle inequality"),
    ("missing include", '<mujoco><include file="nothere.xml"/></mujoco>', MJCFError,
     "included file 'nothere.xml' does not exist"),
    ("missing mesh", '<mujoco><asset><mesh name="m" file="nothere.stl"/></asset><worldbody><body name="a"><joint/>'
                     '<geom name="g" type="mesh" mesh="m"/></body></worldbody></mujoco>', MJCFError, "no such file"),
    ("undefined mesh", '<mujoco><worldbody><body name="a"><joint/><geom name="g" type="mesh" mesh="m"/></body>'
                       '</worldbody></mujoco>', MJCFError, "mesh 'm' is not defined"),
    ("unknown class", '<mujoco><worldbody><body name="a"><joint class="nope"/><geom size=".1"/></body></worldbody>'
                      '</mujoco>', MJCFError, "unknown default class 'nope'"),
    ("unknown childclass", '<mujoco><worldbody><body name="a" childclass="nope"><joint/><geom size=".1"/></body>'
                           '</worldbody></mujoco>', MJCFError, "unknown default childclass 'nope'"),
    ("duplicate body", '<mujoco><worldbody><body name="a"><joint/><geom size=".1"/></body><body name="a"/>'
                       '</worldbody></mujoco>', MJCFError, "body name 'a' is used twice"),
    ("duplicate joint", '<mujoco><worldbody><body name="a"><joint name="j"/><geom size=".1"/><body name="b">'
                        '<joint name="j"/><geom size=".1"/></body></body></worldbody></mujoco>', MJCFError,
     "joint name 'j' is used twice"),
    ("nested free", '<mujoco><worldbody><body name="a"><joint/><geom size=".1"/><body name="b"><freejoint/>'
                    '<geom size=".1"/></body></body></worldbody></mujoco>', UnsupportedError, "root only"),
    ("free and hinge", '<mujoco><worldbody><body name="a"><freejoint/><joint/><geom size=".1"/></body></worldbody>'
                       '</mujoco>', MJCFError, "free joint and 1 other"),
    ("no body", '<mujoco><worldbody><geom size=".1"/></worldbody></mujoco>', MJCFError, "no <body>"),
    ("zero quat", '<mujoco><worldbody><body name="a" quat="0 0 0 0"><joint/><geom size=".1"/></body></worldbody>'
                  '</mujoco>', MJCFError, "is zero"),
    ("two orientations", '<mujoco><worldbody><body name="a" quat="1 0 0 0" euler="0 0 1"><joint/><geom size=".1"/>'
                         '</body></worldbody></mujoco>', MJCFError, "orientation given twice"),
    ("bad eulerseq", '<mujoco><compiler eulerseq="xyw"/><worldbody><body name="a"><joint/><geom size=".1"/></body>'
                     '</worldbody></mujoco>', MJCFError, "eulerseq"),
    ("bad angle", '<mujoco><compiler angle="gradian"/><worldbody><body name="a"><joint/><geom size=".1"/></body>'
                  '</worldbody></mujoco>', MJCFError, "degree, radian"),
    ("zero size", '<mujoco><worldbody><body name="a"><joint/><geom name="g" type="box" size="0.1 0 0.1"/></body>'
                  '</worldbody></mujoco>', MJCFError, "positive size"),
    ("fromto sphere", '<mujoco><worldbody><body name="a"><joint/><geom type="sphere" size=".1" fromto="0 0 0 1 0 0"/>'
                      '</body></worldbody></mujoco>', MJCFError, "fromto needs"),
    ("composite", '<mujoco><worldbody><body name="a"><joint/><geom size=".1"/><composite type="grid" count="2 2 1"/>'
                  '</body></worldbody></mujoco>', UnsupportedError, "<composite> is not supported"),
    ("huge", '<mujoco><worldbody><body name="a" pos="1e300 0 0"><joint/><geom size=".1"/></body></worldbody>'
             '</mujoco>', MJCFError, "out of range"),
    ("world joint", '<mujoco><worldbody><joint/></worldbody></mujoco>', MJCFError, "world body cannot have <joint>"),
    ("massless joint", '<mujoco><worldbody><body name="a"><joint name="j"/></body></worldbody></mujoco>', None, None),
]


@pytest.mark.parametrize("case, text, cls, needle", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_input_is_one_clear_error(tmp_path, case, text, cls, needle):
    p = write(tmp_path, text, "bad.xml")
    if cls is None:  # loads (a massless body: only the kernels that need M⁻¹ refuse it, naming the joint)
        model = load(p)
        with pytest.raises(UnsupportedError, match="joint 'j'"):
            registry.check_model(model, ["aba"])
        return
    with pytest.raises(cls) as e:
        load(p)
    msg = str(e.value)
    assert needle in msg, msg
    assert str(p) in msg and "\n" not in msg
    if case not in ("malformed", "not mujoco", "missing include", "no body"):
        assert "line " in msg, msg  # names the line and element


def test_bad_mesh_files_are_clear_errors(tmp_path):
    def model_with(file_text, ext="stl"):
        (tmp_path / f"m.{ext}").write_bytes(file_text)
        return write(tmp_path, f'<mujoco><asset><mesh name="m" file="m.{ext}"/></asset><worldbody><body name="a"><joint/>'
                               '<geom name="g" type="mesh" mesh="m"/></body></worldbody></mujoco>', f"{ext}.xml")
    obj = b"v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 2 9\n"
    for data, ext, needle in [(b"garbage", "stl", "not an STL file"), (b"\0" * 16, "msh", "no faces"),
                              (struct.pack("<4i", 10, 0, 0, 2), "msh", "ask for"), (obj, "obj", "face refers"),
                              (b"x", "ply", "unknown mesh format")]:
        with pytest.raises(MJCFError) as e:
            load(model_with(data, ext))
        assert needle in str(e.value) and "<geom name=\"g\">" in str(e.value), str(e.value)
    v, f, _ = _box_mesh((1, 1, 1), (0, 0, 0))
    _write_stl_binary(tmp_path / "flat.stl", v * [1, 1, 0], f)
    with pytest.raises(MJCFError, match="too small"):
        load(write(tmp_path, '<mujoco><asset><mesh name="m" file="flat.stl"/></asset><worldbody><body name="a">'
                             '<joint/><geom type="mesh" mesh="m"/></body></worldbody></mujoco>', "flat.xml"))


def test_a_deep_chain_loads(tmp_path):
    """Bodies nested 1500 deep (the XML nesting is the tree): no recursion limit in the way."""
    n = 1500
    body = "".join(f'<body name="b{i}" pos="0 0 0.1"><joint axis="0 1 0"/><geom type="capsule" size="0.01 0.04"/>'
                   for i in range(n))
    model = load(write(tmp_path, f'<mujoco model="deep"><worldbody>{body}{"</body>" * n}</worldbody></mujoco>'))
    assert model.nb == n and model.parent[-1] == n - 2 and model.joint_names[-1] == f"b{n - 1}Joint_0"


def test_include_cycles_are_refused(tmp_path):
    write(tmp_path, '<mujoco><include file="b.xml"/></mujoco>', "a.xml")
    write(tmp_path, '<mujoco><include file="a.xml"/></mujoco>', "b.xml")
    p = write(tmp_path, '<mujoco model="c"><include file="a.xml"/></mujoco>', "main.xml")
    with pytest.raises(MJCFError, match="cycle of includes"):
        load(p)


# ---- the fuzzer --------------------------------------------------------------------------------

FUZZ_BASE = ET.fromstring(SYNTHETIC)
FUZZ_VALUES = ["nan", "inf", "-1", "0", "", " ", "abc", "1 2", "1 2 3 4", "0 0 0", "1e308", "-1e300 0 0", "1e-320",
               "0 0 0 0", "hinge", "ball", "free", "slide", "screw", "true", "nope", "leg", "foot", "-90 90",
               "0 0 1 0 0 1"]


@st.composite
def mutated_mjcf(draw):
    root = ET.fromstring(ET.tostring(FUZZ_BASE))
    elements = [e for e in root.iter() if e is not root]
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["attr", "attr", "attr", "newattr", "drop", "dup", "rename"]))
        el = draw(st.sampled_from(elements))
        if op in ("attr", "newattr"):
            keys = sorted(el.attrib) if op == "attr" and el.attrib else \
                ["pos", "quat", "euler", "axis", "type", "size", "mass", "class", "childclass", "fromto", "range",
                 "ref", "armature", "density", "diaginertia", "fullinertia", "xyaxes", "zaxis", "axisangle"]
            el.set(draw(st.sampled_from(keys)), draw(st.sampled_from(FUZZ_VALUES)))
        else:
            parent = next((p for p in root.iter() if el in list(p)), None)
            if parent is None:  # dropped already
                continue
            if op == "drop":
                parent.remove(el)
            elif op == "dup":
                parent.append(ET.fromstring(ET.tostring(el)))
            else:
                el.tag = draw(st.sampled_from(["body", "joint", "freejoint", "geom", "inertial", "site", "default",
                                               "include", "frame", "compiler", "bogus"]))
    return ET.tostring(root, encoding="unicode")


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=mutated_mjcf(), floating=st.booleans())
def test_mutated_mjcf_loads_or_fails_cleanly(tmp_path_factory, text, floating):
    """Random mutations of the synthetic robot (attributes set to NaN, huge, empty, wrong words;
    elements dropped, duplicated, renamed): a model or one rbdgen error naming the file, never
    another exception, never a hang."""
    p = tmp_path_factory.mktemp("fuzz") / "robot.xml"
    p.write_text(text, encoding="utf-8")
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(10)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RbdgenWarning)
            try:
                m = rbdgen.load_mjcf(p, floating_base=floating)
            except RbdgenError as e:
                assert str(p) in str(e) or "robot.xml" in str(e), e
                assert "\n" not in " ".join(str(e).split())
            else:
                assert m.nb >= 1 and np.all(np.isfinite(m.inertia)) and np.all(np.isfinite(m.X_tree))
    except _Hang:
        pytest.fail(f"the loader hung on:\n{text}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ---- the corpus: dm_control's suite and locomotion walkers -------------------------------------

def _pinocchio_copy(src: Path, dst: Path) -> Path:
    """``src`` as Pinocchio 4's MJCF parser must be given it to read what MuJoCo reads, written
    next to it (includes and meshes resolve the same): a joint's ``pos`` from its default class
    written on the joint (Pinocchio ignores a class's pos), the first top-level body's pose
    dropped when it has no joint (Pinocchio drops it: the same dynamics when, as here, it is a
    translation), other top-level bodies dropped (Pinocchio reads the first only)."""
    tree = ET.parse(src)
    root = tree.getroot()
    classes: dict = {}

    def read(d, parent, name):
        tab = {k: dict(v) for k, v in parent.items()}
        for c in d:
            if c.tag != "default":
                tab.setdefault(c.tag, {}).update(c.attrib)
        classes[name] = tab
        for c in d:
            if c.tag == "default":
                read(c, tab, c.get("class"))

    for d in root.findall("default"):
        read(d, {}, d.get("class", "main"))
    classes.setdefault("main", {})

    def walk(el, cls):
        for c in el:
            if c.tag == "body":
                walk(c, c.get("childclass", cls))
            elif c.tag == "joint" and c.get("pos") is None:
                pos = classes[c.get("class", cls)].get("joint", {}).get("pos")
                if pos is not None:
                    c.set("pos", pos)

    wb = root.find("worldbody")
    walk(wb, "main")
    tops = wb.findall("body")
    for extra in tops[1:]:
        wb.remove(extra)
    free = tops[0].findall("freejoint") or [j for j in tops[0].findall("joint") if j.get("type") == "free"]
    if free:  # MuJoCo: a free body's XML pose is only its initial qpos; Pinocchio 4 keeps p − R·p of it
        for a in ("pos", "quat", "euler", "axisangle", "xyaxes", "zaxis"):
            tops[0].attrib.pop(a, None)
    elif not tops[0].findall("joint"):  # Pinocchio drops a welded root's pose: the test compares in its frame
        assert all(tops[0].get(a) is None for a in ("quat", "euler", "axisangle", "xyaxes", "zaxis")), \
            "a rotated welded root: Pinocchio's dynamics would differ (gravity)"
    tree.write(dst)
    return dst


def _geoms_pinocchio_leaves_out(path: Path) -> set:
    """Names of the bodies with a geom MuJoCo weighs and Pinocchio 4 does not: a mesh (Pinocchio
    gives it no inertia) or a geom with contype = conaffinity = 0 (Pinocchio: visual only)."""
    root = ET.parse(path).getroot()
    classes: dict = {}

    def read(d, parent, name):
        tab = {k: dict(v) for k, v in parent.items()}
        for c in d:
            if c.tag != "default":
                tab.setdefault(c.tag, {}).update(c.attrib)
        classes[name] = tab
        for c in d:
            if c.tag == "default":
                read(c, tab, c.get("class"))

    for d in root.findall("default"):
        read(d, {}, d.get("class", "main"))
    classes.setdefault("main", {})
    out = set()

    def walk(el, cls):
        for c in el:
            if c.tag == "body":
                walk(c, c.get("childclass", cls))
            elif c.tag == "geom" and el.tag == "body":
                a = dict(classes[c.get("class", cls)].get("geom", {}), **c.attrib)
                weighs = a.get("density") != "0" and a.get("mass") not in ("0", "0.0")
                if weighs and (a.get("type") == "mesh" or (a.get("contype") == "0" and a.get("conaffinity") == "0")):
                    out.add(el.get("name"))

    walk(root.find("worldbody"), "main")
    return out


_corpus_models: dict = {}


def corpus_case(case):
    mjcf_corpus.require()
    if case not in _corpus_models:
        path = mjcf_corpus.path(case)
        model = load(path)
        copy = _pinocchio_copy(path, path.with_name(f".pinocchio-{os.getpid()}-{path.name}"))
        try:
            pm = pin_model(copy, gravity=model.gravity)
        finally:
            copy.unlink()
        _corpus_models[case] = (path, model, pm)
    return _corpus_models[case]


@pytest.mark.parametrize("case", list(mjcf_corpus.MODELS))
def test_corpus_model_matches_pinocchio(case):
    """Each corpus model against Pinocchio's reading of it: structure (nq, nv, every joint's type
    and order, composite joints), joint placements, armature, inertias — equal, but for the bodies
    where Pinocchio's parser is known to read differently (mesh and non-colliding geoms it does not
    weigh; settotalmass it ignores), whose inertias it is then given — and rnea, crba (armature
    included), aba, minv and the rnea/aba derivatives at random states, ≤ 1e-9."""
    path, model, pm = corpus_case(case)
    registry.check_model(model, ["aba", "minv"])  # the massless links of multi-joint bodies are not refused
    nv = pm.nv
    if case == "dog_suite":  # a second top-level body (a ball, free): Pinocchio reads the first only
        assert model.nv == nv + 6 and model.joint_types[-1] == "floating"
    g = check_structure(model, pm, nv=nv)
    top = ET.parse(path).getroot().find("worldbody").find("body")
    welded = not top.findall("joint") and not top.findall("freejoint")
    perr = placement_errors(model, pm, root=top.get("name") if welded else None)
    assert max(perr.values()) < 1e-12, {pm.names[j]: e for j, e in perr.items() if e >= 1e-12}
    ierr = inertia_errors(model, pm)
    differ = {pm.names[j] for j, e in ierr.items() if e > 1e-9}
    expected = set()
    if case == "cheetah":  # <compiler settotalmass="14">: every body scaled; Pinocchio ignores it
        k = 14.0 / sum(pm.inertias[j].mass for j in range(pm.njoints))
        for j, grp in g.items():
            assert srel(pin_inertia(model, grp[-1]).matrix(), pm.inertias[j].matrix() * k) < 1e-12
        assert math.isclose(model.total_mass, 14.0, rel_tol=1e-12)
        expected = differ
    else:
        heavy = _geoms_pinocchio_leaves_out(path)
        for j, grp in g.items():
            # the MuJoCo body of joint j: its bodies' last link, or the body frame welded to it
            names = {f.name for f in model.link_frames if f.body == grp[-1]}
            if names & heavy:
                expected.add(pm.names[j])
        assert differ <= expected, differ - expected
        for j, e in ierr.items():  # Pinocchio weighs less, never more
            if pm.names[j] in differ:
                assert pm.inertias[j].mass <= model.inertia[g[j][-1]][5, 5] * (1 + 1e-12)
    for j, grp in g.items():  # Pinocchio given those bodies' inertias
        if pm.names[j] in expected:
            pm.inertias[j] = pin_inertia(model, grp[-1])
    if nv == model.nv:
        errs = compare_kernels(model, pm, DYNAMICS, seed=11, n=2)
    else:
        errs = _compare_leading_block(model, pm, seed=11, n=2)
    print(f"\n{case}: nq {model.nq} nv {model.nv}, {len(differ)} inertias given to Pinocchio; max rel. error "
          + ", ".join(f"{k} {e:.1e}" for k, e in errs.items()))
    assert max(errs.values()) <= TOL64, errs


def _compare_leading_block(model, pm, *, seed, n):
    """The dynamics of the first top-level tree (Pinocchio's model of it) against the matching
    block of rbdgen's model of the whole file: the trees are independent."""
    nv, nq = pm.nv, pm.nq
    data = pm.createData()
    flat = decompose(pm)  # Pinocchio's composite-joint derivatives are not an oracle
    fdata = flat.createData()
    rng = np.random.default_rng(seed)
    errs: dict = {}
    for _ in range(n):
        q = model.random_q(rng)
        v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
        qp = model.to_pinocchio_q(q)[:nq]
        M = pin.crba(pm, data, qp)
        Mi = pin.computeMinverse(pm, data, qp)
        dq, dv, _ = pin.computeRNEADerivatives(flat, fdata, qp, v[:nv], a[:nv])
        add = {"rnea": srel(ref.rnea(model, q, v, a)[:nv], pin.rnea(pm, data, qp, v[:nv], a[:nv])),
               "crba": srel(ref.crba(model, q)[:nv, :nv], np.triu(M) + np.triu(M, 1).T),
               "aba": srel(ref.aba(model, q, v, a)[:nv], pin.aba(pm, data, qp, v[:nv], a[:nv])),
               "minv": srel(ref.minv(model, q)[:nv, :nv], np.triu(Mi) + np.triu(Mi, 1).T),
               "rnea_derivatives": max(srel(x[:nv, :nv], y) for x, y in
                                       zip(ref.rnea_derivatives(model, q, v, a), (dq, dv)))}
        for k, e in add.items():
            errs[k] = max(errs.get(k, 0.0), e)
    return errs


def test_corpus_gravity_and_names():
    mjcf_corpus.require()
    assert load(mjcf_corpus.path("fruitfly")).gravity.tolist() == [0, 0, -981]  # centimetres
    m = load(mjcf_corpus.path("humanoid"))
    assert m.floating_base and m.joint_names[0] == "root" and (m.nq, m.nv) == (28, 27)
    assert (load(mjcf_corpus.path("fruitfly")).nv, load(mjcf_corpus.path("dog")).nv) == (108, 79)


def test_corpus_compiled_kernels_and_package(tmp_path, capsys):
    """The humanoid's CPU kernels (rnea, crba, aba) against Pinocchio; ``rbdgen generate`` of an
    MJCF file writes a package whose kernels pass ``rbdgen validate``'s checks."""
    mjcf_corpus.require()
    path, model, pm = corpus_case("humanoid")
    kern = rbdgen.build(model, kernels=["rnea", "crba", "aba"], dtype="float64", progress=False)
    data = pm.createData()
    rng = np.random.default_rng(7)
    q = model.random_q(rng, 4)
    v, a = rng.normal(size=(4, model.nv)), rng.normal(size=(4, model.nv))
    tau, M, dd = kern.rnea(q, v, a), kern.crba(q), kern.aba(q, v, a)
    for s in range(4):
        qp = model.to_pinocchio_q(q[s])
        assert srel(tau[s], pin.rnea(pm, data, qp, v[s], a[s])) <= TOL64
        Mp = pin.crba(pm, data, qp)
        assert srel(M[s], np.triu(Mp) + np.triu(Mp, 1).T) <= TOL64
        assert srel(dd[s], pin.aba(pm, data, qp, v[s], a[s])) <= TOL64
    # the command line: generate a package from the cheetah's file, validate from the same file
    cheetah = mjcf_corpus.path("cheetah")
    rc, out, err = run_main(capsys, "generate", cheetah, "--kernels", "rnea,crba,aba", "--dtype", "float64",
                            "--out", tmp_path, "--quiet")
    assert rc == 0, err
    assert "warning: " in err and "6 actuators" in err
    pkg = tmp_path / "cheetah"
    assert (pkg / "manifest.json").is_file()
    import importlib
    import sys
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module("cheetah")
        cm = load(cheetah)
        qc = cm.random_q(rng, 3)
        vc, ac = rng.normal(size=(3, cm.nv)), rng.normal(size=(3, cm.nv))
        assert srel(mod.rnea(qc, vc, ac), ref.rnea(cm, qc, vc, ac)) <= TOL64
        assert srel(mod.aba(qc, vc, ac), ref.aba(cm, qc, vc, ac)) <= TOL64
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("cheetah", None)
    rc, out, err = run_main(capsys, "validate", cheetah, "--kernels", "rnea,crba,aba", "--states", "4", "--quiet")
    assert rc == 0, out + err
    assert "all 3 kernels pass" in out and "inertia(s) of this file differently" in out
    assert "n/a" not in out  # compared with Pinocchio


def test_cli_errors_on_mjcf(tmp_path, capsys):
    p = write(tmp_path, '<mujoco><worldbody><body name="a"><joint type="screw"/><geom size=".1"/></body></worldbody>'
                        '</mujoco>', "bad.xml")
    rc, out, err = run_main(capsys, "inspect", p)
    assert rc == 2
    assert_one_error_line(err, out, str(p), "unknown joint type 'screw'")
    rc, out, err = run_main(capsys, "inspect", write(tmp_path, _one_body(""), "ok.xml"), "--mimic", "refuse")
    assert rc == 2
    assert_one_error_line(err, out, "mimic")
    rc, out, err = run_main(capsys, "inspect", write(tmp_path, _one_body(""), "ok.xml"))
    assert rc == 0 and "nq 1" in out
