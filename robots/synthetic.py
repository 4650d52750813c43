"""Synthetic robots for scaling studies.

:func:`chain_urdf` builds a serial chain and :func:`tree_urdf` a branched
tree with a requested number of movable joints.  Both return URDF text.

The output is a pure function of the arguments: the same arguments give a
byte-identical string.  Randomness comes from :class:`random.Random` seeded
with ``seed``, and floats are written with ``repr`` (shortest round-trip
form), so a parser recovers exactly the values that were generated.

What the generated robots exercise:

* joint axes cycling through aligned (``x``, ``y``, ``z``, ``-z``) and
  general non-axis-aligned unit vectors (a ``planar`` joint's normal is its
  frame's z, as Pinocchio's; its plane turns with the joint's origin);
* joint origins with non-zero translation and a mix of identity, exact
  quarter/half-turn rotations (e.g. ``rpy="0 0 1.5707963267948966"``) and
  generic rotations;
* physically valid inertials: mass in [0.1, 5] kg, an offset centre of mass,
  and a full (rotated) inertia tensor whose principal moments satisfy the
  triangle inequality strictly;
* fixed joints: with ``fixed_every=k`` (default 3) a small link is attached
  by a fixed joint after every k-th movable link.  In a chain it sits in
  series (the next movable joint hangs from it); in a tree it becomes an
  ordinary candidate parent.  Every other fixed link is massless (no
  ``<inertial>``).

Naming: root link ``base``; movable joints ``j0`` .. ``j{n-1}`` with child
links ``l0`` .. ``l{n-1}`` (a joint's index is its creation order, so parents
always precede children); fixed joints ``jf0``, ``jf1``, ... with child
links ``lf0``, ``lf1``, ...
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence

__all__ = ["JOINT_TYPES", "chain_urdf", "tree_urdf"]

#: Movable joint types the generators can emit. A ``planar`` joint moves in its frame's x-y plane
#: (``<axis xyz="0 0 1"/>``, Pinocchio's JointModelPlanar); its frame is placed like any other
#: joint's (generic rotations included), so the plane is general. URDF has no ball joint: build
#: spherical joints with :class:`rbdgen.ModelBuilder`.
JOINT_TYPES: tuple[str, ...] = ("revolute", "continuous", "prismatic", "planar")

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")
_HALF_PI = math.pi / 2


# --------------------------------------------------------------------------
# argument checking


def _check_int(value, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} must be an int >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{what} must be an int >= {minimum}, got {value!r}")
    return value


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    return seed


def _check_joint_types(joint_types) -> tuple[str, ...]:
    if isinstance(joint_types, str):
        joint_types = (joint_types,)
    if not isinstance(joint_types, Sequence):
        raise ValueError(
            f"joint_types must be a sequence of joint type names, got {joint_types!r}"
        )
    types = tuple(joint_types)
    if not types:
        raise ValueError(
            f"joint_types must not be empty; choose from {', '.join(JOINT_TYPES)}"
        )
    for t in types:
        if t not in JOINT_TYPES:
            raise ValueError(
                f"unknown joint type {t!r}; known types: {', '.join(JOINT_TYPES)}"
            )
    return types


def _check_name(name, default: str) -> str:
    if name is None:
        return default
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(
            "name must be a non-empty string of letters, digits, '_', '.' or '-' "
            f"starting with a letter or '_', got {name!r}"
        )
    return name


def _check_fixed_every(fixed_every) -> int:
    if fixed_every is None:
        return 0
    return _check_int(fixed_every, "fixed_every", 0)


# --------------------------------------------------------------------------
# number formatting and small linear algebra (pure Python, deterministic)


def _f(x: float) -> str:
    x = float(x)
    if x == 0.0:
        return "0"  # also folds -0.0
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def _vec(v: Sequence[float]) -> str:
    return " ".join(_f(x) for x in v)


def _quat_to_matrix(w: float, x: float, y: float, z: float) -> list[list[float]]:
    return [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]


def _sum(terms) -> float:
    """Left-to-right float sum: the same bits on every Python. (``sum()`` of floats is compensated
    from Python 3.12 on, so it rounds differently from 3.11's: the same seed then gave another
    robot, and another generated kernel, on a machine with a newer Python.)"""
    acc = 0.0
    for t in terms:
        acc += t
    return acc


def _random_rotation(rng: random.Random) -> list[list[float]]:
    # Shoemake's uniform random unit quaternion.
    u1, u2, u3 = rng.random(), rng.random(), rng.random()
    a, b = math.sqrt(1 - u1), math.sqrt(u1)
    t2, t3 = 2 * math.pi * u2, 2 * math.pi * u3
    return _quat_to_matrix(b * math.cos(t3), a * math.sin(t2), a * math.cos(t2), b * math.sin(t3))


def _random_unit_vector(rng: random.Random) -> list[float]:
    # Reject near-axis-aligned results so "general" axes really are general.
    while True:
        v = [rng.gauss(0.0, 1.0) for _ in range(3)]
        norm = math.sqrt(_sum(c * c for c in v))
        if norm < 1e-3:
            continue
        v = [c / norm for c in v]
        if max(abs(c) for c in v) < 0.95:
            return v


# --------------------------------------------------------------------------
# element generators


def _inertial_xml(rng: random.Random, mass_range: tuple[float, float], com_scale: float) -> str:
    mass = rng.uniform(*mass_range)
    com = [rng.uniform(-com_scale, com_scale) for _ in range(3)]
    # Principal second moments of the mass distribution, s_k = m <r_k^2>;
    # principal moments of inertia I1 = s2 + s3, I2 = s1 + s3, I3 = s1 + s2
    # then satisfy the triangle inequality strictly for s_k > 0.
    s = [mass * rng.uniform(5e-4, 2.5e-2) for _ in range(3)]
    principal = [s[1] + s[2], s[0] + s[2], s[0] + s[1]]
    R = _random_rotation(rng)
    inertia = [
        [_sum(R[i][k] * principal[k] * R[j][k] for k in range(3)) for j in range(3)]
        for i in range(3)
    ]
    return (
        "    <inertial>\n"
        f'      <origin xyz="{_vec(com)}" rpy="0 0 0"/>\n'
        f'      <mass value="{_f(mass)}"/>\n'
        f'      <inertia ixx="{_f(inertia[0][0])}" ixy="{_f(inertia[0][1])}" '
        f'ixz="{_f(inertia[0][2])}" iyy="{_f(inertia[1][1])}" '
        f'iyz="{_f(inertia[1][2])}" izz="{_f(inertia[2][2])}"/>\n'
        "    </inertial>\n"
    )


def _link_xml(name: str, inertial: str | None) -> str:
    if inertial is None:
        return f'  <link name="{name}"/>\n'
    return f'  <link name="{name}">\n{inertial}  </link>\n'


def _origin_xyz(rng: random.Random) -> list[float]:
    while True:
        xyz = [rng.uniform(-0.3, 0.3) for _ in range(3)]
        if math.sqrt(_sum(c * c for c in xyz)) > 0.05:
            return xyz


def _origin_rpy(rng: random.Random, index: int) -> list[float]:
    kind = index % 3
    if kind == 0:
        # Exact quarter / half turn about one axis.
        rpy = [0.0, 0.0, 0.0]
        rpy[rng.randrange(3)] = rng.choice((_HALF_PI, -_HALF_PI, math.pi))
        return rpy
    if kind == 1:
        return [rng.uniform(-math.pi, math.pi) for _ in range(3)]
    return [0.0, 0.0, 0.0]


_ALIGNED_AXES = {
    0: [0.0, 0.0, 1.0],
    1: [1.0, 0.0, 0.0],
    3: [0.0, 1.0, 0.0],
    4: [0.0, 0.0, -1.0],
}


def _axis(rng: random.Random, index: int) -> list[float]:
    # Cycle of five: z, x, general, y, -z.
    return _ALIGNED_AXES.get(index % 5) or _random_unit_vector(rng)


def _movable_joint_xml(rng: random.Random, index: int, jtype: str, parent: str, child: str) -> str:
    xyz = _origin_xyz(rng)
    rpy = _origin_rpy(rng, index)
    axis = _axis(rng, index)  # drawn for every type: the other joints' numbers do not depend on the types
    if jtype == "planar":
        axis = [0.0, 0.0, 1.0]  # the plane's normal: the joint frame's z
    lines = [
        f'  <joint name="j{index}" type="{jtype}">',
        f'    <parent link="{parent}"/>',
        f'    <child link="{child}"/>',
        f'    <origin xyz="{_vec(xyz)}" rpy="{_vec(rpy)}"/>',
        f'    <axis xyz="{_vec(axis)}"/>',
    ]
    effort = rng.uniform(10.0, 200.0)
    if jtype == "revolute":
        lower, upper = -rng.uniform(0.5, math.pi), rng.uniform(0.5, math.pi)
        velocity = rng.uniform(1.0, 10.0)
        lines.append(
            f'    <limit lower="{_f(lower)}" upper="{_f(upper)}" '
            f'effort="{_f(effort)}" velocity="{_f(velocity)}"/>'
        )
    elif jtype == "prismatic":
        lower, upper = -rng.uniform(0.05, 0.5), rng.uniform(0.05, 0.5)
        velocity = rng.uniform(0.2, 2.0)
        lines.append(
            f'    <limit lower="{_f(lower)}" upper="{_f(upper)}" '
            f'effort="{_f(effort)}" velocity="{_f(velocity)}"/>'
        )
    lines.append("  </joint>")
    return "\n".join(lines) + "\n"


def _fixed_joint_xml(rng: random.Random, index: int, parent: str, child: str) -> str:
    xyz = [rng.uniform(-0.1, 0.1) for _ in range(3)]
    rpy = _origin_rpy(rng, index + 1)  # cycles generic / identity / aligned
    return (
        f'  <joint name="jf{index}" type="fixed">\n'
        f'    <parent link="{parent}"/>\n'
        f'    <child link="{child}"/>\n'
        f'    <origin xyz="{_vec(xyz)}" rpy="{_vec(rpy)}"/>\n'
        "  </joint>\n"
    )


def _fixed_link_inertial(rng: random.Random, index: int) -> str | None:
    # Every other fixed link is massless, the rest carry a small mass.
    if index % 2 == 1:
        return None
    return _inertial_xml(rng, (0.01, 0.2), 0.03)


def _header(name: str, description: str) -> str:
    return (
        '<?xml version="1.0"?>\n'
        f"<!-- Synthetic robot generated by rbdgen.robots.synthetic: {description} -->\n"
        f'<robot name="{name}">\n'
    )


# --------------------------------------------------------------------------
# public API


def chain_urdf(
    n: int,
    *,
    seed: int = 0,
    joint_types: Sequence[str] = ("revolute",),
    name: str | None = None,
    fixed_every: int | None = 3,
) -> str:
    """URDF text of a serial chain with ``n`` movable joints.

    Movable joint ``j{i}`` has type ``joint_types[i % len(joint_types)]``.
    With ``fixed_every=k > 0`` a fixed joint and a small link are inserted
    in series after every k-th movable link (``0`` or ``None``: none).
    """
    n = _check_int(n, "n", 1)
    seed = _check_seed(seed)
    types = _check_joint_types(joint_types)
    fixed_every = _check_fixed_every(fixed_every)
    name = _check_name(name, f"synthetic_chain_n{n}_s{seed}")

    rng = random.Random(seed)
    parts = [_header(name, f"serial chain, n={n}, seed={seed}, joint_types={','.join(types)}")]
    parts.append(_link_xml("base", _inertial_xml(rng, (0.1, 5.0), 0.1)))
    parent = "base"
    n_fixed = 0
    for i in range(n):
        child = f"l{i}"
        parts.append(_movable_joint_xml(rng, i, types[i % len(types)], parent, child))
        parts.append(_link_xml(child, _inertial_xml(rng, (0.1, 5.0), 0.1)))
        parent = child
        if fixed_every and (i + 1) % fixed_every == 0:
            fchild = f"lf{n_fixed}"
            parts.append(_fixed_joint_xml(rng, n_fixed, parent, fchild))
            parts.append(_link_xml(fchild, _fixed_link_inertial(rng, n_fixed)))
            parent = fchild
            n_fixed += 1
    parts.append("</robot>\n")
    return "".join(parts)


def tree_urdf(
    n: int,
    *,
    branching: int = 2,
    seed: int = 0,
    joint_types: Sequence[str] = ("revolute",),
    name: str | None = None,
    fixed_every: int | None = 3,
) -> str:
    """URDF text of a branched tree with ``n`` movable joints.

    Each new movable link is attached to a link chosen at random (from
    ``seed``) among the existing links that have fewer than ``branching``
    children, fixed children included; ``branching=1`` gives a chain.
    Movable joint ``j{i}`` has type ``joint_types[i % len(joint_types)]``.
    With ``fixed_every=k > 0`` a small link is attached by a fixed joint to
    every k-th movable link (``0`` or ``None``: none); it may later become a
    parent itself.
    """
    n = _check_int(n, "n", 1)
    branching = _check_int(branching, "branching", 1)
    seed = _check_seed(seed)
    types = _check_joint_types(joint_types)
    fixed_every = _check_fixed_every(fixed_every)
    name = _check_name(name, f"synthetic_tree_n{n}_b{branching}_s{seed}")

    rng = random.Random(seed)
    parts = [
        _header(
            name,
            f"branched tree, n={n}, branching={branching}, seed={seed}, "
            f"joint_types={','.join(types)}",
        )
    ]
    parts.append(_link_xml("base", _inertial_xml(rng, (0.1, 5.0), 0.1)))
    # Links in creation order with their child counts; the newest link
    # always has no children, so a free parent slot always exists.
    links = ["base"]
    children = {"base": 0}
    n_fixed = 0
    for i in range(n):
        candidates = [lk for lk in links if children[lk] < branching]
        parent = candidates[rng.randrange(len(candidates))]
        child = f"l{i}"
        parts.append(_movable_joint_xml(rng, i, types[i % len(types)], parent, child))
        parts.append(_link_xml(child, _inertial_xml(rng, (0.1, 5.0), 0.1)))
        children[parent] += 1
        links.append(child)
        children[child] = 0
        if fixed_every and (i + 1) % fixed_every == 0:
            fchild = f"lf{n_fixed}"
            parts.append(_fixed_joint_xml(rng, n_fixed, child, fchild))
            parts.append(_link_xml(fchild, _fixed_link_inertial(rng, n_fixed)))
            children[child] += 1
            links.append(fchild)
            children[fchild] = 0
            n_fixed += 1
    parts.append("</robot>\n")
    return "".join(parts)
