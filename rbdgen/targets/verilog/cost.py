"""LUTs of a Verilog module as this target writes it, priced operator by operator with what Yosys
makes of each operator alone (issue 48: the cost model calibrated from synthesis).

The HLS cost model (:mod:`rbdgen.targets.hls.cost`) prices the design an HLS tool would make; its
LUTs were 1.8–5.5× under what Yosys 0.23 (``synth_xilinx -family xcup``) made of this target's
modules (docs/verilog.md, "Synthesis by Yosys"): a 32-bit product takes two DSP48E2 columns whose
partial products are summed in LUTs, then is rounded and saturated; an adder saturates with two
comparisons. :data:`OPERATOR_LUTS` holds each operator's LUTs as ``benchmarks/rtl_operators.py``
measured them (the operator written as :mod:`.emit` writes it, four copies, registers around;
benchmarks/results/rtl_operators.md), and :func:`module_luts` adds them up over the operators a
module *as written* holds: every ``<t>_ex`` wire (a product — by a constant, priced by the
constant's bits — a sum, a difference or a negation), every shared multiplier (its product
rounded once) with its operand multiplexers (two W-bit s:1 multiplexers, s the operations on
it: ⌈(s − 1)/3⌉ LUT6 a bit, the HLS model's price), every CORDIC and divider instance. The
registers, the cycle counter and the capture enables are not priced.

Against the whole designs' synthesis (benchmarks/results/rtl.md, iiwa, 32,16): −4 % … +12 %
(forward kinematics +1 %, rnea +3 %, crba +12 %, aba +10 %, rnea pipelined +2 %, rnea within 100
DSPs −4 %, ∇FD within 200 DSPs +8 %), where the HLS model said 1.8–5.5× less. Yosys shares some
logic between operators (crba's and aba's products of a common operand) that a sum of operators
alone cannot see. Calibrated at ap_fixed<32,16> only: other formats get no estimate (None).
"""
from __future__ import annotations

import re

#: the format the operators were measured in
CALIBRATED_FORMAT = (32, 16)

#: LUTs per operator, Yosys 0.23 synth_xilinx -family xcup, ap_fixed<32,16>, each alone
#: (benchmarks/results/rtl_operators.md, 2026-11-28): a product of two variables (four DSP48E2 and
#: the partial products' sum, rounding, saturation); a sum or difference (33 bits, saturated); a
#: negation; the CORDIC (15 rotations, combinational), the divider (18 cycles, two quotient bits a
#: cycle) and the pipelined divider of --ii 1 (18 stages), one module each
OPERATOR_LUTS = {"mul": 167.5, "add": 78.0, "sub": 78.0, "neg": 46.0, "sincos": 1964.0, "div": 492.0,
                 "divp": 3588.0}
#: a product by a constant: (the constant's bits, LUTs), measured; linear between points. Up to 17
#: bits the constant takes one row of DSP48E2 (two slices), from 18 two rows (four)
CONST_MUL_LUTS = ((2, 52.5), (5, 60.5), (9, 68.25), (13, 76.25), (17, 84.0), (18, 124.5), (24, 146.5),
                  (27, 157.25), (31, 167.5))

_EX = re.compile(r"^\s*wire signed \[\d+:0\] \w+_ex = (.+?);", re.M)
_CONST_OPERAND = re.compile(r"^(\S+) \* -?\d+'sd(\d+)$")


def const_mul_luts(bits: int) -> float:
    """LUTs of a product by a constant of ``bits`` bits (:data:`CONST_MUL_LUTS`)."""
    pts = CONST_MUL_LUTS
    if bits <= pts[0][0]:
        return pts[0][1]
    for (b0, l0), (b1, l1) in zip(pts, pts[1:]):
        if bits <= b1:
            if b1 == 18 and bits <= 17:  # one row of DSPs up to 17 bits
                return l0
            return l0 + (l1 - l0) * (bits - b0) / (b1 - b0)
    return OPERATOR_LUTS["mul"]


def count_operators(text: str, prefix: str) -> dict:
    """The operators of one module's text (``prefix``: the design's, e.g. ``rbd_iiwa14``): ``mul``,
    ``cmul`` (by a constant: the list of the constants' bits), ``add``, ``neg``, the shared
    multipliers ``units`` (the operations each takes), ``sincos``, ``div``, ``divp``."""
    c = {"mul": 0, "cmul": [], "add": 0, "neg": 0, "units": [], "sincos": 0, "div": 0, "divp": 0}
    for e in _EX.findall(text):
        m = _CONST_OPERAND.match(e)
        if m:
            c["cmul"].append(int(m.group(2)).bit_length())
        elif " * " in e:
            c["mul"] += 1
        elif e.startswith("-") and " " not in e:
            c["neg"] += 1
        else:
            c["add"] += 1
    for u in sorted(set(re.findall(r"\b((?:mu|ep)\d+)_p1 <= ", text))):
        c["units"].append(max(0, len(re.findall(rf"\b{u}_a = ", text)) - 1))  # the cases, less the default
    for unit in ("sincos", "div", "divp"):
        c[unit] = len(re.findall(rf"^\s*{re.escape(prefix)}_{unit}\s+\w+\s*\(", text, re.M))
    return c


def module_luts(text: str, prefix: str, W: int, I: int) -> tuple[int | None, dict]:  # noqa: E741
    """(LUTs of the module as written, its operators): None where the format is not
    :data:`CALIBRATED_FORMAT`."""
    c = count_operators(text, prefix)
    if (W, I) != CALIBRATED_FORMAT:
        return None, c
    L = OPERATOR_LUTS
    lut = (c["mul"] * L["mul"] + sum(const_mul_luts(b) for b in c["cmul"]) + c["add"] * L["add"]
           + c["neg"] * L["neg"] + c["sincos"] * L["sincos"] + c["div"] * L["div"] + c["divp"] * L["divp"])
    # a shared multiplier: its product (rounded once) and two W-bit s:1 operand multiplexers
    lut += sum(L["mul"] + 2 * W * -(-(max(s, 1) - 1) // 3) for s in c["units"])
    return int(round(lut)), c
