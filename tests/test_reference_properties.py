"""Properties any correct dynamics must have, on random synthetic trees (hypothesis):
M symmetric positive definite, aba inverts rnea, minv inverts crba, nle/gravity consistent."""
from __future__ import annotations

import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rbdgen
import rbdgen.robots as robots
from rbdgen import reference as ref

_models: dict = {}


def _model(tmp_dir, kind, n, seed, types, floating):
    key = (kind, n, seed, types, floating)
    if key not in _models:
        text = (robots.chain_urdf(n, seed=seed, joint_types=types) if kind == "chain"
                else robots.tree_urdf(n, seed=seed, joint_types=types))
        p = tmp_dir / f"{kind}_{n}_{seed}_{'_'.join(types)}.urdf"
        p.write_text(text)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the generator must produce physical inertias
            _models[key] = rbdgen.load_urdf(p, floating_base=floating)
    return _models[key]


robot_args = st.tuples(
    st.sampled_from(["chain", "tree"]),
    st.integers(1, 12),
    st.integers(0, 10_000),
    st.sampled_from([("revolute",), ("revolute", "prismatic"), ("continuous", "revolute", "prismatic")]),
    st.booleans(),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=robot_args, state_seed=st.integers(0, 2**31 - 1))
def test_dynamics_identities(tmp_path_factory, args, state_seed):
    m = _model(tmp_path_factory.getbasetemp(), *args)
    rng = np.random.default_rng(state_seed)
    q = m.random_q(rng)
    v, a = rng.normal(size=(2, m.nv))
    M = ref.crba(m, q)
    assert np.allclose(M, M.T, rtol=0, atol=1e-12 * max(1, np.abs(M).max()))
    assert np.linalg.eigvalsh(M).min() > 0
    tau = ref.rnea(m, q, v, a)
    # aba(rnea(a)) == a, with a tolerance scaled by the conditioning of M
    cond = np.linalg.cond(M)
    assert np.max(np.abs(ref.aba(m, q, v, tau) - a)) <= 1e-13 * cond * max(1, np.abs(a).max())
    Mi = ref.minv(m, q)
    assert np.max(np.abs(Mi @ M - np.eye(m.nv))) <= 1e-13 * cond
    # τ = M a + nle, nle = C v + g
    assert np.allclose(tau, M @ a + ref.nle(m, q, v), rtol=0, atol=1e-10 * max(1, np.abs(tau).max()))
    assert np.allclose(ref.nle(m, q, np.zeros(m.nv)), ref.gravity(m, q), rtol=0, atol=1e-12)


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000), n=st.integers(1, 5))
def test_batched_equals_per_state(seed, n):
    m = rbdgen.load_urdf(robots.path("quadruped"), floating_base=True)
    rng = np.random.default_rng(seed)
    q = m.random_q(rng, n)
    v, a = rng.normal(size=(2, n, m.nv))
    batch = ref.rnea(m, q, v, a)
    assert batch.shape == (n, m.nv)
    for k in range(n):
        assert np.array_equal(batch[k], ref.rnea(m, q[k], v[k], a[k]))
    dq, dv = ref.rnea_derivatives(m, q, v, a)
    assert dq.shape == dv.shape == (n, m.nv, m.nv)


def test_wrong_shapes_raise_value_error():
    m = rbdgen.load_urdf(robots.path("iiwa14"))
    q = np.zeros(7)
    import pytest

    with pytest.raises(ValueError, match="q"):
        ref.rnea(m, np.zeros(6), q, q)
    with pytest.raises(ValueError, match="v"):
        ref.rnea(m, q, np.zeros((2, 7)), q)
    with pytest.raises(ValueError, match="dtype"):
        ref.crba(m, np.array(["a"] * 7))
    with pytest.raises(ValueError, match="f_ext"):
        ref.rnea(m, q, q, q, f_ext=np.zeros((3, 6)))


def test_crba_diagonal_is_the_mass_matrix_diagonal():
    """reference.crba_diagonal (what rbdgen.registry.check_invertible reads, O(n)) against the
    diagonal of the full CRBA: a fixed arm, a floating branched robot, mimic joints coupled, and
    a chain with armature."""
    from conftest import ROBOTS, load_case

    cases = [load_case(next(r for r in ROBOTS if r.name == n), f) for n, f in
             [("iiwa14", False), ("quadruped", True), ("panda_coupled", False)]]
    rng = np.random.default_rng(5)
    arm = load_case(next(r for r in ROBOTS if r.name == "iiwa14"), False)
    cases.append(arm.with_armature(rng.uniform(0.01, 0.1, arm.nv)))
    for m in cases:
        for _ in range(3):
            q = m.random_q(rng)
            np.testing.assert_allclose(ref.crba_diagonal(m, q), np.diag(ref.crba(m, q)), rtol=1e-13, atol=1e-15)
