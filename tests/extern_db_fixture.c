/* extern_db_fixture.c — writes a tuning database in which the OpenBLAS sgemm extern won
 * every task of a model's training graph that sgemm computes (issue 21, backend
 * switching), without timing anything: one OK extern record per such task on this
 * device's "c" fingerprint, faster than a generated-schedule record beside it.
 * Usage: extern_db_fixture DB MODEL BATCH LIBRARY [SPEC [OPTIMIZER]]   (prints the number
 * of extern tasks; LIBRARY is the record's library: libopenblas.so.0, or a stand-in's path;
 * SPEC "-" for none; OPTIMIZER as pock compile --optimizer) */
#include "pk_driver.h"
#include "pk_search.h"
#include "tunedb_test_util.h"

int main(int argc, char **argv) {
  if (argc < 5 || argc > 7) {
    fprintf(stderr, "usage: extern_db_fixture DB MODEL BATCH LIBRARY [SPEC [OPTIMIZER]]\n");
    return 2;
  }
  pk_ctx *ctx = pk_ctx_new();
  pk_compile_options o = pk_compile_defaults();
  o.model = argv[2];
  o.batch = atoll(argv[3]);
  o.sparse = argc >= 6 && strcmp(argv[5], "-") != 0 ? argv[5] : NULL;
  o.optimizer = argc == 7 ? argv[6] : NULL;
  pk_model_tasks mt;
  pk_target *target = NULL;
  pk_target_fp fp;
  pk_tunedb *db = NULL;
  pk_cc *cc = NULL;
  int64_t run;
  int nextern = 0;
  pk_status s = pk_model_tasks_of(ctx, &o, &mt);
  if (s == PK_OK) s = pk_target_parse(ctx, "c", NULL, &target);
  if (s == PK_OK) s = pk_target_fp_of(ctx, target, &fp);
  if (s == PK_OK) s = pk_cc_new(ctx, NULL, &cc);
  if (s == PK_OK) s = pk_db_open(ctx, argv[1], PK_DB_OPEN_CREATE, &db);
  if (s == PK_OK) s = pk_db_target_add(db, &fp);
  if (s == PK_OK) s = pk_db_run_begin(db, "random", "{\"trials\":2}", &run);
  for (int i = 0; s == PK_OK && i < mt.n; i++) {
    pk_task task;
    pk_space *sp;
    if ((s = pk_task_for_target(ctx, mt.progs[i], target, &task)) != PK_OK) break;
    if (pk_space_new(ctx, &task, &sp) != PK_OK || pk_space_nexterns(sp) == 0) {
      pk_ctx_clear_error(ctx); /* no space, or not an sgemm: nothing to record */
      continue;
    }
    if ((s = pk_db_workload_add(db, &task)) != PK_OK) break;
    /* the generated schedule's record (default loop nest), slower than the extern's */
    pk_record slow = make_record(ctx, &task, &fp, run, 1, PK_MEAS_OK, 9000, PK_CAND_SCHEDULE,
                                 pk_cc_version(cc));
    slow.cand.trace = PK_EMPTY_TRACE;
    slow.cand.knobs = "{}";
    slow.cand.trace_hash = hex_sha256(ctx, slow.cand.trace);
    pk_record fast = make_record(ctx, &task, &fp, run, 2, PK_MEAS_OK, 1000, PK_CAND_EXTERN,
                                 pk_cc_version(cc));
    fast.cand = *pk_space_extern(sp, 0); /* symbol, signature and the call's knobs */
    fast.cand.extern_lib = argv[4];
    fast.cand.trace_hash = hex_sha256(ctx, pk_sprintf(ctx, "extern:%s %s %s", argv[4],
                                                      fast.cand.extern_sym, fast.cand.extern_sig));
    pk_record *both[2] = {&slow, &fast};
    for (int j = 0; j < 2 && s == PK_OK; j++) {
      both[j]->flags = pk_cc_flags(cc);
      both[j]->codegen_version = PK_CGEN_C_VERSION;
      pk_record_make_id(ctx, both[j]);
      s = pk_db_record_commit(db, both[j], NULL);
    }
    nextern++;
  }
  if (s == PK_OK) s = pk_db_run_finish(db, run, PK_DB_RUN_FINISHED);
  if (s != PK_OK) fprintf(stderr, "extern_db_fixture: %s\n", pk_ctx_error(ctx));
  else printf("%d extern tasks\n", nextern);
  if (db) pk_db_close(db);
  pk_ctx_free(ctx);
  return s == PK_OK ? 0 : 1;
}
