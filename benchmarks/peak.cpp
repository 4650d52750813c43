// Peak multiply/add issue rate of one core, for the op-count roofline of benchmarks/run.py.
// Built with the kernels' own flags and their SIMD width (-DLANES=2 or 4 doubles per vector):
// CHAINS independent chains of vector multiplies and as many of vector adds (run.py tries 6, 8
// and 10 and keeps the best: enough to cover latency × pipes without spilling the 16 registers
// of baseline x86-64), no FMA (the kernels are compiled without
// contraction, -std=c++17), so every counted op is one multiply or one add, as in op counts.
// Prints the best of 7 runs: multiply+add ops (lanes counted) per second.
#include <cstdio>
#include <ctime>

#ifndef LANES
#define LANES 2
#endif
#ifndef CHAINS
#define CHAINS 6
#endif
typedef double vec __attribute__((vector_size(LANES * sizeof(double))));

static double thread_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main() {
  const long iters = 20000000;
  const int chains = CHAINS;
  vec m[chains], a[chains];
  for (int i = 0; i < chains; ++i)
    for (int l = 0; l < LANES; ++l) {
      m[i][l] = 1.0 + 1e-3 * (i + l);
      a[i][l] = 1e-3 * (i - l);
    }
  volatile double factor_in = 0.9999999, step_in = 1e-9;
  vec factor = m[0] * 0.0 + factor_in, step = m[0] * 0.0 + step_in;
  double best = 0.0;
  for (int run = 0; run < 7; ++run) {
    const double t0 = thread_seconds();
    for (long it = 0; it < iters; ++it) {
      for (int i = 0; i < chains; ++i) {
        m[i] = m[i] * factor;
        a[i] = a[i] + step;
      }
      __asm__ volatile("" : "+x"(factor), "+x"(step));  // keep the loop from being folded away
    }
    const double t = thread_seconds() - t0;
    const double rate = 2.0 * chains * LANES * iters / t;
    if (rate > best) best = rate;
  }
  double sink = 0.0;
  for (int i = 0; i < chains; ++i)
    for (int l = 0; l < LANES; ++l) sink += m[i][l] + a[i][l];
  printf("%.6e %g\n", best, sink);
  return 0;
}
