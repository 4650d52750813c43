"""Inverse dynamics with stale data: Newton-Euler whose links do not wait for each other.

RNEA's forward sweep passes each body's velocity and acceleration to its children, its
backward sweep passes each body's force to its parent: a chain of n links takes 2n steps one
after another. Inside a control loop the same computation runs again a control period later,
at a nearby state, so a link can take its neighbour's quantities *from the previous call*
("old data") instead of waiting for them. Every link's work then depends only on its own joint
and on what the previous call left, so all links run at once and the depth no longer grows with
n; the price is an error that shrinks with the control period (the neighbours' quantities are
one period old). Schemes differ in which terms are stale (``STALE_SCHEMES``):

* ``"binder_herzog"`` — zero-order prediction: each body's forward recursion takes its
  *parent's* velocity and acceleration from the previous call, and its backward recursion its
  *children's* transmitted forces from the previous call; its own velocity, acceleration and
  force are fresh. The forward sweep (all links in parallel) and then the backward sweep (all
  links in parallel): depth 2 links.
* ``"yamakita"`` — buffering: as above, and the backward sweep also takes each body's own force
  from the previous call's forward sweep, so forward and backward sweeps run side by side
  (depth 1 link) and the torque of call k is computed from the forward sweep of call k − 1 —
  a one-period pipeline.

* ``"hamilton"`` — Hamilton, Walker & Bennett, "Parallel robot control using speculative
  computation" (ICRA 1996), §3 and Table 1: *every* recursion variable of the Newton–Euler
  equations is taken from the previous call — the neighbours' (Binder–Herzog's, the double boxes
  of Table 1) and the link's own where an equation uses them (the single boxes: ω_i and ω̇_i in
  α_i, a_{e,i}, a_{c,i}; f_i and ω_i in the τ_i equation). Written, as the paper writes it, in
  Luh–Walker–Paul link-frame 3-vectors (ω, ω̇, α, a_e, a_c, f, τ — τ here is ``n``, the moment
  the parent exerts on the link about its joint), not in spatial vectors: its state is
  :class:`LWPState`. docs/control.md maps each boxed term of Table 1 onto the state, and says
  where the OCR of Table 1 reads oddly and which reading we take.
* ``"binder_herzog_lwp"`` — the same equations with only the double boxes of Table 1 stale:
  Binder–Herzog's zero-order prediction as Hamilton et al. mark it (the link's own ω_i, ω̇_i,
  f_i fresh), for a comparison in one formulation. ``"binder_herzog"`` above is our spatial
  form of the same idea; the two differ in what is carried (spatial v and a, gravity in the
  base acceleration, against ω, ω̇, α, a_e and a gravity term −m g_i computed fresh from q).

The joint transforms X(q), the motion subspaces and each joint's own motion are always fresh
(they depend on the joint alone). The spatial schemes work in body coordinates as
:func:`rbdgen.reference.rnea` does, gravity entering as the base acceleration; the
Luh–Walker–Paul schemes in the same body frames (origin on the joint's axis), gravity as
Table 1's −m_i g_i with g_i = (R_0^i)ᵀ g from the current q. Products are
:func:`rbdgen.spatial.mm` (fixed order): the exact states drawn here are printed into HLS
testbenches, which must be the same bytes on every machine.

``state=None`` starts from the exact quantities at (q, v, a): that call returns ``rnea``'s torque.
Called again and again at one (q, v, a), every scheme reaches ``rnea``'s torque after at most
2 · (tree depth) + 2 calls (the exact values travel one link per call, forward then back;
:func:`settle_calls`) and stays there.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import spatial as sp
from ..spatial import mm
from ..model import RobotModel
from .dynamics import _a_gravity, _arg, _armature, _kinematics

STALE_SCHEMES = ("binder_herzog", "yamakita", "hamilton", "binder_herzog_lwp")
#: the generated kernel of each scheme (rbdgen.algorithms.stale declares them from this table)
SCHEME_KERNELS = {"binder_herzog": "rnea_stale", "yamakita": "rnea_stale_yamakita", "hamilton": "rnea_stale_hamilton",
                  "binder_herzog_lwp": "rnea_stale_binder_herzog_lwp"}

#: The terms of Hamilton, Walker & Bennett's Table 1 that a scheme may take from the previous
#: call ("boxed"). The double boxes, Binder–Herzog's zero-order prediction (§3: "the terms in the
#: equation associated with another link (i.e. having index (i − 1) or (i + 1)) are replaced by
#: prior values"): the parent's ω, ω̇, α, a_e in the forward recursion, the children's f and τ
#: (our ``n``) in the backward one. The single boxes, the link's own terms that Hamilton et al.
#: replace too: ω_i in α_i, ω̇_i and ω_i in a_{e,i} and a_{c,i}, f_i and ω_i in τ_i.
NEIGHBOUR_TERMS = ("w_parent", "wd_parent", "alpha_parent", "ae_parent", "f_children", "n_children")
OWN_TERMS = ("w_in_alpha", "wd_in_acc", "w_in_acc", "f_in_n", "w_in_n")
#: the Luh–Walker–Paul schemes and their boxed terms
LWP_BOXES = {"hamilton": frozenset(NEIGHBOUR_TERMS + OWN_TERMS), "binder_herzog_lwp": frozenset(NEIGHBOUR_TERMS)}
#: calls at one (q, v, a) after which every scheme returns rnea's torque, from any state, as a
#: function of the tree depth d (levels, 1 for a single body): the exact values travel a level
#: per call, forward and then back (tests/test_stale.py checks the bound on every robot)
def settle_calls(d: int) -> int:
    return 2 * d + 2


def is_lwp(scheme: str) -> bool:
    """Whether ``scheme`` carries Luh–Walker–Paul 3-vectors (:class:`LWPState`) rather than
    spatial vectors (:class:`StaleState`)."""
    return scheme in LWP_BOXES


@dataclass(frozen=True)
class StaleState:
    """What one call of a spatial scheme (``binder_herzog``, ``yamakita``) leaves for the next,
    per body (``(nb, 6)`` each, or ``(N, nb, 6)`` for a batch), in body coordinates: the
    velocity ``v``, the acceleration ``a`` (gravity included), the body's own force
    ``f_own = I a + v ×* I v``, and the force ``f`` its joint transmits to its parent (its own
    plus what its children transmit, before the transform to the parent)."""

    v: np.ndarray
    a: np.ndarray
    f_own: np.ndarray
    f: np.ndarray

    FIELDS = ("v", "a", "f_own", "f")
    WIDTH = 6

    def flat(self) -> np.ndarray:
        """The layout of the generated kernels' ``stale`` array: per body ``[v, a, f_own, f]``
        (24 values), bodies in order — ``(nb * 24,)``, or ``(N, nb * 24)`` for a batch."""
        return _flat(self)

    @classmethod
    def from_flat(cls, x, nb: int) -> "StaleState":
        """The inverse of :meth:`flat`: a ``(nb * 24,)`` or ``(N, nb * 24)`` array (what the
        generated ``rnea_stale`` kernels take and return) as a StaleState."""
        return _from_flat(cls, x, nb, "stale")


@dataclass(frozen=True)
class LWPState:
    """What one call of a Luh–Walker–Paul scheme (``hamilton``, ``binder_herzog_lwp``) leaves
    for the next: per body (``(nb, 3)`` each, or ``(N, nb, 3)``), in the body's frame (origin on
    its joint's axis, as the URDF places it), the recursion variables of Hamilton et al.'s
    Table 1 that the next call reads:

    * ``w`` — ω_i, the link's angular velocity;
    * ``wd`` — ω̇_i, its angular acceleration by Table 1's ω̇ equation;
    * ``alpha`` — α_i, the same quantity by Table 1's α equation (equal to ω̇_i in the exact
      recursion, not when either is computed from stale data: both are carried);
    * ``ae`` — a_e at this body's joint: the linear acceleration of the parent's point at the
      joint (the "end of link i − 1", Table 1's a_{e,i−1}; Spong's frames put it at the origin of
      frame i − 1), in the *parent's* frame, gravity not included; zero for a root body;
    * ``f`` — f_i, the force the parent exerts on the link (Table 1's backward recursion);
    * ``n`` — Table 1's τ_i, the moment the parent exerts on the link about the joint's point.

    a_{c,i} is not carried: no equation reads it stale (see docs/control.md on Table 1's
    a_{c,i−1})."""

    w: np.ndarray
    wd: np.ndarray
    alpha: np.ndarray
    ae: np.ndarray
    f: np.ndarray
    n: np.ndarray

    FIELDS = ("w", "wd", "alpha", "ae", "f", "n")
    WIDTH = 3

    def flat(self) -> np.ndarray:
        """The layout of the generated kernels' ``stale_lwp`` array: per body
        ``[ω, ω̇, α, a_e, f, n]`` (18 values), bodies in order — ``(nb * 18,)``, or
        ``(N, nb * 18)`` for a batch."""
        return _flat(self)

    @classmethod
    def from_flat(cls, x, nb: int) -> "LWPState":
        """The inverse of :meth:`flat` (what ``rnea_stale_hamilton`` and
        ``rnea_stale_binder_herzog_lwp`` take as ``stale_lwp`` and return as ``stale_next``)."""
        return _from_flat(cls, x, nb, "stale_lwp")


def state_class(scheme: str):
    """:class:`LWPState` for the Luh–Walker–Paul schemes, :class:`StaleState` for the others."""
    return LWPState if is_lwp(scheme) else StaleState


def per_body(scheme: str) -> int:
    """Values per body in ``scheme``'s flat state (24 or 18)."""
    c = state_class(scheme)
    return len(c.FIELDS) * c.WIDTH


def _flat(st) -> np.ndarray:
    parts = np.stack([np.asarray(getattr(st, k), dtype=float) for k in st.FIELDS], axis=-2)
    return parts.reshape(parts.shape[:-3] + (-1,))


def _from_flat(cls, x, nb: int, arg: str):
    x = np.asarray(x, dtype=float)
    k, w = len(cls.FIELDS), cls.WIDTH
    if x.ndim not in (1, 2) or x.shape[-1] != k * w * nb:
        raise ValueError(f"{arg}: expected shape ({k * w * nb},) or (N, {k * w * nb}) ({k * w} values per body, "
                         f"{nb} bodies), got {x.shape}")
    parts = x.reshape(x.shape[:-1] + (nb, k, w))
    return cls(*(np.ascontiguousarray(parts[..., j, :]) for j in range(k)))


def _check(model: RobotModel, q, v, a, state, scheme):
    if scheme not in STALE_SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(STALE_SCHEMES)}, got {scheme!r}")

    q, v, a = _arg("q", q, model.nq), _arg("v", v, model.nv), _arg("a", a, model.nv)
    batch = q.ndim == 2
    for name, x in (("v", v), ("a", a)):
        if (x.ndim == 2) != batch or (batch and x.shape[0] != q.shape[0]):
            raise ValueError(f"{name}: shape {x.shape} does not match q shape {q.shape}")
    if state is not None:
        cls = state_class(scheme)
        if not isinstance(state, cls):
            raise TypeError(f"state must be a {cls.__name__} (what the previous call of scheme {scheme!r} "
                            f"returned) or None, got {type(state).__name__}")
        want = (q.shape[0], model.nb, cls.WIDTH) if batch else (model.nb, cls.WIDTH)
        for name in cls.FIELDS:
            got = np.shape(getattr(state, name))
            if got != want:
                raise ValueError(f"state.{name}: expected shape {want}, got {got}")
    return q, v, a, batch


def _one(model: RobotModel, q, v, a, old: StaleState | None, scheme: str):
    """One call of a spatial scheme."""
    Xs, Ss = _kinematics(model, q)
    nb = model.nb
    vel, acc, f_own = np.zeros((nb, 6)), np.zeros((nb, 6)), np.zeros((nb, 6))
    a0 = _a_gravity(model)
    for i in range(nb):
        p = model.parent[i]
        vJ = mm(Ss[i], v[model.v_slice(i)])
        if p < 0:
            vel[i] = vJ
            acc[i] = mm(Xs[i], a0) + mm(Ss[i], a[model.v_slice(i)])
        else:
            # the parent's velocity and acceleration: this call's (exact) or the previous call's
            vp, ap = (vel[p], acc[p]) if old is None else (old.v[p], old.a[p])
            vel[i] = mm(Xs[i], vp) + vJ
            acc[i] = mm(Xs[i], ap) + mm(Ss[i], a[model.v_slice(i)]) + mm(sp.crm(vel[i]), vJ)
        I = model.inertia[i]
        f_own[i] = mm(I, acc[i]) + mm(mm(sp.crf(vel[i]), I), vel[i])
    f = np.zeros((nb, 6))
    tau = np.zeros(model.nv)
    for i in reversed(range(nb)):
        if old is None:
            fi = f_own[i] + f[i]  # f[i] holds what the children sent this call
            if model.parent[i] >= 0:
                f[model.parent[i]] += mm(Xs[i].T, fi)
        else:
            own = f_own[i] if scheme != "yamakita" else old.f_own[i]
            fi = own + sum((mm(Xs[c].T, old.f[c]) for c in model.children(i)), np.zeros(6))
        f[i] = fi
        tau[model.v_slice(i)] = mm(Ss[i].T, fi)
    arm = _armature(model)
    if arm is not None:  # each DOF's rotor: armature·q̈, its own joint's only (nothing stale)
        tau = tau + arm * a
    return tau, StaleState(vel, acc, f_own, f)


def _cross(a, b):
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def _lwp_one(model: RobotModel, q, v, a, old: LWPState | None, boxes: frozenset):
    """One call of a Luh–Walker–Paul scheme: Hamilton et al.'s Table 1 (docs/control.md), in the
    URDF's body frames (origin on the joint's axis), for any tree and joint. With ``old=None``
    every term is this call's: the exact Newton–Euler recursion.

    For a revolute joint with axis b_i (the joint's axis in the body's frame, Table 1's
    (R_0^i)ᵀ z_{i−1}) and E_i the rotation from the parent's frame to the body's (Table 1's
    (R_{i−1}^i)ᵀ), with [x] the previous call's x where ``boxes`` says so:

        ω_i   = E_i [ω_{i−1}] + b_i θ̇_i
        ω̇_i   = E_i [ω̇_{i−1}] + E_i [ω_{i−1}] × b_i θ̇_i + b_i θ̈_i
        α_i   = E_i [α_{i−1}] + [ω_i] × b_i θ̇_i + b_i θ̈_i
        a_{e,i} = E_i [a_{e,i−1}] + [ω̇_i] × r_{i,i+1} + [ω_i] × ([ω_i] × r_{i,i+1})   (one per child)
        a_{c,i} = E_i [a_{e,i−1}] + [ω̇_i] × r_{i,ci} + [ω_i] × ([ω_i] × r_{i,ci})
        f_i   = Σ_c E_cᵀ [f_c] + m_i a_{c,i} − m_i g_i
        n_i   = Σ_c E_cᵀ [n_c] − [f_i] × r_{i,ci} + Σ_c (E_cᵀ [f_c]) × r_{c,ci} + I_i α_i + [ω_i] × (I_i [ω_i])
        τ_i   = b_i · n_i

    with r_{i,i+1} the child's joint point and r_{i,ci} the centre of mass in the body's frame,
    r_{c,ci} = r_{i,ci} − r_{i,c}, I_i the rotational inertia about the centre of mass, and
    g_i = E_i g_{i−1} (g_{−1} the model's gravity) from this call's q. Other joints (prismatic,
    spherical, planar, free-flyer: motion subspace S = [S_ω; S_v], constant in the body's frame)
    extend it in the only exact way: ω gets S_ω q̇ as above, the origin's acceleration
    E_i [a_{e,i−1}] gets the joint's own S_v q̈ + (S_ω q̇ + 2 E_i [ω_{i−1}]) × S_v q̇, and
    τ_i = S_ωᵀ n_i + S_vᵀ f_i. The paper writes rotational joints only; for them these terms vanish."""
    Xs, Ss = _kinematics(model, q)
    nb = model.nb
    z3 = np.zeros(3)
    E = [X[:3, :3] for X in Xs]
    r = []
    for X, Ei in zip(Xs, E):
        rx = -mm(Ei.T, X[3:, :3])  # X = plux(E, r): its lower-left block is −E·[r]×
        r.append(np.array([rx[2, 1], rx[0, 2], rx[1, 0]]))
    parts = [sp.inertia_parts(model.inertia[i]) for i in range(nb)]
    w, wd, al, ae, ac, g = (np.zeros((nb, 3)) for _ in range(6))
    gw = np.asarray(model.gravity, dtype=float)

    def pick(term, now, prior):
        return prior if (old is not None and term in boxes) else now

    for i in range(nb):
        p = model.parent[i]
        vs = model.v_slice(i)
        Sw, Sv = Ss[i][:3], Ss[i][3:]
        wJ, vJ, wA, vA = mm(Sw, v[vs]), mm(Sv, v[vs]), mm(Sw, a[vs]), mm(Sv, a[vs])
        if p < 0:
            wp = wdp = alp = z3
            g[i] = mm(E[i], gw)
        else:
            wp = pick("w_parent", w[p], None if old is None else old.w[p])
            wdp = pick("wd_parent", wd[p], None if old is None else old.wd[p])
            alp = pick("alpha_parent", al[p], None if old is None else old.alpha[p])
            g[i] = mm(E[i], g[p])
        aep = pick("ae_parent", ae[i], None if old is None else old.ae[i])  # zero for a root
        Ew = mm(E[i], wp)
        w[i] = Ew + wJ
        wd[i] = mm(E[i], wdp) + _cross(Ew, wJ) + wA
        w_al = pick("w_in_alpha", w[i], None if old is None else old.w[i])
        al[i] = mm(E[i], alp) + _cross(w_al, wJ) + wA
        # the origin's acceleration: the parent's point at the joint, and the joint's own sliding
        a_o = mm(E[i], aep) + vA + _cross(wJ + 2.0 * Ew, vJ)
        wd_a = pick("wd_in_acc", wd[i], None if old is None else old.wd[i])
        w_a = pick("w_in_acc", w[i], None if old is None else old.w[i])
        c = parts[i][1]
        ac[i] = a_o + _cross(wd_a, c) + _cross(w_a, _cross(w_a, c))
        for ch in model.children(i):  # a_{e,i} at each child's joint point, in this body's frame
            ae[ch] = a_o + _cross(wd_a, r[ch]) + _cross(w_a, _cross(w_a, r[ch]))
    f, n = np.zeros((nb, 3)), np.zeros((nb, 3))
    tau = np.zeros(model.nv)
    for i in reversed(range(nb)):
        m, c, Ic = parts[i]
        kids = model.children(i)
        fc = {ch: pick("f_children", f[ch], None if old is None else old.f[ch]) for ch in kids}
        nc = {ch: pick("n_children", n[ch], None if old is None else old.n[ch]) for ch in kids}
        f[i] = m * ac[i] - m * g[i]
        n[i] = mm(Ic, al[i])
        for ch in kids:
            f[i] = f[i] + mm(E[ch].T, fc[ch])
        f_n = pick("f_in_n", f[i], None if old is None else old.f[i])
        w_n = pick("w_in_n", w[i], None if old is None else old.w[i])
        n[i] = n[i] - _cross(f_n, c) + _cross(w_n, mm(Ic, w_n))
        for ch in kids:
            n[i] = n[i] + mm(E[ch].T, nc[ch]) + _cross(mm(E[ch].T, fc[ch]), c - r[ch])
        S = Ss[i]
        tau[model.v_slice(i)] = mm(S[:3].T, n[i]) + mm(S[3:].T, f[i])
    arm = _armature(model)
    if arm is not None:  # each DOF's rotor: armature·q̈, its own joint's only (nothing stale)
        tau = tau + arm * a
    return tau, LWPState(w, wd, al, ae, f, n)


def _call(model, q, v, a, old, scheme):
    if is_lwp(scheme):
        return _lwp_one(model, q, v, a, old, LWP_BOXES[scheme])
    return _one(model, q, v, a, old, scheme)


def rnea_stale(model: RobotModel, q, v, a, state=None, scheme: str = "binder_herzog"):
    """Inverse dynamics with one period old data (see the module doc): returns ``(tau, state)``;
    pass ``state`` to the next call (a :class:`StaleState`, or an :class:`LWPState` for the
    Luh–Walker–Paul schemes). One state ``(nq,)`` or a batch ``(N, nq)`` (then the state holds
    ``(N, nb, 6)`` or ``(N, nb, 3)`` arrays)."""
    if getattr(model, "coupled", False):
        # mimic joints: the tree's recursion on expanded coordinates, τ contracted by virtual
        # work (as rbdgen.reference.rnea does); the state is the tree's bodies'
        cm = model
        _check(cm, q, v, a, None, scheme)
        tau, st = rnea_stale(cm.tree, cm.expand_q(q), cm.expand_v(v), cm.expand_v(a), state, scheme)
        return mm(tau, cm.G), st
    q, v, a, batch = _check(model, q, v, a, state, scheme)
    if not batch:
        return _call(model, q, v, a, state, scheme)
    cls = state_class(scheme)
    taus, states = [], []
    for k in range(q.shape[0]):
        old = None if state is None else cls(*(getattr(state, x)[k] for x in cls.FIELDS))
        t, s = _call(model, q[k], v[k], a[k], old, scheme)
        taus.append(t)
        states.append(s)
    return np.stack(taus), cls(*(np.stack([getattr(s, x) for s in states]) for x in cls.FIELDS))


def _flat_reference(scheme):
    """The registry's reference of the generated kernel for ``scheme``: flat state in and out."""
    cls = state_class(scheme)

    def ref(model, q, v, a, stale):
        tau, st = rnea_stale(model, q, v, a, cls.from_flat(stale, model.nb), scheme=scheme)
        return tau, st.flat()
    ref.__name__ = ref.__qualname__ = f"rnea_stale_{scheme}_flat"
    return ref
