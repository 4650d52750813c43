"""FPGA (HLS) backend: C simulation of the generated HLS C++ against the NumPy reference, the
generated testbench, the cost model, and the command line.

The C simulation compiles the HLS sources with g++ against Xilinx's ap_types headers (installed
by `make venv` from the hls4ml wheel). What runs where, and why:

* double: every kernel on iiwa14 (fixed base), the bundled quadruped (floating base, branched)
  and a synthetic branched tree with revolute, prismatic and continuous joints: ≤ TOL64.
* float: every kernel on iiwa14, within conftest.TOL32 (the same float32 bounds as the CPU).
* ap_fixed: ap_fixed<W, I> arithmetic is header templates that g++ compiles ~10× slower than
  double (iiwa14's eight kernels: ~50 s on one core), so fixed point runs on iiwa14 only (the
  7-DoF arm of the published FPGA work): Q16.16 on every kernel, a wider Q24.24 on the
  kernels that bound it (the recursions, aba and ∇FD), and a deliberately too-narrow Q8.8
  that must fail the Q16.16 bounds. The quadruped and the other formats are covered by the
  accuracy sweep (`make bench-hls`, benchmarks/results/hls_accuracy.md), not by CI.
* Python calls the C-simulation harness, which by default runs the kernel bodies through an
  out-of-line operator wrapper over the same ap_fixed arithmetic (fast to compile);
  test_fast_csim_is_bit_identical_to_top_functions checks it against the synthesizable top
  functions bit for bit, and test_generated_testbench compiles the generated testbench
  against the top functions exactly as a user would.
"""
from __future__ import annotations

import math
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import rbdgen
import rbdgen.robots
from rbdgen import registry
from rbdgen import reference as ref
from rbdgen.algorithms import KERNELS, trace
from rbdgen.targets.hls import emit as H
from rbdgen.errors import BuildError, RbdgenError
from rbdgen.ir.ops import COST_CLASSES
from rbdgen.targets.hls.csim import ap_types_dir

from conftest import ROBOT_CASES, TOL32, TOL64, assert_one_error_line, kernel_args, kernel_err, load_case, ref_out, \
    random_state, run_main

N = 32  # states per check: C simulation of ap_fixed takes ~1.5 ms per state for iiwa14's ∇FD

#: The measured bounds of the C-simulated ap_fixed kernels are declared with each kernel
#: (rbdgen.registry, fixed_tol; the measurement is written next to the declarations).
FIXED_TOL = {fmt: {k: registry.get(k).fixed_tol[fmt] for k in KERNELS if fmt in registry.get(k).fixed_tol}
             for fmt in ((32, 16), (48, 24))}
#: the kernels with a declared Q24.24 bound (the recursions, aba, the derivatives, kinematics)
WIDE_KERNELS = tuple(FIXED_TOL[(48, 24)])

_built: dict = {}
# one worker runs this module (make test's --dist loadgroup): its tests share builds (_build: the
# Q16.16 build serves four tests, Q24.24 two), which a second worker would wait for on the compile
# cache's lock (the wider-format test 21 s in a fresh-clone run, for builds the others had made)
pytestmark = pytest.mark.xdist_group("hls")


def _case(case_id):
    return [c for c in ROBOT_CASES if c.id == case_id][0].values


def _tree_model(tmp_path_factory):
    from rbdgen.robots import tree_urdf

    if "tree" not in _built:
        p = tmp_path_factory.mktemp("tree") / "tree.urdf"
        p.write_text(tree_urdf(7, branching=3, seed=4, joint_types=("revolute", "prismatic", "continuous")))
        m = rbdgen.load_urdf(p)
        _built["tree"] = m.with_frames(m.leaf_links[:3])  # frames on three branches
    return _built["tree"]


def _build(key, model, **kw):
    kw.setdefault("opt", "-O0")  # -O0 compiles 2× faster than the default -O1; 32 states still run in < 1 s
    if key not in _built:
        _built[key] = rbdgen.build(model, target="hls", **kw)
    return _built[key]


def _errors(kern, model, n=N, seed=31):
    q, v, a, tau = random_state(model, seed=seed, n=n)
    errs = {}
    for k in kern.kernels:
        args = kernel_args(k, q, v, a, tau, model)
        exp = ref_out(model, k, *args)
        batch = kern.kernel(k)(*args)
        single = kern.kernel(k)(*(x[3] for x in args))
        exp3 = tuple(e[3] for e in exp) if isinstance(exp, tuple) else exp[3]
        errs[k] = max(kernel_err(batch, exp), kernel_err(single, exp3))
    return errs


# ---- C simulation against the reference ------------------------------------------------------

@pytest.mark.parametrize("case_id", ["iiwa14-fixed", "quadruped-floating", "tree"])
def test_double_csim_matches_reference(case_id, tmp_path_factory):
    if case_id == "tree":
        m = _tree_model(tmp_path_factory)
    else:
        m = load_case(*_case(case_id))
    kern = _build(("double", case_id), m, dtype="float64")
    assert kern.numtype.ctype == "double" and set(kern.kernels) == set(KERNELS)
    errs = _errors(kern, m, n=8)
    bad = {k: e for k, e in errs.items() if not e <= TOL64}
    assert not bad, f"{m.name}: HLS double C simulation above {TOL64}: {bad}"


def test_float_csim_matches_reference():
    m = load_case(*_case("iiwa14-fixed"))
    kern = _build(("float", "iiwa"), m, dtype="float32")
    assert kern.numtype.ctype == "float"
    errs = _errors(kern, m, n=8)
    bad = {k: e for k, e in errs.items() if not e <= TOL32[k]}
    assert not bad, f"HLS float C simulation above the float32 bounds: {bad}"


@pytest.mark.parametrize("fmt", [(32, 16), (48, 24)], ids=["Q16.16", "Q24.24"])
def test_fixed_csim_within_measured_bounds(fmt):
    m = load_case(*_case("iiwa14-fixed"))
    kernels = KERNELS if fmt == (32, 16) else WIDE_KERNELS
    kern = _build(("fixed", fmt), m, fixed=fmt, kernels=kernels)
    assert kern.numtype.ctype == f"ap_fixed<{fmt[0]}, {fmt[1]}, AP_RND_CONV, AP_SAT>"
    errs = _errors(kern, m)
    tol = FIXED_TOL[fmt]
    bad = {k: e for k, e in errs.items() if not e <= tol[k]}
    assert not bad, f"ap_fixed<{fmt[0]},{fmt[1]}> above its measured bounds: {bad}"
    # and the format is not accidentally exact: quantisation shows
    assert errs["rnea"] > 1e-12


def test_fixed_csim_of_one_kernel():
    """ap_fixed<32,16> C simulation of inverse dynamics alone, within its measured bound and not
    exact: the HLS check of `make test-quick` (one small build; the tests above cover every kernel)."""
    m = load_case(*_case("iiwa14-fixed"))
    kern = _build(("fixed", (32, 16), "rnea"), m, fixed=(32, 16), kernels=("rnea",))
    errs = _errors(kern, m)
    assert set(errs) == {"rnea"} and 1e-12 < errs["rnea"] <= FIXED_TOL[(32, 16)]["rnea"], errs


def test_shared_precompiled_ap_types_change_nothing_built(tmp_path, monkeypatch):
    """The fast C simulation compiles a fixed-point harness with the ap_types precompiled once
    and shared (``CSIM_AP_TYPES``, ``compiler.shared_pch``): the library is the one built
    without it, byte for byte (a harness whose first lines asked for other optimisation than the
    shared header does would differ here). A library found in the cache makes none and reads
    none; a damaged one (here truncated) is made again by the next build that compiles, another
    robot's, which takes the same entry. The format's operators are one archive, whatever the
    build's -O. Four compiling builds of a one- and a two-joint chain."""
    import rbdgen.targets.hls as hls_target
    from rbdgen.toolchain import compiler

    models = []
    for n in (1, 2):
        p = tmp_path / f"chain{n}.urdf"
        p.write_text(rbdgen.robots.chain_urdf(n, seed=n))
        models.append(rbdgen.load_urdf(p))
    opts = dict(target="hls", fixed=(24, 10), kernels=("gravity",), opt="-O0")

    def command(kern, cache):
        return (tmp_path / cache / kern.path.rsplit("/", 2)[-2] / "command.txt").read_text()

    def included(cmd):
        return Path(re.search(r"-include (\S+)", cmd).group(1))

    monkeypatch.setenv(compiler.CACHE_ENV, str(tmp_path / "shared"))
    first = rbdgen.build(models[0], **opts)
    # two entries: the harness's (the build's flags) and the format's operators' (always -O2)
    gchs = sorted((tmp_path / "shared").glob("pch-*/rbd_csim_ap_types.h.gch"))
    assert len(gchs) == 2 and all(compiler.library_intact(g) is None for g in gchs), gchs
    header = included(command(first, "shared"))
    gch = header.with_name(header.name + ".gch")
    assert gch in gchs
    gch.write_bytes(gch.read_bytes()[:1000])
    rbdgen.build(models[0], **opts)  # found in the cache: the damaged .gch is not touched
    assert gch.stat().st_size == 1000
    other = rbdgen.build(models[1], **opts)
    assert sorted((tmp_path / "shared").glob("pch-*/*.gch")) == gchs and compiler.library_intact(gch) is None
    assert included(command(other, "shared")) == header
    # the format's operators: one archive in the cache, compiled at -O2 with the other shared
    # header, linked into both robots' libraries and into a build at another -O
    ops = sorted((tmp_path / "shared").glob("*/rbd_csim_fx24_10_rnd_conv_sat.a"))
    assert len(ops) == 1, ops
    ops_cmd = (ops[0].parent / "command.txt").read_text()
    assert " -O2 " in ops_cmd and included(ops_cmd) != header and included(ops_cmd).parent.name.startswith("pch-")
    o1 = rbdgen.build(models[1], **{**opts, "opt": "-O1"})
    for kern in (first, other, o1):
        assert f"linked: {ops[0]}" in command(kern, "shared")
    assert sorted((tmp_path / "shared").glob("*/rbd_csim_*.a")) == ops
    assert abs(other.sincos(np.array([0.5]))[0][0] - math.sin(0.5)) < 2.0 ** -13  # ap_fixed<24,10>: 14 bits
    monkeypatch.setenv(compiler.CACHE_ENV, str(tmp_path / "own"))
    monkeypatch.setattr(hls_target, "shared_pch", lambda *a, **kw: None)
    own = rbdgen.build(models[0], **opts)
    assert "-include" not in command(own, "own")
    with open(first.path, "rb") as a, open(own.path, "rb") as b:
        assert a.read() == b.read()


def test_fixed_wider_format_is_more_accurate():
    m = load_case(*_case("iiwa14-fixed"))
    e32 = _errors(_build(("fixed", (32, 16)), m, fixed=(32, 16)), m)
    e48 = _errors(_build(("fixed", (48, 24)), m, fixed=(48, 24), kernels=WIDE_KERNELS), m)
    for k in WIDE_KERNELS:
        assert e48[k] < e32[k] / 30, (k, e48[k], e32[k])  # 8 more fractional bits: ~256× smaller


def test_too_narrow_format_exceeds_the_bounds():
    """Q8.8 resolves 4e-3: the Q16.16 bounds must catch it (the bound check can fail)."""
    m = load_case(*_case("iiwa14-fixed"))
    kern = _build(("fixed", (16, 8)), m, fixed=(16, 8), kernels=("rnea", "gravity", "minv"))
    errs = _errors(kern, m)
    for k in ("rnea", "gravity", "minv"):
        assert errs[k] > FIXED_TOL[(32, 16)][k], (k, errs[k])


def test_divisor_quantised_to_zero_saturates_and_is_counted():
    """ap_fixed<16,12> resolves 1/16: the wrist's articulated inertias become 0. The fast C
    simulation saturates those quotients (instead of trapping) and counts them."""
    m = load_case(*_case("iiwa14-fixed"))
    kern = _build(("fixed", (16, 12)), m, fixed=(16, 12), kernels=("minv",))
    kern.div_by_zero()
    q = random_state(m, seed=1, n=4)[0]
    out = kern.minv(q)
    assert kern.div_by_zero() > 0 and kern.div_by_zero() == 0  # counted, then reset
    assert np.all(np.isfinite(out)) and np.max(np.abs(out)) >= 2.0 ** 11 * 0.99  # saturated: ±2^11
    assert _build(("fixed", (32, 16)), m, fixed=(32, 16)).div_by_zero() == 0


def test_fast_csim_is_bit_identical_to_top_functions(tmp_path):
    """The Python harness's fast C simulation (operator wrapper) against the synthesizable top
    functions: the same bits, including ∇FD's looped epilogue (exact products accumulated),
    division and constant outputs; non-default rounding and overflow modes."""
    from rbdgen.robots import chain_urdf

    p = tmp_path / "chain.urdf"
    p.write_text(chain_urdf(3, seed=2, joint_types=("revolute", "prismatic")))
    m = rbdgen.load_urdf(p)
    # ∇FD holds aba, minv (divisions) and the epilogue; gravity a constant output
    opts = dict(fixed=(24, 10), rounding="AP_TRN", overflow="AP_WRAP", kernels=("gravity", "aba_derivatives"),
                opt="-O0")
    fast = rbdgen.build(m, target="hls", csim="fast", **opts)
    top = rbdgen.build(m, target="hls", csim="top", **opts)
    q, v, a, tau = random_state(m, seed=5, n=16)
    for k in fast.kernels:
        args = kernel_args(k, q, v, a, tau, m)
        x, y = getattr(fast, k)(*args), getattr(top, k)(*args)
        for xa, ya in zip(x if isinstance(x, tuple) else (x,), y if isinstance(y, tuple) else (y,)):
            assert np.array_equal(xa, ya), k
        assert kernel_err(x, ref_out(m, k, *args)) < 0.05, k  # and it is the right computation


def test_generated_testbench(tmp_path):
    """The testbench, compiled with g++ against the top functions (pragmas and all) as a user
    would: passes at its default tolerance, fails when asked for float64 accuracy."""
    m = load_case(*_case("iiwa14-fixed"))
    gen = H.generate_hls(m, H.numeric_type(fixed=(32, 16)), ("gravity", "aba"))
    for fn, text in gen.files.items():
        (tmp_path / fn).write_text(text)
    exe = tmp_path / "tb"
    cmd = ["g++", "-std=c++14", "-O0", "-isystem", str(ap_types_dir()), gen.testbench, *gen.sources, "-o", str(exe)]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    ok = subprocess.run([str(exe)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout
    assert "all kernels within tolerance" in ok.stdout
    lines = {m.group(1): (float(m.group(2)), float(m.group(3)), m.group(4)) for m in
             re.finditer(r"^\s+(\w+)\s+(\S+)\s+\(tolerance (\S+)\)\s+(ok|FAIL)", ok.stdout, re.M)}
    assert set(lines) == {"gravity", "aba"}, ok.stdout
    for k, (worst, tol, verdict) in lines.items():
        # each kernel's tolerance is twice its measured Q16.16 bound, and the kernel is within it
        assert tol == pytest.approx(2 * FIXED_TOL[(32, 16)][k], rel=1e-6) and verdict == "ok", (k, ok.stdout)
        assert 1e-7 < worst < FIXED_TOL[(32, 16)][k]
    assert "zero divisor" not in ok.stdout
    strict = subprocess.run([str(exe), "1e-9"], capture_output=True, text=True)
    assert strict.returncode == 1 and "FAIL" in strict.stdout
    # one kernel alone, with only its own source (as the per-kernel Tcl projects compile it)
    one = tmp_path / "tb_gravity"
    cmd = ["g++", "-std=c++14", "-O0", "-DRBD_TB_ONLY", "-DRBD_TB_gravity", "-isystem", str(ap_types_dir()),
           gen.testbench, "rbd_iiwa14_gravity.cpp", "-o", str(one)]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    alone = subprocess.run([str(one)], capture_output=True, text=True)
    assert alone.returncode == 0 and "gravity" in alone.stdout and " aba " not in alone.stdout, alone.stdout


def test_harness_validates_arguments():
    m = load_case(*_case("iiwa14-fixed"))
    kern = _build(("double", "iiwa14-fixed"), m, dtype="float64")
    with pytest.raises(ValueError, match="'v'"):
        kern.rnea(np.zeros(7), np.zeros(6), np.zeros(7))
    with pytest.raises(ValueError, match="float64"):
        kern.gravity(np.zeros(7, dtype=np.float32))


def test_missing_ap_types_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("RBDGEN_AP_TYPES", str(tmp_path))
    with pytest.raises(BuildError, match="RBDGEN_AP_TYPES.*no ap_fixed.h"):
        ap_types_dir()


# ---- generated sources ------------------------------------------------------------------------

def test_sources_are_deterministic_and_carry_the_pragmas():
    m = load_case(*_case("iiwa14-fixed"))
    nt = H.numeric_type(fixed=(32, 16))
    a = H.generate_hls(m, nt, ("rnea", "aba_derivatives"), ii=2, part="xc7z020clg400-1", clock_mhz=200)
    b = H.generate_hls(m, nt, ("rnea", "aba_derivatives"), ii=2, part="xc7z020clg400-1", clock_mhz=200)
    assert a.files == b.files
    rnea = a.files["rbd_iiwa14_rnea.cpp"]
    for port in ("q", "v", "a", "tau"):
        assert f"#pragma HLS INTERFACE mode=ap_memory port={port}" in rnea
        assert f"#pragma HLS ARRAY_PARTITION variable={port} type=complete dim=1" in rnea
    assert "#pragma HLS PIPELINE II=2" in rnea
    assert "// ---- rnea forward: body 3 iiwa_link_4 (joint iiwa_joint_4), tree level 3" in rnea
    assert "typedef ap_fixed<32, 16, AP_RND_CONV, AP_SAT> rbd_iiwa14_data_t;" in a.files["rbd_iiwa14.h"]
    # ∇FD is split into parts passing values through a register array; the epilogue is a loop
    fd = a.files["rbd_iiwa14_aba_derivatives.cpp"]
    assert "#pragma HLS ARRAY_PARTITION variable=w type=complete dim=1" in fd and "_part1<S>(" in fd
    # one Vitis HLS project per kernel (a proc in hls_project.tcl): its own source only, the
    # testbench restricted to it, C simulation, synthesis and C/RTL co-simulation
    proj = a.files["hls_project.tcl"]
    assert "set ::rbd_part {xc7z020clg400-1}" in proj and "set ::rbd_period 5.000" in proj
    for cmd in ("open_project -reset prj_rbd_iiwa14_$kernel", "set_top rbd_iiwa14_$kernel", "open_solution",
                "set_part $::rbd_part", "create_clock -period $::rbd_period", "csim_design", "csynth_design",
                "cosim_design"):
        assert cmd in proj, cmd
    assert re.findall(r"^\s*add_files \[file join \$::rbd_here (\S+)\]", proj, re.M) == ["rbd_iiwa14_$kernel.cpp"]
    assert '-DRBD_TB_ONLY -DRBD_TB_$kernel"' in proj
    for k in ("rnea", "aba_derivatives"):
        tcl = a.files[f"hls_{k}.tcl"]
        assert f"rbd_hls_project {k}\n" in tcl and "vitis-run --mode hls --tcl" in tcl and "source " in tcl
    drv = a.files["run_hls.tcl"]
    assert "set kernels { rnea aba_derivatives }" in drv and "rbd_hls_project $k" in drv
    lat = H.generate_hls(m, nt, ("rnea",))
    assert "PIPELINE" not in lat.files["rbd_iiwa14_rnea.cpp"]
    axi = H.generate_hls(m, nt, ("rnea",), interface="m_axi").files["rbd_iiwa14_rnea.cpp"]
    assert "mode=m_axi port=q offset=slave" in axi and "q_l[i] = q[i]" in axi


def _run_tcl(folder, script, env):
    """Source a generated Tcl script in a Tcl interpreter (Python's own, tkinter.Tcl: no display,
    no Vitis) whose Vitis HLS commands are stubs that record each call; `exit` ends the script."""
    tkinter = pytest.importorskip("tkinter", reason="this Python was built without Tcl; the Tcl scripts "
                                  "are then checked by text only (test_sources_are_deterministic...)")
    tcl = tkinter.Tcl()
    for k, v in env.items():
        tcl.eval(f"set ::env({k}) {{{v}}}")
    tcl.eval("set ::calls {}")
    for cmd in ("open_project", "set_top", "add_files", "open_solution", "set_part", "create_clock", "csim_design",
                "csynth_design", "cosim_design", "export_design", "close_project"):
        tcl.eval(f"proc {cmd} {{args}} {{ lappend ::calls [concat {cmd} $args] }}")
    tcl.eval("catch {rename exit {}}; proc exit {args} { return -code return }")
    tcl.eval(f"source {{{folder / script}}}")
    return [list(tcl.splitlist(c)) for c in tcl.splitlist(tcl.eval("set ::calls"))]


def test_tcl_projects_run(tmp_path):
    """The generated Tcl, executed: run_hls.tcl makes one project per kernel with only that
    kernel's source and the testbench restricted to it, then C simulation, synthesis and
    co-simulation; the environment selects kernels and steps; hls_<kernel>.tcl runs one."""
    m = load_case(*_case("iiwa14-fixed"))
    gen = H.generate_hls(m, H.numeric_type(fixed=(32, 16)), ("rnea", "aba"), part="xczu3eg-sbva484-1-e", clock_mhz=200)
    for fn, text in gen.files.items():
        (tmp_path / fn).write_text(text)
    calls = _run_tcl(tmp_path, "run_hls.tcl", {})
    projects = [c[2] for c in calls if c[0] == "open_project"]
    assert projects == ["prj_rbd_iiwa14_rnea", "prj_rbd_iiwa14_aba"]
    first = calls[:calls.index(next(c for c in calls if c[0] == "close_project")) + 1]
    assert [c[0] for c in first] == ["open_project", "set_top", "add_files", "add_files", "open_solution", "set_part",
                                     "create_clock", "csim_design", "csynth_design", "cosim_design", "close_project"]
    adds = [c for c in first if c[0] == "add_files"]
    assert adds[0][1] == str(tmp_path / "rbd_iiwa14_rnea.cpp") and adds[1][1:3] == ["-tb", str(tmp_path / gen.testbench)]
    assert "-DRBD_TB_ONLY -DRBD_TB_rnea" in adds[1][-1]
    assert ["set_part", "xczu3eg-sbva484-1-e"] in first and ["create_clock", "-period", "5.000", "-name", "default"] in first
    only = _run_tcl(tmp_path, "run_hls.tcl", {"RBD_KERNELS": "aba", "RBD_COSIM": "0", "RBD_CLOCK_MHZ": "250"})
    assert [c[2] for c in only if c[0] == "open_project"] == ["prj_rbd_iiwa14_aba"]
    assert "cosim_design" not in [c[0] for c in only] and ["create_clock", "-period", "4.0", "-name", "default"] in only
    one = _run_tcl(tmp_path, "hls_aba.tcl", {})
    assert [c[2] for c in one if c[0] == "open_project"] == ["prj_rbd_iiwa14_aba"]


def test_output_ports_are_written_once_and_never_read():
    """∇FD's dense products sum in local accumulators and read mirrors of what they need, so no
    output port is read, and every output element is written by exactly one statement; the
    product loop is pipelined (one element per cycle) unless the whole function is."""
    m = load_case(*_case("iiwa14-fixed"))
    nt = H.numeric_type(fixed=(32, 16))
    for ii in (None, 2):
        src = H.generate_hls(m, nt, ("aba_derivatives",), ii=ii).files["rbd_iiwa14_aba_derivatives.cpp"]
        body = src[:src.index("#if defined(RBD_HLS_CSIM_FAST)")]
        writes = {}
        for name in ("dqdd_dq", "dqdd_dv", "dqdd_dtau"):
            uses = re.findall(rf"\b{name}\[([^\]]+)\](\s*=(?!=))?", body)
            assert uses and all(assign for _, assign in uses), f"{name} is read: {[u for u, a in uses if not a][:3]}"
            writes[name] = [idx for idx, _ in uses]
        nv = m.nv
        assert sorted(int(i) for i in writes["dqdd_dtau"]) == list(range(nv * nv))  # traced: each element once
        for name in ("dqdd_dq", "dqdd_dv"):                                     # products: one store per element
            assert writes[name] == [f"i * {nv} + j"], writes[name]
        assert "acc -= " in body and "o[j]" not in body and body.count("#pragma HLS UNROLL") == 2
        assert body.count("#pragma HLS PIPELINE II=1") == (2 if ii is None else 0)
        assert ("#pragma HLS PIPELINE II=2" in src) == (ii == 2)


def test_datapath_has_the_pruned_operator_count():
    """Count the operators in the generated source text: an independent look at what the IR
    says (op_counts) and at what the cost report multiplies by."""
    m = load_case(*_case("iiwa14-fixed"))
    gen = H.generate_hls(m, H.numeric_type(fixed=(32, 16)), ("rnea", "crba", "minv"))
    for k in ("rnea", "crba", "minv"):
        src = gen.files[f"rbd_iiwa14_{k}.cpp"]
        stmts = re.findall(r"const S t\d+ = (.*);", src)
        muls = sum(1 for e in stmts if re.fullmatch(r"\S+ \* \S+", e))
        adds = sum(1 for e in stmts if re.fullmatch(r"\S+ [+-] \S+", e) or re.fullmatch(r"-\S+", e))
        divs = sum(1 for e in stmts if re.fullmatch(r"rbd_div\(\S+, \S+, dz\)", e))
        # one rbd_sincos call per angle whose sine and cosine are both needed, else rbd_sin/rbd_cos
        pairs = re.findall(r"^\s*rbd_sincos\((\S+), t\d+, t\d+\);", src, re.M)
        lone = [e for e in stmts if e.startswith(("rbd_sin(", "rbd_cos("))]
        cost = H.hls_cost(trace(m, k), H.numeric_type(fixed=(32, 16)))
        assert (cost["mul"], cost["add"], cost["div"], cost["sincos"]) == (muls, adds, divs, 2 * len(pairs) + len(lone)), k
        assert cost["sincos_units"] == len(set(pairs)) + len(lone) and len(set(pairs)) == len(pairs), k
        const_muls = sum(1 for e in stmts if re.fullmatch(r"\S+ \* \S+", e) and "S(" in e)
        assert cost["const_mul"] == const_muls, k
        assert 0 < cost["sincos_units"] <= m.nv  # at most one CORDIC per joint (joint 1 about gravity needs none)
    assert "/ " not in " ".join(re.findall(r"const S t\d+ = (.*);", gen.files["rbd_iiwa14_minv.cpp"]))  # no bare division


# ---- cost model --------------------------------------------------------------------------------

def _brute_depth(kernel):
    """Critical path in ops by explicit recursion over the DAG (independent of op_counts)."""
    memo = {}

    def d(n):
        if n.op in ("const", "input"):
            return 0
        if n.id not in memo:
            memo[n.id] = 1 + max(d(a) for a in n.args)
        return memo[n.id]

    import sys
    sys.setrecursionlimit(100000)
    return max(d(v.node) for _, vals in kernel.traced_arrays() for v in vals)


def test_cost_counts_match_the_ir():
    m = load_case(*_case("iiwa14-fixed"))
    for k in ("rnea", "aba", "aba_derivatives"):
        kern = trace(m, k)
        c = H.hls_cost(kern, H.numeric_type(fixed=(32, 16)))
        oc = kern.op_counts(dense_epilogue=True)  # HLS prints the products dense
        for f in ("mul", "add", "div", "sincos", "depth"):
            assert c[f] == oc[f], (k, f)
        extra = max((mm.k for mm in kern.post), default=0)
        assert c["depth"] == _brute_depth(kern) + extra


def test_cost_model_covers_every_cost_class():
    """The model prices every cost class of the op table, for every kind of datapath."""
    from rbdgen.targets.hls.cost import Model

    for nt in (H.numeric_type(fixed=(32, 16)), H.numeric_type("float32"), H.numeric_type("float64")):
        model = Model(nt, 250.0)
        for cls in COST_CLASSES:
            oc = getattr(model, cls)()
            assert oc.cls == cls and (oc.cycles > 0 or oc.chain > 0), (nt.describe(), cls)


def test_quantise_matches_ap_fixed(tmp_path):
    """The cost model's constant quantisation (which constants fold to zero, how many bits a
    constant multiplier needs) against ap_fixed's own conversion of doubles, every mode."""
    from rbdgen.targets.hls.cost import quantise

    rng = np.random.default_rng(3)
    xs = [0.0, 2.0 ** -17, -2.0 ** -17, 3 * 2.0 ** -17, -3 * 2.0 ** -17, 2.0 ** -16, 1.5 * 2.0 ** -16, -3.57e-6,
          4.32e-7, 1e9, -1e9, 32767.99999, -32768.0] + list(rng.normal(scale=10, size=40)) + \
        list(rng.integers(-99, 99, size=20) * 2.0 ** -17)
    modes = [(q, o) for q in H.ROUNDING for o in ("AP_SAT", "AP_WRAP")] + [("AP_RND_CONV", "AP_SAT_SYM"),
                                                                          ("AP_TRN", "AP_SAT_ZERO")]
    prog = ["#include <ap_fixed.h>", "#include <cstdio>", "int main() {", f"  const double xs[] = {{{', '.join(repr(float(x)) for x in xs)}}};"]
    for q, o in modes:
        prog += [f"  for (double x : xs) {{ ap_fixed<32, 16, {q}, {o}> v = x; ap_int<32> r; r.range(31, 0) = v.range(31, 0);",
                 "    std::printf(\"%lld\\n\", (long long)r.to_int64()); }"]
    prog += ["}"]
    (tmp_path / "q.cpp").write_text("\n".join(prog))
    r = subprocess.run(["g++", "-std=c++14", "-O0", "-isystem", str(ap_types_dir()), "q.cpp", "-o", "q"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    got = [int(v) for v in subprocess.run([str(tmp_path / "q")], capture_output=True, text=True).stdout.split()]
    want = [quantise(x, 32, 16, q, o) for q, o in modes for x in xs]
    assert got == want


def test_dsp_estimate():
    from rbdgen.targets.hls.cost import mul_dsps, quantise, significant_bits

    assert (mul_dsps(32, 32), mul_dsps(32, 16), mul_dsps(18, 18), mul_dsps(48, 48)) == (4, 2, 1, 6)
    m = load_case(*_case("iiwa14-fixed"))
    kern = trace(m, "rnea")
    prev = 0
    for W in (16, 18, 24, 27, 32, 36, 48, 54, 64):
        c = H.hls_cost(kern, H.numeric_type(fixed=(W, W // 2)))
        assert c["dsp_spatial"] >= prev
        prev = c["dsp_spatial"]
        # the latency design shares multipliers: no more than one per operation, at least the widest one
        assert mul_dsps(W, W) <= c["dsp"] <= c["dsp_spatial"]
    # fully spatial, recounted from the IR: variable products W×W, constant ones by the constant's
    # bits, constants that quantise to zero or to ±2^k none; plus the CORDICs' reduction products
    nt = H.numeric_type(fixed=(32, 16))
    want = 0
    for n in kern.live_nodes():
        if n.op != "mul":
            continue
        const = [a for a in n.args if a.op == "const"]
        if not const:
            want += 4
            continue
        raw = quantise(const[0].value, 32, 16)
        if raw and abs(raw) & (abs(raw) - 1):
            want += mul_dsps(32, significant_bits(raw))
    cord = H.cordic(32, 16)
    want += sum(mul_dsps(w, significant_bits(k)) for w, k in cord.const_products()) * H.hls_cost(kern, nt)["sincos_units"]
    assert H.hls_cost(kern, nt, ii=1)["dsp"] == want
    c32 = H.hls_cost(kern, nt)
    assert H.hls_cost(kern, nt, ii=4)["dsp"] == math.ceil(c32["dsp_spatial"] / 4)
    dbl, flt = H.hls_cost(kern, H.numeric_type("float64")), H.hls_cost(kern, H.numeric_type("float32"))
    assert dbl["dsp_spatial"] > flt["dsp_spatial"] > c32["dsp_spatial"]


def test_constants_quantised_to_zero_are_folded():
    """iiwa14's model has constants of a few 1e-6 that Q16.16 rounds to 0: no multiplier is
    counted for them (the tool folds them); at 24 fractional bits they are real multiplies."""
    m = load_case(*_case("iiwa14-fixed"))
    kern = trace(m, "rnea")
    tiny = sum(1 for n in kern.live_nodes() if n.op == "mul" and any(a.op == "const" and abs(a.value) * 2 ** 16 < 0.5
                                                                    for a in n.args))
    c16 = H.hls_cost(kern, H.numeric_type(fixed=(32, 16)))
    c24 = H.hls_cost(kern, H.numeric_type(fixed=(48, 24)))
    assert tiny > 0 and c16["zero_mul"] == tiny
    assert c24["zero_mul"] < tiny


def test_rounding_and_saturation_logic_is_counted():
    kern = trace(load_case(*_case("iiwa14-fixed")), "rnea")
    full = H.hls_cost(kern, H.numeric_type(fixed=(32, 16)))
    bare = H.hls_cost(kern, H.numeric_type(fixed=(32, 16), rounding="AP_TRN", overflow="AP_WRAP"))
    assert bare["lut"] < full["lut"] and full["ff"] > 0


def _chain(kern, op):
    """Most ``op`` nodes on one path through the DAG (explicit recursion, independent of the model)."""
    memo = {}
    for n in kern.live_nodes():
        memo[n.id] = (n.op == op) + max((memo[a.id] for a in n.args), default=0)
    return max(memo.values())


def test_latency_model():
    m = load_case(*_case("iiwa14-fixed"))
    kern = trace(m, "rnea")
    nt = H.numeric_type(fixed=(32, 16))
    slow, fast = H.hls_cost(kern, nt, clock_mhz=50), H.hls_cost(kern, nt, clock_mhz=400)
    assert fast["latency_cycles"] > slow["latency_cycles"]          # more cycles at a faster clock
    assert fast["latency_us"] < slow["latency_us"]                  # but less time
    # at a slow clock every multiply takes one cycle and adder chains share cycles: the latency is
    # at most the critical path in ops plus the CORDIC (one op of the path, several cycles)
    assert slow["latency_cycles"] <= kern.op_counts()["depth"] + slow["sincos_cycles"]
    assert H.hls_cost(kern, H.numeric_type("float64"), clock_mhz=400)["latency_cycles"] > fast["latency_cycles"]
    # a sequential divider: W + F + 3 cycles each, so aba takes at least that per division on its
    # longest chain of divisions
    aba = trace(m, "aba")
    c = H.hls_cost(aba, nt)
    assert c["div_cycles"] == 32 + 16 + 3
    assert _chain(aba, "div") >= 2 and c["latency_cycles"] >= _chain(aba, "div") * c["div_cycles"]
    # the CORDIC: N + 3 chained adder stages after its two products, at least N/3 cycles at 250 MHz
    assert c["sincos_cycles"] >= H.cordic(32, 16).N // 3
    # ∇FD's dense products: pipelined, one element per cycle each, unless the whole function is
    fd = trace(m, "aba_derivatives")
    lat, pipe = H.hls_cost(fd, nt), H.hls_cost(fd, nt, ii=1)
    elems = sum(mm.n * mm.m for mm in fd.post)
    assert lat["epilogue_cycles"] >= elems and pipe["epilogue_cycles"] < elems
    with pytest.raises(RbdgenError, match="positive frequency"):
        H.hls_cost(kern, nt, clock_mhz=0)


def test_numeric_type_checks():
    assert H.numeric_type(fixed="32,16").ctype == "ap_fixed<32, 16, AP_RND_CONV, AP_SAT>"
    assert H.numeric_type("float32").ctype == "float"
    for bad, msg in (("33,40", "integer bits"), ("70,3", "between 2 and 64"), ("a,b", "two integers"),
                     ("32", "W,I"), ("16,0", "integer bits")):
        with pytest.raises(RbdgenError, match=msg):
            H.numeric_type(fixed=bad)
    with pytest.raises(RbdgenError, match="rounding"):
        H.numeric_type(fixed=(32, 16), rounding="AP_NEAREST")
    with pytest.raises(RbdgenError, match="HLS dtype"):
        H.numeric_type("int8")


# ---- command line -----------------------------------------------------------------------------

def test_cli_generate_hls(tmp_path, capsys):
    urdf = rbdgen.robots.path("iiwa14")
    rc, out, err = run_main(capsys, "generate", urdf, "--target", "hls", "--fixed", "32,16", "--kernels",
                            "rnea,crba", "--ii", "1", "--clock-mhz", "300", "--part", "xczu9eg-ffvb1156-2-e",
                            "--out", tmp_path, "-q")
    assert rc == 0, err
    d = tmp_path / "iiwa14"
    names = sorted(os.listdir(d))
    ops = "rbd_csim_fx32_16_rnd_conv_sat.cpp"
    assert names == sorted(["manifest.json", "rbd_iiwa14.h", "rbd_iiwa14_crba.cpp", "rbd_iiwa14_csim.cpp",
                            "rbd_iiwa14_rnea.cpp", "rbd_iiwa14_tb.cpp", "run_hls.tcl", "hls_project.tcl", "hls_rnea.tcl",
                            "hls_crba.tcl", ops])
    # the fast C simulation's operators depend on the format alone: another robot's design, other
    # kernels and options, has the same file (so one compiled copy serves every build of the format)
    chain = tmp_path / "chain2.urdf"
    chain.write_text(rbdgen.robots.chain_urdf(2, seed=4))
    other = H.generate_hls(rbdgen.load_urdf(chain), H.numeric_type(fixed=(32, 16)), ("gravity",), dsp_budget=50)
    assert other.csim_ops == ops and other.files[ops] == (d / ops).read_text()
    assert H.generate_hls(rbdgen.load_urdf(chain), H.numeric_type(fixed=(32, 17)), ("gravity",)).csim_ops != ops
    assert "ap_fixed<32, 16" in out and "vitis-run --mode hls --tcl run_hls.tcl" in out
    assert "#pragma HLS PIPELINE II=1" in (d / "rbd_iiwa14_rnea.cpp").read_text()
    assert "set ::rbd_part {xczu9eg-ffvb1156-2-e}" in (d / "hls_project.tcl").read_text()
    import json
    man = json.loads((d / "manifest.json").read_text())
    assert man["options"]["target_options"]["fixed"] == [32, 16] and "--fixed 32,16" in man["regenerate"]
    assert man["target"]["type"] == "ap_fixed<32, 16, AP_RND_CONV, AP_SAT>" and man["target"]["tcl"] == "run_hls.tcl"
    first = {n: (d / n).read_bytes() for n in names}
    rc, _, _ = run_main(capsys, "generate", urdf, "--target", "hls", "--fixed", "32,16", "--kernels", "rnea,crba",
                        "--ii", "1", "--clock-mhz", "300", "--part", "xczu9eg-ffvb1156-2-e", "--out", tmp_path, "-q")
    assert rc == 0 and {n: (d / n).read_bytes() for n in names} == first   # same input, same bytes
    # the folder is not a Python package, but rbdgen C-simulates it through the same loader as build()
    from rbdgen.package import load_package

    k = load_package(d, opt="-O0")
    assert k.numtype.ctype.startswith("ap_fixed<32, 16") and k.kernels == ("rnea", "crba")
    m = rbdgen.load_urdf(urdf)
    q, v, a, _ = random_state(m, seed=3, n=4)
    assert kernel_err(k.rnea(q, v, a), ref.rnea(m, q, v, a)) <= registry.get("rnea").fixed_tol[(32, 16)]


@pytest.mark.parametrize("value,needle", [("40,48", "integer bits"), ("65,16", "between 2 and 64"),
                                          ("x,16", "two integers"), ("32", "W,I"), ("32,16,4", "W,I")])
def test_cli_bad_fixed(value, needle, tmp_path, capsys):
    rc, out, err = run_main(capsys, "generate", rbdgen.robots.path("iiwa14"), "--target", "hls",
                            "--fixed", value, "--out", tmp_path)
    assert rc == 2
    assert_one_error_line(err, out, "--fixed", needle)
    assert not (tmp_path / "iiwa14").exists()


def test_cli_hls_options_need_target_hls(tmp_path, capsys):
    rc, out, err = run_main(capsys, "generate", rbdgen.robots.path("iiwa14"), "--fixed", "32,16", "--out", tmp_path)
    assert rc == 2
    assert_one_error_line(err, out, "--fixed", "--target hls")
    rc, out, err = run_main(capsys, "inspect", rbdgen.robots.path("iiwa14"), "--cost", "--clock-mhz", "-5",
                            "--target", "hls")
    assert rc == 2
    assert_one_error_line(err, out, "--clock-mhz")


def test_cli_inspect_cost_hls(capsys):
    urdf = rbdgen.robots.path("iiwa14")
    rc, out, err = run_main(capsys, "inspect", urdf, "--frames", "iiwa_link_ee", "--cost", "--target", "hls",
                            "--fixed", "32,16", "--clock-mhz", "200", "-q")
    assert rc == 0, err
    assert "ap_fixed<32,16>" in out and "200 MHz" in out and "DSP48E2 per variable multiplier: 4" in out
    m = rbdgen.load_urdf(urdf).with_frames(["iiwa_link_ee"])
    lines = [ln.split() for ln in out.splitlines() if ln.split()]
    header = [ln for ln in lines if ln[0] == "kernel"][-1]  # the HLS table follows the op counts
    rows = {ln[0]: dict(zip(header, ln)) for ln in lines if ln[0] in KERNELS}
    assert set(rows) == set(KERNELS)
    oc = trace(m, "rnea").op_counts()
    r = rows["rnea"]
    assert [r["mul"], r["add/sub"], r["div"], r["depth"]] == [str(oc["mul"]), str(oc["add"]), str(oc["div"]), str(oc["depth"])]
    assert int(r["sincos"]) == 6 and 0 < int(r["×const"]) < oc["mul"] and 0 < int(r["×0"]) < int(r["×const"])
    assert 0 < int(r["DSP"]) < int(r["DSP-spatial"]) < 4 * oc["mul"] and int(r["LUT"]) > 0 and int(r["FF"]) > 0


def test_build_dispatch():
    """rbdgen.build(target="hls") forwards the HLS options; the CPU target refuses them."""
    m = load_case(*_case("iiwa14-fixed"))
    with pytest.raises(TypeError, match="fixed"):
        rbdgen.build(m, target="cpu", fixed=(32, 16))
    with pytest.raises(RbdgenError, match="integer bits"):
        rbdgen.build(m, target="hls", fixed=(16, 20))
    with pytest.raises(RbdgenError, match="unknown target"):
        rbdgen.build(m, target="fpga")
