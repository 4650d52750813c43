#!/usr/bin/env python3
"""Log-depth dynamics report (`make bench-scan`, issue 12): op counts, depth and measured time of
the sequential kernels (rnea, aba) against their scan forms (rnea_scan, aba_scan).

    python benchmarks/scan.py                 # everything (~10 min on 2 cores)
    python benchmarks/scan.py --quick         # smaller sweep, for a smoke run

Three parts, all in one run so the numbers sit side by side:

1. **Op counts against the literature**: our generated RNEA for a *general* 6-joint arm (random
   joint axes and link frames: no zero or unit entry to exploit), for a real 6-DoF arm (UR5, from
   example-robot-data) and the same traced without pruning, next to Luh–Walker–Paul's count as
   Lathrop's Table 1 gives it and Lathrop's parallel step counts (the whole of his Table 1 and
   Table 4: benchmarks/lathrop.py, `make bench-lathrop`).
2. **Depth against n** for synthetic chains n = 4 … 1024: the critical path of the kernel IR
   (unlimited processors) for rnea and for rnea_scan in each evaluation order, aba and aba_scan,
   and Lathrop's step counts. Traced only, nothing compiled.
3. **Measured time against n** (CPU; the GPU part when a GPU is present is `make bench-cuda`,
   which runs every registered kernel): one state through a C++ driver, and batches of 1024
   states per call on one thread, for rnea vs rnea_scan and aba vs aba_scan.
4. **Fijany's Schur-complement forward dynamics** (issue 41, seed 002; docs/fijany.md): the
   depth of fd_schur and constrained_fd_schur (a 3d contact at the tip) against aba, aba_scan
   and constrained_fd for chains of 4 … 1024, their serial op counts, the HLS latency estimate
   (double, the cost model of `inspect --cost --target hls`) where the divisions of block cyclic
   reduction sit side by side, and the measured CPU time against aba's.

Writes scan.json, scan.md and scan.png to --out (default benchmarks/results/).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import measure as bench  # noqa: E402  (benchmarks/measure.py: machine info, timing helpers, the C++ driver)

import rbdgen  # noqa: E402
from rbdgen.algorithms.scan import traced  # noqa: E402
from rbdgen.ir.schedule import critical_path  # noqa: E402
from rbdgen.toolchain.compiler import find_cxx  # noqa: E402
from rbdgen.registry import trace  # noqa: E402
from rbdgen.robots import chain_urdf  # noqa: E402
from rbdgen.scan import METHODS  # noqa: E402
from rbdgen import Contact, registry  # noqa: E402
from rbdgen.algorithms.schur import traced as schur_traced  # noqa: E402
from rbdgen.targets.hls.emit import NumType, hls_cost  # noqa: E402

#: Lathrop, "Parallelism in manipulator dynamics" (IJRR 1985), Table 1's Luh–Walker–Paul row (seed 003,
#: line 98: 150n − 48 mults, 131n − 48 addns; 852 and 738 at n = 6). Every row of Table 1, and Table 4,
#: with the seed's line numbers: benchmarks/lathrop.py → benchmarks/results/lathrop.md
LWP = {"label": "Luh–Walker–Paul recursive Newton–Euler (Lathrop's Table 1, general 6-joint arm; every row: lathrop.md)",
       "mul": 852, "add": 738}


def lathrop_linear(n):
    """(multiply steps, add steps) of Lathrop's parallel Newton–Euler, one processor per joint."""
    return 2 * n + 3, 6 * n + 7


def lathrop_log(n):
    """(multiply steps, add steps) of Lathrop's logarithmic formulation."""
    k = math.ceil(math.log2(n + 1))
    return 2 * k + 5, 6 * k + 10


def general_arm_urdf(n=6, seed=0) -> str:
    """A serial arm with random unit joint axes and random link frames (rotation and offset):
    every entry of every X_tree, axis and inertia is a generic number."""
    rng = np.random.default_rng(seed)
    out = ['<?xml version="1.0"?>', '<robot name="general_arm">', '  <link name="base"/>']
    prev = "base"
    for i in range(n):
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        rpy = rng.uniform(-np.pi, np.pi, 3)
        xyz = rng.uniform(-0.3, 0.3, 3)
        com = rng.uniform(-0.1, 0.1, 3)
        mass = float(rng.uniform(1, 3))
        a, b, c = rng.uniform(0.05, 0.4, 3)  # a box's principal moments, turned by a random rotation
        R = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        Ic = (R @ np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) @ R.T * mass / 12).tolist()
        f = lambda v: " ".join(repr(float(x)) for x in v)  # noqa: E731
        out += [f'  <link name="l{i}"><inertial><origin xyz="{f(com)}" rpy="0 0 0"/><mass value="{mass!r}"/>'
                f'<inertia ixx="{Ic[0][0]!r}" ixy="{Ic[0][1]!r}" ixz="{Ic[0][2]!r}" iyy="{Ic[1][1]!r}" '
                f'iyz="{Ic[1][2]!r}" izz="{Ic[2][2]!r}"/></inertial></link>',
                f'  <joint name="j{i}" type="revolute"><parent link="{prev}"/><child link="l{i}"/>'
                f'<origin xyz="{f(xyz)}" rpy="{f(rpy)}"/><axis xyz="{f(axis)}"/>'
                f'<limit lower="-3" upper="3" effort="100" velocity="3"/></joint>']
        prev = f"l{i}"
    out.append("</robot>")
    return "\n".join(out)


def load_text(text: str, work: Path, name: str):
    p = work / f"{name}.urdf"
    p.write_text(text)
    return rbdgen.load_urdf(p)


def counts(kernel) -> dict:
    c = kernel.op_counts()
    cp = critical_path(kernel)
    return {"mul": c["mul"], "add": c["add"], "div": c["div"], "sincos": c["sincos"], "total": c["total"],
            "depth": cp.depth, "mul_steps": cp.mul, "add_steps": cp.add}


# ---- 1. op counts ---------------------------------------------------------------------------------

def op_count_table(work: Path) -> dict:
    rows = {}
    arms = {"general 6-joint arm (random axes and frames)": load_text(general_arm_urdf(), work, "general_arm")}
    ur5 = bench.CMEEL / "share/example-robot-data/robots/ur_description/urdf/ur5_robot.urdf"
    if ur5.exists():
        arms["UR5 (6 DoF, example-robot-data)"] = rbdgen.load_urdf(ur5)
    for label, m in arms.items():
        r = {"nv": m.nv,
             "rnea": counts(trace(m, "rnea", cached=False)),
             "rnea_dense": counts(trace(m, "rnea", fold=False, cached=False)),
             "nle": counts(trace(m, "nle", cached=False))}
        for meth in METHODS:
            r[f"rnea_scan[{meth}]"] = counts(traced(m, "rnea_scan", meth))
        rows[label] = r
    return rows


# ---- 2. depth vs n ----------------------------------------------------------------------------------

def depth_sweep(ns, aba_max: int, work: Path) -> dict:
    out = {}
    for n in ns:
        t = time.perf_counter()
        m = load_text(chain_urdf(n, seed=n, fixed_every=0), work, f"chain{n}")
        row = {"rnea": counts(trace(m, "rnea", cached=False))}
        for meth in METHODS:
            row[f"rnea_scan[{meth}]"] = counts(traced(m, "rnea_scan", meth))
        if n <= aba_max:
            row["aba"] = counts(trace(m, "aba", cached=False))
            row["aba_scan[hillis_steele]"] = counts(traced(m, "aba_scan", "hillis_steele"))
        row["lathrop_linear_steps"] = sum(lathrop_linear(n))
        row["lathrop_log_steps"] = sum(lathrop_log(n))
        out[str(n)] = row
        bench.log(f"depth: n = {n} traced in {time.perf_counter() - t:.1f} s")
    return out


# ---- 3. measured time vs n ----------------------------------------------------------------------------

PAIRS = (("rnea", "rnea_scan"), ("aba", "aba_scan"))


def time_sweep(ns, aba_max: int, batch: int, quick: bool, cxx: str, work: Path) -> dict:
    out = {}
    for n in ns:
        m = load_text(chain_urdf(n, seed=n, fixed_every=0), work, f"tchain{n}")
        ks = ["rnea", "rnea_scan"] + (["aba", "aba_scan"] if n <= aba_max else [])
        rng = np.random.default_rng(n)
        drv = work / f"driver{n}"
        drv.mkdir()
        kern, exe, pool_file, build_s = bench.single_state_driver(cxx, m, ks, rng, drv)
        single = bench.run_driver(exe, pool_file, quick)
        st = bench.states(m, rng, batch, ks)
        batched = {}
        for k in ks:
            f = kern.kernel(k)
            ins = tuple(st[x] for x in bench.SIGS[k])
            o = bench.out_arrays(kern.methods[k], (batch,))
            tm = bench.measure(lambda: f(*ins, out=o), target_s=0.02 if quick else 0.1, runs=3 if quick else 5,
                               budget_s=1.0 if quick else 3.0)
            batched[k] = bench.summary(tm, per=batch)["median"]
        out[str(n)] = {"build_s": round(build_s, 1), "single_ns": {k: single[k]["median"] for k in ks},
                       "batch_ns_per_state": batched, "lanes": kern.lanes,
                       "ops": {k: counts(trace(m, k)) for k in ks}}
        bench.log(f"time: n = {n}: built in {build_s:.1f} s; " + ", ".join(
            f"{k} {single[k]['median']:.0f} ns" for k in ks))
    return out


# ---- 4. Fijany's Schur-complement forward dynamics ------------------------------------------------------

SCHUR_DEPTH = ("aba", "aba_scan", "fd_schur", "constrained_fd", "constrained_fd_schur")
SCHUR_TIME = ("aba", "aba_scan", "fd_schur")


def _tip_contact(m):
    return m.with_constraints([Contact(m.leaf_links[0], "3d")])


def schur_depth(ns, constrained_max: int, hls_max: int, work: Path) -> dict:
    """Depth and op counts (traced only) of the forward dynamics kernels, and the HLS latency
    estimate (double, 250 MHz) up to ``hls_max`` links."""
    out = {}
    dbl = NumType("double")
    for n in ns:
        t = time.perf_counter()
        m = load_text(chain_urdf(n, seed=n, fixed_every=0), work, f"schur{n}")
        row = {}
        for k in SCHUR_DEPTH:
            if k.startswith("constrained") and n > constrained_max:
                continue
            if k == "aba_scan" and n > 256:
                continue
            kern = trace(_tip_contact(m) if k.startswith("constrained") else m, k, cached=False)
            row[k] = counts(kern)
            if n <= hls_max and k in ("aba", "fd_schur"):
                row[k]["hls_cycles"] = hls_cost(kern, dbl)["latency_cycles"]
            del kern
        kern = schur_traced(m, refine=0)  # Table I alone, without the refinement step fd_schur ships with
        row["fd_schur_table1"] = counts(kern)
        if n <= hls_max:
            row["fd_schur_table1"]["hls_cycles"] = hls_cost(kern, dbl)["latency_cycles"]
        del kern
        out[str(n)] = row
        bench.log(f"schur depth: n = {n} traced in {time.perf_counter() - t:.1f} s")
    return out


def schur_hls_iiwa() -> dict:
    m = rbdgen.load_urdf(HERE.parent / "robots" / "iiwa14.urdf")
    dbl = NumType("double")
    out = {}
    for k in ("aba", "aba_scan", "fd_schur"):
        c = hls_cost(trace(m, k, cached=False), dbl)
        out[k] = {"cycles": c["latency_cycles"], "div": c["div"], "depth": critical_path(trace(m, k)).depth}
    kern = schur_traced(m, refine=0)
    c = hls_cost(kern, dbl)
    out["fd_schur, Table I alone"] = {"cycles": c["latency_cycles"], "div": c["div"], "depth": critical_path(kern).depth}
    return out


def schur_time(ns, batch: int, quick: bool, cxx: str, work: Path) -> dict:
    out = {}
    models = {"iiwa14": rbdgen.load_urdf(HERE.parent / "robots" / "iiwa14.urdf")}
    for n in ns:
        models[f"chain {n}"] = load_text(chain_urdf(n, seed=n, fixed_every=0), work, f"schur_t{n}")
    for label, m in models.items():
        rng = np.random.default_rng(m.nv)
        drv = work / f"schur_driver_{m.nv}_{len(out)}"
        drv.mkdir()
        kern, exe, pool_file, build_s = bench.single_state_driver(cxx, m, list(SCHUR_TIME), rng, drv)
        single = bench.run_driver(exe, pool_file, quick)
        st = bench.states(m, rng, batch, list(SCHUR_TIME))
        batched = {}
        for k in SCHUR_TIME:
            f = kern.kernel(k)
            ins = tuple(st[x] for x in registry.get(k).input_names)
            o = bench.out_arrays(kern.methods[k], (batch,))
            tm = bench.measure(lambda: f(*ins, out=o), target_s=0.02 if quick else 0.1, runs=3 if quick else 5,
                               budget_s=1.0 if quick else 3.0)
            batched[k] = bench.summary(tm, per=batch)["median"]
        out[label] = {"nv": m.nv, "build_s": round(build_s, 1), "single_ns": {k: single[k]["median"] for k in SCHUR_TIME},
                      "batch_ns_per_state": batched}
        bench.log(f"schur time: {label}: " + ", ".join(f"{k} {single[k]['median']:.0f} ns" for k in SCHUR_TIME))
    return out


# ---- report ------------------------------------------------------------------------------------------

def markdown(res: dict) -> str:
    mi = res["machine"]
    L = ["# Log-depth dynamics: sequential vs scan kernels", "",
         f"Machine: {mi['cpu']} ({mi['cpus_available']} CPUs available), {mi['compiler'].splitlines()[0]}; rbdgen {mi['rbdgen']} "
         f"(git {mi['git']}), {mi['date']}. Generated by `make bench-scan` (benchmarks/scan.py); "
         "method and discussion in docs/scan.md.", ""]
    L += ["## 1. Op counts of inverse dynamics for 6-joint arms", "",
          "Multiplies and adds of the generated code (sin/cos and divisions apart); *depth*: the critical path "
          "with unlimited processors, and the multiplies / adds on it (Lathrop's multiply and add *steps*). "
          "Our counts include gravity and the 6-D spatial bookkeeping of a general joint frame.", "",
          "| arm | formulation | mul | add | depth | × steps | + steps |", "|---|---|---:|---:|---:|---:|---:|"]
    for arm, r in res["op_counts"].items():
        for k, label in (("rnea_dense", "rnea traced without pruning"), ("rnea", "rnea (pruned: what we ship)"),
                         ("nle", "nle (a = 0)")) + tuple((f"rnea_scan[{m}]", f"rnea_scan, {m}") for m in METHODS):
            c = r[k]
            L.append(f"| {arm} | {label} | {c['mul']} | {c['add']} | {c['depth']} | {c['mul_steps']} | {c['add_steps']} |")
    n = 6
    L += [f"| literature | {LWP['label']} | {LWP['mul']} | {LWP['add']} | | | |",
          f"| literature | Lathrop, parallel NE, one processor per joint (n = 6) | | | | {lathrop_linear(n)[0]} | {lathrop_linear(n)[1]} |",
          f"| literature | Lathrop, logarithmic NE (n = 6) | | | | {lathrop_log(n)[0]} | {lathrop_log(n)[1]} |", ""]
    L += ["## 2. Depth (critical path in ops) against chain length", "",
          "Synthetic chains (robots/synthetic.py, `chain_urdf(n, seed=n, fixed_every=0)`); kernel IR traced, "
          "nothing compiled. Lathrop's columns are his multiply + add step counts.", "",
          "| n | rnea | rnea_scan HS | rnea_scan Blelloch | rnea_scan sequential order | aba | aba_scan HS "
          "| Lathrop linear | Lathrop log | rnea ops | rnea_scan HS ops | rnea_scan Blelloch ops |",
          "|---:|" + "---:|" * 11]
    for n, r in res["depth"].items():
        g = lambda k, f="depth": str(r[k][f]) if k in r else "–"  # noqa: E731
        L.append(f"| {n} | {g('rnea')} | {g('rnea_scan[hillis_steele]')} | {g('rnea_scan[blelloch]')} | "
                 f"{g('rnea_scan[sequential]')} | {g('aba')} | {g('aba_scan[hillis_steele]')} | "
                 f"{r['lathrop_linear_steps']} | {r['lathrop_log_steps']} | {g('rnea', 'total')} | "
                 f"{g('rnea_scan[hillis_steele]', 'total')} | {g('rnea_scan[blelloch]', 'total')} |")
    L += ["", "## 3. Measured time against chain length (CPU)", "",
          f"One state: C++ driver, median ns per call. Batch: {res['batch']} states per call, one thread, ns per "
          "state. Ratio > 1: the scan form is slower.", "",
          "| n | rnea 1 state | rnea_scan 1 state | ratio | rnea batch | rnea_scan batch | ratio | "
          "aba 1 state | aba_scan 1 state | ratio | aba batch | aba_scan batch | ratio |", "|---:|" + "---:|" * 12]
    for n, r in res["time"].items():
        cells = [n]
        for a, b in PAIRS:
            for key in ("single_ns", "batch_ns_per_state"):
                x, y = r[key].get(a), r[key].get(b)
                cells += [f"{x:.0f}" if x else "–", f"{y:.0f}" if y else "–", f"{y / x:.2f}" if x and y else "–"]
        L.append("| " + " | ".join(cells) + " |")
    L += ["", res.get("gpu_note", ""), ""]
    if "schur_depth" in res:
        L += schur_markdown(res)
    return "\n".join(L)


def schur_markdown(res: dict) -> list:
    L = ["## 4. Fijany's Schur-complement forward dynamics (issue 41, seed 002)", "",
         "Depth: the critical path in ops with unlimited processors (kernel IR, nothing compiled), synthetic "
         "chains `chain_urdf(n, seed=n, fixed_every=0)`; the constrained kernels with a 3d contact at the tip. "
         "*ops*: total operations of the pruned kernel; *×aba*: fd_schur's ops over aba's (the serial price). "
         "HLS: latency estimate in cycles (double, 250 MHz; `inspect --cost --target hls`'s model). "
         "Method and discussion: docs/fijany.md.", "",
         "fd_schur is what ships (Table I and one step of iterative refinement, ours); *Table I*: the paper's "
         "procedure alone.", "",
         "| n | aba depth | aba_scan depth | fd_schur depth | Table I depth | constrained_fd depth | "
         "constrained_fd_schur depth | aba ops | fd_schur ops | ×aba | Table I ops | aba HLS cycles | "
         "fd_schur HLS cycles | Table I HLS cycles |", "|---:|" + "---:|" * 13]
    for n, r in res["schur_depth"].items():
        g = lambda k, f="depth": str(r[k][f]) if k in r and f in r[k] else "–"  # noqa: E731
        ratio = f"{r['fd_schur']['total'] / r['aba']['total']:.1f}" if "aba" in r and "fd_schur" in r else "–"
        L.append(f"| {n} | {g('aba')} | {g('aba_scan')} | {g('fd_schur')} | {g('fd_schur_table1')} | "
                 f"{g('constrained_fd')} | {g('constrained_fd_schur')} | {g('aba', 'total')} | {g('fd_schur', 'total')} | "
                 f"{ratio} | {g('fd_schur_table1', 'total')} | {g('aba', 'hls_cycles')} | {g('fd_schur', 'hls_cycles')} | "
                 f"{g('fd_schur_table1', 'hls_cycles')} |")
    h = res["schur_hls_iiwa"]
    L += ["", "On the iiwa (7 joints), HLS estimate (double, 250 MHz): " + "; ".join(
        f"{k} {v['cycles']} cycles, depth {v['depth']}, {v['div']} divisions" for k, v in h.items()) + ".", ""]
    L += [f"Measured CPU time: one state through the C++ driver (median ns per call) and batches of {res['batch']} "
          "states per call on one thread (ns per state); ratio: fd_schur over aba.", "",
          "| robot | nv | aba 1 state | aba_scan 1 state | fd_schur 1 state | ratio | aba batch | fd_schur batch | ratio |",
          "|---|---:|" + "---:|" * 7]
    for label, r in res["schur_time"].items():
        a, sc, f = (r["single_ns"][k] for k in SCHUR_TIME)
        ab, fb = r["batch_ns_per_state"]["aba"], r["batch_ns_per_state"]["fd_schur"]
        L.append(f"| {label} | {r['nv']} | {a:.0f} | {sc:.0f} | {f:.0f} | {f / a:.1f} | {ab:.0f} | {fb:.0f} | {fb / ab:.1f} |")
    L += ["", "GPU: not measured in this run (no NVIDIA GPU on this machine); the block shape's time per state is "
          "`make bench-cuda BENCH_ARGS=\"--kernels fd_schur,aba\"` on a machine that has one, and `make gpu-check` runs it (docs/fijany.md).", ""]
    return L


def plot(res: dict, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.6))
    ns = [int(n) for n in res["depth"]]
    for key, label, style in (("rnea", "rnea (sequential)", "o-"), ("rnea_scan[hillis_steele]", "rnea_scan, Hillis–Steele", "s-"),
                              ("rnea_scan[blelloch]", "rnea_scan, Blelloch", "^-"), ("aba", "aba", "o--"),
                              ("aba_scan[hillis_steele]", "aba_scan, Hillis–Steele", "s--")):
        xs = [n for n in ns if key in res["depth"][str(n)]]
        a1.plot(xs, [res["depth"][str(n)][key]["depth"] for n in xs], style, label=label)
    if "schur_depth" in res:
        sn = [int(n) for n in res["schur_depth"]]
        for key, label, style in (("fd_schur", "fd_schur (Fijany, BCR, refined)", "D-"),
                                  ("fd_schur_table1", "fd_schur, Table I alone", "d--"),
                                  ("constrained_fd_schur", "constrained_fd_schur", "D:"),
                                  ("constrained_fd", "constrained_fd", "x:")):
            xs = [n for n in sn if key in res["schur_depth"][str(n)]]
            a1.plot(xs, [res["schur_depth"][str(n)][key]["depth"] for n in xs], style, label=label)
    a1.plot(ns, [res["depth"][str(n)]["lathrop_linear_steps"] for n in ns], ":", color="gray", label="Lathrop 8n+10 steps")
    a1.plot(ns, [res["depth"][str(n)]["lathrop_log_steps"] for n in ns], "-.", color="gray", label="Lathrop 8⌈log₂(n+1)⌉+15")
    a1.set_xscale("log", base=2)
    a1.set_yscale("log")
    a1.set_xlabel("chain length n")
    a1.set_ylabel("critical path (ops)")
    a1.set_title("depth with unlimited processors")
    a1.legend(fontsize=7)
    tn = [int(n) for n in res["time"]]
    for k, style in (("rnea", "o-"), ("rnea_scan", "s-"), ("aba", "o--"), ("aba_scan", "s--")):
        for key, suffix, alpha in (("single_ns", "1 state", 1.0), ("batch_ns_per_state", f"batch {res['batch']}", 0.5)):
            xs = [n for n in tn if k in res["time"][str(n)][key]]
            a2.plot(xs, [res["time"][str(n)][key][k] for n in xs], style, alpha=alpha, label=f"{k}, {suffix}")
    if "schur_time" in res:
        rows = [(r["nv"], r["single_ns"]["fd_schur"]) for k, r in res["schur_time"].items() if k.startswith("chain")]
        a2.plot([n for n, _ in rows], [x for _, x in rows], "D-", color="saddlebrown", label="fd_schur, 1 state")
    a2.set_xscale("log", base=2)
    a2.set_yscale("log")
    a2.set_xlabel("chain length n")
    a2.set_ylabel("ns per state (CPU, 1 thread)")
    a2.set_title(f"measured: {res['machine']['cpu'][:40]}")
    a2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smaller sweeps (a smoke run)")
    p.add_argument("--out", default=None, help="results folder (default benchmarks/results; --quick: a temporary one)")
    p.add_argument("--render", action="store_true", help="only rewrite scan.md and scan.png from the scan.json in --out")
    args = p.parse_args(argv)
    if args.render:
        bench.write_report(Path(args.out) if args.out else HERE / "results", "scan", None, markdown, plot)
        return 0
    depth_ns = [4, 8, 16, 32, 64] if args.quick else [4, 8, 16, 32, 64, 128, 256, 512, 1024]
    time_ns = [4, 8, 16] if args.quick else [4, 8, 16, 32, 64, 128]
    aba_depth_max, aba_time_max = (16, 8) if args.quick else (256, 64)
    schur_ns = [4, 8, 16, 32, 64] if args.quick else [4, 8, 16, 32, 64, 128, 256, 512, 1024]
    out = Path(args.out) if args.out else (Path(tempfile.mkdtemp(prefix="rbdgen-scan-")) if args.quick else HERE / "results")
    out.mkdir(parents=True, exist_ok=True)
    cxx = find_cxx()
    with bench.scratch_cache("rbdgen-scan-work-") as work:
        res = {"machine": bench.machine_info(cxx), "batch": 1024}
        bench.log("op counts: general 6-joint arm, UR5")
        res["op_counts"] = op_count_table(work)
        res["depth"] = depth_sweep(depth_ns, aba_depth_max, work)
        res["time"] = time_sweep(time_ns, aba_time_max, res["batch"], args.quick, cxx, work)
        res["schur_depth"] = schur_depth(schur_ns, 64 if args.quick else 256, 32 if args.quick else 64, work)
        res["schur_hls_iiwa"] = schur_hls_iiwa()
        res["schur_time"] = schur_time([8, 16] if args.quick else [8, 16, 32, 64], res["batch"], args.quick, cxx, work)
        res["gpu_note"] = ("GPU: not measured in this run (no NVIDIA GPU on this machine); `make bench-cuda` times "
                           "every registered kernel, rnea_scan and aba_scan included, on a machine that has one.")
    bench.write_report(out, "scan", res, markdown, plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
