"""On a GPU: the CUDA paths of issue 15 and 47 that have not run anywhere yet — JAX arrays on the
GPU in and out, a DLPack-only CUDA producer taken through cupy, prepared launches and CUDA graphs,
and the NumPy path's pinned staging (one copy each way) and its large-batch fallback.

Every test here is marked ``gpu``: it skips, saying why, without a GPU, and fails where one is
listed but unusable or under RBDGEN_REQUIRE_GPU=1 (as tests/test_cuda.py's). `make gpu-check` runs
them in its interop step; their builds are in benchmarks/gpu_check.py's plan (the iiwa's
``_gpu_kern`` build and the quadruped's every-kernel build of the GPU tests), so they compile nothing
on the GPU machine. What is checked without a GPU: tests/test_cuda_host_api.py.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import rbdgen
from rbdgen import reference as ref

from conftest import TOL64, kernel_err, random_state, ref_out
from test_cuda import GPU_BUILD, _gpu_kern, _iiwa_batch, _model, _require_cupy, _require_gpu

# JAX takes 75% of the GPU's memory when it starts unless told not to (cupy and PyTorch share it)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

N = 37


def _jax_on_gpu():
    _require_gpu()
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    try:
        gpus = jax.devices("gpu")
    except RuntimeError as e:  # JAX without its CUDA plugin
        if os.environ.get("RBDGEN_REQUIRE_GPU") == "1":
            pytest.fail(f"JAX sees no GPU ({e}); RBDGEN_REQUIRE_GPU is set, so the GPU tests must run")
        pytest.skip(f"JAX sees no GPU ({e})")
    return jax, gpus[0]


@pytest.mark.gpu
def test_gpu_jax_arrays_in_and_out():
    """JAX arrays on the GPU go in through DLPack (cupy takes them without a copy) and the outputs
    come back as JAX arrays on the GPU; rbdgen.jax.wrap of the CUDA kernels works under jit too
    (through host callbacks: correct, not fast)."""
    _require_cupy()
    jax, gpu = _jax_on_gpu()
    import jax.numpy as jnp

    import rbdgen.jax as rjax

    kern = _gpu_kern()
    model = _model("iiwa14-fixed")
    q, v, a, _ = random_state(model, seed=3, n=N)
    exp = ref.rnea(model, q, v, a)
    qj, vj, aj = (jax.device_put(jnp.asarray(x), gpu) for x in (q, v, a))
    tau = kern.rnea(qj, vj, aj)
    assert isinstance(tau, jax.Array) and tau.devices() == {gpu}, type(tau)
    assert kernel_err(np.asarray(tau), exp) <= TOL64
    d = kern.rnea_derivatives(qj, vj, aj, shape="block")
    assert all(isinstance(x, jax.Array) for x in d)
    assert kernel_err(tuple(np.asarray(x) for x in d), ref_out(model, "rnea_derivatives", q, v, a)) <= TOL64
    jk = rjax.wrap(kern)
    tau2 = jax.jit(jk.rnea)(qj, vj, aj)
    assert kernel_err(np.asarray(tau2), exp) <= TOL64


class _DLPackOnly:
    """A CUDA tensor that speaks DLPack alone (no __cuda_array_interface__), as some frameworks do."""

    def __init__(self, arr):
        self._arr = arr

    def __dlpack__(self, **kw):
        return self._arr.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._arr.__dlpack_device__()


@pytest.mark.gpu
def test_gpu_cupy_takes_dlpack_only_tensors():
    cp = _require_cupy()
    kern = _gpu_kern()
    exp, (q, v, a) = _iiwa_batch(cp, N)
    tau = kern.rnea(_DLPackOnly(q), v, _DLPackOnly(a))
    cp.cuda.get_current_stream().synchronize()
    assert kernel_err(cp.asnumpy(tau), exp) <= TOL64


@pytest.mark.gpu
@pytest.mark.parametrize("shape", ["auto", "thread", "block"])
def test_gpu_prepared_launch_and_graph(shape):
    """A prepared launch (checked once, one C call per launch) and a CUDA graph of three of its
    launches, on a stream of its own; the quadruped's ∇ID keeps its block-shape workspace in
    global memory, which the prepared launch allocates once."""
    cp = _require_cupy()
    model = _model("quadruped-floating")
    kern = rbdgen.build(model, **GPU_BUILD)
    for k in ("rnea", "rnea_derivatives"):
        q, v, a, _ = random_state(model, seed=6, n=N)
        exp = ref_out(model, k, q, v, a)
        dev = [cp.asarray(x) for x in (q, v, a)]
        outs = kern.kernel(k)(*dev, shape=shape)
        outs = outs if isinstance(outs, tuple) else (outs,)
        for o in outs:
            o.fill(np.nan)
        s = cp.cuda.Stream(non_blocking=True)
        p = kern.kernel(k).prepare(*dev, out=outs if len(outs) > 1 else outs[0], stream=s, shape=shape)
        if k == "rnea_derivatives" and shape == "block":
            assert p.workspace_bytes > 0 or kern.info[k]["workspace"] == "shared"
        p()
        s.synchronize()
        got = tuple(cp.asnumpy(o) for o in outs)
        assert kernel_err(got if len(got) > 1 else got[0], exp) <= TOL64, (k, shape)
        for o in outs:
            o.fill(np.nan)
        s.synchronize()
        g = p.graph(launches=3)
        g()
        g()
        s.synchronize()
        got = tuple(cp.asnumpy(o) for o in outs)
        assert kernel_err(got if len(got) > 1 else got[0], exp) <= TOL64, (k, shape, "graph")
        g.close()


@pytest.mark.gpu
def test_gpu_numpy_path_small_and_large_batches():
    """NumPy in and out: a small batch goes through the thread's pinned buffer (one copy each
    way), a batch over the pinned limit (64 MiB) array by array from pageable memory; both right."""
    _require_gpu()
    kern = _gpu_kern()
    model = _model("iiwa14-fixed")
    q, v, a, _ = random_state(model, seed=8, n=N)
    exp = ref.rnea(model, q, v, a)
    assert kernel_err(kern.rnea(q, v, a), exp) <= TOL64
    reps = (64 << 20) // (8 * 28 * N) + 1  # 28 scalars a state (q, v, a, tau): over 64 MiB in all
    big = [np.ascontiguousarray(np.tile(x, (reps, 1))) for x in (q, v, a)]
    tau = kern.rnea(*big)
    assert tau.shape == (reps * N, 7)
    assert kernel_err(tau[:N], exp) <= TOL64 and kernel_err(tau[-N:], exp) <= TOL64
