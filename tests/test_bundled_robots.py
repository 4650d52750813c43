"""Bundled URDFs and synthetic robot generators (rbdgen.robots).

These checks use only numpy and xml.etree, independently of rbdgen's own
URDF loader: well-formed XML, unique names, a single-rooted tree, physically
valid inertials, and the published kinematics of the bundled arm.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import rbdgen.robots as robots
from rbdgen.robots import synthetic

MOVABLE = ("revolute", "continuous", "prismatic")


# ---------------------------------------------------------------------------
# helpers


def _floats(text: str | None, default: str = "0 0 0") -> np.ndarray:
    return np.array([float(t) for t in (text if text is not None else default).split()])


def _rpy_matrix(rpy: np.ndarray) -> np.ndarray:
    r, p, y = rpy
    rx = np.array([[1, 0, 0], [0, math.cos(r), -math.sin(r)], [0, math.sin(r), math.cos(r)]])
    ry = np.array([[math.cos(p), 0, math.sin(p)], [0, 1, 0], [-math.sin(p), 0, math.cos(p)]])
    rz = np.array([[math.cos(y), -math.sin(y), 0], [math.sin(y), math.cos(y), 0], [0, 0, 1]])
    return rz @ ry @ rx


def _parse(text: str):
    root = ET.fromstring(text)
    assert root.tag == "robot"
    links = root.findall("link")
    joints = root.findall("joint")
    return root, links, joints


def _inertia_matrix(inertial: ET.Element) -> np.ndarray:
    el = inertial.find("inertia")
    assert el is not None, "inertial without <inertia>"
    g = {k: float(el.get(k, "0")) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
    return np.array(
        [
            [g["ixx"], g["ixy"], g["ixz"]],
            [g["ixy"], g["iyy"], g["iyz"]],
            [g["ixz"], g["iyz"], g["izz"]],
        ]
    )


def _tree(links, joints):
    """(root name, parent-of map, children map); asserts the structure is a tree."""
    link_names = [lk.get("name") for lk in links]
    parent_of: dict[str, str] = {}
    children: dict[str, list[str]] = {n: [] for n in link_names}
    for j in joints:
        parent = j.find("parent").get("link")
        child = j.find("child").get("link")
        assert parent in children, f"joint {j.get('name')}: unknown parent link {parent}"
        assert child in children, f"joint {j.get('name')}: unknown child link {child}"
        assert child not in parent_of, f"link {child} has more than one parent joint"
        parent_of[child] = parent
        children[parent].append(child)
    roots = [n for n in link_names if n not in parent_of]
    assert len(roots) == 1, f"expected exactly one root link, got {roots}"
    # every link reachable from the root, no cycles
    seen: set[str] = set()
    stack = [roots[0]]
    while stack:
        n = stack.pop()
        assert n not in seen, f"cycle through link {n}"
        seen.add(n)
        stack.extend(children[n])
    assert seen == set(link_names), f"links not connected to the root: {set(link_names) - seen}"
    return roots[0], parent_of, children


def _check_urdf_text(text: str) -> None:
    """Generic validity checks shared by bundled and synthetic robots."""
    _, links, joints = _parse(text)
    link_names = [lk.get("name") for lk in links]
    joint_names = [j.get("name") for j in joints]
    assert all(link_names) and all(joint_names)
    assert len(set(link_names)) == len(link_names), "duplicate link names"
    assert len(set(joint_names)) == len(joint_names), "duplicate joint names"
    _tree(links, joints)

    for lk in links:
        inertial = lk.find("inertial")
        if inertial is None:
            continue
        mass = float(inertial.find("mass").get("value"))
        assert mass > 0, f"link {lk.get('name')}: mass {mass}"
        inertia = _inertia_matrix(inertial)
        eig = np.linalg.eigvalsh(inertia)
        assert eig[0] > 0, f"link {lk.get('name')}: inertia not positive definite {eig}"
        # principal moments: largest <= sum of the other two
        assert eig[2] <= eig[0] + eig[1] + 1e-12 * eig[2], (
            f"link {lk.get('name')}: triangle inequality violated {eig}"
        )
        origin = inertial.find("origin")
        if origin is not None:
            assert np.all(np.isfinite(_floats(origin.get("xyz"))))

    for j in joints:
        jtype = j.get("type")
        assert jtype in MOVABLE + ("fixed",), f"joint {j.get('name')}: type {jtype}"
        origin = j.find("origin")
        if origin is not None:
            assert np.all(np.isfinite(_floats(origin.get("xyz"))))
            assert np.all(np.isfinite(_floats(origin.get("rpy"))))
        if jtype in MOVABLE:
            axis = _floats(j.find("axis").get("xyz"), "1 0 0")
            assert abs(np.linalg.norm(axis) - 1.0) < 1e-9, f"joint {j.get('name')}: axis {axis}"
        if jtype in ("revolute", "prismatic"):
            lim = j.find("limit")
            assert lim is not None, f"joint {j.get('name')}: missing <limit>"
            assert float(lim.get("lower")) < float(lim.get("upper"))
            assert float(lim.get("effort")) > 0
            assert float(lim.get("velocity")) > 0


def _movable(joints):
    return [j for j in joints if j.get("type") in MOVABLE]


# ---------------------------------------------------------------------------
# bundled robots


def test_names_and_paths():
    names = robots.names()
    assert names == sorted(names)
    assert {"iiwa14", "quadruped"} <= set(names)
    for name in names:
        p = robots.path(name)
        assert p.is_file() and p.suffix == ".urdf" and p.stem == name


def test_unknown_name_lists_available():
    with pytest.raises(KeyError) as info:
        robots.path("no_such_robot")
    msg = str(info.value)
    assert "no_such_robot" in msg
    for name in robots.names():
        assert name in msg


def test_reexports():
    assert robots.chain_urdf is synthetic.chain_urdf
    assert robots.tree_urdf is synthetic.tree_urdf


@pytest.mark.parametrize("name", robots.names())
def test_bundled_urdf_valid(name):
    _check_urdf_text(robots.path(name).read_text())


def test_iiwa14_structure_and_limits():
    _, links, joints = _parse(robots.path("iiwa14").read_text())
    root, _, _ = _tree(links, joints)
    assert root == "iiwa_link_0"
    mov = _movable(joints)
    assert [j.get("type") for j in mov] == ["revolute"] * 7
    for j in mov:
        assert _floats(j.find("axis").get("xyz")).tolist() == [0.0, 0.0, 1.0]
    deg = [170, 120, 170, 120, 170, 120, 175]
    vel = [85, 85, 100, 75, 130, 135, 135]
    for j, d, v in zip(mov, deg, vel):
        lim = j.find("limit")
        assert float(lim.get("lower")) == pytest.approx(-math.radians(d))
        assert float(lim.get("upper")) == pytest.approx(math.radians(d))
        assert float(lim.get("velocity")) == pytest.approx(math.radians(v))
    fixed = [j for j in joints if j.get("type") == "fixed"]
    assert [j.find("child").get("link") for j in fixed] == ["iiwa_link_ee"]
    ee = next(lk for lk in links if lk.get("name") == "iiwa_link_ee")
    assert ee.find("inertial") is None
    masses = [float(lk.find("inertial/mass").get("value")) for lk in links if lk.find("inertial") is not None]
    assert 20.0 < sum(masses) < 35.0  # datasheet weight of the iiwa 14 is about 30 kg


def test_iiwa14_zero_configuration_kinematics():
    """At q = 0 the arm points straight up: flange at 0.36 + 0.42 + 0.40 + 0.126 m."""
    _, _, joints = _parse(robots.path("iiwa14").read_text())
    rot, pos = np.eye(3), np.zeros(3)
    axis_points = []
    for j in joints:  # file order is the chain order
        o = j.find("origin")
        pos = pos + rot @ _floats(o.get("xyz"))
        rot = rot @ _rpy_matrix(_floats(o.get("rpy")))
        axis_points.append(pos.copy())
    np.testing.assert_allclose(pos, [0, 0, 1.306], atol=1e-12)
    # J2, J4, J6 axes sit at 0.36, 0.78, 1.18 m
    np.testing.assert_allclose([axis_points[i][2] for i in (1, 3, 5)], [0.36, 0.78, 1.18], atol=1e-12)
    np.testing.assert_allclose(axis_points[0], [0, 0, 0.1575], atol=1e-12)


def test_quadruped_structure():
    _, links, joints = _parse(robots.path("quadruped").read_text())
    root, parent_of, children = _tree(links, joints)
    assert root == "trunk"
    assert len(children["trunk"]) == 4
    mov = _movable(joints)
    assert len(mov) == 12 and all(j.get("type") == "revolute" for j in mov)
    axes = [tuple(_floats(j.find("axis").get("xyz"))) for j in mov]
    assert axes.count((1.0, 0.0, 0.0)) == 4  # hip abduction
    assert axes.count((0.0, 1.0, 0.0)) == 8  # hip flexion + knee
    fixed = [j for j in joints if j.get("type") == "fixed"]
    assert len(fixed) == 4
    by_name = {lk.get("name"): lk for lk in links}
    for j in fixed:
        foot = by_name[j.find("child").get("link")]
        assert float(foot.find("inertial/mass").get("value")) > 0
        assert not children[foot.get("name")]
    mass = {n: float(lk.find("inertial/mass").get("value")) for n, lk in by_name.items()}
    assert 6.0 <= mass["trunk"] <= 12.0
    assert 10.0 < sum(mass.values()) < 30.0


# ---------------------------------------------------------------------------
# synthetic generators


SYNTH_CASES = [
    ("chain", dict(n=1)),
    ("chain", dict(n=7, seed=3)),
    ("chain", dict(n=25, seed=1, joint_types=("revolute", "prismatic", "continuous"))),
    ("chain", dict(n=10, fixed_every=0)),
    ("tree", dict(n=1)),
    ("tree", dict(n=15, seed=2)),
    ("tree", dict(n=40, branching=3, seed=5, joint_types=("prismatic", "revolute"))),
    ("tree", dict(n=12, branching=1, seed=4)),
]


def _gen(kind, kwargs):
    return (synthetic.chain_urdf if kind == "chain" else synthetic.tree_urdf)(**kwargs)


@pytest.mark.parametrize("kind,kwargs", SYNTH_CASES)
def test_synthetic_valid(kind, kwargs):
    text = _gen(kind, kwargs)
    _check_urdf_text(text)
    root_el, links, joints = _parse(text)
    root, _, children = _tree(links, joints)
    assert root == "base"
    mov = _movable(joints)
    n = kwargs["n"]
    assert [j.get("name") for j in mov] == [f"j{i}" for i in range(n)]
    types = kwargs.get("joint_types", ("revolute",))
    assert [j.get("type") for j in mov] == [types[i % len(types)] for i in range(n)]
    for lk in links:
        inertial = lk.find("inertial")
        if inertial is not None:
            el = inertial.find("inertia")
            assert all(el.get(k) is not None for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
            if not lk.get("name").startswith("lf"):  # base and l<i>; fixed links are lighter
                assert 0.1 <= float(inertial.find("mass").get("value")) <= 5.0
    max_children = 1 if kind == "chain" else kwargs.get("branching", 2)
    assert max(len(c) for c in children.values()) <= max_children
    if "name" not in kwargs:
        assert root_el.get("name").startswith(f"synthetic_{kind}")


@pytest.mark.parametrize("kind,kwargs", SYNTH_CASES)
def test_synthetic_deterministic(kind, kwargs):
    assert _gen(kind, kwargs) == _gen(kind, dict(kwargs))


def test_synthetic_seed_changes_output():
    assert synthetic.chain_urdf(6, seed=0) != synthetic.chain_urdf(6, seed=1)
    assert synthetic.tree_urdf(6, seed=0) != synthetic.tree_urdf(6, seed=1)


def test_synthetic_name():
    root, _, _ = _parse(synthetic.chain_urdf(3, name="my_bot"))
    assert root.get("name") == "my_bot"
    root, _, _ = _parse(synthetic.tree_urdf(3, name="tree-2.b"))
    assert root.get("name") == "tree-2.b"


def test_synthetic_feature_mix():
    """Enough joints to see every axis / rotation / fixed-link flavour."""
    _, links, joints = _parse(synthetic.chain_urdf(30, seed=0))
    mov = _movable(joints)
    axes = [_floats(j.find("axis").get("xyz")) for j in mov]
    aligned = [a for a in axes if np.count_nonzero(a) == 1]
    general = [a for a in axes if np.count_nonzero(a) > 1]
    assert {tuple(a) for a in aligned} >= {(1, 0, 0), (0, 1, 0), (0, 0, 1)}
    assert len(general) >= 3
    rpys = [_floats(j.find("origin").get("rpy")) for j in joints]
    quarter = [r for r in rpys if np.count_nonzero(r) == 1 and np.allclose(np.abs(r).max() % (math.pi / 2), 0)]
    generic = [r for r in rpys if np.count_nonzero(r) == 3]
    assert quarter and generic
    assert any(repr(math.pi / 2) in j.find("origin").get("rpy") for j in joints)
    for j in joints:
        assert np.linalg.norm(_floats(j.find("origin").get("xyz"))) > 0
    fixed = [j for j in joints if j.get("type") == "fixed"]
    assert len(fixed) == 10
    fixed_children = {j.find("child").get("link") for j in fixed}
    massless = [lk for lk in links if lk.get("name") in fixed_children and lk.find("inertial") is None]
    massive = [lk for lk in links if lk.get("name") in fixed_children and lk.find("inertial") is not None]
    assert massless and massive
    # in a chain the fixed links sit in series: some movable joint hangs off them
    assert any(j.find("parent").get("link") in fixed_children for j in mov)


def test_synthetic_no_fixed():
    for text in (synthetic.chain_urdf(9, fixed_every=0), synthetic.tree_urdf(9, fixed_every=None)):
        _, _, joints = _parse(text)
        assert all(j.get("type") != "fixed" for j in joints)


def test_synthetic_tree_is_branched():
    _, links, joints = _parse(synthetic.tree_urdf(50, branching=3, seed=0))
    _, _, children = _tree(links, joints)
    assert max(len(c) for c in children.values()) == 3
    assert sum(1 for c in children.values() if not c) > 2  # several leaves


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(n=0),
        dict(n=-3),
        dict(n=2.0),
        dict(n=True),
        dict(n="4"),
        dict(n=3, joint_types=()),
        dict(n=3, joint_types=("ball",)),
        dict(n=3, joint_types=("revolute", "fixed")),
        dict(n=3, seed=1.5),
        dict(n=3, seed="0"),
        dict(n=3, name="has space"),
        dict(n=3, name=""),
        dict(n=3, name='quote"'),
        dict(n=3, fixed_every=-1),
    ],
)
@pytest.mark.parametrize("gen", [synthetic.chain_urdf, synthetic.tree_urdf])
def test_synthetic_rejects_bad_arguments(gen, kwargs):
    with pytest.raises(ValueError):
        gen(**kwargs)


@pytest.mark.parametrize("branching", [0, -1, 1.0, None])
def test_tree_rejects_bad_branching(branching):
    with pytest.raises(ValueError, match="branching"):
        synthetic.tree_urdf(4, branching=branching)


def test_joint_types_error_message_lists_known_types():
    with pytest.raises(ValueError) as info:
        synthetic.chain_urdf(2, joint_types=("spherical",))
    for t in synthetic.JOINT_TYPES:
        assert t in str(info.value)


def test_synthetic_robots_are_the_same_on_every_python(monkeypatch):
    """A seed names one robot on every Python: the URDF text must not depend on how the builtin
    ``sum`` rounds (compensated from Python 3.12 on). With ``sum`` replaced by the exactly rounded
    ``math.fsum`` the text stays the same. Before, the GPU machine's Python 3.12 made other
    chains than this 3.11 from the same seeds, and the seeds' prebuilt GPU libraries were not found."""
    texts = [synthetic.chain_urdf(8, seed=8, fixed_every=0), synthetic.tree_urdf(9, seed=3),
             synthetic.chain_urdf(5, seed=1, joint_types=("revolute", "prismatic"))]
    monkeypatch.setattr("builtins.sum", lambda it, start=0: start + math.fsum(it))
    assert [synthetic.chain_urdf(8, seed=8, fixed_every=0), synthetic.tree_urdf(9, seed=3),
            synthetic.chain_urdf(5, seed=1, joint_types=("revolute", "prismatic"))] == texts
