"""`make demo` / `rbdgen demo`: what rbdgen does, end to end, on the bundled robots."""
from __future__ import annotations

import time

import click
import numpy as np

from . import reference as ref
from .model import load_urdf


def _relerr(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) - b)) / max(1.0, float(np.max(np.abs(b)))))


def _pinocchio_errors(model, q, v, a, tau):
    try:
        import pinocchio as pin
    except ImportError:
        return None
    pm = (pin.buildModelFromUrdf(model.source, pin.JointModelFreeFlyer()) if model.floating_base
          else pin.buildModelFromUrdf(model.source))
    d = pm.createData()
    qp = model.to_pinocchio_q(q)
    sym = lambda U: np.triu(U) + np.triu(U, 1).T  # noqa: E731
    dq, dv = (x.copy() for x in pin.computeRNEADerivatives(pm, d, qp, v, a)[:2])  # views into d
    rd = ref.rnea_derivatives(model, q, v, a)
    adq, adv, adt = pin.computeABADerivatives(pm, d, qp, v, tau)
    ad = ref.aba_derivatives(model, q, v, tau)
    return {
        "rnea": _relerr(ref.rnea(model, q, v, a), pin.rnea(pm, d, qp, v, a)),
        "crba": _relerr(ref.crba(model, q), sym(pin.crba(pm, d, qp))),
        "aba": _relerr(ref.aba(model, q, v, tau), pin.aba(pm, d, qp, v, tau)),
        "minv": _relerr(ref.minv(model, q), sym(pin.computeMinverse(pm, d, qp))),
        "rnea_derivatives": max(_relerr(rd[0], dq), _relerr(rd[1], dv)),
        "aba_derivatives": max(_relerr(ad[0], adq), _relerr(ad[1], adv), _relerr(ad[2], sym(adt))),
    }


def run_demo() -> None:
    from . import robots

    rng = np.random.default_rng(0)
    worst = 0.0
    for name, floating in (("iiwa14", False), ("quadruped", True)):
        t0 = time.perf_counter()
        model = load_urdf(robots.path(name), floating_base=floating)
        dt = time.perf_counter() - t0
        click.echo(f"== {name}: {model.nb} bodies, nq={model.nq}, nv={model.nv}, "
                   f"{'floating' if floating else 'fixed'} base, {model.total_mass:.3f} kg "
                   f"({len(model.merged_fixed)} fixed joint(s) merged; loaded in {dt * 1e3:.1f} ms)")
        q = model.random_q(rng)
        v, a, tau = rng.normal(size=(3, model.nv))
        errs = _pinocchio_errors(model, q, v, a, tau)
        if errs is None:
            click.echo("   Pinocchio is not installed: skipping the external comparison")
            continue
        for k, e in errs.items():
            click.echo(f"   reference {k:<17} vs Pinocchio: max rel. error {e:.1e}")
            worst = max(worst, e)
    status = "OK" if worst <= 1e-9 else "FAILED"
    click.echo(f"reference dynamics vs Pinocchio: worst relative error {worst:.1e} (bound 1e-9) -> {status}")
    if worst > 1e-9:
        raise SystemExit(1)
