/* measure_extern.c — calling an extern candidate: cblas_sgemm through the runtime's libffi
 * path (pkrt_extern_sgemm, the call artifacts make too) on the task's buffers, with the
 * shape pk_match_sgemm found (pk_search.h); and cuBLAS on a CUDA device
 * (pkrt_gpu_blas_sgemm, the call CUDA artifacts make), checked and timed for the GPU
 * measurer as its generated kernels are (pk_gpu_device_check_op). */
#include <string.h>

#include "measure_impl.h"
#include "pk_gpu.h"
#include "pkrt.h"

void meas_sgemm_call(const pkrt_extern *fn, const pk_sgemm_shape *g, void *const *data) {
  pkrt_extern_sgemm(fn, g->trans_a, g->trans_b, g->m, g->n, g->k, data[g->a], g->lda, data[g->b],
                    g->ldb, data[g->c], g->ldc);
}

/* cuBLAS's sgemm as an operation on the task's tensors: the call CUDA artifacts make. */
typedef struct cublas_call {
  pkrt_gpu_blas *blas;
  const pk_sgemm_shape *s;
} cublas_call;

static pkrt_status call_cublas(void *arg, const pkrt_gpu_ptr *v, const pkrt_gpu_ptr *workspace,
                               double *elapsed_ms) {
  const cublas_call *c = arg;
  const pk_sgemm_shape *s = c->s;
  (void)workspace;
  return pkrt_gpu_blas_sgemm(c->blas, s->trans_a, s->trans_b, s->m, s->n, s->k, &v[s->a], s->lda,
                             &v[s->b], s->ldb, &v[s->c], s->ldc, elapsed_ms);
}

pk_status pk_gpu_cublas_check_timed(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g,
                                    const pk_te_program *prog, const char *library,
                                    const pk_sgemm_shape *shape, uint64_t seed,
                                    const pk_te_ref *ref, int64_t min_ns,
                                    pk_kernel_check_result *res, pk_timing *timing) {
  memset(res, 0, sizeof *res);
  const pk_sgemm_shape *s = shape;
  const char *label = pk_sprintf(ctx, "cuBLAS sgemm %dx%dx%d", (int)s->m, (int)s->n, (int)s->k);
  /* A and B inputs, C the output: what the call reads and writes must be the program's */
  const int ids[3] = {s->a, s->b, s->c};
  for (int i = 0; i < 3; i++) {
    const pk_te_tensor *t = ids[i] >= 0 && ids[i] < prog->ntensors ? prog->tensors[ids[i]] : NULL;
    if (!t || t->dtype != PKRT_DTYPE_F32 ||
        t->kind != (i < 2 ? PK_TE_PLACEHOLDER : PK_TE_COMPUTE))
      return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: tensor %d is not an f32 %s of the program",
                         label, ids[i], i < 2 ? "input" : "compute");
  }
  pkrt_gpu_blas *blas;
  if (pkrt_gpu_blas_open(g, library, &blas) != PKRT_OK) /* the message names the library */
    return pk_ctx_fail(ctx, PK_ERR_RUNTIME, "%s: %s", label, pkrt_ctx_error(rt));
  cublas_call call = {blas, s};
  pk_gpu_device_op op = {.label = label, .call = call_cublas, .arg = &call};
  pk_status st =
      pk_gpu_device_check_op(ctx, rt, g, prog, NULL, &op, seed, ref, min_ns, res, timing);
  pkrt_gpu_blas_close(blas);
  return st;
}
