/* fma_peak.c — measures one core's fp32 peak (GFLOP/s) with independent vector FMA chains.
 * bench_train.py builds it alone with -O2 -march=native (the floor's denominator);
 * bench_matmul and bench_tuned link pk_bench_fma_peak (built with -march=native, no main)
 * to print each kernel's fraction of it. */
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The widest vector the build target has: the peak is what the ISA can do. */
#if defined(__AVX512F__)
#define LANES 16
#elif defined(__AVX__)
#define LANES 8
#else
#define LANES 4
#endif
typedef float vf __attribute__((vector_size(LANES * 4)));

/* More independent chains than FMA latency x ports (4 x 2 on current cores), so the loop
 * is throughput-bound, not latency-bound. */
#define CHAINS 12

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

#include "fma_peak.h"

double pk_bench_fma_peak(int *lanes) {
  /* Chains are set from whole vectors: a vector variable ever subscripted is addressable,
   * and GCC then keeps it in memory, so every FMA would wait on a store (half the peak). */
  float lane[LANES];
  for (int l = 0; l < LANES; l++) lane[l] = (float)l;
  vf ramp;
  memcpy(&ramp, lane, sizeof ramp);
  vf zero = ramp - ramp, m = zero + 0.999999f, a = zero + 1e-7f;
  /* twelve different chains: equal ones would be computed once */
  vf a0 = ramp + 1, a1 = ramp + 2, a2 = ramp + 3, a3 = ramp + 4, a4 = ramp + 5, a5 = ramp + 6;
  vf a6 = -ramp - 1, a7 = -ramp - 2, a8 = -ramp - 3, a9 = -ramp - 4, a10 = -ramp - 5, a11 = -ramp - 6;
  const long iters = 20 * 1000 * 1000;
  double best = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now();
    for (long i = 0; i < iters; i++) {
      /* Twelve named registers (an array would live in memory at -O2); the asm keeps m
       * opaque so the compiler cannot fold the iterations. */
      __asm__ volatile("" : "+v"(m));
      a0 = a0 * m + a, a1 = a1 * m + a, a2 = a2 * m + a, a3 = a3 * m + a;
      a4 = a4 * m + a, a5 = a5 * m + a, a6 = a6 * m + a, a7 = a7 * m + a;
      a8 = a8 * m + a, a9 = a9 * m + a, a10 = a10 * m + a, a11 = a11 * m + a;
    }
    double dt = now() - t0;
    double gflops = 2.0 * LANES * CHAINS * (double)iters / dt * 1e-9;
    if (gflops > best) best = gflops;
  }
  vf all = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
  float sink = 0;
  for (int l = 0; l < LANES; l++) sink += all[l];
  if (lanes) *lanes = LANES;
  return sink == sink ? best : 0; /* the chains' result is used: nothing is folded away */
}

#ifndef PK_FMA_PEAK_NO_MAIN
int main(void) {
  int lanes;
  double gflops = pk_bench_fma_peak(&lanes);
  printf("{\"gflops\": %.3f, \"lanes\": %d, \"chains\": %d}\n", gflops, lanes, CHAINS);
  return 0;
}
#endif
