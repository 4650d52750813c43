"""The target interface: what a code-generation target is, and the registry of targets.

A target is one :class:`Target` subclass, registered once with :func:`register`. It says

* which options it takes (:class:`Option`: the Python keyword, the CLI flag, its help, and at
  which *stage* it acts: ``generate`` changes the sources, ``compile`` how they are built,
  ``run`` how validation runs them, ``cost`` what ``inspect --cost`` reports);
* how it turns traced kernels into source files (:meth:`Target.generate` →
  :class:`~rbdgen.codegen.sources.Sources`);
* how it compiles and loads sources (:meth:`Target.load`): the same path for
  :func:`rbdgen.build` (sources just generated) and for a generated package read from disk;
* optionally, what it adds to ``inspect --cost`` and how validation prepares its kernels.

``rbdgen.build``, ``rbdgen generate``, ``rbdgen validate`` and ``rbdgen inspect --cost`` dispatch
through :func:`get_target`; none of them names a target. The targets are the sub-packages of
``rbdgen/targets/`` (one folder each), found and imported on first use: a new target is a new
folder, with no list to edit here.
"""
from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..codegen.sources import Sources
from ..errors import RbdgenError
from ..model.urdf import MAX_NAME_LENGTH
from ..toolchain import gencache
from ..toolchain.rebuild import load as load_remembering

STAGES = ("generate", "compile", "run", "cost")

#: float64 agreement between two independent float64 computations of the same quantity
TOL64 = 1e-9

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
OPT = Option("opt", "--opt", "compiler optimisation flag (default cpu: -O3, and -Os for kernels of 5 000 statements or more; cuda: -O3; hls C simulation: -O1; verilog simulation: -O0)", ("compile",),
             {"metavar": "-ON"}, check=check_opt)
CXX = Option("cxx", "--cxx", "C++ compiler (default: $CXX, else g++)", ("compile",), {"metavar": "PATH"})


def unroll_option(value) -> str:
    """The ``unroll`` option's checked value, spelled "yes", "no" or "auto" (a False would read
    as "not given" on the command line); the targets' ``generate`` turn it back."""
    from ..ir.roll import check_unroll

    return {True: "yes", False: "no", "auto": "auto"}[check_unroll(value)]


UNROLL = Option("unroll", "--unroll", "yes (default): straight-line code, every body unrolled; no: "
                "loops over the bodies, one piece of code per kind of body (big robots: seconds to build, small "
                "machine code; cuda: the block shape's lanes share out the bodies of each tree level; hls: a module "
                "per kind, shared by its members); auto: rolled for the kernels of at least rbdgen.ir.roll.AUTO_OPS "
                "operations", ("generate", "cost"),
                {"metavar": "yes|no|auto"}, check=unroll_option)


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

    def subset(self, sources: Sources, kernels, dtype) -> Sources | None:
        """The sources of a library that holds only ``kernels`` (for ``dtype``), which
        :meth:`load` compiles and loads as it does the whole: a generated package compiles each
        kernel on its first call (:class:`rbdgen.package.load.PackageKernels`). None (the
        default) where the target compiles its kernels only all together: then a package's
        first call compiles every one."""
        return None

    #: a warm :meth:`build` takes the generated sources from the generation cache
    #: (:mod:`rbdgen.toolchain.gencache`)
    cache_generation: bool = True
    #: modules besides the target's own whose module-level settings shape its sources
    salt_modules: tuple = ("rbdgen.codegen.printer", "rbdgen.codegen.trig", "rbdgen.codegen.escape")

    def __reduce__(self):
        """A target pickles as its name (the registered instance is what unpickling returns):
        pickled kernels name the target that rebuilds them (:mod:`rbdgen.toolchain.rebuild`)."""
        return get_target, (self.name,)

    def modules(self) -> list:
        """The names of the target's own modules: every module of its folder under
        rbdgen/targets/ (a target defined elsewhere: its class's module)."""
        name = type(self).__module__
        if not name.startswith(__package__ + "."):
            return [name]
        pkg = importlib.import_module(".".join(name.split(".")[:3]))
        subs = [f"{pkg.__name__}.{m.name}" for m in pkgutil.iter_modules(getattr(pkg, "__path__", []))]
        return [pkg.__name__, *sorted(subs)]

    def generation_salt(self) -> str:
        """The module-level settings (UPPER_CASE names: part sizes, dialects, limits) of the
        target's modules and of :attr:`salt_modules`, as text for the generation cache's key: a
        test or a study that monkeypatches one gets sources generated with it."""
        parts = []
        for name in (*self.modules(), *self.salt_modules):
            mod = importlib.import_module(name)
            for k, v in sorted(vars(mod).items()):
                if k.isupper() and not callable(v) and not isinstance(v, type(importlib)):
                    r = _stable_repr(v)
                    if " at 0x" not in r:  # an object without a stable repr: left out
                        parts.append(f"{name}.{k}={r}")
        return "\n".join(parts)

    def build(self, model, kernels: tuple, dtype, *, fold: bool = True, name=None, progress=None, **options):
        label = str(name if name is not None else model.name)
        if len(label) > MAX_NAME_LENGTH:  # the name makes the file names: an OSError while compiling, else
            raise ValueError(f"{'name' if name is not None else 'the robot name'} {label[:24]!r}… is {len(label)} "
                             f"characters long, at most {MAX_NAME_LENGTH} (it names the generated files)")
        st = self.split_options(options, where=f"build(target={self.name!r})")

        def generate():
            return self.generate(model, kernels, dtypes=(dtype,), name=name, fold=fold, progress=progress,
                                 **st["generate"])

        if self.cache_generation:
            src = gencache.sources(self, model, kernels, dtype, name, fold, st["generate"], generate, progress)
        else:
            src = generate()
        # the target's load, remembering what it compiled (pickling)
        return load_remembering(self, src, model, dtype, progress=progress, **st["compile"])

    def for_validation(self, kern, **run_options):
        """The kernels ``rbdgen validate`` runs (e.g. the CUDA program emulated on the CPU)."""
        return kern

    def tolerance(self, decl, dtype, options: dict):
        """The bound ``rbdgen validate`` holds kernel ``decl`` to (relative max-norm error), or
        None when none is known. float64: 1e-9 (two independent float64 computations; see
        tests/conftest.py); float32: the declared, measured bound."""
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


_FOLDER = Path(__file__).resolve().parent


def _ensure_loaded() -> None:
    """Import every target package (each folder of rbdgen/targets/ with an __init__.py), which
    registers its target."""
    for info in pkgutil.iter_modules([str(_FOLDER)]):
        if info.ispkg:
            importlib.import_module(f"{__package__}.{info.name}")


def targets() -> tuple:
    """The targets' names in folder order (cpu first), whatever order they were imported in (the
    verilog target imports the hls one: registration order depends on who imported what first)."""
    _ensure_loaded()
    return tuple(sorted(_TARGETS))


def get_target(name: str) -> Target:
    _ensure_loaded()
    if name not in _TARGETS:
        raise RbdgenError(f"unknown target {name!r} (available: {', '.join(sorted(_TARGETS))})")
    return _TARGETS[name]


def all_options() -> list:
    """Every target's options, each once (shared ones by identity), in the targets' order."""
    _ensure_loaded()
    seen, out = set(), []
    for t in (_TARGETS[n] for n in sorted(_TARGETS)):
        for o in t.options:
            if o.name not in seen:
                seen.add(o.name)
                out.append(o)
    return out


def targets_of(option_name: str) -> tuple:
    _ensure_loaded()
    return tuple(t.name for t in _TARGETS.values() if option_name in t.option_names())
