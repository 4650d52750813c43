"""PyTorch tensors in and out of rbdgen's kernels, with ``rnea`` and ``aba`` differentiable.

    import rbdgen, rbdgen.torch
    kern = rbdgen.build(model, kernels=("rnea", "crba", "aba", "rnea_derivatives", "aba_derivatives"))
    tk = rbdgen.torch.wrap(kern)
    tau = tk.rnea(q, v, a)          # torch tensors: one state (size,) or a batch (N, size)
    tau.sum().backward()            # q.grad, v.grad, a.grad from our analytical derivative kernels

Every kernel of ``kern`` is a method of the wrapper, taking and returning tensors of the
kernel set's dtype (float64 or float32):

* CPU kernels (``target == "cpu"``): a contiguous CPU tensor of the right dtype goes to the
  kernel as a NumPy view of its memory (``tensor.detach().numpy()``, no copy), and the outputs
  come back as tensors sharing the kernel's output arrays (``torch.from_numpy``, no copy). A
  batch whose rows are strided but each state contiguous (a column block ``x[:, :7]`` of a packed
  state) goes in as it is too; any other non-contiguous tensor (``x[:, ::2]``, a transpose) is
  copied to a contiguous one first.
* CUDA kernels (``target == "cuda"``, :class:`rbdgen.targets.cuda.runtime.CudaKernels`) with CUDA tensors:
  the inputs are handed over through ``__cuda_array_interface__`` (no copy), the outputs are
  allocated by PyTorch on the input's device and passed as ``out=``, and the kernel is launched
  on PyTorch's current stream of that device (``stream=``), so it is ordered after the work that
  produced the inputs and before the work that reads the outputs, as any PyTorch operation
  is. Neither cupy nor a DLPack exchange is needed. The backward runs on the host (the inputs
  copied there, the derivative kernels through CudaKernels' NumPy path): correct, not fast.
  **Not yet run on a GPU** (see docs/torch.md).

A tensor of another dtype, on another device, of a wrong shape, or an argument that is not a
tensor, is refused with an error naming the kernel and the argument; nothing is converted
behind the caller's back except the contiguous copy above.

Gradients (``rnea``, ``aba``): each is a :class:`torch.autograd.Function` whose backward applies
the rules of :mod:`rbdgen.autodiff` (:func:`~rbdgen.autodiff.rnea_partials`,
:func:`~rbdgen.autodiff.aba_partials`): g_q = (∂y/∂q)ᵀ g, g_v = (∂y/∂v)ᵀ g, and g_a = Mᵀ g
(rnea) or g_τ = (M⁻¹)ᵀ g (aba), state by state for a batch. ∂y/∂q is taken along q's
coordinates: for a floating base it is the derivative of y(p, u/|u|, …), the function the NumPy
reference and the kernels compute (both use the rotation of the normalised quaternion; see the
docstring of :mod:`rbdgen.autodiff`).

The partials are computed **in backward, not in forward**: forward saves only its inputs
(nq + 2·nv numbers a state, against nv·nq + 2·nv² for the three matrices) and a forward whose
result is never differentiated (a rollout under ``requires_grad`` that is cut short, a value
only logged) costs one kernel call, as without gradients. Forward and backward then run the
same number of kernel calls as computing the partials eagerly would; the inputs are saved with
``save_for_backward``, so changing them in place before ``backward`` is an error, not a wrong
gradient. The rules are first-order only (once differentiable): a second derivative
(``create_graph=True`` then ``backward`` again, ``torch.autograd.functional.hessian``) is an
error naming the kernel. torch's ``@once_differentiable`` alone is not used for this: it refuses
only when the incoming gradient itself requires grad, and a Hessian (whose incoming gradient is
a constant) came out silently zero with it. ``torch.func`` transforms (``vmap``, ``jacrev``) and
forward-mode AD are not supported; pass a batch, use backward.

The other kernels (``crba``, ``minv``, the frame kernels, the derivative kernels themselves)
compute values only. Called with a tensor that requires grad (with grad mode on), their outputs
are part of the graph and a ``backward`` that reaches them raises, naming the kernel, rather than
silently giving a zero or missing gradient; ``.detach()`` the inputs (or use ``torch.no_grad()``)
to use them as constants.
"""
from __future__ import annotations

import numpy as np

try:
    import torch
except ImportError as e:  # absolute import: the real PyTorch, never this module
    raise ImportError(f"rbdgen.torch needs PyTorch, which cannot be imported ({e}); install it with "
                      "`pip install torch` (rbdgen itself does not depend on it)") from e

from rbdgen.autodiff import differentiable, rule
from rbdgen.kernels.interop import takes_strided_rows

__all__ = ["wrap", "TorchKernels"]

_TORCH_DTYPE = {np.dtype(np.float64): torch.float64, np.dtype(np.float32): torch.float32}
_Tensor, _from_numpy, _grad_enabled = torch.Tensor, torch.from_numpy, torch.is_grad_enabled


def wrap(kern) -> "TorchKernels":
    """Kernels ``kern`` (from :func:`rbdgen.build`, target "cpu" or "cuda") as methods on torch
    tensors, ``rnea`` and ``aba`` differentiable; see :mod:`rbdgen.torch`."""
    return TorchKernels(kern)


class TorchKernels:
    """A method per kernel of ``kern`` on torch tensors (see :mod:`rbdgen.torch`).

    ``kern``: the wrapped kernel set; ``model``; ``dtype`` (a torch dtype); ``kernels``;
    ``differentiable``: the kernels with a backward (``rnea``, ``aba`` where built)."""

    def __init__(self, kern):
        for attr in ("kernels", "methods", "model", "dtype", "kernel"):
            if not hasattr(kern, attr):
                raise TypeError(f"rbdgen.torch.wrap takes kernels from rbdgen.build, got {type(kern).__name__} "
                                f"(no attribute {attr!r})")
        try:
            self.dtype = _TORCH_DTYPE[np.dtype(kern.dtype)]
        except KeyError:
            raise TypeError(f"rbdgen.torch.wrap: kernels of dtype {kern.dtype} are not supported "
                            "(float64 or float32)") from None
        target = getattr(kern, "target", "cpu")
        if target not in ("cpu", "cuda"):
            raise TypeError(f"rbdgen.torch.wrap: kernels of target {target!r} are not supported (cpu or cuda)")
        self.kern = kern
        self.model = kern.model
        self.target = target
        self.kernels = tuple(kern.kernels)
        self.differentiable = tuple(k for k in differentiable() if k in self.kernels)
        self.methods = {}
        for name in self.kernels:
            op = _Op(self, name)
            self.methods[name] = op
            setattr(self, name, op)

    def __repr__(self):
        return (f"<rbdgen.torch kernels for {self.model.name!r} ({self.target}, {self.dtype}): "
                f"{', '.join(self.kernels)}; differentiable: {', '.join(self.differentiable) or 'none'}>")


class _Op:
    """One kernel on torch tensors: check, hand over, call, and (with grad) go through autograd."""

    def __init__(self, owner: TorchKernels, name: str):
        kern = owner.kern
        spec = kern.methods[name]
        self.name = name
        self.kern = kern
        self.raw = kern.kernel(name)  # the generated kernel (not a by-name frame wrapper)
        self.inputs = tuple((n, int(s)) for n, s in spec.inputs)
        self.outputs = tuple((n, tuple(int(d) for d in s)) for n, s in spec.outputs)
        self.dtype = owner.dtype
        self.np_dtype = np.dtype(kern.dtype)
        self.cuda = owner.target == "cuda"
        #: the kernels take a batch whose rows are strided (the CPU target's strided entry points):
        #: a row-strided tensor (a column block x[:, :7] of a packed state) goes in without a copy
        self.rows = takes_strided_rows(spec)  # never for the CUDA kernels
        self.partials = rule(name)
        self.__doc__ = (f"{name}({', '.join(n for n, _ in self.inputs)}) on torch tensors → "
                        f"{', '.join(n for n, _ in self.outputs)}"
                        + ("; differentiable (rbdgen.autodiff rules)" if self.partials else ""))

    # -- checks ----------------------------------------------------------------------------
    def _check(self, args):
        """(the arguments as tensors the kernels take as they are, whether any requires grad), after checking that
        they are tensors of the kernels' dtype, on their device, of matching shapes (a few
        attribute reads per argument; a failed check is explained by :meth:`_diagnose`)."""
        inputs = self.inputs
        if len(args) != len(inputs):
            names = ", ".join(n for n, _ in inputs)
            raise TypeError(f"{self.name}() takes {len(inputs)} arguments ({names}), got {len(args)}")
        dt, cuda = self.dtype, self.cuda
        xs, grad, nd, n0 = [], False, None, None
        for (_, size), x in zip(inputs, args):
            if not isinstance(x, _Tensor) or x.dtype is not dt or (not x.is_cuda if cuda else not x.is_cpu):
                self._diagnose(args)
            shape = x.shape
            d = len(shape)
            if nd is None:
                nd = d
                n0 = shape[0] if d == 2 else None
            if d != nd or not 0 < d < 3 or shape[-1] != size or (d == 2 and shape[0] != n0):
                self._diagnose(args)
            grad = grad or x.requires_grad
            xs.append(x if x.is_contiguous() or (d == 2 and self.rows and x.stride(1) == 1) else x.contiguous())
        if cuda and len({x.device for x in xs}) > 1:
            self._diagnose(args)
        return xs, grad

    def _diagnose(self, args):
        """Raise the error that explains why :meth:`_check` refused ``args``, naming the kernel
        and the argument."""
        first = None
        for (n, size), x in zip(self.inputs, args):
            if not isinstance(x, torch.Tensor):
                hint = f" (torch.from_numpy(x), or call the numpy kernel kern.{self.name})" \
                    if isinstance(x, np.ndarray) else ""
                raise TypeError(f"{self.name}: argument '{n}' must be a torch.Tensor, got {type(x).__name__}{hint}")
            if x.dtype != self.dtype:
                raise ValueError(f"{self.name}: argument '{n}' has dtype {x.dtype}, these kernels take {self.dtype} "
                                 f"(convert with .to({self.dtype}) or build with dtype='{str(x.dtype)[6:]}')")
            if self.cuda:
                if x.device.type != "cuda":
                    raise ValueError(f"{self.name}: argument '{n}' is on {x.device}, these kernels run on the GPU "
                                     "(target 'cuda'): pass CUDA tensors (.cuda())")
            elif x.device.type != "cpu":
                raise ValueError(f"{self.name}: argument '{n}' is on {x.device}, these kernels run on the CPU "
                                 "(target 'cpu'): pass CPU tensors (.cpu()), or build with target='cuda'")
            shape = tuple(x.shape)
            if len(shape) not in (1, 2) or shape[-1] != size:
                raise ValueError(f"{self.name}: argument '{n}' has shape {shape}, expected ({size},) or (N, {size})")
            if first is None:
                first = (n, shape, x.device)
            elif shape[:-1] != first[1][:-1]:
                raise ValueError(f"{self.name}: argument '{n}' has shape {shape}, but '{first[0]}' has shape "
                                 f"{first[1]} (one state each, or batches of the same N)")
            elif x.device != first[2]:
                raise ValueError(f"{self.name}: argument '{n}' is on {x.device}, '{first[0]}' on {first[2]}")
        raise AssertionError(f"{self.name}: arguments refused without a reason")  # pragma: no cover

    # -- calls -----------------------------------------------------------------------------
    def __call__(self, *args):
        xs, grad = self._check(args)
        if grad and _grad_enabled():
            return (_Differentiable if self.partials is not None else _ValueOnly).apply(self, *xs)
        return self.value(xs)

    def value(self, xs):
        """The kernel's output(s) at the (checked) tensors ``xs``, as tensors; no graph."""
        if self.cuda:
            return self._value_cuda(xs)
        # .numpy() shares the tensor's memory; a tensor that requires grad needs .detach() first
        try:
            arrs = [x.detach().numpy() if x.requires_grad else x.numpy() for x in xs]
        except RuntimeError as e:  # a torch.func (vmap, grad, jvp) tensor has no storage
            raise RuntimeError(f"{self.name}: an argument has no memory of its own ({e}): torch.func transforms "
                               "(vmap, grad, jacrev, jvp) are not supported by rbdgen.torch; pass a batch "
                               "(N, size) and use backward") from None
        res = self.raw(*arrs)
        if type(res) is tuple:
            return tuple(_from_numpy(r) for r in res)
        return _from_numpy(res)

    def _value_cuda(self, xs):
        dev = xs[0].device
        lead = tuple(xs[0].shape[:-1])
        outs = tuple(torch.empty(lead + s, dtype=self.dtype, device=dev) for _, s in self.outputs)
        with torch.cuda.device(dev):
            # inputs through __cuda_array_interface__ (of detached tensors: torch refuses it on a
            # tensor that requires grad), outputs written into the tensors above, on PyTorch's
            # current stream: after the work that made xs, before the work that reads outs (which
            # were allocated on it, so the caching allocator keeps them until that work is done)
            self.raw(*[x.detach() for x in xs], out=outs if len(outs) > 1 else outs[0],
                     stream=torch.cuda.current_stream(dev))
        return outs if len(outs) > 1 else outs[0]

    # -- the backward rule -----------------------------------------------------------------
    def vjp(self, xs, g, needs):
        """(g_q, g_v, g_3): the three partials of rbdgen.autodiff transposed onto the output
        cotangent ``g`` (a tensor like the output), None where ``needs`` says no."""
        host = [x.detach().cpu().numpy() for x in xs]
        parts = self.partials(self.kern, *host)  # raises, naming the kernels, where not built
        gh = g.detach().cpu().numpy()
        gh = gh.astype(np.result_type(gh, parts[0]), copy=False)[..., None, :]  # (…, 1, nv)
        grads = []
        for J, need, x in zip(parts, needs, xs):
            if not need:
                grads.append(None)
                continue
            gx = (gh @ J)[..., 0, :]  # Jᵀ g, state by state: (…, nv) @ (…, nv, n) → (…, n)
            t = torch.from_numpy(np.ascontiguousarray(gx, dtype=self.np_dtype))
            grads.append(t.to(x.device) if self.cuda else t)
        return tuple(grads)


class _Differentiable(torch.autograd.Function):
    """rnea / aba: the value from the kernel; the backward from rbdgen.autodiff's partials,
    computed when backward runs (see the module's docstring for why not in forward)."""

    @staticmethod
    def forward(ctx, op, *xs):
        ctx.op = op
        ctx.save_for_backward(*xs)
        return op.value(xs)

    @staticmethod
    def backward(ctx, g):
        xs = ctx.saved_tensors
        grads = ctx.op.vjp(xs, g, ctx.needs_input_grad[1:])  # numpy: records no graph
        if torch.is_grad_enabled():
            # create_graph=True: a second derivative may follow. torch's @once_differentiable
            # refuses it only where g itself requires grad; a Hessian (g a constant) would meet
            # gradients with no graph and come out silently zero. Give each gradient a node that
            # refuses, whatever g is.
            grads = tuple(None if t is None else _FirstOrderOnly.apply(ctx.op.name, t, g, *xs) for t in grads)
        return (None,) + grads


class _FirstOrderOnly(torch.autograd.Function):
    """Identity on a gradient of rnea/aba, depending on the inputs it came from, whose backward
    refuses: the derivative rules are first-order (once differentiable)."""

    @staticmethod
    def forward(ctx, name, t, *deps):
        ctx.name = name
        return t.clone()

    @staticmethod
    def backward(ctx, *gs):
        raise RuntimeError(f"rbdgen.torch: the gradient of {ctx.name} is once differentiable: no second "
                           "derivative (create_graph=True then backward, torch.autograd.functional.hessian, "
                           "a double-backward JVP) is available")


class _ValueOnly(torch.autograd.Function):
    """A kernel with no derivative rule, called on tensors that require grad: the value, and a
    backward that refuses, naming the kernel (rather than a silent zero gradient)."""

    @staticmethod
    def forward(ctx, op, *xs):
        ctx.name = op.name
        ctx.differentiable = tuple(differentiable())
        return op.value(xs)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *gs):
        raise RuntimeError(f"rbdgen.torch: {ctx.name} has no derivative rule (differentiable kernels: "
                           f"{', '.join(ctx.differentiable)}); to use its output as a constant, call it on "
                           "detached inputs (x.detach()) or under torch.no_grad()")
