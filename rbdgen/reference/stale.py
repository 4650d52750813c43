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

* ``"hamilton"`` — speculate, then verify: Hamilton, Walker & Bennett, "Parallel robot control
  using speculative computation" (ICRA 1996, DOI 10.1109/ROBOT.1996.509233), as far as its
  abstract specifies it (the full text could not be reached; docs/control.md says what is theirs
  and what is our choice). Each call runs Binder–Herzog's step on the previous call's data (the
  speculation), then the same step once more at the same (q, v, a) on the values the speculation
  just produced (the verification): one call equals two Binder–Herzog calls at one state. Bodies
  up to two levels deep then have exact velocities and accelerations, and every body's data is
  one level less stale. The second forward step overlaps the first force step: depth 3 links,
  twice the work. The number of steps (two) is our choice; ``tree depth + 1`` of them would be
  exact RNEA.

The joint transforms X(q), the motion subspaces and each joint's own motion are always fresh
(they depend on the joint alone). All quantities are in body coordinates as in
:func:`rbdgen.reference.rnea`, gravity entering as the base acceleration. Products are
:func:`rbdgen.spatial.mm` (fixed order): the exact states drawn here are printed into HLS
testbenches, which must be the same bytes on every machine.

``state=None`` starts from the exact quantities at (q, v, a): that call returns ``rnea``'s torque.
Called again and again at one (q, v, a), every scheme reaches ``rnea``'s torque after at most
2 · (tree depth) + 2 calls (the exact values travel one link per call) and stays there.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import spatial as sp
from ..spatial import mm
from ..model import RobotModel
from .dynamics import _a_gravity, _arg, _armature, _kinematics

STALE_SCHEMES = ("binder_herzog", "yamakita", "hamilton")
#: the generated kernel of each scheme (rbdgen.algorithms.stale declares them from this table)
SCHEME_KERNELS = {"binder_herzog": "rnea_stale", "yamakita": "rnea_stale_yamakita", "hamilton": "rnea_stale_hamilton"}
#: steps per call: the first on the previous call's data, each further one on the values the step
#: before produced at the same (q, v, a)
SWEEPS = {"binder_herzog": 1, "yamakita": 1, "hamilton": 2}


@dataclass(frozen=True)
class StaleState:
    """What one call leaves for the next, per body (``(nb, 6)`` each, or ``(N, nb, 6)`` for a
    batch), in body coordinates: the velocity ``v``, the acceleration ``a`` (gravity included),
    the body's own force ``f_own = I a + v ×* I v``, and the force ``f`` its joint transmits to
    its parent (its own plus what its children transmit, before the transform to the parent)."""

    v: np.ndarray
    a: np.ndarray
    f_own: np.ndarray
    f: np.ndarray

    def flat(self) -> np.ndarray:
        """The layout of the generated kernels' ``stale`` array: per body ``[v, a, f_own, f]``
        (24 values), bodies in order — ``(nb * 24,)``, or ``(N, nb * 24)`` for a batch."""
        parts = np.stack([np.asarray(x, dtype=float) for x in (self.v, self.a, self.f_own, self.f)], axis=-2)
        return parts.reshape(parts.shape[:-3] + (-1,))

    @classmethod
    def from_flat(cls, x, nb: int) -> "StaleState":
        """The inverse of :meth:`flat`: a ``(nb * 24,)`` or ``(N, nb * 24)`` array (what the
        generated ``rnea_stale`` kernels take and return) as a StaleState."""
        x = np.asarray(x, dtype=float)
        if x.ndim not in (1, 2) or x.shape[-1] != 24 * nb:
            raise ValueError(f"stale: expected shape ({24 * nb},) or (N, {24 * nb}) (24 values per body, "
                             f"{nb} bodies), got {x.shape}")
        parts = x.reshape(x.shape[:-1] + (nb, 4, 6))
        return cls(*(np.ascontiguousarray(parts[..., k, :]) for k in range(4)))


def _check(model: RobotModel, q, v, a, state, scheme):
    if scheme not in STALE_SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(STALE_SCHEMES)}, got {scheme!r}")

    q, v, a = _arg("q", q, model.nq), _arg("v", v, model.nv), _arg("a", a, model.nv)
    batch = q.ndim == 2
    for name, x in (("v", v), ("a", a)):
        if (x.ndim == 2) != batch or (batch and x.shape[0] != q.shape[0]):
            raise ValueError(f"{name}: shape {x.shape} does not match q shape {q.shape}")
    if state is not None:
        if not isinstance(state, StaleState):
            raise TypeError(f"state must be a StaleState (what the previous call returned) or None, "
                            f"got {type(state).__name__}")
        want = (q.shape[0], model.nb, 6) if batch else (model.nb, 6)
        for name in ("v", "a", "f_own", "f"):
            got = np.shape(getattr(state, name))
            if got != want:
                raise ValueError(f"state.{name}: expected shape {want}, got {got}")
    return q, v, a, batch


def _one(model: RobotModel, q, v, a, old: StaleState | None, scheme: str):

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
    return tau, (vel, acc, f_own, f)


def rnea_stale(model: RobotModel, q, v, a, state: StaleState | None = None, scheme: str = "binder_herzog"):
    """Inverse dynamics with one period old neighbour data (see the module doc): returns
    ``(tau, state)``; pass ``state`` to the next call. One state ``(nq,)`` or a batch
    ``(N, nq)`` (then the state holds ``(N, nb, 6)`` arrays)."""
    if getattr(model, "coupled", False):
        # mimic joints: the tree's recursion on expanded coordinates, τ contracted by virtual
        # work (as rbdgen.reference.rnea does); the state is the tree's bodies'
        cm = model
        _check(cm, q, v, a, None, scheme)
        tau, st = rnea_stale(cm.tree, cm.expand_q(q), cm.expand_v(v), cm.expand_v(a), state, scheme)
        return mm(tau, cm.G), st
    q, v, a, batch = _check(model, q, v, a, state, scheme)
    def call(q, v, a, old):
        if old is None:
            return _one(model, q, v, a, None, scheme)
        for _ in range(SWEEPS[scheme]):  # Hamilton: the step again on what the first produced
            tau, p = _one(model, q, v, a, old, scheme)
            old = StaleState(*p)
        return tau, p

    if not batch:
        tau, parts = call(q, v, a, state)
        return tau, StaleState(*parts)
    taus, parts = [], []
    for k in range(q.shape[0]):
        old = None if state is None else StaleState(state.v[k], state.a[k], state.f_own[k], state.f[k])
        t, p = call(q[k], v[k], a[k], old)
        taus.append(t)
        parts.append(p)
    return np.stack(taus), StaleState(*(np.stack(x) for x in zip(*parts)))


def _flat_reference(scheme):
    """The registry's reference of the generated kernel for ``scheme``: flat state in and out."""
    def ref(model, q, v, a, stale):
        tau, st = rnea_stale(model, q, v, a, StaleState.from_flat(stale, model.nb), scheme=scheme)
        return tau, st.flat()
    ref.__name__ = ref.__qualname__ = f"rnea_stale_{scheme}_flat"
    return ref
