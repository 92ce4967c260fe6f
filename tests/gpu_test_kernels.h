/* gpu_test_kernels.h — the hand-written GPU kernels test_gpu_opencl and test_gpu_cuda
 * launch, written once in OpenCL C and CUDA C following the kernel contract
 * (docs/runtime.md, "GPU devices"): buffers, then 64-bit scalars, then the workspace;
 * shapes baked in. The tests check their results with plain C loops. */
#ifndef GPU_TEST_KERNELS_H
#define GPU_TEST_KERNELS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "pock/pkrt_gpu.h"

#define GT_N 1000                     /* elementwise length */
#define GT_M 48                       /* matmul: C[M][N] = A[M][K] B[K][N] */
#define GT_K 72
#define GT_NN 40
#define GT_TILE 8
#define GT_WN 256                     /* the workspace kernel: one block of GT_WN threads */
#define GT_BIG ((int64_t)1 << 40)     /* a scalar that needs 64 bits */

/* The same three kernels in both dialects: the macros below spell what differs. */
#define GT_KERNELS(GLOBAL_FN, GPTR, R, LOCAL, BARRIER, TID, BID, LONG, UCHAR)               \
  /* y = 2 x + 1, bound-checked: the grid covers 1024 of 1000 elements */                   \
  GLOBAL_FN void k_axpb(GPTR const float *R x, GPTR float *R y) {                           \
    int i = BID(0) * 64 + TID(0);                                                           \
    if (i < 1000) y[i] = 2.0f * x[i] + 1.0f;                                                \
  }                                                                                         \
  /* C = A B with 8x8 tiles of A and B staged in local/shared memory between barriers */    \
  GLOBAL_FN void k_matmul(GPTR const float *R a, GPTR const float *R b,                     \
                          GPTR float *R c) {                                                \
    LOCAL float ta[8][8];                                                                   \
    LOCAL float tb[8][8];                                                                   \
    int tx = TID(0), ty = TID(1);                                                           \
    int col = BID(0) * 8 + tx, row = BID(1) * 8 + ty;                                       \
    float acc = 0.0f;                                                                       \
    for (int k0 = 0; k0 < 72; k0 += 8) {                                                    \
      ta[ty][tx] = a[row * 72 + k0 + tx];                                                   \
      tb[ty][tx] = b[(k0 + ty) * 40 + col];                                                 \
      BARRIER;                                                                              \
      for (int k = 0; k < 8; k++) acc += ta[ty][k] * tb[k][tx];                             \
      BARRIER;                                                                              \
    }                                                                                       \
    c[row * 40 + col] = acc;                                                                \
  }                                                                                         \
  /* Scalars and a workspace: every thread writes x[i] * s0 into the workspace, then,       \
   * after a barrier, reads another thread's value: y[i] = ws[255 - i] + (s1 - 2^40) */     \
  GLOBAL_FN void k_scaled(GPTR const float *R x, GPTR float *R y, LONG s0,                  \
                          LONG s1, GPTR UCHAR *R workspace) {                               \
    GPTR float *ws = (GPTR float *)workspace;                                               \
    int i = TID(0);                                                                         \
    ws[i] = x[i] * (float)s0;                                                               \
    BARRIER;                                                                                \
    y[i] = ws[255 - i] + (float)(s1 - ((LONG)1 << 40));                                     \
  }

#define GT_STR2(...) #__VA_ARGS__
#define GT_STR(...) GT_STR2(__VA_ARGS__)

/* OpenCL C */
#define GT_CL_TID(d) (int)get_local_id(d)
#define GT_CL_BID(d) (int)get_group_id(d)
static const char gt_opencl_source[] = GT_STR(
    GT_KERNELS(__kernel, __global, restrict, __local,
               barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE), GT_CL_TID, GT_CL_BID, long,
               uchar));

/* CUDA C (compiled with NVRTC by test_gpu_cuda) */
#define GT_CU_TID(d) (int)((d) == 0 ? threadIdx.x : threadIdx.y)
#define GT_CU_BID(d) (int)((d) == 0 ? blockIdx.x : blockIdx.y)
static const char gt_cuda_source[] = GT_STR(
    GT_KERNELS(extern "C" __global__, , __restrict__, __shared__, __syncthreads(), GT_CU_TID,
               GT_CU_BID, long long, unsigned char));

/* Their descriptors: grid and block as the "schedule" chose them. */
static const pkrt_gpu_kernel_desc gt_kernels[] = {
    {"k_axpb", 2, 0, 0, {16, 1, 1}, {64, 1, 1}, 0, "axpb"},
    {"k_matmul", 3, 0, 0, {GT_NN / GT_TILE, GT_M / GT_TILE, 1}, {GT_TILE, GT_TILE, 1}, 0, "mm"},
    {"k_scaled", 2, 2, GT_WN * 4, {1, 1, 1}, {GT_WN, 1, 1}, 0, "scaled"},
};
enum { GT_AXPB, GT_MATMUL, GT_SCALED, GT_NKERNELS };

/* ---- running them (tests only: pk_test.h's check() and pkrt.h included before): the
 * buffers are carved from one device arena at offsets that are multiples of the device's
 * alignment (so OpenCL makes sub-buffers); every output is compared with a C loop. */
#ifdef PK_TEST_H

/* Next offset in the arena: at rounded up to align, then bytes reserved. */
static inline size_t gt_place(size_t *at, size_t bytes, size_t align) {
  size_t off = (*at + align - 1) / align * align;
  *at = off + bytes;
  return off;
}

typedef struct gt_buffers {
  pkrt_gpu_mem *arena;
  pkrt_gpu_ptr x, y, a, b, c, x2, y2, ws;
} gt_buffers;

/* Lays out and fills the inputs; 0 on failure (message printed). */
static inline int gt_buffers_make(pkrt_ctx *rt, pkrt_gpu *g, gt_buffers *bf) {
  const pkrt_gpu_info *info = pkrt_gpu_describe(g);
  size_t align = info->base_align > 256 ? (size_t)info->base_align : 256, at = align;
  struct {
    pkrt_gpu_ptr *p;
    size_t bytes;
    size_t off;
  } v[] = {{&bf->x, GT_N * 4, 0},           {&bf->y, GT_N * 4, 0},
           {&bf->a, GT_M * GT_K * 4, 0},   {&bf->b, GT_K * GT_NN * 4, 0},
           {&bf->c, GT_M * GT_NN * 4, 0},  {&bf->x2, GT_WN * 4, 0},
           {&bf->y2, GT_WN * 4, 0},        {&bf->ws, GT_WN * 4, 0}};
  enum { NV = sizeof v / sizeof v[0] };
  for (int i = 0; i < NV; i++) v[i].off = gt_place(&at, v[i].bytes, align);
  if (pkrt_gpu_mem_new(g, at, &bf->arena) != PKRT_OK) {
    printf("FAIL gpu_arena: %s\n", pkrt_ctx_error(rt));
    return 0;
  }
  for (int i = 0; i < NV; i++)
    if (pkrt_gpu_mem_view(bf->arena, v[i].off, v[i].bytes, v[i].p) != PKRT_OK) {
      printf("FAIL gpu_view %d: %s\n", i, pkrt_ctx_error(rt));
      return 0;
    }
  static float x[GT_N], a[GT_M * GT_K], b[GT_K * GT_NN], x2[GT_WN];
  for (int i = 0; i < GT_N; i++) x[i] = (float)(i % 37) * 0.25f - 3.0f;
  for (int i = 0; i < GT_M * GT_K; i++) a[i] = (float)((i * 7) % 13) * 0.125f - 0.75f;
  for (int i = 0; i < GT_K * GT_NN; i++) b[i] = (float)((i * 5) % 11) * 0.2f - 1.0f;
  for (int i = 0; i < GT_WN; i++) x2[i] = (float)i * 0.5f;
  const struct {
    const pkrt_gpu_ptr *p;
    const void *src;
  } in[] = {{&bf->x, x}, {&bf->a, a}, {&bf->b, b}, {&bf->x2, x2}};
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
    if (pkrt_gpu_copy_to(bf->arena, in[i].p->offset, in[i].src, in[i].p->bytes) != PKRT_OK) {
      printf("FAIL gpu_copy_to: %s\n", pkrt_ctx_error(rt));
      return 0;
    }
  return 1;
}

/* Launches kernel k of mod on the buffers (timed when ms is non-NULL). */
static inline pkrt_status gt_launch(pkrt_gpu_module *mod, int k, const gt_buffers *bf,
                                    double *ms) {
  const int64_t scalars[2] = {3, GT_BIG + 5};
  switch (k) {
  case GT_AXPB: {
    pkrt_gpu_ptr p[] = {bf->x, bf->y};
    return pkrt_gpu_launch(mod, k, p, 2, NULL, 0, NULL, ms);
  }
  case GT_MATMUL: {
    pkrt_gpu_ptr p[] = {bf->a, bf->b, bf->c};
    return pkrt_gpu_launch(mod, k, p, 3, NULL, 0, NULL, ms);
  }
  default: {
    pkrt_gpu_ptr p[] = {bf->x2, bf->y2};
    return pkrt_gpu_launch(mod, k, p, 2, scalars, 2, &bf->ws, ms);
  }
  }
}

/* Reads back the outputs and compares them with C loops; prints PASS/FAIL per kernel. */
static inline void gt_compare(pkrt_ctx *rt, const char *api, gt_buffers *bf) {
  static float x[GT_N], y[GT_N], a[GT_M * GT_K], b[GT_K * GT_NN], c[GT_M * GT_NN];
  static float x2[GT_WN], y2[GT_WN];
  char name[160];
  const struct {
    const pkrt_gpu_ptr *p;
    void *dst;
  } out[] = {{&bf->x, x}, {&bf->y, y},   {&bf->a, a},   {&bf->b, b},
             {&bf->c, c}, {&bf->x2, x2}, {&bf->y2, y2}};
  for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
    if (pkrt_gpu_copy_from(bf->arena, out[i].p->offset, out[i].dst, out[i].p->bytes) != PKRT_OK) {
      printf("FAIL %s_copy_from: %s\n", api, pkrt_ctx_error(rt));
      failures++;
      return;
    }
  int bad = -1;
  for (int i = 0; i < GT_N && bad < 0; i++)
    if (y[i] != 2.0f * x[i] + 1.0f) bad = i;
  snprintf(name, sizeof name, "%s_elementwise", api);
  check(bad < 0, name, "y[%d] = %g, want %g", bad, bad < 0 ? 0 : y[bad],
        bad < 0 ? 0 : 2.0f * x[bad] + 1.0f);
  double worst = 0;
  int at = 0;
  for (int i = 0; i < GT_M; i++)
    for (int j = 0; j < GT_NN; j++) {
      double s = 0;
      for (int k = 0; k < GT_K; k++) s += (double)a[i * GT_K + k] * b[k * GT_NN + j];
      double e = fabs(s - c[i * GT_NN + j]) / (1.0 + fabs(s));
      if (e > worst) worst = e, at = i * GT_NN + j;
    }
  snprintf(name, sizeof name, "%s_tiled_matmul", api);
  check(worst < 1e-5, name, "C[%d] off by %g (relative) from the C loop", at, worst);
  bad = -1;
  for (int i = 0; i < GT_WN && bad < 0; i++)
    if (y2[i] != x2[GT_WN - 1 - i] * 3.0f + 5.0f) bad = i;
  snprintf(name, sizeof name, "%s_scalars_workspace", api);
  check(bad < 0, name, "y[%d] = %g, want %g", bad, bad < 0 ? 0 : y2[bad],
        bad < 0 ? 0 : x2[GT_WN - 1 - bad] * 3.0f + 5.0f);
}
#endif /* PK_TEST_H */

#endif
