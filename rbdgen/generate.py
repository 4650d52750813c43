"""``rbdgen generate``: write a robot's kernels as a self-contained, importable Python package.

The package holds the generated C++ sources (exactly the files of the backend), a
``manifest.json`` that records how they were made and everything needed to call them, and an
``__init__.py``::

    import iiwa14
    iiwa14.rnea(q, v, a)              # float64, compiled on first use (content-hash cache)
    k = iiwa14.load(dtype="float32")  # CompiledKernels, as rbdgen.build returns
    k.aba(q, v, tau)

Building needs rbdgen and a C++ compiler, not the URDF: :func:`load_package` compiles the
package's own sources through the same cache as :func:`rbdgen.build`.

Output is deterministic (same input and rbdgen version → byte-identical files: no timestamps,
sorted JSON keys) and written atomically: into a temporary folder next to the target, renamed
into place when complete.
"""
from __future__ import annotations

import hashlib
import json
import keyword
import os
import shutil
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import __version__
from .algorithms import KERNELS
from .errors import BuildError, RbdgenError, RbdgenWarning

#: bump when the manifest or the package layout changes incompatibly
FORMAT = 1
MANIFEST = "manifest.json"
INIT = "__init__.py"
DTYPES = ("float64", "float32")
TARGETS = ("cpu", "cuda", "hls")

# names a generated package must not take: it would shadow the module for everything imported
# after the package's folder is put on sys.path
_RESERVED = {"rbdgen", "numpy", "sympy", "jinja2", "click", "filelock", "pinocchio", "pytest"}


# ---- names ------------------------------------------------------------------------------------

def _shadowed(name: str) -> bool:
    return name in _RESERVED or name in getattr(sys, "stdlib_module_names", ())


def default_package_name(robot_name: str) -> str:
    """The robot's name as a lower-case Python identifier (``r_`` in front of a leading digit,
    ``_robot`` appended to a keyword or a name that would shadow a module)."""
    from .backends.cpu import c_identifier

    name = c_identifier(robot_name).lower()
    if keyword.iskeyword(name) or _shadowed(name):
        name += "_robot"
    return name


def check_package_name(name: str) -> str:
    if not name.isidentifier() or not name.isascii():
        raise RbdgenError(f"package name {name!r} is not a Python identifier (letters, digits, '_'; "
                          f"not starting with a digit)")
    if keyword.iskeyword(name):
        raise RbdgenError(f"package name {name!r} is a Python keyword")
    if _shadowed(name):
        raise RbdgenError(f"package name {name!r} would shadow the Python module of that name; choose another --name")
    return name


# ---- snapping ---------------------------------------------------------------------------------

def _sig(x: float) -> float:
    """3 significant digits: reported differences stay byte-stable across BLAS builds."""
    return float(f"{x:.3g}")


def snap_report(model, snapped_model, report, n_states: int = 8, seed: int = 0) -> dict:
    """What :func:`rbdgen.symbolic.snap_model` changed, and how far the reference rnea and crba
    move (max relative difference at ``n_states`` random states, seeded)."""
    from . import reference as ref

    entries = [{"body": b, "what": w, "index": list(map(int, idx)), "old": float(o), "new": float(n)}
               for b, w, idx, o, n in report.snapped]
    out = {"tol": float(report.tol), "count": len(entries),
           "largest_change": _sig(max((abs(e["old"] - e["new"]) for e in entries), default=0.0)),
           "entries": entries, "states": n_states, "seed": seed}
    rng = np.random.default_rng(seed)
    q = model.random_q(rng, n_states)
    v = rng.normal(size=(n_states, model.nv))
    a = rng.normal(size=(n_states, model.nv))
    moved = {}
    for name, fn, args in (("rnea", ref.rnea, (q, v, a)), ("crba", ref.crba, (q,))):
        x, y = fn(snapped_model, *args), fn(model, *args)
        moved[name] = _sig(float(np.max(np.abs(x - y)) / max(1.0, float(np.max(np.abs(y))))))
    out["max_rel_diff"] = moved
    return out


# ---- the package ------------------------------------------------------------------------------

def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _regenerate_command(urdf: str, opts: dict, name: str) -> str:
    parts = ["rbdgen generate", urdf]
    if opts.get("target", "cpu") != "cpu":
        parts.append(f"--target {opts['target']}")
    if opts["floating_base"]:
        parts.append("--floating-base")
    if opts["mimic"] != "error":
        parts.append(f"--mimic {opts['mimic']}")
    if not opts["check_inertia"]:
        parts.append("--no-check-inertia")
    if tuple(opts["gravity"]) != (0.0, 0.0, -9.81):
        parts.append("--gravity '" + " ".join(repr(g) for g in opts["gravity"]) + "'")
    if opts["snap"] is not None:
        parts.append(f"--snap {opts['snap']!r}")
    if tuple(opts["dtypes"]) != DTYPES:
        parts += [f"--dtype {d}" for d in opts["dtypes"]]
    if tuple(opts["kernels"]) != KERNELS:
        parts.append("--kernels " + ",".join(opts["kernels"]))
    parts += [f"--name {name}", "--out DIR"]
    return " ".join(parts)


_INIT_HEAD = '''"""{robot_doc} rigid-body dynamics: kernels generated by rbdgen {version} — do not edit.

Regenerate with ``{command}``.

    import {name}
    {name}.{first_call}               # {default_dtype}, compiled on first use (cached)
    k = {name}.load(dtype="{default_dtype}", {load_example})   # {load_returns}
    {name}.nq, {name}.nv, {name}.joint_names

{base} base, nq = {nq}, nv = {nv}, {nb} bodies; dtypes: {dtype_list}.
Kernels: {kernel_list}.
Compiling needs rbdgen and {compiler} (not the URDF): the sources next to this file are
built through rbdgen's compile cache. manifest.json records how they were generated.
"""
from __future__ import annotations

import os as _os
import threading as _threading

from rbdgen.generate import load_package as _load_package

__all__ = ["load", "robot", "nq", "nv", "nb", "joint_names", "dtypes", "kernels", "default_options",
           {kernel_all}]

robot = {robot}
floating_base = {floating}
nq = {nq}
nv = {nv}
nb = {nb}
joint_names = {joint_names}
dtypes = {dtypes}
kernels = {kernels}

#: what the module-level functions compile with (change before their first call)
default_options = {{"dtype": "{default_dtype}", {default_options}}}

_HERE = _os.path.dirname(_os.path.abspath(__file__))
_lock = _threading.Lock()
_loaded: dict = {{}}


def load(dtype="{default_dtype}", {load_params}):
    """Compile (cached) and load this package's kernels for ``dtype``; returns an
    ``{load_returns}`` with one method per kernel."""
    key = (str(dtype), {load_args})
    with _lock:
        if key not in _loaded:
            _loaded[key] = _load_package(_HERE, dtype=dtype, {load_kwargs})
        return _loaded[key]


def _default():
    return load(**default_options)
'''

_INIT_FN = '''

def {name}({args}, out=None):
    """{doc}

    in:  {ins}
    out: {outs}
    """
    return _default().{name}({args}, out=out)
'''


def _lit(x) -> str:
    """A Python literal with double-quoted strings (JSON's string syntax is valid Python)."""
    if isinstance(x, str):
        return json.dumps(x)
    if isinstance(x, (tuple, list)):
        return "(" + ", ".join(map(_lit, x)) + ("," if len(x) == 1 else "") + ")"
    return repr(x)


def _doc(text: str) -> str:
    """Text safe inside a triple-quoted docstring."""
    return str(text).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _init_py(manifest: dict) -> str:
    names = manifest["kernel_order"]
    ks = manifest["kernels"]
    dts = manifest["options"]["dtypes"]
    default_dtype = "float64" if "float64" in dts else dts[0]
    first = names[0]
    cuda = manifest["options"].get("target") == "cuda"
    params = ("arch", "opt", "nvcc") if cuda else ("march", "opt", "cxx")
    defaults = {"arch": "None", "march": "None", "opt": '"-O3"', "nvcc": "None", "cxx": "None"}
    text = _INIT_HEAD.format(
        load_params=", ".join(f"{p}={defaults[p]}" for p in params), load_args=", ".join(params),
        load_kwargs=", ".join(f"{p}={p}" for p in params),
        load_returns="rbdgen.jit.cuda.CudaKernels" if cuda else "rbdgen.jit.loaded.CompiledKernels",
        load_example='arch=None, opt="-O3"' if cuda else 'opt="-O3", march=None',
        compiler="nvcc (the CUDA compiler)" if cuda else "a C++ compiler",
        default_options='"opt": "-O3", "arch": None' if cuda else '"opt": "-O3", "march": None',
        robot_doc=_doc(manifest["robot"]), version=manifest["rbdgen_version"], name=manifest["package"],
        command=_doc(manifest["regenerate"]), default_dtype=default_dtype,
        first_call=f"{first}({', '.join(i['name'] for i in ks[first]['inputs'])})",
        base="floating" if manifest["floating_base"] else "fixed", nq=manifest["nq"], nv=manifest["nv"],
        nb=manifest["nb"], dtype_list=", ".join(dts), kernel_list=", ".join(names),
        kernel_all=", ".join(map(_lit, names)), robot=_lit(manifest["robot"]),
        floating=bool(manifest["floating_base"]), joint_names=_lit(manifest["joint_names"]),
        dtypes=_lit(dts), kernels=_lit(names),
    )
    for k in names:
        spec = ks[k]
        shape = lambda s: "(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"  # noqa: E731
        text += _INIT_FN.format(
            name=k, args=", ".join(i["name"] for i in spec["inputs"]), doc=_doc(spec["doc"]),
            ins=", ".join(f"{i['name']} ({i['size']},)" for i in spec["inputs"]) + " — or a batch (N, size)",
            outs=", ".join(f"{o['name']} {shape(o['shape'])}" for o in spec["outputs"]),
        )
    return text


@dataclass
class Package:
    """What :func:`package_files` produced: file name → bytes (manifest and __init__ included)."""

    name: str
    files: dict
    manifest: dict
    snap: dict | None = None
    model: object = field(default=None, repr=False)
    path: Path | None = None  # where generate_package wrote it


def package_files(model, *, urdf: str, load_options: dict, name: str | None = None, dtypes=DTYPES,
                  kernels=KERNELS, target: str = "cpu", snap: float | None = None, progress=None,
                  hls: dict | None = None) -> Package:
    """Generate every file of the package of ``model`` (loaded from ``urdf`` with
    ``load_options``: floating_base, mimic, check_inertia; gravity is read from the model) in
    memory. Kernels and dtypes are put in canonical order.

    ``target="hls"``: the FPGA sources (see :func:`rbdgen.backends.hls.generate_hls`) instead
    of a Python package; ``hls`` holds its options (fixed, rounding, overflow, ii, interface,
    part, clock_mhz); the datapath is ``ap_fixed`` when ``fixed`` is given, else the one dtype."""
    from .backends.cpu import generate_cpu
    from .symbolic import snap_model

    if target not in TARGETS:
        raise RbdgenError(f"unknown target {target!r} (available: {', '.join(TARGETS)})")
    bad = [d for d in dtypes if d not in DTYPES]
    if bad or not dtypes:
        raise RbdgenError(f"dtypes must be among {', '.join(DTYPES)}, got {', '.join(map(str, dtypes)) or 'none'}")
    dtypes = tuple(d for d in DTYPES if d in dtypes)
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        raise RbdgenError(f"unknown kernel(s) {', '.join(unknown)}; known: {', '.join(KERNELS)}")
    kernels = tuple(k for k in KERNELS if k in kernels)  # canonical order: output independent of the order given
    if not kernels:
        raise RbdgenError("no kernels to generate")
    name = check_package_name(name) if name is not None else default_package_name(model.name)

    snap_info = None
    if snap is not None:
        if progress:
            progress(f"snapping near-structural values (tol {snap:g})")
        snapped, report = snap_model(model, snap)
        snap_info = snap_report(model, snapped, report)
        model = snapped

    if target == "hls":
        return _hls_package(model, urdf=urdf, load_options=load_options, name=name, dtypes=dtypes, kernels=kernels,
                            snap=snap, snap_info=snap_info, progress=progress, options=dict(hls or {}))
    if hls:
        raise RbdgenError(f"HLS options ({', '.join(sorted(hls))}) apply only to --target hls")
    if target == "cuda":
        from .backends.cuda import generate_cuda

        gen = generate_cuda(model, dtypes=dtypes, kernels=kernels, name=name, progress=progress)
        meta = {k: (i[dtypes[0]]["doc"], i[dtypes[0]]["inputs"], i[dtypes[0]]["outputs"], i[dtypes[0]]["counts"])
                for k, i in gen.kernels.items()}
        source_of = {d: {k: gen.kernels[k][d]["source"] for k in kernels} for d in dtypes}
        target_info = {"sources": gen.sources, "headers": gen.headers,
                       "launch": {k: {d: {x: i[d][x] for x in ("lanes", "states_per_block", "stages", "width",
                                                                "thread_tile", "workspace", "default_shape")}
                                      for d in dtypes} for k, i in gen.kernels.items()}}
    else:
        gen = generate_cpu(model, dtypes=dtypes, kernels=kernels, name=name, progress=progress)
        meta = {k: (pk.doc, [(a.name, a.size) for a in pk.inputs], [(a.name, a.shape) for a in pk.outputs],
                    pk.counts) for k, pk in gen.kernels.items()}
        source_of = {d: dict(zip(kernels, gen.sources[d], strict=True)) for d in dtypes}
        target_info = {
            "sources": {d: list(gen.sources[d]) for d in dtypes},
            "lanes": {d: int(gen.lanes[d]) for d in dtypes},
            # CPython bindings of the kernels (fast calls), compiled into the same library when
            # Python.h is available; otherwise the kernels are called through ctypes
            "python_modules": {d: {"source": src, "module": mod}
                               for d, (src, mod) in sorted(getattr(gen, "python_sources", {}).items())},
        }
    files = {fn: text.encode("utf-8") for fn, text in gen.files.items()}
    for reserved in (MANIFEST, INIT):
        if reserved in files:  # cannot happen with the rbd_ prefix; guard anyway
            raise BuildError(f"the backend produced a file named {reserved}")

    try:
        urdf_bytes = Path(urdf).read_bytes()
    except OSError as e:
        raise RbdgenError(f"cannot read: {_why(e)}", file=urdf) from e
    opts = {
        "target": target,
        "floating_base": bool(load_options.get("floating_base", False)),
        "mimic": load_options.get("mimic", "error"),
        "check_inertia": bool(load_options.get("check_inertia", True)),
        "gravity": [float(g) for g in model.gravity],
        "snap": None if snap is None else float(snap),
        "dtypes": list(dtypes),
        "kernels": list(kernels),
    }
    manifest = {
        "format": FORMAT,
        "generator": "rbdgen",
        "rbdgen_version": __version__,
        "package": name,
        "robot": model.name,
        "source": {"urdf": str(urdf), "sha256": _sha256(urdf_bytes)},
        "options": opts,
        "regenerate": _regenerate_command(str(urdf), opts, name),
        "floating_base": bool(model.floating_base),
        "nq": model.nq, "nv": model.nv, "nb": model.nb,
        "joint_names": list(model.joint_names),
        "joint_types": list(model.joint_types),
        "prefix": gen.prefix,
        "header": gen.header,
        **target_info,
        "kernel_order": list(kernels),
        "kernels": {
            k: {
                "doc": doc,
                "inputs": [{"name": n, "size": int(sz)} for n, sz in ins],
                "outputs": [{"name": n, "shape": [int(x) for x in shp]} for n, shp in outs],
                "ops": {c: int(n) for c, n in counts.items()},
                "sources": {d: source_of[d][k] for d in dtypes},
            }
            for k, (doc, ins, outs, counts) in meta.items()
        },
        "snap": snap_info,
    }
    files[INIT] = _init_py(manifest).encode("utf-8")
    manifest["files"] = {fn: _sha256(data) for fn, data in sorted(files.items())}
    files[MANIFEST] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")
    return Package(name, dict(sorted(files.items())), manifest, snap_info, model)


def _hls_package(model, *, urdf, load_options, name, dtypes, kernels, snap, snap_info, progress, options) -> Package:
    """The HLS target's folder: header, one source per kernel, C-sim harness, testbench, Tcl
    script and manifest.json (no __init__.py: the sources are for Vitis HLS; from Python,
    ``rbdgen.build(model, target="hls")`` C-simulates them)."""
    from .backends import hls as H

    fixed = options.pop("fixed", None)
    if fixed is None and len(dtypes) != 1:
        raise RbdgenError("--target hls takes one datapath type: --fixed W,I, or a single --dtype")
    numtype = H.numeric_type(dtypes[0], fixed, options.pop("rounding", H.DEFAULT_ROUNDING),
                             options.pop("overflow", H.DEFAULT_OVERFLOW))
    gen = H.generate_hls(model, numtype, kernels, name=name, progress=progress, **options)
    files = {fn: text.encode("utf-8") for fn, text in gen.files.items()}
    try:
        urdf_bytes = Path(urdf).read_bytes()
    except OSError as e:
        raise RbdgenError(f"cannot read: {_why(e)}", file=urdf) from e
    hopts = {"type": numtype.ctype, "fixed": [numtype.W, numtype.I] if numtype.kind == "fixed" else None,
             "ii": options.get("ii"), "interface": options.get("interface", "ap_memory"),
             "part": options.get("part", H.DEFAULT_PART), "clock_mhz": float(options.get("clock_mhz", H.DEFAULT_CLOCK_MHZ))}
    opts = {
        "target": "hls",
        "floating_base": bool(load_options.get("floating_base", False)),
        "mimic": load_options.get("mimic", "error"),
        "check_inertia": bool(load_options.get("check_inertia", True)),
        "gravity": [float(g) for g in model.gravity],
        "snap": None if snap is None else float(snap),
        "kernels": list(kernels),
        "hls": hopts,
    }
    cmd = _regenerate_command(str(urdf), {**opts, "dtypes": list(DTYPES)}, name).replace("rbdgen generate", "rbdgen generate --target hls", 1)
    if numtype.kind == "fixed":
        cmd += f" --fixed {numtype.W},{numtype.I}"
        if numtype.rounding != H.DEFAULT_ROUNDING:
            cmd += f" --rounding {numtype.rounding}"
        if numtype.overflow != H.DEFAULT_OVERFLOW:
            cmd += f" --overflow {numtype.overflow}"
    else:
        cmd += f" --dtype {dtypes[0]}"
    for key, flag in (("ii", "--ii"), ("interface", "--interface"), ("part", "--part"), ("clock_mhz", "--clock-mhz")):
        if key in options and options[key] is not None:
            cmd += f" {flag} {options[key]}"
    manifest = {
        "format": FORMAT, "generator": "rbdgen", "rbdgen_version": __version__, "package": name,
        "robot": model.name, "source": {"urdf": str(urdf), "sha256": _sha256(urdf_bytes)}, "options": opts,
        "regenerate": cmd, "floating_base": bool(model.floating_base),
        "nq": model.nq, "nv": model.nv, "nb": model.nb,
        "joint_names": list(model.joint_names), "joint_types": list(model.joint_types),
        "prefix": gen.prefix, "header": gen.header, "hls_sources": list(gen.sources), "csim_harness": gen.harness,
        "testbench": gen.testbench, "tcl": gen.tcl,
        "kernel_order": list(kernels),
        "kernels": {
            k: {
                "doc": pk.doc, "top": f"{gen.prefix}_{k}",
                "inputs": [{"name": a.name, "size": int(a.size)} for a in pk.inputs],
                "outputs": [{"name": a.name, "shape": [int(s) for s in a.shape]} for a in pk.outputs],
                "ops": {c: int(n) for c, n in pk.counts.items()},
            }
            for k, pk in gen.kernels.items()
        },
        "snap": snap_info,
    }
    manifest["files"] = {fn: _sha256(data) for fn, data in sorted(files.items())}
    files[MANIFEST] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")
    return Package(name, dict(sorted(files.items())), manifest, snap_info, model)


# ---- atomic writing ---------------------------------------------------------------------------

def _why(e: OSError) -> str:
    return e.strerror or str(e)


def is_generated_package(path: Path) -> bool:
    try:
        m = json.loads((Path(path) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(m, dict) and m.get("generator") == "rbdgen"


class _Staging:
    """A temporary folder next to ``target``, created up front (an unwritable output folder
    fails before the slow steps) and swapped into place by :meth:`commit`."""

    def __init__(self, target: Path):
        self.target = Path(target)
        parent = self.target.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RbdgenError(f"cannot create output folder '{parent}': {_why(e)}") from e
        if self.target.is_symlink() or (self.target.exists() and not self.target.is_dir()):
            raise RbdgenError(f"'{self.target}' exists and is not a folder; remove it or choose another --name")
        if self.target.exists() and not is_generated_package(self.target):
            raise RbdgenError(f"'{self.target}' exists and is not a package written by rbdgen generate; "
                              f"remove it or choose another --name/--out")
        try:
            self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.tmp-", dir=parent))
        except OSError as e:
            raise RbdgenError(f"cannot write to output folder '{parent}': {_why(e)}") from e

    def commit(self, files: dict) -> None:
        umask = os.umask(0)
        os.umask(umask)
        parent = self.target.parent
        try:
            for fn, data in files.items():
                with open(self.tmp / fn, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.chmod(self.tmp / fn, 0o666 & ~umask)
            os.chmod(self.tmp, 0o777 & ~umask)  # mkdtemp made it private
            if self.target.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.old-", dir=parent))
                os.rename(self.target, old / "pkg")
                try:
                    os.rename(self.tmp, self.target)
                except OSError:
                    os.rename(old / "pkg", self.target)  # put the previous package back
                    raise
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(self.tmp, self.target)
        except OSError as e:
            raise RbdgenError(f"cannot write to output folder '{parent}': {_why(e)}") from e
        finally:
            self.close()

    def close(self) -> None:
        if self.tmp.exists():
            shutil.rmtree(self.tmp, ignore_errors=True)


def generate_package(model, out, *, urdf: str, load_options: dict, name: str | None = None, dtypes=DTYPES,
                     kernels=KERNELS, target: str = "cpu", snap: float | None = None, progress=None,
                     hls: dict | None = None) -> Package:
    """Generate the package of ``model`` and write it to ``out/<name>/`` atomically (an existing
    package written by rbdgen is replaced; any other existing folder is refused).
    Returns the :class:`Package`, with ``.path`` set."""
    name = check_package_name(name) if name is not None else default_package_name(model.name)
    staging = _Staging(Path(out) / name)
    try:
        pkg = package_files(model, urdf=urdf, load_options=load_options, name=name, dtypes=dtypes,
                            kernels=kernels, target=target, snap=snap, progress=progress, hls=hls)
        if progress:
            progress(f"writing {staging.target}")
        staging.commit(pkg.files)
    finally:
        staging.close()
    pkg.path = staging.target
    return pkg


# ---- loading a generated package --------------------------------------------------------------

@dataclass(frozen=True)
class _Arg:
    name: str
    shape: tuple

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=int))


@dataclass(frozen=True)
class _KernelSpec:
    """What CompiledKernels reads from a PrintedKernel: inputs, outputs (name, size/shape), counts."""

    name: str
    doc: str
    inputs: tuple
    outputs: tuple
    counts: dict


@dataclass(frozen=True)
class PackageModel:
    """What CompiledKernels reads from a RobotModel (sizes and name), plus the joint names: a
    generated package does not carry the full model."""

    name: str
    nq: int
    nv: int
    nb: int
    floating_base: bool
    joint_names: tuple

    def __repr__(self):
        base = "floating" if self.floating_base else "fixed"
        return f"PackageModel({self.name!r}, {base} base, nb={self.nb}, nq={self.nq}, nv={self.nv})"


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


def load_package(pkg_dir, dtype="float64", *, march: str | None = None, opt: str = "-O3", cxx: str | None = None,
                 arch=None, nvcc: str | None = None, progress=None):
    """Compile (cached) and load the sources of a generated package: a
    :class:`rbdgen.jit.loaded.CompiledKernels` (or, for a ``--target cuda`` package, a
    :class:`rbdgen.jit.cuda.CudaKernels`) whose ``model`` is a :class:`PackageModel`."""
    from .jit.compiler import build_library, cxx_flags, python_include
    from .jit.loaded import CompiledKernels

    pkg_dir = Path(pkg_dir)
    m = read_manifest(pkg_dir)
    if m.get("options", {}).get("target") == "hls":
        raise RbdgenError(f"'{pkg_dir}' holds HLS sources for Vitis HLS (see its run_hls.tcl), not a Python package; "
                          f"C-simulate them from Python with rbdgen.build(model, target='hls')")
    dt = np.dtype(dtype).name
    if dt not in m["sources"]:
        raise RbdgenError(f"package '{m['package']}' was generated for {', '.join(m['sources'])}, not {dt}; "
                          f"regenerate it with --dtype {dt}")

    def _read(fn):
        try:
            data = (pkg_dir / fn).read_bytes()
        except OSError as e:
            raise RbdgenError(f"package '{m['package']}' in {pkg_dir}: cannot read {fn}: {_why(e)}") from e
        if _sha256(data) != m["files"].get(fn):
            warnings.warn(f"{pkg_dir / fn} differs from the file rbdgen generated (sha256 in {MANIFEST}); "
                          f"building it as it is", RbdgenWarning, stacklevel=3)
        return data.decode("utf-8")

    model = PackageModel(m["robot"], m["nq"], m["nv"], m["nb"], m["floating_base"], tuple(m["joint_names"]))
    if m["options"].get("target") == "cuda":
        from .jit.cuda import compile_and_load

        files = {fn: _read(fn) for fn in [*m["headers"][dt], *m["sources"][dt]]}
        info = {k: {"doc": s["doc"], "inputs": [(a["name"], a["size"]) for a in s["inputs"]],
                    "outputs": [(a["name"], tuple(a["shape"])) for a in s["outputs"]], "counts": dict(s["ops"]),
                    "default_shape": m["launch"][k][dt]["default_shape"]}
                for k in m["kernel_order"] for s in (m["kernels"][k],)}
        return compile_and_load(files, list(m["sources"][dt]), m["prefix"] + "_cuda", model, m["prefix"], dt, info,
                                arch=arch, opt=opt, nvcc=nvcc, progress=progress)
    files = {fn: _read(fn) for fn in [m["header"], *m["sources"][dt]]}
    specs = {
        k: _KernelSpec(
            k, s["doc"],
            tuple(_Arg(a["name"], (a["size"],)) for a in s["inputs"]),
            tuple(_Arg(a["name"], tuple(a["shape"])) for a in s["outputs"]),
            dict(s["ops"]),
        )
        for k in m["kernel_order"] for s in (m["kernels"][k],)
    }
    sources = list(m["sources"][dt])
    flags = cxx_flags(opt=opt, march=march)
    extra = {}
    py = m.get("python_modules", {}).get(dt)
    include = python_include() if py else None
    if include:
        files[py["source"]] = _read(py["source"])
        sources.append(py["source"])
        flags = flags + [f"-I{include}"]
        extra["module"] = py["module"]
    lib = build_library(files, sources, m["prefix"], flags, cxx=cxx, progress=progress)
    return CompiledKernels(lib, model, m["prefix"], dt, specs, lanes=m["lanes"][dt], **extra)


