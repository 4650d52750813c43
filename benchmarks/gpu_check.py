#!/usr/bin/env python3
"""Build here, run there (issue 47): everything a lent GPU runs, compiled beforehand on this machine.

A GPU is lent for minutes, on a machine with no network and its own Python (3.12, with cupy,
PyTorch and JAX, but not rbdgen's test extras). nvcc takes minutes per humanoid; the first GPU
session spent its time building and tested 16 of 23 robot cases. So every CUDA library the run
needs is compiled *here* into a compile cache of its own, packed into one folder that the device
tool carries, and the GPU machine only runs::

    python benchmarks/gpu_check.py prepare    # here: build every library the run needs, pack them (make gpu-check-prepare)
    python benchmarks/gpu_check.py dry        # here: plan, check every library is prebuilt, print the run (make gpu-check DRY=1)
    python benchmarks/gpu_check.py run        # there: the steps below, results after each (make gpu-check)

The run, in this order, each step with its own time limit, writing what it measured under
benchmarks/results/ (and, packed, under ``--out``: what the device tool brings back) after EACH
step, so a run cut off still leaves the steps before:

0. ``setup``: unpack the prepared libraries, check each one is found (generation on the GPU
   machine's Python, then the compile cache: a miss is reported, never compiled there); CPU
   builds for the benchmarks start in the background (they need that machine's CPU and Python);
1. ``tests``: ``pytest -m gpu tests/test_cuda.py`` on every robot case (RBDGEN_REQUIRE_GPU=1);
2. ``sanitize``: compute-sanitizer memcheck, racecheck and synccheck on the iiwa's GPU tests
   (what ``make sanitize-gpu`` runs);
3. ``interop``: the torch and JAX CUDA paths and cupy DLPack (the gpu tests of
   tests/test_torch.py and tests/test_gpu_interop.py);
4. ``bench``: the C++ launch benchmark (benchmarks/cuda_launch.cpp: launch + sync, graph replay,
   copies, per kernel and N, no Python), then ``bench-cuda`` (benchmarks/run_cuda.py) for iiwa,
   quadruped and TALOS, N = 1 … 65536 in numeric order;
5. ``seeds``: the seeds' GPU experiments (benchmarks/seeds_gpu.py): seed 000 Fig. 1/2 and seed 001 Fig. 3,
   then issue 41's fd_schur against aba and aba_scan on the same chains (block shape, one state).

How the prebuilt libraries are found there: the compile cache's key is the generated sources, nvcc's
command line, nvcc's ``--version`` text and rbdgen's version. The run sets ``NVCC`` to a stub
(prepared here) that prints the ``--version`` text of the nvcc that built the libraries and refuses
to compile: a library the plan missed fails at once, naming itself, instead of compiling for minutes.
The device code is for sm_90 (H100, H200; ``GPU_CHECK_ARCH`` to change), the architecture
``rbdgen.build`` picks there (the GPUs found). The libraries link the CUDA runtime statically
(nvcc 13.5 here; the driver there is CUDA 13.0's, which runs them: minor-version compatibility).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TESTS = ROOT / "tests"
#: the work folder here: a compile cache of its own (sources kept), the chains' URDFs
PREP = ROOT / ".cache" / "gpu-check"
#: what travels to the GPU machine (the device tool's carry): packed libraries, URDFs, stub, C++ benchmark
CARRY = ROOT / ".cache" / "gpu-check-carry"
CARRY_REL = CARRY.relative_to(ROOT).as_posix()
#: the device code's architecture: what rbdgen.build picks on an H100 or H200 (arch=None: the GPUs found)
ARCH = os.environ.get("GPU_CHECK_ARCH", "90")
#: rbdgen.targets.cuda.nvcc.GPUS_ENV: the GPUs a build here takes as found (not imported here: this
#: module is read before rbdgen is installed on the GPU machine)
GPUS_ENV = "RBDGEN_CUDA_GPUS"
#: the robots of bench-cuda, and the kernels timed there and in the C++ launch benchmark
BENCH_ROBOTS = {"iiwa14": ("iiwa14", False), "quadruped": ("quadruped", True), "talos_reduced": ("talos_reduced", True)}
BENCH_KERNELS = ("rnea", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives")
#: seed 000 Fig. 1: synthetic chains (robots/synthetic.py, as benchmarks/scan.py), rnea against rnea_scan
SEED_CHAINS = (4, 8, 16, 32)
SEED_KERNELS = ("rnea", "rnea_scan")
#: issue 41: Fijany's fd_schur (opt-in, serial chains) against aba and aba_scan on the same chains,
#: one state per call, the block shape's time (benchmarks/seeds_gpu.py's ``fijany``)
SCHUR_KERNELS = ("aba", "aba_scan", "fd_schur")
#: the iiwa's CPU kernels the seeds' experiments compare against (seed 001 Fig. 3: its Algorithm 3
#: with M⁻¹ given, and ∇FD)
SEED_CPU_IIWA = ("rnea", "rnea_scan", "aba_derivatives", "fd_derivatives_minv")
#: seed 001 Fig. 3 on the GPU (seeds_gpu.py) and tests/test_fd_derivatives_minv.py's GPU test: one
#: iiwa library for both (fd_derivatives_minv is opt-in: no other build has it)
SEED001_BUILD = dict(target="cuda", opt="-O3", kernels=("aba_derivatives", "minv", "fd_derivatives_minv"))
#: tests/test_torch.py's KERNELS (read from its source, which imports torch, in plan())
TORCH_TEST = TESTS / "test_torch.py"
#: each step's time limit on the GPU machine (seconds); about 7 of the 8 minutes
STEP_LIMITS = {"setup": 60, "tests": 150, "sanitize": 75, "interop": 45, "bench": 110, "pylaunch": 25, "seeds": 40}


def log(msg: str) -> None:
    print(f"[gpu-check {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---- the plan: every CUDA build the GPU run makes --------------------------------------------------

@dataclasses.dataclass
class Build:
    """One ``rbdgen.build`` the GPU run makes: ``what`` says which test or benchmark; ``model``
    names the model: a robot case id (tests/conftest.py's ROBOT_CASES), ``bundled:<name>`` (the
    URDF as is, no frames) or ``chain:<n>``."""

    what: str
    model: str
    kwargs: dict

    @property
    def label(self) -> str:
        k = self.kwargs.get("kernels")
        kern = "every kernel" if k is None else ",".join(k)
        extra = " ".join(f"{a}={self.kwargs[a]}" for a in ("opt", "arch", "dtype", "werror", "unroll")
                         if a in self.kwargs)
        return f"{self.model}: {kern} ({extra or 'defaults'}{'' if 'arch' in self.kwargs else ', the GPUs found'})"


def _conftest():
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))
    import conftest

    return conftest


def _torch_test_kernels() -> tuple:
    import ast

    for node in ast.parse(TORCH_TEST.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "KERNELS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise SystemExit(f"gpu_check: no KERNELS in {TORCH_TEST}")


def plan(cases=None, kernels=None, parts=("tests", "interop", "bench", "seeds")) -> list[Build]:
    """The builds of the run. ``cases``: robot case ids to keep (None: all); ``kernels``: only
    these kernels in every build (a small plan, for tests of this script)."""
    cf = _conftest()
    sys.path.insert(0, str(TESTS))
    import test_cuda  # the GPU tests' own settings (importing it builds nothing)

    from rbdgen.algorithms import KERNELS

    ids = [p.id for p in cf.ROBOT_CASES]
    if cases is not None:
        unknown = set(cases) - set(ids)
        if unknown:
            raise SystemExit(f"gpu_check: unknown robot case(s) {', '.join(sorted(unknown))}; known: {', '.join(ids)}")
        ids = [i for i in ids if i in cases]
    out: list[Build] = []
    if "tests" in parts:
        # test_gpu_every_kernel_matches_reference: every kernel of every robot case, as built there
        out += [Build(CASE_BUILDS[0], i, dict(test_cuda.GPU_BUILD)) for i in ids]
        out += [Build(CASE_BUILDS[1], i, dict(test_cuda.GPU_BUILD_ROLLED)) for i in ids]
        if "iiwa14-fixed" in ids:
            # _require_gpu's first build (the emulation tests' iiwa build), _gpu_kern (the stream, allocation
            # and interop tests), the debug-mode test's child process (the bundled URDF, no frames)
            out.append(Build("tests/test_cuda.py: _build('iiwa14-fixed')", "iiwa14-fixed",
                             dict(target="cuda", dtype="float64", kernels=tuple(test_cuda.CASES["iiwa14-fixed"][2]),
                                  opt="-O0", arch=test_cuda.EMULATED_ARCH, werror=True)))
            out.append(Build("tests/test_cuda.py: _gpu_kern", "iiwa14-fixed", dict(test_cuda.GPU_KERN_BUILD)))
            out.append(Build("tests/test_cuda.py: debug-mode child", "bundled:iiwa14",
                             dict(target="cuda", kernels=("rnea",), opt="-O1")))
            out.append(Build("tests/test_fd_derivatives_minv.py: GPU", "iiwa14-fixed", dict(SEED001_BUILD)))
    if "interop" in parts and (cases is None or "iiwa14-fixed" in ids):
        out.append(Build("tests/test_torch.py: CUDA tensors", "iiwa14-fixed",
                         dict(target="cuda", kernels=_torch_test_kernels(), opt="-O1")))
    if "bench" in parts:
        for name, (robot, floating) in BENCH_ROBOTS.items():
            case = f"{robot}-{'floating' if floating else 'fixed'}"
            if cases is None or case in ids:
                # run_cuda.py builds every kernel of the tests' model: the same library as the tests'
                out.append(Build("benchmarks/run_cuda.py", case, dict(target="cuda")))
    if "seeds" in parts and cases is None:
        out += [Build("benchmarks/seeds_gpu.py: seed 000 Fig. 1", f"chain:{n}", dict(target="cuda", kernels=SEED_KERNELS))
                for n in SEED_CHAINS]
        out += [Build("benchmarks/seeds_gpu.py: issue 41, fd_schur", f"chain:{n}",
                      dict(target="cuda", kernels=SCHUR_KERNELS)) for n in SEED_CHAINS]
        out.append(Build("benchmarks/seeds_gpu.py: seed 001 Fig. 3", "iiwa14-fixed", dict(SEED001_BUILD)))
    if kernels is not None:
        for b in out:
            b.kwargs["kernels"] = tuple(k for k in (b.kwargs.get("kernels") or KERNELS) if k in kernels)
        out = [b for b in out if b.kwargs["kernels"]]
    # one entry per distinct build (the bench's are the tests'), in the order given
    seen, uniq = {}, []
    for b in out:
        key = (b.model, json.dumps(b.kwargs, sort_keys=True, default=list))
        if key in seen:
            seen[key].what += "; " + b.what
            continue
        seen[key] = b
        uniq.append(b)
    return uniq


def load_model(spec: str, work: Path | None = None):
    """The model a :class:`Build` names, made as its test or benchmark makes it."""
    import rbdgen
    import rbdgen.robots

    if spec.startswith("bundled:"):
        return rbdgen.load_urdf(rbdgen.robots.path(spec.split(":", 1)[1]))
    if spec.startswith("chain:"):
        n = int(spec.split(":", 1)[1])
        return chain_model(n, work or PREP)
    cf = _conftest()
    robot, base = spec.rsplit("-", 1)
    return cf.load_case(next(r for r in cf.ROBOTS if r.name == robot), base == "floating")


def chain_model(n: int, work: Path):
    """benchmarks/scan.py's chain of ``n`` revolute joints (``chain_urdf(n, seed=n, fixed_every=0)``)."""
    import rbdgen
    from rbdgen.robots import chain_urdf

    work.mkdir(parents=True, exist_ok=True)
    p = work / f"chain{n}.urdf"
    p.write_text(chain_urdf(n, seed=n, fixed_every=0))
    return rbdgen.load_urdf(p)


# ---- here: prepare (build and pack) and dry (check and print) ---------------------------------------

def _nvcc_version() -> tuple[str, str]:
    from rbdgen.targets.cuda.nvcc import find_nvcc
    from rbdgen.toolchain.compiler import compiler_version

    nvcc = find_nvcc()
    return nvcc, compiler_version(nvcc)


STUB = """#!/bin/sh
# rbdgen gpu-check (benchmarks/gpu_check.py): stands in for nvcc on the GPU machine. The compile
# cache's key holds nvcc's --version text: this prints that of the nvcc that built the carried
# libraries (nvcc.version beside this file), so that rbdgen finds them; it compiles nothing.
if [ "$1" = "--version" ]; then cat "$(dirname "$0")/nvcc.version"; exit 0; fi
echo "rbdgen gpu-check: a CUDA library the run needs was not prebuilt (nvcc $*): run 'make gpu-check-prepare' on the build machine and carry $CARRY_REL again" >&2
exit 1
"""


def write_stub(folder: Path, version: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nvcc.version").write_text(version + "\n")
    stub = folder / "nvcc"
    stub.write_text(STUB.replace("$CARRY_REL", CARRY_REL))
    stub.chmod(0o755)
    return stub


@contextlib.contextmanager
def _env(**kw):
    old = {k: os.environ.get(k) for k in kw}
    os.environ.update({k: str(v) for k, v in kw.items() if v is not None})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _reset_compiler_state():
    """rbdgen caches nvcc's path and version per process: a new NVCC takes effect only after this."""
    from rbdgen.toolchain import compiler

    compiler._versions.clear()


def lookup(b: Build, cache: Path, work: Path) -> dict:
    """Generate ``b``'s sources and look its library up in ``cache`` without compiling:
    {"lib": path or None, "key": cache key, "generate_s": seconds}."""
    import rbdgen
    from rbdgen.toolchain import compiler

    t0 = time.perf_counter()
    model = load_model(b.model, work)
    with _env(RBDGEN_CACHE_DIR=cache), compiler.cached_only():
        try:
            kern = rbdgen.build(model, **b.kwargs)
        except compiler.NotCached as e:
            return {"lib": None, "key": Path(str(e)).parent.name, "generate_s": round(time.perf_counter() - t0, 2)}
    return {"lib": kern.path, "key": Path(kern.path).parent.name, "generate_s": round(time.perf_counter() - t0, 2)}


def prepare(builds: list[Build], cache: Path, work: Path, manifest_path: Path) -> dict:
    """Build every library of ``builds`` into ``cache`` (compiling only the missing ones), timing each."""
    import rbdgen

    manifest = {"arch": ARCH, "builds": []}
    old = {}
    with contextlib.suppress(OSError, ValueError, KeyError):
        old = {(e["model"], json.dumps(e["kwargs"], sort_keys=True)): e for e in json.loads(manifest_path.read_text())["builds"]}
    # the small robots first: an interrupted prepare leaves the most cases ready (and the order of
    # the manifest is the plan's)
    models = {b.model: load_model(b.model, work) for b in builds}
    order = sorted(range(len(builds)), key=lambda i: (models[builds[i].model].nv, i))
    entries = {}
    for j, i in enumerate(order, 1):
        b = builds[i]
        t0 = time.perf_counter()
        model = models[b.model]
        log(f"prepare {j}/{len(builds)}: {b.label}")
        with _env(RBDGEN_CACHE_DIR=cache):
            kern = rbdgen.build(model, **b.kwargs,
                                progress=lambda s: s.startswith(("compiling", "linking")) and log(f"  {s}"))
        dt = time.perf_counter() - t0
        lib = Path(kern.path)
        prev = old.get((b.model, json.dumps(b.kwargs, sort_keys=True, default=list)), {})
        entry = {"what": b.what, "model": b.model, "kwargs": json.loads(json.dumps(b.kwargs, default=list)),
                 "key": lib.parent.name, "lib": lib.name, "bytes": lib.stat().st_size,
                 "nv": model.nv, "kernels": len(kern.kernels), "seconds": round(dt, 1)}
        # the time of the build that compiled it (a later prepare that found it keeps that figure)
        if dt < 5 and prev.get("key") == entry["key"]:
            entry["seconds"] = prev.get("seconds", entry["seconds"])
        entries[i] = entry
        manifest["builds"] = [entries[x] for x in sorted(entries)]
        log(f"  {lib.parent.name}/{lib.name}: {lib.stat().st_size / 2**20:.1f} MiB, {dt:.1f} s")
        manifest_path.parent.mkdir(parents=True, exist_ok=True)
        manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


#: what one device call may carry: the working tree travels with it, and all of it may be 64 MiB
PART_LIMIT = int(float(os.environ.get("GPU_CHECK_PART_MIB", "46")) * 2**20)
#: the builds of a robot case's GPU test alone (a part of its own may carry them): the test builds
#: every kernel unrolled and rolled, so both travel in the part that runs the case
CASE_BUILD = "tests/test_cuda.py: every kernel, every case"
CASE_BUILDS = (CASE_BUILD, CASE_BUILD + ", rolled")


def _case_only(e: dict) -> bool:
    """A build only test_gpu_every_kernel_matches_reference needs (not the benchmarks, the seeds,
    or the other GPU tests)."""
    return e["what"] in CASE_BUILDS and e["model"] != "bundled:iiwa14"


#: compressed over raw size of the libraries in one solid xz -9 stream (measured 2026-11-26, 34
#: libraries: 41.7 of 243.6 MiB, 0.171: they share the CUDA runtime and much of their code); the
#: parts are planned with it, and one that comes out over the limit is split
RATIO = 0.18


def pack(manifest: dict, cache: Path, carry: Path, nvcc_version: str, limit: int = PART_LIMIT) -> dict:
    """What travels, in parts of at most ``limit`` bytes, one device call each: the libraries (with
    their digests and command lines, not their sources) and the example-robot-data URDFs the tests
    name in one solid xz -9 tarball per part (libraries share the CUDA runtime and much code: a
    solid stream is 0.17 of their size, each alone 0.21), the nvcc stub, the C++ launch benchmark,
    and the part's manifest (its builds, robot cases, steps). Part 1 holds every build but the robot
    cases' own (the benchmarks, the seeds, the other GPU tests) and the smallest cases that fit;
    parts 2, 3, … the other cases, biggest first. Returns sizes."""
    cf = _conftest()
    if carry.exists():
        shutil.rmtree(carry)
    carry.mkdir(parents=True)
    uniq = {e["key"]: e for e in manifest["builds"]}
    files = {k: [cache / k / f for f in (e["lib"], e["lib"] + ".digest", "command.txt")] for k, e in uniq.items()}
    raw = {k: sum(f.stat().st_size for f in fs) for k, fs in files.items()}
    urdfs = sorted({str(r.relpath) for r in cf.ROBOTS if not r.relpath.startswith("bundled:")})
    erd = cf._erd_dir()
    bin_dir = carry / ".bin"
    write_stub(bin_dir, nvcc_version)
    exe = build_launch_bench(bin_dir)
    common = sum(f.stat().st_size for f in bin_dir.iterdir()) + 200_000  # the URDFs, compressed, and the manifest
    main_keys = {e["key"] for e in manifest["builds"] if not _case_only(e)}
    guard = {e["key"] for e in manifest["builds"] if "_build('iiwa14-fixed')" in e["what"]}
    case_keys: dict = {}
    for e in manifest["builds"]:
        if _case_only(e):
            case_keys.setdefault(e["model"], set()).add(e["key"])
    ratio = RATIO
    while True:
        est = lambda keys: common + ratio * sum(raw[k] for k in keys | guard)  # noqa: E731
        parts = [{"keys": set(main_keys), "cases": []}]
        for case in sorted(case_keys, key=lambda c: est(case_keys[c] - main_keys)):
            if est(parts[0]["keys"] | case_keys[case]) <= limit:
                parts[0]["keys"] |= case_keys[case]
                parts[0]["cases"].append(case)
        for case in sorted((c for c in case_keys if c not in parts[0]["cases"]), key=lambda c: -est(case_keys[c])):
            for part in parts[1:]:  # first fit, biggest first
                if est(part["keys"] | case_keys[case]) <= limit:
                    part["keys"] |= case_keys[case]
                    part["cases"].append(case)
                    break
            else:
                parts.append({"keys": set(case_keys[case]), "cases": [case]})
        worst = 1.0
        for i, part in enumerate(parts, 1):
            folder = carry / f"part{i}"
            if folder.exists():
                shutil.rmtree(folder)
            shutil.copytree(bin_dir, folder / "bin")
            keys = sorted(part["keys"] | guard, key=lambda k: raw[k])  # alike sizes side by side
            log(f"pack part{i}: {len(keys)} libraries, {sum(raw[k] for k in keys) / 2**20:.1f} MiB, xz -9 …")
            with tarfile.open(folder / "libraries.tar.xz", "w:xz", preset=9) as tar:
                for k in keys:
                    for f in files[k]:
                        tar.add(f, arcname=f"kernels/{k}/{f.name}")
                for rel in urdfs:
                    tar.add(erd / rel, arcname=f"erd/{rel}")
            builds = [e for e in manifest["builds"] if e["key"] in part["keys"] | guard
                      and (i == 1 or e["model"] in part["cases"] or e["key"] in guard)]
            steps = list(STEP_LIMITS) if i == 1 else ["setup", "tests"]
            pm = {"part": i, "of": len(parts), "cases": sorted(part["cases"]), "all_cases": sorted(case_keys),
                  "steps": steps, "arch": manifest["arch"], "builds": builds, "nvcc_version": nvcc_version}
            (folder / "manifest.json").write_text(json.dumps(pm, indent=1) + "\n")
            part["bytes"] = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
            worst = max(worst, part["bytes"] / limit)
        if worst <= 1.0 or ratio > 1.0:
            break
        ratio *= worst * 1.02  # a part came out over the limit: plan again with what was measured
        log(f"a part is {worst:.2f} times the limit: planning again with {ratio:.3f} compressed per raw byte")
        for old in carry.glob("part*"):
            shutil.rmtree(old)
    shutil.rmtree(bin_dir)
    return {"libraries_bytes": sum(raw.values()), "launch_bench": exe.name,
            "parts": [{"part": i, "bytes": p["bytes"], "cases": sorted(p["cases"])} for i, p in enumerate(parts, 1)]}


LAUNCH_SRC = HERE / "cuda_launch.cpp"


def build_launch_bench(folder: Path) -> Path:
    """benchmarks/cuda_launch.cpp, plain C++ (it finds the kernels in a library by name), built
    with g++ into ``folder``; the name carries a hash of the source."""
    src = LAUNCH_SRC.read_bytes()
    exe = folder / f"cuda_launch-{hashlib.sha256(src).hexdigest()[:12]}"
    if not exe.exists():
        cmd = [os.environ.get("CXX", "g++"), "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", str(LAUNCH_SRC),
               "-o", str(exe), "-ldl"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"gpu_check: building {LAUNCH_SRC.name} failed:\n{r.stderr}")
    return exe


def dry(builds: list[Build], cache: Path, work: Path, carry: Path | None) -> int:
    """Print the run and which of its libraries are prebuilt; 1 where one is missing (or the
    packed folder does not hold it)."""
    packed, parts = set(), []
    if carry is not None:
        for m in sorted(carry.glob("part*/manifest.json"), key=lambda p: int(p.parent.name[4:])):
            pm = json.loads(m.read_text())
            packed |= {e["key"] for e in pm["builds"]}
            parts.append((m.parent, pm))
    print("gpu-check: the run on the GPU machine, one device call per part "
          "(python3 benchmarks/gpu_check.py run --carry <part> --out $OUT):")
    for step, limit in STEP_LIMITS.items():
        print(f"  {step:9s} ≤ {limit:3d} s  {STEP_TEXT[step]}")
    print(f"  total    ≤ {sum(STEP_LIMITS.values())} s")
    print(f"\nprebuilt libraries ({cache}, sm_{ARCH}):")
    missing, keys = 0, {}
    for b in builds:
        r = lookup(b, cache, work)
        keys[id(b)] = r["key"]
        if r["lib"] is None:
            state, missing = "MISSING (not compiled)", missing + 1
        elif carry is not None and r["key"] not in packed:
            state, missing = "compiled, NOT PACKED (run prepare again)", missing + 1
        else:
            state = f"compiled {Path(r['lib']).stat().st_size / 2**20:5.1f} MiB"
        print(f"  {state:36s} {b.label}   [{r['key']}; {b.what}]")
    if parts:
        print(f"\nthe carried parts ({carry}), one device call each (docs/cuda.md, GPU check):")
        for folder, pm in parts:
            size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
            rel = folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder
            print(f"  {rel}: {size / 2**20:5.1f} MiB, steps {','.join(pm['steps'])}; robot cases "
                  f"{', '.join(pm['cases'])}")
        covered = {c for _, pm in parts for c in pm["cases"]}
        cases = {b.model for b in builds if b.what == CASE_BUILD}
        if cases - covered:
            print(f"  robot cases in no part: {', '.join(sorted(cases - covered))}")
            missing += len(cases - covered)
        # a part tests its cases with every build their test makes (unrolled and rolled): one it
        # lacks fails there at the nvcc stub, so it is a miss here
        need = {(b.model, keys[id(b)]) for b in builds if b.what in CASE_BUILDS}
        for folder, pm in parts:
            held = {e["key"] for e in pm["builds"]}
            lacking = sorted(f"{m} [{k}]" for m, k in need if m in pm["cases"] and k not in held)
            if lacking:
                print(f"  {folder.name} tests cases without their builds: {', '.join(lacking)}")
                missing += len(lacking)
    print(f"\n{len(builds) - missing} of {len(builds)} libraries prebuilt" + (f"; {missing} missing" if missing else ""))
    return 1 if missing else 0


STEP_TEXT = {
    "setup": "unpack the libraries, find each one (generated there, looked up, never compiled); CPU builds start",
    "tests": "RBDGEN_REQUIRE_GPU=1 pytest -m gpu tests/test_cuda.py (every robot case)",
    "sanitize": "compute-sanitizer memcheck, synccheck, racecheck on pytest -m gpu -k iiwa14 tests/test_cuda.py",
    "interop": "pytest -m gpu tests/test_torch.py tests/test_gpu_interop.py (torch, JAX, cupy DLPack)",
    "bench": "cuda_launch (C++: launch+sync, graph, copies), cpu_threads.py (the CPU batch path against N, threads, "
             "wait policy), run_cuda.py (iiwa, quadruped, TALOS; N = 1 … 65536)",
    "pylaunch": "py_launch.py: iiwa rnea, aba, ∇FD from Python end to end (call, prepared launch, graph; N = 1 … 256)",
    "seeds": "seeds_gpu.py: seed 000 Fig. 1/2 (rnea_scan vs rnea), seed 001 Fig. 3 (∇FD end to end, N = 16 … 128)",
}


# ---- there: the run -------------------------------------------------------------------------------

class Run:
    """The steps on the GPU machine, each under its own time limit, results written after each."""

    def __init__(self, args):
        self.args = args
        self.out = Path(args.out) if args.out else None
        self.results = ROOT / "benchmarks" / "results"
        self.summary = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "steps": {}}
        self.work = Path(tempfile.mkdtemp(prefix="rbdgen-gpu-check-"))
        self.cache = self.work / "kernels"
        self.env = dict(os.environ)
        self.changed: list[Path] = []
        self.cpu_builds = None
        self.carry = Path(args.carry)
        self.manifest = json.loads((self.carry / "manifest.json").read_text())
        self.part = f"part{self.manifest['part']}"  # in the names of what this run writes
        self.summary.update(part=f"{self.manifest['part']} of {self.manifest['of']}", cases=self.manifest["cases"])
        if args.results:  # a run elsewhere than benchmarks/results/ (a rehearsal without a GPU)
            self.results = Path(args.results)
            self.results.mkdir(parents=True, exist_ok=True)

    # results: benchmarks/results/ and, packed, $OUT (at most 8 files come back)
    def record(self, step: str, info: dict, files=()):
        self.summary["steps"][step] = info
        self.changed += [Path(f) for f in files if Path(f).exists()]
        # every file a step writes is in the results folder: benchmarks/results/ in the repository
        self.summary["files"] = sorted({f"benchmarks/results/{p.name}" for p in self.changed})
        js, md = self.results / f"gpu_check_{self.part}.json", self.results / f"gpu_check_{self.part}.md"
        js.write_text(json.dumps(self.summary, indent=1, default=str) + "\n")
        md.write_text(self.markdown())
        if self.out is not None:
            self.out.mkdir(parents=True, exist_ok=True)
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                for p in sorted(set(self.changed + [js, md])):
                    tar.add(p, arcname=f"benchmarks/results/{p.name}")
            tmp = self.out / f".results_{self.part}.tar.gz"
            tmp.write_bytes(buf.getvalue())
            tmp.replace(self.out / f"results_{self.part}.tar.gz")
            shutil.copy(md, self.out / md.name)

    def markdown(self) -> str:
        s = self.summary
        lines = [f"# gpu-check, part {s['part']} ({s['started']})", "", f"- GPU: {s.get('gpu', '?')}",
                 f"- host: {s.get('cpu', '?')}", f"- software: {s.get('software', '?')}",
                 f"- robot cases of this part: {', '.join(s['cases'])}", "",
                 "| step | status | seconds | what |", "|---|---|---:|---|"]
        for step, info in s["steps"].items():
            lines.append(f"| {step} | {info.get('status', '?')} | {info.get('seconds', '')} | {info.get('summary', '')} |")
        for step, info in s["steps"].items():
            if info.get("details"):
                lines += ["", f"## {step}", "", *info["details"]]
        return "\n".join(lines) + "\n"

    def sh(self, step: str, cmd: list, limit: float, log_name: str, env=None) -> tuple[int, str, float]:
        """Run ``cmd`` (output to benchmarks/results/gpu_check_<log_name>.log and to this log) within ``limit``."""
        t0 = time.perf_counter()
        logf = self.results / f"gpu_check_{self.part}_{log_name}.log"
        log(f"{step}: {' '.join(map(str, cmd))} (limit {limit:.0f} s)")
        with open(logf, "w") as f:
            try:
                p = subprocess.Popen([str(c) for c in cmd], cwd=ROOT, env=env or self.env, stdout=f,
                                     stderr=subprocess.STDOUT, start_new_session=True)
                rc = p.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, 9)
                p.wait()
                rc = 124
        self.changed.append(logf)
        text = logf.read_text(errors="replace")
        sys.stderr.write(text[-3000:])
        return rc, text, time.perf_counter() - t0

    def time_left(self, step: str) -> float:
        return STEP_LIMITS[step] * self.args.scale

    # 0 --------------------------------------------------------------------------------------------
    def setup(self):
        t0 = time.perf_counter()
        carry = self.carry
        for tb in sorted(carry.glob("*.tar.xz")):  # each library alone, and the URDFs
            with tarfile.open(tb) as tar:
                tar.extractall(self.work)
        stub = self.work / "bin" / "nvcc"
        shutil.copytree(carry / "bin", self.work / "bin")
        os.chmod(stub, 0o755)
        self.env.update(RBDGEN_CACHE_DIR=str(self.cache), NVCC=str(stub), RBDGEN_ERD_DIR=str(self.work / "erd"),
                        RBDGEN_REQUIRE_GPU="1", PYTHONUNBUFFERED="1", XLA_PYTHON_CLIENT_PREALLOCATE="false",
                        RBDGEN_GPU_CHECK_CHAINS=str(self.work / "chains"))
        if self.args.as_if_gpus:  # a rehearsal without a GPU: build as the GPU machine will
            self.env[GPUS_ENV] = self.args.as_if_gpus
        os.environ.update({k: self.env[k] for k in ("RBDGEN_CACHE_DIR", "NVCC", "RBDGEN_ERD_DIR")})
        self.summary.update(gpu=_gpu_name(), cpu=_cpu_name(), software=_software())
        manifest = self.manifest
        # the CPU kernels the benchmarks compare against: built there (that CPU, that Python), in the background
        if not self.args.no_cpu_builds and {"bench", "seeds", "interop"} & set(self.steps):
            cpu_log = self.results / f"gpu_check_{self.part}_cpu_builds.log"
            self.cpu_builds = subprocess.Popen([sys.executable, str(HERE / "gpu_check.py"), "cpu-builds"], cwd=ROOT,
                                               env=self.env, stdout=open(cpu_log, "w"), stderr=subprocess.STDOUT,
                                               start_new_session=True)
            self.changed.append(cpu_log)
        # every library of this part found? generation there (its Python), the lookup in the carried cache
        rc, text, dt = self.sh("setup", [sys.executable, HERE / "gpu_check.py", "find", "--manifest",
                                         carry / "manifest.json", "--jobs", str(max(1, (os.cpu_count() or 2) - 2))],
                               self.time_left("setup"), "setup")
        found = [ln for ln in text.splitlines() if ln.startswith("found ")]
        missing = [ln for ln in text.splitlines() if ln.startswith("MISSING ")]
        self.record("setup", {"status": "ok" if rc == 0 else f"rc {rc}", "seconds": round(time.perf_counter() - t0, 1),
                              "summary": f"{len(found)} of {len(manifest['builds'])} prebuilt libraries found"
                                         + (f"; {len(missing)} missing" if missing else ""),
                              "details": missing or found[:0]})

    # 1 --------------------------------------------------------------------------------------------
    def tests(self):
        junit = self.results / f"gpu_check_{self.part}_tests.xml"
        # this part's robot cases; part 1 also runs test_cuda.py's other GPU tests (streams, faults)
        case_test = "tests/test_cuda.py::test_gpu_every_kernel_matches_reference"
        if self.manifest["part"] == 1:
            others = set(self.manifest["all_cases"]) - set(self.manifest["cases"])
            select = ["tests/test_cuda.py", *[a for c in sorted(others) for a in ("--deselect", f"{case_test}[{c}]")]]
        else:
            select = [f"{case_test}[{c}]" for c in self.manifest["cases"]]
        workers = min(self.args.workers, max(1, 4 * len(self.manifest["cases"])))
        rc, text, dt = self.sh("tests", [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", str(workers),
                                         "-m", "gpu", "-q", "-rfEs", f"--junitxml={junit}", *select],
                               self.time_left("tests"), "tests")
        self.record("tests", _pytest_summary(rc, text, dt, junit, by_case=True), [junit])

    # 2 --------------------------------------------------------------------------------------------
    def sanitize(self):
        san = _sanitizer()
        details, status, t0 = [], "ok", time.perf_counter()
        if san is None:
            self.record("sanitize", {"status": "skipped", "summary": "compute-sanitizer not found"})
            return
        # synccheck first after memcheck: it has never run; racecheck is the slowest. Each tool gets
        # its share of what is left, so that a slow one does not leave the next unrun
        tools = ("memcheck", "synccheck", "racecheck")
        for j, tool in enumerate(tools):
            left = (self.time_left("sanitize") - (time.perf_counter() - t0)) / (len(tools) - j)
            if left < 5:
                details.append(f"- {tool}: not run (the step's time was spent)")
                status = "partial"
                continue
            rc, text, dt = self.sh("sanitize", [san, "--tool", tool, "--error-exitcode", "1", sys.executable, "-m",
                                                "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q", "-m", "gpu",
                                                "-k", "iiwa14", "tests/test_cuda.py"], left, f"sanitize_{tool}")
            tail = [ln for ln in text.splitlines() if "ERROR SUMMARY" in ln or "RACECHECK SUMMARY" in ln
                    or " passed" in ln or " failed" in ln][-3:]
            details.append(f"- {tool}: rc {rc} ({dt:.0f} s): " + " | ".join(tail))
            if rc:
                status = "timeout" if rc == 124 else "errors"
            self.record("sanitize", {"status": status, "seconds": round(time.perf_counter() - t0, 1),
                                     "summary": "; ".join(d.split(":")[0][2:] + (" ok" if " rc 0 " in d else " !")
                                                          for d in details), "details": details})

    # 3 --------------------------------------------------------------------------------------------
    def interop(self):
        junit = self.results / f"gpu_check_{self.part}_interop.xml"
        rc, text, dt = self.sh("interop", [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
                                           "-m", "gpu", "-q", "-rfEs", f"--junitxml={junit}", "tests/test_torch.py",
                                           "tests/test_gpu_interop.py"], self.time_left("interop"), "interop")
        self.record("interop", _pytest_summary(rc, text, dt, junit), [junit])

    # 4 --------------------------------------------------------------------------------------------
    def bench(self):
        t0, details = time.perf_counter(), []
        exe = next((self.carry / "bin").glob("cuda_launch-*"), None)
        launch_json = self.results / "cuda_launch.json"
        rc, text, dt = self.sh("bench", [sys.executable, HERE / "gpu_check.py", "launch-bench", "--exe", exe,
                                         "--json", launch_json, "--timeout", str(self.time_left("bench") * 0.12)],
                               self.time_left("bench") * 0.35, "launch")
        details.append(f"- C++ launch benchmark: rc {rc}, {dt:.0f} s")
        self.record("bench", {"status": "running", "seconds": round(time.perf_counter() - t0, 1),
                              "summary": "C++ launch benchmark done", "details": details},
                    [launch_json, self.results / "cuda_launch.md"])
        self.wait_cpu_builds(self.time_left("bench") * 0.2)
        # item 3 of issue 47: the CPU batch path against N, threads and OpenMP wait policy (~20 s)
        rc3, text, dt = self.sh("bench", [sys.executable, HERE / "cpu_threads.py", "--out", self.results],
                                self.time_left("bench") * 0.25, "cpu_threads")
        details.append(f"- cpu_threads.py: rc {rc3}, {dt:.0f} s")
        self.record("bench", {"status": "running", "seconds": round(time.perf_counter() - t0, 1),
                              "summary": "C++ launch benchmark, CPU threads sweep done", "details": details},
                    [self.results / "cpu_threads.json", self.results / "cpu_threads.md"])
        left = self.time_left("bench") - (time.perf_counter() - t0)
        rc2, text, dt = self.sh("bench", [sys.executable, HERE / "run_cuda.py", "--robots", ",".join(BENCH_ROBOTS),
                                          "--kernels", ",".join(BENCH_KERNELS), "--min-s", "0.003", "--rounds", "5",
                                          "--out", self.results], left, "run_cuda")
        details.append(f"- run_cuda.py: rc {rc2}, {dt:.0f} s")
        self.record("bench", {"status": "ok" if rc == rc2 == 0 else f"rc {rc}/{rc2}",
                              "seconds": round(time.perf_counter() - t0, 1),
                              "summary": "cuda_launch + run_cuda", "details": details},
                    [self.results / "cuda.json", self.results / "cuda.md"])

    def wait_cpu_builds(self, limit: float):
        if self.cpu_builds is not None and self.cpu_builds.poll() is None:
            log(f"waiting ≤ {limit:.0f} s for the CPU builds")
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.cpu_builds.wait(timeout=limit)

    # 5 --------------------------------------------------------------------------------------------
    def pylaunch(self):
        t0 = time.perf_counter()
        rc, text, dt = self.sh("pylaunch", [sys.executable, HERE / "py_launch.py", "--out", self.results],
                               self.time_left("pylaunch"), "py_launch")
        self.record("pylaunch", {"status": "ok" if rc == 0 else f"rc {rc}", "seconds": round(time.perf_counter() - t0, 1),
                                 "summary": "Python launch path: call, prepared, graph"},
                    [self.results / "py_launch.json", self.results / "py_launch.md"])

    # 6 --------------------------------------------------------------------------------------------
    def seeds(self):
        t0 = time.perf_counter()
        self.wait_cpu_builds(5)
        rc, text, dt = self.sh("seeds", [sys.executable, HERE / "seeds_gpu.py", "--out", self.results],
                               self.time_left("seeds"), "seeds")
        self.record("seeds", {"status": "ok" if rc == 0 else f"rc {rc}", "seconds": round(time.perf_counter() - t0, 1),
                              "summary": "seed 000 Fig. 1/2, seed 001 Fig. 3"},
                    [self.results / "seeds_gpu.json", self.results / "seeds_gpu.md"])

    @property
    def steps(self) -> list:
        wanted = self.args.steps.split(",") if self.args.steps else self.manifest["steps"]
        return [s for s in STEP_LIMITS if s in wanted]

    def __call__(self):
        for step in self.steps:
            t0 = time.perf_counter()
            try:
                getattr(self, step)()
            except Exception as e:  # noqa: BLE001 - a step that breaks must not stop the next ones
                import traceback

                traceback.print_exc()
                self.record(step, {"status": "error", "seconds": round(time.perf_counter() - t0, 1),
                                   "summary": f"{type(e).__name__}: {e}"[:300]})
        if self.cpu_builds is not None and self.cpu_builds.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.cpu_builds.pid, 9)
        shutil.rmtree(self.work, ignore_errors=True)
        log("done: " + ", ".join(f"{k} {v.get('status')}" for k, v in self.summary["steps"].items()))
        return 0 if all(v.get("status") == "ok" for v in self.summary["steps"].values()) else 1


def _pytest_summary(rc, text, dt, junit: Path, by_case=False) -> dict:
    import xml.etree.ElementTree as ET

    counts, failed, cases = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}, [], {}
    with contextlib.suppress(OSError, ET.ParseError):
        for tc in ET.parse(junit).getroot().iter("testcase"):
            name = tc.get("name", "")
            kind = next((c.tag for c in tc if c.tag in ("failure", "error", "skipped")), "passed")
            kind = {"failure": "failed"}.get(kind, kind)
            counts[kind] += 1
            if kind in ("failed", "error"):
                failed.append(f"- {tc.get('classname')}::{name}")
            if by_case and name.startswith("test_gpu_every_kernel_matches_reference["):
                cases.setdefault(name[name.index("[") + 1:-1], []).append(kind)
    status = "timeout" if rc == 124 else ("ok" if rc == 0 else "failures")
    details = failed[:60]
    if cases:
        done = sorted(c for c, k in cases.items() if all(x == "passed" for x in k))
        details = [f"robot cases with every test passed: {len(done)} of {len(cases)}"] + details
    return {"status": status, "seconds": round(dt, 1),
            "summary": ", ".join(f"{v} {k}" for k, v in counts.items() if v) or "no junit report",
            "details": details}


def _gpu_name() -> str:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return "unknown"
    r = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version,compute_cap", "--format=csv,noheader"],
                       capture_output=True, text=True)
    return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else "unknown"


def _cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f" ({os.cpu_count()} logical cores)"
    return "unknown"


def _software() -> str:
    parts = [f"Python {sys.version.split()[0]}"]
    for mod in ("numpy", "cupy", "torch", "jax"):
        with contextlib.suppress(Exception):
            parts.append(f"{mod} {__import__(mod).__version__}")
    return ", ".join(parts)


def _sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for p in ("/usr/local/cuda/bin/compute-sanitizer", "/opt/nvidia/compute-sanitizer/compute-sanitizer"):
        if os.access(p, os.X_OK):
            return p
    with contextlib.suppress(ImportError):
        import nvidia

        for r in nvidia.__path__:
            for sub in ("cu13", "cuda_sanitizer_api"):
                p = Path(r) / sub / "bin" / "compute-sanitizer"
                if p.exists():
                    return str(p)
    return None


def _install_rbdgen():
    """An editable install with that machine's Python (no network: no dependencies, no build
    isolation; the image has setuptools), unless rbdgen is importable from this checkout."""
    try:
        import rbdgen.templates  # noqa: F401

        if Path(rbdgen.templates.__file__).resolve().is_relative_to(ROOT):
            return
    except ImportError:
        pass
    log("installing rbdgen (pip install --no-index --no-deps --no-build-isolation -e .)")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-build-isolation",
                    "-e", str(ROOT)], check=True)
    import site  # the install's .pth (the editable finder) for this process too, not only for its children

    for d in site.getsitepackages():
        site.addsitedir(d)


# ---- helpers the run starts as processes ----------------------------------------------------------

def cmd_find(args) -> int:
    """Each build of the carried manifest: generated here, looked up in $RBDGEN_CACHE_DIR; in parallel."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    if args.manifest:  # the builds a carried part holds
        builds = [Build(e["what"], e["model"], e["kwargs"]) for e in json.loads(Path(args.manifest).read_text())["builds"]]
    else:
        builds = plan()
    cache = Path(os.environ["RBDGEN_CACHE_DIR"])
    work = Path(os.environ.get("RBDGEN_GPU_CHECK_CHAINS", PREP))
    # the biggest first (they take longest to generate); each writes the generation cache, which the
    # tests' processes then read instead of generating again
    models = {b.model: load_model(b.model, work) for b in builds}
    builds = sorted(builds, key=lambda b: -models[b.model].nv)
    with ProcessPoolExecutor(max_workers=args.jobs) as ex:
        futs = {ex.submit(lookup, b, cache, work): b for b in builds}
        missing = 0
        for f in as_completed(futs):
            b = futs[f]
            try:
                r = f.result()
            except Exception as e:  # noqa: BLE001
                r = {"lib": None, "key": f"{type(e).__name__}: {e}"}
            if r["lib"] is None:
                missing += 1
                print(f"MISSING {b.label} [{r['key']}]", flush=True)
            else:
                print(f"found {b.label} [{r['key']}, generated in {r['generate_s']} s]", flush=True)
    return 1 if missing else 0


def cmd_cpu_builds(args) -> int:
    """The CPU kernels the benchmarks (run_cuda.py, seeds_gpu.py) and the torch GPU test compare
    against, built on the GPU machine's CPU (-march=native) while the GPU tests run."""
    import rbdgen

    t0 = time.perf_counter()
    todo = [(f"{r}-{'floating' if f else 'fixed'}", dict(kernels=BENCH_KERNELS)) for r, f in BENCH_ROBOTS.values()]
    todo.append(("iiwa14-fixed", dict(kernels=SEED_CPU_IIWA)))
    todo += [(f"chain:{n}", dict(kernels=SEED_KERNELS)) for n in SEED_CHAINS]
    todo += [(f"chain:{n}", dict(kernels=SCHUR_KERNELS)) for n in SEED_CHAINS]
    todo.append(("iiwa14-fixed", dict(kernels=_torch_test_kernels(), opt="-O1")))
    work = Path(os.environ.get("RBDGEN_GPU_CHECK_CHAINS", PREP / "chains"))
    for case, kw in todo:
        t = time.perf_counter()
        rbdgen.build(load_model(case, work), **kw)
        log(f"cpu build {case} {kw}: {time.perf_counter() - t:.1f} s")
    log(f"cpu builds done in {time.perf_counter() - t0:.1f} s")
    return 0


def cmd_launch_bench(args) -> int:
    """benchmarks/cuda_launch.cpp on the bench robots' libraries (built through rbdgen.build: the
    cache), each kernel of BENCH_KERNELS, N = 1 … 65536; JSON and Markdown."""
    import rbdgen

    sizes = [1, 4, 16, 64, 128, 256, 1024, 4096, 16384]  # 65536: run_cuda.py's (TALOS' ∇FD copies 1.5 GB there)
    res = {"gpu": _gpu_name(), "cpu": _cpu_name(), "date": time.strftime("%Y-%m-%d"), "rows": []}
    for name, (robot, floating) in BENCH_ROBOTS.items():
        kern = rbdgen.build(load_model(f"{robot}-{'floating' if floating else 'fixed'}"), target="cuda")
        cmd = [str(args.exe), kern.path, kern.prefix, kern._tag, ",".join(BENCH_KERNELS),
               ",".join(map(str, sizes)), str(args.min_ms)]
        log(" ".join(cmd))
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        sys.stderr.write(r.stderr[-2000:])
        for line in r.stdout.splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                row["robot"] = name
                res["rows"].append(row)
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")
        Path(args.json).with_suffix(".md").write_text(launch_markdown(res))
    return 0


def launch_markdown(res: dict) -> str:
    lines = [f"# CUDA launch path from C++ ({res['date']})", "", f"- GPU: {res['gpu']}", f"- CPU: {res['cpu']}",
             "- benchmarks/cuda_launch.cpp: no Python. µs per call, median of rounds, wall clock:",
             "  `launch+sync`: `<prefix>_<kernel>_f64_cuda` then a stream synchronisation (end to end, kernel "
             "included); `graph+sync`: one launch captured in a CUDA graph, replayed, synchronised; `launch`: "
             "back-to-back launches, one synchronisation per round (throughput); `host`: `_host` (pinned staging, "
             "one copy each way, wait): host arrays in and out", ""]
    rows = sorted(res["rows"], key=lambda r: (r["robot"], r["kernel"], int(r["n"])))
    cur = None
    for r in rows:
        if (r["robot"], r["kernel"]) != cur:
            cur = (r["robot"], r["kernel"])
            lines += ["", f"## {r['robot']} {r['kernel']}", "",
                      "| N | launch+sync µs | graph+sync µs | launch µs | host µs | workspace bytes |",
                      "|---:|---:|---:|---:|---:|---:|"]
        lines.append(f"| {r['n']} | {r.get('launch_sync_us', float('nan')):.2f} | {r.get('graph_sync_us', float('nan')):.2f} "
                     f"| {r.get('launch_us', float('nan')):.2f} | {r.get('host_us', float('nan')):.2f} | {r.get('workspace_bytes', '')} |")
    return "\n".join(lines) + "\n"


# ---- command line ---------------------------------------------------------------------------------

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("prepare", "dry", "pack"):
        s = sub.add_parser(name)
        s.add_argument("--cases", help="robot case ids, comma-separated (default: every case)")
        s.add_argument("--kernels", help="only these kernels in every build (a small plan, for tests)")
        s.add_argument("--parts", default="tests,interop,bench,seeds")
        s.add_argument("--prep", type=Path, default=PREP, help="the work folder (compile cache)")
        s.add_argument("--carry", type=Path, default=CARRY, help="the folder that travels")
    s = sub.add_parser("run")
    s.add_argument("--out", default=os.environ.get("OUT"), help="where packed results go (the device tool's $OUT)")
    s.add_argument("--steps", help="the steps to run (default: the part's: every step in part 1, setup and tests after)")
    s.add_argument("--workers", type=int, default=12, help="pytest workers of the tests step")
    s.add_argument("--scale", type=float, default=1.0, help="multiply every step's time limit")
    s.add_argument("--carry", type=Path, default=CARRY / "part1", help="the carried part (its folder)")
    s.add_argument("--results", type=Path, help="write results here, not to benchmarks/results/ (a rehearsal)")
    s.add_argument("--no-cpu-builds", action="store_true", help="no CPU builds in the background (a rehearsal)")
    s.add_argument("--as-if-gpus", help="a rehearsal without a GPU: build as for these GPUs (e.g. 90)")
    s = sub.add_parser("find")
    s.add_argument("--jobs", type=int, default=8)
    s.add_argument("--manifest", help="a carried part's manifest.json (default: the whole plan)")
    sub.add_parser("cpu-builds")
    s = sub.add_parser("launch-bench")
    s.add_argument("--exe", required=True)
    s.add_argument("--json", required=True)
    s.add_argument("--min-ms", type=float, default=4.0)
    s.add_argument("--timeout", type=float, default=120)
    args = p.parse_args(argv)

    if args.cmd == "run":
        _install_rbdgen()
        return Run(args)()
    if args.cmd == "find":
        return cmd_find(args)
    if args.cmd == "cpu-builds":
        return cmd_cpu_builds(args)
    if args.cmd == "launch-bench":
        return cmd_launch_bench(args)

    # here, builds with no arch are made as on the GPU machine, where rbdgen.build takes the GPUs it
    # finds: sm_<ARCH>, machine code only (rbdgen.targets.cuda.nvcc.builds_for_found_gpus)
    from rbdgen.targets.cuda.nvcc import detect_archs

    detect_archs.cache_clear()
    try:
        with _env(**{GPUS_ENV: ARCH}):
            return here(args)
    finally:
        detect_archs.cache_clear()


def here(args) -> int:
    """prepare and dry, on the build machine."""
    cases = args.cases.split(",") if args.cases else None
    kernels = tuple(args.kernels.split(",")) if args.kernels else None
    builds = plan(cases, kernels, tuple(args.parts.split(",")))
    cache, work = args.prep / "kernels", args.prep / "chains"
    nvcc, version = _nvcc_version()
    if args.cmd == "prepare":
        t0 = time.perf_counter()
        manifest = prepare(builds, cache, work, args.prep / "manifest.json")
        manifest.update(nvcc=nvcc, nvcc_version=version, prepare_s=round(time.perf_counter() - t0, 1))
        (args.prep / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    if args.cmd in ("prepare", "pack"):
        manifest = json.loads((args.prep / "manifest.json").read_text())
        sizes = pack(manifest, cache, args.carry, version)
        manifest.update(sizes)
        (args.prep / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        log(f"packed {len(manifest['builds'])} builds ({sizes['libraries_bytes'] / 2**20:.1f} MiB of libraries) in "
            f"{len(sizes['parts'])} part(s): "
            + ", ".join(f"part{p['part']} {p['bytes'] / 2**20:.1f} MiB" for p in sizes["parts"]))
    return dry(builds, cache, work, args.carry)


if __name__ == "__main__":
    sys.exit(main())
