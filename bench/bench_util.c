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

double pk_bench_median(double *v, int n) {
  for (int i = 1; i < n; i++) /* insertion sort: n is a handful of rounds */
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : 0;
}

void pk_bench_rounds(pk_bench_contestant *c, int n, int rounds, int64_t min_ns) {
  bool *failed = calloc((size_t)n, sizeof *failed);
  for (int r = 0; r < rounds; r++)
    for (int a = 0; a < n; a++) {
      pk_timing t;
      c[a].round_ns[r] = 0;
      if (failed[a] || pk_measure(c[a].fn, c[a].arg, min_ns, &t) != 0) failed[a] = true;
      else c[a].round_ns[r] = t.median_ns;
    }
  double *sorted = malloc(sizeof(double) * (size_t)rounds);
  for (int a = 0; a < n; a++) {
    c[a].median_ns = c[a].min_ns = c[a].max_ns = 0;
    if (failed[a] || rounds == 0) continue;
    for (int r = 0; r < rounds; r++) sorted[r] = c[a].round_ns[r];
    c[a].median_ns = pk_bench_median(sorted, rounds);
    c[a].min_ns = sorted[0];
    c[a].max_ns = sorted[rounds - 1];
  }
  free(sorted);
  free(failed);
}
