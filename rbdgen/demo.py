"""`make demo` / `rbdgen demo`: what rbdgen does, end to end, on a bundled robot.

1. load the bundled KUKA iiwa 14 and check the NumPy reference against Pinocchio;
2. generate pruned C++ kernels, compile them (cached) and load them;
3. validate every kernel against the reference (and Pinocchio), single state and batch;
4. print how much pruning saved and a small timing table.
"""
from __future__ import annotations

import os
import time

import click
import numpy as np

from . import reference as ref
from .model import load_urdf

KS = ("rnea", "nle", "gravity", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives")


def _relerr(a, b) -> float:
    if isinstance(b, tuple):
        return max(_relerr(x, y) for x, y in zip(a, b))
    return float(np.max(np.abs(np.asarray(a) - b)) / max(1.0, float(np.max(np.abs(b)))))


def _pinocchio(model):
    try:
        import pinocchio as pin
    except ImportError:
        return None
    pm = (pin.buildModelFromUrdf(model.source, pin.JointModelFreeFlyer()) if model.floating_base
          else pin.buildModelFromUrdf(model.source))
    d = pm.createData()
    sym = lambda U: np.triu(U) + np.triu(U, 1).T  # noqa: E731
    cp = lambda t: tuple(x.copy() for x in t)  # noqa: E731  (Pinocchio returns views into d)

    def call(k, q, v, a):
        qp = model.to_pinocchio_q(q)
        if k == "rnea":
            return pin.rnea(pm, d, qp, v, a).copy()
        if k == "nle":
            return pin.nonLinearEffects(pm, d, qp, v).copy()
        if k == "gravity":
            return pin.computeGeneralizedGravity(pm, d, qp).copy()
        if k == "crba":
            return sym(pin.crba(pm, d, qp))
        if k == "aba":
            return pin.aba(pm, d, qp, v, a).copy()
        if k == "minv":
            return sym(pin.computeMinverse(pm, d, qp))
        if k == "rnea_derivatives":
            return cp(pin.computeRNEADerivatives(pm, d, qp, v, a)[:2])
        r = cp(pin.computeABADerivatives(pm, d, qp, v, a))
        return r[0], r[1], sym(r[2])

    return call


def _args(k, q, v, a):
    return {"rnea": (q, v, a), "nle": (q, v), "gravity": (q,), "crba": (q,), "aba": (q, v, a), "minv": (q,),
            "rnea_derivatives": (q, v, a), "aba_derivatives": (q, v, a)}[k]


def _time_per_call(f, args, budget=0.15):
    f(*args)
    n, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            f(*args)
        t = time.perf_counter() - t0
        if t > budget or n > 1 << 20:
            return t / n
        n *= 4


def run_demo() -> None:
    from . import build, robots
    from .algorithms import trace

    t0 = time.perf_counter()
    model = load_urdf(robots.path("iiwa14"))
    click.echo(f"== {model.name}: {model.nb} bodies, nq={model.nq}, nv={model.nv}, fixed base, "
               f"{model.total_mass:.2f} kg ({len(model.merged_fixed)} fixed joint merged) — {robots.path('iiwa14')}")
    pin_call = _pinocchio(model)

    click.echo("\n-- generating and compiling C++ kernels (g++ -O3, cached after the first run) ...")
    t1 = time.perf_counter()
    kern = build(model, progress=lambda msg: click.echo(f"   {msg}"))
    click.echo(f"   ready in {time.perf_counter() - t1:.1f} s: {kern.path}")

    rng = np.random.default_rng(0)
    N = 64
    q = model.random_q(rng, N)
    v, a = rng.normal(size=(2, N, model.nv))
    worst = {"ref": 0.0, "pin": 0.0}
    click.echo("\n-- validation on 64 random states (max relative error, single state and batch)")
    click.echo(f"   {'kernel':<17} {'ops pruned':>10} {'ops dense':>10} {'saved':>6}  {'vs reference':>12} {'vs Pinocchio':>12}")
    for k in KS:
        args = _args(k, q, v, a)
        exp = getattr(ref, k)(model, *args)
        got = getattr(kern, k)(*args)
        one = getattr(kern, k)(*(x[0] for x in args))
        e0 = tuple(x[0] for x in exp) if isinstance(exp, tuple) else exp[0]
        e_ref = max(_relerr(got, exp), _relerr(one, e0))
        e_pin = _relerr(one, pin_call(k, q[0], v[0], a[0])) if pin_call else float("nan")
        worst["ref"] = max(worst["ref"], e_ref)
        worst["pin"] = max(worst["pin"], e_pin) if pin_call else worst["pin"]
        cp, cd = kern.op_counts[k]["total"], trace(model, k, fold=False).op_counts()["total"]
        click.echo(f"   {k:<17} {cp:>10} {cd:>10} {1 - cp / cd:>6.0%}  {e_ref:>12.1e} {e_pin:>12.1e}")

    click.echo(f"\n-- time per state on this machine ({os.cpu_count()} cores; Python call overhead included)")
    click.echo(f"   {'kernel':<17} {'single':>10} {'batch 1024':>11} {'NumPy ref':>11} {'Pinocchio*':>11}")
    Nb = 1024
    qb = model.random_q(rng, Nb)
    vb, ab = rng.normal(size=(2, Nb, model.nv))
    for k in KS:
        args1 = tuple(x[0] for x in _args(k, qb, vb, ab))
        argsb = _args(k, qb, vb, ab)
        outs1 = getattr(kern, k)(*args1)
        outsb = getattr(kern, k)(*argsb)
        t_single = _time_per_call(lambda *x: getattr(kern, k)(*x, out=outs1), args1)
        t_batch = _time_per_call(lambda *x: getattr(kern, k)(*x, out=outsb), argsb) / Nb
        t_ref = _time_per_call(lambda *x: getattr(ref, k)(model, *x), args1, budget=0.05)
        t_pin = _time_per_call(lambda *x: pin_call(k, *x), (qb[0], vb[0], ab[0]), budget=0.05) \
            if pin_call else float("nan")
        click.echo(f"   {k:<17} {t_single * 1e9:>8.0f}ns {t_batch * 1e9:>9.0f}ns {t_ref * 1e6:>9.0f}µs {t_pin * 1e9:>9.0f}ns")
    click.echo("   * Pinocchio through its Python bindings (call overhead included); `make bench` compares "
               "against Pinocchio's C++")

    ok = worst["ref"] <= 1e-9 and (not pin_call or worst["pin"] <= 1e-9)
    click.echo(f"\nworst error: {worst['ref']:.1e} vs reference, {worst['pin']:.1e} vs Pinocchio (bound 1e-9) "
               f"-> {'OK' if ok else 'FAILED'}   [{time.perf_counter() - t0:.1f} s]")
    click.echo("next: `rbdgen generate robots/iiwa14.urdf --out DIR` writes these kernels as an importable package;"
               " `rbdgen validate <your robot>.urdf` checks them on your robot")
    if not ok:
        raise SystemExit(1)
