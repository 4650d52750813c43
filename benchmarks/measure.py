"""rbdgen benchmarks, our side: what is timed of rbdgen's generated kernels, and on what machine.

The robots and kernels benchmarked (``KERNELS``/``SIGS``: benchmarks/run.py's ``--kernels`` rebinds
them here, so other modules read them as ``measure.KERNELS``), the log, the machine's description
(CPU, compiler, OpenMP region cost, peak multiply/add rate), the timing helpers (runs of calls,
medians, the OpenMP thread count), the warm build in a new process, the C++ driver that times every
kernel one state at a time, and the Python single-state and batch timings. Importing this module
sets OPENBLAS_NUM_THREADS and OMP_WAIT_POLICY (below) unless already set, so import it before NumPy
and the first kernel library. Also used by scan.py, control.py and hls_budget.py.
"""
from __future__ import annotations

import contextlib
import ctypes
import datetime
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

import rbdgen  # noqa: E402
import rbdgen.robots  # noqa: E402,F401  (rbdgen.robots.path)
from rbdgen import registry  # noqa: E402
from rbdgen.targets.cpu import generate_cpu  # noqa: E402
from rbdgen.toolchain.compiler import CACHE_ENV, compiler_version  # noqa: E402

HERE = Path(__file__).resolve().parent
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
#: the rigid contacts constrained_fd is generated for (--contact syntax, rbdgen.model.constraints):
#: the flange held, the four feet on the ground, both soles flat; Pinocchio's harness gets the same
#: constraints (peers.write_constraints) for its constraintDynamics
CONSTRAINTS = {"iiwa14": ["iiwa_link_ee:6d"], "quadruped": ["FL_foot:3d", "FR_foot:3d", "RL_foot:3d", "RR_foot:3d"],
               "talos_reduced": ["left_sole_link:6d", "right_sole_link:6d"]}
ALIASES = {"iiwa": "iiwa14", "talos": "talos_reduced", "humanoid": "talos_reduced"}
INPUT_POOL = {"q": "Q", "v": "V", "a": "A", "tau": "T", "stale": "ST", "f_ext": "FE", "stale_lwp": "SL", "Minv": "MI"}  # kernel input name → pool array in the driver
# every kernel in the registry, with its declared inputs
KERNELS = tuple(k for k in registry.kernels() if registry.get(k).variant_of is None and not registry.get(k).opt_in)  # the *_fext variants and the opt-in Schur kernels: built only when named (benchmarks/scan.py measures those)
SIGS = {k: registry.get(k).input_names for k in KERNELS}
assert set(INPUT_POOL) == set(registry.INPUTS), "the driver's input pool must cover every declared input"

T0 = time.perf_counter()


@contextlib.contextmanager
def scratch_cache(prefix: str):
    """A work folder whose ``cache/`` is rbdgen's compile cache for the duration (cold builds that
    leave the user's cache alone), removed afterwards, the cache setting restored."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    old = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(work / "cache")
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if old is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = old


def write_report(out: Path, stem: str, res: dict, markdown, plot) -> None:
    """``stem``.json, .md (``markdown(res)``) and .png (``plot(res, path)``, False without
    matplotlib) in ``out``; ``res`` None: re-render the .md and .png from the .json there."""
    if res is None:
        res = json.loads((out / f"{stem}.json").read_text())
    else:
        (out / f"{stem}.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / f"{stem}.md").write_text(markdown(res))
    drew = plot(res, out / f"{stem}.png")
    log(f"wrote {out / stem}.json, .md" + (", .png" if drew else " (no matplotlib: no plot)"))


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


# ---- build times ------------------------------------------------------------------------------

#: rbdgen.build in a fresh interpreter, caches warm: prints the seconds the build took
WARM_BUILD = """
import sys, time
import rbdgen
from rbdgen.model.constraints import constraints_from_cli
urdf, base, frames, march, kernels, contacts = sys.argv[1:7]
m = rbdgen.load_urdf(urdf, floating_base=base == "floating").with_frames(frames.split(","))
m = m.with_constraints(constraints_from_cli(contacts.split(",") if contacts else [], []))
t = time.perf_counter()
rbdgen.build(m, dtype="float64", march=None if march == "None" else march,
             **({"kernels": tuple(kernels.split(","))} if kernels else {}))
print(time.perf_counter() - t)
"""


# ---- C++ driver for the generated kernels -----------------------------------------------------

#: the C++ timing method every harness of the benchmark shares (rbdgen's driver below, the
#: Pinocchio + CppADCodeGen harness in codegen_peer.py; benchmarks/pinocchio_bench.cpp has the same
#: method): runs of about target_ms over the pool, thread CPU time and wall time per call per run.
#: Inserted into the templates by format(timing=TIMING_CPP), so its braces are single.
TIMING_CPP = r"""using Clock = std::chrono::steady_clock;
static double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}
static double median(std::vector<double> s) {
  std::sort(s.begin(), s.end());
  return s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
}
static void print_list(const std::vector<double>& x) {
  std::printf("[");
  for (size_t r = 0; r < x.size(); ++r) std::printf("%s%.2f", r ? ", " : "", x[r]);
  std::printf("]");
}
// the same method as benchmarks/pinocchio_bench.cpp: runs of about target_ms over the pool,
// thread CPU time and wall time per call for each run
static void time_per_call(const std::function<void(int)>& body, int pool, int runs, double target_ms,
                          std::vector<double>& cpu, std::vector<double>& wall) {
  auto pass = [&]() { for (int i = 0; i < pool; ++i) body(i); };
  pass();
  double c0 = thread_cpu_ns();
  pass();
  double one = thread_cpu_ns() - c0;
  long passes = std::max(1L, (long)(target_ms * 1e6 / std::max(one, 1.0)));
  for (int r = 0; r < runs; ++r) {
    auto w0 = Clock::now();
    c0 = thread_cpu_ns();
    for (long p = 0; p < passes; ++p) pass();
    double c = thread_cpu_ns() - c0;
    double w = std::chrono::duration<double, std::nano>(Clock::now() - w0).count();
    cpu.push_back(c / (double)(passes * pool));
    wall.push_back(w / (double)(passes * pool));
  }
}
"""

DRIVER = r"""// generated by benchmarks/run.py: times {prefix}'s single-state kernels per call
#include "{header}"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>
#include <ctime>
{timing}int main(int argc, char** argv) {{
  if (argc < 5) return 2;
  const int pool = std::atoi(argv[2]), runs = std::atoi(argv[3]);
  const double target_ms = std::atof(argv[4]);
  // the pool file: the pool of every input the timed kernels read, one after another (benchmarks/measure.py, pool_bytes)
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


def pool_sizes(model, kernels) -> dict:
    """Values per state of each input that ``kernels`` (names) read, in the pool file's order
    (the declared inputs' order). Only those: fd_derivatives_minv's M⁻¹ is nv² values a state,
    which a driver timing the others would carry for nothing (16 states of a 10 000-link chain:
    12.8 GB, and `make bench-rolled` ran out of memory)."""
    need = registry.inputs_of(kernels)
    return {name: a.size(model) for name, a in registry.INPUTS.items() if name in need}


def pool_bytes(pool: dict, model, kernels) -> bytes:
    """The pool file of a driver timing ``kernels``: each input they read, its (n, size) array in
    turn, float64."""
    return b"".join(np.ascontiguousarray(pool[name], dtype=np.float64).tobytes()
                    for name in pool_sizes(model, kernels))


def driver_source(gen, model) -> str:
    sizes = pool_sizes(model, gen.kernels)
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
    return DRIVER.format(timing=TIMING_CPP, prefix=gen.prefix, header=gen.header, per_state=sum(sizes.values()), pools="\n".join(pools),
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
    pool_file.write_bytes(pool_bytes(states(model, rng, 256, kernels), model, kernels))
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


# ---- one robot: states, Python calls, batches -------------------------------------------------

def bench_model(name: str, urdf, floating: bool):
    """The model a robot of ROBOTS is benchmarked as: its FRAMES selected, its CONSTRAINTS given."""
    from rbdgen.model.constraints import constraints_from_cli

    model = rbdgen.load_urdf(urdf, floating_base=floating).with_frames(FRAMES[name])
    return model.with_constraints(constraints_from_cli(CONSTRAINTS.get(name, []), []))


def states(model, rng, n: int, kernels=None) -> dict:
    """``n`` random states: q, v, a, tau, and the other inputs that ``kernels`` (names; None: all
    kernels) read (the stale-data kernels' state, M⁻¹), with those declared before them
    (registry.complete_inputs)."""
    env = {"q": np.ascontiguousarray(model.random_q(rng, n)),
           "v": rng.uniform(-1, 1, (n, model.nv)), "a": rng.uniform(-1, 1, (n, model.nv)),
           "tau": rng.uniform(-1, 1, (n, model.nv))}
    return registry.complete_inputs(model, env, seed=n, names=None if kernels is None else registry.inputs_of(kernels))


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
        st = states(model, rng, n, kern.kernels)
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
