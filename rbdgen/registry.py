"""The kernel registry: one declaration per kernel, everything else derived from it.

A kernel is declared once, next to its algorithm, with :func:`declare`::

    declare(
        "rnea", "inverse dynamics τ = M a + C v + g",
        inputs=("q", "v", "a"), outputs=(Arg("tau", ("nv",)),),
        algorithm=_rnea,                 # (Trace, q, v, a) → {"tau": [Value, …]}
        reference=ref.rnea,              # the NumPy oracle, same inputs and outputs
        pinocchio=lambda pin, pm, data, q, v, a: (pin.rnea(pm, data, q, v, a),),
        float32_tol=4e-6, fixed_tol={(32, 16): 4e-4}, gpu_shape="thread",
    )

From the declarations come: the IR signature of each traced kernel (:func:`trace`), the Python
methods and their argument checks, the C/CUDA/HLS signatures (the targets print the traced
kernel's arrays), the CLI's ``--kernels`` help, ``rbdgen validate`` (reference, Pinocchio,
tolerances), the tests' parametrisation, the benchmark lists and the package manifest.

Input arrays are shared between kernels (``q`` is the same everywhere), so they are declared
once in :data:`INPUTS`, each with how to draw random values of it for validation.
"""
from __future__ import annotations

import collections
from importlib import import_module
import threading
import weakref
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .errors import RbdgenError, UnsupportedError
from .gcpause import pausing

#: the model sizes a shape may name
_DIMS = ("nq", "nv", "nb", "nf", "nc")


@dataclass(frozen=True)
class Arg:
    """A kernel argument: a name and a shape whose entries are ints, model sizes (``"nq"``,
    ``"nv"``, ``"nb"``, ``"nf"``: the number of selected frames, ``"nc"``: of constraints) or an int times one (``"24*nb"``),
    e.g. ``("nb", 4, 4)``."""

    name: str
    shape: tuple
    doc: str = ""
    #: how to draw random values for validation: (model, rng, n) → (n, size) array
    sample: Callable | None = field(default=None, compare=False, repr=False)

    def dims(self, model) -> tuple:
        out = []
        for s in self.shape:
            if isinstance(s, str):
                k, _, dim = s.rpartition("*")  # "24*nb": a multiple of a model size
                if dim not in _DIMS or (k and not k.isdigit()):
                    raise ValueError(f"argument {self.name!r}: unknown size {s!r} (one of {', '.join(_DIMS)}, "
                                     f"or an integer times one: '24*nb')")
                out.append(int(k or 1) * int(getattr(model, dim)))
            else:
                out.append(int(s))
        return tuple(out)

    def size(self, model) -> int:
        return int(np.prod(self.dims(model), dtype=int))


def _normal(scale=1.0):
    return lambda model, rng, n: scale * rng.normal(size=(n, model.nv))


#: every input array a kernel may take, declared once
INPUTS = {
    "q": Arg("q", ("nq",), "joint positions (free-flyer: xyz, quaternion x y z w)",
             sample=lambda model, rng, n: model.random_q(rng, n)),
    "v": Arg("v", ("nv",), "joint velocities", sample=_normal()),
    "a": Arg("a", ("nv",), "joint accelerations", sample=_normal()),
    "tau": Arg("tau", ("nv",), "joint torques", sample=_normal()),
    "stale": Arg("stale", ("24*nb",), "the previous call's stale_next (rnea_stale, rnea_stale_yamakita: per body "
                 "v, a, f_own, f)",
                 sample=lambda model, rng, n: _sample_stale(model, rng, n)),
    # after the others: drawing it after them leaves their values as they were before it existed
    "f_ext": Arg("f_ext", ("nb", 6), "external spatial force on each body, [force; torque] in the body's frame "
                 "about its origin (rbdgen.reference's and Pinocchio's fext; *_fext kernels)",
                 sample=lambda model, rng, n: 5.0 * rng.normal(size=(n, 6 * model.nb))),
    # last, for the same reason
    "stale_lwp": Arg("stale_lwp", ("18*nb",), "the previous call's stale_next (rnea_stale_hamilton, "
                     "rnea_stale_binder_herzog_lwp: per body Luh–Walker–Paul ω, ω̇, α, a_e, f, n)",
                     sample=lambda model, rng, n: _sample_stale(model, rng, n, "hamilton")),
    # last, for the same reason
    "Minv": Arg("Minv", ("nv", "nv"), "M(q)⁻¹ at the same q, computed before (by minv, or ∇FD's ∂q̈/∂τ "
                "output) and given (fd_derivatives_minv); drawn for validation as a random symmetric "
                "positive definite matrix (the product is checked for any), the Pinocchio comparison "
                "gives M(q)⁻¹ itself", sample=lambda model, rng, n: _sample_spd(model, rng, n)),
}


def _sample_spd(model, rng, n: int):
    """Random symmetric positive definite nv × nv matrices, flat, entries of order one. Above 64
    states, 64 distinct ones repeat (callers draw every declared input for batches of up to 65 536
    states: a humanoid's 38 × 38 matrices would otherwise be 3.6 GFLOP of products to draw)."""
    k = min(n, 64)
    B = rng.normal(size=(k, model.nv, model.nv))
    A = B @ B.transpose(0, 2, 1) / model.nv + np.eye(model.nv)
    return np.resize(A.reshape(k, -1), (n, model.nv * model.nv))


def _sample_stale(model, rng, n: int, scheme: str = "binder_herzog"):
    """States the stale-data kernels may be given: the exact state (rbdgen.reference.rnea_stale;
    of a spatial scheme for ``stale``, of a Luh–Walker–Paul one for ``stale_lwp``) at other
    random (q, v, a) — what a previous call at another state leaves, and with the structural
    constants the kernels assume (rbdgen.algorithms.stale.structural_constants). Above 64
    states, 64 distinct ones repeat (the NumPy reference takes ~1 ms per state)."""
    from .reference import rnea_stale

    k = min(n, 64)
    q = model.random_q(rng, k)
    v, a = rng.normal(size=(k, model.nv)), rng.normal(size=(k, model.nv))
    flat = rnea_stale(model, q, v, a, scheme=scheme)[1].flat()
    return np.resize(flat, (n, flat.shape[1]))


@dataclass(frozen=True)
class Product:
    """An output computed after the straight-line code as ``scale · A @ B`` (A with nothing to
    prune: targets print it as a loop, over B's nonzero spans only, found when tracing:
    :class:`~rbdgen.ir.graph.MatMul`). Each operand is the name of another output of the
    kernel, or ``(name, values)``: a scratch array the straight-line code writes."""

    a: object
    b: object
    scale: float = 1.0


@dataclass(frozen=True)
class Gradient:
    """How a kernel is differentiated (the framework wrappers ``rbdgen.jax``/``rbdgen.torch``
    use it through :mod:`rbdgen.autodiff`): ``needs``, the kernels whose outputs are its partial
    derivatives, and ``partials(kern, *inputs)``, which calls them on loaded kernels and returns
    the derivative of the kernel's output with respect to each input, in input order, the
    configuration's along its tangent space (nv columns), as the derivative kernels give it."""

    needs: tuple
    partials: Callable = field(compare=False, repr=False)


@dataclass(frozen=True)
class KernelDecl:
    """Everything rbdgen knows about one kernel."""

    name: str
    doc: str                      # one line: what it computes
    inputs: tuple                 # Arg (from INPUTS)
    outputs: tuple                # Arg
    algorithm: Callable           # (Trace, *input Values) → {output name: [Value] | Product}
    reference: Callable           # (model, *inputs) → output or tuple of outputs
    pinocchio: Callable | None    # (pin, pm, data, q_pinocchio, *other inputs) → tuple of outputs
    float32_tol: float            # relative max-norm bound of the float32 build (measured, with margin)
    fixed_tol: dict               # (W, I) → bound of the HLS ap_fixed<W, I> C simulation
    gpu_shape: str                # preferred CUDA launch shape: "thread" or "block"
    pinocchio_note: str = ""      # how the Pinocchio comparison is made, when it is not obvious
    #: the same work in Pinocchio's C++ API, for the benchmark's peer: (header, call) with the call
    #: written over ``model, data, q[i], v[i], a[i], tau[i]``; None when Pinocchio has none
    pinocchio_cpp: tuple | None = None
    #: the kernel divides by the articulated inertia of every joint (it needs M⁻¹): a joint that
    #: moves nothing with mass makes it undefined, and tracing refuses such a model
    needs_minv: bool = False
    #: the kernel for a model with mimic joints coupled: (Trace of the tree, Coupling, *reduced
    #: inputs) → outputs, like ``algorithm``; None: such models are refused for this kernel
    coupled: Callable | None = None
    #: the kernel works on the model's selected frames (``model.frames``): it is left out of the
    #: default selection of a model without frames, and refused for one when asked for by name
    frames: bool = False
    #: (model, inputs) → the inputs the Pinocchio comparison uses, where the declared inputs do
    #: not alone make a Pinocchio quantity (the stale-data kernels: their state, set to the exact
    #: one at (q, v, a)); None: the same inputs as the reference comparison
    pinocchio_env: Callable | None = None
    #: how the kernel is differentiated (:class:`Gradient`); None: it is not
    gradient: Gradient | None = None
    #: (base kernel, input): this kernel is ``base`` with one more input (``("rnea", "f_ext")``:
    #: rnea_fext). Such a variant is built only when asked for by name (it is left out of the
    #: default selection, so builds and packages without it keep their size and speed), and a
    #: loaded ``kern.base(…, input=x)`` calls it (:func:`variants`). None: an ordinary kernel
    variant_of: tuple | None = None
    #: the kernel is generated for the model's constraints (``model.constraints``): it is left
    #: out of the default selection of a model without, and refused for one when asked for
    constraints: bool = False
    #: built only when asked for by name: left out of every default selection (the Schur-complement
    #: kernels of issue 41: a study of parallel depth, slower than their peers on a CPU)
    opt_in: bool = False
    #: (model, kernel name) → None, or raises UnsupportedError naming what in the model the kernel
    #: cannot be generated for (run before any work: :func:`check_model`, and when tracing)
    check: Callable | None = field(default=None, compare=False, repr=False)

    @property
    def input_names(self) -> tuple:
        return tuple(a.name for a in self.inputs)

    @property
    def output_names(self) -> tuple:
        return tuple(a.name for a in self.outputs)


_REGISTRY: dict[str, KernelDecl] = {}


def declare(name: str, doc: str, *, inputs, outputs, algorithm, reference, pinocchio=None,
            float32_tol: float, fixed_tol: dict | None = None, gpu_shape: str = "block",
            pinocchio_note: str = "", pinocchio_cpp: tuple | None = None, needs_minv: bool = False,
            coupled: Callable | None = None, frames: bool = False,
            pinocchio_env: Callable | None = None, gradient: Gradient | None = None,
            variant_of: tuple | None = None, constraints: bool = False, opt_in: bool = False,
            check: Callable | None = None) -> KernelDecl:
    """Register a kernel (see the module docstring). Declaration order is the canonical order."""
    if not name.isidentifier() or name in _REGISTRY:
        raise ValueError(f"kernel name {name!r} is not an identifier or is declared twice")
    ins = tuple(INPUTS[i] if isinstance(i, str) else i for i in inputs)
    outs = tuple(outputs)
    names = [a.name for a in ins + outs]
    if len(set(names)) != len(names):
        raise ValueError(f"kernel {name!r}: argument names repeat: {names}")
    if gpu_shape not in ("thread", "block"):
        raise ValueError(f"kernel {name!r}: gpu_shape must be 'thread' or 'block'")
    if variant_of is not None:
        base, extra = variant_of
        want = _REGISTRY[base].input_names + (extra,) if base in _REGISTRY else None
        if want != tuple(a.name for a in ins):
            raise ValueError(f"kernel {name!r}: a variant of {base!r} takes its inputs and then {extra!r}")
    d = KernelDecl(name, doc, ins, outs, algorithm, reference, pinocchio, float(float32_tol), dict(fixed_tol or {}),
                   gpu_shape, pinocchio_note, None if pinocchio_cpp is None else tuple(pinocchio_cpp), bool(needs_minv),
                   coupled, bool(frames), pinocchio_env, gradient, None if variant_of is None else tuple(variant_of), bool(constraints),
                   bool(opt_in), check)
    _REGISTRY[name] = d
    return d


def _ensure_loaded() -> None:
    import_module(f"{__package__}.algorithms")  # importing it runs the declarations


def kernels() -> tuple:
    """Names of every declared kernel, in canonical (declaration) order."""
    _ensure_loaded()
    return tuple(_REGISTRY)


def variants(name: str) -> dict:
    """Input name → kernel, for the variants of kernel ``name`` that take one more input
    (``variants("rnea") == {"f_ext": "rnea_fext"}``): what ``kern.rnea(q, v, a, f_ext=…)`` calls.
    (Looked up on every such call: kept per name until a kernel is declared; a copy is returned.)"""
    _ensure_loaded()
    memo = _VARIANTS.get(name)
    if memo is None or memo[0] != len(_REGISTRY):
        memo = _VARIANTS[name] = (len(_REGISTRY), {d.variant_of[1]: k for k, d in _REGISTRY.items()
                                                   if d.variant_of and d.variant_of[0] == name})
    return dict(memo[1])


#: kernel name → (the registry's size when computed, its variants): :func:`variants`
_VARIANTS: dict = {}


def differentiable() -> dict:
    """Kernel name → the kernels its gradient needs, for every kernel declared with a
    :class:`Gradient`, in declaration order."""
    _ensure_loaded()
    return {k: d.gradient.needs for k, d in _REGISTRY.items() if d.gradient is not None}


def get(name: str) -> KernelDecl:
    _ensure_loaded()
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise RbdgenError(f"unknown kernel {name!r}; known: {', '.join(_REGISTRY)}") from None


def resolve(names=None) -> tuple:
    """The kernels a caller asked for, checked and in canonical order: ``None`` → all; a name or
    a comma-separated string → those; an iterable of names → those. Unknown names and an empty
    selection are an :class:`RbdgenError` naming what is known."""
    _ensure_loaded()
    if names is None:
        return tuple(_REGISTRY)
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    else:
        try:
            names = list(names)
        except TypeError:
            raise RbdgenError(f"kernels must be a name or a list of names, got {type(names).__name__}") from None
    bad = [n for n in names if not isinstance(n, str) or n not in _REGISTRY]
    if bad:
        raise RbdgenError(f"unknown kernel(s) {', '.join(map(repr, bad))}; known: {', '.join(_REGISTRY)}")
    if not names:
        raise RbdgenError(f"no kernels selected; known: {', '.join(_REGISTRY)}")
    return tuple(k for k in _REGISTRY if k in names)


def applicable(model, names=None) -> tuple:
    """:func:`resolve` for ``model``: with ``names=None``, every kernel the model can have (the
    frame kernels only when frames are selected), but the variants (``*_fext``: built when asked
    for by name); asked-for kernels are checked with :func:`check_frames`."""
    if names is None:
        return tuple(k for k in resolve(None) if (not _REGISTRY[k].frames or getattr(model, "nf", 0))
                     and (not _REGISTRY[k].constraints or getattr(model, "nc", 0))
                     and _REGISTRY[k].variant_of is None and not _REGISTRY[k].opt_in)
    out = resolve(names)
    check_frames(model, out)
    return out


def check_frames(model, kernels) -> None:
    """Refuse constrained_fd for a model without constraints, and frame kernels for one without
    selected frames (one line saying how)."""
    need = [k for k in kernels if get(k).constraints]
    if need and not getattr(model, "nc", 0):
        raise RbdgenError(f"{', '.join(need)} is generated for contacts and loops chosen when generating, and none "
                          f"is given: pass constraints=[rbdgen.Contact(...), rbdgen.Loop(...)] (rbdgen generate "
                          f"--contact FRAME:3d|6d, --loop FRAME_A:FRAME_B:3d|6d)")
    need = [k for k in kernels if get(k).frames]
    if need and not getattr(model, "nf", 0):
        raise RbdgenError(f"{', '.join(need)} work on frames and none is selected: pass frames=[link names] "
                          f"(rbdgen generate --frames LINK,…; 'leaves' selects the URDF's leaf links: "
                          f"{', '.join(getattr(model, 'leaf_links', ())) or 'none'})")


# ---- tracing ---------------------------------------------------------------------------------

_cache: collections.OrderedDict = collections.OrderedDict()
_cache_lock = threading.Lock()
#: traced kernels kept: the backends of one generate/build/validate/inspect call share them
_CACHE_SIZE = 24


def trace_lowered(model, name: str, unroll, fold: bool = True):
    """(kernel, rolled) for ``unroll`` (True, False or "auto", :func:`rbdgen.ir.roll.check_unroll`'d):
    the folded trace where the kernel is printed unrolled; the generic trace (the model's numbers
    as parameters) where it is rolled — always for False, for "auto" from
    :data:`rbdgen.ir.roll.AUTO_OPS` live operations of the folded trace. Shared by the targets
    that have both lowerings (cpu, cuda)."""
    from .ir.roll import rolled_lowering

    rolled = unroll is False
    if not rolled:
        kernel = trace(model, name, fold=fold)
        if not rolled_lowering(unroll, kernel):
            return kernel, False
    return trace(model, name, fold=fold, generic=True), True


def trace(model, name: str, fold: bool = True, cached: bool = True, generic: bool = False):
    """The :class:`~rbdgen.ir.graph.Kernel` of ``name`` for ``model``: the algorithm traced over
    the declared inputs, its outputs laid out as declared. Traced once per (model, kernel, fold,
    generic) and shared by every backend (traced kernels are not modified after tracing).
    ``generic``: the model's per-body numbers as parameters that are never folded (the rolled
    lowering's trace, :class:`~rbdgen.algorithms.trace.Trace`)."""
    d = get(name)
    if not cached:
        return _trace(model, d, fold, generic)
    key = (id(model), name, bool(fold), bool(generic))
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[0]() is model:
            _cache.move_to_end(key)
            return hit[1]
    kernel = _trace(model, d, fold, generic)
    try:
        ref = weakref.ref(model)
    except TypeError:  # not weak-referenceable: do not cache
        return kernel
    with _cache_lock:
        _cache[key] = (ref, kernel)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return kernel


@pausing
def _trace(model, d: KernelDecl, fold: bool, generic: bool = False):
    from .algorithms.trace import Coupling, Trace
    from .ir.graph import Array, MatMul

    if d.needs_minv:
        check_invertible(model, d.name)
    if d.check is not None:
        d.check(model, d.name)
    check_frames(model, (d.name,))
    coupled = getattr(model, "coupled", False)
    if coupled and d.coupled is None:
        raise UnsupportedError(f"kernel {d.name} has no form for coupled mimic joints "
                               f"({', '.join(model.followers)}); load with mimic='independent'",
                               file=getattr(model, "source", None))
    for reassociate in (True, False):
        t = Trace(model.tree if coupled else model, fold, generic, reassociate=reassociate)
        ins = [t.inputs(a.name, a.size(model)) for a in d.inputs]
        try:
            values = d.coupled(t, Coupling(t, model), *ins) if coupled else d.algorithm(t, *ins)
            break
        except ZeroDivisionError as e:  # a structural zero divisor check_invertible did not foresee
            # summing and cancelling terms (Graph.reassociate) can make exact a zero that the
            # algorithm as written only reaches in rounding: redundant contacts' LDLᵀ pivot, which
            # the kernel reports at run time (ContactError, docs/contact.md). Traced again without.
            if reassociate and t.g.reassociate:
                continue
            raise UnsupportedError(f"kernel {d.name}: {e} (the model makes a divisor identically zero)",
                                   file=getattr(model, "source", None)) from None
    missing = set(d.output_names) - set(values)
    if missing or set(values) - set(d.output_names):
        raise AssertionError(f"{d.name}: the algorithm returned {sorted(values)}, declared {list(d.output_names)}")
    outputs, temps, post, epi = [], [], [], []
    for a in d.outputs:
        val = values[a.name]
        if not isinstance(val, Product):
            outputs.append((Array(a.name, a.dims(model)), list(val)))
    shapes = {a.name: a.dims(model) for a in d.outputs}
    for a in d.outputs:
        val = values[a.name]
        if not isinstance(val, Product):
            continue
        *lead, m = shapes[a.name]
        n = int(np.prod(lead))  # an output of more dimensions: its last one is the product's columns
        ops = []
        for operand in (val.a, val.b):
            if isinstance(operand, str):
                ops.append((operand, int(np.prod(shapes[operand]))))
            else:
                tname, tvals = operand
                if tname not in {s.name for s, _ in temps}:
                    temps.append((Array(tname, (len(tvals),)), list(tvals)))
                ops.append((tname, len(tvals)))
        k = ops[0][1] // n
        # B's structural zeros: entries that are the graph's constant zero (e.g. ∂τ_i/∂q_j for
        # joints on different branches), the same for every input; an operand that is itself a
        # product's output has no traced values and counts as dense
        traced = {s.name: vals for s, vals in outputs + temps}
        bvals = traced.get(ops[1][0])
        spans = None if bvals is None else MatMul.spans_of([not v.is_zero() for v in bvals], k, m)
        post.append(MatMul(a.name, ops[0][0], ops[1][0], n, k, m, float(val.scale), spans))
        epi.append(Array(a.name, shapes[a.name]))
    kern = t.kernel(d.name, [Array(a.name, a.dims(model)) for a in d.inputs], outputs, d.doc)
    kern.temps, kern.post, kern.epilogue_outputs = temps, post, epi
    if post:
        kern.output_order = list(d.output_names)
    if generic:
        # the model's numbers are constants again; what the trace computed from them alone (a
        # leaf body's articulated inertia, its 1/D) is computed here, once per body in float64,
        # as the folded trace does: the rolled kinds read it from their tables instead of
        # computing it in the kernel's arithmetic (an ap_fixed<32,16> datapath lost 5-10x of its
        # accuracy on aba and minv so)
        t.g.params_to_consts()
        t.g.fold_constants()
        kern.__dict__.pop("_live", None)
    return kern


def supports(model, name: str) -> bool:
    """Whether kernel ``name``'s own check (:attr:`KernelDecl.check`) accepts ``model``: False
    where it would refuse it (the Schur-complement kernels on a tree)."""
    d = get(name)
    if d.check is None:
        return True
    try:
        d.check(model, name)
    except UnsupportedError:
        return False
    return True


def check_model(model, kernels) -> None:
    """Refuse, before any work, a model that some of ``kernels`` cannot be generated for."""
    for k in kernels:
        if get(k).check is not None:
            get(k).check(model, k)
    for k in kernels:
        if get(k).needs_minv:
            check_invertible(model, k)
            return


def check_invertible(model, kernel: str) -> None:
    """Refuse (one line naming the joint, its link and what to do) a model whose mass matrix is
    singular whatever q is: a joint that moves nothing with mass or inertia (typically a leaf
    link without ``<inertial>`` on a revolute or prismatic joint). M_ii = S_iᵀ I^c_i S_i is then
    exactly zero; it is evaluated at the neutral and at a random configuration so that a
    divisor that vanishes only at some q is not mistaken for a structural one."""
    from . import reference as ref

    rng = np.random.default_rng(0)
    qs = [model.random_q(rng) for _ in range(2)]
    zero = None
    for q in qs:
        d = ref.crba_diagonal(model, q)
        z = {i for i in range(model.nv) if not d[i] > 0.0}
        zero = z if zero is None else zero & z
    if not zero:
        return
    col = min(zero)
    body = next(b for b in range(model.nb) if model.v_start[b] <= col < model.v_start[b] + model.nv_joint(b))
    needing = ", ".join(k for k in _REGISTRY if _REGISTRY[k].needs_minv)
    raise UnsupportedError(
        f"joint '{model.joint_names[body]}' (link '{model.body_names[body]}'): nothing with mass or inertia "
        f"moves with this joint (no <inertial> on the link or below it, or zero mass), so the mass matrix "
        f"is singular and {kernel} cannot be generated; give the link an <inertial>, make the joint fixed, "
        f"or leave out the kernels that need M⁻¹ ({needing}: --skip-kernels)", file=getattr(model, "source", None))


# ---- inputs for validation and tests ---------------------------------------------------------

def inputs_of(kernels) -> set:
    """The names of the inputs that ``kernels`` (names) read."""
    return {x for k in kernels for x in get(k).input_names}


def _to_draw(names) -> list:
    """The declared inputs to draw, in order: every one (``names`` None), or those up to the last
    of ``names`` (the inputs needed). The ones drawn are then the same draws as with every input;
    the ones after are not drawn (M⁻¹, last, is nv² values a state: 16 states of a 3 000-link
    chain are 1.2 GB, and ~10¹² flops of products to draw)."""
    items = list(INPUTS.items())
    if names is None:
        return items
    order = [name for name, _ in items]
    return items[:max((order.index(x) for x in names), default=-1) + 1]


def random_inputs(model, n: int, seed: int = 0, names=None) -> dict:
    """``n`` random values of every input in :data:`INPUTS` (seeded; q within the joint limits,
    unit quaternions), as ``(n, size)`` float64 arrays; ``names``: of the inputs needed
    (:func:`_to_draw`)."""
    rng = np.random.default_rng(seed)
    return {name: np.asarray(a.sample(model, rng, n), dtype=float) for name, a in _to_draw(names)}


def complete_inputs(model, env: dict, seed: int = 0, names=None) -> dict:
    """``env`` (input name → ``(n, size)`` array, at least ``q``) with every declared input it
    lacks drawn as :func:`random_inputs` draws it (seeded): for callers that choose some inputs
    themselves (scales, ranges) and must still cover every kernel; ``names``: the inputs needed
    (:func:`_to_draw`)."""
    n = np.shape(env["q"])[0]
    rng = np.random.default_rng(seed)
    out = dict(env)
    for name, a in _to_draw(names):
        if name not in out:
            out[name] = np.asarray(a.sample(model, rng, n), dtype=float)
    return out


def reference(model, name: str, env: dict):
    """The reference outputs of kernel ``name`` on the inputs in ``env``, always a tuple."""
    d = get(name)
    out = d.reference(model, *(env[a] for a in d.input_names))
    return out if isinstance(out, tuple) else (out,)
