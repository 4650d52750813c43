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
shapes, float64, on a serial arm (iiwa14) and a branched floating-base quadruped; rnea, crba, aba and minv of a
floating humanoid (talos, nv = 38); float32 on iiwa14 for one kernel of each kind. The level
schedule the block shape runs is checked on every robot and kernel in pure Python
(``test_schedule_*``), and the printer's per-state code is the CPU backend's, which
test_cpu_kernels.py compiles on every robot.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import rbdgen
from rbdgen import reference as ref
from rbdgen.algorithms import KERNELS, trace
from rbdgen.errors import BuildError, CompilerNotFoundError, RbdgenError
from rbdgen.ir.schedule import level_schedule

from conftest import (ROBOT_CASES, ROBOTS, ref_out, TOL32, TOL64, assert_one_error_line, kernel_args, kernel_err,
                      kernel_errors, load_case, random_state, run_main)

ARCHS = "80,90"
N = 37  # not a multiple of any block's state count: full blocks and a partial one
CASES = {
    "iiwa14-fixed": ("iiwa14", False, KERNELS),
    "quadruped-floating": ("quadruped", True, KERNELS),
    # nle and gravity are rnea with fewer inputs; the humanoid's derivatives take minutes
    "talos_reduced-floating": ("talos_reduced", True, ("rnea", "crba", "aba", "minv")),
}
#: float32: one kernel of each kind (recursive, O(n²) output, divisions, dense epilogue)
F32_KERNELS = ("rnea", "crba", "minv", "aba_derivatives")

_built: dict = {}


def _model(case):
    name, floating, _ = CASES[case]
    return load_case(next(r for r in ROBOTS if r.name == name), floating)


def _build(case, dtype="float64"):
    key = (case, dtype)
    if key not in _built:
        kernels = CASES[case][2] if dtype == "float64" else F32_KERNELS
        _built[key] = rbdgen.build(_model(case), target="cuda", dtype=dtype, kernels=kernels, opt="-O1",
                                   arch=ARCHS, werror=True)
    return _built[key]


def _errors(kern, model, dtype):
    return kernel_errors(kern, model, dtype, seed=5, n=N, single=3)


@pytest.mark.parametrize("shape", ["thread", "block"])
@pytest.mark.parametrize("case", list(CASES))
def test_emulated_float64_matches_reference(case, shape):
    kern = _build(case)
    assert kern.archs == ("80", "90")
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
    # every column of ∂τ/∂q and ∂τ/∂v is independent of the others
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
    pointing at no memory: the argument checks run before anything touches the device."""

    def __init__(self, shape, typestr="<f8", strides=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (0, False),
                                         "strides": strides, "version": 3}


def test_gpu_array_arguments_are_checked():
    kern = _build("iiwa14-fixed")
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


def test_bad_arch_and_missing_nvcc():
    model = _model("iiwa14-fixed")
    with pytest.raises(BuildError, match="unknown CUDA architecture 'sm_2x'"):
        rbdgen.build(model, target="cuda", arch="sm_2x", kernels=("gravity",))
    with pytest.raises(CompilerNotFoundError, match="nvcc 'no-such-nvcc' not found"):
        rbdgen.build(model, target="cuda", nvcc="no-such-nvcc", kernels=("gravity",))


def test_nvcc_comes_from_the_installed_wheel():
    """make installs nvcc as a wheel; the build must not depend on a CUDA toolkit that happens
    to be on this machine's image."""
    from rbdgen.jit.cuda import find_nvcc

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
    from rbdgen.jit.cuda import find_nvcc

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

def _gpu_reason():
    n, why = _build("iiwa14-fixed").gpu_status()
    return None if n else f"no NVIDIA GPU here (CUDA runtime: {why})"


@pytest.mark.gpu
@pytest.mark.parametrize("shape", ["auto", "thread", "block"])
@pytest.mark.parametrize("robot,floating", ROBOT_CASES)
def test_gpu_every_kernel_matches_reference(robot, floating, shape):
    reason = _gpu_reason()
    if reason:
        pytest.skip(reason + "; the emulated tests above run the same GPU program on the CPU")
    model = load_case(robot, floating)
    kern = rbdgen.build(model, target="cuda", opt="-O3")
    q, v, a, tau = random_state(model, seed=9, n=N)
    for k in kern.kernels:
        args = kernel_args(k, q, v, a, tau)
        exp = ref_out(model, k, *args)
        got = kern.kernel(k)(*args, shape=shape)  # numpy in: explicit transfers
        assert kernel_err(got, exp) <= TOL64, (k, shape)
        try:
            import cupy
        except ImportError:
            continue
        dev = kern.kernel(k)(*map(cupy.asarray, args), shape=shape)
        dev = tuple(cupy.asnumpy(x) for x in dev) if isinstance(dev, tuple) else cupy.asnumpy(dev)
        assert kernel_err(dev, exp) <= TOL64, (k, shape, "cupy")


def test_cli_inspect_cost_cuda_reports_the_schedule(capsys):
    """The schedule figures are the scheduler's, re-derived here from the IR: statements are the
    kernel's op nodes, and the critical path can be no shorter than total / threads."""
    robot = next(r for r in ROBOTS if r.name == "quadruped")
    model = load_case(robot, True)
    rc, out, err = run_main(capsys, "inspect", robot.path, "--floating-base", "--frames", ",".join(model.frames),
                            "--cost", "--target", "cuda", "-q")
    assert rc == 0, err
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines()[-len(KERNELS):]}
    assert set(rows) == set(KERNELS)
    for k, r in rows.items():
        statements, threads, critical = int(r[1]), int(r[2]), int(r[5])
        ops = [n for n in trace(model, k).live_nodes() if n.op not in ("const", "input")]
        assert statements == len(ops)
        assert -(-statements // threads) <= critical <= statements
    # the gradient's columns are independent: far more than a few threads' worth of parallelism
    assert float(rows["rnea_derivatives"][6].rstrip("x")) > 4
