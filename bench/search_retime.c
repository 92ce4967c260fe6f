/* search_retime.c — re-times, side by side in one process, the best generated kernel that
 * each of several tuning databases found for one TE within its first N trials: the search-
 * efficiency bench (bench/bench_search.sh) compares tuners this way, so that the verdict
 * does not rest on timings taken at different moments of a noisy machine.
 *
 * Usage: search_retime FILE.te DB:MAXTRIAL [DB:MAXTRIAL ...]
 * Prints one line per database: "DB MAXTRIAL trial=T gflops=G rounds=R min=.. max=.." (G, the
 * median over R interleaved rounds; 0: no OK record). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "pk_tunedb.h"

/* The fastest OK schedule record with trial <= max_trial (the tuner's own timing). */
static const pk_record *best_within(pk_ctx *ctx, const char *path, const pk_task *task,
                                    const pk_target_fp *fp, int64_t max_trial) {
  pk_tunedb *db;
  if (pk_db_open(ctx, path, PK_DB_OPEN_EXISTING, &db) != PK_OK) return NULL;
  pk_record *recs;
  int64_t n;
  const pk_record *best = NULL;
  if (pk_db_history(db, task->workload, fp->key, &recs, &n) == PK_OK)
    for (int64_t i = 0; i < n; i++)
      if (recs[i].meas.status == PK_MEAS_OK && recs[i].cand.kind == PK_CAND_SCHEDULE &&
          recs[i].trial <= max_trial &&
          (!best || recs[i].meas.timing.median_ns < best->meas.timing.median_ns))
        best = &recs[i];
  pk_db_close(db);
  return best;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: search_retime FILE.te DB:MAXTRIAL [DB:MAXTRIAL ...]\n");
    return 2;
  }
  pk_measure_pin_thread();
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(1);
  char *text;
  size_t len;
  pk_te_program *p;
  pk_task task;
  pk_target_fp fp;
  pk_cc *cc;
  if (pk_read_file(ctx, argv[1], &text, &len) != PK_OK ||
      pk_te_parse(ctx, text, len, argv[1], &p) != PK_OK ||
      pk_task_from_program(ctx, p, "c", &task) != PK_OK ||
      pk_target_fp_detect(ctx, "c", &fp) != PK_OK || pk_cc_new(ctx, NULL, &cc) != PK_OK) {
    fprintf(stderr, "%s\n", pk_ctx_error(ctx));
    return 1;
  }
  pk_host_buffers hb;
  pk_te_ref *ref = pk_te_ref_new(ctx, p);
  pk_te_ref_fill_random(p, ref, 3);
  if (pk_host_buffers_new(ctx, p, &hb) != PK_OK) return 1;
  for (int i = 0; i < p->ntensors; i++)
    if (p->tensors[i]->kind == PK_TE_PLACEHOLDER)
      pk_te_ref_to_buffer(p->tensors[i], &ref->tensors[i], hb.data[i]);

  /* Build and check every best first, then time them round-robin, ROUNDS times each, and
   * keep each kernel's median over rounds: load that comes and goes during the run (this
   * machine has two cores) then falls on every kernel alike instead of on one of them. */
  enum { ROUNDS = 7 };
  int n = argc - 2, bad = 0;
  const pk_record **best = pk_alloc(ctx, sizeof(pk_record *) * (size_t)n);
  pkrt_module **mods = pk_alloc(ctx, sizeof(pkrt_module *) * (size_t)n);
  void **ws = pk_alloc(ctx, sizeof(void *) * (size_t)n);
  double *rounds = pk_alloc(ctx, sizeof(double) * (size_t)n * ROUNDS);
  int64_t *max_trial = pk_alloc(ctx, sizeof(int64_t) * (size_t)n);
  const char **paths = pk_alloc(ctx, sizeof(char *) * (size_t)n);
  for (int a = 0; a < n; a++) {
    char *path = pk_strdup(ctx, argv[a + 2]);
    char *colon = strrchr(path, ':');
    max_trial[a] = INT64_MAX;
    if (colon) {
      *colon = 0;
      max_trial[a] = strtoll(colon + 1, NULL, 10);
    }
    paths[a] = path;
    best[a] = best_within(ctx, path, &task, &fp, max_trial[a]);
    if (!best[a]) continue;
    pk_schedule *s;
    if (pk_sched_from_json(ctx, p, best[a]->cand.trace, &s) != PK_OK ||
        pk_build_scheduled(ctx, cc, rt, &p, &s, 1, &mods[a]) != PK_OK) {
      fprintf(stderr, "%s: %s\n", path, pk_ctx_error(ctx));
      return 1;
    }
    const pkrt_kernel_desc *k = pkrt_module_find(mods[a], "k0");
    pk_kernel_check_result res;
    if (pk_kernel_check_scheduled(ctx, rt, p, s, k, 11, &res) != PK_OK) {
      fprintf(stderr, "%s: WRONG RESULT: %s\n", path, pk_ctx_error(ctx));
      bad = 1;
      pkrt_module_free(mods[a]);
      mods[a] = NULL;
      continue;
    }
    ws[a] = k->workspace_bytes ? aligned_alloc(64, ((size_t)k->workspace_bytes + 63) / 64 * 64) : NULL;
  }
  for (int r = 0; r < ROUNDS; r++)
    for (int a = 0; a < n; a++) {
      rounds[(size_t)a * ROUNDS + r] = 0;
      if (!mods[a]) continue;
      pk_bench_kernel_run ra = {pkrt_module_find(mods[a], "k0"), &hb, ws[a], pkrt_ctx_exec(rt)};
      pk_timing t;
      if (pk_measure(pk_bench_run_kernel, &ra, PK_MEASURE_MIN_NS, &t) == 0)
        rounds[(size_t)a * ROUNDS + r] = task.flops / t.median_ns;
    }
  for (int a = 0; a < n; a++) {
    double *g = &rounds[(size_t)a * ROUNDS];
    for (int i = 1; i < ROUNDS; i++) /* insertion sort: the median of the rounds */
      for (int j = i; j > 0 && g[j - 1] > g[j]; j--) {
        double t = g[j]; g[j] = g[j - 1]; g[j - 1] = t;
      }
    printf("%s %lld trial=%lld gflops=%.3f rounds=%d min=%.3f max=%.3f\n", paths[a], (long long)max_trial[a],
           best[a] ? (long long)best[a]->trial : -1LL, g[ROUNDS / 2], ROUNDS, g[0], g[ROUNDS - 1]);
    if (mods[a]) pkrt_module_free(mods[a]);
    free(ws[a]);
  }
  fflush(stdout);
  pk_host_buffers_free(&hb);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  return bad;
}
