#!/usr/bin/env python3
"""Stale-data inverse dynamics in closed loop (`make bench-control`, issue 14): tracking error
against the control period, and where each scheme goes unstable.

    python benchmarks/control.py               # everything (5 min on the shared 2-core VM)
    python benchmarks/control.py --quick       # a smoke run (~1.5 min), to a temporary folder
    python benchmarks/control.py --render      # rewrite control.md / control.png from control.json

For the 3-link planar arm (rbdgen.control.planar_arm) and the iiwa (robots/iiwa14.urdf), each
motion preset (slow, fast, very fast: rbdgen.control.SPEEDS), each controller (exact RNEA and
every stale scheme: Binder–Herzog in spatial vectors and as Hamilton et al.'s Table 1 marks it,
Yamakita, Hamilton et al.'s Table 1) and each computation delay (none, one control period): computed-torque
control (ω_n = 20 rad/s, ζ = 1) for 3 s at each control period T of the grid, starting on the
trajectory. Recorded: max and RMS tracking error, and whether and when the run diverged (an error
over 1 rad, or a non-finite state). The plant is RK4 at 0.25 ms on the generated `aba` kernel
(the NumPy reference gives the same numbers ~1000× slower: its per-call time is measured and
written down); the controller's inverse dynamics is the generated kernel of each controller
(`rnea`, `rnea_stale`, …: rbdgen.control.KERNEL_FOR; tests/test_control.py checks that these runs
are the NumPy reference's step for step), or with --id reference the NumPy reference itself
(the same numbers, ~30× longer: ~1 ms per call).

Writes control.json (every run), control.md (tables) and control.png to --out (default
benchmarks/results/). Runs are spread over --jobs processes (default: the CPUs available).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import measure as bench  # noqa: E402  (benchmarks/measure.py: machine info, log, the C++ driver)

import rbdgen  # noqa: E402
from rbdgen import control as ctl  # noqa: E402
from rbdgen import reference as ref  # noqa: E402
from rbdgen.toolchain.compiler import find_cxx  # noqa: E402

ROOT = HERE.parent
ROBOTS = ("planar_arm3", "iiwa14")
#: control periods, ms: roughly log-spaced (ratio ~1.25-1.5), each a whole number of 0.25 ms plant steps
PERIODS_MS = (0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 16, 20, 25, 30, 40, 50, 60)
QUICK_PERIODS_MS = (0.5, 1, 2, 4, 8, 20, 60)
DELAYS = (0, 1)  # in control periods
DURATION, QUICK_DURATION = 3.0, 1.0
PLANT_STEP = ctl.DEFAULT_PLANT_STEP


def load(robot: str):
    if robot == "planar_arm3":
        return ctl.planar_arm(3)
    return rbdgen.load_urdf(ROOT / "robots" / f"{robot}.urdf")


_CACHE: dict = {}


def _worker_model(robot):
    if robot not in _CACHE:
        m = load(robot)
        kern = rbdgen.build(m, kernels=["aba", *sorted(set(ctl.KERNEL_FOR.values()))], simd=False)
        _CACHE[robot] = (m, kern.aba, kern)
    return _CACHE[robot][:2]


def one_run(task):
    robot, motion, controller, delay_periods, T_ms, duration, id_backend = task
    m, aba = _worker_model(robot)
    T = T_ms * 1e-3
    ident = None if id_backend == "reference" else ctl.kernel_inverse_dynamics(_CACHE[robot][2], controller)
    t0 = time.perf_counter()
    r = ctl.simulate(m, motion, controller=controller, period=T, delay=delay_periods * T, duration=duration,
                     plant_step=PLANT_STEP, plant=aba, inverse_dynamics=ident)
    wall = time.perf_counter() - t0
    err = np.abs(r.error)
    return {"robot": robot, "motion": motion, "controller": controller, "delay_periods": delay_periods,
            "T_ms": T_ms, "diverged": r.diverged, "diverged_at_s": r.diverged_at,
            "max_error_rad": None if r.diverged else float(err.max()),
            "rms_error_rad": None if r.diverged else r.rms_error,
            "max_error_before_divergence_rad": float(np.nanmax(err[:-1])) if r.diverged and len(err) > 1 else None,
            "wall_s": round(wall, 3)}


def per_call_times(robot) -> dict:
    """µs per call: the plant's aba (reference vs generated) and the controller's inverse dynamics."""
    m, aba = _worker_model(robot)
    rng = np.random.default_rng(0)
    q, v, x = m.random_q(rng), rng.normal(size=m.nv), rng.normal(size=m.nv)

    def t(f, n):
        f()
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        return (time.perf_counter() - t0) / n * 1e6

    st = ref.rnea_stale(m, q, v, x)[1]
    sh = ref.rnea_stale(m, q, v, x, scheme="hamilton")[1]
    return {"aba_reference_us": round(t(lambda: ref.aba(m, q, v, x), 200), 2),
            "aba_generated_us": round(t(lambda: aba(q, v, x), 20000), 3),
            "rnea_reference_us": round(t(lambda: ref.rnea(m, q, v, x), 200), 2),
            "rnea_stale_reference_us": round(t(lambda: ref.rnea_stale(m, q, v, x, st), 200), 2),
            "rnea_stale_hamilton_reference_us": round(t(lambda: ref.rnea_stale(m, q, v, x, sh, scheme="hamilton"), 200), 2)}


# ---- what the shorter critical path buys ------------------------------------------------------

ID_KERNELS = ctl.KERNEL_FOR
HLS_CLOCK_MHZ, HLS_FIXED, HLS_BUDGETS = 250.0, (32, 16), (32, 64, 256)


def latency_ratio(lat: dict, controller: str) -> float:
    """The latency ratio the computation-bound comparison uses for a stale scheme: the FPGA
    estimate's exact / stale latency (unbudgeted), rounded to a half, at least 1 (the period grid
    holds 1.5T, 2T, 2.5T and 3T for most of its T)."""
    return max(1.0, round(2 * lat["exact"]["hls"]["latency_ns"] / lat[controller]["hls"]["latency_ns"]) / 2)


def kernel_latencies(robot, cxx: str) -> dict:
    """Per controller: our CPU kernel's time for one state (C++ driver over a pool of 256 states,
    benchmarks/measure.py's, rbdgen.build's default build for this machine, median of rounds) and the HLS estimate of its
    latency (ap_fixed<32,16>, 250 MHz: unbudgeted, and list-scheduled within a few DSP budgets;
    rbdgen/targets/hls/schedule.py — no synthesis tool has run these designs)."""
    from rbdgen import registry
    from rbdgen.targets.hls import emit as H
    from rbdgen.targets.hls import schedule as HS

    m = load(robot)
    ks = list(ID_KERNELS.values())
    work = Path(tempfile.mkdtemp(prefix=f"rbdgen-control-{robot}-"))
    kern, exe, pool_file, _ = bench.single_state_driver(cxx, m, ks, np.random.default_rng(0), work)
    rounds = [bench.run_driver(exe, pool_file, False) for _ in range(3)]
    cpu = {k: min(r[k]["median"] for r in rounds) for k in ks}
    nt = H.numeric_type(fixed=HLS_FIXED)
    out = {}
    for c, k in ID_KERNELS.items():
        tk = registry.trace(m, k)
        free = H.hls_cost(tk, nt, HLS_CLOCK_MHZ)
        budgets = {}
        for b in HLS_BUDGETS:
            if b >= HS.min_dsp(tk, nt):
                bc = HS.budget_cost(tk, nt, HLS_CLOCK_MHZ, b)
                budgets[str(b)] = {"dsp": bc["dsp"], "cycles": bc["latency_cycles"],
                                   "latency_ns": round(bc["latency_cycles"] * 1e3 / HLS_CLOCK_MHZ, 1)}
        out[c] = {"kernel": k, "ops": int(kern.op_counts[k]["total"]), "depth": int(kern.op_counts[k]["depth"]),
                  "cpu_ns": round(cpu[k], 1),
                  "hls": {"dsp": free["dsp"], "cycles": free["latency_cycles"],
                          "latency_ns": round(free["latency_cycles"] * 1e3 / HLS_CLOCK_MHZ, 1), "budgets": budgets}}
    return out


def computation_bound(summary, latencies) -> list:
    """Where the inverse dynamics' latency sets the control period (T = its latency, and the
    torque applied one period after the measurement: d = T): a stale scheme r× faster runs at
    T while the exact controller runs at r·T (r: :func:`latency_ratio`). Per robot, motion and
    scheme: the exact controller's max error at r·T over the stale one's at T (> 1: the stale
    scheme tracks better), at each T of the grid where both exist."""
    rows = []
    exact = {(x["robot"], x["motion"]): x for x in summary if x["controller"] == "exact" and x["delay_periods"] == 1}
    for x in summary:
        if x["controller"] == "exact" or x["delay_periods"] != 1:
            continue
        e = exact[(x["robot"], x["motion"])]
        r = latency_ratio(latencies[x["robot"]], x["controller"])
        ratios = {}
        for t, err in x["max_error_rad"].items():
            t3 = r * float(t)
            key = next((k for k in e["max_error_rad"] if abs(float(k) - t3) < 1e-9), None)
            if key is None:
                continue
            ee = e["max_error_rad"][key]
            ratios[t] = None if err is None else (math.inf if ee is None else round(ee / err, 3))
        rows.append({"robot": x["robot"], "motion": x["motion"], "controller": x["controller"], "latency_ratio": r,
                     "ratio": ratios})
    return rows


def summarize(runs) -> list:
    """Per (robot, motion, controller, delay): the smallest T that diverged, the largest T below it,
    whether any larger T was stable again, and the errors at a few periods."""
    out = []
    keys = sorted({(r["robot"], r["motion"], r["controller"], r["delay_periods"]) for r in runs},
                  key=lambda k: (ROBOTS.index(k[0]), list(ctl.SPEEDS).index(k[1]), ctl.CONTROLLERS.index(k[2]), k[3]))
    for key in keys:
        rs = sorted((r for r in runs if (r["robot"], r["motion"], r["controller"], r["delay_periods"]) == key),
                    key=lambda r: r["T_ms"])
        div = [r["T_ms"] for r in rs if r["diverged"]]
        first = div[0] if div else None
        stable_below = [r["T_ms"] for r in rs if not r["diverged"] and (first is None or r["T_ms"] < first)]
        out.append({"robot": key[0], "motion": key[1], "controller": key[2], "delay_periods": key[3],
                    "first_divergent_T_ms": first, "largest_stable_T_ms": stable_below[-1] if stable_below else None,
                    "stable_again_above": [r["T_ms"] for r in rs if first is not None and r["T_ms"] > first and not r["diverged"]],
                    "max_error_rad": {str(r["T_ms"]): r["max_error_rad"] for r in rs},
                    "rms_error_rad": {str(r["T_ms"]): r["rms_error_rad"] for r in rs}})
    return out


def _fmt(x):
    return "div." if x is None else f"{x:.1e}"


def markdown(res: dict) -> str:
    mi = res["machine"]
    s = res["settings"]
    L = ["# Stale-data inverse dynamics in closed loop", "",
         f"Machine: {mi['cpu']} ({mi['cpus_available']} CPUs available), {mi['compiler'].splitlines()[0]}; "
         f"rbdgen {mi['rbdgen']} (git {mi['git']}), {mi['date']}. Generated by `make bench-control` "
         f"(benchmarks/control.py) in {res['wall_s']:.0f} s; method and discussion in docs/control.md.", "",
         f"Computed-torque PD control (ω_n = {s['natural_frequency']} rad/s, ζ = {s['damping']}), {s['duration_s']} s "
         f"per run, starting on the trajectory; plant RK4 at {s['plant_step_ms']} ms on the generated aba; "
         + ("controller ID the NumPy reference. " if s.get("id", "reference") == "reference" else
            "controller ID the generated kernels (the NumPy reference's runs, step for step: tests/test_control.py). ")
         + "Motions (base frequency): "
         + ", ".join(f"{k} {v} Hz" for k, v in s["speeds_hz"].items())
         + f", amplitude {s['amplitude']} of each joint's half range. *div.*: the error passed "
         f"{s['diverge_at_rad']} rad (or the state went non-finite) within the run.", ""]
    L += ["## Where each controller goes unstable", "",
          "Smallest control period T (ms) of the grid at which the run diverged (in parentheses: the largest stable T "
          "below it); – : stable at every T up to "
          f"{max(s['periods_ms'])} ms. Delay: the torque computed at t_k is applied from t_k + d.", ""]
    head = "| robot | motion | " + " | ".join(f"{c}, d = {'0' if d == 0 else 'T'}" for c in ctl.CONTROLLERS for d in s["delays"]) + " |"
    L += [head, "|---|---|" + "---:|" * (len(ctl.CONTROLLERS) * len(s["delays"]))]
    summ = {(x["robot"], x["motion"], x["controller"], x["delay_periods"]): x for x in res["summary"]}
    for robot in s["robots"]:
        for motion in s["speeds_hz"]:
            cells = []
            for c in ctl.CONTROLLERS:
                for d in s["delays"]:
                    x = summ[(robot, motion, c, d)]
                    if x["first_divergent_T_ms"] is None:
                        cells.append("–")
                    else:
                        cells.append(f"{x['first_divergent_T_ms']:g} ({x['largest_stable_T_ms'] or 0:g})"
                                     + (" *" if x["stable_again_above"] else ""))
            L.append(f"| {robot} | {motion} | " + " | ".join(cells) + " |")
    again = [x for x in res["summary"] if x["stable_again_above"]]
    if again:
        L += ["", "\\*: stable again at some larger T: " + "; ".join(
            f"{x['robot']} {x['motion']} {x['controller']} d = {x['delay_periods']}T at {x['stable_again_above']} ms"
            for x in again) + "."]
    L.append("")
    for d in s["delays"]:
        L += [f"## Max tracking error (rad) against T (ms), delay {'0' if d == 0 else 'one period'}", "",
              "| robot | motion | controller | " + " | ".join(f"{t:g}" for t in s["periods_ms"]) + " |",
              "|---|---|---|" + "---:|" * len(s["periods_ms"])]
        for x in res["summary"]:
            if x["delay_periods"] != d:
                continue
            L.append(f"| {x['robot']} | {x['motion']} | {x['controller']} | "
                     + " | ".join(_fmt(x["max_error_rad"][str(t)]) for t in s["periods_ms"]) + " |")
        L.append("")
    L += ["## RMS tracking error (rad) at a few periods, no delay", "",
          "| robot | motion | controller | " + " | ".join(f"T = {t:g} ms" for t in s["rms_periods_ms"]) + " |",
          "|---|---|---|" + "---:|" * len(s["rms_periods_ms"])]
    for x in res["summary"]:
        if x["delay_periods"] == 0:
            L.append(f"| {x['robot']} | {x['motion']} | {x['controller']} | "
                     + " | ".join(_fmt(x["rms_error_rad"].get(str(t))) for t in s["rms_periods_ms"]) + " |")
    L += ["", "## Cost per call (µs, this machine, one thread)", "",
          "| robot | aba, NumPy reference | aba, generated | rnea, NumPy reference | rnea_stale, NumPy reference | "
          "rnea_stale (hamilton), NumPy reference |",
          "|---|---:|---:|---:|---:|---:|"]
    for robot, c in res["per_call_us"].items():
        L.append(f"| {robot} | {c['aba_reference_us']:.0f} | {c['aba_generated_us']:.2f} | {c['rnea_reference_us']:.0f} | "
                 f"{c['rnea_stale_reference_us']:.0f} | {c.get('rnea_stale_hamilton_reference_us', float('nan')):.0f} |")
    L.append("")
    if "latencies" in res:
        L += rates_markdown(res)
    return "\n".join(L)


def _rate(ns):
    return f"{1e3 / ns:.1f} MHz"


def rates_markdown(res: dict) -> list:
    L = ["## What the shorter critical path buys", "",
         "The inverse dynamics' latency for one state, and the control rate it alone would allow (1 / latency). "
         "CPU: our generated kernels, one state through the C++ driver (rbdgen.build's default build, -march=native, this machine, "
         "median of 3 rounds). FPGA: rbdgen's HLS cost model, ap_fixed<32,16> at 250 MHz, latency-oriented "
         "(unbudgeted: every op its own operator when ready; and list-scheduled within a DSP budget) — an "
         "estimate, no synthesis tool has run these designs.", "",
         "| robot | controller | kernel | ops | depth | CPU ns | CPU rate | FPGA cycles | FPGA ns | FPGA rate | FPGA DSP | "
         + " | ".join(f"FPGA ns at ≤ {b} DSP" for b in HLS_BUDGETS) + " |",
         "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(HLS_BUDGETS)]
    for robot, lat in res["latencies"].items():
        for c, x in lat.items():
            h = x["hls"]
            L.append(f"| {robot} | {c} | `{x['kernel']}` | {x['ops']} | {x['depth']} | {x['cpu_ns']:.0f} | {_rate(x['cpu_ns'])} | "
                     f"{h['cycles']} | {h['latency_ns']:.0f} | {_rate(h['latency_ns'])} | {h['dsp']} | "
                     + " | ".join(f"{h['budgets'][str(b)]['latency_ns']:.0f}" if str(b) in h["budgets"] else "–"
                                  for b in HLS_BUDGETS) + " |")
    L += ["", "### When the latency sets the period: stale at T against exact at r·T, d = T", "",
          "Exact controller's max error at r·T ÷ the stale scheme's at T, both with the torque applied one "
          "period after the measurement (the computation takes the period); r: the FPGA estimate's exact ÷ stale "
          "latency, rounded to a half. > 1: the stale scheme, r× faster, tracks better; `div.`: the stale run diverged; "
          "∞: only the exact run diverged.", ""]
    rows = res["computation_bound"]
    ts = sorted({t for r in rows for t in r["ratio"]}, key=float)
    L += ["| robot | motion | scheme | r | " + " | ".join(f"T = {float(t):g} ms" for t in ts) + " |",
          "|---|---|---|---:|" + "---:|" * len(ts)]
    for r in rows:
        cells = []
        for t in ts:
            v = r["ratio"].get(t, "")
            cells.append("" if v == "" else ("div." if v is None else ("∞" if v in (math.inf, "inf") else f"{v:.2f}")))
        L.append(f"| {r['robot']} | {r['motion']} | {r['controller']} | {r['latency_ratio']:g} | " + " | ".join(cells) + " |")
    L.append("")
    return L


def plot(res: dict, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    s = res["settings"]
    robots, motions = s["robots"], list(s["speeds_hz"])
    fig, axes = plt.subplots(len(robots), len(motions), figsize=(4.2 * len(motions), 3.6 * len(robots)), squeeze=False)
    colors = {"exact": "k", "binder_herzog": "tab:blue", "yamakita": "tab:orange", "hamilton": "tab:green",
              "binder_herzog_lwp": "tab:purple"}
    for i, robot in enumerate(robots):
        for j, motion in enumerate(motions):
            ax = axes[i][j]
            for x in res["summary"]:
                if (x["robot"], x["motion"]) != (robot, motion):
                    continue
                ts = s["periods_ms"]
                ok = [t for t in ts if x["max_error_rad"][str(t)] is not None]
                style = "-" if x["delay_periods"] == 0 else "--"
                label = f"{x['controller']}, d = {'0' if x['delay_periods'] == 0 else 'T'}"
                ax.plot(ok, [x["max_error_rad"][str(t)] for t in ok], style, marker=".", color=colors[x["controller"]],
                        label=label)
                if x["first_divergent_T_ms"] is not None:
                    ax.plot([x["first_divergent_T_ms"]], [1.0], "x" if x["delay_periods"] == 0 else "+",
                            color=colors[x["controller"]], markersize=9)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{robot}, {motion} ({s['speeds_hz'][motion]} Hz)", fontsize=9)
            ax.set_xlabel("control period T (ms)")
            ax.set_ylabel("max tracking error (rad)")
            ax.axhline(1.0, color="gray", lw=0.5)
            if i == 0 and j == 0:
                ax.legend(fontsize=6)
    fig.suptitle(f"computed-torque control, exact vs stale RNEA (x / +: first diverging T, d = 0 / T) — "
                 f"{res['machine']['cpu'][:40]}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def add_latencies(res: dict) -> None:
    bench.log(f"timing {' / '.join(ID_KERNELS.values())} (C++ driver) and their HLS estimates")
    cxx = find_cxx()
    res["latencies"] = {robot: kernel_latencies(robot, cxx) for robot in ROBOTS}
    # JSON has no infinity: "exact diverged, stale did not" is written as the string "inf"
    res["computation_bound"] = [{**r, "ratio": {t: ("inf" if v == math.inf else v) for t, v in r["ratio"].items()}}
                                for r in computation_bound(res["summary"], res["latencies"])]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a few periods, 1 s runs (a smoke run)")
    p.add_argument("--out", default=None, help="results folder (default benchmarks/results; --quick: a temporary one)")
    p.add_argument("--render", action="store_true", help="only rewrite control.md and control.png from control.json in --out")
    p.add_argument("--jobs", type=int, default=None, help="worker processes (default: the CPUs available)")
    p.add_argument("--id", choices=("kernel", "reference"), default="kernel",
                   help="the controller's inverse dynamics: the generated kernels (default) or the NumPy reference")
    p.add_argument("--latencies", action="store_true",
                   help="only (re)measure the kernels' latencies and the computation-bound comparison, into the "
                        "control.json in --out, and rewrite control.md")
    args = p.parse_args(argv)
    if args.render or args.latencies:
        out = Path(args.out) if args.out else HERE / "results"
        res = json.loads((out / "control.json").read_text())
        if args.latencies:
            add_latencies(res)
            (out / "control.json").write_text(json.dumps(res, indent=1) + "\n")
        (out / "control.md").write_text(markdown(res))
        plot(res, out / "control.png")
        return 0
    out = Path(args.out) if args.out else (Path(tempfile.mkdtemp(prefix="rbdgen-control-")) if args.quick else HERE / "results")
    out.mkdir(parents=True, exist_ok=True)
    jobs = args.jobs or len(os.sched_getaffinity(0))
    periods = QUICK_PERIODS_MS if args.quick else PERIODS_MS
    duration = QUICK_DURATION if args.quick else DURATION
    t_start = time.perf_counter()
    res = {"machine": bench.machine_info(find_cxx()),
           "settings": {"robots": list(ROBOTS), "speeds_hz": dict(ctl.SPEEDS), "amplitude": 0.25,
                        "controllers": list(ctl.CONTROLLERS), "delays": list(DELAYS), "periods_ms": list(periods),
                        "rms_periods_ms": [t for t in (0.5, 1, 2, 4, 8) if t in periods],
                        "duration_s": duration, "plant_step_ms": PLANT_STEP * 1e3, "integrator": "RK4",
                        "natural_frequency": ctl.DEFAULT_NATURAL_FREQUENCY, "damping": ctl.DEFAULT_DAMPING,
                        "diverge_at_rad": 1.0, "jobs": jobs, "id": args.id}}
    bench.log("building the plants' aba kernels (cached)")
    res["per_call_us"] = {robot: per_call_times(robot) for robot in ROBOTS}
    tasks = [(robot, motion, c, d, T, duration, args.id) for robot in ROBOTS for motion in ctl.SPEEDS
             for c in ctl.CONTROLLERS for d in DELAYS for T in periods]
    # the expensive runs (short periods, many controller calls) first, so the pool ends evenly
    tasks.sort(key=lambda t: t[4])
    bench.log(f"{len(tasks)} runs on {jobs} processes")
    runs = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for i, r in enumerate(pool.map(one_run, tasks, chunksize=1)):
            runs.append(r)
            if (i + 1) % 50 == 0:
                bench.log(f"{i + 1}/{len(tasks)} runs")
    res["runs"] = runs
    res["summary"] = summarize(runs)
    add_latencies(res)
    res["wall_s"] = round(time.perf_counter() - t_start, 1)
    (out / "control.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / "control.md").write_text(markdown(res))
    drew = plot(res, out / "control.png")
    bench.log(f"wrote {out / 'control.json'}, {out / 'control.md'}" + (f", {out / 'control.png'}" if drew else " (no matplotlib: no plot)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
