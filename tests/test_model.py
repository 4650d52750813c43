"""URDF loading: every kind of bad input gets the right error naming file, element and problem;
the loaded RobotModel has the layout, order, transforms and inertias we promise.

Small robots are written to tmp_path from link/joint snippets (see ``link``/``joint``/``urdf``);
expected values are computed here by hand with numpy and xml.etree, not with rbdgen's helpers.
"""
from __future__ import annotations

import dataclasses
import math
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import rbdgen
import rbdgen.robots
from rbdgen.errors import RbdgenError, RbdgenWarning, UnsupportedError, URDFError

# ---------------------------------------------------------------------------------------------
# URDF builders


def link(name, mass=1.0, com="0 0 0", inertia=(0.1, 0.1, 0.1, 0.0, 0.0, 0.0), rpy="0 0 0", inertial=True):
    """A <link>; ``inertia`` is (ixx, iyy, izz, ixy, ixz, iyz); ``inertial=False`` gives none."""
    if not inertial:
        return f'<link name="{name}"/>'
    ixx, iyy, izz, ixy, ixz, iyz = inertia
    return (
        f'<link name="{name}"><inertial><origin xyz="{com}" rpy="{rpy}"/><mass value="{mass}"/>'
        f'<inertia ixx="{ixx}" ixy="{ixy}" ixz="{ixz}" iyy="{iyy}" iyz="{iyz}" izz="{izz}"/>'
        "</inertial></link>"
    )


def joint(name, parent, child, type="revolute", xyz="0 0 0", rpy="0 0 0", axis="0 0 1",
          limit=(-1.0, 1.0), extra=""):
    """A <joint>; ``limit=None`` leaves out <limit>, ``axis=None`` leaves out <axis>."""
    parts = [f'<joint name="{name}" type="{type}">', f'<parent link="{parent}"/>', f'<child link="{child}"/>',
             f'<origin xyz="{xyz}" rpy="{rpy}"/>']
    if axis is not None and type not in ("fixed", "floating"):
        parts.append(f'<axis xyz="{axis}"/>')
    if limit is not None and type in ("revolute", "prismatic", "continuous"):
        parts.append(f'<limit lower="{limit[0]}" upper="{limit[1]}" effort="10" velocity="5"/>')
    parts.append(extra)
    parts.append("</joint>")
    return "".join(parts)


def urdf(*parts, name="testbot"):
    return '<?xml version="1.0"?>\n<robot name="' + name + '">\n' + "\n".join(parts) + "\n</robot>\n"


def write(tmp_path, text, fname="robot.urdf"):
    p = tmp_path / fname
    p.write_text(text)
    return p


def two_link(**link_kw):
    """base --j1--> l1, with l1's inertial parameters from link_kw."""
    return urdf(link("base"), link("l1", **link_kw), joint("j1", "base", "l1"))


def load_quiet(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RbdgenWarning)
        return rbdgen.load_urdf(path, **kw)


def expect_error(path, exc, *needles, **load_kw):
    """load_urdf(path) raises exactly ``exc``, whose message names the file and every needle."""
    with pytest.raises(RbdgenError) as info:
        rbdgen.load_urdf(path, **load_kw)
    err = info.value
    assert type(err) is exc, f"expected {exc.__name__}, got {type(err).__name__}: {err}"
    msg = str(err)
    assert str(path) in msg, msg
    assert err.file == str(path)
    for n in needles:
        assert n in msg, f"{n!r} not in {msg!r}"
    return msg


# ---------------------------------------------------------------------------------------------
# bad input: reading the file


def test_missing_file(tmp_path):
    expect_error(tmp_path / "nope.urdf", URDFError, "no such file")


def test_directory_instead_of_file(tmp_path):
    d = tmp_path / "robot.urdf"
    d.mkdir()
    expect_error(d, URDFError, "directory")


def test_malformed_xml(tmp_path):
    p = write(tmp_path, '<robot name="r"><link name="a"></robot>')
    expect_error(p, URDFError, "malformed XML", "line 1")


def test_root_element_not_robot(tmp_path):
    p = write(tmp_path, '<model name="r"><link name="a"/></model>')
    expect_error(p, URDFError, "<model>", "<robot>")


# ---------------------------------------------------------------------------------------------
# bad input: one URDF per problem, each error checked for class, file, element and problem

BASE = link("base")

BAD_URDFS = {
    "unknown-parent": (
        urdf(BASE, link("l1"), joint("j1", "ghost", "l1")),
        URDFError, ("joint 'j1'", "parent link 'ghost'", "not defined"), {}),
    "unknown-child": (
        urdf(BASE, link("l1"), joint("j1", "base", "phantom")),
        URDFError, ("joint 'j1'", "child link 'phantom'", "not defined"), {}),
    "two-roots": (
        urdf(BASE, link("l1"), link("island"), joint("j1", "base", "l1")),
        URDFError, ("2 root links", "base", "island"), {}),
    "no-root-cycle": (
        urdf(link("a"), link("b"), joint("ja", "a", "b"), joint("jb", "b", "a")),
        URDFError, ("no root link", "cycle", "a, b"), {}),
    "unreachable-cycle": (
        urdf(BASE, link("l1"), link("x"), link("y"),
             joint("j1", "base", "l1"), joint("jx", "x", "y"), joint("jy", "y", "x")),
        URDFError, ("cycle", "x, y"), {}),
    "closed-chain": (
        urdf(BASE, link("l1"), link("l2"), link("l3"), joint("j1", "base", "l1"), joint("j2", "base", "l2"),
             joint("j3", "l1", "l3"), joint("j4", "l2", "l3")),
        URDFError, ("link 'l3'", "'j3'", "'j4'", "closed kinematic chain"), {}),
    "duplicate-link": (
        urdf(BASE, link("l1"), link("l1"), joint("j1", "base", "l1")),
        URDFError, ("duplicate link name 'l1'",), {}),
    "duplicate-joint": (
        urdf(BASE, link("l1"), link("l2"), joint("j1", "base", "l1"), joint("j1", "l1", "l2")),
        URDFError, ("duplicate joint name 'j1'",), {}),
    "zero-axis": (
        urdf(BASE, link("l1"), joint("j1", "base", "l1", axis="0 0 0")),
        URDFError, ("joint 'j1'", "zero axis"), {}),
    "nan-axis": (
        urdf(BASE, link("l1"), joint("j1", "base", "l1", axis="nan 0 1")),
        URDFError, ("joint 'j1' <axis>", "nan 0 1", "not finite"), {}),
    "nan-origin": (
        urdf(BASE, link("l1"), joint("j1", "base", "l1", xyz="0 NaN 0")),
        URDFError, ("joint 'j1' <origin>", "xyz", "not finite"), {}),
    "inf-origin": (
        urdf(BASE, link("l1"), joint("j1", "base", "l1", xyz="inf 0 0")),
        URDFError, ("joint 'j1' <origin>", "xyz", "not finite"), {}),
    "inf-inertial-origin": (
        urdf(BASE, link("l1", com="0 0 -inf"), joint("j1", "base", "l1")),
        URDFError, ("link 'l1' <inertial> <origin>", "not finite"), {}),
    "non-numeric": (
        urdf(BASE, link("l1", mass="heavy"), joint("j1", "base", "l1")),
        URDFError, ("link 'l1' <mass>", '"heavy"', "not a number"), {}),
    "negative-mass": (
        urdf(BASE, link("l1", mass=-2.0), joint("j1", "base", "l1")),
        URDFError, ("link 'l1'", "negative mass -2"), {}),
    "not-psd": (
        urdf(BASE, link("l1", inertia=(0.1, 0.1, 0.1, 0.3, 0.0, 0.0)), joint("j1", "base", "l1")),
        URDFError, ("body 'l1'", "link 'l1'", "not positive semi-definite", "check_inertia=False"), {}),
    "triangle-inequality": (
        urdf(BASE, link("l1", inertia=(0.1, 0.1, 0.5, 0.0, 0.0, 0.0)), joint("j1", "base", "l1")),
        URDFError, ("body 'l1'", "link 'l1'", "triangle inequality"), {}),
    "unknown-joint-type": (
        urdf(BASE, link("l1"), joint("j1", "base", "l1", type="ball")),
        UnsupportedError, ("joint 'j1'", "unknown joint type 'ball'"), {}),
    # a planar joint moves in its frame's x-y plane (Pinocchio's); another normal is refused, not ignored
    "planar-axis": (
        urdf(BASE, link("l1"), joint("j1", "base", "l1", type="planar", axis="1 0 0")),
        UnsupportedError, ("joint 'j1'", "planar", "must be 0 0 1, not 1 0 0"), {}),
    "non-root-floating": (
        urdf(BASE, link("l1"), link("l2"), joint("j1", "base", "l1"), joint("j2", "l1", "l2", type="floating")),
        UnsupportedError, ("joint 'j2'", "non-root floating joint"), {}),
    "root-floating-plus-floating-base": (
        urdf(link("world", inertial=False), BASE, link("l1"),
             joint("free", "world", "base", type="floating"), joint("j1", "base", "l1")),
        UnsupportedError, ("joint 'free'", "floating_base=True"), {"floating_base": True}),
    "mimic": (
        urdf(BASE, link("l1"), link("l2"), joint("j1", "base", "l1"),
             joint("j2", "l1", "l2", extra='<mimic joint="j1" multiplier="2"/>')),
        UnsupportedError, ("joint 'j2'", "mimic", "'j1'", "mimic='couple'", "mimic='independent'"), {"mimic": "refuse"}),
    "mimic-unknown-leader": (
        urdf(BASE, link("l1"), joint("j1", "base", "l1", extra='<mimic joint="nobody"/>')),
        URDFError, ("joint 'j1'", "unknown joint 'nobody'", "mimic='independent'"), {}),
    "only-fixed-joints": (
        urdf(BASE, link("l1"), joint("j1", "base", "l1", type="fixed")),
        URDFError, ("no movable joint",), {"floating_base": False}),
    "limit-lower-above-upper": (
        urdf(BASE, link("l1"), joint("j1", "base", "l1", limit=(1.5, -0.5))),
        URDFError, ("joint 'j1'", "lower 1.5 > upper -0.5"), {}),
    "inertial-without-mass": (
        urdf(BASE, '<link name="l1"><inertial><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/>'
                   "</inertial></link>", joint("j1", "base", "l1")),
        URDFError, ("link 'l1'", "no <mass>"), {}),
}


@pytest.mark.parametrize("case", list(BAD_URDFS), ids=list(BAD_URDFS))
def test_bad_urdf(tmp_path, case):
    text, exc, needles, kw = BAD_URDFS[case]
    p = write(tmp_path, text)
    expect_error(p, exc, *needles, **kw)


def test_bad_urdfs_are_valid_xml():
    # guards the table above: every case must fail in rbdgen, not in our string building
    for text, *_ in BAD_URDFS.values():
        assert ET.fromstring(text.split("?>", 1)[1]).tag == "robot"


def test_mimic_loads_when_independent(tmp_path):
    p = write(tmp_path, BAD_URDFS["mimic"][0])
    m = rbdgen.load_urdf(p, mimic="independent")
    assert m.joint_names == ("j1", "j2")
    assert m.nq == 2
    assert m.ignored_mimic == ("j2",)


def test_mimic_of_an_unknown_joint_loads_when_independent(tmp_path):
    """A <mimic> that names no joint of the file (example-robot-data's alex_psyonic_hands.urdf
    has such tags): refused where the joint would be coupled (the table above, and with
    mimic="refuse"), loaded as an ordinary joint with a warning naming it where mimic joints are
    independent, as Pinocchio's parser without mimic=True loads it."""
    p = write(tmp_path, BAD_URDFS["mimic-unknown-leader"][0])
    expect_error(p, URDFError, "joint 'j1'", "unknown joint 'nobody'", mimic="refuse")
    with pytest.warns(RbdgenWarning, match="joint 'j1': <mimic> names unknown joint 'nobody'; loaded as an ordinary"):
        m = rbdgen.load_urdf(p, mimic="independent")
    assert m.joint_names == ("j1",) and m.nv == 1 and m.ignored_mimic == ("j1",)


def test_root_floating_joint_without_floating_base(tmp_path):
    p = write(tmp_path, BAD_URDFS["root-floating-plus-floating-base"][0])
    m = rbdgen.load_urdf(p)
    assert m.joint_types == ("floating", "revolute")
    assert (m.nq, m.nv) == (8, 7)
    assert m.floating_base


def test_floating_joint_not_first_has_unit_quaternion_in_neutral(tmp_path):
    # the world link's revolute child sorts before its floating child
    p = write(tmp_path, urdf(link("world", inertial=False), BASE, link("arm"),
                             joint("z_free", "world", "base", type="floating"), joint("b_rev", "world", "arm")))
    m = rbdgen.load_urdf(p)
    assert m.joint_types == ("revolute", "floating")
    q = m.neutral()
    s = m.q_start[1]
    np.testing.assert_array_equal(q[s : s + 7], [0, 0, 0, 0, 0, 0, 1])
    assert q[0] == 0.0


# ---------------------------------------------------------------------------------------------
# inertia: per-link defects that the lumped body hides warn; check_inertia=False loads anyway

def _sensor_robot():
    return urdf(
        BASE,
        link("l1", mass=5.0, inertia=(0.2, 0.2, 0.2, 0, 0, 0)),
        link("imu_sensor", mass=0.01, inertia=(-1e-4, 1e-6, 1e-6, 0, 0, 0)),
        joint("j1", "base", "l1"),
        joint("imu_joint", "l1", "imu_sensor", type="fixed", xyz="0.05 0 0"),
    )


def test_non_psd_sensor_link_merged_into_heavy_body_warns(tmp_path):
    p = write(tmp_path, _sensor_robot())
    with pytest.warns(RbdgenWarning) as record:
        m = rbdgen.load_urdf(p)
    msgs = [str(w.message) for w in record if issubclass(w.category, RbdgenWarning)]
    assert len(msgs) == 1, msgs
    assert "link 'imu_sensor'" in msgs[0]
    assert "not positive semi-definite" in msgs[0]
    assert "body 'l1'" in msgs[0]
    assert str(p) in msgs[0]
    assert m.body_names == ("l1",)
    assert m.inertia[0][5, 5] == pytest.approx(5.01)


def test_physical_robot_does_not_warn(tmp_path):
    p = write(tmp_path, two_link())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rbdgen.load_urdf(p)


def test_check_inertia_false_loads_bad_body(tmp_path):
    p = write(tmp_path, BAD_URDFS["not-psd"][0])
    with pytest.warns(RbdgenWarning, match="link 'l1'"):
        m = rbdgen.load_urdf(p, check_inertia=False)
    assert m.nb == 1
    # the bad off-diagonal made it into the model unchanged (COM at the body origin)
    assert m.inertia[0][0, 1] == pytest.approx(0.3)
    ev = np.linalg.eigvalsh(m.inertia[0][:3, :3])
    assert ev[0] < 0


# ---------------------------------------------------------------------------------------------
# model semantics

def _rpy(r, p, y):
    """URDF roll-pitch-yaw, built here independently of rbdgen.spatial."""
    cr, sr, cp, sp_, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    Ry = np.array([[cp, 0, sp_], [0, 1, 0], [-sp_, 0, cp]])
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return Rz @ Ry @ Rx


def _homog(xyz, rpy):
    T = np.eye(4)
    T[:3, :3] = _rpy(*rpy)
    T[:3, 3] = xyz
    return T


def test_fixed_joint_merged_mass_com_inertia_and_transform(tmp_path):
    mA, cA, IA = 2.0, np.array([0.1, 0.0, 0.05]), np.diag([0.02, 0.03, 0.04])
    mB, cB, IB = 0.5, np.array([0.0, 0.02, 0.0]), np.diag([0.001, 0.002, 0.0025])
    iB_rpy = np.array([0.3, 0.2, -0.5])      # B's inertial frame is rotated w.r.t. B
    f_xyz, f_rpy = np.array([0.3, -0.1, 0.2]), np.array([0.4, -0.2, 0.7])
    c_xyz, c_rpy = np.array([0.05, 0.15, -0.25]), np.array([-0.3, 0.5, 0.1])
    fmt = lambda v: " ".join(repr(float(x)) for x in v)  # noqa: E731
    text = urdf(
        BASE,
        link("A", mass=mA, com=fmt(cA), inertia=(0.02, 0.03, 0.04, 0, 0, 0)),
        link("B", mass=mB, com=fmt(cB), inertia=(0.001, 0.002, 0.0025, 0, 0, 0), rpy=fmt(iB_rpy)),
        link("C"),
        joint("jA", "base", "A"),
        joint("jB", "A", "B", type="fixed", xyz=fmt(f_xyz), rpy=fmt(f_rpy)),
        joint("jC", "B", "C", xyz=fmt(c_xyz), rpy=fmt(c_rpy), axis="1 0 0"),
    )
    m = rbdgen.load_urdf(write(tmp_path, text))
    assert m.body_names == ("A", "C")
    assert m.joint_names == ("jA", "jC")
    assert m.parent == (-1, 0)
    assert m.merged_fixed == (("B", "jB", "A"),)

    # mass and COM of the lumped body, by hand
    I = m.inertia[0]
    assert I[5, 5] == pytest.approx(mA + mB, rel=1e-14)
    RB = _rpy(*f_rpy)
    com_expected = (mA * cA + mB * (f_xyz + RB @ cB)) / (mA + mB)
    mC = I[:3, 3:]                           # = m · skew(com)
    com = np.array([mC[2, 1], mC[0, 2], mC[1, 0]]) / I[5, 5]
    np.testing.assert_allclose(com, com_expected, rtol=0, atol=1e-14)

    # rotational inertia about A's origin, by hand (parallel axis theorem)
    def about_origin(mass, c, Ic):
        return Ic + mass * (c @ c * np.eye(3) - np.outer(c, c))

    dB = f_xyz + RB @ cB
    IB_in_B = _rpy(*iB_rpy) @ IB @ _rpy(*iB_rpy).T
    I_expected = about_origin(mA, cA, IA) + about_origin(mB, dB, RB @ IB_in_B @ RB.T)
    np.testing.assert_allclose(I[:3, :3], I_expected, rtol=0, atol=1e-14)

    # X_tree of jC composes jB's and jC's origins: a point given in jC's frame lands where the
    # homogeneous transforms built by hand put it in A's frame.
    T = _homog(f_xyz, f_rpy) @ _homog(c_xyz, c_rpy)
    X = m.X_tree[1]
    E = X[:3, :3]                            # rotation A → joint coordinates (= Rᵀ)
    Erx = -X[3:, :3]                         # E · skew(r)
    rx = E.T @ Erx
    r = np.array([rx[2, 1], rx[0, 2], rx[1, 0]])  # joint frame origin in A
    for point in (np.zeros(3), np.array([1.0, -2.0, 0.5]), np.array([0.0, 0.3, 0.0])):
        np.testing.assert_allclose(r + E.T @ point, (T @ np.append(point, 1.0))[:3], rtol=0, atol=1e-13)
    np.testing.assert_allclose(X[:3, 3:], 0.0, atol=0)


def _branched_urdf():
    # XML order of the joints differs from their name order at every branch point;
    # "Zulu" < "alpha" in byte order, as urdfdom's std::map<std::string> sorts them
    return urdf(
        link("base"), link("la"), link("lb"), link("lc"), link("ld"), link("le"), link("lf"), link("lg"),
        joint("zeta", "base", "la"),
        joint("mid", "base", "lb"),
        joint("alpha", "base", "lc"),
        joint("b2", "lc", "ld"),
        joint("b1", "lc", "le"),
        joint("Zulu", "base", "lf"),
        joint("fixed_x", "lb", "lg", type="fixed"),
    )


def test_joint_order_depth_first_children_by_name(tmp_path):
    p = write(tmp_path, _branched_urdf())
    m = rbdgen.load_urdf(p)
    assert m.joint_names == ("Zulu", "alpha", "b1", "b2", "mid", "zeta")
    assert m.parent == (-1, -1, 1, 1, -1, -1)
    assert all(m.parent[i] < i for i in range(m.nb))


def test_joint_order_matches_pinocchio(tmp_path):
    pin = pytest.importorskip("pinocchio")
    p = write(tmp_path, _branched_urdf())
    m = rbdgen.load_urdf(p)
    pm = pin.buildModelFromUrdf(str(p))
    assert tuple(pm.names)[1:] == m.joint_names
    pmf = pin.buildModelFromUrdf(str(p), pin.JointModelFreeFlyer())
    mf = rbdgen.load_urdf(p, floating_base=True)
    assert tuple(pmf.names)[1:] == mf.joint_names
    assert (pmf.nq, pmf.nv) == (mf.nq, mf.nv)


def test_axis_normalised(tmp_path):
    p = write(tmp_path, urdf(BASE, link("l1"), link("l2"), joint("j1", "base", "l1", axis="0 0 2"),
                             joint("j2", "l1", "l2", type="prismatic", axis="3 4 0")))
    m = rbdgen.load_urdf(p)
    np.testing.assert_allclose(m.axis[0], [0, 0, 1], rtol=0, atol=1e-15)
    np.testing.assert_allclose(m.axis[1], [0.6, 0.8, 0], rtol=0, atol=1e-15)


def test_missing_axis_defaults_to_x(tmp_path):
    p = write(tmp_path, urdf(BASE, link("l1"), joint("j1", "base", "l1", axis=None)))
    np.testing.assert_array_equal(rbdgen.load_urdf(p).axis[0], [1, 0, 0])


def test_floating_base_layout():
    m = load_quiet(rbdgen.robots.path("quadruped"), floating_base=True)
    assert m.floating_base
    assert m.joint_names[0] == "root_joint"
    assert m.joint_types[0] == "floating"
    assert (m.nq, m.nv) == (19, 18)
    assert m.nq == m.nv + 1
    assert (m.q_start[0], m.v_start[0]) == (0, 0)
    assert (m.q_start[1], m.v_start[1]) == (7, 6)
    assert m.q_start == (0,) + tuple(range(7, 19))
    assert m.v_start == (0,) + tuple(range(6, 18))
    q = m.neutral()
    assert q.shape == (19,)
    assert q[6] == 1.0
    assert np.count_nonzero(q) == 1
    fixed = load_quiet(rbdgen.robots.path("quadruped"))
    assert not fixed.floating_base
    assert np.count_nonzero(fixed.neutral()) == 0
    assert (fixed.nq, fixed.nv) == (12, 12)


def _continuous_urdf():
    return urdf(BASE, link("l1"), link("l2"), link("l3"),
                joint("j1", "base", "l1", type="continuous"),
                joint("j2", "l1", "l2", limit=(-2.0, 0.5)),
                joint("j3", "l2", "l3", type="continuous", axis="0 1 0"))


def test_continuous_joint_pinocchio_q_round_trip(tmp_path):
    p = write(tmp_path, _continuous_urdf())
    m = rbdgen.load_urdf(p)
    assert m.nq == 3 and m.nv == 3
    assert m.nq_pinocchio == 5
    q = np.array([0.3, -1.2, 2.9])
    qp = m.to_pinocchio_q(q)
    np.testing.assert_allclose(qp, [math.cos(0.3), math.sin(0.3), -1.2, math.cos(2.9), math.sin(2.9)], atol=1e-15)
    np.testing.assert_allclose(m.from_pinocchio_q(qp), q, atol=1e-14)

    rng = np.random.default_rng(0)
    Q = m.random_q(rng, 50)
    QP = m.to_pinocchio_q(Q)
    assert QP.shape == (50, 5)
    np.testing.assert_allclose(m.from_pinocchio_q(QP), Q, atol=1e-14)
    for k in range(0, 50, 7):
        np.testing.assert_allclose(QP[k], m.to_pinocchio_q(Q[k]), atol=0)

    pin = pytest.importorskip("pinocchio")
    pm = pin.buildModelFromUrdf(str(p))
    assert pm.nq == m.nq_pinocchio
    assert pm.nv == m.nv
    # pinocchio's own neutral maps to our zero angles
    np.testing.assert_allclose(m.from_pinocchio_q(pin.neutral(pm)), np.zeros(3), atol=0)


def test_random_q_within_limits_and_unit_quaternion(tmp_path):
    p = write(tmp_path, urdf(BASE, link("l1"), link("l2"), link("l3"),
                             joint("j1", "base", "l1", limit=(-0.5, 1.2)),
                             joint("j2", "l1", "l2", type="prismatic", limit=(0.0, 0.3)),
                             joint("j3", "l2", "l3", type="continuous")))
    m = rbdgen.load_urdf(p, floating_base=True)
    rng = np.random.default_rng(1)
    Q = m.random_q(rng, 2000)
    assert Q.shape == (2000, m.nq)
    np.testing.assert_allclose(np.linalg.norm(Q[:, 3:7], axis=1), 1.0, rtol=0, atol=1e-14)
    for i, (lo, hi) in ((1, (-0.5, 1.2)), (2, (0.0, 0.3))):
        qi = Q[:, m.q_start[i]]
        assert qi.min() >= lo and qi.max() <= hi
        assert qi.max() - qi.min() > 0.8 * (hi - lo)   # actually spread over the range
    q3 = Q[:, m.q_start[3]]
    assert q3.min() >= -math.pi and q3.max() <= math.pi
    q = m.random_q(rng)
    assert q.shape == (m.nq,)
    assert np.linalg.norm(q[3:7]) == pytest.approx(1.0, abs=1e-14)


def test_random_q_on_bundled_arm_within_limits():
    m = load_quiet(rbdgen.robots.path("iiwa14"))
    assert np.all(np.isfinite(m.lower)) and np.all(np.isfinite(m.upper))
    Q = m.random_q(np.random.default_rng(2), 1000)
    assert np.all(Q >= m.lower) and np.all(Q <= m.upper)


def test_model_is_frozen(tmp_path):
    m = rbdgen.load_urdf(write(tmp_path, two_link()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.nq = 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.parent = (0,)
    for name in ("axis", "X_tree", "inertia", "lower", "upper", "velocity_limit", "effort_limit", "gravity"):
        arr = getattr(m, name)
        assert isinstance(arr, np.ndarray)
        with pytest.raises(ValueError, match="read-only"):
            arr[(0,) * arr.ndim] = 123.0
    for name in ("body_names", "joint_names", "joint_types", "parent", "q_start", "v_start"):
        assert isinstance(getattr(m, name), tuple)


def test_tree_queries(tmp_path):
    # base ─ja→ a ─jb→ b
    #            └jc→ c ─je→ e
    # base ─jd→ d
    text = urdf(BASE, link("a"), link("b"), link("c"), link("d"), link("e"),
                joint("jd", "base", "d"), joint("jc", "a", "c"), joint("ja", "base", "a"),
                joint("jb", "a", "b"), joint("je", "c", "e"))
    m = rbdgen.load_urdf(write(tmp_path, text))
    assert m.body_names == ("a", "b", "c", "e", "d")
    assert m.parent == (-1, 0, 0, 2, -1)
    assert m.subtree(0) == [0, 1, 2, 3]
    assert m.subtree(2) == [2, 3]
    assert m.subtree(4) == [4]
    assert m.ancestors(3) == [3, 2, 0]
    assert m.ancestors(4) == [4]
    assert m.depth == (0, 1, 1, 2, 0)
    assert m.children(0) == [1, 2]
    assert m.children(1) == []


def _xml_link_masses(path):
    """(masses of links not rigidly attached to the world, all link masses), via xml.etree."""
    root = ET.parse(path).getroot()
    mass = {}
    for el in root.findall("link"):
        mel = el.find("inertial/mass")
        mass[el.get("name")] = 0.0 if mel is None else float(mel.get("value"))
    joints = root.findall("joint")
    children = {j.find("child").get("link") for j in joints}
    (root_link,) = [n for n in mass if n not in children]
    world = {root_link}
    changed = True
    while changed:  # links joined to the world by fixed joints are merged into it
        changed = False
        for j in joints:
            if j.get("type") == "fixed" and j.find("parent").get("link") in world:
                c = j.find("child").get("link")
                if c not in world:
                    world.add(c)
                    changed = True
    return sum(v for n, v in mass.items() if n not in world), sum(mass.values()), root_link


def test_total_mass_iiwa14():
    path = rbdgen.robots.path("iiwa14")
    moving, everything, root_link = _xml_link_masses(path)
    assert root_link == "iiwa_link_0"
    m = rbdgen.load_urdf(path)
    assert m.total_mass == pytest.approx(moving, rel=1e-12)
    assert m.total_mass == pytest.approx(17.5, rel=1e-12)   # the masses quoted in the file header
    mf = rbdgen.load_urdf(path, floating_base=True)
    assert mf.total_mass == pytest.approx(everything, rel=1e-12)


def test_bundled_robots_listed_and_load():
    names = rbdgen.robots.names()
    assert "iiwa14" in names and "quadruped" in names
    for name in names:
        m = load_quiet(rbdgen.robots.path(name))
        assert isinstance(m, rbdgen.RobotModel)
        assert m.nb > 0 and m.nq == m.nv
    iiwa = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    assert iiwa.nq == 7
    assert iiwa.joint_names == tuple(f"iiwa_joint_{k}" for k in range(1, 8))
    assert iiwa.merged_fixed == (("iiwa_link_ee", "iiwa_joint_ee", "iiwa_link_7"),)


def test_spatial_mm_is_matmul_summed_in_one_fixed_order():
    """rbdgen.spatial.mm (every product whose numbers can reach a generated file, issue 38):
    NumPy's matmul shapes and values, and bit for bit the left-to-right sum of products in
    plain float arithmetic (the order that makes it the same on every machine)."""
    from rbdgen import spatial as sp

    rng = np.random.default_rng(7)
    for sa, sb in [((3, 3), (3, 3)), ((6, 6), (6,)), ((6,), (6, 6)), ((6,), (6,)), ((4, 6, 6), (6, 6)),
                   ((5, 2, 3), (5, 3, 4)), ((7,), (2, 7, 3)), ((6, 0), (0,)), ((0, 6), (6, 2))]:
        A, B = rng.normal(size=sa), rng.normal(size=sb)
        got, want = sp.mm(A, B), A @ B
        assert np.shape(got) == np.shape(want), (sa, sb)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)
    A, B = rng.normal(size=(6, 6)), rng.normal(size=(6, 5))

    def ordered(i, j):
        s = float(A[i, 0]) * float(B[0, j])
        for k in range(1, 6):
            s = s + float(A[i, k]) * float(B[k, j])
        return s

    assert np.array_equal(sp.mm(A, B), [[ordered(i, j) for j in range(5)] for i in range(6)])
    # a long inner size (where NumPy's own sums go pairwise, in blocks of 8), matrix times vector,
    # and signed zeros: the same bits as the left-to-right sum, the sign of a zero sum included
    for m, k in ((3, 40), (6, 6), (1, 9)):
        A, x = rng.normal(size=(m, k)) * np.exp(rng.normal(size=(m, k)) * 8), rng.normal(size=k)
        A[:, ::3] = -0.0
        want = []
        for i in range(m):
            s = float(A[i, 0]) * float(x[0])
            for j in range(1, k):
                s = s + float(A[i, j]) * float(x[j])
            want.append(s)
        assert sp.mm(A, x).tobytes() == np.array(want).tobytes(), (m, k)
    assert np.signbit(sp.mm(-np.zeros((2, 3)), np.ones(3))).all()
    x = rng.normal(size=(5, 4))
    assert np.array_equal(sp.norm(x), [math.sqrt(((a * a + b * b) + c * c) + d * d) for a, b, c, d in x.tolist()])
    assert sp.norm([3.0, 4.0]) == 5.0 and isinstance(sp.norm([3.0, 4.0]), float)
    assert math.isclose(sp.norm([3e200, 4e200, 0.0]), 5e200, rel_tol=1e-15)  # scaled: no overflow
    assert math.isclose(sp.norm([3e-200, 4e-200]), 5e-200, rel_tol=1e-15)  # nor underflow

    with pytest.raises(ValueError, match="do not match"):
        sp.mm(np.ones((3, 2)), np.ones(3))


def test_huge_axis_is_normalised_not_zeroed(tmp_path):
    """An axis written with huge components is the unit vector along it (its norm used to
    overflow to inf, and the axis became (0, 0, 0) without a word)."""
    p = tmp_path / "a.urdf"
    p.write_text('<robot name="r"><link name="a"/><link name="b"><inertial><mass value="1"/>'
                 '<inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>'
                 '<joint name="j" type="revolute"><parent link="a"/><child link="b"/>'
                 '<axis xyz="0 3e307 4e307"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>')
    np.testing.assert_allclose(rbdgen.load_urdf(p).axis[0], [0.0, 0.6, 0.8], rtol=1e-15)
