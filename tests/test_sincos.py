"""The CPU kernels' sine and cosine (templates/cpu/sincos.hpp.j2, constants from
rbdgen/codegen/trig.py): error in ulps against mpmath, over the whole double range, at the
doubles nearest to multiples of π/2 (where range reduction cancels hardest), and for floats;
and the constants against their definitions. The kernels' own tests (test_cpu_kernels.py) then
check that the batch path, which uses this sine and cosine, matches the reference."""
from __future__ import annotations

import ctypes
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from rbdgen.codegen import trig
from rbdgen.codegen.render import render
from rbdgen.toolchain.compiler import build_library, cxx_flags, resolve_march

HARNESS = r"""
#include "t_sincos.hpp"
using t_trig::rbd_sincos;
typedef double d2 __attribute__((vector_size(16)));
typedef double d4 __attribute__((vector_size(32)));
typedef float f4 __attribute__((vector_size(16)));
typedef float f8 __attribute__((vector_size(32)));
template <typename V, typename T, int N>
static void run(long n, const T* x, T* s, T* c) {
  for (long i = 0; i + N <= n; i += N) {
    V a, vs, vc;
    for (int l = 0; l < N; ++l) a[l] = x[i + l];
    rbd_sincos(a, vs, vc);
    for (int l = 0; l < N; ++l) { s[i + l] = vs[l]; c[i + l] = vc[l]; }
  }
}
extern "C" {
void sc_d2(long n, const double* x, double* s, double* c) { run<d2, double, 2>(n, x, s, c); }
void sc_d4(long n, const double* x, double* s, double* c) { run<d4, double, 4>(n, x, s, c); }
void sc_f4(long n, const float* x, float* s, float* c) { run<f4, float, 4>(n, x, s, c); }
void sc_f8(long n, const float* x, float* s, float* c) { run<f8, float, 8>(n, x, s, c); }
void sc_d1(long n, const double* x, double* s, double* c) { for (long i = 0; i < n; ++i) rbd_sincos(x[i], s[i], c[i]); }
// one state's angles four to a call, as the kernels' hoisted sines and cosines are printed
void sc_g4(long n, const double* x, double* s, double* c) {
  for (long i = 0; i + 4 <= n; i += 4)
    t_trig::rbd_sincos4(x[i], x[i + 1], x[i + 2], x[i + 3], s[i], c[i], s[i + 1], c[i + 1], s[i + 2], c[i + 2],
                        s[i + 3], c[i + 3]);
}
// the same, inlined (the kernels printed as one function call this one)
void sc_i4(long n, const double* x, double* s, double* c) {
  for (long i = 0; i + 4 <= n; i += 4)
    t_trig::rbd_sincos4_inline(x[i], x[i + 1], x[i + 2], x[i + 3], s[i], c[i], s[i + 1], c[i + 1], s[i + 2],
                               c[i + 2], s[i + 3], c[i + 3]);
}
// a group of three padded with its last angle: the last outputs are written twice
void sc_g3(long n, const double* x, double* s, double* c) {
  for (long i = 0; i + 3 <= n; i += 3)
    t_trig::rbd_sincos4(x[i], x[i + 1], x[i + 2], x[i + 2], s[i], c[i], s[i + 1], c[i + 1], s[i + 2], c[i + 2],
                        s[i + 2], c[i + 2]);
}
}
"""


@pytest.fixture(scope="module", params=["portable", "native"])
def lib(request):
    """The sine/cosine core built for any x86-64 and for this machine (the default build: FMA
    contraction and AVX there may not cost accuracy)."""
    march = resolve_march(request.param)
    if request.param == "native" and march is None:
        pytest.skip("the compiler cannot target this machine (-march=native): the portable case covers the default")
    header = render("cpu/sincos.hpp.j2", banner="test", robot="test", prefix="t", guard="T_SINCOS_HPP",
                    **trig.template_constants())
    path = build_library({"t_sincos.hpp": header, "t_harness.cpp": HARNESS}, ["t_harness.cpp"], "t_sincos",
                         cxx_flags(opt="-O2", march=march, openmp=False))
    return ctypes.CDLL(str(path))


def call(lib, fn, x, dtype=np.float64):
    x = np.ascontiguousarray(x, dtype)
    s, c = np.full_like(x, np.nan), np.full_like(x, np.nan)
    f = getattr(lib, fn)
    ptr = np.ctypeslib.ndpointer(dtype, flags="C_CONTIGUOUS")
    f.argtypes = [ctypes.c_long, ptr, ptr, ptr]
    f.restype = None
    f(len(x), x, s, c)
    return s, c


def ulp_error(y, x, fn) -> np.ndarray:
    """|y − fn(x)| in units of the last place of the exact value (mpmath at 160 bits)."""
    out = np.empty(len(x))
    with mpmath.workprec(160):
        for i, (yi, xi) in enumerate(zip(y, x)):
            ref = fn(mpmath.mpf(float(xi)))
            out[i] = float(abs(mpmath.mpf(float(yi)) - ref) / math.ulp(float(ref))) if ref != 0 else abs(float(yi))
    return out


def test_constants_are_their_definitions():
    """π/2 = C1 + C2 + C3 + C4 to 150 bits; C1…C3 short enough that k·Ci is exact for |k| < 2²⁰;
    the series coefficients are ±1/n!, rounded once."""
    parts = trig.half_pi_split()
    with mpmath.workprec(300):
        err = abs(sum(mpmath.mpf(p) for p in parts) - mpmath.pi / 2)
        assert err < mpmath.mpf(2) ** -150
    k_max = 2 ** 20
    for p in parts[:3]:
        man = Fraction(p).numerator
        while man % 2 == 0:
            man //= 2
        assert man.bit_length() <= trig.SPLIT_BITS
        assert (k_max * man).bit_length() <= 53
    assert trig.FAST_LIMIT * 2 / math.pi < k_max
    for i, s in zip(range(3, trig.SIN_DEGREE + 1, 2), trig.sin_coefficients()):
        assert s == float(Fraction((-1) ** ((i - 1) // 2), math.factorial(i)))
    for i, c in zip(range(4, trig.COS_DEGREE + 1, 2), trig.cos_coefficients()):
        assert c == float(Fraction((-1) ** (i // 2), math.factorial(i)))
    # the first omitted terms of the series are far below an ulp on |r| ≤ π/4 (+ rounding slack)
    r = math.pi / 4 * (1 + 1e-12)
    assert r ** (trig.SIN_DEGREE + 2) / math.factorial(trig.SIN_DEGREE + 2) < 1e-3 * math.ulp(math.sin(r))
    assert r ** (trig.COS_DEGREE + 2) / math.factorial(trig.COS_DEGREE + 2) < 1e-3 * math.ulp(math.cos(r))


@pytest.mark.parametrize("fn", ["sc_d2", "sc_d4", "sc_g4", "sc_i4", "sc_g3"])
def test_random_arguments_within_one_ulp(lib, fn):
    rng = np.random.default_rng(7)
    n = 3000
    x = np.concatenate([rng.uniform(-4, 4, n), rng.uniform(-trig.FAST_LIMIT, trig.FAST_LIMIT, n),
                        np.exp(rng.uniform(math.log(1e-300), math.log(trig.FAST_LIMIT), n)) * rng.choice([-1, 1], n)])
    s, c = call(lib, fn, x)
    es, ec = ulp_error(s, x, mpmath.sin), ulp_error(c, x, mpmath.cos)
    assert es.max() <= 1.0 and ec.max() <= 1.0, (es.max(), ec.max())


def test_near_multiples_of_half_pi(lib):
    """The doubles on both sides of k·π/2 for every k up to the fast-path limit: where x − k·π/2
    cancels to ~2⁻⁶⁰ (the smallest found) and a short π/2 would lose every digit."""
    kmax = int(trig.FAST_LIMIT / (math.pi / 2))
    with mpmath.workprec(200):
        hp = mpmath.pi / 2
        nearest = np.array([float(k * hp) for k in range(1, kmax + 1)])
    x = np.concatenate([nearest, np.nextafter(nearest, np.inf), np.nextafter(nearest, 0), -nearest])
    s, c = call(lib, "sc_d2", x)
    # where the result is tiny, compare with mpmath; the rest by the cheap check against libm
    with mpmath.workprec(200):
        r = np.array([float(abs(mpmath.mpf(v) - mpmath.nint(mpmath.mpf(v) / hp) * hp)) for v in x[:kmax]])
    assert r.min() < 2.0 ** -55  # the set does reach the hard cases
    hard = np.argsort(r)[:400]
    hard = np.concatenate([hard, hard + 3 * kmax])  # and their negatives
    assert ulp_error(s[hard], x[hard], mpmath.sin).max() <= 1.0
    assert ulp_error(c[hard], x[hard], mpmath.cos).max() <= 1.0
    # everywhere: within 1 ulp of glibc's sine and cosine (themselves < 1 ulp), i.e. ≤ 2 ulp
    for ours, ref in ((s, np.sin(x)), (c, np.cos(x))):
        assert np.all(np.abs(ours - ref) <= 2 * np.spacing(np.abs(ref)))


def test_beyond_the_limit_and_special_values_match_libm(lib):
    x = np.array([trig.FAST_LIMIT, np.nextafter(trig.FAST_LIMIT, np.inf), 1e6, -3e9, 1e22, -1e300,
                  np.finfo(float).max, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 0.0, -0.0])
    x = np.concatenate([x, x[::-1]])  # every value in every lane position
    for fn in ("sc_d2", "sc_d4", "sc_g4", "sc_i4"):
        s, c = call(lib, fn, x)
        with np.errstate(invalid="ignore"):
            rs, rc = np.sin(x), np.cos(x)
        big = ~(np.abs(x) <= trig.FAST_LIMIT)
        np.testing.assert_array_equal(s[big], rs[big])  # the fallback is libm itself
        np.testing.assert_array_equal(c[big], rc[big])
        assert np.all(np.abs(s[~big] - rs[~big]) <= np.spacing(np.abs(rs[~big])))
        assert np.array_equal(np.signbit(s[x == 0]), np.signbit(x[x == 0]))  # sin(−0) = −0


@pytest.mark.parametrize("fn", ["sc_f4", "sc_f8"])
def test_float_lanes_are_correctly_rounded(lib, fn):
    """Float lanes are computed in double and rounded once: the correctly rounded float except
    where that double rounding lands on a tie (≤ 1 ulp in any case)."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-4, 4, 4000), rng.uniform(-1e4, 1e4, 4000)]).astype(np.float32)
    s, c = call(lib, fn, x, np.float32)
    with mpmath.workprec(100):
        rs = np.array([float(mpmath.sin(float(v))) for v in x]).astype(np.float32)
        rc = np.array([float(mpmath.cos(float(v))) for v in x]).astype(np.float32)
    for ours, ref in ((s, rs), (c, rc)):
        assert np.mean(ours == ref) > 0.999
        assert np.all(np.abs(ours.astype(np.float64) - ref) <= np.spacing(np.abs(ref)))
