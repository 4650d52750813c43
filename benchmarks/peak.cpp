// Peak multiply/add issue rate of one core, for the op-count roofline of benchmarks/run.py.
// Built with the kernels' own flags and their SIMD width (-DLANES=2, 4 or 8 doubles per vector):
// CHAINS independent chains of vector multiplies and as many of vector adds (run.py tries 6, 8
// and 10 and keeps the best: enough to cover latency × pipes without spilling the 16 registers
// of baseline x86-64). Every counted op is one multiply or one add, as in op counts. The
// kernels themselves are contracted to FMAs where the build has them (GCC's default
// -ffp-contract=fast, -std=c++17 included): a multiply and an add then share one FMA-pipe slot.
// On cores with separate add pipes (AMD Zen) that leaves this rate the bound of a kernel with as
// many adds as multiplies; where adds share the FMA pipes (Intel) contraction can beat it.
// -DMUL_ONLY: chains of multiplies alone, and -DLANES=1 plain doubles: the multiply rate of
// scalar code, the bound of one state's straight-line code (every multiply, fused or not, takes
// a multiply/FMA slot; run.py's one-state "multiply bound").
// Prints the best of 7 runs: ops (lanes counted) per second.
#include <cstdio>
#include <ctime>

#ifndef LANES
#define LANES 2
#endif
#ifndef CHAINS
#define CHAINS 6
#endif
#if LANES == 1
typedef double vec;
#define LANE(x, l) (x)
#else
typedef double vec __attribute__((vector_size(LANES * sizeof(double))));
#define LANE(x, l) (x)[l]
#endif

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
      LANE(m[i], l) = 1.0 + 1e-3 * (i + l);
      LANE(a[i], l) = 1e-3 * (i - l);
    }
  volatile double factor_in = 0.9999999, step_in = 1e-9;
  vec factor = m[0] * 0.0 + factor_in, step = m[0] * 0.0 + step_in;
  double best = 0.0;
  for (int run = 0; run < 7; ++run) {
    const double t0 = thread_seconds();
    for (long it = 0; it < iters; ++it) {
      for (int i = 0; i < chains; ++i) {
        m[i] = m[i] * factor;
#ifdef MUL_ONLY
        a[i] = a[i] * factor;
#else
        a[i] = a[i] + step;
#endif
      }
      __asm__ volatile("" : "+x"(factor), "+x"(step));  // keep the loop from being folded away
    }
    const double t = thread_seconds() - t0;
    const double rate = 2.0 * chains * LANES * iters / t;
    if (rate > best) best = rate;
  }
  double sink = 0.0;
  for (int i = 0; i < chains; ++i)
    for (int l = 0; l < LANES; ++l) sink += LANE(m[i], l) + LANE(a[i], l);
  printf("%.6e %g\n", best, sink);
  return 0;
}
