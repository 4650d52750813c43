"""The Verilog of one kernel: a fixed-point datapath registered where the HLS cost model's
as-soon-as-possible schedule crosses cycle boundaries, behind a start/done interface.

The arithmetic is the HLS target's, bit for bit (issue 48): every IR node is one statement of the
HLS C++ on ``ap_fixed<W, I, rounding, overflow>``, so every node here is the exact result of its
operation quantised once to that type — a product rounded at its last fractional bit then
saturated, a sum or difference saturated, a negation saturated, a constant quantised when the
design is generated (:func:`rbdgen.targets.hls.cost.quantise`), sine and cosine by the same
CORDIC (:mod:`rbdgen.targets.hls.cordic`) in the same integer widths. Rounding modes AP_RND_CONV
(nearest, ties to even) and AP_TRN, overflow modes AP_SAT and AP_WRAP; the others are refused.
A quotient is ``rbd_div``'s, by a sequential divider (:meth:`_Emitter.divider_module`). ∇FD's
dense products (−M⁻¹ · ∂τ/∂u) follow the straight-line datapath as the HLS target's loop computes
them (:meth:`_Emitter._epilogue`): one element per cycle on k shared multipliers, or under a
budget the list schedule's plan (``schedule.epilogue_plan``: elements of a row, whole rows, or
every element of every product side by side in one step).

Timing (:func:`rbdgen.targets.hls.cost.asap`, the schedule ``inspect --cost --target hls``
reports): cycle 0 starts at the clock edge that takes ``start``; a multiplier or CORDIC that the
model gives L cycles starts on a cycle boundary from its operands' values and its result leaves
the last of L pipeline registers (synthesis retimes the arithmetic into them); adders chain
combinationally within a cycle, and a value that a later cycle reads is read from a register
loaded at the end of the cycle it settles in; a divider starts when the cycle count reaches its
start cycle and holds its quotient from the cost model's ``divider="narrow"`` cycles later (only the
quotient bits the format can hold are divided out, two a cycle at 250 MHz: 18 cycles at 32,16). Every register is free-running: the inputs are
held in registers for the whole computation, so every value settles, in the cycle the schedule
gives it, and stays. ``done`` rises in cycle ⌈latency⌉, when the outputs are valid (an output
settling in the middle of a cycle is registered; one leaving a pipeline register is that
register), and stays until the next ``start``.

Two more designs from the same datapath (docs/verilog.md): within a DSP budget
(``dsp_budget``), the HLS list schedule's timing on shared multipliers and CORDIC units with
operand multiplexers by the cycle count and values caught in registers in their cycle
(:meth:`_Emitter._units`); and pipelined (``ii=1``), every value carried by a delay line to the
cycles that read it and the dividers pipelined (:meth:`_Emitter.divider_pipelined_module`), a
state every cycle.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import RbdgenError
from ..hls.cordic import cordic
from ..hls.cost import Model, asap, quantise
from ..hls.schedule import epilogue_steps

#: the ap_fixed modes the datapath implements
ROUNDINGS = ("AP_RND_CONV", "AP_TRN")
OVERFLOWS = ("AP_SAT", "AP_WRAP")


@dataclass
class Module:
    name: str
    text: str
    inputs: list       # (name, size)
    outputs: list      # (name, size)
    latency: int       # cycles from the edge that takes start to the one after which done is high
    length: float      # the schedule's length (latency = ⌈length⌉)
    ops: dict          # class → operators instantiated
    registers: int     # W-bit registers of the datapath (pipeline stages and cycle-boundary holds)
    budget: dict | None = None  # the shared design's figures (schedule.budget_design), None unshared


@dataclass
class _Val:
    """Where an operation's value can be read: ``direct`` in cycle ``avail`` (and after, if it
    ``stays``), else its register ``reg``, loaded at the end of cycle ``avail``."""
    direct: str
    avail: int
    stays: bool
    reg: str | None = None
    delayed: bool = False  # pipelined (II = 1): read d cycles late from ``<direct>_d<d>``


def _get(v: _Val, cycle: int) -> str:
    if v.stays or cycle <= v.avail:
        return v.direct
    if v.delayed:
        return f"{v.direct}_d{cycle - v.avail}"
    if v.reg is None:
        raise AssertionError(f"{v.direct} is read in cycle {cycle}, after its cycle {v.avail}, with no register")
    return v.reg


def _lit(v: int, w: int) -> str:
    """A signed ``w``-bit Verilog literal of the integer ``v``."""
    return f"-{w}'sd{-v}" if v < 0 else f"{w}'sd{v}"


class _Emitter:
    def __init__(self, nt, clock_mhz: float):
        if nt.kind != "fixed":
            raise RbdgenError("the Verilog target needs a fixed-point datapath: give --fixed W,I (e.g. 32,16)")
        if nt.rounding not in ROUNDINGS:
            raise RbdgenError(f"the Verilog target implements the rounding modes {', '.join(ROUNDINGS)}, "
                              f"not {nt.rounding}")
        if nt.overflow not in OVERFLOWS:
            raise RbdgenError(f"the Verilog target implements the overflow modes {', '.join(OVERFLOWS)}, "
                              f"not {nt.overflow}")
        self.nt = nt
        self.model = Model(nt, clock_mhz, divider="narrow")
        self.W, self.F = nt.W, nt.frac_bits

    # -- the arithmetic, as Verilog functions of the module ---------------------------------
    def _quant(self, name: str, width: int, drop: int) -> list[str]:
        """``function name(x)``: a signed ``width``-bit value with ``drop`` more fractional bits
        than the datapath, rounded at the datapath's last fractional bit and brought to W bits by
        its overflow mode."""
        W = self.W
        # r: the rounded value; no wider than the value after the shift plus the rounding's carry
        # (a 64-bit product is rounded in 49 bits at 32,16, not 65), and at least W + 1. Yosys
        # trims the widths itself (the same netlist for FK); Verilator's C++ of ∇FD is 15 % smaller
        rw = max(width - drop, W) + 1
        lines = [f"  function automatic signed [{W - 1}:0] {name}(input signed [{width - 1}:0] fx);",
                 f"    reg signed [{rw - 1}:0] r;"]
        if drop == 0:
            lines.append("    begin r = fx;")
        elif self.nt.rounding == "AP_TRN":
            lines.append(f"    begin r = fx >>> {drop};")
        else:  # nearest, ties to even: up when the dropped bits exceed half, or are half and r is odd
            rest = f" | (|fx[{drop - 2}:0])" if drop >= 2 else ""
            lines.append(f"    begin r = (fx >>> {drop}) + $signed({{1'b0, fx[{drop - 1}] & (fx[{drop}]{rest})}});")
        if self.nt.overflow == "AP_SAT":
            # two comparisons with the extremes. (Testing instead that the bits above the result's
            # are copies of its sign was measured on iiwa FK: Yosys gave 9 % more LUTs and 6 154 more
            # MUXF7/8 for 66 % fewer flip-flops; docs/verilog.md)
            hi, lo = (1 << (W - 1)) - 1, -(1 << (W - 1))
            lines += [f"      if (r > {_lit(hi, rw)}) {name} = {_lit(hi, W)};",
                      f"      else if (r < {_lit(lo, rw)}) {name} = {_lit(lo, W)};",
                      f"      else {name} = r[{W - 1}:0];"]
        else:
            lines.append(f"      {name} = r[{W - 1}:0];")
        lines += ["    end", "  endfunction"]
        return lines

    def functions(self) -> list[str]:
        W, F = self.W, self.F
        out = ["  // ---- the datapath type's operations (ap_fixed<%d,%d>, %s, %s): exact, then quantised once"
               % (W, self.nt.I, self.nt.rounding, self.nt.overflow)]
        out += self._quant("q_mul_", 2 * W, F)
        out += [f"  function automatic signed [{W - 1}:0] q_mul(input signed [{W - 1}:0] fa, input signed [{W - 1}:0] fb);",
                f"    reg signed [{2 * W - 1}:0] p;",
                "    begin p = fa * fb; q_mul = q_mul_(p); end",
                "  endfunction"]
        return out

    #: the macros of the datapath's own operations (``macros``), undefined at the module's end
    MACROS = ("RBD_Q_SUM", "RBD_Q_RND", "RBD_Q_PROD")

    def macros(self) -> list[str]:
        """The quantisation steps of ``_quant``'s functions as macros of a wire's name, for
        ``_arith``: a (W+1)-bit sum or difference brought to W bits by the overflow mode
        (``RBD_Q_SUM``); a 2W-bit product rounded at the datapath's last fractional bit
        (``RBD_Q_RND``, into a wire of ``_prod_rw`` bits) and brought to W bits (``RBD_Q_PROD``).
        The same widths, rounding and comparisons as the functions; Yosys (synth_xilinx, xcup)
        made the same DSPs, carries and flip-flops of both, and 6 fewer of iiwa FK's 29 256
        LUTs (rnea within 100 DSPs: 147 fewer of 41 586)."""
        W, F = self.W, self.F

        def sat(rw):
            if self.nt.overflow != "AP_SAT":
                return f"x[{W - 1}:0]"
            hi, lo = (1 << (W - 1)) - 1, -(1 << (W - 1))
            return f"((x) > {_lit(hi, rw)} ? {_lit(hi, W)} : (x) < {_lit(lo, rw)} ? {_lit(lo, W)} : x[{W - 1}:0])"

        if F == 0:
            rnd = "(x)"
        elif self.nt.rounding == "AP_TRN":
            rnd = f"(x >>> {F})"
        else:  # nearest, ties to even
            rest = f" | (|x[{F - 2}:0])" if F >= 2 else ""
            rnd = f"((x >>> {F}) + $signed({{1'b0, x[{F - 1}] & (x[{F}]{rest})}}))"
        return ["  // the datapath's own operations: the exact value in a wire (<t>_ex), a product rounded (<t>_rd),",
                "  // then brought to W bits: q_sum_ and q_mul_ above, written out (so Verilator makes no",
                "  // temporaries per operation: ∇FD's simulation was 33 MB of C++ as function calls)",
                f"  `define RBD_Q_SUM(x) {sat(W + 1)}",
                f"  `define RBD_Q_RND(x) {rnd}",
                f"  `define RBD_Q_PROD(x) {sat(self._prod_rw())}"]

    def _prod_rw(self) -> int:
        """The width of a rounded product: the shifted product and the rounding's carry (_quant's r)."""
        return 2 * self.W if self.F == 0 else max(2 * self.W - self.F, self.W) + 1

    def _arith(self, op: str, a: list[str], out: str, note: str = "") -> list[str]:
        """``out`` = ``op`` of the operands ``a`` in the datapath type, as wires (``macros``)."""
        W = self.W
        end = f"  // {note}" if note else ""
        if op == "mul":
            return [f"  wire signed [{2 * W - 1}:0] {out}_ex = {a[0]} * {a[1]};",
                    f"  wire signed [{self._prod_rw() - 1}:0] {out}_rd = `RBD_Q_RND({out}_ex);",
                    f"  wire signed [{W - 1}:0] {out} = `RBD_Q_PROD({out}_rd);{end}"]
        e = f"-{a[0]}" if op == "neg" else f"{a[0]} {'+' if op == 'add' else '-'} {a[1]}"
        return [f"  wire signed [{W}:0] {out}_ex = {e};",
                f"  wire signed [{W - 1}:0] {out} = `RBD_Q_SUM({out}_ex);{end}"]

    def cordic_module(self, prefix: str) -> list[str]:
        """``module <prefix>_sincos``: the HLS target's CORDIC (rbdgen/targets/hls/cordic.py), its
        integer widths and constants, combinational (the kernel registers its result)."""
        c = cordic(self.W, self.nt.I)
        W, F, FI, WC, N = c.W, c.F, c.FI, c.WC, c.N
        lines = [f"// sin and cos of x by CORDIC: {N} rotations on {WC}-bit values with {FI} fractional bits,",
                 "// the integer arithmetic of the HLS target's rbd_sincos (rbdgen/targets/hls/cordic.py), bit for bit",
                 f"module {prefix}_sincos (",
                 f"  input wire signed [{W - 1}:0] x,",
                 f"  output wire signed [{W - 1}:0] s,",
                 f"  output wire signed [{W - 1}:0] c);"]
        lines += self._quant("q_from_cordic", WC, FI - F)
        KP, RP, WR = c.W_KPROD, c.W_RPROD, c.W_R
        lines += [f"  // quadrant k = round(x * 2/pi), with 2/pi to {c.M} bits",
                  f"  wire signed [{KP - 1}:0] xk = x;",
                  f"  wire signed [{KP - 1}:0] kp = xk * {_lit(c.C2PI, KP)} + {_lit(1 << (F + c.M - 1), KP)};",
                  f"  wire signed [{c.KW - 1}:0] k = kp >>> {F + c.M};",
                  f"  // r = x - k * pi/2 with {FI} fractional bits (pi/2 to {FI + c.L} bits)",
                  f"  wire signed [{RP - 1}:0] kk = k;",
                  f"  wire signed [{RP - 1}:0] kpi = kk * {_lit(c.PIO2, RP)} + {_lit(1 << (c.L - 1), RP)};",
                  f"  wire signed [{WR - 1}:0] xr = x;",
                  f"  wire signed [{WR - 1}:0] kps = kpi >>> {c.L};",
                  f"  wire signed [{WR - 1}:0] rw = (xr <<< {FI - F}) - kps;",
                  f"  wire signed [{WC - 1}:0] z0 = rw[{WC - 1}:0];",
                  f"  wire signed [{WC - 1}:0] x0 = {_lit(c.kinv, WC)};  // 1/gain",
                  f"  wire signed [{WC - 1}:0] y0 = {_lit(0, WC)};"]
        for i in range(N):
            a = _lit(c.atan[i], WC)
            sh = f" >>> {i}" if i else ""
            lines += [f"  // rotation {i}: by -+atan(2^-{i})",
                      f"  wire n{i} = z{i}[{WC - 1}];",
                      f"  wire signed [{WC - 1}:0] x{i + 1} = n{i} ? x{i} + (y{i}{sh}) : x{i} - (y{i}{sh});",
                      f"  wire signed [{WC - 1}:0] y{i + 1} = n{i} ? y{i} - (x{i}{sh}) : y{i} + (x{i}{sh});",
                      f"  wire signed [{WC - 1}:0] z{i + 1} = n{i} ? z{i} + {a} : z{i} - {a};"]
        lines += ["  // quadrant k mod 4 (the low bits of k): (sin, cos)(r + k pi/2)",
                  f"  wire signed [{WC - 1}:0] sr = k[0] ? (k[1] ? -x{N} : x{N}) : (k[1] ? -y{N} : y{N});",
                  f"  wire signed [{WC - 1}:0] cr = k[0] ? (k[1] ? y{N} : -y{N}) : (k[1] ? -x{N} : x{N});",
                  "  // to the datapath type, with its rounding and overflow modes",
                  "  assign s = q_from_cordic(sr);",
                  "  assign c = q_from_cordic(cr);",
                  "endmodule", ""]
        return lines

    def _div_steps(self) -> list[int]:
        """Quotient bits brought down by each step after the first (which brings down one): the
        cost model's ``div_bits`` a step, one in a last step if W − 2 is not a multiple of it."""
        r, rest = self.model.div_bits(), self.W - 2
        return [r] * (rest // r) + [1] * (rest % r)

    def _div_step(self, rem: str, qd: str, den: str, den3: str, bits: int, rem_out: str, qd_out: str,
                  tag: str) -> tuple[list[str], list[str]]:
        """One restoring step on the magnitudes bringing down ``bits`` (1 or 2) quotient bits:
        (wires, the two register assignments). Two bits: the partial remainder compared with 1, 2
        and 3 times the divisor at once, the digit the largest multiple it reaches."""
        W, L = self.W, self.W - 1
        if bits == 1:
            sh = f"sh{tag}"
            return ([f"  wire [{W}:0] {sh} = {{{rem}[{W - 1}:0], {qd}[{L - 1}]}};"],
                     [f"if ({sh} >= {{1'b0, {den}}}) begin {rem_out} <= {sh} - {{1'b0, {den}}}; "
                      f"{qd_out} <= ({qd} << 1) | 1'b1; end",
                      f"else begin {rem_out} <= {sh}; {qd_out} <= {qd} << 1; end"])
        sh, g = f"sh{tag}", f"g{tag}_"
        m1, m2, m3 = f"{{2'b0, {den}}}", f"{{1'b0, {den}, 1'b0}}", f"{{1'b0, {den3}}}"
        return ([f"  wire [{W + 1}:0] {sh} = {{{rem}[{W - 1}:0], {qd}[{L - 1}:{L - 2}]}};",
                 f"  wire {g}1 = {sh} >= {m1}, {g}2 = {sh} >= {m2}, {g}3 = {sh} >= {m3};"],
                [f"{rem_out} <= {g}3 ? {sh} - {m3} : {g}2 ? {sh} - {m2} : {g}1 ? {sh} - {m1} : {sh};",
                 f"{qd_out} <= ({qd} << 2) | {{{g}2, {g}3 | ({g}1 & ~{g}2)}};"])

    def divider_module(self, prefix: str) -> list[str]:
        """``module <prefix>_div``: a / b as the HLS target's ``rbd_div`` on ap_fixed computes it —
        the dividend's raw bits shifted left by F, divided by the divisor's, truncated toward
        zero, saturated to W bits; a zero divisor gives the format's extreme of a's sign (+max
        for a = 0) and sets ``dz``. Sequential restoring division on the magnitudes, in the cost
        model's ``divider="narrow"`` cycles from ``go`` to ``q``: a quotient that needs W bits or
        more saturates, and it does exactly when the dividend's magnitude without its low W − 1
        bits is at least the divisor's — one comparison, made beside the first step — so only
        the W − 1 quotient bits below are divided out, the remainder starting from the dividend's
        top F + 1 bits (less than the divisor unless the quotient saturates): the first bit, then
        two a cycle where the model fits a 4:1 choice of partial remainders in the cycle
        (:meth:`_div_step`), one otherwise."""
        W, F = self.W, self.F
        N, L = W + F, W - 1
        hi, lo = (1 << (W - 1)) - 1, -(1 << (W - 1))
        steps = self._div_steps()
        two = 2 in steps
        last = 1 + len(steps) + 1  # the step that signs and saturates
        cycles = self.model.div().cycles
        assert cycles == last + 1, (cycles, last)
        cw = max(1, (last + 1).bit_length())
        lines = [
            f"// a / b in ap_fixed<{W},{self.nt.I}> as rbd_div computes it: (A << {F}) / B truncated toward zero,",
            f"// saturated. |A << {F}| / |B| >= 2^{L} (saturated) iff |A << {F}| >> {L} >= |B|: one comparison;",
            f"// the {L} quotient bits below: one, then {'two' if two else 'one'} a cycle; "
            f"{cycles} cycles from go (the cycle a and b are valid) to q",
            f"module {prefix}_div (",
            "  input wire clk,",
            "  input wire go,",
            f"  input wire signed [{W - 1}:0] a,",
            f"  input wire signed [{W - 1}:0] b,",
            f"  output reg signed [{W - 1}:0] q,",
            "  output reg dz);",
            f"  wire signed [{N - 1}:0] num = {{a, {F}'b0}};",
            f"  wire [{N - 1}:0] num_mag = num[{N - 1}] ? -num : num;",
            f"  wire [{W - 1}:0] den_mag = b[{W - 1}] ? -b : b;",
            f"  reg [{L - 1}:0] qd;  // the dividend's low bits not yet brought down, then the quotient's",
            f"  reg [{W}:0] rem;  // starts as the dividend's top {F + 1} bits",
            f"  reg [{W - 1}:0] den;",
            *([f"  reg [{W}:0] den3;  // 3 x the divisor, from step 1"] if two else []),
            "  reg neg, zero, a_neg, big;",
            f"  reg [{cw - 1}:0] step;  // 0: idle; 1: the first quotient bit and the saturation test; "
            f"2..{last - 1}: the others; {last}: sign and saturation"]
        w1, a1 = self._div_step("rem", "qd", "den", "den3", 1, "rem", "qd", "1")
        lines += w1
        if two:
            w2, a2 = self._div_step("rem", "qd", "den", "den3", 2, "rem", "qd", "2")
            lines += w2
        lines += [
            "  always @(posedge clk) begin",
            "    if (go) begin",
            f"      qd <= num_mag[{L - 1}:0]; rem <= num_mag[{N - 1}:{L}]; den <= den_mag;",
            f"      neg <= a[{W - 1}] ^ b[{W - 1}]; zero <= (b == 0); a_neg <= a[{W - 1}];",
            "      step <= 1;",
            "    end else if (step == 1) begin",
            "      big <= (rem >= {1'b0, den});",
            *(["      den3 <= {1'b0, den} + {den, 1'b0};"] if two else []),
            *(f"      {x}" for x in a1),
            "      step <= step + 1'b1;"]
        n2 = steps.count(2)
        if n2:
            lines += [f"    end else if (step >= 2 && step <= {1 + n2}) begin",
                      *(f"      {x}" for x in a2),
                      "      step <= step + 1'b1;"]
        if len(steps) > n2:  # the remaining one-bit steps
            lines += [f"    end else if (step >= {2 + n2} && step <= {last - 1}) begin",
                      *(f"      {x}" for x in a1),
                      "      step <= step + 1'b1;"]
        lines += [
            f"    end else if (step == {last}) begin",
            "      dz <= zero;",
            f"      if (zero) q <= a_neg ? {_lit(lo, W)} : {_lit(hi, W)};",
            f"      else if (big) q <= neg ? {_lit(lo, W)} : {_lit(hi, W)};",
            "      else q <= neg ? -$signed({1'b0, qd}) : $signed({1'b0, qd});",
            "      step <= 0;",
            "    end",
            "  end",
            "endmodule",
            ""]
        return lines

    def divider_pipelined_module(self, prefix: str) -> list[str]:
        """``module <prefix>_divp``: :meth:`divider_module`'s quotient, fully pipelined (a new
        division every cycle): the same cycles from the cycle a and b are valid to the one q is —
        a stage that takes the magnitudes, one per step of :meth:`divider_module` (the first
        also makes the saturation test and 3 x the divisor), one that signs and saturates."""
        W, F = self.W, self.F
        N, L = W + F, W - 1
        hi, lo = (1 << (W - 1)) - 1, -(1 << (W - 1))
        steps = [1] + self._div_steps()
        two = 2 in steps
        S = len(steps)
        cycles = self.model.div().cycles
        assert cycles == S + 2, (cycles, S)
        lines = [
            f"// a / b in ap_fixed<{W},{self.nt.I}> as rbd_div computes it (see {prefix}_div), pipelined: a division",
            f"// enters every cycle, its quotient leaves {cycles} cycles later",
            f"module {prefix}_divp (",
            "  input wire clk,",
            f"  input wire signed [{W - 1}:0] a,",
            f"  input wire signed [{W - 1}:0] b,",
            f"  output reg signed [{W - 1}:0] q,",
            "  output reg dz);",
            f"  wire signed [{N - 1}:0] num = {{a, {F}'b0}};",
            f"  wire [{N - 1}:0] num_mag = num[{N - 1}] ? -num : num;",
            f"  // stage s = 0..{S}: qd_s the dividend's low bits not yet brought down, then the quotient's;",
            "  // rem_s the remainder; den_s the divisor's magnitude; f_s {a < 0, b == 0, a/b < 0, saturated}",
            f"  reg [{L - 1}:0] " + ", ".join(f"qd_{i}" for i in range(S + 1)) + ";",
            f"  reg [{W}:0] " + ", ".join(f"rem_{i}" for i in range(S + 1)) + ";",
            f"  reg [{W - 1}:0] " + ", ".join(f"den_{i}" for i in range(S + 1)) + ";",
            *([f"  reg [{W}:0] " + ", ".join(f"den3_{i}" for i in range(1, S + 1)) + ";  // 3 x the divisor"]
              if two else []),
            "  reg [3:0] " + ", ".join(f"f_{i}" for i in range(S + 1)) + ";",
            "  always @(posedge clk) begin",
            f"    qd_0 <= num_mag[{L - 1}:0]; rem_0 <= num_mag[{N - 1}:{L}]; den_0 <= b[{W - 1}] ? -b : b;",
            f"    f_0 <= {{a[{W - 1}], b == 0, a[{W - 1}] ^ b[{W - 1}], 1'b0}};",
            "  end"]
        for i, bits in enumerate(steps):
            wires, assigns = self._div_step(f"rem_{i}", f"qd_{i}", f"den_{i}", f"den3_{i}", bits,
                                            f"rem_{i + 1}", f"qd_{i + 1}", f"_{i}")
            carry = [f"den_{i + 1} <= den_{i};"]
            if i == 0:
                carry.append(f"f_{i + 1} <= {{f_{i}[3:1], rem_{i} >= {{1'b0, den_{i}}}}};")
                if two:
                    carry.append(f"den3_{i + 1} <= {{1'b0, den_{i}}} + {{den_{i}, 1'b0}};")
            else:
                carry.append(f"f_{i + 1} <= f_{i};")
                if two:
                    carry.append(f"den3_{i + 1} <= den3_{i};")
            lines += wires + [f"  always @(posedge clk) begin {' '.join(carry)}",
                              *(f"    {x}" for x in assigns), "  end"]
        lines += [
            "  always @(posedge clk) begin",
            f"    dz <= f_{S}[2];",
            f"    if (f_{S}[2]) q <= f_{S}[3] ? {_lit(lo, W)} : {_lit(hi, W)};",
            f"    else if (f_{S}[0]) q <= f_{S}[1] ? {_lit(lo, W)} : {_lit(hi, W)};",
            f"    else q <= f_{S}[1] ? -$signed({{1'b0, qd_{S}}}) : $signed({{1'b0, qd_{S}}});",
            "  end",
            "endmodule",
            ""]
        return lines

    # -- one kernel ------------------------------------------------------------------------------
    def kernel(self, kernel, prefix: str, robot: str, dsp_budget: int | None = None,
               ii: int | None = None, units_prefix: str | None = None) -> Module:
        """The module of one traced kernel: unshared (every operation its own operator, on the
        as-soon-as-possible schedule), within ``dsp_budget`` DSP48E2 slices (multipliers and
        CORDIC units shared on the list schedule of :func:`rbdgen.targets.hls.schedule.budget_design`),
        or unshared and pipelined (``ii=1``: a new state every cycle; every value carried to the
        cycles that read it through a delay line, pipelined dividers)."""
        W = self.W
        nt = self.nt
        up = units_prefix or prefix  # the CORDIC and divider modules' prefix (one set per format)
        pipelined = ii is not None
        if pipelined:
            if ii != 1:
                raise RbdgenError(f"--ii {ii}: the Verilog target pipelines at --ii 1 only (a new state every cycle)")
            if dsp_budget is not None:
                raise RbdgenError(f"--dsp-budget {dsp_budget} with --ii {ii}: a budget shares operators in the "
                                  "latency design, --ii pipelines every operation on its own operator; choose one")
            if kernel.post:
                raise RbdgenError(f"{kernel.name}: its dense products at --ii 1 would need n·m·k multipliers each "
                                  "(an element a cycle is the latency design's); not printed pipelined")
        for mm in kernel.post:
            if mm.scale not in (1.0, -1.0):
                raise RbdgenError(f"{kernel.name}: the Verilog target prints products scaled by ±1 only "
                                  f"({mm.out} is scaled by {mm.scale:g})")
        self.nodes = kernel.graph.nodes  # by id (ids are places in the list)
        if dsp_budget is None:
            kind, _, finish, start_of, ops = asap(kernel, self.model)
            length = max(finish.values(), default=0.0)
            bc = None
        else:
            kind, finish, start_of, ops, bc, length = self._budgeted(kernel, dsp_budget)
        shared = bc is not None
        main = math.ceil(length - 1e-9)  # the cycle the products start in (all their operands valid)
        epi = self._epilogue_plan(kernel, main, bc)
        length += epi["cycles"]
        latency = max(1, math.ceil(length - 1e-9))
        name = f"{prefix}_{kernel.name}"
        ins = [(a.name, a.size) for a in kernel.inputs]
        outs = [(a.name, a.size) for a in kernel.all_outputs]
        body: list[str] = []
        regs = 0
        counts: dict[str, int] = {}
        CNT_W = max(1, latency.bit_length() + 1)  # noqa: N806 (the cycle counter's width)

        # when each operation reads its operands, and from when its value is valid: a registered
        # operator's first cycle and the cycle its result leaves its last register; a chained one
        # reads and settles in one cycle (an adder the schedule starts before a cycle boundary and
        # ends after it reads its operands from their registers)
        def reads_in(n, x) -> int:
            return start_of[n.id] if x.cycles else self._settle(n.id, finish)

        avail = {n.id: (start_of[n.id] + x.cycles if x.cycles else self._settle(n.id, finish)) for n, x in ops}
        # the last cycle each value is read in: a value read after its cycle is read from a register
        # loaded in that cycle (unshared: a chained value only, pipelined ones stay; shared: every
        # value but a quotient, as the operators go on to other operations)
        last: dict[int, int] = {}
        for n, x in ops:
            c = reads_in(n, x)
            for a in n.args:
                src = self._source(a, kind)
                if src is not None and kind[src][0] == "op":
                    last[src] = max(last.get(src, -1), c)
        for _, vals_ in kernel.traced_arrays():  # outputs, and the products' operands
            for v in vals_:
                src = self._source(v.node, kind)
                if src is not None and kind[src][0] == "op":
                    last[src] = max(last.get(src, -1), latency)

        def stays(x) -> bool:  # the value stays valid once it is
            return not pipelined and (x.cls == "div" or (not shared and x.cycles > 0))

        need = {nid for nid, c in last.items() if c > avail[nid] and not stays(kind[nid][1])}
        # pipelined: the inputs too are carried to the cycles that read them
        in_last: dict[tuple, int] = {}
        if pipelined:
            for n, x in ops:
                for a in n.args:
                    o = self._origin(a, kind)
                    if kind[o.id][0] == "input":
                        in_last[(o.name, o.index)] = max(in_last.get((o.name, o.index), 0), reads_in(n, x))
            for _, vals_ in kernel.traced_arrays():
                for v in vals_:
                    o = self._origin(v.node, kind)
                    if kind[o.id][0] == "input":
                        in_last[(o.name, o.index)] = latency
        vals: dict = {}
        self.vals = vals

        def read(a, cycle: int) -> str:
            """The value of node ``a`` as an operation in ``cycle`` reads it."""
            k, x = kind[a.id]
            if k == "zero":
                return _lit(0, W)
            if k == "const":
                return self._const(a)
            if k == "input":
                return f"in_{a.name}_{a.index}" + (f"_d{cycle}" if pipelined and cycle > 0 else "")
            if k == "wire":
                return self._wire(a, kind, cycle, read)
            return _get(vals[a.id], cycle)

        def capture(direct: str, at: int, nid: int = -1) -> str:
            """A register of ``direct`` loaded at the end of cycle ``at``: unshared free-running (its
            operands stay), shared loaded in that cycle only; pipelined, a delay line to the last
            cycle that reads it (``<direct>_d1`` … valid in cycles ``at`` + 1 …)."""
            nonlocal regs
            if pipelined:
                depth = last[nid] - at
                regs += depth
                body.extend(self._delay(direct, depth))
                return None  # read through _get's delayed names, not one register
            regs += 1
            r = f"{direct}_r"
            body.append(f"  reg signed [{W - 1}:0] {r};")
            body.append(f"  always @(posedge clk) if (cycle == {_ulit(at, CNT_W)}) {r} <= {direct};" if shared
                        else f"  always @(posedge clk) {r} <= {direct};")
            return r

        # the shared operators: each operation of a class on the first instance free in its cycle
        units: dict[str, list] = {"mul": [], "sincos": []}   # instance → [(cycle, operands, comment)]
        unit_of: dict[int, int] = {}
        if shared:
            taken: dict[tuple, int] = {}
            for n, x in ops:
                if x.cls in units:
                    key = (x.cls, start_of[n.id])
                    unit_of[n.id] = taken.get(key, 0)
                    taken[key] = unit_of[n.id] + 1
            for cls in units:
                units[cls] = [[] for _ in range(max((v for (c, _), v in taken.items() if c == cls), default=0))]
        n_mul = max(len(units["mul"]), epi.get("units", 0) if shared else 0)
        units["mul"] += [[] for _ in range(n_mul - len(units["mul"]))]
        L_MUL = self.model.mul().cycles  # noqa: N806 (a shared multiplier is full width)

        dzs = []  # the dividers' zero-divisor flags
        quantised: set[str] = set()
        for n, x in ops:
            c = reads_in(n, x)
            t = f"t{n.id}"
            cls = x.cls
            counts[cls] = counts.get(cls, 0) + 1
            blk = n.block
            where = f"{blk.phase}" + (f", body {blk.body}" if blk and blk.body is not None else "") + \
                (f", level {blk.level}" if blk and blk.level is not None else "") if blk else ""
            if cls == "sincos":
                angle = read(n.args[0], c)
                if shared:
                    u = unit_of[n.id]
                    units["sincos"][u].append((c, [angle], where))
                    body.append(f"  wire signed [{W - 1}:0] {t}_sin = su{u}_s_p{x.cycles}, {t}_cos = su{u}_c_p{x.cycles};"
                                f"  // {where}: sin/cos of one angle on CORDIC unit {u}, cycles {c}..{c + x.cycles}")
                    parts = {"sin": f"{t}_sin", "cos": f"{t}_cos"}
                else:
                    u = f"u{n.id}"
                    body += [f"  // {where}: sin/cos of one angle, cycles {c}..{c + x.cycles} (CORDIC, {x.cycles} pipeline stages)",
                             f"  wire signed [{W - 1}:0] {u}_s, {u}_c;",
                             f"  {up}_sincos {u} (.x({angle}), .s({u}_s), .c({u}_c));"]
                    for part in ("s", "c"):
                        body += self._pipe(f"{u}_{part}", f"{u}_{part}", x.cycles)
                        regs += x.cycles
                    parts = {"sin": f"{u}_s_p{x.cycles}", "cos": f"{u}_c_p{x.cycles}"}
                for part, direct in parts.items():
                    reg = capture(direct, avail[n.id], n.id) if n.id in need else None
                    vals[(n.id, part)] = _Val(direct, avail[n.id], stays(x), reg, pipelined)
                vals[n.id] = vals[(n.id, n.op)]
                continue
            if cls == "div":
                a = [read(v, c) for v in n.args]
                u = f"d{n.id}"
                if pipelined:
                    body += [f"  // {where}: division, cycles {c}..{c + x.cycles} (pipelined divider)",
                             f"  wire signed [{W - 1}:0] {u}_q;",
                             f"  wire {u}_dz;",
                             f"  {up}_divp {u} (.clk(clk), .a({a[0]}), .b({a[1]}), .q({u}_q), .dz({u}_dz));"]
                    reg = capture(f"{u}_q", avail[n.id], n.id) if n.id in need else None
                    vals[n.id] = _Val(f"{u}_q", avail[n.id], False, reg, True)
                    if latency > avail[n.id]:  # the flag travels with its state to the outputs
                        body += self._delay(f"{u}_dz", latency - avail[n.id], 1)
                        dzs.append(f"{u}_dz_d{latency - avail[n.id]}")
                    else:
                        dzs.append(f"{u}_dz")
                    continue
                body += [f"  // {where}: division, cycles {c}..{c + x.cycles} (sequential divider)",
                         f"  wire signed [{W - 1}:0] {u}_q;",
                         f"  wire {u}_dz;",
                         f"  {up}_div {u} (.clk(clk), .go(running && cycle == {_ulit(c, CNT_W)}), .a({a[0]}), "
                         f".b({a[1]}), .q({u}_q), .dz({u}_dz));"]
                vals[n.id] = _Val(f"{u}_q", avail[n.id], True)
                dzs.append(f"{u}_dz")
                continue
            a = [read(v, c) for v in n.args]
            if shared and cls == "mul":
                u = unit_of[n.id]
                units["mul"][u].append((c, a, where))
                q = f"mu{u}_p{x.cycles}_q"  # the unit's product quantised once, for every operation on it
                if q not in quantised:
                    quantised.add(q)
                    body.append(f"  wire signed [{W - 1}:0] {q} = q_mul_(mu{u}_p{x.cycles});")
                body.append(f"  wire signed [{W - 1}:0] {t} = {q};  "
                            f"// {where}: mul on multiplier {u}, cycles {c}..{c + x.cycles}")
                reg = capture(t, avail[n.id], n.id) if n.id in need else None
                vals[n.id] = _Val(t, avail[n.id], False, reg)
                continue
            # mul, add, sub, neg; a multiply by −2^k, which the cost model prices as an adder, is
            # still a product here
            op = n.op if n.op in ("add", "sub", "neg") else "mul"
            if x.cycles:
                body += self._arith(op, a, f"{t}_c", f"{where}: {n.op}, cycles {c}..{c + x.cycles}")
                body += self._pipe(f"{t}_c", t, x.cycles)
                regs += x.cycles
                reg = capture(f"{t}_p{x.cycles}", avail[n.id], n.id) if pipelined and n.id in need else None
                vals[n.id] = _Val(f"{t}_p{x.cycles}", avail[n.id], not pipelined, reg, pipelined)
            else:
                s = avail[n.id]
                body += self._arith(op, a, t, f"{where}: cycle {s}")
                reg = capture(t, s, n.id) if n.id in need else None
                vals[n.id] = _Val(t, s, False, reg, pipelined)
        if shared:
            counts["mul"] = len(units["mul"])
            if units["sincos"]:
                counts["sincos"] = len(units["sincos"])
        # the products, after the straight-line datapath (their operands: its outputs and temps)
        arrays = {a.name: [(lambda c, v=v: read(v.node, c)) for v in vals_] for a, vals_ in kernel.traced_arrays()}
        epi_lines: list[str] = []
        if kernel.post:
            if not shared:  # k multipliers of their own
                units["ep"] = [[] for _ in range(epi["k"])]
            epi_lines, epi_regs = self._epilogue(kernel, epi, arrays, units, CNT_W)
            regs += epi_regs
            if not shared:
                counts["mul"] = counts.get("mul", 0) + epi["k"]
        # outputs: a value in its cycle or from its register, a product's element from its register
        out_lines = []
        for arr in kernel.all_outputs:
            for i, rd in enumerate(arrays[arr.name]):
                out_lines.append(f"  assign {arr.name}[{(i + 1) * W - 1}:{i * W}] = {rd(latency)};")
        unit_decl, unit_logic, unit_regs = self._units(units, up, CNT_W, L_MUL, shared)
        regs += unit_regs
        ports = ["  input wire clk,",
                 "  input wire start,  // takes the inputs (pipelined: a state at every edge start is high at)"
                 if pipelined else "  input wire start,  // takes the inputs; done falls",
                 *[f"  input wire [{n * W - 1}:0] {nm},  // {n} values, value i in bits [W(i+1)-1 : Wi]" for nm, n in ins],
                 *[f"  output wire [{n * W - 1}:0] {nm},  // {n} values, value i in bits [W(i+1)-1 : Wi]" for nm, n in outs],
                 *([f"  output wire div_by_zero,  // with {'valid' if pipelined else 'done'}: a divisor was zero "
                    "(its quotient saturated, as rbd_div's)"] if dzs else []),
                 f"  output wire valid  // high in cycle {latency} after a start: that state's outputs, one state a cycle"
                 if pipelined else
                 f"  output reg done  // high from cycle {latency} after start until the next start: the outputs are valid"]
        what = (f"{self.model.period and 1000.0 / self.model.period:g} MHz schedule: latency {latency} cycles "
                f"(schedule length {length:.2f})")
        if pipelined:
            what = f"pipelined, a state every cycle (II = 1), {what}"
        if shared:
            what = (f"within {dsp_budget} DSP48E2 ({len(units['mul'])} shared {self.model.mul().dsp}-slice multipliers"
                    + (f", {len(units['sincos'])} CORDIC unit(s)" if units["sincos"] else "")
                    + f"; {bc['dsp']} DSPs), " + what.replace("schedule:", "list schedule:"))
        head = [f"// {kernel.name} of robot {robot}: {kernel.doc}",
                f"// datapath ap_fixed<{W},{nt.I}> ({self.F} fractional bits, {nt.rounding}, {nt.overflow}), {what}",
                f"module {name} ("] + ports + [");"]
        inreg = []
        for nm, n in ins:
            inreg.append(f"  reg signed [{W - 1}:0] " + ", ".join(f"in_{nm}_{i}" for i in range(n)) + ";")
        inreg += ["  always @(posedge clk) begin" if pipelined else "  always @(posedge clk) if (start) begin"]
        for nm, n in ins:
            for i in range(n):
                inreg.append(f"    in_{nm}_{i} <= {nm}[{(i + 1) * W - 1}:{i * W}];")
        inreg += ["  end"]
        regs += sum(n for _, n in ins)
        for (nm, i), c in sorted(in_last.items()):  # pipelined: each input to the last cycle reading it
            inreg += self._delay(f"in_{nm}_{i}", c)
            regs += c
        cnt_w = CNT_W
        last_c = _ulit(latency - 1, cnt_w)
        ctl = [f"  // cycle count since start: done in cycle {latency}",
               f"  reg [{cnt_w - 1}:0] cycle;"]
        if pipelined:
            ctl = [f"  // which cycles hold a state: start's bit travels {latency} cycles to valid",
                   f"  reg [{latency}:0] live = 0;",
                   f"  always @(posedge clk) live <= {{live[{latency - 1}:0], start}};" if latency > 0 else "",
                   f"  assign valid = live[{latency}];"]
        elif dzs:  # the dividers start on the count: only while it runs
            ctl += ["  reg running = 1'b0;",
                    "  always @(posedge clk) begin",
                    "    if (start) begin cycle <= 0; done <= 1'b0; running <= 1'b1; end",
                    f"    else if (!done) begin cycle <= cycle + 1'b1; done <= (cycle == {last_c}); "
                    f"if (cycle == {last_c}) running <= 1'b0; end",
                    "  end"]
        else:
            ctl += ["  always @(posedge clk) begin",
                    "    if (start) begin cycle <= 0; done <= 1'b0; end",
                    f"    else if (!done) begin cycle <= cycle + 1'b1; done <= (cycle == {last_c}); end",
                    "  end"]
        if dzs:
            out_lines.append(f"  assign div_by_zero = {' | '.join(dzs)};")
        funcs = self.functions() + (self._acc_functions(epi) if kernel.post else []) + self.macros()
        undef = [f"  `undef {m}" for m in self.MACROS]  # another module's format may differ (--fixed auto)
        text = "\n".join(head + funcs + inreg + ctl + unit_decl + body + epi_lines + unit_logic + out_lines
                         + undef + ["endmodule", ""])
        return Module(name, text, ins, outs, latency, length, counts, regs, bc)

    def _budgeted(self, kernel, dsp_budget: int):
        """The shared design's schedule: (kind per node, finish per operation, start cycle per
        operation, the operations as (node, OpCost), the budget's figures, the datapath's length)
        — the list schedule ``inspect --cost --target hls --dsp-budget`` reports, every multiplier
        full width (any operation may land on any instance)."""
        from ..hls.cost import _classify
        from ..hls.schedule import budget_design

        bc, g, sch = budget_design(kernel, self.nt, 1000.0 / self.model.period, dsp_budget, divider="narrow")
        kind, _ = _classify(kernel, self.model)
        full = self.model.mul()
        finish: dict[int, float] = {}
        start_of: dict[int, int] = {}
        for i, nid in enumerate(g.ids):
            finish[nid] = sch.finish[i]
            start_of[nid] = math.floor(sch.start[i] + 1e-9)
        ops = []
        for n in kernel.live_nodes():
            k, x = kind[n.id]
            if k == "op":
                if x.cls == "mul":
                    x = full
                    kind[n.id] = ("op", x)
                ops.append((n, x))
        return kind, finish, start_of, ops, bc, sch.length

    def _units(self, units: dict, prefix: str, cnt_w: int, L: int, shared: bool):  # noqa: N803
        """The shared operators: declarations (before the datapath reads them), and each one's
        operand multiplexer (by the cycle count), operator and pipeline registers (after it, so
        every value a multiplexer picks is declared). Multipliers ``mu<i>`` (the straight-line
        datapath's and, shared, the products') and ``ep<i>`` (the products' own, unshared) give the
        exact 2W-bit product; CORDIC units ``su<i>`` sine and cosine. Their pipeline registers hold
        once ``done`` rises, so a value leaving one in the last cycle stays."""
        W = self.W
        decl, logic = [], []
        regs = 0
        sc_cycles = self.model.sincos().cycles
        for cls, insts in units.items():
            stem = {"mul": "mu", "ep": "ep", "sincos": "su"}[cls]
            for i, issues in enumerate(insts):
                u = f"{stem}{i}"
                issues = sorted(issues, key=lambda e: e[0])
                if [c for c, _, _ in issues] != sorted({c for c, _, _ in issues}):
                    raise AssertionError(f"{u}: two operations in one cycle")
                if cls == "sincos":
                    ports, L_u = [f"{u}_x"], sc_cycles  # noqa: N806
                    decl.append(f"  reg signed [{W - 1}:0] {u}_x;")
                    decl.append(f"  wire signed [{W - 1}:0] {u}_s, {u}_c;")
                    for part in ("s", "c"):
                        decl.append(f"  reg signed [{W - 1}:0] " + ", ".join(f"{u}_{part}_p{j}" for j in range(1, L_u + 1)) + ";")
                    regs += 2 * L_u
                else:
                    ports, L_u = [f"{u}_a", f"{u}_b"], L  # noqa: N806
                    decl.append(f"  reg signed [{W - 1}:0] {u}_a, {u}_b;")
                    decl.append(f"  reg signed [{2 * W - 1}:0] " + ", ".join(f"{u}_p{j}" for j in range(1, L + 1)) + ";")
                    regs += 2 * L
                what = {"mul": "multiplier", "ep": "multiplier of the products", "sincos": "CORDIC unit"}[cls]
                logic += [f"  // {what} {i}: {len(issues)} operation(s), operands by cycle",
                          "  always @* begin",
                          "    " + " ".join(f"{p} = {_lit(0, W)};" for p in ports),
                          "    case (cycle)"]
                for c, operands, note in issues:
                    sets = " ".join(f"{p} = {o};" for p, o in zip(ports, operands))
                    logic.append(f"      {_ulit(c, cnt_w)}: begin {sets} end  // {note}")
                logic += ["      default: ;", "    endcase", "  end"]
                if cls == "sincos":
                    logic.append(f"  {prefix}_sincos {u} (.x({u}_x), .s({u}_s), .c({u}_c));")
                    for part in ("s", "c"):
                        logic.append(f"  always @(posedge clk) if (!done) begin {u}_{part}_p1 <= {u}_{part};"
                                     + "".join(f" {u}_{part}_p{j} <= {u}_{part}_p{j - 1};" for j in range(2, L_u + 1))
                                     + " end")
                else:
                    logic.append(f"  always @(posedge clk) if (!done) begin {u}_p1 <= {u}_a * {u}_b;"
                                 + "".join(f" {u}_p{j} <= {u}_p{j - 1};" for j in range(2, L + 1)) + " end")
        return decl, logic, regs

    def _epilogue_plan(self, kernel, main: int, bc: dict | None) -> dict:
        """The products' timing as the cost model prices them (``kernel_cost``'s epilogue, and
        under a budget ``schedule._epilogue``): a step of ii cycles per ``per`` elements (of a
        row, whole rows of a product, or every element of every product at once:
        ``schedule.epilogue_steps``), each element's k products on ⌈k / ii⌉ multipliers, ⌈k / ii⌉
        a cycle (unshared: ii = per = 1, k multipliers of their own), summed in a chain of
        ⌈k · adder delay⌉ cycles after the last; the products one after the other from cycle
        ``main`` (or side by side in one step); the elements of a step starting in cycle c are
        final in their registers from cycle c + ii − 1 + it, it = L + ⌈k · adder delay⌉."""
        if not kernel.post:
            return {"cycles": 0}
        ks = {mm.k for mm in kernel.post}
        if len(ks) > 1 or len({mm.scale for mm in kernel.post}) > 1:
            raise RbdgenError(f"{kernel.name}: the Verilog target prints products of one inner size and sign only "
                              f"(this kernel's: {', '.join(f'{mm.out}: k={mm.k}, scale {mm.scale:g}' for mm in kernel.post)})")
        k = ks.pop()
        ii, per = (1, 1) if bc is None else bc["epilogue_plan"]
        mul, add = self.model.mul(), self.model.add()
        chain = math.ceil(k * add.chain - 1e-9) + add.cycles * k
        it = mul.cycles + chain
        steps, s, last = [], main, None
        for elems in epilogue_steps(kernel, per):
            p = elems[0][0] if len({e[0] for e in elems}) == 1 else -1
            if last is not None and p != last:  # the next product starts when the last one's sums are done
                s += it - 1
            steps.append((s, elems))
            s += ii
            last = p
        s += it - 1
        lanes = math.ceil(k / ii)
        width = max(len(e) for _, e in steps)
        return {"cycles": s - main, "k": k, "L": mul.cycles, "chain": chain, "it": it, "steps": steps,
                "neg": kernel.post[0].scale == -1.0, "ii": ii, "per": width, "lanes": lanes, "units": lanes * width}

    def _acc_functions(self, plan: dict) -> list[str]:
        """``q_acc(acc, p)``: one step of a product's sum, acc ∓ p (p exact, 2W bits) quantised once."""
        W, F = self.W, self.F
        op = "-" if plan["neg"] else "+"
        return self._quant("q_acc_", 2 * W + 1, F) + [
            f"  function automatic signed [{W - 1}:0] q_acc(input signed [{W - 1}:0] facc, input signed [{2 * W - 1}:0] fp);",
            f"    reg signed [{2 * W}:0] d;",
            f"    begin d = facc; d = (d <<< {F}) {op} fp; q_acc = q_acc_(d); end",
            "  endfunction"]

    def _epilogue(self, kernel, plan: dict, arrays: dict, units: dict, cnt_w: int) -> tuple[list[str], int]:
        """The products ``out = ±A · B`` as the HLS target's "dot" loop computes them in
        ap_fixed: each element from an accumulator of the datapath type, 0, then acc ∓= A[i][l] ·
        B[l][j] for l = 0 … k−1, every step the exact difference of the accumulator and the exact
        (2W-bit) product, quantised once. The products are issued to the multipliers (``units``:
        the shared ones, or k of their own) by the cycle count, delayed so that an element's k
        products meet, summed in order, and each element lands in its own register. ``arrays``:
        name → readers (cycle → expression) of the values the products read, extended here with
        each product's element registers."""
        W = self.W
        k, L, C, it, ii, per, lanes = (plan[x] for x in ("k", "L", "chain", "it", "ii", "per", "lanes"))
        op = "-" if plan["neg"] else "+"
        cls = "ep" if "ep" in units else "mul"
        stem = "ep" if cls == "ep" else "mu"
        together = len(plan["steps"]) == 1 and len(kernel.post) > 1
        what = ("side by side, every element at once" if together else
                f"{per} element(s) of a row" if per <= min(mm.m for mm in kernel.post) else
                f"{per // kernel.post[0].m} row(s)")
        lines = [f"  // ---- the products ({', '.join(f'{mm.out} = {op}{mm.a} · {mm.b}' for mm in kernel.post)}), dense, "
                 f"after the straight-line datapath: {what} every {ii} cycle(s), each element's {k} "
                 f"products on {lanes} multiplier(s) ({L} stages), summed in order in the datapath type "
                 f"({C} cycle(s)), as the HLS target's loop"]
        captures: dict[int, list] = {}  # cycle → the element registers loaded at its end
        regs = {mm.out: [f"ep_{mm.out}_{e}" for e in range(mm.n * mm.m)] for mm in kernel.post}
        for c0, elems in plan["steps"]:
            for r, (p, i, j) in enumerate(elems):
                mm = kernel.post[p]
                A, B = arrays[mm.a], arrays[mm.b]
                for l in range(k):  # noqa: E741
                    g, lane = divmod(l, lanes)
                    c = c0 + g
                    units[cls][r * lanes + lane].append(
                        (c, [A[i * k + l](c), B[l * mm.m + j](c)], f"{mm.out}[{i}][{j}], product {l}"))
                done_at = c0 + ii - 1 + it  # the element is final from this cycle
                end = f"ep_c{r}_s{k}_p{C - 1}" if C > 1 else f"ep_c{r}_s{k}"
                captures.setdefault(done_at - 1, []).append(f"{regs[mm.out][i * mm.m + j]} <= {end};")
            for p in {p for p, _, _ in elems}:  # a later product may read this one's registers
                mm = kernel.post[p]
                arrays[mm.out] = [(lambda c, x=x: x) for x in regs[mm.out]]
        n_regs = 0
        if ii > 1:  # the earlier groups' products wait for the last group's
            for u in range(per * lanes):
                d = [f"{stem}{u}_d{j}" for j in range(1, ii)]
                lines += [f"  reg signed [{2 * W - 1}:0] {', '.join(d)};",
                          f"  always @(posedge clk) begin {d[0]} <= {stem}{u}_p{L};"
                          + "".join(f" {d[j]} <= {d[j - 1]};" for j in range(1, ii - 1)) + " end"]
                n_regs += 2 * (ii - 1)
        for r in range(per):
            lines.append(f"  wire signed [{W - 1}:0] ep_c{r}_s0 = {_lit(0, W)};")
            for l in range(k):  # noqa: E741
                g, lane = divmod(l, lanes)
                delay = ii - 1 - g
                src = f"{stem}{r * lanes + lane}_p{L}" if delay == 0 else f"{stem}{r * lanes + lane}_d{delay}"
                lines.append(f"  wire signed [{W - 1}:0] ep_c{r}_s{l + 1} = q_acc(ep_c{r}_s{l}, {src});")
            if C > 1:
                lines += self._pipe(f"ep_c{r}_s{k}", f"ep_c{r}_s{k}", C - 1)
                n_regs += C - 1
        elements = [r for mm in kernel.post for r in (x(0) for x in arrays[mm.out])]
        lines += [f"  reg signed [{W - 1}:0] " + ", ".join(elements) + ";",
                  "  // each element's register loads in the last cycle of its sum",
                  "  always @(posedge clk) begin", "    case (cycle)",
                  *(f"      {_ulit(c, cnt_w)}: begin {' '.join(x)} end" for c, x in sorted(captures.items())),
                  "      default: ;", "    endcase", "  end"]
        return lines, n_regs + len(elements)

    @staticmethod
    def _settle(nid: int, finish: dict) -> int:
        """The cycle a chained value settles in (one ending exactly on a boundary settles in the
        cycle before it)."""
        return max(0, math.ceil(finish[nid] - 1e-9) - 1)

    def _source(self, node, kind):
        """The operation whose value ``node`` is (through wires), or None (constant, input)."""
        while True:
            k, x = kind[node.id]
            if k == "op":
                return node.id
            if k != "wire":
                return None
            node = self.nodes[x]

    def _const(self, n) -> str:
        return _lit(quantise(n.value, self.W, self.nt.I, self.nt.rounding, self.nt.overflow), self.W)

    def _wire(self, n, kind, cycle, read) -> str:
        """A node the cost model prices as a wire: x + 0, x − 0, x · 1, x · 2^k (a product all the
        same: a shift right rounds), or the second of an angle's sine and cosine."""
        _, x = kind[n.id]
        if n.op in ("sin", "cos"):  # the other of an angle's pair: the CORDIC's other output
            return _get(self.vals[(x, n.op)], cycle)
        if n.op == "mul":
            return f"q_mul({read(n.args[0], cycle)}, {read(n.args[1], cycle)})"
        return read(self.nodes[x], cycle)

    def _delay(self, src: str, depth: int, width: int | None = None) -> list[str]:
        """A free-running delay line of ``depth`` registers after ``src``: ``<src>_d1`` …
        ``<src>_d<depth>`` (synthesis maps long ones to shift-register LUTs)."""
        if depth <= 0:
            return []
        w = width or self.W
        regs = ", ".join(f"{src}_d{i}" for i in range(1, depth + 1))
        return [f"  reg {'signed ' if w > 1 else ''}[{w - 1}:0] {regs};" if w > 1 else f"  reg {regs};",
                f"  always @(posedge clk) begin {src}_d1 <= {src};"
                + "".join(f" {src}_d{i} <= {src}_d{i - 1};" for i in range(2, depth + 1)) + " end"]

    def _origin(self, node, kind):
        """The node whose value ``node`` is, through wires (an operation, constant or input)."""
        while kind[node.id][0] == "wire":
            node = self.nodes[kind[node.id][1]]
        return node

    def _pipe(self, src: str, stem: str, stages: int, width: int | None = None) -> list[str]:
        """``stages`` free-running registers after ``src``: ``<stem>_p1`` … ``<stem>_p<stages>``."""
        regs = ", ".join(f"{stem}_p{i}" for i in range(1, stages + 1))
        return [f"  reg signed [{(width or self.W) - 1}:0] {regs};",
                f"  always @(posedge clk) begin {stem}_p1 <= {src};"
                + "".join(f" {stem}_p{i} <= {stem}_p{i - 1};" for i in range(2, stages + 1)) + " end"]


def _ulit(v: int, w: int) -> str:
    return f"{w}'d{v}"


def verilog_kernels(model, kernels, nt, clock_mhz: float, prefix: str, progress=None,
                    dsp_budget: int | None = None, ii: int | None = None,
                    formats: dict | None = None) -> tuple[list[Module], dict]:
    """The modules of ``kernels`` (each within ``dsp_budget`` DSP48E2 slices, or pipelined at
    ``ii`` = 1, if given), and the texts of the units they share: {"sincos": the CORDIC module,
    "div": the divider module, and pipelined "divp": the pipelined divider}. ``formats``: kernel →
    its own datapath type (``--fixed auto``); where they differ, each format has its own units,
    keyed ``w<W>i<I>_sincos`` … (modules ``<prefix>_w<W>i<I>_sincos`` …)."""
    from ... import registry
    from ...codegen import escape as esc

    nts = {k: (formats or {}).get(k, nt) for k in kernels}
    emitters = {}  # one per format; the design's own when there are no kernels
    for x in list(nts.values()) or [nt]:
        emitters.setdefault((x.W, x.I), _Emitter(x, clock_mhz))

    def tag(w, i):
        return "" if len(emitters) == 1 else f"w{w}i{i}_"

    mods = []
    for k in kernels:
        if progress:
            progress(f"tracing {k}")
        kern = registry.trace(model, k)
        if progress:
            progress(f"printing {k}")
        x = nts[k]
        t = tag(x.W, x.I)
        mods.append(emitters[(x.W, x.I)].kernel(kern, prefix, esc.comment(model.name), dsp_budget, ii,
                                                units_prefix=f"{prefix}_{t}".rstrip("_")))
    units = {}
    for (w, i), em in sorted(emitters.items()):
        t = tag(w, i)
        up = f"{prefix}_{t}".rstrip("_")
        units[f"{t}sincos"] = "\n".join(em.cordic_module(up))
        units[f"{t}div"] = "\n".join(em.divider_module(up))
        if ii is not None:
            units[f"{t}divp"] = "\n".join(em.divider_pipelined_module(up))
    return mods, units
