#!/usr/bin/env python3
"""What each operator of the Verilog target's datapath costs in LUTs, synthesized alone by Yosys
(issue 48: calibrate the cost model from synthesis; not a test).

Each operator is written as the target writes it (``rbdgen.targets.verilog.emit``: its
``_arith`` wires and its quantisation macros, a product's three pipeline registers; the CORDIC
and divider modules as generated for the iiwa), four independent copies in one module with their
operands and results in registers, and Yosys 0.23 (``make rtl-tools``) runs ``synth_xilinx
-family xcup`` on it. Per operator: LUTs, CARRY4, DSP48E2 (the module's count / 4: the registers
take none; the CORDIC and the dividers: one module). The products by a constant are measured at several widths of the
constant (its bits, |c|.bit_length()): Yosys splits a 32-bit operand into two DSP48E2 columns,
and a constant of 18 bits or more into two rows, with the partial products summed in LUTs.

:mod:`rbdgen.targets.verilog.cost` prices a module as written with these figures
(``inspect --cost --target verilog``: "LUTs of the modules as written"); docs/verilog.md,
"Synthesis by Yosys", compares that estimate with the whole designs' synthesis.

    python benchmarks/rtl_operators.py      # ~1 min; writes benchmarks/results/rtl_operators.{json,md}
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import measure as bench
import rtl_synth
from measure import HERE, log

import rbdgen
import rbdgen.robots
from rbdgen.targets import get_target
from rbdgen.targets.hls.emit import numeric_type
from rbdgen.targets.verilog.cost import CALIBRATED_FORMAT
from rbdgen.targets.verilog.emit import _Emitter
from rbdgen.toolchain.compiler import find_cxx

COPIES = 4
CONST_BITS = (2, 5, 9, 13, 17, 18, 24, 27, 31)
GROUPS = ("LUT", "CARRY", "DSP48E2")


def _module(name: str, em: _Emitter, body, n_in: int) -> str:
    """``COPIES`` copies of ``body(i, operands)`` (lines; the result in wire ``r<i>``), operands
    and results registered."""
    W = em.W
    lines = [f"module {name}(input wire clk, input wire [{W * n_in * COPIES - 1}:0] x, "
             f"output reg [{W * COPIES - 1}:0] y);", *em.macros()]
    for i in range(COPIES):
        ops = [f"a{i}_{j}" for j in range(n_in)]
        lines.append(f"  reg signed [{W - 1}:0] {', '.join(ops)};")
        base = W * n_in * i
        lines.append("  always @(posedge clk) begin " + " ".join(
            f"{o} <= x[{base + W * (j + 1) - 1}:{base + W * j}];" for j, o in enumerate(ops)) + " end")
        lines += body(i, ops)
        lines.append(f"  always @(posedge clk) y[{W * (i + 1) - 1}:{W * i}] <= r{i};")
    lines.append("endmodule")
    return "\n".join(lines) + "\n"


def _product(em: _Emitter, const_bits: int | None):
    W = em.W

    def body(i, ops):
        b = ops[1] if const_bits is None else f"{W}'sd{_constant(const_bits, i)}"
        return em._arith("mul", [ops[0], b], f"t{i}") + [
            f"  reg signed [{W - 1}:0] t{i}_p1, t{i}_p2, t{i}_p3;",
            f"  always @(posedge clk) begin t{i}_p1 <= t{i}; t{i}_p2 <= t{i}_p1; t{i}_p3 <= t{i}_p2; end",
            f"  wire signed [{W - 1}:0] r{i} = t{i}_p3;"]
    return body


def _constant(bits: int, i: int) -> int:
    """A constant of ``bits`` bits (its top bit set), alternate bits below, odd: no trailing zeros
    for the tool to shift away; the copies differ so that none is shared."""
    return (1 << (bits - 1)) | (0x55555555 & ((1 << (bits - 1)) - 1)) | 1 | (2 * i if bits > 4 else 0)


def _sum(em: _Emitter, op: str):
    def body(i, ops):
        return em._arith(op, ops[:1] if op == "neg" else ops, f"r{i}")
    return body


def synth(work: Path, module: str, files: list) -> dict:
    """LUT, CARRY and DSP48E2 counts of ``module`` (make synth-report's flow, rtl_synth.synth)."""
    r = rtl_synth.synth(work, module, files, 1800)
    if "error" in r:
        raise SystemExit(f"yosys failed on {module}: {r['error']}")
    return {g: r["groups"][g] for g in GROUPS}


def run() -> dict:
    if shutil.which("yosys") is None:
        raise SystemExit("yosys not found: run `make rtl-tools`")
    nt = numeric_type("float64", CALIBRATED_FORMAT)
    em = _Emitter(nt, 250.0)
    work = Path(tempfile.mkdtemp(prefix="rbdgen-rtlops-"))
    designs = {"mul": (_product(em, None), 2), "add": (_sum(em, "add"), 2), "sub": (_sum(em, "sub"), 2),
               "neg": (_sum(em, "neg"), 1)}
    designs.update({f"cmul{b}": (_product(em, b), 1) for b in CONST_BITS})
    per = {}
    for name, (body, n_in) in designs.items():
        (work / f"op_{name}.v").write_text(_module(f"op_{name}", em, body, n_in))
        log(f"synthesizing {name} ({COPIES} copies)")
        per[name] = {g: v / COPIES for g, v in synth(work, f"op_{name}", [f"op_{name}.v"]).items()}
    # the CORDIC and the two dividers, one module each, as the target generates them
    m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    for ii, units in ((None, ("sincos", "div")), (1, ("divp",))):
        src = get_target("verilog").generate(m, ("aba",), dtypes=("float64",), name="cal", fixed=CALIBRATED_FORMAT,
                                             ii=ii)
        for fn, text in src.files.items():
            (work / fn).write_text(text)
        for u in units:
            log(f"synthesizing rbd_cal_{u}")
            per[u] = synth(work, f"rbd_cal_{u}", [f"rbd_cal_{u}.v"])
    shutil.rmtree(work, ignore_errors=True)
    return per


def markdown(res: dict) -> str:
    mi = res["machine"]
    lines = ["# The Verilog target's operators, synthesized alone (issue 48)", "",
             f"Yosys {res['yosys']} `synth_xilinx -family xcup`, ap_fixed<{CALIBRATED_FORMAT[0]},{CALIBRATED_FORMAT[1]}>; "
             f"{mi.get('cpu', '?')}, {res['date']}, revision {mi.get('git') or '?'}. Produced by "
             "`benchmarks/rtl_operators.py`. Each operator as the target writes it, four copies with their "
             "operands and results in registers (which take no LUTs); the CORDIC and the dividers "
             "one module each, as generated (`divp`: the pipelined divider of `--ii 1`). `cmulN`: a product by a "
             "constant of N bits. Registers are not priced here.", "",
             "| operator | LUT | CARRY4 | DSP48E2 |", "|---|---:|---:|---:|"]
    for name, r in res["operators"].items():
        lines.append(f"| {name} | {r['LUT']:g} | {r['CARRY']:g} | {r['DSP48E2']:g} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    ver = subprocess.run(["yosys", "-V"], capture_output=True, text=True).stdout.strip()
    machine = bench.machine_info(find_cxx())
    res = {"yosys": ver.split()[1] if ver else "?", "machine": machine, "date": machine.get("date", "?"),
           "operators": run()}
    args.out.mkdir(parents=True, exist_ok=True)
    bench.write_report(args.out, "rtl_operators", res, markdown, lambda res, path: False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
