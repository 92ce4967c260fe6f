/* layout_db_fixture.c — writes a tuning database in which a model's kernels run faster
 * with its conv chains NHWC (issue 21, the layout pass's choice by measured times),
 * without timing anything: one OK record (the default loop nest) per task on this
 * device's "c" fingerprint, 1 us for each kernel of the model compiled --layout nhwc and
 * 9 us for each kernel only the NCHW compile has.
 * Usage: layout_db_fixture DB MODEL BATCH   (prints the number of records) */
#include "pk_driver.h"
#include "pk_search.h"
#include "tunedb_test_util.h"

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: layout_db_fixture DB MODEL BATCH\n");
    return 2;
  }
  pk_ctx *ctx = pk_ctx_new();
  pk_target *target = NULL;
  pk_target_fp fp;
  pk_tunedb *db = NULL;
  pk_cc *cc = NULL;
  int64_t run;
  int n = 0, cap = 0;
  const char **done = NULL; /* workloads recorded: a kernel both layouts have keeps 1 us */
  pk_status s = pk_target_parse(ctx, "c", NULL, &target);
  if (s == PK_OK) s = pk_target_fp_of(ctx, target, &fp);
  if (s == PK_OK) s = pk_cc_new(ctx, NULL, &cc);
  if (s == PK_OK) s = pk_db_open(ctx, argv[1], PK_DB_OPEN_CREATE, &db);
  if (s == PK_OK) s = pk_db_target_add(db, &fp);
  if (s == PK_OK) s = pk_db_run_begin(db, "random", "{\"trials\":1}", &run);
  static const char *const layouts[2] = {"nhwc", "nchw"};
  for (int l = 0; l < 2 && s == PK_OK; l++) {
    pk_compile_options o = pk_compile_defaults();
    o.model = argv[2];
    o.batch = atoll(argv[3]);
    o.layout = layouts[l];
    pk_model_tasks mt;
    if ((s = pk_model_tasks_of(ctx, &o, &mt)) != PK_OK) break;
    if (!done) done = pk_alloc(ctx, sizeof *done * (size_t)(cap = 4 * mt.n + 4));
    for (int i = 0; s == PK_OK && i < mt.n; i++) {
      pk_task task;
      if ((s = pk_task_for_target(ctx, mt.progs[i], target, &task)) != PK_OK) break;
      bool seen = false;
      for (int j = 0; j < n && !seen; j++) seen = !strcmp(done[j], task.workload);
      if (seen || n == cap) continue;
      done[n++] = task.workload;
      if ((s = pk_db_workload_add(db, &task)) != PK_OK) break;
      pk_record r = make_record(ctx, &task, &fp, run, n, PK_MEAS_OK, l == 0 ? 1000 : 9000,
                                PK_CAND_SCHEDULE, pk_cc_version(cc));
      r.cand.trace = PK_EMPTY_TRACE;
      r.cand.knobs = "{}";
      r.cand.trace_hash = hex_sha256(ctx, r.cand.trace);
      r.flags = pk_cc_flags(cc);
      r.codegen_version = PK_CGEN_C_VERSION;
      pk_record_make_id(ctx, &r);
      s = pk_db_record_commit(db, &r, NULL);
    }
  }
  if (s == PK_OK) s = pk_db_run_finish(db, run, PK_DB_RUN_FINISHED);
  if (s != PK_OK) fprintf(stderr, "layout_db_fixture: %s\n", pk_ctx_error(ctx));
  else printf("%d records\n", n);
  if (db) pk_db_close(db);
  pk_ctx_free(ctx);
  return s == PK_OK ? 0 : 1;
}
