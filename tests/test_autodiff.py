"""The gradient rules of rbdgen.autodiff (shared by rbdgen.jax and rbdgen.torch): the tangent
map against Pinocchio-style integration, and the composed partials against central finite
differences of the NumPy reference along q's raw coordinates. The derivative matrices come from
the reference here (a stand-in kernel set), so these tests check the chain rule, cheaply; the
wrappers' tests run the compiled derivative kernels."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from rbdgen import reference as ref
from rbdgen.autodiff import aba_partials, rnea_partials, tangent_map

from conftest import ROBOTS, load_case, random_state, relerr


def _model(name, floating):
    return load_case(next(r for r in ROBOTS if r.name == name), floating)


def _reference_kernels(model):
    """The reference under the kernel names the rules call."""
    return SimpleNamespace(
        model=model, kernels=("rnea_derivatives", "crba", "aba_derivatives"),
        rnea_derivatives=lambda q, v, a: ref.rnea_derivatives(model, q, v, a),
        crba=lambda q: ref.crba(model, q),
        aba_derivatives=lambda q, v, tau: ref.aba_derivatives(model, q, v, tau))


@pytest.mark.parametrize("case", [("quadruped", True), ("iiwa14", False)])
def test_tangent_map_inverts_integrate_to_first_order(case):
    m = _model(*case)
    rng = np.random.default_rng(1)
    q0 = m.random_q(rng, 3)
    T = tangent_map(m, q0)
    assert T.shape == (3, m.nv, m.nq)
    eps = 1e-6
    for k in range(3):
        d = rng.normal(size=m.nv)
        ends = [m.integrate(q0[k], s * eps * d) for s in (1, -1)]
        for x in ends:  # integrate returns the quaternion with w ≥ 0: take q0's sign
            if m.floating_base and x[3:7] @ q0[k, 3:7] < 0:
                x[3:7] *= -1
        dq = (ends[0] - ends[1]) / (2 * eps)
        assert relerr(T[k] @ dq, d) <= 1e-8
    if m.nq == m.nv:
        assert np.array_equal(T[0], np.eye(m.nv))


def test_tangent_map_sends_the_radial_quaternion_direction_to_zero():
    m = _model("quadruped", True)
    q = m.random_q(np.random.default_rng(2))
    dq = np.zeros(m.nq)
    dq[3:7] = q[3:7]  # du ∝ u: the norm changes, the rotation does not
    assert np.max(np.abs(tangent_map(m, q) @ dq)) <= 1e-15


@pytest.mark.parametrize("case", [("quadruped", True), ("iiwa14", False)])
def test_partials_equal_finite_differences_along_raw_coordinates(case):
    """∂/∂q along every one of q's nq coordinates (a quaternion component included: the
    reference reads the quaternion normalised, as the kernels do), ∂/∂v, and the third input."""
    m = _model(*case)
    kern = _reference_kernels(m)
    q, v, a, tau = random_state(m, seed=3)
    h = 1e-6

    def fd(f, x, i):
        e = np.zeros_like(x)
        e[i] = h
        return (f(x + e) - f(x - e)) / (2 * h)

    for partials, fn, third in ((rnea_partials, ref.rnea, a), (aba_partials, ref.aba, tau)):
        Jq, Jv, J3 = partials(kern, q, v, third)
        assert Jq.shape == (m.nv, m.nq) and Jv.shape == J3.shape == (m.nv, m.nv)
        num_q = np.stack([fd(lambda x: fn(m, x, v, third), q, i) for i in range(m.nq)], -1)
        num_v = np.stack([fd(lambda x: fn(m, q, x, third), v, i) for i in range(m.nv)], -1)
        num_3 = np.stack([fd(lambda x: fn(m, q, v, x), third, i) for i in range(m.nv)], -1)
        for got, num in ((Jq, num_q), (Jv, num_v), (J3, num_3)):
            assert relerr(got, num) <= 1e-6, (partials.__name__, relerr(got, num))


@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_partials_off_the_unit_sphere(scale):
    """A quaternion of norm 0.5 or 2 (the reference and the kernels use the rotation of u/|u|): ∂/∂q
    along the quaternion's raw coordinates is |u|⁻¹ of the unit one's, as central differences of
    the reference say (the tangent map lacked the 1/|u| and gave 2× at |u| = 2)."""
    m = _model("quadruped", True)
    kern = _reference_kernels(m)
    q, v, a, _ = random_state(m, seed=5)
    q[3:7] *= scale
    h = 1e-6
    Jq = rnea_partials(kern, q, v, a)[0]
    num = np.stack([(ref.rnea(m, q + h * e, v, a) - ref.rnea(m, q - h * e, v, a)) / (2 * h) for e in np.eye(m.nq)], -1)
    assert relerr(Jq, num) <= 1e-6, relerr(Jq, num)


def test_missing_kernels_are_named():
    m = _model("iiwa14", False)
    kern = SimpleNamespace(model=m, kernels=("rnea",))
    q, v, a, _ = random_state(m, seed=4)
    with pytest.raises(ValueError, match="differentiating rnea needs the kernels rnea_derivatives, crba; not built: "
                                         "rnea_derivatives, crba"):
        rnea_partials(kern, q, v, a)


def test_partials_of_a_generated_package_map_its_curved_joints(tmp_path):
    """A generated package's kernels know their joints' kinds (the manifest's): the q-block of a
    floating base and of a planar joint goes through the tangent map, as for rbdgen.build's
    kernels. (A package's model had sizes only: a floating package raised AttributeError, and a
    planar one, nq = nv, silently took ∂/∂q along the tangent for ∂/∂q along q.)"""
    import rbdgen
    from rbdgen.package import generate_package, load_package
    from rbdgen.robots import chain_urdf

    urdf = tmp_path / "c.urdf"
    urdf.write_text(chain_urdf(3, seed=4, joint_types=("planar", "revolute")))
    m = rbdgen.load_urdf(urdf, floating_base=True)
    assert {"floating", "planar"} <= set(m.joint_types)
    generate_package(m, tmp_path / "out", urdf=str(urdf), load_options={"floating_base": True}, name="cp",
                     kernels=["rnea_derivatives", "crba"], dtypes=["float64"], simd=False)
    kern = load_package(tmp_path / "out" / "cp", opt="-O0", progress=False)
    assert kern.model.joint_types == m.joint_types
    q, v, a, _ = random_state(m, seed=6)
    got = rnea_partials(kern, q, v, a)
    want = rnea_partials(_reference_kernels(m), q, v, a)
    for g, w in zip(got, want):
        assert g.shape == w.shape and relerr(g, w) <= 1e-9
