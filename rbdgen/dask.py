"""Kernels over dask arrays: one batched kernel call per row chunk, on any dask scheduler.

    import dask.array as da
    import rbdgen, rbdgen.dask
    from dask.distributed import Client, LocalCluster

    kern = rbdgen.build(model, kernels=("aba_derivatives",))
    client = Client(LocalCluster(n_workers=2, threads_per_worker=1))
    q = da.from_array(Q, chunks=(62_500, -1))            # (N, nq), chunked by rows
    v = da.from_array(V, chunks=(62_500, -1))
    tau = da.from_array(TAU, chunks=(62_500, -1))
    dq, dv, dtau = rbdgen.dask.map_blocks(kern, "aba_derivatives", q, v, tau)  # lazy, (N, nv, nv) each
    dq, dv, dtau = dask.compute(dq, dv, dtau)

Each chunk runs the kernel's batch path once (its C++ loop over states: SIMD lanes, OpenMP
across blocks when the worker has threads), whatever the number of outputs: one task per chunk
returns the tuple of outputs, and each output's block is picked from it (no copy). The kernels
travel to the workers pickled (:mod:`rbdgen.toolchain.rebuild`): as sources and a model, rebuilt there
through the compile cache, once per worker process. The kernels are a single item of the
graph, shipped to each worker once, not with every task.

dask is imported when a function here is called; without it, an ImportError says what to
install.
"""
from __future__ import annotations

import operator
import threading
import time

import numpy as np

from .kernels.interop import row_stride, takes_strided_rows

__all__ = ["map_blocks", "stats"]

#: kernel calls, states and seconds inside the kernel run by :func:`map_blocks` chunks in this
#: process (a worker's are read with ``client.run(lambda: rbdgen.dask.stats)``)
stats = {"chunks": 0, "states": 0, "seconds": 0.0}
_stats_lock = threading.Lock()


def _dask():
    try:
        import dask
        import dask.array as da
    except ImportError as e:
        raise ImportError("rbdgen.dask needs dask: pip install 'dask[array]' (and 'distributed' for a "
                          f"cluster) ({e})") from None
    return dask, da


def _run_packed(kern, name, widths, block):
    """One chunk of a packed input: its column blocks (views) are the kernel's inputs."""
    offs = np.cumsum((0,) + tuple(widths))
    return _run(kern, name, *[block[:, a:b] for a, b in zip(offs[:-1], offs[1:])])


def _run(kern, name, *blocks):
    """One chunk: the kernel's batch path on the chunk's rows (a tuple of outputs, always)."""
    # row-strided blocks (q, v, τ sliced from one packed array) go in as they are where the kernels
    # take strided batches (the CPU target); anything else as a contiguous copy (a view when the
    # block already is one)
    strided = takes_strided_rows(getattr(kern, "methods", {}).get(name))
    args = [b if strided and b.ndim == 2 and row_stride(b) is not None else np.ascontiguousarray(b) for b in blocks]
    t0 = time.perf_counter()
    out = getattr(kern, name)(*args)
    dt = time.perf_counter() - t0
    with _stats_lock:
        stats["chunks"] += 1
        stats["states"] += len(args[0])
        stats["seconds"] += dt
    return out if isinstance(out, tuple) else (out,)


def _spec(kern, name):
    methods = getattr(kern, "methods", None)
    if not isinstance(methods, dict) or name not in methods:
        built = ", ".join(getattr(kern, "kernels", ())) or "none"
        raise ValueError(f"rbdgen.dask.map_blocks: {name!r} is not a kernel of {kern!r} (built: {built})")
    m = methods[name]
    return [(n, int(s)) for n, s in m.inputs], [(n, tuple(int(x) for x in s)) for n, s in m.outputs]


def map_blocks(kern, name: str, *arrays, chunks=None, token: str | None = None):
    """Kernel ``name`` of ``kern`` over row-chunked inputs: one dask array per output.

    ``arrays``: the kernel's inputs in its order, each ``(N, size)`` — dask arrays (the row
    chunks of the first are used for all; columns are made one chunk), or numpy arrays
    (wrapped with ``chunks`` rows per chunk, default 65536) — or, for a kernel of several
    inputs, one ``(N, Σ sizes)`` array holding them side by side (``[q v τ]``): each chunk's task
    then hands the kernel the columns of its block as views (strided rows, no copy; the CPU
    target), with no slicing tasks in the graph. Returns a tuple of lazy dask arrays
    ``(N, *shape)`` (a single array for a one-output kernel), chunked by the same rows.
    Compute (or persist) them together — ``dask.compute(*outs)``, ``client.persist(list(outs))``
    — and the kernel runs once per chunk for all of them. Computed one by one, or each wrapped
    in its own ``dask.delayed`` (which optimises each separately: dask's fusion then copies the
    kernel's task into each output's chain), it runs once per output.

    The graph's keys are deterministic (the kernels' digest, ``name`` and the inputs' keys), so
    dask reuses results it still holds; ``token`` replaces that part of the keys (a new token:
    a new computation).
    """
    dask, da = _dask()
    ins, outs = _spec(kern, name)
    packed = len(arrays) == 1 and len(ins) > 1
    if packed:
        width = sum(s for _, s in ins)
        ins_given = [(f"[{' '.join(n for n, _ in ins)}]", width)]
    else:
        ins_given = ins
        if len(arrays) != len(ins):
            raise TypeError(f"rbdgen.dask.map_blocks({name!r}) takes {len(ins)} arrays "
                            f"({', '.join(n for n, _ in ins)}), or one packed (N, "
                            f"{sum(s for _, s in ins)}) array, got {len(arrays)}")
    dt = np.dtype(kern.dtype)
    xs = []
    for (n, size), x in zip(ins_given, arrays):
        if not isinstance(x, da.Array):
            x = np.asarray(x)
            x = da.from_array(x, chunks=(chunks or 65536, -1) if x.ndim == 2 else -1)
        if x.ndim != 2 or x.shape[1] != size:
            raise ValueError(f"rbdgen.dask.map_blocks({name!r}): argument '{n}' has shape {x.shape}, "
                             f"expected (N, {size})" + (" (the inputs side by side)" if packed else ""))
        if x.dtype != dt:
            raise ValueError(f"rbdgen.dask.map_blocks({name!r}): argument '{n}' has dtype {x.dtype}, "
                             f"this kernel takes {dt} (use .astype(np.{dt}))")
        xs.append(x)
    N = xs[0].shape[0]
    for (n, _), x in zip(ins_given, xs):
        if x.shape[0] != N:
            raise ValueError(f"rbdgen.dask.map_blocks({name!r}): argument '{n}' has {x.shape[0]} rows, "
                             f"'{ins_given[0][0]}' has {N}")
    rows = xs[0].chunks[0]
    xs = [x.rechunk((rows, -1)) if x.chunks != (rows, (x.shape[1],)) else x for x in xs]
    token = token or dask.base.tokenize(_identity(kern), name, *[x.name for x in xs])
    # the kernels: one item of the graph, sent to each worker once (pickled as their sources)
    kd = dask.delayed(kern, name=f"rbdgen-kernels-{_identity(kern)}", pure=True)
    blocks = [x.to_delayed().ravel() for x in xs]
    if packed:
        run = dask.delayed(_run_packed, pure=True)
        lead = (kd, name, tuple(s for _, s in ins))
    else:
        run = dask.delayed(_run, pure=True)
        lead = (kd, name)
    calls = [run(*lead, *[b[i] for b in blocks], dask_key_name=f"rbdgen-{name}-{token}-{i}")
             for i in range(len(rows))]
    # each output's block i is item j of chunk i's call: one getitem task per block, keyed as the
    # output array's own block (no concatenation layer, whose aliases would be tasks as well)
    from dask.highlevelgraph import HighLevelGraph

    result = []
    for j, (oname, shape) in enumerate(outs):
        out_name = f"rbdgen-{name}-{oname}-{token}"
        zeros = (0,) * len(shape)
        dsk = {(out_name, i, *zeros): (operator.getitem, c.key, j) for i, c in enumerate(calls)}
        graph = HighLevelGraph.from_collections(out_name, dsk, dependencies=calls)
        result.append(da.Array(graph, out_name, chunks=(rows, *((d,) for d in shape)), dtype=dt))
    result = tuple(result)
    if not rows:  # N = 0: no chunk, empty outputs
        result = tuple(da.zeros((0, *shape), dtype=dt) for _, shape in outs)
    return result[0] if len(result) == 1 else result


def _identity(kern) -> str:
    """A name for ``kern`` in the graph: the digest of what it pickles to, else its id."""
    recipe = getattr(kern, "__dict__", {}).get("_rbdgen_recipe")
    if recipe is not None:
        return recipe.payload()[0][:32]
    return f"id{id(kern):x}"
