#!/usr/bin/env python3
"""rbdgen benchmarks: generated kernels vs the NumPy reference vs Pinocchio (C++), one run.

    python benchmarks/run.py                         # everything (what `make bench` runs)
    python benchmarks/run.py --robots iiwa14 --quick # a fast smoke run

For each robot: generation time, cold-cache build time, per-call time of every kernel for one
state (from C++ through a small driver linked to the generated library, and from Python through
``kern.<kernel>(…, out=…)``), time per state of batched calls (N states per call), the NumPy
reference per state, and Pinocchio's C++ per call (benchmarks/pinocchio_bench.cpp, compiled
once against the headers and libraries of the pin wheel and cached under benchmarks/.build/).
Writes results.json and results.md (and results.png when matplotlib is importable) to --out.
See benchmarks/README.md for the method and its caveats.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

# the NumPy reference is timed on one thread (thread CPU time): keep OpenBLAS from starting others
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# OpenMP threads that wait by spinning (libgomp's default) cost milliseconds per parallel region
# as soon as another process wants the cores (see README.md): sleep instead, unless told otherwise.
# Read by libgomp when it is loaded, i.e. with the first kernel library, after this line.
OMP_WAIT_POLICY_WAS = os.environ.get("OMP_WAIT_POLICY")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numpy as np  # noqa: E402

import rbdgen
import rbdgen.robots  # noqa: F401  (rbdgen.robots.path)
from rbdgen import registry
import rbdgen.backends.cpu  # noqa: E402
from rbdgen.backends.cpu import LARGE_OPT, LARGE_STATEMENTS, NO_SLP, generate_cpu  # noqa: E402
from rbdgen.jit.compiler import CACHE_ENV, compiler_version, cxx_flags, find_cxx, native_target, resolve_march

HERE = Path(__file__).resolve().parent
#: where each Pinocchio harness build's results go in a robot's results
PIN_KEY = {"portable": "pinocchio", "native": "pinocchio_native"}
#: the builds timed: rbdgen's default (march=None: this machine, -march=native) and a portable
#: one (march="portable": any x86-64, SSE2), each against the Pinocchio harness built the same way
VARIANT_MARCH = {"default": None, "portable": "portable"}
BUILD = HERE / ".build"
SITE = Path(sysconfig.get_paths()["purelib"])
CMEEL = SITE / "cmeel.prefix"
TALOS = CMEEL / "share/example-robot-data/robots/talos_data/robots/talos_reduced.urdf"

# name → (path thunk, floating base, description)
ROBOTS = {
    "iiwa14": (lambda: Path(rbdgen.robots.path("iiwa14")), False, "KUKA iiwa 14 (bundled), fixed base"),
    "quadruped": (lambda: Path(rbdgen.robots.path("quadruped")), True, "12-joint quadruped (bundled), floating base"),
    "talos_reduced": (lambda: TALOS, True, "TALOS humanoid, reduced (example-robot-data), floating base"),
}
#: the frames of the frame and contact kernels (flange, feet, soles)
FRAMES = {"iiwa14": ["iiwa_link_ee"], "quadruped": ["FL_foot", "FR_foot", "RL_foot", "RR_foot"],
          "talos_reduced": ["left_sole_link", "right_sole_link"]}
ALIASES = {"iiwa": "iiwa14", "talos": "talos_reduced", "humanoid": "talos_reduced"}
INPUT_POOL = {"q": "Q", "v": "V", "a": "A", "tau": "T", "stale": "ST"}  # kernel input name → pool array in the driver
# every kernel in the registry, with its declared inputs
KERNELS = registry.kernels()
SIGS = {k: registry.get(k).input_names for k in KERNELS}
assert set(INPUT_POOL) == set(registry.INPUTS), "the driver's input pool must cover every declared input"

T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# ---- the machine ------------------------------------------------------------------------------

def loadavg():
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def git_revision() -> str | None:
    """The checkout's commit, "+ local changes" when the tree is dirty; None outside git."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE.parent, capture_output=True,
                             text=True, timeout=30)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=HERE.parent,
                               capture_output=True, text=True, timeout=30).stdout.strip()
        return rev.stdout.strip() + (" + local changes" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def machine_info(cxx: str) -> dict:
    cpu, flags = platform.processor() or "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and cpu in ("unknown", "", platform.processor()):
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = round(int(line.split()[1]) / 1024 ** 2, 1)
    except OSError:
        pass
    simd = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512vl") if f in flags]
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    return {
        "cpu": cpu, "cpu_simd_flags": simd, "logical_cpus": os.cpu_count(), "cpus_available": affinity,
        "memory_gib": mem, "os": platform.platform(), "python": platform.python_version(),
        "numpy": np.__version__, "compiler": compiler_version(cxx), "cxx": cxx,
        "rbdgen": rbdgen.__version__, "git": git_revision(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"), "OMP_WAIT_POLICY_given": OMP_WAIT_POLICY_WAS,
        "load_average_at_start": loadavg(),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


OMP_PROBE = r"""
#include <omp.h>
#include <chrono>
#include <cstdio>
int main() {
  volatile int s = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 100; ++i) {
#pragma omp parallel
      { s = s + omp_get_thread_num(); }
    }
    std::printf("%.2f ", std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 100);
  }
}
"""


def openmp_region_cost(cxx: str) -> dict:
    """Wall µs of an empty OpenMP parallel region (median of 5 × 100) with each wait policy, now."""
    work = Path(tempfile.mkdtemp(prefix="rbdgen-bench-omp-"))
    try:
        (work / "probe.cpp").write_text(OMP_PROBE)
        r = subprocess.run([cxx, "-O2", "-fopenmp", str(work / "probe.cpp"), "-o", str(work / "probe")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return {"error": r.stderr[-300:]}
        out = {}
        for policy in ("default", "passive", "active"):
            env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
            if policy != "default":
                env["OMP_WAIT_POLICY"] = policy
            r = subprocess.run([str(work / "probe")], capture_output=True, text=True, env=env, timeout=120)
            out[policy] = statistics.median(map(float, r.stdout.split())) if r.returncode == 0 else None
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def peak_rate(cxx: str, flags: list[str], lanes: int, mul_only: bool = False) -> dict:
    """One core's peak multiply/add issue rate with these flags and this many doubles per vector
    (``benchmarks/peak.cpp``; the best over 6, 8 and 10 chains): the roofline's denominator.
    ``mul_only`` with ``lanes=1``: scalar multiplies alone, the one-state multiply bound's."""
    work = Path(tempfile.mkdtemp(prefix="rbdgen-bench-peak-"))
    try:
        best = {}
        for chains in (6, 8, 10):
            exe = work / f"peak{chains}"
            cmd = [cxx, *[f for f in flags if f not in ("-fPIC", "-fopenmp")], "-Wno-psabi", f"-DLANES={lanes}",
                   f"-DCHAINS={chains}", *(["-DMUL_ONLY"] if mul_only else []), str(HERE / "peak.cpp"), "-o", str(exe)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                return {"error": r.stderr[-300:]}
            r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
            rate = float(r.stdout.split()[0])
            if rate > best.get("ops_per_s", 0):
                best = {"ops_per_s": rate, "chains": chains, "lanes": lanes}
        return best
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- timing helpers ---------------------------------------------------------------------------

def measure(fn, *, target_s: float, runs: int, budget_s: float) -> list[tuple[float, float]]:
    """Seconds per call of ``fn()``: warm-up, then ``runs`` runs of enough calls to last ``target_s``
    (fewer runs, at least 3, when they would take more than ``budget_s``). Returns per run
    (thread CPU seconds per call, wall seconds per call)."""
    t = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t, 1e-9)
    reps = max(1, int(target_s / once))
    runs = max(3, min(runs, int(budget_s / (reps * once))))
    out = []
    for _ in range(runs):
        w, c = time.perf_counter(), time.thread_time()
        for _ in range(reps):
            fn()
        c, w = time.thread_time() - c, time.perf_counter() - w
        out.append((c / reps, w / reps))
    return out


def summary(timing: list[tuple[float, float]], per: int = 1, clock: str = "cpu") -> dict:
    """ns per state. ``clock``: which one gives "median" — "cpu" (thread CPU time, the default for
    one thread: a busy machine's other processes do not count) or "wall" (multi-threaded batches)."""
    cpu = [c * 1e9 / per for c, _ in timing]
    wall = [w * 1e9 / per for _, w in timing]
    main = cpu if clock == "cpu" else wall
    return {"median": round(statistics.median(main), 2), "min": round(min(main), 2), "clock": clock,
            "wall_median": round(statistics.median(wall), 2), "runs": [round(x, 2) for x in cpu],
            "wall_runs": [round(x, 2) for x in wall]}


class OpenMP:
    """Thread count of the generated libraries' OpenMP runtime (libgomp, loaded with them)."""

    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libgomp.so.1")
            self.default = self.lib.omp_get_max_threads()
        except OSError:
            self.lib, self.default = None, 1

    def set(self, n: int | None) -> None:
        if self.lib is not None:
            self.lib.omp_set_num_threads(int(n or self.default))


# ---- Pinocchio harness ------------------------------------------------------------------------

PIN_DEFINES = ["-DBOOST_MPL_LIMIT_LIST_SIZE=30", "-DBOOST_MPL_LIMIT_VECTOR_SIZE=30",
               "-DBOOST_MPL_CFG_NO_PREPROCESSED_HEADERS", "-DBOOST_FUSION_INVOKE_MAX_ARITY=12",
               "-DPINOCCHIO_WITH_URDFDOM", "-DPINOCCHIO_URDFDOM_HEADERS_MAJOR_VERSION=3",
               "-DPINOCCHIO_URDFDOM_HEADERS_MINOR_VERSION=0", "-DPINOCCHIO_URDFDOM_HEADERS_PATCH_VERSION=0"]
# no -march: the wheel's libraries are built for x86-64 with 16-byte Eigen alignment, and the
# model built by the wheel's URDF parser crosses into this harness (see README.md)
PIN_OPT = ["-std=c++17", "-O3", "-DNDEBUG"]
#: the harness builds: as the wheel's own libraries are built (portable), and for this machine.
#: The native one builds its model from a file (--model; see pinocchio_bench.cpp for why)
PIN_BUILDS = {"portable": PIN_OPT, "native": PIN_OPT + ["-march=native"]}
PIN_LIBS = ["-lpinocchio_parsers", "-lpinocchio_default", "-lurdfdom_model", "-lboost_filesystem",
            "-lboost_serialization"]


def ensure_pinocchio_headers() -> str | None:
    """Eigen and urdfdom headers (not pin dependencies): install the cmeel wheels when missing.
    Returns why Pinocchio cannot be benchmarked, or None."""
    if not (CMEEL / "include/pinocchio/config.hpp").exists() or not (CMEEL / "lib/libpinocchio_default.so").exists():
        return "the pin wheel (cmeel.prefix with include/pinocchio and lib/) is not installed"
    need = []
    if not (CMEEL / "include/eigen3/Eigen/Core").exists():
        need.append("cmeel-eigen~=3.4.0")
    if not (CMEEL / "include/urdfdom_headers/urdf_model/model.h").exists():
        need.append("cmeel-urdfdom-headers~=3.0")
    if not (CMEEL / "include/boost/version.hpp").exists():
        need.append("cmeel-boost")
    if need:
        log(f"installing {' '.join(need)} (headers for the Pinocchio harness)")
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *need], capture_output=True, text=True)
        if r.returncode != 0:
            return f"pip install {' '.join(need)} failed: {(r.stderr or r.stdout).strip()[-300:]}"
    return None


def pinocchio_command(cxx: str, out: Path, build: str = "portable") -> list[str]:
    inc = CMEEL / "include"
    return [cxx, *PIN_BUILDS[build], *PIN_DEFINES, f"-I{BUILD}", f"-I{inc}", f"-I{inc / 'eigen3'}", f"-I{inc / 'urdfdom_headers'}",
            f"-I{inc / 'urdfdom'}", str(HERE / "pinocchio_bench.cpp"), "-o", str(out), f"-L{CMEEL / 'lib'}",
            f"-Wl,-rpath,{CMEEL / 'lib'}", *PIN_LIBS]


def pin_version() -> str:
    try:
        from importlib.metadata import version
        return version("pin")
    except Exception:
        return "unknown"


def pinocchio_benches() -> str:
    """pinocchio_benches.inc: the Pinocchio C++ counterpart of every kernel that declares one
    (rbdgen.registry), as the headers (under RBD_PIN_HEADERS) and one {name, call} entry each."""
    decls = [registry.get(k) for k in registry.kernels() if registry.get(k).pinocchio_cpp]  # all: one harness
    headers = sorted({d.pinocchio_cpp[0] for d in decls})
    lines = ["// generated by benchmarks/run.py from rbdgen's kernel registry", "#ifdef RBD_PIN_HEADERS"]
    lines += [f"#include <{h}>" for h in headers]
    lines += ["#else"]
    lines += [f'    {{"{d.name}", [&](int i) {{ {d.pinocchio_cpp[1]}; }}}},' for d in decls]
    lines += ["#endif", ""]
    return "\n".join(lines)


def build_pinocchio_harness(cxx: str, build: str = "portable") -> dict:
    """Compile benchmarks/pinocchio_bench.cpp once per build (PIN_BUILDS); cached by a hash of
    source, command, versions (and, native, what -march=native means here)."""
    placeholder = Path("OUT")
    cmd = pinocchio_command(cxx, placeholder, build)
    inc = pinocchio_benches()
    h = hashlib.sha256()
    h.update((HERE / "pinocchio_bench.cpp").read_bytes() + inc.encode())
    h.update(" ".join(cmd).encode() + compiler_version(cxx).encode() + pin_version().encode())
    if build == "native":
        h.update(str(native_target(cxx)).encode())
    key = h.hexdigest()[:16]
    exe = BUILD / f"pinocchio_bench-{key}"
    meta = BUILD / f"pinocchio_bench-{key}.json"
    shown = " ".join(cmd).replace(str(CMEEL), "$CMEEL").replace(str(HERE.parent) + "/", "")
    info = {"binary": str(exe.relative_to(HERE.parent)), "command": shown,
            "flags": " ".join(PIN_BUILDS[build]), "pin": pin_version(), "build": build}
    if exe.exists() and meta.exists():
        info.update(json.loads(meta.read_text()), cached=True)
        log(f"Pinocchio harness ({build}): cached {exe.name} (compiled in {info.get('compile_s', '?')} s when built)")
        return info
    BUILD.mkdir(parents=True, exist_ok=True)
    (BUILD / "pinocchio_benches.inc").write_text(inc)
    tmp = exe.with_name(exe.name + f".tmp{os.getpid()}")
    log(f"Pinocchio harness ({build}): compiling benchmarks/pinocchio_bench.cpp (one-off, ~3 min, ~5 GB of memory)")
    t = time.perf_counter()
    r = subprocess.run(pinocchio_command(cxx, tmp, build), capture_output=True, text=True)
    dt = round(time.perf_counter() - t, 1)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"compiling pinocchio_bench.cpp ({build}) failed:\n" + (r.stderr or r.stdout)[-3000:])
    os.replace(tmp, exe)
    meta.write_text(json.dumps({"compile_s": dt}))
    log(f"Pinocchio harness ({build}): compiled in {dt} s")
    info.update(compile_s=dt, cached=False)
    return info


#: writes the model Pinocchio's URDF parser builds (the pin module's) as pinocchio_bench.cpp's
#: --model file: joints in index order with their placements and inertias, then the limits
DUMP_MODEL = r"""
import sys
import pinocchio as pin
urdf, floating, out = sys.argv[1], sys.argv[2] == "floating", sys.argv[3]
m = pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer()) if floating else pin.buildModelFromUrdf(urdf)
f = lambda xs: " ".join(repr(float(x)) for x in xs)
lines = []
for i in range(1, m.njoints):
    X, I = m.jointPlacements[i], m.inertias[i]
    axis = getattr(m.joints[i].extract(), "axis", None)
    J = I.inertia
    lines.append(" ".join(["joint", str(m.parents[i]), m.joints[i].shortname(), f([0, 0, 0] if axis is None else axis),
                           f(X.rotation.flatten()), f(X.translation), repr(float(I.mass)), f(I.lever),
                           f([J[0, 0], J[0, 1], J[0, 2], J[1, 1], J[1, 2], J[2, 2]]), "_".join(m.names[i].split()) or "j"]))
lines += ["lower " + f(m.lowerPositionLimit), "upper " + f(m.upperPositionLimit), "armature " + f(m.armature)]
open(out, "w").write("\n".join(lines) + "\n")
"""


#: rbdgen.build in a fresh interpreter, caches warm: prints the seconds the build took
WARM_BUILD = """
import sys, time
import rbdgen
urdf, base, frames, march, kernels = sys.argv[1:6]
m = rbdgen.load_urdf(urdf, floating_base=base == "floating").with_frames(frames.split(","))
t = time.perf_counter()
rbdgen.build(m, dtype="float64", march=None if march == "None" else march,
             **({"kernels": tuple(kernels.split(","))} if kernels else {}))
print(time.perf_counter() - t)
"""


def dump_pinocchio_model(urdf: Path, floating: bool, out: Path) -> None:
    r = subprocess.run([sys.executable, "-c", DUMP_MODEL, str(urdf), "floating" if floating else "fixed", str(out)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"writing the Pinocchio model file failed: {(r.stderr or r.stdout).strip()[-500:]}")


def run_pinocchio(exe: str, urdf: Path, floating: bool, quick: bool, model_file: Path | None = None) -> dict:
    args = [str(HERE.parent / exe), str(urdf), "floating" if floating else "fixed", "--pool", "256",
            "--runs", "3" if quick else "7", "--target-ms", "10" if quick else "40"]
    if model_file is not None:
        args += ["--model", str(model_file)]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"pinocchio_bench failed ({r.returncode}): {(r.stderr or r.stdout)[-1000:]}")
    return json.loads(r.stdout)


# ---- C++ driver for the generated kernels -----------------------------------------------------

DRIVER = r"""// generated by benchmarks/run.py: times {prefix}'s single-state kernels per call
#include "{header}"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>
#include <ctime>
using Clock = std::chrono::steady_clock;
static double thread_cpu_ns() {{
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}}
static double median(std::vector<double> s) {{
  std::sort(s.begin(), s.end());
  return s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
}}
static void print_list(const std::vector<double>& x) {{
  std::printf("[");
  for (size_t r = 0; r < x.size(); ++r) std::printf("%s%.2f", r ? ", " : "", x[r]);
  std::printf("]");
}}
// the same method as benchmarks/pinocchio_bench.cpp: runs of about target_ms over the pool,
// thread CPU time and wall time per call for each run
static void time_per_call(const std::function<void(int)>& body, int pool, int runs, double target_ms,
                          std::vector<double>& cpu, std::vector<double>& wall) {{
  auto pass = [&]() {{ for (int i = 0; i < pool; ++i) body(i); }};
  pass();
  double c0 = thread_cpu_ns();
  pass();
  double one = thread_cpu_ns() - c0;
  long passes = std::max(1L, (long)(target_ms * 1e6 / std::max(one, 1.0)));
  for (int r = 0; r < runs; ++r) {{
    auto w0 = Clock::now();
    c0 = thread_cpu_ns();
    for (long p = 0; p < passes; ++p) pass();
    double c = thread_cpu_ns() - c0;
    double w = std::chrono::duration<double, std::nano>(Clock::now() - w0).count();
    cpu.push_back(c / (double)(passes * pool));
    wall.push_back(w / (double)(passes * pool));
  }}
}}
int main(int argc, char** argv) {{
  if (argc < 5) return 2;
  const int pool = std::atoi(argv[2]), runs = std::atoi(argv[3]);
  const double target_ms = std::atof(argv[4]);
  // the pool file: every declared input's pool, one after another (benchmarks/run.py, pool_bytes)
  std::vector<double> buf((size_t)pool * {per_state});
  FILE* f = std::fopen(argv[1], "rb");
  if (!f || std::fread(buf.data(), sizeof(double), buf.size(), f) != buf.size()) return 3;
  std::fclose(f);
{pools}
  struct Bench {{ const char* name; std::function<void(int)> body; }};
{outputs}
  const std::vector<Bench> benches = {{
{benches}
  }};
  std::printf("{{");
  for (size_t b = 0; b < benches.size(); ++b) {{
    std::vector<double> cpu, wall;
    time_per_call(benches[b].body, pool, runs, target_ms, cpu, wall);
    std::printf("%s\"%s\": {{\"median\": %.2f, \"min\": %.2f, \"clock\": \"cpu\", \"wall_median\": %.2f, \"runs\": ",
                b ? ", " : "", benches[b].name, median(cpu), *std::min_element(cpu.begin(), cpu.end()), median(wall));
    print_list(cpu);
    std::printf(", \"wall_runs\": ");
    print_list(wall);
    std::printf("}}");
  }}
  std::printf("}}\n");
  return 0;
}}
"""


def pool_sizes(model) -> dict:
    """Values per state of each declared input, in the pool file's order."""
    return {name: a.size(model) for name, a in registry.INPUTS.items()}


def pool_bytes(pool: dict, model) -> bytes:
    """The driver's pool file: each declared input's (n, size) array in turn, float64."""
    return b"".join(np.ascontiguousarray(pool[name], dtype=np.float64).tobytes() for name in pool_sizes(model))


def driver_source(gen, model) -> str:
    sizes = pool_sizes(model)
    pools, offset = [], []
    for name, size in sizes.items():
        start = " + ".join(offset) or "0"
        pools.append(f"  const double* {INPUT_POOL[name]} = buf.data() + (size_t)pool * ({start});"
                     f"  (void){INPUT_POOL[name]};")
        offset.append(str(size))
    outputs, benches = [], []
    for k, pk in gen.kernels.items():
        args = []
        for a in pk.inputs:
            pool = INPUT_POOL[a.name]
            assert a.size == sizes[a.name], (k, a.name, a.size)
            args.append(f"{pool} + (size_t)i * {a.size}")
        for a in pk.outputs:
            outputs.append(f"  std::vector<double> out_{k}_{a.name}({a.size});")
            args.append(f"out_{k}_{a.name}.data()")
        benches.append(f'    {{"{k}", [&](int i) {{ {gen.prefix}_{k}_f64({", ".join(args)}); }}}},')
    return DRIVER.format(prefix=gen.prefix, header=gen.header, per_state=sum(sizes.values()), pools="\n".join(pools),
                         outputs="\n".join(outputs), benches="\n".join(benches))


def libpython_flags() -> list[str]:
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    lib = sysconfig.get_config_var("LDLIBRARY") or f"libpython{sysconfig.get_python_version()}.so"
    return [f"-L{libdir}", f"-l:{lib}", f"-Wl,-rpath,{libdir}"] + (sysconfig.get_config_var("LIBS") or "").split()


def build_driver(cxx: str, gen, lib: Path, model, work: Path) -> Path:
    src = work / "driver.cpp"
    src.write_text(driver_source(gen, model))
    exe = work / "driver"
    cmd = [cxx, "-std=c++17", "-O2", f"-I{lib.parent}", str(src), "-o", str(exe), f"-L{lib.parent}",
           f"-l:{lib.name}", f"-Wl,-rpath,{lib.parent}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 and "undefined reference to `Py" in r.stderr:
        # the library also holds the robot's CPython module: resolve its Py* symbols against
        # libpython (never called by the driver)
        r = subprocess.run(cmd + libpython_flags(), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("compiling the C++ driver failed:\n" + (r.stderr or r.stdout)[-2000:])
    return exe


def single_state_driver(cxx: str, model, kernels, rng, work: Path):
    """Generate and build ``kernels`` (default build, cached), and the C++ driver timing them
    one state at a time over a pool of 256 random states: (kernels, driver, pool file, seconds
    to generate and build the kernels), for :func:`run_driver`. ``work``: an empty folder."""
    t = time.perf_counter()
    gen = generate_cpu(model, dtypes=("float64",), kernels=kernels)
    kern = rbdgen.build(model, kernels=kernels)
    build_s = time.perf_counter() - t
    pool_file = work / "pool.bin"
    pool_file.write_bytes(pool_bytes(states(model, rng, 256), model))
    return kern, build_driver(cxx, gen, Path(kern.path), model, work), pool_file, build_s


def run_driver(exe: Path, pool_file: Path, quick: bool) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")  # single-state entry points do not use OpenMP anyway
    r = subprocess.run([str(exe), str(pool_file), "256", "3" if quick else "7", "10" if quick else "40"],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"the C++ driver failed ({r.returncode}): {r.stderr[-1000:]}")
    return json.loads(r.stdout)


def best_round(rounds: list[dict]) -> dict:
    """{kernel: cell} from several rounds → per kernel the round with the lowest median (the least
    disturbed one), with every round's median alongside."""
    out = {}
    for k in rounds[0]:
        cells = [r[k] for r in rounds]
        best = dict(min(cells, key=lambda c: c["median"]))
        best["round_medians"] = [c["median"] for c in cells]
        out[k] = best
    return out


# ---- one robot --------------------------------------------------------------------------------

def states(model, rng, n: int) -> dict:
    env = {"q": np.ascontiguousarray(model.random_q(rng, n)),
           "v": rng.uniform(-1, 1, (n, model.nv)), "a": rng.uniform(-1, 1, (n, model.nv)),
           "tau": rng.uniform(-1, 1, (n, model.nv))}
    return registry.complete_inputs(model, env, seed=n)  # the stale-data kernels' state


def out_arrays(method, lead: tuple):
    """Preallocated out= arrays of a kernel method (``kern.methods[name]``), written once (no page
    faults in the timings)."""
    outs = [np.zeros(lead + tuple(shape)) for _, shape in method.outputs]
    return outs[0] if len(outs) == 1 else tuple(outs)


def bench_python_single(kern, pool: dict, quick: bool) -> dict:
    out = {}
    npool = len(pool["q"])
    for k in kern.kernels:
        f = kern.kernel(k)
        rows = [tuple(pool[n][i] for n in SIGS[k]) for i in range(npool)]
        o = out_arrays(kern.methods[k], ())

        def one_pass(f=f, rows=rows, o=o):
            for r in rows:
                f(*r, out=o)
        t = measure(one_pass, target_s=0.01 if quick else 0.05, runs=3 if quick else 7, budget_s=2.0)
        out[k] = summary(t, per=npool)
    return out


def bench_batch(kern, model, rng, sizes, threads: list, omp: OpenMP, quick: bool) -> dict:
    """{threads: {kernel: {N: summary per state}}}"""
    res = {str(t): {k: {} for k in kern.kernels} for t in threads}
    for n in sizes:
        st = states(model, rng, n)
        for k in kern.kernels:
            f = kern.kernel(k)
            ins = tuple(st[x] for x in SIGS[k])
            o = out_arrays(kern.methods[k], (n,))
            for t in threads:
                omp.set(t)
                tm = measure(lambda: f(*ins, out=o), target_s=0.02 if quick else 0.1, runs=3 if quick else 5,
                             budget_s=1.0 if quick else 4.0)
                res[str(t)][k][str(n)] = summary(tm, per=n, clock="cpu" if t == 1 else "wall")
            omp.set(None)
        del st
    return res


def bench_reference(model, rng, sizes, quick: bool) -> dict:
    res = {k: {} for k in KERNELS}
    for n in sizes:
        st = states(model, rng, n)
        for k in KERNELS:
            f = registry.get(k).reference  # the kernel's declared NumPy oracle
            ins = tuple(st[x][0] if n == 1 else st[x] for x in SIGS[k])
            tm = measure(lambda: f(model, *ins), target_s=0.05 if quick else 0.3, runs=3, budget_s=3.0)
            res[k][str(n)] = summary(tm, per=n)
    return res


def bench_robot(name: str, args, cxx: str, omp: OpenMP, pin_exes: dict) -> dict:
    path_fn, floating, desc = ROBOTS[name]
    urdf = path_fn()
    log(f"== {name}: {urdf}")
    t = time.perf_counter()
    model = rbdgen.load_urdf(urdf, floating_base=floating).with_frames(FRAMES[name])
    load_s = time.perf_counter() - t
    res = {"description": desc, "urdf": str(urdf).replace(str(SITE), "$SITE_PACKAGES").replace(str(HERE.parent), "."),
           "floating_base": floating, "nq": model.nq, "nv": model.nv, "nb": model.nb, "load_s": round(load_s, 3),
           "load_average_at_start": loadavg()}
    t = time.perf_counter()
    only = {"kernels": KERNELS} if args.kernels else {}  # --kernels
    gen = generate_cpu(model, dtypes=("float64",), **only)
    res["generate_s"] = round(time.perf_counter() - t, 2)
    res["op_counts"] = {k: pk.counts for k, pk in gen.kernels.items()}
    # multiplies in ∇FD's looped products (−M⁻¹·∂τ), which run in vectors even for one state
    res["product_muls"] = {k: sum(mm.op_counts()[0] for mm in registry.trace(model, k).post) for k in gen.kernels}
    res["values_per_state"] = {k: {"in": sum(int(a.size) for a in pk.inputs), "out": sum(int(a.size) for a in pk.outputs)}
                               for k, pk in gen.kernels.items()}
    log(f"{name}: nq={model.nq} nv={model.nv} nb={model.nb}; generated in {res['generate_s']} s")

    rng = np.random.default_rng(12345)
    pool = states(model, rng, 256)
    work = Path(tempfile.mkdtemp(prefix=f"rbdgen-bench-{name}-"))
    pool_file = work / "pool.bin"
    pool_file.write_bytes(pool_bytes(pool, model))

    res["variants"] = {}
    drivers, kerns = {}, {}
    try:
        for variant in args.variants:
            march = VARIANT_MARCH[variant]
            cache = work / f"cache-{variant}"
            old = os.environ.get(CACHE_ENV)
            os.environ[CACHE_ENV] = str(cache)  # a fresh, empty compile cache: a cold build
            try:
                log(f"{name} [{variant}]: rbdgen.build (cold cache) …")
                t = time.perf_counter()
                kern = rbdgen.build(model, dtype="float64", march=march, **only)
                build_s = time.perf_counter() - t
                # a new process building the same kernels: what a user pays at every start once the
                # caches are warm (generation cache and compile cache; rbdgen.jit.gencache)
                warm = subprocess.run([sys.executable, "-c", WARM_BUILD, str(urdf), "floating" if floating else "fixed",
                                       ",".join(FRAMES[name]), str(march), ",".join(KERNELS) if only else ""],
                                      capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
                warm_s = float(warm.stdout.split()[-1]) if warm.returncode == 0 else None
                if warm_s is None:
                    log(f"{name} [{variant}]: warm build failed: {(warm.stderr or warm.stdout).strip()[-300:]}")
            finally:
                if old is None:
                    os.environ.pop(CACHE_ENV, None)
                else:
                    os.environ[CACHE_ENV] = old
            lib = Path(kern.path)
            resolved = resolve_march(march)
            resolved = resolve_march(march)
            v = {"march": resolved, "flags": " ".join(cxx_flags(opt="-O3", march=resolved)), "build_s": round(build_s, 1),
                 "compile_s": round(build_s - res["generate_s"], 1), "lanes": kern.lanes,
                 "kernel_lanes": dict(kern.kernel_lanes),
                 "warm_build_s": None if warm_s is None else round(warm_s, 2),
                 "library_bytes": lib.stat().st_size}
            log(f"{name} [{variant}]: built in {v['build_s']} s; in a new process, caches warm: {v['warm_build_s']} s")
            if variant == "default" and name in GOAL_BUILD_S and not only:
                # the build-time goal was set when rbdgen had these kernels: that build too
                os.environ[CACHE_ENV] = str(work / "cache-goal-kernels")
                try:
                    t = time.perf_counter()
                    rbdgen.build(model, dtype="float64", kernels=GOAL_BUILD_KERNELS)
                    v["build_goal_kernels_s"] = round(time.perf_counter() - t, 1)
                finally:
                    if old is None:
                        os.environ.pop(CACHE_ENV, None)
                    else:
                        os.environ[CACHE_ENV] = old
                log(f"{name} [{variant}]: the {len(GOAL_BUILD_KERNELS)} kernels of the build goal built in "
                    f"{v['build_goal_kernels_s']} s")
            drv = work / f"driver-{variant}"
            drv.mkdir()
            drivers[variant] = build_driver(cxx, gen, lib, model, drv)
            log(f"{name} [{variant}]: batches N={','.join(map(str, args.sizes))} …")
            threads = sorted({omp.default, 1}, reverse=True)
            v["batch_threads"] = threads
            v["batch_ns_per_state"] = bench_batch(kern, model, rng, args.sizes, threads, omp, args.quick)
            res["variants"][variant] = v
            kerns[variant] = kern

        log(f"{name}: NumPy reference N={','.join(map(str, args.ref_sizes))} …")
        res["reference_ns_per_state"] = bench_reference(model, rng, args.ref_sizes, args.quick)

        # one state: rbdgen's builds (C++ and Python) and Pinocchio's taking turns, a few rounds;
        # another process that slows one of them for a few seconds then does not decide a ratio
        pin_exes = dict(pin_exes)
        model_file = work / "pinocchio_model.txt"
        if "native" in pin_exes:
            try:
                dump_pinocchio_model(urdf, floating, model_file)
            except Exception as e:  # reported, not fatal: the portable harness still runs
                res["pinocchio_native_error"] = str(e)
                log(f"{name}: native Pinocchio left out: {e}")
                pin_exes.pop("native")
        rounds = 1 if args.quick else 3
        cpp = {variant: [] for variant in drivers}
        py = {variant: [] for variant in drivers}
        pin = {build: [] for build in pin_exes}
        for i in range(rounds):
            log(f"{name}: one state, round {i + 1}/{rounds}: rbdgen {', '.join(drivers)} (C++, Python)"
                + (f", Pinocchio {', '.join(pin)}" if pin else ""))
            for variant, exe in drivers.items():
                cpp[variant].append(run_driver(exe, pool_file, args.quick))
                py[variant].append(bench_python_single(kerns[variant], pool, args.quick))
            for build in list(pin):
                try:
                    pin[build].append(run_pinocchio(pin_exes[build], urdf, floating, args.quick,
                                                    model_file if build == "native" else None))
                except Exception as e:  # reported, not fatal
                    res[PIN_KEY[build] + "_error"] = str(e)
                    log(f"{name}: Pinocchio ({build}) failed: {e}")
                    del pin[build]
        for variant in drivers:
            res["variants"][variant]["cpp_single_ns"] = best_round(cpp[variant])
            res["variants"][variant]["python_single_ns"] = best_round(py[variant])
        for build, runs in pin.items():
            p = dict(runs[0], rounds=len(runs), ns_per_call=best_round([x["ns_per_call"] for x in runs]), build=build)
            if (p["nq"], p["nv"]) != (model.nq, model.nv):
                p["note"] = f"Pinocchio's nq/nv ({p['nq']}/{p['nv']}) differ from rbdgen's ({model.nq}/{model.nv})"
            res[PIN_KEY[build]] = p
        # the native harness builds its model from the dumped file: it must compute what the
        # portable one (the wheel's URDF parser) does, on the same states
        if "pinocchio" in res and "pinocchio_native" in res:
            a, b = float(res["pinocchio"]["checksum"]), float(res["pinocchio_native"]["checksum"])
            if abs(a - b) > 1e-8 * max(1.0, abs(a)):
                res["pinocchio_native_error"] = (f"checksum {b!r} differs from the portable harness's {a!r}: "
                                                 "not the same model; its timings are left out")
                log(f"{name}: {res['pinocchio_native_error']}")
                del res["pinocchio_native"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


# ---- report -----------------------------------------------------------------------------------

def fmt_ns(ns) -> str:
    if ns is None:
        return "–"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e4:
        return f"{ns / 1e3:.1f} µs"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def ratio(a, b) -> str:
    return "–" if not a or not b else f"{a / b:.2f}×"


NOISY = 0.25  # a cell whose runs spread more than this (max − min over median) is marked †


def cell(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d if isinstance(d, dict) and "median" in d else None


def med(d, *keys):
    c = cell(d, *keys)
    return c["median"] if c else None


def noisy(c) -> bool:
    runs = (c or {}).get("runs") or []
    return len(runs) > 1 and (max(runs) - min(runs)) > NOISY * c["median"]


def fmt(d, *keys) -> str:
    """The median of a timing cell, marked † when its runs disagree."""
    c = cell(d, *keys)
    return fmt_ns(c["median"] if c else None) + (" †" if noisy(c) else "")


#: the Pinocchio harness each rbdgen build is set against: built the same way
PIN_FOR = {"default": PIN_KEY["native"], "portable": PIN_KEY["portable"]}


def pin_key(r, variant: str) -> str:
    """Where the Pinocchio figures for rbdgen's ``variant`` build are: the harness built the same
    way, else (no native harness) the portable one."""
    k = PIN_FOR.get(variant, "pinocchio")
    return k if k in r else "pinocchio"


def best_pin(r, k) -> str:
    """The Pinocchio harness build that ran kernel ``k`` faster (the one the goals compare with)."""
    have = [key for key in ("pinocchio_native", "pinocchio") if med(r, key, "ns_per_call", k)]
    return min(have, key=lambda key: med(r, key, "ns_per_call", k)) if have else "pinocchio"


#: the speed goals of issue 11, checked in every run: one state vs Pinocchio (by robot), a
#: 4-lane batch vs its own single-state call, build time (s), Python overhead (ns), iiwa rnea batch
GOAL_ONE_STATE = {"iiwa14": 4.0, "quadruped": 4.0, "talos_reduced": 2.0}
GOAL_BATCH_SPEEDUP = 2.5
GOAL_BUILD_S = {"iiwa14": 5.0, "talos_reduced": 40.0}
#: the kernels rbdgen had when the build-time goals were set (issue 11): their build is reported
#: next to the build of all kernels
GOAL_BUILD_KERNELS = ("rnea", "nle", "gravity", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives")
GOAL_PY_OVERHEAD_NS = 500.0
GOAL_IIWA_RNEA_BATCH_NS = 60.0
#: the batch size whose outputs stay in the core's caches (L2) for every robot here: the batch
#: path's speed without the memory traffic of 16384 states (docs/performance.md §12)
IN_CACHE_N = 256


def mark(ok) -> str:
    return "" if ok is None else (" ✓" if ok else " ✗")


def ratio_text(x: float, goal: float | None) -> str:
    """``x`` as a ratio: two decimals, three where two would round a miss up to the goal (3.996
    shown as "4.00× ✗" reads as a contradiction)."""
    return f"{x:.3f}×" if goal and x < goal <= float(f"{x:.2f}") else f"{x:.2f}×"


def goals_markdown(results: dict) -> list[str]:
    """Each goal of issue 11, per robot and kernel: the measured figure, ✓ met or ✗ missed."""
    L = ["## Goals: met (✓) or how far (✗)", ""]
    peak = results.get("peak", {})
    if peak:
        L.append("Roofline: the kernel's multiplies and adds (the generated code's op count; sine/cosine and "
                 "divisions not counted) × states ÷ (time × one core's peak multiply/add rate, measured by "
                 "`benchmarks/peak.cpp` with the same flags and SIMD width: independent chains of vector "
                 "multiplies and adds; the kernels are contracted to FMAs where the build has them, which on "
                 "cores with separate add pipes, as AMD's, leaves this rate their bound, and on cores whose adds "
                 "share the FMA pipes can beat it): "
                 + "; ".join(f"{vn} build {p['ops_per_s'] / 1e9:.1f} G ops/s ({p['lanes']} lanes)"
                             for vn, p in peak.items() if "ops_per_s" in p) + ".")
    mul_peak = results.get("peak_scalar_mul", {}).get("default", {}).get("ops_per_s")
    wide = peak.get("default", {}).get("lanes", 1)
    if mul_peak:
        L.append(f"One state's multiply bound: every multiply of one state's straight-line code takes one of the "
                 f"core's multiply/FMA slots, fused with an add or not, so it cannot run faster than its multiplies ÷ "
                 f"the scalar multiply rate ({mul_peak / 1e9:.1f} G/s here, `peak.cpp -DMUL_ONLY -DLANES=1`, "
                 f"default build's flags); ∇FD's products count as {wide}-lane vectors. The column gives the "
                 "fraction of that bound the default build's one-state call reaches (sine/cosine, divisions, "
                 "loads and stores not counted: 100% is out of reach).")
    if peak or mul_peak:
        L.append("")
    hdr = ["robot", "kernel", "one state vs Pinocchio (its faster build)", "one state: multiply bound",
           "default batch vs its single state (1 thread)",
           f"the same, N = {IN_CACHE_N} (in cache)", "values written per state", "roofline, default batch (1 thread)",
           "roofline, portable batch (1 thread)", "Python overhead (default)"]
    L += ["| " + " | ".join(hdr) + " |", "|---|---|" + "---:|" * (len(hdr) - 2)]
    for name, r in results["robots"].items():
        goal = GOAL_ONE_STATE.get(name)
        for k in KERNELS:
            one = med(r, "variants", "default", "cpp_single_ns", k)
            theirs = med(r, best_pin(r, k), "ns_per_call", k)
            row = [name, k]
            row.append(ratio_text(theirs / one, goal) + mark(theirs / one >= goal if goal else None)
                       if one and theirs else "–")
            pm = r.get("product_muls", {}).get(k, 0)
            slots = r["op_counts"][k]["mul"] - pm + pm / wide
            row.append(f"{100 * slots / (one * 1e-9 * mul_peak):.0f}%" if one and mul_peak else "–")
            nat = r["variants"].get("default", {})
            big = max((int(n) for n in nat.get("batch_ns_per_state", {}).get("1", {}).get(k, {})), default=None)
            nb = med(nat, "batch_ns_per_state", "1", k, str(big)) if big else None
            ns = med(nat, "cpp_single_ns", k)
            kl = nat.get("kernel_lanes", {}).get(k)
            row.append(f"{ratio_text(ns / nb, GOAL_BATCH_SPEEDUP)} ({fmt_ns(ns)} → {fmt_ns(nb)}"
                       f"{f', {kl} lanes' if kl else ''}){mark(ns / nb >= GOAL_BATCH_SPEEDUP)}"
                       if nb and ns else "–")
            nc = med(nat, "batch_ns_per_state", "1", k, str(IN_CACHE_N))
            row.append(f"{ns / nc:.2f}× ({fmt_ns(nc)})" if nc and ns else "–")
            vals = r.get("values_per_state", {}).get(k)
            row.append(f"{vals['out']}" if vals else "–")
            ops = r["op_counts"][k]["mul"] + r["op_counts"][k]["add"]
            for vn in ("default", "portable"):
                v = r["variants"].get(vn, {})
                bb = max((int(n) for n in v.get("batch_ns_per_state", {}).get("1", {}).get(k, {})), default=None)
                t = med(v, "batch_ns_per_state", "1", k, str(bb)) if bb else None
                rate = peak.get(vn, {}).get("ops_per_s")
                row.append(f"{100 * ops / (t * 1e-9 * rate):.0f}%" if t and rate else "–")
            py = med(r, "variants", "default", "python_single_ns", k)
            row.append(f"{py - one:.0f} ns{mark(py - one <= GOAL_PY_OVERHEAD_NS)}" if py and one else "–")
            L.append("| " + " | ".join(row) + " |")
    L += ["", f"Goals: one state ≥ {GOAL_ONE_STATE['iiwa14']:g}× Pinocchio on iiwa14 and the quadruped, "
          f"≥ {GOAL_ONE_STATE['talos_reduced']:g}× on TALOS (rbdgen's default build, which is for this machine, against "
          "the faster of Pinocchio's two harness builds, portable and -march=native, kernel by kernel); "
          f"the default build's batch (4 doubles per vector with AVX; with AVX-512, 8 for the kernels whose "
          f"arithmetic pays for them, rbdgen.backends.cpu.kernel_lanes) ≥ {GOAL_BATCH_SPEEDUP:g}× faster "
          f"per state than the same build's single-state call; Python overhead (Python call − C++ call, one state) "
          f"≤ {GOAL_PY_OVERHEAD_NS:g} ns. The batch goal is checked at the largest N, where a kernel that writes many "
          f"values per state streams them to memory (16384 frame Jacobians of the quadruped are 57 MB); the "
          f"N = {IN_CACHE_N} column is the same batch path with its outputs in the core's L2. (A single-state figure "
          "writes one output buffer over and over, which stays in L1; docs/performance.md §12.)", ""]
    lines = []
    for name, limit in GOAL_BUILD_S.items():
        r = results["robots"].get(name)
        if r and "default" in r["variants"]:
            b = r["variants"]["default"]["build_s"]
            lines.append(f"- Build, default, all {len(KERNELS)} kernels, {name}: {b:.1f} s (goal ≤ {limit:g} s){mark(b <= limit)}")
            g = r["variants"]["default"].get("build_goal_kernels_s")
            if g is not None:
                lines.append(f"- Build, default, the {len(GOAL_BUILD_KERNELS)} kernels rbdgen had when the goal was set "
                             f"({', '.join(GOAL_BUILD_KERNELS)}), {name}: {g:.1f} s (goal ≤ {limit:g} s){mark(g <= limit)}")
    r = results["robots"].get("iiwa14")
    if r:
        for vn, v in r["variants"].items():
            big = max((int(n) for n in v["batch_ns_per_state"].get("1", {}).get("rnea", {})), default=None)
            t = med(v, "batch_ns_per_state", "1", "rnea", str(big)) if big else None
            if t:
                lanes = v.get("kernel_lanes", {}).get("rnea", v["lanes"])
                lines.append(f"- iiwa14 rnea, batch of {big} on one core, {vn} build ({lanes} lanes): "
                             f"{fmt_ns(t)} per state (goal ≤ {GOAL_IIWA_RNEA_BATCH_NS:g} ns){mark(t <= GOAL_IIWA_RNEA_BATCH_NS)}")
    return L + lines + ["", "Why each ✗ is a ✗, and what would close it: README, \"Speed\".", ""]


def markdown(results: dict) -> str:
    m = results["machine"]
    L = ["# rbdgen benchmarks", "",
         f"Produced by `benchmarks/run.py{' ' + results['argv'] if results['argv'] else ''}` (what `make bench` runs) on "
         f"{m['date']}; the whole run took {results['wall_s'] / 60:.1f} min. Method and caveats: "
         "[benchmarks/README.md](../README.md). Raw numbers (every run, not only medians): `results.json`.", "",
         "## Machine", "",
         f"- CPU: {m['cpu']} — {m['logical_cpus']} logical CPUs ({m['cpus_available']} available to this process), "
         f"SIMD: {', '.join(m['cpu_simd_flags'])}; {m['memory_gib']} GiB memory",
         f"- OS: {m['os']}; Python {m['python']}, NumPy {m['numpy']}",
         f"- Compiler: {m['compiler']}",
         f"- rbdgen {m['rbdgen']}{' (commit ' + m['git'] + ')' if m.get('git') else ''}: default build flags `{results['flags']['default']}` "
         f"(the straight-line parts of kernels of ≥ {LARGE_STATEMENTS} statements: `{LARGE_OPT}` instead of `-O3`; "
         f"∇FD's looped product without `{NO_SLP}`): this machine's instruction set, as `rbdgen.build` does by "
         f"default; portable build (`march=\"portable\"`, any x86-64): `{results['flags'].get('portable', '')}`",
         f"- OpenMP threads for batches: {results['omp_threads']} (OMP_NUM_THREADS={m['OMP_NUM_THREADS'] or 'unset'}), "
         f"OMP_WAIT_POLICY={m['OMP_WAIT_POLICY']}{' (set by run.py)' if not m['OMP_WAIT_POLICY_given'] else ''}; "
         "batch figures are also given on 1 thread",
         "- An empty OpenMP parallel region (2 threads) cost, at the start of the run: "
         + ", ".join(f"{k} wait policy {v} µs" for k, v in results.get("openmp_empty_region_us", {}).items()),
         f"- Load average at start: {', '.join(f'{x:.2f}' for x in (m['load_average_at_start'] or []))} "
         "(a shared 2-core VM: expect a few % of noise; see the per-run numbers in results.json)"]
    pin = results.get("pinocchio_harness")
    if pin:
        nat = results.get("pinocchio_harness_native")
        L.append(f"- Pinocchio {pin.get('pin')} (the pin wheel's headers and libraries), harness "
                 f"`benchmarks/pinocchio_bench.cpp` built twice: portable, `g++ {pin['flags']}` "
                 f"(compile: {pin.get('compile_s', '?')} s, one-off, cached), and "
                 + (f"for this machine, `g++ {nat['flags']}` (compile: {nat.get('compile_s', '?')} s), its model built "
                    "joint by joint from the wheel parser's (`--model`; same checksum checked per robot)"
                    if nat else f"for this machine: not built ({results.get('pinocchio_native_skipped', '?')})"))
    elif results.get("pinocchio_skipped"):
        L.append(f"- Pinocchio: skipped ({results['pinocchio_skipped']})")
    L += ["", "All times are medians (thread CPU time unless said otherwise). *ratio* = Pinocchio time / rbdgen "
          "time: above 1× rbdgen is faster. † marks a figure whose runs spread by more than "
          f"{NOISY:.0%} of the median: another process disturbed it (see the runs in results.json).", ""]

    L += ["## Summary: one state, C++ (ns per call)", "",
          "| robot | " + " | ".join(KERNELS) + " |", "|---|" + "---:|" * len(KERNELS)]
    for name, r in results["robots"].items():
        cells = []
        for k in KERNELS:
            ours = med(r, "variants", "default", "cpp_single_ns", k)
            pk = best_pin(r, k)
            theirs = med(r, pk, "ns_per_call", k)
            cells.append(f"{fmt(r, 'variants', 'default', 'cpp_single_ns', k)} vs {fmt(r, pk, 'ns_per_call', k)}"
                         f"{'' if pk == 'pinocchio_native' else ' (p)'} ({ratio(theirs, ours)})" if theirs
                         else fmt(r, "variants", "default", "cpp_single_ns", k))
        L.append(f"| {name} | " + " | ".join(cells) + " |")
    L += ["", "Each cell: rbdgen (default build: this machine) vs Pinocchio's faster build, the one for this machine "
          "unless marked (p), portable (ratio).", ""]
    bigs = {name: max((int(n) for n in r["variants"]["default"]["batch_ns_per_state"].get("1", {}).get("rnea", {})),
                      default=None) for name, r in results["robots"].items() if "default" in r.get("variants", {})}
    if any(bigs.values()):
        L += ["## Summary: batches on one core (ns per state)", "",
              "| robot | N | " + " | ".join(KERNELS) + " |", "|---|---:|" + "---:|" * len(KERNELS)]
        for name, big in bigs.items():
            r = results["robots"][name]
            cells = []
            for k in KERNELS:
                ours = med(r, "variants", "default", "batch_ns_per_state", "1", k, str(big))
                pk = best_pin(r, k)
                theirs = med(r, pk, "ns_per_call", k)
                mine = fmt(r, "variants", "default", "batch_ns_per_state", "1", k, str(big))
                cells.append(f"{mine} vs {fmt(r, pk, 'ns_per_call', k)}{'' if pk == 'pinocchio_native' else ' (p)'} "
                             f"({ratio(theirs, ours)})" if theirs else mine)
            L.append(f"| {name} | {big} | " + " | ".join(cells) + " |")
        L += ["", "Each cell: rbdgen's batch path (default build, one OpenMP thread, one Python call for N states) "
              "vs Pinocchio's faster build, one state at a time (ratio).", ""]

    L += goals_markdown(results)

    for name, r in results["robots"].items():
        L += [f"## {name}", "",
              f"{r['description']}: nq = {r['nq']}, nv = {r['nv']}, {r['nb']} bodies (`{r['urdf']}`).", ""]
        L.append(f"- Generation (`generate_cpu`, all {len(KERNELS)} kernels, float64): {r['generate_s']:.1f} s")
        for vn, v in r["variants"].items():
            L.append(f"- Build, {vn} (`rbdgen.build` on an empty cache, generation included; flags `{v['flags']}`): "
                     f"{v['build_s']:.1f} s (compile ≈ {v['compile_s']:.1f} s), library {v['library_bytes'] / 1e6:.1f} MB"
                     + (f"; the same build in a new process, caches warm: {v['warm_build_s']:.2f} s"
                        if v.get("warm_build_s") is not None else ""))
        if r.get("load_average_at_start"):
            L.append(f"- Load average when this robot started: {', '.join(map(str, r['load_average_at_start']))}")
        if "pinocchio" in r and r["pinocchio"].get("note"):
            L.append(f"- Note: {r['pinocchio']['note']}")
        for key, what in (("pinocchio_error", "Pinocchio"), ("pinocchio_native_error", "Pinocchio for this machine")):
            if key in r:
                L.append(f"- {what} failed: {r[key][:300]}")
        L.append("")
        variants = list(r["variants"])
        hdr = ["kernel"]
        for vn in variants:
            hdr += [f"rbdgen C++ ({vn})", f"rbdgen Python ({vn})"]
        pins = [key for key in ("pinocchio", "pinocchio_native") if key in r]
        hdr += [f"Pinocchio C++ ({r[key].get('build', 'portable')})" for key in pins]
        hdr += [f"ratio ({vn} vs Pinocchio {r[pin_key(r, vn)].get('build', 'portable')})" if pins else f"ratio ({vn})"
                for vn in variants]
        ref_sizes = sorted({int(n) for k in KERNELS for n in r["reference_ns_per_state"].get(k, {})})
        hdr += [f"NumPy ref (N={n})" for n in ref_sizes]
        L += ["### One state (per call)", "", "| " + " | ".join(hdr) + " |", "|---|" + "---:|" * (len(hdr) - 1)]
        for k in KERNELS:
            row = [k]
            for vn in variants:
                row += [fmt(r, "variants", vn, "cpp_single_ns", k), fmt(r, "variants", vn, "python_single_ns", k)]
            row += [fmt(r, key, "ns_per_call", k) for key in pins]
            row += [ratio(med(r, pin_key(r, vn), "ns_per_call", k), med(r, "variants", vn, "cpp_single_ns", k))
                    for vn in variants]
            row += [fmt(r, "reference_ns_per_state", k, str(n)) for n in ref_sizes]
            L.append("| " + " | ".join(row) + " |")
        nr = (r.get("pinocchio") or {}).get("rounds") or len(
            next(iter(r["variants"].values()))["cpp_single_ns"]["rnea"].get("round_medians", [0]))
        L += ["", "C++: a driver linked to the generated library calls the kernel over a pool of 256 states; "
              "Python: `kern.<kernel>(q, …, out=…)` with (nq,) arrays, over the same pool. "
              f"rbdgen and Pinocchio took turns, {nr} round{'s' if nr > 1 else ''}: each figure is the median of the "
              "least disturbed round (every round's median is in results.json). "
              "The NumPy reference is per state (N=16: one batched call / 16).", ""]
        for vn in variants:
            v = r["variants"][vn]
            sizes = sorted({int(n) for t in v["batch_ns_per_state"].values() for k in t for n in t[k]})
            threads = v["batch_threads"]
            big = str(max(sizes))
            hdr = ["kernel"] + [f"N={n}" for n in sizes]
            if len(threads) > 1:
                hdr += [f"N={big}, 1 thread"]
            hdr += [f"Pinocchio C++ ({r.get(pin_key(r, vn), {}).get('build', 'portable')}, 1 state)", f"ratio vs N={big}"] + ([f"ratio vs N={big}, 1 thread"]
                                                                       if len(threads) > 1 else [])
            L += [f"### Batches, {vn} build (ns per state; {threads[0]} OpenMP thread{'s' if threads[0] > 1 else ''} "
                  f"unless marked)", "", "| " + " | ".join(hdr) + " |", "|---|" + "---:|" * (len(hdr) - 1)]
            for k in KERNELS:
                b = v["batch_ns_per_state"]
                row = [k] + [fmt(b, str(threads[0]), k, str(n)) for n in sizes]
                one = med(b, "1", k, big) if len(threads) > 1 else None
                if len(threads) > 1:
                    row.append(fmt(b, "1", k, big))
                pk = pin_key(r, vn)
                theirs = med(r, pk, "ns_per_call", k)
                row += [fmt(r, pk, "ns_per_call", k), ratio(theirs, med(b, str(threads[0]), k, big))]
                if len(threads) > 1:
                    row.append(ratio(theirs, one))
                L.append("| " + " | ".join(row) + " |")
            par = results.get("parallel_ops")
            L += ["", f"Batch path: {v['lanes']} states per SIMD vector, OpenMP across blocks of states "
                  + (f"when N × (the kernel's op count) ≥ {par:,}" if par else "for large enough batches")
                  + "; below that, and at N=1, one thread: the N=1 column is the overhead of a batch call "
                  "(wall clock, like every multi-thread column).", ""]
    if results.get("plot"):
        L += ["## Plot", "", f"![per-state times]({results['plot']})", ""]
    return "\n".join(L) + "\n"


def plot(results: dict, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    robots = list(results["robots"])
    fig, axes = plt.subplots(1, len(robots), figsize=(6 * len(robots), 4.5), squeeze=False)
    for ax, name in zip(axes[0], robots):
        r = results["robots"][name]
        v = r["variants"].get("default")
        # the kernels this run timed (--kernels may have chosen a few), in the registry's order
        kernels = [k for k in KERNELS if k in v["batch_ns_per_state"]["1"]] if v else list(KERNELS)
        x = np.arange(len(kernels))
        series = [("rbdgen C++ 1 state", [med(r, "variants", "default", "cpp_single_ns", k) for k in kernels]),
                  ("Pinocchio C++ (faster build)", [med(r, best_pin(r, k), "ns_per_call", k) for k in kernels])]
        if v and kernels:
            big = str(max(int(n) for n in v["batch_ns_per_state"]["1"][kernels[0]]))
            series.append((f"rbdgen batch N={big}, 1 thread",
                           [med(v, "batch_ns_per_state", "1", k, big) for k in kernels]))
        w = 0.8 / len(series)
        for i, (label, ys) in enumerate(series):
            ax.bar(x + i * w, [y or 0 for y in ys], w, label=label)
        ax.set_yscale("log")
        ax.set_xticks(x + 0.4 - w / 2)
        ax.set_xticklabels(kernels, rotation=45, ha="right")
        ax.set_ylabel("ns per state")
        ax.set_title(f"{name} (nv = {r['nv']})")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


# ---- main -------------------------------------------------------------------------------------

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--robots", default="iiwa14,quadruped,talos_reduced",
                   help="comma-separated: " + ", ".join(ROBOTS) + " (default: all)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: short timings, default build only, N up to 1024, reference N=1")
    p.add_argument("--variants", default=None, help="comma-separated builds: default (this machine, "
                   "-march=native), portable (any x86-64) (default: both; --quick: default)")
    p.add_argument("--sizes", default=None, help="batch sizes (default 1,64,256,1024,16384; --quick: 1,64,1024)")
    p.add_argument("--ref-sizes", default=None, help="reference batch sizes (default 1,16; --quick: 1)")
    p.add_argument("--no-pinocchio", action="store_true", help="skip Pinocchio")
    p.add_argument("--kernels", default=None, help="comma-separated kernels to time (default: all; the "
                   "goals table then covers only these)")
    p.add_argument("--out", default=None, help="results folder (default benchmarks/results; --quick: "
                   "benchmarks/.build/quick-results)")
    args = p.parse_args(argv)
    names = [ALIASES.get(n.strip(), n.strip()) for n in args.robots.split(",") if n.strip()]
    bad = [n for n in names if n not in ROBOTS]
    if bad:
        p.error(f"unknown robot(s) {', '.join(bad)}; known: {', '.join(ROBOTS)}")
    args.variants = (args.variants or ("default" if args.quick else "default,portable")).split(",")
    if any(v not in VARIANT_MARCH for v in args.variants):
        p.error("--variants takes default and/or portable")
    args.sizes = [int(x) for x in (args.sizes or ("1,64,1024" if args.quick else "1,64,256,1024,16384")).split(",")]
    args.ref_sizes = [int(x) for x in (args.ref_sizes or ("1" if args.quick else "1,16")).split(",")]
    out = Path(args.out) if args.out else (BUILD / "quick-results" if args.quick else HERE / "results")
    if args.kernels:
        global KERNELS, SIGS
        want = [k.strip() for k in args.kernels.split(",") if k.strip()]
        unknown = [k for k in want if k not in KERNELS]
        if unknown:
            p.error(f"unknown kernel(s) {', '.join(unknown)}; known: {', '.join(KERNELS)}")
        KERNELS = tuple(k for k in KERNELS if k in want)
        SIGS = {k: SIGS[k] for k in KERNELS}

    cxx = find_cxx()
    omp = OpenMP()
    results = {"argv": " ".join(sys.argv[1:] if argv is None else argv), "machine": machine_info(cxx),
               "flags": {vn: " ".join(cxx_flags(opt="-O3", march=resolve_march(m))) for vn, m in VARIANT_MARCH.items()},
               "omp_threads": omp.default, "kernels": list(KERNELS), "robots": {},
               "parallel_ops": getattr(rbdgen.backends.cpu, "PARALLEL_OPS", None)}
    results["openmp_empty_region_us"] = openmp_region_cost(cxx)
    results["peak"], results["peak_scalar_mul"] = {}, {}
    for variant in args.variants:
        march = VARIANT_MARCH[variant]
        lanes = rbdgen.backends.cpu.default_lanes("float64", march)
        lanes = max(lanes) if isinstance(lanes, tuple) else lanes  # the widest the build's kernels use
        results["peak"][variant] = peak_rate(cxx, cxx_flags(opt="-O3", march=resolve_march(march)), lanes)
        log(f"peak multiply/add rate, one core, {variant} build ({lanes} lanes): {results['peak'][variant]}")
        results["peak_scalar_mul"][variant] = peak_rate(cxx, cxx_flags(opt="-O3", march=resolve_march(march)), 1,
                                                        mul_only=True)
        log(f"scalar multiply rate, one core, {variant} build: {results['peak_scalar_mul'][variant]}")
    log(f"empty OpenMP parallel region, µs by wait policy: {results['openmp_empty_region_us']}")
    log(f"machine: {results['machine']['cpu']}, {results['machine']['logical_cpus']} CPUs, "
        f"{results['machine']['compiler']}; OpenMP threads {omp.default}")

    pin_exes = {}
    if args.no_pinocchio:
        results["pinocchio_skipped"] = "--no-pinocchio"
    else:
        why = ensure_pinocchio_headers()
        if why:
            results["pinocchio_skipped"] = why
            log(f"Pinocchio skipped: {why}")
        else:
            for build in PIN_BUILDS:
                try:
                    info = build_pinocchio_harness(cxx, build)
                except RuntimeError as e:
                    if build == "portable":
                        raise
                    results["pinocchio_native_skipped"] = str(e)[-500:]
                    log(f"native Pinocchio harness left out: {e}")
                    continue
                results["pinocchio_harness" + ("" if build == "portable" else "_native")] = info
                pin_exes[build] = info["binary"]

    for name in names:
        results["robots"][name] = bench_robot(name, args, cxx, omp, pin_exes)

    results["wall_s"] = round(time.perf_counter() - T0, 1)
    out.mkdir(parents=True, exist_ok=True)
    if plot(results, out / "results.png"):
        results["plot"] = "results.png"
    else:
        (out / "results.png").unlink(missing_ok=True)
        log("matplotlib not importable: no plot")
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "results.md").write_text(markdown(results))
    log(f"wrote {out / 'results.json'} and {out / 'results.md'} ({results['wall_s'] / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
