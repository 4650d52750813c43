"""The fixed-point sine and cosine of the HLS kernels: one CORDIC per joint angle, generated as
straight-line integer code, the same in C simulation and in hardware.

Why our own: the HLS math library's fixed-point ``hls::sin``/``hls::cos`` are templates over
``ap_fixed<W, I>`` with the default quantisation and overflow modes only (and W − I ≤ 32,
I ≤ 33), so with our ``AP_RND_CONV, AP_SAT`` datapath type the call is ambiguous and synthesis
fails; and C simulation could only call ``std::sin`` in double and round once (an ideal operator
that flatters the accuracy sweep). This CORDIC is written with ``ap_int`` shifts and adds, so
the C simulation runs the hardware's arithmetic bit for bit, for every width up to 64 bits.

The method (textbook CORDIC in rotation mode; parameters from an error budget, below):

1. Range reduction. ``X`` is the raw W-bit integer of x (x = X·2⁻ᶠ, F = W − I fractional
   bits). ``k = round(x·2/π)`` from one product with ``C = round(2/π·2ᴹ)``, M = I + 3: k may be
   off by one near a boundary between quadrants, which only leaves |r| ≤ 0.89 rad, well inside
   CORDIC's convergence range (1.74 rad). Then ``r = x − k·π/2`` with FI = F + G fractional bits,
   π/2 carried to FI + L bits (L = bits of k + 2) so that k·π/2 is exact to ⅛ of r's last bit for
   every k the format can produce.
2. N = F + 3 rotations by ±atan(2⁻ⁱ) from (K⁻¹, 0), K⁻¹ = Π cos(atan 2⁻ⁱ) rounded to FI bits:
   x → cos r, y → sin r. The angle left after N rotations is below atan(2¹⁻ᴺ) < 2⁻⁽ᶠ⁺²⁾.
3. The quadrant k mod 4 swaps and negates (sin r, cos r); the result is converted to the
   datapath type with *its* quantisation and overflow modes (an ``ap_fixed`` assignment).

Error budget (F fractional bits out): the truncated angle ≤ 2⁻⁽ᶠ⁺²⁾; rounding in the N
shift-adds of x and y, each ≤ 2⁻ᶠᴵ and amplified by at most the CORDIC gain 1.65, ≤ 1.65·N·2⁻ᶠᴵ;
G = ⌈log₂ N⌉ + 3 guard bits keep that below 2⁻⁽ᶠ⁺²⁾ too. So the value before the final
conversion is within 2⁻⁽ᶠ⁺¹⁾ of the exact sine/cosine of the quantised input, and the output is
within one quantum 2⁻ᶠ with a rounding mode (half a quantum of conversion), 1.5 quanta with a
truncating one. ``tests/test_hls_trig.py`` measures it against mpmath, exhaustively on 16-bit
formats.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

from ...codegen.trig import _half_pi


def _atan_pow2(i: int, bits: int) -> Fraction:
    import mpmath

    with mpmath.workprec(bits + 16):
        man, exp = (+mpmath.atan(mpmath.mpf(2) ** -i)).man_exp
    return Fraction(man) * Fraction(2) ** exp


def _inv_gain(n: int, bits: int) -> Fraction:
    import mpmath

    with mpmath.workprec(bits + 16):
        p = mpmath.mpf(1)
        for i in range(n):
            p *= mpmath.cos(mpmath.atan(mpmath.mpf(2) ** -i))
        man, exp = (+p).man_exp
    return Fraction(man) * Fraction(2) ** exp


def _round(x: Fraction) -> int:
    return math.floor(x + Fraction(1, 2))


@dataclass(frozen=True)
class Cordic:
    """The CORDIC of an ``ap_fixed<W, I>`` datapath: sizes and constants (all exact integers)."""

    W: int
    I: int  # noqa: E741 (the HLS name)

    @property
    def F(self) -> int:
        return self.W - self.I

    @property
    def N(self) -> int:
        """rotations"""
        return self.F + 3

    @property
    def G(self) -> int:
        """guard bits of the internal values"""
        return math.ceil(math.log2(self.N)) + 3

    @property
    def FI(self) -> int:
        """fractional bits of the internal values (r, x, y, z)"""
        return self.F + self.G

    @property
    def WC(self) -> int:
        """width of x, y and z: |x|, |y| < 1.65 (the gain), |z| < 1.74, with a bit to spare"""
        return self.FI + 3

    @property
    def M(self) -> int:
        """fractional bits of 2/π in the quadrant estimate"""
        return self.I + 3

    @property
    def KW(self) -> int:
        """width of k: |k| ≤ |x|·2/π + 1 < 2^(I−1)"""
        return self.I + 2

    @property
    def L(self) -> int:
        """extra bits of π/2 beyond FI (so that k·π/2 is exact to 1/8 of r's last bit)"""
        return self.KW + 2

    @property
    def C2PI(self) -> int:
        return _round(Fraction(2) / (2 * _half_pi()) * 2 ** self.M)

    @property
    def PIO2(self) -> int:
        return _round(_half_pi() * 2 ** (self.FI + self.L))

    @functools.cached_property
    def atan(self) -> tuple:
        return tuple(_round(_atan_pow2(i, self.FI) * 2 ** self.FI) for i in range(self.N))

    @functools.cached_property
    def kinv(self) -> int:
        return _round(_inv_gain(self.N, self.FI) * 2 ** self.FI)

    # widths of the range reduction's intermediate values
    @property
    def W_KPROD(self) -> int:
        """X·C2PI (+ rounding), signed"""
        return self.W + self.M + 3

    @property
    def W_RPROD(self) -> int:
        """k·PIO2 (+ rounding), signed"""
        return self.KW + self.FI + self.L + 3

    @property
    def W_R(self) -> int:
        """X shifted to FI fractional bits, and r before it is narrowed to WC bits"""
        return self.I + self.FI + 2

    # -- the C++ ----------------------------------------------------------------------------
    def c_function(self, name: str, data_t: str, shared: bool = False) -> list[str]:
        """The lines of ``void name(const data_t x, data_t& s, data_t& c)`` (a header function:
        ``static inline``, ``INLINE`` in synthesis, so each call is its own unrolled datapath;
        ``shared``: not inlined and pipelined, one unit that takes an angle per cycle, so that an
        ``ALLOCATION function`` limit can share it — the DSP-budget design)."""
        W, F, FI, WC, N = self.W, self.F, self.FI, self.WC, self.N
        lines = [
            f"// sin and cos of x by CORDIC: {N} rotations on {WC}-bit values with {FI} fractional bits; the same",
            "// integer arithmetic in C simulation and in hardware (rbdgen/targets/hls/cordic.py: method, error bound)",
            f"static inline void {name}(const {data_t} x, {data_t}& s, {data_t}& c) {{",
            *(["#pragma HLS INLINE off", "#pragma HLS PIPELINE II=1"] if shared else ["#pragma HLS INLINE"]),
            f"  ap_int<{W}> X;  // the raw bits of x: x = X * 2^-{F}",
            f"  X.range({W - 1}, 0) = x.range({W - 1}, 0);",
            f"  // quadrant k = round(x * 2/pi), with 2/pi to {self.M} bits",
            f"  const ap_int<{self.W_KPROD}> kp = ap_int<{self.W_KPROD}>(X) * {_c_int(self.C2PI, self.M + 2)} + "
            f"{_c_int(1 << (F + self.M - 1), self.W_KPROD)};",  # half of 2^(F+M): round to nearest
            f"  const ap_int<{self.KW}> k = kp >> {F + self.M};",
            f"  // r = x - k * pi/2 with {FI} fractional bits (pi/2 to {FI + self.L} bits)",
            f"  const ap_int<{self.W_RPROD}> kpi = ap_int<{self.W_RPROD}>(k) * {_c_int(self.PIO2, self.FI + self.L + 2)} + "
            f"{_c_int(1 << (self.L - 1), self.W_RPROD)};",
            f"  const ap_int<{self.W_R}> rw = (ap_int<{self.W_R}>(X) << {FI - F}) - ap_int<{self.W_R}>(kpi >> {self.L});",
            f"  const ap_int<{WC}> z0 = rw;  // |r| < 0.9: the high bits are sign",
            f"  const ap_int<{WC}> x0 = {_c_int(self.kinv, WC)};  // 1/gain",
            f"  const ap_int<{WC}> y0 = 0;",
        ]
        for i in range(N):
            a = _c_int(self.atan[i], WC)
            sh = f" >> {i}" if i else ""
            lines += [
                f"  // rotation {i}: by -+atan(2^-{i})",
                f"  const bool n{i} = z{i} < 0;",
                f"  const ap_int<{WC}> x{i + 1} = n{i} ? ap_int<{WC}>(x{i} + (y{i}{sh})) : ap_int<{WC}>(x{i} - (y{i}{sh}));",
                f"  const ap_int<{WC}> y{i + 1} = n{i} ? ap_int<{WC}>(y{i} - (x{i}{sh})) : ap_int<{WC}>(y{i} + (x{i}{sh}));",
                f"  const ap_int<{WC}> z{i + 1} = n{i} ? ap_int<{WC}>(z{i} + {a}) : ap_int<{WC}>(z{i} - {a});",
            ]
        lines += [
            "  // quadrant k mod 4 (the low bits of k): (sin, cos)(r + k pi/2)",
            "  const bool k0 = k[0], k1 = k[1];",
            f"  const ap_int<{WC}> sr = k0 ? (k1 ? ap_int<{WC}>(-x{N}) : x{N}) : (k1 ? ap_int<{WC}>(-y{N}) : y{N});",
            f"  const ap_int<{WC}> cr = k0 ? (k1 ? y{N} : ap_int<{WC}>(-y{N})) : (k1 ? ap_int<{WC}>(-x{N}) : x{N});",
            "  // to the datapath type, with its rounding and overflow modes",
            f"  ap_fixed<{WC}, {WC - FI}, AP_TRN, AP_WRAP> sf, cf;",
            f"  sf.range({WC - 1}, 0) = sr.range({WC - 1}, 0);",
            f"  cf.range({WC - 1}, 0) = cr.range({WC - 1}, 0);",
            "  s = sf;",
            "  c = cf;",
            "}",
        ]
        return lines

    # -- what the cost model needs -----------------------------------------------------------
    def adder_stages(self) -> int:
        """adder delays on the path after the two products: r, the N rotations, the quadrant's
        negation, the conversion's rounding"""
        return 1 + self.N + 2

    def adders(self) -> int:
        """adders/subtracters of the unrolled datapath (3 per rotation, the reduction's, the
        quadrant negations, the two roundings)"""
        return 3 * self.N + 3 + 2 + 2

    def const_products(self) -> tuple:
        """(width of the variable operand, the constant) of the range reduction's two products"""
        return ((self.W, self.C2PI), (self.KW, self.PIO2))


def _c_int(v: int, width: int) -> str:
    """An integer constant as a signed ``ap_int<width>`` expression; wider than 62 bits it is
    assembled from 62-bit pieces (C++ has no wider literal)."""
    if -(1 << 62) <= v < (1 << 62):
        return f"ap_int<{width}>({v}LL)"
    neg, v = v < 0, abs(v)
    pieces = []
    while v:
        pieces.append(v & ((1 << 62) - 1))
        v >>= 62
    expr = f"ap_int<{width}>({pieces[-1]}LL)"
    for p in reversed(pieces[:-1]):
        expr = f"((({expr}) << 62) + ap_int<{width}>({p}LL))"
    return f"(-{expr})" if neg else expr


@functools.lru_cache(maxsize=None)
def cordic(W: int, I: int) -> Cordic:  # noqa: E741
    return Cordic(W, I)
