#!/usr/bin/env python3
"""The seeds' GPU experiments, on our kernels (step 5 of `make gpu-check`; needs a GPU and cupy).

    python benchmarks/seeds_gpu.py [--out benchmarks/results] [--quick]

* **Seed 000** (Yang, Wu, Pan: parallel dynamics by prefix sums, ../shared/seeds/000_…):
  - Fig. 1, *one* inverse dynamics against the number of links: ``rnea`` (the sequential
    recursion, one state on one thread or on cooperating lanes) against ``rnea_scan`` (its
    log-depth scan form) on synthetic chains of 4 … 32 links and the iiwa (7), one state per
    call. GPU time per call from CUDA events around a CUDA graph of back-to-back launches (so
    the host's launch cost is out of it), and the CPU kernel on one state;
  - Fig. 2, *many independent* inverse dynamics: iiwa ``rnea`` and ``rnea_scan`` for N = 1 …
    65536 states per call, ns per state, GPU (events, back-to-back) against the CPU (all cores).
* **Seed 001** (Plancher et al.: the dynamics gradient on CPU, GPU and FPGA, ../shared/seeds/001_…),
  Fig. 3: their Algorithm 3 with M⁻¹ given (``fd_derivatives_minv``) and ∇FD (``aba_derivatives``)
  of the iiwa, N = 16, 32, 64, 128, end to end: numpy in and
  out through the GPU (pinned staging, one copy each way), GPU arrays through a prepared launch
  and through a CUDA graph (each with its synchronisation), and the CPU batch on all cores.

Writes seeds_gpu.json and seeds_gpu.md to --out after each experiment.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gpu_check  # noqa: E402  (the models as the tests build them, the chains, the seed settings)

import rbdgen  # noqa: E402
from rbdgen import registry  # noqa: E402


def wall(fn, min_s, rounds=5):
    fn()
    t0 = time.perf_counter()
    fn()
    reps = max(1, int(min_s / max(time.perf_counter() - t0, 1e-7)))
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        out.append((time.perf_counter() - t0) / reps)
    return statistics.median(out)


def events(cp, stream, fn, min_s, rounds=5):
    """Seconds per call of ``fn`` (enqueueing on ``stream``), CUDA events around back-to-back calls."""
    fn()
    stream.synchronize()
    a, b = cp.cuda.Event(), cp.cuda.Event()
    a.record(stream)
    fn()
    b.record(stream)
    b.synchronize()
    reps = max(1, int(min_s / max(cp.cuda.get_elapsed_time(a, b) * 1e-3, 1e-7)))
    out = []
    for _ in range(rounds):
        a.record(stream)
        for _ in range(reps):
            fn()
        b.record(stream)
        b.synchronize()
        out.append(cp.cuda.get_elapsed_time(a, b) * 1e-3 / reps)
    return statistics.median(out)


def inputs(model, k, n, seed=0):
    rng = np.random.default_rng(seed)
    env = {"q": np.ascontiguousarray(model.random_q(rng, n)), "v": rng.normal(size=(n, model.nv)),
           "a": rng.normal(size=(n, model.nv)), "tau": rng.normal(size=(n, model.nv)) * 10}
    names = registry.get(k).input_names
    env = registry.complete_inputs(model, env, seed=n, names=set(names))  # none after k's: M⁻¹ is nv² a state
    return [np.ascontiguousarray(env[x]) for x in names]


def device_call(cp, kern, k, host, shape, stream, launches=32):
    """(prepared launch, CUDA graph of ``launches`` launches) of kernel ``k`` on device copies of ``host``."""
    dev = [cp.asarray(x) for x in host]
    method = kern.kernel(k)
    outs = method(*dev, shape=shape)
    prep = method.prepare(*dev, out=outs, stream=stream, shape=shape)
    return prep, prep.graph(launches), (dev, outs)


def one_state_shapes(cp, gk, k, host, stream, min_s, call_sync=False) -> dict:
    """µs per call of kernel ``k`` on one state, each launch shape it has: CUDA events around a
    graph of 32 back-to-back launches; ``call_sync``: also a prepared launch and a stream
    synchronisation from Python, end to end."""
    row = {}
    for shape in ("thread", "block"):
        if shape == "thread" and not gk.info[k]["thread_shape"]:
            continue
        prep, graph, _keep = device_call(cp, gk, k, host, shape, stream, launches=32)
        row[f"gpu_{shape}_us"] = events(cp, stream, graph, min_s) / 32 * 1e6
        if call_sync:
            row[f"gpu_{shape}_call_sync_us"] = wall(lambda p=prep: (p(), stream.synchronize()), min_s) * 1e6
        graph.close()
    return row


def one_state_rows(cp, gk, ck, model, name, kernels, stream, min_s, call_sync=False) -> list:
    """A row per kernel of one state per call: the GPU library ``gk``'s launch shapes
    (:func:`one_state_shapes`) and the CPU library ``ck``'s call from Python, each printed."""
    rows = []
    for k in kernels:
        host = inputs(model, k, 1)
        row = {"robot": name, "links": model.nb, "kernel": k}
        row.update(one_state_shapes(cp, gk, k, host, stream, min_s, call_sync=call_sync))
        one = [x[0] for x in host]
        row["cpu_one_us"] = wall(lambda: getattr(ck, k)(*one), min_s) * 1e6
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def seed000(cp, args, res, save):
    stream = cp.cuda.Stream(non_blocking=True)
    work = Path(os.environ.get("RBDGEN_GPU_CHECK_CHAINS", gpu_check.PREP / "chains"))
    # Fig. 1: one state per call against the number of links
    rows = []
    models = [(f"chain{n}", gpu_check.chain_model(n, work)) for n in gpu_check.SEED_CHAINS]
    models.insert(1, ("iiwa14", gpu_check.load_model("iiwa14-fixed")))
    for name, model in models:
        gk = rbdgen.build(model, target="cuda", kernels=gpu_check.SEED_KERNELS) if name != "iiwa14" else \
            rbdgen.build(model, target="cuda")
        ck = rbdgen.build(model, kernels=gpu_check.SEED_CPU_IIWA if name == "iiwa14" else gpu_check.SEED_KERNELS)
        rows += one_state_rows(cp, gk, ck, model, name, gpu_check.SEED_KERNELS, stream, args.min_s, call_sync=True)
        res["seed000_fig1"] = rows
        save()
    # Fig. 2: many independent calls (iiwa), ns per state
    model = gpu_check.load_model("iiwa14-fixed")
    gk = rbdgen.build(model, target="cuda")
    ck = rbdgen.build(model, kernels=gpu_check.SEED_CPU_IIWA)
    rows = []
    for n in args.sizes:
        for k in gpu_check.SEED_KERNELS:
            host = inputs(model, k, n)
            prep, graph, _keep = device_call(cp, gk, k, host, "auto", stream, launches=1)
            row = {"n": n, "kernel": k, "gpu_ns_per_state": events(cp, stream, prep, args.min_s) / n * 1e9}
            outs = getattr(ck, k)(*host)
            row["cpu_ns_per_state"] = wall(lambda: getattr(ck, k)(*host, out=outs), args.min_s) / n * 1e9
            graph.close()
            rows.append(row)
            print(json.dumps(row), flush=True)
        res["seed000_fig2"] = rows
        save()


def fijany(cp, args, res, save):
    """Issue 41: Fijany's fd_schur (log depth) against aba (linear) and aba_scan on the chains of
    Fig. 1, one state per call, each launch shape the kernel has (docs/fijany.md)."""
    stream = cp.cuda.Stream(non_blocking=True)
    work = Path(os.environ.get("RBDGEN_GPU_CHECK_CHAINS", gpu_check.PREP / "chains"))
    rows = []
    for n in gpu_check.SEED_CHAINS:
        model = gpu_check.chain_model(n, work)
        gk = rbdgen.build(model, target="cuda", kernels=gpu_check.SCHUR_KERNELS)
        ck = rbdgen.build(model, kernels=gpu_check.SCHUR_KERNELS)
        rows += one_state_rows(cp, gk, ck, model, f"chain{n}", gpu_check.SCHUR_KERNELS, stream, args.min_s)
        res["fijany_fd"] = rows
        save()


def seed001(cp, args, res, save):
    stream = cp.cuda.Stream(non_blocking=True)
    model = gpu_check.load_model("iiwa14-fixed")
    gk = rbdgen.build(model, **gpu_check.SEED001_BUILD)
    ck = rbdgen.build(model, kernels=gpu_check.SEED_CPU_IIWA)
    rows = []
    # their kernel (Algorithm 3, M⁻¹ given: its footnote 1), then ∇FD computing q̈ and M⁻¹ itself
    for k in ("fd_derivatives_minv", "aba_derivatives"):
        for n in (16, 32, 64, 128):
            host = inputs(model, k, n)
            row = {"n": n, "kernel": k}
            g, c = gk.kernel(k), ck.kernel(k)
            row["gpu_numpy_us"] = wall(lambda g=g: g(*host), args.min_s) * 1e6
            for shape in ("auto", "block"):
                prep, graph, _keep = device_call(cp, gk, k, host, shape, stream, launches=1)
                row[f"gpu_{shape}_call_sync_us"] = wall(lambda p=prep: (p(), stream.synchronize()), args.min_s) * 1e6
                row[f"gpu_{shape}_graph_sync_us"] = wall(lambda g=graph: (g(), stream.synchronize()), args.min_s) * 1e6
                graph.close()
            outs = c(*host)
            row["cpu_us"] = wall(lambda c=c, o=outs: c(*host, out=o), args.min_s) * 1e6
            rows.append(row)
            print(json.dumps(row), flush=True)
            res["seed001_fig3"] = rows
            save()


def markdown(res) -> str:
    L = [f"# The seeds' GPU experiments ({res['date']})", "", f"- GPU: {res['gpu']}", f"- CPU: {res['cpu']}", ""]
    if "seed000_fig1" in res:
        L += ["## Seed 000, Fig. 1: one inverse dynamics against the number of links", "",
              "µs per call, one state. gpu: CUDA events around a graph of 32 back-to-back launches (kernel time "
              "plus the graph's launch gap); call+sync: a prepared launch and a stream synchronisation from Python, "
              "end to end; cpu: the CPU kernel, one state, from Python.", "",
              "| robot | links | kernel | gpu thread | gpu block | call+sync thread | call+sync block | cpu |",
              "|---|---:|---|---:|---:|---:|---:|---:|"]
        for r in res["seed000_fig1"]:
            f = lambda c: f"{r[c]:.2f}" if c in r else "—"  # noqa: E731
            L.append(f"| {r['robot']} | {r['links']} | {r['kernel']} | {f('gpu_thread_us')} | {f('gpu_block_us')} | "
                     f"{f('gpu_thread_call_sync_us')} | {f('gpu_block_call_sync_us')} | {f('cpu_one_us')} |")
        L.append("")
    if "seed000_fig2" in res:
        L += ["## Seed 000, Fig. 2: many independent inverse dynamics (iiwa)", "",
              "ns per state: gpu from CUDA events around back-to-back prepared launches (auto shape); cpu: the batch "
              "on all cores.", "", "| N | kernel | gpu | cpu | cpu / gpu |", "|---:|---|---:|---:|---:|"]
        for r in sorted(res["seed000_fig2"], key=lambda r: (r["n"], r["kernel"])):
            L.append(f"| {r['n']} | {r['kernel']} | {r['gpu_ns_per_state']:.2f} | {r['cpu_ns_per_state']:.2f} | "
                     f"{r['cpu_ns_per_state'] / r['gpu_ns_per_state']:.2f} |")
        L.append("")
    if "seed001_fig3" in res:
        L += ["## Seed 001, Fig. 3: the iiwa's dynamics gradient end to end, N = 16 … 128", "",
              "`fd_derivatives_minv`: their Algorithm 3 with M⁻¹ given (their footnote 1: cached); `aba_derivatives`: "
              "∇FD computing q̈ and M⁻¹ as well.", "",
              "µs per batch, wall clock from Python. numpy: host arrays in and out through the GPU (pinned staging, "
              "one copy each way); call+sync / graph+sync: GPU arrays, a prepared launch (or its CUDA graph) and a "
              "stream synchronisation; cpu: the CPU batch on all cores. The seed's GPU was 1.2× (N = 16) to 3.0× "
              "(N = 128) ahead of a 4-core CPU.", "",
              "| kernel | N | numpy | call+sync auto | graph+sync auto | call+sync block | graph+sync block | cpu | cpu / best gpu |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in res["seed001_fig3"]:
            best = min(r[c] for c in r if c.startswith("gpu_"))
            L.append(f"| {r.get('kernel', 'aba_derivatives')} | {r['n']} | {r['gpu_numpy_us']:.1f} | {r['gpu_auto_call_sync_us']:.1f} | "
                     f"{r['gpu_auto_graph_sync_us']:.1f} | {r['gpu_block_call_sync_us']:.1f} | "
                     f"{r['gpu_block_graph_sync_us']:.1f} | {r['cpu_us']:.1f} | {r['cpu_us'] / best:.2f} |")
    if "fijany_fd" in res:
        L += ["", "## Issue 41: Fijany's fd_schur against aba on chains (one state per call)", "",
              "µs per call: CUDA events around a graph of 32 back-to-back launches; cpu: the CPU kernel from Python.", "",
              "| robot | links | kernel | gpu thread | gpu block | cpu |", "|---|---:|---|---:|---:|---:|"]
        for r in res["fijany_fd"]:
            f = lambda c: f"{r[c]:.2f}" if c in r else "—"  # noqa: E731
            L.append(f"| {r['robot']} | {r['links']} | {r['kernel']} | {f('gpu_thread_us')} | {f('gpu_block_us')} | "
                     f"{f('cpu_one_us')} |")
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=HERE / "results")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--min-s", type=float, default=None)
    args = p.parse_args(argv)
    args.min_s = args.min_s or (0.002 if args.quick else 0.01)
    args.sizes = [1, 16, 256, 4096, 65536] if args.quick else [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536]
    try:
        import cupy as cp

        if cp.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no device")
    except Exception as e:  # noqa: BLE001 - ImportError or cupy's runtime errors
        print(f"seeds_gpu.py: needs a GPU and cupy ({e}); nothing measured", file=sys.stderr)
        return 2
    res = {"date": datetime.date.today().isoformat(), "gpu": gpu_check._gpu_name(), "cpu": gpu_check._cpu_name()}
    args.out.mkdir(parents=True, exist_ok=True)

    def save():
        (args.out / "seeds_gpu.json").write_text(json.dumps(res, indent=1) + "\n")
        (args.out / "seeds_gpu.md").write_text(markdown(res))

    seed001(cp, args, res, save)  # the short one first: Fig. 3 is what issue 47 compares against
    seed000(cp, args, res, save)
    fijany(cp, args, res, save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
