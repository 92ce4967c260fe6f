/* fma_peak.c — measures one core's fp32 peak (GFLOP/s) with independent vector FMA chains;
 * bench_train.py builds it with -O2 -march=native and uses it as the floor's denominator. */
#include <stdio.h>
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

int main(void) {
  vf m, a, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11;
  for (int l = 0; l < LANES; l++) {
    m[l] = 0.999999f, a[l] = 1e-7f;
    a0[l] = a1[l] = a2[l] = a3[l] = a4[l] = a5[l] = (float)l;
    a6[l] = a7[l] = a8[l] = a9[l] = a10[l] = a11[l] = (float)-l;
  }
  const long iters = 20 * 1000 * 1000;
  double best = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now();
    for (long i = 0; i < iters; i++) {
      /* Twelve named registers (an array would live in memory at -O2); the asm keeps m
       * opaque so the compiler cannot fold the iterations. */
      __asm__ volatile("" : "+x"(m));
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
  printf("{\"gflops\": %.3f, \"lanes\": %d, \"chains\": %d, \"sink\": %g}\n", best, LANES,
         CHAINS, (double)sink);
  return 0;
}
