"""Loading a generated package: read its manifest and files, and hand them to the target's
:meth:`~rbdgen.targets.base.Target.load` — the same compile-and-load path as
:func:`rbdgen.build`, so a package and a build of the same robot give the same library."""
from __future__ import annotations

import hashlib
import json
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..codegen.sources import Sources
from ..targets import get_target
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

    @property
    def nf(self) -> int:
        return len(self.frames)

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


def load_package(pkg_dir, dtype="float64", *, progress=None, **options):
    """Compile (cached) and load the sources of a generated package with its target's loader;
    ``options`` are the target's compile options (cpu: opt, march, cxx; cuda: opt, arch, nvcc;
    hls: opt, csim, cxx). The kernels' ``model`` is a :class:`PackageModel`."""
    m = read_manifest(pkg_dir)
    target = get_target(m["options"]["target"])
    st = target.split_options({k: v for k, v in options.items() if v is not None}, where="load_package")
    extra = sorted(set(options) - target.option_names("compile"))
    if extra:
        raise RbdgenError(f"load_package: {', '.join(extra)} are not compile options of target {target.name!r}")
    src = read_sources(pkg_dir, m)
    model = PackageModel(m["robot"], m["nq"], m["nv"], m["nb"], m["floating_base"], tuple(m["joint_names"]),
                         tuple(m.get("body_names", ())), tuple(m.get("frames", ())))

    return load_remembering(target, src, model, dtype, progress=progress, **st["compile"])  # pickling
