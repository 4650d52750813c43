"""Reference derivatives against central finite differences of the reference's own rnea/aba,
taken in the tangent space (q ⊕ ε·e_k, Pinocchio's integrate) — an oracle independent of the
analytic chain rule used in rnea_derivatives."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from rbdgen import reference as ref

from conftest import ROBOT_CASES, load_case, random_state

EPS = 1e-6
# Central differences: truncation O(ε²·|f'''|) ≈ 1e-12·scale and round-off O(1e-16/ε) ≈ 1e-10
# relative to |f|; 1e-6 relative to the Jacobian's size sits well above both.
FD_TOL = 1e-6

CASES = [c for c in ROBOT_CASES if c.id.split("-")[0] in ("iiwa14", "kinova", "quadruped", "solo12", "tiago", "panda_coupled")]


def _fd(f, x, plus, n):
    cols = []
    for k in range(n):
        e = np.zeros(n)
        e[k] = EPS
        cols.append((f(plus(x, e)) - f(plus(x, -e))) / (2 * EPS))
    return np.stack(cols, axis=-1)


def _scaled_err(a, b):
    return np.max(np.abs(a - b)) / max(1.0, np.max(np.abs(b)))


@pytest.mark.parametrize("robot,floating", CASES)
def test_rnea_derivatives_match_finite_differences(robot, floating):
    m = load_case(robot, floating)
    q, v, a, _ = random_state(m, seed=11)
    dq, dv = ref.rnea_derivatives(m, q, v, a)
    fd_q = _fd(lambda qq: ref.rnea(m, qq, v, a), q, m.integrate, m.nv)
    fd_v = _fd(lambda vv: ref.rnea(m, q, vv, a), v, np.add, m.nv)
    assert _scaled_err(dq, fd_q) < FD_TOL
    assert _scaled_err(dv, fd_v) < FD_TOL


@pytest.mark.parametrize("robot,floating", CASES)
def test_aba_derivatives_match_finite_differences(robot, floating):
    m = load_case(robot, floating)
    q, v, _, tau = random_state(m, seed=12)
    dq, dv, dtau = ref.aba_derivatives(m, q, v, tau)
    # aba's own round-off is ~1e-16·cond(M)·|q̈|; central differences divide it by ε, so the FD
    # oracle is only that good. Hold to FD_TOL or 10× that noise, whichever is larger.
    cond = np.linalg.cond(ref.crba(m, q))
    noise = 2.2e-16 * cond * max(1.0, np.abs(ref.aba(m, q, v, tau)).max()) / EPS
    tol = max(FD_TOL, 10 * noise)
    fd_q = _fd(lambda qq: ref.aba(m, qq, v, tau), q, m.integrate, m.nv)
    fd_v = _fd(lambda vv: ref.aba(m, q, vv, tau), v, np.add, m.nv)
    fd_t = _fd(lambda tt: ref.aba(m, q, v, tt), tau, np.add, m.nv)
    assert _scaled_err(dq, fd_q) < tol
    assert _scaled_err(dv, fd_v) < tol
    assert _scaled_err(dtau, fd_t) < tol


@pytest.mark.parametrize("robot,floating", [c for c in CASES if "floating" in c.id])
def test_integrate_matches_pinocchio(robot, floating):
    """Our q ⊕ v is Pinocchio's integrate (what 'tangent space' means for a floating base)."""
    m = load_case(robot, floating)
    pm = pin.buildModelFromUrdf(str(robot.path), pin.JointModelFreeFlyer())
    rng = np.random.default_rng(5)
    q = m.random_q(rng)
    dv = rng.normal(size=m.nv)
    got = m.integrate(q, dv)
    exp = m.from_pinocchio_q(pin.integrate(pm, m.to_pinocchio_q(q), dv))
    # quaternions q and −q are the same rotation
    if np.dot(got[3:7], exp[3:7]) < 0:
        exp[3:7] *= -1
    assert np.max(np.abs(got - exp)) < 1e-12
