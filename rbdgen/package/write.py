"""``rbdgen generate``: write a robot's kernels as a folder of sources with a manifest — for the
CPU and CUDA targets an importable Python package::

    import iiwa14
    iiwa14.rnea(q, v, a)              # float64; this kernel compiled on its first call (content-hash cache)
    k = iiwa14.load(dtype="float32")  # each kernel compiled on its first call (PackageKernels)
    k = iiwa14.build()                # every kernel now: what rbdgen.build returns for the target
    k.aba(q, v, tau)

The folder holds exactly the files of the target (:meth:`rbdgen.targets.base.Target.generate`),
a ``manifest.json`` that records how they were made and everything needed to compile and call
them (read back by :mod:`rbdgen.package.load`), and for a Python package an ``__init__.py``
rendered from ``templates/package/__init__.py.j2``.

Output is deterministic (same input and rbdgen version → byte-identical files: no timestamps,
sorted JSON keys; the rbdgen version is in the manifest only, so a new release that prints the
same kernels rewrites no source) and written atomically: into a temporary folder next to the
target, renamed into place when complete. Regenerating into a package folder keeps what its
manifest does not list (the user's files: notes, a CMake ``build/``); the files the old manifest
lists go. A generate that was killed is finished by the next one (see "atomic writing" below).
"""
from __future__ import annotations

import contextlib
import json
import keyword
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import registry
from .._version import __version__
from ..codegen import escape as esc
from ..codegen.render import render
from ..codegen.sources import c_identifier
from ..targets import get_target
from ..errors import BuildError, RbdgenError, RbdgenWarning
from ..model.constraints import constraint_flags, constraint_from_json, constraint_slots, constraint_to_json
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
    from ..model.urdf import MAX_NAME_LENGTH  # names the folder and every file: a file name has ≤ 255 bytes

    if len(name) > MAX_NAME_LENGTH:
        raise RbdgenError(f"package name {name[:24]!r}… is {len(name)} characters long, at most {MAX_NAME_LENGTH} "
                          f"(it names the folder and the generated files); choose a shorter --name")
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
    """Stands in for a model in :func:`registry.applicable`: only its numbers of frames and of
    constraints."""

    def __init__(self, frames, constraints=()):
        self.nf = len(frames or ())
        self.nc = len(constraints or ())


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
    cons = [constraint_from_json(c) for c in opts.get("constraints", ())]
    parts += constraint_flags(cons)
    frames = list(opts["frames"])
    for k in range(len(frames) + 1):  # the fewest --frames that with_constraints completes to them
        added = []
        for f in constraint_slots(cons):
            if f not in frames[:k] and f not in added:
                added.append(f)
        if frames[:k] + added == frames:
            frames = frames[:k]
            break
    if frames:
        parts.append("--frames " + ",".join(frames))
    if tuple(opts["kernels"]) != registry.applicable(_Frames(opts["frames"], cons)):
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
    if getattr(model, "constraints", ()):  # (absent without: the manifests of packages without are as they were)
        opts["constraints"] = [constraint_to_json(c) for c in model.constraints]
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
        **({"constraints": opts["constraints"]} if "constraints" in opts else {}),
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
#
# A package folder OUT/NAME is replaced in four steps, all renames within OUT:
#   1. the new files are written (manifest.json first) and synced into OUT/.NAME.tmp-HOST.PID-XXXXXXXX;
#   2. the user's entries in OUT/NAME (everything its manifest does not list) are moved into it;
#   3. OUT/NAME is renamed to OUT/.NAME.old-HOST.PID-XXXXXXXX/pkg and the new folder to OUT/NAME;
#   4. the old folder (only files the old manifest listed) is removed.
# OUT/NAME is at every moment the old package or the new one, whole; SIGINT, SIGTERM and SIGHUP wait
# for steps 2 and 3 to finish (_signals_deferred). After SIGKILL or a power cut the next generate
# into OUT finishes the job (_sweep_stale): it renames a left old package back where OUT/NAME is
# missing, moves the user's entries out of a left temporary folder back into OUT/NAME, and removes
# the rest. The PID (and host) in the names tell it which folders belong to a process that is gone.

#: Python's byte cache of the generated __init__.py: dropped with the files rbdgen wrote
_PYCACHE = "__pycache__"
#: a temporary folder whose name does not say its process (rbdgen before issue 46, another host) is
#: taken as left behind once it is this old [s]; a generation takes seconds to minutes
STALE_AFTER = 24 * 3600
_HOST = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())[:40] or "host"
# .NAME.tmp-HOST.PID-XXXXXXXX (mkdtemp's 8 characters), or .NAME.tmp-XXXXXXXX before issue 46
_TEMP_RE = re.compile(r"^\.(?P<name>[A-Za-z_][A-Za-z0-9_]*)\.(?P<kind>tmp|old)-"
                      r"(?:(?P<host>[A-Za-z0-9_-]+)\.(?P<pid>[0-9]+)-)?[a-z0-9_]{8}$")


def _why(e: OSError) -> str:
    return e.strerror or str(e)


def _temp_prefix(name: str, kind: str) -> str:
    return f".{name}.{kind}-{_HOST}.{os.getpid()}-"


def _listed(folder: Path) -> set | None:
    """The names in ``folder`` that rbdgen wrote: those its manifest lists, the manifest, and
    Python's cache of them; None where the manifest cannot be read."""
    try:
        m = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = m.get("files") if isinstance(m, dict) else None
    return {*(files if isinstance(files, dict) else ()), MANIFEST, _PYCACHE}


def _users_entries(folder: Path) -> list:
    """The entries of a package folder that its manifest does not list: the user's (all of them,
    where the manifest cannot be read)."""
    listed = _listed(folder) or set()
    return sorted(e for e in os.listdir(folder) if e not in listed)


@contextlib.contextmanager
def _signals_deferred():
    """SIGINT, SIGTERM and SIGHUP wait until the block is done (it is never left half-way by a
    Python handler's exception), then are handled as they would have been (a handler is called,
    a default action is taken by sending the signal again). In the main thread only: elsewhere
    Python runs no signal handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught, previous = [], {}

    def note(signum, frame):
        caught.append(signum)

    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        s = getattr(signal, name, None)
        if s is None or signal.getsignal(s) in (signal.SIG_IGN, None):
            continue
        previous[s] = signal.signal(s, note)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        for s in dict.fromkeys(caught):
            if callable(previous[s]):
                previous[s](s, None)
            elif previous[s] == signal.SIG_DFL:
                os.kill(os.getpid(), s)


def _owner_gone(m: re.Match, path: Path) -> bool:
    """Whether the process that made this temporary folder is gone: by its PID where it ran on
    this host, else by the folder's age."""
    if m["pid"] is not None and m["host"] == _HOST and os.name == "posix":
        pid = int(m["pid"])
        if pid == os.getpid():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:  # alive (another user's) or unknown
            return False
        return False
    try:
        return time.time() - path.lstat().st_mtime > STALE_AFTER
    except OSError:
        return False


def _sweep_stale(parent: Path) -> None:
    """Finish what generate runs into ``parent`` that were killed left undone (see the top of this
    section): each left old package is renamed back where its package folder is missing, else
    removed; each left temporary folder gives the user's entries back to its package folder and is
    removed. A folder that still holds the user's entries and cannot give them back is kept, with a
    warning. Folders of runs in progress are not touched."""
    try:
        entries = sorted(parent.iterdir())
    except OSError:
        return
    stale = []
    for d in entries:
        m = _TEMP_RE.match(d.name)
        if m and not d.is_symlink() and d.is_dir() and _owner_gone(m, d):
            stale.append((m["kind"], m["name"], d))
    # the old packages first: one may have to be back in place before the user's entries can return
    for kind, name, d in sorted(stale, key=lambda s: s[0] != "old"):
        target = parent / name
        try:
            if kind == "old":
                if (d / "pkg").is_dir() and not os.path.lexists(target):
                    os.rename(d / "pkg", target)  # killed between the two renames: the old package returns
            else:
                # the manifest is written first and the user's entries come after the last file, so
                # a folder without a readable manifest holds nothing of the user's
                users = _users_entries(d) if _listed(d) is not None else []
                if users and not (target.is_dir() and not target.is_symlink()):
                    warnings.warn(f"kept '{d}': it holds {', '.join(users)}, left there by a generate that was "
                                  f"killed, and '{target}' is missing", RbdgenWarning, stacklevel=2)
                    continue
                clash = [e for e in users if os.path.lexists(target / e)]
                if clash:
                    warnings.warn(f"kept '{d}': it holds {', '.join(clash)}, left there by a generate that was "
                                  f"killed, and '{target}' has entries of those names", RbdgenWarning, stacklevel=2)
                    continue
                for e in users:
                    os.rename(d / e, target / e)
        except OSError:
            continue  # left for a later run
        shutil.rmtree(d, ignore_errors=True)


class _Staging:
    """A temporary folder next to ``target``, created up front (an unwritable output folder
    fails before the slow steps) and swapped into place by :meth:`commit`, with the user's entries
    of an existing package folder (those its manifest does not list) carried over."""

    def __init__(self, target: Path):
        self.target = Path(target)
        self.tmp = self.old = None
        self.keep_tmp = False  # set when it holds user entries that could not be put back (the next run does)
        parent = self.target.parent
        # the folders this creates, removed again when nothing is committed (leave nothing behind)
        self.created = []
        p = parent
        while not p.exists() and p != p.parent:
            self.created.append(p)
            p = p.parent
        try:
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise RbdgenError(f"cannot create output folder '{parent}': {_why(e)}") from e
            _sweep_stale(parent)
            if self.target.is_symlink() or (self.target.exists() and not self.target.is_dir()):
                raise RbdgenError(f"'{self.target}' exists and is not a folder; remove it or choose another --name")
            if self.target.exists() and not is_generated_package(self.target):
                raise RbdgenError(f"'{self.target}' exists and is not a package written by rbdgen generate; "
                                  f"remove it or choose another --name/--out")
            try:
                self.tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(self.target.name, "tmp"), dir=parent))
            except OSError as e:
                raise RbdgenError(f"cannot write to output folder '{parent}': {_why(e)}") from e
        except BaseException:
            self.close()
            raise

    def commit(self, files: dict) -> None:
        umask = os.umask(0)
        os.umask(umask)
        parent = self.target.parent
        try:
            users = _users_entries(self.target) if self.target.exists() else []
            clash = [e for e in users if e in files]
            if clash:
                raise RbdgenError(f"'{self.target}' holds {', '.join(clash)}, not listed in its {MANIFEST} (not "
                                  f"written by rbdgen), and the new package writes a file of that name; move it "
                                  f"away or choose another --name/--out")
            for fn in sorted(files, key=lambda fn: fn != MANIFEST):  # the manifest first (_sweep_stale reads it)
                with open(self.tmp / fn, "wb") as f:
                    f.write(files[fn])
                    f.flush()
                    os.fsync(f.fileno())
                os.chmod(self.tmp / fn, 0o666 & ~umask)
            os.chmod(self.tmp, 0o777 & ~umask)  # mkdtemp made it private
            with _signals_deferred():
                if self.target.exists():
                    self._swap(users)
                else:
                    os.rename(self.tmp, self.target)
        except OSError as e:
            raise RbdgenError(f"cannot write to output folder '{parent}': {_why(e)}") from e
        finally:
            self.close(committed=not self.tmp.exists())

    def _swap(self, users: list) -> None:
        """Steps 2 and 3 (the top of this section); on failure, everything is put back."""
        moved = []
        try:
            for e in users:
                try:
                    os.rename(self.target / e, self.tmp / e)
                except OSError as err:
                    raise RbdgenError(f"cannot move '{self.target / e}' into the new package: {_why(err)}; "
                                      f"nothing was changed") from err
                moved.append(e)
            old = Path(tempfile.mkdtemp(prefix=_temp_prefix(self.target.name, "old"), dir=self.target.parent))
            try:
                os.rename(self.target, old / "pkg")
            except OSError:
                old.rmdir()
                raise
            try:
                os.rename(self.tmp, self.target)
            except OSError:
                os.rename(old / "pkg", self.target)  # put the previous package back
                old.rmdir()
                raise
            self.old = old
        except BaseException:
            try:
                for e in list(moved):
                    os.rename(self.tmp / e, self.target / e)
                    moved.remove(e)
            except OSError:
                self.keep_tmp = True  # never removed with the user's entries in it; _sweep_stale returns them
            raise

    def close(self, committed: bool = False) -> None:
        for d in (None if self.keep_tmp else self.tmp, self.old):
            if d is not None and d.exists():
                shutil.rmtree(d, ignore_errors=True)
        if not committed:
            for d in self.created:  # innermost first; only while empty
                try:
                    d.rmdir()
                except OSError:
                    break


def generate_package(model, out, *, urdf: str, load_options: dict, name: str | None = None, dtypes=None,
                     kernels=None, target: str = "cpu", snap: float | None = None, progress=None,
                     **target_options) -> Package:
    """Generate the package of ``model`` and write it to ``out/<name>/`` atomically. An existing
    package written by rbdgen is replaced, keeping the entries its manifest does not list (the
    user's: notes, a build folder); a user's file with the name of a new generated file, or any
    other existing folder, is refused. Temporary folders that a killed generate left in ``out``
    are cleaned up first. Returns the :class:`Package`, with ``.path`` set."""
    name = check_package_name(name) if name is not None else default_package_name(model.name)
    staging = None
    try:
        with _signals_deferred():  # made and known to the finally clause below, or not made
            staging = _Staging(Path(out) / name)
        pkg = package_files(model, urdf=urdf, load_options=load_options, name=name, dtypes=dtypes,
                            kernels=kernels, target=target, snap=snap, progress=progress, **target_options)
        if progress:
            progress(f"writing {staging.target}")
        staging.commit(pkg.files)
    finally:
        if staging is not None:
            staging.close(committed=staging.tmp is not None and not staging.tmp.exists())
    pkg.path = staging.target
    return pkg
