/* measure_extern.c — calling an extern candidate: cblas_sgemm through the runtime's libffi
 * path (pkrt_extern_sgemm, the call artifacts make too) on the task's buffers, with the
 * shape pk_match_sgemm found (pk_search.h). */
#include "measure_impl.h"

void meas_sgemm_call(const pkrt_extern *fn, const pk_sgemm_shape *g, void *const *data) {
  pkrt_extern_sgemm(fn, g->trans_a, g->trans_b, g->m, g->n, g->k, data[g->a], g->lda, data[g->b],
                    g->ldb, data[g->c], g->ldc);
}
