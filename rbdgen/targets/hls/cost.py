"""Cost model of the generated HLS kernels (``rbdgen inspect --cost --target hls``): latency,
DSP slices, LUTs and flip-flops of one kernel's datapath, from its IR. Not a synthesis result:
the assumptions are stated here and in docs/hls.md, next to each number.

What it models, for an ``ap_fixed<W, I>`` datapath (F = W − I), on an AMD UltraScale+ part
(DSP48E2: a 27×18 signed multiplier), -2 speed grade:

* **What the tool folds away.** A literal is quantised to the format (with its rounding mode)
  before anything else, so a multiply by a constant that quantises to 0 is no operator, nor is
  an addition of such a zero; a multiply by ±2ᵏ is a shift (wires; a negation if negative).
* **Multipliers.** Variable × variable: ⌈W/27⌉·⌈W/18⌉ DSP slices. Variable × constant: the
  constant's significant bits b (its quantised integer without trailing zeros, plus a sign)
  decide: min(⌈W/27⌉·⌈b/18⌉, ⌈W/18⌉·⌈b/27⌉) slices (a 16-bit-quantised constant: ≤ 2, not 4).
  Pipelined, registered: 3 + 1.5·log₂(slices) ns → whole cycles.
* **Adders** (add, sub, negate): LUT carry chains, 1 + W/64 ns, *chained*: several share a
  clock cycle. No DSP.
* **Quantisation logic**, per operation whose exact result is wider than the format: a product
  is rounded (an incrementer, W LUTs, for every mode but AP_TRN) and saturated (a comparator and
  a mux, W LUTs, for the AP_SAT modes); a sum can overflow by one bit: saturation only.
* **Dividers**: ap_fixed ``a / b`` shifts a left by F and divides the (W+F)-bit dividend by the
  W-bit divisor: a sequential radix-2 divider, one quotient bit per cycle, W + F + 3 cycles
  (W = 32, F = 16: 51, as public Vitis reports show at that width), busy all that time; LUTs
  ~2(W + F), FFs ~3(W + F). Plus rbd_div's zero test and saturation mux (W LUTs). A pipelined
  design (``--ii``) needs the array form, a (W+1)-bit subtracter per quotient bit.
  **The Verilog target's divider** (``divider="narrow"``; rbdgen/targets/verilog/emit.py) gives
  the same quotients sooner. A quotient of W bits or more saturates, which one comparison of the
  dividend's top F + 1 bits with the divisor tells, so only the W − 1 bits below are divided
  out; and it brings down two of them a cycle where a (W+2)-bit subtraction and a 4:1
  multiplexer (:data:`LUT_NS`) fit the cycle (250 MHz: yes), one otherwise. A cycle takes the
  magnitudes, one makes the saturation test, the first quotient bit and 3·divisor, ⌈(W − 2) / r⌉
  cycles bring down r bits each, one signs and saturates: 3 + ⌈(W − 2) / r⌉ cycles (32,16 at
  250 MHz: 18 instead of 51). LUTs and FFs: see :meth:`Model.div`, checked against Yosys on the
  module alone (docs/verilog.md, "The divider").
* **sin/cos**: one unrolled CORDIC per joint angle (rbdgen/targets/hls/cordic.py): its two
  constant products (range reduction), then N + 3 chained adder stages of its internal width;
  LUTs for its 3N + 7 adders.
* **Schedule**: as soon as possible, operators registered on cycle boundaries, adders chained
  into 73 % of the clock period (Vitis HLS' default clock uncertainty is 27 %).
* **Resources in the default (latency) design**, which the tool may share operators in:
  multipliers by the peak DSP slices *issued* in one cycle of that schedule (pipelined
  multipliers take a new operation every cycle), adders by the peak adders in one cycle,
  dividers by the peak dividers busy at once, flip-flops by the peak values held across a cycle
  boundary (W bits each); shared multipliers, dividers and CORDICs get operand multiplexers
  (:func:`mux_lut`). These are the fewest operators that keep the as-soon-as-possible
  latency; a tool can use fewer and take longer (a DSP budget: the FPGA-budget issue).
  **With ``--ii N``** the function is pipelined: every operation its own operator, DSPs shared at
  most N ways (total / N), and each value is registered in every cycle it lives.
* The dense ∇FD products: a loop, one element per cycle (``PIPELINE II=1``), its k products
  unrolled: n·m + (multiply + k chained adds) cycles per product, k multipliers. Unrolled
  entirely with ``--ii``.

float and double: the Vitis HLS operator defaults (fmul/dmul 3/11 DSP, fadd/dadd 2/3 DSP,
whole-cycle delays from typical reports); LUTs and FFs are not modelled for them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from ...errors import RbdgenError
from ...ir.ops import OPS
from .cordic import cordic

#: fraction of the clock period HLS schedules logic into (27 % default clock uncertainty)
CLOCK_BUDGET = 0.73


# ---- constants as the datapath holds them -------------------------------------------------

def quantise(x: float, W: int, I: int, rounding: str = "AP_RND_CONV", overflow: str = "AP_SAT") -> int:  # noqa: E741
    """The raw integer of ``ap_fixed<W, I, rounding, overflow>(x)`` (x = raw · 2^−(W−I)), exactly
    as ap_fixed converts a double: the rounding mode at the last fractional bit, then the
    overflow mode at W bits (AP_WRAP_SM is treated as AP_WRAP: not used by rbdgen's tests)."""
    F = W - I
    v = Fraction(x) * 2 ** F
    fl = math.floor(v)
    frac = v - fl
    half = Fraction(1, 2)
    if rounding == "AP_TRN":
        r = fl
    elif rounding == "AP_TRN_ZERO":
        r = fl if v >= 0 else math.ceil(v)
    elif frac != half:
        r = fl + (1 if frac > half else 0)
    else:  # a tie
        r = {"AP_RND": fl + 1, "AP_RND_ZERO": fl if v >= 0 else fl + 1,
             "AP_RND_MIN_INF": fl, "AP_RND_INF": fl + 1 if v >= 0 else fl,
             "AP_RND_CONV": fl + (fl % 2)}[rounding]
    hi = (1 << (W - 1)) - 1
    lo = -hi if overflow == "AP_SAT_SYM" else -(1 << (W - 1))  # symmetric: the lone most negative value is out
    if lo <= r <= hi:
        return r
    if overflow in ("AP_SAT", "AP_SAT_SYM"):
        return hi if r > hi else lo
    if overflow == "AP_SAT_ZERO":
        return 0
    return ((r - lo) % (1 << W)) + lo  # wrap


def significant_bits(raw: int) -> int:
    """Bits a constant multiplier needs: the integer without its trailing zeros, plus a sign."""
    raw = abs(raw)
    if raw == 0:
        return 0
    while raw % 2 == 0:
        raw //= 2
    return raw.bit_length() + 1


def mux_lut(W: int, units: int, ops: int) -> int:
    """LUTs of the operand multiplexers when ``ops`` operations share ``units`` operators: two W-bit
    s:1 muxes per operator (s = ⌈ops / units⌉), ⌈(s − 1)/3⌉ LUT6 per bit (a LUT6 is a 4:1 mux)."""
    if not units or ops <= units:
        return 0
    return units * 2 * W * math.ceil((math.ceil(ops / units) - 1) / 3)


def mul_dsps(wa: int, wb: int) -> int:
    """DSP48E2 slices for a wa × wb signed product: the operands cut into 27- and 18-bit pieces,
    one slice per pair of pieces, the better of the two orientations."""
    return min(math.ceil(wa / 27) * math.ceil(wb / 18), math.ceil(wa / 18) * math.ceil(wb / 27))


# ---- one operation -------------------------------------------------------------------------

@dataclass(frozen=True)
class OpCost:
    cls: str             # "mul", "add", "div", "sincos"
    dsp: int             # slices of one instance
    cycles: int          # registered operators: whole cycles; 0 for a chained one
    chain: float         # chained operators (adders): fraction of a cycle
    lut: int
    ff: int
    busy: int            # cycles one instance is busy per operation (1: pipelined)
    lut_pipelined: int | None = None  # LUTs of the pipelined form a --ii design needs (None: the same)


#: the dividers a fixed-point design can have: the HLS tool's ap_fixed divider (the HLS target),
#: and the Verilog target's, which divides out only the bits a saturating quotient can hold
DIVIDERS = ("tool", "narrow")
#: one level of logic after a carry chain (a LUT6 and its routing), ns: the narrow divider's
#: 4:1 multiplexer of partial remainders
LUT_NS = 0.5


class Model:
    """Per-operation costs of one datapath type at one clock; ``divider``: one of :data:`DIVIDERS`
    (the module docstring's "Dividers")."""

    def __init__(self, numtype, clock_mhz: float, divider: str = "tool"):
        if not (isinstance(clock_mhz, (int, float)) and math.isfinite(clock_mhz) and clock_mhz > 0):
            raise RbdgenError(f"clock must be a positive frequency in MHz, got {clock_mhz!r}")
        if divider not in DIVIDERS:
            raise RbdgenError(f"divider must be one of {', '.join(DIVIDERS)}, got {divider!r}")
        self.divider = divider
        self.nt = numtype
        self.period = 1000.0 / clock_mhz
        self.budget = CLOCK_BUDGET * self.period
        self.fixed = numtype.kind == "fixed"

    def _cyc(self, ns: float) -> int:
        return max(1, math.ceil(ns / self.budget - 1e-9))

    def add_delay(self, w: int) -> float:
        return (1.0 + w / 64.0) / self.budget

    # fixed point ------------------------------------------------------------------------------
    def _round_lut(self) -> int:
        return 0 if self.nt.rounding == "AP_TRN" else self.nt.W

    def _sat_lut(self) -> int:
        return self.nt.W if self.nt.overflow.startswith("AP_SAT") else 0

    def mul(self, const_bits: int | None = None) -> OpCost:
        if not self.fixed:
            dsp, ns = (3, 8.0) if self.nt.kind == "float" else (11, 14.0)
            return OpCost("mul", dsp, self._cyc(ns), 0.0, 0, 0, 1)
        W = self.nt.W
        dsp = mul_dsps(W, W if const_bits is None else const_bits)
        return OpCost("mul", dsp, self._cyc(3.0 + 1.5 * math.log2(max(dsp, 1))), 0.0,
                      self._round_lut() + self._sat_lut(), W, 1)

    def add(self) -> OpCost:
        if not self.fixed:
            dsp, ns = (2, 12.0) if self.nt.kind == "float" else (3, 16.0)
            return OpCost("add", dsp, self._cyc(ns), 0.0, 0, 0, 1)
        W = self.nt.W
        return OpCost("add", 0, 0, self.add_delay(W), W + self._sat_lut(), 0, 1)

    def div(self) -> OpCost:
        if not self.fixed:
            ns = 30.0 if self.nt.kind == "float" else 55.0
            return OpCost("div", 0, self._cyc(ns), 0.0, 0, 0, 1)
        W, F = self.nt.W, self.nt.frac_bits
        if self.divider == "narrow":
            r = self.div_bits()
            steps = math.ceil((W - 2) / r)  # after the first quotient bit
            cycles = 3 + steps
            fixed_lut = (W + F + W) + W + 2 * W  # the magnitudes' negations, the saturation test, sign and saturation
            # a step: r = 1, a (W+1)-bit subtracter and its mux; r = 2, three (W+2)-bit ones, the 4:1 mux
            # (two LUTs a bit) and the digit's logic, with 3·divisor made once (an adder) and the first
            # bit's radix-2 step. Yosys, 32,16, the module alone: 241 LUTs (r = 1), 492 (r = 2); pipelined
            # 2 685, 3 588 (docs/verilog.md, "The divider")
            step_lut = 2 * (W + 1) if r == 1 else 3 * (W + 2) + 2 * (W + 1) + W
            first_lut = 0 if r == 1 else 2 * (W + 1) + (W + 1)
            ff = 4 * W if r == 1 else 5 * W
            return OpCost("div", 0, cycles, 0.0, fixed_lut + step_lut + first_lut, ff, cycles,
                          lut_pipelined=fixed_lut + first_lut + steps * step_lut + 2 * (W + 1))
        cycles = W + F + 3
        extra = W + self._round_lut() + self._sat_lut()  # rbd_div's zero test and mux, the quotient's quantisation
        # sequential: one (W+1)-bit subtracter and the shift registers, busy all its cycles; a
        # pipelined design (--ii) needs the array form: a subtracter per quotient bit
        return OpCost("div", 0, cycles, 0.0, 2 * (W + F) + extra, 3 * (W + F), cycles,
                      lut_pipelined=(W + F) * (W + 1) + extra)

    def div_bits(self) -> int:
        """Quotient bits the Verilog target's divider brings down a cycle: 2 where a (W+2)-bit
        subtraction and a 4:1 multiplexer fit the cycle's budget, else 1."""
        return 2 if (self.add_delay(self.nt.W + 2) * self.budget + LUT_NS) <= self.budget else 1

    def sincos(self) -> OpCost:
        if not self.fixed:
            ns = 60.0 if self.nt.kind == "float" else 120.0
            return OpCost("sincos", 0, self._cyc(ns), 0.0, 0, 0, 1)
        c = cordic(self.nt.W, self.nt.I)
        prods = [mul_dsps(w, significant_bits(k)) for w, k in c.const_products()]
        cycles = sum(self._cyc(3.0 + 1.5 * math.log2(max(d, 1))) for d in prods) + \
            math.ceil(c.adder_stages() * self.add_delay(c.WC) - 1e-9)
        return OpCost("sincos", sum(prods), cycles, 0.0, c.adders() * c.WC + 2 * (self._round_lut() + self._sat_lut()),
                      2 * c.WC, 1)


# ---- a kernel --------------------------------------------------------------------------------

def _classify(kernel, model: Model):
    """Each live node → its kind: ("const" | "input" | "zero", None), ("wire", the id of the node
    whose value it is: x + 0, x · 1, x · 2^k, the second of a sin/cos pair), or ("op", OpCost);
    plus the counts of constant multiplies (and of those folded to zero or turned into shifts)
    and of CORDIC units."""
    nt = model.nt
    kind: dict[int, tuple] = {}
    zero_mul = shift_mul = const_mul = 0
    angles: dict[int, int] = {}  # angle node id → node id of its CORDIC

    def is_zero(n):
        return kind[n.id][0] == "zero"

    for n in kernel.live_nodes():
        if n.op == "const":
            z = (quantise(n.value, nt.W, nt.I, nt.rounding, nt.overflow) == 0) if model.fixed else n.value == 0.0
            kind[n.id] = ("zero", None) if z else ("const", None)
            continue
        if n.op == "input":
            kind[n.id] = ("input", None)
            continue
        cls = OPS[n.op].cost
        if cls == "mul":
            consts = [a for a in n.args if a.op == "const"]
            if any(is_zero(a) for a in n.args):
                kind[n.id] = ("zero", None)
                if consts:
                    zero_mul += 1
                    const_mul += 1
                continue
            if consts and model.fixed:
                const_mul += 1
                other = [a for a in n.args if a.op != "const"]
                raw = quantise(consts[0].value, nt.W, nt.I, nt.rounding, nt.overflow)
                if not other:
                    kind[n.id] = ("const", None)
                elif abs(raw) & (abs(raw) - 1) == 0:  # ±2^k: a shift
                    shift_mul += 1
                    kind[n.id] = ("op", model.add()) if raw < 0 else ("wire", other[0].id)
                else:
                    kind[n.id] = ("op", model.mul(significant_bits(raw)))
                continue
            if consts:
                const_mul += 1
            kind[n.id] = ("op", model.mul())
        elif cls == "add":
            live = [a for a in n.args if not is_zero(a)]
            if not live:
                kind[n.id] = ("zero", None)
            elif len(live) == 1 and (n.op == "add" or (n.op == "sub" and live[0] is n.args[0])):
                kind[n.id] = ("wire", live[0].id)
            else:
                kind[n.id] = ("op", model.add())
        elif cls == "div":
            kind[n.id] = ("op", model.div())
        else:  # sin, cos: one CORDIC per angle
            a = n.args[0].id
            if a in angles:
                kind[n.id] = ("wire", angles[a])
            else:
                angles[a] = n.id
                kind[n.id] = ("op", model.sincos())
    return kind, {"zero_mul": zero_mul, "shift_mul": shift_mul, "const_mul": const_mul, "sincos_units": len(angles)}


def asap(kernel, model: Model):
    """The as-soon-as-possible schedule of ``kernel``'s live nodes on unshared operators: (kind
    per node as :func:`_classify` gives it, the folding counts, finish time per node (0 for
    constants and inputs, a wire's is its source's), the cycle each operation starts in, the
    operations in order as (node, OpCost)). A registered operator starts on a cycle boundary and
    takes whole cycles; adders chain from where their last operand finishes. The Verilog target
    registers its values where this schedule crosses cycle boundaries
    (:mod:`rbdgen.targets.verilog`)."""
    kind, folded = _classify(kernel, model)
    finish: dict[int, float] = {}
    start_of: dict[int, int] = {}
    ops = []
    for n in kernel.live_nodes():
        k, x = kind[n.id]
        if k in ("zero", "const", "input"):
            finish[n.id] = 0.0
            continue
        if k == "wire":
            finish[n.id] = finish[x]
            continue
        start = max(finish[a.id] for a in n.args)
        if x.cycles:
            start = math.ceil(start - 1e-9)  # a registered operator starts on a cycle boundary
            finish[n.id] = start + x.cycles
        else:
            finish[n.id] = start + x.chain
        start_of[n.id] = math.floor(start + 1e-9)
        ops.append((n, x))
    return kind, folded, finish, start_of, ops


def kernel_cost(kernel, numtype, clock_mhz: float, ii: int | None = None, divider: str = "tool") -> dict:
    """The estimate for one traced kernel (see the module docstring); ``divider``: the
    datapath's divider (:data:`DIVIDERS`: "narrow" is the Verilog target's)."""
    model = Model(numtype, clock_mhz, divider)
    kind, folded, finish, start_of, ops = asap(kernel, model)
    path = max(finish.values(), default=0.0)
    cycles = math.ceil(path - 1e-9)
    # the cycle in which each operator's value is last read (through wires), for the registers
    src: dict[int, int] = {}
    for n in kernel.live_nodes():
        k, x = kind[n.id]
        if k == "op":
            src[n.id] = n.id
        elif k == "wire" and x in src:
            src[n.id] = src[x]
    last_use = {n.id: start_of[n.id] for n, _ in ops}
    for n, _ in ops:
        for a in n.args:
            if a.id in src:
                last_use[src[a.id]] = max(last_use[src[a.id]], start_of[n.id])
    W = numtype.W if model.fixed else 0

    # the products (∇FD's −M⁻¹·∂τ/∂u), printed dense: k multiplies per element
    mul_var = model.mul()
    epi_cycles = 0
    epi_dsp = epi_lut = 0
    for mm in kernel.post:
        it = mul_var.cycles + math.ceil(mm.k * model.add().chain - 1e-9) + (model.add().cycles * mm.k)
        if ii:
            epi_cycles = max(epi_cycles, it)
            epi_dsp += mm.n * mm.m * mm.k * mul_var.dsp
            epi_lut += mm.n * mm.m * mm.k * (mul_var.lut + model.add().lut)
        else:
            epi_cycles += mm.n * mm.m + it - 1
            epi_dsp = max(epi_dsp, mm.k * mul_var.dsp)
            epi_lut = max(epi_lut, mm.k * (mul_var.lut + model.add().lut))
    if kernel.post:
        cycles += epi_cycles

    total_dsp = sum(x.dsp for _, x in ops)
    if ii:
        dsp = math.ceil((total_dsp + epi_dsp) / ii)
        lut = sum(x.lut if x.lut_pipelined is None else x.lut_pipelined for _, x in ops) + epi_lut
        ff = sum(W * max(1, math.ceil(last_use[n.id] - finish[n.id] + 1e-9)) for n, _ in ops) + \
            sum(x.ff for _, x in ops)
    else:
        per_cycle_dsp: dict[int, int] = {}
        per_cycle_lut: dict[int, int] = {}
        busy: dict[str, dict[int, int]] = {}
        for n, x in ops:
            c = start_of[n.id]
            if x.cls == "mul" or (x.cls == "sincos" and x.dsp):
                per_cycle_dsp[c] = per_cycle_dsp.get(c, 0) + x.dsp
            if x.cls in ("div", "sincos"):
                # a divider is busy for its whole latency; a CORDIC's adders too
                occ = busy.setdefault(x.cls, {})
                for t in range(c, c + max(x.busy, x.cycles if x.cls == "sincos" else 1)):
                    occ[t] = occ.get(t, 0) + 1
            else:
                per_cycle_lut[c] = per_cycle_lut.get(c, 0) + x.lut
        dsp = max(max(per_cycle_dsp.values(), default=0), epi_dsp)
        lut = max(max(per_cycle_lut.values(), default=0), epi_lut)
        unit = {x.cls: x for _, x in ops if x.cls in ("div", "sincos")}
        for cls, occ in busy.items():
            lut += max(occ.values()) * unit[cls].lut
        if model.fixed:  # the operators are shared across cycles: operand multiplexers
            per_cycle_mul: dict[int, int] = {}
            for n, x in ops:
                if x.cls == "mul":
                    per_cycle_mul[start_of[n.id]] = per_cycle_mul.get(start_of[n.id], 0) + 1
            n_mul = sum(1 for _, x in ops if x.cls == "mul")
            lut += mux_lut(W, max(per_cycle_mul.values(), default=0), n_mul)
            for cls, occ in busy.items():
                lut += mux_lut(W, max(occ.values()), sum(1 for _, x in ops if x.cls == cls))
        # registers: values held across a cycle boundary, at the busiest boundary
        delta = [0] * (cycles + 3)
        for n, _ in ops:
            born = math.ceil(finish[n.id] - 1e-9)
            if born <= last_use[n.id]:
                delta[born] += 1
                delta[last_use[n.id] + 1] -= 1
        held = peak = 0
        for d in delta:
            held += d
            peak = max(peak, held)
        ff = W * peak + sum(max(occ.values()) * unit[cls].ff for cls, occ in busy.items())
    # the products are printed dense here (Dialect.epilogue "dot"): counted dense
    counts = kernel.op_counts(dense_epilogue=True)
    out = {c: counts[c] for c in ("mul", "add", "div", "sincos", "depth", "total")}
    out.update(folded)
    out.update({
        "type": numtype.describe(), "clock_mhz": float(clock_mhz), "ii": ii,
        "dsp": int(dsp), "dsp_spatial": int(total_dsp + epi_dsp),
        "lut": int(lut) if model.fixed else None, "ff": int(ff) if model.fixed else None,
        "latency_cycles": int(cycles) if counts["total"] else 0,
        "latency_us": (cycles if counts["total"] else 0) * model.period / 1000.0,
        "mul_dsp": mul_var.dsp,
        "div_cycles": model.div().cycles, "sincos_cycles": model.sincos().cycles,
        "epilogue_cycles": int(epi_cycles),
    })
    return out


# ---- the rolled lowering (--unroll no) ---------------------------------------------------------

#: the rolled design's memories: the workspace ``w`` (one memory, two ports) and each kind's ROM
#: tables answer a read one cycle after its address, as a Vitis BRAM does (read latency 1)
MEMORY_LATENCY = 1


def _kind_kernel(k):
    """Kind ``k`` of a rolled kernel as a kernel of its own (its code as printed, unfolded): what a
    table gives each member (a constant that differs between members, an input index, a value
    of an earlier body) is an input of it, a constant all members share a literal, so the
    straight-line model above costs the kind's module."""
    from ...ir.graph import Array, Graph, Kernel

    g = Graph(fold=False)
    local: list = []
    leaves: dict = {}

    def operand(kind, j):
        if kind == "l":
            return local[j]
        if kind == "c" and j in k.const_lit:
            return g.const(k.const_lit[j])
        if (kind, j) not in leaves:
            leaves[(kind, j)] = g.input("x", len(leaves))
        return leaves[(kind, j)]

    for op, args in k.ops:
        local.append(g.op(op, *(operand(*a) for a in args)))
    return Kernel(f"kind{k.id}", g, [Array("x", (max(len(leaves), 1),))], [(Array("y", (len(local),)), local)])


def rolled_cost(kernel, R, numtype, clock_mhz: float, ii: int | None = None) -> dict:
    """The estimate for the rolled HLS kernel of ``kernel`` (rolled ``R``): a folded design.

    Each kind is a module of its own (its function is not inlined), costed as a straight-line
    kernel by :func:`kernel_cost` with what a table or the workspace gives it as inputs; its
    operators serve each of its members in turn. The members run one after another (the runs'
    loops are not pipelined: a body's values feed the next body's), each taking
    ``MEMORY_LATENCY`` cycle for its table row, its reads of ``w`` two a cycle (two ports), the
    kind's latency, and its writes two a cycle. Before them the sines and cosines, one CORDIC
    call at a time; after them the outputs gathered from ``w``, an element a cycle, and the
    dense products as in the straight-line design. Resources: the kinds' modules side by side
    (the tool shares operators within a module, not across), one CORDIC unit, the products'
    multipliers; memories: ``w`` (``w_words`` of W bits) and the tables (``rom_bits``).

    With ``ii`` each kind's module is pipelined (costed by :func:`kernel_cost` with ``ii``: its
    DSPs shared ``ii`` ways), and a run whose members read nothing of each other
    (:func:`rbdgen.ir.roll.run_independent`) issues a member every max(``ii``, its reads and
    writes of ``w`` two a cycle) cycles after the first; the others still run in turn."""
    from ...ir.roll import run_independent

    model = Model(numtype, clock_mhz)
    W = numtype.W if model.fixed else numtype.bits
    per_kind = {}
    for k in R.kinds:
        c = kernel_cost(_kind_kernel(k), numtype, clock_mhz, ii)
        per_kind[k.id] = c
    member_cycles = []
    overlapped = 0
    for kid, lo, hi in R.runs:
        k = R.kinds[kid]
        words = math.ceil((k.n_ext + len(k.exports)) / 2)
        one = MEMORY_LATENCY + math.ceil(k.n_ext / 2) + per_kind[kid]["latency_cycles"] + math.ceil(len(k.exports) / 2)
        if ii and hi - lo > 1 and run_independent(R, (kid, lo, hi)):
            member_cycles.append(one + (hi - lo - 1) * max(ii, words))
            overlapped += hi - lo
        else:
            member_cycles.append((hi - lo) * one)
    sc = model.sincos()
    trig_cycles = len(R.trig) * sc.cycles if R.trig else 0
    gathered = sum(len(g) for g in R.gather)
    gather_cycles = gathered + MEMORY_LATENCY if gathered else 0
    mul_var = model.mul()
    epi_cycles = epi_dsp = epi_lut = 0
    for mm in kernel.post:
        it = mul_var.cycles + math.ceil(mm.k * model.add().chain - 1e-9) + (model.add().cycles * mm.k)
        epi_cycles += mm.n * mm.m + it - 1
        epi_dsp = max(epi_dsp, mm.k * mul_var.dsp)
        epi_lut = max(epi_lut, mm.k * (mul_var.lut + model.add().lut))
    cycles = trig_cycles + sum(member_cycles) + gather_cycles + epi_cycles
    dsp = sum(c["dsp"] for c in per_kind.values()) + epi_dsp + (sc.dsp if R.trig else 0)
    spatial = sum(c["dsp_spatial"] for c in per_kind.values()) + epi_dsp + (sc.dsp if R.trig else 0)
    lut = ff = None
    if model.fixed:
        lut = sum(c["lut"] for c in per_kind.values()) + epi_lut + (sc.lut if R.trig else 0)
        ff = sum(c["ff"] for c in per_kind.values()) + (sc.ff if R.trig else 0)
    rom_bits = sum(len(k.members) * ((len(k.ctab[0]) if k.ctab else 0) * W + len(k.itab[0]) * 32) for k in R.kinds)
    counts = kernel.op_counts(dense_epilogue=True)
    out = {c: counts[c] for c in ("mul", "add", "div", "sincos", "depth", "total")}
    out.update({
        "zero_mul": 0, "shift_mul": 0, "const_mul": 0, "sincos_units": 1 if R.trig else 0,
        "type": numtype.describe(), "clock_mhz": float(clock_mhz), "ii": ii, "overlapped": overlapped,
        "dsp": int(dsp), "dsp_spatial": int(spatial),
        "lut": int(lut) if lut is not None else None, "ff": int(ff) if ff is not None else None,
        "latency_cycles": int(cycles), "latency_us": cycles * model.period / 1000.0,
        "mul_dsp": mul_var.dsp, "div_cycles": model.div().cycles, "sincos_cycles": sc.cycles,
        "epilogue_cycles": int(epi_cycles),
        "lowering": "rolled", "kinds": len(R.kinds), "members": len(R.segments),
        "w_words": int(R.w_size + sum(len(g) for g in R.gather)), "rom_bits": int(rom_bits),
    })
    return out
