"""FPGA designs within a DSP budget (rbdgen/targets/hls/schedule.py): the list schedule, the
pragmas that hold the tool to it, and the C simulation that must not change.

Oracles, all independent of the scheduler: a forward as-soon-as-possible pass written here, and
the cost model's own schedule (``hls_cost.kernel_cost``) for "no budget"; the sum of latencies
for a single unit that is busy for each operation's whole latency; the schedule's dependencies
and per-cycle operator use recounted from its start times; the unbudgeted design's sources,
pragma lines and the budget's comments aside, for the budgeted one (so its C simulation is the
same program, bit for bit).
"""
from __future__ import annotations

import math
import re
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rbdgen
import rbdgen.robots
from rbdgen import registry
from rbdgen.targets.hls import emit as H
from rbdgen.targets.hls import schedule as HS
from rbdgen.targets.hls.cost import Model, kernel_cost
from rbdgen.errors import RbdgenError, RbdgenWarning
from rbdgen.targets.hls.csim import ap_types_dir

from conftest import ROBOT_CASES, assert_one_error_line, load_case, run_main

Q16 = H.numeric_type(fixed=(32, 16))
EPS = 1e-9


# ---- independent checks ------------------------------------------------------------------------

def asap_length(g: HS.OpGraph) -> float:
    """As soon as possible, no limits: registered operations on the next cycle boundary."""
    fin = []
    for i in range(len(g)):
        r = max((fin[p] for p in g.preds[i]), default=0.0)
        s = math.ceil(r - EPS) if g.lat[i] else r
        fin.append(s + (g.lat[i] or g.chain[i]))
    return max(fin, default=0.0)


def check_schedule(g: HS.OpGraph, sch: HS.Schedule, limits: dict) -> None:
    use: dict = {}
    for i in range(len(g)):
        s = sch.start[i]
        assert abs(sch.finish[i] - (s + (g.lat[i] or g.chain[i]))) < EPS
        for p in g.preds[i]:
            assert s >= sch.finish[p] - EPS, f"op {i} starts at {s} before its operand {p} is ready ({sch.finish[p]})"
        if g.lat[i]:
            assert abs(s - round(s)) < EPS, f"registered op {i} starts off a cycle boundary ({s})"
        c0 = math.floor(s + EPS)
        for c in range(c0, c0 + g.occ[i]):
            use[(g.cls[i], c)] = use.get((g.cls[i], c), 0) + 1
    for (cls, c), n in use.items():
        if limits.get(cls) is not None:
            assert n <= limits[cls], f"{n} {cls} operations in cycle {c}, budget {limits[cls]}"
    assert abs(sch.length - max(sch.finish, default=0.0)) < EPS


# ---- random graphs -----------------------------------------------------------------------------

UNITS = {  # class → (registered latency range, chained delay, occupancy: "lat" or 1)
    "mul": ((2, 3), 0.0, 1), "div": ((5, 12), 0.0, "lat"), "sincos": ((3, 6), 0.0, 1), "add": ((0, 0), 0.3, 1),
}


@st.composite
def graphs(draw, classes=tuple(UNITS), max_n=40):
    n = draw(st.integers(1, max_n))
    g = HS.OpGraph([], [], [], [], [])
    for i in range(n):
        cls = draw(st.sampled_from(classes))
        (lo, hi), chain, occ = UNITS[cls]
        lat = draw(st.integers(lo, hi))
        preds = sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=3)))) if i else []
        g.cls.append(cls)
        g.lat.append(lat)
        g.chain.append(chain if not lat else 0.0)
        g.occ.append(lat if occ == "lat" else 1)
        g.preds.append(preds)
    return g


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(graphs(), st.fixed_dictionaries({c: st.one_of(st.none(), st.integers(1, 3)) for c in UNITS}))
def test_random_graph_schedule_respects_dependencies_and_budgets(g, limits):
    sch = HS.list_schedule(g, limits)
    check_schedule(g, sch, limits)
    assert sch.length >= asap_length(g) - EPS  # no schedule beats the critical path


@SETTINGS
@given(graphs())
def test_random_graph_unlimited_is_the_critical_path(g):
    sch = HS.list_schedule(g, {})
    assert sch.length == pytest.approx(asap_length(g), abs=EPS)
    check_schedule(g, sch, {})


@SETTINGS
@given(graphs(classes=("mul", "div", "sincos")))
def test_random_graph_one_unit_busy_throughout_is_the_serial_sum(g):
    """One operator for everything, occupied for each operation's whole latency: the operations
    run one after another, whatever the order, so the length is the sum of the latencies."""
    serial = HS.OpGraph(["u"] * len(g), list(g.lat), list(g.chain), list(g.lat), list(g.preds))
    sch = HS.list_schedule(serial, {"u": 1})
    check_schedule(serial, sch, {"u": 1})
    assert sch.length == pytest.approx(sum(g.lat), abs=EPS)


@SETTINGS
@given(graphs())
def test_random_graph_one_unit_per_class_lies_between_the_busiest_class_and_the_serial_sum(g):
    lim = dict.fromkeys(UNITS, 1)
    sch = HS.list_schedule(g, lim)
    check_schedule(g, sch, lim)
    busiest = max(sum(g.occ[i] for i in range(len(g)) if g.cls[i] == c) for c in set(g.cls))
    assert busiest - 1 <= sch.length <= sum(max(g.lat[i], g.occ[i], 1) for i in range(len(g))) + EPS


def test_a_chain_takes_the_serial_sum_under_any_budget():
    g = HS.OpGraph(["mul", "div", "mul", "sincos", "div"], [3, 12, 3, 5, 12], [0.0] * 5, [1, 12, 1, 1, 12],
                   [[], [0], [1], [2], [3]])
    for lim in ({}, {"mul": 1, "div": 1, "sincos": 1}, {"div": 7}):
        assert HS.list_schedule(g, lim).length == 35


def test_priority_goes_to_the_critical_path():
    """Two ready multiplies, one multiplier: the one that heads the longer path goes first."""
    g = HS.OpGraph(["mul", "mul", "div"], [3, 3, 12], [0.0] * 3, [1, 1, 12], [[], [], [1]])
    sch = HS.list_schedule(g, {"mul": 1})
    assert sch.start[1] == 0 and sch.start[0] == 1
    assert sch.length == 15


def test_bad_budgets_are_refused():
    g = HS.OpGraph(["mul"], [3], [0.0], [1], [[]])
    with pytest.raises(RbdgenError, match="positive number"):
        HS.list_schedule(g, {"mul": 0})


# ---- every robot's kernels -----------------------------------------------------------------------

@pytest.mark.parametrize("robot,floating", ROBOT_CASES)
def test_robot_kernels_schedule(robot, floating):
    """rnea and aba of every robot case (∇FD on the iiwa and quadruped below): no budget gives the
    cost model's latency; a budget is respected and its dependencies hold."""
    model = load_case(robot, floating)
    for name in ("rnea", "aba"):
        kern = registry.trace(model, name)
        m = Model(Q16, 250.0)
        free = kernel_cost(kern, Q16, 250.0)
        g, _ = HS.kernel_graph(kern, m, shared=False)
        sch = HS.list_schedule(g, {})
        check_schedule(g, sch, {})
        assert sch.cycles + free["epilogue_cycles"] == free["latency_cycles"]
        sg, unit = HS.kernel_graph(kern, m, shared=True)
        limits = {"mul": 5, "sincos": 1, "div": 1, "add": 16}
        bs = HS.list_schedule(sg, limits)
        check_schedule(sg, bs, limits)
        assert bs.length >= asap_length(sg) - EPS


@pytest.mark.parametrize("robot,floating", [("iiwa14", False), ("quadruped", True)])
def test_budgeted_designs_fit_and_trade_dsps_for_cycles(robot, floating):
    model = rbdgen.load_urdf(rbdgen.robots.path(robot), floating_base=floating)
    for name in ("rnea", "aba", "aba_derivatives"):
        kern = registry.trace(model, name)
        free = kernel_cost(kern, Q16, 250.0)
        graph = HS.kernel_graph(kern, Model(Q16, 250.0), shared=True)
        lo = HS.min_dsp(kern, Q16)
        prev = None
        for budget in (lo, 64, 256, 100000):
            bc = HS.budget_cost(kern, Q16, 250.0, budget, graph=graph)
            assert bc["dsp"] <= budget
            assert bc["mul_units"] * bc["mul_dsp"] + bc["sincos_units"] * bc["sincos_dsp"] == bc["dsp"]
            assert bc["latency_cycles"] >= 1 and bc["ii"] >= 1
            if prev is not None:
                assert bc["latency_cycles"] <= prev, f"{name}: more DSPs, longer schedule at {budget}"
            prev = bc["latency_cycles"]
        # one multiplier: one multiply per cycle at most, so at least as many cycles as multiplies
        small = HS.budget_cost(kern, Q16, 250.0, lo, graph=graph)
        n_mul = graph[0].cls.count("mul") + sum(mm.n * mm.m * mm.k for mm in kern.post)
        assert small["mul_units"] == 1 and small["latency_cycles"] >= n_mul and small["ii"] >= n_mul
        assert free["latency_cycles"] <= small["latency_cycles"]
        with pytest.raises(RbdgenError, match="needs at least"):
            HS.budget_cost(kern, Q16, 250.0, lo - 1, graph=graph)


def test_budget_needs_fixed_point():
    kern = registry.trace(rbdgen.load_urdf(rbdgen.robots.path("iiwa14")), "rnea")
    with pytest.raises(RbdgenError, match="ap_fixed"):
        HS.budget_cost(kern, H.numeric_type("float32"), 250.0, 100)


# ---- generated code ------------------------------------------------------------------------------

def _strip_budget(text: str) -> str:
    """The source without what a budget adds: pragma lines and the budget's comment lines."""
    keep = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#pragma HLS") or s.startswith("// DSP budget") or s.startswith("// list schedule"):
            continue
        keep.append(line)
    return "\n".join(keep)


def test_budget_changes_pragmas_only():
    """A DSP budget adds ``#pragma HLS`` lines and two comment lines, nothing else, in every C++
    file. A C++ compiler ignores those pragmas (``-Wno-unknown-pragmas``), so the budgeted
    design's C simulation, top functions included, is the unbudgeted one's program: the same
    bits. (This replaced a test that compiled both designs' top functions and compared their
    outputs on six states, 49 s of make test for what this equality already decides.)"""
    model = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    ks = ("rnea", "aba", "minv", "aba_derivatives")
    free = H.generate_hls(model, Q16, ks)
    tight = H.generate_hls(model, Q16, ks, dsp_budget=40)
    assert set(free.files) == set(tight.files)
    for fn in free.files:
        if fn.endswith((".cpp", ".h")):
            assert _strip_budget(free.files[fn]) == _strip_budget(tight.files[fn]), fn
    for k in ks:
        src = tight.files[f"{tight.prefix}_{k}.cpp"]
        bc = HS.budget_cost(registry.trace(model, k), Q16, H.DEFAULT_CLOCK_MHZ, 40)
        assert f"#pragma HLS ALLOCATION operation instances=mul limit={bc['mul_units']}" in src
        assert "#pragma HLS ALLOCATION function instances=rbd_sincos limit=" in src
        assert "ALLOCATION" not in free.files[f"{free.prefix}_{k}.cpp"]
    # the CORDIC is one shared, pipelined unit only in the budgeted design
    assert "#pragma HLS INLINE off" in tight.files[tight.header] and "INLINE off" not in free.files[free.header]
    # ∇FD's products on 9 multipliers (40 DSPs: 9 × 4 + one CORDIC): II = ⌈7/9⌉ = 1, one element per step
    assert "PIPELINE II=1" in tight.files[f"{tight.prefix}_aba_derivatives.cpp"]
    # generation is deterministic
    assert H.generate_hls(model, Q16, ks, dsp_budget=40).files == tight.files


def test_small_budget_stretches_the_products_loop_and_large_one_unrolls_it():
    model = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    src = lambda b: H.generate_hls(model, Q16, ("aba_derivatives",), dsp_budget=b).files["rbd_iiwa14_aba_derivatives.cpp"]  # noqa: E731
    small = src(HS.min_dsp(registry.trace(model, "aba_derivatives"), Q16) + 8)  # 3 multipliers: k = 7 → II = 3
    assert "#pragma HLS PIPELINE II=3" in small and "ALLOCATION operation instances=mul limit=3" in small
    row = src(200)  # 49 multipliers: a row per step: the row loop is pipelined, the element loop unrolled
    rows = re.findall(r"for \(int i = 0; i < 7; \+\+i\) \{\n\s*#pragma HLS PIPELINE II=1\n\s*for \(int j = 0; j < 7; "
                      r"\+\+j\) \{\n\s*#pragma HLS UNROLL\n", row)
    assert len(rows) == 2
    # 499 multipliers: the whole product (7 rows) per step, the two products one after the other
    big = src(2000)
    rows = re.findall(r"for \(int i = 0; i < 7; \+\+i\) \{\n\s*#pragma HLS PIPELINE II=1\n\s*#pragma HLS UNROLL "
                      r"factor=7\n\s*for \(int j = 0; j < 7; \+\+j\) \{\n\s*#pragma HLS UNROLL\n", big)
    assert len(rows) == 2
    # 686 multipliers (a VCU118's 6 840 DSPs allow them): every element of both products at once,
    # every loop unrolled, nothing pipelined
    vcu = src(6840)
    rows = re.findall(r"for \(int i = 0; i < 7; \+\+i\) \{\n\s*#pragma HLS UNROLL\n\s*for \(int j = 0; j < 7; "
                      r"\+\+j\) \{\n\s*#pragma HLS UNROLL\n", vcu)
    assert len(rows) == 2 and "ALLOCATION operation instances=mul limit=686" in vcu


def test_budgeted_synthesis_path_compiles(tmp_path):
    model = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    gen = H.generate_hls(model, Q16, ("rnea", "aba"), dsp_budget=100)
    for fn, text in gen.files.items():
        (tmp_path / fn).write_text(text)
    stub = __import__("pathlib").Path(__file__).parent / "hls_stub"
    for src in gen.sources:
        unit = tmp_path / f"syn_{src}"
        unit.write_text(f'#include <ap_fixed.h>\n#define __SYNTHESIS__ 1\n#include "{src}"\n')
        r = subprocess.run(["g++", "-std=c++14", "-fsyntax-only", "-Wall", "-Werror", "-Wno-unknown-pragmas",
                            "-isystem", str(ap_types_dir()), "-I", str(stub), unit.name], cwd=tmp_path,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]


# ---- parts and the command line ---------------------------------------------------------------------

def test_part_presets():
    assert H.resolve_part("zu3eg", None, Q16) == ("xczu3eg-sbva484-1-e", 360)
    assert H.resolve_part("VCU118", None, Q16) == ("xcvu9p-flga2104-2L-e", 6840)
    assert H.resolve_part("zcu102", 1000, Q16) == ("xczu9eg-ffvb1156-2-e", 1000)
    assert H.resolve_part("u250", None, H.numeric_type("float32")) == ("xcu250-figd2104-2L-e", None)
    assert H.resolve_part("zu3eg", None, Q16, ii=4) == ("xczu3eg-sbva484-1-e", None)
    assert H.resolve_part("xc7z020-clg400-1", None, Q16) == ("xc7z020-clg400-1", None)
    with pytest.raises(RbdgenError, match="more than the 360 DSP"):
        H.resolve_part("zu3eg", 400, Q16)
    with pytest.raises(RbdgenError, match="choose one"):
        H.resolve_part("zu3eg", 100, Q16, ii=2)


def test_cli_generate_with_a_part_preset(tmp_path, capsys):
    rc, out, err = run_main(capsys, "generate", rbdgen.robots.path("iiwa14"), "--target", "hls", "--fixed", "32,16",
                            "--kernels", "rnea", "--part", "zu3eg", "--out", tmp_path, "--name", "z", "--quiet")
    assert rc == 0, err
    src = (tmp_path / "z" / "rbd_z_rnea.cpp").read_text()
    assert "// DSP budget 360:" in src and "ALLOCATION operation instances=mul" in src
    assert "xczu3eg-sbva484-1-e" in (tmp_path / "z" / "run_hls.tcl").read_text() + \
        (tmp_path / "z" / "hls_project.tcl").read_text()


def test_a_preset_warns_when_the_shared_design_outgrows_its_luts():
    """The floating quadruped's ∇FD within a ZU3EG's 360 DSPs: ~172 k LUTs of operand multiplexers
    (model) > its 70 560 (the iiwa's, ~66 k since M⁻¹ comes from M's factorisation, now fits)."""
    model = rbdgen.load_urdf(rbdgen.robots.path("quadruped"), floating_base=True)
    with pytest.warns(RbdgenWarning, match="70560 of --part zu3eg"):
        H.generate_hls(model, Q16, ("aba_derivatives",), part="zu3eg")


@pytest.mark.parametrize("args,needles", [
    (("--fixed", "32,16", "--dsp-budget", "0"), ("--dsp-budget", "positive")),
    (("--fixed", "32,16", "--dsp-budget", "3"), ("needs at least", "rnea")),
    (("--dtype", "float64", "--dsp-budget", "100"), ("ap_fixed",)),
    (("--fixed", "32,16", "--part", "zu3eg", "--dsp-budget", "500"), ("360",)),
    (("--fixed", "32,16", "--ii", "2", "--dsp-budget", "100"), ("choose one",)),
])
def test_cli_bad_budgets(tmp_path, capsys, args, needles):
    rc, out, err = run_main(capsys, "generate", rbdgen.robots.path("iiwa14"), "--target", "hls", "--kernels", "rnea",
                            *args, "--out", tmp_path, "--quiet")
    assert rc == 2
    assert_one_error_line(err, out, *needles)


def test_cli_inspect_cost_with_a_budget(capsys):
    rc, out, err = run_main(capsys, "inspect", rbdgen.robots.path("iiwa14"), "--cost", "--target", "hls", "--fixed",
                            "32,16", "--kernels", "rnea,aba", "--dsp-budget", "64", "--quiet")
    assert rc == 0, err
    assert "Within a DSP budget of 64 per kernel" in out
    model = rbdgen.load_urdf(rbdgen.robots.path("iiwa14"))
    for k in ("rnea", "aba"):
        bc = HS.budget_cost(registry.trace(model, k), Q16, 250.0, 64)
        row = [ln for ln in out.splitlines() if ln.startswith(k + " ") and f" {bc['latency_cycles']} " in ln]
        assert row, f"{k}: no row with {bc['latency_cycles']} cycles in\n{out}"
