"""Any array in, the same kind out (rbdgen/kernels/interop.py, docs/interop.md): the kernels take
objects that speak DLPack — JAX arrays, PyTorch tensors, a bare producer — viewing host memory
without copies, and return the caller's kind.

Checked here, on the iiwa14 CPU kernels (the build test_torch.py and others make: one compile
cache): values equal to the NumPy path bit for bit, one state and batches, one and several
outputs; the views share the caller's memory and the results share the kernel's output arrays
(JAX outputs 64-byte aligned, so XLA does not copy them); out= written in place; the kind rule
for mixed arguments; and that every refusal names the argument. The CUDA kernels' half (their
outputs handed back as the caller's kind, on the launch stream) runs with the device calls
replaced by recorders, as in test_cuda.py, on a kernel object built without a library.

PyTorch cases skip where torch cannot be imported (``make test-torch`` installs it and sets
RBDGEN_REQUIRE_TORCH=1, under which they fail instead); JAX is in the test environment.
"""
from __future__ import annotations

import os
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest

import rbdgen
from rbdgen.errors import RbdgenError
from rbdgen.kernels import interop
from rbdgen.kernels.loaded import _Method

from conftest import ROBOTS, load_case, random_state

KERNELS = ("rnea", "crba", "aba", "rnea_derivatives", "aba_derivatives")

try:
    import jax
    import jax.numpy as jnp
except ImportError as e:  # pragma: no cover - jax is a test dependency
    jax = None
    _no_jax = f"jax cannot be imported ({e})"
need_jax = pytest.mark.skipif(jax is None, reason=_no_jax if jax is None else "")

_why_torch = None
try:
    import torch
except Exception as e:  # noqa: BLE001 - ImportError, or a broken install (OSError loading its libraries)
    torch = None
    _why_torch = f"torch cannot be imported ({type(e).__name__}: {e})"
if _why_torch is not None and os.environ.get("RBDGEN_REQUIRE_TORCH") == "1":
    pytest.fail(f"RBDGEN_REQUIRE_TORCH=1 but {_why_torch}; `make test-torch` installs it", pytrace=False)
need_torch = pytest.mark.skipif(torch is None, reason=f"{_why_torch}: the PyTorch cases run in the optional "
                                                      "`make test-torch` (docs/torch.md)")


@pytest.fixture(scope="module")
def kern():
    m = load_case(next(r for r in ROBOTS if r.name == "iiwa14"), False)
    return rbdgen.build(m, kernels=KERNELS, opt="-O1")


@pytest.fixture
def x64():
    """JAX with float64 arrays (its default makes float32), for this test only."""
    with jax.enable_x64(True):
        yield


def _state(kern, n=None, seed=0):
    return tuple(np.ascontiguousarray(x) for x in random_state(kern.model, seed=seed, n=n))


class Producer:
    """A bare DLPack producer over a NumPy array: no framework, so its results come back as NumPy.
    With a ``device`` other than the CPU it says so, and export fails as NumPy's import of
    device memory would."""

    def __init__(self, a, device=(1, 0)):
        self.a, self.device = a, device

    def __dlpack__(self, **kw):
        if self.device[0] != 1:
            raise BufferError("Unsupported device in DLTensor.")
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.device


@pytest.fixture
def views(monkeypatch):
    """Every (argument, NumPy view) the interop layer makes, and every (output array, what the
    framework made of it)."""
    seen = {"in": [], "out": []}
    real_view, real_wrap = interop._from_dlpack, interop.Kind.wrap

    def view(x):
        v = real_view(x)
        seen["in"].append((x, v))
        return v

    def wrap(self, kname, o):
        r = real_wrap(self, kname, o)
        seen["out"].append((o, r))
        return r

    monkeypatch.setattr(interop, "_from_dlpack", view)
    monkeypatch.setattr(interop.Kind, "wrap", wrap)
    return seen


# ---- JAX -------------------------------------------------------------------------------------------

@need_jax
@pytest.mark.parametrize("n", [None, 5])
def test_jax_in_jax_out_without_copies(kern, x64, views, n):
    q, v, a, tau = _state(kern, n)
    jq, jv, ja, jt = map(jnp.asarray, (q, v, a, tau))
    got = kern.rnea(jq, jv, ja)
    assert isinstance(got, jax.Array) and got.dtype == jnp.float64
    np.testing.assert_array_equal(np.asarray(got), kern.rnea(q, v, a))
    # the kernel read the JAX arrays' own memory ...
    for x, view in views["in"]:
        assert view.ctypes.data == x.unsafe_buffer_pointer() and not view.flags.writeable
    # ... and JAX took the kernel's (64-byte aligned) output without copying it
    (o, r), = views["out"]
    assert o.ctypes.data % 64 == 0 and r.unsafe_buffer_pointer() == o.ctypes.data
    # several outputs: a tuple of JAX arrays; numpy arguments mix in
    dq, dv = kern.rnea_derivatives(jq, v, ja)
    for g, e in zip((dq, dv), kern.rnea_derivatives(q, v, a)):
        assert isinstance(g, jax.Array)
        np.testing.assert_array_equal(np.asarray(g), e)
    M = kern.crba(jq)
    np.testing.assert_array_equal(np.asarray(M), kern.crba(q))
    np.testing.assert_array_equal(np.asarray(kern.aba(jq, jv, jt)), kern.aba(q, v, tau))


@need_jax
def test_jax_refusals_name_the_argument(kern, x64):
    q, v, a, _ = _state(kern, 5)
    jq, jv, ja = map(jnp.asarray, (q, v, a))
    with jax.enable_x64(False):
        j32 = jnp.asarray(v)
    with pytest.raises(ValueError, match=r"rnea: argument 'v' has dtype float32, this kernel takes float64 "
                                         r"\(convert with \.astype\(jnp\.float64\).*jax_enable_x64"):
        kern.rnea(jq, j32, ja)
    with pytest.raises(ValueError, match=r"rnea: out array for 'tau' \(jax ArrayImpl\) is read-only; "
                                         r"JAX arrays are immutable: call without out="):
        kern.rnea(jq, jv, ja, out=jnp.zeros((5, 7)))
    with pytest.raises(ValueError, match=r"rnea: argument 'a' has shape \(4, 7\)"):
        kern.rnea(jq, jv, ja[:4])
    with pytest.raises(ValueError, match=r"rnea: argument 'a' has shape \(5, 6\), expected"):
        kern.rnea(jq, jv, ja[:, :6])
    with pytest.raises(ValueError, match=r"rnea: argument 'q' is a traced JAX value.*jax\.jit.*"
                                         r"rbdgen\.jax\.wrap\(kern\)"):
        jax.jit(lambda x: kern.rnea(x, jv, ja))(jq)
    with pytest.raises(TypeError, match=r"rnea\(\) takes 3 arguments"):
        kern.rnea(jq, jv)


# ---- a bare producer, and a made-up framework -----------------------------------------------------

def test_bare_producer_views_without_copies_and_returns_numpy(kern, views):
    q, v, a, _ = _state(kern, 3)
    got = kern.rnea(Producer(q), Producer(v), a)
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, kern.rnea(q, v, a))
    assert [np.shares_memory(view, base) for (_, view), base in zip(views["in"], (q, v))] == [True, True]
    # out=: written in place through the view, returned as given
    buf = np.zeros((3, 7))
    out = Producer(buf)
    assert kern.rnea(Producer(q), v, a, out=out) is out
    np.testing.assert_array_equal(buf, got)
    dq, dv = np.zeros((3, 7, 7)), np.zeros((3, 7, 7))
    res = kern.rnea_derivatives(Producer(q), v, a, out=[Producer(dq), dv])
    assert isinstance(res, tuple) and res[0].a is dq and res[1] is dv
    np.testing.assert_array_equal(dq, kern.rnea_derivatives(q, v, a)[0])


def test_producer_batches_with_strided_rows_are_views(kern):
    """A DLPack batch whose rows are strided (column blocks of one packed array, an out= block of
    a wider one) reaches the CPU kernels as a view, as a NumPy array does: no copy, the values
    of the contiguous call."""
    q, v, a, _ = _state(kern, 6)
    X = np.hstack([q, v, a])
    want = kern.rnea(q, v, a)
    got = kern.rnea(Producer(X[:, :7]), Producer(X[:, 7:14]), Producer(X[:, 14:]))
    np.testing.assert_array_equal(got, want)
    wide = np.zeros((6, 9))
    kern.rnea(Producer(X[:, :7]), v, a, out=Producer(wide[:, 1:8]))
    np.testing.assert_array_equal(wide[:, 1:8], want)
    assert not wide[:, [0, 8]].any()


def test_producer_refusals_name_the_argument(kern):
    q, v, a, _ = _state(kern)
    with pytest.raises(ValueError, match=r"rnea: argument 'v' has dtype float32, this kernel takes float64"):
        kern.rnea(q, Producer(v.astype(np.float32)), a)
    strided = np.zeros((7, 2))[:, 0]
    with pytest.raises(ValueError, match=r"rnea: argument 'a' is not C-contiguous"):
        kern.rnea(q, v, Producer(strided))
    with pytest.raises(ValueError, match=r"rnea: argument 'q' \(\S+ Producer\) is in device memory "
                                         r"\(cuda:0\); these kernels take host memory: build the CUDA kernels "
                                         r"\(rbdgen\.build\(model, target='cuda'\)\) or move it to the host"):
        kern.rnea(Producer(q, device=(2, 0)), v, a)
    with pytest.raises(ValueError, match=r"rnea: argument 'v' .* is in device memory \(rocm:1\); these kernels "
                                         r"take host memory: move it to the host"):
        kern.rnea(q, Producer(v, device=(10, 1)), a)
    cai = SimpleNamespace(__cuda_array_interface__={"shape": (7,), "typestr": "<f8", "data": (0, False)})
    with pytest.raises(ValueError, match=r"rnea: argument 'a' .* is in device memory \(cuda:0\)"):
        kern.rnea(q, v, cai)
    readonly = q.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match=r"rnea: out array for 'tau' .* is read-only"):
        kern.rnea(q, v, a, out=Producer(readonly))

    class Broken(Producer):
        def __dlpack__(self, **kw):
            raise BufferError("no export today")

    with pytest.raises(ValueError, match=r"rnea: argument 'v' \(\S+ Broken\) cannot be viewed through "
                                         r"DLPack \(BufferError: no export today\)"):
        kern.rnea(q, Broken(v), a)


def _framework(monkeypatch, name):
    """A made-up array framework ``name``: a module with from_dlpack (wrapping a NumPy view)
    and an array type living in it."""
    mod = types.ModuleType(name)
    made = []

    class Array(Producer):
        pass

    Array.__module__ = f"{name}._core"

    def from_dlpack(x):
        made.append(np.from_dlpack(x))
        return Array(made[-1])

    mod.from_dlpack = from_dlpack
    mod.Array = Array
    monkeypatch.setitem(sys.modules, name, mod)
    return mod, made


def test_the_first_framework_decides_and_frameworks_do_not_mix(kern, monkeypatch):
    """The kind is found from the type's top-level module (its from_dlpack); NumPy arrays and
    bare producers are neutral; two frameworks are refused, naming the second one's argument."""
    fw, made = _framework(monkeypatch, "rbdgen_fakefw")
    other, _ = _framework(monkeypatch, "rbdgen_otherfw")
    q, v, a, _ = _state(kern, 4)
    got = kern.rnea(q, Producer(v), fw.Array(a))
    assert isinstance(got, fw.Array) and got.a is made[-1]
    np.testing.assert_array_equal(got.a, kern.rnea(q, v, a))
    assert interop.kind_of(fw.Array(a)).name == "rbdgen_fakefw" and interop.kind_of(Producer(a)) is None

    class Sub(fw.Array):  # a user's subclass, in a module of no framework: still the framework's
        pass

    Sub.__module__ = "rbdgen_usercode"
    assert isinstance(kern.rnea(Sub(q), v, a), fw.Array)
    # a framework that cannot take the result: said, naming the kernel and the framework
    broken, _ = _framework(monkeypatch, "rbdgen_brokenfw")
    broken.from_dlpack = lambda x: 1 / 0
    with pytest.raises(RbdgenError, match=r"rnea: the result could not be handed back as a rbdgen_brokenfw array "
                                          r"through DLPack \(ZeroDivisionError"):
        kern.rnea(q, v, broken.Array(a))
    with pytest.raises(ValueError, match=r"rnea: argument 'a' is a rbdgen_otherfw array but 'v' is a "
                                         r"rbdgen_fakefw array; pass arrays of one framework"):
        kern.rnea(q, fw.Array(v), other.Array(a))


@need_jax
def test_jax_module_layout():
    """jaxlib's ArrayImpl (module jaxlib._jax) is JAX's: jax.dlpack.from_dlpack."""
    x = jnp.zeros(3)
    assert type(x).__module__.startswith("jaxlib")
    k = interop.kind_of(x)
    assert k.name == "jax" and k.from_dlpack is jax.dlpack.from_dlpack and k.align == 64


@need_jax
def test_the_python_path_without_the_binding(kern, x64):
    """A method without the C binding (as the CUDA kernels' NumPy path and the emulation use)."""
    m = kern.methods["rnea"]
    slow = _Method(kern, "rnea", m.single, m.batch, m.inputs, m.outputs)
    q, v, a, _ = _state(kern, 2)
    got = slow(jnp.asarray(q), jnp.asarray(v), a)
    assert isinstance(got, jax.Array)
    np.testing.assert_array_equal(np.asarray(got), kern.rnea(q, v, a))
    with pytest.raises(ValueError, match=r"rnea: argument 'v' has dtype float32"):
        slow(q, Producer(v.astype(np.float32)), a)


# ---- PyTorch ---------------------------------------------------------------------------------------

@need_torch
@pytest.mark.parametrize("n", [None, 6])
def test_torch_in_torch_out_without_copies(kern, views, n):
    q, v, a, _ = _state(kern, n)
    tq, tv, ta = map(torch.from_numpy, (q, v, a))
    got = kern.rnea(tq, tv, ta)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    np.testing.assert_array_equal(got.numpy(), kern.rnea(q, v, a))
    assert [view.ctypes.data for _, view in views["in"]] == [x.data_ptr() for x in (tq, tv, ta)]
    (o, r), = views["out"]
    assert r.data_ptr() == o.ctypes.data
    # out=: written in place and returned as given, one output or several
    out = torch.empty_like(tq)
    assert kern.rnea(tq, tv, ta, out=out) is out
    np.testing.assert_array_equal(out.numpy(), got.numpy())
    dq, dv = kern.rnea_derivatives(tq, v, ta)  # numpy arguments mix in
    assert isinstance(dq, torch.Tensor) and isinstance(dv, torch.Tensor)
    outs = (torch.empty_like(dq), torch.empty_like(dv))
    res = kern.rnea_derivatives(tq, tv, ta, out=outs)
    assert res[0] is outs[0] and res[1] is outs[1]
    np.testing.assert_array_equal(outs[0].numpy(), dq.numpy())


@need_torch
def test_torch_refusals_name_the_argument(kern):
    q, v, a, _ = _state(kern, 3)
    tq, tv, ta = map(torch.from_numpy, (q, v, a))
    with pytest.raises(ValueError, match=r"rnea: argument 'v' has dtype float32, this kernel takes float64 "
                                         r"\(convert with \.to\(torch\.float64\)"):
        kern.rnea(tq, tv.float(), ta)
    with pytest.raises(ValueError, match=r"rnea: argument 'a' is not C-contiguous .*\.contiguous\(\)"):
        kern.rnea(tq, tv, torch.zeros(7, 3, dtype=torch.float64).T)
    with pytest.raises(ValueError, match=r"rnea: argument 'q' \(torch Tensor\) cannot be viewed through DLPack "
                                         r"\(BufferError: .*require.*grad"):
        kern.rnea(tq.clone().requires_grad_(), tv, ta)
    with pytest.raises(ValueError, match=r"rnea: out= array 'tau' has shape \(3, 6\), expected"):
        kern.rnea(tq, tv, ta, out=torch.empty(3, 6, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"rnea: out array for 'tau' has dtype float32, this kernel takes float64"):
        kern.rnea(tq, tv, ta, out=torch.empty(3, 7))
    if jax is not None:
        with jax.enable_x64(True), pytest.raises(ValueError, match=r"rnea: argument 'v' is a jax array but 'q' "
                                                                   r"is a torch array"):
            kern.rnea(tq, jnp.asarray(v), ta)


# ---- the CUDA kernels' GPU path, device calls replaced by recorders ---------------------------------

class _FakeGpu:
    """A GPU array (``__cuda_array_interface__``) of a framework given by ``module``."""

    def __init__(self, shape, ptr=0x100):
        self.shape = shape
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": "<f8", "data": (ptr, False),
                                         "strides": None, "version": 3, "stream": None}


def _cuda_method(monkeypatch):
    """A CudaKernels method for rnea (q, v, a → tau, nv = 7) on a made-up library whose launcher
    records its calls, and a fake cupy that records on which stream DLPack exports happen."""
    import rbdgen.targets.cuda.runtime as jc

    calls = []
    lib = SimpleNamespace(p_rnea_f64_launch=lambda n, *a: calls.append(("launch", n, a[-2].value or 0)) or 0,
                          p_rnea_f64_host=lambda *a: 0,
                          # the graph-capturable entry and its workspace size (issue 47): not called here
                          p_rnea_f64_cuda=lambda *a: 0, p_rnea_f64_workspace=lambda *a: 0)
    owner = SimpleNamespace(_lib=lib, model=None, _tag="f64", prefix="p", dtype=np.dtype(np.float64), sync=False,
                            _stream_wait=lambda s, p: 0)
    ki = {"inputs": [("q", 7), ("v", 7), ("a", 7)], "outputs": [("tau", (7,))], "doc": "rnea"}
    method = jc._CudaMethod(owner, "rnea", ki)

    class Stream:
        def __init__(self, ptr):
            self.ptr = ptr

        def __enter__(self):
            self.prev, cp.current = cp.current, self

        def __exit__(self, *exc):
            cp.current = self.prev

    class CupyArray(_FakeGpu):
        def __dlpack__(self, stream=None):
            calls.append(("export on", cp.current.ptr))
            return np.zeros(self.shape).__dlpack__()

        def __dlpack_device__(self):
            return (1, 0)

    CupyArray.__module__ = "cupy._core.core"
    cp = SimpleNamespace(current=Stream(0), empty=lambda shape, dtype: CupyArray(shape, ptr=0x900))
    cp.cuda = SimpleNamespace(get_current_stream=lambda: cp.current, ExternalStream=Stream,
                              Stream=SimpleNamespace(null=Stream(0), ptds=Stream(2)))
    monkeypatch.setattr(jc, "_cupy", lambda: cp)
    return method, calls, CupyArray


def test_cuda_outputs_come_back_as_the_callers_kind(monkeypatch):
    """GPU tensors of a framework (as PyTorch's, through __cuda_array_interface__): the cupy
    outputs are handed to its from_dlpack, exported with the launch stream current; cupy arrays
    (the GPU path's own kind) and out= arrays come back unchanged."""
    method, calls, CupyArray = _cuda_method(monkeypatch)
    fw, made = _framework(monkeypatch, "rbdgen_fakegpufw")

    class Tensor(_FakeGpu):
        pass

    Tensor.__module__ = "rbdgen_fakegpufw._tensor"
    x = Tensor((5, 7))
    got = method(x, x, x, stream=0x7000)
    assert isinstance(got, fw.Array) and got.a.shape == (5, 7)
    assert calls == [("launch", 5, 0x7000), ("export on", 0x7000)]  # after the launch, on its stream
    calls.clear()
    c = CupyArray((5, 7))
    assert type(method(c, c, c)) is CupyArray and calls == [("launch", 5, 0)]
    out = Tensor((5, 7), ptr=0x400)
    assert method(x, c, x, out=out) is out
    assert type(method(c, x, c)) is fw.Array  # cupy arrays mix with any
    other, _ = _framework(monkeypatch, "rbdgen_othergpufw")

    class Other(_FakeGpu):
        pass

    Other.__module__ = "rbdgen_othergpufw"
    with pytest.raises(ValueError, match=r"rnea: argument 'a' is a rbdgen_othergpufw array but 'q' is a "
                                         r"rbdgen_fakegpufw array"):
        method(x, c, Other((5, 7)))


@need_torch
def test_cuda_kind_of_torch_tensors_is_torch():
    """What the GPU path hands a torch CUDA tensor's results to (checked on a CPU tensor: the
    kind depends on the type only)."""
    k = interop.kind_of(torch.zeros(2), native="cupy")
    assert k.name == "torch" and k.from_dlpack is torch.from_dlpack


# ---- the NumPy fast path is untouched -------------------------------------------------------------

def test_numpy_calls_do_not_reach_the_interop_layer(kern, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("interop.call reached")

    monkeypatch.setattr(interop, "call", boom)
    q, v, a, _ = _state(kern, 2)
    kern.rnea(q, v, a)
    kern.rnea(q, v, a, out=np.empty((2, 7)))
    kern.rnea(list(q[0]), v[0], a[0])
    kern.rnea(memoryview(q), v, a)
    with pytest.raises(ValueError, match="argument 'v' has dtype float32"):
        kern.rnea(q, v.astype(np.float32), a)
