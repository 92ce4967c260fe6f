/* bench_util.c — the benches' shared timing helpers (bench_util.h). */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"

int pk_bench_run_kernel(void *arg) {
  pk_bench_kernel_run *r = arg;
  return r->k->fn(r->hb->bufs, r->hb->n, NULL, 0, r->workspace, r->exec);
}

int pk_bench_run_sgemm(void *arg) {
  pk_bench_sgemm_run *r = arg;
  int32_t order = 101, ldc = r->n;
  float alpha = 1, beta = 0;
  void *args[] = {&order, &r->ta, &r->tb, &r->m, &r->n, &r->k, &alpha, (void *)&r->a, &r->lda,
                  (void *)&r->b, &r->ldb, &beta, &r->c, &ldc};
  pkrt_extern_call(r->fn, args, NULL);
  return 0;
}

double pk_bench_time_scheduled(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, pk_te_program *prog,
                               pk_schedule *sched, int64_t min_ns, pk_host_buffers *hb) {
  pkrt_module *m;
  if (pk_build_scheduled(ctx, cc, rt, &prog, &sched, 1, &m) != PK_OK) {
    fprintf(stderr, "build: %s\n", pk_ctx_error(ctx));
    return -1;
  }
  const pkrt_kernel_desc *k = pkrt_module_find(m, "k0");
  pk_kernel_check_result res;
  if (pk_kernel_check_scheduled(ctx, rt, prog, sched, k, 11, &res) != PK_OK) {
    fprintf(stderr, "WRONG RESULT: %s\n", pk_ctx_error(ctx));
    pkrt_module_free(m);
    return -1;
  }
  void *ws = k->workspace_bytes ? aligned_alloc(64, ((size_t)k->workspace_bytes + 63) / 64 * 64) : NULL;
  pk_bench_kernel_run run = {k, hb, ws, pkrt_ctx_exec(rt)};
  pk_timing t;
  int rc = pk_measure(pk_bench_run_kernel, &run, min_ns, &t);
  free(ws);
  pkrt_module_free(m);
  return rc ? -1 : t.median_ns;
}
