/* measure_extern.c — calling an extern candidate: cblas_sgemm through the runtime's libffi
 * path (pkrt_extern_sgemm, the call artifacts make too) on the task's buffers, with the
 * shape pk_match_sgemm found (pk_search.h); and timing cuBLAS on a CUDA device
 * (pkrt_gpu_blas_sgemm, the call CUDA artifacts make) for the GPU measurer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "measure_impl.h"
#include "pkrt.h"

void meas_sgemm_call(const pkrt_extern *fn, const pk_sgemm_shape *g, void *const *data) {
  pkrt_extern_sgemm(fn, g->trans_a, g->trans_b, g->m, g->n, g->k, data[g->a], g->lda, data[g->b],
                    g->ldb, data[g->c], g->ldc);
}

static int cmp_ms(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

pk_status pk_gpu_time_cublas(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g, const pk_candidate *c,
                             int reps, pk_timing *out) {
  pk_sgemm_shape s;
  if (!c || c->kind != PK_CAND_EXTERN || !c->extern_sym || strcmp(c->extern_sym, PK_CUBLAS_SYM))
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "not a cuBLAS candidate");
  if (reps < 1) return pk_ctx_fail(ctx, PK_ERR_CHECK, "reps must be at least 1, not %d", reps);
  pk_status st = pk_sgemm_shape_from_knobs(ctx, c->knobs, &s);
  if (st != PK_OK) return st;
  /* operands as stored: A is (trans_a ? K×M : M×K), B (trans_b ? N×K : K×N) */
  size_t bytes[3] = {(size_t)s.m * (size_t)s.k * 4, (size_t)s.k * (size_t)s.n * 4,
                     (size_t)s.m * (size_t)s.n * 4};
  size_t off[3] = {0, (bytes[0] + 255) / 256 * 256, 0};
  off[2] = off[1] + (bytes[1] + 255) / 256 * 256;
  pkrt_gpu_mem *mem = NULL;
  pkrt_gpu_blas *blas = NULL;
  pkrt_gpu_ptr v[3];
  double *ms = calloc((size_t)reps, sizeof *ms), t;
  float *fill = calloc(1, bytes[0] > bytes[1] ? bytes[0] : bytes[1]);
  pkrt_status e = ms && fill ? PKRT_OK : PKRT_ERR_NOMEM;
  if (e == PKRT_OK) e = pkrt_gpu_mem_new(g, off[2] + bytes[2], &mem);
  for (int i = 0; i < 3 && e == PKRT_OK; i++) e = pkrt_gpu_mem_view(mem, off[i], bytes[i], &v[i]);
  /* inputs of small values: NaN or denormal garbage must not set the speed */
  for (size_t i = 0; fill && i < (bytes[0] > bytes[1] ? bytes[0] : bytes[1]) / 4; i++)
    fill[i] = (float)(i % 17) / 16.0f - 0.5f;
  for (int i = 0; i < 2 && e == PKRT_OK; i++) e = pkrt_gpu_copy_to(mem, off[i], fill, bytes[i]);
  if (e == PKRT_OK) e = pkrt_gpu_blas_open(g, c->extern_lib, &blas);
  for (int i = -2; i < reps && e == PKRT_OK; i++)
    e = pkrt_gpu_blas_sgemm(blas, s.trans_a, s.trans_b, s.m, s.n, s.k, &v[0], s.lda, &v[1],
                            s.ldb, &v[2], s.ldc, i < 0 ? &t : &ms[i]);
  if (e == PKRT_OK) {
    double sum = 0, sq = 0;
    for (int i = 0; i < reps; i++) sum += ms[i], sq += ms[i] * ms[i];
    qsort(ms, (size_t)reps, sizeof *ms, cmp_ms);
    double mean = sum / reps;
    *out = (pk_timing){.median_ns = ms[reps / 2] * 1e6, .min_ns = ms[0] * 1e6,
                       .stddev_ns = sqrt(fmax(0, sq / reps - mean * mean)) * 1e6,
                       .repeats = reps};
  } else {
    st = pk_ctx_fail(ctx, PK_ERR_RUNTIME, "cuBLAS %dx%dx%d: %s", (int)s.m, (int)s.n, (int)s.k,
                     e == PKRT_ERR_NOMEM ? "out of memory" : pkrt_ctx_error(rt));
  }
  pkrt_gpu_blas_close(blas);
  pkrt_gpu_mem_free(mem);
  free(ms);
  free(fill);
  return st;
}
