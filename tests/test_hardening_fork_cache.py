"""Issue 46, second round: a batch in a forked child after a parallel batch in the parent (it
hung: libgomp's thread pool does not survive fork), and damaged cache entries (a truncated
library killed Python with SIGBUS on every later build, an empty one was never rebuilt, and a
generation-cache entry damaged where zlib's Adler-32 does not see it was compiled). The fork and
each load of a damaged library run in a subprocess, with a timeout: a hang fails the test instead
of stalling the suite, and a SIGBUS kills only the subprocess."""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest

import rbdgen
import rbdgen.robots
from rbdgen.errors import RbdgenWarning
from rbdgen.targets.cpu import CpuTarget
from rbdgen.toolchain import compiler, gencache

from conftest import TOL64, random_state, ref_out, relerr

IIWA = rbdgen.robots.path("iiwa14")


def _run(script: str, timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """``script`` in a new Python process (a session of its own), killed with everything it
    forked when it takes longer than ``timeout`` seconds: then the test fails, it does not hang."""
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env=dict(os.environ, **(env or {})))
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the script and the children it forked (they hang too)
        out, err = p.communicate()
        pytest.fail(f"no result after {timeout} s (hung):\n{out[-2000:]}\n{err[-2000:]}")
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def _has_pause() -> bool:
    """Whether the OpenMP runtime the kernels link has omp_pause_resource_all (OpenMP 5.0: GCC 9's
    libgomp and later), which lets a forked child keep its threads."""
    try:
        return hasattr(ctypes.CDLL("libgomp.so.1"), "omp_pause_resource_all")
    except OSError:
        return False


# ---- 1. fork after a parallel batch --------------------------------------------------------------

_FORK_SCRIPT = """
    import json, multiprocessing as mp, os, re
    import numpy as np
    import rbdgen, rbdgen.robots
    from rbdgen.targets.cpu.emit import PARALLEL_OPS

    def threads():
        return int(re.search(r"Threads:\\s+(\\d+)", open("/proc/self/status").read()).group(1))

    m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    kern = rbdgen.build(m, kernels=["rnea"])
    n = 4 * (PARALLEL_OPS // kern.op_counts["rnea"]["total"] + 1)  # 4x what goes parallel
    rng = np.random.default_rng(3)
    Q, V, A = m.random_q(rng, n), rng.normal(size=(n, m.nv)), rng.normal(size=(n, m.nv))
    before = threads()
    tau = kern.rnea(Q, V, A)
    pool_threads = threads() - before  # the OpenMP pool the batch started

    def work(_):
        # the worker's threads after its batch: its main thread and the OpenMP pool's (a fork
        # copies only the forking thread). A count, not a difference: Pool.map may hand both
        # tasks to one worker, whose second batch finds the pool already started
        out = kern.rnea(Q, V, A)
        return out.tolist(), threads()

    with mp.get_context("fork").Pool(2) as p:  # hung here
        res = p.map(work, range(2))

    # and a child's child (the child forks after a parallel batch of its own)
    pid = os.fork()
    if pid == 0:
        ok = np.array_equal(kern.rnea(Q, V, A), tau)
        pid2 = os.fork()
        if pid2 == 0:
            os._exit(0 if np.array_equal(kern.rnea(Q, V, A), tau) else 3)
        _, st = os.waitpid(pid2, 0)
        os._exit(0 if ok and os.waitstatus_to_exitcode(st) == 0 else 4)
    _, st = os.waitpid(pid, 0)
    # the parent again: its pool was shut down for the fork and starts again
    again = np.array_equal(kern.rnea(Q, V, A), tau)
    print(json.dumps({"n": n, "pool_threads": pool_threads, "tau": tau.tolist(), "Q": Q.tolist(),
                      "V": V.tolist(), "A": A.tolist(), "children": [r[0] for r in res],
                      "child_threads": [r[1] for r in res], "grandchild_rc": os.waitstatus_to_exitcode(st),
                      "parent_again": again}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc; fork")
def test_batch_in_a_forked_child_returns_after_a_parallel_batch():
    """A multiprocessing "fork" pool over a kernel, after one parallel batch in the parent: each
    worker's batch returns the parent's numbers (it waited forever for the pool's threads)."""
    rbdgen.build(rbdgen.load_urdf(IIWA), kernels=["rnea"])  # compiled here: the script's timeout is for the fork
    # a pool even on one core, and every batch of at least PARALLEL_OPS operations parallel
    r = _run(_FORK_SCRIPT, timeout=120, env={"OMP_NUM_THREADS": "2", "RBDGEN_PARALLEL_OPS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert d["pool_threads"] >= 1, "the parent's batch did not go parallel: the test shows nothing"
    tau = np.array(d["tau"])
    for child in d["children"]:
        assert np.array_equal(np.array(child), tau)  # the same kernel on the same states
    assert d["grandchild_rc"] == 0 and d["parent_again"]
    # the parent's numbers are the reference's (on a sample of the states)
    m = rbdgen.load_urdf(IIWA)
    Q, V, A = (np.array(d[k]) for k in "QVA")
    idx = np.arange(0, d["n"], d["n"] // 16)
    assert relerr(tau[idx], ref_out(m, "rnea", Q[idx], V[idx], A[idx])) <= TOL64
    if _has_pause():  # the children kept OpenMP: the parent's pool was shut down before the fork
        assert all(t >= 2 for t in d["child_threads"]), d["child_threads"]


# ---- 2. a damaged library in the compile cache ---------------------------------------------------

_LOAD_SCRIPT = """
    import json, warnings
    import numpy as np
    import rbdgen, rbdgen.robots
    warnings.simplefilter("always")
    m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    with warnings.catch_warnings(record=True) as w:
        kern = rbdgen.build(m, kernels=["rnea"], march="portable", opt="-O1")
    rng = np.random.default_rng(4)
    Q, V, A = m.random_q(rng, 8), rng.normal(size=(8, m.nv)), rng.normal(size=(8, m.nv))
    print(json.dumps({"path": kern.path, "tau": kern.rnea(Q, V, A).tolist(), "Q": Q.tolist(), "V": V.tolist(),
                      "A": A.tolist(), "warnings": [str(x.message) for x in w]}))
"""


def _load_in_child(cache) -> tuple[subprocess.CompletedProcess, dict | None]:
    r = _run(_LOAD_SCRIPT, timeout=300, env={"RBDGEN_CACHE_DIR": str(cache), gencache.ENV: "1"})
    lines = r.stdout.strip().splitlines()
    return r, (json.loads(lines[-1]) if r.returncode == 0 and lines else None)


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory):
    """A compile cache holding the library of _LOAD_SCRIPT, built once for the module."""
    cache = tmp_path_factory.mktemp("cache")
    r, d = _load_in_child(cache)
    assert d is not None, r.stderr[-3000:]
    return cache


@pytest.mark.parametrize("damage", ["truncated", "empty", "one byte changed", "no digest"])
def test_a_damaged_library_in_the_compile_cache_is_rebuilt(built_cache, tmp_path, damage):
    """A library damaged after its build (a crash before the data reached the disk, a full disk, a
    copy cut short) is rebuilt on the next build, which then gives the reference's numbers; it
    killed Python with SIGBUS (truncated) or was a BuildError forever (empty). An entry without a
    digest (made before digests were written) is rebuilt too, without a warning."""
    shutil.copytree(built_cache, tmp_path / "c")
    (lib,) = (str(p) for p in (tmp_path / "c").glob("*/*.so"))
    size = os.path.getsize(lib)
    if damage == "truncated":
        os.truncate(lib, size // 2)
    elif damage == "empty":
        os.truncate(lib, 0)
    elif damage == "one byte changed":
        with open(lib, "r+b") as f:
            f.seek(size // 2)
            b = f.read(1)
            f.seek(size // 2)
            f.write(bytes([b[0] ^ 0xFF]))
    else:
        for p in Path(lib).parent.iterdir():
            if p.name.endswith(compiler.DIGEST):
                p.unlink()
    r, d2 = _load_in_child(tmp_path / "c")
    assert r.returncode != -signal.SIGBUS, "SIGBUS"
    assert r.returncode == 0, r.stderr[-3000:]
    assert d2["path"] == lib
    m = rbdgen.load_urdf(IIWA)
    Q, V, A = (np.array(d2[k]) for k in "QVA")
    assert relerr(np.array(d2["tau"]), ref_out(m, "rnea", Q, V, A)) <= TOL64
    assert any("damaged" in w for w in d2["warnings"]) == (damage != "no digest"), d2["warnings"]
    assert os.path.getsize(lib) > 0 and compiler.library_intact(Path(lib)) is None  # rebuilt, with its digest
    r, d3 = _load_in_child(tmp_path / "c")  # and the rebuilt entry is a plain hit
    assert d3 is not None and not d3["warnings"] and d3["tau"] == d2["tau"]


# ---- 2b. a damaged entry of the generation cache -------------------------------------------------

@pytest.fixture()
def generated(monkeypatch, tmp_path):
    """A fresh cache folder, and the kernels the CPU target generated in it, in order."""
    monkeypatch.setenv("RBDGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(gencache.ENV, raising=False)
    calls = []
    orig = CpuTarget.generate

    def generate(self, model, kernels, **kw):
        calls.append(tuple(kernels))
        return orig(self, model, kernels, **kw)

    monkeypatch.setattr(CpuTarget, "generate", generate)
    return calls


def _check_rnea(kern, model):
    assert kern.kernels == ("rnea",)
    q, v, a, _ = random_state(model, seed=6, n=5)
    assert relerr(kern.rnea(q, v, a), ref_out(model, "rnea", q, v, a)) <= TOL64


def test_a_damaged_generation_cache_entry_is_a_miss_and_rewritten(generated, tmp_path):
    """Truncated, empty, garbage, or another key's entry (a valid entry, the wrong one): the next
    build generates again, builds the right kernels and writes the entry back as it was. The last
    one was a hit: the kernels of the other entry were built and loaded."""
    model = rbdgen.load_urdf(IIWA)
    kw = dict(march="portable", opt="-O1")
    _check_rnea(rbdgen.build(model, kernels=["rnea"], **kw), model)
    (entry,) = (tmp_path / "generated").iterdir()
    good = entry.read_bytes()
    rbdgen.build(model, kernels=["gravity"], **kw)
    (other,) = set((tmp_path / "generated").iterdir()) - {entry}
    assert generated == [("rnea",), ("gravity",)]
    for damage in ("truncated", "empty", "garbage", "another key's entry"):
        entry.write_bytes({"truncated": good[: len(good) // 2], "empty": b"",
                           "garbage": np.random.default_rng(0).bytes(len(good)),
                           "another key's entry": other.read_bytes()}[damage])
        generated.clear()
        _check_rnea(rbdgen.build(model, kernels=["rnea"], **kw), model)
        assert generated == [("rnea",)], damage  # a miss
        assert entry.read_bytes() == good, damage  # written again
    generated.clear()
    _check_rnea(rbdgen.build(model, kernels=["rnea"], **kw), model)
    assert generated == []  # and a hit again


def test_damage_that_zlib_cannot_see_in_a_generation_cache_entry_is_a_miss(tmp_path, monkeypatch):
    """Damage that keeps the zlib stream valid: three consecutive bytes changed by +1, -2, +1 keep both
    of Adler-32's sums (zlib's only check), here in an entry stored without compression so that
    the bytes are the C++ itself. It was a hit, with the changed sources; the SHA-256 makes it a
    miss. Such damage happens in compressed entries too: 2 of 52 539 single-bit flips of an iiwa
    rnea entry got through zlib (each changed three characters of the C++ and kept the sum). And
    a flipped bit at every third byte of an ordinary entry: each load a miss, or the sources as
    generated."""
    monkeypatch.setenv("RBDGEN_CACHE_DIR", str(tmp_path))
    from rbdgen.targets import get_target

    src = get_target("cpu").generate(rbdgen.load_urdf(IIWA), ("gravity",), dtypes=("float64",), name=None, lanes=4)
    k = "f" * 32
    gencache.store(k, src)
    path = gencache._path(k)
    good = path.read_bytes()
    assert gencache.load(k).files == src.files
    for i in range(0, len(good), 3):
        b = bytearray(good)
        b[i] ^= 1 << (i % 8)
        path.write_bytes(bytes(b))
        back = gencache.load(k)
        assert back is None or back.files == src.files, f"byte {i}"

    compress = zlib.compress
    with monkeypatch.context() as mp:
        mp.setattr(zlib, "compress", lambda data, level=-1: compress(data, 0))  # stored blocks
        gencache.store(k, src)
    raw = path.read_bytes()
    at = raw.index(b"gravity")
    damaged = raw[:at] + bytes([raw[at] + 1, raw[at + 1] - 2, raw[at + 2] + 1]) + raw[at + 3:]  # "hpbvity"
    path.write_bytes(raw)
    assert gencache.load(k).files == src.files
    path.write_bytes(damaged)
    assert gencache.load(k) is None  # a miss (was: a hit, with "hpbvity" in the C++)


def test_a_compile_cache_hit_hashes_the_library_once_per_process(tmp_path, monkeypatch):
    """The check reads the library once per process: a later build of the same kernels in it knows
    the file by its size, time and inode, and does not hash it again."""
    monkeypatch.setenv("RBDGEN_CACHE_DIR", str(tmp_path))
    model = rbdgen.load_urdf(IIWA)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RbdgenWarning)
        kern = rbdgen.build(model, kernels=["gravity"], march="portable", opt="-O1")
    calls = []
    orig = compiler.file_digest
    monkeypatch.setattr(compiler, "file_digest", lambda p: calls.append(p) or orig(p))
    compiler._verified.clear()
    assert rbdgen.build(model, kernels=["gravity"], march="portable", opt="-O1").path == kern.path
    assert rbdgen.build(model, kernels=["gravity"], march="portable", opt="-O1").path == kern.path
    assert len(calls) == 1


@pytest.mark.parametrize("where", ["in the sources", "a path"])
def test_a_precompiled_header_is_used_and_leaves_nothing_in_the_cache(tmp_path, monkeypatch, where):
    """build_library(pch=…): GCC compiles the header once and takes the .gch for a source that
    includes it first (-H prints "! …h.h.gch" for a precompiled header it used); a source that
    includes it later parses it (the .gch is unusable there; a header given by path is reached
    through the forwarding header); the library works, and neither the .gch nor the forwarder
    is kept in the cache."""
    monkeypatch.setenv("RBDGEN_CACHE_DIR", str(tmp_path / "cache"))
    inc = tmp_path / "inc"
    inc.mkdir()
    header = ("#pragma once\n#ifndef RBD_PCH_BUILT\n#define RBD_PCH_BUILT\n#else\n#error parsed twice\n#endif\n"
              "inline int rbd_three() { return 3; }\n")
    first = '#include "h.h"\nextern "C" int rbd_first() { return rbd_three(); }\n'
    later = 'static int rbd_zero = 0;\n#include "h.h"\nextern "C" int rbd_later() { return rbd_three() + rbd_zero; }\n'
    files = {"a.cpp": first, "b.cpp": later}
    if where == "a path":
        (inc / "h.h").write_text(header)
        pch, flags = str(inc / "h.h"), ["-O1", "-fPIC", "-H", "-I", str(inc)]
    else:
        files["h.h"] = header
        pch, flags = "h.h", ["-O1", "-fPIC", "-H"]
    seen, printed = [], {}
    lib = compiler.build_library(files, ["a.cpp", "b.cpp"], "rbd_pch", flags, pch=pch, progress=seen.append,
                                 on_output=printed.__setitem__)
    assert any(m == "precompiling h.h" for m in seen), seen
    used = [ln for ln in printed["a.cpp"].splitlines() if ln.startswith("!") and ln.endswith("h.h.gch")]
    assert used, printed["a.cpp"]
    assert not any(ln.startswith("!") for ln in printed["b.cpp"].splitlines()), printed["b.cpp"]
    dll = ctypes.CDLL(str(lib))
    assert dll.rbd_first() == 3 and dll.rbd_later() == 3
    kept = sorted(p.name for p in lib.parent.iterdir())
    assert not [n for n in kept if n.endswith(".gch")], kept
    assert ("h.h" in kept) == (where == "in the sources"), kept


def test_a_static_archive_is_built_once_and_linked_into_libraries(tmp_path, monkeypatch):
    """build_library(static=True) caches ``<name>.a`` (what the Verilator simulations link
    instead of compiling Verilator's runtime each time); ``link=[archive]`` links it into a
    library that calls it; a second library reuses the archive without compiling it again; and
    an archive of other content is another key for the library that links it."""
    monkeypatch.setenv("RBDGEN_CACHE_DIR", str(tmp_path / "cache"))
    flags = ["-O0", "-fPIC"]

    def archive(n):
        return compiler.build_library({"r.cpp": f'extern "C" int rbd_runtime() {{ return {n}; }}\n'}, ["r.cpp"],
                                      "rbd_rt", flags, static=True)

    rt = archive(40)
    assert rt.name == "rbd_rt.a" and compiler.library_intact(rt) is None
    user = {"u.cpp": 'extern "C" int rbd_runtime();\nextern "C" int rbd_user() { return rbd_runtime() + 2; }\n'}
    lib = compiler.build_library(user, ["u.cpp"], "rbd_user", flags, link=[rt])
    assert ctypes.CDLL(str(lib)).rbd_user() == 42
    # command.txt says what was linked in, so that the library can be rebuilt by hand
    assert (lib.parent / "command.txt").read_text().splitlines()[-1] == f"linked: {rt}"
    seen = []
    assert archive(40) == rt and compiler.build_library(user, ["u.cpp"], "rbd_user", flags, link=[archive(40)],
                                                        progress=seen.append) == lib
    assert seen == []  # both cache hits: nothing compiled
    other = archive(50)
    lib2 = compiler.build_library(user, ["u.cpp"], "rbd_user", flags, link=[other])
    assert other != rt and lib2 != lib and ctypes.CDLL(str(lib2)).rbd_user() == 52


# ---- when a batch goes parallel (issue 47, item 3) -------------------------------------------------

_THRESHOLD_SCRIPT = """
    import json, os
    import numpy as np
    import rbdgen, rbdgen.robots
    from rbdgen import reference as ref
    from rbdgen.targets.cpu.emit import PARALLEL_OPS

    m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    kern = rbdgen.build(m, kernels=["rnea"])
    ops = kern.op_counts["rnea"]["total"]
    out = {"floor": PARALLEL_OPS, "measured": kern.parallel_ops}
    rng = np.random.default_rng(0)
    errs = []
    for n in (7, PARALLEL_OPS // ops + 9, 3 * (PARALLEL_OPS // ops)):  # serial, then over the floor
        for setting in (1, 10**12):  # parallel from the floor on / never
            kern.parallel_ops = setting
            out.setdefault("set", []).append(kern.parallel_ops)
            Q, V, A = m.random_q(rng, n), rng.normal(size=(n, m.nv)), rng.normal(size=(n, m.nv))
            errs.append(float(np.max(np.abs(kern.rnea(Q, V, A) - ref.rnea(m, Q, V, A)))))
    kern.parallel_ops = 0  # measured again
    out["again"] = kern.parallel_ops
    out["errs"] = errs
    try:
        kern.parallel_ops = -1
    except ValueError as e:
        out["bad"] = str(e)
    print(json.dumps(out))
"""


def test_the_parallel_threshold_is_measured_or_set():
    """The batch size from which a batch runs on several threads: measured once per process (at
    least the floor, PARALLEL_OPS), or set by $RBDGEN_PARALLEL_OPS or ``kern.parallel_ops``; the
    batches are right either way."""
    rbdgen.build(rbdgen.load_urdf(IIWA), kernels=["rnea"])  # compiled here, outside the timeout
    r = _run(_THRESHOLD_SCRIPT, timeout=120, env={"OMP_NUM_THREADS": "2"})
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert d["measured"] >= d["floor"] and d["again"] >= d["floor"]
    assert d["set"] == [1, 10**12] * 3
    assert max(d["errs"]) < 1e-9
    assert "parallel_ops" in d["bad"]
    r = _run(_THRESHOLD_SCRIPT, timeout=120, env={"OMP_NUM_THREADS": "2", "RBDGEN_PARALLEL_OPS": "123456"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["measured"] == 123456
    r = _run(_THRESHOLD_SCRIPT, timeout=120, env={"OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["measured"] == 2**63 - 1  # one thread: never


# GOMP_parallel (what GCC calls for `#pragma omp parallel`) counted, then forwarded to libgomp's
_GOMP_COUNTER = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
long rbd_test_gomp_parallel_calls = 0;
typedef void (*gomp_parallel_t)(void (*)(void*), void*, unsigned, unsigned);
void GOMP_parallel(void (*fn)(void*), void* data, unsigned n, unsigned flags) {
  static gomp_parallel_t real = 0;
  if (!real) {  // libgomp came with the kernels' library, loaded local: ask it by name
    void* gomp = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
    real = (gomp_parallel_t)dlsym(gomp ? gomp : RTLD_NEXT, "GOMP_parallel");
  }
  __atomic_add_fetch(&rbd_test_gomp_parallel_calls, 1, __ATOMIC_RELAXED);
  real(fn, data, n, flags);
}
"""

_REGIONS_SCRIPT = """
    import ctypes, json
    import numpy as np
    import rbdgen, rbdgen.robots
    from rbdgen import reference as ref
    from rbdgen.targets.cpu.emit import PARALLEL_OPS

    calls = ctypes.c_long.in_dll(ctypes.CDLL(None), "rbd_test_gomp_parallel_calls")
    m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    rng = np.random.default_rng(0)
    out = {}
    for simd in (True, False):  # the builds of the threshold test above and of test_armature_fext.py
        kern = rbdgen.build(m, kernels=["rnea"]) if simd else rbdgen.build(m, kernels=("rnea",), opt="-O0", simd=False)
        big = PARALLEL_OPS // kern.op_counts["rnea"]["total"] + 9
        for label, n, setting in (("small", 9, 1), ("big, never", big, 10**12), ("big, parallel", big, 1)):
            kern.parallel_ops = setting
            Q, V, A = m.random_q(rng, n), rng.normal(size=(n, m.nv)), rng.normal(size=(n, m.nv))
            for layout in ("rows", "states_last"):
                args = (Q, V, A) if layout == "rows" else tuple(np.ascontiguousarray(x.T) for x in (Q, V, A))
                before = calls.value
                tau = kern.rnea(*args, layout=layout)
                tau = tau if layout == "rows" else tau.T
                out[f"simd={simd} {label} {layout}"] = [calls.value - before,
                                                        float(np.max(np.abs(tau - ref.rnea(m, Q, V, A))))]
    print(json.dumps(out))
"""


def test_a_batch_too_small_to_share_opens_no_parallel_region(tmp_path):
    """A batch below the parallel threshold runs on the calling thread outside any OpenMP region:
    an `omp parallel if (false)` region, a team of one, still cost two futex syscalls a call (0.7 µs
    on the 2-core VM, more than iiwa rnea's whole batch of 4; docs/performance.md §51). GCC's
    GOMP_parallel is counted by a shim preloaded into a new process: none for a small batch, or
    for a big one when parallel batches are switched off; some for a big one allowed to share.
    Both layouts, SIMD and scalar batch paths; the results are right in every case."""
    shim = tmp_path / "gomp_count.so"
    src = tmp_path / "gomp_count.c"
    src.write_text(_GOMP_COUNTER)
    subprocess.run([compiler.find_cxx(), "-x", "c", "-shared", "-fPIC", "-O1", str(src), "-o", str(shim), "-ldl"],
                   check=True)
    rbdgen.build(rbdgen.load_urdf(IIWA), kernels=["rnea"])  # compiled here, outside the timeout
    rbdgen.build(rbdgen.load_urdf(IIWA), kernels=("rnea",), opt="-O0", simd=False)
    r = _run(_REGIONS_SCRIPT, timeout=120, env={"OMP_NUM_THREADS": "2", "LD_PRELOAD": str(shim)})
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(d) == 12
    for case, (regions, err) in d.items():
        assert err < 1e-9, case
        assert (regions >= 1) if case.endswith(("parallel rows", "parallel states_last")) else regions == 0, (case, d)


@pytest.mark.parametrize("simd", [True, False], ids=["simd", "scalar"])
def test_kernels_built_without_openmp_run_batches_on_the_calling_thread(simd):
    """The generated sources compile without OpenMP (the CMake package's <NAME>_OPENMP=OFF, or a
    compiler without it; its pragmas are then only warned about) and their batch paths run every
    state: the test of whether a batch goes parallel is plain C++ now (rbd_parallel), so it must
    build either way."""
    import ctypes as C

    from rbdgen.targets.cpu.emit import generate_cpu

    m = rbdgen.load_urdf(IIWA)
    gen = generate_cpu(m, dtypes=("float64",), kernels=["rnea"], python=False, simd=simd)
    flags = compiler.cxx_flags(opt="-O1", openmp=False)
    assert not any("openmp" in f for f in flags)
    lib = C.CDLL(str(compiler.build_library(gen.files, gen.sources["float64"], "rbd_iiwa14", flags)))
    n = 11  # full SIMD blocks and a remainder
    q, v, a, _ = random_state(m, seed=3, n=n)
    tau = np.empty((n, m.nv))
    ptr = C.POINTER(C.c_double)
    args = [np.ascontiguousarray(x).ctypes.data_as(ptr) for x in (q, v, a)] + [tau.ctypes.data_as(ptr)]
    lib.rbd_iiwa14_rnea_f64_batch(C.c_long(n), *args)
    assert relerr(tau, ref_out(m, "rnea", q, v, a)) <= TOL64
