"""rbdgen benchmarks, the report: results.md from a run's results (the dict written as results.json).

How a timing cell is shown (median, † when its runs disagree, ratios), which Pinocchio build each
rbdgen build is set against, the table against Pinocchio + CppADCodeGen (issue 49), the speed goals
of issues 11 and 49 and their table, and the whole Markdown.
"""
from __future__ import annotations

import measure
from codegen_peer import AGREE_TOL, CG_KERNELS
from peers import PIN_KEY
from rbdgen.targets.cpu import LARGE_OPT, LARGE_STATEMENTS, NO_SLP


# ---- report -----------------------------------------------------------------------------------

def fmt_ns(ns) -> str:
    if ns is None:
        return "–"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e4:
        return f"{ns / 1e3:.1f} µs"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def ratio(a, b) -> str:
    return "–" if not a or not b else f"{a / b:.2f}×"


NOISY = 0.25  # a cell whose runs spread more than this (max − min over median) is marked †


def cell(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d if isinstance(d, dict) and "median" in d else None


def med(d, *keys):
    c = cell(d, *keys)
    return c["median"] if c else None


def noisy(c) -> bool:
    runs = (c or {}).get("runs") or []
    return len(runs) > 1 and (max(runs) - min(runs)) > NOISY * c["median"]


def fmt(d, *keys) -> str:
    """The median of a timing cell, marked † when its runs disagree."""
    c = cell(d, *keys)
    return fmt_ns(c["median"] if c else None) + (" †" if noisy(c) else "")


#: the Pinocchio harness each rbdgen build is set against: built the same way
PIN_FOR = {"default": PIN_KEY["native"], "portable": PIN_KEY["portable"]}


def pin_key(r, variant: str) -> str:
    """Where the Pinocchio figures for rbdgen's ``variant`` build are: the harness built the same
    way, else (no native harness) the portable one."""
    k = PIN_FOR.get(variant, "pinocchio")
    return k if k in r else "pinocchio"


def best_pin(r, k) -> str:
    """The Pinocchio harness build that ran kernel ``k`` faster (the one the goals compare with)."""
    have = [key for key in ("pinocchio_native", "pinocchio") if med(r, key, "ns_per_call", k)]
    return min(have, key=lambda key: med(r, key, "ns_per_call", k)) if have else "pinocchio"


#: the speed goals of issue 11, checked in every run: one state vs Pinocchio (by robot), a
#: 4-lane batch vs its own single-state call, build time (s), Python overhead (ns), iiwa rnea batch
GOAL_ONE_STATE = {"iiwa14": 4.0, "quadruped": 4.0, "talos_reduced": 2.0}
GOAL_BATCH_SPEEDUP = 2.5
GOAL_BUILD_S = {"iiwa14": 5.0, "talos_reduced": 40.0}
#: the kernels rbdgen had when the build-time goals were set (issue 11): their build is reported
#: next to the build of all kernels
GOAL_BUILD_KERNELS = ("rnea", "nle", "gravity", "crba", "aba", "minv", "rnea_derivatives", "aba_derivatives")
GOAL_PY_OVERHEAD_NS = 500.0
#: issue 49: one state against Pinocchio + CppADCodeGen (the same run), every kernel it has
GOAL_ONE_STATE_CODEGEN = {"iiwa14": 2.5, "quadruped": 2.5, "talos_reduced": 2.0}
GOAL_IIWA_RNEA_BATCH_NS = 60.0
#: the batch size whose outputs stay in the core's caches (L2) for every robot here: the batch
#: path's speed without the memory traffic of 16384 states (docs/performance.md §12)
IN_CACHE_N = 256


def mark(ok) -> str:
    return "" if ok is None else (" ✓" if ok else " ✗")


def ratio_text(x: float, goal: float | None) -> str:
    """``x`` as a ratio: two decimals, three where two would round a miss up to the goal (3.996
    shown as "4.00× ✗" reads as a contradiction)."""
    return f"{x:.3f}×" if goal and x < goal <= float(f"{x:.2f}") else f"{x:.2f}×"


def goals_markdown(results: dict) -> list[str]:
    """Each goal of issue 11, per robot and kernel: the measured figure, ✓ met or ✗ missed."""
    L = ["## Goals: met (✓) or how far (✗)", ""]
    peak = results.get("peak", {})
    if peak:
        L.append("Roofline: the kernel's multiplies and adds (the generated code's op count; sine/cosine and "
                 "divisions not counted) × states ÷ (time × one core's peak multiply/add rate, measured by "
                 "`benchmarks/peak.cpp` with the same flags and SIMD width: independent chains of vector "
                 "multiplies and adds; the kernels are contracted to FMAs where the build has them, which on "
                 "cores with separate add pipes, as AMD's, leaves this rate their bound, and on cores whose adds "
                 "share the FMA pipes can beat it): "
                 + "; ".join(f"{vn} build {p['ops_per_s'] / 1e9:.1f} G ops/s ({p['lanes']} lanes)"
                             for vn, p in peak.items() if "ops_per_s" in p) + ".")
    mul_peak = results.get("peak_scalar_mul", {}).get("default", {}).get("ops_per_s")
    wide = peak.get("default", {}).get("lanes", 1)
    if mul_peak:
        L.append(f"One state's multiply bound: every multiply of one state's straight-line code takes one of the "
                 f"core's multiply/FMA slots, fused with an add or not, so it cannot run faster than its multiplies ÷ "
                 f"the scalar multiply rate ({mul_peak / 1e9:.1f} G/s here, `peak.cpp -DMUL_ONLY -DLANES=1`, "
                 f"default build's flags); ∇FD's products count as {wide}-lane vectors. The column gives the "
                 "fraction of that bound the default build's one-state call reaches (sine/cosine, divisions, "
                 "loads and stores not counted: 100% is out of reach).")
    if peak or mul_peak:
        L.append("")
    hdr = ["robot", "kernel", "one state vs Pinocchio (its faster build)", "one state vs Pinocchio + CppADCodeGen",
           "one state: multiply bound",
           "default batch vs its single state (1 thread)",
           f"the same, N = {IN_CACHE_N} (in cache)", "values written per state", "roofline, default batch (1 thread)",
           "roofline, portable batch (1 thread)", "Python overhead (default)"]
    L += ["| " + " | ".join(hdr) + " |", "|---|---|" + "---:|" * (len(hdr) - 2)]
    for name, r in results["robots"].items():
        goal = GOAL_ONE_STATE.get(name)
        for k in measure.KERNELS:
            one = med(r, "variants", "default", "cpp_single_ns", k)
            theirs = med(r, best_pin(r, k), "ns_per_call", k)
            row = [name, k]
            row.append(ratio_text(theirs / one, goal) + mark(theirs / one >= goal if goal else None)
                       if one and theirs else "–")
            cg = med(r, "pinocchio_codegen", "ns_per_call", k)
            cgoal = GOAL_ONE_STATE_CODEGEN.get(name)
            row.append(ratio_text(cg / one, cgoal) + mark(cg / one >= cgoal if cgoal else None) if one and cg else "–")
            pm = r.get("product_muls", {}).get(k, 0)
            slots = r["op_counts"][k]["mul"] - pm + pm / wide
            row.append(f"{100 * slots / (one * 1e-9 * mul_peak):.0f}%" if one and mul_peak else "–")
            nat = r["variants"].get("default", {})
            big = max((int(n) for n in nat.get("batch_ns_per_state", {}).get("1", {}).get(k, {})), default=None)
            nb = med(nat, "batch_ns_per_state", "1", k, str(big)) if big else None
            ns = med(nat, "cpp_single_ns", k)
            kl = nat.get("kernel_lanes", {}).get(k)
            row.append(f"{ratio_text(ns / nb, GOAL_BATCH_SPEEDUP)} ({fmt_ns(ns)} → {fmt_ns(nb)}"
                       f"{f', {kl} lanes' if kl else ''}){mark(ns / nb >= GOAL_BATCH_SPEEDUP)}"
                       if nb and ns else "–")
            nc = med(nat, "batch_ns_per_state", "1", k, str(IN_CACHE_N))
            row.append(f"{ns / nc:.2f}× ({fmt_ns(nc)})" if nc and ns else "–")
            vals = r.get("values_per_state", {}).get(k)
            row.append(f"{vals['out']}" if vals else "–")
            ops = r["op_counts"][k]["mul"] + r["op_counts"][k]["add"]
            for vn in ("default", "portable"):
                v = r["variants"].get(vn, {})
                bb = max((int(n) for n in v.get("batch_ns_per_state", {}).get("1", {}).get(k, {})), default=None)
                t = med(v, "batch_ns_per_state", "1", k, str(bb)) if bb else None
                rate = peak.get(vn, {}).get("ops_per_s")
                row.append(f"{100 * ops / (t * 1e-9 * rate):.0f}%" if t and rate else "–")
            py = med(r, "variants", "default", "python_single_ns", k)
            row.append(f"{py - one:.0f} ns{mark(py - one <= GOAL_PY_OVERHEAD_NS)}" if py and one else "–")
            L.append("| " + " | ".join(row) + " |")
    L += ["", f"Goals: one state ≥ {GOAL_ONE_STATE['iiwa14']:g}× Pinocchio on iiwa14 and the quadruped, "
          f"≥ {GOAL_ONE_STATE['talos_reduced']:g}× on TALOS (rbdgen's default build, which is for this machine, against "
          "the faster of Pinocchio's two harness builds, portable and -march=native, kernel by kernel); "
          f"one state ≥ {GOAL_ONE_STATE_CODEGEN['iiwa14']:g}× Pinocchio + CppADCodeGen on iiwa14 and the quadruped, "
          f"≥ {GOAL_ONE_STATE_CODEGEN['talos_reduced']:g}× on TALOS (issue 49; the section above); "
          f"the default build's batch (4 doubles per vector with AVX; with AVX-512, 8 for the kernels whose "
          f"arithmetic pays for them, rbdgen.targets.cpu.kernel_lanes) ≥ {GOAL_BATCH_SPEEDUP:g}× faster "
          f"per state than the same build's single-state call; Python overhead (Python call − C++ call, one state) "
          f"≤ {GOAL_PY_OVERHEAD_NS:g} ns. The batch goal is checked at the largest N, where a kernel that writes many "
          f"values per state streams them to memory (16384 frame Jacobians of the quadruped are 57 MB); the "
          f"N = {IN_CACHE_N} column is the same batch path with its outputs in the core's L2. (A single-state figure "
          "writes one output buffer over and over, which stays in L1; docs/performance.md §12.)", ""]
    lines = []
    for name, limit in GOAL_BUILD_S.items():
        r = results["robots"].get(name)
        if r and "default" in r["variants"]:
            b = r["variants"]["default"]["build_s"]
            lines.append(f"- Build, default, all {len(measure.KERNELS)} kernels, {name}: {b:.1f} s (goal ≤ {limit:g} s){mark(b <= limit)}")
            g = r["variants"]["default"].get("build_goal_kernels_s")
            if g is not None:
                lines.append(f"- Build, default, the {len(GOAL_BUILD_KERNELS)} kernels rbdgen had when the goal was set "
                             f"({', '.join(GOAL_BUILD_KERNELS)}), {name}: {g:.1f} s (goal ≤ {limit:g} s){mark(g <= limit)}")
    r = results["robots"].get("iiwa14")
    if r:
        for vn, v in r["variants"].items():
            big = max((int(n) for n in v["batch_ns_per_state"].get("1", {}).get("rnea", {})), default=None)
            t = med(v, "batch_ns_per_state", "1", "rnea", str(big)) if big else None
            if t:
                lanes = v.get("kernel_lanes", {}).get("rnea", v["lanes"])
                lines.append(f"- iiwa14 rnea, batch of {big} on one core, {vn} build ({lanes} lanes): "
                             f"{fmt_ns(t)} per state (goal ≤ {GOAL_IIWA_RNEA_BATCH_NS:g} ns){mark(t <= GOAL_IIWA_RNEA_BATCH_NS)}")
    return L + lines + ["", "Why each ✗ is a ✗, and what would close it: docs/performance.md, \"Where rbdgen is still slow\".", ""]


def ops_ratio(r: dict, func: str, kernel: str) -> str:
    """The peer's arithmetic (``func``, its generated C; benchmarks/peer_ops.py) over rbdgen's
    (``kernel``'s op counts), multiplies, adds and divisions; "–" where either was not counted."""
    peer = r.get("pinocchio_codegen_ops", {}).get(func)
    ours = r.get("op_counts", {}).get(kernel)
    if not peer or not ours:
        return "–"
    return ratio(peer["arith"], ours["mul"] + ours["add"] + ours["div"])


def codegen_markdown(results: dict) -> list[str]:
    """Per robot: Pinocchio, Pinocchio + CppADCodeGen and rbdgen, one state and batch, with the
    peer's agreement with rbdgen and its build times."""
    robots = {n: r for n, r in results["robots"].items() if "pinocchio_codegen" in r or "pinocchio_codegen_error" in r}
    if not robots:
        why = results.get("pinocchio_codegen_skipped")
        return ["## Against Pinocchio + CppADCodeGen", "", f"Not measured: {why}.", ""] if why else []
    gen = results.get("pinocchio_codegen_generator", {})
    L = ["## Against Pinocchio + CppADCodeGen", "",
         "Pinocchio's algorithms recorded on CppAD's `AD<CG<double>>` scalars and written as C by CppADCodeGen "
         f"(pin {gen.get('versions', {}).get('pin', '?')}, cmeel-cppadcodegen "
         f"{gen.get('versions', {}).get('cmeel-cppadcodegen', '?')}, cmeel-cppad {gen.get('versions', {}).get('cmeel-cppad', '?')}"
         f"; generator `benchmarks/pinocchio_codegen.cpp`, compiled once in {gen.get('compile_s', '?')} s"
         f"{' (cached)' if gen.get('cached') else ''}), each kernel's C compiled with `gcc "
         f"{next((r['pinocchio_codegen'].get('cflags') for r in robots.values() if 'pinocchio_codegen' in r), '?')}` and "
         "its generated function called on packed inputs over the same 256 states as rbdgen's driver, same method "
         "and rounds (benchmarks/README.md). *cg / rbdgen* = the peer's time / rbdgen's (medians); *fastest runs*: "
         "the same ratio of each side's fastest run, which another process on a shared machine can only slow (it "
         "usually moves less between runs than the medians' ratio; docs/performance.md §54). *operations*: the peer's "
         "multiplies, adds/subtractions and divisions in its generated C over rbdgen's (benchmarks/peer_ops.py; "
         "above 1× rbdgen computes less), so *cg / rbdgen* ÷ *operations* is how much faster each operation runs. "
         "Batch: rbdgen's batch path "
         "(default build, one thread, the largest N) against the peer one state at a time. *agreement*: max |peer − "
         f"rbdgen| over each state's output / max(1, its largest entry), all 256 states; FAIL above {AGREE_TOL:g} "
         "(the NumPy reference on 4 states is in results.json). crba and aba: the faster of Pinocchio's LOCAL and "
         "WORLD conventions (W: WORLD); crba and minv write the upper triangle only (as Pinocchio fills it), "
         "∇ID without ∂τ/∂a = M (rbdgen's does not return it either).", ""]
    for name, r in robots.items():
        c = r.get("pinocchio_codegen", {})
        L += [f"### {name}", ""]
        if "pinocchio_codegen_error" in r:
            L += [f"Failed: {r['pinocchio_codegen_error'][:500]}", ""]
        if not c:
            continue
        nat = r.get("variants", {}).get("default", {})
        big = max((int(n) for n in nat.get("batch_ns_per_state", {}).get("1", {}).get("rnea", {})), default=None)
        hdr = ["kernel", "Pinocchio", "Pinocchio + CppADCodeGen", "rbdgen", "cg / rbdgen", "fastest runs", "operations",
               "Pinocchio / rbdgen",
               f"rbdgen batch (N={big}, 1 thread)", "cg / rbdgen batch", "agreement", "peer build: gcc wall (CPU)"]
        L += ["| " + " | ".join(hdr) + " |", "|---|" + "---:|" * (len(hdr) - 1)]
        for k in measure.KERNELS:
            if k not in CG_KERNELS:
                continue
            cell_cg = cell(c, "ns_per_call", k)
            ours = med(r, "variants", "default", "cpp_single_ns", k)
            pk = best_pin(r, k)
            theirs = med(r, pk, "ns_per_call", k)
            ob = med(nat, "batch_ns_per_state", "1", k, str(big)) if big else None
            funcs = [f for f in CG_KERNELS[k] if f in c.get("build", {})]
            skipped = [f"{f}: {c['build'][f]['skipped']}" for f in funcs if c["build"][f].get("skipped")]
            if cell_cg:
                f = cell_cg.get("function", k)
                a = c.get("agreement", {}).get(f, {})
                err = a.get("max_rel_err_vs_rbdgen")
                agree = "–" if err is None else f"{err:.1e}" + ("" if a.get("ok") else " FAIL")
                b = c["build"].get(f, {})
                build = (f"{b['compile_s']:.1f} s" + (f" ({b['cpu_s']:.1f} s CPU)" if b.get("cpu_s") is not None else "")
                         if b.get("compile_s") is not None else "–")
                cgv = cell_cg["median"]
                ours_cell = cell(r, "variants", "default", "cpp_single_ns", k) or {}
                row = [k, fmt(r, pk, "ns_per_call", k) + ("" if pk == "pinocchio_native" else " (p)"),
                       fmt(c, "ns_per_call", k) + (" (W)" if c.get("conventions", {}).get(k) == "WORLD" else ""),
                       fmt(r, "variants", "default", "cpp_single_ns", k), ratio(cgv, ours),
                       ratio(cell_cg.get("min"), ours_cell.get("min")), ops_ratio(r, f, k), ratio(theirs, ours),
                       fmt(nat, "batch_ns_per_state", "1", k, str(big)) if big else "–", ratio(cgv, ob), agree, build]
            else:
                row = [k, fmt(r, pk, "ns_per_call", k), "skipped" if skipped else "–",
                       fmt(r, "variants", "default", "cpp_single_ns", k), "–", "–", "–", ratio(theirs, ours), "–", "–", "–",
                       "–"]
            L.append("| " + " | ".join(row) + " |")
        notes = []
        for f, b in c.get("build", {}).items():
            if b.get("skipped"):
                notes.append(f"- {f} left out: {b['skipped']}")
        other = {f: a for f, a in c.get("agreement", {}).items()
                 if f not in {x.get("function") for x in c.get("ns_per_call", {}).values()}}
        for f, a in other.items():
            cf = cell(c, "functions", f)
            notes.append(f"- {f} ({'WORLD' if f.endswith('_world') else 'LOCAL'}, the slower convention here): "
                         f"{fmt_ns(cf['median']) if cf else '–'}, agreement {a['max_rel_err_vs_rbdgen']:.1e}"
                         + ("" if a.get("ok") else " FAIL"))
        bad = [f for f, a in c.get("agreement", {}).items() if not a.get("ok")]
        if bad:
            notes.append(f"- **FAIL**: {', '.join(bad)} differ from rbdgen or the reference by more than {AGREE_TOL:g}")
        total = sum(b.get("compile_s") or 0 for b in c.get("build", {}).values())
        cached = all(b.get("cached") for b in c.get("build", {}).values())
        loads = [b["load_average"][0] for b in c.get("build", {}).values() if b.get("load_average")]
        built = sorted({b["built"] for b in c.get("build", {}).values() if b.get("built")})
        cpu = sum(b.get("cpu_s") or 0 for b in c.get("build", {}).values())
        notes.append(f"- Peer build: {total:.0f} s of gcc wall time ({cpu:.0f} s CPU) for all {len(c.get('build', {}))} functions "
                     f"({'cached from an earlier run' if cached else 'compiled in this run'}"
                     + (f", built {built[0]}" if built else "")
                     + (f", 1-min load average {min(loads):.1f}–{max(loads):.1f} while compiling" if loads else "")
                     + "; the tapes are recorded and written as C in under a second; the generator, once for every "
                     "robot, is not counted)")
        L += [""] + notes + [""]
    return L


def markdown(results: dict) -> str:
    m = results["machine"]
    L = ["# rbdgen benchmarks", "",
         f"Produced by `benchmarks/run.py{' ' + results['argv'] if results['argv'] else ''}` (what `make bench` runs) on "
         f"{m['date']}; the whole run took {results['wall_s'] / 60:.1f} min. Method and caveats: "
         "[benchmarks/README.md](../README.md). Raw numbers (every run, not only medians): `results.json`.", "",
         "## Machine", "",
         f"- CPU: {m['cpu']} — {m['logical_cpus']} logical CPUs ({m['cpus_available']} available to this process), "
         f"SIMD: {', '.join(m['cpu_simd_flags'])}; {m['memory_gib']} GiB memory",
         f"- OS: {m['os']}; Python {m['python']}, NumPy {m['numpy']}",
         f"- Compiler: {m['compiler']}",
         f"- rbdgen {m['rbdgen']}{' (commit ' + m['git'] + ')' if m.get('git') else ''}: default build flags `{results['flags']['default']}` "
         f"(the straight-line parts of kernels of ≥ {LARGE_STATEMENTS} statements: `{LARGE_OPT}` instead of `-O3`; "
         f"∇FD's looped product without `{NO_SLP}`): this machine's instruction set, as `rbdgen.build` does by "
         f"default; portable build (`march=\"portable\"`, any x86-64): `{results['flags'].get('portable', '')}`",
         f"- OpenMP threads for batches: {results['omp_threads']} (OMP_NUM_THREADS={m['OMP_NUM_THREADS'] or 'unset'}), "
         f"OMP_WAIT_POLICY={m['OMP_WAIT_POLICY']}{' (set by run.py)' if not m['OMP_WAIT_POLICY_given'] else ''}; "
         "batch figures are also given on 1 thread",
         "- An empty OpenMP parallel region (2 threads) cost, at the start of the run: "
         + ", ".join(f"{k} wait policy {v} µs" for k, v in results.get("openmp_empty_region_us", {}).items()),
         f"- Load average at start: {', '.join(f'{x:.2f}' for x in (m['load_average_at_start'] or []))} "
         "(a shared 2-core VM: expect a few % of noise; see the per-run numbers in results.json)"]
    pin = results.get("pinocchio_harness")
    if pin:
        nat = results.get("pinocchio_harness_native")
        L.append(f"- Pinocchio {pin.get('pin')} (the pin wheel's headers and libraries), harness "
                 f"`benchmarks/pinocchio_bench.cpp` built twice: portable, `g++ {pin['flags']}` "
                 f"(compile: {pin.get('compile_s', '?')} s, one-off, cached), and "
                 + (f"for this machine, `g++ {nat['flags']}` (compile: {nat.get('compile_s', '?')} s), its model built "
                    "joint by joint from the wheel parser's (`--model`; same checksum checked per robot)"
                    if nat else f"for this machine: not built ({results.get('pinocchio_native_skipped', '?')})"))
    elif results.get("pinocchio_skipped"):
        L.append(f"- Pinocchio: skipped ({results['pinocchio_skipped']})")
    if results.get("pinocchio_codegen_generator"):
        g = results["pinocchio_codegen_generator"]
        L.append(f"- Pinocchio + CppADCodeGen: cmeel-cppadcodegen {g['versions'].get('cmeel-cppadcodegen')}, "
                 f"cmeel-cppad {g['versions'].get('cmeel-cppad')}; generator `benchmarks/pinocchio_codegen.cpp` "
                 f"(compile: {g.get('compile_s', '?')} s, one-off, cached); see \"Against Pinocchio + CppADCodeGen\"")
    elif results.get("pinocchio_codegen_skipped"):
        L.append(f"- Pinocchio + CppADCodeGen: skipped ({results['pinocchio_codegen_skipped']})")
    L += ["", "All times are medians (thread CPU time unless said otherwise). *ratio* = Pinocchio time / rbdgen "
          "time: above 1× rbdgen is faster. † marks a figure whose runs spread by more than "
          f"{NOISY:.0%} of the median: another process disturbed it (see the runs in results.json).", ""]

    L += ["## Summary: one state, C++ (ns per call)", "",
          "| robot | " + " | ".join(measure.KERNELS) + " |", "|---|" + "---:|" * len(measure.KERNELS)]
    for name, r in results["robots"].items():
        cells = []
        for k in measure.KERNELS:
            ours = med(r, "variants", "default", "cpp_single_ns", k)
            pk = best_pin(r, k)
            theirs = med(r, pk, "ns_per_call", k)
            cells.append(f"{fmt(r, 'variants', 'default', 'cpp_single_ns', k)} vs {fmt(r, pk, 'ns_per_call', k)}"
                         f"{'' if pk == 'pinocchio_native' else ' (p)'} ({ratio(theirs, ours)})" if theirs
                         else fmt(r, "variants", "default", "cpp_single_ns", k))
        L.append(f"| {name} | " + " | ".join(cells) + " |")
    L += ["", "Each cell: rbdgen (default build: this machine) vs Pinocchio's faster build, the one for this machine "
          "unless marked (p), portable (ratio).", ""]
    bigs = {name: max((int(n) for n in r["variants"]["default"]["batch_ns_per_state"].get("1", {}).get("rnea", {})),
                      default=None) for name, r in results["robots"].items() if "default" in r.get("variants", {})}
    if any(bigs.values()):
        L += ["## Summary: batches on one core (ns per state)", "",
              "| robot | N | " + " | ".join(measure.KERNELS) + " |", "|---|---:|" + "---:|" * len(measure.KERNELS)]
        for name, big in bigs.items():
            r = results["robots"][name]
            cells = []
            for k in measure.KERNELS:
                ours = med(r, "variants", "default", "batch_ns_per_state", "1", k, str(big))
                pk = best_pin(r, k)
                theirs = med(r, pk, "ns_per_call", k)
                mine = fmt(r, "variants", "default", "batch_ns_per_state", "1", k, str(big))
                cells.append(f"{mine} vs {fmt(r, pk, 'ns_per_call', k)}{'' if pk == 'pinocchio_native' else ' (p)'} "
                             f"({ratio(theirs, ours)})" if theirs else mine)
            L.append(f"| {name} | {big} | " + " | ".join(cells) + " |")
        L += ["", "Each cell: rbdgen's batch path (default build, one OpenMP thread, one Python call for N states) "
              "vs Pinocchio's faster build, one state at a time (ratio).", ""]

    L += codegen_markdown(results)
    L += goals_markdown(results)

    for name, r in results["robots"].items():
        L += [f"## {name}", "",
              f"{r['description']}: nq = {r['nq']}, nv = {r['nv']}, {r['nb']} bodies (`{r['urdf']}`).", ""]
        L.append(f"- Generation (`generate_cpu`, all {len(measure.KERNELS)} kernels, float64): {r['generate_s']:.1f} s")
        for vn, v in r["variants"].items():
            L.append(f"- Build, {vn} (`rbdgen.build` on an empty cache, generation included; flags `{v['flags']}`): "
                     f"{v['build_s']:.1f} s (compile ≈ {v['compile_s']:.1f} s), library {v['library_bytes'] / 1e6:.1f} MB"
                     + (f"; the same build in a new process, caches warm: {v['warm_build_s']:.2f} s"
                        if v.get("warm_build_s") is not None else ""))
        if r.get("load_average_at_start"):
            L.append(f"- Load average when this robot started: {', '.join(map(str, r['load_average_at_start']))}")
        if "pinocchio" in r and r["pinocchio"].get("note"):
            L.append(f"- Note: {r['pinocchio']['note']}")
        for key, what in (("pinocchio_error", "Pinocchio"), ("pinocchio_native_error", "Pinocchio for this machine")):
            if key in r:
                L.append(f"- {what} failed: {r[key][:300]}")
        L.append("")
        variants = list(r["variants"])
        hdr = ["kernel"]
        for vn in variants:
            hdr += [f"rbdgen C++ ({vn})", f"rbdgen Python ({vn})"]
        pins = [key for key in ("pinocchio", "pinocchio_native") if key in r]
        hdr += [f"Pinocchio C++ ({r[key].get('build', 'portable')})" for key in pins]
        hdr += [f"ratio ({vn} vs Pinocchio {r[pin_key(r, vn)].get('build', 'portable')})" if pins else f"ratio ({vn})"
                for vn in variants]
        ref_sizes = sorted({int(n) for k in measure.KERNELS for n in r["reference_ns_per_state"].get(k, {})})
        hdr += [f"NumPy ref (N={n})" for n in ref_sizes]
        L += ["### One state (per call)", "", "| " + " | ".join(hdr) + " |", "|---|" + "---:|" * (len(hdr) - 1)]
        for k in measure.KERNELS:
            row = [k]
            for vn in variants:
                row += [fmt(r, "variants", vn, "cpp_single_ns", k), fmt(r, "variants", vn, "python_single_ns", k)]
            row += [fmt(r, key, "ns_per_call", k) for key in pins]
            row += [ratio(med(r, pin_key(r, vn), "ns_per_call", k), med(r, "variants", vn, "cpp_single_ns", k))
                    for vn in variants]
            row += [fmt(r, "reference_ns_per_state", k, str(n)) for n in ref_sizes]
            L.append("| " + " | ".join(row) + " |")
        nr = (r.get("pinocchio") or {}).get("rounds") or len(
            next(iter(next(iter(r["variants"].values()))["cpp_single_ns"].values())).get("round_medians", [0]))
        L += ["", "C++: a driver linked to the generated library calls the kernel over a pool of 256 states; "
              "Python: `kern.<kernel>(q, …, out=…)` with (nq,) arrays, over the same pool. "
              f"rbdgen and Pinocchio took turns, {nr} round{'s' if nr > 1 else ''}: each figure is the median of the "
              "least disturbed round (every round's median is in results.json). "
              "The NumPy reference is per state (N=16: one batched call / 16).", ""]
        for vn in variants:
            v = r["variants"][vn]
            sizes = sorted({int(n) for t in v["batch_ns_per_state"].values() for k in t for n in t[k]})
            threads = v["batch_threads"]
            big = str(max(sizes))
            hdr = ["kernel"] + [f"N={n}" for n in sizes]
            if len(threads) > 1:
                hdr += [f"N={big}, 1 thread"]
            hdr += [f"Pinocchio C++ ({r.get(pin_key(r, vn), {}).get('build', 'portable')}, 1 state)", f"ratio vs N={big}"] + ([f"ratio vs N={big}, 1 thread"]
                                                                       if len(threads) > 1 else [])
            L += [f"### Batches, {vn} build (ns per state; {threads[0]} OpenMP thread{'s' if threads[0] > 1 else ''} "
                  f"unless marked)", "", "| " + " | ".join(hdr) + " |", "|---|" + "---:|" * (len(hdr) - 1)]
            for k in measure.KERNELS:
                b = v["batch_ns_per_state"]
                row = [k] + [fmt(b, str(threads[0]), k, str(n)) for n in sizes]
                one = med(b, "1", k, big) if len(threads) > 1 else None
                if len(threads) > 1:
                    row.append(fmt(b, "1", k, big))
                pk = pin_key(r, vn)
                theirs = med(r, pk, "ns_per_call", k)
                row += [fmt(r, pk, "ns_per_call", k), ratio(theirs, med(b, str(threads[0]), k, big))]
                if len(threads) > 1:
                    row.append(ratio(theirs, one))
                L.append("| " + " | ".join(row) + " |")
            par = results.get("parallel_ops")
            L += ["", f"Batch path: {v['lanes']} states per SIMD vector, OpenMP across blocks of states "
                  + (f"when N × (the kernel's op count) ≥ {par:,}" if par else "for large enough batches")
                  + "; below that, and at N=1, one thread: the N=1 column is the overhead of a batch call "
                  "(wall clock, like every multi-thread column).", ""]
    if results.get("plot"):
        L += ["## Plot", "", f"![per-state times]({results['plot']})", ""]
    return "\n".join(L) + "\n"
