"""The CUDA backend.

Without a GPU (this machine and CI), every check below still runs the generated CUDA program:
the sources are compiled by nvcc for sm_80 and sm_90 with every warning an error, and the
library's host emulations (``…_emulate_thread`` / ``…_emulate_block``) execute the very
``__host__ __device__`` functions the ``__global__`` kernels call, in the same order, for every
thread of every block — staging through the shared-memory tile, the stage/thread split of the
block shape and its workspace included. Only the launch itself (``<<<…>>>``) and the transfers
need a GPU; those are the ``gpu``-marked tests at the end, which run every kernel on the device
for the whole robot set and skip, saying why, where no GPU is present.

Coverage without a GPU, and why it is not every robot (nvcc takes 3-15 s per kernel source on
this 2-core machine, the derivative kernels of a humanoid minutes): all kernels, both launch
shapes, float64, on a serial arm (iiwa14), and all but the scans and rnea_stale's variants on a
branched floating-base quadruped (QUAD_KERNELS); rnea, crba, aba and minv of a
floating humanoid (talos, nv = 38); float32 on iiwa14 for one kernel of each kind. The level
schedule the block shape runs is checked on every robot and kernel in pure Python
(``test_schedule_*``), and the printer's per-state code is the CPU backend's, which
test_cpu_kernels.py compiles on every robot.
"""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import rbdgen
from rbdgen import reference as ref
from rbdgen.algorithms import KERNELS, trace
from rbdgen.errors import BuildError, CompilerNotFoundError, RbdgenError
from rbdgen.ir.schedule import level_schedule

from conftest import (ROBOT_CASES, ROBOTS, SCANS_AND_STALE_VARIANTS, ref_out, TOL32, TOL64, assert_one_error_line,
                      kernel_args, kernel_err, kernel_errors, load_case, random_state, run_main)

ARCHS = "80,90"
N = 37  # not a multiple of any block's state count: full blocks and a partial one
#: the quadruped's: every kernel but the log-depth scans and rnea_stale's three variants (whose
#: CUDA is the iiwa's here, and whose C++ test_cpu_kernels.py compiles on the quadruped): 16 % of
#: the quadruped's statements, ~25 s of this module's sm_90 build
QUAD_KERNELS = tuple(k for k in KERNELS if k not in SCANS_AND_STALE_VARIANTS)
CASES = {
    "iiwa14-fixed": ("iiwa14", False, KERNELS),
    # the build leaves ptxas's report of each source in the cache, which
    # test_cli_inspect_cost_cuda_reports_the_schedule then reads instead of compiling again
    "quadruped-floating": ("quadruped", True, QUAD_KERNELS),
    # nle and gravity are rnea with fewer inputs; the humanoid's derivatives take minutes
    "talos_reduced-floating": ("talos_reduced", True, ("rnea", "crba", "aba", "minv")),
}
#: float32: one kernel of each kind (recursive, O(n²) output, divisions, dense epilogue)
F32_KERNELS = ("rnea", "crba", "minv", "aba_derivatives")

_built: dict = {}
# one worker runs this module (make test's --dist loadgroup): its tests share a few builds (_build),
# which a second worker would otherwise wait for on the compile cache's lock instead of running
# other tests (a fresh-clone run: a case's two shapes 3 × ~50 s, the quadruped's cost report 40 s)
pytestmark = pytest.mark.xdist_group("cuda")


def _model(case):
    name, floating, _ = CASES[case]
    return load_case(next(r for r in ROBOTS if r.name == name), floating)


def _build(case, dtype="float64"):
    key = (case, dtype)
    if key not in _built:
        kernels = CASES[case][2] if dtype == "float64" else F32_KERNELS
        # -O0: nvcc's -O is the host code's level (the emulation runs 37 states), not the device's
        _built[key] = rbdgen.build(_model(case), target="cuda", dtype=dtype, kernels=kernels, opt="-O0",
                                   arch=EMULATED_ARCH, werror=True)
    return _built[key]


#: the architecture of the builds below, which are only emulated here: each one more is a device
#: compile (cicc + ptxas) of every kernel, 40 % of the build (quadruped minv: 10.0 s for two, 6.1 s
#: for one). A build for several is checked by test_a_build_carries_every_requested_architecture, a
#: PTX-only one by test_compute_architectures_are_ptx_only. Machine code, so that ptxas checks every
#: kernel (its limits: registers, shared and constant memory) on a serial robot, a branched floating
#: one and the biggest, and leaves its reports where test_cuda_resources.py (the iiwa's, the same
#: sources: no second device compile, ~45 s) and test_cli_inspect_cost_cuda_reports_the_schedule (the
#: quadruped's) read them
EMULATED_ARCH = ARCHS.split(",")[-1]


def test_a_build_carries_every_requested_architecture():
    """Device code for each architecture asked for (one -gencode each, PTX of the newest), and the
    library runs (emulated) like the one-architecture builds."""
    model = _model("iiwa14-fixed")
    kern = rbdgen.build(model, target="cuda", kernels=("rnea", "minv"), opt="-O1", arch=ARCHS, werror=True)
    assert kern.archs == ("80", "90")
    with open(kern.path.rsplit("/", 1)[0] + "/command.txt") as f:
        flags = f.read().split()
    assert {"arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90", "arch=compute_90,code=compute_90"} <= set(flags)
    errs = _errors(kern.emulated("default"), model, np.float64)
    assert set(errs) == {"rnea", "minv"} and all(e <= TOL64 for e in errs.values()), errs


def test_compute_architectures_are_ptx_only():
    """``compute_NN`` (nvcc's virtual architecture) asks for PTX only, no machine code: no ptxas
    at build time, the driver compiles it on the GPU; mixed with machine code for others, and no
    second PTX of the newest when it is already there; a one-kernel PTX-only build runs emulated
    (test_schur.py's CUDA build is PTX-only too)."""
    from rbdgen.targets.cuda.nvcc import nvcc_flags, parse_archs

    assert parse_archs("compute_90") == ("compute_90",)
    assert parse_archs("compute_90,sm_80") == ("80", "compute_90")
    assert parse_archs("sm_90, compute_90") == ("90", "compute_90")

    def gencodes(arch):
        f = nvcc_flags(parse_archs(arch))
        return [f[i + 1] for i, x in enumerate(f) if x == "-gencode"]

    assert gencodes("compute_90") == ["arch=compute_90,code=compute_90"]
    assert gencodes("80,compute_90") == ["arch=compute_80,code=sm_80", "arch=compute_90,code=compute_90"]
    assert gencodes("80,90") == ["arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90",
                                 "arch=compute_90,code=compute_90"]
    with pytest.raises(BuildError, match="compute_90"):
        parse_archs("compute_9")
    model = _model("iiwa14-fixed")
    kern = rbdgen.build(model, target="cuda", kernels=("gravity",), opt="-O0", arch="compute_90", werror=True)
    assert kern.archs == ("compute_90",) and "(cuda compute_90, float64" in repr(kern)
    flags = (Path(kern.path).parent / "command.txt").read_text().split("\n")[0].split()
    assert [flags[i + 1] for i, x in enumerate(flags) if x == "-gencode"] == ["arch=compute_90,code=compute_90"]
    errs = _errors(kern.emulated("thread"), model, np.float64)
    assert set(errs) == {"gravity"} and errs["gravity"] <= TOL64, errs


def _errors(kern, model, dtype):
    return kernel_errors(kern, model, dtype, seed=5, n=N, single=3)


@pytest.mark.parametrize("shape", ["thread", "block"])
@pytest.mark.parametrize("case", list(CASES))
def test_emulated_float64_matches_reference(case, shape):
    kern = _build(case)
    assert kern.archs == (EMULATED_ARCH,)
    flags = (Path(kern.path).parent / "command.txt").read_text().split("\n")[0].split()
    assert f"arch=compute_{EMULATED_ARCH},code=sm_{EMULATED_ARCH}" in flags, flags
    errs = _errors(kern.emulated(shape), _model(case), np.float64)
    assert set(errs) == set(CASES[case][2])
    bad = {k: e for k, e in errs.items() if not e <= TOL64}
    assert not bad, f"{case} ({shape} shape): {bad}"


@pytest.mark.parametrize("shape", ["thread", "block"])
def test_emulated_float32_within_measured_bounds(shape):
    kern = _build("iiwa14-fixed", "float32")
    errs = _errors(kern.emulated(shape), _model("iiwa14-fixed"), np.float32)
    bad = {k: (e, TOL32[k]) for k, e in errs.items() if not e <= TOL32[k]}
    assert not bad, bad


def test_shapes_really_differ_and_default_shapes():
    """The two emulations run different programs (a broken dispatch that ran one shape twice
    would pass the tests above twice): the cheap kernels default to one thread per state, the
    gradients to a block of threads, and the block shape of a gradient uses several threads."""
    kern = _build("iiwa14-fixed")
    info = kern.info
    assert info["rnea"]["default_shape"] == "thread"
    assert info["aba_derivatives"]["default_shape"] == "block"
    nv = kern.nv
    # the gradient's independent tasks (three composite chains, each column's row vectors, each
    # pair's entries) are more than one per joint
    assert info["rnea_derivatives"]["lanes"] >= nv
    lib = Path(kern.path)
    syms = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    for shape in ("thread", "block"):
        assert f"rbd_iiwa14_rnea_f64_emulate_{shape}" in syms
    for k in ("rnea", "aba_derivatives"):
        assert f"rbd_iiwa14_{k}_f64_launch" in syms and f"rbd_iiwa14_{k}_f64_host" in syms


# ---- the level schedule, on every robot and kernel ---------------------------------------------

@pytest.mark.parametrize("robot,floating", ROBOT_CASES)
def test_schedule_is_a_valid_parallel_order(robot, floating):
    """Pieces of one stage never read each other's values; a value is read in a later stage
    than it is made, or in the same piece. (Violations would be data races on the GPU.)"""
    model = load_case(robot, floating)
    for name in ("rnea", "crba", "minv") + (("rnea_derivatives",) if model.nv <= 20 else ()):
        k = trace(model, name)
        s = level_schedule(k, max_lanes=64)
        ops = [n for n in k.live_nodes() if n.op not in ("const", "input")]
        assert set(s.part) == {n.id for n in ops}
        stage = {nid: s.pieces[p][0] for nid, p in s.part.items()}
        for n in ops:
            for a in n.args:
                if a.id in s.part:
                    same_piece = s.part[a.id] == s.part[n.id]
                    assert same_piece or stage[a.id] < stage[n.id], (name, n, a)
        assert s.lanes <= 64 and all(lane < s.lanes for _, lane in s.pieces)
        assert s.n_stages == len({st for st, _ in s.pieces})


def test_schedule_finds_the_parallelism_of_a_tree():
    """Four legs: the crba of the quadruped runs its legs side by side, so it needs fewer
    stages than a serial chain of as many bodies would."""
    quad = load_case(next(r for r in ROBOTS if r.name == "quadruped"), False)
    s = level_schedule(trace(quad, "rnea"))
    assert s.width >= 4
    assert s.n_stages < 2 * quad.nb


# ---- errors --------------------------------------------------------------------------------------

def test_no_gpu_is_a_clear_error():
    kern = _build("iiwa14-fixed")
    if kern.device_count() > 0:
        pytest.skip("a GPU is present here; the no-GPU message cannot be produced")
    q = np.zeros(7)
    with pytest.raises(RbdgenError, match="no CUDA GPU available.*emulat"):
        kern.rnea(q, q, q)


class _FakeGpuArray:
    """An object that speaks __cuda_array_interface__ (as cupy, torch and numba arrays do),
    pointing at no memory (or at a made-up address ``ptr``): the argument checks run before
    anything touches the device. ``stream``: the producer's stream the interface names (v3)."""

    def __init__(self, shape, typestr="<f8", strides=None, *, ptr=0, stream=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3, "stream": stream}


def test_gpu_array_arguments_are_checked():
    kern = _build("iiwa14-fixed")
    # the CPU's states-last batch layout is refused by name, before anything runs; on the host
    # emulation (a CPU library without that entry point) alike
    for call in (kern.rnea, kern.emulated("default").rnea):
        with pytest.raises(ValueError, match=r"rnea: layout='states_last' is a CPU batch layout"):
            call(np.zeros((7, 5)), np.zeros((7, 5)), np.zeros((7, 5)), layout="states_last")
    ok = _FakeGpuArray((5, 7))
    with pytest.raises(ValueError, match="'v' has dtype float32"):
        kern.rnea(ok, _FakeGpuArray((5, 7), "<f4"), ok)
    with pytest.raises(ValueError, match=r"'a' has shape \(5, 6\)"):
        kern.rnea(ok, ok, _FakeGpuArray((5, 6)))
    with pytest.raises(ValueError, match="'q' is not C-contiguous"):
        kern.rnea(_FakeGpuArray((5, 7), strides=(8, 40)), ok, ok)
    with pytest.raises(ValueError, match="'v' has shape"):
        kern.rnea(ok, _FakeGpuArray((4, 7)), ok)
    with pytest.raises(ValueError, match="mixing numpy and GPU arrays"):
        kern.rnea(ok, np.zeros((5, 7)), ok)
    with pytest.raises(ValueError, match="out array for 'tau' has shape"):
        kern.rnea(ok, ok, ok, out=_FakeGpuArray((5, 6)))
    with pytest.raises(ValueError, match="shape must be one of"):
        kern.rnea(ok, ok, ok, shape="warp")


# ---- streams, errors and the debug mode, through the Python side (no GPU needed) -------------------
# The ctypes entry points that would touch a GPU are replaced by recorders: what is checked is
# which streams the launch waits for, which stream it runs on, and what an error says.

def _record(monkeypatch, kern, launch_err=0, sync_err=0, cupy=None):
    """Replace rnea's launcher and the stream functions of ``kern`` by recorders, and cupy by
    ``cupy`` (None: absent, whether or not it is installed)."""
    import rbdgen.targets.cuda.runtime as jc

    calls = []
    monkeypatch.setattr(jc, "_cupy", lambda: cupy)
    monkeypatch.setattr(kern, "_stream_wait", lambda s, p: calls.append(("wait", s.value or 0, p.value or 0)) or 0)
    monkeypatch.setattr(kern, "_stream_sync", lambda s: calls.append(("sync", s.value or 0)) or sync_err)
    monkeypatch.setattr(kern.rnea, "_launch",
                        lambda n, *a: calls.append(("launch", n, a[:-2], a[-2].value or 0, a[-1])) or launch_err)
    return calls


def test_the_producers_streams_are_waited_for(monkeypatch):
    """Each stream an argument's __cuda_array_interface__ names (inputs and out= arrays), once,
    unless it is the launch stream; then the launch on stream=, with the arrays' addresses."""
    kern = _build("iiwa14-fixed")
    calls = _record(monkeypatch, kern)
    q = _FakeGpuArray((5, 7), ptr=0x100, stream=0x5000)
    v = _FakeGpuArray((5, 7), ptr=0x200, stream=0x5000)
    a = _FakeGpuArray((5, 7), ptr=0x300, stream=None)
    tau = _FakeGpuArray((5, 7), ptr=0x400, stream=1)
    kern.rnea(q, v, a, out=tau, stream=0x7000, shape="block")
    assert calls == [("wait", 0x7000, 0x5000), ("wait", 0x7000, 1),
                     ("launch", 5, (0x100, 0x200, 0x300, 0x400), 0x7000, 2)]
    calls.clear()
    # a PyTorch-style stream object; the producer is the launch stream: nothing to wait for
    kern.rnea(q, v, a, out=_FakeGpuArray((5, 7), ptr=0x400), stream=SimpleNamespace(cuda_stream=0x5000))
    assert calls == [("launch", 5, (0x100, 0x200, 0x300, 0x400), 0x5000, 0)]
    calls.clear()
    # no stream= and no cupy: the legacy default stream (handle 0), which the interface calls 1
    one = _FakeGpuArray((7,), ptr=0x100, stream=1)
    kern.rnea(one, one, one, out=_FakeGpuArray((7,), ptr=0x400, stream=None))
    assert calls == [("launch", 1, (0x100, 0x100, 0x100, 0x400), 0, 0)]


def test_a_stream_0_in_the_interface_is_rejected(monkeypatch):
    kern = _build("iiwa14-fixed")
    calls = _record(monkeypatch, kern)
    ok = _FakeGpuArray((5, 7), stream=1)
    with pytest.raises(ValueError, match=r"rnea: argument 'v': __cuda_array_interface__ has stream 0;.*never 0"):
        kern.rnea(ok, _FakeGpuArray((5, 7), stream=0), ok, out=_FakeGpuArray((5, 7)))
    with pytest.raises(ValueError, match="stream= must be a cupy or PyTorch stream"):
        kern.rnea(ok, ok, ok, out=_FakeGpuArray((5, 7)), stream="fast")
    assert calls == []  # nothing reached the device


def test_debug_mode_synchronises_and_names_the_fault(monkeypatch):
    """RBDGEN_CUDA_SYNC=1 (read when kernels are loaded) or kern.sync: a wait after every launch
    on its stream; a fault found there names the kernel, the batch, the launch shape and that
    it happened inside the kernel. A failed launch says so instead."""
    from rbdgen.targets.cuda.runtime import CudaKernels

    kern = _build("iiwa14-fixed")
    for value, on in (("1", True), ("0", False), ("", False)):
        monkeypatch.setenv("RBDGEN_CUDA_SYNC", value)
        again = CudaKernels(kern.path, kern.model, kern.prefix, kern.dtype, kern.info, kern.archs)
        assert again.sync is on, value
    monkeypatch.setattr(kern, "sync", True)
    x = _FakeGpuArray((5, 7), stream=0x5000)
    calls = _record(monkeypatch, kern)
    kern.rnea(x, x, x, out=_FakeGpuArray((5, 7)), stream=0x5000, shape="thread")
    assert [c[0] for c in calls] == ["launch", "sync"] and calls[1] == ("sync", 0x5000)
    calls = _record(monkeypatch, kern, sync_err=700)  # cudaErrorIllegalAddress, at the wait
    with pytest.raises(RbdgenError, match=r"rnea \(N = 5, shape block\): a fault inside the kernel.*"
                                          r"RBDGEN_CUDA_SYNC.*CUDA error 700: an illegal memory access"):
        kern.rnea(x, x, x, out=_FakeGpuArray((5, 7)), stream=0x5000, shape="block")
    calls = _record(monkeypatch, kern, launch_err=2)  # cudaErrorMemoryAllocation, at the launch
    with pytest.raises(RbdgenError, match=r"rnea \(N = 5, shape auto\): the launch failed: "
                                          r"CUDA error 2: out of memory"):
        kern.rnea(x, x, x, out=_FakeGpuArray((5, 7)), stream=0x5000)
    assert [c[0] for c in calls] == ["launch"]  # no wait after a launch that failed
    monkeypatch.setattr(kern, "sync", False)
    calls = _record(monkeypatch, kern, sync_err=700)
    kern.rnea(x, x, x, out=_FakeGpuArray((5, 7)), stream=0x5000)
    assert [c[0] for c in calls] == ["launch"]  # not in debug mode: no wait, the fault shows later


class _FakeCupy:
    """Just enough of cupy to see on which stream outputs are allocated and DLPack tensors taken."""

    def __init__(self):
        fake = self

        class Stream:
            def __init__(self, ptr):
                self.ptr = ptr

            def __enter__(self):
                self.prev, fake.current = fake.current, self
                return self

            def __exit__(self, *exc):
                fake.current = self.prev

        self.current = Stream(0)
        self.allocated_on, self.external = [], []

        def external(ptr):
            fake.external.append(ptr)
            return Stream(ptr)

        self.cuda = SimpleNamespace(get_current_stream=lambda: fake.current, ExternalStream=external,
                                    Stream=SimpleNamespace(null=Stream(0), ptds=Stream(2)))

    def empty(self, shape, dtype):
        self.allocated_on.append(self.current.ptr)
        return _FakeGpuArray(shape, ptr=0x900, stream=self.current.ptr or 1)

    def from_dlpack(self, x):
        self.allocated_on.append(self.current.ptr)
        return _FakeGpuArray(x.shape, ptr=0x800, stream=self.current.ptr or 1)


class _FakeDLPack:
    """A tensor that speaks only DLPack, on a CUDA device (as a JAX array)."""

    def __init__(self, shape):
        self.shape = shape

    def __dlpack__(self, stream=None):  # pragma: no cover - the fake cupy does not call it
        raise AssertionError

    def __dlpack_device__(self):
        return (2, 0)


def test_outputs_are_allocated_on_the_launch_stream(monkeypatch):
    """With stream= other than cupy's current stream, cupy allocates the outputs (and takes
    DLPack tensors) with the launch stream current, so that its pool does not hand the memory to
    other work while the kernel writes it; cupy's current stream is restored afterwards."""
    kern = _build("iiwa14-fixed")
    cp = _FakeCupy()
    calls = _record(monkeypatch, kern, cupy=cp)
    x = _FakeGpuArray((5, 7), ptr=0x100, stream=1)
    tau = kern.rnea(x, _FakeDLPack((5, 7)), x, stream=0x7000)
    assert cp.allocated_on == [0x7000, 0x7000] and cp.external == [0x7000, 0x7000]
    assert cp.current.ptr == 0 and tau.__cuda_array_interface__["shape"] == (5, 7)
    # waits for the legacy stream (x), not for the DLPack view (ordered by the exchange) or tau
    assert calls == [("wait", 0x7000, 1), ("launch", 5, (0x100, 0x800, 0x100, 0x900), 0x7000, 0)]
    cp.allocated_on.clear(), cp.external.clear(), calls.clear()
    kern.rnea(x, x, x)  # cupy's current stream (the legacy one): no stream switch, no wait
    assert cp.allocated_on == [0] and cp.external == [] and calls == [("launch", 5, (0x100,) * 3 + (0x900,), 0, 0)]


def test_runtime_exports_the_stream_and_pool_functions():
    """The functions the Python side and C++ users call, and launchers that return their own
    launch's status (cudaLaunchKernelEx), never the last-error slot an earlier call may have set."""
    kern = _build("iiwa14-fixed")
    syms = subprocess.run(["nm", "-D", "--defined-only", kern.path], capture_output=True, text=True).stdout
    for f in ("stream_wait", "stream_sync", "prepare_pool", "release_pool"):
        assert f"rbd_iiwa14_{f}" in syms, f
    sources = sorted(Path(kern.path).parent.glob("rbd_iiwa14_*_f64.cu"))  # compiled next to the library
    assert len(sources) == len(kern.kernels)
    for src in sources:
        text = src.read_text().split('extern "C" {', 1)[1]
        launchers = "\n".join(line.split("//", 1)[0] for line in text.splitlines())  # code, not comments
        assert "cudaGetLastError" not in launchers and "<<<" not in launchers, src.name
        assert launchers.count("cudaLaunchKernelEx(&cfg") >= 1, src.name
        # every stream-ordered allocation comes from a pool set up to keep its memory
        assert launchers.count("cudaMallocAsync(") == launchers.count("_prepare_pool("), src.name


def test_bad_arch_and_missing_nvcc():
    model = _model("iiwa14-fixed")
    with pytest.raises(BuildError, match="unknown CUDA architecture 'sm_2x'"):
        rbdgen.build(model, target="cuda", arch="sm_2x", kernels=("gravity",))
    with pytest.raises(CompilerNotFoundError, match="nvcc 'no-such-nvcc' not found"):
        rbdgen.build(model, target="cuda", nvcc="no-such-nvcc", kernels=("gravity",))


def test_nvcc_comes_from_the_installed_wheel():
    """make installs nvcc as a wheel; the build must not depend on a CUDA toolkit that happens
    to be on this machine's image."""
    from rbdgen.targets.cuda.nvcc import find_nvcc

    old = os.environ.pop("NVCC", None)
    try:
        path = find_nvcc()
    finally:
        if old is not None:
            os.environ["NVCC"] = old
    assert "site-packages" in path and path.endswith("/bin/nvcc"), path


# ---- CLI and C++ use ----------------------------------------------------------------------------

def test_cli_generate_cuda_package_builds_and_runs_emulated(tmp_path, capsys):
    robot = next(r for r in ROBOTS if r.name == "iiwa14")
    rc, out, err = run_main(capsys, "generate", robot.path, "--target", "cuda", "--out", tmp_path, "--dtype",
                            "float64", "--kernels", "rnea,gravity", "--quiet")
    assert rc == 0, err
    pkg = tmp_path / "iiwa14"
    names = sorted(p.name for p in pkg.iterdir())
    assert "rbd_iiwa14.cuh" in names and "rbd_iiwa14_rnea_f64.cu" in names and "rbd_iiwa14_gravity_f64.cuh" in names
    from rbdgen.package import load_package

    kern = load_package(pkg, arch=ARCHS)
    model = _model("iiwa14-fixed")
    q, v, a, _ = random_state(model, seed=2, n=4)
    e = kern.emulated()
    assert kernel_err(e.rnea(q, v, a), ref.rnea(model, q, v, a)) <= TOL64
    assert kernel_err(e.gravity(q), ref.gravity(model, q)) <= TOL64


def test_cpp_example_in_docs_compiles_against_generated_sources(tmp_path, capsys):
    """docs/cuda.md shows a C++ program calling a generated kernel; compile it (host and
    device code, -Werror) against freshly generated sources and run its CPU part."""
    from rbdgen.targets.cuda.nvcc import find_nvcc

    robot = next(r for r in ROBOTS if r.name == "iiwa14")
    rc, _, err = run_main(capsys, "generate", robot.path, "--target", "cuda", "--out", tmp_path, "--dtype",
                          "float64", "--kernels", "rnea", "--quiet")
    assert rc == 0, err
    doc = (Path(__file__).resolve().parent.parent / "docs" / "cuda.md").read_text()
    code = doc.split("```cpp\n", 1)[1].split("```", 1)[0]
    pkg = tmp_path / "iiwa14"
    (pkg / "example.cu").write_text(code)
    exe = tmp_path / "example"
    cmd = [find_nvcc(), "-std=c++17", "-O1", "-arch=sm_80", "--Werror", "all-warnings", "-Xcompiler",
           "-Wall,-Wextra,-Werror", "-I", str(pkg), str(pkg / "example.cu"), str(pkg / "rbd_iiwa14_rnea_f64.cu"),
           str(pkg / "rbd_iiwa14_runtime.cu"), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 3), r.stdout + r.stderr  # 3: the example's "no GPU" exit
    tau_line = [ln for ln in r.stdout.splitlines() if ln.startswith("tau (emulated)")][0]
    tau = np.array([float(x) for x in tau_line.split(":", 1)[1].split()])
    model = _model("iiwa14-fixed")
    z = np.zeros(model.nv)
    assert kernel_err(tau, ref.rnea(model, z, z, z)) <= 1e-6  # printed with 9 significant digits


def test_cli_validate_emulated(capsys):
    robot = next(r for r in ROBOTS if r.name == "iiwa14")
    rc, out, err = run_main(capsys, "validate", robot.path, "--target", "cuda", "--emulate", "--arch", ARCHS,
                            "--opt", "-O1", "--kernels", "rnea,aba", "--states", "3", "--no-pinocchio", "-q")
    assert rc == 0, out + err
    assert "cuda (emulated on the CPU)" in out and "all 2 kernels pass" in out


def test_cli_cuda_errors(capsys):
    robot = next(r for r in ROBOTS if r.name == "iiwa14")
    rc, out, err = run_main(capsys, "validate", robot.path, "--target", "cuda", "--arch", "sm_x", "-q")
    assert rc == 2
    assert_one_error_line(err, out, "unknown CUDA architecture")
    rc, out, err = run_main(capsys, "validate", robot.path, "--emulate", "-q")
    assert rc == 2
    assert_one_error_line(err, out, "--target cuda")


# ---- on a GPU ----------------------------------------------------------------------------------
# Where no GPU exists these skip, saying why. Where nvidia-smi lists a GPU they run, and fail —
# never skip — when our CUDA runtime cannot use it (a driver older than the CUDA 13 runtime,
# …) or cupy is missing: green must mean they ran. `make test-gpu` installs cupy and sets
# RBDGEN_REQUIRE_GPU=1, which turns "no GPU here" into a failure too.

def _require_gpu():
    from rbdgen.targets.cuda.nvcc import detect_archs
    from rbdgen.targets.cuda.runtime import _env_flag

    n, why = _build("iiwa14-fixed").gpu_status()
    if n:
        return
    listed = detect_archs()
    if listed:
        pytest.fail(f"nvidia-smi lists a GPU (sm_{', sm_'.join(listed)}) but the CUDA runtime of our kernels cannot "
                    f"use it: {why}")
    reason = f"no NVIDIA GPU here (CUDA runtime: {why})"
    if _env_flag("RBDGEN_REQUIRE_GPU"):
        pytest.fail(reason + "; RBDGEN_REQUIRE_GPU is set (make test-gpu), so the GPU tests must run")
    pytest.skip(reason + "; the emulated tests above run the same GPU program on the CPU")


def _require_cupy():
    _require_gpu()
    try:
        import cupy
    except ImportError as e:
        pytest.fail(f"a GPU is here but cupy cannot be imported ({e}); `make test-gpu` installs it "
                    "(pip install -e '.[gpu]')")
    return cupy


def test_gpu_tests_fail_where_a_gpu_is_listed_but_unusable(monkeypatch):
    """The guard of the GPU tests, run here with the facts replaced: nvidia-smi lists a GPU but
    the runtime reports none → fail with the runtime's reason; no GPU at all → skip, unless
    RBDGEN_REQUIRE_GPU is set; a usable GPU without cupy → fail."""
    import rbdgen.targets.cuda.nvcc as nv

    kern = _build("iiwa14-fixed")
    why = "CUDA driver version is insufficient for CUDA runtime version"
    monkeypatch.setattr(kern, "gpu_status", lambda: (0, why))
    monkeypatch.delenv("RBDGEN_REQUIRE_GPU", raising=False)
    monkeypatch.setattr(nv, "detect_archs", lambda: ("90",))
    with pytest.raises(pytest.fail.Exception, match=f"nvidia-smi lists a GPU \\(sm_90\\).*cannot use it: {why}"):
        _require_gpu()
    monkeypatch.setattr(nv, "detect_archs", lambda: ())
    with pytest.raises(pytest.skip.Exception, match=f"no NVIDIA GPU here \\(CUDA runtime: {why}\\)"):
        _require_gpu()
    monkeypatch.setenv("RBDGEN_REQUIRE_GPU", "1")
    with pytest.raises(pytest.fail.Exception, match="RBDGEN_REQUIRE_GPU is set"):
        _require_gpu()
    monkeypatch.setattr(kern, "gpu_status", lambda: (1, ""))
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy → ImportError
    with pytest.raises(pytest.fail.Exception, match=r"cupy cannot be imported.*make test-gpu"):
        _require_cupy()


#: the GPU tests' builds (no arch: the GPUs found). benchmarks/gpu_check.py compiles these beforehand
#: on a machine without a GPU (`make gpu-check-prepare`), so that a lent GPU only runs them: a
#: build added to a gpu-marked test belongs in its plan too
GPU_BUILD = dict(target="cuda", opt="-O3")  # every kernel of a robot case
GPU_BUILD_ROLLED = dict(GPU_BUILD, unroll=False)  # the same, rolled (issue 44)
GPU_KERN_BUILD = dict(target="cuda", kernels=("rnea", "rnea_derivatives"), opt="-O1", werror=True)


def _gpu_kern():
    """iiwa14's rnea and ∇ID built for the GPUs found here (the builds above are for sm_80 and
    sm_90 whatever the machine)."""
    if "gpu" not in _built:
        _built["gpu"] = rbdgen.build(_model("iiwa14-fixed"), **GPU_KERN_BUILD)
    return _built["gpu"]


def _iiwa_batch(cp, n, seed=4):
    model = _model("iiwa14-fixed")
    q, v, a, _ = random_state(model, seed=seed, n=n)
    return ref.rnea(model, q, v, a), [cp.asarray(x) for x in (q, v, a)]


@pytest.mark.gpu
@pytest.mark.parametrize("robot,floating", ROBOT_CASES)
def test_gpu_every_kernel_matches_reference(robot, floating):
    """Every kernel in every launch shape (auto, thread, block), numpy and cupy arrays, unrolled
    and rolled. One test per robot case, the shapes and lowerings in a loop: the NumPy reference
    of the humanoids' and tiago's derivatives takes tens of seconds, computed once for all six."""
    cupy = _require_cupy()
    model = load_case(robot, floating)
    kerns = [rbdgen.build(model, **GPU_BUILD), rbdgen.build(model, **GPU_BUILD_ROLLED)]
    q, v, a, tau = random_state(model, seed=9, n=N)
    for k in kerns[0].kernels:
        args = kernel_args(k, q, v, a, tau, model)
        exp = ref_out(model, k, *args)
        for kern, shape in ((kern, shape) for kern in kerns for shape in ("auto", "thread", "block")):
            if shape == "thread" and not kern.info[k]["thread_shape"]:
                # not generated (per-thread scratch over the limit: TALOS' derivatives): a clear error
                with pytest.raises(ValueError, match="no thread shape"):
                    kern.kernel(k)(*args, shape=shape)
                continue
            low = kern.info[k]["lowering"]
            got = kern.kernel(k)(*args, shape=shape)  # numpy in: explicit transfers
            assert kernel_err(got, exp) <= TOL64, (k, shape, low)
            dev = kern.kernel(k)(*map(cupy.asarray, args), shape=shape)
            dev = tuple(cupy.asnumpy(x) for x in dev) if isinstance(dev, tuple) else cupy.asnumpy(dev)
            assert kernel_err(dev, exp) <= TOL64, (k, shape, low, "cupy")


@pytest.mark.gpu
@pytest.mark.parametrize("shape", ["thread", "block"])
def test_gpu_input_made_on_another_stream_is_waited_for(shape):
    """q is written on a busy non-blocking stream, and its interface names that stream; the
    kernel runs on another non-blocking stream. Without the wait it would read q before the
    copy that fills it (behind ~1 GB of copies) and compute with zeros."""
    cp = _require_cupy()
    kern = _gpu_kern()
    n = 4096
    exp, (q, v, a) = _iiwa_batch(cp, n)
    dq = cp.zeros_like(q)
    busy_src, busy_dst = cp.empty(2 ** 27), cp.empty(2 ** 27)  # 1 GiB each
    cp.cuda.Device().synchronize()
    producer, consumer = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    with producer:
        for _ in range(8):
            busy_dst.data.copy_from_device_async(busy_src.data, busy_src.nbytes, stream=producer)
        dq.data.copy_from_device_async(q.data, q.nbytes, stream=producer)
        tau = kern.rnea(dq, v, a, stream=consumer, shape=shape)  # dq's interface: the producer
    consumer.synchronize()
    assert kernel_err(cp.asnumpy(tau), exp) <= TOL64
    producer.synchronize()


@pytest.mark.gpu
def test_gpu_stream_argument_other_than_the_current_stream():
    """stream= a cupy stream, a raw handle, while cupy's current stream is the default one: the
    kernel runs there, its outputs come from cupy's pool on that stream, results are right."""
    cp = _require_cupy()
    kern = _gpu_kern()
    exp, args = _iiwa_batch(cp, N)
    exp_d = ref_out(_model("iiwa14-fixed"), "rnea_derivatives", *map(cp.asnumpy, args))
    s = cp.cuda.Stream(non_blocking=True)
    for stream in (s, s.ptr):
        tau = kern.rnea(*args, stream=stream)
        d = kern.rnea_derivatives(*args, stream=stream, shape="block")
        s.synchronize()
        assert kernel_err(cp.asnumpy(tau), exp) <= TOL64
        assert kernel_err(tuple(map(cp.asnumpy, d)), exp_d) <= TOL64


@pytest.mark.gpu
def test_gpu_launch_after_a_failed_allocation_reports_success():
    """A failed stream-ordered allocation (a batch no GPU can hold) is reported by its call; the
    next launch returns its own status, 0 — not the earlier failure."""
    cp = _require_cupy()
    kern = _gpu_kern()
    null = ctypes.c_void_p(0)
    host = getattr(kern._lib, "rbd_iiwa14_rnea_f64_host")
    err = host(1 << 40, null, null, null, null, 1)  # 2.5e14 bytes: cudaMallocAsync fails first
    assert err != 0 and "memory" in kern.error_string(err), kern.error_string(err)
    exp, (q, v, a) = _iiwa_batch(cp, N)
    tau = cp.empty_like(v)
    stream = ctypes.c_void_p(cp.cuda.get_current_stream().ptr)
    ptrs = [x.data.ptr for x in (q, v, a, tau)]
    for shape in (1, 2):
        assert kern.rnea._launch(N, *ptrs, stream, shape) == 0, shape
        assert kernel_err(cp.asnumpy(tau), exp) <= TOL64
    # the workspace pool keeps its memory (release threshold raised by the first allocation)
    pool = cp.cuda.runtime.deviceGetMemPool(cp.cuda.runtime.getDevice())
    threshold = cp.cuda.runtime.memPoolGetAttribute(pool, cp.cuda.runtime.cudaMemPoolAttrReleaseThreshold)
    assert threshold in (2 ** 64 - 1, -1), threshold  # UINT64_MAX, however the binding reads it
    kern.release_pool()


@pytest.mark.gpu
def test_gpu_debug_mode_reports_a_fault_inside_the_kernel():
    """RBDGEN_CUDA_SYNC=1 and arrays at an address that is not GPU memory: the launch succeeds,
    the kernel faults, and the synchronisation after the launch says so, naming the kernel. In
    a child process: a fault leaves the CUDA context unusable."""
    _require_gpu()
    script = """
import sys
import rbdgen, rbdgen.robots
from rbdgen.errors import RbdgenError
kern = rbdgen.build(rbdgen.load_urdf(rbdgen.robots.path("iiwa14")), target="cuda", kernels=("rnea",), opt="-O1")
assert kern.sync
class Bad:
    __cuda_array_interface__ = dict(shape=(64, 7), typestr="<f8", data=(0x100, False), strides=None, version=3)
try:
    kern.rnea(Bad(), Bad(), Bad(), out=Bad(), shape="thread")
except RbdgenError as e:
    print("error:", e)
    sys.exit(0)
print("no error")
sys.exit(1)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "RBDGEN_CUDA_SYNC": "1"})
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "rnea (N = 64, shape thread): a fault inside the kernel" in r.stdout, r.stdout


def test_cli_inspect_cost_cuda_reports_the_schedule(capsys):
    """The schedule figures are the scheduler's, re-derived here from the IR: statements are the
    kernel's op nodes, and the critical path can be no shorter than total / threads. The
    resource report reads the ptxas reports the build of these kernels left: nothing is
    compiled again (the progress lines would name each source ptxas ran on)."""
    robot = next(r for r in ROBOTS if r.name == "quadruped")
    model = load_case(robot, True)
    assert _model("quadruped-floating").frames == model.frames
    _build("quadruped-floating")  # QUAD_KERNELS, sm_90 (shared with the emulation tests)
    rc, out, err = run_main(capsys, "inspect", robot.path, "--floating-base", "--frames", ",".join(model.frames),
                            "--cost", "--target", "cuda", "--kernels", ",".join(QUAD_KERNELS))
    assert rc == 0, err
    compiled = [ln for ln in (out + err).splitlines() if ln.startswith("rbdgen: ptxas -v")]
    assert not compiled, compiled[:3]
    lines = out.splitlines()
    top = next(i for i, ln in enumerate(lines) if ln.startswith("kernel") and "statements" in ln) + 2
    rows = {ln.split()[0]: ln.split() for ln in lines[top:top + len(QUAD_KERNELS)]}
    assert set(rows) == set(QUAD_KERNELS)
    for k, r in rows.items():
        statements, threads, critical = int(r[1]), int(r[2]), int(r[5])
        ops = [n for n in trace(model, k).live_nodes() if n.op not in ("const", "input")]
        assert statements == len(ops)
        assert -(-statements // threads) <= critical <= statements
    # the gradient's composites, rows and entries are independent tasks: more than a few threads'
    # worth of parallelism
    assert float(rows["rnea_derivatives"][6].rstrip("x")) > 4
    # the resource report (ptxas) follows: both shapes of every kernel, and nothing spills on the
    # branched floating robot either (at 1024 threads a block ptxas had 64 registers and spilled)
    # where a spill is local memory the kernel would otherwise not touch: every block shape, and
    # every thread shape whose workspace fits in registers or the L1 (≤ THREAD_LOCAL_PREFER). The
    # derivatives' thread shapes keep kilobytes of workspace in local memory (auto runs them as
    # blocks); ptxas spilling a few words more there (∇FD: 28 B beside 12 KiB) is held to 1 % of it.
    res = next(i for i, ln in enumerate(lines) if ln.startswith("kernel") and "spills" in ln) + 2
    res_rows = [ln.split() for ln in lines[res:res + 2 * len(QUAD_KERNELS)]]
    assert {(r[0], r[1]) for r in res_rows} == {(k, s) for k in QUAD_KERNELS for s in ("thread", "block")}
    from rbdgen.targets.cuda import emit as cu

    gen = cu.generate_cuda(model, kernels=QUAD_KERNELS)
    for r in res_rows:
        assert r[6] == "B", r
        scratch = gen.kernels[r[0]]["float64"]["scratch_thread"] * 8
        if r[1] == "block" or scratch <= cu.THREAD_LOCAL_PREFER:
            assert r[5] == "0", r
        else:
            assert int(r[5]) <= scratch // 100, (r, scratch)
