"""JAX arrays in and out of rbdgen's kernels, under ``jax.jit`` and ``jax.vmap``, with ``rnea``
and ``aba`` differentiable (``jax.grad``, ``jax.jacfwd``, ``jax.jacrev``, ``jax.vjp``, ``jax.jvp``).

    import jax, rbdgen, rbdgen.jax
    jax.config.update("jax_enable_x64", True)       # float64 kernels need JAX's 64-bit mode
    kern = rbdgen.build(model, kernels=("rnea", "crba", "aba", "rnea_derivatives", "aba_derivatives"))
    jk = rbdgen.jax.wrap(kern)
    tau = jk.rnea(q, v, a)                           # (…, nq), (…, nv), (…, nv) → (…, nv)
    dq = jax.grad(lambda q: jk.rnea(q, v, a) @ w)(q) # from rnea_derivatives (tangent-mapped)
    qdd = jax.jit(jax.vmap(jk.aba))(Q, V, T)         # ONE batched kernel call for the whole batch

Every kernel of ``kern`` is a method of the wrapper (the generated kernels, ``kern.kernel(name)``;
not the by-name frame wrappers). A method is a :func:`jax.pure_callback` into the compiled
kernel: JAX hands the callback host (CPU) arrays, the callback reshapes every input's leading
dimensions to one batch ``(N, size)``, calls the kernel's batch entry point **once** (the
single-state entry point where there are no leading dimensions), and reshapes the outputs back.
The callback is declared with ``vmap_method="broadcast_all"``: under ``jax.vmap`` (nested or
not, any ``in_axes``) JAX calls it once with the mapped dimensions in front and the unmapped
arguments tiled to match, so a vmapped kernel is one batched kernel call, not a Python loop.
Inputs may carry any leading dimensions, the same for every argument.

Gradients: ``rnea`` and ``aba`` are :func:`jax.custom_jvp` functions. Their JVP calls one callback
that returns the value and the three partial matrices of :mod:`rbdgen.autodiff`
(:func:`~rbdgen.autodiff.rnea_partials`: ``rnea_derivatives`` and ``crba``;
:func:`~rbdgen.autodiff.aba_partials`: ``aba_derivatives``), and forms the output tangent with
``jnp.einsum`` — linear in the input tangents, so JAX transposes it for reverse mode. ∂/∂q is
along q's coordinates: for a floating base, the derivative of y(p, u/|u|, …), the function the
NumPy reference computes (see the docstring of :mod:`rbdgen.autodiff`). The rules are first
order: a second derivative (``jax.hessian``, ``jacfwd(jacrev(…))``) raises, naming the kernel;
so does differentiating any other kernel (use ``jax.lax.stop_gradient`` on its inputs to use its
output as a constant) or ``rnea``/``aba`` without their derivative kernels built.

dtype: the arrays must have the kernel set's dtype. float64 kernels need JAX's 64-bit mode
(``jax.config.update("jax_enable_x64", True)``); without it every JAX array is float32 and a call
raises, saying so. float32 kernels (``rbdgen.build(..., dtype="float32")``) take float32 arrays.
Python lists are converted to the kernel's dtype; arrays of another dtype are refused.

CUDA kernels (target "cuda"): accepted, but a pure_callback always hands the callback host
arrays, so each call copies the inputs to the GPU and the outputs back (CudaKernels' NumPy path)
on top of JAX's own device → host copy when the JAX arrays live on a GPU. Correct, not fast.
"""
from __future__ import annotations

import inspect

import numpy as np

try:
    import jax
    import jax.numpy as jnp
except ImportError as e:  # absolute import: the real JAX, never this module
    raise ImportError(f"rbdgen.jax needs JAX, which cannot be imported ({e}); install it with "
                      "`pip install jax` (rbdgen itself does not depend on it)") from e

from rbdgen.autodiff import differentiable, need, rule
from rbdgen.kernels.interop import takes_strided_rows

if "vmap_method" not in inspect.signature(jax.pure_callback).parameters:
    raise ImportError(f"rbdgen.jax needs a JAX whose pure_callback takes vmap_method= (JAX {jax.__version__} "
                      "has the older vectorized=): upgrade it with `pip install -U jax`")

__all__ = ["wrap", "JaxKernels"]

_VMAP = "broadcast_all"


def wrap(kern) -> "JaxKernels":
    """Kernels ``kern`` (from :func:`rbdgen.build`, target "cpu" or "cuda") as JAX functions,
    ``rnea`` and ``aba`` differentiable; see :mod:`rbdgen.jax`."""
    return JaxKernels(kern)


def _x64() -> bool:
    return bool(jax.config.jax_enable_x64)


class JaxKernels:
    """A method per kernel of ``kern`` on JAX arrays (see :mod:`rbdgen.jax`).

    ``kern``: the wrapped kernel set; ``model``; ``dtype`` (a NumPy dtype); ``kernels``;
    ``differentiable``: the kernels with a derivative rule whose derivative kernels are built;
    ``methods``: name → method."""

    def __init__(self, kern):
        for attr in ("kernels", "methods", "model", "dtype", "kernel"):
            if not hasattr(kern, attr):
                raise TypeError(f"rbdgen.jax.wrap takes kernels from rbdgen.build, got {type(kern).__name__} "
                                f"(no attribute {attr!r})")
        self.dtype = np.dtype(kern.dtype)
        if self.dtype not in (np.dtype(np.float64), np.dtype(np.float32)):
            raise TypeError(f"rbdgen.jax.wrap: kernels of dtype {self.dtype} are not supported (float64 or float32)")
        target = getattr(kern, "target", "cpu")
        if target not in ("cpu", "cuda"):
            raise TypeError(f"rbdgen.jax.wrap: kernels of target {target!r} are not supported (cpu or cuda)")
        self.kern = kern
        self.model = kern.model
        self.target = target
        self.kernels = tuple(kern.kernels)
        self.differentiable = tuple(k for k, needs in differentiable().items()
                                    if k in self.kernels and all(n in self.kernels for n in needs))
        self.methods = {}
        for name in self.kernels:
            op = _Op(self, name)
            self.methods[name] = op
            setattr(self, name, op)

    def __repr__(self):
        return (f"<rbdgen.jax kernels for {self.model.name!r} ({self.target}, {self.dtype}): "
                f"{', '.join(self.kernels)}; differentiable: {', '.join(self.differentiable) or 'none'}>")


class _Op:
    """One kernel as a JAX function: check (at trace time), then a jitted custom_jvp around the
    pure_callback."""

    def __init__(self, owner: JaxKernels, name: str):
        kern = owner.kern
        spec = kern.methods[name]
        self.name = name
        self.kern = kern
        self.model = owner.model
        self.raw = kern.kernel(name)  # the generated kernel (not a by-name frame wrapper)
        #: the library takes row-strided batches (the CPU target): the packed inputs' column
        #: blocks go in without copies
        self._strided = takes_strided_rows(spec)
        self.inputs = tuple((n, int(s)) for n, s in spec.inputs)
        self.outputs = tuple((n, tuple(int(d) for d in s)) for n, s in spec.outputs)
        self.dtype = owner.dtype
        self.partials = rule(name)
        offsets = np.cumsum([0] + [s for _, s in self.inputs])
        self._slices = tuple((int(o), s) for o, (_, s) in zip(offsets, self.inputs))
        self.__doc__ = (f"{name}({', '.join(n for n, _ in self.inputs)}) on JAX arrays → "
                        f"{', '.join(n for n, _ in self.outputs)}"
                        + ("; differentiable (rbdgen.autodiff rules)" if self.partials else ""))
        fn = jax.custom_jvp(self._value)
        fn.defjvp(self._jvp if self.partials is not None else self._no_jvp)
        self._fn = fn
        self._jit = jax.jit(fn)
        if self.partials is not None:
            # the partials callback refuses to be differentiated (the rules are first order):
            # without this a second derivative fails inside JAX with a message about pure
            # callbacks that does not name the kernel
            self._partials_fn = jax.custom_jvp(self._partials_call)
            self._partials_fn.defjvp(self._no_second_derivative)

    def __repr__(self):
        return f"<rbdgen.jax {self.__doc__}>"

    # -- checks (Python, at trace time) ---------------------------------------------------
    def _check(self, args):
        """The arguments as JAX arrays (or tracers), after checking count, dtype and shapes."""
        inputs = self.inputs
        if len(args) != len(inputs):
            names = ", ".join(n for n, _ in inputs)
            raise TypeError(f"{self.name}() takes {len(inputs)} arguments ({names}), got {len(args)}")
        dt = self.dtype
        if dt == np.float64 and not _x64():
            raise ValueError(
                f"{self.name}: these kernels are float64 but JAX's 64-bit mode is off, so JAX would pass "
                f"argument '{inputs[0][0]}' (and every other) as float32: enable it with "
                "jax.config.update('jax_enable_x64', True) at startup (or JAX_ENABLE_X64=1), "
                "or build the kernels with dtype='float32'")
        xs, first = [], None
        for (n, size), x in zip(inputs, args):
            if isinstance(x, (list, tuple)):
                try:
                    x = np.asarray(x, dtype=dt)
                except (ValueError, TypeError) as e:
                    raise ValueError(f"{self.name}: argument '{n}' is not a rectangular list of numbers "
                                     f"({' '.join(str(e).split())[:120]})") from None
            xdt = getattr(x, "dtype", None)
            shape = getattr(x, "shape", None)
            if xdt is None or shape is None:
                raise TypeError(f"{self.name}: argument '{n}' must be an array (JAX or NumPy), "
                                f"got {type(x).__name__}")
            if np.dtype(xdt) != dt:
                hint = ("; JAX's 64-bit mode is off, so JAX arrays are float32: enable it with "
                        "jax.config.update('jax_enable_x64', True)") if dt == np.float64 and not _x64() else ""
                raise ValueError(f"{self.name}: argument '{n}' has dtype {np.dtype(xdt)}, these kernels take "
                                 f"{dt} (convert with .astype(jnp.{dt}), or build the kernels with "
                                 f"dtype='{np.dtype(xdt)}'){hint}")
            shape = tuple(shape)
            if len(shape) < 1 or shape[-1] != size:
                raise ValueError(f"{self.name}: argument '{n}' has shape {shape}, expected (…, {size}) "
                                 f"(one state ({size},), or any leading batch dimensions)")
            if first is None:
                first = (n, shape)
            elif shape[:-1] != first[1][:-1]:
                raise ValueError(f"{self.name}: argument '{n}' has shape {shape}, but '{first[0]}' has shape "
                                 f"{first[1]}: every argument needs the same leading dimensions (to map some "
                                 "arguments and not others, use jax.vmap with in_axes)")
            xs.append(x)
        return xs

    def __call__(self, *args):
        xs = self._check(args)
        if any(isinstance(x, jax.core.Tracer) for x in xs):
            return self._fn(*xs)  # inside a trace (jit, vmap, grad): inline
        return self._jit(*xs)     # eager: one compiled dispatch, cached per shape

    # -- the host side (inside pure_callback) ---------------------------------------------
    def _flat(self, packed):
        """(leading shape, the inputs as arrays of the kernel's dtype: one state (size,) or one
        batch (N, size)) from the packed inputs (…, Σ sizes). A batch's inputs are column blocks
        of the packed array, passed as they are where the kernels take strided rows (the CPU
        target), else copied to C-contiguous arrays."""
        x = np.asarray(packed)
        lead = x.shape[:-1]
        if lead:
            x = x.reshape(-1, x.shape[-1])
        dt = self.dtype
        if x.dtype == dt and (not lead or self._strided):
            return lead, [x[..., o:o + s] for o, s in self._slices]
        return lead, [np.ascontiguousarray(x[..., o:o + s], dtype=dt) for o, s in self._slices]

    def _host_values(self, packed):
        lead, arrs = self._flat(packed)
        if 0 in lead:
            outs = tuple(np.zeros(lead + s, self.dtype) for _, s in self.outputs)
        else:
            res = self.raw(*arrs)  # one call: the batch entry point for a batch
            outs = tuple(np.asarray(r).reshape(lead + s)
                         for r, (_, s) in zip(res if type(res) is tuple else (res,), self.outputs))
        return outs if len(outs) > 1 else outs[0]

    def _host_partials(self, packed):
        """(value, ∂y/∂q (…, nv, nq), ∂y/∂v (…, nv, nv), ∂y/∂(a or τ) (…, nv, nv)) in one
        callback: the kernel and rbdgen.autodiff's partials."""
        lead, arrs = self._flat(packed)
        nv, nq = self.model.nv, self.model.nq
        shapes = (self.outputs[0][1], (nv, nq), (nv, nv), (nv, nv))
        if 0 in lead:
            return tuple(np.zeros(lead + s, self.dtype) for s in shapes)
        y = self.raw(*arrs)
        parts = self.partials(self.kern, *arrs)
        return tuple(np.asarray(p, dtype=self.dtype).reshape(lead + s) for p, s in zip((y,) + tuple(parts), shapes))

    # -- the traced side -------------------------------------------------------------------
    def _shapes(self, lead, shapes):
        return tuple(jax.ShapeDtypeStruct(tuple(lead) + tuple(s), self.dtype) for s in shapes)

    def _value(self, *xs):
        out = self._shapes(xs[0].shape[:-1], [s for _, s in self.outputs])
        return jax.pure_callback(self._host_values, out if len(out) > 1 else out[0], _pack(xs),
                                 vmap_method=_VMAP)

    def _partials_call(self, *xs):
        nv, nq = self.model.nv, self.model.nq
        out = self._shapes(xs[0].shape[:-1], (self.outputs[0][1], (nv, nq), (nv, nv), (nv, nv)))
        return jax.pure_callback(self._host_partials, out, _pack(xs), vmap_method=_VMAP)

    def _jvp(self, primals, tangents):
        need(self.kern, self.name)  # at trace time, naming what is missing
        y, *Js = self._partials_fn(*primals)
        dy = None
        for J, t in zip(Js, tangents):
            term = jnp.einsum("...ij,...j->...i", J, t.astype(self.dtype))
            dy = term if dy is None else dy + term
        return y, dy

    def _no_second_derivative(self, primals, tangents):
        raise TypeError(f"rbdgen.jax: the derivative rule of {self.name} is first order: no second "
                        "derivative (jax.hessian, jacfwd of jacrev, grad of grad) is available")

    def _no_jvp(self, primals, tangents):
        raise TypeError(f"rbdgen.jax: {self.name} has no derivative rule (differentiable kernels: "
                        f"{', '.join(differentiable())}); to use its output as a constant, pass its inputs "
                        "through jax.lax.stop_gradient")


def _pack(xs):
    """The inputs as one array (…, Σ sizes): a pure_callback costs ~27 µs per argument (JAX
    makes a host jax.Array of each; measured), the concatenation in XLA nothing measurable on
    one state (docs/jax.md)."""
    return xs[0] if len(xs) == 1 else jnp.concatenate(xs, axis=-1)
