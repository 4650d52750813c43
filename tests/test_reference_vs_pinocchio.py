"""The NumPy reference against Pinocchio (an independent C++ implementation) on real robots.

Every function, random states, float64, relative max-norm error ≤ TOL64 (see conftest.relerr).
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from rbdgen import reference as ref

from conftest import ROBOT_CASES, TOL64, load_case, random_state, relerr

NSTATES = 3


def _sym(U):
    """Pinocchio fills only the upper triangle of M and M⁻¹."""
    return np.triu(U) + np.triu(U, 1).T


@pytest.fixture(scope="module")
def pin_models():
    return {}


def _pin(robot, floating, cache):
    key = (robot.name, floating)
    if key not in cache:
        path = str(robot.path)
        m = pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(path)
        cache[key] = m
    return cache[key]


@pytest.mark.parametrize("robot,floating", ROBOT_CASES)
def test_reference_matches_pinocchio(robot, floating, pin_models):
    model = load_case(robot, floating)
    pm = _pin(robot, floating, pin_models)
    data = pm.createData()
    # same joint order and sizes as Pinocchio
    assert list(pm.names[1:]) == list(model.joint_names)
    assert pm.nv == model.nv and pm.nq == model.nq_pinocchio
    assert np.allclose(pm.gravity.linear, model.gravity)

    q, v, a, tau = random_state(model, seed=hash(robot.name) % 1000, n=NSTATES)
    out = {
        "rnea": ref.rnea(model, q, v, a),
        "nle": ref.nle(model, q, v),
        "gravity": ref.gravity(model, q),
        "crba": ref.crba(model, q),
        "aba": ref.aba(model, q, v, tau),
        "minv": ref.minv(model, q),
        "rnea_derivatives": ref.rnea_derivatives(model, q, v, a),
        "aba_derivatives": ref.aba_derivatives(model, q, v, tau),
    }
    errs = {}
    for k in range(NSTATES):
        qp = model.to_pinocchio_q(q[k])
        exp = {
            "rnea": pin.rnea(pm, data, qp, v[k], a[k]).copy(),
            "nle": pin.nonLinearEffects(pm, data, qp, v[k]).copy(),
            "gravity": pin.computeGeneralizedGravity(pm, data, qp).copy(),
            "crba": _sym(pin.crba(pm, data, qp)),
            "aba": pin.aba(pm, data, qp, v[k], tau[k]).copy(),
            "minv": _sym(pin.computeMinverse(pm, data, qp)),
        }
        dq, dv, _ = pin.computeRNEADerivatives(pm, data, qp, v[k], a[k])
        exp["rnea_derivatives"] = (dq.copy(), dv.copy())
        ddq, ddv, dtau = pin.computeABADerivatives(pm, data, qp, v[k], tau[k])
        exp["aba_derivatives"] = (ddq.copy(), ddv.copy(), _sym(dtau))
        for name, e in exp.items():
            got = out[name]
            if isinstance(e, tuple):
                err = max(relerr(g[k], x) for g, x in zip(got, e))
            else:
                err = relerr(got[k], e)
            errs[name] = max(errs.get(name, 0.0), err)
    bad = {k: v for k, v in errs.items() if not v <= TOL64}
    assert not bad, f"{robot.name}: relative errors above {TOL64}: {bad}"


@pytest.mark.parametrize("robot,floating", ROBOT_CASES[:1] + [c for c in ROBOT_CASES if "floating" in c.id][:1])
def test_external_forces_match_pinocchio(robot, floating, pin_models):
    model = load_case(robot, floating)
    pm = _pin(robot, floating, pin_models)
    data = pm.createData()
    rng = np.random.default_rng(7)
    q, v, a, tau = random_state(model, seed=3)
    fext = rng.normal(size=(model.nb, 6))
    qp = model.to_pinocchio_q(q)
    pf = [pin.Force.Zero()] + [pin.Force(f[:3], f[3:]) for f in fext]
    assert relerr(ref.rnea(model, q, v, a, f_ext=fext), pin.rnea(pm, data, qp, v, a, pf)) <= TOL64
    assert relerr(ref.aba(model, q, v, tau, f_ext=fext), pin.aba(pm, data, qp, v, tau, pf)) <= TOL64
