"""Compiled kernels as Python methods: ``kern.rnea(q, v, a)`` and friends.

Arguments are checked strictly (a wrong shape, dtype or memory layout is a ``ValueError``
naming the argument; nothing is copied behind the caller's back, except that a plain Python
list is converted). A 2-D input ``(N, size)`` calls the batched entry point once — the loop
over states runs in C++ (vectorised across states, OpenMP across blocks), never in Python.
A batch's rows may be strided (``X[:, :nq]`` of a packed state array, ``Q[::-1]``, an input
broadcast with ``np.broadcast_to``) where the library has the strided entry point (the CPU
target): each state's own values must be contiguous, and an output's rows must not overlap.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from ..errors import BuildError, RbdgenError
from ..toolchain.rebuild import reduce as _reduce
from . import interop as _interop
from .frames import install as _install_frames
from .interop import row_stride

_CT = {np.dtype(np.float64): ctypes.c_double, np.dtype(np.float32): ctypes.c_float}
_ND, _empty = np.ndarray, np.empty


def _rows_overlap(x) -> bool:
    """An output batch whose rows overlap (a row stride shorter than a state)."""
    size = int(np.prod(x.shape[1:], dtype=int))
    return x.ndim >= 2 and x.shape[0] > 1 and abs(row_stride(x)) < size


#: the batch layouts a CPU kernel takes (``kern.<name>(…, layout=…)``): "rows", state i of each
#: array its row i (shape (N, …), the default), or "states_last", the state index last and
#: unit-strided (shape (…, N)): a block of SIMD lanes is then adjacent values, loaded and stored
#: as vectors with no transposes (issue 49, docs/python.md "Batch layouts")
LAYOUTS = ("rows", "states_last")


def states_last_ld(x, values: int) -> int | None:
    """For ``x`` of shape (…, N), its first ``values`` axes a state's values and the last one the
    states: the distance in elements between value k and value k+1 of one state (the leading
    dimension ``ld``: value k of state i at ``x.flat[k * ld + i]``), where the state axis is
    unit-strided and the value axes C-contiguous among themselves; None otherwise."""
    it = x.itemsize
    if x.shape[-1] > 1 and x.strides[-1] != it:
        return None
    ld = expect = None  # the innermost value axis (of more than one value) sets ld
    for d in range(values - 1, -1, -1):
        if x.shape[d] == 1:
            continue
        if expect is None:
            if x.strides[d] % it:
                return None
            ld, expect = x.strides[d] // it, x.strides[d]
        elif x.strides[d] != expect:
            return None
        expect *= x.shape[d]
    return x.shape[-1] if ld is None else ld


def _states_last_empty(shape: tuple, n: int, dt):
    """An output of shape ``shape + (n,)`` laid out states last. Where a row of n values is a
    multiple of 1 kB, the rows are padded by 64 bytes and the array is a view of their first n
    values: rows a power of two of bytes apart share the same cache sets, and a block of lanes,
    which writes one line in each row, then evicts its own lines (iiwa FK at N = 256: 92 → 41 ns
    per state; docs/performance.md §23)."""
    if n > 1 and int(np.prod(shape, dtype=int)) > 1 and (n * dt.itemsize) % 1024 == 0:
        return np.empty(shape + (n + 64 // dt.itemsize,), dt)[..., :n]
    return np.empty(shape + (n,), dt)


def _check_distinct_outputs(kernel: str, names, outs) -> None:
    """out= arrays must not share memory: the kernel writes each output as soon as it exists,
    so one would overwrite another (out=(X, X, X) returned the last output three times)."""
    for i in range(1, len(outs)):
        for j in range(i):
            a, b = outs[j], outs[i]
            if a is b or np.may_share_memory(a, b):
                try:
                    shared = a is b or np.shares_memory(a, b, max_work=10_000)
                except np.exceptions.TooHardError:
                    shared = True
                if shared:
                    raise ValueError(f"{kernel}: out= arrays '{names[j]}' and '{names[i]}' share memory; each "
                                     "output needs an array of its own")


@dataclass(frozen=True)
class _Arg:
    name: str
    shape: tuple

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=int))


@dataclass(frozen=True)
class KernelSpec:
    """What the loaded kernels need to know of one kernel: its arrays and op counts."""

    name: str
    doc: str
    inputs: tuple
    outputs: tuple
    counts: dict


def structured_inputs(model, inputs) -> dict:
    """Input name → one state's shape, for the inputs among ``inputs`` ((name, size) pairs)
    declared with more than one dimension (``f_ext``: (nb, 6)). The kernels' C signature takes
    them flat; a method takes them in that shape or flat, ``(size,)`` (the CPU binding both; the
    others' in that shape, the flat form reshaped here)."""
    from .. import registry

    out = {}
    for name, size in inputs:
        a = registry.INPUTS.get(name)
        if a is None or len(a.shape) < 2:
            continue
        try:
            dims = a.dims(model)
        except (AttributeError, TypeError, ValueError):  # a model without the size: flat only
            continue
        if int(np.prod(dims, dtype=int)) == int(size):
            out[name] = dims
    return out


def _inner_view(x, keep: int, shape: tuple):
    """``x`` with its dimensions after the first ``keep`` reshaped to ``shape``, as a view (each
    state's values C-contiguous, the leading stride kept); None where that would copy."""
    expect = x.itemsize
    for d in range(x.ndim - 1, keep - 1, -1):
        if x.shape[d] != 1 and x.strides[d] != expect:
            return None
        expect *= x.shape[d]
    if x.flags.c_contiguous:
        return x.reshape(x.shape[:keep] + tuple(shape))
    strides = x.strides[:keep]
    for d in range(len(shape)):
        strides += (int(np.prod(shape[d + 1:], dtype=int)) * x.itemsize,)
    return np.lib.stride_tricks.as_strided(x, x.shape[:keep] + tuple(shape), strides, writeable=False)


def call_variant(owner, name: str, args, kw: dict, **passed):
    """``kern.<name>(…, f_ext=x)``: kernel ``name``'s variant that takes the keyword's input
    (:func:`rbdgen.registry.variants`: rnea → rnea_fext) called on ``args`` and ``x``, with the
    keywords in ``passed`` (``out=``, and on the GPU ``stream=``, ``shape=``). None where every
    such keyword is None: the plain kernel is meant. A variant this build lacks is a ValueError
    saying how to add it; a keyword no variant takes, a TypeError as for any function."""
    from .. import registry

    known = registry.variants(name)
    if "layout" in kw:  # a target without the CPU's batch layouts (CUDA, HLS): rows only
        kw = dict(kw)
        layout = kw.pop("layout")
        if layout != "rows":
            raise ValueError(f"{name}: layout={layout!r} is a CPU batch layout; this target takes batches "
                             "as rows (N, …)")
        if not kw:
            return None
    for k in kw:
        if k not in known:
            takes = f" (it takes {', '.join(f'{v}=' for v in known)} besides out=)" if known else ""
            raise TypeError(f"{name}() got an unexpected keyword argument {k!r}{takes}")
    given = {k: x for k, x in kw.items() if x is not None}
    if not given:
        return None
    if len(given) > 1:
        raise TypeError(f"{name}(): give one of {', '.join(f'{k}=' for k in given)}; no kernel takes them together")
    (key, value), = given.items()
    variant = known[key]
    front = owner.__dict__.get("_front")  # a package's per-kernel library: the package decides
    front = front() if front is not None else None
    front = owner if front is None else front
    if variant not in front.kernels:
        raise ValueError(f"{name}(…, {key}=…) calls the kernel {variant}, which this build does not have (built: "
                         f"{', '.join(front.kernels)}); add it: rbdgen.build(model, kernels=[..., {variant!r}]) or "
                         f"`rbdgen generate --kernels ...,{variant}` (it is left out unless named)")
    return front.kernel(variant)(*args, value, **passed)


def kernel_specs(entries: dict) -> dict:
    """Kernel specs from manifest entries (:func:`rbdgen.codegen.sources.kernel_entry`)."""
    return {k: KernelSpec(k, e["doc"], tuple(_Arg(a["name"], (int(a["size"]),)) for a in e["inputs"]),
                          tuple(_Arg(a["name"], tuple(int(x) for x in a["shape"])) for a in e["outputs"]),
                          dict(e["ops"]))
            for k, e in entries.items()}


class _Method:
    def __init__(self, owner, name, single, batch, inputs, outputs, fast=None, batch_strided=None,
                 batch_lanes=None):
        self.owner = owner
        self.name = name
        self.single = single
        self.batch = batch
        #: the strided batch entry point (n, then each array's pointer and row stride), or None:
        #: then batches must be C-contiguous
        self.batch_strided = batch_strided
        #: the states-last batch entry point (n, then each array's pointer and leading dimension),
        #: or None: a library without it (not a CPU one)
        self.batch_lanes = batch_lanes
        self.inputs = inputs    # list of (name, size)
        self.outputs = outputs  # list of (name, shape)
        self.fast = fast        # CPython binding: checks and calls in C (≈0.2 µs), or None
        self._dt = owner.dtype
        self._shapes = [tuple(s) for _, s in outputs]
        self._nin = len(inputs)
        self._one = len(self._shapes) == 1
        self._shape0 = self._shapes[0] if self._shapes else ()
        #: inputs declared with more than one dimension (f_ext: (nb, 6)) → that shape
        self._structured = structured_inputs(owner.model, inputs)

    def _as_structured(self, args):
        """``args`` with each structured input given flat ((size,) or (N, size), as the registry
        draws inputs) reshaped to its declared shape, as the C binding takes it (a view)."""
        if not self._structured or not args or not isinstance(args[0], np.ndarray):
            return args
        batch = args[0].ndim - 1
        out = list(args)
        for k, ((name, size), x) in enumerate(zip(self.inputs, args)):
            shape = self._structured.get(name)
            if shape is not None and isinstance(x, np.ndarray) and x.ndim == batch + 1 and x.shape[-1] == size \
                    and x.shape[batch:] != shape:
                view = _inner_view(x, batch, shape)
                out[k] = x if view is None else view
        return tuple(out)

    def _coerce(self, name, x):
        """An argument as an ndarray without copying its data: ndarray subclasses (np.memmap, …)
        and buffer-protocol objects (memoryview, …) as views; a list or tuple converted to the
        kernel's dtype (the one conversion made for the caller)."""
        if type(x) is np.ndarray:
            return x
        if isinstance(x, np.ndarray):
            return x.view(np.ndarray)
        if isinstance(x, (list, tuple)):
            try:
                return np.asarray(x, dtype=self._dt)
            except (ValueError, TypeError) as e:
                raise ValueError(f"{self.name}: argument '{name}' is not a rectangular list of numbers "
                                 f"({' '.join(str(e).split())[:120]})") from None
        try:
            memoryview(x)
        except TypeError:
            raise ValueError(f"{self.name}: argument '{name}' must be a numpy array (or a list), "
                             f"got {type(x).__name__}") from None
        return np.asarray(x)

    def _check_dtype(self, name, x):
        """ValueError unless ``x`` holds the library's dtype (in native byte order), naming the
        argument and the conversion (both batch layouts)."""
        dt = self.owner.dtype
        if x.dtype == dt:
            return
        if x.dtype.newbyteorder("=") == dt:
            raise ValueError(f"{self.name}: argument '{name}' is {dt} in non-native byte order "
                             f"({'big' if x.dtype.byteorder == '>' else 'little'}-endian); "
                             f"convert with .astype(np.{dt})")
        raise ValueError(f"{self.name}: argument '{name}' has dtype {x.dtype}, this kernel takes {dt} "
                         f"(convert with .astype(np.{dt}) or build with dtype='{x.dtype}')")

    def _arg(self, name, x, size, batch=None):
        x = self._coerce(name, x)
        shape = self._structured.get(name)
        lead = x.ndim - len(shape) if shape is not None else -1
        if lead in (0, 1) and x.shape[lead:] == shape and (batch is None or lead == int(batch)):
            flat = _inner_view(x, lead, (size,))  # as the C signature takes it
            if flat is None:
                raise ValueError(f"{self.name}: argument '{name}' is not C-contiguous within a state "
                                 "(use np.ascontiguousarray)")
            x = flat
        self._check_dtype(name, x)
        if x.ndim not in (1, 2) or x.shape[-1] != size:
            if shape is not None:
                dims = ", ".join(map(str, shape))
                raise ValueError(f"{self.name}: argument '{name}' has shape {x.shape}, expected ({dims}) or (N, {dims}) "
                                 f"(or flat: ({size},), (N, {size}))")
            raise ValueError(f"{self.name}: argument '{name}' has shape {x.shape}, expected ({size},) or (N, {size})")
        if not x.flags.c_contiguous:
            if x.ndim == 2 and self.batch_strided is not None:
                if row_stride(x) is None:
                    raise ValueError(f"{self.name}: argument '{name}' is not C-contiguous within a state (a batch's "
                                     "rows may be strided, but each state's values must be adjacent: use "
                                     "np.ascontiguousarray)")
            else:
                raise ValueError(f"{self.name}: argument '{name}' is not C-contiguous (use np.ascontiguousarray)")
        return x

    def __call__(self, *args, out=None, layout="rows", **kw):
        if layout != "rows":
            if layout not in LAYOUTS:
                raise ValueError(f"{self.name}: layout={layout!r}; the batch layouts are "
                                 f"{', '.join(map(repr, LAYOUTS))}")
            if kw:
                res = call_variant(self.owner, self.name, args, kw, out=out, layout=layout)
                if res is not None:
                    return res
            return self._states_last(args, out)
        if kw:  # kern.rnea(q, v, a, f_ext=…): the variant that takes it (f_ext=None: rnea itself)
            res = call_variant(self.owner, self.name, args, kw, out=out)
            if res is not None:
                return res
        fast = self.fast
        if fast is None or len(args) != self._nin:
            return self._slow(*args, out=out)
        if _interop.any_foreign(args, out):  # DLPack tensors (JAX, PyTorch, …): views, results in their kind
            return _interop.call(self, args, out)
        # the binding checks every argument in C and takes any buffer (ndarray subclasses,
        # memoryviews): call it straight away, the hot path has no Python-side checks
        try:
            if self._one:
                if out is None:
                    o = _empty(args[0].shape[:-1] + self._shape0, self._dt)
                    fast(*args, o)
                    return o
                if type(out) is _ND:
                    fast(*args, out)
                    return out
            return self._fast(fast, args, out)
        except (ValueError, TypeError, AttributeError):
            pass  # nothing ran: the binding refuses before it calls the kernel
        # lists, or a mistake: normalise and try again, with Python's clearer messages
        args = self._as_structured(tuple(self._coerce(n, x) for (n, _), x in zip(self.inputs, args)))
        try:
            return self._fast(fast, args, out)
        except ValueError:
            self._diagnose(args, out)
            raise

    def _states_last(self, args, out):
        """``layout="states_last"``: each input of shape (size, N) or (<its declared shape>, N),
        each output (<its shape>, N); value k of state i ``ld`` elements after value k−1, the
        states unit-strided (:func:`states_last_ld`). No copy is made of any argument."""
        if self.batch_lanes is None:
            raise ValueError(f"{self.name}: layout='states_last' is a CPU batch layout; this library "
                             f"({getattr(self.owner, 'target', 'emulated')}) takes batches as rows (N, …)")
        if len(args) != len(self.inputs):
            names = ", ".join(n for n, _ in self.inputs)
            raise TypeError(f"{self.name}() takes {len(self.inputs)} arguments ({names}), got {len(args)}")
        if _interop.any_foreign(args, out):
            raise ValueError(f"{self.name}: layout='states_last' takes numpy arrays (convert with np.asarray, "
                             "or call with the rows layout, which takes DLPack tensors)")
        dt = self.owner.dtype
        arrs, lds, n = [], [], None
        for (name, size), x in zip(self.inputs, args):
            x = self._coerce(name, x)
            shape = self._structured.get(name, (size,))
            self._check_dtype(name, x)
            if x.ndim >= 2 and x.shape[:-1] in (shape, (size,)):
                values = x.ndim - 1
            else:
                want = " or ".join(f"({', '.join(map(str, s))}, N)" for s in dict.fromkeys([(size,), shape]))
                raise ValueError(f"{self.name}: argument '{name}' has shape {x.shape}; layout='states_last' "
                                 f"takes {want}, the states last")
            if n is None:
                n = x.shape[-1]
            elif x.shape[-1] != n:
                raise ValueError(f"{self.name}: argument '{name}' has {x.shape[-1]} states (its last axis), "
                                 f"'{self.inputs[0][0]}' has {n}")
            ld = states_last_ld(x, values)
            if ld is None:
                raise ValueError(f"{self.name}: argument '{name}' (strides {x.strides}) is not laid out states "
                                 "last: the last axis must be unit-strided and the others C-contiguous among "
                                 "themselves (use np.ascontiguousarray)")
            arrs.append(x)
            lds.append(ld)
        outs = []
        given = None if out is None else list(out) if isinstance(out, (tuple, list)) else [out]
        if given is not None:
            if len(given) != len(self.outputs):
                raise ValueError(f"{self.name}: out= needs {len(self.outputs)} array(s)")
            _check_distinct_outputs(self.name, [nm for nm, _ in self.outputs], given)
        for k, (name, shape) in enumerate(self.outputs):
            if given is None:
                o = _states_last_empty(tuple(shape), n, dt)
            else:
                o = given[k]
                if not isinstance(o, np.ndarray) or o.shape != tuple(shape) + (n,) or o.dtype != dt \
                        or not o.flags.writeable:
                    raise ValueError(f"{self.name}: out array for '{name}' must be a writeable {dt} array of "
                                     f"shape {tuple(shape) + (n,)} (layout='states_last')")
            ld = states_last_ld(o, o.ndim - 1)
            if ld is None or (n > 1 and int(np.prod(shape, dtype=int)) > 1 and ld < n):
                raise ValueError(f"{self.name}: out= array '{name}' (strides {o.strides}) is not laid out states "
                                 "last with rows of at least N values (last axis unit-strided, the others "
                                 "C-contiguous among themselves)")
            outs.append(o)
            lds.append(ld)
        if n:
            self.batch_lanes(n, *[v for a, ld in zip((*arrs, *outs), lds) for v in (a.ctypes.data, ld)])
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _diagnose(self, args, out):
        """Re-check the arguments in Python (only after the binding refused them) for the cases
        its one-line C check words badly (byte order, ...)."""
        batch = None
        for (n, s), x in zip(self.inputs, args):
            a = self._arg(n, x, s, batch)
            batch = a.ndim == 2 if batch is None else batch

    def _fast(self, fast, args, out):
        if out is None:
            lead = args[0].shape[:-1]
            if len(self._shapes) == 1:
                o = np.empty(lead + self._shapes[0], self._dt)
                fast(*args, o)
                return o
            outs = tuple(np.empty(lead + s, self._dt) for s in self._shapes)
            fast(*args, *outs)
            return outs
        if type(out) is np.ndarray:
            if len(self._shapes) != 1:
                raise ValueError(f"{self.name}: out= needs {len(self._shapes)} arrays")
            fast(*args, out)
            return out
        if not isinstance(out, (tuple, list)) or len(out) != len(self._shapes):
            raise ValueError(f"{self.name}: out= needs {len(self._shapes)} array(s)")
        _check_distinct_outputs(self.name, [n for n, _ in self.outputs], out)
        fast(*args, *out)
        return out if isinstance(out, tuple) else tuple(out)

    def _slow(self, *args, out=None):
        if len(args) != len(self.inputs):
            names = ", ".join(n for n, _ in self.inputs)
            raise TypeError(f"{self.name}() takes {len(self.inputs)} arguments ({names}), got {len(args)}")
        if _interop.any_foreign(args, out):  # DLPack tensors (JAX, PyTorch, …): views, results in their kind
            return _interop.call(self, args, out)
        arrs = [self._arg(self.inputs[0][0], args[0], self.inputs[0][1])]
        arrs += [self._arg(n, x, s, arrs[0].ndim == 2) for (n, s), x in zip(self.inputs[1:], args[1:])]
        batch = arrs[0].ndim == 2
        n = arrs[0].shape[0] if batch else None
        for (name, _), a in zip(self.inputs, arrs):
            if (a.ndim == 2) != batch or (batch and a.shape[0] != n):
                raise ValueError(f"{self.name}: argument '{name}' has shape {a.shape}, "
                                 f"but '{self.inputs[0][0]}' has shape {arrs[0].shape}")
        lead = (n,) if batch else ()
        dt = self.owner.dtype
        if out is None:
            outs = [np.empty(lead + shape, dtype=dt) for _, shape in self.outputs]
        else:
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            if len(outs) != len(self.outputs):
                raise ValueError(f"{self.name}: out= needs {len(self.outputs)} array(s)")
            _check_distinct_outputs(self.name, [n for n, _ in self.outputs], outs)
            strided = batch and self.batch_strided is not None
            for (oname, shape), o in zip(self.outputs, outs):
                if not isinstance(o, np.ndarray) or o.shape != lead + shape or o.dtype != dt \
                        or not o.flags.writeable or not (o.flags.c_contiguous or strided and row_stride(o) is not None):
                    raise ValueError(f"{self.name}: out array for '{oname}' must be a writeable C-contiguous "
                                     f"{dt} array of shape {lead + shape}"
                                     + (" (or one whose rows are strided)" if strided else ""))
                if strided and _rows_overlap(o):
                    raise ValueError(f"{self.name}: out= array '{oname}' has overlapping rows (its row stride is "
                                     f"{row_stride(o)} elements, a state has more: use an array of its own)")
        ptrs = [a.ctypes.data for a in arrs] + [o.ctypes.data for o in outs]
        if batch:
            if n and all(a.flags.c_contiguous for a in (*arrs, *outs)):
                self.batch(n, *ptrs)
            elif n:
                self.batch_strided(n, *[v for a, p in zip((*arrs, *outs), ptrs) for v in (p, row_stride(a))])
        else:
            self.single(*ptrs)
        return outs[0] if len(outs) == 1 else tuple(outs)


def _omp_defaults() -> None:
    """libgomp reads its settings once, when the first OpenMP library loads. Its default is to
    spin while waiting; on a machine shared with other work (a robot's computer, CI, a laptop)
    spinning threads fight the ones doing the work, and batches were measured 10-70× slower.
    Passive waiting costs a few microseconds per parallel batch instead. A user's own
    OMP_WAIT_POLICY is kept."""
    import os

    os.environ.setdefault("OMP_WAIT_POLICY", "passive")


#: methods installed by name (rbdgen.kernels.frames, .stale) → the kernels they call
_BY_NAME = {"frame_jacobian": "frame_jacobian_local", "frame_bias_acceleration": "frame_bias_acceleration_local",
            "contact_fd": "contact_terms", "rnea_stale_start": "rnea_stale"}


class MissingKernelError(AttributeError):
    """``kern.<name>`` for a kernel this build does not have. An AttributeError (``hasattr`` and
    ``getattr(kern, name, None)`` work as for any attribute), saying which kernels the build has
    and how to add the one asked for."""


class NamesMissingKernels:
    """``__getattr__`` for loaded kernels (CPU, CUDA, HLS): only reached when normal lookup fails."""

    def __getattr__(self, name):
        built = self.__dict__.get("kernels")
        if name.startswith("_") or built is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        raise MissingKernelError(missing_kernel_message(type(self).__name__, name, built))


def missing_kernel_message(owner: str, name: str, built) -> str:
    import difflib

    from .. import registry

    has = f"(built: {', '.join(built) or 'none'})"
    kernel = _BY_NAME.get(name, name)
    if kernel not in registry.kernels():
        close = difflib.get_close_matches(name, list(built) + list(_BY_NAME), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"{owner!r} object has no attribute {name!r} (kernels {has[1:-1]}){hint}"
    frames = ", frames=['<URDF link>', ...]" if registry.get(kernel).frames else ""
    what = f"no kernel {name!r}" if kernel == name else f"no kernel {kernel!r} (which {name}() calls)"
    return (f"this build has {what} {has}; add it: rbdgen.build(model, kernels=[..., {kernel!r}]{frames}), "
            f"or `rbdgen generate --kernels ...,{kernel}` for a package (`rbdgen kernels` lists them all)")


class CompiledKernels(NamesMissingKernels):
    """Kernels of one robot, one target and one dtype, loaded from a shared library."""

    def __init__(self, lib_path, model, prefix, dtype, printed: dict, target="cpu", lanes=None, module=None,
                 kernel_lanes=None):
        self.path = str(lib_path)
        self.model = model
        self.dtype = np.dtype(dtype)
        self.target = target
        self.lanes = lanes  # states per SIMD vector in the batch path: the widest kernel's
        #: per kernel (with AVX-512 some take 8 doubles, others 4: rbdgen.targets.cpu.kernel_lanes)
        self.kernel_lanes = dict(kernel_lanes) if kernel_lanes else {k: lanes for k in printed} if lanes else {}
        self.nq, self.nv, self.nb = model.nq, model.nv, model.nb
        self.kernels = tuple(printed)
        self.op_counts = {k: pk.counts for k, pk in printed.items()}
        _omp_defaults()
        try:
            self._lib = ctypes.CDLL(self.path)
        except OSError as e:
            raise BuildError(f"cannot load {self.path}: {e}") from e
        self._module = _load_module(module, self.path) if module else None
        tag = {np.dtype(np.float64): "f64", np.dtype(np.float32): "f32"}[self.dtype]
        ptr = ctypes.c_void_p
        #: kernel name → its Python method (``.inputs``, ``.outputs``: names and shapes); what
        #: ``kern.<name>`` calls for anything but plain ndarrays
        self.methods = {}
        for name, pk in printed.items():
            nargs = len(pk.inputs) + len(pk.outputs)
            single = getattr(self._lib, f"{prefix}_{name}_{tag}")
            single.argtypes = [ptr] * nargs
            single.restype = None
            batch = getattr(self._lib, f"{prefix}_{name}_{tag}_batch")
            batch.argtypes = [ctypes.c_long] + [ptr] * nargs
            batch.restype = None
            strided = getattr(self._lib, f"{prefix}_{name}_{tag}_batch_strided", None)  # CPU libraries
            if strided is not None:
                strided.argtypes = [ctypes.c_long] + [ptr, ctypes.c_long] * nargs
                strided.restype = None
            lanes_fn = getattr(self._lib, f"{prefix}_{name}_{tag}_batch_lanes", None)  # CPU libraries
            if lanes_fn is not None:
                lanes_fn.argtypes = [ctypes.c_long] + [ptr, ctypes.c_long] * nargs
                lanes_fn.restype = None
            compiled = getattr(self._lib, f"{prefix}_{name}_{tag}_lanes", None)
            if compiled is not None and target == "cpu":  # the lanes as compiled: the truth
                compiled.argtypes, compiled.restype = [], ctypes.c_int
                self.kernel_lanes[name] = int(compiled())
            ins = [(a.name, a.size) for a in pk.inputs]
            outs = [(a.name, a.shape) for a in pk.outputs]
            fast = getattr(self._module, name, None) if self._module is not None else None
            method = self.methods[name] = _Method(self, name, single, batch, ins, outs, fast, strided, lanes_fn)
            if fast is not None:
                # what users call: plain ndarrays straight into C (~0.1 µs), everything else
                # handed to ``method`` (conversions, checks, clear errors)
                method = self._module.bind(name, method)
            setattr(self, name, method)
        if self.kernel_lanes:
            self.lanes = max(self.kernel_lanes.values())
        self._par_get = getattr(self._lib, f"{prefix}_parallel_ops_{tag}", None)  # CPU libraries with OpenMP
        self._par_set = getattr(self._lib, f"{prefix}_set_parallel_ops_{tag}", None)
        if self._par_get is not None and self._par_set is not None:
            self._par_get.argtypes, self._par_get.restype = [], ctypes.c_long
            self._par_set.argtypes, self._par_set.restype = [ctypes.c_long], None
        self._stream_get = getattr(self._lib, f"{prefix}_stream_bytes_{tag}", None)  # CPU libraries
        self._stream_set = getattr(self._lib, f"{prefix}_set_stream_bytes_{tag}", None)
        if self._stream_get is not None and self._stream_set is not None:
            self._stream_get.argtypes, self._stream_get.restype = [], ctypes.c_long
            self._stream_set.argtypes, self._stream_set.restype = [ctypes.c_long], None
        _install_frames(self)  # by-name frame and contact methods

    @property
    def parallel_ops(self) -> int | None:
        """The batch size, in operations (states × the kernel's ``op_counts[k]["total"]``), from
        which a batch runs on several threads (issue 47): measured by the library when first
        needed — twice what waking its idle OpenMP team costs, in the batch path's work (~2 M
        operations on a 2-core VM, where waking takes ~45 µs) — or given by
        ``$RBDGEN_PARALLEL_OPS`` or by setting this (0: measure again; 1: every batch of at
        least 200 000 operations). Shared by the library's kernels of this dtype. None: a
        library without OpenMP (or not a CPU one)."""
        return None if self._par_get is None else int(self._par_get())

    @parallel_ops.setter
    def parallel_ops(self, ops: int) -> None:
        if self._par_set is None:
            raise RbdgenError(f"{self.path}: this library has no parallel batches (built without OpenMP)")
        if isinstance(ops, bool) or not isinstance(ops, (int, np.integer)) or ops < 0:
            raise ValueError(f"parallel_ops must be a whole number of operations >= 0, got {ops!r}")
        self._par_set(int(ops))

    @property
    def stream_bytes(self) -> int | None:
        """The output size of one batch call, in bytes, from which the rows-layout batch path
        writes its outputs with streaming (non-temporal) stores, past the caches: 32 MB by default
        (issue 49; docs/performance.md §23: 1.03–1.53× per state from there, 0.62–0.97× where
        the output fits in cache, on the 2-core EPYC). Set it to what suits the
        machine's last-level cache; 0: never stream. Shared by the library's kernels of this
        dtype. None: not a CPU library with a SIMD batch path."""
        return None if self._stream_get is None else int(self._stream_get())

    @stream_bytes.setter
    def stream_bytes(self, nbytes: int) -> None:
        if self._stream_set is None:
            raise RbdgenError(f"{self.path}: this library has no streaming batch path (not a CPU library)")
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) or nbytes < 0:
            raise ValueError(f"stream_bytes must be a whole number of bytes >= 0, got {nbytes!r}")
        self._stream_set(int(nbytes))

    def __reduce__(self):
        """Pickled as the recipe it was loaded from (sources, model, options); unpickling loads it
        through the compile cache, compiling only on a miss (see :mod:`rbdgen.toolchain.rebuild`)."""
        return _reduce(self)

    def __repr__(self):
        return (f"<rbdgen kernels for {self.model.name!r} ({self.target}, {self.dtype}, nq={self.nq}, nv={self.nv}): "
                f"{', '.join(self.kernels)}>")


def _load_module(name: str, path: str):
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod
