"""URDFs of closed mechanisms (issue 42): each is a tree whose loop closes through an
:class:`rbdgen.Loop` between two of its links. The tests and docs/examples/loop_sim.py use them.

>>> from rbdgen.robots import closed
>>> import rbdgen
>>> model = rbdgen.load_urdf(closed.write(closed.four_bar(), "four_bar.urdf"))   # doctest: +SKIP
>>> kern = rbdgen.build(model, constraints=[rbdgen.Loop("coupler_tip", "rocker_tip", "3d")])  # doctest: +SKIP


* ``four_bar``: a planar four-bar linkage (crank, coupler, rocker; every joint about z). The
  loop joins the coupler's tip to the rocker's tip, a revolute joint about z: ``Loop(.., "3d")``
  (its out-of-plane row is redundant: a planar mechanism never moves along z).
* ``two_arms``: two 4-joint arms on one base whose tips hold one object: ``Loop(.., "3d")`` (a
  ball joint between the tips: 5 degrees of freedom left) or ``"6d"`` (welded: 2 left).

Masses and lengths are plain numbers chosen for the tests (no real robot).
"""
from __future__ import annotations

import math
from pathlib import Path


def _inertial(m, com, ixx, iyy, izz):
    return (f'<inertial><origin xyz="{com[0]} {com[1]} {com[2]}" rpy="0 0 0"/><mass value="{m}"/>'
            f'<inertia ixx="{ixx}" ixy="0" ixz="0" iyy="{iyy}" iyz="0" izz="{izz}"/></inertial>')


def _bar(name, length, mass):
    """A slender bar along its link's x axis (rod inertia about its centre, plus a small radius)."""
    i = mass * length ** 2 / 12.0
    return f'<link name="{name}">{_inertial(mass, (length / 2, 0, 0), 1e-3 * mass, i, i)}</link>'


def _rev(name, parent, child, xyz, axis="0 0 1", rpy="0 0 0"):
    return (f'<joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="{axis}"/>'
            f'<limit lower="-10" upper="10" effort="100" velocity="10"/></joint>')


def _fixed(name, parent, child, xyz):
    return (f'<joint name="{name}" type="fixed"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="0 0 0"/></joint><link name="{child}"/>')


#: the four-bar's lengths: ground (between the two pivots), crank, coupler, rocker
FOUR_BAR = dict(ground=2.0, crank=1.0, coupler=2.2, rocker=1.5)


def four_bar() -> str:
    L = FOUR_BAR
    return ("<robot name='four_bar'><link name='ground'/>"
            + _rev("crank_joint", "ground", "crank", "0 0 0") + _bar("crank", L["crank"], 1.0)
            + _rev("coupler_joint", "crank", "coupler", f"{L['crank']} 0 0") + _bar("coupler", L["coupler"], 2.0)
            + _fixed("coupler_tip_joint", "coupler", "coupler_tip", f"{L['coupler']} 0 0")
            + _rev("rocker_joint", "ground", "rocker", f"{L['ground']} 0 0") + _bar("rocker", L["rocker"], 1.5)
            + _fixed("rocker_tip_joint", "rocker", "rocker_tip", f"{L['rocker']} 0 0")
            + "</robot>")


def four_bar_closed(crank: float) -> tuple[float, float, float]:
    """Joint angles (crank, coupler, rocker) that close the four-bar at crank angle ``crank``
    (the elbow-up branch): the coupler's tip on the rocker's tip."""
    L = FOUR_BAR
    ax, ay = L["crank"] * math.cos(crank), L["crank"] * math.sin(crank)  # the crank's tip
    dx, dy = L["ground"] - ax, -ay
    d = math.hypot(dx, dy)
    # the angle at the crank's tip between (rocker pivot − crank tip) and the coupler
    c = (L["coupler"] ** 2 + d * d - L["rocker"] ** 2) / (2 * L["coupler"] * d)
    phi = math.atan2(dy, dx) + math.acos(c)                   # the coupler's world angle
    px, py = ax + L["coupler"] * math.cos(phi), ay + L["coupler"] * math.sin(phi)
    psi = math.atan2(py, px - L["ground"])                     # the rocker's world angle
    return crank, phi - crank, psi


def two_arms() -> str:
    """Two 4-joint arms (yaw, pitch, pitch, roll) 0.8 apart on one base, reaching towards each other."""
    parts = ["<robot name='two_arms'><link name='base'/>"]
    for side, y, yaw in (("left", 0.4, -math.pi / 2), ("right", -0.4, math.pi / 2)):
        parts += [_rev(f"{side}_yaw", "base", f"{side}_shoulder", f"0 {y} 0.3", rpy=f"0 0 {yaw}"),
                  f'<link name="{side}_shoulder">{_inertial(1.0, (0, 0, 0.05), 0.01, 0.01, 0.005)}</link>',
                  _rev(f"{side}_pitch1", f"{side}_shoulder", f"{side}_upper", "0 0 0.1", axis="0 1 0"),
                  _bar(f"{side}_upper", 0.5, 1.2),
                  _rev(f"{side}_pitch2", f"{side}_upper", f"{side}_fore", "0.5 0 0", axis="0 1 0"),
                  _bar(f"{side}_fore", 0.4, 0.8),
                  _rev(f"{side}_roll", f"{side}_fore", f"{side}_hand", "0.4 0 0", axis="1 0 0"),
                  f'<link name="{side}_hand">{_inertial(0.3, (0.05, 0, 0), 0.002, 0.003, 0.003)}</link>',
                  _fixed(f"{side}_tip_joint", f"{side}_hand", f"{side}_tip", "0.1 0 0")]
    parts.append("</robot>")
    return "".join(parts)


def write(text: str, path) -> str:
    """Write a URDF text to ``path``; returns the path as a string (for :func:`rbdgen.load_urdf`)."""
    Path(path).write_text(text, encoding="utf-8")
    return str(path)
