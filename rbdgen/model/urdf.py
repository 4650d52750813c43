"""Read a URDF file into plain records, checking everything a robot description can get wrong.

We use the standard library's XML parser rather than a URDF package: rbdgen needs the
kinematic tree and inertias only (never meshes), and needs to reject bad input with messages
that name the file, the element and the problem — which is most of the work either way.
"""
from __future__ import annotations

import math
import os
import stat
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import numpy as np

from .. import spatial as sp
from ..errors import UnsupportedError, URDFError

JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")


@dataclass
class Inertial:
    mass: float
    xyz: np.ndarray
    rpy: np.ndarray
    inertia: np.ndarray  # 3×3 about the COM, axes of the inertial frame


@dataclass
class Link:
    name: str
    inertial: Inertial | None
    line: int | None = None
    problem: str | None = None  # why its inertia is not physical, if it is not


@dataclass
class Joint:
    name: str
    type: str
    parent: str
    child: str
    xyz: np.ndarray
    rpy: np.ndarray
    axis: np.ndarray
    lower: float = math.nan
    upper: float = math.nan
    velocity: float = math.nan
    effort: float = math.nan
    mimic: tuple[str, float, float] | None = None  # (leader joint, multiplier, offset)
    line: int | None = None
    #: rotor inertia of each of the joint's DOFs: rbdgen's extension ``<dynamics armature="…"/>``
    armature: float = 0.0


@dataclass
class URDF:
    name: str
    path: str
    links: dict[str, Link] = field(default_factory=dict)
    joints: dict[str, Joint] = field(default_factory=dict)


#: magnitude bounds of the model's numbers. Generous for any machine (a robot is smaller than a
#: thousand kilometres and lighter than a million tonnes), and small enough that no product in a
#: kernel (lengths² × mass × velocity², …) overflows float64 or becomes an absurd constant in an
#: FPGA datapath. Angles are not bounded: any finite angle is taken as written.
MAX_LENGTH = 1e6      # m
MAX_MASS = 1e9        # kg
MAX_INERTIA = 1e12    # kg m²
#: a mimic joint's multiplier and offset (q_F = m·q_L + o; the offset is a length or an angle):
#: gear ratios are tens at most; a larger coupling would scale the contracted dynamics (GᵀMG, …)
#: beyond float64 long before any joint moves
MAX_MIMIC_MULTIPLIER = 1e6
MAX_MIMIC_OFFSET = MAX_LENGTH
#: a robot's name names the generated files (``rbd_<name>_<kernel>_f64.cpp``) and the package
#: folder, and a file name has at most 255 bytes on common file systems
MAX_NAME_LENGTH = 128


class _Reader:
    def __init__(self, path: str):
        self.path = path

    def fail(self, msg: str, cls=URDFError):
        raise cls(msg, file=self.path)

    def floats(self, el, attr: str, n: int, where: str, default=None, bound: tuple | None = None) -> np.ndarray:
        """``n`` finite numbers; ``bound=(limit, unit)`` also refuses magnitudes above limit."""
        text = el.get(attr) if el is not None else None
        if text is None:
            if default is None:
                self.fail(f"{where}: missing attribute '{attr}'")
            return np.array(default, dtype=float)
        parts = text.split()
        if len(parts) != n:
            self.fail(f"{where}: attribute {attr}=\"{text}\" must hold {n} number(s)")
        try:
            vals = np.array([float(p) for p in parts])
        except ValueError:
            self.fail(f"{where}: attribute {attr}=\"{text}\" is not a number")
        if not np.all(np.isfinite(vals)):
            self.fail(f"{where}: attribute {attr}=\"{text}\" is not finite (NaN or inf)")
        if bound is not None and np.any(np.abs(vals) > bound[0]):
            self.fail(f"{where}: attribute {attr}=\"{text}\" is out of range: magnitudes above {bound[0]:g} {bound[1]} "
                      f"are not a robot's (and would overflow the kernels' arithmetic)")
        return vals

    def scalar(self, el, attr: str, where: str, default=None, bound: tuple | None = None) -> float:
        return float(self.floats(el, attr, 1, where, None if default is None else [default], bound)[0])

    def one(self, el, tag: str, where: str):
        """The ``<tag>`` child of ``el``, or None; two or more are an error (a URDF element
        takes one: the second would be silently ignored)."""
        found = el.findall(tag)
        if len(found) > 1:
            self.fail(f"{where}: {len(found)} <{tag}> elements; it takes one (which one is meant?)")
        return found[0] if found else None

    def origin(self, el, where: str):
        o = self.one(el, "origin", where)
        if o is None:
            return np.zeros(3), np.zeros(3)
        return (
            self.floats(o, "xyz", 3, f"{where} <origin>", [0.0, 0.0, 0.0], (MAX_LENGTH, "m")),
            self.floats(o, "rpy", 3, f"{where} <origin>", [0.0, 0.0, 0.0]),
        )


def _line(el) -> int | None:
    return getattr(el, "sourceline", None)


def read_urdf(path) -> URDF:
    """Parse and check a URDF file. Raises :class:`URDFError` naming file, element and problem."""
    path = os.fspath(path)
    r = _Reader(path)
    if not os.path.exists(path):
        r.fail("no such file")
    if os.path.isdir(path):
        r.fail("is a directory, not a URDF file")
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        r.fail(f"cannot read file: {e.strerror or e}")
    if not stat.S_ISREG(mode):  # a FIFO or a device would block or never end
        r.fail("is not a regular file (a pipe, socket or device?); give the path of a URDF file")
    try:
        tree = ET.parse(path)
    except ET.ParseError as e:
        r.fail(f"malformed XML: {e}")
    except LookupError as e:  # <?xml encoding="..."?> names an encoding Python does not know
        r.fail(f"malformed XML: {' '.join(str(e).split())}")
    except (UnicodeError, ValueError) as e:
        r.fail(f"malformed XML: {' '.join(str(e).split())[:200]}")
    except OSError as e:
        r.fail(f"cannot read file: {e.strerror or e}")
    root = tree.getroot()
    if root.tag != "robot":
        r.fail(f"root element is <{root.tag}>, expected <robot>")
    robot_name = root.get("name") or os.path.splitext(os.path.basename(path))[0]
    if len(robot_name) > MAX_NAME_LENGTH:
        r.fail(f"<robot name=\"{robot_name[:24]}…\">: the name is {len(robot_name)} characters long, at most "
               f"{MAX_NAME_LENGTH} (it names the generated files and the package folder); shorten it")
    urdf = URDF(name=robot_name, path=path)

    for el in root.findall("link"):
        name = el.get("name")
        if not name:
            r.fail("<link> without a name")
        if name in urdf.links:
            r.fail(f"duplicate link name '{name}'")
        where = f"link '{name}'"
        inertial = None
        iel = r.one(el, "inertial", where)
        if iel is not None:
            xyz, rpy = r.origin(iel, f"{where} <inertial>")
            mel = r.one(iel, "mass", f"{where} <inertial>")
            if mel is None:
                r.fail(f"{where}: <inertial> has no <mass>")
            mass = r.scalar(mel, "value", f"{where} <mass>", bound=(MAX_MASS, "kg"))
            if mass < 0:
                r.fail(f"{where}: negative mass {mass:g}")
            tel = r.one(iel, "inertia", f"{where} <inertial>")
            if tel is None:
                r.fail(f"{where}: <inertial> has no <inertia>")
            c = {k: r.scalar(tel, k, f"{where} <inertia>", 0.0, (MAX_INERTIA, "kg m²"))
                 for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
            I = np.array(
                [[c["ixx"], c["ixy"], c["ixz"]], [c["ixy"], c["iyy"], c["iyz"]], [c["ixz"], c["iyz"], c["izz"]]]
            )
            inertial = Inertial(mass, xyz, rpy, I)
        problem = inertia_problem(inertial.mass, inertial.inertia) if inertial else None
        urdf.links[name] = Link(name, inertial, _line(el), problem)

    for el in root.findall("joint"):
        name = el.get("name")
        if not name:
            r.fail("<joint> without a name")
        if name in urdf.joints:
            r.fail(f"duplicate joint name '{name}'")
        where = f"joint '{name}'"
        jtype = el.get("type")
        if jtype is None:
            r.fail(f"{where}: missing attribute 'type'")
        if jtype not in JOINT_TYPES:
            r.fail(
                f"{where}: unknown joint type '{jtype}' (URDF knows {', '.join(JOINT_TYPES)})",
                UnsupportedError,
            )
        pel, cel = r.one(el, "parent", where), r.one(el, "child", where)
        if pel is None or pel.get("link") is None:
            r.fail(f"{where}: missing <parent link=...>")
        if cel is None or cel.get("link") is None:
            r.fail(f"{where}: missing <child link=...>")
        parent, child = pel.get("link"), cel.get("link")
        for role, ln in (("parent", parent), ("child", child)):
            if ln not in urdf.links:
                r.fail(f"{where}: {role} link '{ln}' is not defined")
        if parent == child:
            r.fail(f"{where}: parent and child are the same link '{parent}'")
        xyz, rpy = r.origin(el, where)
        axis = r.floats(r.one(el, "axis", where), "xyz", 3, f"{where} <axis>", [1.0, 0.0, 0.0])
        if jtype in ("revolute", "continuous", "prismatic"):
            n = sp.norm(axis)  # fixed-order sum: the unit axis is printed into generated code
            if n < 1e-12:
                r.fail(f"{where}: zero axis {tuple(float(a) for a in axis)}")
            axis = axis / n
        elif jtype == "planar":
            # Pinocchio's JointModelPlanar moves in its joint frame's x-y plane (normal z), and its
            # URDF parser does not read <axis>. rbdgen takes the same plane: without <axis> (whose
            # URDF default, x, Pinocchio ignores too) or with the normal along +z; another normal
            # is refused rather than ignored (turn the joint's <origin> so that z is the normal)
            if r.one(el, "axis", where) is not None:
                n = sp.norm(axis)
                if n < 1e-12 or np.max(np.abs(axis / n - (0.0, 0.0, 1.0))) > 1e-12:
                    r.fail(f"{where}: a planar joint moves in its frame's x-y plane (Pinocchio's convention), "
                           f"so its <axis> (the plane's normal) must be 0 0 1, not "
                           f"{' '.join(f'{a:g}' for a in axis)}; rotate the joint's <origin> so that its z axis "
                           f"is the normal", UnsupportedError)
            axis = np.array([0.0, 0.0, 1.0])
        j = Joint(name, jtype, parent, child, xyz, rpy, axis, line=_line(el))
        lim = r.one(el, "limit", where)
        if lim is not None:
            for k in ("lower", "upper", "velocity", "effort"):
                if lim.get(k) is not None:
                    # a prismatic joint's position limits are lengths: held to the bound of lengths
                    bound = (MAX_LENGTH, "m") if jtype == "prismatic" and k in ("lower", "upper") else None
                    setattr(j, k, r.scalar(lim, k, f"{where} <limit>", bound=bound))
            if jtype in ("revolute", "prismatic") and j.lower > j.upper:
                r.fail(f"{where}: <limit> lower {j.lower:g} > upper {j.upper:g}")
        dyn = r.one(el, "dynamics", where)
        if dyn is not None and dyn.get("armature") is not None:  # rbdgen's extension (urdfdom ignores it)
            j.armature = r.scalar(dyn, "armature", f"{where} <dynamics>", bound=(MAX_INERTIA, "kg m²"))
            if j.armature < 0:
                r.fail(f"{where}: negative armature {j.armature:g} (a rotor inertia is ≥ 0)")
        mim = r.one(el, "mimic", where)
        if mim is not None:
            leader = mim.get("joint")
            if not leader:
                r.fail(f"{where}: <mimic> without a joint")
            j.mimic = (
                leader,
                r.scalar(mim, "multiplier", f"{where} <mimic>", 1.0, (MAX_MIMIC_MULTIPLIER, "(a ratio)")),
                r.scalar(mim, "offset", f"{where} <mimic>", 0.0, (MAX_MIMIC_OFFSET, "(m or rad)")),
            )
        urdf.joints[name] = j

    _check_tree(r, urdf)
    return urdf


def inertia_problem(mass: float, I: np.ndarray) -> str | None:
    """Why a rotational inertia about the COM is not physical, or None.

    Physical: positive semi-definite, principal moments obeying the triangle inequality
    (a + b ≥ c). Tolerance: 1e-9 of the largest entry plus 1e-12 kg·m² absolute, so round-off in
    printed URDF values (e.g. ±2.4e-35 off-diagonals) is not a defect.
    """
    scale = float(np.max(np.abs(I))) if I.size else 0.0
    tol = 1e-9 * scale + 1e-12
    ev = np.linalg.eigvalsh(0.5 * (I + I.T))
    if ev[0] < -tol:
        return "inertia is not positive semi-definite (principal moments " + ", ".join(f"{e:.4g}" for e in ev) + ")"
    a, b, c = ev
    if a + b < c - tol:
        return f"inertia violates the triangle inequality (principal moments {a:.4g} + {b:.4g} < {c:.4g})"
    return None


def _check_tree(r: _Reader, urdf: URDF) -> None:
    parent_of: dict[str, str] = {}
    for j in urdf.joints.values():
        if j.child in parent_of:
            r.fail(
                f"link '{j.child}' is the child of two joints ('{parent_of[j.child]}' and '{j.name}'): "
                "closed kinematic chains are not supported"
            )
        parent_of[j.child] = j.name
    roots = [n for n in urdf.links if n not in parent_of]
    if not urdf.links:
        r.fail("no <link> elements")
    if not roots:
        r.fail(
            "no root link: every link has a parent joint, so the joints form a cycle "
            f"(links {', '.join(sorted(urdf.links)[:6])})"
        )
    if len(roots) > 1:
        r.fail(f"{len(roots)} root links ({', '.join(sorted(roots)[:6])}): a URDF must form one tree")
    # Every link must be reachable from the root, else part of the graph is a cycle.
    children: dict[str, list[str]] = {}
    for j in urdf.joints.values():
        children.setdefault(j.parent, []).append(j.child)
    seen = {roots[0]}
    stack = [roots[0]]
    while stack:
        for c in children.get(stack.pop(), []):
            if c not in seen:
                seen.add(c)
                stack.append(c)
    lost = [n for n in urdf.links if n not in seen]
    if lost:
        r.fail(f"joints form a cycle through link(s) {', '.join(sorted(lost)[:6])}")
    # a <mimic> naming no joint of the file: refused where the mimic joint is coupled
    # (model._build), ignored with a warning where it is loaded as an ordinary joint
