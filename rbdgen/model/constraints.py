"""The constraints a robot's dynamics can be solved under: :class:`Contact` (a frame held, or
moving as Fijany's contact models say) and :class:`Loop` (two frames of the robot held
together), with their checks and their text forms (the package manifest's, the command line's).

A model layer module: :meth:`RobotModel.with_constraints` checks them here; the equations that
use them are :mod:`rbdgen.reference.contact`'s (which re-exports these names) and the traced
``constrained_fd`` (:mod:`rbdgen.algorithms.constrained`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CONTACT_MODELS = ("6d", "3d", "type1", "type2", "general")


@dataclass(frozen=True, eq=False)
class Contact:
    """A contact (or any closing constraint) at a frame, in Fijany's terms: the frame's motion
    space splits into free directions H (6 × n_f) and constrained directions W (6 × n_c), both
    orthonormal and complementary, in the frame's LOCAL coordinates ``[linear; angular]``.

    ``model``:

    * ``"6d"``: rigid, W = I: the frame's spatial acceleration (LOCAL) is held at zero;
    * ``"3d"``: a rigid point contact: the classical linear acceleration of the frame's origin is
      held at zero, the frame may rotate; the force has no torque (Pinocchio's ``CONTACT_3D``);
    * ``"type1"``: Wᵀ V̇ = G_C and the free-direction force K_F are given (defaults: 0);
    * ``"type2"``: Wᵀ V̇ = G_C, and K_F = φ K_C + d (φ: n_f × n_c; e.g. friction);
    * ``"general"``: V̇ = M₁Ω + κ₁ and F = M₂Ω + κ₂ with Ω (6) unknown (M₁, M₂: 6 × 6).

    W alone is enough for type1/type2 (H is then its orthonormal complement). Every number is
    checked here: shapes, finiteness, orthonormality (to 1e-9)."""

    frame: str
    model: str = "6d"
    H: np.ndarray | None = None
    W: np.ndarray | None = None
    G_C: np.ndarray | None = None
    K_F: np.ndarray | None = None
    phi: np.ndarray | None = None
    d: np.ndarray | None = None
    M1: np.ndarray | None = None
    kappa1: np.ndarray | None = None
    M2: np.ndarray | None = None
    kappa2: np.ndarray | None = None

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        if not isinstance(self.frame, str):
            raise ValueError(f"Contact: frame must be a URDF link name, got {self.frame!r}")
        where = f"Contact({self.frame!r}, {self.model!r})"
        if self.model not in CONTACT_MODELS:
            raise ValueError(f"{where}: unknown contact model; one of {', '.join(map(repr, CONTACT_MODELS))}")
        given = {k for k in ("H", "W", "G_C", "K_F", "phi", "d", "M1", "kappa1", "M2", "kappa2")
                 if getattr(self, k) is not None}
        takes = {"6d": set(), "3d": set(), "type1": {"H", "W", "G_C", "K_F"},
                 "type2": {"H", "W", "G_C", "phi", "d"}, "general": {"M1", "kappa1", "M2", "kappa2"}}[self.model]
        extra = sorted(given - takes)
        if extra:
            raise ValueError(f"{where}: does not take {', '.join(extra)} (it takes {', '.join(sorted(takes)) or 'no parameters'})")

        def arr(name, shape):
            x = getattr(self, name)
            try:
                a = np.array(x, dtype=float)
            except (TypeError, ValueError):
                raise ValueError(f"{where}: {name} is not an array of numbers") from None
            if a.shape != shape:
                raise ValueError(f"{where}: {name} has shape {a.shape}, expected {shape}")
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{where}: {name} has NaN or infinite entries")
            a.setflags(write=False)
            set_(name, a)
            return a

        if self.model in ("type1", "type2"):
            if self.W is None:
                raise ValueError(f"{where}: W (6 × n_c, the constrained directions) is required")
            try:
                W = np.array(self.W, dtype=float)
            except (TypeError, ValueError):
                raise ValueError(f"{where}: W is not an array of numbers") from None
            if W.shape == (6,):
                W = W.reshape(6, 1)
            if W.ndim != 2 or W.shape[0] != 6 or not 1 <= W.shape[1] <= 6:
                raise ValueError(f"{where}: W has shape {W.shape}, expected (6, n_c) with 1 ≤ n_c ≤ 6")
            nc = W.shape[1]
            set_("W", W)
            W = arr("W", (6, nc))
            if not np.allclose(W.T @ W, np.eye(nc), atol=1e-9):
                raise ValueError(f"{where}: W is not orthonormal (WᵀW ≠ I to 1e-9)")
            if self.H is None:
                u, _, _ = np.linalg.svd(W, full_matrices=True)
                H = u[:, nc:]
                set_("H", H)
            H = arr("H", (6, 6 - nc))
            if not np.allclose(np.hstack([H, W]).T @ np.hstack([H, W]), np.eye(6), atol=1e-9):
                raise ValueError(f"{where}: H and W are not orthonormal complements ([H W] is not orthogonal to 1e-9)")
            set_("G_C", np.zeros(nc) if self.G_C is None else self.G_C)
            arr("G_C", (nc,))
            if self.model == "type1":
                set_("K_F", np.zeros(6 - nc) if self.K_F is None else self.K_F)
                arr("K_F", (6 - nc,))
            else:
                if self.phi is None:
                    raise ValueError(f"{where}: phi (n_f × n_c) is required")
                arr("phi", (6 - nc, nc))
                set_("d", np.zeros(6 - nc) if self.d is None else self.d)
                arr("d", (6 - nc,))
        elif self.model == "general":
            for k in ("M1", "M2"):
                if getattr(self, k) is None:
                    raise ValueError(f"{where}: {k} (6 × 6) is required")
                arr(k, (6, 6))
            for k in ("kappa1", "kappa2"):
                set_(k, np.zeros(6) if getattr(self, k) is None else getattr(self, k))
                arr(k, (6,))

    @property
    def size(self) -> int:
        """Number of unknowns (and of equations) this contact adds."""
        return {"6d": 6, "3d": 3, "general": 6}.get(self.model) or self.W.shape[1]

    def rows(self):
        """(P, Q, A, b): the contact's equations P V̇ + Q x = r on the frame's LOCAL spatial
        acceleration V̇ (r: :meth:`rhs`) and its force F = A x + b, for its unknowns x."""
        z6 = np.zeros(6)
        if self.model == "6d":
            return np.eye(6), np.zeros((6, 6)), np.eye(6), z6
        if self.model == "3d":
            P = np.eye(6)[:3]
            return P, np.zeros((3, 3)), P.T, z6
        nc = self.size
        if self.model == "type1":
            return self.W.T, np.zeros((nc, nc)), self.W, self.H @ self.K_F
        if self.model == "type2":
            return self.W.T, np.zeros((nc, nc)), self.W + self.H @ self.phi, self.H @ self.d
        return np.eye(6), -self.M1, self.M2, self.kappa2

    def rhs(self, vf):
        """r of :meth:`rows` for the frame's LOCAL velocity ``vf`` (…, 6): the 3-D contact holds
        the classical acceleration a + ω × v of the point at zero, so r = −ω × v."""
        vf = np.asarray(vf)
        if self.model == "3d":
            return -_cross(vf[..., 3:], vf[..., :3])
        r = {"6d": np.zeros(6), "general": self.kappa1}.get(self.model)
        r = self.G_C if r is None else r
        return np.broadcast_to(r, vf.shape[:-1] + r.shape)


LOOP_MODELS = ("3d", "6d")


@dataclass(frozen=True, eq=False)
class Loop:
    """A loop closed inside the robot: two frames (URDF link names, as :class:`Contact`'s) held
    together.

    * ``"6d"``: the frames are welded; their relative motion, frame a's relative to frame b's
      expressed in frame a, v_rel = v_a − ᵃX_b v_b (LOCAL spatial velocities), is held at zero;
    * ``"3d"``: their origins coincide (a ball joint); the relative velocity of the two points,
      v_a,lin − ᵃR_b v_b,lin (in frame a), is held at zero and the frames may turn freely.

    The acceleration each holds at zero, with V̇ the frames' LOCAL spatial accelerations (J q̈ + J̇q̇),
    and its drift term (what it adds where q̈ = 0), the same as Pinocchio's ``RigidConstraintModel``
    between two joints in its LOCAL reference:

    * ``"6d"``: V̇_a − ᵃX_b V̇_b + v_rel × v_a  (the time derivative of v_rel's coordinates in a);
    * ``"3d"``: (a_a + ω_a × v_a) − ᵃR_b (a_b + ω_b × v_b) on the linear parts (the difference of
      the two points' classical accelerations, in a's axes).

    The loop's force F (6: ``[force; torque]``, frame a's coordinates, about its origin; 3d: no
    torque) is the wrench frame a's body exerts on frame b's body: the robot takes −F at a and
    +F at b, so Pinocchio's ``lambda_c`` for the same constraint is −F (its 3d: the force part).
    A contact is a loop whose frame b is the world. Nothing requires the loop to be closed
    (frames apart, or turned): the constraint acts on accelerations.

    ``baumgarte=(kp, kd)`` (default 0, 0) stabilises the loop's position error e: the held
    acceleration becomes −kd ė − kp e instead of 0, with ė = J_c q̇ (the velocity error above)
    and e, in frame a: 3d, the position of a's origin from b's, −ᵃp_b; 6d, −log₆(ᵃM_b) (the
    screw from a to b, ``[linear; angular]``) — Pinocchio's ``BaumgarteCorrectorParameters``
    Kp, Kd on the same constraint. Integrating only accelerations lets the loop drift apart (the
    integrator's error); kp ≈ ω², kd ≈ 2ω for a time constant 1/ω of a few steps pulls it back."""

    frame_a: str
    frame_b: str
    model: str = "6d"
    baumgarte: tuple = (0.0, 0.0)

    def __post_init__(self):
        for k in ("frame_a", "frame_b"):
            if not isinstance(getattr(self, k), str):
                raise ValueError(f"Loop: {k} must be a URDF link name, got {getattr(self, k)!r}")
        where = f"Loop({self.frame_a!r}, {self.frame_b!r}, {self.model!r})"
        if self.model not in LOOP_MODELS:
            raise ValueError(f"{where}: unknown loop model; one of {', '.join(map(repr, LOOP_MODELS))}")
        if self.frame_a == self.frame_b:
            raise ValueError(f"{where}: a loop joins two different frames")
        try:
            kp, kd = (float(x) for x in self.baumgarte)
        except (TypeError, ValueError):
            raise ValueError(f"{where}: baumgarte must be two numbers (kp, kd), got {self.baumgarte!r}") from None
        if not (np.isfinite(kp) and np.isfinite(kd) and kp >= 0 and kd >= 0):
            raise ValueError(f"{where}: baumgarte gains must be finite and ≥ 0, got {self.baumgarte!r}")
        object.__setattr__(self, "baumgarte", (kp, kd))

    @property
    def stabilised(self) -> bool:
        """Whether the Baumgarte gains are not both zero."""
        return self.baumgarte != (0.0, 0.0)

    @property
    def size(self) -> int:
        """Number of unknowns (and of equations) this loop adds."""
        return 3 if self.model == "3d" else 6

    @property
    def frames(self) -> tuple:
        return (self.frame_a, self.frame_b)


def check_constraints(model, contacts):
    """The constraints (:class:`Contact` and :class:`Loop`) as a list, each frame checked on ``model``."""
    if isinstance(contacts, (Contact, Loop)):
        contacts = [contacts]
    try:
        contacts = list(contacts)
    except TypeError:
        raise ValueError(f"contacts must be a list of rbdgen.Contact or rbdgen.Loop, got {type(contacts).__name__}") from None
    if not contacts:
        raise ValueError("contacts: the list is empty (use aba for the unconstrained dynamics)")
    for c in contacts:
        if not isinstance(c, (Contact, Loop)):
            raise ValueError(f"contacts must be rbdgen.Contact or rbdgen.Loop objects, got {type(c).__name__}")
        for f in constraint_frames(c):
            model.frame(f)
    return contacts


def constraint_frames(c) -> tuple:
    """The frames a constraint acts on: a contact's frame, or a loop's two."""
    return c.frames if isinstance(c, Loop) else (c.frame,)


def constraint_to_json(c) -> dict:
    """A rigid constraint as the package manifest stores it."""
    if isinstance(c, Loop):
        out = {"loop": [c.frame_a, c.frame_b], "model": c.model}
        if c.stabilised:
            out["baumgarte"] = list(c.baumgarte)
        return out
    return {"contact": c.frame, "model": c.model}


def constraint_from_json(d):
    """:func:`constraint_to_json`'s inverse (a ValueError for anything else)."""
    if not isinstance(d, dict) or d.get("model") not in ("3d", "6d"):
        raise ValueError(f"not a rigid constraint: {d!r}")
    if "loop" in d:
        a, b = d["loop"]
        return Loop(a, b, d["model"], tuple(d.get("baumgarte", (0.0, 0.0))))
    return Contact(d["contact"], d["model"])


def constraint_flags(constraints) -> list:
    """The command-line flags that give ``constraints`` (``--contact F:3d``, ``--loop A:B:6d``)."""
    out = []
    for c in constraints:
        if isinstance(c, Loop):
            gains = f":{c.baumgarte[0]!r},{c.baumgarte[1]!r}" if c.stabilised else ""
            out.append(f"--loop {c.frame_a}:{c.frame_b}:{c.model}{gains}")
        else:
            out.append(f"--contact {c.frame}:{c.model}")
    return out


def constraints_from_cli(contacts, loops) -> list:
    """--contact LINK:3d|6d and --loop LINK_A:LINK_B:3d|6d[:KP,KD] values as constraints (contacts
    first; KP, KD: the loop's Baumgarte gains)."""
    out = []
    for text in contacts:
        name, _, kind = str(text).rpartition(":")
        if not name or kind not in ("3d", "6d"):
            raise ValueError(f"--contact {text!r}: expected LINK:3d or LINK:6d")
        out.append(Contact(name, kind))
    for text in loops:
        parts = str(text).split(":")
        if len(parts) not in (3, 4) or not parts[0] or not parts[1] or parts[2] not in ("3d", "6d"):
            raise ValueError(f"--loop {text!r}: expected LINK_A:LINK_B:3d or LINK_A:LINK_B:6d (then :KP,KD, the "
                             f"Baumgarte gains)")
        gains = (0.0, 0.0)
        if len(parts) == 4:
            try:
                gains = tuple(float(x) for x in parts[3].split(","))
            except ValueError:
                gains = ()
            if len(gains) != 2:
                raise ValueError(f"--loop {text!r}: the Baumgarte gains are two numbers, KP,KD")
        out.append(Loop(parts[0], parts[1], parts[2], gains))
    return out


def constraint_slots(contacts) -> list:
    """The frame of each slot of the stacked contact terms of ``contacts``: one per contact, two
    per loop (a, then b), in order; a frame may fill several slots."""
    return [f for c in contacts for f in constraint_frames(c)]


def _cross(a, b):
    """a × b over the last axis (np.cross costs ~10 µs a call on short vectors)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)
