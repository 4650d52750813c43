"""The Verilog target (issue 48, first part), simulated by Verilator.

Oracles, each independent of the Verilog printer:

* the HLS target's C simulation (g++ on Xilinx's ap_types): the same IR on ``ap_fixed``; the
  modules must give its outputs bit for bit, batch and single state;
* the NumPy reference, within the bound measured for the format (as ``rbdgen validate``);
* exact integer arithmetic in Python for the datapath's operations on chosen operands (ties of
  the rounding, both saturations): a synthetic kernel, so that what random states rarely hit is
  hit;
* the HLS cost model's schedule: ``done`` rises in its latency, and the outputs, sampled every
  cycle, are final no earlier than that in at least one state (the registers are where the
  schedule puts them) and never later.

verilator comes from the Makefile (``make rtl-tools``: apt-get); a missing one fails these tests
with the message saying so, it does not skip them.
"""
from __future__ import annotations

import ctypes
import math
import shutil
import subprocess
from fractions import Fraction

import numpy as np
import pytest

import rbdgen
import rbdgen.robots
from rbdgen import registry
from rbdgen.codegen.sources import Sources
from rbdgen.errors import RbdgenError
from rbdgen.ir.graph import Array, Graph, Kernel, MatMul
from rbdgen.targets.hls import exact
from rbdgen.targets.hls.cost import kernel_cost, quantise
from rbdgen.targets.hls.schedule import budget_cost
from rbdgen.targets.hls.emit import DEFAULT_CLOCK_MHZ, measured_bound, numeric_type
from rbdgen.targets.verilog import emit as vemit
from rbdgen.targets.verilog import sim

from conftest import ROBOT_CASES, assert_one_error_line, load_case, random_state, run_main

# every operation unshared: products, sums, CORDIC, divider. ∇FD (its datapath and dense products)
# runs within a DSP budget, the design a real part holds (test_a_dsp_budget_shares_the_operators);
# unshared, its products are the synthetic kernel's test (unshared ∇FD, 12 010 DSPs, was checked
# by hand: bit for bit on 23 states, 660 cycles measured = the cost model's; 45 s more of CI)
KERNELS = ("rnea", "forward_kinematics", "aba")

# one pytest-xdist worker for the module (make test runs --dist loadgroup): the `built` fixture
# (Verilator builds of three kernels, ~70 s) is then built once, not once per worker
pytestmark = pytest.mark.xdist_group("verilog")
FIXED = (32, 16)


def _iiwa():
    case = [c for c in ROBOT_CASES if c.id == "iiwa14-fixed"][0]
    return load_case(*case.values)


@pytest.fixture(scope="session")  # session: built once per worker even when other modules' tests run in between
def built():
    m = _iiwa()
    return m, rbdgen.build(m, target="verilog", fixed=FIXED, kernels=KERNELS), \
        rbdgen.build(m, target="hls", fixed=FIXED, kernels=KERNELS + ("aba_derivatives",))


def _args(k, q, v, a):
    return {"rnea": (q, v, a), "forward_kinematics": (q,), "aba": (q, v, a), "aba_derivatives": (q, v, a)}[k]


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


def test_modules_match_the_hls_c_simulation_bit_for_bit(built):
    m, kv, kh = built
    n = 23  # no multiple of anything
    q, v, a, _ = random_state(m, seed=48, n=n)
    nt = numeric_type("float64", FIXED)
    for k in KERNELS:
        args = _args(k, q, v, a)
        got, want = _tuple(getattr(kv, k)(*args)), _tuple(getattr(kh, k)(*args))
        one = _tuple(getattr(kv, k)(*(x[5] for x in args)))
        refs = registry.reference(m, k, {"q": q, "v": v, "a": a, "tau": a})
        assert len(got) == len(want) == len(one) == len(refs), k
        for o, (g, w, g1, ref) in enumerate(zip(got, want, one, refs)):
            np.testing.assert_array_equal(g, w, err_msg=f"{k} output {o}: Verilator vs HLS C simulation")
            np.testing.assert_array_equal(g1, w[5], err_msg=f"{k} output {o}: one state")
            err = np.max(np.abs(g - ref)) / np.max(np.abs(ref))
            assert err <= measured_bound(registry.get(k), nt), f"{k} output {o}: {err:.3g} against the reference"


def test_latency_is_the_schedules_measured_cycle_by_cycle(built):
    """done rises in the cost model's latency (inspect --cost --target verilog, unbudgeted), and
    the outputs sampled in every cycle become final then: never later, and in the slowest state
    not earlier (a register missing on the critical path would make them final sooner). aba's
    last operation multiplies by 1/D: with 16 fractional bits its last change is often below a
    quantum, so its outputs can be final a few cycles early (over 300 states iiwa aba 503 of 504,
    minv 496 of 497; with 40 fractional bits minv measured 814 of 814): only "never later" there."""
    m, kv, _ = built
    q, v, a, _ = random_state(m, seed=7, n=12)
    nt = numeric_type("float64", FIXED)
    for k in KERNELS:
        getattr(kv, k)(*_args(k, q, v, a))
        c = kv.cycles(k)
        model_latency = kernel_cost(registry.trace(m, k), nt, DEFAULT_CLOCK_MHZ, divider="narrow")["latency_cycles"]
        assert c["schedule"] == model_latency, k
        assert c["done"] == model_latency, (k, c)
        if k == "aba":
            assert model_latency - 20 <= c["outputs_final"] <= model_latency, (k, c)
        else:
            assert c["outputs_final"] == model_latency, (k, c)


def test_inspect_cost_prints_the_schedules_the_modules_have(built, capsys):
    """``inspect --cost --target verilog`` gives each built module's latency and this target's
    divider (18 cycles at 32,16 and 250 MHz: 3 + the 30 quotient bits after the first, two a
    cycle); ``--target hls`` keeps the HLS tool's divider (W + F + 3 = 51), so aba, whose
    divisions are sequential (one per joint whose D_i is not a constant: five of the seven, the
    wrist's rotation leaving its links' inertias unchanged), is 33 cycles a division shorter
    here and rnea, which divides nothing, the same."""
    _, kv, _ = built

    def table(target):
        rc, out, err = run_main(capsys, "inspect", rbdgen.robots.path("iiwa14"), "--cost", "--target", target,
                                "--fixed", "32,16", "--kernels", ",".join(KERNELS), "-q")
        assert rc == 0, err
        rows = {}
        for line in out.splitlines():
            cells = line.split()
            if cells and cells[0] in KERNELS and cells[-1] == "ns":
                rows[cells[0]] = int(cells[-3])  # ... cycles, latency "N ns"
        return out, rows

    out_v, v = table("verilog")
    out_h, h = table("hls")
    assert "a divider takes 18 cycles" in out_v and "a divider takes 51 cycles" in out_h
    assert v == kv.latency, (v, kv.latency)
    assert v["rnea"] == h["rnea"] and v["forward_kinematics"] == h["forward_kinematics"]
    divisions = registry.trace(rbdgen.load_urdf(rbdgen.robots.path("iiwa14")), "aba").op_counts()["div"]
    assert divisions > 0 and h["aba"] - v["aba"] == divisions * (51 - 18), (divisions, h, v)
    # one format per table: --fixed auto (a format per kernel) is refused before anything is sampled
    rc, out, err = run_main(capsys, "inspect", rbdgen.robots.path("iiwa14"), "--cost", "--target", "verilog",
                            "--fixed", "auto", "--kernels", "rnea", "-q")
    assert rc == 2
    assert_one_error_line(err, out, "--fixed W,I")


def _synthetic_kernel():
    """y = [x0·x1, x2·x3, x0 + x1, x2 − x3, −x0, x1·x2 + x3, x0 / x1, x2 / x3]: every operation of
    the datapath but sine and cosine (which the HLS comparison covers)."""
    g = Graph()
    x = [g.input("x", i) for i in range(4)]
    ys = [x[0] * x[1], x[2] * x[3], x[0] + x[1], x[2] - x[3], -x[0], x[1] * x[2] + x[3], x[0] / x[1], x[2] / x[3]]
    return Kernel("ops", g, [Array("x", (4,))], [(Array("y", (len(ys),)), ys)], doc="datapath operations")


def _exact(W, F, raw):
    """The expected raw outputs of the synthetic kernel: exact results, rounded to nearest with
    ties to even at the last fractional bit, saturated to W bits."""
    hi, lo = (1 << (W - 1)) - 1, -(1 << (W - 1))

    def q(v: Fraction) -> int:
        s = v * 2 ** F
        fl = math.floor(s)
        fr = s - fl
        r = fl + (1 if fr > Fraction(1, 2) or (fr == Fraction(1, 2) and fl % 2) else 0)
        return min(hi, max(lo, r))

    def div(a: int, b: int) -> int:  # rbd_div: (A << F) / B truncated toward zero; b = 0: a's extreme
        if b == 0:
            return lo if a < 0 else hi
        n, d = a << F, b
        t = abs(n) // abs(d)
        return min(hi, max(lo, t if (n < 0) == (d < 0) else -t))

    x = [Fraction(r, 2 ** F) for r in raw]
    p12 = Fraction(q(x[1] * x[2]), 2 ** F)
    return [q(x[0] * x[1]), q(x[2] * x[3]), q(x[0] + x[1]), q(x[2] - x[3]), q(-x[0]), q(p12 + x[3]),
            div(raw[0], raw[1]), div(raw[2], raw[3])]


def _synthetic_sources(kern, W, I, budget=None, ii=None):  # noqa: E741
    """The module and Sources of one synthetic kernel at ap_fixed<W, I> (rounding to nearest,
    saturating): unshared, within ``budget`` DSPs, or pipelined (``ii=1``)."""
    nt = numeric_type("float64", (W, I))
    em = vemit._Emitter(nt, DEFAULT_CLOCK_MHZ)
    mod = em.kernel(kern, "rbd_ops", "synthetic", budget, ii)
    files = {f"{mod.name}.v": mod.text, "rbd_ops_sincos.v": "\n".join(em.cordic_module("rbd_ops")),
             "rbd_ops_div.v": "\n".join(em.divider_module("rbd_ops")),
             "rbd_ops_divp.v": "\n".join(em.divider_pipelined_module("rbd_ops"))}
    entry = {"doc": kern.doc, "inputs": [{"name": a.name, "size": a.size} for a in kern.inputs],
             "outputs": [{"name": a.name, "shape": list(a.shape)} for a in kern.all_outputs],
             "ops": {"mul": 3, "add": 3, "div": 2, "sincos": 0, "total": 8}, "module": mod.name,
             "latency_cycles": mod.latency, **({"ii": ii} if ii else {})}
    return mod, Sources("verilog", "rbd_ops", files, {kern.name: entry},
                        {"numtype": {"kind": "fixed", "W": W, "I": I, "rounding": "AP_RND_CONV", "overflow": "AP_SAT"},
                         "units": ["rbd_ops_sincos.v", "rbd_ops_div.v", "rbd_ops_divp.v"]}, (f"ap_fixed<{W},{I}>",))


def _run_exact(src, W, F, cases):
    """The synthetic kernel's module simulated on ``cases`` (rows of four raw operands, one state
    each), its outputs equal to exact integer arithmetic (:func:`_exact`); returns the harness's
    ``cycles`` function for the run."""
    lib = ctypes.CDLL(str(sim.build_verilog(src)))
    run, cycles = lib.rbd_ops_ops_f64_batch, lib.rbd_ops_ops_f64_cycles
    run.argtypes, run.restype = [ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p], None
    cycles.argtypes, cycles.restype = [ctypes.c_int], ctypes.c_long
    raw = np.array(cases, dtype=np.int64)
    xs = np.ascontiguousarray(np.ldexp(raw.astype(float), -F))
    got = np.zeros((len(cases), 8))
    run(len(cases), xs.ctypes.data, got.ctypes.data)
    want = np.array([_exact(W, F, [int(r) for r in row]) for row in cases], dtype=np.int64)
    np.testing.assert_array_equal(np.ldexp(got, F).astype(np.int64), want)
    return cycles


def _division_edges(W, F):
    """Rows of the synthetic kernel (x0 / x1 and x2 / x3 among its outputs) at the divider's
    edges: quotients of magnitude 2^(W-1) − 1, 2^(W-1) and 2^(W-1) + 1 of both signs (the largest
    that fits, the most negative value, exact or saturated, and the first that saturates) from
    divisors that are and are not powers of two, the extremes of the format divided by each other
    and by the smallest divisors, and 40 seeded random divisions whose magnitudes spread over
    the whole range (so their quotients do too). The Verilog divider divides out only the W − 1
    bits below the saturation test (docs/verilog.md): these are where that test decides."""
    hi, lo, one = (1 << (W - 1)) - 1, -(1 << (W - 1)), 1 << F
    rows = [(lo, one, lo, -one), (hi, one, -hi, one), (lo, lo, hi, lo), (lo, -1, hi, 1), (1, hi, -1, lo),
            (one // 2, 1, -(one // 2), 1), (one // 2 - 1, 2, -(one // 2 - 1), -2)]
    for target in ((1 << (W - 1)) - 1, 1 << (W - 1), (1 << (W - 1)) + 1):
        found = [one] if target <= hi else []  # x / 1.0 = x
        for b in range(3, one):  # and up to two small divisors: |a << F| // b == target
            a = -(-target * b >> F)
            if a <= hi and (a << F) // b == target and len(found) < 3:
                found.append(b)
        # (2^(W-1) − 1 needs b ≥ 2^F: only x / 1.0 reaches it)
        assert len(found) >= (1 if target <= hi else 2), target
        for b in found:
            a = -(-target * b >> F)
            rows += [(a, b, -a, b), (a, -b, -a, -b)]
    rng = np.random.default_rng(48)
    for _ in range(20):
        a, b, c, d = (int(x) for x in np.round(np.exp(rng.uniform(0, math.log(hi), 4)) * rng.choice([-1, 1], 4)))
        rows.append((a, b, c, d))
    return rows


@pytest.mark.parametrize("budget,ii", [(None, None), (1, None), (None, 1)],
                         ids=["unshared", "one-multiplier", "pipelined"])
def test_datapath_operations_round_ties_to_even_and_saturate(budget, ii):
    """The synthetic kernel on operands chosen to hit the rounding's ties (both parities, both
    signs), values just off a tie, both saturations, and the divider's cases (quotients truncated
    toward zero of either sign, overflowing ones, zero divisors of a negative, zero and positive
    dividend), against exact integer arithmetic; unshared, within one DSP (its three products,
    two of them ready in cycle 0, on one multiplier), and pipelined (a state every cycle, the
    dividers pipelined: the cases on consecutive cycles)."""
    W, I = 16, 8  # noqa: E741
    F = W - I
    mod, src = _synthetic_sources(_synthetic_kernel(), W, I, budget, ii)
    if budget:
        assert mod.ops["mul"] == 1 and mod.text.count("_a * mu") == 1, "one shared multiplier"
    half = 1 << (F - 1)
    cases = [
        (3 * 16, half, 0, 0),          # 0.1875 · 0.5: ... exact
        (1, half, 3, half),            # 2^-8 · 2^-1 = half a quantum: a tie, rounds to 0 (even)
        (3, half, 1, 3 * half),        # 3 · 2^-9: 1.5 quanta, a tie, rounds to 2
        (-1, half, -3, half),          # negative ties: −0.5 → 0, −1.5 → −2
        (5, 3 * half // 2, 7, 3),      # just off ties
        (127 << F >> 4, 127 << F >> 4, 127 << F >> 4, -(127 << F >> 4)),  # 7.9² saturates high and low
        ((1 << (W - 1)) - 1, (1 << (W - 1)) - 1, -(1 << (W - 1)), (1 << (W - 1)) - 1),  # sums past both ends
        (-(1 << (W - 1)), 2, 3, 4),    # −(−128) saturates
        (-7, 2, 7, -2),                # −7/2 and 7/−2 in raw steps: truncated toward zero
        (100 << F, 1, -(100 << F), 3),  # 100 / 2^-8 overflows high; −100 / (3·2^-8) low
        (-5, 0, 0, 0),                 # zero divisors: a < 0 → min, a = 0 → max
        (5, 0, 1, 1 << F),             # a > 0 → max; x / 1 = x
        (1, 3, -1, 3),                 # tiny quotients
    ] + _division_edges(W, F)
    cycles = _run_exact(src, W, F, cases)
    assert cycles(0) == mod.latency
    if ii:
        assert cycles(1) == len(cases), "one state a cycle"
    if budget:
        assert mod.latency == budget_cost(_synthetic_kernel(), numeric_type("float64", (W, I)), DEFAULT_CLOCK_MHZ,
                                          budget, divider="narrow")["latency_cycles"]


@pytest.mark.parametrize("ii", [None, 1], ids=["sequential", "pipelined"])
def test_divider_ending_in_a_one_bit_step(ii):
    """At ap_fixed<17,9> the divider brings down 16 quotient bits: the first, seven steps of two
    and a last step of one (at 16,8, the other tests' format, every step after the first is of
    two). The division edges against exact integers, sequential and pipelined, and the latency
    the cost model gives (3 + ⌈15 / 2⌉ = 11 cycles for each divider)."""
    W, I = 17, 9  # noqa: E741
    F = W - I
    nt = numeric_type("float64", (W, I))
    em = vemit._Emitter(nt, DEFAULT_CLOCK_MHZ)
    assert em._div_steps() == [2] * 7 + [1] and em.model.div().cycles == 11
    mod, src = _synthetic_sources(_synthetic_kernel(), W, I, None, ii)
    cycles = _run_exact(src, W, F, _division_edges(W, F) + [(-5, 0, 0, 0), (5, 0, 1, 1 << F)])
    assert cycles(0) == mod.latency == kernel_cost(_synthetic_kernel(), nt, DEFAULT_CLOCK_MHZ, ii=ii,
                                                   divider="narrow")["latency_cycles"]


# the products' plans (schedule.epilogue_plan: II, elements per step) at ap_fixed<16,8>, one DSP a
# multiplier: unshared (1, 1) on 3 multipliers of their own; 2 DSPs: 2 multipliers, 3 products an
# element, II = 2 (the first product waits a cycle for the second); 6 DSPs: 2 elements a step (a
# row); 12: the whole product (two rows) in one step; two products (y = −A·B, z = −A·C): 12 DSPs,
# each product in one step, one after the other; 24, every element of both at once, side by side
@pytest.mark.parametrize("budget,plan,two", [(None, (1, 1), False), (2, (2, 1), False), (6, (1, 2), False),
                                             (12, (1, 4), False), (12, (1, 4), True), (24, (1, 8), True)],
                         ids=["unshared", "II2", "two-per-step", "rows", "two-products", "side-by-side"])
def test_products_accumulate_as_the_hls_loop_rounds_and_saturates(budget, plan, two):
    """∇FD's dense products (y = −A · B) on a synthetic 2×3 · 3×2 kernel, against exact integer
    arithmetic of the HLS target's loop: acc = 0, then acc −= A[i][l] · B[l][j], each step the
    exact difference quantised once (rounded at the last fractional bit, ties to even, then
    saturated). Operands hit ties after an even and an odd accumulator (where rounding the
    product first would differ), a sum that saturates and comes back (saturation at every step,
    not at the end), and both signs. Unshared and on the budget's shared multipliers, in each of
    the plans the list schedule picks (``two``: a second product z = −A · C beside it); the
    latency is the cost model's, or the budget's."""
    W, I = 16, 8  # noqa: E741
    F = W - I
    n, k, m = 2, 3, 2
    g = Graph()
    x = [g.input("x", i) for i in range(n * k + k * m * (2 if two else 1))]
    kern = Kernel("prod", g, [Array("x", (len(x),))], [], doc="dense product")
    kern.temps = [(Array("A", (n * k,)), x[:n * k]), (Array("B", (k * m,)), x[n * k:n * k + k * m])]
    kern.post = [MatMul("y", "A", "B", n, k, m, -1.0)]
    kern.epilogue_outputs = [Array("y", (n, m))]
    if two:
        kern.temps.append((Array("C", (k * m,)), x[n * k + k * m:]))
        kern.post.append(MatMul("z", "A", "C", n, k, m, -1.0))
        kern.epilogue_outputs.append(Array("z", (n, m)))
    nt = numeric_type("float64", (W, I))
    if budget:
        bc = budget_cost(kern, nt, DEFAULT_CLOCK_MHZ, budget, divider="narrow")
        assert bc["epilogue_plan"] == plan, bc
    mod, src = _synthetic_sources(kern, W, I, budget)
    lib = ctypes.CDLL(str(sim.build_verilog(src)))
    run, cycles = lib.rbd_ops_prod_f64_batch, lib.rbd_ops_prod_f64_cycles
    run.argtypes, run.restype = [ctypes.c_long] + [ctypes.c_void_p] * (3 if two else 2), None
    cycles.argtypes, cycles.restype = [ctypes.c_int], ctypes.c_long
    hi, lo = (1 << (W - 1)) - 1, -(1 << (W - 1))

    def q(v: Fraction) -> int:
        s_ = v * 2 ** F
        fl = math.floor(s_)
        fr = s_ - fl
        return min(hi, max(lo, fl + (1 if fr > Fraction(1, 2) or (fr == Fraction(1, 2) and fl % 2) else 0)))

    def want(raw):
        A = [Fraction(r, 2 ** F) for r in raw[:n * k]]
        out = []
        for b0 in ((n * k, n * k + k * m) if two else (n * k,)):
            B = [Fraction(r, 2 ** F) for r in raw[b0:b0 + k * m]]
            for i in range(n):
                for j in range(m):
                    acc = 0
                    for l in range(k):  # noqa: E741
                        acc = q(Fraction(acc, 2 ** F) - A[i * k + l] * B[l * m + j])
                    out.append(acc)
        return out

    half = 1 << (F - 1)
    big = 100 << F
    cases = [
        # A (2×3)                         B (3×2)
        (1, 1, 3, -1, 2, 5,                half, -half, 2, half, half, 3 * half),   # ties: half a quantum
        (-3, 1, 1, 3, -1, 1,               half, half, 1 << F, -half, half, half),  # ties after odd sums
        (big, -big, 1, -big, big, 1,       big, 1 << F, big, 1 << F, 3, half),      # saturate, come back
        (5, 7, -9, 11, -13, 17,            19, -23, 29, 31, -37, 41),               # small, off ties
    ]
    if two:  # C: B's operands in the other order, negated (the same ties and saturations, elsewhere)
        cases = [c + tuple(-r for r in c[n * k:][::-1]) for c in cases]
    raw = np.array(cases, dtype=np.int64)
    xs = np.ascontiguousarray(np.ldexp(raw.astype(float), -F))
    outs = [np.zeros((len(cases), n * m)) for _ in kern.post]  # y (and z): the batch entry's arrays
    run(len(cases), xs.ctypes.data, *(o.ctypes.data for o in outs))
    got = np.hstack(outs)
    np.testing.assert_array_equal(np.ldexp(got, F).astype(np.int64),
                                  np.array([want([int(r) for r in row]) for row in cases], dtype=np.int64))
    # the cost model's epilogue: n·m elements plus the pipeline's depth, after no datapath
    model = bc if budget else kernel_cost(kern, nt, DEFAULT_CLOCK_MHZ, divider="narrow")
    assert cycles(0) == mod.latency == model["latency_cycles"]
    if budget:
        assert mod.ops["mul"] == bc["mul_units"] == mod.text.count("_a * mu"), "the budget's multipliers"
    with pytest.raises(RbdgenError, match=r"prod: the Verilog target prints products scaled by ±1 only \(y is scaled by 2\)"):
        kern.post = [MatMul("y", "A", "B", n, k, m, 2.0)]
        vemit._Emitter(numeric_type("float64", (W, I)), DEFAULT_CLOCK_MHZ).kernel(kern, "rbd_ops", "synthetic")


def test_a_dsp_budget_shares_the_operators(built):
    """Under --dsp-budget the multipliers and CORDIC units are shared on the HLS list schedule
    (``inspect --cost --dsp-budget``): iiwa rnea and ∇FD within 100 DSP48E2 (∇FD: 21 multipliers
    of 4 slices and a CORDIC unit, its products three elements a step, the last step of a row one)
    give the HLS C simulation's outputs bit for bit, and done rises, and the outputs are final, in
    the list schedule's latency."""
    m, _, kh = built
    budget = 100
    ks = ("rnea", "aba_derivatives")
    kv = rbdgen.build(m, target="verilog", fixed=FIXED, kernels=ks, dsp_budget=budget)
    q, v, a, _ = random_state(m, seed=49, n=6)
    nt = numeric_type("float64", FIXED)
    src = rbdgen.targets.get_target("verilog").generate(m, ks, dtypes=("float64",), name=None, fixed=FIXED,
                                                          dsp_budget=budget)
    for k in ks:
        for o, (g, w) in enumerate(zip(_tuple(getattr(kv, k)(q, v, a)), _tuple(getattr(kh, k)(q, v, a)))):
            np.testing.assert_array_equal(g, w, err_msg=f"{k} output {o} within {budget} DSPs: Verilator vs HLS C simulation")
        bc = budget_cost(registry.trace(m, k), nt, DEFAULT_CLOCK_MHZ, budget, divider="narrow")
        c = kv.cycles(k)
        assert c["done"] == c["schedule"] == c["outputs_final"] == bc["latency_cycles"], (k, c, bc["latency_cycles"])
        e = src.kernels[k]
        assert e["dsp"] == bc["dsp"] <= budget and e["operators"]["mul"] == bc["mul_units"], (k, e, bc)
        assert src.files[f"{e['module']}.v"].count("_a * mu") == bc["mul_units"], k
    assert bc["epilogue_plan"] == (1, 3), bc  # the ∇FD plan the docstring describes


@pytest.mark.parametrize("budget,dsps", [(None, 3), (1, 1)], ids=["unshared", "one-multiplier"])
def test_yosys_maps_a_budget_to_its_dsps(tmp_path, budget, dsps):
    """What the budget promises is what synthesis builds: the synthetic kernel's three 16-bit
    products on three DSP48E2 unshared and on one within a budget of 1 (yosys synth_xilinx
    -family xcup, the flow of make synth-report)."""
    _, src = _synthetic_sources(_synthetic_kernel(), 16, 8, budget)
    for fn, text in src.files.items():
        (tmp_path / fn).write_text(text)
    yosys = shutil.which("yosys")
    assert yosys, "yosys not found on PATH (`make rtl-tools` installs it)"
    script = (f"read_verilog {' '.join(sorted(src.files))}; synth_xilinx -family xcup -top rbd_ops_ops; "
              "tee -o stat.txt stat")
    r = subprocess.run([yosys, "-q", "-p", script], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stderr or r.stdout)[-2000:]
    counts = [int(ln.split()[-1]) for ln in (tmp_path / "stat.txt").read_text().splitlines()
              if ln.split()[:1] == ["DSP48E2"]]
    assert counts and counts[-1] == dsps, counts


def test_pipelined_modules_take_a_state_every_cycle(built):
    """--ii 1: every operation its own operator, every value carried through a delay line to the
    cycles that read it, the dividers pipelined. iiwa rnea and FK (CORDIC) fed 23 states on 23
    consecutive cycles give the HLS C simulation's outputs bit for bit, the first in the cost
    model's latency for --ii 1 (the same as the latency design's) and the last 22 cycles after
    it. (The pipelined dividers: the synthetic kernel's exact-integer cases; pipelined aba, 504
    cycles of delay lines, 45 s more of simulation here, was checked by hand: bit for bit, a
    state a cycle.)"""
    m, _, kh = built
    ks = ("rnea", "forward_kinematics")
    kv = rbdgen.build(m, target="verilog", fixed=FIXED, kernels=ks, ii=1)
    q, v, a, _ = random_state(m, seed=50, n=23)
    nt = numeric_type("float64", FIXED)
    for k in ks:
        args = _args(k, q, v, a)
        np.testing.assert_array_equal(getattr(kv, k)(*args), getattr(kh, k)(*args),
                                      err_msg=f"{k} pipelined: Verilator vs HLS C simulation")
        c = kv.cycles(k)
        model = kernel_cost(registry.trace(m, k), nt, DEFAULT_CLOCK_MHZ, ii=1, divider="narrow")
        assert c == {"valid": model["latency_cycles"], "span": 23, "schedule": model["latency_cycles"]}, (k, c)
    with pytest.raises(RbdgenError, match=r"--ii 2: the Verilog target pipelines at --ii 1 only"):
        rbdgen.build(m, target="verilog", fixed=FIXED, kernels=("rnea",), ii=2)
    with pytest.raises(RbdgenError, match=r"--dsp-budget 100 with --ii 1: .*choose one"):
        rbdgen.build(m, target="verilog", fixed=FIXED, kernels=("rnea",), ii=1, dsp_budget=100)
    with pytest.raises(RbdgenError, match=r"aba_derivatives: its dense products at --ii 1 would need n·m·k multipliers"):
        rbdgen.build(m, target="verilog", fixed=FIXED, kernels=("aba_derivatives",), ii=1)


def test_exact_model_is_the_hls_c_simulation(built):
    """rbdgen.targets.hls.exact (the generated testbenches' expected outputs) computes in
    Python integers what the HLS C simulation computes on ap_fixed: bit for bit on iiwa rnea, FK,
    aba and ∇FD (CORDIC, divider, the products' accumulation)."""
    m, _, kh = built
    q, v, a, _ = random_state(m, seed=51, n=6)
    nt = numeric_type("float64", FIXED)
    env = {"q": q, "v": v, "a": a, "tau": a}
    for k in KERNELS + ("aba_derivatives",):
        kern = registry.trace(m, k)
        want = _tuple(getattr(kh, k)(*(env[x.name] for x in kern.inputs)))
        for s in range(len(q)):
            raw = {x.name: [quantise(float(y), *FIXED) for y in env[x.name][s]] for x in kern.inputs}
            got = exact.outputs(kern, nt, raw)
            for arr, w in zip(kern.all_outputs, want):
                np.testing.assert_array_equal(np.ldexp(np.array(got[arr.name], dtype=float), -(FIXED[0] - FIXED[1])),
                                              w[s].ravel(), err_msg=f"{k} {arr.name} state {s}")


@pytest.mark.parametrize("opts", [{}, {"ii": 1}, {"dsp_budget": 100}], ids=["latency", "pipelined", "budget"])
def test_generated_testbench_passes_in_icarus_verilog(tmp_path, opts):
    """The testbench written beside each module (the HLS testbench's 4 states, the expected bits
    from the exact model) passes in Icarus Verilog, a simulator independent of Verilator, for each
    design (FK and rnea; the pipelined one streams the states); and fails, saying so, when one
    expected bit is wrong."""
    iverilog, vvp = shutil.which("iverilog"), shutil.which("vvp")
    assert iverilog and vvp, "iverilog not found on PATH (`make rtl-tools` installs it)"
    from rbdgen.targets import get_target

    m = _iiwa()
    src = get_target("verilog").generate(m, ("forward_kinematics", "rnea"), dtypes=("float64",), name=None,
                                         fixed=FIXED, **opts)
    for fn, text in src.files.items():
        (tmp_path / fn).write_text(text)
    for k, e in src.kernels.items():
        mod = e["module"]
        tb = (tmp_path / f"tb_{mod}.v").read_text()
        for case, text in (("as generated", tb), ("one bit wrong", _flip_expected_bit(tb))):
            (tmp_path / "tb.v").write_text(text)
            r = subprocess.run([iverilog, "-g2005", "-o", "sim", "tb.v", f"{mod}.v", *src.info["units"]], cwd=tmp_path,
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr[-2000:]
            r = subprocess.run([vvp, "-n", "sim"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
            if case == "as generated":
                assert f"PASS tb_{mod}: 4 states bit for bit, latency {e['latency_cycles']} cycles" in r.stdout, r.stdout
            else:
                assert f"FAIL tb_{mod}" in r.stdout and "PASS" not in r.stdout, r.stdout


def _flip_expected_bit(tb: str) -> str:
    """The testbench with the lowest bit of the first expected output value flipped (latency
    design: the first ``!== <literal>``; pipelined: the first ``want_<output>[0] = <literal>``)."""
    import re

    mt = re.search(r"(?:!== |want_\w+\[0\] = )\d+'h([0-9a-f]+)", tb)
    end = mt.end(1)
    return tb[:end - 1] + format(int(tb[end - 1], 16) ^ 1, "x") + tb[end:]


def test_refusals_name_what_is_wrong(monkeypatch):
    m = _iiwa()
    with pytest.raises(RbdgenError, match=r"--fixed 32,0: integer bits I \(sign included\) must be between 1"):
        rbdgen.build(m, target="verilog", fixed=(32, 0), kernels=("rnea",))
    with pytest.raises(RbdgenError, match=r"implements the rounding modes AP_RND_CONV, AP_TRN, not AP_RND\b"):
        rbdgen.build(m, target="verilog", fixed=FIXED, rounding="AP_RND", kernels=("rnea",))
    sim.verilator.cache_clear()
    monkeypatch.setattr(sim.shutil, "which", lambda name: None)
    try:
        with pytest.raises(RbdgenError, match=r"verilator not found on PATH.*make rtl-tools"):
            sim.verilator()
    finally:
        monkeypatch.undo()
        sim.verilator.cache_clear()


def test_sources_are_deterministic_and_yosys_elaborates_them(tmp_path):
    """The same model gives the same bytes; Yosys (the synthesis tool the issue names, from the
    Makefile) reads, elaborates and checks every module: no latches, no undriven or multiply
    driven nets, no combinational loops."""
    from rbdgen.targets import get_target

    m = _iiwa()
    t = get_target("verilog")
    ks = ("forward_kinematics", "aba")  # the CORDIC and the divider instantiated
    a = t.generate(m, ks, dtypes=("float64",), name=None, fixed=FIXED)
    b = t.generate(m, ks, dtypes=("float64",), name=None, fixed=FIXED)
    assert a.files == b.files
    yosys = shutil.which("yosys")
    assert yosys, "yosys not found on PATH (`make rtl-tools` installs it)"
    # pipelined: FK's delay lines, and the pipelined divider (on its own: a pipelined aba's 504 cycles
    # of delay lines take Yosys 40 s)
    p = t.generate(m, ("forward_kinematics",), dtypes=("float64",), name=None, fixed=FIXED, ii=1)
    divp = [u for u in p.info["units"] if u.endswith("_divp.v")][0]
    p.kernels["divp"] = {"module": divp[:-2]}
    for src, d in ((a, tmp_path / "latency"), (p, tmp_path / "pipelined")):
        d.mkdir()
        for fn, text in src.files.items():
            (d / fn).write_text(text)
        for k, e in src.kernels.items():
            files = sorted({f"{e['module']}.v", *src.info["units"]})
            script = (f"read_verilog {' '.join(files)}; hierarchy -check -top {e['module']}; "
                      "proc; check -assert")
            r = subprocess.run([yosys, "-q", "-p", script], cwd=d, capture_output=True, text=True, timeout=600)
            assert r.returncode == 0, f"{k} ({d.name}): yosys: {(r.stderr or r.stdout)[-2000:]}"
