"""The MJCF corpus against MuJoCo itself (issue 43): the model rbdgen reads from each dm_control
file, run through the NumPy reference, against what MuJoCo 3 compiles from the same file and
computes — ``mj_fullM`` (the joint-space inertia, armature included), ``qfrc_bias`` (Coriolis,
centrifugal and gravity forces) and ``qacc`` of ``mj_forward`` under an applied generalized force,
with MuJoCo's constraints, passive forces and actuators switched off (they are not rigid-body
dynamics; rbdgen's kernels have none of them).

This is the oracle Pinocchio cannot be for these files: Pinocchio's MJCF parser does not weigh mesh
or non-colliding geoms, ignores settotalmass, reads some attributes differently (docs/mjcf.md);
MuJoCo's compiler is the definition of what an MJCF file means. It checks the inertias rbdgen's
loader infers from geoms and meshes (dogs, fruit fly), the joint anchors and refs, the defaults.

Conventions (docs/mjcf.md): q and qpos differ in the quaternions' order only
(``q_to_mujoco_qpos``); a free joint's linear velocity is in world axes in MuJoCo and in the body's
in rbdgen, ``v = A(q)·qvel`` with A = diag(Rᵀ, I) on a free joint and I elsewhere. So MuJoCo's
quantities are rbdgen's transformed: M_mj = Aᵀ M A, qfrc_bias = Aᵀ rnea(q, v, Ȧ·qvel) (Ȧ·qvel =
−ω × v_lin on a free joint's linear rows: the change of axes), and qacc = A⁻¹ (aba(q, v, A⁻ᵀ τ) −
Ȧ·qvel). mj_rne is not used: it returns M·qacc + bias without the armature, which rbdgen's rnea
includes (as Pinocchio's).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import warnings

import numpy as np
import pytest

import rbdgen
from rbdgen import reference as ref
from rbdgen import registry

import mjcf_corpus

if os.environ.get("RBDGEN_REQUIRE_MJCF") == "1":  # `make test`: installed by the test extra, so required
    import mujoco
else:
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo (the test extra's `mujoco`) is the oracle of this file: "
                                                  "`make test` installs it")

#: relative to the largest entry; MuJoCo keeps mesh vertices in single precision and so does
#: rbdgen's loader, so the inertias agree to rounding
TOL = 1e-9


def _mujoco_model(path):
    """MuJoCo's compiled model of ``path``; skins and textures are dropped (the corpus holds no
    image or skin files: they are not dynamics), through MjSpec, before compiling."""
    spec = mujoco.MjSpec.from_file(str(path))
    for s in list(spec.skins):
        spec.delete(s)
    for t in list(spec.textures):
        spec.delete(t)
    for m in spec.materials:
        m.textures = [""] * len(m.textures)
    # MuJoCo writes its warnings (cheetah's deprecated settotalmass) to MUJOCO_LOG.TXT in the
    # working directory: compile elsewhere
    with warnings.catch_warnings(), tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        warnings.simplefilter("ignore")
        mj = spec.compile()
    # not rigid-body dynamics: constraints (contacts, limits, equalities), actuators, springs and
    # dampers (mjDSBL_PASSIVE before MuJoCo 3.3), the medium's forces (fluid models: the fruit fly)
    flags = ("mjDSBL_CONSTRAINT", "mjDSBL_ACTUATION", "mjDSBL_PASSIVE", "mjDSBL_SPRING", "mjDSBL_DAMPER")
    for f in flags:
        if hasattr(mujoco.mjtDisableBit, f):
            mj.opt.disableflags |= int(getattr(mujoco.mjtDisableBit, f))
    mj.opt.density = mj.opt.viscosity = 0.0
    assert not np.any(mj.body_gravcomp), "gravity compensation is a passive force these flags keep"
    return mj


def _full_m(mj, d, out):
    """mj_fullM: MuJoCo ≥ 3.4 takes the data, earlier versions its qM."""
    try:
        mujoco.mj_fullM(mj, d, out)
    except TypeError:
        mujoco.mj_fullM(mj, out, d.qM)


def _frames(model, q, v):
    """(A, Ȧ·qvel) of the state: A maps MuJoCo's qvel to rbdgen's v (see the module docstring)."""
    A = np.eye(model.nv)
    adot = np.zeros(model.nv)
    for i, t in enumerate(model.joint_types):
        if t != "floating":
            continue
        s, p = model.v_start[i], model.q_start[i]
        x, y, z, w = q[p + 3: p + 7] / np.linalg.norm(q[p + 3: p + 7])
        R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                      [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                      [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
        A[s: s + 3, s: s + 3] = R.T
        adot[s: s + 3] = -np.cross(v[s + 3: s + 6], v[s: s + 3])
    return A, adot


def _rel(a, b) -> float:
    """max |a − b| / max |b|: relative to the largest entry, with no floor — the rodent's and the
    fruit fly's masses are grams and milligrams."""
    return float(np.max(np.abs(a - b)) / float(np.max(np.abs(b))))


_cases: dict = {}


def _case(case):
    if case not in _cases:
        path = mjcf_corpus.path(case)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the one note on actuators etc.
            model = rbdgen.load_mjcf(path)
        _cases[case] = (model, _mujoco_model(path))
    return _cases[case]


@pytest.mark.parametrize("case", list(mjcf_corpus.MODELS))
def test_corpus_model_matches_mujoco(case):
    """Sizes, the mass that moves, M (armature included) and the bias forces of each corpus model
    equal MuJoCo's own at random states (≤ 1e-9 relative to the largest entry), and forward
    dynamics within what M's condition number makes of those differences."""
    mjcf_corpus.require()
    model, mj = _case(case)
    assert (model.nq, model.nv) == (mj.nq, mj.nv)
    # the mass that moves: bodies welded to the world (body_weldid 0) are not in rbdgen's model
    moving = float(sum(mj.body_mass[b] for b in range(1, mj.nbody) if mj.body_weldid[b] != 0))
    assert abs(model.total_mass - moving) <= 1e-9 * moving
    d = mujoco.MjData(mj)
    rng = np.random.default_rng(3)
    errs = {"M": 0.0, "bias": 0.0, "qacc": 0.0}
    for _ in range(3):
        q = model.random_q(rng)
        v = rng.normal(size=model.nv)
        A, adot = _frames(model, q, v)
        d.qpos[:] = rbdgen.q_to_mujoco_qpos(model, q)
        d.qvel[:] = rbdgen.v_to_mujoco_qvel(model, q, v)
        assert np.allclose(A @ d.qvel, v, rtol=0, atol=1e-12)  # the helpers' convention is A's
        tau_mj = rng.normal(size=model.nv) * 10
        d.qfrc_applied[:] = tau_mj
        mujoco.mj_forward(mj, d)
        M_mj = np.zeros((mj.nv, mj.nv))
        _full_m(mj, d, M_mj)

        M = ref.crba(model, q)
        eM = _rel(A.T @ M @ A, M_mj)
        bias = A.T @ ref.rnea(model, q, v, adot)
        eb = _rel(bias, d.qfrc_bias)
        vdot = ref.aba(model, q, v, np.linalg.solve(A.T, tau_mj))
        qacc = np.linalg.solve(A, vdot - adot)
        # a forward error: M's condition number times the inputs' relative differences (the meshes'
        # inertias differ from MuJoCo's in the 12th digit: single-precision vertices summed in
        # another order), with a factor 10 of slack
        eq = _rel(qacc, d.qacc)
        bound = 10 * np.linalg.cond(M_mj) * (eM + eb + 1e-15)
        assert eq <= bound, (eq, bound)
        errs["M"], errs["bias"], errs["qacc"] = max(errs["M"], eM), max(errs["bias"], eb), max(errs["qacc"], eq)
    print(f"\n{case}: nv {model.nv}, max rel. error vs MuJoCo " + ", ".join(f"{k} {e:.1e}" for k, e in errs.items()))
    assert max(errs["M"], errs["bias"]) <= TOL, errs


def test_the_mujoco_comparison_can_fail():
    """The same comparison on a model whose one body is 1 % heavier than MuJoCo's: M differs."""
    mjcf_corpus.require()
    model, mj = _case("hopper")
    heavier = model.inertia.copy()
    heavier[-1] = heavier[-1] * 1.01
    import dataclasses

    wrong = dataclasses.replace(model, inertia=heavier)
    d = mujoco.MjData(mj)
    q = model.neutral()
    d.qpos[:] = rbdgen.q_to_mujoco_qpos(model, q)
    mujoco.mj_forward(mj, d)
    M_mj = np.zeros((mj.nv, mj.nv))
    _full_m(mj, d, M_mj)
    assert _rel(ref.crba(model, q), M_mj) <= TOL
    assert _rel(ref.crba(wrong, q), M_mj) > 1e-4


#: what the corpus lacks: ball joints, several joints in one body, joint anchors off the body's
#: origin, refs, a slide, a rotated free body, euler/axisangle/xyaxes/zaxis, defaults, armature
SYNTHETIC = """
<mujoco model="features">
  <compiler angle="degree" eulerseq="zyx"/>
  <option gravity="0.3 -0.2 -9.6"/>
  <default>
    <joint armature="0.01"/>
    <geom density="800"/>
    <default class="arm"><joint type="hinge" axis="0 1 0" armature="0.05"/><geom type="capsule" size="0.04"/></default>
  </default>
  <worldbody>
    <body name="base" pos="0.1 0.2 1.0" euler="10 20 30">
      <freejoint/>
      <geom type="box" size="0.2 0.1 0.05"/>
      <body name="shoulder" pos="0.2 0 0" axisangle="1 1 0 40" childclass="arm">
        <joint name="ball" type="ball" pos="0 0 0.02"/>
        <geom fromto="0 0 0 0.3 0 0"/>
        <body name="elbow" pos="0.3 0 0" xyaxes="0 1 0 -1 0 0.2">
          <joint name="e1" pos="0.01 0 0" ref="15"/>
          <joint name="e2" axis="1 0 0" pos="0 0.02 0"/>
          <joint name="e3" type="slide" axis="0 0 1" ref="0.05"/>
          <geom fromto="0 0 0 0.25 0 0" size="0.03"/>
          <body name="hand" pos="0.25 0 0" zaxis="0 1 1">
            <joint name="wrist" type="ball"/>
            <geom type="ellipsoid" size="0.05 0.03 0.02"/>
            <geom type="cylinder" size="0.02 0.05" pos="0 0 0.06" mass="0.2"/>
          </body>
        </body>
      </body>
      <body name="tail" pos="-0.2 0 0" quat="0.9 0 0.3 0.1">
        <joint name="t" type="hinge" axis="0 0 1" pos="0 0 0.01" ref="-30"/>
        <inertial pos="-0.1 0 0" mass="0.4" fullinertia="0.002 0.003 0.004 0.0001 -0.0002 0.0003"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def test_joint_kinds_and_anchors_match_mujoco(tmp_path):
    """Ball joints, three joints in one body (anchors off the origin, refs, a slide), a rotated free
    body and every orientation form against MuJoCo: M, the bias forces and forward dynamics."""
    path = tmp_path / "features.xml"
    path.write_text(SYNTHETIC)
    model = rbdgen.load_mjcf(path)
    assert [t for t in model.joint_types] == ["floating", "spherical", "revolute", "revolute", "prismatic",
                                             "spherical", "revolute"]
    mj = _mujoco_model(path)
    assert (model.nq, model.nv) == (mj.nq, mj.nv)
    d = mujoco.MjData(mj)
    bodies = ["base", "shoulder", "elbow", "hand", "tail"]
    framed = model.with_frames(bodies)
    rng = np.random.default_rng(5)
    for _ in range(4):
        q = model.random_q(rng)
        v = rng.normal(size=model.nv)
        A, adot = _frames(model, q, v)
        d.qpos[:] = rbdgen.q_to_mujoco_qpos(model, q)
        d.qvel[:] = rbdgen.v_to_mujoco_qvel(model, q, v)
        tau_mj = rng.normal(size=model.nv)
        d.qfrc_applied[:] = tau_mj
        mujoco.mj_forward(mj, d)
        M_mj = np.zeros((mj.nv, mj.nv))
        _full_m(mj, d, M_mj)
        assert _rel(A.T @ ref.crba(model, q) @ A, M_mj) <= 1e-12
        assert _rel(A.T @ ref.rnea(model, q, v, adot), d.qfrc_bias) <= 1e-12
        qacc = np.linalg.solve(A, ref.aba(model, q, v, np.linalg.solve(A.T, tau_mj)) - adot)
        assert _rel(qacc, d.qacc) <= 1e-10
        # every MuJoCo body's frame (its link frame in rbdgen) where MuJoCo puts it
        placed = registry.reference(framed, "frame_placement", {"q": q[None]})[0][0]
        for k, b in enumerate(bodies):
            i = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_BODY, b)
            assert np.allclose(placed[k][:3, 3], d.xpos[i], rtol=0, atol=1e-12), b
            assert np.allclose(placed[k][:3, :3], d.xmat[i].reshape(3, 3), rtol=0, atol=1e-12), b
