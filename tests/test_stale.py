"""Inverse dynamics with stale data (rbdgen.reference.rnea_stale, issue 14), against the exact
reference RNEA: the first call is exact, repeated calls at one state reach RNEA's torque (a
fixed point) within a bound on the number of calls that follows from the tree's depth, and along
a smooth trajectory sampled at period h the error shrinks like h (the fitted slope)."""
from __future__ import annotations

import numpy as np
import pytest

from rbdgen import reference as ref
from rbdgen.reference import STALE_SCHEMES, StaleState, rnea_stale
from rbdgen.reference.stale import SCHEME_KERNELS, SWEEPS

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


def test_hamilton_is_binder_herzog_speculated_then_verified():
    """One Hamilton call is two Binder–Herzog calls at the same (q, v, a): the speculation on the
    previous call's data, then the verification on what the speculation produced (the oracle: two
    reference calls). So the bodies of tree levels 0 and 1 get exact velocities and accelerations,
    where one Binder–Herzog step leaves level 1 stale."""
    model = load_case(next(r for r in ROBOTS if r.name == "quadruped"), True)
    q, v, a, _ = random_state(model, seed=21, n=3)
    q2, v2, a2, _ = random_state(model, seed=22, n=3)
    _, s0 = rnea_stale(model, q2, v2, a2)
    _, s1 = rnea_stale(model, q, v, a, s0)
    tau2, s2 = rnea_stale(model, q, v, a, s1)
    tau_h, s_h = rnea_stale(model, q, v, a, s0, scheme="hamilton")
    np.testing.assert_array_equal(tau_h, tau2)
    np.testing.assert_array_equal(s_h.flat(), s2.flat())
    exact = rnea_stale(model, q, v, a)[1]
    two_deep = [i for i in range(model.nb) if model.depth[i] <= 1]
    deeper = [i for i in range(model.nb) if model.depth[i] == 1]
    assert deeper  # the trunk's children
    np.testing.assert_allclose(s_h.v[:, two_deep], exact.v[:, two_deep], rtol=0, atol=1e-12)
    np.testing.assert_allclose(s_h.a[:, two_deep], exact.a[:, two_deep], rtol=0, atol=1e-12)
    assert np.abs(s1.a[:, deeper] - exact.a[:, deeper]).max() > 1e-6  # one Binder–Herzog step is not exact there


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


def test_flat_state_round_trips():
    model = load_case(next(r for r in ROBOTS if r.name == "quadruped"), True)
    q, v, a, _ = random_state(model, seed=6, n=2)
    _, s = rnea_stale(model, q, v, a)
    flat = s.flat()
    assert flat.shape == (2, 24 * model.nb)
    back = StaleState.from_flat(flat, model.nb)
    for name in ("v", "a", "f_own", "f"):
        np.testing.assert_array_equal(getattr(back, name), getattr(s, name))
    np.testing.assert_array_equal(flat[1, 24:30], s.v[1, 1])  # body 1's velocity: its first 6 values
    with pytest.raises(ValueError, match="24 values per body"):
        StaleState.from_flat(flat[:, :-1], model.nb)


# ---- the generated kernels (kern.rnea_stale, kern.rnea_stale_yamakita, kern.rnea_stale_hamilton) --

KERNEL_OF = SCHEME_KERNELS


@pytest.fixture(scope="module")
def iiwa_stale():
    import rbdgen

    model = load_case(next(r for r in ROBOTS if r.name == "iiwa14"), False)
    return model, rbdgen.build(model, kernels=("rnea", *KERNEL_OF.values()), opt="-O1")


def test_kernel_follows_the_reference_along_a_trajectory(iiwa_stale):
    """The compiled kernels, state carried from call to call, give the reference's torques; and
    kern.rnea_stale_start is the reference's state=None (the exact state)."""
    model, kern = iiwa_stale
    assert set(KERNEL_OF) == set(STALE_SCHEMES) and len(set(KERNEL_OF.values())) == len(KERNEL_OF)
    q, v, a = _trajectory(model, 0.0)
    start = kern.rnea_stale_start(q, v, a)
    assert relerr(start, rnea_stale(model, q, v, a)[1].flat()) <= 1e-12
    for scheme, name in KERNEL_OF.items():
        f = getattr(kern, name)
        s_ref, s_k = None, start
        for j in range(40):
            q, v, a = _trajectory(model, j * 4e-3)
            tau_ref, s_ref = rnea_stale(model, q, v, a, s_ref, scheme=scheme)
            tau_k, s_k = f(q, v, a, s_k)
            assert relerr(tau_k, tau_ref) <= 1e-10, (scheme, j)
            if j == 0:
                assert relerr(tau_k, kern.rnea(q, v, a)) <= 1e-12  # the first call is exact
        assert relerr(s_k, s_ref.flat()) <= 1e-10
        assert relerr(tau_k, kern.rnea(q, v, a)) > 1e-6  # and later ones really are stale


def test_kernel_batch_and_start_on_a_batch(iiwa_stale):
    model, kern = iiwa_stale
    q, v, a, _ = random_state(model, seed=8, n=4)
    st = kern.rnea_stale_start(q, v, a)
    assert st.shape == (4, 24 * model.nb)
    for name in KERNEL_OF.values():
        tau, nxt = getattr(kern, name)(q, v, a, st)
        assert relerr(tau, kern.rnea(q, v, a)) <= 1e-12
        assert relerr(nxt, st) <= 1e-12  # the exact state is a fixed point
    with pytest.raises(ValueError, match="stale"):
        kern.rnea_stale(q, v, a, st[:, :-1])


def test_critical_path_depth_does_not_grow_with_the_number_of_links(capsys, tmp_path):
    """`inspect --cost` reports each kernel's depth: rnea's grows with the chain, the stale
    kernels' stays the same (every link works from its own joint and the previous call's data)."""
    from rbdgen.robots import chain_urdf

    from conftest import run_main

    depth = {}
    # from 6 links on every kind of link the generator makes is present (fewer links can be a
    # step shallower, the longest single link decides): 6 and 24 must give the same depth
    for n in (6, 24):
        p = tmp_path / f"chain{n}.urdf"
        p.write_text(chain_urdf(n))
        rc, out, err = run_main(capsys, "inspect", p, "--cost", "--kernels", ",".join(("rnea", *KERNEL_OF.values())),
                                "--quiet")
        assert rc == 0, err
        head = next(line for line in out.splitlines() if line.startswith("kernel "))
        col = head.split().index("depth")
        for line in out.splitlines():
            parts = line.split()
            if parts and parts[0] in ("rnea", *KERNEL_OF.values()):
                depth[(parts[0], n)] = int(parts[col].split("/")[0])  # pruned/dense
    assert depth[("rnea", 24)] > 3 * depth[("rnea", 6)]
    for scheme, k in KERNEL_OF.items():
        assert depth[(k, 24)] == depth[(k, 6)], depth
        assert depth[(k, 24)] < depth[("rnea", 6)] * SWEEPS[scheme]
    assert depth[("rnea_stale_yamakita", 24)] < depth[("rnea_stale", 24)]  # buffered: no wait on the forward step
    # speculated, then verified: the verification's forward step waits for the speculation's (its
    # force step overlaps it), so deeper than one Binder–Herzog step, less than two
    assert depth[("rnea_stale", 24)] < depth[("rnea_stale_hamilton", 24)] < 2 * depth[("rnea_stale", 24)]


@pytest.mark.parametrize("scheme", STALE_SCHEMES)
def test_structural_constants_of_the_state_hold_for_every_reference_state(scheme):
    """The kernels ignore the state entries that every call returns as the same constant (a planar
    arm's out-of-plane motion, ...): those must hold for the reference's states at any (q, v, a)
    and along a run of stale calls, and ignoring them must prune work."""
    from rbdgen import control
    from rbdgen.algorithms.stale import structural_constants
    from rbdgen.registry import trace

    arm = control.planar_arm(3)
    iiwa = load_case(next(r for r in ROBOTS if r.name == "iiwa14"), False)
    for model in (arm, iiwa):
        known = structural_constants(model, scheme)
        assert known, model.name
        idx = np.array(sorted(known))
        want = np.array([known[k] for k in idx])
        q, v, a, _ = random_state(model, seed=11, n=20)
        flat = rnea_stale(model, q, v, a)[1].flat()
        np.testing.assert_allclose(flat[:, idx], np.broadcast_to(want, (20, len(idx))), rtol=0, atol=1e-12)
        q2, v2, a2, _ = random_state(model, seed=12, n=20)
        _, s = rnea_stale(model, q2, v2, a2, StaleState.from_flat(flat, model.nb), scheme=scheme)
        np.testing.assert_allclose(s.flat()[:, idx], np.broadcast_to(want, (20, len(idx))), rtol=0, atol=1e-12)
    # the arm moves in a plane: every body's out-of-plane velocity (ω_x, ω_z, v_y) is among them
    known = structural_constants(arm, scheme)
    for b in range(arm.nb):
        for c in (0, 2, 4):
            assert known.get(24 * b + c) == 0.0, (b, c)
    # the same kernel with every state entry taken as free, for comparison
    from rbdgen.algorithms.stale import _rnea_stale_values
    from rbdgen.algorithms.trace import Trace
    from rbdgen.ir.graph import Array

    t = Trace(arm)
    ins = [t.inputs(n, k) for n, k in (("q", arm.nq), ("v", arm.nv), ("a", arm.nv), ("stale", 24 * arm.nb))]
    out = _rnea_stale_values(t, *ins, scheme)
    free = t.kernel("free", [Array(n, (len(x),)) for n, x in zip(("q", "v", "a", "stale"), ins)],
                    [(Array("tau", (arm.nv,)), out["tau"]), (Array("stale_next", (24 * arm.nb,)), out["stale_next"])])
    ops = trace(arm, KERNEL_OF[scheme]).op_counts()["total"]
    assert ops < 0.6 * free.op_counts()["total"]
    # each sweep about one rnea's work (the first sweep's velocity pass is partly constant)
    assert ops <= 1.2 * SWEEPS[scheme] * trace(arm, "rnea").op_counts()["total"]
