"""Stale-data inverse dynamics (issue 14), traced and declared: Newton-Euler whose links take
their neighbours' quantities from the previous call, so no link waits for another.

The equations are :mod:`rbdgen.reference.stale`'s, one kernel per scheme:

* ``rnea_stale`` — Binder & Herzog's zero-order prediction (``scheme="binder_herzog"``): body i's
  velocity and acceleration from its *parent's* previous ones, then its transmitted force from
  its own fresh force and its *children's* previous transmitted forces. Two link steps deep.
* ``rnea_stale_yamakita`` — Yamakita's buffering: as above, but the transmitted force takes the
  body's own force of the previous call too, so the backward step does not wait for the forward
  one. One link step deep.
* ``rnea_stale_hamilton`` — Hamilton, Walker & Bennett's speculative computation as rbdgen reads
  it (``scheme="hamilton"``): Binder–Herzog's step on the previous call's data, then the same step
  once more at the same (q, v, a) on what the first produced (one call = two Binder–Herzog calls).
  The second forward step overlaps the first force step: three link steps deep.

Inputs ``q, v, a`` and ``stale``, the previous call's ``stale_next`` (per body ``[v, a, f_own,
f]``, 24 values in body coordinates; :meth:`rbdgen.reference.StaleState.flat` is the layout).
Outputs ``tau`` and ``stale_next``. Every body's work depends only on its own joint and on
``stale``, so the critical path does not grow with the number of links (``inspect --cost``,
column *depth*). The work is three passes — joint transforms, forward step, force step — with
one block per body in each, tagged with the body, so a schedule (the CUDA block shape, HLS)
runs each pass's bodies side by side.

The state's entries that every call returns as the same constant (:func:`structural_constants`:
a planar arm's out-of-plane motion, the first body's gravity along its axis) are taken as those
constants, not read: the previous call's numbers would otherwise hide zeros the exact recursion
prunes (the 3-link arm: 266 → 116 ops, rnea 104; iiwa: 978 → 896, rnea 820).
"""
from __future__ import annotations

import numpy as np

from .. import reference as ref
from ..reference.stale import _flat_reference
from ..registry import Arg, declare
from . import spatial as S
from .trace import Trace

#: values per body in the state: v, a, f_own, f
_PER_BODY = 24


def _step(t: Trace, q, v, a, stale, scheme: str, label: str, first: bool = True):
    """One step of ``scheme`` on ``stale`` (the previous call's values, or the step before's)."""
    m, g = t.m, t.g
    nb = m.nb

    def old(i, k):  # body i's quantity k (0 v, 1 a, 2 f_own, 3 f) of the previous call
        base = _PER_BODY * i + 6 * k
        return stale[base:base + 6]

    a0 = t.a_gravity()
    nxt = [None] * (_PER_BODY * nb)
    tau = [None] * m.nv
    # three passes, each a block per body and no body waiting for another within a pass: the
    # joint transforms (a parent's force step needs its children's), the forward step, the force
    # step. A schedule (the CUDA block shape, HLS) runs every body of a pass at once
    for i in range(nb):
        if first:  # later steps reuse the transforms
            t.block(f"rnea_stale ({label}): joint transform", i)
            t.X(i, q)
    f_own_of = [None] * nb
    for i in range(nb):
        t.block(f"rnea_stale ({label}): velocity, acceleration, own force", i)
        X = t.X(i, q)
        p = m.parent[i]
        vs = m.v_slice(i)
        vJ = t.S_times(i, v[vs])
        Sa = t.S_times(i, a[vs])
        if p < 0:
            vel = vJ
            acc = S.vadd(X.motion(g, a0), Sa)
        else:
            vel = S.vadd(X.motion(g, old(p, 0)), vJ)
            acc = S.vadd(S.vadd(X.motion(g, old(p, 1)), Sa), S.crm(g, vel, vJ))
        I = t.I(i)
        f_own = f_own_of[i] = S.vadd(S.mat_vec(g, I, acc), S.crf(g, vel, S.mat_vec(g, I, vel)))
        nxt[_PER_BODY * i:_PER_BODY * i + 18] = vel + acc + f_own
    for i in range(nb):
        t.block(f"rnea_stale ({label}): transmitted force", i)
        vs = m.v_slice(i)
        # the transmitted force: own (this call's, or the previous call's when buffered) plus
        # the children's transmitted forces of the previous call, in this body's coordinates
        fi = list(f_own_of[i] if scheme != "yamakita" else old(i, 2))
        for c in m.children(i):
            fi = S.vadd(fi, t.X(c, q).force_T(g, old(c, 3)))
        tau[vs] = t.ST_times(i, fi)
        arm = m.joint_armature(i)
        if np.any(arm):  # the joint's rotor: armature·q̈, its own joint's (nothing stale)
            tau[vs] = [x + float(c) * a[vs.start + r] if c else x for r, (x, c) in enumerate(zip(tau[vs], arm))]
        nxt[_PER_BODY * i + 18:_PER_BODY * (i + 1)] = fi
    return tau, nxt


def _rnea_stale_values(t: Trace, q, v, a, stale, scheme: str):
    sweeps = ref.stale.SWEEPS[scheme]
    for s in range(sweeps):  # Hamilton: the step again, on what the step before produced
        label = scheme if sweeps == 1 else f"{scheme}, {('speculation', 'verification')[min(s, 1)]} step {s + 1}"
        tau, stale = _step(t, q, v, a, stale, scheme, label, first=s == 0)
    return {"tau": tau, "stale_next": stale}


def structural_constants(model, scheme: str) -> dict:
    """The entries of the state that are the same constant after every call, whatever q, v, a
    and the previous state (index → value): zeros of the tree's structure (a planar arm's
    out-of-plane velocities) and constants (the gravity a fixed base's first body feels along its
    joint axis). The exact recursion knows these from its own zeros; a stale input would hide
    them. Found as a fixed point: trace one call with the state free, fix the entries that come
    out constant, trace again, until nothing new comes out constant (each round is sound for
    every state a call returns, so the result is). The state the kernel returns keeps these
    values, and ``rbdgen.reference.rnea_stale``'s states have them too (the exact state is the
    map's unique fixed point), so the kernel may ignore those inputs."""
    from .trace import Trace

    known: dict = {}
    # the set only grows (an output constant with fewer inputs fixed stays constant with more),
    # and each round that does not stop adds an entry: at most 24·nb + 1 rounds (in practice
    # the constants travel a tree level per round)
    for _ in range(_PER_BODY * model.nb + 2):
        t = Trace(model)
        q, v, a = t.inputs("q", model.nq), t.inputs("v", model.nv), t.inputs("a", model.nv)
        stale = [t.g.const(known[k]) if k in known else x for k, x in enumerate(t.inputs("stale", _PER_BODY * model.nb))]
        out = _rnea_stale_values(t, q, v, a, stale, scheme)["stale_next"]
        found = {k: x.const for k, x in enumerate(out) if x.const is not None}
        if found == known:
            return known
        known = found
    raise AssertionError("rnea_stale: the state's structural constants did not settle")  # pragma: no cover


def _pruned_state(t, stale, scheme):
    """The state input with its structural constants (see :func:`structural_constants`) in place of
    the entries, when the trace folds constants (the dense trace keeps every entry)."""
    if not t.g.fold:
        return stale
    known = structural_constants(t.m, scheme)
    return [t.g.const(known[k]) if k in known else x for k, x in enumerate(stale)]


def _algorithm(scheme):
    def f(t, q, v, a, stale):
        return _rnea_stale_values(t, q, v, a, _pruned_state(t, stale, scheme), scheme)
    return f


def _coupled(scheme):
    # mimic joints: the tree's recursion on expanded coordinates, τ contracted (as rnea); the
    # state is the tree's bodies' (its structural constants are the tree's: coupling only
    # restricts q and v, so a constant for every tree state is one for every coupled state)
    def f(t, c, q, v, a, stale):
        out = _rnea_stale_values(t, c.q(q), c.v(v), c.v(a), _pruned_state(t, stale, scheme), scheme)
        return {"tau": c.tau(out["tau"]), "stale_next": out["stale_next"]}
    return f


def _exact_env(model, env):
    """The Pinocchio comparison's inputs: the state set to the exact one at (q, v, a), where the
    kernel's outputs are Pinocchio quantities (its fixed point)."""
    return dict(env, stale=ref.rnea_stale(model, env["q"], env["v"], env["a"])[1].flat())


def _pin_rnea_stale(pin, pm, data, q, v, a, stale):
    """At the exact state: τ is Pinocchio's rnea, and the next state its per-joint quantities
    after rnea (local frames; Pinocchio orders spatial vectors [linear; angular], rbdgen
    [angular; linear]): velocity ``data.v``, acceleration with gravity ``data.a_gf``, the
    body's own force I a + v ×* I v, and the transmitted force ``data.f``."""
    tau = pin.rnea(pm, data, q, v, a).copy()
    ang_lin = lambda x: np.concatenate([x.angular, x.linear])  # noqa: E731
    out = []
    for j in range(1, pm.njoints):
        I, vj, aj = pm.inertias[j], data.v[j], data.a_gf[j]
        f_own = I * aj + vj.cross(I * vj)
        out += [ang_lin(vj), ang_lin(aj), ang_lin(f_own), ang_lin(data.f[j])]
    return tau, np.concatenate(out)


_OUTS = (Arg("tau", ("nv",), "joint torques"),
         Arg("stale_next", (f"{_PER_BODY}*nb",), "the state for the next call (per body v, a, f_own, f)"))
#: measured (`rbdgen validate`, iiwa14 and the floating quadruped, 16 states each) against the
#: reference: ap_fixed<32,16> ≤ 3.0e-5, ap_fixed<48,24> ≤ 9.1e-8, float32 ≤ 1.4e-7 — no worse
#: than rnea (each link's error no longer accumulates down the chain). Bounds: 10× (fixed) and
#: 30× (float32, rnea's bound) the measurement; the test suite holds every robot to them
_FIXED = {(32, 16): 4e-4, (48, 24): 1e-6}

#: how each scheme's one-line doc names it; the kernel names are ref.stale.SCHEME_KERNELS'.
#: gpu_shape "block": each pass's bodies are the block's lanes (the warp model: 2.6× and 2.9×
#: on the iiwa's latency for Binder–Herzog and Yamakita, rnea 1.0×)
_WHAT = {"binder_herzog": "Binder–Herzog's scheme", "yamakita": "Yamakita's buffered scheme",
         "hamilton": "speculated, then one verification sweep each way (Hamilton et al. as rbdgen reads them)"}
#: kernel name → (scheme, how the one-line doc names it)
KERNEL_SCHEMES = {ref.stale.SCHEME_KERNELS[s]: (s, _WHAT[s]) for s in ref.STALE_SCHEMES}
for _name, (_scheme, _what) in KERNEL_SCHEMES.items():
    declare(_name, f"inverse dynamics τ with one call old neighbour data, {_what} (rbdgen.reference.rnea_stale, "
                   f"scheme='{_scheme}'); stale: the previous call's stale_next",
            inputs=("q", "v", "a", "stale"), outputs=_OUTS, algorithm=_algorithm(_scheme), coupled=_coupled(_scheme),
            reference=_flat_reference(_scheme), pinocchio=_pin_rnea_stale, pinocchio_env=_exact_env,
            pinocchio_note="at the exact state of (q, v, a) (its fixed point): Pinocchio's rnea and its "
                           "per-joint v, a_gf, own force and f",
            float32_tol=4e-6, fixed_tol=_FIXED, gpu_shape="block")
