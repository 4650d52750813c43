#!/usr/bin/env python3
"""GPU benchmark: time per state against batch size, CUDA kernels next to the CPU kernels.

    python benchmarks/run_cuda.py                 # what `make bench-cuda` runs (needs a GPU and cupy)
    python benchmarks/run_cuda.py --quick --robots iiwa14

For iiwa14, the bundled quadruped and the talos humanoid (floating), every kernel, and
N = 1, 4, 16, …, 65536 states per call:

* ``gpu``: inputs and outputs already on the GPU (cupy arrays), each launch shape (auto, thread,
  block), timed with CUDA events around R back-to-back calls on one stream;
* ``gpu+copy``: numpy in, numpy out (copies to and from the GPU, waited for), wall clock;
* ``cpu``: rbdgen's C++ kernels on this host (batched entry point, SIMD across states, OpenMP
  across cores, -O3 -march=native), wall clock.

Reported as nanoseconds per state (median of rounds) and as ratios to the CPU. Writes
``cuda.json`` and ``cuda.md`` to --out (default benchmarks/results/), naming the GPU and CPU.
Exits 2 without writing anything where there is no GPU or no cupy.
"""
from __future__ import annotations

import argparse
import datetime
import inspect
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import rbdgen
import rbdgen.robots
from rbdgen import registry

HERE = Path(__file__).resolve().parent
SIZES = [1, 4, 16, 64, 132, 256, 1024, 4096, 16384, 65536]  # 132: one state per SM of an H100
SIGS = {k: registry.get(k).input_names for k in registry.kernels()}  # declared inputs


def robots():
    import sysconfig

    # RBDGEN_ERD_DIR: the URDFs where example-robot-data is not installed (as tests/conftest.py;
    # benchmarks/gpu_check.py carries them to the GPU machine)
    erd = Path(os.environ.get("RBDGEN_ERD_DIR")
               or Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix/share/example-robot-data/robots")
    return {
        "iiwa14": (Path(rbdgen.robots.path("iiwa14")), False),
        "quadruped": (Path(rbdgen.robots.path("quadruped")), True),
        "talos_reduced": (erd / "talos_data/robots/talos_reduced.urdf", True),
    }


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def gpu_name() -> str:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return "unknown"
    r = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version,compute_cap", "--format=csv,noheader"],
                       capture_output=True, text=True)
    return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else "unknown"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f" ({os.cpu_count()} logical cores)"
    except OSError:
        pass
    return platform.processor() or "unknown"


def states(model, n, rng):
    q = model.random_q(rng, n)
    env = {"q": np.ascontiguousarray(q), "v": rng.normal(size=(n, model.nv)), "a": rng.normal(size=(n, model.nv)),
           "tau": rng.normal(size=(n, model.nv)) * 10}
    return registry.complete_inputs(model, env, seed=n)  # the stale-data kernels' state, as the registry draws it


def wall(fn, min_s, rounds):
    """Median seconds per call over ``rounds`` rounds of enough calls to last ``min_s``."""
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    reps = max(1, int(min_s / one))
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        out.append((time.perf_counter() - t0) / reps)
    return statistics.median(out)


def gpu_time(cp, fn, min_s, rounds):
    """Median seconds per call, CUDA events around back-to-back calls on the current stream."""
    fn()
    cp.cuda.get_current_stream().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    fn()
    end.record()
    end.synchronize()
    one = max(cp.cuda.get_elapsed_time(start, end) * 1e-3, 1e-7)
    reps = max(1, int(min_s / one))
    out = []
    for _ in range(rounds):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        out.append(cp.cuda.get_elapsed_time(start, end) * 1e-3 / reps)
    return statistics.median(out)


def takes_out(f) -> bool:
    """Whether a kernel method takes out= (the compiled methods do; the frame kernels' Python
    wrappers, which select frames from the raw output, do not)."""
    try:
        return "out" in inspect.signature(f).parameters
    except ValueError:  # a method of the C extension: no signature to read, and it takes out=
        return True


def bench_robot(name, path, floating, args, cp):
    model = rbdgen.load_urdf(path, floating_base=floating)
    # the frame and contact kernels' frames: the feet and flanges, at most four (TALOS: its soles)
    model = model.with_frames([f for f in model.leaf_links if "sole" in f][:2] or model.leaf_links[:4])
    log(f"{name}: building CUDA kernels")
    t0 = time.perf_counter()
    gk = rbdgen.build(model, target="cuda", arch="native")
    t_gpu_build = time.perf_counter() - t0
    log(f"{name}: building CPU kernels")
    ck = rbdgen.build(model, march="native", kernels=[k for k in args.kernels if k in gk.kernels])
    rng = np.random.default_rng(0)
    res = {"nq": model.nq, "nv": model.nv, "build_s": round(t_gpu_build, 1), "kernels": {},
           "launch": {k: {x: gk.info[k][x] for x in ("lanes", "states_per_block", "stages", "thread_tile",
                                                        "workspace", "default_shape", "thread_shape", "speedup")}
                      for k in gk.kernels}}
    sizes = [s for s in SIZES if s <= args.max_n]
    for k in args.kernels:
        rows = {}
        for n in sizes:
            st = states(model, n, rng)
            host = [st[x] for x in SIGS[k]]
            dev = [cp.asarray(x) for x in host]
            gfn = gk.kernel(k)  # the raw kernel: takes shape= and out= (the frame wrappers do not)
            outs_dev = gfn(*dev)
            # the frame kernels' methods select frames from the raw kernel's output and take no out=
            kw = {"out": outs_dev} if takes_out(gfn) else {}
            row = {}
            for shape in ("auto", "thread", "block"):
                if shape == "thread" and not gk.info[k]["thread_shape"]:
                    continue  # not generated: its per-thread scratch is over the limit (docs/cuda.md)
                f = lambda s=shape: gfn(*dev, shape=s, **kw)  # noqa: E731
                row[f"gpu_{shape}"] = gpu_time(cp, f, args.min_s, args.rounds) / n * 1e9
            row["gpu+copy"] = wall(lambda: getattr(gk, k)(*host), args.min_s, args.rounds) / n * 1e9
            outs_cpu = getattr(ck, k)(*host)
            kwc = {"out": outs_cpu} if takes_out(getattr(ck, k)) else {}
            row["cpu"] = wall(lambda: getattr(ck, k)(*host, **kwc), args.min_s, args.rounds) / n * 1e9
            rows[str(n)] = {c: round(v, 2) for c, v in row.items()}
            log(f"{name} {k} N={n}: " + ", ".join(f"{c} {v:.1f} ns" for c, v in row.items()))
        res["kernels"][k] = rows
    return res


def markdown(r):
    lines = [f"# CUDA kernels: time per state against batch size ({r['date']})", "",
             f"- GPU: {r['gpu']}", f"- CPU: {r['cpu']}", f"- rbdgen {r['rbdgen']}, {r['command']}", "",
             "ns per state, median of rounds. gpu: cupy arrays in and out (auto / thread / block shape); "
             "gpu+copy: numpy in and out, copies included; cpu: rbdgen C++ batch on all cores. "
             "Ratio = cpu / best gpu (>1: the GPU is faster).", ""]
    for name, rr in r["robots"].items():
        lines += [f"## {name} (nq {rr['nq']}, nv {rr['nv']})", ""]
        for k, rows in rr["kernels"].items():
            lines += [f"### {k}", "", "| N | gpu auto | gpu thread | gpu block | gpu+copy | cpu | cpu / gpu |",
                      "|---:|---:|---:|---:|---:|---:|---:|"]
            # the JSON keys are strings (sorted as such when written: 1, 1024, 132, 16, …): N in numeric order
            for n, row in sorted(rows.items(), key=lambda item: int(item[0])):
                gpu = [row[c] for c in ("gpu_auto", "gpu_thread", "gpu_block") if c in row]
                thread = f"{row['gpu_thread']:.1f}" if "gpu_thread" in row else "—"
                lines.append(f"| {n} | {row['gpu_auto']:.1f} | {thread} | {row['gpu_block']:.1f} | "
                             f"{row['gpu+copy']:.1f} | {row['cpu']:.1f} | {row['cpu'] / min(gpu):.2f} |")
            lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--robots", default="iiwa14,quadruped,talos_reduced")
    # constrained_fd is left out: its contacts are chosen per robot (benchmarks/measure.py CONSTRAINTS
    # for the CPU bench); name it with --kernels only for a robot given them
    p.add_argument("--kernels", default=",".join(k for k in registry.kernels() if not registry.get(k).constraints
                                                and not registry.get(k).opt_in))
    p.add_argument("--max-n", type=int, default=65536)
    p.add_argument("--quick", action="store_true", help="short rounds (a smoke run)")
    p.add_argument("--out", type=Path, default=HERE / "results")
    p.add_argument("--min-s", type=float, help="seconds each timed round lasts at least (default 0.05; --quick 0.005)")
    p.add_argument("--rounds", type=int, help="timed rounds per figure, the median reported (default 7; --quick 3)")
    p.add_argument("--merge", action="store_true",
                   help="keep the robots already in --out/cuda.json that this run does not measure (one robot per "
                        "run where a run's time is capped); the file is rewritten after each robot")
    args = p.parse_args(argv)
    args.kernels = [k for k in args.kernels.split(",") if k]
    min_s, rounds = (0.005, 3) if args.quick else (0.05, 7)
    args.min_s = min_s if args.min_s is None else args.min_s
    args.rounds = rounds if args.rounds is None else args.rounds
    try:
        import cupy as cp
    except ImportError:
        print("run_cuda.py: needs cupy (pip install cupy-cuda13x, or `pip install -e .[gpu]`)", file=sys.stderr)
        return 2
    try:
        ndev = cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - cupy raises its own runtime error types
        ndev, why = 0, str(e)
    else:
        why = "no device"
    if ndev == 0:
        print(f"run_cuda.py: no NVIDIA GPU here ({why}); nothing measured", file=sys.stderr)
        return 2
    table = robots()
    names = [x for x in args.robots.split(",") if x]
    result = {"date": datetime.date.today().isoformat(), "gpu": gpu_name(), "cpu": cpu_name(),
              "rbdgen": rbdgen.__version__, "command": "python benchmarks/run_cuda.py " + " ".join(argv or sys.argv[1:]),
              "robots": {}}
    old = args.out / "cuda.json"
    if args.merge and old.exists():
        prev = json.loads(old.read_text())
        if prev.get("gpu") != result["gpu"]:
            print(f"run_cuda.py: --merge: {old} was measured on another GPU ({prev.get('gpu')})", file=sys.stderr)
            return 2
        result["robots"] = {k: r for k, r in prev["robots"].items() if k not in names}
        result["command"] = "; ".join(dict.fromkeys([prev["command"], result["command"]]))
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        path, floating = table[name]
        result["robots"][name] = bench_robot(name, path, floating, args, cp)
        old.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")  # after each robot: a cut run keeps it
        (args.out / "cuda.md").write_text(markdown(result))
        log(f"wrote {old} and cuda.md ({name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
