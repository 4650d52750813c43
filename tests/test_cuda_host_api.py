"""The graph-capturable host API of the CUDA kernels (issue 47, item 1), checked without a GPU.

Per kernel the library exports ``<prefix>_<kernel>_<tag>_cuda(stream, n, device pointers…, shape,
workspace)`` — it enqueues the kernel and nothing else, so a CUDA graph can capture it — with
``_workspace`` (the bytes the block shape's global workspace needs; 0 for most kernels), ``_cuda_v``
and ``_host_v`` (the pointers in one array: one signature for every kernel, for dlsym), and
``_arrays`` (what the arrays are); the runtime adds graphs, streams, memory and pinned staging.
Here, with no GPU: nvcc builds them (warnings are errors), the symbols are there, the launch's
code allocates and synchronises nothing, bad arguments return cudaErrorInvalidValue before
anything reaches a device, the Python side's prepared launches check their arguments once with
clear errors, and the C++ launch benchmark (benchmarks/cuda_launch.cpp) compiles. What they do on a
GPU is `make gpu-check`'s (tests/test_gpu_interop.py, benchmarks/cuda_launch.cpp).
"""
from __future__ import annotations

import ctypes
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rbdgen
import rbdgen.targets.cuda.emit as emit
from rbdgen.errors import RbdgenError

from conftest import ROBOTS, load_case

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ("rnea", "minv")
INVALID = 1  # cudaErrorInvalidValue
_built: dict = {}


def _model():
    return load_case(next(r for r in ROBOTS if r.name == "double_pendulum"), False)


def _kern(workspace: str = "shared"):
    """The double pendulum's rnea and M⁻¹ (small: seconds to build), sm_90, warnings as errors.
    ``workspace="global"``: generated with a shared-memory limit of 64 bytes, so that the block
    shape keeps its workspace in global memory (the path TALOS' derivatives take), which the
    caller of ``_cuda`` provides."""
    if workspace not in _built:
        with pytest.MonkeyPatch.context() as mp:
            if workspace == "global":
                mp.setattr(emit, "SHARED_LIMIT", 64)  # part of the generation cache's key (an UPPER_CASE setting)
            _built[workspace] = rbdgen.build(_model(), target="cuda", kernels=KERNELS, opt="-O0", arch="90",
                                             werror=True)
        assert {_built[workspace].info[k]["workspace"] for k in KERNELS} == {workspace}
    return _built[workspace]


class _FakeGpuArray:
    """Speaks __cuda_array_interface__ and points at no memory: the checks run before the device."""

    def __init__(self, shape, typestr="<f8", *, ptr=0x1000, stream=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False),
                                         "strides": None, "version": 3, "stream": stream}


def test_the_host_api_is_exported_and_declared():
    kern = _kern()
    syms = subprocess.run(["nm", "-D", "--defined-only", kern.path], capture_output=True, text=True).stdout
    pre = kern.prefix
    names = [f"{pre}_{f}" for f in ("graph_begin", "graph_end", "graph_launch", "graph_destroy", "stream_create",
                                    "stream_destroy", "stream_sync", "malloc", "free", "memcpy", "pinned",
                                    "release_pinned")]
    names += [f"{pre}_{k}_f64_{f}" for k in KERNELS for f in ("cuda", "cuda_v", "workspace", "arrays", "launch",
                                                               "host", "host_v")]
    missing = [n for n in names if not re.search(rf"\b{n}$", syms, re.M)]
    assert not missing, missing
    header = (Path(kern.path).parent / f"{pre}.cuh").read_text()
    for n in names:
        assert n in header, n
    # what the arrays of one state are, readable by a program that finds the kernel by name
    lib = ctypes.CDLL(kern.path)
    desc = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, f"{pre}_rnea_f64_arrays"))).decode()
    assert desc == "q:2 v:2 a:2 -> tau:2", desc


def _function(source: str, name: str) -> str:
    """The body of C function ``name`` in ``source`` (code only, comments dropped)."""
    start = source.index(f"int {name}(")
    body = source[start:source.index("\n}\n", start)]
    return "\n".join(line.split("//", 1)[0] for line in body.splitlines())


@pytest.mark.parametrize("workspace", ["shared", "global"])
def test_the_launch_enqueues_the_kernel_and_nothing_else(workspace):
    """_cuda is what a CUDA graph captures and what the ≤ 4 µs C++ call costs: no allocation, no
    copy, no event, no synchronisation, one cudaLaunchKernelEx per launch shape. The allocating
    launcher (_launch) is _cuda with a pooled workspace around it."""
    kern = _kern(workspace)
    pre = kern.prefix
    for k in KERNELS:
        src = (Path(kern.path).parent / f"{pre}_{k}_f64.cu").read_text()
        body = _function(src, f"{pre}_{k}_f64_cuda")
        for banned in ("Malloc", "Free", "Memcpy", "Synchronize", "cudaEvent", "cudaStreamWait", "prepare_pool"):
            assert banned not in body, (k, banned)
        assert body.count("cudaLaunchKernelEx(&cfg") == 2, k  # thread shape, block shape
        launch = _function(src, f"{pre}_{k}_f64_launch")
        assert f"{pre}_{k}_f64_cuda(" in launch
        assert launch.count("cudaMallocAsync(") == (workspace == "global")


@pytest.mark.parametrize("workspace", ["shared", "global"])
def test_bad_arguments_return_invalid_value_before_the_device(workspace):
    """Every check here returns before a launch (safe on a machine with a GPU too: nothing runs)."""
    kern = _kern(workspace)
    cuda, cuda_v, ws = kern.rnea._cuda, getattr(kern._lib, f"{kern.prefix}_rnea_f64_cuda_v"), kern.rnea._workspace
    host_v = getattr(kern._lib, f"{kern.prefix}_rnea_f64_host_v")
    cuda_v.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    host_v.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_int]
    null, fake = None, ctypes.c_void_p(0x1000)
    assert cuda(null, 0, null, null, null, null, 0, null) == 0  # nothing to do
    assert cuda(null, -1, fake, fake, fake, fake, 0, null) == INVALID
    assert cuda(null, 5, fake, null, fake, fake, 0, null) == INVALID  # a NULL array
    assert cuda(null, 5, fake, fake, fake, fake, 7, null) == INVALID  # no such shape
    assert cuda_v(null, 5, null, 0, null) == INVALID
    assert host_v(5, null, 0) == INVALID
    size = ctypes.c_size_t(99)
    assert ws(5, 9, ctypes.byref(size)) == INVALID
    assert ws(5, 0, None) == INVALID
    assert ws(5, 1, ctypes.byref(size)) == 0 and size.value == 0  # the thread shape needs none
    if workspace == "shared":
        assert ws(5, 2, ctypes.byref(size)) == 0 and size.value == 0
    else:
        # the block shape with its workspace in global memory: the caller must give one
        assert cuda(null, 5, fake, fake, fake, fake, 2, null) == INVALID


def test_prepared_launch_checks_its_arguments_once():
    kern = _kern()
    ok, out = _FakeGpuArray((5, 2), ptr=0x100), _FakeGpuArray((5, 2), ptr=0x200)
    with pytest.raises(ValueError, match="out= is required"):
        kern.rnea.prepare(ok, ok, ok, out=None)
    with pytest.raises(ValueError, match="argument 'v' must be a GPU array"):
        kern.rnea.prepare(ok, np.zeros((5, 2)), ok, out=out)
    with pytest.raises(ValueError, match="'a' has dtype float32"):
        kern.rnea.prepare(ok, ok, _FakeGpuArray((5, 2), "<f4"), out=out)
    with pytest.raises(ValueError, match=r"'v' has shape \(4, 2\), but 'q' has shape \(5, 2\)"):
        kern.rnea.prepare(ok, _FakeGpuArray((4, 2)), ok, out=out)
    with pytest.raises(ValueError, match=r"out array for 'tau' has shape \(5, 3\)"):
        kern.rnea.prepare(ok, ok, ok, out=_FakeGpuArray((5, 3)))
    with pytest.raises(ValueError, match="NULL device pointer"):
        kern.rnea.prepare(ok, ok, _FakeGpuArray((5, 2), ptr=0), out=out)
    with pytest.raises(TypeError, match=r"takes 3 arrays \(q, v, a\), got 2"):
        kern.rnea.prepare(ok, ok, out=out)
    with pytest.raises(ValueError, match="shape must be one of"):
        kern.rnea.prepare(ok, ok, ok, out=out, shape="warp")
    p = kern.rnea.prepare(ok, ok, ok, out=out, stream=0x7000, shape="block")
    assert p.n == 5 and p.workspace_bytes == 0 and p.outputs is out
    with pytest.raises(ValueError, match="capture needs a stream of its own"):
        kern.rnea.prepare(ok, ok, ok, out=out).graph()
    # what a call passes: the C function's arguments, made once
    calls = []
    p._fn = lambda *a: calls.append([getattr(x, "value", x) for x in a]) or 0
    assert p() is out and p.launch() is out
    assert calls == [[0x7000, 5, 0x100, 0x100, 0x100, 0x200, 2, None]] * 2


def test_a_prepared_launch_without_a_gpu_says_so():
    kern = _kern()
    if kern.device_count() > 0:
        pytest.skip("a GPU is present here: the fake arrays would be launched")
    ok, out = _FakeGpuArray((5, 2), ptr=0x100), _FakeGpuArray((5, 2), ptr=0x200)
    p = kern.rnea.prepare(ok, ok, ok, out=out)
    with pytest.raises(RbdgenError, match="rnea.*no CUDA GPU available"):
        p()


def test_the_cpp_launch_benchmark_compiles_and_needs_a_gpu(tmp_path):
    """benchmarks/cuda_launch.cpp (plain C++: it finds the kernels by name) builds with g++ with
    warnings as errors; run without a GPU it says so."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    exe = gpu_check.build_launch_bench(tmp_path)
    kern = _kern()
    r = subprocess.run([str(exe), kern.path, kern.prefix, "f64", "rnea,minv", "1,16", "1"], capture_output=True,
                       text=True, timeout=60)
    if kern.device_count() > 0:
        assert r.returncode == 0, r.stderr
        assert r.stdout.count('"kernel"') == 4
    else:
        assert r.returncode == 1 and "no CUDA GPU" in r.stderr, r.stderr
