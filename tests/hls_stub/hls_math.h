// Stand-in for Vitis HLS' <hls_math.h>, used only to check that rbdgen's generated HLS sources
// compile on the synthesis path (__SYNTHESIS__ defined) — it is never linked or run.
//
// It declares (no definitions) the overload set that the Vitis HLS user guide (UG1399, "HLS Math
// Library" and "Fixed-Point Math Functions") documents for the functions our code could call:
//   * half/float/double overloads of each function, plus the single-precision names funcf;
//   * sincos for the floating-point types (sine and cosine of one argument);
//   * fixed-point overloads as function templates over ap_fixed<W, I> with the *default*
//     quantisation and overflow modes only (the guide: the math functions "do not support the
//     ap_[u]fixed template parameters Q, O and N"), returning ap_fixed<W-I+2, 2> for sin/cos,
//     and overloads for ap_int<I>.
// Calling hls::sin with an ap_fixed<W, I, AP_RND_CONV, AP_SAT> therefore does not match the
// fixed-point template and is ambiguous among the float/double/int conversions — as in the tool.
// Written from the documentation; no code of the tool's header is reproduced.
#ifndef RBD_HLS_MATH_STANDIN_H
#define RBD_HLS_MATH_STANDIN_H

#ifndef __AP_FIXED_H__
#error "include <ap_fixed.h> before this stand-in (the open-source ap_types refuse __SYNTHESIS__)"
#endif

namespace hls {

// floating point
double sin(double x);
float sin(float x);
float sinf(float x);
double cos(double x);
float cos(float x);
float cosf(float x);
void sincos(double x, double* s, double* c);
void sincos(float x, float* s, float* c);
void sincosf(float x, float* s, float* c);
double sqrt(double x);
float sqrt(float x);
float sqrtf(float x);

// integers
template <int I> ap_int<I> sin(ap_int<I> x);
template <int I> ap_int<I> cos(ap_int<I> x);

// fixed point: default modes only
template <int W, int I> ap_fixed<W - I + 2, 2> sin(ap_fixed<W, I> x);
template <int W, int I> ap_fixed<W - I + 2, 2> cos(ap_fixed<W, I> x);
template <int W, int I> void sincos(ap_fixed<W, I> x, ap_fixed<W - I + 2, 2>* s, ap_fixed<W - I + 2, 2>* c);
template <int W, int I> ap_fixed<W, I> sqrt(ap_fixed<W, I> x);

}  // namespace hls

#endif
