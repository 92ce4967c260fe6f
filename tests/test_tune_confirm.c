/* test_tune_confirm.c — confirmed winners: a candidate with one lucky timing becomes the
 * database's best without confirmation, and does not once the leaders are re-timed side by
 * side. Timings come from the measurer's test hook (deterministic: no real timing decides
 * anything here). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pk_test.h"
#include "pk_tune.h"
#include "pk_tunedb.h"
#include "tune_test_util.h"

static const char *const MATMUL_TE =
    "A = placeholder((32, 48), f32)\n"
    "B = placeholder((48, 64), f32)\n"
    "k = reduce_axis(48)\n"
    "C = compute((32, 64), (i, j) => sum(A[i, k] * B[k, j], k))\n";

/* The hook's world: every candidate takes 1000..1999 ns (from its trace hash), except the
 * first one the tuner measures after the baseline: 1 ns once (lucky), 5000 ns re-timed. */
typedef struct timings {
  int seen;
  char lucky[2 * PKRT_SHA256_BYTES + 1];
} timings;

static void fake_timing(void *arg, const pk_candidate *c, bool confirming, double *median_ns,
                        double *min_ns) {
  timings *t = arg;
  if (!c) return;
  if (!confirming && ++t->seen == 2) snprintf(t->lucky, sizeof t->lucky, "%s", c->trace_hash);
  double ns = 1000 + (double)((c->trace_hash[0] * 31 + c->trace_hash[1]) % 1000);
  if (!strcmp(c->trace_hash, t->lucky)) ns = confirming ? 5000 : 1;
  *median_ns = *min_ns = ns;
}

/* Tunes the matmul into db (confirm_top leaders re-timed) and returns the database's best. */
static bool tune(pk_ctx *ctx, const char *db, int confirm_top, timings *t, pk_record *best) {
  pk_tune_options o;
  pk_test_tune_options(&o, db, fake_timing, t);
  o.trials = 9; /* the baseline and two batches of 4 */
  o.confirm_top = confirm_top;
  pk_tune_report rep;
  if (!pk_test_tune(ctx, MATMUL_TE, &o, &rep)) return false;
  *best = rep.tasks[0].best;
  printf("  confirm_top %d: %lld records, %d confirmed; best %s at %.0f ns (confirmed %.0f ns, "
         "%d rounds)\n", confirm_top, (long long)rep.committed, rep.tasks[0].confirmed,
         best->cand.trace_hash, best->meas.timing.median_ns, best->confirmed.median_ns,
         best->confirmed.rounds);
  return rep.tasks[0].has_best;
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  if (pk_test_tmpdir_make("pock-confirm-") != 0) return 1;
  const char *plain = pk_test_path("plain.db"), *conf = pk_test_path("confirm.db");

  timings t1 = {0};
  pk_record best;
  bool ok = tune(ctx, plain, 0, &t1, &best);
  check(ok && t1.lucky[0] && !strcmp(best.cand.trace_hash, t1.lucky) && !best.confirmed.rounds,
        "unconfirmed_lucky_wins", "without confirmation the lucky candidate (1 ns once) should be db best");

  timings t2 = {0};
  ok = tune(ctx, conf, 3, &t2, &best);
  check(ok && t2.lucky[0] && strcmp(best.cand.trace_hash, t2.lucky) != 0, "confirmed_lucky_loses",
        "with confirmation the lucky candidate is still db best");
  check(ok && best.confirmed.rounds == 5 && best.confirmed.median_ns >= 1000 &&
            best.confirmed.median_ns < 2000,
        "best_is_confirmed", "db best: %d rounds, %.0f ns", best.confirmed.rounds,
        best.confirmed.median_ns);

  /* The lucky record keeps its own timing and carries its confirmation beside it. */
  pk_tunedb *db;
  pk_record *recs;
  int64_t n = 0;
  bool found = false;
  if (pk_db_open(ctx, conf, PK_DB_OPEN_EXISTING, &db) == PK_OK) {
    pk_te_program *prog;
    pk_task task;
    if (pk_te_parse(ctx, MATMUL_TE, strlen(MATMUL_TE), "mm.te", &prog) == PK_OK &&
        pk_task_from_program(ctx, prog, "c", &task) == PK_OK &&
        pk_db_history(db, task.workload, NULL, &recs, &n) == PK_OK)
      for (int64_t i = 0; i < n; i++)
        if (!strcmp(recs[i].cand.trace_hash, t2.lucky))
          found = recs[i].meas.timing.median_ns == 1 && recs[i].confirmed.median_ns == 5000 &&
                  recs[i].confirmed.rounds == 5;
    pk_db_close(db);
  }
  check(found, "lucky_record_keeps_both", "want measured 1 ns, confirmed 5000 ns over 5 rounds");

  pk_test_tmpdir_remove();
  pk_ctx_free(ctx);
  return pk_test_summary("test_tune_confirm");
}
