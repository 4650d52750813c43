"""rbdgen.torch: every kernel on torch tensors (values equal to the NumPy path, bit for bit),
rnea and aba differentiable through rbdgen.autodiff's rules (gradcheck on a fixed base, central
differences of the normalising reference on a floating base, equality with the autodiff
partials), one state and batches, float64 and float32, and the errors.

PyTorch is not installed by ``make test`` (CI): its default Linux wheel brings ~2.6 GB of CUDA
library wheels (docs/torch.md has the measurement). Without torch this file skips, saying so;
``make test-torch`` installs it and sets RBDGEN_REQUIRE_TORCH=1, under which a missing or broken
torch fails the run instead of skipping, so a green run there means these tests ran.
"""
from __future__ import annotations

import os
import types

import numpy as np
import pytest

import rbdgen
from rbdgen import reference as ref
from rbdgen.autodiff import aba_partials, rnea_partials

from conftest import ROBOTS, TOL32, load_case, random_state

_why = None
try:
    import torch
except Exception as e:  # noqa: BLE001 - ImportError, or a broken install (OSError loading its libraries)
    _why = f"torch cannot be imported ({type(e).__name__}: {e})"
if _why is not None:
    if os.environ.get("RBDGEN_REQUIRE_TORCH") == "1":
        pytest.fail(f"RBDGEN_REQUIRE_TORCH=1 but {_why}; `make test-torch` installs it", pytrace=False)
    pytest.skip(f"{_why}: rbdgen.torch is tested by the optional `make test-torch` (PyTorch's wheel is "
                "too large for `make test`, see docs/torch.md)", allow_module_level=True)

import rbdgen.torch as rtorch  # noqa: E402 - after the check above

KERNELS = ("rnea", "crba", "aba", "rnea_derivatives", "aba_derivatives")
DIFF = {"rnea": (rnea_partials, ref.rnea), "aba": (aba_partials, ref.aba)}


def _robot(name):
    return next(r for r in ROBOTS if r.name == name)


@pytest.fixture(scope="module")
def sets():
    """The three kernel sets (the same builds as the other test files: one compile cache)."""
    iiwa = load_case(_robot("iiwa14"), False)
    quad = load_case(_robot("quadruped"), True)
    return {
        "iiwa14": rbdgen.build(iiwa, kernels=KERNELS, opt="-O1"),
        "quadruped-floating": rbdgen.build(quad, kernels=KERNELS, opt="-O1"),
        "iiwa14-float32": rbdgen.build(iiwa, kernels=KERNELS, opt="-O1", dtype="float32"),
    }


def _state(kern, n=None, seed=0):
    """(q, v, a, tau) as numpy arrays of the kernels' dtype."""
    return tuple(np.ascontiguousarray(x, dtype=kern.dtype) for x in random_state(kern.model, seed=seed, n=n))


def _inputs(kern, name, state):
    q, v, a, tau = state
    return {"rnea": (q, v, a), "crba": (q,), "aba": (q, v, tau),
            "rnea_derivatives": (q, v, a), "aba_derivatives": (q, v, tau)}[name]


def _t(*xs, grad=False):
    """Fresh leaf tensors (copies) of numpy arrays or tensors."""
    return tuple((x.detach().clone() if isinstance(x, torch.Tensor) else torch.from_numpy(np.array(x)))
                 .requires_grad_(grad) for x in xs)


def _vjp(tk, name, args, g):
    """The gradients rbdgen.torch gives for the cotangent g of kernel ``name`` at ``args``."""
    xs = _t(*args, grad=True)
    y = getattr(tk, name)(*xs)
    y.backward(torch.from_numpy(g))
    return tuple(x.grad.numpy() for x in xs)


# ---- values --------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["iiwa14", "quadruped-floating", "iiwa14-float32"])
def test_values_equal_the_numpy_path_exactly(sets, case):
    kern = sets[case]
    tk = rtorch.wrap(kern)
    assert tk.differentiable == ("rnea", "aba")
    for n in (None, 5):
        state = _state(kern, n, seed=1)
        for name in KERNELS:
            args = _inputs(kern, name, state)
            exp = kern.kernel(name)(*args)
            for grad in (False, True):  # the plain call, and through autograd
                got = getattr(tk, name)(*_t(*args, grad=grad))
                exp_t = exp if isinstance(exp, tuple) else (exp,)
                got_t = got if isinstance(got, tuple) else (got,)
                assert len(got_t) == len(exp_t)
                for g_, e in zip(got_t, exp_t):
                    assert isinstance(g_, torch.Tensor) and g_.dtype == tk.dtype and g_.device.type == "cpu"
                    assert np.array_equal(g_.detach().numpy(), e), (case, name, n, grad)
                    # every kernel's output is a graph node when an input requires grad (rnea
                    # and aba with a rule, the others with a backward that refuses)
                    assert g_.requires_grad == grad


def test_cpu_tensors_reach_the_kernel_without_copies(sets):
    kern = sets["iiwa14"]
    tk = rtorch.wrap(kern)
    op = tk.methods["rnea"]
    seen = []
    raw = op.raw

    def spy(*arrs):
        seen.extend(a.ctypes.data for a in arrs)
        out = raw(*arrs)
        seen.append(out.ctypes.data)
        return out

    op.raw = spy
    xs = _t(*_inputs(kern, "rnea", _state(kern, 4)), grad=True)
    tau = tk.rnea(*xs)
    assert seen == [x.data_ptr() for x in xs] + [tau.data_ptr()]
    # a non-contiguous tensor (a slice of a wider one) is copied to a contiguous one, same values
    seen.clear()
    wide = torch.zeros(4, 2 * kern.model.nq, dtype=torch.float64)
    wide[:, ::2] = xs[0].detach()
    q_view = wide[:, ::2]
    assert not q_view.is_contiguous()
    assert torch.equal(tk.rnea(q_view, xs[1], xs[2]), tau)
    assert seen[0] != q_view.data_ptr()
    # a batch whose rows are strided, each state contiguous (column blocks of one packed state
    # tensor): taken as it is, no copy
    seen.clear()
    packed = torch.cat([x.detach() for x in xs], dim=1)
    cols = torch.split(packed, [kern.model.nq, kern.model.nv, kern.model.nv], dim=1)
    assert not any(c.is_contiguous() for c in cols)
    assert torch.equal(tk.rnea(*cols), tau)
    assert seen[:3] == [c.data_ptr() for c in cols]


def test_no_graph_without_grad(sets):
    tk = rtorch.wrap(sets["iiwa14"])
    xs = _t(*_inputs(sets["iiwa14"], "rnea", _state(sets["iiwa14"])), grad=True)
    with torch.no_grad():
        tau = tk.rnea(*xs)
    assert tau.grad_fn is None and not tau.requires_grad
    tau = tk.rnea(*(x.detach() for x in xs))
    assert tau.grad_fn is None


# ---- gradients -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["rnea", "aba"])
def test_gradcheck_fixed_base(sets, name):
    """torch.autograd.gradcheck (float64 finite differences against our backward), one state and
    a batch. On a fixed base q's coordinates are the joint angles: no quaternion subtlety."""
    kern = sets["iiwa14"]
    tk = rtorch.wrap(kern)
    f = getattr(tk, name)
    for n in (None, 3):
        xs = _t(*_inputs(kern, name, _state(kern, n, seed=2)), grad=True)
        assert torch.autograd.gradcheck(f, xs, eps=1e-6, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", ["rnea", "aba"])
def test_floating_base_backward_equals_central_differences_of_the_reference(sets, name):
    """Our rule differentiates y∘normalise (rbdgen.autodiff), which is what the NumPy reference
    and the kernels compute: compare gᵀ∂y/∂x with central differences of gᵀ·reference along every
    coordinate of every input (the quaternion's four included)."""
    kern = sets["quadruped-floating"]
    m = kern.model
    tk = rtorch.wrap(kern)
    args = _inputs(kern, name, _state(kern, seed=3))
    g = np.random.default_rng(4).normal(size=m.nv)
    got = _vjp(tk, name, args, g)
    fn = DIFF[name][1]
    h = 1e-6
    for k, x in enumerate(args):
        num = np.empty(x.size)
        for i in range(x.size):
            e = np.zeros_like(x)
            e[i] = h
            plus = [*args]
            minus = [*args]
            plus[k], minus[k] = x + e, x - e
            num[i] = g @ (fn(m, *plus) - fn(m, *minus)) / (2 * h)
        scale = max(1.0, float(np.max(np.abs(num))))
        assert got[k].shape == x.shape
        assert np.max(np.abs(got[k] - num)) <= 1e-6 * scale, (name, k)
    # along the radial quaternion direction (|u| changes, the rotation does not): zero
    assert abs(got[0][3:7] @ args[0][3:7]) <= 1e-9 * max(1.0, float(np.max(np.abs(got[0]))))


@pytest.mark.parametrize("case", ["iiwa14", "quadruped-floating", "iiwa14-float32"])
@pytest.mark.parametrize("name", ["rnea", "aba"])
def test_backward_equals_the_autodiff_partials_batched_and_single(sets, case, name):
    kern = sets[case]
    tk = rtorch.wrap(kern)
    N = 4
    args = _inputs(kern, name, _state(kern, N, seed=5))
    g = np.random.default_rng(6).normal(size=(N, kern.model.nv)).astype(kern.dtype)
    got = _vjp(tk, name, args, g)
    parts = DIFF[name][0](kern, *args)
    for x, gx, J in zip(args, got, parts):
        assert gx.shape == x.shape and gx.dtype == kern.dtype
        exp = np.einsum("ni,nij->nj", g.astype(float), J.astype(float))
        tol = 1e-12 if kern.dtype == np.float64 else 1e-5
        assert np.max(np.abs(gx - exp)) <= tol * max(1.0, float(np.max(np.abs(exp))))
    # a batch is its states one by one
    for i in range(N):
        one = _vjp(tk, name, tuple(x[i] for x in args), g[i])
        for gx, o in zip(got, one):
            assert o.shape == gx[i].shape
            # equal to rounding: the batched kernels vectorise across states (another order of
            # the same operations than the one-state kernels)
            tol = 1e-12 if kern.dtype == np.float64 else 1e-5
            assert np.max(np.abs(o - gx[i])) <= tol * max(1.0, float(np.max(np.abs(gx[i])))), (case, name, i)


def test_only_the_inputs_that_require_grad_get_one(sets):
    kern = sets["iiwa14"]
    tk = rtorch.wrap(kern)
    q, v, a = _inputs(kern, "rnea", _state(kern, 2, seed=7))
    Q, V, A = _t(q, v, a)
    A.requires_grad_()
    tk.rnea(Q, V, A).sum().backward()
    assert Q.grad is None and V.grad is None
    M = kern.crba(q)
    assert np.allclose(A.grad.numpy(), M.sum(-2), rtol=1e-13, atol=1e-13)  # ∂(Σ τ)/∂a = 1ᵀ M


def test_float32_gradients_within_the_kernels_float32_bounds(sets):
    """float32 gradients against float64 ones. Each gradient is Jᵀg with J one of the partials
    (rnea: rnea_derivatives' two and crba's M; aba: aba_derivatives' three); the registry bounds
    each float32 kernel's max-norm error relative to max(1, max|J|) (TOL32), so
    max|Δ(Jᵀg)| ≤ nv · max|g| · (TOL32 + nv·2⁻²⁴) · max(1, max|J|), the second term the float32
    rounding of the product itself."""
    k64, k32 = sets["iiwa14"], sets["iiwa14-float32"]
    t64, t32 = rtorch.wrap(k64), rtorch.wrap(k32)
    nv = k64.model.nv
    N = 6
    s64 = _state(k64, N, seed=8)
    s32 = tuple(x.astype(np.float32) for x in s64)
    g = np.random.default_rng(9).uniform(-1, 1, size=(N, nv))
    kernels = {"rnea": ("rnea_derivatives", "rnea_derivatives", "crba"), "aba": ("aba_derivatives",) * 3}
    for name in ("rnea", "aba"):
        a64 = _inputs(k64, name, s64)
        got32 = _vjp(t32, name, _inputs(k32, name, s32), g.astype(np.float32))
        got64 = _vjp(t64, name, a64, g)
        parts = DIFF[name][0](k64, *a64)
        for k, (x32, x64, J) in enumerate(zip(got32, got64, parts)):
            bound = nv * np.max(np.abs(g)) * (TOL32[kernels[name][k]] + nv * 2.0 ** -24) \
                * max(1.0, float(np.max(np.abs(J))))
            assert np.max(np.abs(x32 - x64)) <= bound, (name, k, np.max(np.abs(x32 - x64)), bound)


@pytest.mark.parametrize("name", ["rnea", "aba"])
def test_first_order_only(sets, name):
    """A second derivative is refused, naming the kernel: with torch's @once_differentiable alone
    the Hessian below came out all zeros (its incoming gradient does not require grad)."""
    kern = sets["iiwa14"]
    tk = rtorch.wrap(kern)
    f = getattr(tk, name)
    q, v, x = _t(*_inputs(kern, name, _state(kern)))
    msg = f"the gradient of {name} is once differentiable"
    with pytest.raises(RuntimeError, match=msg):
        torch.autograd.functional.hessian(lambda q: f(q, v, x).sum(), q)
    xs = _t(q, v, x, grad=True)
    (gq,) = torch.autograd.grad(f(*xs).sum(), xs[0], create_graph=True)
    with pytest.raises(RuntimeError, match=msg):
        gq.sum().backward()
    # a double-backward JVP (the incoming gradient requires grad)
    g = torch.ones(kern.model.nv, dtype=torch.float64, requires_grad=True)
    (gq,) = torch.autograd.grad(f(*xs), xs[0], g, create_graph=True)
    with pytest.raises(RuntimeError, match=msg):
        torch.autograd.grad(gq.sum(), g)


def test_inputs_changed_in_place_before_backward_are_an_error(sets):
    tk = rtorch.wrap(sets["iiwa14"])
    q, v, a = _t(*_inputs(sets["iiwa14"], "rnea", _state(sets["iiwa14"])))
    v.requires_grad_()
    tau = tk.rnea(q, v, a)
    with torch.no_grad():
        q.add_(0.1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tau.sum().backward()


# ---- errors --------------------------------------------------------------------------------------

def test_a_kernel_without_a_rule_refuses_backward_naming_it(sets):
    tk = rtorch.wrap(sets["iiwa14"])
    (q,) = _t(_state(sets["iiwa14"])[0], grad=True)
    M = tk.crba(q)
    assert M.requires_grad  # a graph node, so that differentiating through it cannot be silent
    with pytest.raises(RuntimeError, match=r"crba has no derivative rule \(differentiable kernels: rnea, aba\)"):
        M.sum().backward()
    assert tk.crba(q.detach()).grad_fn is None


def test_backward_without_the_derivative_kernels_names_them(sets):
    kern = sets["iiwa14"]
    partial = types.SimpleNamespace(kernels=("rnea", "crba", "aba"), methods=kern.methods, model=kern.model,
                                    dtype=kern.dtype, kernel=kern.kernel, target="cpu")
    tk = rtorch.wrap(partial)
    xs = _t(*_inputs(kern, "rnea", _state(kern)), grad=True)
    tau = tk.rnea(*xs)  # the value needs no derivative kernel
    with pytest.raises(ValueError, match="differentiating rnea needs the kernels rnea_derivatives, crba; "
                                         "not built: rnea_derivatives"):
        tau.sum().backward()


def test_argument_errors_name_the_kernel_and_the_argument(sets):
    kern = sets["iiwa14"]
    tk = rtorch.wrap(kern)
    nq = kern.model.nq
    q, v, a = _t(*_inputs(kern, "rnea", _state(kern, 3)))
    with pytest.raises(ValueError, match=r"rnea: argument 'v' has dtype torch.float32, these kernels take "
                                         r"torch.float64 \(convert with .to\(torch.float64\) or build with "
                                         r"dtype='float32'\)"):
        tk.rnea(q, v.float(), a)
    with pytest.raises(ValueError, match=r"aba: argument 'tau' has dtype torch.int64"):
        tk.aba(q, v, a.long())
    with pytest.raises(ValueError, match=r"rnea: argument 'a' is on meta, these kernels run on the CPU"):
        tk.rnea(q, v, torch.empty(3, nq, dtype=torch.float64, device="meta"))
    with pytest.raises(ValueError, match=rf"crba: argument 'q' has shape \(3, {nq + 1}\), expected "
                                         rf"\({nq},\) or \(N, {nq}\)"):
        tk.crba(torch.zeros(3, nq + 1, dtype=torch.float64))
    with pytest.raises(ValueError, match=rf"crba: argument 'q' has shape \(2, 3, {nq}\)"):
        tk.crba(torch.zeros(2, 3, nq, dtype=torch.float64))
    with pytest.raises(ValueError, match=rf"rnea: argument 'v' has shape \({nq},\), but 'q' has shape \(3, {nq}\)"):
        tk.rnea(q, v[0], a)
    with pytest.raises(ValueError, match=r"rnea: argument 'a' has shape \(2, 7\), but 'q' has shape \(3, 7\)"):
        tk.rnea(q, v, a[:2])
    with pytest.raises(TypeError, match=r"rnea: argument 'q' must be a torch.Tensor, got ndarray "
                                        r"\(torch.from_numpy\(x\)"):
        tk.rnea(q.numpy(), v, a)
    with pytest.raises(TypeError, match=r"rnea\(\) takes 3 arguments \(q, v, a\), got 2"):
        tk.rnea(q, v)
    t32 = rtorch.wrap(sets["iiwa14-float32"])
    with pytest.raises(ValueError, match=r"rnea: argument 'q' has dtype torch.float64, these kernels take "
                                         r"torch.float32"):
        t32.rnea(q, v.float(), a.float())
    with pytest.raises(TypeError, match="rbdgen.torch.wrap takes kernels from rbdgen.build, got ndarray"):
        rtorch.wrap(np.zeros(3))


def test_torch_func_transforms_are_refused_clearly(sets):
    kern = sets["iiwa14"]
    tk = rtorch.wrap(kern)
    q, v, a = _t(*_inputs(kern, "rnea", _state(kern, 2)))
    with pytest.raises(RuntimeError, match="rnea: .*torch.func transforms .* are not supported"):
        torch.func.vmap(tk.rnea)(q, v, a)
    # through autograd.Function, PyTorch's own message says it
    with pytest.raises(RuntimeError, match="autograd.Function with functorch transforms"):
        torch.func.grad(lambda q: tk.rnea(q, v[0], a[0]).sum())(q[0])


def test_empty_batch(sets):
    kern = sets["quadruped-floating"]
    tk = rtorch.wrap(kern)
    m = kern.model
    q = torch.zeros(0, m.nq, dtype=torch.float64, requires_grad=True)
    v, a = (torch.zeros(0, m.nv, dtype=torch.float64, requires_grad=True) for _ in range(2))
    tau = tk.rnea(q, v, a)
    assert tau.shape == (0, m.nv)
    tau.sum().backward()
    assert q.grad.shape == (0, m.nq) and v.grad.shape == (0, m.nv)


def test_the_module_does_not_shadow_torch():
    import importlib

    assert importlib.import_module("torch") is torch and torch.__name__ == "torch"
    assert rtorch.torch is torch and rtorch.__name__ == "rbdgen.torch"


# ---- CUDA tensors (written for a GPU machine; nothing here has run it yet) -----------------------

@pytest.mark.gpu
def test_gpu_cuda_tensors_in_and_out():
    """CUDA kernels with CUDA tensors: inputs by __cuda_array_interface__, outputs allocated by
    PyTorch and launched on its current stream (a side stream included); values and gradients
    against the CPU kernels. Skips, saying why, where PyTorch sees no GPU (fails instead under
    RBDGEN_REQUIRE_GPU=1, as the other GPU tests)."""
    if not torch.cuda.is_available():
        reason = "no CUDA GPU visible to PyTorch"
        if os.environ.get("RBDGEN_REQUIRE_GPU") == "1":
            pytest.fail(reason + "; RBDGEN_REQUIRE_GPU is set, so the GPU tests must run")
        pytest.skip(reason)
    model = load_case(_robot("iiwa14"), False)
    gk = rtorch.wrap(rbdgen.build(model, target="cuda", kernels=KERNELS, opt="-O1"))
    ck = rtorch.wrap(rbdgen.build(model, kernels=KERNELS, opt="-O1"))
    dev = torch.device("cuda", torch.cuda.current_device())
    for n in (None, 37):
        state = _state(ck.kern, n, seed=10)
        for name in ("rnea", "aba"):
            args = _inputs(ck.kern, name, state)
            cpu = _t(*args, grad=True)
            gpu = tuple(x.detach().to(dev).requires_grad_() for x in cpu)
            side = torch.cuda.Stream(dev)
            side.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(side):
                y_gpu = getattr(gk, name)(*gpu)
                y_gpu.sum().backward()
            torch.cuda.synchronize(dev)
            y_cpu = getattr(ck, name)(*cpu)
            y_cpu.sum().backward()
            assert y_gpu.device == dev and y_gpu.dtype == torch.float64
            scale = max(1.0, float(y_cpu.abs().max()))
            assert float((y_gpu.detach().cpu() - y_cpu.detach()).abs().max()) <= 1e-9 * scale
            for xg, xc in zip(gpu, cpu):
                assert xg.grad.device == dev
                s = max(1.0, float(xc.grad.abs().max()))
                assert float((xg.grad.cpu() - xc.grad).abs().max()) <= 1e-9 * s, name
    q = torch.zeros(model.nq, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"crba: argument 'q' is on cpu, these kernels run on the GPU"):
        gk.crba(q)
