#!/usr/bin/env python3
"""Where one state of a big kernel (default: the iiwa's ∇FD) spends its time (issue 49, item 2).

    python benchmarks/fd_profile.py [--robot iiwa14] [--kernel aba_derivatives] [--rounds 3]

Not part of `make bench`. No profiler is needed (perf is not available on the VM): the kernel's
generated sources (rbdgen.targets.cpu.generate_cpu, as `rbdgen.build` compiles them) are built
here several times, each time with one thing changed, and timed one state at a time from C++
(the method of `make bench`'s driver: a pool of 256 states, runs of 40 ms, thread CPU time,
median; the variants take turns, best round):

- ``as built``: what ``rbdgen.build`` does (the straight-line parts at ``-Os``, the driver and
  the looped product at ``-O3``);
- ``parts -O3``: the parts at ``-O3`` too;
- ``no trig``: every ``rbd_sincos4`` replaced by two multiplies per angle (same data flow);
- ``no epilogue``: the looped products (−M⁻¹·∂τ/∂q, −M⁻¹·∂τ/∂v) removed: their cost is the
  difference;
- ``one function -O3`` / ``-O2``: the parts inlined into the kernel's own source (one function:
  the scratch array between the parts a local the compiler may keep in registers);
- ``parts scheduled``: the parts with ``-fschedule-insns -fsched-pressure`` (GCC's pre-allocation
  scheduler, off by default on x86: reordering the straight-line code);
- ``no AVX-512``: the same sources with ``-mno-avx512f`` (VEX encodings, 16 vector registers);
- ``N parts of ≤ S`` (``not split``): the kernel generated with ``part_size=S`` statements per part instead of
  600 (fewer parts: fewer values passed through the scratch array), as built otherwise;
- and, when benchmarks/.build/ has it, the Pinocchio + CppADCodeGen peer's library for the same
  kernel (benchmarks/codegen_peer.py), timed the same way.

Static counts next to the times: the op counts of the generated code, its statements, its
scratch traffic (``w[...]`` stores and loads between the parts), and, from ``objdump -d`` of each
variant's shared library, the machine instructions of the double instantiation by class
(multiplies, FMAs, adds, loads, stores, other), against the peer's. The multiply bound of
`make bench` (every multiply takes a multiply/FMA slot: multiplies ÷ the scalar multiply rate of
benchmarks/peak.cpp) is printed for each. Writes a JSON object to --out (default
benchmarks/.build/fd_profile.json) and a table on stdout.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import measure  # noqa: F401  (environment first)
from measure import BUILD, FRAMES, ROBOTS, best_round, log, peak_rate, states

import numpy as np

import rbdgen
from rbdgen.targets.cpu import DEFAULT_OPT, LARGE_OPT, NO_SLP, generate_cpu
from rbdgen.toolchain.compiler import cxx_flags, find_cxx, resolve_march

FAKE_TRIG = r"""
// fd_profile.py: sine and cosine stubbed out (two multiplies per angle, the same data flow)
template <typename S>
static inline void rbd_fake_sincos4(S a, S b, S c, S d, S& sa, S& ca, S& sb, S& cb, S& sc, S& cc, S& sd, S& cd) {
  sa = a * 0.5; ca = a * 0.25; sb = b * 0.5; cb = b * 0.25; sc = c * 0.5; cc = c * 0.25; sd = d * 0.5; cd = d * 0.25;
}
"""

DRIVER = r"""
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>
extern "C" void {fn}(const double*, const double*, const double*, double*, double*, double*);
static double cpu_ns() {{ timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec * 1e9 + t.tv_nsec; }}
int main(int argc, char** argv) {{
  const int pool = 256, nq = {nq}, nv = {nv}, no = {nout};
  std::vector<double> buf((size_t)pool * (nq + 2 * nv));
  FILE* f = std::fopen(argv[1], "rb");
  if (!f || std::fread(buf.data(), 8, buf.size(), f) != buf.size()) return 3;
  const double *Q = buf.data(), *V = Q + (size_t)pool * nq, *T = V + (size_t)pool * nv;
  std::vector<double> o1(3 * no), o2(no), o3(no);  // o1: room for the peer's three outputs, packed
  auto pass = [&]() {{ for (int i = 0; i < pool; ++i) {fn}(Q + i * nq, V + i * nv, T + i * nv, o1.data(), o2.data(), o3.data()); }};
  pass();
  double c0 = cpu_ns(); pass(); double one = cpu_ns() - c0;
  long passes = std::max(1L, (long)(40e6 / one));
  std::vector<double> runs;
  for (int r = 0; r < 7; ++r) {{ c0 = cpu_ns(); for (long p = 0; p < passes; ++p) pass(); runs.push_back((cpu_ns() - c0) / (passes * pool)); }}
  std::vector<double> s = runs; std::sort(s.begin(), s.end());
  std::printf("{{\"median\": %.2f, \"min\": %.2f, \"runs\": [", s[3], s[0]);
  for (int r = 0; r < 7; ++r) std::printf("%s%.2f", r ? ", " : "", runs[r]);
  std::printf("]}}\n");
  return 0;
}}
"""

PEER_WRAP = r"""
struct Array;
struct LangCAtomicFun {{ void* a; void* b; void* c; }};
void {k}_forward_zero(double const* const*, double* const*, struct LangCAtomicFun);
/* the peer's function on rbdgen's argument list: inputs packed as the tape wants them (a few ns),
   its three outputs packed into o1 */
void peer_{k}(const double* q, const double* v, const double* t, double* o1, double* o2, double* o3) {{
  double x[{nin}];
  for (int i = 0; i < {nq}; ++i) x[i] = q[i];
  for (int i = 0; i < {nv}; ++i) {{ x[{nq} + i] = v[i]; x[{nq} + {nv} + i] = t[i]; }}
  const double* in[1] = {{x}};
  double* out[1] = {{o1}};
  struct LangCAtomicFun none = {{0, 0, 0}};
  {k}_forward_zero(in, out, none);
  (void)o2; (void)o3;
}}
"""


def insn_classes(lib: Path, func_re: str) -> Counter:
    """Machine instructions of the functions whose (demangled) names match ``func_re``, by class:
    multiplies, FMAs, adds/subtracts (scalar or packed double), other non-moves; loads (any memory
    operand read: ``load_const`` the RIP-relative ones, i.e. the constants), stores; and
    ``bytes_<class>`` their encoded bytes (``bytes`` all of them)."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", str(lib)], capture_output=True, text=True).stdout
    c, inside, prev = Counter(), False, None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            inside = re.search(func_re, m.group(1)) is not None and "__vector" not in m.group(1)
            prev = None
            continue
        m = re.match(r"^\s*([0-9a-f]+):\t(.*)$", line)
        if not inside or not m:
            continue
        addr, ins = int(m.group(1), 16), m.group(2).strip()
        if prev is not None:  # the previous instruction's length: up to this one
            c["bytes"] += addr - prev[0]
            for k in prev[1]:
                c["bytes_" + k] += addr - prev[0]
        op, _, args = ins.partition(" ")
        args = args.strip()
        kinds = []
        if op.startswith(("vfmadd", "vfmsub", "vfnmadd", "vfnmsub")):
            kinds.append("fma")
        elif op.startswith(("vmul", "mul")) and op.endswith(("sd", "pd")):
            kinds.append("mul")
        elif op.startswith(("vadd", "vsub", "add", "sub")) and op.endswith(("sd", "pd")):
            kinds.append("add")
        elif not op.startswith(("vmov", "mov")):
            kinds.append("other")
        if "(" in args and op != "lea" and not op.startswith(("nop", "call", "jmp")):
            # AT&T syntax, destination last: a move to memory is a store; any other memory operand a load
            if op.startswith(("vmov", "mov")) and args.endswith(")"):
                kinds.append("store")
            else:
                kinds.append("load_const" if "(%rip)" in args else "load")
        for k in kinds:
            c[k] += 1
        c["total"] += 1
        prev = (addr, kinds)
    return c


def code_bytes(lib: Path, func_re: str) -> int:
    """Bytes of machine code of the functions whose (demangled) names match ``func_re``."""
    out = subprocess.run(["nm", "-S", "-C", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    total = 0
    for line in out.splitlines():
        f = line.split(maxsplit=3)
        if len(f) == 4 and f[2] in "tTwW" and re.search(func_re, f[3]) and "__vector" not in f[3]:
            total += int(f[1], 16)
    return total


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--robot", default="iiwa14")
    p.add_argument("--kernel", default="aba_derivatives")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=str(BUILD / "fd_profile.json"))
    args = p.parse_args(argv)
    if args.kernel != "aba_derivatives":
        p.error("only aba_derivatives for now (the driver passes q, v, tau and three nv×nv outputs)")
    cxx = find_cxx()
    path_fn, floating, _ = ROBOTS[args.robot]
    urdf = path_fn()
    model = rbdgen.load_urdf(urdf, floating_base=floating).with_frames(FRAMES[args.robot])
    gen = generate_cpu(model, dtypes=("float64",), kernels=(args.kernel,), python=False)
    pk = gen.kernels[args.kernel]
    src_main = next(f for f in gen.sources["float64"] if "parts" not in f)
    parts = list(gen.large["float64"])
    looped = set(gen.looped["float64"])
    flags = cxx_flags(opt=DEFAULT_OPT, march=resolve_march(None))
    work = Path(tempfile.mkdtemp(prefix="rbdgen-fdprof-"))
    res = {"robot": args.robot, "kernel": args.kernel, "counts": pk.counts, "flags": " ".join(flags), "variants": {}}
    try:
        # scratch traffic between the parts: every w[...] written and read in the parts' sources
        body = "".join(gen.files[f] for f in parts) + gen.files[src_main]
        res["statements"] = sum(len(re.findall(r"^\s+const S t\d+ = ", gen.files[f], re.M)) for f in parts)
        res["scratch_stores"] = len(re.findall(r"\bw\[\d+\] = ", body))
        # scratch slots each part reads (each at least one load), summed over the parts
        reads = 0
        for f in parts:
            for fn_body in re.split(r"\n}\n", gen.files[f]):
                stored = set(re.findall(r"\bw\[(\d+)\] = ", fn_body))
                used = set(re.findall(r"\bw\[(\d+)\](?! = )", fn_body))
                reads += len(used - stored)
        res["scratch_loads"] = reads
        res["output_values"] = 3 * model.nv * model.nv

        def build(name, files, src_flags, sources=None):
            d = work / name
            d.mkdir()
            for fn, text in files.items():
                (d / fn).write_text(text)
            objs = []
            for fn in sources or [src_main, *parts]:
                fl = src_flags.get(fn, flags)
                o = d / (fn + ".o")
                r = subprocess.run([cxx, *fl, "-c", str(d / fn), "-o", str(o)], capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError(f"{name}: {fn}: {r.stderr[-1500:]}")
                objs.append(str(o))
            lib = d / "libk.so"
            r = subprocess.run([cxx, "-shared", "-fopenmp", "-o", str(lib), *objs], capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(r.stderr[-1500:])
            return lib

        base_flags = {f: [LARGE_OPT if x == DEFAULT_OPT else x for x in flags] for f in parts}
        for f in looped:
            base_flags[f] = [x for x in flags if x != NO_SLP]
        o3_flags = {f: [x for x in flags if x != NO_SLP] for f in looped}
        files = dict(gen.files)
        variants = {"as built": (files, base_flags), "parts -O3": (files, o3_flags)}
        fake = {fn: (t.replace("rbd_sincos4(", "rbd_fake_sincos4(").replace("namespace " + gen.prefix + "_f64 {",
                                                                           "namespace " + gen.prefix + "_f64 {" + FAKE_TRIG, 1)
                     if fn in parts else t) for fn, t in files.items()}
        variants["no trig"] = (fake, base_flags)
        m = re.search(r"\n  // ---- dqdd_dq = .*?\n}\n", files[src_main], re.S)
        if m:
            variants["no epilogue"] = ({**files, src_main: files[src_main][:m.start()] + "\n}\n" + files[src_main][m.end():]},
                                       base_flags)
        # the parts inlined into the kernel (one translation unit, one function: the scratch array a
        # local the compiler may keep in registers), at -O3 and at -O2, without SLP as the parts
        one = {**{fn: re.sub(r"^template void \w+<(double|vec_t)>\(.*\);$", "",
                             t.replace("noinline)) void", "always_inline)) inline void"), flags=re.M)
                  for fn, t in files.items() if fn in parts},
               src_main: files[src_main] + "".join(f'\n#include "{f}"\n' for f in parts)}
        one = {**files, **one}
        variants["one function -O3"] = (one, {src_main: flags}, [src_main])
        variants["one function -O2"] = (one, {src_main: ["-O2" if x == DEFAULT_OPT else x for x in flags]}, [src_main])
        # GCC's first instruction scheduler (off by default on x86), register-pressure aware: does
        # reordering the straight-line code (interleaving independent chains) pay?
        sched = ["-fschedule-insns", "-fsched-pressure"]
        variants["parts scheduled"] = (files, {**base_flags, **{f: base_flags[f] + sched for f in parts}})
        # without AVX-512: VEX encodings only (shorter), 16 vector registers instead of 32
        variants["no AVX-512"] = (files, {f: fl + ["-mno-avx512f"] for f, fl in
                                          {**{f: flags for f in [src_main, *parts]}, **base_flags}.items()})
        # the same kernel cut into fewer, longer parts (generate_cpu's part_size; default
        # rbdgen.codegen.printer.DEFAULT_PART_SIZE statements): fewer values pass through the scratch
        for size in (150, 300, 1200, 2400, 100_000):
            g2 = generate_cpu(model, dtypes=("float64",), kernels=(args.kernel,), python=False, part_size=size)
            m2 = next(f for f in g2.sources["float64"] if "parts" not in f)
            p2 = list(g2.large["float64"])
            fl2 = {f: [LARGE_OPT if x == DEFAULT_OPT else x for x in flags] for f in p2}
            fl2.update({f: [x for x in flags if x != NO_SLP] for f in g2.looped["float64"]})
            n2 = len(re.findall(r"noinline\)\) void", "".join(g2.files[f] for f in p2)))
            variants[f"{n2} parts of ≤ {size}" if n2 else "not split"] = (dict(g2.files), fl2, [m2, *p2])
        fn_name = f"{gen.prefix}_{args.kernel}_f64"
        pool = states(model, np.random.default_rng(12345), 256)
        pool_file = work / "pool.bin"
        pool_file.write_bytes(np.concatenate([pool["q"].ravel(), pool["v"].ravel(), pool["tau"].ravel()]).tobytes())
        exes, libs = {}, {}
        for name, (fs, sf, *srcs) in variants.items():
            log(f"building {name} …")
            libs[name] = build(name.replace(" ", "_"), fs, sf, *srcs)
            exes[name] = link_driver(cxx, work, name, libs[name], fn_name, model)
        peer = find_peer_lib(urdf, floating, args.kernel)
        if peer:
            wrap = work / "peer_wrap.c"
            wrap.write_text(PEER_WRAP.format(k=args.kernel, nq=model.nq, nv=model.nv, nin=model.nq + 2 * model.nv))
            pl = work / "libpeerwrap.so"
            r = subprocess.run(["gcc", "-O2", "-fPIC", "-shared", str(wrap), "-o", str(pl), f"-L{peer.parent}",
                                f"-l:{peer.name}", f"-Wl,-rpath,{peer.parent}"], capture_output=True, text=True)
            if r.returncode == 0:
                exes["Pinocchio + CppADCodeGen"] = link_driver(cxx, work, "peer", pl, f"peer_{args.kernel}", model)
                libs["Pinocchio + CppADCodeGen"] = peer
            else:
                log(f"peer wrapper: {r.stderr[-500:]}")
        rounds = {name: [] for name in exes}
        for i in range(args.rounds):
            log(f"round {i + 1}/{args.rounds}")
            for name, exe in exes.items():
                r = subprocess.run([str(exe), str(pool_file)], capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError(f"{name}: {r.stderr}")
                rounds[name].append({"t": json.loads(r.stdout)})
        rate = peak_rate(cxx, flags, 1, mul_only=True).get("ops_per_s")
        res["scalar_mul_rate"] = rate
        for name in exes:
            cell = best_round([x for x in rounds[name]])["t"]
            pat = rf"{args.kernel}_forward_zero" if name.startswith("Pinocchio") else rf"{args.kernel}_part\d+<double>|{fn_name}$|{args.kernel}<double>"
            ins = insn_classes(libs[name], pat)
            res["variants"][name] = {"ns": cell, "instructions": dict(ins), "code_bytes": code_bytes(libs[name], pat)}
        res["multiply_bound_ns"] = pk.counts["mul"] / rate * 1e9 if rate else None
        print_table(res)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
        log(f"wrote {args.out}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def link_driver(cxx, work, name, lib, fn, model) -> Path:
    src = work / f"drv_{name.replace(' ', '_').replace('+', 'p')}.cpp"
    src.write_text(DRIVER.format(fn=fn, nq=model.nq, nv=model.nv, nout=model.nv * model.nv))
    exe = src.with_suffix("")
    r = subprocess.run([cxx, "-O2", str(src), "-o", str(exe), f"-L{lib.parent}", f"-l:{lib.name}",
                        f"-Wl,-rpath,{lib.parent}"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-1500:])
    return exe


def find_peer_lib(urdf, floating, kernel) -> Path | None:
    """The codegen peer's library for this robot's kernel, when benchmarks/.build/ has one (the
    newest generator's)."""
    import codegen_peer
    gens = sorted(BUILD.glob("pinocchio_codegen-*.json"), key=lambda f: f.stat().st_mtime)
    if not gens:
        return None
    lib = codegen_peer.peer_dir(gens[-1].stem.split("-", 1)[1], urdf, floating) / f"libpeer_{kernel}.so"
    return lib if lib.exists() else None


def print_table(res) -> None:
    c = res["counts"]
    print(f"\n{res['robot']} {res['kernel']}: {c['mul']} mul, {c['add']} add/sub, {c.get('div', 0)} div; "
          f"{res['statements']} statements in the parts; scratch w[]: {res['scratch_stores']} stores, "
          f"{res['scratch_loads']} slots read by later parts; {res['output_values']} output values")
    if res.get("multiply_bound_ns"):
        print(f"multiply bound: {c['mul']} / {res['scalar_mul_rate'] / 1e9:.1f} G/s = {res['multiply_bound_ns']:.0f} ns")
    keys = ["total", "mul", "fma", "add", "load_const", "load", "store", "other"]
    print("| variant | ns (median) | code bytes | " + " | ".join(f"insn {k}" for k in keys) + " |")
    print("|---|---:|---:|" + "---:|" * len(keys))
    for name, v in res["variants"].items():
        ins = v["instructions"]
        print(f"| {name} | {v['ns']['median']:.0f} | {v['code_bytes']} | " + " | ".join(str(ins.get(k, 0)) for k in keys) + " |")
    print("\nbytes by class (an instruction with a memory operand counts in both its classes):")
    print("| variant | bytes/ns | " + " | ".join(f"bytes {k}" for k in keys[1:]) + " |")
    print("|---|---:|" + "---:|" * (len(keys) - 1))
    for name, v in res["variants"].items():
        ins = v["instructions"]
        print(f"| {name} | {v['code_bytes'] / v['ns']['median']:.1f} | " + " | ".join(str(ins.get('bytes_' + k, 0)) for k in keys[1:]) + " |")


if __name__ == "__main__":
    sys.exit(main())
