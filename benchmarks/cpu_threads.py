#!/usr/bin/env python3
"""The CPU batch path's cost per call against N, thread count and OpenMP wait policy (issue 47, item 3).

    python benchmarks/cpu_threads.py [--out benchmarks/results] [--threads 16,4,1]

On the 16-core host of the GPU machine the CPU column of bench-cuda swung 30× between neighbouring
N (iiwa crba: 92 ns/state at N = 132, 3178 at N = 256, 346 at 1024). What this measures, per
kernel (iiwa rnea, crba, aba; the bench's CPU library) and N, in a fresh process per setting
(libgomp reads its settings once):

* µs per call and ns per state of the batch entry point, back to back (median of rounds);
* voluntary context switches per call (getrusage): with rbdgen's default OMP_WAIT_POLICY=passive
  each worker thread sleeps after every parallel batch and is woken by the next one — three
  switches per worker per call, measured on the 2-core build machine; a wake-up of an idle vCPU in
  a VM costs far more than on bare metal;

for OMP_NUM_THREADS in --threads and two wait policies: passive (rbdgen's default, set in
rbdgen.kernels.loaded._omp_defaults) and a bounded spin (GOMP_SPINCOUNT=100000: a worker spins
about a millisecond before it sleeps). Writes cpu_threads.json and cpu_threads.md to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIZES = (1, 16, 64, 128, 132, 192, 256, 384, 512, 1024, 2048, 4096, 16384)
KERNELS = ("rnea", "crba", "aba")

CHILD = r"""
import json, resource, statistics, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import gpu_check, rbdgen
from rbdgen import registry
model = gpu_check.load_model("iiwa14-fixed")
kern = rbdgen.build(model, kernels=gpu_check.BENCH_KERNELS)
rng = np.random.default_rng(0)
for k in sys.argv[2].split(","):
    f = getattr(kern, k)
    for n in map(int, sys.argv[3].split(",")):
        env = {"q": np.ascontiguousarray(model.random_q(rng, n)), "v": rng.normal(size=(n, model.nv)),
               "a": rng.normal(size=(n, model.nv)), "tau": rng.normal(size=(n, model.nv))}
        args = [env[x] for x in registry.get(k).input_names]
        out = f(*args)
        for _ in range(20):
            f(*args, out=out)
        t0 = time.perf_counter(); f(*args, out=out)
        reps = max(3, int(2e-3 / max(time.perf_counter() - t0, 1e-7)))
        times, r0 = [], resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(reps):
                f(*args, out=out)
            times.append((time.perf_counter() - t0) / reps)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        us = statistics.median(times) * 1e6
        print(json.dumps({"kernel": k, "n": n, "us_per_call": round(us, 2), "ns_per_state": round(us * 1e3 / n, 1),
                          "nvcsw_per_call": round((r1.ru_nvcsw - r0.ru_nvcsw) / (5 * reps), 2)}), flush=True)
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=HERE / "results")
    p.add_argument("--threads", default=f"{os.cpu_count()},4,1")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)))
    args = p.parse_args(argv)
    res = {"cpu_count": os.cpu_count(), "rows": []}
    args.out.mkdir(parents=True, exist_ok=True)
    for threads in dict.fromkeys(int(t) for t in args.threads.split(",")):
        for policy, env in (("passive", {}), ("spin 100000", {"GOMP_SPINCOUNT": "100000"})):
            if threads == 1 and policy != "passive":
                continue
            e = {**os.environ, "OMP_NUM_THREADS": str(threads), **env}
            r = subprocess.run([sys.executable, "-c", CHILD, str(HERE), ",".join(KERNELS), args.sizes], env=e,
                               capture_output=True, text=True, timeout=300)
            sys.stderr.write(r.stderr[-2000:])
            for line in r.stdout.splitlines():
                row = json.loads(line)
                row.update(threads=threads, policy=policy)
                res["rows"].append(row)
                print(json.dumps(row), flush=True)
            (args.out / "cpu_threads.json").write_text(json.dumps(res, indent=1) + "\n")
            (args.out / "cpu_threads.md").write_text(markdown(res))
    return 0


def markdown(res) -> str:
    L = ["# CPU batch path: cost per call against N, threads and OpenMP wait policy", "",
         f"{res['cpu_count']} logical cores; iiwa; ns per state (voluntary context switches per call). "
         "passive: rbdgen's default (OMP_WAIT_POLICY=passive); spin: GOMP_SPINCOUNT=100000.", ""]
    configs = list(dict.fromkeys((r["threads"], r["policy"]) for r in res["rows"]))
    for k in KERNELS:
        rows = [r for r in res["rows"] if r["kernel"] == k]
        if not rows:
            continue
        L += [f"## {k}", "", "| N | " + " | ".join(f"{t} thr {p}" for t, p in configs) + " |",
              "|---:|" + "---:|" * len(configs)]
        for n in sorted({r["n"] for r in rows}):
            cells = []
            for t, p in configs:
                r = next((r for r in rows if r["n"] == n and r["threads"] == t and r["policy"] == p), None)
                cells.append(f"{r['ns_per_state']:.0f} ({r['nvcsw_per_call']:g})" if r else "—")
            L.append(f"| {n} | " + " | ".join(cells) + " |")
        L.append("")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())
