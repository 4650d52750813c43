"""The CUDA target's toolchain step: finding nvcc, the architectures to build for, nvcc's
flags, building the shared library through the compile cache, and ptxas's resource reports
(``-Xptxas -v``: registers, local memory, spills per function), kept per source and architecture
in the cache so that the resource report (:mod:`rbdgen.targets.cuda.resources`) reads what a
build already printed.

nvcc comes from the ``nvidia-cuda-nvcc`` wheels the Makefile installs (``$NVCC`` overrides;
``nvcc`` on PATH is the last resort).
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import filelock

from ...errors import BuildError, CompilerNotFoundError
from ...toolchain import compiler  # called as compiler.X: a test may stand in for the compiler runner

#: architectures built when no GPU is found (Ampere and Hopper, the data-centre GPUs of the field)
DEFAULT_ARCHS = ("80", "90")
NVCC_WHEELS = "nvidia-cuda-nvcc nvidia-cuda-runtime nvidia-cuda-crt nvidia-nvvm"

def find_nvcc(nvcc: str | None = None) -> str:
    """``nvcc`` argument, else ``$NVCC``, else the nvcc of the ``nvidia-cuda-nvcc`` wheel in
    this Python environment, else ``nvcc`` on PATH."""
    cand = nvcc or os.environ.get("NVCC")
    if cand:
        path = shutil.which(cand)
        if path is None:
            raise CompilerNotFoundError(f"nvcc '{cand}' not found (check NVCC or the nvcc= argument)")
        return path
    try:
        import nvidia  # namespace package of the CUDA wheels

        for root in getattr(nvidia, "__path__", []):
            for sub in ("cu13", "cuda_nvcc"):
                p = Path(root) / sub / "bin" / "nvcc"
                if p.is_file() and os.access(p, os.X_OK):
                    return str(p)
    except ImportError:
        pass
    path = shutil.which("nvcc")
    if path is None:
        raise CompilerNotFoundError(
            f"nvcc not found: install the CUDA compiler wheels (pip install {NVCC_WHEELS}; "
            "`make` does this) or set NVCC to an nvcc"
        )
    return path


#: build as if these GPUs were found here (compute capabilities: "90", "80,90"), nvidia-smi not
#: asked: for compiling, on a machine without a GPU, the libraries a GPU machine's builds will look
#: for in the cache (benchmarks/gpu_check.py prepare, issue 47)
GPUS_ENV = "RBDGEN_CUDA_GPUS"


@functools.lru_cache(maxsize=None)
def detect_archs() -> tuple:
    """Compute capabilities of the GPUs on this machine (via nvidia-smi; ``$RBDGEN_CUDA_GPUS``
    instead where set), or () when none."""
    if os.environ.get(GPUS_ENV, "").strip():
        return parse_archs(os.environ[GPUS_ENV])
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        r = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ()
    if r.returncode != 0:
        return ()
    caps = sorted({line.strip().replace(".", "") for line in r.stdout.splitlines() if line.strip()})
    return tuple(c for c in caps if c.isdigit())


def parse_archs(arch) -> tuple:
    """``None`` → the GPUs found here, else sm_80 and sm_90; ``"native"`` likewise but an error
    without a GPU; ``"sm_86"``, ``"86"``, ``"80,90"`` or a list of those: machine code (SASS) for
    each. ``"compute_90"``: PTX only for that architecture, nvcc's virtual-architecture spelling —
    no ptxas at build time (~40 % less nvcc time), the driver compiles it for the GPU when the
    library is first loaded there; such entries stay ``"compute_NN"`` in the tuple, machine code
    entries are the bare numbers."""
    if arch is None or arch == "native":
        found = detect_archs()
        if found:
            return found
        if arch == "native":
            raise BuildError("arch='native' but no NVIDIA GPU was found (nvidia-smi); name an architecture such as sm_90")
        return DEFAULT_ARCHS
    items = arch.replace(",", " ").split() if isinstance(arch, str) else list(arch)
    out = []
    for a in items:
        s = str(a).strip().lower()
        ptx = s.startswith("compute_")
        for pre in ("sm_", "compute_", "sm"):
            if s.startswith(pre):
                s = s[len(pre):]
                break
        if not (s.isdigit() and 2 <= len(s) <= 3 and int(s) >= 50):
            raise BuildError(f"unknown CUDA architecture {a!r} (expected e.g. sm_80, 90, '80,90' or compute_90)")
        out.append("compute_" + s if ptx else s)
    if not out:
        raise BuildError("no CUDA architecture given")
    return tuple(sorted(set(out), key=lambda a: (int(arch_number(a)), a.startswith("compute_"))))


def arch_number(a: str) -> str:
    """``"90"`` of ``"90"`` or ``"compute_90"`` (an entry of :func:`parse_archs`)."""
    return a.removeprefix("compute_")


def arch_label(a: str) -> str:
    """``sm_90`` (machine code) or ``compute_90`` (PTX only)."""
    return a if a.startswith("compute_") else f"sm_{a}"


def nvcc_flags(archs, opt: str = "-O3", werror: bool = False, ptx: bool = True) -> list[str]:
    """Machine code for each architecture (``compute_NN`` entries: PTX only) plus (``ptx``) PTX of
    the newest, which the driver can compile for GPUs newer than any listed. ptxas prints its
    resource report (``-Xptxas -v``), which the build keeps for ``rbdgen inspect --cost --target
    cuda``."""
    flags = [*DEVICE_FLAGS, opt, "-Xcompiler", "-fPIC,-Wall,-Wextra" + (",-Werror" if werror else ""),
             "-Xptxas", "-v"]
    if werror:
        flags += ["--Werror", "all-warnings"]
    for a in archs:
        n = arch_number(a)
        flags += ["-gencode", f"arch=compute_{n},code={'compute' if a != n else 'sm'}_{n}"]
    newest = arch_number(archs[-1])
    if ptx and f"compute_{newest}" not in archs:
        flags += ["-gencode", f"arch=compute_{newest},code=compute_{newest}"]
    return flags


def builds_for_found_gpus(arch) -> bool:
    """Whether ``arch`` (as given to a build) means the GPUs found here, and some are: then the
    library carries their machine code only, no PTX — PTX is for GPUs newer than those a build
    names, and it was half of a compressed library (issue 47: the GPU tests' libraries are carried
    to a lent GPU, where every megabyte counts); on another GPU the architectures found differ, and
    so does the compile cache's key."""
    return arch in (None, "native") and bool(detect_archs())


def compile_library(files: dict, sources: list, libname: str, archs: tuple, *, opt: str = "-O3",
                    nvcc: str | None = None, werror: bool = False, progress=None, ptx: bool = True) -> str:
    """nvcc ``sources`` into one shared library (cached like the CPU kernels), keeping each
    source's ptxas report; returns the library's path."""
    nvcc = find_nvcc(nvcc)
    return compiler.build_library(files, sources, libname, nvcc_flags(archs, opt=opt, werror=werror, ptx=ptx), cxx=nvcc,
                                  progress=progress, on_output=lambda src, text: record_build_reports(files, src, text, nvcc))


@dataclass(frozen=True)
class FunctionResources:
    """One function of a ptxas report."""

    name: str
    registers: int = 0
    stack: int = 0            # bytes of stack frame (local memory) of this function alone
    cumulative_stack: int = 0  # entries: the deepest call chain's stack, i.e. local bytes per thread
    spill_stores: int = 0
    spill_loads: int = 0
    static_smem: int = 0
    entry: bool = False


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_CUMUL = re.compile(r"(\d+) bytes cumulative stack size")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(text: str) -> dict:
    """``ptxas -v`` output → {mangled name: FunctionResources}. An entry's "Used … registers"
    line follows its "Compiling entry function" line; "Function properties for X" is followed
    by X's stack frame and spills."""
    funcs: dict[str, dict] = {}
    current_entry = None
    props_for = None
    for line in text.splitlines():
        m = _ENTRY.search(line)
        if m:
            current_entry = m.group(1)
            funcs.setdefault(current_entry, {"name": current_entry})["entry"] = True
            continue
        m = _PROPS.search(line)
        if m:
            props_for = m.group(1)
            funcs.setdefault(props_for, {"name": props_for})
            continue
        m = _FRAME.search(line)
        if m and props_for is not None:
            f = funcs[props_for]
            f["stack"], f["spill_stores"], f["spill_loads"] = map(int, m.groups())
            props_for = None
            continue
        m = _USED.search(line)
        if m and current_entry is not None:
            f = funcs[current_entry]
            f["registers"] = int(m.group(1))
            c = _CUMUL.search(line)
            f["cumulative_stack"] = int(c.group(1)) if c else 0
            s = _SMEM.search(line)
            f["static_smem"] = int(s.group(1)) if s else 0
    return {k: FunctionResources(**v) for k, v in funcs.items()}


#: what both a report's cubin and a build's objects are compiled with that reaches the device
#: code; nvcc's ``-O`` is the host compiler's level (a cubin has no host code), so it is not here
DEVICE_FLAGS = ("-std=c++17",)

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
_SECTION_ARCH = re.compile(r"Compiling entry function '[^']+' for 'sm_(\d+)'")


def ptxas_flags(arch: str) -> list[str]:
    return [*DEVICE_FLAGS, "-cubin", f"-arch=sm_{arch}", "-Xptxas", "-v"]


def _closure(files: dict, src: str) -> dict:
    """``src`` and the generated headers it includes, directly or through another."""
    seen: dict = {}
    todo = [src]
    while todo:
        name = todo.pop()
        if name in seen or name not in files:
            continue
        seen[name] = files[name]
        todo.extend(_INCLUDE.findall(files[name]))
    return seen


def _report_path(files: dict, src: str, arch: str, nvcc: str) -> Path:
    """Where ptxas's report of one source for ``sm_<arch>`` is cached: keyed by the text of the
    source and of every header it includes, the device flags, the architecture and nvcc — the
    same key whether the report's own cubin or a build of the library produced it."""
    return compiler.cache_dir() / f"ptxas-{compiler.content_key(_closure(files, src), [*DEVICE_FLAGS, f'sm_{arch}'], nvcc)}.txt"


def _write(path: Path, text: str) -> None:
    compiler.write_atomic(path, text.encode())


def split_by_arch(text: str) -> dict:
    """One nvcc command's ``-Xptxas -v`` output for several ``-gencode`` targets → {arch: its
    part}. ptxas runs once per architecture, one after the other; each run's lines start with its
    "N bytes gmem" line (when there are globals) and name the architecture on every entry
    function; the callees' lines follow the entries of their run."""
    parts: dict = {}
    arch, pending = None, []
    for line in text.splitlines(keepends=True):
        m = _SECTION_ARCH.search(line)
        if m and m.group(1) != arch:
            arch = m.group(1)
            parts[arch] = parts.get(arch, "") + "".join(pending)
            pending = []
        if "bytes gmem" in line and "Compiling" not in line:
            if arch is not None:
                parts[arch] += "".join(pending)
            pending, arch = [line], None  # the next run's first line; its arch comes with its entry
            continue
        if arch is None:
            pending.append(line)
        else:
            parts[arch] += line
    return parts


def record_build_reports(files: dict, src: str, text: str, nvcc: str) -> None:
    """Keep the ptxas report a library build printed for ``src`` (compiled with ``-Xptxas -v``),
    for every architecture it was compiled for, where :func:`ptxas_reports` looks first: the
    resource report of a robot whose CUDA kernels were built costs no second device compile."""
    for arch, part in split_by_arch(text).items():
        if _ENTRY.search(part):
            _write(_report_path(files, src, arch, nvcc), part)


def ptxas_reports(files: dict, sources: list, *, arch: str = "90", nvcc: str | None = None,
                  progress=None) -> dict:
    """Compile each of ``sources`` (names in ``files``, headers beside them) to a cubin for
    ``sm_<arch>`` with ``-Xptxas -v``; returns {source: {name: FunctionResources}}. Each source's
    report is cached by content (the compile cache folder), and a CUDA build of the same source
    leaves its report there too (:func:`record_build_reports`)."""
    nvcc = find_nvcc(nvcc)
    flags = ptxas_flags(arch)
    texts: dict = {}
    for s in sources:
        try:
            texts[s] = _report_path(files, s, arch, nvcc).read_text()
        except OSError:
            pass
    todo = [s for s in sources if s not in texts]
    if todo:
        with tempfile.TemporaryDirectory(prefix="rbdgen-ptxas-") as tmp:
            for name, text in files.items():
                (Path(tmp) / name).write_text(text)

            def one(src, wait=False):
                # one process compiles a report; another asking for it at the same time (two
                # test workers, two CLI calls) skips it, does the rest, then waits and reads it
                path = _report_path(files, src, arch, nvcc)
                lock = filelock.FileLock(str(path) + ".lock", mode=0o666)
                try:
                    held = lock.acquire(timeout=-1 if wait else 0)
                except filelock.Timeout:
                    return src, None
                with held:
                    try:
                        return src, path.read_text()
                    except OSError:
                        pass
                    if progress:
                        progress(f"ptxas -v {src} (sm_{arch})")
                    cmd = [nvcc, *flags, str(Path(tmp) / src), "-o", str(Path(tmp) / (Path(src).stem + ".cubin"))]
                    r = compiler.run_compiler(cmd)
                    if r.returncode != 0:
                        msg = (r.stderr or r.stdout).strip().splitlines()
                        raise BuildError(f"nvcc failed on {src}: " + " | ".join(msg[:5]))
                    _write(path, r.stdout + r.stderr)
                    return src, r.stdout + r.stderr

            with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as ex:
                done = dict(ex.map(one, todo))
                busy = [s for s, t in done.items() if t is None]
                done.update(ex.map(lambda s: one(s, wait=True), busy))
                texts.update(done)
    return {s: parse_ptxas(texts[s]) for s in sources}
