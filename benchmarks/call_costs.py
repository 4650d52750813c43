#!/usr/bin/env python3
"""What one call from Python costs beside its kernel (`make bench-call-costs`; issues 47 and 49;
docs/performance.md §49, §51): small batches, the states-last layout, a variant's keyword.

For the iiwa and TALOS (floating), default build, one thread, ``out=`` given, µs a call (the best
of ``ROUNDS`` rounds of repeated calls, the variants of a row interleaved round by round):

* ``one state``: ``kern.<k>(q, v, …)``, one state through the binding;
* ``rows N``: a batch of N states, the default layout; per state in brackets;
* ``states last N``: the same states, ``layout="states_last"``, through the binding, and through the
  Python method the binding falls back to (``kern.methods[<k>]``), which is what every such call
  cost before §49;
* for rnea: ``f_ext=`` through the binding against ``kern.rnea_fext`` called by name.

The fixed cost of a batch is read off the first two columns: N = 4 is one SIMD block of 4 lanes
(AVX2) or half of one of 8, so a batch of 4 costing about one single-state call means the batch
path adds almost nothing of its own. Writes call_costs.{json,md} to --out (default
benchmarks/results/). ~2 minutes.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import measure as bench  # first: sets the thread and wait-policy environment
from measure import HERE, ROBOTS

import numpy as np

import rbdgen
from rbdgen import registry
from rbdgen.toolchain.compiler import find_cxx

KERNELS = ("rnea", "aba", "aba_derivatives")
SIZES = (4, 16, 64, 256)
ROUNDS = 5


def _best(fns: dict, calls: int, rounds: int) -> dict:
    """Label → µs a call of its function: the best of ``rounds`` rounds of ``calls`` calls each,
    the functions taking turns within each round."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for label, fn in fns.items():
            t = time.perf_counter()
            for _ in range(calls):
                fn()
            best[label] = min(best[label], (time.perf_counter() - t) / calls * 1e6)
    return best


def _tuple(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def robot_rows(name: str, quick: bool) -> list[dict]:
    path, floating, _ = ROBOTS[name]
    m = rbdgen.load_urdf(str(path()), floating_base=floating)
    kern = rbdgen.build(m, kernels=KERNELS + ("rnea_fext",), progress=False)
    kern.parallel_ops = 10**15  # one thread: the fixed costs, not the team's
    rows = []
    for k in KERNELS:
        names = list(registry.get(k).input_names)
        X = registry.random_inputs(m, max(SIZES), names=names)
        f, method = getattr(kern, k), kern.methods[k]
        one = [X[n][0] for n in names]
        o1 = f(*one)
        single = _best({"one": lambda: f(*one, out=o1)}, 200 if quick else 2000, 2 if quick else ROUNDS)["one"]
        for n in SIZES[:2] if quick else SIZES:
            R = [X[x][:n] for x in names]
            L = [np.ascontiguousarray(a.T) for a in R]
            outR, outL = f(*R), f(*L, layout="states_last")
            fns = {"rows": lambda: f(*R, out=outR),
                   "states last (binding)": lambda: f(*L, out=outL, layout="states_last"),
                   "states last (method)": lambda: method(*L, out=outL, layout="states_last")}
            for a, b in zip(_tuple(outR), _tuple(outL)):
                assert np.array_equal(np.moveaxis(b, -1, 0), a), (name, k, n)  # the layouts agree
            calls = max(20, (200 if quick else 4000) // n)
            t = _best(fns, calls, 2 if quick else ROUNDS)
            rows.append({"robot": name, "kernel": k, "N": n, "one state": single, **t})
    # a variant's keyword against the variant by name, one state
    names = list(registry.get("rnea_fext").input_names)
    X = registry.random_inputs(m, 1, names=names)
    q, v, a, fe = (X[n][0] for n in names)
    o = kern.rnea(q, v, a)
    assert np.array_equal(kern.rnea(q, v, a, f_ext=fe), kern.rnea_fext(q, v, a, fe))
    t = _best({"rnea(..., f_ext=x)": lambda: kern.rnea(q, v, a, f_ext=fe, out=o),
               "rnea_fext(..., x)": lambda: kern.rnea_fext(q, v, a, fe, out=o)},
              200 if quick else 4000, 2 if quick else ROUNDS)
    rows.append({"robot": name, "kernel": "rnea f_ext", **t})
    return rows


def report(res: dict) -> str:
    m = res["machine"]
    lines = ["# What a call from Python costs beside its kernel", "",
             f"{m.get('cpu', '?')}, {m.get('cpus_available', '?')} CPUs available, "
             f"{' '.join(m.get('cpu_simd_flags', []))}; {res['date']}, revision {res.get('revision') or '?'}. "
             "`benchmarks/call_costs.py` says what each column is: µs a call from Python, `out=` given, one thread, "
             f"best of {res['rounds']} interleaved rounds; per state in brackets.", ""]
    for robot in dict.fromkeys(r["robot"] for r in res["rows"]):
        rows = [r for r in res["rows"] if r["robot"] == robot and "N" in r]
        lines += [f"## {robot}", "",
                  "| kernel | N | one state | rows | states last (binding) | states last (Python method) |",
                  "|---|---:|---:|---:|---:|---:|"]
        for r in rows:
            def c(x):
                return f"{r[x]:.2f} ({r[x] / r['N']:.3f})"
            lines.append(f"| {r['kernel']} | {r['N']} | {r['one state']:.2f} | {c('rows')} | "
                         f"{c('states last (binding)')} | {c('states last (method)')} |")
        fx = next(r for r in res["rows"] if r["robot"] == robot and r["kernel"] == "rnea f_ext")
        lines += ["", f"One state, `kern.rnea(q, v, a, f_ext=x)` {fx['rnea(..., f_ext=x)']:.2f} µs against "
                  f"`kern.rnea_fext(q, v, a, x)` {fx['rnea_fext(..., x)']:.2f} µs.", ""]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the iiwa, two sizes, two rounds: a smoke run")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    res = {"machine": bench.machine_info(find_cxx()), "date": time.strftime("%Y-%m-%d"),
           "revision": bench.git_revision(), "rounds": 2 if args.quick else ROUNDS, "rows": []}
    for robot in ("iiwa14",) if args.quick else ("iiwa14", "talos_reduced"):
        bench.log(f"call costs: {robot}")
        res["rows"] += robot_rows(robot, args.quick)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "call_costs.json").write_text(json.dumps(res, indent=1) + "\n")
    (args.out / "call_costs.md").write_text(report(res))
    print(report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
