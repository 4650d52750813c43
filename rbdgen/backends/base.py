"""The backend interface: what a code-generation target is, and the registry of targets.

A target is one :class:`Target` subclass, registered once with :func:`register`. It says

* which options it takes (:class:`Option`: the Python keyword, the CLI flag, its help, and at
  which *stage* it acts: ``generate`` changes the sources, ``compile`` how they are built,
  ``run`` how validation runs them, ``cost`` what ``inspect --cost`` reports);
* how it turns traced kernels into source files (:meth:`Target.generate` → :class:`Sources`);
* how it compiles and loads sources (:meth:`Target.load`): the same path for
  :func:`rbdgen.build` (sources just generated) and for a generated package read from disk;
* optionally, what it adds to ``inspect --cost`` and how validation prepares its kernels.

``rbdgen.build``, ``rbdgen generate``, ``rbdgen validate`` and ``rbdgen inspect --cost`` dispatch
through :func:`get_target`; none of them names a target.
"""
from __future__ import annotations

import re
from importlib import import_module
from dataclasses import dataclass, field

from ..errors import RbdgenError

STAGES = ("generate", "compile", "run", "cost")

#: float64 agreement between two independent float64 computations of the same quantity
TOL64 = 1e-9

#: floating-point dtypes of the CPU and CUDA targets: file/symbol tag and C type
DTYPES = {"float64": ("f64", "double"), "float32": ("f32", "float")}


def c_identifier(name: str) -> str:
    """``name`` as a C identifier: other characters become '_', ``r_`` in front of a digit."""
    s = re.sub(r"[^0-9a-zA-Z_]", "_", name)
    if not s or s[0].isdigit():
        s = "r_" + s
    return s


def prefix_for(name: str) -> str:
    """The symbol and file prefix of generated code: ``rbd_<name as a lower-case identifier>``."""
    ident = c_identifier(name).lower()
    return ident if ident.startswith("rbd_") else "rbd_" + ident


@dataclass(frozen=True)
class Option:
    """A target option. ``click`` holds what the CLI needs besides the flag (type, metavar,
    is_flag, callback); the default is always "not given" (``None``/``False``) on the command
    line, so that the CLI can tell which options the user gave and refuse those that the chosen
    target does not take. The target applies its own default."""

    name: str                   # Python keyword, e.g. "clock_mhz"
    flag: str                   # CLI flag, e.g. "--clock-mhz"
    help: str
    stages: tuple               # subset of STAGES
    click: dict = field(default_factory=dict, compare=False, hash=False)
    #: checks and normalises a given value (RbdgenError saying what is wrong); the CLI runs it
    #: while parsing, so a bad value is refused before any work
    check: object = field(default=None, compare=False, hash=False)


_OPT_RE = re.compile(r"-O([0-3sgz]|fast)?")


def check_opt(opt: str) -> str:
    if not isinstance(opt, str) or not _OPT_RE.fullmatch(opt):
        raise RbdgenError(f"expected an optimisation flag such as -O3 or -O1, got {opt!r}")
    return opt


# options several targets share (one object each, so the CLI declares each flag once)
OPT = Option("opt", "--opt", "compiler optimisation flag (default cpu: -O3, and -Os for kernels of 5 000 statements or more; cuda: -O3; hls C simulation: -O1)", ("compile",),
             {"metavar": "-ON"}, check=check_opt)
CXX = Option("cxx", "--cxx", "C++ compiler (default: $CXX, else g++)", ("compile",), {"metavar": "PATH"})


@dataclass
class Sources:
    """What :meth:`Target.generate` produced, and what :meth:`Target.load` compiles.

    ``kernels``: per kernel its manifest entry (``doc``, ``inputs`` [{name, size}], ``outputs``
    [{name, shape}], ``ops``). ``info``: the target's own facts (JSON-able; written into the
    manifest as they are and read back from it): which files to compile for which dtype, etc."""

    target: str
    prefix: str
    files: dict           # file name → text
    kernels: dict
    info: dict
    dtypes: tuple         # dtypes (or datapath types) the sources hold


def check_dtype(sources: Sources, dtype) -> str:
    """``dtype``'s name, if ``sources`` hold code for it (a package generated for other dtypes
    is an error that says how to regenerate it)."""
    import numpy as np

    dt = np.dtype(dtype).name
    if dt not in sources.info["sources"]:
        raise RbdgenError(f"these sources were generated for {', '.join(sources.info['sources'])}, not {dt}; "
                          f"regenerate them with --dtype {dt}")
    return dt


def kernel_entry(printed) -> dict:
    """The manifest entry of a printed kernel (see :class:`Sources`)."""
    return {
        "doc": printed.doc,
        "inputs": [{"name": a.name, "size": int(a.size)} for a in printed.inputs],
        "outputs": [{"name": a.name, "shape": [int(s) for s in a.shape]} for a in printed.outputs],
        "ops": {c: int(n) for c, n in printed.counts.items()},
    }


def _stable_repr(v) -> str:
    """``repr(v)`` with sets sorted: a set of strings is ordered by the process's string hash
    seed, and the generation cache's key must be the same in every process."""
    if isinstance(v, (set, frozenset)):
        return "{" + ", ".join(sorted(_stable_repr(x) for x in v)) + "}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_stable_repr(a)}: {_stable_repr(b)}" for a, b in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return type(v).__name__ + "(" + ", ".join(_stable_repr(x) for x in v) + ")"
    return repr(v)


class Target:
    """Base class of a code-generation target (see the module docstring)."""

    name: str = ""
    help: str = ""
    options: tuple = ()
    #: the generated folder is an importable Python package (an ``__init__.py`` is written)
    python_package: bool = True
    #: what the package's ``load()`` needs besides rbdgen
    compiler: str = "a C++ compiler"
    #: what ``load()`` returns (for the package docstring)
    returns: str = ""

    # -- options -------------------------------------------------------------------------
    def option_names(self, *stages) -> set:
        return {o.name for o in self.options if not stages or set(o.stages) & set(stages)}

    def split_options(self, opts: dict, *, where: str = "") -> dict:
        """``opts`` by stage; an option this target does not take is an error naming it."""
        known = {o.name: o for o in self.options}
        bad = sorted(k for k in opts if k not in known)
        if bad:
            raise RbdgenError(f"{where or self.name}: option(s) {', '.join(bad)} do not apply to target "
                              f"{self.name!r} (it takes: {', '.join(sorted(known)) or 'none'})")
        out = {s: {} for s in STAGES}
        for k, v in opts.items():
            if v is not None and known[k].check is not None:
                v = known[k].check(v)
            for s in known[k].stages:
                out[s][k] = v
        return out

    # -- the work ------------------------------------------------------------------------
    def generate(self, model, kernels: tuple, *, dtypes: tuple, name: str, fold: bool = True, progress=None,
                 **options) -> Sources:
        raise NotImplementedError

    def load(self, sources: Sources, model, dtype, *, progress=None, **options):
        """Compile (cached) and load ``sources`` for ``dtype``; ``model`` is a RobotModel or a
        generated package's PackageModel (sizes and names only)."""
        raise NotImplementedError

    #: a warm :meth:`build` takes the generated sources from the generation cache
    #: (:mod:`rbdgen.jit.gencache`)
    cache_generation: bool = True
    #: modules besides the target's own whose module-level settings shape its sources
    salt_modules: tuple = ("rbdgen.backends.printer", "rbdgen.backends.trig", "rbdgen.backends.escape")

    def generation_salt(self) -> str:
        """The module-level settings (UPPER_CASE names: part sizes, dialects, limits) of the
        target's module and of :attr:`salt_modules`, as text for the generation cache's key: a
        test or a study that monkeypatches one gets sources generated with it."""
        import importlib

        parts = []
        for name in (type(self).__module__, *self.salt_modules):
            mod = importlib.import_module(name)
            for k, v in sorted(vars(mod).items()):
                if k.isupper() and not callable(v) and not isinstance(v, type(importlib)):
                    r = _stable_repr(v)
                    if " at 0x" not in r:  # an object without a stable repr: left out
                        parts.append(f"{name}.{k}={r}")
        return "\n".join(parts)

    def build(self, model, kernels: tuple, dtype, *, fold: bool = True, name=None, progress=None, **options):
        st = self.split_options(options, where=f"build(target={self.name!r})")

        def generate():
            return self.generate(model, kernels, dtypes=(dtype,), name=name, fold=fold, progress=progress,
                                 **st["generate"])

        if self.cache_generation:
            from ..jit import gencache

            src = gencache.sources(self, model, kernels, dtype, name, fold, st["generate"], generate, progress)
        else:
            src = generate()
        from ..jit.rebuild import load  # the target's load, remembering what it compiled (pickling)

        return load(self, src, model, dtype, progress=progress, **st["compile"])

    def for_validation(self, kern, **run_options):
        """The kernels ``rbdgen validate`` runs (e.g. the CUDA program emulated on the CPU)."""
        return kern

    def tolerance(self, decl, dtype, options: dict):
        """The bound ``rbdgen validate`` holds kernel ``decl`` to (relative max-norm error), or
        None when none is known. float64: 1e-9 (two independent float64 computations; see
        tests/conftest.py); float32: the declared, measured bound."""
        import numpy as np

        return TOL64 if np.dtype(dtype) == np.float64 else decl.float32_tol

    def describe(self, options: dict) -> str:
        """Short description of a build for the validate header."""
        return self.name

    def cost_sections(self, model, kernels: tuple, *, progress=None, **options) -> list:
        """Text blocks ``inspect --cost`` prints after the op counts (none by default)."""
        return []

    def regenerate_flags(self, options: dict) -> list:
        """CLI flags that reproduce ``options`` (the generate stage)."""
        flags = []
        by = {o.name: o for o in self.options}
        for k, v in sorted(options.items()):
            if v is None or v is False or k not in by:
                continue
            if isinstance(v, (tuple, list)):
                v = ",".join(map(str, v))
            flags.append(by[k].flag if v is True else f"{by[k].flag} {v}")
        return flags

    def manifest_options(self, options: dict) -> dict:
        """The generate-stage options as recorded in the manifest."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in sorted(options.items()) if v is not None}


_TARGETS: dict = {}


def register(target: Target) -> Target:
    if not target.name or target.name in _TARGETS:
        raise ValueError(f"target {target.name!r} has no name or is registered twice")
    _TARGETS[target.name] = target
    return target


def _ensure_loaded() -> None:
    for module in ("cpu", "cuda", "hls"):  # each registers its target
        import_module(f"{__package__}.{module}")


def targets() -> tuple:
    _ensure_loaded()
    return tuple(_TARGETS)


def get_target(name: str) -> Target:
    _ensure_loaded()
    if name not in _TARGETS:
        raise RbdgenError(f"unknown target {name!r} (available: {', '.join(_TARGETS)})")
    return _TARGETS[name]


def all_options() -> list:
    """Every target's options, each once (shared ones by identity), in registration order."""
    _ensure_loaded()
    seen, out = set(), []
    for t in _TARGETS.values():
        for o in t.options:
            if o.name not in seen:
                seen.add(o.name)
                out.append(o)
    return out


def targets_of(option_name: str) -> tuple:
    _ensure_loaded()
    return tuple(t.name for t in _TARGETS.values() if option_name in t.option_names())
