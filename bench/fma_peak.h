/* fma_peak.h — one core's measured fp32 FMA peak, the honest reference for a kernel's speed
 * (on an AVX-512 core where OpenBLAS runs its AVX2 kernel, OpenBLAS is not). */
#ifndef PK_BENCH_FMA_PEAK_H
#define PK_BENCH_FMA_PEAK_H

/* GFLOP/s of 12 independent FMA chains on the widest vectors this file was compiled for
 * (build it with -march=native); *lanes (may be NULL) gets their f32 lanes. About 0.2 s. */
double pk_bench_fma_peak(int *lanes);

#endif
