#!/usr/bin/env python3
"""The FPGA latency–resource trade-off (what `make bench-hls-budget` runs; not a test).

    python benchmarks/hls_budget.py                 # iiwa14, quadruped, TALOS; rnea, aba, ∇FD
    python benchmarks/hls_budget.py --quick         # iiwa14 only, a few budgets

For each robot and kernel, the list-scheduled design within a DSP budget (ap_fixed<32,16>,
250 MHz; rbdgen/targets/hls/schedule.py, the same numbers as `rbdgen inspect --cost --target
hls --fixed 32,16 --dsp-budget N`) over budgets from the smallest that builds to beyond the
largest part, beside the unbudgeted estimate; and, measured in the same run on this machine,
the time of our own CPU kernel for one state (default build, called from Python with out=, so
~0.1–0.2 µs of binding is included). No synthesis tool has run these designs: cycles and DSPs
are the cost model's (docs/hls.md states its assumptions).

Published iiwa anchors marked on the plot (not our measurements): RoboShape's design-space
estimates for its gradient accelerator span ~684 DSPs / 829 cycles to ~5,925 DSPs / 34 cycles;
the robomorphic accelerator (VCU118, 32-bit fixed point) computes ∇FD ~8× faster per call than
the CPU it was compared with — drawn as our CPU ∇FD time / 8.

Writes benchmarks/results/hls_budget.{json,md,png}.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import rbdgen  # noqa: E402
from rbdgen import registry  # noqa: E402
from rbdgen.targets.hls import emit as H  # noqa: E402
from rbdgen.targets.hls import schedule as HS  # noqa: E402
from rbdgen.targets.hls.cost import Model  # noqa: E402
from rbdgen.toolchain.compiler import CACHE_ENV  # noqa: E402

import measure as bench  # noqa: E402  (benchmarks/measure.py: robots, timing helpers)

KERNELS = ("rnea", "aba", "aba_derivatives")
LABEL = {"rnea": "ID (rnea)", "aba": "FD (aba)", "aba_derivatives": "∇FD"}
BUDGETS = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6840, 12288)
CLOCK = 250.0
FIXED = (32, 16)
ROBOSHAPE = ((684, 829), (5925, 34))   # (DSPs, cycles), iiwa
ROBOMORPHIC_SPEEDUP = 8.0
PRESETS = ("zu3eg", "zcu102", "vcu118", "u250")


def cpu_times(model, quick: bool) -> dict:
    """ns per single-state call of our CPU kernels (median of thread CPU time over runs)."""
    kern = rbdgen.build(model, "cpu", kernels=list(KERNELS))
    rng = np.random.default_rng(5)
    pool = bench.states(model, rng, 64)
    out = {}
    for k in KERNELS:
        f = kern.kernel(k)
        rows = [tuple(pool[n][i] for n in bench.SIGS[k]) for i in range(len(pool["q"]))]
        o = bench.out_arrays(kern.methods[k], ())

        def one_pass(f=f, rows=rows, o=o):
            for r in rows:
                f(*r, out=o)
        # two rounds, the lower median: the first round of a freshly loaded library on a shared VM
        # was seen up to 2x slower than the second
        out[k] = min(bench.summary(bench.measure(one_pass, target_s=0.01 if quick else 0.05, runs=3 if quick else 7,
                                                 budget_s=2.0), per=len(rows))["median"] for _ in range(2))
    return out


def sweep(model, nt, budgets) -> dict:
    res = {}
    for k in KERNELS:
        kern = registry.trace(model, k)
        free = H.hls_cost(kern, nt, CLOCK)
        graph = HS.kernel_graph(kern, Model(nt, CLOCK), shared=True)
        lo = HS.min_dsp(kern, nt)
        rows, memo = [], {}
        for b in sorted({lo, *[b for b in budgets if b >= lo]}):
            t = time.time()
            bc = HS.budget_cost(kern, nt, CLOCK, b, graph=graph, memo=memo)
            bc.pop("epilogue_plan")
            rows.append({**bc, "schedule_s": round(time.time() - t, 2)})
        res[k] = {"unbudgeted": {c: free[c] for c in ("dsp", "latency_cycles", "latency_us", "lut", "ff",
                                                      "dsp_spatial", "mul", "add", "div", "sincos_units")},
                  "min_dsp": lo, "budgets": rows}
        print(f"  {k:>16}: {len(rows)} budgets, {rows[0]['latency_cycles']} cycles at {rows[0]['dsp']} DSP … "
              f"{rows[-1]['latency_cycles']} at {rows[-1]['dsp']}; unbudgeted {free['latency_cycles']} cycles "
              f"at {free['dsp']} DSP", flush=True)
    return res


def fastest_within(rows, part):
    _, dsps, luts, _ = HS.PARTS[part]
    fit = [r for r in rows if r["dsp"] <= dsps and r["lut"] <= luts]
    return min(fit, key=lambda r: (r["latency_cycles"], r["dsp"])) if fit else None


def markdown(res: dict) -> str:
    L = ["# FPGA latency vs DSP budget", "",
         f"`make bench-hls-budget` (benchmarks/hls_budget.py), rbdgen {res['rbdgen']}, git {res['git']}, {res['date']}; "
         f"{res['machine']}; {res['wall_s'] / 60:.1f} min.", "",
         f"Designs: ap_fixed<{FIXED[0]},{FIXED[1]}> (AP_RND_CONV, AP_SAT) at {CLOCK:g} MHz, scheduled within each DSP "
         "budget by rbdgen's list scheduler (rbdgen/targets/hls/schedule.py; the model and its assumptions: "
         "docs/hls.md). **Estimates: no synthesis tool has run these designs.** CPU: our own kernel for one state "
         "on this machine, measured in the same run (default build, one call from Python with out=, ~0.1–0.2 µs "
         "of binding included). *vs CPU*: CPU time / FPGA latency (above 1×: the FPGA design is faster per call). "
         "*II*: cycles between back-to-back states through the same operators; *states/s* = clock / II.", ""]
    for rname, r in res["robots"].items():
        L += [f"## {rname}: {r['description']}", ""]
        L += ["Fastest design that fits each part's DSPs and LUTs (estimated; per kernel: each kernel is its own "
              "IP; — : none of the budgets fits):", "",
              "| kernel | CPU (ours) | unbudgeted | " + " | ".join(
                  f"{p} ({HS.PARTS[p][1]} DSP, {HS.PARTS[p][2] // 1000}k LUT)" for p in PRESETS) + " |",
              "|---|---:|---:|" + "---:|" * len(PRESETS)]
        for k in KERNELS:
            kk = r["kernels"][k]
            cpu = r["cpu_ns"][k]
            u = kk["unbudgeted"]
            cells = [f"{LABEL[k]}", f"{cpu / 1000:.2f} µs",
                     f"{u['latency_us']:.2f} µs, {u['dsp']} DSP, {u['lut'] // 1000}k LUT ({cpu / (u['latency_us'] * 1000):.2f}×)"]
            for p in PRESETS:
                b = fastest_within(kk["budgets"], p)
                cells.append("—" if b is None else
                             f"{b['latency_us']:.2f} µs, {b['dsp']} DSP, {b['lut'] // 1000}k LUT "
                             f"({cpu / (b['latency_us'] * 1000):.2f}×)")
            L.append("| " + " | ".join(cells) + " |")
        L.append("")
        for k in KERNELS:
            kk = r["kernels"][k]
            cpu = r["cpu_ns"][k]
            L += [f"### {rname} {LABEL[k]}", "",
                  "| DSP budget | DSPs used | multipliers | CORDIC | dividers | cycles | latency | vs CPU | II | "
                  "states/s | LUT | FF |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
            for b in kk["budgets"]:
                L.append(f"| {b['dsp_budget']} | {b['dsp']} | {b['mul_units']} | {b['sincos_units']} | "
                         f"{b['div_units']} | {b['latency_cycles']} | {b['latency_us'] * 1000:.0f} ns | "
                         f"{cpu / (b['latency_us'] * 1000):.2f}× | {b['ii']} | {CLOCK * 1e6 / b['ii']:.3g} | "
                         f"{b['lut']} | {b['ff']} |")
            u = kk["unbudgeted"]
            L += [f"| unbudgeted | {u['dsp']} | | | | {u['latency_cycles']} | {u['latency_us'] * 1000:.0f} ns | "
                  f"{cpu / (u['latency_us'] * 1000):.2f}× | | | {u['lut']} | {u['ff']} |", ""]
    return "\n".join(L) + "\n"


def plot(res: dict, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    robots = list(res["robots"])
    fig, axes = plt.subplots(1, len(robots), figsize=(6.2 * len(robots), 5), squeeze=False)
    for ax, rname in zip(axes[0], robots):
        r = res["robots"][rname]
        for k in KERNELS:
            kk = r["kernels"][k]
            pts = sorted({(b["dsp"], b["latency_cycles"]) for b in kk["budgets"]})
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            ln, = ax.loglog(xs, ys, "o-", ms=3, label=f"{LABEL[k]} within budget")
            u = kk["unbudgeted"]
            ax.loglog([u["dsp"]], [u["latency_cycles"]], "*", ms=11, color=ln.get_color(),
                      label=f"{LABEL[k]} unbudgeted (ASAP)")
            cpu_cycles = r["cpu_ns"][k] * CLOCK / 1000.0
            ax.axhline(cpu_cycles, color=ln.get_color(), ls=":", lw=1)
            ax.text(xs[0], cpu_cycles * 1.05, f"our CPU {LABEL[k]}: {r['cpu_ns'][k] / 1000:.2f} µs", fontsize=7,
                    color=ln.get_color())
        if rname == "iiwa14":
            (x0, y0), (x1, y1) = ROBOSHAPE
            ax.loglog([x0, x1], [y0, y1], "k--", lw=1.2, label="RoboShape iiwa estimates (endpoints)")
            ax.loglog([x0, x1], [y0, y1], "ks", ms=5)
            rm = r["cpu_ns"]["aba_derivatives"] / ROBOMORPHIC_SPEEDUP * CLOCK / 1000.0
            ax.axhline(rm, color="k", ls="-.", lw=1, label="robomorphic's 8× over a CPU, on our CPU ∇FD time")
        for p in PRESETS:
            ax.axvline(HS.PARTS[p][1], color="grey", lw=0.6, alpha=0.6)
            ax.text(HS.PARTS[p][1], 0.98, f" {p}", rotation=90, fontsize=7, color="grey", va="top",
                    transform=ax.get_xaxis_transform())
        ax.set_title(f"{rname}: latency vs DSPs (ap_fixed<32,16>, {CLOCK:g} MHz)")
        ax.set_xlabel("DSP48E2 slices used")
        ax.grid(True, which="both", alpha=0.25)
    axes[0][0].set_ylabel(f"latency (cycles at {CLOCK:g} MHz; 1 µs = {CLOCK:g} cycles)")
    axes[0][0].legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robots", default="iiwa14,quadruped,talos_reduced")
    ap.add_argument("--quick", action="store_true", help="iiwa14, 4 budgets, written to benchmarks/.build/")
    ap.add_argument("--out", default=None)
    ap.add_argument("--render", action="store_true", help="rewrite the .md and .png from an existing hls_budget.json")
    args = ap.parse_args(argv)
    if args.render:
        out = Path(args.out) if args.out else HERE / "results"
        res = json.loads((out / "hls_budget.json").read_text())
        (out / "hls_budget.md").write_text(markdown(res))
        plot(res, out / "hls_budget.png")
        return 0
    budgets = BUDGETS
    robots = [bench.ALIASES.get(r, r) for r in args.robots.split(",")]
    out = Path(args.out) if args.out else HERE / "results"
    if args.quick:
        budgets, robots = (32, 256, 2048), ["iiwa14"]
        out = Path(args.out) if args.out else HERE / ".build" / "quick-results"
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault(CACHE_ENV, tempfile.mkdtemp(prefix="rbdgen-hls-budget-"))
    nt = H.numeric_type(fixed=FIXED)
    t0 = time.time()
    info = bench.machine_info(os.environ.get("CXX", "g++"))
    res = {"rbdgen": rbdgen.__version__, "git": bench.git_revision() or "unknown",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "machine": f"{info['cpu']}, {info['logical_cpus']} logical CPUs, {platform.system()}, "
                      f"Python {platform.python_version()}",
           "type": nt.describe(), "clock_mhz": CLOCK, "robots": {}}
    for rname in robots:
        thunk, floating, desc = bench.ROBOTS[rname]
        model = rbdgen.load_urdf(str(thunk()), floating_base=floating)
        print(f"{rname}: scheduling", flush=True)
        kernels = sweep(model, nt, budgets)
        print(f"{rname}: building and timing the CPU kernels", flush=True)
        cpu = cpu_times(model, args.quick)
        res["robots"][rname] = {"description": desc, "nv": model.nv, "cpu_ns": cpu, "kernels": kernels}
    res["wall_s"] = round(time.time() - t0, 1)
    (out / "hls_budget.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / "hls_budget.md").write_text(markdown(res))
    png = plot(res, out / "hls_budget.png")
    print(f"wrote {out}/hls_budget.json, .md{', .png' if png else ' (no matplotlib: no plot)'} "
          f"in {res['wall_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
