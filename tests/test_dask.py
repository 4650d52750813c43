"""Kernels beyond one process: pickling (rbdgen.toolchain.rebuild) and dask (rbdgen.dask).

The cluster test runs ∇FD (aba_derivatives) of the bundled iiwa14 over 10⁶ states on a
LocalCluster of two single-threaded worker processes and compares every chunk with a local
call of the same kernels, exactly: each state goes through the same compiled code (the SIMD
batch path, the build's lanes of states per vector, with every chunk a multiple of the lanes so
that no state changes between the vector path and the scalar tail), so the results agree bit for
bit.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time

import numpy as np
import pytest

import rbdgen
import rbdgen.robots
from rbdgen.errors import CompilerNotFoundError
from rbdgen.toolchain import rebuild

from conftest import random_state, relerr, run_main

KERNELS = ("rnea", "crba", "aba", "rnea_derivatives", "aba_derivatives")
N = 1_024_000
CHUNK = 64_000  # 16 chunks; a multiple of 2, 4, 8 and 16 lanes, so every chunk starts on a SIMD block boundary

_built: dict = {}


def _iiwa():
    if "iiwa" not in _built:
        m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
        _built["iiwa"] = m, rbdgen.build(m, kernels=KERNELS, opt="-O1")  # the build test_jax/test_torch share
    return _built["iiwa"]


def _inputs(kern, name, n, seed):
    model = kern.model
    q, v, a, tau = random_state(model, seed, n)
    env = {"q": q, "v": v, "a": a, "tau": tau}
    return [env[x] for x, _ in kern.methods[name].inputs]


def _same(a, b):
    a = a if isinstance(a, tuple) else (a,)
    b = b if isinstance(b, tuple) else (b,)
    return len(a) == len(b) and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))


# ---- pickling -----------------------------------------------------------------------------------

def test_pickle_round_trip_cpu_is_the_same_kernels_bit_for_bit():
    m, kern = _iiwa()
    blob = pickle.dumps(kern)
    assert len(blob) < 400_000  # the compressed sources of five kernels (measured: 179 kB)
    rebuild.clear_cache()
    k2 = pickle.loads(blob)
    assert k2 is not kern and type(k2) is type(kern)
    assert k2.kernels == kern.kernels and k2.dtype == kern.dtype and (k2.nq, k2.nv, k2.nb) == (kern.nq, kern.nv, kern.nb)
    assert k2.path == kern.path  # the same library, from the compile cache: no compile, no tracing
    assert set(k2.__dict__) == set(kern.__dict__)  # the by-name methods (kern.kernel, …) too
    assert k2.kernel("aba") is k2.aba
    for name in KERNELS:
        args = _inputs(kern, name, 33, seed=7)  # odd: SIMD blocks and the scalar tail
        assert _same(k2.kernel(name)(*args), kern.kernel(name)(*args)), name
        one = [x[3] for x in args]
        assert _same(getattr(k2, name)(*one), getattr(kern, name)(*one)), name
    # the rebuilt kernels pickle to the same bytes; loading again in this process returns them
    assert pickle.dumps(k2) == blob
    assert pickle.loads(blob) is k2


def test_cloudpickle_round_trip():
    cloudpickle = pytest.importorskip("cloudpickle")
    _, kern = _iiwa()
    rebuild.clear_cache()
    k2 = cloudpickle.loads(cloudpickle.dumps(kern))
    args = _inputs(kern, "aba_derivatives", 8, seed=1)
    assert k2 is not kern and _same(k2.aba_derivatives(*args), kern.aba_derivatives(*args))


def test_unpickle_in_a_fresh_process_matches(tmp_path):
    """Another process (as a dask worker is) rebuilds from the pickle through the shared cache."""
    _, kern = _iiwa()
    args = _inputs(kern, "aba_derivatives", 16, seed=3)
    (tmp_path / "k.pkl").write_bytes(pickle.dumps((kern, args)))
    script = (
        "import pickle, sys, time, numpy as np\n"
        "t = time.perf_counter()\n"
        f"kern, args = pickle.loads(open({str(tmp_path / 'k.pkl')!r}, 'rb').read())\n"
        "dt = time.perf_counter() - t\n"
        f"np.save({str(tmp_path / 'out.npy')!r}, np.stack(kern.aba_derivatives(*args)))\n"
        "print(kern.path, dt)\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    path, _ = r.stdout.split()
    assert path == kern.path
    assert np.array_equal(np.load(tmp_path / "out.npy"), np.stack(kern.aba_derivatives(*args)))


def test_a_chunk_of_a_packed_array_reaches_the_kernel_without_copies():
    """The recipe keeps a chunk's q, v, τ together (one (N, nq + 2 nv) array, sliced): the CPU
    kernels take the slices as they are (strided rows), so a chunk's task copies nothing; the
    result is the local call's."""
    import rbdgen.dask

    m, kern = _iiwa()
    q, v, tau = _inputs(kern, "aba", 12, seed=5)
    X = np.hstack([q, v, tau])
    seen = []

    class Spy:
        methods = kern.methods

        def aba(self, *args):
            seen.append([(np.shares_memory(x, X), x.flags.c_contiguous) for x in args])
            return kern.aba(*args)

    out = rbdgen.dask._run(Spy(), "aba", X[:, :7], X[:, 7:14], X[:, 14:])
    assert seen == [[(True, False)] * 3]
    assert np.array_equal(out[0], kern.aba(q, v, tau))


def test_unpickle_on_a_cache_miss_compiles_the_carried_sources(tmp_path, monkeypatch):
    """Another machine: an empty compile cache. The carried sources are compiled there."""
    m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    kern = rbdgen.build(m, kernels=("rnea",), opt="-O1")  # test_cpu_kernels' build
    blob = pickle.dumps(kern)
    monkeypatch.setenv("RBDGEN_CACHE_DIR", str(tmp_path))
    rebuild.clear_cache()
    k2 = pickle.loads(blob)
    assert k2.path.startswith(str(tmp_path)) and k2.path != kern.path
    args = _inputs(kern, "rnea", 9, seed=2)
    assert _same(k2.rnea(*args), kern.rnea(*args))


def test_unpickle_without_a_compiler_on_a_cache_miss_says_so(tmp_path, monkeypatch):
    _, kern = _iiwa()
    blob = pickle.dumps(kern)
    monkeypatch.setenv("RBDGEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CXX", "no-such-compiler-rbdgen")
    rebuild.clear_cache()
    with pytest.raises(CompilerNotFoundError, match=r"cannot rebuild the pickled cpu kernels of 'iiwa14'.*"
                                                    r"compile cache does not hold.*no-such-compiler-rbdgen"):
        pickle.loads(blob)


def test_kernels_with_no_known_sources_refuse_to_pickle():
    m, kern = _iiwa()
    from rbdgen.kernels.loaded import CompiledKernels

    bare = CompiledKernels.__new__(CompiledKernels)
    bare.__dict__.update({k: v for k, v in kern.__dict__.items() if k != "_rbdgen_recipe"})
    with pytest.raises(pickle.PicklingError, match="sources it was compiled from are unknown"):
        pickle.dumps(bare)


def test_pickle_a_loaded_package(tmp_path, capsys):
    from rbdgen.package import load_package

    rc, _, err = run_main(capsys, "generate", str(rbdgen.robots.path("iiwa14")), "--out", str(tmp_path),
                          "--dtype", "float64", "--kernels", "rnea", "--quiet")
    assert rc == 0, err
    kern = load_package(tmp_path / "iiwa14", opt="-O1")
    blob = pickle.dumps(kern)
    rebuild.clear_cache()
    k2 = pickle.loads(blob)
    assert type(k2.model).__name__ == "PackageModel" and k2.model == kern.model
    args = _inputs(_iiwa()[1], "rnea", 5, seed=4)
    assert _same(k2.rnea(*args), kern.rnea(*args))


def test_pickle_cuda_kernels_and_their_emulation():
    """CudaKernels pickle the same way (nvcc builds them here; emulated() runs them on the CPU).
    The same build as test_cuda's GPU child process: one small nvcc compile on a cold cache."""
    try:
        from rbdgen.targets.cuda.nvcc import find_nvcc

        find_nvcc()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no nvcc: {e}")
    m = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    kern = rbdgen.build(m, target="cuda", kernels=("rnea",), opt="-O1")
    rebuild.clear_cache()
    k2 = pickle.loads(pickle.dumps(kern))
    assert type(k2) is type(kern) and k2.path == kern.path and k2.archs == kern.archs
    assert set(k2.__dict__) == set(kern.__dict__)
    e2 = pickle.loads(pickle.dumps(kern.emulated("block")))
    assert e2.owner is k2 and e2.shape == "block"
    args = _inputs(kern, "rnea", 5, seed=6)
    assert _same(e2.rnea(*args), kern.emulated("block").rnea(*args))


# ---- rbdgen.dask --------------------------------------------------------------------------------

class _Counting:
    """Kernels that count their batch calls (what a chunk runs)."""

    def __init__(self, kern):
        self._k, self.calls = kern, []
        self.methods, self.dtype, self.kernels = kern.methods, kern.dtype, kern.kernels

    def __getattr__(self, name):
        f = getattr(self._k, name)

        def call(*args):
            self.calls.append(len(args[0]))
            return f(*args)

        return call


def test_map_blocks_runs_each_chunk_once_for_all_outputs():
    dask = pytest.importorskip("dask")
    import rbdgen.dask

    _, kern = _iiwa()
    args = _inputs(kern, "aba_derivatives", 1001, seed=11)
    counting = _Counting(kern)
    outs = rbdgen.dask.map_blocks(counting, "aba_derivatives", *args, chunks=100)
    assert len(outs) == 3 and all(o.shape == (1001, 7, 7) and o.chunks[0] == (100,) * 10 + (1,) for o in outs)
    got = dask.compute(*outs, scheduler="threads")
    assert sorted(counting.calls) == [1] + [100] * 10  # once per chunk, not once per output
    assert _same(tuple(got), kern.aba_derivatives(*args))
    one = rbdgen.dask.map_blocks(kern, "crba", args[0], chunks=300)  # one output: one array
    assert np.array_equal(one.compute(scheduler="sync"), kern.crba(args[0]))


def test_map_blocks_takes_the_inputs_packed_side_by_side():
    """One (N, nq + 2 nv) array for a kernel of three inputs: each chunk's task hands the kernel
    the columns of its block as views (no copy reaches the kernel, no slicing tasks in the graph:
    one kernel task and one task per output block); the result is the local call's."""
    dask = pytest.importorskip("dask")
    import dask.array as da

    import rbdgen.dask

    _, kern = _iiwa()
    args = _inputs(kern, "aba_derivatives", 1001, seed=12)
    X = np.hstack(args)
    seen = []

    class Spy(_Counting):
        def aba_derivatives(self, *xs):
            # views of one block: one base, strided rows (no copy was made for the kernel)
            seen.append((len(xs[0]), len({id(x.base) for x in xs}) == 1 and xs[0].base is not None,
                         [x.flags.c_contiguous for x in xs]))
            return self.__getattr__("aba_derivatives")(*xs)

    spy = Spy(kern)
    outs = rbdgen.dask.map_blocks(spy, "aba_derivatives", da.from_array(X, chunks=(250, -1)))
    graph = {}
    for o in outs:
        graph.update(dict(o.__dask_graph__()))
    names = [k[0] if isinstance(k, tuple) else k for k in graph]
    n_chunks = 5  # 4 × 250 + 1
    # besides the input's blocks: the kernels, then per chunk one call and its 3 output blocks
    assert sum(n.startswith("rbdgen-") for n in names) == 1 + n_chunks * (1 + 3), sorted(map(str, graph))
    assert not [n for n in names if not n.startswith(("rbdgen-", "array-"))], sorted(map(str, graph))
    got = dask.compute(*outs, scheduler="sync")
    assert sorted(spy.calls) == [1] + [250] * 4
    assert sorted(n for n, _, _ in seen) == [1] + [250] * 4
    assert all(one_base and (n == 1 or not any(contig)) for n, one_base, contig in seen), seen
    assert _same(tuple(got), kern.aba_derivatives(*args))
    with pytest.raises(ValueError, match=r"argument '\[q v tau\]' has shape \(1001, 20\), expected \(N, 21\) "
                                         r"\(the inputs side by side\)"):
        rbdgen.dask.map_blocks(kern, "aba_derivatives", X[:, :20])


def test_map_blocks_refuses_what_the_kernel_would():
    pytest.importorskip("dask")
    import dask.array as da

    import rbdgen.dask

    _, kern = _iiwa()
    q, v, tau = _inputs(kern, "aba_derivatives", 10, seed=0)
    with pytest.raises(ValueError, match="'nope' is not a kernel"):
        rbdgen.dask.map_blocks(kern, "nope", q)
    with pytest.raises(TypeError, match="takes 3 arrays"):
        rbdgen.dask.map_blocks(kern, "aba_derivatives", q, v)
    with pytest.raises(ValueError, match="'v' has shape"):
        rbdgen.dask.map_blocks(kern, "aba_derivatives", q, q[:, :3], tau)
    with pytest.raises(ValueError, match="'tau' has dtype float32"):
        rbdgen.dask.map_blocks(kern, "aba_derivatives", q, v, da.from_array(tau.astype(np.float32)))
    with pytest.raises(ValueError, match="'v' has 9 rows"):
        rbdgen.dask.map_blocks(kern, "aba_derivatives", q, v[:9], tau)


def _blocks(*blocks):
    return blocks


@pytest.mark.filterwarnings("ignore:Sending large graph")  # the 160 MB of inputs, sent once
def test_dask_cluster_gradient_of_forward_dynamics_over_a_million_states():
    """∇FD over 10⁶ states on 2 worker processes equals the local call, chunk by chunk, exactly;
    the local call agrees with the NumPy reference on a sample of rows (independent oracle)."""
    dask = pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    import dask.array as da

    import rbdgen.dask
    from rbdgen import reference

    m, kern = _iiwa()
    assert CHUNK % kern.lanes == 0  # else a chunk's edge states would take another code path
    q, v, a, tau = random_state(m, seed=15, n=N)
    del a
    t0 = time.perf_counter()
    local = kern.aba_derivatives(q, v, tau)
    t_local = time.perf_counter() - t0
    rows = np.random.default_rng(0).choice(N, 12, replace=False)
    exp = reference.aba_derivatives(m, q[rows], v[rows], tau[rows])
    for got, want in zip(local, exp):
        assert relerr(got[rows], want) < 1e-9

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        t0 = time.perf_counter()
        xs = [da.from_array(x, chunks=(CHUNK, -1)) for x in (q, v, tau)]
        outs = rbdgen.dask.map_blocks(kern, "aba_derivatives", *xs)
        assert all(o.shape == (N, 7, 7) and o.chunks[0] == (CHUNK,) * (N // CHUNK) for o in outs)
        # the three outputs persisted together: one kernel call per chunk, results kept on the
        # workers; then fetched chunk by chunk and compared, so that the client never holds a
        # second copy of the 1.2 GB result
        outs = client.persist(list(outs))
        distributed.wait(outs)
        t_dask = time.perf_counter() - t0
        futures = {f.key: f for o in outs for f in distributed.futures_of(o)}
        keys = [list(dask.core.flatten(o.__dask_keys__())) for o in outs]
        t0 = time.perf_counter()
        for i in range(N // CHUNK):
            sl = slice(i * CHUNK, (i + 1) * CHUNK)
            blocks = client.gather([futures[k[i]] for k in keys])
            for got, want in zip(blocks, local):
                assert np.array_equal(got, want[sl]), f"chunk {i}"
        t_gather = time.perf_counter() - t0
        counts = client.run(lambda: dict(rbdgen.dask.stats))
    assert sum(c["chunks"] for c in counts.values()) == N // CHUNK  # once per chunk
    assert sum(c["states"] for c in counts.values()) == N
    assert all(c["chunks"] > 0 for c in counts.values())  # both workers ran chunks
    print(f"\n∇FD iiwa14, 10⁶ states: local call {t_local:.2f} s; 2 workers: computed in {t_dask:.2f} s "
          f"(inputs sent, results kept on the workers), fetched and compared in {t_gather:.2f} s")
