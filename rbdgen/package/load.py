"""Loading a generated package: read its manifest and files, and hand them to the target's
:meth:`~rbdgen.targets.base.Target.load` — the same compile-and-load path as
:func:`rbdgen.build`, so a package and a build of the same robot give the same library.

A package's ``load()`` compiles nothing yet: it returns a :class:`PackageKernels`, whose kernels
each compile on their first call, alone (:meth:`~rbdgen.targets.base.Target.subset`: a library of
that kernel's sources, through the same compile cache), unless the whole library is already in
the cache (``rbdgen build DIR``, ``pkg.build()``, an earlier process): then that is loaded."""
from __future__ import annotations

import hashlib
import json
import threading
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..codegen.sources import Sources, check_dtype
from ..kernels.frames import install as install_by_name
from ..model.model import JOINT_DIMS
from ..model.constraints import constraint_from_json
from ..kernels.loaded import MissingKernelError
from ..progress import labelled, reporting
from ..targets import get_target
from ..targets.base import Target
from ..toolchain import rebuild
from ..toolchain.compiler import NotCached, cached_only
from ..toolchain.rebuild import load as load_remembering
from ..errors import RbdgenError, RbdgenWarning

#: bump when the manifest or the package layout changes incompatibly
FORMAT = 2
MANIFEST = "manifest.json"
INIT = "__init__.py"


def _why(e: OSError) -> str:
    return e.strerror or str(e)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class PackageModel:
    """What the loaded kernels read from a RobotModel (sizes and name), plus the joint and body
    names: a generated package does not carry the full model."""

    name: str
    nq: int
    nv: int
    nb: int
    floating_base: bool
    joint_names: tuple
    body_names: tuple = ()
    frames: tuple = ()
    #: each body's joint kind (the manifest's joint_types): the gradient rules of rbdgen.autodiff
    #: read them to map tangent derivatives onto q's coordinates (a floating, spherical or planar
    #: joint's q is not its tangent)
    joint_types: tuple = ()
    #: the contacts and loops its constrained_fd was generated for (rbdgen.Contact, rbdgen.Loop)
    constraints: tuple = ()

    @property
    def nf(self) -> int:
        return len(self.frames)

    @property
    def nc(self) -> int:
        return len(self.constraints)

    def frame(self, name: str) -> str:
        """``name`` if it is one of the package's frames (what contact_fd checks its contacts'
        and loops' frames with); else a ValueError naming them."""
        self.frame_index(name)
        return name

    def _starts(self):
        dims = [JOINT_DIMS.get(t) for t in self.joint_types]
        if not dims or None in dims or sum(d[0] for d in dims) != self.nq or sum(d[1] for d in dims) != self.nv:
            raise ValueError(f"package {self.name!r}: its joints' layout in q and v is not known here (mimic joints "
                             "coupled, or an older manifest); differentiate the kernels of rbdgen.build(model) instead")
        q0, v0 = np.cumsum([0] + [d[0] for d in dims]), np.cumsum([0] + [d[1] for d in dims])
        return tuple(int(x) for x in q0[:-1]), tuple(int(x) for x in v0[:-1])

    def nq_joint(self, i: int) -> int:
        return JOINT_DIMS[self.joint_types[i]][0]

    def nv_joint(self, i: int) -> int:
        return JOINT_DIMS[self.joint_types[i]][1]

    @property
    def q_start(self) -> tuple:
        return self._starts()[0]

    @property
    def v_start(self) -> tuple:
        return self._starts()[1]

    def frame_index(self, name: str) -> int:
        if not isinstance(name, str):
            raise ValueError(f"a frame is named by its URDF link name (a string), got {type(name).__name__}")
        try:
            return self.frames.index(name)
        except ValueError:
            raise ValueError(f"frame '{name}' is not one of this package's frames "
                             f"({', '.join(self.frames) or 'none'}; regenerate with --frames)") from None

    def __repr__(self):
        base = "floating" if self.floating_base else "fixed"
        return f"PackageModel({self.name!r}, {base} base, nb={self.nb}, nq={self.nq}, nv={self.nv})"


def is_generated_package(path: Path) -> bool:
    try:
        m = json.loads((Path(path) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(m, dict) and m.get("generator") == "rbdgen"


def read_manifest(pkg_dir) -> dict:
    path = Path(pkg_dir) / MANIFEST
    try:
        m = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise RbdgenError(f"cannot read {path}: {_why(e)}") from e
    except ValueError as e:
        raise RbdgenError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(m, dict) or m.get("generator") != "rbdgen":
        raise RbdgenError(f"{path}: not a manifest written by rbdgen generate")
    if m.get("format") != FORMAT:
        raise RbdgenError(f"{path}: package format {m.get('format')!r}, this rbdgen reads format {FORMAT}; "
                          f"regenerate the package with `rbdgen generate`")
    return m


def read_sources(pkg_dir, m: dict | None = None) -> Sources:
    """The package's files and manifest as the :class:`Sources` its target generated. A file
    that differs from what rbdgen wrote (sha256 in the manifest) is used as it is, with a
    warning."""
    pkg_dir = Path(pkg_dir)
    m = m or read_manifest(pkg_dir)
    files = {}
    for fn, digest in sorted(m["files"].items()):
        if fn in (INIT, MANIFEST):
            continue
        try:
            data = (pkg_dir / fn).read_bytes()
        except OSError as e:
            raise RbdgenError(f"package '{m['package']}' in {pkg_dir}: cannot read {fn}: {_why(e)}") from e
        if sha256(data) != digest:
            warnings.warn(f"{pkg_dir / fn} differs from the file rbdgen generated (sha256 in {MANIFEST}); "
                          f"building it as it is", RbdgenWarning, stacklevel=3)
        files[fn] = data.decode("utf-8")
    dtypes = tuple(m["options"]["dtypes"] or ())
    kernels = {k: m["kernels"][k] for k in m["kernel_order"]}  # JSON keys are sorted; keep the canonical order
    return Sources(m["options"]["target"], m["prefix"], files, kernels, m["target"], dtypes)


def load_package(pkg_dir, dtype="float64", *, kernels=None, lazy: bool = False, progress=None, **options):
    """Compile (cached) and load the sources of a generated package with its target's loader;
    ``options`` are the target's compile options (cpu: opt, march, cxx; cuda: opt, arch, nvcc;
    hls: opt, csim, cxx). The kernels' ``model`` is a :class:`PackageModel`.

    ``kernels`` (names, or one comma-separated string): only these, in a library of their own
    (where the target compiles its kernels only all together, every one). ``lazy=True``: a
    :class:`PackageKernels` at once, compiling each kernel on its first call (what a package's
    ``load()`` returns). ``progress``: a line on stderr while compiling when it is a terminal
    (default), ``False``, ``True`` or a callable (:mod:`rbdgen.progress`)."""
    m = read_manifest(pkg_dir)
    target = get_target(m["options"]["target"])
    st = target.split_options({k: v for k, v in options.items() if v is not None}, where="load_package")
    extra = sorted(set(options) - target.option_names("compile"))
    if extra:
        raise RbdgenError(f"load_package: {', '.join(extra)} are not compile options of target {target.name!r}")
    src = read_sources(pkg_dir, m)
    model = PackageModel(m["robot"], m["nq"], m["nv"], m["nb"], m["floating_base"], tuple(m["joint_names"]),
                         tuple(m.get("body_names", ())), tuple(m.get("frames", ())), tuple(m.get("joint_types", ())),
                         tuple(constraint_from_json(c) for c in m.get("constraints", ())))
    label = str(m.get("package") or m["robot"])
    if lazy:
        if kernels is not None:
            raise RbdgenError("load_package: kernels= and lazy=True are alternatives (lazy loads each kernel called)")
        return PackageKernels(target, src, model, dtype, st["compile"], progress=progress, label=label)
    if kernels is not None:
        names = [k.strip() for k in kernels.split(",")] if isinstance(kernels, str) else list(kernels)
        unknown = [k for k in names if k not in src.kernels]
        if unknown:
            raise RbdgenError(f"package '{label}' has no kernel {', '.join(map(repr, unknown))} "
                              f"(it has: {', '.join(src.kernels)})")
        src = target.subset(src, names, dtype) or src
    with reporting(progress) as p:
        # the target's load, remembering what it compiled (pickling)
        return load_remembering(target, src, model, dtype, progress=labelled(p, label), **st["compile"])


class _FirstCall:
    """A kernel of :class:`PackageKernels` before its first call, which compiles (cached) and
    loads it, then calls it; the kernels then hold the loaded method itself."""

    def __init__(self, owner, name):
        self._owner, self._name = owner, name
        self.__doc__ = owner._sources.kernels[name].get("doc")

    def __call__(self, *args, **kw):
        return self._owner._resolve(self._name)(*args, **kw)

    def __repr__(self):
        return f"<kernel {self._name} of package {self._owner._label!r}: compiled on its first call>"


class PackageKernels:
    """A generated package's kernels for one dtype, compiled as they are first called: what the
    package's ``load()`` returns and its functions call.

    ``kern.rnea(q, v, a)`` (and ``kern.kernel("rnea")``, the by-name frame and contact methods)
    compiles on its first call a library of that kernel alone (about its own translation units'
    compile time, not the package's), through the compile cache, with a progress line on a
    terminal (``progress``, :mod:`rbdgen.progress`); a library already in the cache is only
    loaded. Where the package's whole library is in the cache (``rbdgen build DIR``, or
    :meth:`build` in any process), every kernel is taken from it instead. :meth:`build` compiles
    every kernel now, as one library, and returns them
    (:class:`~rbdgen.kernels.loaded.CompiledKernels` for the CPU). Where the target compiles its
    kernels only together (:meth:`~rbdgen.targets.base.Target.subset`), the first call compiles
    them all. What only a compiled library knows (``path``, ``lanes``, ``kernel_lanes``,
    ``methods``) builds every kernel first, and so does pickling, which carries the package's
    sources (:mod:`rbdgen.toolchain.rebuild`) and loads every kernel where it is unpickled."""

    #: attributes of the loaded kernels that only the compiled library knows: reading one builds all
    COMPILED_FACTS = ("path", "lanes", "kernel_lanes", "methods")

    def __init__(self, target: Target, sources: Sources, model, dtype, options: dict, *, progress=None, label=""):
        if isinstance(sources.info.get("sources"), dict):
            check_dtype(sources, dtype)  # the package holds code for it (else an error, now)
        d = self.__dict__
        d.update(_target=target, _sources=sources, _dtype=np.dtype(dtype).name, _options=dict(options),
                 _progress=progress, _label=label or model.name, _lock=threading.RLock(), _full=None, _parts={},
                 _splits=type(target).subset is not Target.subset)
        d.update(model=model, dtype=np.dtype(dtype), target=target.name, nq=model.nq, nv=model.nv, nb=model.nb,
                 kernels=tuple(sources.kernels),
                 op_counts={k: dict(e.get("ops", {})) for k, e in sources.kernels.items()})
        for k in self.kernels:
            d[k] = _FirstCall(self, k)
        install_by_name(self)  # kern.kernel(name), frame_jacobian(q, frame, reference), contact_fd, …
        # pickled as the whole package's recipe
        d[rebuild._ATTR] = rebuild.Recipe(target, sources, model, self._dtype, dict(options))

    # -- loading ---------------------------------------------------------------------------
    def _load(self, sources, label, progress):
        with reporting(progress) as p:
            return load_remembering(self._target, sources, self.model, self._dtype, progress=labelled(p, label),
                                    **self._options)

    def _cached_whole(self):
        """The whole library's kernels where the compile cache holds it (nothing compiled), else None."""
        try:
            with cached_only():
                return load_remembering(self._target, self._sources, self.model, self._dtype, **self._options)
        except NotCached:
            return None

    def _method(self, name):
        if self._full is None and name not in self._parts:
            sub = self._target.subset(self._sources, (name,), self._dtype) if self._splits else None
            if sub is not None:
                self.__dict__["_full"] = self._cached_whole()
            if self._full is None:
                if sub is None:  # the target compiles only all together
                    self.__dict__["_full"] = self._load(self._sources, self._label, self._progress)
                else:
                    self._parts[name] = self._load(sub, f"{self._label}.{name}", self._progress)
                    # kern.rnea(…, f_ext=…) in this one-kernel library asks the package for rnea_fext
                    self._parts[name].__dict__["_front"] = weakref.ref(self)
        return (self._full if self._full is not None else self._parts[name]).kernel(name)

    def _resolve(self, name):
        """Kernel ``name``'s loaded method (compiled if need be), which replaces its stand-in."""
        with self._lock:
            f = self._method(name)
            d = self.__dict__
            d[f"_raw_{name}" if f"_raw_{name}" in d else name] = f  # (frames: the by-name method keeps its name)
            return f

    def build(self, *, progress=None):
        """Compile every kernel now, as one library (cached: nothing to do where it is there
        already), and return them; the calls of these kernels go to it from then on.
        ``progress``: as :func:`load_package`'s (default: the package's)."""
        with self._lock:
            if self._full is None:
                self.__dict__["_full"] = self._load(self._sources, self._label,
                                                    self._progress if progress is None else progress)
            for k in self.kernels:
                self._resolve(k)
            return self._full

    # -- what the loaded kernels offer besides their kernels ---------------------------------
    def __getattr__(self, name):  # only where normal lookup fails
        if name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        if name in self.COMPILED_FACTS or not self.__dict__.get("_splits", True):
            return getattr(self.build(), name)
        raise MissingKernelError(f"package {self._label!r} has no kernel or attribute {name!r} (its kernels: "
                                 f"{', '.join(self.kernels)}; regenerate it with `rbdgen generate --kernels …` to add one)")

    def __reduce__(self):
        if self._full is not None:
            return self._full.__reduce__()
        return rebuild.reduce(self)

    def __repr__(self):
        done = sorted(self.kernels if self._full is not None else self._parts)
        return (f"<rbdgen kernels of package {self._label!r} ({self.target}, {self.dtype}, nq={self.nq}, "
                f"nv={self.nv}), each compiled on its first call; loaded {len(done)} of {len(self.kernels)}"
                f"{': ' + ', '.join(done) if done and len(done) < len(self.kernels) else ''}>")
