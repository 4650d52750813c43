"""rbdgen benchmarks, the strongest CPU peer: Pinocchio + CppADCodeGen (issue 49).

Users who need Pinocchio fast code-generate it: Pinocchio's algorithms recorded on CppAD's
``AD<CG<double>>`` scalars, the tape written as C by CppADCodeGen, compiled. This module does that
for the robots of the benchmark, from PyPI wheels only (the pin wheel's headers and libraries,
``cmeel-cppad``, ``cmeel-cppadcodegen``), in three cached steps:

1. the generator, ``benchmarks/pinocchio_codegen.cpp``: compiled once (~5 min, ~7 GB of memory:
   Pinocchio instantiated on CppAD's scalar types) and cached as
   ``.build/pinocchio_codegen-<hash>`` (source, command, compiler, pin and CppAD(CG) versions);
2. per robot and kernel, the generator's C source (it takes well under a second) compiled with
   ``gcc -O3 -march=native -fno-math-errno -fPIC`` (each file of a kernel in parallel, one per
   core) into ``libpeer_<kernel>.so``, cached under ``.build/codegen/<hash>/``, the hash of the
   URDF, the base, the generator, the compiler and the flags. A kernel whose compile does not end
   within ``timeout_s`` is given up: the reason (what was measured) is cached and reported, and
   its cells stay empty;
3. per run, a small harness (written here, linked to the libraries) that times the generated
   ``<kernel>_forward_zero`` itself on packed inputs, over the same 256 states and with the same
   method as rbdgen's C++ driver (measure.py), and writes every output for the agreement check.

``agreement`` then compares, at the same states, the peer's outputs with rbdgen's kernels and with
the NumPy reference. crba and aba are generated in both of Pinocchio's conventions (LOCAL, the
default of ``pin::crba``/``pin::aba``; WORLD, the one of Pinocchio's ``CodeGenCRBA``/``CodeGenABA``)
and the faster one is the peer's figure.
"""
from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import measure
from measure import BUILD, CMEEL, HERE, log
from peers import PIN_DEFINES, PIN_LIBS, pin_version
from rbdgen import registry
from rbdgen.toolchain.compiler import compiler_version, native_target

#: the wheels the peer is built from, at the versions issue 49 measured (the Makefile's bench
#: target installs the same pins; pin itself comes with the test extra)
CG_WHEELS = {"cmeel-cppad": "20250000.2", "cmeel-cppadcodegen": "2.4.3"}
#: rbdgen kernel → the peer's functions for it (pinocchio_codegen.cpp's names; several: conventions)
CG_KERNELS = {
    "rnea": ("rnea",), "nle": ("nle",), "gravity": ("gravity",), "crba": ("crba", "crba_world"),
    "aba": ("aba", "aba_world"), "minv": ("minv",), "rnea_derivatives": ("rnea_derivatives",),
    "aba_derivatives": ("aba_derivatives",), "forward_kinematics": ("forward_kinematics",),
}
CONVENTION = {"crba": "LOCAL", "crba_world": "WORLD", "aba": "LOCAL", "aba_world": "WORLD"}
#: how the generated C is compiled: rbdgen's default build's optimisation and scalar-math flags
CG_CFLAGS = ["-O3", "-march=native", "-fno-math-errno", "-fPIC"]
#: the generator only records tapes and prints C (under a second per robot): -O1 is plenty
GEN_OPT = ["-std=c++17", "-O1", "-DNDEBUG", "-w"]
#: a kernel whose compile takes longer than this is left out (its reason reported)
DEFAULT_TIMEOUT_S = 600.0
#: agreement threshold (relative to the output's largest magnitude, at least 1)
AGREE_TOL = 1e-9


def cc_path() -> str:
    return shutil.which("gcc") or shutil.which("cc") or "cc"


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version
    out = {"pin": pin_version()}
    for name in CG_WHEELS:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def ensure_codegen_wheels() -> str | None:
    """cmeel-cppad and cmeel-cppadcodegen at CG_WHEELS's versions: installed when missing or
    different. Returns why the peer cannot be built, or None."""
    have = versions()
    need = [f"{n}=={v}" for n, v in CG_WHEELS.items() if have.get(n) != v]
    if need:
        log(f"installing {' '.join(need)} (the Pinocchio + CppADCodeGen peer)")
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *need], capture_output=True, text=True)
        if r.returncode != 0:
            return f"pip install {' '.join(need)} failed: {(r.stderr or r.stdout).strip()[-300:]}"
    if not (CMEEL / "include/cppad/cg.hpp").exists() or not (CMEEL / "include/pinocchio/codegen/cppadcg-algo.hpp").exists():
        return "cppad/cg.hpp or pinocchio/codegen/cppadcg-algo.hpp not found under cmeel.prefix/include"
    return None


# ---- 1. the generator -------------------------------------------------------------------------

def generator_command(cxx: str, out: Path) -> list[str]:
    inc = CMEEL / "include"
    return [cxx, *GEN_OPT, *PIN_DEFINES, f"-I{inc}", f"-I{inc / 'eigen3'}", f"-I{inc / 'urdfdom_headers'}",
            f"-I{inc / 'urdfdom'}", str(HERE / "pinocchio_codegen.cpp"), "-o", str(out), f"-L{CMEEL / 'lib'}",
            f"-Wl,-rpath,{CMEEL / 'lib'}", *PIN_LIBS]


def build_generator(cxx: str) -> dict:
    """Compile benchmarks/pinocchio_codegen.cpp once; cached by source, command and versions."""
    cmd = generator_command(cxx, Path("OUT"))
    h = hashlib.sha256((HERE / "pinocchio_codegen.cpp").read_bytes())
    h.update(" ".join(cmd).encode() + compiler_version(cxx).encode() + json.dumps(versions(), sort_keys=True).encode())
    key = h.hexdigest()[:16]
    exe = BUILD / f"pinocchio_codegen-{key}"
    meta = BUILD / f"pinocchio_codegen-{key}.json"
    info = {"binary": str(exe.relative_to(HERE.parent)), "key": key, "versions": versions(),
            "command": " ".join(cmd).replace(str(CMEEL), "$CMEEL").replace(str(HERE.parent) + "/", "")}
    if exe.exists() and meta.exists():
        info.update(json.loads(meta.read_text()), cached=True)
        log(f"Pinocchio + CppADCodeGen generator: cached {exe.name} (compiled in {info.get('compile_s', '?')} s when built)")
        return info
    BUILD.mkdir(parents=True, exist_ok=True)
    tmp = exe.with_name(exe.name + f".tmp{os.getpid()}")
    log("Pinocchio + CppADCodeGen generator: compiling benchmarks/pinocchio_codegen.cpp (one-off, ~5 min, "
        "~7 GB of memory)")
    t = time.perf_counter()
    r = subprocess.run(generator_command(cxx, tmp), capture_output=True, text=True)
    dt = round(time.perf_counter() - t, 1)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError("compiling pinocchio_codegen.cpp failed:\n" + (r.stderr or r.stdout)[-3000:])
    os.replace(tmp, exe)
    meta.write_text(json.dumps({"compile_s": dt}))
    log(f"Pinocchio + CppADCodeGen generator: compiled in {dt} s")
    info.update(compile_s=dt, cached=False)
    return info


# ---- 2. per robot: sources and libraries ------------------------------------------------------

def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _compile_kernel(cc: str, src: Path, lib: Path, timeout_s: float, jobs: int) -> dict:
    """gcc every <kernel>_forward_zero*.c of ``src`` (``jobs`` at a time) and link them into ``lib``.
    Returns {"compile_s", "cpu_s", "files", "source_bytes"} or {"skipped": why} past timeout_s."""
    name = src.name
    files = sorted(src.glob(f"{name}_forward_zero*.c"))
    nbytes = sum(f.stat().st_size for f in files)
    objs = [lib.parent / f"{f.stem}.{os.getpid()}.o" for f in files]
    t0, c0 = time.perf_counter(), _cpu_children()
    pending = list(zip(files, objs))
    running: list[tuple[subprocess.Popen, Path]] = []
    try:
        while pending or running:
            while pending and len(running) < jobs:
                f, o = pending.pop(0)
                running.append((subprocess.Popen([cc, *CG_CFLAGS, "-c", str(f), "-o", str(o)], stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT, text=True), f))
            for p, f in list(running):
                if p.poll() is not None:
                    running.remove((p, f))
                    if p.returncode != 0:
                        return {"skipped": f"gcc {f.name} failed: {p.stdout.read()[-600:]}", "source_bytes": nbytes}
            if time.perf_counter() - t0 > timeout_s:
                done = len(files) - len(pending) - len(running)
                return {"skipped": f"gcc {' '.join(CG_CFLAGS)} had not finished after {time.perf_counter() - t0:.0f} s "
                                   f"(limit {timeout_s:.0f} s; {done} of {len(files)} source files done, "
                                   f"{nbytes / 1e6:.1f} MB of C)", "source_bytes": nbytes}
            time.sleep(0.05)
        tmp = lib.with_name(lib.name + f".tmp{os.getpid()}")
        r = subprocess.run([cc, "-shared", "-o", str(tmp), *map(str, objs), "-lm"], capture_output=True, text=True)
        if r.returncode != 0:
            tmp.unlink(missing_ok=True)
            return {"skipped": f"linking {lib.name} failed: {r.stderr[-600:]}", "source_bytes": nbytes}
        os.replace(tmp, lib)  # atomic: another run may be reading the cache
    finally:
        for p, _ in running:
            p.kill()
            p.wait()
        for o in objs:
            o.unlink(missing_ok=True)
    return {"compile_s": round(time.perf_counter() - t0, 2), "cpu_s": round(_cpu_children() - c0, 2),
            "files": len(files), "source_bytes": nbytes}


def peer_dir(gen_key: str, urdf: Path, floating: bool) -> Path:
    """The cache folder of a robot's peer libraries: the URDF, the base, the generator, the
    compiler, the flags and what -march=native means here."""
    cc = cc_path()
    h = hashlib.sha256(Path(urdf).read_bytes())
    h.update(f"{floating} {gen_key} {' '.join(CG_CFLAGS)} {compiler_version(cc)} {native_target(cc)}".encode())
    return BUILD / "codegen" / h.hexdigest()[:16]


def build_peer(gen: dict, cxx: str, urdf: Path, floating: bool, kernels, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """The peer's library for each of ``kernels`` (rbdgen names; those without a peer function are
    left out) on this robot: {"dir", "kernels": {peer function: build info}}. Cached per function
    (a timed-out compile too, with its reason: remove the folder to try again)."""
    cc = cc_path()
    folder = peer_dir(gen["key"], urdf, floating)
    folder.mkdir(parents=True, exist_ok=True)
    funcs = [f for k in kernels for f in CG_KERNELS.get(k, ())]
    out = {"dir": str(folder), "cc": compiler_version(cc).splitlines()[0], "cflags": " ".join(CG_CFLAGS),
           "timeout_s": timeout_s, "kernels": {}}
    todo = [f for f in funcs if not (folder / f"{f}.json").exists()]
    if todo:
        src = folder / f"src-{os.getpid()}"
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir()
        t = time.perf_counter()
        r = subprocess.run([str(HERE.parent / gen["binary"]), str(urdf), "floating" if floating else "fixed", str(src),
                            ",".join(todo)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"pinocchio_codegen failed ({r.returncode}): {(r.stderr or r.stdout)[-1500:]}")
        generated = json.loads(r.stdout)
        log(f"codegen peer: {len(todo)} tapes recorded and written as C in {time.perf_counter() - t:.1f} s")
        for f in todo:
            g = generated["kernels"][f]
            log(f"codegen peer: compiling {f} ({g['tape_ops']} tape operations) …")
            lib = folder / f"libpeer_{f}.so"
            load = measure.loadavg()
            b = _compile_kernel(cc, src / f, lib, timeout_s, jobs=max(1, os.cpu_count() or 1))
            info = dict(g, **b, nq=generated["nq"], nv=generated["nv"], built=time.strftime("%Y-%m-%d %H:%M"),
                        load_average=load)
            if "skipped" in info:
                log(f"codegen peer: {f} left out: {info['skipped']}")
            else:
                log(f"codegen peer: {f} compiled in {info['compile_s']} s ({info['source_bytes'] / 1e3:.0f} kB of C, "
                    f"{info['files']} file(s))")
            tmp = folder / f"{f}.json.tmp{os.getpid()}"
            tmp.write_text(json.dumps(info))
            os.replace(tmp, folder / f"{f}.json")  # after the library: the JSON says it is there
        shutil.rmtree(src, ignore_errors=True)
    for f in funcs:
        info = json.loads((folder / f"{f}.json").read_text())
        info["cached"] = f not in todo
        out["kernels"][f] = info
    return out


# ---- 3. the harness ---------------------------------------------------------------------------

HARNESS = r"""// generated by benchmarks/codegen_peer.py: times Pinocchio + CppADCodeGen's generated functions
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <vector>
struct Array;
struct LangCAtomicFun {{
  void* libModel;
  int (*forward)(void*, int, int, int, const Array*, Array*);
  int (*reverse)(void*, int, int, const Array*, Array*, const Array*);
}};
extern "C" {{
{decls}
}}
{timing}struct Kernel {{ const char* name; void (*fn)(double const* const*, double* const*, LangCAtomicFun); int n_in, n_out; }};
int main(int argc, char** argv) {{
  // argv: inputs.bin outputs.bin pool runs target_ms
  if (argc < 6) return 2;
  const int pool = std::atoi(argv[3]), runs = std::atoi(argv[4]);
  const double target_ms = std::atof(argv[5]);
  const std::vector<Kernel> kernels = {{
{table}
  }};
  FILE* f = std::fopen(argv[1], "rb");
  if (!f) return 3;
  std::vector<std::vector<double>> X(kernels.size()), Y(kernels.size());
  for (size_t k = 0; k < kernels.size(); ++k) {{
    X[k].resize((size_t)pool * kernels[k].n_in);
    if (std::fread(X[k].data(), sizeof(double), X[k].size(), f) != X[k].size()) return 3;
    Y[k].assign((size_t)pool * kernels[k].n_out, 0.0);
  }}
  std::fclose(f);
  const LangCAtomicFun none = {{nullptr, nullptr, nullptr}};
  std::printf("{{");
  for (size_t k = 0; k < kernels.size(); ++k) {{
    const Kernel& K = kernels[k];
    std::vector<double> out(K.n_out);
    double* o[1] = {{out.data()}};
    std::vector<double> cpu, wall;
    time_per_call([&](int i) {{
      const double* in[1] = {{X[k].data() + (size_t)i * K.n_in}};
      K.fn(in, o, none);
    }}, pool, runs, target_ms, cpu, wall);
    for (int i = 0; i < pool; ++i) {{  // every state's outputs, for the agreement check
      const double* in[1] = {{X[k].data() + (size_t)i * K.n_in}};
      double* oi[1] = {{Y[k].data() + (size_t)i * K.n_out}};
      K.fn(in, oi, none);
    }}
    std::printf("%s\"%s\": {{\"median\": %.2f, \"min\": %.2f, \"clock\": \"cpu\", \"wall_median\": %.2f, \"runs\": ",
                k ? ", " : "", K.name, median(cpu), *std::min_element(cpu.begin(), cpu.end()), median(wall));
    print_list(cpu);
    std::printf(", \"wall_runs\": ");
    print_list(wall);
    std::printf("}}");
  }}
  std::printf("}}\n");
  f = std::fopen(argv[2], "wb");
  if (!f) return 4;
  for (size_t k = 0; k < kernels.size(); ++k) std::fwrite(Y[k].data(), sizeof(double), Y[k].size(), f);
  std::fclose(f);
  return 0;
}}
"""


def _peer_inputs(func: str) -> tuple:
    """The rbdgen kernel a peer function stands for, and its inputs (packed in this order)."""
    k = next(k for k, fs in CG_KERNELS.items() if func in fs)
    return k, registry.get(k).input_names


def build_harness(cxx: str, peer: dict, work: Path) -> tuple[Path, list] | None:
    """The timing harness for the peer's built functions, in ``work``: (executable, functions)."""
    funcs = [(f, info) for f, info in peer["kernels"].items() if "skipped" not in info]
    if not funcs:
        return None
    decls = "\n".join(f"void {f}_forward_zero(double const* const*, double* const*, LangCAtomicFun);" for f, _ in funcs)
    table = "\n".join(f'    {{"{f}", {f}_forward_zero, {i["n_in"]}, {i["n_out"]}}},' for f, i in funcs)
    src = work / "codegen_harness.cpp"
    src.write_text(HARNESS.format(timing=measure.TIMING_CPP, decls=decls, table=table))
    exe = work / "codegen_harness"
    folder = Path(peer["dir"])
    cmd = [cxx, "-std=c++17", "-O2", str(src), "-o", str(exe), f"-L{folder}",
           *[f"-l:libpeer_{f}.so" for f, _ in funcs], f"-Wl,-rpath,{folder}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("compiling the codegen harness failed:\n" + (r.stderr or r.stdout)[-2000:])
    return exe, [f for f, _ in funcs]


def write_inputs(pool: dict, funcs: list, path: Path) -> None:
    """Each function's packed inputs for every state of the pool, one function after another."""
    with open(path, "wb") as fh:
        for f in funcs:
            _, names = _peer_inputs(f)
            X = np.concatenate([np.asarray(pool[n], dtype=np.float64).reshape(len(pool["q"]), -1) for n in names], axis=1)
            fh.write(np.ascontiguousarray(X).tobytes())


def run_harness(exe: Path, inputs: Path, outputs: Path, quick: bool, npool: int = 256) -> dict:
    r = subprocess.run([str(exe), str(inputs), str(outputs), str(npool), "3" if quick else "7", "10" if quick else "40"],
                       capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if r.returncode != 0:
        raise RuntimeError(f"the codegen harness failed ({r.returncode}): {(r.stderr or r.stdout)[-1000:]}")
    return json.loads(r.stdout)


def read_outputs(peer: dict, funcs: list, path: Path, npool: int = 256) -> dict:
    data = np.fromfile(path, dtype=np.float64)
    out, at = {}, 0
    for f in funcs:
        n = peer["kernels"][f]["n_out"]
        out[f] = data[at:at + npool * n].reshape(npool, n)
        at += npool * n
    return out


# ---- agreement --------------------------------------------------------------------------------

def as_rbdgen(func: str, y: np.ndarray, nv: int) -> list[np.ndarray]:
    """The peer's outputs (N, n_out) as rbdgen's kernel returns them, one array per output."""
    k, _ = _peer_inputs(func)
    N = y.shape[0]
    if k in ("crba", "minv"):  # upper triangle, row by row → the full symmetric matrix
        M = np.zeros((N, nv, nv))
        iu = np.triu_indices(nv)
        M[:, iu[0], iu[1]] = y
        return [M + np.triu(M, 1).transpose(0, 2, 1)]
    if k in ("rnea_derivatives", "aba_derivatives"):
        return [m.reshape(N, nv, nv) for m in np.split(y, y.shape[1] // (nv * nv), axis=1)]
    if k == "forward_kinematics":  # 3×4 per body; rbdgen adds the constant row
        T = np.zeros((N, y.shape[1] // 12, 4, 4))
        T[:, :, :3, :] = y.reshape(N, -1, 3, 4)
        T[:, :, 3, 3] = 1.0
        return [T]
    return [y]


def _rel_err(a: np.ndarray, b: np.ndarray) -> float:
    """max |a − b| over one state's output, relative to that output's largest |b| (at least 1),
    the worst state."""
    a = a.reshape(a.shape[0], -1)
    b = b.reshape(b.shape[0], -1)
    scale = np.maximum(1.0, np.abs(b).max(axis=1))
    return float((np.abs(a - b).max(axis=1) / scale).max())


def agreement(model, kern, pool: dict, outputs: dict, n_reference: int = 4) -> dict:
    """Per peer function: max relative error against rbdgen's kernel (``kern``, every state of the
    pool) and against the NumPy reference (the first ``n_reference`` states)."""
    res = {}
    for f, y in outputs.items():
        k, names = _peer_inputs(f)
        mine = as_rbdgen(f, y, model.nv)
        ins = [np.ascontiguousarray(pool[n]) for n in names]
        ours = kern.kernel(k)(*ins)
        ours = list(ours) if isinstance(ours, tuple) else [ours]
        e_ours = max(_rel_err(m, np.asarray(o)) for m, o in zip(mine, ours))
        ref = registry.get(k).reference
        e_ref = 0.0
        for i in range(min(n_reference, y.shape[0])):
            r = ref(model, *[x[i] for x in ins])
            r = list(r) if isinstance(r, tuple) else [r]
            e_ref = max(e_ref, max(_rel_err(m[i:i + 1], np.asarray(o)[None]) for m, o in zip(mine, r)))
        res[f] = {"max_rel_err_vs_rbdgen": e_ours, "max_rel_err_vs_reference": e_ref,
                  "states_vs_rbdgen": int(y.shape[0]), "states_vs_reference": min(n_reference, y.shape[0]),
                  "ok": bool(e_ours <= AGREE_TOL and e_ref <= AGREE_TOL)}
    return res


def summarise(peer: dict, rounds: list, agree: dict) -> dict:
    """A robot's codegen results: per rbdgen kernel the faster of the peer's functions for it
    (a convention), the per-function cells, builds and agreement."""
    cells = measure.best_round(rounds) if rounds else {}
    per_kernel, conv = {}, {}
    for k, fs in CG_KERNELS.items():
        have = [f for f in fs if f in cells]
        if have:
            best = min(have, key=lambda f: cells[f]["median"])
            per_kernel[k] = dict(cells[best], function=best)
            conv[k] = CONVENTION.get(best)
    skipped = {f: i["skipped"] for f, i in peer["kernels"].items() if "skipped" in i}
    return {"ns_per_call": per_kernel, "functions": cells, "conventions": {k: v for k, v in conv.items() if v},
            "build": {f: {x: i.get(x) for x in ("compile_s", "cpu_s", "files", "source_bytes", "tape_ops", "record_s",
                                                  "source_s", "cached", "built", "load_average", "skipped")}
                      for f, i in peer["kernels"].items()},
            "skipped": skipped, "agreement": agree, "cflags": peer["cflags"], "cc": peer["cc"],
            "timeout_s": peer["timeout_s"], "rounds": len(rounds)}
