"""MJCF (MuJoCo's XML) → :class:`~rbdgen.RobotModel`, through :class:`~rbdgen.model.ModelBuilder`.

What the file means is MuJoCo's: the kinematics, the inertias MuJoCo's compiler infers and the
q/v layout of MuJoCo's ``qpos``/``qvel`` (the same order; quaternions stored x y z w, as
Pinocchio's, where MuJoCo stores w x y z: :func:`mujoco_qpos_to_q`). Where Pinocchio's own MJCF
parser (``buildModelFromMJCF``, the oracle the tests compare with) reads a file differently, rbdgen
follows MuJoCo; docs/mjcf.md lists the differences.

* ``<body>`` → links. A body's joints move it in document order, each about its anchor ``pos`` in
  the body frame (MuJoCo's kinematics): one joint, one rbdgen body whose frame is the joint's
  (placed at the anchor, rotated by −``ref`` about a hinge's axis or moved by −``ref`` along a
  slide's, so that q is MuJoCo's qpos); several joints (Pinocchio's composite joint), a chain of
  massless links ``<body>/<joint>`` with the body's inertia on the last one. A body without joints
  is welded to its parent (:meth:`~rbdgen.model.ModelBuilder.add_fixed`). The MuJoCo body's own
  frame is a link frame named after it wherever its last joint's anchor is not its origin.
* ``hinge`` → ``revolute`` (one angle, as Pinocchio's MJCF parser), ``slide`` → ``prismatic``,
  ``ball`` → ``spherical``, ``free`` and ``<freejoint>`` → ``floating`` (q: the body's pose in
  the world, as MuJoCo's qpos; its XML pose is only MuJoCo's initial qpos).
* ``<default>`` classes (nested, ``class``, ``childclass``), ``<compiler>`` (``angle``,
  ``eulerseq``, ``autolimits``, ``inertiafromgeom``, ``inertiagrouprange``, ``boundmass``,
  ``boundinertia``, ``balanceinertia``, ``settotalmass``, ``meshdir``/``assetdir``,
  ``strippath``), ``<option gravity>`` and ``<flag gravity="disable">``, ``<include>``,
  ``<frame>``, every orientation form (``quat``, ``axisangle``, ``euler``, ``xyaxes``,
  ``zaxis``), ``<inertial>`` (``diaginertia``/``fullinertia``), inertia from geoms (sphere,
  capsule, cylinder, box, ellipsoid with ``size`` or ``fromto``, ``density``/``mass``, meshes
  from STL/OBJ/MSH files or inline vertices: :mod:`rbdgen.model.geom_inertia`), ``armature``,
  named ``<site>`` elements (link frames, for the frame kernels).
* Ignored, with one :class:`~rbdgen.errors.RbdgenWarning` listing them: actuators, tendons,
  equality constraints (``connect``/``weld`` would close loops: not supported yet, issue 42),
  deformables and plugins. Ignored silently: what does not change the rigid-body dynamics
  (sensors, contact pairs, cameras, lights, visual settings, keyframes; joint damping,
  stiffness, friction loss, ``gravcomp``: passive forces, which MuJoCo keeps out of
  ``qfrc_bias`` too).
"""
from __future__ import annotations

import math
import os
import stat
import warnings
import xml.parsers.expat as expat
from dataclasses import dataclass, field

import numpy as np

from .. import spatial as sp
from ..errors import MJCFError, RbdgenError, RbdgenWarning, UnsupportedError
from . import geom_inertia as gi
from .builder import ModelBuilder
from .model import MAX_GRAVITY, RobotModel
from .urdf import MAX_INERTIA, MAX_LENGTH, MAX_MASS, MAX_NAME_LENGTH, inertia_problem

__all__ = ["JOINT_KINDS", "load_mjcf", "load_model", "model_format", "mujoco_qpos_to_q", "q_to_mujoco_qpos",
           "mujoco_qvel_to_v", "v_to_mujoco_qvel"]

#: MuJoCo joint type → rbdgen joint type
JOINT_KINDS = {"hinge": "revolute", "slide": "prismatic", "ball": "spherical", "free": "floating"}
#: the most nested <include>s followed (a cycle is reported before this)
MAX_INCLUDE_DEPTH = 32
#: elements of a body that may create bodies or joints rbdgen would not see: refused
_GENERATORS = ("composite", "flexcomp", "replicate", "attach")
#: top-level sections that add forces or constraints rbdgen leaves out: named in the one note
_NOTED = {"actuator": "actuators", "tendon": "tendons", "equality": "equality constraints",
          "deformable": "deformables", "extension": "plugins"}
#: top-level sections that do not change the rigid-body dynamics: ignored silently
_SILENT = ("size", "visual", "statistic", "contact", "sensor", "keyframe", "custom")


# ---- reading the XML, with each element's file and line ----------------------------------------

class _El:
    """An XML element: tag, attributes, children, and where it is written (file, line)."""

    __slots__ = ("tag", "attrib", "children", "file", "line")

    def __init__(self, tag, attrib, file, line):
        self.tag, self.attrib, self.children, self.file, self.line = tag, attrib, [], file, line

    def get(self, key, default=None):
        return self.attrib.get(key, default)

    def __iter__(self):
        return iter(self.children)

    def findall(self, tag):
        return [c for c in self.children if c.tag == tag]

    def describe(self) -> str:
        name = self.attrib.get("name")
        what = f"<{self.tag} name=\"{name}\">" if name else f"<{self.tag}>"
        return f"line {self.line}: {what}"


def _check_file(path: str, what: str, fail):
    if not os.path.exists(path):
        fail(f"no such file{what}")
    if os.path.isdir(path):
        fail(f"is a directory, not a file{what}")
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        fail(f"cannot read file{what}: {e.strerror or e}")
    if not stat.S_ISREG(mode):
        fail(f"is not a regular file (a pipe, socket or device?){what}")


def _parse_xml(path: str, stop_at_root: bool = False) -> _El:
    """The document's root element (each element with its line), or an :class:`MJCFError`."""
    def fail(msg):
        raise MJCFError(msg, file=path)

    _check_file(path, "", fail)
    p = expat.ParserCreate()
    stack: list = []
    root: list = []

    class _Root(Exception):
        pass

    def start(tag, attrs):
        el = _El(tag, attrs, path, p.CurrentLineNumber)
        if stack:
            stack[-1].children.append(el)
        else:
            root.append(el)
            if stop_at_root:
                raise _Root
        stack.append(el)

    def end(tag):
        stack.pop()

    p.StartElementHandler = start
    p.EndElementHandler = end
    try:
        with open(path, "rb") as f:
            p.ParseFile(f)
    except _Root:
        pass
    except expat.ExpatError as e:
        fail(f"malformed XML: {expat.ErrorString(e.code)}: line {e.lineno}, column {e.offset}")
    except (LookupError, UnicodeError, ValueError) as e:  # an encoding Python does not know
        fail(f"malformed XML: {' '.join(str(e).split())[:200]}")
    except OSError as e:
        fail(f"cannot read file: {e.strerror or e}")
    except RecursionError:
        fail("malformed XML: elements nested too deeply")
    if not root:
        fail("malformed XML: no root element")
    return root[0]


def model_format(path) -> str:
    """``"urdf"`` or ``"mjcf"``: the file's root element (``<robot>`` or ``<mujoco>``); anything
    else is an :class:`~rbdgen.errors.RbdgenError` naming the file."""
    path = os.fspath(path)
    root = _parse_xml(path, stop_at_root=True)
    if root.tag == "robot":
        return "urdf"
    if root.tag == "mujoco":
        return "mjcf"
    raise RbdgenError(f"root element is <{root.tag}>: rbdgen reads URDF (<robot>) and MJCF (<mujoco>) files",
                      file=path)


def load_model(path, **options):
    """A URDF or an MJCF file, by its content (root element ``<robot>``: :func:`rbdgen.load_urdf`,
    ``<mujoco>``: :func:`load_mjcf`; anything else is an error). ``options`` are the loader's;
    ``mimic`` (URDF only) is accepted for an MJCF file at its default ``"couple"`` (MJCF has no
    mimic joints) and refused otherwise."""
    from .model import load_urdf

    if model_format(path) == "urdf":
        return load_urdf(path, **options)
    mimic = options.pop("mimic", "couple")
    if mimic not in ("couple", None):
        raise ValueError(f"mimic={mimic!r}: mimic joints are a URDF feature; an MJCF file has none")
    return load_mjcf(path, **options)


# ---- the document -------------------------------------------------------------------------------

@dataclass
class _Compiler:
    degree: bool = True
    eulerseq: str = "xyz"
    meshdir: str | None = None
    assetdir: str | None = None
    strippath: bool = False
    autolimits: bool = True
    inertiafromgeom: str = "auto"
    inertiagrouprange: tuple = (0, 5)
    boundmass: float = 0.0
    boundinertia: float = 0.0
    balanceinertia: bool = False
    settotalmass: float = -1.0


@dataclass
class _Joint:
    el: _El
    name: str
    kind: str           # MuJoCo's: hinge, slide, ball, free
    pos: np.ndarray     # anchor, body frame
    axis: np.ndarray    # unit, body frame
    ref: float
    armature: float
    limits: tuple       # (lower, upper) or NaNs


@dataclass
class _Body:
    el: _El
    name: str
    parent: int                     # index of the parent _Body, -1: the world
    pos: np.ndarray                 # in the parent body's frame
    R: np.ndarray
    joints: list = field(default_factory=list)
    inertia: np.ndarray | None = None   # 6×6 about the body origin, body axes
    sites: list = field(default_factory=list)  # (name, pos, R)


class _Reader:
    def __init__(self, path: str, gravity, check_inertia: bool = True):
        self.path = path
        self.check_inertia = check_inertia
        self.compiler = _Compiler()
        self.gravity = gravity
        self.classes: dict = {}
        self.meshes: dict = {}
        self.mesh_cache: dict = {}
        self.noted: dict = {}
        self.bodies: list = []
        self.world_sites: list = []
        self.model_name = None
        self.file_gravity = np.array([0.0, 0.0, -9.81])   # MuJoCo's default
        self.gravity_off = False

    # ---- errors and numbers --------------------------------------------------------------
    def fail(self, el, msg, cls=MJCFError):
        where = f"{el.describe()}: " if el is not None else ""
        raise cls(f"{where}{msg}", file=el.file if el is not None else self.path)

    def floats(self, el, attr, n, text=None, *, bound=None, exact=True):
        """``n`` finite numbers of ``el``'s attribute (or ``text``): fewer are an error unless
        ``exact`` is False (MuJoCo's partial ``size``), more always."""
        text = el.get(attr) if text is None else text
        parts = text.split()
        if len(parts) > n or (exact and len(parts) != n) or not parts:
            self.fail(el, f"attribute {attr}=\"{text}\" must hold {n if exact else f'1 to {n}'} number(s)")
        try:
            vals = np.array([float(x) for x in parts])
        except ValueError:
            self.fail(el, f"attribute {attr}=\"{text}\" is not a number")
        if not np.all(np.isfinite(vals)):
            self.fail(el, f"attribute {attr}=\"{text}\" is not finite (NaN or inf)")
        if bound is not None and np.any(np.abs(vals) > bound[0]):
            self.fail(el, f"attribute {attr}=\"{text}\" is out of range: magnitudes above {bound[0]:g} {bound[1]} are "
                          f"not a robot's (and would overflow the kernels' arithmetic)")
        return vals

    def scalar(self, el, attr, text=None, *, bound=None):
        return float(self.floats(el, attr, 1, text, bound=bound)[0])

    def choice(self, el, attr, text, options):
        if text not in options:
            self.fail(el, f"attribute {attr}=\"{text}\" must be one of {', '.join(options)}")
        return text

    def boolean(self, el, attr, text):
        return self.choice(el, attr, text, ("true", "false")) == "true"

    # ---- defaults ------------------------------------------------------------------------
    def attr(self, el, cls, name):
        """``el``'s attribute ``name``, else its default class's (``cls``: a class name), else None."""
        v = el.get(name)
        if v is not None:
            return v
        return self.classes[cls].get(el.tag, {}).get(name)

    def size(self, el, cls):
        """MuJoCo's partial ``size``: the given numbers over the class's (zeros by default)."""
        out = np.zeros(3)
        base = self.classes[cls].get(el.tag, {}).get("size")
        if base is not None:
            out[:] = base
        if el.get("size") is not None:
            v = self.floats(el, "size", 3, exact=False, bound=(MAX_LENGTH, "m"))
            out[: len(v)] = v
        return out

    def read_defaults(self, el, parent: dict | None, top: bool):
        name = el.get("class")
        if name is None:
            if not top:
                self.fail(el, "a nested <default> needs a class name")
            name = "main"
        if name in self.classes and not (top and name == "main"):
            self.fail(el, f"default class '{name}' is defined twice")
        table = self.classes.get(name) if top and name == "main" and name in self.classes else \
            {t: dict(a) for t, a in (parent or {}).items()}
        for child in el:
            if child.tag == "default":
                continue
            entry = table.setdefault(child.tag, {})
            for k, v in child.attrib.items():
                if k == "size":
                    old = np.array(entry["size"]) if "size" in entry else np.zeros(3)
                    new = self.floats(child, "size", 3, exact=False, bound=(MAX_LENGTH, "m"))
                    old[: len(new)] = new
                    entry["size"] = tuple(old)
                else:
                    entry[k] = v
        self.classes[name] = table
        for child in el:
            if child.tag == "default":
                self.read_defaults(child, table, False)

    def class_of(self, el, inherited):
        cls = el.get("class")
        if cls is None:
            return inherited
        if cls not in self.classes:
            self.fail(el, f"unknown default class '{cls}'")
        return cls

    # ---- orientation ---------------------------------------------------------------------
    def angle(self, x):
        return x * math.pi / 180.0 if self.compiler.degree else x

    def rotation(self, el, cls):
        """The rotation matrix of ``el``'s orientation (MuJoCo's alternatives; one at most)."""
        given = [a for a in ("quat", "axisangle", "xyaxes", "zaxis", "euler") if self.attr(el, cls, a) is not None]
        explicit = [a for a in given if el.get(a) is not None]
        if len(explicit) > 1:
            self.fail(el, f"orientation given twice ({' and '.join(explicit)}); MuJoCo takes one")
        if not given:
            return np.eye(3)
        a = explicit[0] if explicit else given[0]
        text = self.attr(el, cls, a)
        if a == "quat":
            q = self.floats(el, a, 4, text)
            n = sp.norm(q)
            if n < gi.EPS:
                self.fail(el, f"quat=\"{text}\" is zero")
            return _quat_wxyz_to_rot(q / n)
        if a == "axisangle":
            v = self.floats(el, a, 4, text)
            n = sp.norm(v[:3])
            if n < gi.EPS:
                self.fail(el, f"axisangle=\"{text}\": the axis is zero")
            return sp.axis_angle_to_rot(v[:3] / n, self.angle(v[3]))
        if a == "xyaxes":
            v = self.floats(el, a, 6, text)
            x, y = v[:3], v[3:]
            nx = sp.norm(x)
            if nx < gi.EPS:
                self.fail(el, f"xyaxes=\"{text}\": the x axis is zero")
            x = x / nx
            y = y - x * float(sp.mm(x, y))
            ny = sp.norm(y)
            if ny < gi.EPS:
                self.fail(el, f"xyaxes=\"{text}\": the y axis is parallel to the x axis")
            y = y / ny
            z = np.cross(x, y)
            z = z / sp.norm(z)
            return np.stack([x, y, z], axis=1)
        if a == "zaxis":
            v = self.floats(el, a, 3, text)
            n = sp.norm(v)
            if n < gi.EPS:
                self.fail(el, f"zaxis=\"{text}\" is zero")
            return _z_to_rot(v / n)
        v = self.floats(el, a, 3, text)  # euler
        R = np.eye(3)
        for ang, ax in zip(v, self.compiler.eulerseq):
            Ri = sp.axis_angle_to_rot(np.eye(3)["xyz".index(ax.lower())], self.angle(ang))
            # lower case: axes that move with the frame (post-multiply); upper case: fixed axes
            R = sp.mm(R, Ri) if ax.islower() else sp.mm(Ri, R)
        return R

    def pose(self, el, cls):
        text = self.attr(el, cls, "pos")
        p = self.floats(el, "pos", 3, text, bound=(MAX_LENGTH, "m")) if text is not None else np.zeros(3)
        return p, self.rotation(el, cls)

    # ---- sections ------------------------------------------------------------------------
    def read_compiler(self, el):
        c = self.compiler
        for k, v in el.attrib.items():
            if k == "angle":
                c.degree = self.choice(el, k, v, ("degree", "radian")) == "degree"
            elif k == "eulerseq":
                if len(v) != 3 or any(ch not in "xyzXYZ" for ch in v):
                    self.fail(el, f"eulerseq=\"{v}\" must be three of x, y, z, X, Y, Z")
                c.eulerseq = v
            elif k in ("meshdir", "assetdir"):
                setattr(c, k, v)
            elif k == "strippath":
                c.strippath = self.boolean(el, k, v)
            elif k == "autolimits":
                c.autolimits = self.boolean(el, k, v)
            elif k == "inertiafromgeom":
                c.inertiafromgeom = self.choice(el, k, v, ("auto", "true", "false"))
            elif k == "inertiagrouprange":
                g = self.floats(el, k, 2, v)
                c.inertiagrouprange = (g[0], g[1])
            elif k in ("boundmass", "boundinertia"):
                x = self.scalar(el, k, v, bound=(MAX_INERTIA, "(kg or kg m²)"))
                if x < 0:
                    self.fail(el, f"{k}=\"{v}\" is negative")
                setattr(c, k, x)
            elif k == "balanceinertia":
                c.balanceinertia = self.boolean(el, k, v)
            elif k == "settotalmass":
                c.settotalmass = self.scalar(el, k, v, bound=(MAX_MASS, "kg"))
            elif k == "coordinate" and v != "local":
                self.fail(el, f"coordinate=\"{v}\": global coordinates were removed from MuJoCo (2.3.3); "
                              "rbdgen reads local ones", UnsupportedError)

    def read_option(self, el):
        if el.get("gravity") is not None and self.gravity is None:
            self.file_gravity = self.floats(el, "gravity", 3, bound=(MAX_GRAVITY, "m/s²"))
        for fl in el.findall("flag"):
            if fl.get("gravity") is not None:
                self.gravity_off = self.choice(fl, "gravity", fl.get("gravity"), ("enable", "disable")) == "disable"

    def read_assets(self, el):
        for a in el:
            if a.tag != "mesh":
                continue
            cls = self.class_of(a, "main")
            name = a.get("name")
            file = self.attr(a, cls, "file")
            if name is None:
                if file is None:
                    self.fail(a, "a mesh needs a name or a file")
                name = os.path.splitext(os.path.basename(file))[0]
            if name in self.meshes:
                self.fail(a, f"mesh '{name}' is defined twice")
            self.meshes[name] = (a, cls)

    # ---- the tree --------------------------------------------------------------------------
    def read_bodies(self, worldbody: _El):
        for c in worldbody.children:
            if c.tag in ("joint", "freejoint", "inertial"):
                self.fail(c, f"the world body cannot have <{c.tag}> (it does not move)")
        # explicit stack, pre-order (parents first, document order): any depth loads
        items = self._frame_items(worldbody, "main", np.zeros(3), np.eye(3), ("body", "site") + _GENERATORS)
        stack = [(el, -1, cls, fp, fR) for el, cls, fp, fR in reversed(items)]
        names = {"world"}
        while stack:
            el, parent, cls, fp, fR = stack.pop()
            if el.tag in _GENERATORS:
                self.fail(el, f"<{el.tag}> is not supported (it generates bodies or joints rbdgen would have to "
                              f"expand as MuJoCo does); expand it in the file", UnsupportedError)
            if el.tag == "site":
                if el.get("name"):
                    self.world_sites.append(self._site(el, self.class_of(el, cls), fp, fR))
                continue
            b = self._body(el, parent, cls, fp, fR, names)
            self.bodies.append(b)
            me = len(self.bodies) - 1
            # the body's default: its childclass, else its class, else its parent's
            bcls = self.class_of_child(el, self.class_of(el, cls))
            for child, ccls, cp, cR in reversed(self._contents(el, bcls, b)):
                stack.append((child, me, ccls, cp, cR))

    def class_of_child(self, el, inherited):
        cc = el.get("childclass")
        if cc is None:
            return inherited
        if cc not in self.classes:
            self.fail(el, f"unknown default childclass '{cc}'")
        return cc

    def _frame_items(self, el, cls, fp, fR, tags):
        """``el``'s children with ``tags``, <frame>s opened: (element, default class, frame
        position, frame rotation) in document order."""
        out = []
        for c in el:
            if c.tag == "frame":
                ccls = self.class_of_child(c, self.class_of(c, cls))
                p, R = self.pose(c, ccls)
                out += self._frame_items(c, ccls, fp + sp.mm(fR, p), sp.mm(fR, R), tags)
            elif c.tag in tags:
                out.append((c, cls, fp, fR))
        return out

    def _body(self, el, parent, cls, fp, fR, names):
        name = el.get("name")
        if name is None:
            base = (self.bodies[parent].name if parent >= 0 else "world") + "Bis"
            name, k = base, 1
            while name in names:
                k += 1
                name = f"{base}{k}"
        elif name in names:
            self.fail(el, f"body name '{name}' is used twice" if name != "world" else
                      "a body cannot be named 'world' (MuJoCo's name for the world body)")
        names.add(name)
        p, R = self.pose(el, cls)
        return _Body(el, name, parent, fp + sp.mm(fR, p), sp.mm(fR, R))

    def _contents(self, el, cls, body: _Body):
        """Read a body's joints, inertia and sites; return its child bodies (element, class,
        frame position, frame rotation) in document order."""
        tags = ("body", "joint", "freejoint", "geom", "site", "inertial", "plugin") + _GENERATORS
        items = []
        for c, ccls, fp, fR in self._frame_items(el, cls, np.zeros(3), np.eye(3), tags):
            if c.tag in _GENERATORS:
                self.fail(c, f"<{c.tag}> is not supported (it generates bodies or joints rbdgen would have to "
                             f"expand as MuJoCo does); expand it in the file", UnsupportedError)
            elif c.tag == "plugin":
                self.noted.setdefault("plugins", []).append(c)
            elif c.tag == "body":
                items.append(("body", c, ccls, fp, fR))
            else:
                items.append((c.tag, c, self.class_of(c, ccls), fp, fR))

        inertial = [x for x in items if x[0] == "inertial"]
        if len(inertial) > 1:
            self.fail(inertial[1][1], "a body takes one <inertial>")
        geoms = [x for x in items if x[0] == "geom"]
        for kind, c, ccls, fp, fR in items:
            if kind in ("joint", "freejoint"):
                body.joints.append(self._joint(c, ccls, fp, fR, body, len(body.joints)))
            elif kind == "site" and c.get("name"):
                body.sites.append(self._site(c, ccls, fp, fR))
        body.inertia = self._inertia(body, inertial[0] if inertial else None, geoms)
        return [(c, ccls, fp, fR) for kind, c, ccls, fp, fR in items if kind == "body"]

    def _site(self, el, cls, fp, fR):
        p, R = self.pose(el, cls)
        if self.attr(el, cls, "fromto") is not None:
            v = self.floats(el, "fromto", 6, self.attr(el, cls, "fromto"), bound=(MAX_LENGTH, "m"))
            p = 0.5 * (v[:3] + v[3:])
            d = v[:3] - v[3:]
            R = _z_to_rot(d / sp.norm(d)) if sp.norm(d) >= gi.EPS else np.eye(3)
        return (el.get("name"), el, fp + sp.mm(fR, p), sp.mm(fR, R))

    def _joint(self, el, cls, fp, fR, body, k):
        if el.tag == "freejoint":  # MuJoCo: a free joint without defaults
            name = el.get("name") or f"{body.name}_free"
            return _Joint(el, name, "free", np.zeros(3), np.zeros(3), 0.0, 0.0, (math.nan, math.nan))
        name = el.get("name") or f"{body.name}Joint_{k}"
        kind = self.attr(el, cls, "type") or "hinge"
        if kind not in JOINT_KINDS:
            self.fail(el, f"unknown joint type '{kind}' (MuJoCo's joint types: {', '.join(JOINT_KINDS)})")
        pos = self.floats(el, "pos", 3, self.attr(el, cls, "pos"), bound=(MAX_LENGTH, "m")) \
            if self.attr(el, cls, "pos") is not None else np.zeros(3)
        axis = np.zeros(3)
        if kind in ("hinge", "slide"):
            text = self.attr(el, cls, "axis")
            a = self.floats(el, "axis", 3, text) if text is not None else np.array([0.0, 0.0, 1.0])
            n = sp.norm(a)
            if not n >= gi.EPS:
                self.fail(el, f"zero axis {' '.join(f'{x:g}' for x in a)}")
            axis = sp.mm(fR, a / n)
        ref = 0.0
        if self.attr(el, cls, "ref") is not None:
            ref = self.scalar(el, "ref", self.attr(el, cls, "ref"), bound=(MAX_LENGTH, "(m or angle)"))
            if kind == "hinge":
                ref = self.angle(ref)
            elif kind != "slide" and ref != 0.0:
                self.fail(el, f"ref=\"{el.get('ref')}\": only hinge and slide joints take a reference position")
        arm = 0.0
        if self.attr(el, cls, "armature") is not None:
            arm = self.scalar(el, "armature", self.attr(el, cls, "armature"), bound=(MAX_INERTIA, "kg m²"))
            if arm < 0:
                self.fail(el, f"negative armature {arm:g} (a rotor inertia is ≥ 0)")
        lims = (math.nan, math.nan)
        rtext, ltext = self.attr(el, cls, "range"), self.attr(el, cls, "limited")
        limited = self.choice(el, "limited", ltext, ("true", "false", "auto")) if ltext is not None else "auto"
        if limited == "auto":
            limited = "true" if (self.compiler.autolimits and rtext is not None) else "false"
        if limited == "true" and rtext is not None and kind in ("hinge", "slide"):
            r = self.floats(el, "range", 2, rtext, bound=(MAX_LENGTH, "(m or angle)"))
            lo, hi = (self.angle(r[0]), self.angle(r[1])) if kind == "hinge" else (r[0], r[1])
            if lo > hi:
                self.fail(el, f"range=\"{rtext}\": lower limit above upper")
            if lo < hi:  # MuJoCo's default range (0 0) bounds nothing
                lims = (lo, hi)
        return _Joint(el, name, kind, fp + sp.mm(fR, pos), axis, ref, arm, lims)

    # ---- inertia ---------------------------------------------------------------------------
    def _inertia(self, body, inertial, geoms):
        c = self.compiler
        use_geoms = c.inertiafromgeom == "true" or (c.inertiafromgeom == "auto" and inertial is None)
        if not use_geoms:
            I = self._inertial(*inertial[1:]) if inertial is not None else np.zeros((6, 6))
        else:
            I = np.zeros((6, 6))
            for _, g, gcls, fp, fR in geoms:
                Ig = self._geom_inertia(g, gcls, body)
                if Ig is not None:
                    m, com, Ic = Ig
                    p, R = self._geom_pose(g, gcls)
                    p, R = fp + sp.mm(fR, p), sp.mm(fR, R)
                    I = I + sp.spatial_inertia(m, p + sp.mm(R, com), sp.mm(sp.mm(R, Ic), R.T))
        if c.boundmass > 0 or c.boundinertia > 0 or c.balanceinertia:
            I = self._bounded(body, I)
        if self.check_inertia:
            m, _, Ic = sp.inertia_parts(I)
            why = inertia_problem(m, Ic)
            if why:
                self.fail(inertial[1] if inertial is not None and not use_geoms else body.el,
                          f"body '{body.name}': {why} (MuJoCo refuses it too unless <compiler balanceinertia=\"true\">; "
                          f"load_mjcf(..., check_inertia=False) loads it anyway)")
        return I

    def _bounded(self, body, I):
        """MuJoCo's boundmass / boundinertia / balanceinertia, on the principal moments."""
        c = self.compiler
        m, com, Ic = sp.inertia_parts(I)
        if I[5, 5] <= 0.0:
            com = np.zeros(3)
        ev, V = np.linalg.eigh(0.5 * (Ic + Ic.T))
        m = max(m, c.boundmass)
        ev = np.maximum(ev, c.boundinertia)
        if c.balanceinertia and (ev[0] + ev[1] < ev[2] or ev[0] + ev[2] < ev[1] or ev[1] + ev[2] < ev[0]):
            ev = np.full(3, float(np.sum(ev)) / 3.0)
        return sp.spatial_inertia(m, com, sp.mm(sp.mm(V, np.diag(ev)), V.T))

    def _inertial(self, el, cls, fp, fR):
        p = self.floats(el, "pos", 3, bound=(MAX_LENGTH, "m")) if el.get("pos") is not None else \
            self.fail(el, "missing attribute 'pos' (the centre of mass)")
        if el.get("mass") is None:
            self.fail(el, "missing attribute 'mass'")
        m = self.scalar(el, "mass", bound=(MAX_MASS, "kg"))
        if m < 0:
            self.fail(el, f"negative mass {m:g}")
        if el.get("fullinertia") is not None:
            if el.get("diaginertia") is not None:
                self.fail(el, "both diaginertia and fullinertia are given; MuJoCo takes one")
            if any(el.get(a) is not None for a in ("quat", "axisangle", "xyaxes", "zaxis", "euler")):
                self.fail(el, "fullinertia and an orientation cannot both be given (MuJoCo)")
            f = self.floats(el, "fullinertia", 6, bound=(MAX_INERTIA, "kg m²"))
            Ic = np.array([[f[0], f[3], f[4]], [f[3], f[1], f[5]], [f[4], f[5], f[2]]])
            R = np.eye(3)
        elif el.get("diaginertia") is not None:
            d = self.floats(el, "diaginertia", 3, bound=(MAX_INERTIA, "kg m²"))
            if np.any(d < 0):
                self.fail(el, f"negative diaginertia {' '.join(f'{x:g}' for x in d)}")
            R = self.rotation(el, cls)
            Ic = np.diag(d)
        else:
            self.fail(el, "missing diaginertia or fullinertia")
        if np.min(np.linalg.eigvalsh(Ic)) < -(1e-9 * np.max(np.abs(Ic)) + 1e-12):
            self.fail(el, "inertia is not positive semi-definite (principal moments "
                          + ", ".join(f"{e:.4g}" for e in np.linalg.eigvalsh(Ic)) + ")")
        Ic = sp.mm(sp.mm(R, Ic), R.T)
        return sp.spatial_inertia(m, fp + sp.mm(fR, p), sp.mm(sp.mm(fR, Ic), fR.T))

    def _geom_pose(self, g, cls):
        ft = self.attr(g, cls, "fromto")
        if ft is not None:
            v = self.floats(g, "fromto", 6, ft, bound=(MAX_LENGTH, "m"))
            d = v[:3] - v[3:]
            return 0.5 * (v[:3] + v[3:]), _z_to_rot(d / sp.norm(d))
        return self.pose(g, cls)

    def _geom_inertia(self, g, cls, body):
        """(mass, centre of mass, inertia about it) in the geom's frame, or None: a geom that
        MuJoCo leaves out of the body's inertia (outside inertiagrouprange, or massless)."""
        kind = self.attr(g, cls, "type") or "sphere"
        if kind not in gi.PRIMITIVES + ("mesh", "plane", "hfield", "sdf"):
            self.fail(g, f"unknown geom type '{kind}'")
        gtext = self.attr(g, cls, "group")
        group = self.scalar(g, "group", gtext) if gtext is not None else 0.0
        lo, hi = self.compiler.inertiagrouprange
        if not lo <= group <= hi:
            return None
        if kind in ("plane", "hfield", "sdf"):
            return None  # no volume: MuJoCo gives them no mass
        mtext, dtext = self.attr(g, cls, "mass"), self.attr(g, cls, "density")
        mass = self.scalar(g, "mass", mtext, bound=(MAX_MASS, "kg")) if mtext is not None else None
        density = self.scalar(g, "density", dtext, bound=(MAX_MASS, "kg/m³")) if dtext is not None else 1000.0
        if mass is not None and mass < 0:
            self.fail(g, f"negative mass {mass:g}")
        if density < 0:
            self.fail(g, f"negative density {density:g}")
        if (mass is not None and mass == 0.0) or (mass is None and density == 0.0):
            return None
        shell = self.attr(g, cls, "shellinertia")
        if shell is not None and self.boolean(g, "shellinertia", shell):
            self.fail(g, "shellinertia=\"true\" is not supported (solid geoms only); give the body an <inertial>",
                      UnsupportedError)
        if kind == "mesh":
            return self._mesh_geom(g, cls, mass, density)
        size = self.size(g, cls)
        ft = self.attr(g, cls, "fromto")
        if ft is not None:
            if kind not in ("capsule", "cylinder", "box", "ellipsoid"):
                self.fail(g, f"fromto needs a capsule, cylinder, box or ellipsoid, not a {kind}")
            if g.get("pos") is not None and np.any(self.floats(g, "pos", 3) != 0):
                self.fail(g, "both pos and fromto are given")
            v = self.floats(g, "fromto", 6, ft, bound=(MAX_LENGTH, "m"))
            half = sp.norm(v[:3] - v[3:]) / 2.0
            if half < gi.EPS:
                self.fail(g, f"fromto=\"{ft}\": the two points coincide")
            size = np.array([size[0], size[0], half]) if kind in ("box", "ellipsoid") else \
                np.array([size[0], half, size[2]])
        need = {"sphere": 1, "capsule": 2, "cylinder": 2, "box": 3, "ellipsoid": 3}[kind]
        if np.any(size[:need] <= 0):
            self.fail(g, f"a {kind} needs {need} positive size value(s), got size {' '.join(f'{x:g}' for x in size[:need])}")
        vol = gi.primitive_volume(kind, size)
        if mass is None:
            mass = density * vol
        elif vol <= gi.EPS:
            return None
        if not mass > gi.EPS:
            return None
        return mass, np.zeros(3), np.diag(gi.primitive_inertia(kind, size, mass))

    def _mesh_geom(self, g, cls, mass, density):
        mname = self.attr(g, cls, "mesh")
        if mname is None:
            self.fail(g, "a mesh geom needs a mesh=\"…\"")
        if mname not in self.meshes:
            self.fail(g, f"mesh '{mname}' is not defined in <asset>")
        if self.attr(g, cls, "fromto") is not None:
            self.fail(g, "fromto cannot be used with a mesh geom")
        vol, com, I = self._mesh(mname, g)
        if mass is None:
            mass = density * vol
        if not mass > gi.EPS:
            return None
        return mass, com, I * (mass / vol)

    def _mesh(self, name, g):
        if name in self.mesh_cache:
            return self.mesh_cache[name]
        a, cls = self.meshes[name]
        scale = self.floats(a, "scale", 3, self.attr(a, cls, "scale"), bound=(MAX_LENGTH, "")) \
            if self.attr(a, cls, "scale") is not None else np.ones(3)
        refpos = self.floats(a, "refpos", 3, self.attr(a, cls, "refpos")) if self.attr(a, cls, "refpos") else np.zeros(3)
        refquat = self.floats(a, "refquat", 4, self.attr(a, cls, "refquat")) if self.attr(a, cls, "refquat") \
            else np.array([1.0, 0.0, 0.0, 0.0])
        mode = self.attr(a, cls, "inertia") or "legacy"
        if mode not in gi.MESH_INERTIA:
            self.fail(a, f"inertia=\"{mode}\" must be one of {', '.join(gi.MESH_INERTIA)}")
        file = self.attr(a, cls, "file")
        try:
            if file is not None:
                path = self.asset_path(file)
                if not os.path.isfile(path):
                    why = "is a directory" if os.path.isdir(path) else \
                        "is not a regular file" if os.path.exists(path) else "no such file"
                    self.fail(g, f"mesh '{name}' ({a.describe()}): {path}: {why} (meshdir/assetdir of <compiler> "
                                 f"are relative to {os.path.dirname(os.path.abspath(self.path))})")
                v, f = gi.read_mesh(path)
            elif a.get("vertex") is not None:
                v = np.asarray(self.floats(a, "vertex", 10 ** 9, exact=False), dtype=np.float32).astype(float)
                if len(v) % 3:
                    self.fail(a, f"vertex holds {len(v)} numbers, not a multiple of 3")
                v = v.reshape(-1, 3)
                if a.get("face") is None:
                    self.fail(a, "a mesh given by its vertices needs face=\"…\" here (MuJoCo would build the convex "
                                 "hull; rbdgen does not)", UnsupportedError)
                f = self.floats(a, "face", 10 ** 9, exact=False)
                if len(f) % 3 or np.any(f != np.round(f)) or np.any(f < 0) or np.any(f >= len(v)):
                    self.fail(a, "face must hold triples of vertex indices")
                f = f.astype(np.int64).reshape(-1, 3)
            else:
                self.fail(a, "a mesh needs file=\"…\" or vertex=\"…\"")
            v = gi.transform_vertices(v, scale=scale, refpos=refpos, refquat=refquat)
            f = gi.fix_winding(f, scale)
            out = gi.mesh_inertia(v, f, mode)
        except gi.MeshError as e:
            self.fail(g, f"mesh '{name}' ({file or 'inline vertices'}): {e}")
        except OSError as e:
            self.fail(g, f"mesh '{name}': cannot read {file}: {e.strerror or e}")
        self.mesh_cache[name] = out
        return out

    def asset_path(self, file):
        c = self.compiler
        if c.strippath:
            file = os.path.basename(file)
        if os.path.isabs(file):
            return file
        base = os.path.dirname(os.path.abspath(self.path))
        d = c.meshdir if c.meshdir is not None else c.assetdir
        if d:
            base = d if os.path.isabs(d) else os.path.join(base, d)
        return os.path.normpath(os.path.join(base, file))


def _quat_wxyz_to_rot(q):
    w, x, y, z = q
    return sp.quat_to_rot(np.array([x, y, z, w]))


def _z_to_rot(v):
    """MuJoCo's ``mjuu_z2quat``: the shortest rotation taking z to the unit vector ``v`` (about x
    when v is ±z)."""
    axis = np.array([-v[1], v[0], 0.0])  # z × v
    s = sp.norm(axis)
    if s < 1e-10:
        axis = np.array([1.0, 0.0, 0.0])
    else:
        axis = axis / s
    ang = math.atan2(s, v[2])
    return sp.axis_angle_to_rot(axis, ang)


# ---- include expansion --------------------------------------------------------------------------

def _expand_includes(root: _El, main: str, seen: tuple = ()):
    """Replace every <include file> (anywhere) by the children of the included file's <mujoco>
    root. A file name is taken relative to the including file's folder, then the main file's.
    An explicit stack: a body chain nested thousands deep loads (no recursion limit)."""
    stack = [(root, seen)]
    while stack:
        el, chain = stack.pop()
        out = []
        work = [(c, chain) for c in reversed(el.children)]  # next child last: an include's children go first
        while work:
            c, chain = work.pop()
            if c.tag != "include":
                out.append(c)
                stack.append((c, chain))
                continue
            file = c.get("file")
            if not file:
                raise MJCFError(f"{c.describe()}: missing attribute 'file'", file=c.file)
            cands = [file] if os.path.isabs(file) else \
                [os.path.join(os.path.dirname(c.file), file), os.path.join(os.path.dirname(main), file)]
            path = next((p for p in cands if os.path.isfile(p)), cands[0])
            if not os.path.isfile(path):
                raise MJCFError(f"{c.describe()}: included file '{file}' does not exist (looked for "
                                f"{' and '.join(dict.fromkeys(os.path.normpath(p) for p in cands))})", file=c.file)
            key = os.path.realpath(path)
            if key in chain:
                raise MJCFError(f"{c.describe()}: including '{file}' again makes a cycle of includes", file=c.file)
            if len(chain) > MAX_INCLUDE_DEPTH:
                raise MJCFError(f"{c.describe()}: more than {MAX_INCLUDE_DEPTH} nested includes", file=c.file)
            sub = _parse_xml(path)
            if sub.tag != "mujoco":
                raise MJCFError(f"root element is <{sub.tag}>; an included file's root is <mujoco> (included from "
                                f"{c.file}, line {c.line})", file=path)
            work += [(x, chain + (key,)) for x in reversed(sub.children)]
        el.children = out


# ---- loading -----------------------------------------------------------------------------------

def load_mjcf(path, *, floating_base: bool = False, gravity=None, check_inertia: bool = True,
              armature=None) -> RobotModel:
    """Load an MJCF (MuJoCo XML) file into a :class:`~rbdgen.RobotModel` (module docstring: what
    is read, what is ignored).

    q and v are MuJoCo's qpos and qvel in layout — joints in document order, a body's joints in
    the order written — except that quaternions are stored x y z w (Pinocchio's order; MuJoCo's
    qpos stores w x y z: :func:`mujoco_qpos_to_q`), and a free joint's linear velocity is in its
    body's frame (MuJoCo's: in the world's, :func:`mujoco_qvel_to_v`). Hinge angles and slide
    displacements are MuJoCo's (``ref`` included).

    ``floating_base``: put a free joint on the first top-level body, which must have no joint of
    its own (Pinocchio's ``buildModelFromMJCF(path, JointModelFreeFlyer())``); an MJCF file
    usually says ``<freejoint/>`` itself. ``gravity``: 3 numbers overriding the file's
    ``<option gravity>`` (default there 0 0 −9.81). ``check_inertia``: refuse bodies whose inertia
    is not physical (False loads them). ``armature``: as :func:`rbdgen.load_urdf`'s, over the
    file's joint ``armature`` values.

    Errors (:class:`~rbdgen.errors.MJCFError`, :class:`~rbdgen.errors.UnsupportedError`) name
    the file, the line and element, and what is wrong."""
    path = os.fspath(path)
    for what, flag in (("floating_base", floating_base), ("check_inertia", check_inertia)):
        if not isinstance(flag, (bool, np.bool_)):
            raise ValueError(f"{what} must be True or False, got {flag!r}")
    g = None
    if gravity is not None:
        try:
            g = np.asarray(gravity, dtype=float)
        except (TypeError, ValueError):
            g = np.zeros(0)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise ValueError(f"gravity must be 3 finite numbers (x, y, z in m/s²), got {gravity!r}")
        if np.any(np.abs(g) > MAX_GRAVITY):
            raise ValueError(f"gravity {tuple(float(x) for x in g)} is out of range: components above "
                             f"{MAX_GRAVITY:g} m/s² are not a robot's (and would overflow the kernels' arithmetic)")
    root = _parse_xml(path)
    if root.tag != "mujoco":
        raise MJCFError(f"root element is <{root.tag}>, expected <mujoco>", file=path)
    _expand_includes(root, path, (os.path.realpath(path),))
    r = _Reader(path, g, check_inertia)
    r.model_name = root.get("model") or os.path.splitext(os.path.basename(path))[0]
    if len(r.model_name) > MAX_NAME_LENGTH:
        raise MJCFError(f"<mujoco model=\"{r.model_name[:24]}…\">: the name is {len(r.model_name)} characters long, at "
                        f"most {MAX_NAME_LENGTH} (it names the generated files and the package folder); shorten it",
                        file=path)

    # sections, in document order (compiler settings apply to the whole document, as MuJoCo's)
    r.classes["main"] = {}
    for el in root:
        if el.tag == "compiler":
            r.read_compiler(el)
    for el in root:
        if el.tag == "default":
            r.read_defaults(el, None, True)
    for el in root:
        if el.tag == "option":
            r.read_option(el)
        elif el.tag == "asset":
            r.read_assets(el)
        elif el.tag in _NOTED:
            n = len(el.children)
            if n or el.tag == "extension":
                r.noted.setdefault(_NOTED[el.tag], []).extend(el.children or [el])
    for el in root:
        if el.tag == "worldbody":
            r.read_bodies(el)
    if not r.bodies:
        raise MJCFError("no <body> in <worldbody>: nothing moves", file=path)

    if r.compiler.settotalmass > 0:
        # left to right, as MuJoCo adds the bodies' masses: the builtin sum compensates from
        # Python 3.12 on, and this number scales every inertia that reaches generated code
        total = 0.0
        for b in r.bodies:
            total += float(b.inertia[5, 5])
        k = r.compiler.settotalmass / max(gi.MINVAL, total)
        for b in r.bodies:
            b.inertia = b.inertia * k
    grav = g if g is not None else (np.zeros(3) if r.gravity_off else r.file_gravity)
    model = _build(r, grav, floating_base, check_inertia)
    _note(r)
    return model if armature is None else model.with_armature(armature)


def _note(r: _Reader):
    if not r.noted:
        return
    parts = []
    for what, els in r.noted.items():
        if what == "equality constraints":
            kinds = {}
            for e in els:
                kinds[e.tag] = kinds.get(e.tag, 0) + 1
            detail = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
            loops = any(k in ("connect", "weld") for k in kinds)
            parts.append(f"{len(els)} equality constraint{'s' if len(els) != 1 else ''} ({detail}"
                         + ("; connect and weld close kinematic loops, not supported yet: issue 42" if loops else "")
                         + ")")
        elif what == "plugins":
            parts.append(f"{len(els)} plugin{'s' if len(els) != 1 else ''}")
        else:
            parts.append(f"{len(els)} {what if len(els) != 1 else what[:-1]}")
    warnings.warn(f"{r.path}: ignored (rbdgen computes the rigid-body dynamics of the tree): {'; '.join(parts)}",
                  RbdgenWarning, stacklevel=3)


def _unique(name: str, used: set) -> str:
    out, k = name, 1
    while out in used:
        k += 1
        out = f"{name}#{k}"
    used.add(out)
    return out


def _build(r: _Reader, gravity, floating_base: bool, check_inertia: bool) -> RobotModel:
    b = ModelBuilder(r.model_name, gravity=gravity, source=r.path)
    links = {"world"} | {x.name for x in r.bodies}
    # joint names: the file's (unique, as MuJoCo requires), then generated ones around them
    jnames: set = set()
    for body in r.bodies:
        for j in body.joints:
            if j.el.get("name") is not None:
                if j.name in jnames:
                    r.fail(j.el, f"joint name '{j.name}' is used twice")
                jnames.add(j.name)
    for body in r.bodies:
        for j in body.joints:
            if j.el.get("name") is None:
                j.name = _unique(j.name, jnames)
    link_of: list = []  # MuJoCo body index → the rbdgen link its children hang from
    arm: dict = {}

    def call(el, fn, *args, **kw):
        try:
            return fn(*args, **kw)
        except UnsupportedError as e:
            r.fail(el, e.message, UnsupportedError)
        except ValueError as e:
            r.fail(el, " ".join(str(e).split()))

    top = [i for i, x in enumerate(r.bodies) if x.parent < 0]
    for i, body in enumerate(r.bodies):
        parent = "world" if body.parent < 0 else link_of[body.parent]
        m, com, Ic = sp.inertia_parts(body.inertia)
        inert = dict(mass=m, com=com, inertia=0.5 * (Ic + Ic.T))
        joints = body.joints
        if floating_base and i == top[0]:
            if joints:
                r.fail(body.el, f"floating_base: the first top-level body '{body.name}' already has joints "
                                f"({', '.join(j.name for j in joints)}); an MJCF file gives a floating base with "
                                f"<freejoint/>", UnsupportedError)
            call(body.el, b.add_joint, _unique("root_joint", jnames), "floating", parent, body.name, **inert)
            link_of.append(body.name)
        elif not joints:
            call(body.el, b.add_fixed, _unique(f"{body.name}_fixed", jnames), parent, body.name, xyz=body.pos,
                 rotation=body.R, **inert)
            link_of.append(body.name)
        elif any(j.kind == "free" for j in joints):
            j = next(j for j in joints if j.kind == "free")
            if len(joints) > 1:
                r.fail(j.el, f"body '{body.name}' has a free joint and {len(joints) - 1} other joint(s); a free joint "
                             "moves its body alone")
            if body.parent >= 0:
                r.fail(j.el, f"a free joint in body '{body.name}', which is not a top-level body (its parent is "
                             f"'{r.bodies[body.parent].name}'): rbdgen takes free joints at the root only",
                       UnsupportedError)
            call(j.el, b.add_joint, j.name, "floating", parent, body.name, **inert)
            arm[j.name] = j.armature
            link_of.append(body.name)
        else:
            prev_pos = None
            for k, j in enumerate(joints):
                last = k == len(joints) - 1
                offset = last and bool(np.any(j.pos != 0))
                child = body.name if last and not offset else _unique(f"{body.name}/{j.name}", links)
                if prev_pos is None:  # the body's pose, then the anchor in it
                    xyz, R = body.pos + sp.mm(body.R, j.pos), body.R
                else:
                    xyz, R = j.pos - prev_pos, np.eye(3)
                if j.ref != 0.0:
                    if j.kind == "hinge":
                        R = sp.mm(R, sp.axis_angle_to_rot(j.axis, -j.ref))
                    else:
                        xyz = xyz + sp.mm(R, -j.ref * j.axis)
                kind = JOINT_KINDS[j.kind]
                kw = dict(xyz=xyz, rotation=R, lower=j.limits[0], upper=j.limits[1])
                if kind != "spherical":
                    kw["axis"] = j.axis
                if last and not offset:
                    kw.update(inert)
                call(j.el, b.add_joint, j.name, kind, parent, child, **kw)
                arm[j.name] = j.armature
                parent, prev_pos = child, j.pos
            if offset:  # the MuJoCo body's own frame, −anchor from the last joint's
                call(body.el, b.add_fixed, _unique(f"{body.name}_frame", jnames), parent, body.name,
                     xyz=-joints[-1].pos, **inert)
            link_of.append(body.name)
        for name, el, p, R in body.sites:
            if name not in links:
                links.add(name)
                call(el, b.add_fixed, _unique(f"{name}_site", jnames), body.name, name, xyz=p, rotation=R)
    for name, el, p, R in r.world_sites:
        if name and name not in links:
            links.add(name)
            call(el, b.add_fixed, _unique(f"{name}_site", jnames), "world", name, xyz=p, rotation=R)
    try:
        model = b.build(check_inertia=check_inertia)
    except ValueError as e:
        msg = " ".join(str(e).split()).replace("build(check_inertia=False)", "load_mjcf(..., check_inertia=False)")
        raise MJCFError(msg, file=r.path) from None
    given = {n: a for n, a in arm.items() if a and n in model.joint_names}
    return model.with_armature(given) if given else model


# ---- MuJoCo's qpos and qvel -------------------------------------------------------------------

def _arr(x, n, what):
    a = np.asarray(x, dtype=float)
    if a.ndim not in (1, 2) or a.shape[-1] != n:
        raise ValueError(f"{what}: expected shape ({n},) or (N, {n}), got {a.shape}")
    return a


def mujoco_qpos_to_q(model, qpos) -> np.ndarray:
    """MuJoCo's ``qpos`` → rbdgen's (and Pinocchio's) q: each free joint's ``[x y z qw qx qy qz]``
    becomes ``[x y z qx qy qz qw]`` and each ball joint's ``[qw qx qy qz]`` ``[qx qy qz qw]``;
    hinge and slide coordinates are the same numbers. One state ``(nq,)`` or a batch ``(N, nq)``.
    A model with continuous or planar joints (from a URDF) has no MuJoCo layout: refused."""
    qpos = _arr(qpos, model.nq, "qpos")
    out = qpos.copy()
    for i, t in enumerate(model.joint_types):
        s = model.q_start[i]
        if t == "floating":
            out[..., s + 3: s + 6], out[..., s + 6] = qpos[..., s + 4: s + 7], qpos[..., s + 3]
        elif t == "spherical":
            out[..., s: s + 3], out[..., s + 3] = qpos[..., s + 1: s + 4], qpos[..., s]
        elif t in ("continuous", "planar"):
            raise ValueError(f"joint '{model.joint_names[i]}' is {t}: MuJoCo has no such joint, so no qpos layout")
    return out


def q_to_mujoco_qpos(model, q) -> np.ndarray:
    """rbdgen's q → MuJoCo's ``qpos`` (the inverse of :func:`mujoco_qpos_to_q`)."""
    q = _arr(q, model.nq, "q")
    out = q.copy()
    for i, t in enumerate(model.joint_types):
        s = model.q_start[i]
        if t == "floating":
            out[..., s + 3], out[..., s + 4: s + 7] = q[..., s + 6], q[..., s + 3: s + 6]
        elif t == "spherical":
            out[..., s], out[..., s + 1: s + 4] = q[..., s + 3], q[..., s: s + 3]
        elif t in ("continuous", "planar"):
            raise ValueError(f"joint '{model.joint_names[i]}' is {t}: MuJoCo has no such joint, so no qpos layout")
    return out


def _free_rotations(model, q, i):
    s = model.q_start[i]
    quat = q[..., s + 3: s + 7]
    quat = quat / np.asarray(sp.norm(quat))[..., None]
    x, y, z, w = (quat[..., k] for k in range(4))
    R = np.stack([np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
                  np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
                  np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1)], -2)
    return R


def mujoco_qvel_to_v(model, q, qvel) -> np.ndarray:
    """MuJoCo's ``qvel`` → rbdgen's (Pinocchio's) v at configuration ``q`` (rbdgen's): a free
    joint's linear velocity is MuJoCo's in world axes and ours in the body's, ``v = Rᵀ·qvel``;
    angular velocities (free and ball joints) are in the body frame in both."""
    q = _arr(q, model.nq, "q")
    out = _arr(qvel, model.nv, "qvel").copy()
    for i, t in enumerate(model.joint_types):
        if t == "floating":
            s = model.v_start[i]
            R = _free_rotations(model, q, i)
            out[..., s: s + 3] = np.einsum("...ji,...j->...i", R, out[..., s: s + 3])
    return out


def v_to_mujoco_qvel(model, q, v) -> np.ndarray:
    """rbdgen's v → MuJoCo's ``qvel`` at configuration ``q`` (the inverse of
    :func:`mujoco_qvel_to_v`)."""
    q = _arr(q, model.nq, "q")
    out = _arr(v, model.nv, "v").copy()
    for i, t in enumerate(model.joint_types):
        if t == "floating":
            s = model.v_start[i]
            R = _free_rotations(model, q, i)
            out[..., s: s + 3] = np.einsum("...ij,...j->...i", R, out[..., s: s + 3])
    return out

