"""Stale-data inverse dynamics (issue 14), traced and declared: Newton-Euler whose links take
their neighbours' quantities from the previous call, so no link waits for another.

The equations are :mod:`rbdgen.reference.stale`'s, one kernel per scheme:

* ``rnea_stale`` — Binder & Herzog's zero-order prediction (``scheme="binder_herzog"``): body i's
  velocity and acceleration from its *parent's* previous ones, then its transmitted force from
  its own fresh force and its *children's* previous transmitted forces. Two link steps deep.
* ``rnea_stale_yamakita`` — Yamakita's buffering: as above, but the transmitted force takes the
  body's own force of the previous call too, so the backward step does not wait for the forward
  one. One link step deep.

Inputs ``q, v, a`` and ``stale``, the previous call's ``stale_next`` (per body ``[v, a, f_own,
f]``, 24 values in body coordinates; :meth:`rbdgen.reference.StaleState.flat` is the layout).
Outputs ``tau`` and ``stale_next``. Every body's work depends only on its own joint and on
``stale``, so the critical path does not grow with the number of links (``inspect --cost``,
column *depth*). Each body's work is one block, tagged with the body, for the schedules.
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


def _rnea_stale_values(t: Trace, q, v, a, stale, scheme: str):
    m, g = t.m, t.g
    nb = m.nb

    def old(i, k):  # body i's quantity k (0 v, 1 a, 2 f_own, 3 f) of the previous call
        base = _PER_BODY * i + 6 * k
        return stale[base:base + 6]

    a0 = t.a_gravity()
    nxt = [None] * (_PER_BODY * nb)
    tau = [None] * m.nv
    for i in range(nb):
        t.block(f"rnea_stale ({scheme}): body", i)
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
        f_own = S.vadd(S.mat_vec(g, I, acc), S.crf(g, vel, S.mat_vec(g, I, vel)))
        # the transmitted force: own (this call's, or the previous call's when buffered) plus
        # the children's transmitted forces of the previous call, in this body's coordinates
        fi = list(f_own if scheme == "binder_herzog" else old(i, 2))
        for c in m.children(i):
            fi = S.vadd(fi, t.X(c, q).force_T(g, old(c, 3)))
        tau[vs] = t.ST_times(i, fi)
        nxt[_PER_BODY * i:_PER_BODY * (i + 1)] = vel + acc + f_own + fi
    return {"tau": tau, "stale_next": nxt}


def _bh(t, q, v, a, stale):
    return _rnea_stale_values(t, q, v, a, stale, "binder_herzog")


def _yk(t, q, v, a, stale):
    return _rnea_stale_values(t, q, v, a, stale, "yamakita")


def _coupled(scheme):
    # mimic joints: the tree's recursion on expanded coordinates, τ contracted (as rnea); the
    # state is the tree's bodies'
    def f(t, c, q, v, a, stale):
        out = _rnea_stale_values(t, c.q(q), c.v(v), c.v(a), stale, scheme)
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
#: reference: ap_fixed<32,16> ≤ 3.9e-5, ap_fixed<48,24> ≤ 9.4e-8, float32 ≤ 1.4e-7 — no worse
#: than rnea (each link's error no longer accumulates down the chain). Bounds: 10× (fixed) and
#: 30× (float32, rnea's bound) the measurement; the test suite holds every robot to them
_FIXED = {(32, 16): 4e-4, (48, 24): 1e-6}

declare("rnea_stale", "inverse dynamics τ with one call old neighbour data, Binder–Herzog's scheme "
        "(rbdgen.reference.rnea_stale, scheme='binder_herzog'); stale: the previous call's stale_next",
        inputs=("q", "v", "a", "stale"), outputs=_OUTS, algorithm=_bh, coupled=_coupled("binder_herzog"),
        reference=_flat_reference("binder_herzog"),
        pinocchio=_pin_rnea_stale, pinocchio_env=_exact_env,
        pinocchio_note="at the exact state of (q, v, a) (its fixed point): Pinocchio's rnea and its "
                       "per-joint v, a_gf, own force and f",
        float32_tol=4e-6, fixed_tol=_FIXED, gpu_shape="thread")
declare("rnea_stale_yamakita", "inverse dynamics τ with one call old neighbour data, Yamakita's buffered "
        "scheme (rbdgen.reference.rnea_stale, scheme='yamakita'); stale: the previous call's stale_next",
        inputs=("q", "v", "a", "stale"), outputs=_OUTS, algorithm=_yk, coupled=_coupled("yamakita"),
        reference=_flat_reference("yamakita"),
        pinocchio=_pin_rnea_stale, pinocchio_env=_exact_env,
        pinocchio_note="at the exact state of (q, v, a) (its fixed point): Pinocchio's rnea and its "
                       "per-joint v, a_gf, own force and f",
        float32_tol=4e-6, fixed_tol=_FIXED, gpu_shape="thread")

# the reference module's names, for readers of the declarations
assert ref.STALE_SCHEMES == ("binder_herzog", "yamakita")
