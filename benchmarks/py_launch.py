"""Python's launch path on the GPU, end to end (issue 47, item 1: N = 1 call ≤ 8 µs from Python):
µs per call, launch and stream synchronisation included, for the iiwa's rnea, aba and ∇FD at
N = 1 … 256, four ways:

- ``call``: the kernel method with cupy arrays and ``out=`` (checks every call), then a sync;
- ``prepared``: ``kern.kernel(k).prepare(..., out=, stream=)`` (checked once, one C call a launch), then a sync;
- ``graph``: that launch captured in a CUDA graph (``prepared.graph()``), replayed, then a sync;
- ``prepared, no sync``: back-to-back prepared launches, one sync a round (throughput).

Run on the GPU machine by ``benchmarks/gpu_check.py`` (step ``pylaunch``); the library is the one
``run_cuda.py`` builds for the iiwa (the same model and call, so the prebuilt one is found).
Writes benchmarks/results/py_launch.{json,md}.
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import rbdgen
import rbdgen.robots

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_cuda import SIGS, cpu_name, gpu_name, states  # noqa: E402

KERNELS = ("rnea", "aba", "aba_derivatives")
SIZES = (1, 4, 16, 64, 256)
WAYS = ("call", "prepared", "graph", "prepared, no sync")


def per_call(fn, sync, min_s: float, rounds: int, sync_each: bool = True) -> float:
    """Median µs per call over ``rounds`` rounds lasting ``min_s`` each."""
    fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    reps = max(10, int(min_s / max(time.perf_counter() - t0, 1e-7)))
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
            if sync_each:
                sync()
        sync()
        out.append((time.perf_counter() - t0) / reps)
    return statistics.median(out) * 1e6


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    p.add_argument("--min-s", type=float, default=0.02)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    import cupy as cp
    import numpy as np

    model = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    # run_cuda.py's model and build call, so that its prebuilt library is the one found
    model = model.with_frames([f for f in model.leaf_links if "sole" in f][:2] or model.leaf_links[:4])
    gk = rbdgen.build(model, target="cuda", arch="native")
    rng = np.random.default_rng(0)
    stream = cp.cuda.Stream(non_blocking=True)
    res = {"date": datetime.date.today().isoformat(), "gpu": gpu_name(), "cpu": cpu_name(),
           "command": "python " + " ".join(sys.argv), "kernels": {}}
    for k in KERNELS:
        gfn = gk.kernel(k)
        rows = {}
        for n in SIZES:
            st = states(model, n, rng)
            dev = [cp.asarray(st[x] if n > 1 else st[x][0]) for x in SIGS[k]]
            outs = gfn(*dev)
            out = outs
            row = {}
            with stream:
                row["call"] = per_call(lambda: gfn(*dev, out=out), stream.synchronize, args.min_s, args.rounds)
            prep = gfn.prepare(*dev, out=out, stream=stream)
            row["prepared"] = per_call(prep, stream.synchronize, args.min_s, args.rounds)
            g = prep.graph()
            row["graph"] = per_call(g, stream.synchronize, args.min_s, args.rounds)
            g.close()
            row["prepared, no sync"] = per_call(prep, stream.synchronize, args.min_s, args.rounds, sync_each=False)
            rows[n] = {w: round(v, 2) for w, v in row.items()}
            print(json.dumps({"kernel": k, "n": n, **rows[n]}), flush=True)
        res["kernels"][k] = rows
        write(res, args.out)  # after each kernel: a run cut off keeps what it measured
    return 0


def write(res: dict, out: Path):
    out.mkdir(parents=True, exist_ok=True)
    (out / "py_launch.json").write_text(json.dumps(res, indent=1) + "\n")
    lines = [f"# CUDA launches from Python, end to end ({res['date']})", "", f"- GPU: {res['gpu']}",
             f"- CPU: {res['cpu']}", f"- {res['command']}", "",
             "iiwa (bundled), float64, cupy arrays in and out. µs per call, median of rounds, wall clock: "
             "`call`: the kernel method with `out=`, then a stream sync; `prepared`: `kern.kernel(k).prepare(...)`'s "
             "launch (checked once), then a sync; `graph`: that launch as a CUDA graph, replayed, then a sync; "
             "`prepared, no sync`: back-to-back launches, one sync a round.", ""]
    for k, rows in res["kernels"].items():
        lines += [f"## {k}", "", "| N | " + " | ".join(f"{w} µs" for w in WAYS) + " |",
                  "|---:|" + "---:|" * len(WAYS)]
        for n, row in sorted(rows.items(), key=lambda it: int(it[0])):
            lines.append(f"| {n} | " + " | ".join(f"{row[w]:.2f}" for w in WAYS) + " |")
        lines.append("")
    (out / "py_launch.md").write_text("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
