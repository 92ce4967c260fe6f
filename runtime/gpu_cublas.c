/* gpu_cublas.c — cuBLAS as the extern kernel of CUDA artifacts: libcublas by dlopen, one
 * handle per model bound to the device's stream, and the row-major sgemm as cuBLAS's
 * column-major one on the transposed problem. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_impl.h"

/* cuBLAS's own types, declared here so that building libpockrt needs no toolkit:
 * cublasStatus_t and cublasOperation_t are enums, the handle a pointer. */
typedef int cb_status;
typedef struct cublasContext *cb_handle;
enum { CB_OP_N = 0, CB_OP_T = 1 };
typedef cb_status (*cb_create_fn)(cb_handle *h);
typedef cb_status (*cb_destroy_fn)(cb_handle h);
typedef cb_status (*cb_set_stream_fn)(cb_handle h, void *stream);
typedef cb_status (*cb_sgemm_fn)(cb_handle h, int ta, int tb, int m, int n, int k,
                                 const float *alpha, const float *a, int lda, const float *b,
                                 int ldb, const float *beta, float *c, int ldc);
typedef const char *(*cb_status_name_fn)(cb_status s);

struct pkrt_gpu_blas {
  pkrt_gpu *g;
  void *lib;
  cb_handle handle;
  cb_destroy_fn destroy;
  cb_sgemm_fn sgemm;
  cb_status_name_fn status_name; /* cuBLAS 11.4.2 and later; NULL: the number is said */
  char library[256];
};

static pkrt_status cb_fail(pkrt_gpu_blas *b, const char *call, cb_status s) {
  const char *name = b->status_name ? b->status_name(s) : NULL;
  return pkrt_ctx_fail(b->g->rt, PKRT_ERR_GPU, "%s (%s): %s (%d)", call, b->library,
                       name ? name : "cuBLAS status", s);
}

/* dlopens the first of library's space-separated names that loads (NULL:
 * PKRT_CUBLAS_LIBRARIES). */
static pkrt_status cb_load(pkrt_gpu_blas *b, const char *library) {
  const char *names = library && *library ? library : PKRT_CUBLAS_LIBRARIES, *why = NULL;
  for (const char *p = names; *p && !b->lib;) {
    size_t n = strcspn(p, " ");
    snprintf(b->library, sizeof b->library, "%.*s", (int)n, p);
    if (!(b->lib = dlopen(b->library, RTLD_NOW | RTLD_LOCAL))) why = dlerror();
    p += n;
    p += *p == ' ';
  }
  if (!b->lib)
    return pkrt_ctx_fail(b->g->rt, PKRT_ERR_EXTERN, "cannot load libcublas (tried %s): %s",
                         names, why ? why : "unknown dlopen error");
  return PKRT_OK;
}

pkrt_status pkrt_gpu_blas_open(pkrt_gpu *g, const char *library, pkrt_gpu_blas **out) {
  if (!g || !out) return PKRT_ERR_INPUT;
  *out = NULL;
  void *stream = NULL;
  pkrt_status st = pkrt_gpu_cuda_stream(g, &stream); /* refuses an OpenCL device */
  if (st != PKRT_OK) return st;
  pkrt_gpu_blas *b = calloc(1, sizeof *b);
  if (!b) return pkrt_ctx_fail(g->rt, PKRT_ERR_NOMEM, "out of memory opening cuBLAS");
  b->g = g;
  if ((st = cb_load(b, library)) != PKRT_OK) goto fail;
  static const char *const syms[5] = {"cublasCreate_v2", "cublasDestroy_v2",
                                      "cublasSetStream_v2", PKRT_CUBLAS_SGEMM_SYM,
                                      "cublasGetStatusName"};
  void *fn[5];
  for (int i = 0; i < 5; i++)
    if (!(fn[i] = dlsym(b->lib, syms[i])) && i < 4) {
      st = pkrt_ctx_fail(g->rt, PKRT_ERR_EXTERN, "extern symbol %s not found in %s", syms[i],
                         b->library);
      goto fail;
    }
  /* POSIX guarantees a data pointer from dlsym converts to a function pointer. */
  cb_create_fn create;
  cb_set_stream_fn set_stream;
  *(void **)&create = fn[0];
  *(void **)&b->destroy = fn[1];
  *(void **)&set_stream = fn[2];
  *(void **)&b->sgemm = fn[3];
  *(void **)&b->status_name = fn[4];
  cb_status s = create(&b->handle);
  if (s) {
    b->handle = NULL;
    st = cb_fail(b, "cublasCreate", s);
    goto fail;
  }
  if ((s = set_stream(b->handle, stream))) {
    st = cb_fail(b, "cublasSetStream", s);
    goto fail;
  }
  *out = b;
  return PKRT_OK;
fail:
  pkrt_gpu_blas_close(b);
  return st;
}

/* Whether a view holds a rows×ld matrix of floats whose rows are cols long. */
static bool holds(const pkrt_gpu_ptr *p, int32_t rows, int32_t cols, int32_t ld) {
  return p && ld >= cols && (size_t)(rows - 1) * (size_t)ld * 4 + (size_t)cols * 4 <= p->bytes;
}

pkrt_status pkrt_gpu_blas_sgemm(pkrt_gpu_blas *b, int trans_a, int trans_b, int32_t m,
                                int32_t n, int32_t k, const pkrt_gpu_ptr *a, int32_t lda,
                                const pkrt_gpu_ptr *bm, int32_t ldb, const pkrt_gpu_ptr *c,
                                int32_t ldc, double *elapsed_ms) {
  if (!b) return PKRT_ERR_INPUT;
  if (m < 1 || n < 1 || k < 1 || !holds(a, trans_a ? k : m, trans_a ? m : k, lda) ||
      !holds(bm, trans_b ? n : k, trans_b ? k : n, ldb) || !holds(c, m, n, ldc))
    return pkrt_ctx_fail(b->g->rt, PKRT_ERR_INPUT,
                         "cublasSgemm: m %d, n %d, k %d with lda %d, ldb %d, ldc %d do not fit "
                         "the buffers given", m, n, k, lda, ldb, ldc);
  void *stream;
  pkrt_status st = pkrt_gpu_cuda_stream(b->g, &stream);
  if (st == PKRT_OK && elapsed_ms) st = pkrt_gpu_cuda_timer(b->g, 0, NULL);
  if (st != PKRT_OK) return st;
  /* Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ, and a row-major matrix
   * read column-major is its transpose: so B comes first, n and m swap, and each keeps its
   * own op and leading dimension. */
  const float alpha = 1.0f, beta = 0.0f; /* C overwritten, as the CPU extern does */
  cb_status s = b->sgemm(b->handle, trans_b ? CB_OP_T : CB_OP_N, trans_a ? CB_OP_T : CB_OP_N,
                         n, m, k, &alpha, (const float *)(uintptr_t)bm->addr, ldb,
                         (const float *)(uintptr_t)a->addr, lda, &beta,
                         (float *)(uintptr_t)c->addr, ldc);
  if (s) return cb_fail(b, PKRT_CUBLAS_SGEMM_SYM, s);
  return elapsed_ms ? pkrt_gpu_cuda_timer(b->g, 1, elapsed_ms) : PKRT_OK;
}

void pkrt_gpu_blas_close(pkrt_gpu_blas *b) {
  if (!b) return;
  void *stream;
  /* the handle is destroyed with the device's context current; failures have no one to
   * report to */
  if (b->handle && pkrt_gpu_cuda_stream(b->g, &stream) == PKRT_OK) b->destroy(b->handle);
  if (b->lib) dlclose(b->lib);
  free(b);
}
