"""Stale-data inverse dynamics (issue 14, issue 39), traced and declared: Newton-Euler whose links
take some of their quantities from the previous call, so links do not wait for each other.

The equations are :mod:`rbdgen.reference.stale`'s, one kernel per scheme:

* ``rnea_stale`` — Binder & Herzog's zero-order prediction in spatial vectors
  (``scheme="binder_herzog"``): body i's velocity and acceleration from its *parent's* previous
  ones, then its transmitted force from its own fresh force and its *children's* previous
  transmitted forces. Two link steps deep.
* ``rnea_stale_yamakita`` — Yamakita's buffering: as above, but the transmitted force takes the
  body's own force of the previous call too, so the backward step does not wait for the forward
  one. One link step deep.
* ``rnea_stale_hamilton`` — Hamilton, Walker & Bennett's scheme (``scheme="hamilton"``), their
  Table 1 with every boxed term from the previous call, in their Luh–Walker–Paul link-frame
  3-vectors: no equation of a call waits for another link, and of the link's own equations only
  f_i waits for a_{c,i} and n_i (Table 1's τ_i) for α_i.
* ``rnea_stale_binder_herzog_lwp`` — the same equations with only Table 1's double boxes (the
  neighbours' terms) stale: Binder–Herzog as Hamilton et al. mark it, in their formulation.

The spatial kernels take ``stale`` (per body ``[v, a, f_own, f]``, 24 values in body
coordinates; :meth:`rbdgen.reference.StaleState.flat`), the Luh–Walker–Paul ones ``stale_lwp``
(per body ``[ω, ω̇, α, a_e, f, n]``, 18 values; :meth:`rbdgen.reference.stale.LWPState.flat`),
each the previous call's ``stale_next``. Outputs ``tau`` and ``stale_next``. Every body's work
depends only on its own joint and on the state (and, in the Luh–Walker–Paul kernels, on the
gravity g_i = (R_0^i)ᵀ g of Table 1's f_i, a product of the current joint rotations from the
root: the one chain through the tree that remains), so the critical path of the recursion does
not grow with the number of links (``inspect --cost``, column *depth*). The work is passes
— joint transforms, forward step, force step — with one block per body in each, tagged with the
body, so a schedule (the CUDA block shape, HLS) runs each pass's bodies side by side.

The state's entries that every call returns as the same constant (:func:`structural_constants`:
a planar arm's out-of-plane motion, the first body's gravity along its axis) are taken as those
constants, not read: the previous call's numbers would otherwise hide zeros the exact recursion
prunes (the 3-link arm: 266 → 116 ops, rnea 104; iiwa: 978 → 896, rnea 820).
"""
from __future__ import annotations

import numpy as np

from .. import reference as ref
from .. import spatial as sp
from ..reference.stale import _flat_reference
from ..registry import Arg, declare
from . import spatial as S
from .trace import Trace

#: values per body in the spatial schemes' state: v, a, f_own, f
_PER_BODY = 24


def _step(t: Trace, q, v, a, stale, scheme: str):
    """One call of a spatial scheme on ``stale`` (the previous call's values)."""
    m, g = t.m, t.g
    nb = m.nb
    label = scheme

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
        f_own = f_own_of[i] = S.Inertia.from_matrix(I).body_force(g, vel, acc)
        nxt[_PER_BODY * i:_PER_BODY * i + 18] = vel + acc + f_own
    for i in range(nb):
        t.block(f"rnea_stale ({label}): transmitted force", i)
        vs = m.v_slice(i)
        # the transmitted force: own (this call's, or the previous call's when buffered) plus
        # the children's transmitted forces of the previous call, in this body's coordinates
        fi = list(f_own_of[i] if scheme != "yamakita" else old(i, 2))
        for c in m.children(i):
            fi = S.vadd(fi, t.X(c, q).force_T(g, old(c, 3)))
        tau[vs] = _armature(t, i, t.ST_times(i, fi), a)
        nxt[_PER_BODY * i + 18:_PER_BODY * (i + 1)] = fi
    return tau, nxt


def _armature(t, i, tau_i, a):
    """τ_i plus the joint's rotor term armature·q̈ (its own joint's: nothing stale)."""
    m = t.m
    vs = m.v_slice(i)
    arm = m.joint_armature(i)
    if not np.any(arm):
        return tau_i
    return [x + float(c) * a[vs.start + r] if c else x for r, (x, c) in enumerate(zip(tau_i, arm))]


#: values per body in the Luh–Walker–Paul schemes' state: ω, ω̇, α, a_e, f, n
_PER_BODY_LWP = 18
_LWP_FIELDS = {k: 3 * j for j, k in enumerate(ref.stale.LWPState.FIELDS)}


def _lwp_step(t: Trace, q, v, a, stale, scheme: str, boxes: frozenset | None = None):
    """One call of a Luh–Walker–Paul scheme: :func:`rbdgen.reference.stale._lwp_one`'s equations
    (Hamilton et al.'s Table 1) over traced Values, the boxed terms read from ``stale``.
    ``boxes`` overrides the scheme's (``frozenset()``: the exact Luh–Walker–Paul recursion, which
    benchmarks/lathrop.py counts; ``stale`` is then not read)."""
    m, g = t.m, t.g
    nb = m.nb
    boxes = ref.stale.LWP_BOXES[scheme] if boxes is None else boxes
    P = _PER_BODY_LWP

    def old(i, k):  # body i's quantity k of the previous call
        base = P * i + _LWP_FIELDS[k]
        return stale[base:base + 3]

    def pick(term, now, i, k):
        return old(i, k) if term in boxes else now

    def cross(x, y):
        return S.cross(x, y)

    def consts(x):
        return [g.const(float(e)) for e in x]

    zero3 = [g.const(0.0)] * 3
    parts = [sp.inertia_parts(m.inertia[i]) for i in range(nb)]
    nxt = [None] * (P * nb)
    tau = [None] * m.nv
    w, wd, al, ac, gr = ([None] * nb for _ in range(5))
    ae = [None] * nb
    label = f"rnea_stale ({scheme})" if boxes else "Newton–Euler (Luh–Walker–Paul)"
    for i in range(nb):
        t.block(f"{label}: joint transform, gravity in the link's frame", i)
        X = t.X(i, q)
        gp = consts(m.gravity) if m.parent[i] < 0 else gr[m.parent[i]]
        gr[i] = S.mat3_vec(g, X.E, gp)
    for i in range(nb):
        t.block(f"{label}: ω, ω̇, α, a_e, a_c", i)
        X = t.X(i, q)
        E = X.E
        p = m.parent[i]
        vs = m.v_slice(i)
        Sm = m.motion_subspace(i)
        Sw, Sv = t.consts(Sm[:3]), t.consts(Sm[3:])
        wJ, vJ = S.mat_vec(g, Sw, v[vs]), S.mat_vec(g, Sv, v[vs])
        wA, vA = S.mat_vec(g, Sw, a[vs]), S.mat_vec(g, Sv, a[vs])
        if p < 0:
            wp = wdp = alp = zero3
        else:
            wp = pick("w_parent", w[p], p, "w")
            wdp = pick("wd_parent", wd[p], p, "wd")
            alp = pick("alpha_parent", al[p], p, "alpha")
        aep = pick("ae_parent", ae[i] if ae[i] is not None else zero3, i, "ae") if p >= 0 else zero3
        Ew = S.mat3_vec(g, E, wp)
        w[i] = S.vadd(Ew, wJ)
        wd[i] = S.vadd(S.vadd(S.mat3_vec(g, E, wdp), cross(Ew, wJ)), wA)
        al[i] = S.vadd(S.vadd(S.mat3_vec(g, E, alp), cross(pick("w_in_alpha", w[i], i, "w"), wJ)), wA)
        a_o = S.vadd(S.vadd(S.mat3_vec(g, E, aep), vA), cross(S.vadd(wJ, S.vscale(2.0, Ew)), vJ))
        wd_a = pick("wd_in_acc", wd[i], i, "wd")
        w_a = pick("w_in_acc", w[i], i, "w")
        c = consts(parts[i][1])
        ac[i] = S.vadd(S.vadd(a_o, cross(wd_a, c)), cross(w_a, cross(w_a, c)))
        for ch in m.children(i):
            rc = t.X(ch, q).r
            ae[ch] = S.vadd(S.vadd(a_o, cross(wd_a, rc)), cross(w_a, cross(w_a, rc)))
    for i in range(nb):
        base = P * i
        nxt[base:base + 9] = w[i] + wd[i] + al[i]
        nxt[base + 9:base + 12] = ae[i] if m.parent[i] >= 0 else zero3
    f, n = [None] * nb, [None] * nb
    # the force step: with the children's f and n from the previous call no body waits for
    # another (Binder–Herzog's Table 1 too); the exact recursion (never traced here) would
    order = range(nb) if "f_children" in boxes else reversed(range(nb))
    for i in order:
        t.block(f"{label}: f, n (τ_i of Table 1), joint torque", i)
        mass, com, Ic = parts[i]
        c, Icv = consts(com), t.consts(Ic)
        kids = m.children(i)
        fc = {ch: pick("f_children", f[ch], ch, "f") for ch in kids}
        nc = {ch: pick("n_children", n[ch], ch, "n") for ch in kids}
        fi = S.vsub(S.vscale(float(mass), ac[i]), S.vscale(float(mass), gr[i]))
        for ch in kids:
            fi = S.vadd(fi, S.mat3T_vec(g, t.X(ch, q).E, fc[ch]))
        f[i] = fi
        f_n = pick("f_in_n", fi, i, "f")
        w_n = pick("w_in_n", w[i], i, "w")
        ni = S.vadd(S.vsub(S.mat3_vec(g, Icv, al[i]), cross(f_n, c)), cross(w_n, S.mat3_vec(g, Icv, w_n)))
        for ch in kids:
            Xc = t.X(ch, q)
            ni = S.vadd(S.vadd(ni, S.mat3T_vec(g, Xc.E, nc[ch])),
                        cross(S.mat3T_vec(g, Xc.E, fc[ch]), S.vsub(c, Xc.r)))
        n[i] = ni
        Sm = m.motion_subspace(i)
        ti = S.vadd(S.matT_vec(g, t.consts(Sm[:3]), ni), S.matT_vec(g, t.consts(Sm[3:]), fi))
        tau[m.v_slice(i)] = _armature(t, i, ti, a)
        nxt[P * i + 12:P * (i + 1)] = fi + ni
    return tau, nxt


def _rnea_stale_values(t: Trace, q, v, a, stale, scheme: str):
    step = _lwp_step if ref.stale.is_lwp(scheme) else _step
    tau, nxt = step(t, q, v, a, stale, scheme)
    return {"tau": tau, "stale_next": nxt}


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
    size = ref.stale.per_body(scheme) * model.nb
    known: dict = {}
    # the set only grows (an output constant with fewer inputs fixed stays constant with more),
    # and each round that does not stop adds an entry: at most size + 1 rounds (in practice
    # the constants travel a tree level per round)
    for _ in range(size + 2):
        t = Trace(model)
        q, v, a = t.inputs("q", model.nq), t.inputs("v", model.nv), t.inputs("a", model.nv)
        stale = [t.g.const(known[k]) if k in known else x for k, x in enumerate(t.inputs("stale", size))]
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


def _exact_env(scheme):
    """The Pinocchio comparison's inputs: the state set to the exact one at (q, v, a), where the
    kernel's outputs are Pinocchio quantities (its fixed point)."""
    name = "stale_lwp" if ref.stale.is_lwp(scheme) else "stale"

    def env_of(model, env):
        return dict(env, **{name: ref.rnea_stale(model, env["q"], env["v"], env["a"], scheme=scheme)[1].flat()})
    return env_of


def _ang_lin(x):  # Pinocchio orders spatial vectors [linear; angular], rbdgen [angular; linear]
    return np.concatenate([x.angular, x.linear])


def _pin_rnea_stale(pin, pm, data, q, v, a, stale):
    """At the exact state: τ is Pinocchio's rnea, and the next state its per-joint quantities
    after rnea (local frames): velocity ``data.v``, acceleration with gravity ``data.a_gf``, the
    body's own force I a + v ×* I v, and the transmitted force ``data.f``."""
    tau = pin.rnea(pm, data, q, v, a).copy()
    out = []
    for j in range(1, pm.njoints):
        I, vj, aj = pm.inertias[j], data.v[j], data.a_gf[j]
        f_own = I * aj + vj.cross(I * vj)
        out += [_ang_lin(vj), _ang_lin(aj), _ang_lin(f_own), _ang_lin(data.f[j])]
    return tau, np.concatenate(out)


def _pin_rnea_stale_lwp(pin, pm, data, q, v, a, stale):
    """At the exact state: τ is Pinocchio's rnea, and the next state Table 1's recursion variables
    from its per-joint quantities after rnea (local frames): ω and ω̇ = α the angular parts of
    ``data.v`` and ``data.a`` (gravity apart), a_e at joint j the acceleration of the parent's
    point at joint j's origin (the parent's classical acceleration carried there, in the parent's
    frame), f and n the linear and angular parts of ``data.f``."""
    tau = pin.rnea(pm, data, q, v, a).copy()
    pin.forwardKinematics(pm, data, q, v, a)  # data.a: the accelerations without gravity (rnea keeps data.f)
    out = []
    for j in range(1, pm.njoints):
        p = pm.parents[j]
        if p == 0:
            e = np.zeros(3)
        else:
            w, vl, wdot, al = data.v[p].angular, data.v[p].linear, data.a[p].angular, data.a[p].linear
            r = data.liMi[j].translation  # the origin of joint j (now) in the parent's frame
            e = al + np.cross(w, vl) + np.cross(wdot, r) + np.cross(w, np.cross(w, r))
        vj, aj, fj = data.v[j], data.a[j], data.f[j]
        out += [vj.angular, aj.angular, aj.angular, e, fj.linear, fj.angular]
    return tau, np.concatenate(out)


_OUTS = (Arg("tau", ("nv",), "joint torques"),
         Arg("stale_next", (f"{_PER_BODY}*nb",), "the state for the next call (per body v, a, f_own, f)"))
_OUTS_LWP = (Arg("tau", ("nv",), "joint torques"),
             Arg("stale_next", (f"{_PER_BODY_LWP}*nb",),
                 "the state for the next call (per body Luh–Walker–Paul ω, ω̇, α, a_e, f, n)"))
#: measured (`rbdgen validate`, iiwa14 and the floating quadruped, 16 states each) against the
#: reference: ap_fixed<32,16> ≤ 3.0e-5, ap_fixed<48,24> ≤ 9.1e-8, float32 ≤ 1.4e-7 — no worse
#: than rnea (each link's error no longer accumulates down the chain); the Luh–Walker–Paul
#: kernels ≤ 3.5e-5, 8.5e-8 and 1.3e-7. Bounds: 10× (fixed) and 30× (float32, rnea's bound) the
#: spatial kernels' measurement; the test suite holds every robot to them
_FIXED = {(32, 16): 4e-4, (48, 24): 1e-6}

#: how each scheme's one-line doc names it; the kernel names are ref.stale.SCHEME_KERNELS'.
#: gpu_shape "block": each pass's bodies are the block's lanes (the warp model: 2.6× and 2.9×
#: on the iiwa's latency for Binder–Herzog and Yamakita, rnea 1.0×)
_WHAT = {"binder_herzog": "Binder–Herzog's scheme in spatial vectors",
         "yamakita": "Yamakita's buffered scheme",
         "hamilton": "every recursion variable one call old, Hamilton, Walker & Bennett's Table 1 "
                     "(Luh–Walker–Paul link-frame vectors)",
         "binder_herzog_lwp": "the neighbours' recursion variables one call old, Binder–Herzog as "
                              "Hamilton, Walker & Bennett's Table 1 marks it (Luh–Walker–Paul link-frame vectors)"}
#: kernel name → (scheme, how the one-line doc names it)
KERNEL_SCHEMES = {ref.stale.SCHEME_KERNELS[s]: (s, _WHAT[s]) for s in ref.STALE_SCHEMES}
for _name, (_scheme, _what) in KERNEL_SCHEMES.items():
    _lwp = ref.stale.is_lwp(_scheme)
    declare(_name, f"inverse dynamics τ with one call old data, {_what} (rbdgen.reference.rnea_stale, "
                   f"scheme='{_scheme}'); {'stale_lwp' if _lwp else 'stale'}: the previous call's stale_next",
            inputs=("q", "v", "a", "stale_lwp" if _lwp else "stale"), outputs=_OUTS_LWP if _lwp else _OUTS,
            algorithm=_algorithm(_scheme), coupled=_coupled(_scheme),
            reference=_flat_reference(_scheme), pinocchio=_pin_rnea_stale_lwp if _lwp else _pin_rnea_stale,
            pinocchio_env=_exact_env(_scheme),
            pinocchio_note="at the exact state of (q, v, a) (its fixed point): Pinocchio's rnea and its "
                           + ("per-joint ω, ω̇, a_e, f and n" if _lwp else "per-joint v, a_gf, own force and f"),
            float32_tol=4e-6, fixed_tol=_FIXED, gpu_shape="block")
