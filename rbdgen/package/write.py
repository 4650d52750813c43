"""``rbdgen generate``: write a robot's kernels as a folder of sources with a manifest — for the
CPU and CUDA targets an importable Python package::

    import iiwa14
    iiwa14.rnea(q, v, a)              # float64, compiled on first use (content-hash cache)
    k = iiwa14.load(dtype="float32")  # what rbdgen.build returns for the package's target
    k.aba(q, v, tau)

The folder holds exactly the files of the target (:meth:`rbdgen.targets.base.Target.generate`),
a ``manifest.json`` that records how they were made and everything needed to compile and call
them (read back by :mod:`rbdgen.package.load`), and for a Python package an ``__init__.py``
rendered from ``templates/package/__init__.py.j2``.

Output is deterministic (same input and rbdgen version → byte-identical files: no timestamps,
sorted JSON keys; the rbdgen version is in the manifest only, so a new release that prints the
same kernels rewrites no source) and written atomically: into a temporary folder next to the
target, renamed into place when complete.
"""
from __future__ import annotations

import json
import keyword
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import registry
from .._version import __version__
from ..codegen import escape as esc
from ..codegen.render import render
from ..codegen.sources import c_identifier
from ..targets import get_target
from ..errors import BuildError, RbdgenError
from .load import FORMAT, INIT, MANIFEST, is_generated_package
from .load import sha256 as _sha256

DTYPES = ("float64", "float32")

# names a generated package must not take: it would shadow the module for everything imported
# after the package's folder is put on sys.path
_RESERVED = {"rbdgen", "numpy", "sympy", "jinja2", "click", "filelock", "pinocchio", "pytest"}


# ---- names ------------------------------------------------------------------------------------

def _shadowed(name: str) -> bool:
    return name in _RESERVED or name in getattr(sys, "stdlib_module_names", ())


def default_package_name(robot_name: str) -> str:
    """The robot's name as a lower-case Python identifier (``r_`` in front of a leading digit,
    ``_robot`` appended to a keyword or a name that would shadow a module)."""
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
    """3 significant digits: a report for people. (The reference's rnea and crba it compares sum
    in a fixed order, rbdgen.spatial.mm, so the digits are the same on every machine.)"""
    return float(f"{x:.3g}")


def snap_report(model, snapped_model, report, n_states: int = 8, seed: int = 0) -> dict:
    """What :func:`rbdgen.symbolic.snap_model` changed, and how far the reference rnea and crba
    move (max relative difference at ``n_states`` random states, seeded)."""
    from .. import reference as ref

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

class _Frames:
    """Stands in for a model in :func:`registry.applicable`: only its number of frames."""

    def __init__(self, frames):
        self.nf = len(frames or ())


def _regenerate_command(urdf: str, opts: dict, target, target_options: dict, name: str) -> str:
    parts = ["rbdgen generate", urdf]
    if target.name != "cpu":
        parts.append(f"--target {target.name}")
    if opts["floating_base"]:
        parts.append("--floating-base")
    if opts["mimic"] != "couple":
        parts.append(f"--mimic {opts['mimic']}")
    if not opts["check_inertia"]:
        parts.append("--no-check-inertia")
    if tuple(opts["gravity"]) != (0.0, 0.0, -9.81):
        parts.append("--gravity '" + " ".join(repr(g) for g in opts["gravity"]) + "'")
    if opts["snap"] is not None:
        parts.append(f"--snap {opts['snap']!r}")
    if opts["dtypes"] is not None and tuple(opts["dtypes"]) != DTYPES:
        parts += [f"--dtype {d}" for d in opts["dtypes"]]
    if opts["frames"]:
        parts.append("--frames " + ",".join(opts["frames"]))
    if tuple(opts["kernels"]) != registry.applicable(_Frames(opts["frames"])):
        parts.append("--kernels " + ",".join(opts["kernels"]))
    parts += target.regenerate_flags(target_options)
    parts += [f"--name {name}", "--out DIR"]
    return " ".join(parts)


def _lit(x) -> str:
    """A Python literal with double-quoted strings (JSON's string syntax is valid Python)."""
    if isinstance(x, str):
        return json.dumps(x)
    if isinstance(x, (tuple, list)):
        return "(" + ", ".join(map(_lit, x)) + ("," if len(x) == 1 else "") + ")"
    return repr(x)


def _doc(text: str) -> str:
    """Text safe inside a triple-quoted docstring (the one escaping path for Python sources)."""
    return esc.py_docstring(text)


def _init_py(manifest: dict, target) -> str:
    """The package's ``__init__.py`` (templates/package/__init__.py.j2): every value is printed
    here, as a Python literal or docstring-safe text; the template only places them."""
    names = manifest["kernel_order"]
    ks = manifest["kernels"]
    dts = manifest["options"]["dtypes"]
    default_dtype = "float64" if "float64" in dts else dts[0]
    compile_options = [o.name for o in target.options if "compile" in o.stages]
    shape = lambda s: "(" + ", ".join(map(str, s)) + ("," if len(s) == 1 else "") + ")"  # noqa: E731
    functions = [{
        "name": k, "args": ", ".join(i["name"] for i in ks[k]["inputs"]), "doc": _doc(ks[k]["doc"]),
        "ins": ", ".join(f"{i['name']} ({i['size']},)" for i in ks[k]["inputs"]) + " — or a batch (N, size)",
        "outs": ", ".join(f"{o['name']} {shape(o['shape'])}" for o in ks[k]["outputs"]),
    } for k in names]
    return render(
        "package/__init__.py.j2",
        robot_doc=_doc(manifest["robot"]), command=_doc(manifest["regenerate"]), name=manifest["package"],
        default_dtype=default_dtype, first_call=f"{names[0]}({functions[0]['args']})",
        returns=target.returns, compiler=target.compiler, compile_options=", ".join(compile_options),
        base="floating" if manifest["floating_base"] else "fixed", nq=manifest["nq"], nv=manifest["nv"],
        nb=manifest["nb"], dtype_list=", ".join(dts), kernel_list=", ".join(names),
        kernel_all=", ".join(map(_lit, names)), robot=_lit(manifest["robot"]),
        floating=bool(manifest["floating_base"]), joint_names=_lit(manifest["joint_names"]),
        body_names=_lit(manifest["body_names"]), frames=_lit(manifest.get("frames", [])), dtypes=_lit(dts), kernels=_lit(names), functions=functions,
        version=manifest["rbdgen_version"],
    )


@dataclass
class Package:
    """What :func:`package_files` produced: file name → bytes (manifest and __init__ included)."""

    name: str
    files: dict
    manifest: dict
    snap: dict | None = None
    model: object = field(default=None, repr=False)
    path: Path | None = None  # where generate_package wrote it


def build_manifest(model, sources, target, *, urdf: str, urdf_sha256: str, load_options: dict, name: str,
                   kernels: tuple, dtypes, target_options: dict, snap: float | None, snap_info) -> dict:
    """The one manifest builder, for every target: how the files were made (options, the URDF's
    hash, the command that regenerates them), the robot's sizes and names, each kernel's arrays
    and op counts, and the target's own facts (``target``: what its ``load`` reads back)."""
    opts = {
        "target": target.name,
        "floating_base": bool(load_options.get("floating_base", False)),
        "mimic": {"error": "refuse"}.get(load_options.get("mimic", "couple"), load_options.get("mimic", "couple")),
        "check_inertia": bool(load_options.get("check_inertia", True)),
        "gravity": [float(g) for g in model.gravity],
        "snap": None if snap is None else float(snap),
        "dtypes": None if dtypes is None else list(dtypes),
        "kernels": list(kernels),
        "frames": list(getattr(model, "frames", ())),
        "target_options": target.manifest_options(target_options),
    }
    return {
        "format": FORMAT,
        "generator": "rbdgen",
        "rbdgen_version": __version__,
        "package": name,
        "robot": model.name,
        "source": {"urdf": str(urdf), "sha256": urdf_sha256},
        "options": opts,
        "regenerate": _regenerate_command(str(urdf), opts, target, target_options, name),
        "floating_base": bool(model.floating_base),
        "nq": model.nq, "nv": model.nv, "nb": model.nb,
        "joint_names": list(model.joint_names),
        "joint_types": list(model.joint_types),
        "body_names": list(model.body_names),
        "frames": list(getattr(model, "frames", ())),
        "prefix": sources.prefix,
        "target": sources.info,
        "kernel_order": list(kernels),
        "kernels": sources.kernels,
        "snap": snap_info,
    }


def package_files(model, *, urdf: str, load_options: dict, name: str | None = None, dtypes=None,
                  kernels=None, target: str = "cpu", snap: float | None = None, progress=None,
                  **target_options) -> Package:
    """Generate every file of the package of ``model`` (loaded from ``urdf`` with
    ``load_options``: floating_base, mimic, check_inertia; gravity is read from the model) in
    memory. Kernels and dtypes are put in canonical order. ``target_options``: the target's
    generate-stage options (e.g. ``fixed=(32, 16)`` for hls)."""
    from ..symbolic import snap_model

    t = get_target(target)
    st = t.split_options({k: v for k, v in target_options.items() if v is not None}, where=f"--target {target}")
    extra = sorted(set(target_options) - t.option_names("generate"))
    if extra and any(target_options[k] is not None for k in extra):
        raise RbdgenError(f"option(s) {', '.join(extra)} do not change the generated sources of target {target!r}")
    gen_opts = st["generate"]
    if dtypes is None:
        dtypes = DTYPES if t.python_package else ("float64",)
    bad = [d for d in dtypes if d not in DTYPES]
    if bad or not dtypes:
        raise RbdgenError(f"dtypes must be among {', '.join(DTYPES)}, got {', '.join(map(str, dtypes)) or 'none'}")
    dtypes = tuple(d for d in DTYPES if d in dtypes)
    kernels = registry.applicable(model, kernels)  # canonical order: output independent of the order given
    name = check_package_name(name) if name is not None else default_package_name(model.name)

    snap_info = None
    if snap is not None:
        if progress:
            progress(f"snapping near-structural values (tol {snap:g})")
        snapped, report = snap_model(model, snap)
        snap_info = snap_report(model, snapped, report)
        model = snapped

    registry.check_model(model, kernels)
    sources = t.generate(model, kernels, dtypes=dtypes, name=name, progress=progress, **gen_opts)
    files = {fn: text.encode("utf-8") for fn, text in sources.files.items()}
    for reserved in (MANIFEST, INIT):
        if reserved in files:  # cannot happen with the rbd_ prefix; guard anyway
            raise BuildError(f"the target produced a file named {reserved}")
    try:
        urdf_bytes = Path(urdf).read_bytes()
    except OSError as e:
        raise RbdgenError(f"cannot read: {_why(e)}", file=urdf) from e
    manifest = build_manifest(model, sources, t, urdf=urdf, urdf_sha256=_sha256(urdf_bytes), load_options=load_options,
                              name=name, kernels=kernels, dtypes=dtypes if t.python_package or "fixed" not in gen_opts
                              else None, target_options=gen_opts, snap=snap, snap_info=snap_info)
    if t.python_package:
        files[INIT] = _init_py(manifest, t).encode("utf-8")
    manifest["files"] = {fn: _sha256(data) for fn, data in sorted(files.items())}
    files[MANIFEST] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")
    return Package(name, dict(sorted(files.items())), manifest, snap_info, model)


# ---- atomic writing ---------------------------------------------------------------------------

def _why(e: OSError) -> str:
    return e.strerror or str(e)


class _Staging:
    """A temporary folder next to ``target``, created up front (an unwritable output folder
    fails before the slow steps) and swapped into place by :meth:`commit`."""

    def __init__(self, target: Path):
        self.target = Path(target)
        parent = self.target.parent
        # the folders this creates, removed again when nothing is committed (leave nothing behind)
        self.created = []
        p = parent
        while not p.exists() and p != p.parent:
            self.created.append(p)
            p = p.parent
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

    def close(self, committed: bool = False) -> None:
        if self.tmp.exists():
            shutil.rmtree(self.tmp, ignore_errors=True)
        if not committed:
            for d in self.created:  # innermost first; only while empty
                try:
                    d.rmdir()
                except OSError:
                    break


def generate_package(model, out, *, urdf: str, load_options: dict, name: str | None = None, dtypes=None,
                     kernels=None, target: str = "cpu", snap: float | None = None, progress=None,
                     **target_options) -> Package:
    """Generate the package of ``model`` and write it to ``out/<name>/`` atomically (an existing
    package written by rbdgen is replaced; any other existing folder is refused).
    Returns the :class:`Package`, with ``.path`` set."""
    name = check_package_name(name) if name is not None else default_package_name(model.name)
    staging = _Staging(Path(out) / name)
    try:
        pkg = package_files(model, urdf=urdf, load_options=load_options, name=name, dtypes=dtypes,
                            kernels=kernels, target=target, snap=snap, progress=progress, **target_options)
        if progress:
            progress(f"writing {staging.target}")
        staging.commit(pkg.files)
    finally:
        staging.close()
    pkg.path = staging.target
    return pkg
