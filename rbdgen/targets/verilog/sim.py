"""Simulating the Verilog kernels: Verilator turns each module into C++, which is compiled with a
harness into one shared library (cached like every other build, by the sources' content) whose C
ABI is the CPU and HLS libraries' — ``<prefix>_<kernel>_f64`` and ``_batch`` on float64 arrays,
converted to the datapath type and back in the harness — so that the loaded kernels are a
:class:`~rbdgen.kernels.loaded.CompiledKernels` like the others (``rbdgen validate`` runs them).

Each call runs the modules cycle by cycle: the inputs on the ports, ``start`` for one clock edge,
then edges until ``done``; per state the harness records the cycle ``done`` rose in and the first
cycle from which every output held its final value. ``kern.cycles(kernel)`` reports both for the
last call (the latter the largest over its states): the latency measured in simulation, which
the tests compare with the cost model's schedule.
"""
from __future__ import annotations

import ctypes
import functools
import shutil
import subprocess
import tempfile
from pathlib import Path

from ...codegen.render import render
from ...errors import BuildError, RbdgenError
from ...kernels.loaded import CompiledKernels
from ...toolchain.compiler import build_library

#: the Verilator runtime sources a model needs (Verilator 5)
RUNTIME = ("verilated.cpp", "verilated_threads.cpp")


@functools.lru_cache(maxsize=None)
def verilator() -> tuple[str, Path]:
    """(the verilator executable, its include folder); a clear error when it is missing."""
    exe = shutil.which("verilator")
    if exe is None:
        raise RbdgenError("verilator not found on PATH: the Verilog target simulates with Verilator "
                          "(`make rtl-tools` installs it: apt-get install verilator yosys)")
    r = subprocess.run([exe, "--getenv", "VERILATOR_ROOT"], capture_output=True, text=True)
    root = Path(r.stdout.strip() or "/usr/share/verilator")
    inc = root / "include"
    if not (inc / "verilated.h").exists():
        raise RbdgenError(f"verilator at {exe}: no verilated.h under {inc} (VERILATOR_ROOT={root})")
    return exe, inc


def verilate(files: dict, module: str, units: list, work: Path) -> dict:
    """The C++ Verilator makes of ``module`` (name → text); ``units``: the files of the modules it
    instantiates."""
    exe, _ = verilator()
    for fn in (f"{module}.v", *units):
        (work / fn).write_text(files[fn])
    out = work / f"obj_{module}"
    cmd = [exe, "--cc", f"{module}.v", *units, "--top-module", module, "--prefix", f"V{module}", "-Mdir", str(out),
           "-Wno-WIDTH", "-Wno-fatal", "--x-assign", "fast", "--x-initial", "fast"]
    r = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError(f"verilator failed on {module}.v:\n{(r.stderr or r.stdout)[-3000:]}")
    return {p.name: p.read_text() for p in sorted(out.iterdir()) if p.suffix in (".cpp", ".h")}


def harness(prefix: str, kernel: str, entry: dict, numtype: dict) -> str:
    """C++ that runs the Verilated module of ``kernel`` behind the C ABI of rbdgen's libraries."""
    mod = entry["module"]
    W, I = numtype["W"], numtype["I"]  # noqa: E741
    F = W - I
    ins = [(a["name"], int(a["size"])) for a in entry["inputs"]]
    outs = [(a["name"], int(eval_size(a["shape"]))) for a in entry["outputs"]]
    n_in, n_out = sum(n for _, n in ins), sum(n for _, n in outs)
    limit = 4 * int(entry["latency_cycles"]) + 64
    rnd = "std::floor(x)" if numtype["rounding"] == "AP_TRN" else "std::nearbyint(x)"
    hi, lo = (1 << (W - 1)) - 1, -(1 << (W - 1))
    sat = (f"r > {hi}.0 ? {hi}LL : r < {lo}.0 ? ({lo + 1}LL - 1) : (long long)r" if numtype["overflow"] == "AP_SAT"
           else "rbd_wrap((long long)r)")
    f = f"{prefix}_{kernel}_f64"
    pipelined = entry.get("ii") == 1
    c_in = ", ".join(f"const double* {a}" for a, _ in ins)
    c_out = ", ".join(f"double* {a}" for a, _ in outs)
    pack, unpack, put, get = [], [], [], []
    o = 0
    for a, n in ins:
        pack.append(f"    for (int rbd_i = 0; rbd_i < {n}; ++rbd_i) rbd_x[rbd_s * {n_in} + {o} + rbd_i] = rbd_q({a}[rbd_s * {n} + rbd_i]);")
        put.append(f"    for (int rbd_i = 0; rbd_i < {n}; ++rbd_i) rbd_put(rbd_top->{a}, rbd_i * {W}, {W}, rbd_x[rbd_s * {n_in} + {o} + rbd_i]);")
        o += n
    o = 0
    for a, n in outs:
        unpack.append(f"    for (int rbd_i = 0; rbd_i < {n}; ++rbd_i) {a}[rbd_s * {n} + rbd_i] = std::ldexp((double)rbd_y[rbd_s * {n_out} + {o} + rbd_i], -{F});")
        get.append(f"      for (int rbd_i = 0; rbd_i < {n}; ++rbd_i) rbd_cur[{o} + rbd_i] = rbd_get(rbd_top->{a}, rbd_i * {W}, {W});")
        o += n
    if pipelined:  # a state every cycle; outputs collected as valid marks them
        loop = [
            "  long rbd_taken = 0, rbd_got = 0, rbd_first = -1, rbd_last = -1;",
            f"  for (long rbd_t = 0; rbd_got < n && rbd_t < n + {limit}; ++rbd_t) {{",
            "    if (rbd_taken < n) {",
            "      const long rbd_s = rbd_taken;",
            *("  " + x for x in put),
            "      rbd_top->start = 1;",
            "    } else rbd_top->start = 0;",
            "    rbd_top->clk = 1; rbd_top->eval(); rbd_top->clk = 0; rbd_top->eval();  // edge rbd_t: state rbd_t's cycle 0",
            "    if (rbd_taken < n) ++rbd_taken;",
            "    if (rbd_top->valid) {",
            *("  " + x for x in get),
            f"      for (int rbd_i = 0; rbd_i < {n_out}; ++rbd_i) rbd_y[rbd_got * {n_out} + rbd_i] = rbd_cur[rbd_i];",
            "      if (rbd_first < 0) rbd_first = rbd_t;",
            "      rbd_last = rbd_t;",
            "      ++rbd_got;",
            "    }",
            "  }",
            f"  last_{kernel}[0] = rbd_got == n ? rbd_first : -1;",
            f"  last_{kernel}[1] = rbd_got == n ? rbd_last - rbd_first + 1 : -1;"]
    else:
        loop = [
            "  for (long rbd_s = 0; rbd_s < n; ++rbd_s) {",
            *put,
            "    rbd_top->start = 1;",
            "    rbd_top->clk = 1; rbd_top->eval(); rbd_top->clk = 0; rbd_top->eval();  // the edge that takes start: cycle 0",
            "    rbd_top->start = 0;",
            "    rbd_seen.clear();",
            "    long rbd_k = 0;",
            "    for (;;) {",
            *get,
            f"      rbd_seen.insert(rbd_seen.end(), rbd_cur, rbd_cur + {n_out});",
            f"      if (rbd_top->done || rbd_k >= {limit}) break;",
            "      rbd_top->clk = 1; rbd_top->eval(); rbd_top->clk = 0; rbd_top->eval();",
            "      ++rbd_k;",
            "    }",
            "    long rbd_first = rbd_top->done ? rbd_k : -1;",
            "    while (rbd_first > 0) {",
            "      bool rbd_same = true;",
            f"      for (int rbd_i = 0; rbd_i < {n_out}; ++rbd_i) rbd_same = rbd_same && rbd_seen[(rbd_first - 1) * {n_out} + rbd_i] == rbd_cur[rbd_i];",
            "      if (!rbd_same) break;",
            "      --rbd_first;",
            "    }",
            f"    for (int rbd_i = 0; rbd_i < {n_out}; ++rbd_i) rbd_y[rbd_s * {n_out} + rbd_i] = rbd_cur[rbd_i];",
            f"    if (!rbd_top->done) last_{kernel}[0] = -1;",
            f"    else if (last_{kernel}[0] >= 0 && rbd_k > last_{kernel}[0]) last_{kernel}[0] = rbd_k;",
            f"    if (rbd_first > last_{kernel}[1]) last_{kernel}[1] = rbd_first;",
            "  }",]
    return "\n".join([
        f"// {kernel}: the Verilated {mod} behind rbdgen's C ABI (float64 in and out). Generated by rbdgen.",
        f'#include "V{mod}.h"',
        '#include "verilated.h"',
        "#include <cmath>",
        "#include <vector>",
        '#include "rbd_verilog_io.h"',
        "",
        "namespace {",
        f"long last_{kernel}[2];",
        "// a float64 as the datapath's raw integer, as ap_fixed converts it (its rounding, then its overflow mode)",
        f"inline long long rbd_wrap(long long t) {{  // two's complement at {W} bits",
        f"  const unsigned long long u = (unsigned long long)t & {(1 << W) - 1 if W < 64 else 0xFFFFFFFFFFFFFFFF}ULL;",
        f"  return {W} < 64 && u >> {min(W - 1, 63)} ? (long long)u - (long long)(1ULL << {min(W, 63)}) * {2 if W == 64 else 1} : (long long)u;",
        "}",
        "inline long long rbd_q(double v) {",
        f"  const double x = std::ldexp(v, {F});",
        f"  const double r = {rnd};",
        "  if (std::isnan(r)) return 0;",
        f"  return {sat};",
        "}",
        "}  // namespace",
        "",
        'extern "C" {',
        "// n states; the cycle done rose in and the first cycle every output held its final value (the",
        f"// largest over the states) are kept for {f}_cycles",
        f"void {f}_batch(long n, {c_in}, {c_out}) {{",
        f"  std::vector<long long> rbd_x(n * {n_in}), rbd_y(n * {n_out});",
        "  for (long rbd_s = 0; rbd_s < n; ++rbd_s) {",
        *pack,
        "  }",
        "  VerilatedContext rbd_ctx;",
        f"  V{mod}* rbd_top = new V{mod}(&rbd_ctx);",
        "  rbd_top->clk = 0;",
        "  rbd_top->start = 0;",
        "  rbd_top->eval();",
        "  std::vector<long long> rbd_seen;",
        f"  long long rbd_cur[{max(n_out, 1)}];",
        f"  last_{kernel}[0] = last_{kernel}[1] = 0;",
        *loop,
        "  rbd_top->final();",
        "  delete rbd_top;",
        "  for (long rbd_s = 0; rbd_s < n; ++rbd_s) {",
        *unpack,
        "  }",
        "}",
        f"void {f}({c_in}, {c_out}) {{ {f}_batch(1, {', '.join(a for a, _ in ins + outs)}); }}",
        (f"// 0: the cycle the first state's outputs were valid in (-1: not all within {limit} cycles); 1: the "
         "cycles from the first state's outputs to the last one's (n at one state a cycle)") if pipelined else
        f"// 0: the cycle done rose in (-1: not within {limit} cycles); 1: the first cycle all outputs were final",
        f"long {f}_cycles(int which) {{ return last_{kernel}[which ? 1 : 0]; }}",
        f"long {f}_latency(void) {{ return {int(entry['latency_cycles'])}; }}",
        "}",
        ""])


def eval_size(shape) -> int:
    n = 1
    for s in shape:
        n *= int(s)
    return n


class VerilogKernels(CompiledKernels):
    """Verilator-simulated kernels: the methods of :class:`CompiledKernels`, float64 arrays in and
    out; ``cycles(kernel)`` the latency the last call measured."""

    def __init__(self, lib_path, model, prefix: str, specs: dict, numtype: dict, latency: dict,
                 pipelined: dict | None = None):
        self.numtype = numtype
        self.latency = dict(latency)
        self.pipelined = dict(pipelined or {})
        super().__init__(lib_path, model, prefix, "float64", specs, target="verilog")
        self._cycles = {}
        for k in self.kernels:
            fn = getattr(self._lib, f"{prefix}_{k}_f64_cycles")
            fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_long
            self._cycles[k] = fn

    def cycles(self, kernel: str) -> dict:
        """For the last call of ``kernel``: the cycle ``done`` rose in (-1: it did not), and the
        first cycle from which every output held its final value, the largest over the call's
        states; beside the schedule's latency. Pipelined (``--ii 1``, the call's states fed one a
        cycle): ``valid``, the cycle the first state's outputs came out in, and ``span``, the cycles
        from the first state's outputs to the last's (n for n states at one a cycle)."""
        f = self._cycles[kernel]
        if self.pipelined.get(kernel):  # a state a cycle: when the first came out, how long all took
            return {"valid": int(f(0)), "span": int(f(1)), "schedule": self.latency[kernel]}
        return {"done": int(f(0)), "outputs_final": int(f(1)), "schedule": self.latency[kernel]}

    def __repr__(self):
        nt = self.numtype
        return (f"<rbdgen Verilog kernels (Verilator) for {self.model.name!r} (ap_fixed<{nt['W']},{nt['I']}>, "
                f"nq={self.nq}, nv={self.nv}): {', '.join(self.kernels)}>")


def load_verilog(sources, model, specs: dict, *, progress=None, cxx=None, opt=None) -> VerilogKernels:
    lib = build_verilog(sources, progress=progress, cxx=cxx, opt=opt)
    return VerilogKernels(lib, model, sources.prefix, specs, sources.info["numtype"],
                          {k: e["latency_cycles"] for k, e in sources.kernels.items()},
                          {k: e.get("ii") == 1 for k, e in sources.kernels.items()})


#: the simulation's C++ optimisation when none is given: -O0 builds in half the time of -O1 (iiwa
#: rnea, FK, crba, aba: 35 s against 68 s on the 2-core VM), and a simulation is short
DEFAULT_OPT = "-O0"


def build_verilog(sources, *, progress=None, cxx=None, opt=None):
    """The simulation library of ``sources`` (Verilator's C++ of each module, the harnesses, the
    Verilator runtime), compiled through the compile cache; its path."""
    _, inc = verilator()
    info = sources.info
    files = {"rbd_verilog_io.h": render("verilog/rbd_verilog_io.h.j2")}
    with tempfile.TemporaryDirectory(prefix="rbdgen-verilate-") as tmp:
        for k, entry in sources.kernels.items():
            if progress:
                progress(f"verilating {entry['module']}")
            files.update(verilate(sources.files, entry["module"], info["units"], Path(tmp)))
            files[f"{sources.prefix}_{k}_run.cpp"] = harness(sources.prefix, k, entry, entry.get("numtype", info["numtype"]))
    srcs = sorted(fn for fn in files if fn.endswith(".cpp"))
    flags = ["-std=c++17", opt or DEFAULT_OPT, "-fPIC", "-w", "-pthread", f"-I{inc}", f"-I{inc / 'vltstd'}"]
    # Verilator's runtime, the same for every design: one archive in the compile cache per
    # Verilator and flags, linked into each simulation (it was 4-6 s of g++ in every build here)
    runtime = build_library({fn: (inc / fn).read_text() for fn in RUNTIME}, list(RUNTIME), "rbd_verilated", flags,
                            cxx=cxx, progress=progress, static=True)
    # Verilator's sources include its runtime header first: precompiled once for all of them
    return build_library(files, srcs, f"{sources.prefix}_verilog", flags, cxx=cxx, progress=progress,
                         pch=str(inc / "verilated.h"), link=[runtime])
