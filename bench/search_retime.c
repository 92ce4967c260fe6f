/* search_retime.c — re-times, side by side in one process, the best generated kernel that
 * each of several tuning databases found for one TE within its first N trials: the search-
 * efficiency bench (bench/bench_search.sh) compares tuners this way, so that the verdict
 * does not rest on timings taken at different moments of a noisy machine.
 *
 * Usage: search_retime [--rounds R] [--per-round] FILE.te DB:MAXTRIAL [DB:MAXTRIAL ...]
 * Prints one line per database: "DB MAXTRIAL trial=T gflops=G rounds=R min=.. max=.." (G, the
 * median over R interleaved rounds, 7 unless given; min and max, the slowest and the fastest
 * round; 0: no OK record). --per-round also writes every round's GFLOP/s to stderr, one line
 * per round, to show how the machine's state moves all kernels together. */
#include <stdbool.h>
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
  int rounds = 7;
  bool per_round = false;
  for (;;) {
    if (argc > 2 && !strcmp(argv[1], "--rounds")) {
      rounds = atoi(argv[2]);
      argc -= 2;
      argv += 2;
    } else if (argc > 1 && !strcmp(argv[1], "--per-round")) {
      per_round = true;
      argc--;
      argv++;
    } else {
      break;
    }
  }
  if (argc < 3 || rounds < 1 || rounds > 1000) {
    fprintf(stderr, "usage: search_retime [--rounds R] [--per-round] FILE.te DB:MAXTRIAL [DB:MAXTRIAL ...]\n");
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
  pk_te_ref *ref;
  if (pk_bench_inputs(ctx, p, 3, &ref, &hb) != PK_OK) {
    fprintf(stderr, "%s\n", pk_ctx_error(ctx));
    return 1;
  }

  /* Build and check every best first, then time them round-robin (pk_measure_rounds): load
   * that comes and goes during the run falls on every kernel alike. */
  int n = argc - 2, bad = 0;
  const pk_record **best = pk_alloc(ctx, sizeof(pk_record *) * (size_t)n);
  pk_bench_built *built = pk_alloc(ctx, sizeof(pk_bench_built) * (size_t)n);
  pk_measure_contestant *con = pk_alloc(ctx, sizeof(pk_measure_contestant) * (size_t)n);
  int64_t *max_trial = pk_alloc(ctx, sizeof(int64_t) * (size_t)n);
  const char **paths = pk_alloc(ctx, sizeof(char *) * (size_t)n);
  int ncon = 0, *con_of = pk_alloc(ctx, sizeof(int) * (size_t)n);
  for (int a = 0; a < n; a++) {
    char *path = pk_strdup(ctx, argv[a + 2]);
    char *colon = strrchr(path, ':');
    max_trial[a] = INT64_MAX;
    if (colon) {
      *colon = 0;
      max_trial[a] = strtoll(colon + 1, NULL, 10);
    }
    paths[a] = path;
    con_of[a] = -1;
    built[a] = (pk_bench_built){0};
    best[a] = best_within(ctx, path, &task, &fp, max_trial[a]);
    if (!best[a]) continue;
    pk_schedule *s;
    if (pk_sched_from_json(ctx, p, best[a]->cand.trace, &s) != PK_OK) {
      fprintf(stderr, "%s: %s\n", path, pk_ctx_error(ctx));
      return 1;
    }
    if (pk_bench_build_checked(ctx, cc, rt, p, s, ref, &hb, &built[a]) != PK_OK) {
      fprintf(stderr, "%s: build or check failed: %s\n", path, pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
      bad = 1;
      continue;
    }
    con_of[a] = ncon;
    con[ncon++] = (pk_measure_contestant){pk_bench_run_kernel, &built[a].run,
                                        .round_ns = pk_alloc(ctx, sizeof(double) * rounds)};
  }
  pk_measure_rounds(con, ncon, rounds, PK_MEASURE_MIN_NS);
  for (int r = 0; per_round && r < rounds; r++) {
    fprintf(stderr, "round %d:", r + 1);
    for (int c = 0; c < ncon; c++)
      fprintf(stderr, " %.2f", con[c].round_ns[r] > 0 ? task.flops / con[c].round_ns[r] : 0.0);
    fputc('\n', stderr);
  }
  for (int a = 0; a < n; a++) {
    const pk_measure_contestant *c = con_of[a] >= 0 ? &con[con_of[a]] : NULL;
    double g = c && c->median_ns > 0 ? task.flops / c->median_ns : 0;
    double lo = c && c->max_ns > 0 ? task.flops / c->max_ns : 0;
    double hi = c && c->min_ns > 0 ? task.flops / c->min_ns : 0;
    printf("%s %lld trial=%lld gflops=%.3f rounds=%d min=%.3f max=%.3f\n", paths[a], (long long)max_trial[a],
           best[a] ? (long long)best[a]->trial : -1LL, g, rounds, lo, hi);
    pk_bench_built_free(&built[a]);
  }
  fflush(stdout);
  pk_host_buffers_free(&hb);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  return bad;
}
