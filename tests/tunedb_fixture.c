/* tunedb_fixture.c — writes a small tuning database for test_db_cli.sh.
 * Usage: tunedb_fixture DB HERE.te ELSEWHERE.te
 * HERE.te gets six records on this device's "c" fingerprint (OK, OK, crash, timeout, an OK
 * extern, wrong); ELSEWHERE.te two on another device's "c" fingerprint (OK, compile error),
 * so `pock db best --target c` finds it only through the generic fallback. The records say
 * this build's compiler and flags measured them, as a tuning run here would. */
#include "pk_codegen.h"
#include "tunedb_test_util.h"

static pk_status task_of(pk_ctx *ctx, const char *file, pk_task *t) {
  char *text;
  size_t len;
  pk_te_program *prog;
  pk_status s = pk_read_file(ctx, file, &text, &len);
  if (s == PK_OK) s = pk_te_parse(ctx, text, len, file, &prog);
  if (s == PK_OK) s = pk_task_from_program(ctx, prog, "c", t);
  return s;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: tunedb_fixture DB HERE.te ELSEWHERE.te\n");
    return 2;
  }
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *db = NULL;
  pk_task here, elsewhere;
  pk_target_fp this_device, other_device = make_fp(ctx, "c", "[\"elsewhere\"]");
  int64_t run;
  pk_status s = task_of(ctx, argv[2], &here);
  if (s == PK_OK) s = task_of(ctx, argv[3], &elsewhere);
  if (s == PK_OK) s = pk_target_fp_detect(ctx, "c", &this_device);
  pk_cc *cc = NULL;
  if (s == PK_OK) s = pk_cc_new(ctx, NULL, &cc);
  if (s == PK_OK) s = pk_db_open(ctx, argv[1], PK_DB_OPEN_CREATE, &db);
  if (s == PK_OK) s = pk_db_target_add(db, &this_device);
  if (s == PK_OK) s = pk_db_target_add(db, &other_device);
  if (s == PK_OK) s = pk_db_workload_add(db, &here);
  if (s == PK_OK) s = pk_db_workload_add(db, &elsewhere);
  if (s == PK_OK) s = pk_db_run_begin(db, "random", "{\"trials\":6}", &run);
  static const struct {
    bool here;
    pk_meas_status st;
    double ns;
    pk_cand_kind kind;
  } rows[] = {
      {true, PK_MEAS_OK, 9000, PK_CAND_SCHEDULE},       {true, PK_MEAS_OK, 4000, PK_CAND_SCHEDULE},
      {true, PK_MEAS_CRASH, 0, PK_CAND_SCHEDULE},       {true, PK_MEAS_TIMEOUT, 0, PK_CAND_SCHEDULE},
      {true, PK_MEAS_OK, 5000, PK_CAND_EXTERN},         {true, PK_MEAS_WRONG, 0, PK_CAND_SCHEDULE},
      {false, PK_MEAS_OK, 800, PK_CAND_SCHEDULE},       {false, PK_MEAS_COMPILE_ERROR, 0, PK_CAND_SCHEDULE},
  };
  int trial_here = 0, trial_elsewhere = 0;
  for (size_t i = 0; s == PK_OK && i < sizeof rows / sizeof rows[0]; i++) {
    int trial = rows[i].here ? ++trial_here : ++trial_elsewhere;
    pk_record r = make_record(ctx, rows[i].here ? &here : &elsewhere,
                              rows[i].here ? &this_device : &other_device, run, trial, rows[i].st,
                              rows[i].ns, rows[i].kind, pk_cc_version(cc));
    r.flags = pk_cc_flags(cc);
    r.codegen_version = PK_CGEN_C_VERSION;
    pk_record_make_id(ctx, &r);
    s = pk_db_record_commit(db, &r, NULL);
  }
  if (s == PK_OK) s = pk_db_run_finish(db, run, PK_DB_RUN_FINISHED);
  if (s != PK_OK) fprintf(stderr, "tunedb_fixture: %s\n", pk_ctx_error(ctx));
  pk_db_close(db);
  pk_ctx_free(ctx);
  return s == PK_OK ? 0 : 1;
}
