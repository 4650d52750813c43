"""rbdgen.jax: every kernel as a JAX function (jit, vmap onto the batch path, any leading
dimensions), rnea and aba differentiable through rbdgen.autodiff's rules.

Oracles: the NumPy methods of the same kernels (values, bit for bit), rbdgen.autodiff's partials
from the compiled derivative kernels (jacobians, exactly: a jacobian is the rule applied to unit
tangents), and central finite differences of the NumPy reference (rbdgen.reference), which
shares no code with the kernels or the rules. The kernel sets are the ones the other test files
build (same kernels, same -O1), so the compile cache is shared."""
from __future__ import annotations

import jax  # a test dependency (pyproject's test extra): missing, the run fails rather than skips
import jax.numpy as jnp
import numpy as np
import pytest

import rbdgen
import rbdgen.jax
from rbdgen import reference as ref
from rbdgen.autodiff import aba_partials, rnea_partials

from conftest import ROBOTS, TOL32, load_case, random_state, relerr

KERNELS = ("rnea", "crba", "aba", "rnea_derivatives", "aba_derivatives")
CASES = [("iiwa14", False), ("quadruped", True)]


@pytest.fixture(scope="module", autouse=True)
def x64():
    """JAX's 64-bit mode for this module only (jax.enable_x64 is a context manager of the config
    option: restored on exit, so other modules in the same worker see their own setting)."""
    with jax.enable_x64(True):
        yield


def _model(name, floating):
    return load_case(next(r for r in ROBOTS if r.name == name), floating)


@pytest.fixture(scope="module")
def kernels():
    """(name, floating) → float64 kernel set; "iiwa14-f32" → the float32 one."""
    out = {c: rbdgen.build(_model(*c), kernels=KERNELS, opt="-O1") for c in CASES}
    out["iiwa14-f32"] = rbdgen.build(_model("iiwa14", False), kernels=KERNELS, opt="-O1", dtype="float32")
    return out


class _Spy:
    """A kernel set whose kernels record each call's argument shapes (to count batch calls)."""

    def __init__(self, kern, kernels=None):
        self._kern = kern
        self.kernels = tuple(kernels or kern.kernels)
        self.methods, self.model, self.dtype, self.target = kern.methods, kern.model, kern.dtype, "cpu"
        self.calls = []

    def kernel(self, name):
        f = self._kern.kernel(name)

        def spy(*args):
            self.calls.append((name,) + tuple(np.shape(x) for x in args))
            return f(*args)
        return spy

    def __getattr__(self, name):  # kern.crba, kern.rnea_derivatives: what rbdgen.autodiff calls
        if name in self.__dict__.get("kernels", ()):
            return self.kernel(name)
        raise AttributeError(name)


def test_import_does_not_shadow_jax():
    import jax as j

    assert j.__name__ == "jax" and rbdgen.jax.jax is j and hasattr(j, "pure_callback")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_values_equal_the_numpy_path(kernels, case):
    """Bit-equal to the NumPy methods: one state (eager and jit), vmap, jit(vmap), nested vmap,
    leading dimensions (2, 3) passed directly, in_axes=None arguments, an empty batch."""
    kern = kernels[case]
    jk = rbdgen.jax.wrap(kern)
    m = kern.model
    q, v, a, tau = random_state(m, seed=11, n=6)
    env = {"q": q, "v": v, "a": a, "tau": tau}
    for name in kern.kernels:
        raw = kern.kernel(name)
        args = [env[n] for n, _ in kern.methods[name].inputs]
        f = jk.methods[name]
        one, batch = raw(*(x[2] for x in args)), raw(*args)
        ones = one if isinstance(one, tuple) else (one,)
        batches = batch if isinstance(batch, tuple) else (batch,)

        def same(got, exp, lead=None):
            got = got if isinstance(got, tuple) else (got,)
            assert len(got) == len(exp)
            for g, e in zip(got, exp):
                g = np.asarray(g)
                assert g.dtype == e.dtype
                if lead is not None:
                    g = g.reshape((-1,) + g.shape[len(lead):])
                assert np.array_equal(g, e), name

        same(f(*(x[2] for x in args)), ones)
        same(jax.jit(f)(*(x[2] for x in args)), ones)
        same(jax.vmap(f)(*args), batches)
        same(jax.jit(jax.vmap(f))(*args), batches)
        same(jax.vmap(jax.vmap(f))(*(x.reshape(2, 3, -1) for x in args)), batches, lead=(2, 3))
        same(f(*(jnp.asarray(x).reshape(2, 3, -1) for x in args)), batches, lead=(2, 3))
        empty = f(*(x[:0] for x in args))
        assert all(np.shape(e) == (0,) + o.shape for e, o in
                   zip(empty if isinstance(empty, tuple) else (empty,), ones))
    assert np.array_equal(jk.crba(q[0].tolist()), kern.crba(q[0]))  # a list: converted, as NumPy's path does
    # an unmapped argument (in_axes=None) is broadcast: the same as passing it tiled
    got = jax.vmap(jk.rnea, in_axes=(0, None, 0))(q, v[0], a)
    assert np.array_equal(got, kern.rnea(q, np.ascontiguousarray(np.broadcast_to(v[0], v.shape)), a))


def test_vmap_is_one_batched_kernel_call(kernels):
    """vmap (nested, with unmapped arguments) and a vmapped gradient reach each kernel once,
    with the whole batch: the batch entry point, no per-state loop."""
    kern = kernels[("quadruped", True)]
    spy = _Spy(kern)
    jk = rbdgen.jax.wrap(spy)
    m = kern.model
    q, v, a, _ = random_state(m, seed=12, n=6)
    nested = jax.vmap(jax.vmap(jk.rnea, in_axes=(0, 0, None)), in_axes=(0, 0, None))
    jax.jit(nested)(q.reshape(2, 3, -1), v.reshape(2, 3, -1), a[0])
    assert spy.calls == [("rnea", (6, m.nq), (6, m.nv), (6, m.nv))]
    spy.calls.clear()
    g = jax.vmap(jax.grad(lambda q, v, a: jk.rnea(q, v, a).sum()))(q, v, a)
    assert sorted(c[0] for c in spy.calls) == ["crba", "rnea", "rnea_derivatives"]
    assert all(c[1] == (6, m.nq) for c in spy.calls)
    assert np.array_equal(g, rnea_partials(kern, q, v, a)[0].sum(axis=1))


def test_batches_reach_the_cpu_kernels_without_copies(kernels):
    """A batch's inputs reach the callback packed in one (N, Σ sizes) array; the CPU kernels take
    its column blocks as they are (strided rows): no copy per input, the same values."""
    kern = kernels[("iiwa14", False)]
    layouts = []

    class Layouts(_Spy):
        def kernel(self, name):
            f = self._kern.kernel(name)

            def spy(*args):
                layouts.append((name, [(x.shape, x.flags.c_contiguous) for x in args]))
                return f(*args)
            return spy

    jk = rbdgen.jax.wrap(Layouts(kern))
    q, v, a, _ = random_state(kern.model, seed=4, n=9)
    got = jax.vmap(jk.rnea)(q, v, a)
    assert layouts == [("rnea", [((9, 7), False)] * 3)]
    assert np.array_equal(np.asarray(got), kern.rnea(q, v, a))


def _fd(f, x, h=1e-6):
    """Central differences of f along each coordinate of x: (len(f(x)), len(x))."""
    cols = []
    for i in range(len(x)):
        e = np.zeros_like(x)
        e[i] = h
        cols.append((f(x + e) - f(x - e)) / (2 * h))
    return np.stack(cols, -1)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_jacobians_equal_the_derivative_kernels_and_finite_differences(kernels, case):
    """jacfwd and jacrev of rnea(q, v, a) and aba(q, v, τ) in every argument: exactly
    rbdgen.autodiff's partials of the derivative kernels, and within 1e-6 of central differences
    (h = 1e-6) of the NumPy reference along q's raw coordinates (the reference normalises the
    quaternion, so ∂/∂q along its 4 raw components is defined; see rbdgen/autodiff.py)."""
    kern = kernels[case]
    jk = rbdgen.jax.wrap(kern)
    m = kern.model
    q, v, a, tau = random_state(m, seed=13)
    for name, third, partials, fn in (("rnea", a, rnea_partials, ref.rnea), ("aba", tau, aba_partials, ref.aba)):
        f = jk.methods[name]
        exact = partials(kern, q, v, third)
        fwd = jax.jit(jax.jacfwd(f, argnums=(0, 1, 2)))(q, v, third)
        rev = jax.jacrev(f, argnums=(0, 1, 2))(q, v, third)
        num = (_fd(lambda x: fn(m, x, v, third), q), _fd(lambda x: fn(m, q, x, third), v),
               _fd(lambda x: fn(m, q, v, x), third))
        for k in range(3):
            assert np.array_equal(fwd[k], exact[k]), (name, k)
            assert relerr(rev[k], exact[k]) <= 1e-15, (name, k)
            assert relerr(fwd[k], num[k]) <= 1e-6, (name, k, relerr(fwd[k], num[k]))
        # reverse mode on a scalar: grad = Jᵀ w; jax.vjp likewise
        w = np.random.default_rng(5).normal(size=m.nv)
        g = jax.grad(lambda *x: f(*x) @ w, argnums=(0, 1, 2))(q, v, third)
        y, pull = jax.vjp(f, q, v, third)
        assert np.array_equal(y, kern.kernel(name)(q, v, third))
        for k, gk in enumerate(pull(jnp.asarray(w))):
            assert relerr(gk, w @ exact[k]) <= 1e-14 and relerr(g[k], w @ exact[k]) <= 1e-14


def test_batched_jacobians_under_jit_and_vmap(kernels):
    """jit(vmap(jacrev)) on a batch: the partials of the batch, state by state."""
    kern = kernels[("quadruped", True)]
    jk = rbdgen.jax.wrap(kern)
    q, v, _, tau = random_state(kern.model, seed=14, n=4)
    got = jax.jit(jax.vmap(jax.jacrev(jk.aba, argnums=(0, 1, 2))))(q, v, tau)
    for g, e in zip(got, aba_partials(kern, q, v, tau)):
        assert g.shape == e.shape and relerr(g, e) <= 1e-15


def test_float32(kernels):
    """float32 kernels on float32 arrays, x64 on or off: values bit-equal to the float32 NumPy
    path; jacobians are the float32 derivative kernels' outputs, so they are held to those
    kernels' float32 bounds (rbdgen.registry, measured against the float64 reference) against
    the float64 partials; a vjp sums nv products in float32 on top, whence the extra
    nv·2⁻²⁴·max(1, max|J|) per unit of max|w|."""
    k32, k64 = kernels["iiwa14-f32"], kernels[("iiwa14", False)]
    jk = rbdgen.jax.wrap(k32)
    m = k32.model
    q, v, a, tau = random_state(m, seed=15, n=3)
    f32 = [x.astype(np.float32) for x in (q, v, a, tau)]
    q32, v32, a32, t32 = f32
    for x64 in (True, False):
        with jax.enable_x64(x64):
            got = jax.jit(jax.vmap(jk.rnea))(q32, v32, a32)
            assert got.dtype == jnp.float32 and np.array_equal(got, k32.rnea(q32, v32, a32))
            J = jax.jacfwd(jk.aba, argnums=(0, 1, 2))(q32[0], v32[0], t32[0])
            assert all(j.dtype == jnp.float32 for j in J)
    qf, vf, af, tf = (x[0].astype(np.float64) for x in f32)  # the float32 state, exactly, in float64
    w = np.random.default_rng(6).normal(size=m.nv)
    nv = m.nv
    for name, third, partials, dkern in (("rnea", af, rnea_partials, "rnea_derivatives"),
                                         ("aba", tf, aba_partials, "aba_derivatives")):
        f = jk.methods[name]
        exact = partials(k64, qf, vf, third)
        J = jax.jacrev(f, argnums=(0, 1, 2))(*(x.astype(np.float32) for x in (qf, vf, third)))
        g = jax.grad(lambda *x: f(*x) @ w.astype(np.float32), argnums=(0, 1, 2))(
            *(x.astype(np.float32) for x in (qf, vf, third)))
        for k in range(3):
            tol = TOL32["crba"] if (name, k) == ("rnea", 2) else TOL32[dkern]
            assert relerr(J[k], exact[k]) <= tol, (name, k, relerr(J[k], exact[k]))
            bound = nv * np.max(np.abs(w)) * (tol + nv * 2.0 ** -24) * max(1.0, np.max(np.abs(exact[k])))
            assert np.max(np.abs(np.asarray(g[k], np.float64) - w @ exact[k])) <= bound, (name, k)


def test_errors_name_the_kernel_and_the_argument(kernels):
    kern = kernels[("iiwa14", False)]
    jk = rbdgen.jax.wrap(kern)
    q, v, a, _ = random_state(kern.model, seed=16)
    with jax.enable_x64(False):
        with pytest.raises(ValueError, match=r"rnea: these kernels are float64 but JAX's 64-bit mode is off.*"
                                             r"'q'.*jax_enable_x64.*dtype='float32'"):
            jk.rnea(q, v, a)
        with pytest.raises(ValueError, match="64-bit mode is off"):
            jax.jit(jk.crba)(jnp.zeros(7))
    with pytest.raises(ValueError, match=r"rnea: argument 'q' has shape \(6,\), expected \(…, 7\)"):
        jk.rnea(q[:6], v, a)
    with pytest.raises(ValueError, match=r"aba: argument 'v' has shape \(2, 7\), but 'q' has shape \(7,\)"):
        jax.vmap(jk.aba, in_axes=(None, None, 0))(q, np.stack([v, v]), np.stack([a, a]))
    with pytest.raises(TypeError, match=r"rnea\(\) takes 3 arguments \(q, v, a\), got 2"):
        jk.rnea(q, v)
    with pytest.raises(ValueError, match=r"rnea: argument 'a' has dtype float32, these kernels take float64"):
        jk.rnea(q, v, a.astype(np.float32))
    jk32 = rbdgen.jax.wrap(kernels["iiwa14-f32"])
    with pytest.raises(ValueError, match=r"crba: argument 'q' has dtype float64, these kernels take float32"):
        jk32.crba(jnp.asarray(q))
    # differentiating what has no rule, or a second time: refused, naming the kernel
    with pytest.raises(TypeError, match="crba has no derivative rule"):
        jax.grad(lambda q: jk.crba(q).sum())(q)
    with pytest.raises(TypeError, match="derivative rule of aba is first order"):
        jax.hessian(lambda q: jk.aba(q, v, a).sum())(q)
    jax.grad(lambda q: jk.crba(jax.lax.stop_gradient(q)).sum() + q.sum())(q)  # a constant: fine
    spy = _Spy(kern)
    spy.target = "hls"
    with pytest.raises(TypeError, match="kernels of target 'hls' are not supported"):
        rbdgen.jax.wrap(spy)
    with pytest.raises(TypeError, match="takes kernels from rbdgen.build, got int"):
        rbdgen.jax.wrap(3)


def test_missing_derivative_kernels(kernels):
    """Values work without the derivative kernels; differentiating says which to build, at
    trace time (before anything runs)."""
    kern = kernels[("iiwa14", False)]
    jk = rbdgen.jax.wrap(_Spy(kern, kernels=("rnea", "crba", "aba")))
    assert jk.differentiable == ()
    q, v, a, _ = random_state(kern.model, seed=17)
    assert np.array_equal(jk.rnea(q, v, a), kern.rnea(q, v, a))
    with pytest.raises(ValueError, match="differentiating rnea needs the kernels rnea_derivatives, crba; "
                                         "not built: rnea_derivatives"):
        jax.grad(lambda q: jk.rnea(q, v, a).sum())(q)
    with pytest.raises(ValueError, match="differentiating aba needs the kernels aba_derivatives"):
        jax.jit(jax.jacfwd(jk.aba))(q, v, a)
