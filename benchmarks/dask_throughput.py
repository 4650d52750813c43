#!/usr/bin/env python3
"""Throughput of ∇FD (aba_derivatives) through rbdgen.dask on a LocalCluster, per worker, against
one local batched call on one thread (docs/dask.md). Not a test; writes
benchmarks/results/dask.json and dask.md.

    .venv/bin/python benchmarks/dask_throughput.py [--repeat 3]

* local: ``kern.aba_derivatives(Q, V, TAU)`` on the whole batch, OpenMP held to one thread
  (OMP_NUM_THREADS=1, set before anything loads libgomp; dask's workers get the same). It
  returns new arrays, as each chunk's call on a worker does; the same call writing into arrays
  written before (``out=``, no first-touch page faults) is reported too, for reference;
* cluster: LocalCluster(n_workers=2, threads_per_worker=1, processes=True), the inputs already
  on the workers (persisted: loading data is not what is measured), chunks of 62 500 states;
  each case on two clusters, the workers' malloc as dask's nanny sets it and with the heap kept
  (WORKER_ENVS):
  - ``compute``: outputs persisted (they stay on the workers) — the kernel and dask's scheduling;
  - ``reduced``: each output summed on the workers, only the sums come back;
  - ``gathered``: ``dask.compute(*outs)`` — every result sent to the client and concatenated;
  - ``in kernel``: the seconds the workers spent inside the kernel (rbdgen.dask.stats).

Per-worker throughput = N / (wall seconds × workers); the ratio is that over the local
throughput (1.0: a worker is as fast as a local call). Best of ``--repeat`` runs each; the local
call is timed before and after the cluster runs and the best of all is the baseline. The
machine these results come from is a shared 2-core VM whose speed drifts by tens of per cent
between minutes: compare figures of one run, and expect the ratios to move by ~±0.15 between runs.
"""
from __future__ import annotations

import os

os.environ["OMP_NUM_THREADS"] = "1"  # before numpy/rbdgen load any OpenMP runtime

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("RBDGEN_CACHE_DIR", str(ROOT / ".cache" / "kernels"))
sys.path.insert(0, str(ROOT))

import rbdgen  # noqa: E402
import rbdgen.dask  # noqa: E402
import rbdgen.robots  # noqa: E402

#: (robot, floating base, N, chunk sizes); the quadruped's ∇FD is 7.8 kB of output a state
CASES = [("iiwa14", False, 1_000_000, (62_500, 250_000)), ("quadruped", True, 200_000, (50_000,))]
WORKERS = 2
#: the workers' glibc malloc settings, each run on a cluster of its own (docs/dask.md): dask's
#: nanny starts workers with MALLOC_TRIM_THRESHOLD_=65536, which also pins glibc's mmap threshold
#: at 128 KiB, so every chunk's outputs are fresh pages from the kernel (page faults, zeroing);
#: "heap kept" serves blocks up to 64 MiB from the heap and keeps freed heap memory for reuse
WORKER_ENVS = {"dask's default": {},
               "heap kept": {"MALLOC_TRIM_THRESHOLD_": str(2 ** 30), "MALLOC_MMAP_THRESHOLD_": str(2 ** 26)}}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def rusage():
    """(user, system) CPU seconds of this process."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


def best(f, repeat):
    ts = []
    for i in range(repeat):
        t0 = time.perf_counter()
        f(i)
        ts.append(time.perf_counter() - t0)
    return min(ts)


def _plain(kern, n, chunk, seed):
    """On a worker, without dask's graph: the chunked loop a worker's tasks amount to, the
    outputs kept (as persisted results are), inputs made here. States per second."""
    m = kern.model
    rng = np.random.default_rng(seed)
    q = m.random_q(rng, n)
    v = rng.normal(size=(n, m.nv))
    tau = rng.normal(size=(n, m.nv)) * 10
    kept = []
    t0 = time.perf_counter()
    for i in range(0, n, chunk):
        kept.append(kern.aba_derivatives(q[i:i + chunk], v[i:i + chunk], tau[i:i + chunk]))
    return n / (time.perf_counter() - t0)


def measure(robot, floating, n, chunks, repeat, client):
    m = rbdgen.load_urdf(rbdgen.robots.path(robot), floating_base=floating)
    kern = rbdgen.build(m, kernels=("aba_derivatives",))  # the default build: -O3, -march=native
    rng = np.random.default_rng(0)
    q = m.random_q(rng, n)
    v = rng.normal(size=(n, m.nv))
    tau = rng.normal(size=(n, m.nv)) * 10
    out = tuple(np.empty((n, m.nv, m.nv)) for _ in range(3))
    kern.aba_derivatives(q[:1000], v[:1000], tau[:1000])
    # the baseline: the ordinary call, which returns new arrays (as each chunk's call on a worker does)
    t_local = best(lambda i: kern.aba_derivatives(q, v, tau), repeat)
    r0 = rusage()
    kern.aba_derivatives(q, v, tau)
    r1 = rusage()
    cpu_local = {"user_s": r1[0] - r0[0], "sys_s": r1[1] - r0[1]}  # one call: the kernel, and fresh memory
    t_local_out = best(lambda i, out=out: kern.aba_derivatives(q, v, tau, out=out), repeat)  # arrays written before
    del out

    rows = []
    for chunk in chunks:
        rows.append(_cluster(kern, m, q, v, tau, n, chunk, repeat, client, t_local, t_local_out))
        rows[-1]["local_cpu"] = cpu_local
    return rows


def _cluster(kern, m, q, v, tau, n, CHUNK, repeat, client, t_local, t_local_out):
    import dask
    import dask.array as da
    import distributed

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Sending large graph": the inputs, sent once
        # each chunk's q, v, tau in one block, so on one worker: no transfers between workers
        X = client.persist(da.from_array(np.hstack([q, v, tau]), chunks=(CHUNK, -1)))
    distributed.wait(X)
    # the packed form: each chunk's task hands the kernel its block's columns as views (no
    # slicing tasks, no copies; rbdgen.dask.map_blocks with one (N, nq + 2 nv) array)
    xs = [X]
    # warm-up: the kernels reach the workers (unpickled: rebuilt from the compile cache)
    dask.compute(*rbdgen.dask.map_blocks(kern, "aba_derivatives", X[:2 * CHUNK]))
    client.run(lambda: rbdgen.dask.stats.update(chunks=0, states=0, seconds=0.0))

    # a new token each run: the same keys would let dask hand back results it still holds
    def compute_only(i):
        outs = client.persist(list(rbdgen.dask.map_blocks(kern, "aba_derivatives", *xs, token=f"c{i}")))
        distributed.wait(outs)
        del outs

    def reduced(i):
        dask.compute(*[o.sum(axis=0) for o in rbdgen.dask.map_blocks(kern, "aba_derivatives", *xs, token=f"r{i}")])

    def gathered(i):
        res = dask.compute(*rbdgen.dask.map_blocks(kern, "aba_derivatives", *xs, token=f"g{i}"))
        assert res[0].shape == (n, m.nv, m.nv)
        del res

    workers = list(client.scheduler_info()["workers"])
    plain = []
    for i in range(repeat):  # both workers at once, each on its share
        fs = [client.submit(_plain, kern, n // WORKERS, CHUNK, i * 10 + j, workers=[w], pure=False)
              for j, w in enumerate(workers)]
        plain.append(sum(client.gather(fs)) / WORKERS)
        del fs
    r0 = client.run(rusage)
    t = {"compute": best(compute_only, repeat)}
    r1 = client.run(rusage)
    cpu_workers = {"user_s": sum(r1[w][0] - r0[w][0] for w in r0) / repeat,  # all workers, one run
                   "sys_s": sum(r1[w][1] - r0[w][1] for w in r0) / repeat}
    st = client.run(lambda: dict(rbdgen.dask.stats))
    kernel_s = sum(s["seconds"] for s in st.values()) / repeat  # worker-seconds in the kernel per run
    t["reduced"] = best(reduced, repeat)
    t["gathered"] = best(gathered, repeat)
    client.cancel(X)
    # the local call again, now that the cluster has run (the machine is shared: its speed drifts
    # by tens of per cent over minutes); the best of both is the baseline, the stricter choice
    t_local = min(t_local, best(lambda i: kern.aba_derivatives(q, v, tau), repeat))
    local_rate = n / t_local
    row = {"robot": m.name, "base": "floating" if m.floating_base else "fixed", "nq": m.nq, "nv": m.nv, "N": n,
           "chunk": CHUNK, "output_bytes": 3 * n * m.nv * m.nv * 8, "local_s": t_local,
           "local_states_per_s": local_rate, "local_out_s": t_local_out, "local_out_states_per_s": n / t_local_out, "in_kernel_worker_s": kernel_s,
           # states per worker-second spent inside the kernel
           "in_kernel_states_per_s_per_worker": n / kernel_s if kernel_s else None,
           # the same chunked loop run on both workers at once without dask's graph: what the
           # machine gives two busy processes (memory bandwidth, shared cores, other load)
           "plain_states_per_s_per_worker": max(plain), "compute_cpu_all_workers": cpu_workers}
    row["compute_vs_plain"] = n / (t["compute"] * WORKERS) / row["plain_states_per_s_per_worker"]
    for k, s in t.items():
        rate = n / (s * WORKERS)
        row[f"{k}_s"] = s
        row[f"{k}_states_per_s_per_worker"] = rate
        row[f"{k}_ratio"] = rate / local_rate
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = ap.parse_args()
    import dask
    import distributed

    rows = []
    for env_name, env in WORKER_ENVS.items():
        spawn = {f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in env.items()}
        with dask.config.set(spawn), distributed.LocalCluster(
                n_workers=WORKERS, threads_per_worker=1, processes=True,
                dashboard_address=None) as cluster, distributed.Client(cluster) as client:
            omp = client.run(lambda: os.environ.get("OMP_NUM_THREADS"))
            seen = client.run(lambda: {k: os.environ.get(k) for k in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")})
            for robot, floating, n, chunks in CASES:
                print(f"{env_name}: {robot}: N = {n} …", flush=True)
                new_rows = measure(robot, floating, n, chunks, args.repeat, client)
                for r in new_rows:
                    r["worker_env"], r["worker_malloc"] = env_name, sorted({json.dumps(v, sort_keys=True) for v in seen.values()})
                rows += new_rows
                print(json.dumps(new_rows, indent=1), flush=True)
    res = {"machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
                       "dask": dask.__version__, "distributed": distributed.__version__,
                       "loadavg_after": os.getloadavg()},
           "workers": WORKERS, "threads_per_worker": 1, "worker_OMP_NUM_THREADS": sorted(set(omp.values())),
           "local_OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"], "rows": rows}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "dask.json").write_text(json.dumps(res, indent=1) + "\n")
    (out / "dask.md").write_text(markdown(res))
    print(markdown(res))


def markdown(res) -> str:
    mc = res["machine"]
    L = ["# rbdgen.dask: ∇FD throughput per worker vs one local call", "",
         f"Machine: {mc['cpu']}, {mc['cores']} cores (shared with other work; load average after the run "
         f"{', '.join(f'{x:.1f}' for x in mc['loadavg_after'])}). Python {mc['python']}, dask "
         f"{mc['dask']}, distributed {mc['distributed']}.", "",
         f"LocalCluster: {res['workers']} worker processes × 1 thread (OMP_NUM_THREADS="
         f"{','.join(map(str, res['worker_OMP_NUM_THREADS']))} on the workers), the inputs already on "
         "the workers (each chunk's q, v, τ together on one worker: one (N, nq + 2nv) array, passed packed to rbdgen.dask.map_blocks). Local: one batched call, "
         "one thread. Kernels: `rbdgen.build(model, kernels=(\"aba_derivatives\",))` (the default build: -O3, -march=native). "
         "Best of the repeats. Written by `benchmarks/dask_throughput.py`.", "",
         "Workers' malloc: " + "; ".join(f"*{k}*: " + (", ".join(f"`{a}={b}`" for a, b in v.items()) or
                                                      "as dask's nanny starts them (`MALLOC_TRIM_THRESHOLD_=65536`)")
                                         for k, v in WORKER_ENVS.items()) + ". The local call runs with glibc's defaults.", "",
         "| robot | N | chunk | workers' malloc | local (states/s) | local, out= | plain loop on each worker | in kernel, per worker | compute (per worker, ratio) | "
         "reduced on workers | gathered to the client (output) |",
         "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        def cell(k):
            return f"{r[k + '_states_per_s_per_worker']:,.0f} ({r[k + '_ratio']:.2f})"

        ink = r["in_kernel_states_per_s_per_worker"]
        L.append(f"| {r['robot']} ({r['base']}, nv={r['nv']}) | {r['N']:,} | {r['chunk']:,} | {r['worker_env']} | {r['local_states_per_s']:,.0f} | "
                 f"{r['local_out_states_per_s']:,.0f} | "
                 f"{r['plain_states_per_s_per_worker']:,.0f} ({r['plain_states_per_s_per_worker'] / r['local_states_per_s']:.2f}) | {ink:,.0f} ({ink / r['local_states_per_s']:.2f}) | {cell('compute')} | {cell('reduced')} | "
                 f"{cell('gathered')} ({r['output_bytes'] / 1e9:.2f} GB) |")
    L += ["", "Ratio: per-worker throughput over the local call's (the 20 % target: ≥ 0.80). *plain loop on "
          "each worker*: the same chunked calls run on both workers at once by one task each, without "
          "dask's graph (what two busy processes get from this machine); *compute/plain* is then dask's "
          "own share of the loss.", ""]
    L += ["CPU time per 10⁶ states (user / system seconds): the local call vs the workers' sum in the "
          "`compute` runs. User time is the kernels' arithmetic (and dask's Python); system time is "
          "mostly the first touch of fresh memory for the outputs (page faults, page zeroing), which "
          "varies several-fold on this VM.", ""]
    for r in res["rows"]:
        k = 1e6 / r["N"]
        lc, wc = r["local_cpu"], r["compute_cpu_all_workers"]
        L.append(f"- {r['robot']}, chunks of {r['chunk']:,}, {r['worker_env']}: local {lc['user_s'] * k:.2f} / {lc['sys_s'] * k:.2f}; "
                 f"workers {wc['user_s'] * k:.2f} / {wc['sys_s'] * k:.2f}")
    L.append("")
    for r in res["rows"]:
        ok = "within" if r["compute_ratio"] >= 0.8 else "NOT within"
        okg = "within" if r["gathered_ratio"] >= 0.8 else "not within"
        L.append(f"- {r['robot']}, chunks of {r['chunk']:,}, {r['worker_env']}: compute {r['compute_ratio']:.2f} — {ok} 20 % "
                 f"(compute/plain {r['compute_vs_plain']:.2f}); with every result sent to "
                 f"the client {r['gathered_ratio']:.2f} — {okg} 20 %.")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    main()
