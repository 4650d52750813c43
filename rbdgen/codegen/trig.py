"""Constants of the CPU kernels' sine/cosine (``templates/cpu/sincos.h.j2``), computed here from
their definitions rather than typed in, so a reader can check each one.

Why our own sine and cosine: the unrolled kernels spend most of their time in libm. On the
2-core EPYC of ``benchmarks/results``, iiwa14's rnea takes 179 ns per state of which ~90 ns are
its seven ``sincos`` calls, and the SIMD batch path ran them one lane at a time (176 ns per state
with trigonometry, 52 ns with it stubbed out). One branch-free range reduction and two short
polynomials, written over the same scalar-or-vector type as the kernel, run in the SIMD lanes
and inline into the kernel where the out-of-order core overlaps them with other work.

The method (textbook, nothing copied):

- ``k = round(x · 2/π)`` by the add-and-subtract-1.5·2⁵² trick (exact for |x·2/π| < 2⁵¹; needs
  no SSE4.1 round instruction), whose low mantissa bits also hold ``k mod 4``, the quadrant.
- ``r + r_lo = x − k·π/2`` in double-double (Cody–Waite): π/2 is split into C1 + C2 + C3 + C4
  where C1…C3 have at most 33 significant bits, so ``k·Ci`` is exact for |k| < 2²⁰, and C4
  carries the next 53 bits (152 bits of π/2 in all). ``x − k·C1`` is exact (Sterbenz);
  ``p = k·C2 + k·C3`` is summed first, exactly (Fast2Sum: |k·C2| ≥ |k·C3|), with ``k·C4`` in its
  tail, and only then subtracted: ``r = (x − k·C1) − p`` is two dependent operations after
  ``k·C2``, and the polynomials start from it while the exact TwoSum error of that subtraction
  (minus ``p``'s tail) becomes ``r_lo`` beside them. Latency, not operation count, is what this
  order buys: every kernel of one state starts with its joint angles' sines and cosines, and a
  dependent 4-angle call went from ~115 to ~80 cycles, ~65 inlined (docs/performance.md §24). The
  absolute error of ``r + r_lo`` is ~2⁻¹⁰⁵, so even the doubles closest to a multiple of π/2 below the
  fast-path limit (|r| ≈ 2⁻⁶⁰·⁵ for |x| < 2¹⁷, found by the test) keep a relative error far below
  an ulp; ``r_lo`` need not be below an ulp of ``r`` (it is when the cancellation is shallow), it
  enters to first order.
- On |r| ≤ π/4 (a hair more after rounding k): Taylor series of sin to r¹⁷ and of cos to r¹⁸;
  the first omitted terms are below 10⁻¹⁹ relative, so the series' truncation costs nothing
  and no fitted (minimax) coefficients are needed. Both are evaluated by Estrin's scheme.
- Beyond the fast-path limit (|x| > 2¹⁷, inf, NaN) the lane falls back to ``std::sin`` /
  ``std::cos``: correct over the whole double range.

``tests/test_sincos.py`` measures the error in ulps against mpmath (random arguments over the
whole range, and the doubles nearest to every multiple of π/2 below the limit) and checks these
constants against their definitions.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

#: arguments with |x| above this take std::sin/std::cos (|k| < 2^17 · 2/π < 2^20 below it)
FAST_LIMIT = 2.0 ** 17
#: significant bits of C1, C2, C3 (so that k·Ci is exact for |k| < 2^20)
SPLIT_BITS = 33
#: highest power in the sine series (odd) and the cosine series (even)
SIN_DEGREE = 17
COS_DEGREE = 18


def _half_pi(bits: int = 240) -> Fraction:
    import mpmath

    with mpmath.workprec(bits):
        man, exp = (+mpmath.pi).man_exp
    return Fraction(man) * Fraction(2) ** exp / 2  # π to ``bits`` bits, exactly as a fraction


def _round_bits(x: Fraction, bits: int) -> float:
    """``x`` rounded to a float of at most ``bits`` significant bits (round to nearest)."""
    if x == 0:
        return 0.0
    e = math.floor(math.log2(abs(x)))
    scale = Fraction(2) ** (bits - 1 - e)
    return float(Fraction(round(x * scale)) / scale)


def half_pi_split() -> tuple[float, float, float, float]:
    """π/2 = C1 + C2 + C3 + C4 (+ < 2⁻¹⁵⁰): three 33-bit parts and a 53-bit tail."""
    rest = _half_pi()
    parts = []
    for bits in (SPLIT_BITS, SPLIT_BITS, SPLIT_BITS, 53):
        c = _round_bits(rest, bits)
        parts.append(c)
        rest -= Fraction(c)
    return tuple(parts)


def sin_coefficients() -> list[float]:
    """s3, s5, …: sin r = r + r³ (s3 + r² (s5 + …)), sᵢ = (−1)^((i−1)/2) / i!"""
    return [float(Fraction((-1) ** ((i - 1) // 2), math.factorial(i))) for i in range(3, SIN_DEGREE + 1, 2)]


def cos_coefficients() -> list[float]:
    """c4, c6, …: cos r = 1 − r²/2 + r⁴ (c4 + r² (c6 + …)), cᵢ = (−1)^(i/2) / i!"""
    return [float(Fraction((-1) ** (i // 2), math.factorial(i))) for i in range(4, COS_DEGREE + 1, 2)]


def estrin(coeffs: list[float]) -> str:
    """C text of ``coeffs[0] + z·coeffs[1] + z²·coeffs[2] + …`` (eight coefficients) by Estrin's
    scheme, in ``z``, ``z2 = z²`` and ``z4 = z⁴``, with exact hexadecimal literals: four pairs
    ``c + z·c'`` and two levels of ``a + z2·b``, ``a + z4·b`` side by side, four multiply-adds deep
    after ``z4`` instead of Horner's eight in a row (the polynomials are on the critical path of
    every kernel that starts from joint angles; their terms are ≤ r²/6 of the result, so the
    order of their roundings does not show in the ulp)."""
    if len(coeffs) != 8:
        raise ValueError(f"estrin: eight coefficients expected, got {len(coeffs)}")
    h = [c.hex() for c in coeffs]
    pair = [f"({h[i]} + z * {h[i + 1]})" for i in range(0, 8, 2)]
    return f"(({pair[0]} + z2 * {pair[1]}) + z4 * ({pair[2]} + z2 * {pair[3]}))"


def template_constants() -> dict:
    """What ``templates/cpu/sincos.hpp.j2`` needs (a fresh dict; computed once per process)."""
    return dict(_template_constants())


@functools.lru_cache(maxsize=1)
def _template_constants() -> dict:
    c1, c2, c3, c4 = half_pi_split()
    two_over_pi = float(1 / _half_pi())
    return {
        "limit": FAST_LIMIT.hex(), "limit_text": f"2^{int(math.log2(FAST_LIMIT))}",
        "two_over_pi": two_over_pi.hex(), "c1": c1.hex(), "c2": c2.hex(), "c3": c3.hex(), "c4": c4.hex(),
        "sin_poly": estrin(sin_coefficients()), "cos_poly": estrin(cos_coefficients()),
        "sin_degree": SIN_DEGREE, "cos_degree": COS_DEGREE, "split_bits": SPLIT_BITS,
    }
