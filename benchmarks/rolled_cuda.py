#!/usr/bin/env python3
"""The CUDA target rolled against unrolled (issue 44): what a build costs, and what ptxas makes of
each kernel. No GPU needed: nothing runs, this is the compiler's side (the time per call needs a
GPU: `make gpu-check` runs every kernel both ways, benchmarks/run_cuda.py times them).

    python benchmarks/rolled_cuda.py            # iiwa14, the floating quadruped and TALOS (~15 min)
    python benchmarks/rolled_cuda.py --robots bundled:iiwa14

For each robot and lowering, in a process of its own with a cold compile cache: every kernel
generated (seconds, bytes of source) and built as `rbdgen.build(..., target="cuda")` does by
default for a machine without a GPU (sm_80 and sm_90, -O3), then ptxas's report for sm_90 of
every kernel and launch shape (registers, local memory, spills, threads, shared memory, the
H100 occupancy; rbdgen.targets.cuda.resources). Writes rolled_cuda.json and rolled_cuda.md to
--out (default benchmarks/results/).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

ROBOTS = ["bundled:iiwa14", "quadruped-floating", "talos_reduced-floating"]
LOWERINGS = {"unrolled": True, "rolled": False}
TIMEOUT_S = 2400


def one(spec: str, lowering: str) -> dict:
    from rbdgen.toolchain.compiler import CACHE_ENV

    work = Path(tempfile.mkdtemp(prefix="rbdgen-rolled-cuda-"))
    os.environ[CACHE_ENV] = str(work / "cache")  # cold: nothing generated or compiled before
    import rbdgen
    from gpu_check import load_model
    from rbdgen.targets.cuda.emit import generate_cuda
    from rbdgen.targets.cuda.resources import H100, kernel_resources

    model = load_model(spec, work)
    unroll = LOWERINGS[lowering]
    t0 = time.perf_counter()
    gen = generate_cuda(model, unroll=unroll)
    gen_s = time.perf_counter() - t0
    src_bytes = sum(len(t.encode()) for t in gen.files.values())
    t0 = time.perf_counter()
    rbdgen.build(model, target="cuda", unroll=unroll, arch="80,90", opt="-O3", progress=False)
    build_s = time.perf_counter() - t0  # generation again (from the generation cache) + nvcc
    rows = kernel_resources(gen, "float64", gpu=H100)
    per = {}
    for r in rows:
        per.setdefault(r["kernel"], {})[r["shape"]] = {x: r[x] for x in ("registers", "local_bytes", "spill_bytes",
                                                                          "threads", "shared_bytes", "states_per_sm")}
    for k, i in gen.kernels.items():
        per[k]["workspace"] = i["float64"]["scratch_block"]
        per[k]["lanes"] = i["float64"]["lanes"]
        per[k]["stages"] = i["float64"]["stages"]
    return {"spec": spec, "lowering": lowering, "nb": model.nb, "nv": model.nv, "kernels": len(gen.kernels),
            "generate_s": round(gen_s, 1), "build_s": round(build_s, 1), "source_bytes": src_bytes, "per": per}


def run_one(spec: str, lowering: str) -> dict:
    from rolled import run_json

    return run_json([sys.executable, __file__, "--one", spec, lowering], spec, lowering, TIMEOUT_S)


def report(res: dict) -> str:
    lines = ["# CUDA: rolled against unrolled kernels (issue 44)", "",
             f"`python benchmarks/rolled_cuda.py` on {res['machine']} ({res['date']}; {res['cores']} cores; "
             f"{res['nvcc']}; rbdgen {res['git']}). Every "
             "kernel of each robot, generated and built from a cold compile cache for sm_80 and sm_90 at -O3 "
             "(nvcc's default here), in a process of its own; then ptxas's sm_90 report of each kernel (the "
             "compiler's figures: nothing ran on a GPU).", "",
             "| robot | lowering | kernels | source | generate | build (generate + nvcc) |",
             "|---|---|---:|---:|---:|---:|"]
    for r in res["runs"]:
        if "error" in r:
            lines.append(f"| {r['spec']} | {r['lowering']} | — | — | — | {r['error']} |")
            continue
        lines.append(f"| {r['spec']} | {r['lowering']} | {r['kernels']} | {r['source_bytes'] / 1e6:.1f} MB | "
                     f"{r['generate_s']} s | {r['build_s']} s |")
    lines += ["", "Per kernel (sm_90, float64): registers / local memory per thread (bytes) / spills (bytes) of "
              "the thread and the block shape, the block shape's lanes, stages and workspace (scalars per state), "
              "and the states an H100 SM holds in the block shape (occupancy: registers, shared memory).", ""]
    by = {}
    for r in res["runs"]:
        if "error" not in r:
            by[r["spec"], r["lowering"]] = r
    for spec in dict.fromkeys(r["spec"] for r in res["runs"]):
        u, ro = by.get((spec, "unrolled")), by.get((spec, "rolled"))
        if not (u and ro):
            continue
        lines += [f"**{spec}**", "",
                  "| kernel | thread: unrolled | rolled | block: unrolled | rolled | lanes × stages | "
                  "workspace | states/SM (block) |", "|---|---|---|---|---|---|---|---|"]

        def cell(p, shape):
            s = p.get(shape)
            return "—" if s is None else f"{s['registers']} / {s['local_bytes']} / {s['spill_bytes']}"

        for k in u["per"]:
            a, b = u["per"][k], ro["per"].get(k, {})
            if not b:
                continue
            lines.append(f"| {k} | {cell(a, 'thread')} | {cell(b, 'thread')} | {cell(a, 'block')} | "
                         f"{cell(b, 'block')} | {a['lanes']}×{a['stages']} → {b['lanes']}×{b['stages']} | "
                         f"{a['workspace']} → {b['workspace']} | {a['block']['states_per_sm']} → "
                         f"{b['block']['states_per_sm']} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robots", default=",".join(ROBOTS))
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--one", nargs=2, metavar=("SPEC", "LOWERING"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(*args.one)))
        return 0
    runs = []
    for spec in args.robots.split(","):
        for lowering in LOWERINGS:
            print(f"{spec}, {lowering} ...", flush=True)
            runs.append(run_one(spec, lowering))
            r = runs[-1]
            print("  " + (r.get("error") or f"generate {r['generate_s']} s, build {r['build_s']} s, "
                                               f"{r['source_bytes'] / 1e6:.1f} MB"), flush=True)
    import measure
    from rbdgen.targets.cuda.nvcc import find_nvcc

    from rbdgen.toolchain.compiler import find_cxx

    info = measure.machine_info(find_cxx())
    nvcc = subprocess.run([find_nvcc(), "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    res = {"machine": info["cpu"], "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(),
           "nvcc": nvcc[-1] if nvcc else "?", "git": info["git"], "load_average_at_start": info["load_average_at_start"],
           "python": platform.python_version(), "runs": runs}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rolled_cuda.json").write_text(json.dumps(res, indent=1) + "\n")
    (args.out / "rolled_cuda.md").write_text(report(res))
    print(f"wrote {args.out / 'rolled_cuda.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
