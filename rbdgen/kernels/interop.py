"""Any array in, the same kind out: DLPack tensors (JAX, PyTorch, cupy, …) given to the kernels.

The kernel methods (:class:`rbdgen.kernels.loaded.CompiledKernels`, the NumPy path and the GPU path
of :class:`rbdgen.targets.cuda.runtime.CudaKernels`) take, besides NumPy arrays, any object that speaks
DLPack (``__dlpack__`` and ``__dlpack_device__``) and return the caller's kind. docs/interop.md
has the rules; in short:

* **CPU kernels, host memory** (DLPack device kDLCPU): the argument is viewed with
  :func:`numpy.from_dlpack` (no copy) and the view takes the NumPy path. A view that is not of
  the kernel's dtype or not C-contiguous is refused, naming the argument, as a NumPy array would
  be (nothing is converted behind the caller's back). Memory on a device (CUDA, ROCm, …) is
  refused, naming the argument and saying to use the CUDA kernels or move it to the host.
* **The caller's kind**: the native kind (NumPy for host memory, cupy for the GPU path) and
  anything that is not an array framework's (lists, memoryviews, a bare DLPack producer) are
  neutral; the first other argument's framework decides, and an argument of a second framework
  is refused, naming it. The outputs are handed to that framework's ``from_dlpack`` without a copy
  (``torch.from_dlpack``, ``jax.dlpack.from_dlpack``, …; found from the type's top-level module,
  ``jaxlib`` being JAX's, or the array's ``__array_namespace__()``); JAX outputs are allocated
  64-byte aligned, the alignment XLA needs to take host memory without copying it.
* **out=**: arrays of any kind that DLPack can view writeable (PyTorch tensors, NumPy) are
  written in place and returned as given; read-only ones (JAX arrays are immutable) are refused,
  naming the output.

Everything here runs only for calls the C fast path (plain ndarrays) does not take.
"""
from __future__ import annotations

import sys
from math import prod as _prod

import numpy as np

from ..errors import RbdgenError

_ND = np.ndarray
#: DLPack device types (dlpack.h DLDeviceType)
KDL_CPU, KDL_CUDA, KDL_CUDA_MANAGED = 1, 2, 13
_DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi",
                 10: "rocm", 11: "rocm_host", 12: "ext_dev", 13: "cuda_managed", 14: "oneapi", 15: "webgpu",
                 16: "hexagon", 17: "maia"}
#: byte alignment of output buffers handed to a framework (XLA copies host memory aligned less)
_ALIGN = {"jax": 64}
_HINTS = {  # how to convert or move a tensor, per framework
    "torch": (".to(torch.{dt})", ".contiguous()", ".cpu()"),
    "jax": (".astype(jnp.{dt})", "jnp.asarray(x, copy=True)", "jax.device_get(x)"),
    "cupy": (".astype(cupy.{dt})", "cupy.ascontiguousarray(x)", ".get()"),
}
_DEFAULT_HINTS = (".astype({dt})", "a contiguous copy", "a copy in host memory")


def _top(module: str) -> str:
    top = module.partition(".")[0]
    return "jax" if top in ("jax", "jaxlib") else top


def framework(x) -> str:
    """The array framework of ``x``: its type's top-level module, JAX for ``jaxlib`` (whose
    ``ArrayImpl`` lives in ``jaxlib._jax``)."""
    return _top(type(x).__module__)


def is_foreign(x) -> bool:
    """Not an ndarray (nor a list or tuple), but DLPack or the CUDA array interface: for this
    module rather than the NumPy checks."""
    return not isinstance(x, (_ND, list, tuple)) and (hasattr(x, "__dlpack__")
                                                       or hasattr(x, "__cuda_array_interface__"))


def any_foreign(args, out) -> bool:
    for x in args:
        if type(x) is not _ND and is_foreign(x):
            return True
    if out is None or type(out) is _ND:
        return False
    return any(is_foreign(o) for o in (out if isinstance(out, (tuple, list)) else (out,)))


class Kind:
    """A framework's array kind: ``wrap`` turns a NumPy (or cupy) output into it, without a copy."""

    __slots__ = ("name", "from_dlpack", "align")

    def __init__(self, name, from_dlpack, align=0):
        self.name, self.from_dlpack, self.align = name, from_dlpack, align

    def wrap(self, kname, o):
        try:
            return self.from_dlpack(o)
        except Exception as e:  # noqa: BLE001 - a foreign library's error, reported with ours
            raise RbdgenError(f"{kname}: the result could not be handed back as a {self.name} array through "
                              f"DLPack ({type(e).__name__}: {e}); pass out= arrays, or NumPy inputs") from e

    def __repr__(self):
        return f"<array kind {self.name}>"


_kinds: dict = {}  # (type, native framework) → Kind or None


def _find_kind(x, native):
    """The kind of ``x``'s type: JAX's; else the framework whose ``from_dlpack`` the array's
    ``__array_namespace__()`` has; else the first class in its MRO whose top-level module (one
    already imported) has a ``from_dlpack`` (a subclass of ``torch.Tensor`` defined elsewhere is
    PyTorch's). None where a neutral module (NumPy, ``native``) comes first."""
    neutral = ("numpy", native, "builtins")
    fw = framework(x)
    if fw == "jax":
        import jax.dlpack  # jax is imported: x is one of its arrays

        return Kind("jax", jax.dlpack.from_dlpack, _ALIGN["jax"])
    ns = getattr(x, "__array_namespace__", None)
    if ns is not None and fw not in neutral:
        try:
            f = getattr(ns(), "from_dlpack", None)
        except Exception:  # noqa: BLE001 - a foreign method: fall back on the modules
            f = None
        if callable(f):
            return Kind(fw, f, _ALIGN.get(fw, 0))
    for c in type(x).__mro__[:-1]:
        fw = _top(c.__module__)
        if fw in neutral:
            return None
        f = getattr(sys.modules.get(fw), "from_dlpack", None)
        if callable(f):
            return Kind(fw, f, _ALIGN.get(fw, 0))
    return None


def kind_of(x, native: str = "numpy"):
    """The kind of ``x`` its results should come back as, or None (neutral: NumPy, ``native``,
    lists, buffers, a producer of no framework with a ``from_dlpack``)."""
    if isinstance(x, (_ND, list, tuple)):
        return None
    key = (type(x), native)
    try:
        return _kinds[key]
    except KeyError:
        pass
    kind = _kinds[key] = _find_kind(x, native) if is_foreign(x) else None
    return kind


def _mixed(kname, name, k, first, kind):
    return ValueError(f"{kname}: argument '{name}' is a {k.name} array but '{first}' is a {kind.name} array; "
                      f"pass arrays of one framework (NumPy arrays mix with any), the results come back "
                      f"as that framework's")


def result_kind(kname, names, args, native: str = "numpy"):
    """The caller's kind, from the inputs: the first non-neutral argument's; an argument of
    another framework is a ValueError naming it."""
    kind, first = None, None
    for name, x in zip(names, args):
        k = kind_of(x, native)
        if k is None:
            continue
        if kind is None:
            kind, first = k, name
        elif k.name != kind.name:
            raise _mixed(kname, name, k, first, kind)
    return kind


def _is_tracer(x) -> bool:
    return any(c.__name__ == "Tracer" for c in type(x).__mro__)


def _unviewable(kname, what, x, err):
    """Why ``np.from_dlpack(x)`` failed (``err``), as a ValueError naming the argument: a JAX
    tracer, memory on a device, or the producer's own reason (a tensor requiring grad, …)."""
    fw = framework(x)
    if fw == "jax" and _is_tracer(x):
        return ValueError(f"{kname}: {what} is a traced JAX value (the call is inside jax.jit, grad or vmap); "
                          "the kernels run on concrete arrays: call them outside the transformation, or use "
                          "rbdgen.jax.wrap(kern), whose methods work under jit, vmap and grad")
    dev = None
    try:
        if hasattr(x, "__dlpack__"):
            dev = tuple(int(d) for d in x.__dlpack_device__())
        elif hasattr(x, "__cuda_array_interface__"):
            dev = (KDL_CUDA, 0)
    except Exception:  # noqa: BLE001 - a foreign method; the error from_dlpack gave is reported below
        dev = None
    if dev is not None and dev[0] != KDL_CPU:
        where = f"{_DEVICE_NAMES.get(dev[0], f'device type {dev[0]}')}:{dev[1]}"
        move = _HINTS.get(fw, _DEFAULT_HINTS)[2]
        cuda = ("build the CUDA kernels (rbdgen.build(model, target='cuda')) or "
                if dev[0] in (KDL_CUDA, KDL_CUDA_MANAGED) else "")
        return ValueError(f"{kname}: {what} ({fw} {type(x).__name__}) is in device memory ({where}); these kernels "
                          f"take host memory: {cuda}move it to the host first ({move})")
    msg = " ".join(str(err).split())[:200]
    return ValueError(f"{kname}: {what} ({fw} {type(x).__name__}) cannot be viewed through DLPack "
                      f"({type(err).__name__}: {msg})")


def _refuse_view(kname, what, x, v, dtype, out):
    fw = framework(x)
    dt_hint, contig_hint, _ = _HINTS.get(fw, _DEFAULT_HINTS)
    if v.dtype != dtype:
        extra = (" (JAX makes float32 arrays unless jax_enable_x64 is set: "
                 "jax.config.update('jax_enable_x64', True))" if fw == "jax" and v.dtype == np.float32 else "")
        raise ValueError(f"{kname}: {what} has dtype {v.dtype}, this kernel takes {dtype} (convert with "
                         f"{dt_hint.format(dt=dtype)} or build with dtype='{v.dtype}'){extra}")
    if not v.flags.c_contiguous:
        raise ValueError(f"{kname}: {what} is not C-contiguous (make a contiguous copy first: {contig_hint})")
    why = ("JAX arrays are immutable: call without out= (the result comes back as a new JAX array)"
           if fw == "jax" else "out= arrays are written in place")
    raise ValueError(f"{kname}: {what} ({fw} {type(x).__name__}) is read-only; {why}")


def row_stride(x) -> int | None:
    """The distance between consecutive states of a batch ``x`` (N, ...), in elements, when each
    state's own values are C-contiguous (what the strided batch entry points take), else None.
    A C-contiguous batch gives its state size."""
    it = x.itemsize
    expect = it
    for d in range(x.ndim - 1, 0, -1):
        if x.shape[d] != 1 and x.strides[d] != expect:
            return None
        expect *= x.shape[d]
    if x.ndim < 2 or x.shape[0] <= 1:
        return expect // it
    if x.strides[0] % it:
        return None
    return x.strides[0] // it


def takes_strided_rows(method) -> bool:
    """Whether a kernel method (``kern.methods[name]``) takes batches whose rows are strided, each
    state contiguous (:func:`row_stride`): the CPU libraries' strided entry points. The one test
    the wrappers (numpy, DLPack, JAX, PyTorch, Dask) ask before passing a view instead of a copy."""
    return getattr(method, "batch_strided", None) is not None


def host_view(kname: str, what: str, x, dtype, out: bool = False, rows: bool = False):
    """``x`` (a DLPack tensor in host memory) as an ndarray sharing its memory
    (:func:`numpy.from_dlpack`), of dtype ``dtype``, C-contiguous (or, with ``rows``, a batch
    whose rows are strided and each state contiguous: what the CPU kernels' strided entry points
    take) and, for an ``out`` array, writeable; else a ValueError naming ``what`` ("argument
    'q'", "out array for 'tau'")."""
    try:
        v = _from_dlpack(x)
    except Exception as e:  # noqa: BLE001 - BufferError (a tensor requiring grad, …), TypeError, …
        raise _unviewable(kname, what, x, e) from None
    laid_out = v.flags.c_contiguous or (rows and v.ndim == 2 and row_stride(v) is not None)
    if v.dtype != dtype or not laid_out or (out and not v.flags.writeable):
        _refuse_view(kname, what, x, v, dtype, out)
    return v


_from_dlpack = np.from_dlpack


def _aligned_empty(shape, dtype, align):
    """An uninitialised C-contiguous array whose data starts at a multiple of ``align`` bytes."""
    nbytes = _prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + nbytes].view(dtype).reshape(shape)


def call(method, args, out):
    """Call ``method`` (a :class:`rbdgen.kernels.loaded._Method`) on DLPack tensors in host memory:
    NumPy views in, the outputs handed back as the caller's kind (or ``out=`` filled and
    returned as given)."""
    kname, dt, inputs = method.name, method._dt, method.inputs
    rows = takes_strided_rows(method)  # row-strided batches taken as they are
    names = [inputs[i][0] if i < len(inputs) else f"#{i + 1}" for i in range(len(args))]
    views = [x if type(x) is _ND or not is_foreign(x) else host_view(kname, f"argument '{n}'", x, dt, rows=rows)
             for n, x in zip(names, args)]
    kind = result_kind(kname, names, args)
    if out is not None:
        many = isinstance(out, (tuple, list))
        outs = list(out) if many else [out]
        onames = [n for n, _ in method.outputs] + [f"#{i + 1}" for i in range(len(method.outputs), len(outs))]
        oviews = [host_view(kname, f"out array for '{n}'", o, dt, out=True, rows=rows) if is_foreign(o) else o
                  for n, o in zip(onames, outs)]
        method(*views, out=tuple(oviews) if many else oviews[0])
        return tuple(outs) if many else out
    if kind is None:
        return method(*views)
    v0 = views[0] if views else None
    if kind.align and type(v0) is _ND and v0.ndim in (1, 2) and len(views) == len(inputs) \
            and v0.shape[-1] == inputs[0][1]:
        # outputs where the framework takes them without a copy; a mistake in the arguments is
        # still reported by the method (inputs are checked before out= arrays)
        lead = v0.shape[:-1]
        made = tuple(_aligned_empty(lead + tuple(s), dt, kind.align) for _, s in method.outputs)
        method(*views, out=made if len(made) > 1 else made[0])
    else:
        res = method(*views)
        made = res if isinstance(res, tuple) else (res,)
    if len(made) == 1:
        return kind.wrap(kname, made[0])
    return tuple(kind.wrap(kname, o) for o in made)


def deliver(kname, kind, outs, ctx):
    """The GPU path's return value: its (cupy) outputs as the caller's ``kind`` when there is one,
    handed over with ``ctx`` (the launch stream made cupy's current, so that the DLPack exchange
    orders the consumer's stream after the kernel)."""
    if kind is not None:
        with ctx():
            outs = [kind.wrap(kname, o) for o in outs]
    return outs[0] if len(outs) == 1 else tuple(outs)
