#!/usr/bin/env python3
"""Seed 000's experiments (Yang, Wu & Pan, "Parallel dynamics computation using prefix sum
operations", §V, Figs. 1–3) with our kernels, on this machine's CPU (`make bench-seed000`; issue 39).

    python benchmarks/seed000.py            # the whole run (~15 min on 2 cores)
    python benchmarks/seed000.py --quick    # small sizes, for a smoke run

The paper times, on an 8-core Intel i7-6700 (CPU, one thread per independent computation) and a
Tesla K40c (CUDA):

* **Fig. 1(a)**: one inverse dynamics call against the number of links (10 … 10⁵ on its axis),
  "Parallel ID" (its scans, GPU) against "Serial ID" (CPU). Ours: ``rnea`` and ``rnea_scan``
  one state per call, the C++ driver (thread CPU time), 10 … 1000 links (beyond: `make
  bench-rolled`'s 3000 and 10 000, quoted from benchmarks/results/rolled.json when present).
* **Fig. 1(b)**: one forward dynamics call, 10 … 10³ links: "Hybrid ABI" (ABA with its linear
  passes as scans), "Parallel JSI" (M⁻¹ by n + 1 scanned IDs, GPU), "Serial ABI", "Serial JSI".
  Ours: ``aba`` (serial ABI), ``aba_scan`` (the scan form of ABA, on the CPU), the JSI route
  (``crba`` and ``nle``, then M q̈ = τ − b solved by LAPACK), and ``fd_schur``
  (Fijany's log-depth FD, seed 002; to 64 links, where it is generated unrolled).
* **Figs. 2 and 3**: many independent calls ("group number" 1 … 1000): ID for 10- and 100-link
  chains, FD for 10- and 200-link chains. Ours: one batched call of N states on all of this
  machine's cores (OpenMP, SIMD lanes across states), wall time of the whole batch.

The chains are benchmarks/scan.py's (``chain_urdf(n, seed=n, fixed_every=0)``: random axes and
link frames, as the paper's "twists … initialized randomly"). The paper's figures are plots; its
text gives no numbers for the curves beyond the statements quoted in the report, so none are
read off them here. GPU columns: the first GPU session (`make gpu-check`: seeds_gpu.py).

Writes seed000.json, seed000.md and seed000.png to --out (default benchmarks/results/).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import measure as bench  # noqa: E402

import rbdgen  # noqa: E402
from rbdgen import registry  # noqa: E402
from rbdgen.robots import chain_urdf  # noqa: E402
from rbdgen.toolchain.compiler import find_cxx  # noqa: E402

ID = ("rnea", "rnea_scan")
FD = ("aba", "aba_scan", "fd_schur")
JSI = ("crba", "nle")
#: unrolled up to this many links, rolled (unroll=False) beyond
UNROLLED_MAX = 100
#: fd_schur is generated unrolled only (N log N operations): up to this many links
SCHUR_MAX = 64

#: what the paper's text says about its figures (seed 000, §I and §V), quoted
PAPER = {
    "hardware": "8-core Intel i7-6700 CPU (15.6 GB), Tesla K40c GPU (CUDA); 1000 repetitions with random "
                "joint inputs, average reported",
    "fig1a": "\"when the number of links increases, the serial CPU's computation time increases linearly, while "
             "the GPU's time cost roughly increases at the log(n) rate\"",
    "fig1b": "\"The GPU-based parallel JSIIA is the fastest for robots with moderate number of links, but it is "
             "outperformed by hybrid ABIA and the serial ABIA when the link the number is more than 100 links or "
             "190 links respectively\"; \"the serial JSIIA has the worst performance\"",
    "fig2": "\"the running time of the CPU inverse dynamics increases linearly with the group number … a "
            "satisfactory ∼100x speedup when the group number is 1000\"",
    "fig3": "10 links: \"the GPU-based JSIIA is always the most efficient one\"; 200 links: \"the hybrid ABIA "
            "always outperforms the other three methods, and the multithreading JSIIA is the slowest\"",
    "claim": "\"a maximal 500x speedup on inverse dynamics computation, and a maximal 100x speedup on forward "
             "dynamics\" (GPU against their multithreaded CPU)",
}


def chain(n: int, work: Path):
    p = work / f"chain{n}.urdf"
    p.write_text(chain_urdf(n, seed=n, fixed_every=0))
    return rbdgen.load_urdf(p)


def _driver(cxx, model, kernels, work: Path, quick: bool, unroll) -> tuple[dict, float]:
    """ns per call of each kernel, one state, the C++ driver; and the build's seconds."""
    from rbdgen.targets.cpu.emit import generate_cpu

    rng = np.random.default_rng(model.nv)
    t = time.perf_counter()
    gen = generate_cpu(model, dtypes=("float64",), kernels=kernels, unroll=unroll)
    kern = rbdgen.build(model, kernels=kernels, unroll=unroll, progress=False)
    build_s = time.perf_counter() - t
    pool = work / "pool.bin"
    pool.write_bytes(bench.pool_bytes(bench.states(model, rng, 256, kernels), model, kernels))
    exe = bench.build_driver(cxx, gen, Path(kern.path), model, work)
    res = bench.run_driver(exe, pool, quick)
    return {k: res[k]["median"] for k in kernels}, build_s


def _solve_ns(model, quick: bool) -> float:
    """ns of the JSI route's solve alone: M q̈ = f by LAPACK (numpy.linalg.solve, one thread, from
    Python: a few µs of call overhead included)."""
    rng = np.random.default_rng(1)
    A = rng.normal(size=(model.nv, model.nv))
    M = A @ A.T + model.nv * np.eye(model.nv)
    b = rng.normal(size=model.nv)
    tm = bench.measure(lambda: np.linalg.solve(M, b), target_s=0.02 if quick else 0.1,
                       runs=3 if quick else 5, budget_s=1.0 if quick else 3.0)
    return bench.summary(tm)["median"]


def fig1(ns, cxx, work: Path, quick: bool) -> dict:
    out = {}
    for n in ns:
        m = chain(n, work)
        unroll = n <= UNROLLED_MAX
        ks = list(ID) + ["aba", "aba_scan"] + list(JSI) + (["fd_schur"] if n <= SCHUR_MAX else [])
        d = work / f"fig1_{n}"
        d.mkdir()
        t = time.perf_counter()
        ns_per, build_s = _driver(cxx, m, ks, d, quick, unroll)
        row = {"lowering": "unrolled" if unroll else "rolled", "build_s": round(build_s, 1), "ns": ns_per}
        row["ns"]["solve"] = _solve_ns(m, quick)
        row["ns"]["jsi"] = ns_per["crba"] + ns_per["nle"] + row["ns"]["solve"]
        out[str(n)] = row
        bench.log(f"fig. 1: n = {n} ({row['lowering']}) in {time.perf_counter() - t:.0f} s: " +
                  ", ".join(f"{k} {v / 1e3:.2f} µs" for k, v in row["ns"].items()))
    return out


def _batch_ms(kern, model, k, n: int, quick: bool) -> float:
    rng = np.random.default_rng(n)
    st = bench.states(model, rng, n, [k])
    f = kern.kernel(k)
    ins = tuple(st[x] for x in registry.get(k).input_names)
    o = bench.out_arrays(kern.methods[k], (n,))
    tm = bench.measure(lambda: f(*ins, out=o), target_s=0.02 if quick else 0.1, runs=3 if quick else 5,
                       budget_s=1.0 if quick else 3.0)
    return bench.summary(tm, clock="wall")["median"] / 1e6


def _jsi_batch_ms(kern, model, n: int, quick: bool) -> float:
    """The JSI route on a batch: crba and nle batched, then the N solves (numpy.linalg.solve on the
    stack: LAPACK, one call)."""
    rng = np.random.default_rng(n)
    st = bench.states(model, rng, n, ["crba", "nle"])
    M = np.zeros((n, model.nv, model.nv))
    b = np.zeros((n, model.nv))

    def run():
        kern.kernel("crba")(st["q"], out=M)
        kern.kernel("nle")(st["q"], st["v"], out=b)
        np.linalg.solve(M, (st["tau"] - b)[..., None])

    tm = bench.measure(run, target_s=0.02 if quick else 0.1, runs=3 if quick else 5, budget_s=1.0 if quick else 3.0)
    return bench.summary(tm, clock="wall")["median"] / 1e6


def fig23(groups, chains: dict, work: Path, quick: bool) -> dict:
    out = {}
    for fig, (kernels, sizes) in chains.items():
        for n in sizes:
            m = chain(n, work)
            ks = list(kernels) + (list(JSI) if fig == "fig3" else [])
            kern = rbdgen.build(m, kernels=ks, progress=False)
            row = {}
            for g in groups:
                cell = {k: _batch_ms(kern, m, k, g, quick) for k in kernels}
                if fig == "fig3":
                    cell["jsi"] = _jsi_batch_ms(kern, m, g, quick)
                row[str(g)] = cell
            out[f"{fig}:{n}"] = row
            bench.log(f"{fig}: {n} links: " + "; ".join(
                f"N={g}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in row[str(g)].items()) for g in (groups[0], groups[-1])))
    return out


def markdown(res: dict) -> str:
    mi = res["machine"]
    L = ["# Seed 000's experiments with our kernels (Yang, Wu & Pan, §V, Figs. 1–3)", "",
         f"Machine: {mi['cpu']} ({mi['cpus_available']} CPUs available), {mi['compiler'].splitlines()[0]}; rbdgen "
         f"{mi['rbdgen']} (git {mi['git']}), {mi['date']}. Generated by `make bench-seed000` (benchmarks/seed000.py).", "",
         f"The paper's machine: {PAPER['hardware']}. Its figures are plots; the text gives no numbers for the "
         "curves, so only what it states is quoted here. Its headline: " + PAPER["claim"] + ".", "",
         "## Fig. 1(a): one inverse dynamics call against the number of links", "",
         "Paper: " + PAPER["fig1a"] + ".", "",
         "Ours: µs per call, one state, the C++ driver (thread CPU time); unrolled to 100 links, rolled "
         "(`unroll=False`) beyond.", "",
         "| links | lowering | rnea (serial ID) | rnea_scan (scan ID, on the CPU) | scan / serial |",
         "|---:|---|---:|---:|---:|"]
    for n, r in res["fig1"].items():
        a, b = r["ns"]["rnea"], r["ns"]["rnea_scan"]
        L.append(f"| {n} | {r['lowering']} | {a / 1e3:.2f} | {b / 1e3:.2f} | {b / a:.1f} |")
    for n, r in res.get("rolled", {}).items():
        L.append(f"| {n} | rolled (`make bench-rolled`, {res['rolled_rev']}) | {r['rnea'] / 1e3:.2f} | "
                 f"{r['rnea_scan'] / 1e3:.2f} | {r['rnea_scan'] / r['rnea']:.1f} |")
    if res.get("rolled"):
        L += ["", "The rows from `make bench-rolled` were measured in another run, each size's library holding rnea, "
              "aba and rnea_scan only (this run's also holds aba_scan, crba, nle and, to 64 links, fd_schur); a "
              "library's contents move a call's time (its instruction-cache footprint), so compare within a run."]
    L += ["", "## Fig. 1(b): one forward dynamics call against the number of links", "",
          "Paper: " + PAPER["fig1b"] + ".", "",
          "Ours, µs per call: aba (serial ABI); aba_scan (ABA's linear passes as scans: the paper's hybrid ABI, "
          "here all on the CPU); the JSI route (crba + nle, then a LAPACK solve from Python, a few µs of call "
          "overhead included); fd_schur (Fijany's, seed 002: log depth; generated to 64 links).", "",
          "| links | aba | aba_scan | JSI (crba + nle + solve) | of which the solve (from Python) | fd_schur | JSI / aba |",
          "|---:|---:|---:|---:|---:|---:|---:|"]
    for n, r in res["fig1"].items():
        x = r["ns"]
        fs = f"{x['fd_schur'] / 1e3:.2f}" if "fd_schur" in x else "–"
        L.append(f"| {n} | {x['aba'] / 1e3:.2f} | {x['aba_scan'] / 1e3:.2f} | {x['jsi'] / 1e3:.2f} | "
                 f"{x['solve'] / 1e3:.2f} | {fs} | {x['jsi'] / x['aba']:.1f} |")
    for fig, title, quote in (("fig2", "Fig. 2: many independent inverse dynamics calls", PAPER["fig2"]),
                              ("fig3", "Fig. 3: many independent forward dynamics calls", PAPER["fig3"])):
        L += ["", f"## {title}", "", "Paper: " + quote + ".", "",
              f"Ours: ms for the whole batch of N states, one call on all {mi['cpus_available']} cores (wall time).", ""]
        for key, row in res["fig23"].items():
            if not key.startswith(fig):
                continue
            ks = list(next(iter(row.values())))
            L += [f"{key.split(':')[1]} links:", "", "| N | " + " | ".join(ks) + " |", "|---:|" + "---:|" * len(ks)]
            for g, cell in row.items():
                L.append(f"| {g} | " + " | ".join(f"{cell[k]:.4f}" for k in ks) + " |")
            L.append("")
    L += ["GPU: not measured in this run (no GPU on this machine); the prepared GPU check (`make gpu-check`, "
          "benchmarks/seeds_gpu.py) runs seed 000's Fig. 1 and Fig. 2 on the first GPU lent.", ""]
    return "\n".join(L)


def plot(res: dict, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    ns = [int(n) for n in res["fig1"]]
    rolled = {int(n): r for n, r in res.get("rolled", {}).items()}
    for k, style in (("rnea", "o-"), ("rnea_scan", "s-")):
        xs = ns + sorted(rolled)
        ys = [res["fig1"][str(n)]["ns"][k] / 1e6 for n in ns] + [rolled[n][k] / 1e6 for n in sorted(rolled)]
        axes[0].plot(xs, ys, style, label=k)
    axes[0].set_title("Fig. 1(a): one ID call (CPU)")
    for k, style in (("aba", "o-"), ("aba_scan", "s-"), ("jsi", "^-"), ("fd_schur", "D-")):
        xs = [n for n in ns if k in res["fig1"][str(n)]["ns"]]
        axes[1].plot(xs, [res["fig1"][str(n)]["ns"][k] / 1e6 for n in xs], style, label=k)
    axes[1].set_title("Fig. 1(b): one FD call (CPU)")
    for ax in axes[:2]:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("links")
        ax.set_ylabel("ms per call")
        ax.legend(fontsize=8)
    for key, row in res["fig23"].items():
        gs = [int(g) for g in row]
        for k in next(iter(row.values())):
            axes[2].plot(gs, [row[str(g)][k] for g in gs], "o-", label=f"{k}, {key}")
    axes[2].set_xscale("log")
    axes[2].set_yscale("log")
    axes[2].set_xlabel("independent calls (group number)")
    axes[2].set_ylabel("ms per batch (all cores)")
    axes[2].set_title("Figs. 2, 3: many calls (CPU)")
    axes[2].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    p.add_argument("--out", default=None, help="results folder (default benchmarks/results; --quick: a temporary one)")
    p.add_argument("--render", action="store_true", help="only rewrite seed000.md and seed000.png from seed000.json")
    args = p.parse_args(argv)
    out = Path(args.out) if args.out else (Path(tempfile.mkdtemp(prefix="rbdgen-seed000-")) if args.quick else HERE / "results")
    if args.render:
        bench.write_report(out, "seed000", None, markdown, plot)
        return 0
    out.mkdir(parents=True, exist_ok=True)
    cxx = find_cxx()
    with bench.scratch_cache("rbdgen-seed000-work-") as work:
        res = {"machine": bench.machine_info(cxx), "paper": PAPER}
        res["fig1"] = fig1([10, 30] if args.quick else [10, 30, 100, 300, 1000], cxx, work, args.quick)
        rolled = HERE / "results" / "rolled.json"
        if rolled.exists() and not args.quick:  # 3000 and 10 000 links: the rolled sweep's (minutes to build)
            rj = json.loads(rolled.read_text())
            res["rolled_rev"] = rj.get("machine", {}).get("git") or rj.get("revision") or "rolled.json"
            res["rolled"] = {}
            for row in rj.get("chains", []):
                if row.get("nb") in (3000, 10000) and row.get("lowering") == "rolled":
                    ks = row.get("kernels", {})
                    if all(k in ks and ks[k].get("ns") for k in ID):
                        res["rolled"][str(row["nb"])] = {k: ks[k]["ns"] for k in ID}
        groups = [1, 10, 100] if args.quick else [1, 10, 100, 1000]
        chains = {"fig2": (("rnea", "rnea_scan"), [10] if args.quick else [10, 100]),
                  "fig3": (("aba", "aba_scan"), [10] if args.quick else [10, 200])}
        res["fig23"] = fig23(groups, chains, work, args.quick)
    bench.write_report(out, "seed000", res, markdown, plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
