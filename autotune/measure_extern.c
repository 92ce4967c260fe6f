/* measure_extern.c — calling an extern candidate: cblas_sgemm through the runtime's libffi
 * path on the task's buffers, with the shape pk_match_sgemm found (pk_search.h). */
#include "measure_impl.h"

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

void meas_sgemm_call(const pkrt_extern *fn, const pk_sgemm_shape *g, void *const *data) {
  int32_t order = CBLAS_ROW_MAJOR;
  int32_t ta = g->trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS;
  int32_t tb = g->trans_b ? CBLAS_TRANS : CBLAS_NO_TRANS;
  int32_t m = g->m, n = g->n, k = g->k, lda = g->lda, ldb = g->ldb, ldc = g->ldc;
  float alpha = 1.0f, beta = 0.0f; /* C = A·B, overwritten */
  void *a = data[g->a], *b = data[g->b], *c = data[g->c];
  void *args[] = {&order, &ta, &tb, &m, &n, &k, &alpha, &a, &lda, &b, &ldb, &beta, &c, &ldc};
  pkrt_extern_call(fn, args, NULL);
}
