"""Inverse dynamics with stale data (rbdgen.reference.rnea_stale, issue 14), against the exact
reference RNEA: the first call is exact, repeated calls at one state reach RNEA's torque (a
fixed point) within a bound on the number of calls that follows from the tree's depth, and along
a smooth trajectory sampled at period h the error shrinks like h (the fitted slope)."""
from __future__ import annotations

import numpy as np
import pytest

from rbdgen import reference as ref
from rbdgen.reference import STALE_SCHEMES, StaleState, rnea_stale

from conftest import ROBOT_CASES, ROBOTS, load_case, random_state, relerr


@pytest.mark.parametrize("robot,floating", ROBOT_CASES)
def test_first_call_is_exact_and_repeated_calls_reach_a_fixed_point(robot, floating):
    model = load_case(robot, floating)
    q, v, a, _ = random_state(model, seed=1)
    q2, v2, a2, _ = random_state(model, seed=2)
    exact = ref.rnea(model, q, v, a)
    tau, state = rnea_stale(model, q, v, a)
    assert relerr(tau, exact) <= 1e-12
    depth = max(model.depth) + 1
    for scheme in STALE_SCHEMES:
        # start from another state's data: the first calls are off, then exact values travel one
        # link per call, forward then backward
        _, s = rnea_stale(model, q2, v2, a2)
        first = None
        for k in range(2 * depth + 2):
            tau, s = rnea_stale(model, q, v, a, s, scheme=scheme)
            if first is None:
                first = relerr(tau, exact)
        if model.nb > 1:
            assert first > 1e-6, (scheme, first)  # the stale data really is used
        assert relerr(tau, exact) <= 1e-9, (scheme, relerr(tau, exact))
        tau, s = rnea_stale(model, q, v, a, s, scheme=scheme)  # and it stays there
        assert relerr(tau, exact) <= 1e-9


def _trajectory(model, t):
    """A smooth joint trajectory (fixed base): q = q0 + A sin(w t + phase) per joint."""
    n = model.nq
    k = np.arange(n)
    q0, amp, w, ph = 0.3 * np.cos(k), 0.6 + 0.1 * k / n, 2.0 + 0.5 * k, 0.7 * k
    return (q0 + amp * np.sin(w * t + ph), amp * w * np.cos(w * t + ph), -amp * w ** 2 * np.sin(w * t + ph))


@pytest.mark.parametrize("robot", ["iiwa14", "quadruped"])
@pytest.mark.parametrize("scheme", STALE_SCHEMES)
def test_error_along_a_trajectory_shrinks_linearly_with_the_period(robot, scheme):
    model = load_case(next(r for r in ROBOTS if r.name == robot), False)
    T = 0.25
    hs = [4e-3, 2e-3, 1e-3, 5e-4]
    errs = []
    for h in hs:
        state = None
        for j in range(int(round(T / h)) + 1):
            q, v, a = _trajectory(model, j * h)
            tau, state = rnea_stale(model, q, v, a, state, scheme=scheme)
        errs.append(relerr(tau, ref.rnea(model, q, v, a)))
    slope = np.polyfit(np.log(hs), np.log(errs), 1)[0]
    assert 0.85 <= slope <= 1.15, (errs, slope)
    assert errs[-1] < 0.05  # and small at a 2 kHz control rate


def test_batch_is_the_states_one_by_one_and_bad_input_is_refused():
    model = load_case(next(r for r in ROBOTS if r.name == "quadruped"), True)
    q, v, a, _ = random_state(model, seed=4, n=3)
    q2, v2, a2, _ = random_state(model, seed=5, n=3)
    _, s0 = rnea_stale(model, q2, v2, a2)
    assert s0.v.shape == (3, model.nb, 6)
    tau, s = rnea_stale(model, q, v, a, s0, scheme="yamakita")
    for k in range(3):
        one = StaleState(s0.v[k], s0.a[k], s0.f_own[k], s0.f[k])
        t1, s1 = rnea_stale(model, q[k], v[k], a[k], one, scheme="yamakita")
        np.testing.assert_array_equal(tau[k], t1)
        np.testing.assert_array_equal(s.f[k], s1.f)
    with pytest.raises(ValueError, match="scheme must be one of"):
        rnea_stale(model, q, v, a, scheme="hamilton?")
    with pytest.raises(ValueError, match=r"state\.v: expected shape"):
        rnea_stale(model, q[0], v[0], a[0], s0)
    with pytest.raises(TypeError, match="StaleState"):
        rnea_stale(model, q[0], v[0], a[0], state=(1, 2))
    with pytest.raises(ValueError, match="does not match"):
        rnea_stale(model, q, v[0], a)
