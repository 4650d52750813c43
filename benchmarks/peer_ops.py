#!/usr/bin/env python3
"""Arithmetic against the strongest CPU peer: operations in Pinocchio + CppADCodeGen's generated C
beside rbdgen's, kernel by kernel (issue 49: compare against the op-count roofline, not only the clock).

    python benchmarks/peer_ops.py [--robots iiwa14,quadruped,talos_reduced] [--out benchmarks/results/peer_ops]

Not part of `make bench` (which times the peer; this counts what it computes). Deterministic: no
timing, no compile of the generated C, seconds per robot once the peer's generator is built
(benchmarks/codegen_peer.py, cached under benchmarks/.build/; ~5 min the first time).

- **the peer**: the generator writes each function's C (Pinocchio's algorithm recorded on CppAD's
  ``AD<CG<double>>`` scalars: constants folded, multiplies by a structural 0 or 1 dropped, common
  subexpressions shared; what `make bench` compiles at ``-O3``); every assignment of its
  ``<function>_forward_zero*.c`` files is parsed and its binary ``*``, ``/``, ``+``, ``-`` counted,
  a unary minus on a value as an add (GCC keeps ``0 - x`` and ``-x``: without ``-ffast-math``
  neither folds), a minus on a literal as nothing; ``sin``/``cos`` calls apart. A copy (``y[i] =
  v[j]``) costs nothing. GCC at ``-O3`` without ``-ffast-math`` may not reassociate, so what is
  written is what runs (it may contract a multiply and an add into one FMA, as it does ours).
- **rbdgen**: the op counts of the same kernel as ``rbdgen.build`` generates it
  (:meth:`rbdgen.ir.graph.Kernel.op_counts`: multiplies, adds and subtractions with
  negations, divisions; sines and cosines apart, each counted, as the peer's calls are).

crba and aba are counted in both of Pinocchio's conventions (LOCAL, WORLD); the table gives the
smaller. Outputs: the values each writes (the peer's crba and minv write the upper triangle, as
Pinocchio fills it; rbdgen's the whole matrix). Writes ``OUT.json`` and ``OUT.md``.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import measure  # noqa: F401  (environment first)
import codegen_peer
from measure import ROBOTS, bench_model, log

from rbdgen.registry import trace
from rbdgen.toolchain.compiler import compiler_version, find_cxx

#: rbdgen kernel → the peer's functions for it (both conventions where Pinocchio has two)
KERNELS = ("rnea", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives", "forward_kinematics")
LABEL = {"rnea_derivatives": "∇ID", "aba_derivatives": "∇FD", "forward_kinematics": "FK"}

_ASSIGN = re.compile(r"^\s*(v|y)\[\d+\]\s*=\s*(.+);\s*$")
_TOKEN = re.compile(r"\s*(?:(\d+\.?\d*(?:[eE][-+]?\d+)?)|([A-Za-z_]\w*)(\s*\[\s*\d+\s*\])?|(\S))")
_CALLS = {"sin", "cos"}


def count_expression(expr: str) -> dict:
    """The operations one C expression of CppADCodeGen's output performs (module docstring)."""
    c = {"mul": 0, "add": 0, "div": 0, "trig": 0}
    operand = False  # whether the previous token ends an operand (so a + or - after it is binary)
    pending_minus = False  # a unary minus waiting to see whether it applies to a literal
    for num, ident, index, ch in _TOKEN.findall(expr):
        if num or ident:
            if ident in _CALLS:
                c["trig"] += 1
                if pending_minus:
                    c["add"] += 1
                operand = pending_minus = False
                continue
            if ident and not index and ident not in ("x", "y", "v"):
                raise ValueError(f"unexpected name {ident!r} in {expr!r}")
            if pending_minus and not num:
                c["add"] += 1  # a negated value; a negative literal is a constant
            operand, pending_minus = True, False
        elif ch == "(":
            if pending_minus:
                c["add"] += 1  # -( ... ): a negation of the parenthesised value
            operand = pending_minus = False
        elif ch == ")":
            operand = True
        elif ch in "*/":
            c["mul" if ch == "*" else "div"] += 1
            operand = False
        elif ch in "+-":
            if operand:
                c["add"] += 1
            elif ch == "-":
                pending_minus = True
            operand = False
        elif ch == ",":
            operand = False
        else:
            raise ValueError(f"unexpected {ch!r} in {expr!r}")
    return c


def count_c(files) -> dict:
    """Operations and written outputs over one function's generated ``*_forward_zero*.c`` files."""
    total = {"mul": 0, "add": 0, "div": 0, "trig": 0, "outputs": set(), "statements": 0}
    for f in files:
        for line in Path(f).read_text().splitlines():
            m = _ASSIGN.match(line)
            if not m:
                continue
            total["statements"] += 1
            if m.group(1) == "y":
                total["outputs"].add(line.split("]")[0].strip())
            for k, n in count_expression(m.group(2)).items():
                total[k] += n
    total["outputs"] = len(total["outputs"])
    total["arith"] = total["mul"] + total["add"] + total["div"]
    return total


def count_peer(gen: dict, urdf, floating: bool, funcs) -> dict:
    """The peer's operations for each of ``funcs`` (its function names) on this robot: the
    generator (``gen``: :func:`codegen_peer.build_generator`'s) writes their C into a temporary
    folder, counted there (under a second a robot). {function: count_c's dict + tape_ops}."""
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([str(measure.HERE.parent / gen["binary"]), str(urdf), "floating" if floating else "fixed",
                            tmp, ",".join(funcs)], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"pinocchio_codegen failed ({r.returncode}): {(r.stderr or r.stdout)[-1500:]}")
        meta = json.loads(r.stdout)
        return {f: dict(count_c(sorted(Path(tmp, f).glob(f"{f}_forward_zero*.c"))),
                        tape_ops=meta["kernels"][f]["tape_ops"]) for f in funcs}


def ours(model, kernel: str) -> dict:
    c = trace(model, kernel).op_counts()
    return {"mul": c["mul"], "add": c["add"], "div": c["div"], "trig": c["sincos"],
            "arith": c["mul"] + c["add"] + c["div"], "outputs": model.nv * model.nv if kernel in ("crba", "minv") else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robots", default="iiwa14,quadruped,talos_reduced")
    ap.add_argument("--out", default=str(measure.HERE / "results" / "peer_ops"))
    args = ap.parse_args(argv)
    robots = [measure.ALIASES.get(r, r) for r in args.robots.split(",")]
    unknown = [r for r in robots if r not in ROBOTS]
    if unknown:
        print(f"peer_ops.py: unknown robot {', '.join(unknown)} (known: {', '.join(ROBOTS)})", file=sys.stderr)
        return 2
    why = codegen_peer.ensure_codegen_wheels()
    if why:
        log(f"the peer cannot be built: {why}")
        return 1
    cxx = find_cxx()
    gen = codegen_peer.build_generator(cxx)
    res = {"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "generator": gen["command"], "versions": gen["versions"],
           "compiler": compiler_version(cxx).splitlines()[0], "robots": {}}
    for name in robots:
        urdf_fn, floating, desc = ROBOTS[name]
        urdf = urdf_fn()
        model = bench_model(name, urdf, floating)
        funcs = [f for k in KERNELS for f in codegen_peer.CG_KERNELS[k]]
        peer = count_peer(gen, urdf, floating, funcs)
        rows = {}
        for k in KERNELS:
            cands = {f: peer[f] for f in codegen_peer.CG_KERNELS[k]}
            best = min(cands, key=lambda f: cands[f]["arith"])
            us = ours(model, k)
            rows[k] = {"peer": cands, "peer_best": best, "rbdgen": us,
                       "ratio": round(cands[best]["arith"] / us["arith"], 3)}
            log(f"{name} {k}: peer {cands[best]['arith']} ({codegen_peer.CONVENTION.get(best, '')}), "
                f"rbdgen {us['arith']}: {rows[k]['ratio']:.2f}x")
        res["robots"][name] = {"description": desc, "nq": model.nq, "nv": model.nv, "kernels": rows}
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    out.with_suffix(".md").write_text(report(res, " ".join(["benchmarks/peer_ops.py"] + (argv if argv is not None else sys.argv[1:]))))
    log(f"wrote {out.with_suffix('.md')} and .json")
    return 0


def _th(n: int) -> str:
    return f"{n:,}".replace(",", " ")


def report(res: dict, command: str) -> str:
    v = res["versions"]
    lines = [
        "# Operations: rbdgen against Pinocchio + CppADCodeGen", "",
        f"Produced by `{command}` on {res['when']} (pin {v.get('pin')}, cmeel-cppadcodegen "
        f"{v.get('cmeel-cppadcodegen')}, cmeel-cppad {v.get('cmeel-cppad')}). Counted, not timed: the "
        "multiplies, adds/subtractions (negations included) and divisions in the peer's generated C and in "
        "rbdgen's kernel, one state; sines and cosines apart (method: the docstring of benchmarks/peer_ops.py). "
        "*peer / rbdgen* = the peer's arithmetic over rbdgen's: above 1× rbdgen computes less. crba and aba: "
        "the convention (LOCAL or WORLD, W) with less arithmetic. The peer's crba and minv write the upper "
        "triangle (as Pinocchio fills it), rbdgen's the whole matrix: *outputs* says how many values each "
        "writes.", "",
        "| robot | kernel | peer: ×, ±, ÷ | peer total | rbdgen: ×, ±, ÷ | rbdgen total | peer / rbdgen | sines and cosines (peer / rbdgen) | outputs (peer / rbdgen) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in res["robots"].items():
        for k, row in r["kernels"].items():
            p = row["peer"][row["peer_best"]]
            u = row["rbdgen"]
            conv = " (W)" if codegen_peer.CONVENTION.get(row["peer_best"]) == "WORLD" else ""
            outs = u["outputs"] if u["outputs"] is not None else p["outputs"]
            lines.append(f"| {name} (nv {r['nv']}) | {LABEL.get(k, k)}{conv} | {p['mul']}, {p['add']}, {p['div']} | "
                         f"{_th(p['arith'])} | {u['mul']}, {u['add']}, {u['div']} | {_th(u['arith'])} | "
                         f"**{row['ratio']:.2f}×** | {p['trig']} / {u['trig']} | {p['outputs']} / {outs} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
