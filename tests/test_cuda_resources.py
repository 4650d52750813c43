"""What a GPU would see of the CUDA kernels, checked without one (issue 17).

* The resource report: ptxas's own figures (``-Xptxas -v`` for sm_90) for every kernel and
  shape of the bundled iiwa14, held to bounds, so a change that makes a kernel spill, take
  kilobytes of local memory per thread or lose occupancy fails here rather than on a GPU.
* The occupancy rules against hand-worked cases of NVIDIA's calculator.
* The warp model: its edge cases follow from its definition (no speed-up when a state's lanes
  share one warp; the critical-path bound when every lane is its own warp and at most four
  lanes work in a stage).
* Workspace slot sharing: random live ranges never share a slot while both are live, and take
  no more slots than are live at once (the end-to-end check is every emulated CUDA test and
  every CPU kernel test, which run code printed with shared slots).
* The launch-shape rule of the compiled runtime, called through ctypes.
"""
from __future__ import annotations

import ctypes

import numpy as np

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rbdgen
from rbdgen import registry
from rbdgen.targets.cuda import emit as cu
from rbdgen.targets.cuda.nvcc import parse_ptxas, split_by_arch
from rbdgen.targets.cuda.resources import H100, A100, kernel_resources, occupancy
from rbdgen.codegen.printer import _share_slots
from rbdgen.ir.schedule import level_schedule

from conftest import ROBOTS, assert_one_error_line, load_case, run_main

KIB = 1024
# the worker that runs test_cuda.py (make test's --dist loadgroup) runs these too: the report's
# ptxas runs (_report, the iiwa's 24 kernels: ~30 s) happen once in it, where two tests on two
# workers each waited for the other's compile on the cache's lock (32 s each in a fresh-clone run)
pytestmark = pytest.mark.xdist_group("cuda")


def _iiwa():
    return load_case(next(r for r in ROBOTS if r.name == "iiwa14"), False)


_rows: dict = {}


def _report():
    if "iiwa" not in _rows:
        # float64 only, like the CUDA builds of tests/test_cuda.py: the same sources, so their
        # ptxas reports (left in the cache by whichever ran first) serve both
        gen = cu.generate_cuda(_iiwa(), dtypes=("float64",))
        _rows["iiwa"] = (gen, {(r["kernel"], r["shape"]): r for r in kernel_resources(gen)})
    return _rows["iiwa"]


# ---- the report on the bundled iiwa14, held to bounds ------------------------------------------

def test_no_kernel_spills_and_block_shape_has_no_local_scratch():
    gen, rows = _report()
    assert {k for k, _ in rows} == set(gen.kernels)
    for (k, shape), r in rows.items():
        assert r["spill_bytes"] == 0, (k, shape, r["spill_bytes"])
        if shape == "block":
            # the block shape's workspace is shared (or global) memory, never the stack; what is
            # left is libdevice's trigonometric slow path (40 bytes)
            assert r["local_bytes"] <= 64, (k, r["local_bytes"])


def test_thread_shape_local_memory_within_bounds():
    """≤ 1 KiB per thread wherever auto may choose the thread shape; the derivative kernels
    (whose live values alone take 2-3 KiB: auto runs them as blocks) stay under 4 KiB, where
    they were 4.9 and 6.7 KiB before dead workspace slots were reused."""
    gen, rows = _report()
    for k, per in gen.kernels.items():
        info = per["float64"]
        local = rows[(k, "thread")]["local_bytes"]
        if info["scratch_thread"] * 8 <= cu.THREAD_LOCAL_PREFER:
            assert local <= KIB, (k, local)
        else:
            assert local <= 4 * KIB, (k, local)
        # ptxas's figure covers at least the workspace the printer declared
        assert local >= info["scratch_thread"] * 8, (k, local, info["scratch_thread"])


def test_occupancy_of_rnea_and_aba_and_shared_memory_agrees_with_the_generator():
    """The cheap kernels' thread shapes hold ≥ 16 warps an SM (25 %), or ≥ 12 (18.75 %, at most
    168 registers) where the thread keeps its whole state in registers (no local memory beyond
    libdevice's 40 bytes). The second case is a trade, not a loss: iiwa's minv went from 126
    registers + 640 B of local scratch to 166 registers and none when ABA's articulated inertias
    got their exact zeros (its live values did not grow; they left local memory), as the floating
    quadruped's crba thread shape already was. Which of the two runs faster is for a GPU to say
    (issue 11's note); a kernel that loses occupancy *and* keeps local memory fails here."""
    gen, rows = _report()
    for k in ("rnea", "aba", "nle", "crba", "minv"):
        r = rows[(k, "thread")]
        assert r["occupancy"] >= 0.25 or (r["occupancy"] >= 0.1875 and r["local_bytes"] <= 64), (k, r)
    for (k, shape), r in rows.items():
        info = gen.kernels[k]["float64"]
        want = info["thread_tile_bytes"] if shape == "thread" else info["block_shared_bytes"]
        assert r["shared_bytes"] >= want  # dynamic (the generator's) + static (ptxas's)
        assert r["shared_bytes"] <= cu.SHARED_LIMIT
        assert r["blocks"] >= 1 and 0 < r["occupancy"] <= 1
        # the warp-aware layout: 32 states by lanes
        if shape == "block":
            assert r["threads"] == info["lanes"] * info["states_per_block"]


def test_roofline_is_the_lesser_bound_and_scales_with_the_op_counts():
    gen, rows = _report()
    for (k, shape), r in rows.items():
        roof = r["roofline"]
        c = gen.kernels[k]["float64"]["counts"]
        assert roof["instructions"] >= max(c["mul"], c["add"])
        assert roof["states_per_s"] == min(roof["compute"], roof["memory"])
        assert roof["compute"] == pytest.approx(132 * 64 * 1.98e9 / roof["instructions"])


# ---- occupancy rules ---------------------------------------------------------------------------

def test_occupancy_hand_worked_cases():
    # 128 threads, 128 registers: 4096 registers a warp, 16 warps an SM -> 4 blocks, 25 %
    o = occupancy(H100, 128, 128, 29 * KIB)
    assert (o["blocks"], o["warps"], o["limiter"]) == (4, 16, "registers") and o["occupancy"] == 0.25
    # 126 registers round up to 128 (allocation unit 256 a warp): the same
    assert occupancy(H100, 128, 126, 0)["blocks"] == 4
    # 32 threads, 40 KiB shared: (40 KiB + 1 KiB reserved) a block -> 5 blocks of 228 KiB
    o = occupancy(H100, 32, 32, 40 * KIB)
    assert (o["blocks"], o["limiter"]) == (5, "shared memory")
    # one warp a block, few registers, no shared memory: 32 blocks an SM at most, half the warps
    o = occupancy(H100, 32, 16, 0)
    assert (o["blocks"], o["occupancy"], o["limiter"]) == (32, 0.5, "blocks")
    # the A100 has 164 KiB: the same 40 KiB blocks fit 4 times
    assert occupancy(A100, 32, 32, 40 * KIB)["blocks"] == 4
    # more than a block may have: none fit
    assert occupancy(H100, 32, 32, 228 * KIB)["blocks"] == 0


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 1024), st.integers(16, 255), st.integers(0, 100 * KIB))
def test_occupancy_never_grows_with_more_registers_or_shared_memory(threads, regs, smem):
    o = occupancy(H100, threads, regs, smem)
    assert occupancy(H100, threads, min(regs + 8, 255), smem)["blocks"] <= o["blocks"]
    assert occupancy(H100, threads, regs, smem + 4 * KIB)["blocks"] <= o["blocks"]
    assert o["warps"] <= H100.max_warps and o["blocks"] <= H100.max_blocks


def test_parse_ptxas_reads_entries_and_callees():
    text = """ptxas info    : 272 bytes gmem
ptxas info    : Compiling entry function '_ZN1a11k_block_kernelEl' for 'sm_90'
ptxas info    : Function properties for _ZN1a11k_block_kernelEl
    40 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 48 registers, used 1 barriers, 56 bytes cumulative stack size, 16 bytes smem
ptxas info    : Function properties for _ZN1a4k_s0IdEEvi
    16 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
"""
    f = parse_ptxas(text)
    e = f["_ZN1a11k_block_kernelEl"]
    assert (e.entry, e.registers, e.stack, e.spill_stores, e.cumulative_stack, e.static_smem) == \
        (True, 48, 40, 8, 56, 16)
    s = f["_ZN1a4k_s0IdEEvi"]
    assert (s.entry, s.stack, s.spill_stores) == (False, 16, 4)


def test_split_by_arch_gives_each_architecture_its_own_run():
    """One nvcc command with two -gencode targets prints two ptxas runs; each architecture gets
    its entries and the callees listed after them, whether or not a run opens with a gmem line."""
    run = lambda arch, regs: (f"ptxas info    : Compiling entry function '_Z1kPd' for 'sm_{arch}'\n"
                              "ptxas info    : Function properties for _Z1kPd\n"
                              "    40 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                              f"ptxas info    : Used {regs} registers, used 0 barriers, 40 bytes cumulative stack size\n"
                              "ptxas info    : Function properties for __internal_trig_reduction_slowpathd\n"
                              f"    {arch} bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n")
    for gmem in ("ptxas info    : 272 bytes gmem, 16 bytes cmem[4]\n", ""):
        parts = split_by_arch(gmem + run("80", 28) + gmem + run("90", 30))
        assert set(parts) == {"80", "90"}
        for arch, regs in (("80", 28), ("90", 30)):
            f = parse_ptxas(parts[arch])
            assert f["_Z1kPd"].registers == regs and f["_Z1kPd"].entry
            assert f["__internal_trig_reduction_slowpathd"].stack == int(arch)
            assert parts[arch].startswith(gmem) and f"sm_{'90' if arch == '80' else '80'}" not in parts[arch]


def test_two_processes_asking_for_the_same_reports_compile_each_once(tmp_path, monkeypatch):
    """Two test workers (or two CLI calls) asking for the same sources' reports from an empty
    cache: each report is compiled by one of them (a lock per report; the other skips it, does
    the rest, then waits and reads it), and both get every report. Two threads stand in for the
    processes: the lock is a file lock, which two threads holding their own descriptors contend
    for as two processes do. Before the lock, both compiled all three (test_cuda_resources paid
    ~44 s of ptxas twice)."""
    import subprocess
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    from rbdgen.targets.cuda import nvcc as cr
    from rbdgen.toolchain import compiler

    monkeypatch.setenv(compiler.CACHE_ENV, str(tmp_path / "cache"))
    files = {f"k{i}.cu": f"// kernel source {i}\n" for i in range(3)}
    compiled, guard = [], threading.Lock()

    def fake_nvcc(cmd):
        stem = Path(cmd[cmd.index("-o") - 1]).stem
        with guard:
            compiled.append(stem)
        time.sleep(0.3)  # long enough that the other asks while this one compiles
        return subprocess.CompletedProcess(cmd, 0, stdout=(
            f"ptxas info    : Compiling entry function '_Z{stem}_block' for 'sm_90'\n"
            f"ptxas info    : Used {10 + int(stem[1:])} registers, used 0 barriers, 0 bytes cumulative stack size\n"),
            stderr="")

    monkeypatch.setattr(compiler, "run_compiler", fake_nvcc)
    with ThreadPoolExecutor(2) as ex:
        got = list(ex.map(lambda _: cr.ptxas_reports(files, list(files), arch="90", nvcc="true"), range(2)))
    assert sorted(compiled) == ["k0", "k1", "k2"], compiled
    for reports in got:
        assert {src: f[f"_Z{src[:2]}_block"].registers for src, f in reports.items()} == \
            {"k0.cu": 10, "k1.cu": 11, "k2.cu": 12}


def test_report_reads_what_the_build_left_and_equals_its_own_compile(tmp_path, monkeypatch):
    """A CUDA build (two architectures) leaves ptxas's report of each source in the cache; the
    resource report for either GPU then compiles nothing (nvcc refused here) and gives the figures
    a report of its own (an empty cache: nvcc -cubin) gives."""
    from rbdgen.targets.cuda import nvcc as cr
    from rbdgen.toolchain import compiler

    model, kernels = _iiwa(), ("gravity", "minv")
    gen = cu.generate_cuda(model, kernels=kernels)
    monkeypatch.setenv(compiler.CACHE_ENV, str(tmp_path / "fresh"))
    own = {g.arch: kernel_resources(gen, gpu=g) for g in (H100, A100)}
    monkeypatch.setenv(compiler.CACHE_ENV, str(tmp_path / "built"))
    rbdgen.build(model, target="cuda", kernels=kernels, opt="-O0", arch="80,90")

    def refuse(cmd):
        raise AssertionError(f"compiled again: {cmd}")

    monkeypatch.setattr(compiler, "run_compiler", refuse)
    for g in (H100, A100):
        assert kernel_resources(gen, gpu=g) == own[g.arch], g.name
    # a changed source is another key: compiled again, not served from the build's report
    other = dict(gen.files)
    src = gen.kernels["minv"]["float64"]["source"]
    other[src] = other[src] + "\n// changed\n"
    with pytest.raises(AssertionError, match="compiled again"):
        cr.ptxas_reports(other, [src], arch="90")


# ---- the warp model ----------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", ["crba", "minv", "rnea_derivatives"])
def test_warp_model_edge_cases(kernel):
    model = _iiwa()
    k = registry.trace(model, kernel)
    s = level_schedule(k, max_lanes=cu.MAX_LANES)
    total = sum(map(sum, s.lane_loads))
    one_warp = cu.warp_model(s, total, 0, states_per_block=1)  # every lane of a state in one warp
    assert one_warp["speedup"] == pytest.approx(1.0) and one_warp["speedup_old"] == pytest.approx(1.0)
    m = cu.warp_model(s, total, 0, cu.WARP)
    assert 1.0 <= m["speedup"] <= total / s.critical_ops + 1e-12
    if s.lanes <= cu.SCHEDULERS:  # no stage has more warps than schedulers: the critical path
        assert m["slots"] == s.critical_ops
    # fewer states per block put more lanes in a warp: never faster
    assert cu.warp_model(s, total, 0, 8)["speedup"] <= m["speedup"] + 1e-12


# ---- workspace slots ---------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20)), min_size=1, max_size=40))
def test_shared_slots_never_clash_and_are_optimal(spans):
    defined = {v: d for v, (d, _) in enumerate(spans)}
    last = {v: d + n for v, (d, n) in enumerate(spans)}
    slot = _share_slots(list(defined), defined, last)
    for a in defined:
        for b in defined:
            if a < b and slot[a] == slot[b]:
                assert last[a] < defined[b] or last[b] < defined[a], (a, b)
    live_at_once = max(sum(1 for v in defined if defined[v] <= t <= last[v]) for t in range(0, 90))
    assert max(slot.values()) + 1 == live_at_once


def test_hls_keeps_one_slot_per_value():
    """HLS does not share slots (a shared slot would be a false dependency in hardware)."""
    from rbdgen.targets.hls.emit import HLS

    assert HLS.reuse_workspace is False and cu.CUDA.reuse_workspace is True


# ---- the launch-shape rule, as compiled ---------------------------------------------------------

def test_auto_shape_rule_of_the_compiled_runtime():
    kern = rbdgen.build(_iiwa(), target="cuda", kernels=("gravity",), opt="-O1", arch="90")
    f = getattr(kern._lib, f"{kern.prefix}_auto_shape")
    f.argtypes, f.restype = [ctypes.c_long, ctypes.c_int, ctypes.c_int], ctypes.c_int
    sm = getattr(kern._lib, f"{kern.prefix}_sm_count")()  # 1 without a GPU
    small, big = 4 * 32 * sm - 1, 4 * 32 * sm
    assert f(big, 0, 100) == 2 and f(big, 2, 100) == 2    # no thread shape / kilobytes of local scratch
    assert f(small, 1, 149) == 1                          # block predicts < 1.5x: thread
    assert (f(small, 1, 150), f(big, 1, 150)) == (2, 1)   # block until every scheduler has a warp


# ---- the CLI ----------------------------------------------------------------------------------

def test_cli_report_needs_a_known_architecture(capsys):
    robot = next(r for r in ROBOTS if r.name == "iiwa14")
    rc, out, err = run_main(capsys, "inspect", robot.path, "--cost", "--target", "cuda", "--arch", "sm_75", "-q")
    assert rc == 2
    assert_one_error_line(err, out, "sm_75", "sm_90")


# ---- a kernel whose thread shape would need too much local memory -------------------------------

def test_thread_shape_refused_above_the_local_memory_limit(monkeypatch):
    """With the limit below aba's per-thread scratch, aba gets no thread shape: the sources
    still compile with every warning an error, shape='thread' is a clear error, the default
    and the block shape run (emulated) and match the reference."""
    from conftest import TOL64, kernel_args, kernel_err, random_state, ref_out

    monkeypatch.setattr(cu, "THREAD_LOCAL_LIMIT", 0)
    model = _iiwa()
    kern = rbdgen.build(model, target="cuda", kernels=("aba",), opt="-O1", arch="90", werror=True)
    assert kern.info["aba"]["thread_shape"] is False and kern.info["aba"]["default_shape"] == "block"
    with pytest.raises(ValueError, match="no thread shape"):
        kern.emulated("thread").aba(np.zeros(model.nq), np.zeros(model.nv), np.zeros(model.nv))
    with pytest.raises(ValueError, match="no thread shape"):
        kern.aba(np.zeros(model.nq), np.zeros(model.nv), np.zeros(model.nv), shape="thread")
    q, v, a, tau = random_state(model, seed=3, n=5)
    args = kernel_args("aba", q, v, a, tau)
    exp = ref_out(model, "aba", *args)
    for emu in (kern.emulated("block"), kern.emulated("default")):
        assert kernel_err(emu.aba(*args), exp) <= TOL64
