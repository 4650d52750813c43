"""RobotModel: the frozen kinematic tree every other part of rbdgen works from."""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import numpy as np

from .. import spatial as sp
from ..errors import RbdgenWarning, UnsupportedError, URDFError
from .coupled import CoupledModel
from .urdf import MAX_INERTIA, MAX_MIMIC_MULTIPLIER, MAX_MIMIC_OFFSET, URDF, inertia_problem, read_urdf

#: joint types a body can have, with (nq, nv). ``spherical``: a ball joint, q a quaternion
#: (x y z w), v the angular velocity in the body frame (Pinocchio's JointModelSpherical).
#: ``planar``: motion in the joint frame's x-y plane, q = (x, y, θ), v = (vx, vy, ω) in the body
#: frame (Pinocchio's JointModelPlanar, whose q stores (x, y, cos θ, sin θ): see to_pinocchio_q).
JOINT_DIMS = {"revolute": (1, 1), "continuous": (1, 1), "prismatic": (1, 1), "floating": (7, 6),
              "spherical": (4, 3), "planar": (3, 3)}
#: joint types whose q is not their tangent space's coordinates (a quaternion, or a position in the
#: parent's axes moved by a body-frame velocity): derivatives along q differ from the kernels'
#: tangent derivatives by :func:`rbdgen.autodiff.tangent_map`
CURVED_JOINTS = ("floating", "spherical", "planar")
_Z = np.array([0.0, 0.0, 1.0])


def _frozen(a) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class LinkFrame:
    """A URDF link as an operational frame: the body it moves with (``-1``: the world) and its
    constant placement in that body, ``bMf = [R p; 0 1]`` (a body's own link: the identity; a link
    merged by fixed joints: their composed placement)."""

    name: str
    body: int
    R: np.ndarray   # (3, 3) frame axes in body coordinates
    p: np.ndarray   # (3,) frame origin in body coordinates

    @property
    def X(self) -> np.ndarray:
        """The motion transform body → frame (6×6, Featherstone order)."""
        return sp.plux(self.R.T, self.p)


@dataclass(frozen=True)
class RobotModel:
    """A rigid-body tree in topological order (``parent[i] < i``; ``-1`` is the fixed world).

    Body ``i`` moves with joint ``i``; its frame is the frame of the joint's child link. The
    layout of q, v, a and τ matches Pinocchio: fixed base, joints in depth-first order of the URDF
    tree; floating base, a free-flyer first with ``q = [x y z qx qy qz qw]`` and
    ``v = [linear; angular]`` in the base frame. A ``continuous`` joint takes one angle. A
    ``spherical`` joint takes a quaternion ``[qx qy qz qw]`` and its v is the angular velocity in
    the body frame; a ``planar`` joint takes ``[x y θ]`` (one angle, as a continuous joint: the
    only place where our q differs from Pinocchio's, which stores ``cos θ, sin θ``) and its v is
    ``[vx vy ω]`` in the body frame. :mod:`rbdgen.model.builder` adds joints of every type.
    """

    name: str
    source: str
    floating_base: bool
    body_names: tuple[str, ...]
    joint_names: tuple[str, ...]
    joint_types: tuple[str, ...]
    parent: tuple[int, ...]
    axis: np.ndarray          # (nb, 3) unit joint axes in the body frame (zeros for floating, spherical, planar)
    X_tree: np.ndarray        # (nb, 6, 6) parent-body frame → joint frame at q = 0
    inertia: np.ndarray       # (nb, 6, 6) spatial inertia about the body frame origin
    q_start: tuple[int, ...]
    v_start: tuple[int, ...]
    nq: int
    nv: int
    lower: np.ndarray         # (nb,) position limits (NaN: none)
    upper: np.ndarray
    velocity_limit: np.ndarray
    effort_limit: np.ndarray
    gravity: np.ndarray       # (3,) in world coordinates
    merged_fixed: tuple[tuple[str, str, str], ...]  # (link, joint, merged into: body or "world")
    ignored_mimic: tuple[str, ...] = ()   # mimic joints loaded as ordinary joints
    world_name: str = "world"
    #: every URDF link as a frame, in depth-first URDF order
    link_frames: tuple[LinkFrame, ...] = ()
    #: the URDF's leaf links that move (tool flanges, feet, fingertips, sensor frames)
    leaf_links: tuple[str, ...] = ()
    #: the frames the frame and contact kernels are generated for (link names; none by default,
    #: and then those kernels are left out). See :meth:`with_frames`.
    frames: tuple[str, ...] = ()
    #: the rigid constraints (rbdgen.Contact "3d"/"6d", rbdgen.Loop) the constrained_fd kernel is
    #: generated for (none by default, and then it is left out). See :meth:`with_constraints`.
    constraints: tuple = ()
    #: (nv,) rotor inertia of each DOF ("armature", kg m² or kg), added to M's diagonal by every
    #: kernel, as Pinocchio's ``model.armature`` and MuJoCo's ``armature``: rnea adds
    #: armature·q̈ to τ, aba/minv add it to the articulated-body D_i. Zeros (the default) leave
    #: every kernel as it was. See :meth:`with_armature` and ``load_urdf(armature=...)``.
    armature: np.ndarray | None = None

    def __post_init__(self):
        # None (the default, and models pickled before the field existed: the class default) → zeros
        object.__setattr__(self, "armature", _checked_armature(self.armature, self.nv))

    # ---- armature ------------------------------------------------------------------------
    def with_armature(self, armature) -> "RobotModel":
        """This model with another armature: an ``(nv,)`` array (q̇'s layout, a free-flyer's six
        entries included), one number for every DOF but a free-flyer's, or a dict joint name →
        value (the joints named; the others keep theirs). See :func:`load_urdf`."""
        return replace(self, armature=armature_vector(self, armature, base=self.armature))

    def joint_armature(self, i: int) -> np.ndarray:
        """The armature of body ``i``'s DOFs, ``(nv_i,)``."""
        arm = self.armature if self.armature is not None else np.zeros(self.nv)
        return arm[self.v_slice(i)]

    # ---- frames --------------------------------------------------------------------------
    @property
    def nf(self) -> int:
        return len(self.frames)

    def frame(self, name: str) -> LinkFrame:
        """The :class:`LinkFrame` of a URDF link; an unknown name is a ``ValueError`` naming
        the links there are."""
        for f in self.link_frames:
            if f.name == name:
                return f
        raise ValueError(_unknown_frame(self, name))

    def frame_index(self, name: str) -> int:
        """Position of ``name`` in :attr:`frames` (the selected frames)."""
        if not isinstance(name, str):
            raise ValueError(f"a frame is named by its URDF link name (a string), got {type(name).__name__}")
        try:
            return self.frames.index(name)
        except ValueError:
            self.frame(name)  # not a link at all: that error
            raise ValueError(f"frame '{name}' was not selected for this model (selected: "
                             f"{', '.join(self.frames) or 'none'}); load with model.with_frames([...]) "
                             f"or build(model, frames=[...])") from None

    def with_frames(self, names) -> "RobotModel":
        """This model with ``names`` (URDF link names, in the order given; ``"leaves"``: the
        URDF's moving leaf links) as its selected frames: what the frame and contact kernels are
        generated for."""
        return replace(self, frames=_check_frames(self, names))

    def with_constraints(self, constraints) -> "RobotModel":
        """This model with ``constraints`` (rigid :class:`~rbdgen.Contact` ``"3d"``/``"6d"`` and
        :class:`~rbdgen.Loop`, in order) as what the ``constrained_fd`` kernel is generated for;
        their frames are added to the selected frames (after those selected, in the order first
        named) when not there already. An empty list removes them."""
        from .constraints import constraint_slots

        cons = _check_constraints(self, constraints)
        frames = list(self.frames)
        for f in constraint_slots(cons):
            if f not in frames:
                frames.append(f)
        return replace(self, constraints=cons, frames=tuple(frames))

    @property
    def nc(self) -> int:
        """Number of constraints ``constrained_fd`` is generated for."""
        return len(self.constraints)

    # ---- derived sizes -------------------------------------------------------------------
    @property
    def nb(self) -> int:
        return len(self.parent)

    def nq_joint(self, i: int) -> int:
        return JOINT_DIMS[self.joint_types[i]][0]

    def nv_joint(self, i: int) -> int:
        return JOINT_DIMS[self.joint_types[i]][1]

    def children(self, i: int) -> list[int]:
        return [k for k in range(self.nb) if self.parent[k] == i]

    def subtree(self, i: int) -> list[int]:
        """Bodies in the subtree rooted at i (i first, topological order)."""
        out = [i]
        for k in range(i + 1, self.nb):
            if self.parent[k] in out:
                out.append(k)
        return out

    def ancestors(self, i: int) -> list[int]:
        """i and its ancestors, from i up to the root."""
        out = []
        while i >= 0:
            out.append(i)
            i = self.parent[i]
        return out

    def common_ancestor(self, a: int, b: int) -> int:
        """The deepest body that is an ancestor of (or equal to) both a and b; -1: the world."""
        anc = set(self.ancestors(a))
        while b >= 0 and b not in anc:
            b = self.parent[b]
        return b

    def path_down(self, c: int, b: int) -> list[int]:
        """Bodies from c (exclusive; -1: the world) down to its descendant b (inclusive), top-down."""
        out = []
        while b != c:
            out.append(b)
            b = self.parent[b]
        return out[::-1]

    @property
    def depth(self) -> tuple[int, ...]:
        """Tree level of each body (root bodies: 0)."""
        d: list[int] = []
        for i, p in enumerate(self.parent):
            d.append(0 if p < 0 else d[p] + 1)
        return tuple(d)

    @property
    def total_mass(self) -> float:
        total = 0.0  # left to right on every Python (the builtin sum compensates from 3.12 on)
        for I in self.inertia:
            total += float(I[5, 5])
        return total

    def motion_subspace(self, i: int) -> np.ndarray:
        """S_i (6 × nv_i): maps joint velocity to body spatial velocity (Featherstone order)."""
        t = self.joint_types[i]
        if t == "floating":
            # v = [linear; angular] (Pinocchio) → spatial motion [ω; v]
            S = np.zeros((6, 6))
            S[:3, 3:] = np.eye(3)
            S[3:, :3] = np.eye(3)
            return S
        if t == "spherical":
            # v = ω in the body frame (Pinocchio's JointMotionSubspaceSphericalTpl: [0; I] in its
            # [linear; angular] order) → [I; 0] in Featherstone's [ω; v]
            S = np.zeros((6, 3))
            S[:3, :] = np.eye(3)
            return S
        if t == "planar":
            # v = (vx, vy, ω): the body's velocity along its own x and y and its rate about z, all
            # in the body frame (Pinocchio's JointMotionSubspacePlanarTpl, [e_x e_y 0; 0 0 e_z] in
            # its [linear; angular] order). Featherstone's planar joint (RBDA Table 4.1) takes
            # v = q̇ with x, y along the joint frame's axes, so its S turns with θ; in the body
            # frame S is constant: structural zeros and ones the kernels prune
            S = np.zeros((6, 3))
            S[3, 0] = S[4, 1] = S[2, 2] = 1.0
            return S
        S = np.zeros((6, 1))
        if t == "prismatic":
            S[3:, 0] = self.axis[i]
        else:
            S[:3, 0] = self.axis[i]
        return S

    def joint_transform(self, i: int, qi) -> np.ndarray:
        """X_J(q_i): joint frame at q = 0 → body frame (motion transform)."""
        t = self.joint_types[i]
        if t == "floating":
            return sp.pose_to_X(sp.quat_to_rot(qi[3:7]), qi[0:3])
        if t == "spherical":
            return sp.pose_to_X(sp.quat_to_rot(qi[0:4]), np.zeros(3))
        if t == "planar":
            # the body frame at (x, y, 0) in the joint frame, turned by θ about z (Pinocchio's
            # JointDataPlanar: M = (Rz(θ), (x, y, 0)))
            return sp.pose_to_X(sp.axis_angle_to_rot(_Z, qi[2]), np.array([qi[0], qi[1], 0.0]))
        if t == "prismatic":
            return sp.plux(np.eye(3), self.axis[i] * qi[0])
        return sp.pose_to_X(sp.axis_angle_to_rot(self.axis[i], qi[0]), np.zeros(3))

    def q_slice(self, i: int) -> slice:
        return slice(self.q_start[i], self.q_start[i] + self.nq_joint(i))

    def v_slice(self, i: int) -> slice:
        return slice(self.v_start[i], self.v_start[i] + self.nv_joint(i))

    # ---- configurations ------------------------------------------------------------------
    def neutral(self) -> np.ndarray:
        q = np.zeros(self.nq)
        for i, t in enumerate(self.joint_types):
            if t == "floating":  # identity quaternion (x, y, z, w) = (0, 0, 0, 1)
                q[self.q_start[i] + 6] = 1.0
            elif t == "spherical":
                q[self.q_start[i] + 3] = 1.0
        return q

    def random_q(self, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """Random configurations within the joint limits (unit quaternion for a floating base and
        a spherical joint; a planar joint's x, y in (−1, 1) m and θ in (−π, π))."""
        shape = () if n is None else (n,)
        q = np.zeros(shape + (self.nq,))
        for i, t in enumerate(self.joint_types):
            s = self.q_start[i]
            if t == "floating":
                q[..., s : s + 3] = rng.uniform(-1.0, 1.0, shape + (3,))
                quat = rng.normal(size=shape + (4,))
                q[..., s + 3 : s + 7] = quat / np.asarray(sp.norm(quat))[..., None]
            elif t == "spherical":
                quat = rng.normal(size=shape + (4,))
                q[..., s : s + 4] = quat / np.asarray(sp.norm(quat))[..., None]
            elif t == "planar":
                q[..., s : s + 2] = rng.uniform(-1.0, 1.0, shape + (2,))
                q[..., s + 2] = rng.uniform(-math.pi, math.pi, shape)
            else:
                lo, hi = float(self.lower[i]), float(self.upper[i])
                if t == "continuous" or not (math.isfinite(lo) and math.isfinite(hi)):
                    lo, hi = (-math.pi, math.pi) if t != "prismatic" else (-0.5, 0.5)
                elif t == "revolute" and hi - lo > 2.0 * math.pi:  # hi − lo may be inf: no error
                    # limits wider than a turn hold every orientation: one turn of them, the
                    # continuous joint's (−π, π) where it lies within them (limits of ±1e308 made
                    # uniform(lo, hi) overflow; a draw of 1e300 rad is no state a robot reaches)
                    lo = min(max(lo, -math.pi), hi - 2.0 * math.pi)
                    hi = lo + 2.0 * math.pi
                q[..., s] = rng.uniform(lo, hi, shape)
        return q

    def integrate(self, q, dv) -> np.ndarray:
        """q ⊕ dv, Pinocchio's ``integrate``: joints add, the free-flyer moves by the body-frame
        twist ``dv[:6] = [linear; angular]`` through the SE(3) exponential (q · exp(dv)), a
        spherical joint by the body-frame rotation exp(ω) (R · exp(ω)), a planar joint by the
        SE(2) exponential of its body-frame (vx, vy, ω) (Pinocchio's SpecialEuclideanOperation<2>:
        θ + ω, and the position moves by R(θ)·V(ω)·(vx, vy))."""
        q = np.asarray(q, dtype=float)
        dv = np.asarray(dv, dtype=float)
        if q.ndim == 2:
            return np.stack([self.integrate(a, b) for a, b in zip(q, dv)])
        out = q.copy()
        for i, t in enumerate(self.joint_types):
            qs, vs = self.q_slice(i), self.v_slice(i)
            if t == "floating":
                R0 = sp.quat_to_rot(q[qs][3:7])
                dR, dp = sp.se3_exp(dv[vs][:3], dv[vs][3:])
                out[qs] = np.concatenate([q[qs][:3] + sp.mm(R0, dp), sp.rot_to_quat(sp.mm(R0, dR))])
            elif t == "spherical":
                # u/|u| ⊗ exp(ω/2) as quaternions, Pinocchio's SpecialOrthogonalOperation<3>: the
                # same sign as Pinocchio's result (the free-flyer's, through rot_to_quat, has w ≥ 0)
                out[qs] = _quat_mul(q[qs] / sp.norm(q[qs]), _quat_exp(dv[vs]))
            elif t == "planar":
                # SE(2) ⊂ SE(3): the twist (vx, vy, 0; 0, 0, ω) moves the body by (Rz(ω), V·(vx, vy, 0))
                x, y, th = q[qs]
                _, dp = sp.se3_exp(np.array([dv[vs][0], dv[vs][1], 0.0]), np.array([0.0, 0.0, dv[vs][2]]))
                c, s = math.cos(th), math.sin(th)
                out[qs] = [x + c * dp[0] - s * dp[1], y + s * dp[0] + c * dp[1], th + dv[vs][2]]
            else:
                out[qs] = q[qs] + dv[vs]
        return out

    def nq_pinocchio_joint(self, i: int) -> int:
        """Pinocchio's nq of joint ``i``: ours, but a continuous joint's angle is a (cos, sin) pair
        there, and a planar joint's (x, y, θ) is (x, y, cos θ, sin θ)."""
        return self.nq_joint(i) + (1 if self.joint_types[i] in ("continuous", "planar") else 0)

    def to_pinocchio_q(self, q) -> np.ndarray:
        """Our q → Pinocchio's (a continuous joint's angle becomes its (cos, sin) pair, a planar
        joint's (x, y, θ) becomes (x, y, cos θ, sin θ))."""
        q = np.asarray(q, dtype=float)
        parts = []
        for i, t in enumerate(self.joint_types):
            qi = q[..., self.q_slice(i)]
            if t == "continuous":
                parts += [np.cos(qi), np.sin(qi)]
            elif t == "planar":
                parts += [qi[..., :2], np.cos(qi[..., 2:]), np.sin(qi[..., 2:])]
            else:
                parts.append(qi)
        return np.concatenate(parts, axis=-1)

    def from_pinocchio_q(self, qp) -> np.ndarray:
        """Pinocchio's q → ours (a continuous joint's (cos, sin) pair becomes its angle, and so
        does a planar joint's)."""
        qp = np.asarray(qp, dtype=float)
        parts, k = [], 0
        for i, t in enumerate(self.joint_types):
            if t == "continuous":
                parts.append(np.arctan2(qp[..., k + 1 : k + 2], qp[..., k : k + 1]))
                k += 2
            elif t == "planar":
                parts += [qp[..., k : k + 2], np.arctan2(qp[..., k + 3 : k + 4], qp[..., k + 2 : k + 3])]
                k += 4
            else:
                n = self.nq_joint(i)
                parts.append(qp[..., k : k + n])
                k += n
        return np.concatenate(parts, axis=-1)

    @property
    def nq_pinocchio(self) -> int:
        return sum(self.nq_pinocchio_joint(i) for i in range(self.nb))

    def __repr__(self) -> str:
        base = "floating" if self.floating_base else "fixed"
        return f"RobotModel({self.name!r}, {base} base, nb={self.nb}, nq={self.nq}, nv={self.nv})"


def _quat_mul(a, b) -> np.ndarray:
    """The Hamilton product a ⊗ b of quaternions stored (x, y, z, w)."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw,
                     aw * bw - ax * bx - ay * by - az * bz])


def _quat_exp(w) -> np.ndarray:
    """The unit quaternion (x, y, z, w) of the rotation by the vector w (angle |w| about w/|w|)."""
    th = float(sp.norm(w))
    # sin(θ/2)/θ, its Taylor series near 0 (error below 1e-33 there)
    k = 0.5 - th * th / 48.0 if th < 1e-8 else math.sin(0.5 * th) / th
    return np.array([k * w[0], k * w[1], k * w[2], math.cos(0.5 * th)])


def _unknown_frame(model, name) -> str:
    known = [f.name for f in model.link_frames]
    shown = ", ".join(known[:12]) + (f", … ({len(known)} links)" if len(known) > 12 else "")
    where = f"{model.source}: " if getattr(model, "source", None) else ""
    return f"{where}unknown frame {name!r}: frames are URDF link names ({shown})"


def _check_frames(model, names) -> tuple:
    if names == "leaves":
        return tuple(model.leaf_links)
    if isinstance(names, str):
        names = [names]
    try:
        names = list(names)
    except TypeError:
        raise ValueError(f"frames must be a list of URDF link names, got {type(names).__name__}") from None
    for n in names:
        if not isinstance(n, str):
            raise ValueError(f"frames must be URDF link names (strings), got {n!r}")
        model.frame(n)
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"frames: {', '.join(map(repr, dup))} given more than once")
    return tuple(names)


def _check_constraints(model, constraints) -> tuple:
    from .constraints import Contact, Loop, check_constraints

    if constraints is None or (isinstance(constraints, (list, tuple)) and not constraints):
        return ()
    cons = check_constraints(model, constraints)
    for c in cons:
        if isinstance(c, Contact) and c.model not in ("3d", "6d"):
            raise ValueError(f"constraints: Contact({c.frame!r}, {c.model!r}): a generated constrained_fd takes "
                             f"rigid contacts (3d, 6d) and loops; Fijany's {c.model} model is solved at run time "
                             f"by kern.contact_fd")
        if isinstance(c, Loop) and c.model == "6d" and c.stabilised:
            raise ValueError(f"constraints: Loop({c.frame_a!r}, {c.frame_b!r}, '6d', baumgarte={c.baumgarte}): a generated "
                             f"constrained_fd stabilises 3d loops (its 6d error, log₆, needs functions the kernels do "
                             f"not have); kern.contact_fd takes 6d loops with Baumgarte gains at run time")
    return tuple(cons)


def load_urdf(
    path,
    floating_base: bool = False,
    *,
    gravity=(0.0, 0.0, -9.81),
    mimic: str = "couple",
    check_inertia: bool = True,
    armature=None,
):
    """Load a URDF into a :class:`RobotModel`.

    Fixed joints are merged into their parent body (inertia lumped, transforms composed).
    ``floating_base=True`` puts a free-flyer between the world and the URDF's root link, as
    Pinocchio's ``buildModelFromUrdf(path, JointModelFreeFlyer())`` does.

    ``mimic``: what a ``<mimic>`` joint means.

    * ``"couple"`` (default): the follower moves with its leader (``q_F = m·q_L + o``); nq and nv
      count the free joints only, as Pinocchio's ``buildModelFromUrdf(..., mimic=True)`` does.
      Returns a :class:`~rbdgen.model.coupled.CoupledModel`. This is what the URDF says and what
      the hardware does (the Franka Panda's fingers are one motor).
    * ``"independent"``: each mimic joint is an ordinary actuated joint (Pinocchio's parser
      without ``mimic=True``): other dynamics, for tools that actuate fingers separately.
    * ``"refuse"``: an error naming the joint (``"error"`` is accepted as the old name).

    Inertias: the dynamics sees each body's lumped inertia (its link plus the links merged into
    it by fixed joints). A body whose lumped inertia is not physical (not positive semi-definite
    about its COM, or violating the triangle inequality) is an error unless
    ``check_inertia=False``; a link whose own inertia is not physical but whose body's lumped
    inertia is (common in real URDFs: sensor frames with placeholder values) gives an
    :class:`RbdgenWarning` naming the link.

    ``armature``: the rotor inertia of each DOF, added to the mass matrix's diagonal by every
    kernel (:attr:`RobotModel.armature`; Pinocchio's ``model.armature``, MuJoCo's ``armature``).
    Either a dict joint name → value (those joints' DOFs; the others keep the URDF's), one number
    (every DOF but a free-flyer's), or an array of the model's nv (q̇'s layout, a free-flyer's six
    entries included; with coupled mimic joints the free joints' DOFs, as nv counts them). Values
    are finite and ≥ 0. The URDF may give a joint's armature itself, as an extension
    ``<dynamics armature="0.1"/>`` in its ``<joint>`` (urdfdom and Pinocchio ignore the attribute);
    the argument overrides it.
    """
    if mimic == "error":
        mimic = "refuse"
    if mimic not in MIMIC_MODES:
        raise ValueError(f"mimic must be one of {', '.join(map(repr, MIMIC_MODES))}, not {mimic!r}")
    for what, flag in (("floating_base", floating_base), ("check_inertia", check_inertia)):
        if not isinstance(flag, (bool, np.bool_)):  # "no" is truthy: it built a floating base
            raise ValueError(f"{what} must be True or False, got {flag!r}")
    floating_base, check_inertia = bool(floating_base), bool(check_inertia)
    try:
        g = np.asarray(gravity, dtype=float)
    except (TypeError, ValueError):
        g = None
    if g is None or g.shape != (3,) or not np.all(np.isfinite(g)):
        raise ValueError(f"gravity must be 3 finite numbers (x, y, z in m/s²), got {gravity!r}")
    if np.any(np.abs(g) > MAX_GRAVITY):
        raise ValueError(f"gravity {tuple(float(x) for x in g)} is out of range: components above {MAX_GRAVITY:g} m/s² "
                         f"are not a robot's (and would overflow the kernels' arithmetic)")
    urdf = read_urdf(path)
    tree = _build(urdf, floating_base, g, mimic, check_inertia)
    tree = _urdf_armature(urdf, tree)
    if mimic != "couple" or not tree.ignored_mimic:
        return tree if armature is None else tree.with_armature(armature)
    cm = _couple(urdf, tree)
    return cm if armature is None else cm.with_armature(armature)


MIMIC_MODES = ("couple", "independent", "refuse")
#: the largest gravity component accepted (m/s²): 1e5 g, beyond any robot's world, and small
#: enough that no product of the kernels (mass × gravity × length, …) overflows float64
MAX_GRAVITY = 1e6


# ---- armature -----------------------------------------------------------------------------------

def is_number(x) -> bool:
    """A single real number (not a bool, not an array of one)."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _checked_armature(arm, nv: int) -> np.ndarray:
    """``arm`` as a frozen (nv,) array of finite values in [0, MAX_INERTIA]; None → zeros."""
    if arm is None:
        return _frozen(np.zeros(nv))
    try:
        a = np.array(arm, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"armature must be {nv} numbers (one per DOF), got {arm!r}") from None
    if a.shape != (nv,):
        raise ValueError(f"armature must have shape ({nv},) (one value per DOF, q̇'s layout), got {a.shape}")
    bad = [k for k in range(nv) if not (np.isfinite(a[k]) and 0.0 <= a[k] <= MAX_INERTIA)]
    if bad:
        raise ValueError(f"armature[{bad[0]}] = {float(a[bad[0]])!r}: a rotor inertia is finite, ≥ 0 and at most "
                         f"{MAX_INERTIA:g} (kg m²)")
    return _frozen(a + 0.0)  # -0.0 → 0.0


def armature_vector(model, armature, base=None) -> np.ndarray:
    """The (nv,) armature of ``model`` (a RobotModel) that ``armature`` asks for: an array of nv,
    one number for every DOF but a free-flyer's, or a dict joint name → value (the joints named;
    the other DOFs keep ``base``'s, zeros if None)."""
    out = np.zeros(model.nv) if base is None else np.array(base, dtype=float)
    if isinstance(armature, dict):
        names = {n: b for b, n in enumerate(model.joint_names)}
        for name, value in armature.items():
            if name not in names:
                shown = ", ".join(model.joint_names[:12]) + (", …" if model.nb > 12 else "")
                raise ValueError(f"armature: unknown joint {name!r} (the model's joints with DOFs: {shown})")
            if not is_number(value):
                raise ValueError(f"armature[{name!r}] must be a number, got {value!r}")
            out[model.v_slice(names[name])] = float(value)
    elif is_number(armature):
        for b, t in enumerate(model.joint_types):
            if t != "floating":
                out[model.v_slice(b)] = float(armature)
    else:
        out = armature
    return _checked_armature(out, model.nv)


def _urdf_armature(urdf: URDF, tree: RobotModel) -> RobotModel:
    """``tree`` with the armatures the URDF gives (``<joint><dynamics armature="…"/>``), if any."""
    given = {n: j.armature for n, j in urdf.joints.items() if j.armature and n in tree.joint_names}
    return tree.with_armature(given) if given else tree


def _couple(urdf: URDF, tree: RobotModel):
    """The :class:`CoupledModel` of a tree whose mimic joints were loaded as ordinary joints."""
    body = {name: i for i, name in enumerate(tree.joint_names)}
    one_dof = ("revolute", "continuous", "prismatic")

    def fail(msg):
        raise UnsupportedError(msg, file=urdf.path)

    mimic = {}
    for name in tree.ignored_mimic:
        j = urdf.joints[name]
        lead, mult, off = j.mimic
        seen = [name]
        while urdf.joints[lead].mimic is not None and urdf.joints[lead].type != "fixed":  # a chain of mimics
            if lead in seen:
                fail(f"joint '{name}': its <mimic> chain {' -> '.join(seen + [lead])} is a cycle")
            seen.append(lead)
            m2, o2 = urdf.joints[lead].mimic[1], urdf.joints[lead].mimic[2]
            lead, mult, off = urdf.joints[lead].mimic[0], mult * m2, mult * o2 + off
            if abs(mult) > MAX_MIMIC_MULTIPLIER or abs(off) > MAX_MIMIC_OFFSET:
                fail(f"joint '{name}': its <mimic> chain {' -> '.join(seen + [lead])} multiplies to q = {mult:g}·q_L "
                     f"+ {off:g}, out of range (a multiplier above {MAX_MIMIC_MULTIPLIER:g} or an offset above "
                     f"{MAX_MIMIC_OFFSET:g} is not a robot's coupling)")
        if lead not in body:
            fail(f"joint '{name}': mimics '{lead}', which is fixed or not a joint of the tree")
        if tree.joint_types[body[name]] not in one_dof or tree.joint_types[body[lead]] not in one_dof:
            fail(f"joint '{name}': mimic coupling needs one-degree-of-freedom joints (revolute, continuous, "
                 f"prismatic); '{name}' is {tree.joint_types[body[name]]}, '{lead}' is {tree.joint_types[body[lead]]}")
        mimic[body[name]] = (body[lead], float(mult), float(off))
    return CoupledModel(tree, mimic)


def _link_inertia(link) -> np.ndarray:
    if link.inertial is None:
        return np.zeros((6, 6))
    it = link.inertial
    R = sp.rpy_to_rot(it.rpy)
    return sp.spatial_inertia(it.mass, it.xyz, sp.mm(sp.mm(R, it.inertia), R.T))


def _build(urdf: URDF, floating_base: bool, gravity: np.ndarray, mimic: str, check_inertia: bool) -> RobotModel:
    def fail(msg, cls=URDFError):
        raise cls(msg, file=urdf.path)

    children: dict[str, list] = {}
    has_parent = set()
    for j in urdf.joints.values():
        children.setdefault(j.parent, []).append(j)
        has_parent.add(j.child)
    # urdfdom (hence Pinocchio) keeps joints in a name-sorted map and visits a link's child
    # joints in that order; we do the same so joint order matches Pinocchio's.
    for lst in children.values():
        lst.sort(key=lambda j: j.name.encode())
    root = next(n for n in urdf.links if n not in has_parent)

    ignored_mimic = []
    for j in urdf.joints.values():
        if j.type == "floating" and (j.parent != root or floating_base):
            where = "a non-root" if j.parent != root else "a root"
            extra = "" if j.parent != root else " while floating_base=True also adds one"
            fail(f"joint '{j.name}': {where} floating joint is not supported{extra}", UnsupportedError)
        if j.mimic is not None and j.type != "fixed":
            if j.mimic[0] not in urdf.joints:
                if mimic != "independent":
                    fail(f"joint '{j.name}': <mimic> names unknown joint '{j.mimic[0]}' (no joint of the file has "
                         "that name); load with mimic='independent' (CLI: --mimic independent) to treat "
                         f"'{j.name}' as an ordinary joint")
                warnings.warn(f"{urdf.path}: joint '{j.name}': <mimic> names unknown joint '{j.mimic[0]}'; loaded as "
                              "an ordinary joint (mimic='independent')", RbdgenWarning, stacklevel=3)
            if mimic == "refuse":
                fail(
                    f"joint '{j.name}': a mimic joint (following '{j.mimic[0]}'), refused as asked; load "
                    "with mimic='couple' (the default; CLI: --mimic couple) to move it with its leader, "
                    "or mimic='independent' to treat it as an ordinary joint",
                    UnsupportedError,
                )
            ignored_mimic.append(j.name)

    body_names, joint_names, joint_types, parents = [], [], [], []
    axes, X_trees, inertias, limits = [], [], [], []
    merged = []
    body_links: dict[int, list[str]] = {}
    link_frames: list[LinkFrame] = []
    leaves: list[str] = []

    def add_body(name, jname, jtype, parent, axis, X_tree, lim):
        body_names.append(name)
        joint_names.append(jname)
        joint_types.append(jtype)
        parents.append(parent)
        axes.append(axis)
        X_trees.append(X_tree)
        inertias.append(np.zeros((6, 6)))
        limits.append(lim)
        return len(body_names) - 1

    NOLIM = (math.nan,) * 4
    if floating_base:
        root_body = add_body(root, "root_joint", "floating", -1, np.zeros(3), np.eye(6), NOLIM)
    else:
        root_body = -1

    # Depth-first walk, pre-order, children in joint-name order (Pinocchio's body order). Each
    # link belongs to a body (or the world, -1) and sits at a constant transform X_bl (body frame
    # → link frame) from it. An explicit stack rather than recursion: a chain of any length
    # loads (Python's recursion limit stopped a recursive walk at ~700 links).
    stack: list = [("link", root, root_body, np.eye(6))]
    while stack:
        kind, item, body, X_bl = stack.pop()
        if kind == "link":
            I_link = _link_inertia(urdf.links[item])
            body_links.setdefault(body, []).append(item)
            # X_bl = plux(E, r): E rotates body coordinates into link coordinates, r is the link
            # origin in body coordinates; the link's axes in body coordinates are Eᵀ
            E = X_bl[:3, :3]
            rx = sp.mm(-E.T, X_bl[3:, :3])
            link_frames.append(LinkFrame(item, body, _frozen(E.T), _frozen([rx[2, 1], rx[0, 2], rx[1, 0]])))
            if not children.get(item) and body >= 0:
                leaves.append(item)
            if body >= 0:
                inertias[body] = inertias[body] + sp.transform_inertia(X_bl, I_link)
            stack.extend(("joint", j, body, X_bl) for j in reversed(children.get(item, [])))
            continue
        j = item
        X_joint = sp.mm(sp.pose_to_X(sp.rpy_to_rot(j.rpy), j.xyz), X_bl)
        if j.type == "fixed":
            merged.append((j.child, j.name, body_names[body] if body >= 0 else "world"))
            stack.append(("link", j.child, body, X_joint))
        else:
            if j.type in ("floating", "planar"):
                # a planar joint moves in its joint frame's x-y plane (read_urdf checked <axis>);
                # URDF's scalar limits do not bound its three coordinates, as in Pinocchio
                b = add_body(j.child, j.name, j.type, body, np.zeros(3), X_joint, NOLIM)
            else:
                b = add_body(j.child, j.name, j.type, body, j.axis, X_joint, (j.lower, j.upper, j.velocity, j.effort))
            stack.append(("link", j.child, b, np.eye(6)))
    if not body_names:
        fail("the robot has no movable joint (and floating_base is off)")

    _check_body_inertias(urdf, body_names, inertias, body_links, check_inertia)

    q_start, v_start, nq, nv = [], [], 0, 0
    for t in joint_types:
        q_start.append(nq)
        v_start.append(nv)
        nq += JOINT_DIMS[t][0]
        nv += JOINT_DIMS[t][1]
    lim = np.array(limits, dtype=float).reshape(len(body_names), 4)
    return RobotModel(
        name=urdf.name,
        source=urdf.path,
        floating_base=floating_base or joint_types[0] == "floating",
        body_names=tuple(body_names),
        joint_names=tuple(joint_names),
        joint_types=tuple(joint_types),
        parent=tuple(parents),
        axis=_frozen(np.array(axes).reshape(-1, 3)),
        X_tree=_frozen(np.array(X_trees)),
        inertia=_frozen(np.array(inertias)),
        q_start=tuple(q_start),
        v_start=tuple(v_start),
        nq=nq,
        nv=nv,
        lower=_frozen(lim[:, 0]),
        upper=_frozen(lim[:, 1]),
        velocity_limit=_frozen(lim[:, 2]),
        effort_limit=_frozen(lim[:, 3]),
        gravity=_frozen(gravity),
        merged_fixed=tuple(merged),
        ignored_mimic=tuple(ignored_mimic),
        world_name=root if not floating_base else "world",
        link_frames=tuple(link_frames),
        leaf_links=tuple(leaves),
    )


def _check_body_inertias(urdf: URDF, body_names, inertias, body_links, check: bool) -> None:
    for b, links in sorted(body_links.items()):
        bad_links = [(ln, urdf.links[ln].problem) for ln in links if urdf.links[ln].problem]
        body_problem = None
        if b >= 0:
            m, _, Ic = sp.inertia_parts(inertias[b])
            body_problem = inertia_problem(m, Ic)
        if body_problem and check:
            detail = "; ".join(f"link '{ln}': {why}" for ln, why in bad_links) or "no single link is at fault"
            raise URDFError(
                f"body '{body_names[b]}' (links {', '.join(links)}): lumped {body_problem} — {detail} "
                "(load_urdf(..., check_inertia=False) / --no-check-inertia loads it anyway)",
                file=urdf.path,
            )
        for ln, why in bad_links:
            where = "is merged into the world" if b < 0 else f"is lumped into body '{body_names[b]}', whose inertia is physical"
            if body_problem:
                where = f"is lumped into body '{body_names[b]}' (check_inertia=False)"
            warnings.warn(f"{urdf.path}: link '{ln}': {why}; it {where}", RbdgenWarning, stacklevel=4)
