/* test_tune_transfer.c — transfer between shapes: a matmul tuned for the first time, in a
 * database holding another shape of its class, measures that shape's best config in its
 * first batch; with --no-transfer it does not; another program of the class (an NT matmul
 * beside NN ones) learns from their records but takes none of their configs; and a shape
 * tuned for another CPU target of this arch (-march=nehalem, SSE vectors) is learnt from
 * and seeds the first batch on this machine's target. Timings come from the measurer's test hook
 * (the other shape's best is the last config it measured), so nothing here depends on
 * real timings. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pk_target.h"
#include "pk_test.h"
#include "pk_tune.h"
#include "pk_tunedb.h"
#include "tune_test_util.h"

/* Same M and N, another K: their spaces have the same knobs and values. */
static const char *const SHAPE_A =
    "A = placeholder((32, 48), f32)\nB = placeholder((48, 64), f32)\nk = reduce_axis(48)\n"
    "C = compute((32, 64), (i, j) => sum(A[i, k] * B[k, j], k))\n";
static const char *const SHAPE_B =
    "A = placeholder((32, 40), f32)\nB = placeholder((40, 64), f32)\nk = reduce_axis(40)\n"
    "C = compute((32, 64), (i, j) => sum(A[i, k] * B[k, j], k))\n";
/* B stored (N, K): the same class, another program. */
static const char *const SHAPE_NT =
    "A = placeholder((32, 40), f32)\nB = placeholder((64, 40), f32)\nk = reduce_axis(40)\n"
    "C = compute((32, 64), (i, j) => sum(A[i, k] * B[j, k], k))\n";

/* Every generated candidate takes 1000 ns but the last one measured of shape A: 1 ns. */
typedef struct timings {
  int seen, last;
  char best_knobs[1024];
} timings;

static void fake_timing(void *arg, const pk_candidate *c, bool confirming, double *median_ns,
                        double *min_ns) {
  timings *t = arg;
  *median_ns = *min_ns = 1000;
  if (!c || confirming || c->kind != PK_CAND_SCHEDULE) return;
  if (++t->seen == t->last) {
    snprintf(t->best_knobs, sizeof t->best_knobs, "%s", c->knobs);
    *median_ns = *min_ns = 1;
  }
}

/* Tunes te into db (a checkpointed WAL file: pk_tune closes it). */
static bool tune_for(pk_ctx *ctx, const pk_target *target, const char *db, const char *te,
                     int64_t trials, bool transfer, timings *t, pk_tune_report *rep) {
  pk_tune_options o;
  pk_test_tune_options(&o, db, fake_timing, t);
  o.target = target;
  o.trials = trials;
  o.confirm_top = 0;
  o.transfer = transfer;
  return pk_test_tune(ctx, te, &o, rep);
}

static bool tune(pk_ctx *ctx, const char *db, const char *te, int64_t trials, bool transfer,
                 timings *t, pk_tune_report *rep) {
  return tune_for(ctx, NULL, db, te, trials, transfer, t, rep);
}

/* Whether shape B's records in db include one with these knobs. */
static bool has_knobs(pk_ctx *ctx, const char *db_path, const char *knobs) {
  pk_tunedb *db;
  pk_te_program *prog;
  pk_task task;
  pk_record *recs;
  int64_t n = 0;
  bool found = false;
  if (pk_db_open(ctx, db_path, PK_DB_OPEN_EXISTING, &db) != PK_OK) return false;
  if (pk_te_parse(ctx, SHAPE_B, strlen(SHAPE_B), "b.te", &prog) == PK_OK &&
      pk_task_from_program(ctx, prog, "c", &task) == PK_OK &&
      pk_db_history(db, task.workload, NULL, &recs, &n) == PK_OK)
    for (int64_t i = 0; i < n; i++) found |= recs[i].cand.knobs && !strcmp(recs[i].cand.knobs, knobs);
  pk_db_close(db);
  return found;
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  if (pk_test_tmpdir_make("pock-transfer-") != 0) return 1;
  const char *with = pk_test_path("with.db"), *without = pk_test_path("without.db");
  timings ta = {.last = 6}; /* shape A: the 6th generated config wins */
  pk_tune_report ra, rw, rn;
  bool ok = tune(ctx, with, SHAPE_A, 9, true, &ta, &ra) && ta.best_knobs[0];
  check(ok, "shape_a_tuned", "no best found for shape A");
  size_t len;
  unsigned char *bytes = ok ? pk_test_read_file(with, &len) : NULL; /* the same database twice */
  ok = bytes && pk_test_write_file(without, bytes, len) == 0;
  free(bytes);
  timings tb = {.last = -1};
  ok = ok && tune(ctx, with, SHAPE_B, 5, true, &tb, &rw) && tune(ctx, without, SHAPE_B, 5, false, &tb, &rn);
  check(ok && ra.tasks[0].transfer_records == 0, "first_shape_nothing_to_learn",
        "shape A, the first shape tuned, reports %d transfer records", ra.tasks[0].transfer_records);
  /* shape A's records (its generated schedules), one shape, its best proposed first */
  check(ok && rw.tasks[0].transfer_records > 0 && rw.tasks[0].transfer_records <= 9 &&
            rw.tasks[0].transfer_shapes == 1 &&
            rw.tasks[0].transfer_seeds == 1,
        "transfer_reported", "shape B reports %d records of %d shapes, %d seeds (want 1..9, 1, 1)",
        ok ? rw.tasks[0].transfer_records : -1, ok ? rw.tasks[0].transfer_shapes : -1,
        ok ? rw.tasks[0].transfer_seeds : -1);
  check(ok && rn.tasks[0].transfer_records == 0 && rn.tasks[0].transfer_seeds == 0,
        "no_transfer_reports_none", "with --no-transfer shape B reports transfer records");
  check(ok && has_knobs(ctx, with, ta.best_knobs), "transfer_seeds_first_batch",
        "shape B's first batch lacks shape A's best config %s", ta.best_knobs);
  check(ok && !has_knobs(ctx, without, ta.best_knobs), "no_transfer_starts_fresh",
        "without transfer shape B still measured shape A's best config");
  timings tc = {.last = -1};
  pk_tune_report rt;
  ok = ok && tune(ctx, with, SHAPE_NT, 3, true, &tc, &rt);
  check(ok && rt.tasks[0].transfer_records > 0 && rt.tasks[0].transfer_shapes == 2 &&
            rt.tasks[0].transfer_same == 0 && rt.tasks[0].transfer_seeds == 0,
        "other_program_no_seeds", "an NT matmul beside 2 NN shapes: %d records, %d workloads, "
        "%d of its program, %d seeds (want >0, 2, 0, 0)", ok ? rt.tasks[0].transfer_records : -1,
        ok ? rt.tasks[0].transfer_shapes : -1, ok ? rt.tasks[0].transfer_same : -1,
        ok ? rt.tasks[0].transfer_seeds : -1);
  check(ok && rw.tasks[0].transfer_same == 1, "same_program_counted",
        "shape B counts %d shapes of its program (want 1)", ok ? rw.tasks[0].transfer_same : -1);

  /* Shape B tuned for -march=nehalem first, then for this machine: its nehalem records
   * teach the model and its nehalem best (mapped knob by knob) is in the first batch. */
  const char *targets = pk_test_path("targets.db");
  pk_target *nehalem;
  timings tn = {.last = 3}, tm = {.last = -1};
  pk_tune_report rn2, rm;
  ok = pk_target_parse(ctx, "c -march=nehalem", NULL, &nehalem) == PK_OK &&
       tune_for(ctx, nehalem, targets, SHAPE_B, 6, false, &tn, &rn2) && tn.best_knobs[0] &&
       tune(ctx, targets, SHAPE_B, 4, true, &tm, &rm);
  if (!ok) printf("  (%s)\n", pk_ctx_error(ctx));
  check(ok && rm.tasks[0].transfer_targets == 1 && rm.tasks[0].transfer_records > 0 &&
            rm.tasks[0].transfer_seeds == 1,
        "other_target_transferred", "shape B on this machine after -march=nehalem: %d records, "
        "%d other targets, %d seeds (want >0, 1, 1)", ok ? rm.tasks[0].transfer_records : -1,
        ok ? rm.tasks[0].transfer_targets : -1, ok ? rm.tasks[0].transfer_seeds : -1);

  pk_test_tmpdir_remove();
  pk_ctx_free(ctx);
  return pk_test_summary("test_tune_transfer");
}
