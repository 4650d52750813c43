"""Load the CUDA kernels: nvcc's one shared library, called through ctypes.

Why nvcc to a shared library rather than cupy's runtime compiler (NVRTC): the library is the
same artefact a C++ project links (``rbdgen generate --target cuda``), it is compiled once into
the content-hash cache with the same lock and atomic rename as the CPU kernels, it needs no
runtime compiler on the machine that runs it (cudart is linked statically), and it carries the
host emulation that CI runs without a GPU — so what CI checks is what a GPU user loads. cupy is
optional: any array with ``__cuda_array_interface__`` is accepted, cupy only allocates outputs.

Streams follow the ``__cuda_array_interface__`` (v3) protocol: an input whose interface names a
``stream`` other than the launch stream is waited for on the device (an event, no host wait),
and outputs are allocated on the launch stream. Errors: a launch returns only its own status;
a fault inside a kernel shows at the next synchronisation, or right away in the debug mode
(``RBDGEN_CUDA_SYNC=1`` or ``kern.sync = True``), which synchronises after every launch.

nvcc and the library build: :mod:`rbdgen.targets.cuda.nvcc`.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys

import numpy as np

from ...errors import BuildError, RbdgenError
from ...kernels import interop as _interop
from ...kernels.frames import install as _install_frames
from ...kernels.loaded import NamesMissingKernels, _Method, call_variant, structured_inputs
from ...toolchain.rebuild import reduce as _reduce
from .emit import SHAPES
from .nvcc import arch_label, builds_for_found_gpus, compile_library, parse_archs

#: set to 1 for the debug mode: synchronise after every launch and report faults inside kernels
SYNC_ENV = "RBDGEN_CUDA_SYNC"


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def compile_and_load(files: dict, sources: list, libname: str, model, prefix: str, dtype: str, info: dict, *,
                     arch=None, opt: str = "-O3", nvcc: str | None = None, werror: bool = False, progress=None):
    """nvcc ``sources`` (cached like the CPU kernels) and load them: what :func:`rbdgen.build`
    and :func:`rbdgen.package.load_package` share for the CUDA target."""
    archs = parse_archs(arch)
    lib = compile_library(files, sources, libname, archs, opt=opt, nvcc=nvcc, werror=werror, progress=progress,
                          ptx=not builds_for_found_gpus(arch))
    return CudaKernels(lib, model, prefix, dtype, info, archs)


class CudaKernels(NamesMissingKernels):
    """Kernels of one robot on the GPU. Each method takes the inputs as the CPU kernels do — one
    state ``(size,)`` or a batch ``(N, size)`` — and

    * GPU arrays (cupy, anything with ``__cuda_array_interface__``, or a CUDA DLPack tensor when
      cupy is installed): runs on the GPU without copies, enqueued on cupy's current stream (or
      ``stream=``: a cupy or PyTorch stream, or a ``cudaStream_t`` handle), after the work of
      the streams the inputs' interfaces name; returns cupy arrays allocated on that stream (or
      fills ``out=``). The call returns once the kernel is enqueued: a fault inside it shows at
      the next synchronisation (or at once with ``sync``);
    * numpy arrays: copies them to the GPU, runs, copies the results back (an explicit transfer,
      waited for) and returns numpy arrays.

    ``shape=`` picks the launch shape ("thread", "block", default "auto"). :meth:`emulated`
    runs the same GPU program on the CPU (no GPU needed).

    ``sync`` (debug mode; default from ``RBDGEN_CUDA_SYNC``, read when the kernels are loaded):
    wait for the stream after every launch and raise, naming the kernel, the batch and the
    launch shape, when the kernel faulted.
    """

    target = "cuda"

    def __init__(self, lib_path, model, prefix, dtype, info: dict, archs):
        self.path = str(lib_path)
        self.model = model
        self.dtype = np.dtype(dtype)
        self.archs = tuple(archs)
        self.nq, self.nv, self.nb = model.nq, model.nv, model.nb
        self.kernels = tuple(info)
        self.info = info
        self.op_counts = {k: v["counts"] for k, v in info.items()}
        self.prefix = prefix
        try:
            self._lib = ctypes.CDLL(self.path)
        except OSError as e:
            raise BuildError(f"cannot load {self.path}: {e}") from e
        lib, p = self._lib, ctypes.c_void_p
        self._tag = {np.dtype(np.float64): "f64", np.dtype(np.float32): "f32"}[self.dtype]
        getattr(lib, f"{prefix}_error_string").restype = ctypes.c_char_p
        getattr(lib, f"{prefix}_error_string").argtypes = [ctypes.c_int]
        getattr(lib, f"{prefix}_device_count").restype = ctypes.c_int
        # stream ordering and the debug synchronisation (runtime.cu.j2); tests replace these
        self._stream_wait = getattr(lib, f"{prefix}_stream_wait")
        self._stream_wait.argtypes = [p, p]
        self._stream_wait.restype = ctypes.c_int
        self._stream_sync = getattr(lib, f"{prefix}_stream_sync")
        self._stream_sync.argtypes = [p]
        self._stream_sync.restype = ctypes.c_int
        getattr(lib, f"{prefix}_release_pool").restype = ctypes.c_int
        # graphs and the few runtime calls of prepared launches (runtime.cu.j2)
        for f, args in (("graph_begin", [p]), ("graph_end", [p, ctypes.POINTER(p)]), ("graph_launch", [p, p]),
                        ("graph_destroy", [p]), ("malloc", [ctypes.POINTER(p), ctypes.c_size_t]), ("free", [p]),
                        ("release_pinned", [])):
            fn = getattr(lib, f"{prefix}_{f}")
            fn.argtypes, fn.restype = args, ctypes.c_int
        self.sync = _env_flag(SYNC_ENV)  # debug mode: synchronise and check after every launch
        self._gpu = None  # (count, why none), asked once
        self.methods = {}  # kernel name → method (as in rbdgen.kernels.loaded.CompiledKernels)
        for name, ki in info.items():
            nargs = len(ki["inputs"]) + len(ki["outputs"])
            for suffix, extra in (("launch", [p, ctypes.c_int]), ("host", [ctypes.c_int])):
                f = getattr(lib, f"{prefix}_{name}_{self._tag}_{suffix}")
                f.argtypes = [ctypes.c_long] + [p] * nargs + extra
                f.restype = ctypes.c_int
            # the graph-capturable launch (stream, n, pointers…, shape, workspace) and its workspace
            f = getattr(lib, f"{prefix}_{name}_{self._tag}_cuda")
            f.argtypes = [p, ctypes.c_long] + [p] * nargs + [ctypes.c_int, p]
            f.restype = ctypes.c_int
            f = getattr(lib, f"{prefix}_{name}_{self._tag}_workspace")
            f.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]
            f.restype = ctypes.c_int
            for suffix in ("emulate_thread", "emulate_block"):
                f = getattr(lib, f"{prefix}_{name}_{self._tag}_{suffix}")
                f.argtypes = [ctypes.c_long] + [p] * nargs
                f.restype = None
            self.methods[name] = _CudaMethod(self, name, ki)
            setattr(self, name, self.methods[name])
        _install_frames(self)  # by-name frame and contact methods

    # -- device handling ----------------------------------------------------------------
    def _lib_fn(self, name: str):
        """The runtime function ``<prefix>_<name>`` of the library (argument types set at load)."""
        return getattr(self._lib, f"{self.prefix}_{name}")

    def error_string(self, code: int) -> str:
        return getattr(self._lib, f"{self.prefix}_error_string")(code).decode()

    def gpu_status(self) -> tuple[int, str]:
        """(GPUs visible to the CUDA runtime, why none when 0)."""
        n = getattr(self._lib, f"{self.prefix}_device_count")()
        if n > 0:
            return n, ""
        return 0, self.error_string(-n) if n < 0 else "no device"

    def device_count(self) -> int:
        """GPUs visible to the CUDA runtime (0 when there is no GPU or no driver)."""
        return self.gpu_status()[0]

    def check(self, code: int, what: str):
        if code != 0:
            raise RbdgenError(f"{what}: CUDA error {code}: {self.error_string(code)}")

    def release_pool(self):
        """Give the memory that the device's stream-ordered pool keeps for later workspaces and
        transfers (and no longer uses) back to the driver."""
        self.require_gpu("release_pool")
        self.check(getattr(self._lib, f"{self.prefix}_release_pool")(), "release_pool")

    def require_gpu(self, what: str):
        if self._gpu is None:
            self._gpu = self.gpu_status()
        if self._gpu[0] == 0:
            raise RbdgenError(f"{what}: no CUDA GPU available ({self._gpu[1]}); emulation (kern.emulated(), "
                              "rbdgen validate --emulate) runs the same GPU program on the CPU")

    def emulated(self, shape: str = "default"):
        """The GPU program run on the CPU, one thread after another: the same methods, numpy in
        and out. ``shape``: "thread", "block", or "default" (each kernel's default shape). For
        tests and debugging (it is slow)."""
        if shape not in ("thread", "block", "default"):
            raise ValueError(f"shape must be 'thread', 'block' or 'default', got {shape!r}")
        return _Emulated(self, shape)

    def __reduce__(self):
        """Pickled as the recipe it was loaded from (sources, model, options); unpickling loads it
        through the compile cache, compiling only on a miss (see :mod:`rbdgen.toolchain.rebuild`)."""
        return _reduce(self)

    def __repr__(self):
        return (f"<rbdgen kernels for {self.model.name!r} (cuda {','.join(map(arch_label, self.archs))}, {self.dtype}, "
                f"nq={self.nq}, nv={self.nv}): {', '.join(self.kernels)}>")


class _Emulated(NamesMissingKernels):
    def __reduce__(self):  # the owner's recipe, emulated again where it is loaded
        return (CudaKernels.emulated, (self.owner, self.shape))

    def __init__(self, owner: CudaKernels, shape: str):
        self.owner, self.shape, self.dtype = owner, shape, owner.dtype
        self.model, self.op_counts, self.kernels = owner.model, owner.op_counts, owner.kernels
        lib, pre, tag = owner._lib, owner.prefix, owner._tag
        self.methods = {}
        for name, ki in owner.info.items():
            sh = ki.get("default_shape", "block") if shape == "default" else shape
            if sh == "thread" and not ki.get("thread_shape", True):
                # this kernel has no thread shape: its method says so when called
                def refuse(*_a, _name=name, **_k):
                    raise ValueError(_NO_THREAD.format(name=_name))

                self.methods[name] = refuse
                setattr(self, name, refuse)
                continue
            f = getattr(lib, f"{pre}_{name}_{tag}_emulate_{sh}")
            single = functools.partial(f, 1)
            self.methods[name] = _Method(self, name, single, f, ki["inputs"], ki["outputs"])
            setattr(self, name, self.methods[name])
        _install_frames(self)  # by-name frame and contact methods


_NO_THREAD = ("{name}: no thread shape (one state per thread would need more local memory per thread than "
              "rbdgen allows, see docs/cuda.md); use shape='block' or 'auto'")


def _cai(x):
    return getattr(x, "__cuda_array_interface__", None)


def _dlpack_on_gpu(x) -> bool:
    """A DLPack tensor on a CUDA device (kDLCUDA = 2, kDLCUDAManaged = 13), e.g. a JAX array."""
    dev = getattr(x, "__dlpack_device__", None)
    if dev is None or not hasattr(x, "__dlpack__"):
        return False
    try:
        return int(dev()[0]) in (2, 13)
    except Exception:  # noqa: BLE001 - a foreign object's method: not ours to judge
        return False


_TYPESTR = {np.dtype(np.float64): "<f8", np.dtype(np.float32): "<f4"}
_cupy_missing = False


def _cupy():
    """cupy, or None where it is not installed (asked once)."""
    global _cupy_missing
    mod = sys.modules.get("cupy")
    if mod is not None or _cupy_missing:
        return mod
    try:
        import cupy
    except ImportError:
        _cupy_missing = True
        return None
    return cupy


def _same_stream(a: int, b: int) -> bool:
    """Handles 0 and 1 are both the legacy default stream (0 as a cudaStream_t, 1 as
    cudaStreamLegacy, which the array interface uses because it forbids 0)."""
    return (a or 1) == (b or 1)


def _stream_handle(stream) -> int:
    """``stream=`` as a ``cudaStream_t`` handle: a cupy stream (``.ptr``), a PyTorch stream
    (``.cuda_stream``), or an integer handle (0: the legacy default stream)."""
    for attr in ("ptr", "cuda_stream"):
        h = getattr(stream, attr, None)
        if h is not None:
            return int(h)
    try:
        h = int(stream)
    except (TypeError, ValueError):
        raise ValueError(f"stream= must be a cupy or PyTorch stream or a cudaStream_t handle (int), "
                         f"got {type(stream).__name__}") from None
    if h < 0:
        raise ValueError(f"stream= handle must not be negative, got {h}")
    return h


def _cupy_stream(cupy, stream, handle: int):
    """cupy's stream object for ``handle``, to make current while cupy allocates: its memory pool
    hands a block back only to allocations on the stream it was allocated on."""
    if stream is not None and type(stream).__module__.startswith("cupy"):
        return stream
    if handle in (0, 1):
        return cupy.cuda.Stream.null
    if handle == 2:
        return cupy.cuda.Stream.ptds
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is not None:  # cupy ≥ 14: ExternalStream is deprecated; the CUDA stream protocol
        return from_external(_StreamHandle(handle))
    return cupy.cuda.ExternalStream(handle)


class _StreamHandle:
    """A raw ``cudaStream_t`` speaking the CUDA stream protocol (``__cuda_stream__`` → (version,
    handle)), for cupy's ``Stream.from_external``."""

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


class _CudaMethod:
    def __init__(self, owner: CudaKernels, name: str, ki: dict):
        self.owner, self.name = owner, name
        self.inputs = ki["inputs"]
        self.outputs = ki["outputs"]
        self.has_thread_shape = ki.get("thread_shape", True)
        #: inputs declared with more than one dimension (f_ext: (nb, 6)): taken so or flat
        self._structured = structured_inputs(owner.model, self.inputs)
        tag, pre = owner._tag, owner.prefix
        self._launch = getattr(owner._lib, f"{pre}_{name}_{tag}_launch")
        self._cuda = getattr(owner._lib, f"{pre}_{name}_{tag}_cuda")
        self._workspace = getattr(owner._lib, f"{pre}_{name}_{tag}_workspace")
        host = getattr(owner._lib, f"{pre}_{name}_{tag}_host")

        def numpy_method(code):
            def batch(n, *ptrs):
                err = host(n, *ptrs, code)
                if err:  # the transfers, the launch or (at the final wait) a fault inside the kernel
                    self._fail(err, n, code, "failed (numpy arrays: transfers, launch and wait)")

            return _Method(owner, name, functools.partial(batch, 1), batch, self.inputs, self.outputs)

        # numpy in and out (copies to and from the GPU), one per launch shape
        self._numpy = {code: numpy_method(code) for code in SHAPES.values()}
        self.__doc__ = ki["doc"]

    def __call__(self, *args, out=None, stream=None, shape: str = "auto", **kw):
        if kw:  # kern.rnea(q, v, a, f_ext=…): the variant that takes it (f_ext=None: rnea itself)
            res = call_variant(self.owner, self.name, args, kw, out=out, stream=stream, shape=shape)
            if res is not None:
                return res
        if shape not in SHAPES:
            raise ValueError(f"{self.name}: shape must be one of {', '.join(SHAPES)}, got {shape!r}")
        if shape == "thread" and not self.has_thread_shape:
            raise ValueError(_NO_THREAD.format(name=self.name))
        # each argument's __cuda_array_interface__ is read once per call: cupy builds the dict
        # (and asks for the current stream) on every read, microseconds each
        cais = [_cai(x) for x in args]
        if any(c is not None or _dlpack_on_gpu(x) for c, x in zip(cais, args)):
            return self._device(args, out, stream, SHAPES[shape], cais)
        if stream is not None:
            raise ValueError(f"{self.name}: stream= applies to GPU arrays; numpy arrays are copied and waited for")
        self.owner.require_gpu(self.name)
        return self._numpy[SHAPES[shape]](*args, out=out)

    def prepare(self, *args, out, stream=None, shape: str = "auto") -> "PreparedLaunch":
        """A launch of this kernel on these GPU arrays, checked once: calling the result enqueues
        the kernel again, with one C call (``<prefix>_<kernel>_<tag>_cuda``) and no Python-level
        checks, allocation or stream query — for the repeated calls of a fixed shape (MPC, sampling)
        where a per-call check costs more than the kernel. ``.graph()`` captures it into a CUDA graph.

        ``out=`` is required (the fast path allocates nothing); the arrays must stay alive and in
        place (the result keeps references to them). The streams their interfaces name are waited
        for once, now; ordering later writes to the inputs before a call is the caller's (as in the
        C API). The workspace some block-shape kernels need (see ``_workspace``) is allocated here,
        once, and kept."""
        return PreparedLaunch(self, args, out, stream, shape)

    def _fail(self, err: int, n: int, shape_code: int, what: str, hint: str = ""):
        """Raise for CUDA error ``err``, naming the kernel, the batch and the launch shape asked for."""
        shape = next(k for k, v in SHAPES.items() if v == shape_code)
        raise RbdgenError(f"{self.name} (N = {n}, shape {shape}): {what}: CUDA error {err}: "
                          f"{self.owner.error_string(err)}{hint}")

    # -- GPU arrays -----------------------------------------------------------------------
    def _check_dev(self, what, x, cai, size_or_shape, lead, is_out):
        """(shape, device pointer, producer stream or None) of a GPU array argument."""
        dt = self.owner.dtype
        if cai is None:
            raise ValueError(f"{self.name}: argument '{what}' must be a GPU array like the others "
                             f"(got {type(x).__name__}); mixing numpy and GPU arrays is not supported")
        if cai["typestr"] != _TYPESTR[dt]:
            raise ValueError(f"{self.name}: argument '{what}' has dtype {np.dtype(cai['typestr'])}, "
                             f"this kernel takes {dt}")
        shape = tuple(cai["shape"])
        dims = None if is_out else self._structured.get(what)
        if dims is not None and len(shape) in (len(dims), len(dims) + 1) and shape[len(shape) - len(dims):] == dims:
            shape = shape[:len(shape) - len(dims)] + (size_or_shape,)  # (nb, 6) → its flat size (strides below)
        if is_out:
            want = lead + tuple(size_or_shape)
            if shape != want:
                raise ValueError(f"{self.name}: out array for '{what}' has shape {shape}, expected {want}")
            if cai.get("data", (0, False))[1]:
                raise ValueError(f"{self.name}: out array for '{what}' is read-only")
        elif len(shape) not in (1, 2) or shape[-1] != size_or_shape:
            raise ValueError(f"{self.name}: argument '{what}' has shape {shape}, "
                             f"expected ({size_or_shape},) or (N, {size_or_shape})")
        strides = cai.get("strides")
        if strides is not None:
            item = dt.itemsize
            expect, acc = [], item
            for s in reversed(tuple(cai["shape"])):
                expect.append(acc)
                acc *= s
            if tuple(strides) != tuple(reversed(expect)) and int(np.prod(shape)) > 1:
                raise ValueError(f"{self.name}: argument '{what}' is not C-contiguous "
                                 "(use cupy.ascontiguousarray)")
        # v3: None (or absent: v2) = nothing to wait for; 1 = legacy default stream; 2 = per-thread
        # default stream; else a cudaStream_t. 0 is forbidden (it would be ambiguous).
        producer = cai.get("stream")
        if producer is not None:
            if isinstance(producer, bool) or not isinstance(producer, int) or producer <= 0:
                raise ValueError(f"{self.name}: argument '{what}': __cuda_array_interface__ has stream "
                                 f"{producer!r}; the protocol (v3) allows None, 1 (legacy default stream), "
                                 "2 (per-thread default stream) or a cudaStream_t handle, never 0")
        return shape, cai["data"][0], producer

    def _device(self, args, out, stream, shape_code, cais=None):
        if len(args) != len(self.inputs):
            names = ", ".join(n for n, _ in self.inputs)
            raise TypeError(f"{self.name}() takes {len(self.inputs)} arguments ({names}), got {len(args)}")
        # the caller's kind (PyTorch, JAX, …; None: cupy's), which the outputs come back as
        kind = _interop.result_kind(self.name, [n for n, _ in self.inputs], args, native="cupy")
        if out is not None:
            kind = None  # out= arrays are returned as given
        cupy = _cupy()
        current = cupy.cuda.get_current_stream().ptr if cupy is not None else 0
        # the launch stream: stream=, else cupy's current stream, else the legacy default stream
        handle = current if stream is None else _stream_handle(stream)
        # where cupy allocates (outputs, DLPack views): on the launch stream, so that its pool does
        # not reuse the memory for other work while the kernel still writes it
        on_launch_stream = contextlib.nullcontext
        if cupy is not None and not _same_stream(current, handle):
            on_launch_stream = lambda: _cupy_stream(cupy, stream, handle)  # noqa: E731
        args, ordered = list(args), set()
        cais = [_cai(x) for x in args] if cais is None else list(cais)
        for i, x in enumerate(args):
            if cais[i] is None and _dlpack_on_gpu(x):
                if cupy is None:
                    raise RbdgenError(f"{self.name}: argument '{self.inputs[i][0]}' is a DLPack tensor; "
                                      "taking it needs cupy (or pass an array with __cuda_array_interface__)")
                # the DLPack exchange orders the producer's work before cupy's current stream: ours
                with on_launch_stream():
                    args[i] = cupy.from_dlpack(x)
                cais[i] = _cai(args[i])
                ordered.add(i)
        ptrs, producers, first = [], [], None
        for i, ((nm, size), x) in enumerate(zip(self.inputs, args)):
            shp, ptr, prod = self._check_dev(nm, x, cais[i], size, None, False)
            if first is None:
                first = shp
            elif len(shp) != len(first) or shp[:-1] != first[:-1]:
                raise ValueError(f"{self.name}: argument '{nm}' has shape {shp}, but "
                                 f"'{self.inputs[0][0]}' has shape {first}")
            ptrs.append(ptr)
            producers.append(None if i in ordered else prod)
        lead = first[:-1]
        n = lead[0] if lead else 1
        if out is None:
            if cupy is None:
                raise RbdgenError(f"{self.name}: allocating GPU outputs needs cupy; pass out= arrays")
            with on_launch_stream():
                outs = [cupy.empty(lead + tuple(s), dtype=self.owner.dtype) for _, s in self.outputs]
        else:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(outs) != len(self.outputs):
                raise ValueError(f"{self.name}: out= needs {len(self.outputs)} array(s)")
        for (nm, s), o in zip(self.outputs, outs):
            # an out= array may still be read or written on the stream its interface names
            _, ptr, prod = self._check_dev(nm, o, _cai(o), s, lead, True)
            ptrs.append(ptr)
            producers.append(prod)
        if not n:
            return _interop.deliver(self.name, kind, outs, on_launch_stream)
        launch_stream = ctypes.c_void_p(handle)
        waited = []
        for prod in producers:
            if prod is None or _same_stream(prod, handle) or prod in waited:
                continue
            err = self.owner._stream_wait(launch_stream, ctypes.c_void_p(prod))
            if err:
                self._fail(err, n, shape_code, f"making the launch stream wait for stream {prod:#x} "
                           "(named by an argument's __cuda_array_interface__) failed")
            waited.append(prod)
        err = self._launch(n, *ptrs, launch_stream, shape_code)
        if err:
            self._fail(err, n, shape_code, "the launch failed")
        if self.owner.sync:
            err = self.owner._stream_sync(launch_stream)
            if err:
                self._fail(err, n, shape_code, f"a fault inside the kernel, found by the synchronisation after "
                           f"the launch (debug mode, {SYNC_ENV})",
                           " (a fault is sticky: it can also come from earlier GPU work of this process, and "
                           "every later CUDA call reports it; restart the process)")
        # as the caller's kind, with the launch stream current in cupy: the DLPack exchange then
        # orders the consumer's stream after the kernel
        return _interop.deliver(self.name, kind, outs, on_launch_stream)


class PreparedLaunch:
    """One kernel's launch on fixed GPU arrays, checked once (``kern.rnea.prepare(q, v, a, out=tau)``):
    ``launch()`` (or calling it) enqueues the kernel with one ctypes call and nothing else;
    ``graph()`` captures it into a CUDA graph whose replay costs one ``cudaGraphLaunch``."""

    def __init__(self, method: _CudaMethod, args, out, stream, shape: str):
        name, owner = method.name, method.owner
        self.method, self.name = method, name
        if shape not in SHAPES:
            raise ValueError(f"{name}: shape must be one of {', '.join(SHAPES)}, got {shape!r}")
        if shape == "thread" and not method.has_thread_shape:
            raise ValueError(_NO_THREAD.format(name=name))
        if len(args) != len(method.inputs):
            names = ", ".join(n for n, _ in method.inputs)
            raise TypeError(f"{name}.prepare() takes {len(method.inputs)} arrays ({names}), got {len(args)}")
        if out is None:
            raise ValueError(f"{name}.prepare: out= is required (a prepared launch allocates nothing)")
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(method.outputs):
            raise ValueError(f"{name}: out= needs {len(method.outputs)} array(s)")
        self.shape_code = SHAPES[shape]
        ptrs, producers, first = [], [], None
        for (nm, size), x in zip(method.inputs, args):
            if _cai(x) is None:
                raise ValueError(f"{name}.prepare: argument '{nm}' must be a GPU array with __cuda_array_interface__ "
                                 f"(cupy, PyTorch, numba; got {type(x).__name__}); JAX arrays: pass "
                                 "cupy.from_dlpack(x)")
            shp, ptr, prod = method._check_dev(nm, x, _cai(x), size, None, False)
            if first is None:
                first = shp
            elif len(shp) != len(first) or shp[:-1] != first[:-1]:
                raise ValueError(f"{name}: argument '{nm}' has shape {shp}, but '{method.inputs[0][0]}' has shape {first}")
            ptrs.append(ptr)
            producers.append(prod)
        lead = first[:-1]
        self.n = n = lead[0] if lead else 1
        for (nm, s), o in zip(method.outputs, outs):
            _, ptr, prod = method._check_dev(nm, o, _cai(o), s, lead, True)
            ptrs.append(ptr)
            producers.append(prod)
        if n and any(p == 0 for p in ptrs):
            raise ValueError(f"{name}.prepare: an array has a NULL device pointer")
        if stream is None:
            cupy = _cupy()
            handle = cupy.cuda.get_current_stream().ptr if cupy is not None else 0
        else:
            handle = _stream_handle(stream)
        self.stream = handle
        self.arrays = (tuple(args), tuple(outs))  # kept alive while this launch may run
        self.outputs = outs[0] if len(outs) == 1 else tuple(outs)
        self._graphs: list = []
        self._ws = None
        # the workspace: 0 bytes for most kernels (checked without a GPU), else allocated once
        size = ctypes.c_size_t(0)
        err = method._workspace(n, self.shape_code, ctypes.byref(size))
        if err:
            method._fail(err, n, self.shape_code, "asking for the size of the workspace failed")
        self.workspace_bytes = size.value
        if size.value:
            owner.require_gpu(f"{name}.prepare")
            ws = ctypes.c_void_p()
            err = owner._lib_fn("malloc")(ctypes.byref(ws), size.value)
            if err:
                method._fail(err, n, self.shape_code, f"allocating the workspace ({size.value} bytes) failed")
            self._ws = ws
        launch_stream = ctypes.c_void_p(handle)
        waited = []
        for prod in producers:
            if prod is None or _same_stream(prod, handle) or prod in waited:
                continue
            err = owner._stream_wait(launch_stream, ctypes.c_void_p(prod))
            if err:
                method._fail(err, n, self.shape_code, f"making the launch stream wait for stream {prod:#x} failed")
            waited.append(prod)
        self._fn = method._cuda
        self._args = (launch_stream, ctypes.c_long(n), *[ctypes.c_void_p(x) for x in ptrs],
                      ctypes.c_int(self.shape_code), self._ws if self._ws is not None else ctypes.c_void_p(0))

    def launch(self):
        """Enqueue the kernel on the prepared stream; returns the outputs (the ``out=`` arrays)."""
        err = self._fn(*self._args)
        if err:
            self.method.owner.require_gpu(self.name)  # without a GPU, that is what to say
            self.method._fail(err, self.n, self.shape_code, "the launch failed")
        return self.outputs

    __call__ = launch

    def graph(self, launches: int = 1) -> "CudaGraph":
        """``launches`` back-to-back launches captured into a CUDA graph on the prepared stream,
        which must be a stream of its own (a cupy or PyTorch stream, or a handle): the legacy and
        per-thread default streams cannot be captured."""
        if self.stream in (0, 1, 2):
            raise ValueError(f"{self.name}.graph: capture needs a stream of its own (stream= a cupy or PyTorch "
                             "stream); the default streams cannot be captured")
        if launches < 1:
            raise ValueError(f"{self.name}.graph: launches must be at least 1, got {launches}")
        owner = self.method.owner
        owner.require_gpu(f"{self.name}.graph")
        err = owner._lib_fn("graph_begin")(self._args[0])
        if err:
            self.method._fail(err, self.n, self.shape_code, "beginning the graph capture failed")
        first = 0
        for _ in range(launches):
            first = first or self._fn(*self._args)
        exe = ctypes.c_void_p()
        end = owner._lib_fn("graph_end")(self._args[0], ctypes.byref(exe))
        if first or end:
            self.method._fail(first or end, self.n, self.shape_code, "capturing the launch into a graph failed")
        g = CudaGraph(self, exe)
        self._graphs.append(g)
        return g

    def __del__(self):
        ws, self._ws = getattr(self, "_ws", None), None
        if ws is not None:
            with contextlib.suppress(Exception):
                self.method.owner._lib_fn("free")(ws)


class CudaGraph:
    """An instantiated CUDA graph of prepared launches: ``launch()`` (or calling it) enqueues
    them all with one ``cudaGraphLaunch`` on the prepared stream."""

    def __init__(self, prepared: PreparedLaunch, exe):
        self.prepared, self._exe = prepared, exe
        lib = prepared.method.owner
        self._launch, self._destroy = lib._lib_fn("graph_launch"), lib._lib_fn("graph_destroy")

    def launch(self):
        if self._exe is None:
            raise RbdgenError(f"{self.prepared.name}: this graph was closed")
        err = self._launch(self._exe, self.prepared._args[0])
        if err:
            p = self.prepared
            p.method._fail(err, p.n, p.shape_code, "launching the graph failed")
        return self.prepared.outputs

    __call__ = launch

    def close(self):
        exe, self._exe = self._exe, None
        if exe is not None:
            self._destroy(exe)

    def __del__(self):
        with contextlib.suppress(Exception):
            self.close()
