"""Batch layouts and streaming stores (issue 49, item 3): what each layout costs per state, on one
core, for the kernels that write the most per operation and two that do not.

For each robot, kernel and batch size N, the same library (default build: -march=native, its
lanes) is called through its C entry points (ctypes, the call's fixed cost measured with N = 0
and subtracted) in four ways, interleaved round by round, best round kept:

* ``rows``: the default layout, (N, size) arrays, outputs written by plain stores (streaming off:
  ``kern.stream_bytes = 0``) — the batch path before this change;
* ``rows, streamed``: the same with streaming stores forced on (``kern.stream_bytes = 1``); the
  library's default streams from ``stream_bytes`` (32 MB) of output per call;
* ``states_last``: ``layout="states_last"``, (size, N) arrays, leading dimension N;
* ``states_last, ld N+8``: the same in arrays of N + 8 columns (views of their first N), which
  moves rows that are a power of two of bytes apart off the same cache sets.

And what a caller pays to move between the layouts with NumPy: ``np.ascontiguousarray(x.T)`` of
the kernel's outputs, per state. Results: benchmarks/results/layouts.{json,md}; docs/performance.md
§23 reads them.

    make bench-layouts              # ~5 minutes on the 2-core VM
    python benchmarks/layouts.py --quick
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import measure as bench  # first: sets the thread and wait-policy environment
from measure import HERE, ROBOTS, SIGS, bench_model, log, states

import numpy as np

import rbdgen
from rbdgen.toolchain.compiler import find_cxx

KERNELS = ("rnea", "crba", "minv", "aba_derivatives", "forward_kinematics", "frame_jacobian_world")
VARIANTS = ("rows", "rows, streamed", "states_last", "states_last, ld N+8")
PAD = 8


def _ptrs(arrays, lds=None):
    if lds is None:
        return [a.ctypes.data for a in arrays]
    return [v for a, ld in zip(arrays, lds) for v in (a.ctypes.data, ld)]


def _best(fn, budget_s: float) -> float:
    """Seconds of the fastest of repeated calls of ``fn`` within about ``budget_s``."""
    best, t_end = float("inf"), time.perf_counter() + budget_s
    while True:
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        if time.perf_counter() > t_end:
            return best


def bench_kernel(kern, model, k: str, n: int, rounds: int, budget_s: float) -> dict:
    m = kern.methods[k]
    st = states(model, np.random.default_rng(n), n)
    ins = [np.ascontiguousarray(st[x]) for x in SIGS[k]]
    outs = [np.empty((n,) + tuple(s)) for _, s in m.outputs]
    sizes = [a[0].size for a in ins] + [o[0].size for o in outs]
    flat_in = [a.reshape(n, -1) for a in ins]
    t_in = [np.ascontiguousarray(a.T) for a in flat_in]
    t_out = [np.empty((sz, n)) for sz in sizes[len(ins):]]
    p_in = [np.zeros((a.shape[0], n + PAD)) for a in t_in]
    for p, a in zip(p_in, t_in):
        p[:, :n] = a
    p_out = [np.empty((sz, n + PAD)) for sz in sizes[len(ins):]]
    calls = {
        "rows": lambda: m.batch(n, *_ptrs(ins + outs)),
        "states_last": lambda: m.batch_lanes(n, *_ptrs(t_in + t_out, [n] * len(sizes))),
        "states_last, ld N+8": lambda: m.batch_lanes(n, *_ptrs(p_in + p_out, [n + PAD] * len(sizes))),
    }
    zero = {"rows": lambda: m.batch(0, *_ptrs(ins + outs)),
            "states_last": lambda: m.batch_lanes(0, *_ptrs(t_in + t_out, [n] * len(sizes)))}
    fixed = {v: _best(f, 0.02) for v, f in zero.items()}  # the ctypes call itself
    best = {v: float("inf") for v in VARIANTS}
    for _ in range(rounds):  # interleaved: a busy moment hits every variant alike
        for v in VARIANTS:
            kern.stream_bytes = 1 if v == "rows, streamed" else 0
            f = calls["rows" if v.startswith("rows") else v]
            t = _best(f, budget_s) - fixed["rows" if v.startswith("rows") else "states_last"]
            best[v] = min(best[v], t)
    kern.stream_bytes = DEFAULT_STREAM
    # the layouts agree (the same kernel on the same states: bit for bit)
    m.batch(n, *_ptrs(ins + outs))
    m.batch_lanes(n, *_ptrs(t_in + t_out, [n] * len(sizes)))
    agree = all(np.array_equal(o.reshape(n, -1).T, t) for o, t in zip(outs, t_out))
    conv = _best(lambda: [np.ascontiguousarray(t.T) for t in t_out], budget_s)
    out_bytes = sum(sizes[len(ins):]) * 8
    return {"ns": {v: round(best[v] / n * 1e9, 2) for v in VARIANTS},
            "convert_outputs_ns": round(conv / n * 1e9, 2), "out_values": out_bytes // 8,
            "out_mb": round(n * out_bytes / 2 ** 20, 2), "default_streams": n * out_bytes >= DEFAULT_STREAM,
            "agree": bool(agree), "lanes": kern.kernel_lanes.get(k)}


DEFAULT_STREAM = 32 << 20


def run(robots, sizes, rounds: int, budget_s: float) -> dict:
    res = {}
    for name in robots:
        path_fn, floating, desc = ROBOTS[name]
        model = bench_model(name, path_fn(), floating)
        log(f"{name}: building {', '.join(KERNELS)}")
        kern = rbdgen.build(model, kernels=list(KERNELS))
        kern.parallel_ops = 1 << 62  # one thread: what a layout costs, not how it spreads
        assert kern.stream_bytes == DEFAULT_STREAM, kern.stream_bytes
        res[name] = {"description": desc, "kernels": {}}
        for k in KERNELS:
            res[name]["kernels"][k] = {}
            for n in sizes:
                r = bench_kernel(kern, model, k, n, rounds, budget_s)
                res[name]["kernels"][k][str(n)] = r
                log(f"{name} {k} N={n}: " + ", ".join(f"{v} {t} ns" for v, t in r["ns"].items())
                    + f"; agree {r['agree']}")
    return res


def markdown(res: dict) -> str:
    mi = res["machine"]
    lines = ["# Batch layouts and streaming stores (issue 49, item 3)", "",
             f"Machine: {mi.get('cpu')}, {mi.get('cpus_available')} CPUs available, {' '.join(mi.get('cpu_simd_flags') or [])}; revision {mi.get('git')}. "
             "One thread; ns per state of one batch call (its fixed cost subtracted), best of "
             f"{res['rounds']} interleaved rounds. `benchmarks/layouts.py` says what each column is.", "",
             "Ratios are against `rows` (plain stores, the path before streaming): above 1 is faster. "
             "*default*: the library's default streams this call (≥ 32 MB of output). "
             "*convert*: `np.ascontiguousarray(x.T)` of the outputs, per state — what a caller that wants rows pays "
             "after a `states_last` call. Every call's outputs agree bit for bit across layouts "
             "(checked: ✗ marks a disagreement).", ""]
    for name, r in res["robots"].items():
        lines += [f"## {name}: {r['description']}", "",
                  "| kernel | values out | N | output | rows | rows, streamed | states_last | states_last, ld N+8 "
                  "| convert |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for k, by_n in r["kernels"].items():
            for n, c in by_n.items():
                base = c["ns"]["rows"]

                def cell(v, c=c, base=base):
                    t = c["ns"][v]
                    return f"{t:.0f} ns" if v == "rows" else f"{t:.0f} ns ({base / t:.2f}×)"
                mark = "" if c["agree"] else " ✗"
                lines.append(f"| {k}{mark} | {c['out_values']} | {n} | {c['out_mb']:.1f} MB"
                             f"{' (default)' if c['default_streams'] else ''} | "
                             + " | ".join(cell(v) for v in VARIANTS) + f" | {c['convert_outputs_ns']:.0f} ns |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="two sizes, one robot (a smoke run)")
    p.add_argument("--out", default=None, help="results folder (default benchmarks/results; --quick: a temporary one)")
    p.add_argument("--render", action="store_true", help="only rewrite layouts.md from layouts.json")
    args = p.parse_args(argv)
    out = Path(args.out) if args.out else (Path(tempfile.mkdtemp(prefix="rbdgen-layouts-")) if args.quick else HERE / "results")
    if args.render:
        bench.write_report(out, "layouts", None, markdown, lambda res, path: False)
        return 0
    out.mkdir(parents=True, exist_ok=True)
    robots = ["iiwa14"] if args.quick else list(ROBOTS)
    sizes = [256, 1000] if args.quick else [256, 1000, 10000, 16384]
    rounds = 2 if args.quick else 5
    with bench.scratch_cache("rbdgen-layouts-"):
        res = {"machine": bench.machine_info(find_cxx()), "rounds": rounds,
               "robots": run(robots, sizes, rounds, 0.01 if args.quick else 0.03)}
    bench.write_report(out, "layouts", res, markdown, lambda res, path: False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
