"""A :class:`RobotModel` built joint by joint: the place where a joint of any type is added with its
placement, for a program (tests, synthetic robots) or a loader of another format.

:func:`rbdgen.load_urdf` walks a URDF into the same kind of model; a format with joints URDF has
no word for (MJCF's ``ball``) adds them here. What each joint type means (q, v, motion subspace)
is :data:`rbdgen.model.JOINT_DIMS`'s and :class:`RobotModel`'s; the layouts are Pinocchio's:

=============  ==========================  ===========================  ====================
type           q                           v                            Pinocchio joint
=============  ==========================  ===========================  ====================
revolute       angle                       rate                         JointModelRevolute*
continuous     angle                       rate                         …RevoluteUnbounded*
prismatic      displacement                rate                         JointModelPrismatic*
spherical      quaternion x y z w          ω in the body frame          JointModelSpherical
planar         x y θ (Pinocchio: x y c s)  vx vy ω in the body frame    JointModelPlanar
floating       x y z, quaternion x y z w   [linear; angular], body      JointModelFreeFlyer
=============  ==========================  ===========================  ====================

A joint's placement ``xyz``, ``rotation`` is its frame at q = 0 in the parent link's frame
(Pinocchio's ``jointPlacement``, URDF's ``<origin>``); the child link's frame is the joint's frame
moved by q. A spherical joint turns about its frame's origin; a planar joint moves in its
frame's x-y plane (rotate the placement so that z is the plane's normal).

>>> b = ModelBuilder("arm")
>>> b.add_joint("shoulder", "spherical", "world", "upper", xyz=(0, 0, 0.3),
...             mass=2.0, com=(0, 0, 0.2), inertia=np.diag([0.02, 0.02, 0.004]))
0
>>> b.add_joint("elbow", "revolute", "upper", "fore", xyz=(0, 0, 0.4), axis=(0, 1, 0),
...             mass=1.0, com=(0, 0, 0.15), inertia=np.diag([0.01, 0.01, 0.002]))
1
>>> b.build()
RobotModel('arm', fixed base, nb=2, nq=5, nv=4)

A MuJoCo loader maps ``hinge`` → ``revolute`` (``continuous`` when unlimited, if it wants
Pinocchio's unbounded joint), ``slide`` → ``prismatic``, ``ball`` → ``spherical``, ``free`` →
``floating``; a body without joints → :meth:`ModelBuilder.add_fixed`. MuJoCo's qpos stores a
quaternion w x y z; ours, as Pinocchio's, x y z w.
"""
from __future__ import annotations

import math

import numpy as np

from .. import spatial as sp
from ..errors import UnsupportedError
from .model import JOINT_DIMS, LinkFrame, RobotModel, _frozen
from .urdf import inertia_problem

#: joint types whose motion is along or about ``axis``
_ONE_DOF = ("revolute", "continuous", "prismatic")


class ModelBuilder:
    """Collects joints (parents first) and builds a frozen :class:`RobotModel` (see the module
    docstring). Links are named; ``world`` names the fixed world link (``parent=world``).

    The order joints are added in is the order of q and v. Add them depth-first (each joint's
    parent is the last link added or one of its ancestors), as a URDF or MJCF document's tree
    walk gives them: rbdgen's kernels take any order with parents first, but Pinocchio's do
    not (its CRBA and derivatives take a joint's subtree for a contiguous range of v), so a
    model meant to equal Pinocchio's has its order."""

    def __init__(self, name: str, *, gravity=(0.0, 0.0, -9.81), world: str = "world", source: str | None = None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a model's name is a non-empty string, got {name!r}")
        g = np.asarray(gravity, dtype=float)
        if g.shape != (3,) or not np.all(np.isfinite(g)):
            raise ValueError(f"gravity must be 3 finite numbers, got {gravity!r}")
        self.name, self.gravity, self.world = name, g, world
        self.source = source if source is not None else f"<ModelBuilder {name}>"
        # link → (body it moves with, −1: the world; motion transform body frame → link frame)
        self._links: dict = {world: (-1, np.eye(6))}
        self._has_child: set = set()
        self._order: list = []            # links in the order added (the world's first)
        self._bodies: list = []           # per body: dict of the RobotModel fields
        self._merged: list = []

    # ---- adding ----------------------------------------------------------------------------------
    def add_joint(self, name: str, kind: str, parent: str, child: str, *, xyz=(0.0, 0.0, 0.0), rotation=None,
                  axis=None, mass: float = 0.0, com=(0.0, 0.0, 0.0), inertia=None, lower: float = math.nan,
                  upper: float = math.nan, velocity: float = math.nan, effort: float = math.nan) -> int:
        """Add link ``child``, moved relative to link ``parent`` by joint ``name`` of type ``kind``
        (a key of :data:`~rbdgen.model.JOINT_DIMS`), placed at ``xyz`` with axes ``rotation``
        (3×3, columns the joint frame's axes in the parent link's; default identity). ``axis``:
        the unit direction of a revolute, continuous or prismatic joint in its frame (normalised;
        none for the others). ``mass``, ``com`` (in the child link's frame) and ``inertia`` (3×3
        about the COM, the child link's axes) are the child link's own. Limits: one-DoF joints'
        position limits (``random_q`` draws within them), velocity and effort. Returns the body's
        index (its joint's order in q and v)."""
        if kind not in JOINT_DIMS:
            raise ValueError(f"joint '{name}': unknown joint type {kind!r} (known: {', '.join(JOINT_DIMS)})")
        body, X_bl = self._parent(name, parent)
        self._check_new(name, child)
        if kind in _ONE_DOF:
            if axis is None:
                raise ValueError(f"joint '{name}': a {kind} joint needs an axis")
            axis = self._vec(name, "axis", axis)
            n = sp.norm(axis)  # fixed-order sum, as the URDF loader's: the unit axis is printed into code
            if not n > 1e-12:
                raise ValueError(f"joint '{name}': zero axis {tuple(float(a) for a in axis)}")
            axis = axis / n
        elif axis is not None:
            raise ValueError(f"joint '{name}': a {kind} joint takes no axis (its frame fixes its motion)")
        else:
            axis = np.zeros(3)
        if kind == "floating" and body >= 0:
            # the free-flyer is a root joint, as load_urdf's (a free joint below a moving body is
            # possible in principle, but no robot has one and nothing checks it)
            raise UnsupportedError(f"joint '{name}': a floating joint must hang from the world "
                                   f"('{self.world}'), not from link '{parent}'", file=self.source)
        lims = [float(x) for x in (lower, upper, velocity, effort)]
        if kind not in _ONE_DOF:
            lims[:2] = [math.nan, math.nan]  # one pair of scalars cannot bound a multi-DoF joint's q
        elif lims[0] > lims[1]:
            raise ValueError(f"joint '{name}': lower limit {lims[0]:g} > upper {lims[1]:g}")
        X_joint = sp.mm(sp.pose_to_X(self._rot(name, rotation), self._vec(name, "xyz", xyz)), X_bl)
        I = self._inertia(name, mass, com, inertia)
        b = len(self._bodies)  # everything checked: record it
        self._bodies.append(dict(name=child, joint=name, kind=kind, parent=body, axis=axis, X_tree=X_joint,
                                 inertia=I, links=[child], limits=lims))
        self._add_link(parent, child, b, np.eye(6))
        return b

    def add_fixed(self, name: str, parent: str, child: str, *, xyz=(0.0, 0.0, 0.0), rotation=None,
                  mass: float = 0.0, com=(0.0, 0.0, 0.0), inertia=None) -> None:
        """Add link ``child`` welded to link ``parent`` by fixed joint ``name``: its inertia is
        lumped into the body ``parent`` moves with, and it stays a frame of that body (the frame
        kernels can select it)."""
        body, X_bl = self._parent(name, parent)
        self._check_new(name, child)
        X_child = sp.mm(sp.pose_to_X(self._rot(name, rotation), self._vec(name, "xyz", xyz)), X_bl)
        I = self._inertia(name, mass, com, inertia)
        if body >= 0:
            rec = self._bodies[body]
            rec["inertia"] = rec["inertia"] + sp.transform_inertia(X_child, I)
            rec["links"].append(child)
        self._add_link(parent, child, body, X_child)
        self._merged.append((child, name, self._bodies[body]["name"] if body >= 0 else self.world))

    # ---- the model -------------------------------------------------------------------------------
    def build(self, *, check_inertia: bool = True) -> RobotModel:
        """The :class:`RobotModel`. A body whose lumped inertia is not physical (not positive
        semi-definite about its COM, or breaking the triangle inequality) is a ``ValueError``
        unless ``check_inertia=False``."""
        if not self._bodies:
            raise ValueError(f"model '{self.name}' has no movable joint")
        if check_inertia:
            for rec in self._bodies:
                m, _, Ic = sp.inertia_parts(rec["inertia"])
                why = inertia_problem(m, Ic)
                if why:
                    raise ValueError(f"body '{rec['name']}' (links {', '.join(rec['links'])}): lumped {why} "
                                     f"(build(check_inertia=False) builds it anyway)")
        q_start, v_start, nq, nv = [], [], 0, 0
        for rec in self._bodies:
            q_start.append(nq)
            v_start.append(nv)
            nq += JOINT_DIMS[rec["kind"]][0]
            nv += JOINT_DIMS[rec["kind"]][1]
        frames, leaves = [], []
        for link in self._order:
            body, X_bl = self._links[link]
            # X_bl = plux(E, r): the link's axes in body coordinates are Eᵀ, its origin r
            E = X_bl[:3, :3]
            rx = sp.mm(-E.T, X_bl[3:, :3])
            frames.append(LinkFrame(link, body, _frozen(E.T), _frozen([rx[2, 1], rx[0, 2], rx[1, 0]])))
            if body >= 0 and link not in self._has_child:
                leaves.append(link)
        lim = np.array([rec["limits"] for rec in self._bodies], dtype=float).reshape(-1, 4)
        kinds = tuple(rec["kind"] for rec in self._bodies)
        return RobotModel(
            name=self.name,
            source=self.source,
            floating_base=kinds[0] == "floating",
            body_names=tuple(rec["name"] for rec in self._bodies),
            joint_names=tuple(rec["joint"] for rec in self._bodies),
            joint_types=kinds,
            parent=tuple(rec["parent"] for rec in self._bodies),
            axis=_frozen(np.array([rec["axis"] for rec in self._bodies]).reshape(-1, 3)),
            X_tree=_frozen(np.array([rec["X_tree"] for rec in self._bodies])),
            inertia=_frozen(np.array([rec["inertia"] for rec in self._bodies])),
            q_start=tuple(q_start),
            v_start=tuple(v_start),
            nq=nq,
            nv=nv,
            lower=_frozen(lim[:, 0]),
            upper=_frozen(lim[:, 1]),
            velocity_limit=_frozen(lim[:, 2]),
            effort_limit=_frozen(lim[:, 3]),
            gravity=_frozen(self.gravity),
            merged_fixed=tuple(self._merged),
            world_name=self.world,
            link_frames=tuple(frames),
            leaf_links=tuple(leaves),
        )

    # ---- checks ----------------------------------------------------------------------------------
    def _parent(self, joint, parent):
        if parent not in self._links:
            raise ValueError(f"joint '{joint}': parent link '{parent}' is not defined yet (add parents first; "
                             f"the world is '{self.world}')")
        return self._links[parent]

    def _add_link(self, parent, child, body, X_bl):
        self._has_child.add(parent)
        self._links[child] = (body, X_bl)
        self._order.append(child)

    def _check_new(self, joint, child):
        if not isinstance(joint, str) or not joint or not isinstance(child, str) or not child:
            raise ValueError(f"joint and link names are non-empty strings, got {joint!r}, {child!r}")
        if child in self._links:
            raise ValueError(f"joint '{joint}': link '{child}' is already defined")
        if any(rec["joint"] == joint for rec in self._bodies) or any(m[1] == joint for m in self._merged):
            raise ValueError(f"duplicate joint name '{joint}'")

    @staticmethod
    def _vec(joint, what, x):
        a = np.asarray(x, dtype=float)
        if a.shape != (3,) or not np.all(np.isfinite(a)):
            raise ValueError(f"joint '{joint}': {what} must be 3 finite numbers, got {x!r}")
        return a

    @staticmethod
    def _rot(joint, R):
        if R is None:
            return np.eye(3)
        R = np.asarray(R, dtype=float)
        if R.shape != (3, 3) or not np.all(np.isfinite(R)) or np.max(np.abs(sp.mm(R.T, R) - np.eye(3))) > 1e-9 \
                or np.linalg.det(R) < 0:
            raise ValueError(f"joint '{joint}': rotation must be a 3×3 rotation matrix (orthonormal, det +1)")
        return R

    def _inertia(self, joint, mass, com, inertia):
        mass = float(mass)
        if not (math.isfinite(mass) and mass >= 0.0):
            raise ValueError(f"joint '{joint}': the link's mass must be finite and ≥ 0, got {mass!r}")
        I = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, dtype=float)
        if I.shape != (3, 3) or not np.all(np.isfinite(I)) or np.max(np.abs(I - I.T)) > 1e-12 * max(1.0, np.max(np.abs(I))):
            raise ValueError(f"joint '{joint}': the link's inertia must be a symmetric 3×3 matrix of finite numbers")
        return sp.spatial_inertia(mass, self._vec(joint, "com", com), I)
