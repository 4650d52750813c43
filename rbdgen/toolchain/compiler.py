"""Compile generated sources into a shared library, cached by content.

Cache key: SHA-256 of every source file, the full compiler command line, the compiler's
version string and the rbdgen version. A build happens only on a miss, under a file lock
(concurrent processes building the same kernels wait for one another), in a private temporary
folder that is renamed into place when complete — a half-written library is never loaded.

An entry can still be damaged after it was complete: a crash soon after a build (the rename
reaches the disk before the data), a full disk, a copy of the cache that stopped half-way. A
truncated library killed Python with SIGBUS in ``dlopen`` on every later build, and an empty one
was a ``BuildError … file too short`` that was never rebuilt (issue 46). So each entry holds the
size and SHA-256 of its library, written at build time (:data:`DIGEST`), and a library is
loaded only when it matches them; one that does not is rebuilt, under the entry's lock, with a
warning, and so is one without a digest (made before digests were written), silently
(:func:`library_intact`).

A build that is killed (even with SIGKILL) takes its compilers with it: each compiler runs in
its own process group under a small shell that the kernel sends SIGTERM when rbdgen's process
dies (Linux ``PR_SET_PDEATHSIG``), and that shell kills the group (the compiler driver and its
cc1plus/as children). The temporary folder such a build leaves is removed by a later build
(:func:`_remove_stale`).

Beside the libraries, the cache holds precompiled headers that many builds share
(:func:`shared_pch`, entries ``pch-<key>/``): the ap_types headers as an HLS fixed-point C
simulation's harness reads them, once per compiler and flags, each with its size and SHA-256.

Sharing a cache between users: entries, lock files and folders are created with the
permissions the umask allows (not 0700), so a cache folder owned by a common group with the
setgid bit (``chmod 2775``), used with ``umask 002``, is shared.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import ctypes
import hashlib
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import filelock

from .._version import __version__
from ..errors import BuildError, CompilerNotFoundError, RbdgenWarning

CACHE_ENV = "RBDGEN_CACHE_DIR"


def cache_dir() -> Path:
    d = os.environ.get(CACHE_ENV)
    if d:
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rbdgen"


def find_cxx(cxx: str | None = None) -> str:
    cxx = cxx or os.environ.get("CXX") or "g++"
    path = shutil.which(cxx)
    if path is None:
        raise CompilerNotFoundError(
            f"C++ compiler '{cxx}' not found on PATH (install g++, or set CXX to a C++17 compiler)"
        )
    return path


_versions: dict = {}


def compiler_version(cxx: str) -> str:
    if cxx not in _versions:
        try:
            out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
            # the whole text: nvcc's first line names no version, its last lines do
            _versions[cxx] = out.stdout.strip() or cxx
        except (OSError, subprocess.SubprocessError) as e:
            raise CompilerNotFoundError(f"cannot run C++ compiler '{cxx}': {e}") from e
    return _versions[cxx]


#: ``march`` for a build that runs on any CPU of the architecture (no ``-march``: baseline
#: x86-64, SSE2); ``None`` means the default, ``$RBDGEN_MARCH`` or else this machine (native)
PORTABLE = "portable"
MARCH_ENV = "RBDGEN_MARCH"
_native: dict = {}
_macros: dict = {}


def native_target(cxx: str) -> str | None:
    """What ``-march=native`` means to ``cxx`` on this machine: the CPU and the instruction-set
    flags the driver expands it to (``cxx -march=native -###``), or None when ``cxx`` cannot
    target this machine. Part of the cache key of a native build, so that a compile cache shared
    between machines (an NFS home, a cluster's workers) never hands one CPU a library built for
    another's instructions."""
    if cxx not in _native:
        try:
            r = subprocess.run([cxx, "-march=native", "-###", "-E", "-x", "c++", os.devnull],
                               capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            r = None
        if r is None or r.returncode != 0:
            _native[cxx] = None
        else:
            # the compiler proper's command line (g++: cc1plus "-march=cooperlake" -mmmx …;
            # clang: -cc1 … "-target-cpu" "x" "-target-feature" "+avx2" …), without its path
            lines = [ln for ln in (r.stderr + r.stdout).splitlines() if "cc1" in ln]
            _native[cxx] = lines[-1].strip().split(None, 1)[-1] if lines else (r.stderr + r.stdout).strip()
    return _native[cxx]


def resolve_march(march: str | None, cxx: str | None = None) -> str | None:
    """The ``-march`` value a CPU build passes (None: none, a portable build). ``march=None``
    takes ``$RBDGEN_MARCH`` if set, else ``"native"`` — the kernels are compiled on the machine
    that runs them, and a portable x86-64 build lacks AVX's three-operand instructions, FMA and
    (AVX-512) 32 vector registers: floating-base ABA and M⁻¹ ran 1.5–2× slower in it
    (docs/performance.md §9). ``"native"`` falls back to portable where the compiler cannot
    target this machine. ``"portable"`` (or ``""``) is a build for any CPU of the architecture."""
    if march is None:
        march = os.environ.get(MARCH_ENV) or "native"
    march = str(march).strip()
    if march in ("", PORTABLE):
        return None
    if march == "native" and native_target(find_cxx(cxx)) is None:
        return None
    return march


def vector_bytes(march: str | None, cxx: str | None = None) -> int:
    """The width of one SIMD register the compiler targets with ``-march=march`` (None:
    portable): 64 bytes where AVX-512 is on, 32 where AVX is, else 16 (SSE2, Arm NEON). Which
    kernels use the 64 bytes: :func:`rbdgen.targets.cpu.kernel_lanes`."""
    if march is None:
        return 16
    cxx = find_cxx(cxx)
    key = (cxx, march)
    if key not in _macros:
        try:
            r = subprocess.run([cxx, f"-march={march}", "-dM", "-E", "-x", "c++", os.devnull],
                               capture_output=True, text=True, timeout=60)
            _macros[key] = r.stdout if r.returncode == 0 else ""
        except (OSError, subprocess.SubprocessError):
            _macros[key] = ""
    if "#define __AVX512F__ 1" in _macros[key]:
        return 64
    return 32 if "#define __AVX__ 1" in _macros[key] else 16


def cxx_flags(opt: str = "-O3", march: str | None = None, openmp: bool = True, extra=()) -> list[str]:
    # -fno-tree-slp-vectorize: the kernels are long straight-line scalar code (the batch path is
    # vectorised by hand, with GCC vector types), where g++'s SLP vectoriser packs unrelated
    # statements into vectors and adds shuffles. Measured on the 2-core Xeon (g++ 12, one state,
    # interleaved runs): -march=native iiwa aba 0.62 -> 0.46 µs, minv 0.59 -> 0.40 µs; portable
    # builds 0-5% faster (quadruped ∇ID 3.84 -> 3.54 µs); batches unchanged; TALOS's compile
    # 50 -> 39 s. docs/performance.md §8.
    flags = ["-std=c++17", opt, "-fPIC", "-Wall", "-Wextra", "-Wno-psabi", "-fno-math-errno",
             "-fno-tree-slp-vectorize"]
    if march:
        flags.append(f"-march={march}")
    if openmp:
        flags.append("-fopenmp")
    return flags + list(extra)


def _pdeathsig():
    """A preexec function that makes the child receive SIGTERM when this process dies, or None
    where the kernel offers no such thing. Resolved once, here: the child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec():
        prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the line above
            os._exit(1)

    return preexec


_PREEXEC = _pdeathsig()
# the shell that holds the compiler's process group and kills it when told to (or when the
# parent dies: SIGTERM from PR_SET_PDEATHSIG)
_GUARD = ['/bin/sh', '-c', 'trap "kill -KILL 0" TERM; "$@" & wait $!', "rbdgen-compile"]


def run_compiler(cmd: list) -> subprocess.CompletedProcess:
    """Run one compiler command, capturing its output; it dies with this process."""
    if _PREEXEC is None or not os.path.exists(_GUARD[0]):
        return subprocess.run(cmd, capture_output=True, text=True)
    return subprocess.run(_GUARD + cmd, capture_output=True, text=True, start_new_session=True, preexec_fn=_PREEXEC)


_TMP_RE = re.compile(r"^\.((?:pch-)?[0-9a-f]{24})-")  # a library's, or a shared_pch's


def _remove_stale(root: Path, own_key: str) -> None:
    """Remove the temporary folders of builds that were killed: those of ``own_key`` (whose
    lock this process holds) and those of any other key whose lock is free (no build of it is
    running). A folder of a build in progress is never touched."""
    for d in root.iterdir():
        m = _TMP_RE.match(d.name)
        if not m or not d.is_dir():
            continue
        key = m.group(1)
        if key == own_key:
            shutil.rmtree(d, ignore_errors=True)
            continue
        lock = filelock.FileLock(str(root / f"{key}.lock"), timeout=0, mode=0o666)
        try:
            with lock:
                shutil.rmtree(d, ignore_errors=True)
        except filelock.Timeout:
            pass  # being built right now


def write_atomic(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` through a temporary file beside it and a rename (a reader sees
    the old file or the new one, never part of one), with the permissions the umask allows (the
    cache may be shared). False, and nothing written, where the folder cannot be written: a
    cache we cannot write only costs time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return False
    return True


def content_key(files: dict, flags: list[str], cxx: str, source_flags: dict | None = None) -> str:
    """The cache key of compiling ``files`` with ``flags`` by ``cxx``: SHA-256 of the sources,
    the command lines (``source_flags``: the sources compiled with other flags), the compiler's
    version string and rbdgen's version (24 hex digits); for ``-march=native``, also what it means
    on this machine (:func:`native_target`)."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    h.update(" ".join(flags).encode() + b"\0" + compiler_version(cxx).encode() + b"\0" + __version__.encode())
    for name in sorted(source_flags or ()):
        h.update(b"\0" + name.encode() + b"\0" + " ".join(source_flags[name]).encode())
    if any("-march=native" in f for f in [*flags, *(x for v in (source_flags or {}).values() for x in v)]):
        h.update(b"\0native\0" + str(native_target(cxx)).encode())  # which machine "native" was
    return h.hexdigest()[:24]


#: beside each cached library ``<name>.so``, ``<name>.so.digest``: its size and SHA-256, written at
#: build time (``size 56584`` and ``sha256 <hex>``, one a line)
DIGEST = ".digest"
_CHUNK = 1 << 20
#: what :func:`library_intact` says of a library without a digest: damaged, or built before
#: digests were written; rebuilt either way, the latter without a warning
NO_DIGEST = "no size and SHA-256 recorded beside it"
#: libraries this process found intact, by (path, size, mtime, inode): a warm build in the same
#: process does not hash the file again
_verified: set = set()


def file_digest(path: Path) -> tuple[int, str]:
    """The size and SHA-256 (hex) of the file at ``path``."""
    h, n = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            n += len(chunk)
    return n, h.hexdigest()


def write_digest(lib: Path) -> None:
    """Record ``lib``'s size and SHA-256 beside it (in the build's private folder, before the rename)."""
    size, sha = file_digest(lib)
    lib.with_name(lib.name + DIGEST).write_text(f"size {size}\nsha256 {sha}\n")


def library_intact(lib: Path) -> str | None:
    """None when ``lib`` has the size and SHA-256 recorded beside it at build time, else what is
    wrong with it (missing, no digest, truncated, different bytes): then it must not be loaded.
    The size is compared first (a truncated file is refused without reading it). Measured on the
    2-core VM: TALOS's library (floating base, 23 kernels, 4.7 MB) hashes in 3.7-4 ms, and a warm
    build of it in a new process took 0.20-0.23 s with the check, 0.20-0.21 s without (noise); a
    second build in the same process does not hash the library again."""
    try:
        st = lib.stat()
    except OSError:
        return "missing"
    memo = (str(lib), st.st_size, st.st_mtime_ns, st.st_ino)
    if memo in _verified:
        return None
    try:
        rec = dict(line.split(" ", 1) for line in lib.with_name(lib.name + DIGEST).read_text().splitlines())
        size, sha = int(rec["size"]), rec["sha256"].strip()
    except (OSError, ValueError, KeyError, UnicodeDecodeError):
        return NO_DIGEST
    if st.st_size != size:
        return f"{st.st_size} bytes where {size} were built"
    try:
        got = file_digest(lib)[1]
    except OSError as e:
        return f"unreadable ({e.strerror or e})"
    if got != sha:
        return "its SHA-256 differs from the one recorded at build time"
    _verified.add(memo)
    return None


class NotCached(Exception):
    """What :func:`build_library` raises inside :func:`cached_only` where the cache does not hold
    the library (instead of compiling it)."""


_CACHED_ONLY = contextvars.ContextVar("rbdgen_cached_only", default=False)


@contextlib.contextmanager
def cached_only():
    """Within the block (this thread), :func:`build_library` hands back only libraries the cache
    holds and raises :class:`NotCached` where it would compile: a generated package asks so
    whether its whole library was built (``rbdgen build DIR``) before it compiles a kernel alone."""
    token = _CACHED_ONLY.set(True)
    try:
        yield
    finally:
        _CACHED_ONLY.reset(token)


def build_library(files: dict, sources: list[str], libname: str, flags: list[str], *, cxx: str | None = None,
                  progress=None, jobs: int | None = None, source_flags: dict | None = None,
                  on_output=None, pch: str | None = None, static: bool = False,
                  link: tuple | list = (), prepare=None) -> Path:
    """Compile ``sources`` (names in ``files``) to a shared library; returns its cached path.
    ``source_flags`` maps a source to the flags it is compiled with instead of ``flags`` (which
    also link the library). ``on_output(source, text)`` receives what the compiler printed for
    each source it compiled successfully (not called on a cache hit). ``progress(message)``, on
    a miss: ``compiling i/n: <source>`` as each source starts (the longest first), ``linking``,
    and ``waiting for another process building …`` while another holds the entry's lock.
    ``pch``: a header the sources include first (a name in ``files``, or a path), precompiled
    once for them (:func:`_precompile`). ``static``: a static archive ``<libname>.a`` of the
    objects instead (position-independent where ``flags`` say ``-fPIC``), for code that many
    libraries link unchanged — Verilator's runtime, compiled once instead of into every
    simulation. ``link``: archives (cache paths returned with ``static``) linked into the
    library; their paths name their own content keys, so they are part of this library's key.
    ``prepare()``: called on a miss, before anything is compiled (:class:`SharedPch`'s make: what
    ``-include`` reads, made only when a source will read it)."""
    cxx = find_cxx(cxx)
    source_flags = {k: list(v) for k, v in (source_flags or {}).items() if list(v) != list(flags)}
    link = [str(x) for x in link]
    key = content_key(files, [*flags, *link, *(["-static-archive"] if static else [])], cxx, source_flags)
    root = cache_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BuildError(f"cannot create the compile cache '{root}': {e.strerror or e} (set {CACHE_ENV})") from e
    final = root / key
    lib = final / f"{libname}.{'a' if static else 'so'}"
    if library_intact(lib) is None:
        return lib
    if _CACHED_ONLY.get():
        raise NotCached(str(lib))
    lock = filelock.FileLock(str(root / f"{key}.lock"), mode=0o666)  # group-writable under umask 002
    try:
        held = lock.acquire(timeout=0)
    except filelock.Timeout:
        if progress:
            progress(f"waiting for another process building {libname}.so (lock {lock.lock_file})")
        held = lock.acquire()
    with held:
        damage = library_intact(lib)
        if damage is None:
            return lib
        if lib.exists():  # damaged: rebuilt below, and the folder replaced
            if damage != NO_DIGEST:
                warnings.warn(f"the compile cache's {lib} is damaged ({damage}): building it again",
                              RbdgenWarning, stacklevel=2)
            if progress:
                progress(f"compile cache entry unverified ({damage}): building it again")
        _remove_stale(root, key)
        if prepare is not None:
            prepare()
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        try:
            for name, text in files.items():
                (tmp / name).write_text(text)
            gch = _precompile(cxx, flags, tmp, pch, progress) if pch and len(sources) > 1 else None

            started, count = itertools.count(1), threading.Lock()

            def compile_one(src):
                obj = tmp / (Path(src).stem + ".o")
                cmd = [cxx, *source_flags.get(src, flags), "-c", str(tmp / src), "-o", str(obj)]
                if progress:
                    with count:
                        i = next(started)
                    progress(f"compiling {i}/{len(sources)}: {src}")
                r = run_compiler(cmd)
                if r.returncode != 0:
                    msg = (r.stderr or r.stdout).strip().splitlines()
                    raise BuildError(f"{Path(cxx).name} failed on {src}: " + " | ".join(msg[:5]))
                if on_output is not None:
                    on_output(src, r.stdout + r.stderr)
                return obj

            # longest first (by source size), so that the biggest translation unit does not start
            # last and leave the other cores idle; linked in the given order
            order = sorted(sources, key=lambda s: -len(files[s]))
            with ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as ex:
                built = dict(zip(order, ex.map(compile_one, order)))
            objs = [built[s] for s in sources]
            if static:
                verb, cmd = "archiving", [shutil.which("ar") or "ar", "rcs", str(tmp / lib.name), *map(str, objs)]
            else:
                verb, cmd = "linking", [cxx, *flags, "-shared", *map(str, objs), *link, "-o", str(tmp / lib.name)]
            if progress:
                progress(f"{verb} {lib.name} ({len(objs)} objects)")
            r = run_compiler(cmd)
            if r.returncode != 0:
                raise BuildError(f"{verb} {lib.name} failed: {(r.stderr or r.stdout).strip()[:500]}")
            for o in objs:
                o.unlink()
            if gch is not None:  # tens of MB, and of no use once the sources are compiled
                gch.unlink(missing_ok=True)
                if os.path.isabs(pch):
                    (tmp / Path(pch).name).unlink(missing_ok=True)  # the forwarding header
            write_digest(tmp / lib.name)
            # the flags, each source's own flags, and the archives linked in (to rebuild by hand)
            (tmp / "command.txt").write_text(" ".join([cxx, *flags]) + "\n" + "".join(
                f"{src}: {' '.join([cxx, *source_flags[src]])}\n" for src in sorted(source_flags))
                + (f"linked: {' '.join(link)}\n" if link else ""))
            os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp made it private; the cache may be shared
            if final.exists():  # a stale partial folder from a killed build, or a damaged entry
                shutil.rmtree(final)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return lib


def _is_gcc(cxx: str) -> bool:
    """Whether ``cxx`` is GCC (its own banner), whose precompiled headers these are."""
    version = compiler_version(cxx)
    return "clang" not in version.lower() and "Free Software Foundation" in version


class SharedPch:
    """A header in the compile cache beside GCC's precompiled form of it, made once for a
    compiler and its flags and shared by every build that compiles a source with those flags and
    ``-include`` :attr:`header` (:func:`shared_pch`)."""

    def __init__(self, header: Path, text: str, cxx: str, flags: list):
        self.header, self.text, self.cxx, self.flags = header, text, cxx, list(flags)

    def make(self, progress=None) -> bool:
        """Write the header, and precompile it unless it is there, intact (its size and SHA-256,
        as a library's), under the entry's lock; whether the ``.gch`` is there. A header that does
        not precompile is still written: a source that ``-include``s it parses it."""
        final = self.header.parent
        root, key = final.parent, final.name
        gch = final / (self.header.name + ".gch")
        try:
            if library_intact(gch) is None:
                return True
            root.mkdir(parents=True, exist_ok=True)
            with filelock.FileLock(str(root / f"{key}.lock"), mode=0o666):
                if library_intact(gch) is None:
                    return True
                if progress:
                    progress(f"precompiling {self.header.name} (for every later build with these flags)")
                tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
                try:
                    (tmp / self.header.name).write_text(self.text)
                    r = run_compiler([self.cxx, *self.flags, "-x", "c++-header", str(tmp / self.header.name),
                                      "-o", str(tmp / gch.name)])
                    if r.returncode == 0:
                        write_digest(tmp / gch.name)
                    else:
                        (tmp / gch.name).unlink(missing_ok=True)
                    os.chmod(tmp, 0o777 & ~_umask())  # as build_library's folders
                    if final.exists():  # damaged, or left by a killed build
                        shutil.rmtree(final)
                    os.rename(tmp, final)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
                return r.returncode == 0
        except OSError:
            # the compile that -includes the header reports a header it cannot read
            return False


@functools.lru_cache(maxsize=None)
def _tree_digest(folder: str) -> str:
    """SHA-256 of the names and bytes of every file under ``folder``, once per process (a warm
    build's :func:`shared_pch` would read the ap_types' 600 KB again on every load)."""
    h = hashlib.sha256()
    for f in sorted(Path(folder).rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(folder)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def shared_pch(cxx: str, flags: list, name: str, text: str, deps: tuple = ()) -> SharedPch | None:
    """Where the header ``name`` (``text``) and its precompiled form for ``cxx`` and ``flags``
    are in the compile cache (``pch-<key>/``): a source compiled with those flags and
    ``-include <header>`` reads them; pass :meth:`SharedPch.make` to :func:`build_library` as
    ``prepare``, so that they are made on a miss only. None where the compiler is not GCC.
    ``deps``: folders whose files the header reads (their bytes are in the key: an upgraded
    ap_types is a new entry). :func:`_precompile`'s precompiled headers are per build; this one
    serves builds of other robots and formats too (the HLS fixed-point C-simulation harness,
    whose ~2 s of parsing the ap_types every such build paid)."""
    if not _is_gcc(cxx):
        return None
    digests = "".join(_tree_digest(str(d)) for d in deps)
    key = "pch-" + content_key({name: text, "<deps>": digests}, flags, cxx)
    return SharedPch(cache_dir() / key / name, text, cxx, flags)


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _precompile(cxx: str, flags: list, folder: Path, header: str, progress=None) -> Path | None:
    """GCC's precompiled form of ``header`` (a file in ``folder``, or a path) as
    ``folder/<name>.gch``, where GCC looks for it first when a source in ``folder`` includes
    ``<name>``; None where the compiler is not GCC or the header does not precompile. GCC reads
    the ``.gch`` only for a source compiled with the same flags that includes the header before
    anything else, and otherwise parses the header: what a build compiles is the same either
    way, only faster (the ap_types headers are ~2.6 s of every HLS C-simulation source, Verilator's
    runtime header 1.3 s of every one of a module's dozens of sources)."""
    if not _is_gcc(cxx):
        return None
    src = folder / Path(header).name
    if os.path.isabs(header):
        # a header from elsewhere (a tool's include folder): GCC takes the folder that holds a
        # .gch for the header's own, so a source that includes it later (not first: the .gch is
        # unusable there) must find the header here too; this one forwards to it
        src.write_text(f'#include "{Path(header).as_posix()}"\n')
    out = folder / (src.name + ".gch")
    if progress:
        progress(f"precompiling {src.name}")
    r = run_compiler([cxx, *flags, "-x", "c++-header", str(src), "-o", str(out)])
    if r.returncode != 0:
        out.unlink(missing_ok=True)
        if os.path.isabs(header):
            src.unlink(missing_ok=True)
        return None
    return out


def python_include():
    """Folders of Python.h and of NumPy's C headers, or None when either is missing (then calls
    go through ctypes, with more per-call overhead)."""
    import sysconfig

    import numpy

    inc = sysconfig.get_paths().get("include")
    npy = numpy.get_include()
    if inc and os.path.exists(os.path.join(inc, "Python.h")) and os.path.exists(os.path.join(npy, "numpy", "arrayobject.h")):
        return (inc, npy)
    return None
