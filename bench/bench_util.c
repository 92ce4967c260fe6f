/* bench_util.c — the benches' shared timing helpers (bench_util.h). */
#include <stdbool.h>
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

pk_status pk_bench_inputs(pk_ctx *ctx, pk_te_program *prog, uint64_t seed, pk_te_ref **ref,
                          pk_host_buffers *hb) {
  *ref = pk_te_ref_new(ctx, prog);
  pk_te_ref_fill_random(prog, *ref, seed);
  pk_status s = pk_te_interp_run(ctx, prog, *ref);
  if (s == PK_OK) s = pk_host_buffers_new(ctx, prog, hb);
  for (int i = 0; s == PK_OK && i < prog->ntensors; i++)
    if (prog->tensors[i]->kind == PK_TE_PLACEHOLDER)
      pk_te_ref_to_buffer(prog->tensors[i], &(*ref)->tensors[i], hb->data[i]);
  return s;
}

pk_status pk_bench_build_checked(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, pk_te_program *prog,
                                 pk_schedule *sched, const pk_te_ref *ref, pk_host_buffers *hb,
                                 pk_bench_built *out) {
  *out = (pk_bench_built){0};
  pk_status st = pk_build_scheduled(ctx, cc, rt, &prog, &sched, 1, &out->module);
  if (st != PK_OK) return st;
  const pkrt_kernel_desc *k = pkrt_module_find(out->module, "k0");
  pk_kernel_check_result res;
  st = ref ? pk_kernel_check_ref(ctx, rt, prog, sched, k, ref, &res)
           : pk_kernel_check_scheduled(ctx, rt, prog, sched, k, 11, &res);
  if (st != PK_OK) {
    pkrt_module_free(out->module);
    out->module = NULL;
    return st;
  }
  void *ws = k->workspace_bytes ? aligned_alloc(64, ((size_t)k->workspace_bytes + 63) / 64 * 64) : NULL;
  out->run = (pk_bench_kernel_run){k, hb, ws, pkrt_ctx_exec(rt)};
  return PK_OK;
}

void pk_bench_built_free(pk_bench_built *b) {
  if (b->module) pkrt_module_free(b->module);
  free(b->run.workspace);
  *b = (pk_bench_built){0};
}

double pk_bench_time_scheduled(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, pk_te_program *prog,
                               pk_schedule *sched, int64_t min_ns, pk_host_buffers *hb) {
  pk_bench_built b;
  if (pk_bench_build_checked(ctx, cc, rt, prog, sched, NULL, hb, &b) != PK_OK) {
    fprintf(stderr, "build or check: %s\n", pk_ctx_error(ctx));
    return -1;
  }
  pk_timing t;
  int rc = pk_measure(pk_bench_run_kernel, &b.run, min_ns, &t);
  pk_bench_built_free(&b);
  return rc ? -1 : t.median_ns;
}
