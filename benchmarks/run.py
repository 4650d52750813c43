#!/usr/bin/env python3
"""rbdgen benchmarks: generated kernels vs the NumPy reference vs Pinocchio (C++), one run.

    python benchmarks/run.py                         # everything (what `make bench` runs)
    python benchmarks/run.py --robots iiwa14 --quick # a fast smoke run

For each robot: generation time, cold-cache build time, per-call time of every kernel for one
state (from C++ through a small driver linked to the generated library, and from Python through
``kern.<kernel>(…, out=…)``), time per state of batched calls (N states per call), the NumPy
reference per state, Pinocchio's C++ per call (benchmarks/pinocchio_bench.cpp, compiled
once against the headers and libraries of the pin wheel and cached under benchmarks/.build/), and
Pinocchio + CppADCodeGen's generated code per call (benchmarks/codegen_peer.py: the strongest CPU
peer, built from wheels and cached the same way; its outputs checked against rbdgen's).
Writes results.json and results.md (and results.png when matplotlib is importable) to --out.
See benchmarks/README.md for the method and its caveats.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# first: sets OPENBLAS_NUM_THREADS and OMP_WAIT_POLICY before NumPy and the OpenMP runtime load
import measure
from measure import (ALIASES, BUILD, CONSTRAINTS, FRAMES, HERE, ROBOTS, SITE, T0, VARIANT_MARCH, WARM_BUILD, OpenMP,
                     bench_batch, bench_model, bench_python_single, best_round, build_driver, loadavg, log, machine_info,
                     openmp_region_cost, peak_rate, pool_bytes, run_driver, states)

import numpy as np

import rbdgen
import rbdgen.targets.cpu
from rbdgen import registry
from rbdgen.targets.cpu import generate_cpu
from rbdgen.toolchain.compiler import CACHE_ENV, cxx_flags, find_cxx, resolve_march

from peers import (PIN_BUILDS, PIN_KEY, bench_reference, build_pinocchio_harness, dump_pinocchio_model,
                   ensure_pinocchio_headers, run_pinocchio, write_constraints)
import codegen_peer
import peer_ops
from plot import plot
from report import GOAL_BUILD_KERNELS, GOAL_BUILD_S, markdown

# This file is the command line and, per robot, the order in which things are built and timed; the
# rest lives beside it: measure.py (the robots and kernels, the machine, timing helpers, the C++
# driver, rbdgen's single-state, batch and build timings), peers.py (the Pinocchio harness and the
# NumPy reference), codegen_peer.py (Pinocchio + CppADCodeGen), report.py (results.md: cells, ratios, the goals table) and plot.py (results.png).


# ---- one robot --------------------------------------------------------------------------------

def bench_robot(name: str, args, cxx: str, omp: OpenMP, pin_exes: dict, cg_gen: dict | None = None) -> dict:
    path_fn, floating, desc = ROBOTS[name]
    urdf = path_fn()
    log(f"== {name}: {urdf}")
    t = time.perf_counter()
    model = bench_model(name, urdf, floating)
    load_s = time.perf_counter() - t
    res = {"description": desc, "urdf": str(urdf).replace(str(SITE), "$SITE_PACKAGES").replace(str(HERE.parent), "."),
           "floating_base": floating, "nq": model.nq, "nv": model.nv, "nb": model.nb, "load_s": round(load_s, 3),
           "load_average_at_start": loadavg()}
    t = time.perf_counter()
    only = {"kernels": measure.KERNELS} if args.kernels else {}  # --kernels
    gen = generate_cpu(model, dtypes=("float64",), **only)
    res["generate_s"] = round(time.perf_counter() - t, 2)
    res["op_counts"] = {k: pk.counts for k, pk in gen.kernels.items()}
    # multiplies in ∇FD's looped products (−M⁻¹·∂τ), which run in vectors even for one state
    res["product_muls"] = {k: sum(mm.op_counts()[0] for mm in registry.trace(model, k).post) for k in gen.kernels}
    res["values_per_state"] = {k: {"in": sum(int(a.size) for a in pk.inputs), "out": sum(int(a.size) for a in pk.outputs)}
                               for k, pk in gen.kernels.items()}
    log(f"{name}: nq={model.nq} nv={model.nv} nb={model.nb}; generated in {res['generate_s']} s")

    rng = np.random.default_rng(12345)
    pool = states(model, rng, 256)
    work = Path(tempfile.mkdtemp(prefix=f"rbdgen-bench-{name}-"))
    pool_file = work / "pool.bin"
    pool_file.write_bytes(pool_bytes(pool, model, gen.kernels))

    res["variants"] = {}
    drivers, kerns = {}, {}
    try:
        for variant in args.variants:
            march = VARIANT_MARCH[variant]
            cache = work / f"cache-{variant}"
            old = os.environ.get(CACHE_ENV)
            os.environ[CACHE_ENV] = str(cache)  # a fresh, empty compile cache: a cold build
            try:
                log(f"{name} [{variant}]: rbdgen.build (cold cache) …")
                t = time.perf_counter()
                kern = rbdgen.build(model, dtype="float64", march=march, **only)
                build_s = time.perf_counter() - t
                # a new process building the same kernels: what a user pays at every start once the
                # caches are warm (generation cache and compile cache; rbdgen.toolchain.gencache)
                warm = subprocess.run([sys.executable, "-c", WARM_BUILD, str(urdf), "floating" if floating else "fixed",
                                       ",".join(FRAMES[name]), str(march), ",".join(measure.KERNELS) if only else "",
                                       ",".join(CONSTRAINTS.get(name, []))],
                                      capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
                warm_s = float(warm.stdout.split()[-1]) if warm.returncode == 0 else None
                if warm_s is None:
                    log(f"{name} [{variant}]: warm build failed: {(warm.stderr or warm.stdout).strip()[-300:]}")
            finally:
                if old is None:
                    os.environ.pop(CACHE_ENV, None)
                else:
                    os.environ[CACHE_ENV] = old
            lib = Path(kern.path)
            resolved = resolve_march(march)
            v = {"march": resolved, "flags": " ".join(cxx_flags(opt="-O3", march=resolved)), "build_s": round(build_s, 1),
                 "compile_s": round(build_s - res["generate_s"], 1), "lanes": kern.lanes,
                 "kernel_lanes": dict(kern.kernel_lanes),
                 "warm_build_s": None if warm_s is None else round(warm_s, 2),
                 "library_bytes": lib.stat().st_size}
            log(f"{name} [{variant}]: built in {v['build_s']} s; in a new process, caches warm: {v['warm_build_s']} s")
            if variant == "default" and name in GOAL_BUILD_S and not only:
                # the build-time goal was set when rbdgen had these kernels: that build too
                os.environ[CACHE_ENV] = str(work / "cache-goal-kernels")
                try:
                    t = time.perf_counter()
                    rbdgen.build(model, dtype="float64", kernels=GOAL_BUILD_KERNELS)
                    v["build_goal_kernels_s"] = round(time.perf_counter() - t, 1)
                finally:
                    if old is None:
                        os.environ.pop(CACHE_ENV, None)
                    else:
                        os.environ[CACHE_ENV] = old
                log(f"{name} [{variant}]: the {len(GOAL_BUILD_KERNELS)} kernels of the build goal built in "
                    f"{v['build_goal_kernels_s']} s")
            drv = work / f"driver-{variant}"
            drv.mkdir()
            drivers[variant] = build_driver(cxx, gen, lib, model, drv)
            log(f"{name} [{variant}]: batches N={','.join(map(str, args.sizes))} …")
            threads = sorted({omp.default, 1}, reverse=True)
            v["batch_threads"] = threads
            v["batch_ns_per_state"] = bench_batch(kern, model, rng, args.sizes, threads, omp, args.quick)
            res["variants"][variant] = v
            kerns[variant] = kern

        # Pinocchio + CppADCodeGen: its libraries (cached; a cold build compiles for minutes) and
        # its harness over the same pool
        cg = None
        if cg_gen is not None:
            try:
                t = time.perf_counter()
                peer = codegen_peer.build_peer(cg_gen, cxx, urdf, floating, measure.KERNELS, args.codegen_timeout)
                log(f"{name}: Pinocchio + CppADCodeGen peer ready in {time.perf_counter() - t:.1f} s")
                try:  # the arithmetic of its generated C, beside rbdgen's op counts (peer_ops.py)
                    res["pinocchio_codegen_ops"] = peer_ops.count_peer(cg_gen, urdf, floating, list(peer["kernels"]))
                except (RuntimeError, ValueError) as e:  # reported, not fatal
                    res["pinocchio_codegen_ops_error"] = str(e)[-500:]
                    log(f"{name}: the peer's operations not counted: {e}")
                built = codegen_peer.build_harness(cxx, peer, work)
                if built:
                    cg = {"peer": peer, "exe": built[0], "funcs": built[1], "in": work / "cg_in.bin",
                          "out": work / "cg_out.bin", "rounds": []}
                    codegen_peer.write_inputs(pool, cg["funcs"], cg["in"])
                else:
                    res["pinocchio_codegen"] = codegen_peer.summarise(peer, [], {})
            except Exception as e:  # reported, not fatal
                res["pinocchio_codegen_error"] = str(e)[-1500:]
                log(f"{name}: Pinocchio + CppADCodeGen left out: {e}")

        log(f"{name}: NumPy reference N={','.join(map(str, args.ref_sizes))} …")
        res["reference_ns_per_state"] = bench_reference(model, rng, args.ref_sizes, args.quick)

        # one state: rbdgen's builds (C++ and Python) and Pinocchio's taking turns, a few rounds;
        # another process that slows one of them for a few seconds then does not decide a ratio
        pin_exes = dict(pin_exes)
        model_file = work / "pinocchio_model.txt"
        if "native" in pin_exes:
            try:
                dump_pinocchio_model(urdf, floating, model_file)
            except Exception as e:  # reported, not fatal: the portable harness still runs
                res["pinocchio_native_error"] = str(e)
                log(f"{name}: native Pinocchio left out: {e}")
                pin_exes.pop("native")
        rounds = 1 if args.quick else 3
        cpp = {variant: [] for variant in drivers}
        py = {variant: [] for variant in drivers}
        pin = {build: [] for build in pin_exes}
        cons_file = work / "pinocchio_constraints.txt"
        if pin_exes:
            try:
                write_constraints(urdf, floating, CONSTRAINTS.get(name, []), cons_file)
            except Exception as e:  # reported, not fatal: the harness runs without constraintDynamics
                res["pinocchio_constraints_error"] = str(e)
                log(f"{name}: Pinocchio's constraintDynamics left out: {e}")
                cons_file = None
        for i in range(rounds):
            log(f"{name}: one state, round {i + 1}/{rounds}: rbdgen {', '.join(drivers)} (C++, Python)"
                + (f", Pinocchio {', '.join(pin)}" if pin else "") + (", Pinocchio + CppADCodeGen" if cg else ""))
            for variant, exe in drivers.items():
                cpp[variant].append(run_driver(exe, pool_file, args.quick))
                py[variant].append(bench_python_single(kerns[variant], pool, args.quick))
            for build in list(pin):
                try:
                    pin[build].append(run_pinocchio(pin_exes[build], urdf, floating, args.quick,
                                                    model_file if build == "native" else None, cons_file))
                except Exception as e:  # reported, not fatal
                    res[PIN_KEY[build] + "_error"] = str(e)
                    log(f"{name}: Pinocchio ({build}) failed: {e}")
                    del pin[build]
            if cg:
                try:
                    cg["rounds"].append(codegen_peer.run_harness(cg["exe"], cg["in"], cg["out"], args.quick))
                except Exception as e:  # reported, not fatal
                    res["pinocchio_codegen_error"] = str(e)
                    log(f"{name}: Pinocchio + CppADCodeGen failed: {e}")
                    cg = None
        if cg and cg["rounds"]:
            # the same states through rbdgen (default build) and the NumPy reference
            outs = codegen_peer.read_outputs(cg["peer"], cg["funcs"], cg["out"])
            agree = codegen_peer.agreement(model, kerns.get("default") or next(iter(kerns.values())), pool, outs)
            res["pinocchio_codegen"] = codegen_peer.summarise(cg["peer"], cg["rounds"], agree)
            for f, a in agree.items():
                log(f"{name}: Pinocchio + CppADCodeGen {f}: max relative difference {a['max_rel_err_vs_rbdgen']:.1e} "
                    f"vs rbdgen, {a['max_rel_err_vs_reference']:.1e} vs the reference{'' if a['ok'] else '  FAIL'}")
        for variant in drivers:
            res["variants"][variant]["cpp_single_ns"] = best_round(cpp[variant])
            res["variants"][variant]["python_single_ns"] = best_round(py[variant])
        for build, runs in pin.items():
            p = dict(runs[0], rounds=len(runs), ns_per_call=best_round([x["ns_per_call"] for x in runs]), build=build)
            if (p["nq"], p["nv"]) != (model.nq, model.nv):
                p["note"] = f"Pinocchio's nq/nv ({p['nq']}/{p['nv']}) differ from rbdgen's ({model.nq}/{model.nv})"
            res[PIN_KEY[build]] = p
        # the native harness builds its model from the dumped file: it must compute what the
        # portable one (the wheel's URDF parser) does, on the same states
        if "pinocchio" in res and "pinocchio_native" in res:
            a, b = float(res["pinocchio"]["checksum"]), float(res["pinocchio_native"]["checksum"])
            if abs(a - b) > 1e-8 * max(1.0, abs(a)):
                res["pinocchio_native_error"] = (f"checksum {b!r} differs from the portable harness's {a!r}: "
                                                 "not the same model; its timings are left out")
                log(f"{name}: {res['pinocchio_native_error']}")
                del res["pinocchio_native"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


# ---- main -------------------------------------------------------------------------------------

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--robots", default="iiwa14,quadruped,talos_reduced",
                   help="comma-separated: " + ", ".join(ROBOTS) + " (default: all)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: short timings, default build only, N up to 1024, reference N=1")
    p.add_argument("--variants", default=None, help="comma-separated builds: default (this machine, "
                   "-march=native), portable (any x86-64) (default: both; --quick: default)")
    p.add_argument("--sizes", default=None, help="batch sizes (default 1,64,256,1024,16384; --quick: 1,64,1024)")
    p.add_argument("--ref-sizes", default=None, help="reference batch sizes (default 1,16; --quick: 1)")
    p.add_argument("--no-pinocchio", action="store_true", help="skip Pinocchio (and Pinocchio + CppADCodeGen)")
    p.add_argument("--no-codegen", action="store_true", help="skip Pinocchio + CppADCodeGen")
    p.add_argument("--codegen-timeout", type=float, default=codegen_peer.DEFAULT_TIMEOUT_S,
                   help="seconds: a Pinocchio + CppADCodeGen kernel whose compile takes longer is left out, the "
                   f"reason reported (and cached) (default {codegen_peer.DEFAULT_TIMEOUT_S:g})")
    p.add_argument("--kernels", default=None, help="comma-separated kernels to time (default: all; the "
                   "goals table then covers only these)")
    p.add_argument("--out", default=None, help="results folder (default benchmarks/results; --quick: "
                   "benchmarks/.build/quick-results)")
    args = p.parse_args(argv)
    names = [ALIASES.get(n.strip(), n.strip()) for n in args.robots.split(",") if n.strip()]
    bad = [n for n in names if n not in ROBOTS]
    if bad:
        p.error(f"unknown robot(s) {', '.join(bad)}; known: {', '.join(ROBOTS)}")
    args.variants = (args.variants or ("default" if args.quick else "default,portable")).split(",")
    if any(v not in VARIANT_MARCH for v in args.variants):
        p.error("--variants takes default and/or portable")
    args.sizes = [int(x) for x in (args.sizes or ("1,64,1024" if args.quick else "1,64,256,1024,16384")).split(",")]
    args.ref_sizes = [int(x) for x in (args.ref_sizes or ("1" if args.quick else "1,16")).split(",")]
    out = Path(args.out) if args.out else (BUILD / "quick-results" if args.quick else HERE / "results")
    if args.kernels:
        want = [k.strip() for k in args.kernels.split(",") if k.strip()]
        # the opt-in kernels (fd_derivatives_minv, the Schur kernels) are timed when named
        known = tuple(k for k in registry.kernels() if k in measure.KERNELS or registry.get(k).opt_in)
        unknown = [k for k in want if k not in known]
        if unknown:
            p.error(f"unknown kernel(s) {', '.join(unknown)}; known: {', '.join(known)}")
        measure.KERNELS = tuple(k for k in known if k in want)
        measure.SIGS = {k: registry.get(k).input_names for k in measure.KERNELS}

    cxx = find_cxx()
    omp = OpenMP()
    results = {"argv": " ".join(sys.argv[1:] if argv is None else argv), "machine": machine_info(cxx),
               "flags": {vn: " ".join(cxx_flags(opt="-O3", march=resolve_march(m))) for vn, m in VARIANT_MARCH.items()},
               "omp_threads": omp.default, "kernels": list(measure.KERNELS), "robots": {},
               "parallel_ops": getattr(rbdgen.targets.cpu, "PARALLEL_OPS", None)}
    results["openmp_empty_region_us"] = openmp_region_cost(cxx)
    results["peak"], results["peak_scalar_mul"] = {}, {}
    for variant in args.variants:
        march = VARIANT_MARCH[variant]
        lanes = rbdgen.targets.cpu.default_lanes("float64", march)
        lanes = max(lanes) if isinstance(lanes, tuple) else lanes  # the widest the build's kernels use
        results["peak"][variant] = peak_rate(cxx, cxx_flags(opt="-O3", march=resolve_march(march)), lanes)
        log(f"peak multiply/add rate, one core, {variant} build ({lanes} lanes): {results['peak'][variant]}")
        results["peak_scalar_mul"][variant] = peak_rate(cxx, cxx_flags(opt="-O3", march=resolve_march(march)), 1,
                                                        mul_only=True)
        log(f"scalar multiply rate, one core, {variant} build: {results['peak_scalar_mul'][variant]}")
    log(f"empty OpenMP parallel region, µs by wait policy: {results['openmp_empty_region_us']}")
    log(f"machine: {results['machine']['cpu']}, {results['machine']['logical_cpus']} CPUs, "
        f"{results['machine']['compiler']}; OpenMP threads {omp.default}")

    pin_exes = {}
    if args.no_pinocchio:
        results["pinocchio_skipped"] = "--no-pinocchio"
    else:
        why = ensure_pinocchio_headers()
        if why:
            results["pinocchio_skipped"] = why
            log(f"Pinocchio skipped: {why}")
        else:
            for build in PIN_BUILDS:
                try:
                    info = build_pinocchio_harness(cxx, build)
                except RuntimeError as e:
                    if build == "portable":
                        raise
                    results["pinocchio_native_skipped"] = str(e)[-500:]
                    log(f"native Pinocchio harness left out: {e}")
                    continue
                results["pinocchio_harness" + ("" if build == "portable" else "_native")] = info
                pin_exes[build] = info["binary"]

    cg_gen = None
    if args.no_pinocchio or args.no_codegen:
        results["pinocchio_codegen_skipped"] = "--no-pinocchio" if args.no_pinocchio else "--no-codegen"
    else:
        why = codegen_peer.ensure_codegen_wheels()
        if why is None:
            try:
                cg_gen = codegen_peer.build_generator(cxx)
                results["pinocchio_codegen_generator"] = cg_gen
            except RuntimeError as e:
                why = str(e)[-500:]
        if why:
            results["pinocchio_codegen_skipped"] = why
            log(f"Pinocchio + CppADCodeGen skipped: {why}")

    for name in names:
        results["robots"][name] = bench_robot(name, args, cxx, omp, pin_exes, cg_gen)

    results["wall_s"] = round(time.perf_counter() - T0, 1)
    out.mkdir(parents=True, exist_ok=True)
    if plot(results, out / "results.png"):
        results["plot"] = "results.png"
    else:
        (out / "results.png").unlink(missing_ok=True)
        log("matplotlib not importable: no plot")
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "results.md").write_text(markdown(results))
    log(f"wrote {out / 'results.json'} and {out / 'results.md'} ({results['wall_s'] / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
