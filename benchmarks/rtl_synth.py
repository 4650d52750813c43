"""Synthesis of the Verilog target's modules by Yosys (issue 48): real cell counts beside the HLS
cost model's estimate for the same design (not a test).

For each kernel of the iiwa (default: forward kinematics, rnea, crba, aba) in ap_fixed<32,16> at
250 MHz, ``rbdgen generate --target verilog`` writes the module, and Yosys 0.23 (Debian, from
``make rtl-tools``) runs ``synth_xilinx -family xcup`` (UltraScale+: DSP48E2, LUT6, CARRY8) on it
and reports its cells. Beside them: the HLS cost model's figures for the same kernel, format and
clock (``inspect --cost --target verilog``: the HLS cost model with the Verilog target's
divider): its spatial DSPs (one operator per operation, the
design this RTL is), its LUTs and flip-flops, and its latency, which the RTL has by construction
and which tests/test_verilog.py measures in Verilator. Two kernels synthesize at a time (one core
each); the Yosys logs stay in the work folder when --keep is given.

A kernel written ``kernel+ii1`` is the pipelined design (``--ii 1``: a state every cycle) beside
the model's ``--ii 1`` figures. A kernel written ``kernel@N`` is the design within N DSP48E2 slices (``--dsp-budget N``: the
multipliers and CORDIC units shared on the HLS list schedule); its model figures are the budgeted
design's (``inspect --cost --target verilog --dsp-budget N``). ∇FD is only synthesized so: unshared
it would need 12 010 DSPs, more than a VCU118's 6 840.

    make synth-report                       # ~30 min on the 2-core VM
    python benchmarks/rtl_synth.py --kernels forward_kinematics   # one kernel, ~2 min
    python benchmarks/rtl_synth.py --kernels aba_derivatives@200 --merge   # add a row to rtl.json

∇FD within 200 DSPs holds ~15 GB in Yosys: on a 24 GB machine run it on its own (beside aba it was
killed by the kernel's out-of-memory killer after 15 min, 2026-11-27).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import measure as bench
from measure import HERE, log

import rbdgen
import rbdgen.robots
from rbdgen import registry
from rbdgen.targets import get_target
from rbdgen.targets.hls.cost import kernel_cost
from rbdgen.targets.hls.emit import DEFAULT_CLOCK_MHZ, numeric_type
from rbdgen.targets.hls.schedule import budget_cost
from rbdgen.targets.verilog.cost import module_luts
from rbdgen.toolchain.compiler import find_cxx

KERNELS = ("forward_kinematics", "rnea", "crba", "aba", "rnea@100", "rnea+ii1", "aba_derivatives@200")
FIXED = (32, 16)
#: the cells reported, grouped
GROUPS = {"DSP48E2": ("DSP48E2",), "LUT": ("LUT1", "LUT2", "LUT3", "LUT4", "LUT5", "LUT6"),
          "FF": ("FDRE", "FDSE", "FDCE", "FDPE"), "SRL": ("SRL16E", "SRLC32E"), "CARRY": ("CARRY4", "CARRY8"),
          "MUXF": ("MUXF7", "MUXF8", "MUXF9")}


def synth(work: Path, module: str, files: list, timeout_s: int) -> dict:
    yosys = shutil.which("yosys")
    if yosys is None:
        raise SystemExit("yosys not found: run `make rtl-tools`")
    stat = work / f"{module}.stat"
    script = (f"read_verilog {' '.join(files)}; synth_xilinx -family xcup -top {module}; "
              f"tee -q -o {stat.name} stat")
    t = time.perf_counter()
    r = subprocess.run([yosys, "-q", "-l", f"{module}.log", "-p", script], cwd=work, capture_output=True, text=True,
                       timeout=timeout_s)
    secs = time.perf_counter() - t
    if r.returncode != 0:
        why = (r.stderr or r.stdout)[-500:].strip()
        if not why and r.returncode < 0:  # killed: ∇FD within 200 DSPs holds ~15 GB, the kernel's OOM killer
            why = f"yosys killed by signal {-r.returncode} (out of memory? run big designs one at a time)"
        return {"error": why or f"yosys exited with status {r.returncode}", "seconds": round(secs, 1)}
    cells = {}
    text = stat.read_text()
    top = text.split("=== design hierarchy ===")[-1]  # the flattened totals of the top module
    for name, count in re.findall(r"^\s+(\w+)\s+(\d+)\s*$", top, re.M):
        cells[name] = cells.get(name, 0) + int(count)
    groups = {g: sum(cells.get(c, 0) for c in cs) for g, cs in GROUPS.items()}
    return {"cells": cells, "groups": groups, "seconds": round(secs, 1)}


def parse(spec: str) -> tuple[str, int | None, int | None]:
    """``kernel``, ``kernel@N`` (within N DSPs) or ``kernel+ii1`` (pipelined, a state a cycle) →
    (kernel, N or None, 1 or None)."""
    if spec.endswith("+ii1"):
        return spec[:-4], None, 1
    k, _, b = spec.partition("@")
    return k, (int(b) if b else None), None


def run(specs, timeout_s: int, keep: bool, revision: str, cpu: str | None) -> dict:
    m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    nt = numeric_type("float64", FIXED)
    work = Path(tempfile.mkdtemp(prefix="rbdgen-synth-"))
    rows = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        futs = {}
        for spec in specs:
            k, budget, ii = parse(spec)
            src = get_target("verilog").generate(m, (k,), dtypes=("float64",), name=None, fixed=FIXED,
                                                 dsp_budget=budget, ii=ii)
            d = work / (f"budget{budget}" if budget else "ii1" if ii else "unshared")
            d.mkdir(exist_ok=True)
            for fn, text in src.files.items():
                (d / fn).write_text(text)
            e = src.kernels[k]
            log(f"synthesizing {e['module']}" + (f" within {budget} DSPs" if budget else " pipelined" if ii else "")
                + " (Yosys synth_xilinx -family xcup)")
            futs[spec] = (src, ex.submit(synth, d, e["module"], [f"{e['module']}.v", *src.info["units"]], timeout_s))
        for spec, (src, f) in futs.items():
            k, budget, ii = parse(spec)
            kern = registry.trace(m, k)
            if budget:
                est = budget_cost(kern, nt, DEFAULT_CLOCK_MHZ, budget, divider="narrow")
                est["dsp_spatial"] = est["dsp"]  # the design the RTL is: the shared operators
            else:
                est = kernel_cost(kern, nt, DEFAULT_CLOCK_MHZ, ii=ii, divider="narrow")
            rows[spec] = {"yosys": f.result(), "model": {x: est[x] for x in ("dsp", "dsp_spatial", "lut", "ff",
                                                                             "latency_cycles")},
                          "rtl": {x: src.kernels[k][x] for x in ("latency_cycles", "operators", "registers")},
                          "rtl_lut_estimate": _estimate(src, k),
                          "dsp_budget": budget, "ii": ii, "revision": revision, "machine": cpu}
            log(f"{spec}: {rows[spec]['yosys'].get('groups') or rows[spec]['yosys'].get('error')} "
                f"in {rows[spec]['yosys']['seconds']} s")
    if keep:
        log(f"Yosys logs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def _estimate(src, k: str) -> int:
    """The LUTs rbdgen.targets.verilog.cost prices the module at (its operators, each as Yosys maps
    it alone: benchmarks/rtl_operators.py)."""
    return module_luts(src.files[f"{src.kernels[k]['module']}.v"], src.prefix, *FIXED)[0]


def _estimate_now(spec: str) -> int:
    """:func:`_estimate` of this revision's module for ``spec`` (rows synthesized before the
    estimate existed)."""
    k, budget, ii = parse(spec)
    m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    return _estimate(get_target("verilog").generate(m, (k,), dtypes=("float64",), name=None, fixed=FIXED,
                                                    dsp_budget=budget, ii=ii), k)


def markdown(res: dict) -> str:
    mi = res["machine"]
    lines = ["# The Verilog target synthesized by Yosys (issue 48)", "",
             f"iiwa14, ap_fixed<{FIXED[0]},{FIXED[1]}> (AP_RND_CONV, AP_SAT), schedule at {DEFAULT_CLOCK_MHZ:g} MHz; "
             f"Yosys `synth_xilinx -family xcup` ({res['yosys']}); the revision and machine of each row "
             "below. Model: the cost model of the same design, kernel, format and clock (`inspect --cost --target "
             "verilog`: the HLS cost model with the Verilog target's divider, 18 cycles at 32,16 since 682f6bb; rows "
             "of earlier revisions had the HLS tool's, 51): DSP-spatial is one operator per operation, the design "
             "the unshared RTL is; a row `@ N DSP` "
             "is the design within a budget of N (`--dsp-budget N`: multipliers and CORDIC units shared on the "
             "list schedule) beside the budgeted model (`inspect --cost --dsp-budget N`); a row `--ii 1` is the "
             "pipelined design (a state every cycle) beside the model's `--ii 1` figures. The LUT and FF figures "
             "price the design's operators (and, budgeted, its operand multiplexers) and the values a latency "
             "design holds between cycles. The RTL's latency is the model's by construction and measured in "
             "Verilator by tests/test_verilog.py. RTL estimate: the module's operators, each priced as Yosys maps "
             "it alone (`rbdgen/targets/verilog/cost.py`, benchmarks/results/rtl_operators.md), summed, "
             "and its ratio to Yosys's LUTs; * computed when this report was written, from that revision's RTL "
             "(the row's synthesis is older).", "",
             "| kernel | latency (cycles) | DSP48E2 (model) | LUT (model) | LUT: RTL estimate | FF + SRL (model FF) "
             "| CARRY | Yosys time | revision, machine |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for spec, r in res["kernels"].items():
        k = spec.replace("@", " @ ").replace("+ii1", ", --ii 1") + (" DSP" if "@" in spec else "")
        y, md = r["yosys"], r["model"]
        if "error" in y:
            lines.append(f"| {k} | {r['rtl']['latency_cycles']} | failed: {y['error'][:80]} | | | | | {y['seconds']} s "
                         f"| {r.get('revision', mi.get('git'))}, {r.get('machine', mi.get('cpu'))} |")
            continue
        g = y["groups"]
        est = r.get("rtl_lut_estimate")
        star = "" if est is not None else "*"
        est = est if est is not None else _estimate_now(spec)
        lines.append(f"| {k} | {r['rtl']['latency_cycles']} | {g['DSP48E2']} ({md['dsp_spatial']}, "
                     f"{g['DSP48E2'] / max(md['dsp_spatial'], 1):.2f}×) | {g['LUT']} ({md['lut']}, "
                     f"{g['LUT'] / max(md['lut'], 1):.2f}×) | {est}{star} ({est / max(g['LUT'], 1):.2f}×) | "
                     f"{g['FF']} + {g['SRL']} ({md['ff']}) | {g['CARRY']} | "
                     f"{y['seconds']:.0f} s | {r.get('revision', mi.get('git'))}, {r.get('machine', mi.get('cpu'))} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated kernels of the iiwa")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per kernel's synthesis")
    p.add_argument("--keep", action="store_true", help="keep the work folder (Verilog, Yosys logs)")
    p.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    p.add_argument("--render", action="store_true", help="only rewrite rtl.md from rtl.json")
    p.add_argument("--merge", action="store_true", help="keep rtl.json's rows of kernels not synthesized now "
                   "(and of those whose synthesis failed now)")
    args = p.parse_args(argv)
    out = Path(args.out) if args.out else HERE / "results"
    if args.render:
        bench.write_report(out, "rtl", None, markdown, lambda res, path: False)
        return 0
    out.mkdir(parents=True, exist_ok=True)
    ver = subprocess.run(["yosys", "-V"], capture_output=True, text=True).stdout.strip() if shutil.which("yosys") else "?"
    machine = bench.machine_info(find_cxx())
    rows = run([k for k in args.kernels.split(",") if k], args.timeout, args.keep, machine.get("git"), machine.get("cpu"))
    if args.merge and (out / "rtl.json").exists():
        old = json.loads((out / "rtl.json").read_text())
        failed = {k for k, r in rows.items() if "error" in r["yosys"] and "error" not in old["kernels"].get(k, {
            "yosys": {"error": ""}})["yosys"]}
        for k in sorted(failed):
            log(f"{k}: failed now, its earlier row kept ({rows[k]['yosys']['error'][:100]})")
        kept = {k: {"revision": old["machine"].get("git"), "machine": old["machine"].get("cpu"), **r}
                for k, r in old["kernels"].items() if k not in rows or k in failed}
        rows = {**kept, **{k: r for k, r in rows.items() if k not in failed}}
    res = {"machine": machine, "yosys": ver, "kernels": rows}
    bench.write_report(out, "rtl", res, markdown, lambda res, path: False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
