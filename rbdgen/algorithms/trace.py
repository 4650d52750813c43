"""Per-kernel tracing context shared by the algorithms (see :mod:`rbdgen.registry`)."""
from __future__ import annotations

import numpy as np

from ..ir.graph import Block, Graph, Kernel
from ..model import RobotModel
from ..spatial import mm as spatial_mm
from ..spatial import skew as sp_skew
from ..symbolic import joint_transform, tree_parts
from . import spatial as S

#: where a spatial inertia [[Ī + m c×c×ᵀ, m c×], [m c×ᵀ, m 1]] can be nonzero: all of the upper
#: left block, the skew blocks off their diagonals, the lower right block on its diagonal
_INERTIA_MASK = [[a < 3 and b < 3 or (a < 3) != (b < 3) and a % 3 != b % 3 or a == b for b in range(6)]
                 for a in range(6)]


#: a body's numbers stay folded in a rolled kernel where at least this many bodies share their
#: pattern, and at least 1/SHARED_PATTERNS of them (:func:`generic_bodies`)
SHARED_PATTERN = 4
SHARED_PATTERNS = 32


def _classes(a) -> tuple:
    """The class of every number of ``a``: 0, +1, −1 (1, 2) or other (3), what folding sees."""
    return tuple(0 if x == 0.0 else 1 if x == 1.0 else 2 if x == -1.0 else 3 for x in np.ravel(a))


def _pattern(model: RobotModel, i: int) -> tuple:
    """What folding body i's numbers leaves of its code: its joint's type and the class (0, +1,
    −1, other) of every number of its axis, X_tree and inertia."""
    Et, rt = tree_parts(model, i)
    return (model.joint_types[i], _classes(model.axis[i]), _classes(Et), _classes(rt), _classes(model.inertia[i]))


def generic_bodies(model: RobotModel) -> frozenset:
    """The bodies a rolled kernel traces with their numbers as parameters: those whose pattern
    (:func:`_pattern`) fewer than :data:`SHARED_PATTERN` bodies share. Folded, such a body's
    zeros and ±1s save operations but make its code a kind of its own (an arm: every body);
    as parameters it shares its joint kind's code (more operations, but one piece of code for
    all: TALOS's crba does 2.9× the operations of its unrolled kernel with every body so).
    Bodies of a shared pattern (a synthetic chain's repeating joints, a quadruped's legs) keep
    theirs folded, and their kind has the members to pay for its code. On big robots a pattern
    also needs 1/:data:`SHARED_PATTERNS` of the bodies, so that at most that many patterns are
    folded: the code (and the compile time) stays bounded whatever the size (a 3 000-link
    random chain's 45 quarter-turn patterns of ~22 bodies each go generic)."""
    pats = [_pattern(model, i) for i in range(model.nb)]
    count: dict = {}
    for p in pats:
        count[p] = count.get(p, 0) + 1
    least = max(SHARED_PATTERN, model.nb // SHARED_PATTERNS)
    return frozenset(i for i, p in enumerate(pats) if count[p] < least or _dense(p))


#: the places of a spatial inertia's entries that can be nonzero, flattened (_INERTIA_MASK)
_INERTIA_PLACES = tuple(6 * a + b for a in range(6) for b in range(6) if _INERTIA_MASK[a][b])


def _dense(pattern: tuple) -> bool:
    """Whether folding a body of this pattern (:func:`_pattern`) saves nothing: no number of its
    X_tree and none of its inertia where a spatial inertia can be nonzero is 0 or ±1 (a frame
    rotated by a general rotation, as CAD exports write them). Its axis and joint type, which
    are all that folding would keep of its structure, shape a generic body's code too
    (:meth:`Trace._X_generic`). Folded, such bodies' code differs only where two of their
    numbers' products happen to come out the same (or a rounding apart) in one body and not the
    next, which splits their kinds and their parents': a random 1 000-link chain's aba printed
    30 049 operations of kinds with its random-rotation bodies folded, 15 437 with them generic,
    for 1 298 162 against 1 298 874 operations a call (docs/performance.md §47)."""
    _, _, Et, rt, inertia = pattern
    return all(c == 3 for c in Et) and all(c == 3 for c in rt) and all(inertia[k] == 3 for k in _INERTIA_PLACES)


def _quarter_turn(model: RobotModel, i: int) -> bool:
    """Whether body i's X_tree rotation E_tree is a quarter turn: every entry 0 or ±1."""
    Et, _ = tree_parts(model, i)
    return bool(np.all(np.isin(Et, (0.0, 1.0, -1.0))))


def tree_structured_bodies(model: RobotModel, generic: frozenset) -> frozenset:
    """Of the ``generic`` bodies, those whose X_tree rotation and joint axis stay folded in a
    rolled kernel, only their translation r_tree and inertia parameters: those whose E_tree is a
    quarter turn (every entry 0 or ±1) that every generic body of the same joint type and axis
    class has, so that folding it splits no kind (a floating base, the only one of its kind, too).
    Nearly every URDF joint frame is unrotated (TALOS: 32 of 33), and a dense E_tree of nine
    parameters costs a body's every congruence its full 3×3 products (TALOS's aba, a generic
    body's backward step: 449 operations against 166–203 for a folded one; docs/performance.md
    §44). Where the bodies of a joint kind have different quarter turns (the iiwa's), or one has
    a general rotation, they all stay fully generic: folding would give each rotation kinds of its
    own (the iiwa's rolled rnea: 460 → 764 operations printed)."""
    keys, count, joint = {}, {}, {}
    for i in generic:
        jk = (model.joint_types[i], _classes(model.axis[i]))
        joint[jk] = joint.get(jk, 0) + 1
        if _quarter_turn(model, i):
            keys[i] = k = (jk, _classes(tree_parts(model, i)[0]))
            count[k] = count.get(k, 0) + 1
    return frozenset(i for i, k in keys.items() if count[k] == joint[k[0]])


class Trace:
    """Per-kernel tracing context: the graph, the inputs, and X_i / S_i / I_i as Values."""

    def __init__(self, model: RobotModel, fold: bool = True, generic: bool = False, reassociate: bool = True):
        self.m = model
        # the rolled trace keeps the rules that only look at structure: summing and cancelling
        # constants (Graph.reassociate) would give bodies alike but for their numbers code of
        # different shapes, and split their kind
        self.g = Graph(fold=fold, reassociate=reassociate and not generic)
        #: the bodies whose numbers (X_tree, inertia) are parameters that are never folded: the
        #: structure of their code then follows their joint's kind alone (rolled lowering:
        #: :func:`generic_bodies`); the others keep their numbers' zeros and ±1s
        self.generic = generic_bodies(model) if generic else frozenset()
        self.rolled = bool(generic)
        #: of those, the bodies whose X_tree rotation and axis stay folded (a quarter turn that every
        #: generic body of their joint kind has): only r_tree and the inertia are parameters
        #: (:func:`tree_structured_bodies`)
        self.tree_structured = tree_structured_bodies(model, self.generic) if generic else frozenset()
        self.depth = model.depth
        self._X: dict[int, S.XForm] = {}
        self._null: dict[int, tuple] = {}

    def block(self, phase: str, i: int | None = None):
        m = self.m
        if i is None:
            self.g.block = Block(phase)
        else:
            self.g.block = Block(phase, i, self.depth[i], f"{m.body_names[i]} (joint {m.joint_names[i]})")

    def frame_block(self, phase: str, frame, other=None):
        """A block of work for a frame (a URDF link): the frame's name goes in the label, which
        the printers escape (``phase`` must be rbdgen's own text). ``other``: a second frame
        (the cross blocks of Λ⁻¹)."""
        m, b = self.m, max(frame.body, 0)
        label = f"{m.body_names[b]}, frame {frame.name}" + (f" × frame {other.name}" if other is not None else "")
        self.g.block = Block(phase, b, self.depth[b], label)

    def inputs(self, name: str, n: int):
        return [self.g.input(name, k) for k in range(n)]

    def consts(self, arr):
        a = np.asarray(arr, dtype=float)
        if a.ndim == 1:
            return [self.g.const(x) for x in a]
        return [[self.g.const(x) for x in row] for row in a]

    def zeros(self, n: int):
        return [self.g.const(0.0)] * n

    # ---- model quantities as Values ---------------------------------------------------------
    def X(self, i: int, q) -> S.XForm:
        if i in self._X:
            return self._X[i]
        g, m = self.g, self.m
        if i in self.generic and i not in self.tree_structured:
            self._X[i] = self._X_generic(i, q)
            return self._X[i]
        jt = joint_transform(m, i)
        qs = m.q_start[i]
        # r_tree: parameters for a generic body whose rotation stays folded, else constants (made
        # where each joint kind needs them: the nodes' order, and so the printed code, unchanged)
        def r_tree():
            return [g.param(jt.r0[k], (i, "r", k)) for k in range(3)] if i in self.generic else self.consts(jt.r0)

        if jt.kind == "revolute":
            c, s = g.op("cos", q[qs]), g.op("sin", q[qs])
            E = [[jt.Ec[a, b] * c + jt.Es[a, b] * s + jt.E0[a, b] for b in range(3)] for a in range(3)]
            E = [[g.lift(e) for e in row] for row in E]
            r = r_tree()
            Et, _ = tree_parts(m, i)
            a = np.asarray(m.axis[i], dtype=float)
            if self.g.fold and np.count_nonzero(a) == 1 and np.max(np.abs(a)) == 1.0 and _quarter_turn(m, i):
                # about an axis of its frame after a quarter-turn X_tree (nearly every joint of
                # the bundled robots): congruences by the joint's rotation, then X_tree's
                k = int(np.flatnonzero(a)[0])
                self._X[i] = S.XForm(E, r, (S.AxisRotation(k, a[k], c, s), S.XForm(self.consts(Et), r)))
                return self._X[i]
        elif jt.kind == "prismatic":
            E = self.consts(jt.E0)
            r0 = r_tree() if i in self.generic else jt.r0
            r = [g.lift(r0[k] + jt.rq[k] * q[qs]) for k in range(3)]
        elif jt.kind == "planar":
            # q = (x, y, θ): E as a revolute joint's about the joint frame's z (linear in c, s),
            # r = r_tree + x·E_treeᵀe_x + y·E_treeᵀe_y (symbolic.joint_transform)
            c, s = g.op("cos", q[qs + 2]), g.op("sin", q[qs + 2])
            E = [[g.lift(jt.Ec[a, b] * c + jt.Es[a, b] * s + jt.E0[a, b]) for b in range(3)] for a in range(3)]
            r0 = r_tree() if i in self.generic else jt.r0
            r = [g.lift(r0[k] + jt.rq[k] * q[qs] + jt.ry[k] * q[qs + 1]) for k in range(3)]
        elif jt.kind == "spherical":
            # q = quaternion u = (x y z w), any norm: the free-flyer's rotation (below), r constant
            RT = S.transpose(self._quat_rotation(*q[qs : qs + 4]))
            E = S.mat_mat(g, RT, self.consts(jt.E0))
            r = r_tree()
        else:  # free-flyer: q = [p; quaternion u = (x y z w)], any norm (issue 46)
            p = q[qs : qs + 3]
            RT = S.transpose(self._quat_rotation(*q[qs + 3 : qs + 7]))
            E0 = self.consts(jt.E0)
            E = S.mat_mat(g, RT, E0)
            r = S.vadd(r_tree(), S.mat3T_vec(g, E0, p))
        self._X[i] = S.XForm(E, r)
        return self._X[i]

    def _tree_params(self, i: int):
        """X_tree's E (3×3) and r (3) of body i as parameters."""
        Et, rt = tree_parts(self.m, i)
        g = self.g
        return ([[g.param(Et[a, b], (i, "E", a, b)) for b in range(3)] for a in range(3)],
                [g.param(rt[k], (i, "r", k)) for k in range(3)])

    def _X_generic(self, i: int, q) -> S.XForm:
        """X_i = X_J(q_i)·X_tree with X_tree's numbers as parameters: E = R_Jᵀ(q)·E_tree with
        R_Jᵀ from the joint's axis alone (Rodrigues, as :func:`rbdgen.symbolic.joint_transform`),
        so an axis along x, y or z keeps its zeros and every body of one joint kind traces the
        same code."""
        g, m = self.g, self.m
        P, rt = self._tree_params(i)
        kind = m.joint_types[i]
        qs = m.q_start[i]

        def rodrigues(a, c, s):
            a = np.asarray(a, dtype=float)
            aaT = np.outer(a, a)
            A, B = np.eye(3) - aaT, -np.asarray(sp_skew(a))
            return [[g.lift(A[x, y] * c + B[x, y] * s + aaT[x, y]) for y in range(3)] for x in range(3)]

        if kind in ("revolute", "continuous"):
            c, s = g.op("cos", q[qs]), g.op("sin", q[qs])
            return S.XForm(S.mat_mat(g, rodrigues(m.axis[i], c, s), P), rt)
        if kind == "prismatic":
            Et, _ = tree_parts(m, i)
            rq = spatial_mm(Et.T, m.axis[i])
            return S.XForm(P, [rt[k] + g.param(rq[k], (i, "rq", k)) * q[qs] for k in range(3)])
        if kind == "planar":
            c, s = g.op("cos", q[qs + 2]), g.op("sin", q[qs + 2])
            E = S.mat_mat(g, rodrigues([0.0, 0.0, 1.0], c, s), P)
            return S.XForm(E, [rt[k] + q[qs] * P[0][k] + q[qs + 1] * P[1][k] for k in range(3)])
        if kind == "spherical":
            RT = S.transpose(self._quat_rotation(*q[qs : qs + 4]))
            return S.XForm(S.mat_mat(g, RT, P), rt)
        if kind == "floating":
            RT = S.transpose(self._quat_rotation(*q[qs + 3 : qs + 7]))
            return S.XForm(S.mat_mat(g, RT, P), S.vadd(rt, S.mat3T_vec(g, P, q[qs : qs + 3])))
        raise AssertionError(f"joint type {kind!r} has no generic transform")

    def _quat_rotation(self, x, y, z, w):
        """R (3×3 Values) of the quaternion u = (x y z w), Pinocchio's order, of any norm."""
        # R is the rotation of u/|u|, as the reference's (spatial.quat_to_rot normalises u),
        # without a square root: the unit-quaternion formula with s = 2/|u|² in place of 2,
        # exact in real arithmetic for every u ≠ 0. One division and, against the unit-only
        # formula, at most two multiplies (w², z²) and two adds for |u|² (x² + y² is shared:
        # +4 or +5 ops per free-flyer, by which entries of R a kernel uses). s multiplies
        # each entry's sum last, so an entry is one multiply (and a diagonal one a
        # subtraction) behind the division: the shortest path after it (an HLS ap_fixed
        # divider is tens of cycles). u = 0: s = 2/0 = inf and every entry 0·inf = NaN, as the
        # reference's 0/0 (an ap_fixed rbd_div saturates instead and sets dz: R = I).
        s = 2.0 / ((x * x + y * y) + (z * z + w * w))
        return [
            [1.0 - s * (y * y + z * z), s * (x * y - z * w), s * (x * z + y * w)],
            [s * (x * y + z * w), 1.0 - s * (x * x + z * z), s * (y * z - x * w)],
            [s * (x * z - y * w), s * (y * z + x * w), 1.0 - s * (x * x + y * y)],
        ]

    def Smat(self, i: int):
        """S_i as a 6×nv_i list of constant Values."""
        return self.consts(self.m.motion_subspace(i))

    def null_axes(self, i: int) -> tuple:
        """The coordinate axes k whose unit vector e_k lies in the span of S_i (a revolute joint
        about z: k = 2; a free-flyer: all six). For them the articulated inertia handed to the
        parent, Ia = IA − U D⁻¹ Uᵀ with U = IA S and D = Sᵀ U, has row and column k zero
        (Ia S = U − U D⁻¹ D = 0), and so has row k of P = 1 − U D⁻¹ Sᵀ (e_kᵀ = yᵀ Sᵀ gives
        e_kᵀ P = yᵀ Sᵀ − yᵀ D D⁻¹ Sᵀ = 0). Traced, those entries are differences such as
        IA_kj − (IA_kk · D⁻¹) · IA_jk that the graph cannot fold: zero only up to rounding, yet
        carried through every congruence to the root. :meth:`articulated` makes them zeros.
        With armature on the joint, D = Sᵀ U + diag(armature), Ia S = U D⁻¹ diag(armature) ≠ 0:
        none (the model's ``armature``; zeros leave this as it was)."""
        cached = self._null.get(i)
        if cached is None and getattr(self.m, "armature", None) is not None and np.any(self.m.joint_armature(i)):
            cached = self._null[i] = ()
        if cached is None:
            Si = np.asarray(self.m.motion_subspace(i), dtype=float)
            out = []
            for k in range(6):
                e = np.zeros(6)
                e[k] = 1.0
                y = np.linalg.lstsq(Si, e, rcond=None)[0]
                if np.max(np.abs(Si @ y - e)) <= 1e-12:
                    out.append(k)
            cached = self._null[i] = tuple(out)
        return cached

    def articulated(self, i: int, IA, U, UDinv):
        """Ia = IA − (U D⁻¹) Uᵀ for body i, symmetric, with the rows and columns of
        :meth:`null_axes` exact zeros."""
        g = self.g
        Ia = S.msub(IA, S.mat_mat(g, UDinv, S.transpose(U)))
        null = self.null_axes(i)
        zero = g.const(0.0)
        return [[zero if a in null or b in null else (Ia[a][b] if a <= b else Ia[b][a]) for b in range(6)]
                for a in range(6)]

    def S_times(self, i, x):
        """S_i · x (x: nv_i Values) → 6 Values."""
        return S.mat_vec(self.g, self.Smat(i), x)

    def ST_times(self, i, f):
        """S_iᵀ · f → nv_i Values."""
        return S.matT_vec(self.g, self.Smat(i), f)

    def I(self, i: int):
        Ii = self.m.inertia[i]
        if i not in self.generic:
            if not self.rolled:
                return self.consts(Ii)
            # the rolled trace: both entries of a symmetric pair from the upper triangle, as a
            # generic body's one parameter a pair. The model's two triangles can be an ulp apart
            # (R·I·Rᵀ, m·C·Cᵀ round them differently: 20 of TALOS's 33 bodies); folded, a
            # pair is then one constant node in one body and two in the next of the same
            # pattern, what is computed from them merges in one and not in the other, and the
            # kind splits (a random 1 000-link chain's aba: docs/performance.md §47)
            return [[self.g.const(Ii[min(a, b), max(a, b)]) for b in range(6)] for a in range(6)]
        # parameters where a spatial inertia [[Ī + m c×c×ᵀ, m c×], [m c×ᵀ, m 1]] can be nonzero
        # (one per symmetric pair); the zeros of every spatial inertia stay zeros
        g = self.g
        return [[g.param(Ii[a, b], (i, "I", min(a, b), max(a, b))) if _INERTIA_MASK[a][b] or Ii[a, b] != 0.0
                 else g.const(0.0) for b in range(6)] for a in range(6)]

    def a_gravity(self):
        return self.consts(np.concatenate([np.zeros(3), -self.m.gravity]))

    def kernel(self, name, inputs, outputs, doc=""):
        return Kernel(name, self.g, inputs, outputs, doc=doc, meta={"robot": self.m.name})


class Coupling:
    """Mimic coupling over traced Values (see :mod:`rbdgen.model.coupled`): reduced inputs to
    the tree's (q_tree = Gq q + bq, v_tree = G v) and tree outputs back (Gᵀ τ, Gᵀ A G), plus a
    dense LDLᵀ solve for the forward dynamics that the articulated-body recursion cannot do
    with coupled joints. G has one entry per tree row, so expansion costs at most a multiply
    and an add per follower coordinate; the folding graph removes the rest."""

    def __init__(self, t: Trace, cm):
        self.t, self.g, self.cm = t, t.g, cm
        self._q = [(int(np.flatnonzero(r)[0]), float(r[np.flatnonzero(r)[0]])) for r in cm.Gq]
        self._v = [(int(np.flatnonzero(r)[0]), float(r[np.flatnonzero(r)[0]])) for r in cm.G]
        self.n = cm.nv

    def q(self, qr):
        return [self.g.lift(m * qr[j] + float(b)) for (j, m), b in zip(self._q, self.cm.bq)]

    def v(self, vr):
        return [self.g.lift(m * vr[j]) for j, m in self._v]

    def tau(self, tau_tree):
        out = [self.g.const(0.0)] * self.n
        for i, (j, m) in enumerate(self._v):
            out[j] = out[j] + m * tau_tree[i]
        return out

    def mat(self, A):
        """Gᵀ A G of a tree-sized matrix given as rows of Values; returns rows."""
        n = self.n
        rows = [[self.g.const(0.0)] * len(A) for _ in range(n)]  # Gᵀ A
        for i, (j, m) in enumerate(self._v):
            rows[j] = [rows[j][k] + m * A[i][k] for k in range(len(A))]
        out = [[self.g.const(0.0)] * n for _ in range(n)]
        for r in range(n):
            for k, (j, m) in enumerate(self._v):
                out[r][j] = out[r][j] + m * rows[r][k]
        return out

    def solve(self, M, B):
        """X with M X = B for symmetric positive definite M (rows of Values) and B (rows of
        right-hand-side Values): LDLᵀ without square roots, one division per pivot."""
        t = self.t
        t.block("coupled solve: LDLᵀ of Gᵀ M G (mimic joints)")
        L, _, Dinv = S.ldlt(self.g, M)
        t.block("coupled solve: substitutions")
        return S.ldlt_substitute(L, Dinv, B)
