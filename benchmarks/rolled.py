#!/usr/bin/env python3
"""Rolled against unrolled kernels (`make bench-rolled`, issue 44): build time and time per call
against robot size, and the choice ``unroll="auto"`` makes.

    python benchmarks/rolled.py             # the whole sweep (~25 min on 2 cores)
    python benchmarks/rolled.py --quick     # small sizes only, for a smoke run

1. **Chains** (benchmarks/scan.py's random chain, ``chain_urdf(n, seed=n, fixed_every=0)``), n = 10
   … 10 000: rnea, aba and rnea_scan, each lowering built from a cold compile cache in a process
   of its own (generation — tracing, rolling, printing — and compilation, on this machine's
   cores), and timed one state per call by the C++ driver of benchmarks/measure.py. The
   unrolled kernels only where they build in reasonable time (``--unrolled-ops``).
2. **The bench robots** (iiwa14, the quadruped and TALOS, floating): every kernel, unrolled,
   rolled and "auto": build time of all of them, and each kernel's time per call, timed after
   the three builds in ``ROUNDS`` alternating rounds (unrolled, rolled, auto, then the next
   round starting one later), best round kept: on a shared VM one run of one build against one
   run of another is noise at the 10 % that "auto" is held to (issue 44; docs/performance.md §48).

``--skip-chains`` / ``--skip-robots`` keep the other part's results from the rolled.json in --out.

Writes rolled.json and rolled.md to --out (default benchmarks/results/).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import measure as bench  # noqa: E402

CHAIN_SIZES = [10, 30, 100, 300, 1000, 3000, 10000, 100000]
QUICK_SIZES = [10, 30, 100]
CHAIN_KERNELS = ["rnea", "aba", "rnea_scan"]
#: at 10 000 links (seed 000's Fig. 1 scale) only the inverse dynamics, sequential and scan
BIG = 10000
BIG_KERNELS = ["rnea", "rnea_scan"]
#: at 100 000 links (the end of Fig. 1's axis) the sequential one alone (~10 min, 13 GB here):
#: the trace holds every operation of a kernel, and rnea_scan's would be ~3·10⁸ (2.5·10⁷ and
#: 11 GB at 10 000 links), past this machine's memory
HUGE = 100000
HUGE_KERNELS = ["rnea"]
ROBOTS = ["bundled:iiwa14", "quadruped-floating", "talos_reduced-floating"]
LOWERINGS = {"unrolled": True, "rolled": False, "auto": "auto"}
#: one build and its timings may take this long before it is given up (and reported so)
TIMEOUT_S = 1500
#: alternating rounds of the bench robots' drivers (each round: every kernel, the median of its runs)
ROUNDS = 5


def one(spec: str, lowering: str, kernels: list | None, quick: bool, timed: bool = True) -> dict:
    """Build ``kernels`` of ``spec`` with ``lowering`` from a cold cache and time each per call
    (``timed``; else leave the driver and its pool for :func:`time_rounds`)."""
    from rbdgen.toolchain.compiler import CACHE_ENV, find_cxx

    work = Path(tempfile.mkdtemp(prefix="rbdgen-rolled-"))
    os.environ[CACHE_ENV] = str(work / "cache")  # cold: nothing generated or compiled before
    import rbdgen
    from rbdgen import registry
    from rbdgen.targets.cpu.emit import generate_cpu
    from gpu_check import load_model

    model = load_model(spec, work)
    kernels = registry.applicable(model, kernels)
    unroll = LOWERINGS[lowering]
    t0 = time.perf_counter()
    kern = rbdgen.build(model, kernels=kernels, unroll=unroll, progress=False)
    build_s = time.perf_counter() - t0
    gen = generate_cpu(model, dtypes=("float64",), kernels=kernels, unroll=unroll, python=False)
    npool = 256 if model.nv <= 100 else 16
    pool_file = work / "pool.bin"
    pool_file.write_bytes(bench.pool_bytes(bench.states(model, np.random.default_rng(0), npool, kernels), model, kernels))
    exe = bench.build_driver(find_cxx(), gen, Path(kern.path), model, work)
    driver = {"exe": str(exe), "pool": str(pool_file), "npool": npool}
    timing = drive(driver, quick) if timed else {k: {"median": None} for k in kernels}
    return {"spec": spec, "lowering": lowering, "nb": model.nb, "nv": model.nv, "build_s": round(build_s, 2),
            "driver": driver,
            "kernels": {k: {"ns": timing[k]["median"], "ops": gen.kernels[k].counts["total"],
                            "lowering": gen.kernels[k].lowering, "statements": gen.kernels[k].n_statements
                            + sum(1 for line in gen.kernels[k].tables if line.startswith("  const S"))
                            # the kinds' code (CPU: printed apart, docs/performance.md §46)
                            + sum(sk.text.count("\n  const S") for sk in gen.kernels[k].kinds)}
                        for k in kernels}}


def drive(driver: dict, quick: bool) -> dict:
    """One run of a build's C++ driver: {kernel: {"median": ns, …}}, one state a call, one thread."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([driver["exe"], driver["pool"], str(driver["npool"]), "3" if quick else "5",
                        "10" if quick else "40"], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"the C++ driver failed ({r.returncode}): {r.stderr[-1000:]}")
    return json.loads(r.stdout)


def time_rounds(built: dict, rounds: int, quick: bool) -> None:
    """Time the builds of one robot (lowering → :func:`one`'s result, untimed) in ``rounds``
    alternating rounds, each starting one lowering later than the last; each kernel's ``ns`` is
    then its best round's median, ``round_ns`` every round's."""
    order = list(built)
    runs = {lw: [] for lw in order}
    for i in range(rounds):
        for lw in order[i % len(order):] + order[:i % len(order)]:
            runs[lw].append(drive(built[lw]["driver"], quick))
    for lw, r in built.items():
        best = bench.best_round(runs[lw])
        for k, cell in r["kernels"].items():
            cell["ns"], cell["round_ns"] = best[k]["median"], best[k]["round_medians"]
        r["rounds"] = rounds


def run_one(spec, lowering, kernels, quick, timed=True) -> dict:
    """:func:`one` in a process of its own (its own memory, caches and compile cache)."""
    cmd = [sys.executable, __file__, "--one", spec, lowering, ",".join(kernels or ["all"]), "--quick" if quick else "",
           "" if timed else "--untimed"]
    return run_json([c for c in cmd if c], spec, lowering, TIMEOUT_S)


def run_json(cmd: list, spec: str, lowering: str, timeout: float) -> dict:
    """Run ``cmd`` (a script's ``--one`` mode) and return the JSON of its last line, with the wall
    time; an error entry where it fails or takes longer than ``timeout`` seconds."""
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"spec": spec, "lowering": lowering, "error": f"not done in {timeout} s"}
    if r.returncode != 0:
        return {"spec": spec, "lowering": lowering, "error": (r.stderr or r.stdout).strip().splitlines()[-1][:300]}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def live_ops(spec: str, kernel: str) -> int:
    """Operations of the unrolled kernel (traced here, nothing compiled)."""
    from rbdgen import registry
    from gpu_check import load_model

    m = load_model(spec, Path(tempfile.mkdtemp()))
    return registry.trace(m, kernel).op_counts()["total"]


def report(res: dict) -> str:
    m = res["machine"]
    lines = ["# Rolled against unrolled kernels (issue 44)", "",
             f"{m.get('cpu', '?')}, {m.get('cpus_available', '?')} cores, {str(m.get('compiler', '?')).splitlines()[0]}; "
             f"`make bench-rolled`, {res['date']}, revision {res.get('revision') or '?'}.", "",
             "Build: generation (trace, roll, print) and compilation from a cold cache, in a fresh process, "
             "on all cores. Per call: one state, the C++ driver (thread CPU time, median of the runs; the bench "
             "robots: the best of alternating rounds of the three builds' drivers, below). "
             "ops: arithmetic operations a call does; code: statements printed (rolled: the kinds' code).", ""]
    for part in ("chains", "robots"):
        if res.get(f"{part}_from"):
            fr = res[f"{part}_from"]
            lines += [f"The {part} are from an earlier run ({fr.get('date')}, revision {fr.get('revision')}): this "
                      "one did not run them.", ""]
    if res["chains"]:
        lines += ["## Chains (random axes and link frames), rnea, aba, rnea_scan", "",
                  "| links | kernel | unrolled build s | rolled build s | unrolled µs/call | rolled µs/call | "
                  "rolled/unrolled | ops unrolled | ops rolled | code unrolled | code rolled |",
                  "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    by = {}
    for r in res["chains"]:
        by[(r["spec"], r["lowering"])] = r
    for spec in dict.fromkeys(r["spec"] for r in res["chains"]):
        u, ro = by.get((spec, "unrolled"), {}), by.get((spec, "rolled"), {})
        n = spec.split(":")[1]
        for k in (ro.get("kernels") or u.get("kernels") or {}):
            ku, kr = (u.get("kernels") or {}).get(k), (ro.get("kernels") or {}).get(k)

            def f(x, d=1):
                return "—" if x is None else f"{x:.{d}f}"
            lines.append(
                f"| {n} | {k} | {f(u.get('build_s')) if ku else u.get('error', 'not built (too big)')} | "
                f"{f(ro.get('build_s')) if kr else ro.get('error', '—')} | {f(ku and ku['ns'] / 1e3, 2)} | "
                f"{f(kr and kr['ns'] / 1e3, 2)} | {f(ku and kr and kr['ns'] / ku['ns'], 2)} | "
                f"{ku['ops'] if ku else '—'} | {kr['ops'] if kr else '—'} | {ku['statements'] if ku else '—'} | "
                f"{kr['statements'] if kr else '—'} |")
    notes = [f"{r['spec']} {r['lowering']}: {r['note']}" for r in res["chains"] if r.get("note")]
    if notes:
        lines += ["", "Rows run on their own: " + "; ".join(notes) + "."]
    if res["chains"]:
        lines += ["", "Build times are of one library holding the kernels of that size and lowering (the unrolled "
                  "ones: those of at most --unrolled-ops operations).", ""]
    lines += ["## Bench robots: every kernel", ""]
    rounds = max((r.get("rounds", 1) for r in res["robots"]), default=1)
    if rounds > 1:
        lines += [f"Per call: each kernel's best of {rounds} alternating rounds (unrolled, rolled, auto; the next "
                  "round starting one later), a round being the median of the driver's runs. *auto/best*: auto's "
                  "time over the better of unrolled and rolled; where auto built the same code as one of them "
                  "(*same as*), its ratio to that one is this run's noise. The issue's bar: auto/best ≤ 1.10.", ""]
    for spec in dict.fromkeys(r["spec"] for r in res["robots"]):
        rows = {r["lowering"]: r for r in res["robots"] if r["spec"] == spec}
        if any("error" in r for r in rows.values()):
            lines.append(f"{spec}: " + "; ".join(f"{lw}: {r['error']}" for lw, r in rows.items() if "error" in r))
            continue
        lines += [f"### {spec} (nv {rows['unrolled']['nv']})", "",
                  "build (all kernels, cold): " + ", ".join(f"{lw} {r['build_s']:.1f} s" for lw, r in rows.items()), "",
                  "| kernel | unrolled µs | rolled µs | rolled/unrolled | auto | auto/best | auto / same as |",
                  "|---|---:|---:|---:|---|---:|---:|"]
        over = []
        for k, ku in rows["unrolled"]["kernels"].items():
            kr, ka = rows["rolled"]["kernels"][k], rows["auto"]["kernels"][k]
            best = min(ku["ns"], kr["ns"])
            same = {"unrolled": ku, "rolled": kr}.get(ka["lowering"])
            if ka["ns"] / best > 1.10:
                over.append(f"{k} {ka['ns'] / best:.2f}")
            lines.append(f"| {k} | {ku['ns'] / 1e3:.2f} | {kr['ns'] / 1e3:.2f} | {kr['ns'] / ku['ns']:.2f} | "
                         f"{ka['lowering']} | {ka['ns'] / best:.2f} | "
                         f"{'—' if same is None else format(ka['ns'] / same['ns'], '.2f')} |")
        lines += ["", "auto/best over 1.10: " + (", ".join(over) if over else "none") + ".", ""]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--unrolled-ops", type=int, default=400_000,
                    help="build the unrolled kernels of a chain only while the biggest has at most this many "
                         "operations (default 400 000: a few minutes of g++ here)")
    ap.add_argument("--one", nargs=3, metavar=("SPEC", "LOWERING", "KERNELS"), help=argparse.SUPPRESS)
    ap.add_argument("--untimed", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--skip-robots", action="store_true")
    ap.add_argument("--skip-chains", action="store_true", help="the bench robots only (a few minutes)")
    ap.add_argument("--report", action="store_true", help="rewrite rolled.md from rolled.json in --out")
    args = ap.parse_args(argv)
    if args.one:
        spec, lowering, ks = args.one
        print(json.dumps(one(spec, lowering, None if ks == "all" else ks.split(","), args.quick, not args.untimed)))
        return 0
    if args.report:
        res = json.loads((args.out / "rolled.json").read_text())
        (args.out / "rolled.md").write_text(report(res))
        return 0
    from rbdgen.toolchain.compiler import find_cxx

    res = {"machine": bench.machine_info(find_cxx()), "date": time.strftime("%Y-%m-%d"),
           "revision": bench.git_revision(), "chains": [], "robots": []}
    old = args.out / "rolled.json"
    if (args.skip_chains or args.skip_robots) and old.exists():  # the part not run: as the last run left it
        prev = json.loads(old.read_text())
        for part, skipped in (("chains", args.skip_chains), ("robots", args.skip_robots)):
            if skipped:
                res[part] = prev.get(part, [])
                res[f"{part}_from"] = prev.get(f"{part}_from") or {"date": prev.get("date"),
                                                                   "revision": prev.get("revision")}
    for n in [] if args.skip_chains else (QUICK_SIZES if args.quick else CHAIN_SIZES):
        spec = f"chain:{n}"
        kernels = HUGE_KERNELS if n >= HUGE else BIG_KERNELS if n >= BIG else CHAIN_KERNELS
        # the unrolled kernels that build in reasonable time (by their operations)
        small = [k for k in kernels if n <= 1000 and live_ops(spec, k) <= args.unrolled_ops]
        for lowering in ("unrolled", "rolled"):
            ks = small if lowering == "unrolled" else kernels
            if not ks:
                res["chains"].append({"spec": spec, "lowering": lowering,
                                      "error": f"not built (over {args.unrolled_ops} operations)"})
                continue
            bench.log(f"chain {n}: {lowering} {','.join(ks)}")
            res["chains"].append(run_one(spec, lowering, ks, args.quick))
            bench.log(json.dumps(res["chains"][-1])[:400])
    if not args.skip_robots:
        for spec in ROBOTS[:1] if args.quick else ROBOTS:
            built = {}
            for lowering in LOWERINGS:
                bench.log(f"{spec}: {lowering}")
                built[lowering] = run_one(spec, lowering, None, args.quick, timed=False)
            if not any("error" in r for r in built.values()):
                bench.log(f"{spec}: timing, {ROUNDS} alternating rounds")
                time_rounds(built, 2 if args.quick else ROUNDS, args.quick)
            res["robots"].extend(built.values())
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rolled.json").write_text(json.dumps(res, indent=1) + "\n")
    (args.out / "rolled.md").write_text(report(res))
    print(report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
