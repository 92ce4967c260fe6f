/* search_retime.c — re-times, side by side in one process, the best generated kernel that
 * each of several tuning databases found for one TE within its first N trials: the search-
 * efficiency bench (bench/bench_search.sh) compares tuners this way, so that the verdict
 * does not rest on timings taken at different moments of a noisy machine.
 *
 * Usage: search_retime FILE.te DB:MAXTRIAL [DB:MAXTRIAL ...]
 * Prints one line per database: "DB MAXTRIAL trial=T gflops=G" (G = 0: no OK record). */
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

  int bad = 0;
  for (int a = 2; a < argc; a++) {
    char *path = pk_strdup(ctx, argv[a]);
    char *colon = strrchr(path, ':');
    int64_t max_trial = INT64_MAX;
    if (colon) {
      *colon = 0;
      max_trial = strtoll(colon + 1, NULL, 10);
    }
    const pk_record *best = best_within(ctx, path, &task, &fp, max_trial);
    double gflops = 0;
    if (best) {
      pk_schedule *s;
      pkrt_module *m;
      if (pk_sched_from_json(ctx, p, best->cand.trace, &s) != PK_OK ||
          pk_build_scheduled(ctx, cc, rt, &p, &s, 1, &m) != PK_OK) {
        fprintf(stderr, "%s: %s\n", path, pk_ctx_error(ctx));
        return 1;
      }
      const pkrt_kernel_desc *k = pkrt_module_find(m, "k0");
      pk_kernel_check_result res;
      if (pk_kernel_check_scheduled(ctx, rt, p, s, k, 11, &res) != PK_OK) {
        fprintf(stderr, "%s: WRONG RESULT: %s\n", path, pk_ctx_error(ctx));
        bad = 1;
      } else {
        void *ws = k->workspace_bytes ? aligned_alloc(64, ((size_t)k->workspace_bytes + 63) / 64 * 64) : NULL;
        pk_bench_kernel_run ra = {k, &hb, ws, pkrt_ctx_exec(rt)};
        pk_timing t;
        if (pk_measure(pk_bench_run_kernel, &ra, PK_MEASURE_MIN_NS, &t) == 0) gflops = task.flops / t.median_ns;
        free(ws);
      }
      pkrt_module_free(m);
    }
    printf("%s %lld trial=%lld gflops=%.3f\n", path, (long long)max_trial,
           best ? (long long)best->trial : -1LL, gflops);
    fflush(stdout);
  }
  pk_host_buffers_free(&hb);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  return bad;
}
