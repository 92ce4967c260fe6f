/* test_tunedb.c — the tuning database in one process: target fingerprints, schema creation,
 * reopening and migration, commit/has/best/history/stats, dedupe, merge, JSON-lines
 * export/import, and clear errors for malformed input and damaged or foreign files.
 * (Concurrent writers and kill -9: test_tunedb_concurrency.c.) */
#include <math.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include "tunedb_impl.h" /* pk_db_migrate with a made-up next version */
#include "tunedb_test_util.h"

static bool contains(const char *hay, const char *needle) { return hay && strstr(hay, needle); }

static const char *last_of(const char *hay, const char *needle) {
  const char *last = NULL;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++) last = p;
  return last;
}

/* Runs SQL on a file with plain SQLite, as a user of the sqlite3 shell would. */
static bool raw_sql(const char *path, const char *sql) {
  sqlite3 *sq;
  bool ok = sqlite3_open(path, &sq) == SQLITE_OK &&
            sqlite3_exec(sq, sql, NULL, NULL, NULL) == SQLITE_OK;
  if (!ok) printf("  (sqlite: %s)\n", sqlite3_errmsg(sq));
  sqlite3_close(sq);
  return ok;
}

static int64_t raw_int(const char *path, const char *sql) {
  sqlite3 *sq;
  sqlite3_stmt *st;
  int64_t v = -1;
  if (sqlite3_open(path, &sq) == SQLITE_OK && sqlite3_prepare_v2(sq, sql, -1, &st, NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(sq);
  return v;
}

static char *export_text(pk_ctx *ctx, pk_tunedb *db) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  int64_t n;
  pk_status s = pk_db_export_jsonl(db, f, &n);
  fclose(f);
  char *copy = s == PK_OK ? pk_strdup(ctx, buf) : NULL;
  free(buf);
  return copy;
}

static pk_status import_text(pk_tunedb *db, const char *text, pk_db_counts *c) {
  FILE *f = fmemopen((void *)text, strlen(text), "r");
  pk_status s = pk_db_import_jsonl(db, f, "lines.jsonl", c);
  fclose(f);
  return s;
}

/* A database with two workloads, two fingerprints of target "c", one run, and records of
 * every kind and several statuses. */
static pk_status fill(pk_ctx *ctx, pk_tunedb *db, int64_t *run) {
  pk_task t1 = make_task(ctx, 1), t2 = make_task(ctx, 2);
  pk_target_fp avx2 = make_fp(ctx, "c", "[\"avx\",\"avx2\",\"fma\"]");
  pk_target_fp avx512 = make_fp(ctx, "c", "[\"avx\",\"avx2\",\"avx512f\",\"fma\"]");
  pk_status s = pk_db_target_add(db, &avx2);
  if (s == PK_OK) s = pk_db_target_add(db, &avx512);
  if (s == PK_OK) s = pk_db_workload_add(db, &t1);
  if (s == PK_OK) s = pk_db_workload_add(db, &t2);
  if (s == PK_OK) s = pk_db_run_begin(db, "random", "{\"seed\":1,\"trials\":8}", run);
  static const struct {
    int task, trial;
    pk_meas_status st;
    double ns;
    pk_cand_kind kind;
    bool wide; /* on the avx512 fingerprint */
  } rows[] = {
      {1, 1, PK_MEAS_OK, 9000, PK_CAND_SCHEDULE, false},  {1, 2, PK_MEAS_OK, 4000, PK_CAND_SCHEDULE, false},
      {1, 3, PK_MEAS_CRASH, 0, PK_CAND_SCHEDULE, false},  {1, 4, PK_MEAS_TIMEOUT, 0, PK_CAND_SCHEDULE, false},
      {1, 5, PK_MEAS_OK, 5000, PK_CAND_EXTERN, false},    {1, 6, PK_MEAS_WRONG, 0, PK_CAND_SCHEDULE, false},
      {2, 1, PK_MEAS_OK, 800, PK_CAND_SCHEDULE, true},    {2, 2, PK_MEAS_COMPILE_ERROR, 0, PK_CAND_SCHEDULE, true},
  };
  for (size_t i = 0; s == PK_OK && i < sizeof rows / sizeof rows[0]; i++) {
    pk_task t = rows[i].task == 1 ? t1 : t2;
    pk_record r = make_record(ctx, &t, rows[i].wide ? &avx512 : &avx2, *run, rows[i].trial, rows[i].st,
                              rows[i].ns, rows[i].kind, NULL);
    s = pk_db_record_commit(db, &r, NULL);
  }
  if (s == PK_OK) s = pk_db_run_finish(db, *run, PK_DB_RUN_FINISHED);
  return s;
}

/* ---------------------------------------------------------------- fingerprints */

static void test_target_fingerprint(const char *test_name, const char *dir) {
  pk_ctx *ctx = pk_ctx_new();
  pk_target_fp fp, fake;
  unsetenv("POCK_FAKE_FINGERPRINT");
  CHECK_OK(ctx, pk_target_fp_detect(ctx, "c", &fp));
  CHECK(contains(fp.must_match, "\"arch\":") && contains(fp.must_match, "\"isa\":["), "must_match %s",
        fp.must_match);
  CHECK(contains(fp.informative, "\"cores\":") && contains(fp.informative, "\"kernel\":"),
        "informative %s", fp.informative);
  CHECK(strlen(fp.key) == 64, "key %s", fp.key);
  CHECK(!strcmp(fp.key, hex_sha256(ctx, pk_sprintf(ctx, "c\n%s", fp.must_match))), "key rule");
  pk_target_fp again;
  CHECK_OK(ctx, pk_target_fp_detect(ctx, "c -march=native", &again));
  CHECK(!strcmp(again.must_match, fp.must_match), "-march=native is native");

  setenv("POCK_FAKE_FINGERPRINT", "{\"isa\":[\"sse4_2\"]}", 1);
  pk_status s = pk_target_fp_detect(ctx, "c", &fake);
  unsetenv("POCK_FAKE_FINGERPRINT");
  CHECK(s == PK_OK, "fake: %s", pk_ctx_error(ctx));
  CHECK(contains(fake.must_match, "\"isa\":[\"sse4_2\"]") && contains(fake.must_match, "\"arch\":"),
        "fake must_match %s", fake.must_match);
  CHECK(strcmp(fake.key, fp.key) != 0 && contains(fake.informative, "\"fake\":true"), "fake key");

  setenv("POCK_FAKE_FINGERPRINT", "[1,2]", 1);
  s = pk_target_fp_detect(ctx, "c", &fake);
  unsetenv("POCK_FAKE_FINGERPRINT");
  CHECK(s == PK_ERR_USAGE && contains(pk_ctx_error(ctx), "POCK_FAKE_FINGERPRINT"), "bad fake: %s",
        pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  /* a GPU target's fingerprint is its device's: without an sm_90 device, an error naming why */
  s = pk_target_fp_detect(ctx, "cuda -arch=sm_90", &fake);
  CHECK(s == PK_OK ? contains(fake.must_match, "\"api\":\"cuda\"") &&
                         contains(fake.must_match, "\"arch\":\"sm_90\"")
                   : s == PK_ERR_UNSUPPORTED && (contains(pk_ctx_error(ctx), "this machine has none") ||
                                                 contains(pk_ctx_error(ctx), "not sm_90")),
        "cuda: %s", s == PK_OK ? fake.must_match : pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  CHECK(pk_target_fp_detect(ctx, "c -O3", &fake) == PK_ERR_USAGE && contains(pk_ctx_error(ctx), "-O3"),
        "unknown option: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  CHECK(pk_target_fp_detect(ctx, "c -march=$(reboot)", &fake) == PK_ERR_USAGE, "shell chars refused");
  pk_ctx_clear_error(ctx);
  if (contains(fp.must_match, "x86_64")) {
    CHECK_OK(ctx, pk_target_fp_detect(ctx, "c -march=x86-64-v3", &fake));
    CHECK(!strcmp(fake.must_match, "{\"arch\":\"x86_64\",\"isa\":[\"avx\",\"avx2\",\"f16c\",\"fma\",\"sse4_2\"]}"),
          "x86-64-v3: %s", fake.must_match);
    CHECK(pk_target_fp_detect(ctx, "c -march=no-such-cpu", &fake) == PK_ERR_BUILD &&
              contains(pk_ctx_error(ctx), "no-such-cpu"),
          "bad cpu: %s", pk_ctx_error(ctx));
  }
done:
  unsetenv("POCK_FAKE_FINGERPRINT");
  pk_ctx_free(ctx);
}

/* ---------------------------------------------------------------- schema */

static void test_create_reopen(const char *test_name, const char *dir) {
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *db = NULL;
  const char *path = db_path(ctx, dir, "create.db");
  CHECK(pk_db_open(ctx, path, PK_DB_OPEN_EXISTING, &db) == PK_ERR_IO &&
            contains(pk_ctx_error(ctx), "No such file"),
        "missing file: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  CHECK_OK(ctx, pk_db_open(ctx, path, PK_DB_OPEN_CREATE, &db));
  int64_t run;
  CHECK_OK(ctx, fill(ctx, db, &run));
  pk_db_close(db);
  db = NULL;
  CHECK(raw_int(path, "PRAGMA user_version") == PK_DB_SCHEMA_VERSION, "user_version");
  CHECK(raw_int(path, "PRAGMA application_id") == PK_DB_APPLICATION_ID, "application_id");
  CHECK(raw_int(path, "SELECT count(*) FROM records") == 8, "records via sqlite");
  CHECK_OK(ctx, pk_db_open(ctx, path, PK_DB_OPEN_EXISTING, &db));
  int64_t n;
  CHECK_OK(ctx, pk_db_record_count(db, NULL, NULL, PK_DB_ANY_STATUS, &n));
  CHECK(n == 8, "reopened: %lld records", (long long)n);
  CHECK_OK(ctx, pk_db_check(db));
  CHECK(raw_int(path, "SELECT count(*) FROM pragma_journal_mode WHERE journal_mode = 'wal'") == 1, "WAL");
  pk_db_close(db);
  CHECK(pk_db_open(ctx, dir, PK_DB_OPEN_CREATE, &db) == PK_ERR_IO && contains(pk_ctx_error(ctx), "directory"),
        "a directory: %s", pk_ctx_error(ctx));
done:
  pk_db_close(db);
  pk_ctx_free(ctx);
}

/* v0: a new empty SQLite file is made a tuning database; one with foreign tables is not. */
static void test_migrate_v0(const char *test_name, const char *dir) {
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *db = NULL;
  const char *empty = db_path(ctx, dir, "v0-empty.db"), *foreign = db_path(ctx, dir, "v0-foreign.db");
  CHECK(raw_sql(empty, "PRAGMA user_version = 0; VACUUM;"), "make empty v0");
  CHECK(raw_sql(foreign, "CREATE TABLE photos(id INTEGER, name TEXT);"), "make foreign");
  CHECK_OK(ctx, pk_db_open(ctx, empty, PK_DB_OPEN_EXISTING, &db));
  pk_db_close(db);
  db = NULL;
  CHECK(raw_int(empty, "PRAGMA user_version") == PK_DB_SCHEMA_VERSION, "migrated to v1");
  CHECK(pk_db_open(ctx, foreign, PK_DB_OPEN_EXISTING, &db) == PK_ERR_IO &&
            contains(pk_ctx_error(ctx), "not a Pock tuning database"),
        "foreign: %s", pk_ctx_error(ctx));
  CHECK(raw_int(foreign, "SELECT count(*) FROM sqlite_schema") == 1, "foreign file untouched");
done:
  pk_db_close(db);
  pk_ctx_free(ctx);
}

/* A v1 file made by hand with the sqlite3 shell's SQL is read; a made-up version 2 that
 * adds a column migrates it in place keeping its rows; this Pock then refuses it. */
static void test_migrate_v1_to_v2(const char *test_name, const char *dir) {
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *db = NULL;
  const char *path = db_path(ctx, dir, "v1-hand.db");
  int nsteps;
  const pk_db_migration *steps = pk_db_migrations(&nsteps);
  pk_task t = make_task(ctx, 3);
  pk_target_fp fp = make_fp(ctx, "c", "[\"avx2\"]");
  pk_record r = make_record(ctx, &t, &fp, 0, 1, PK_MEAS_OK, 1234.5, PK_CAND_SCHEDULE, NULL);
  char *sql = pk_sprintf(ctx,
                         "%s PRAGMA application_id = %d; PRAGMA user_version = 1;"
                         "INSERT INTO targets VALUES ('%s', 'c', '%s', '{}', 1700000000);"
                         "INSERT INTO workloads VALUES ('%s', 'text', 'mm', 'matmul', %g);"
                         "INSERT INTO records(id, workload, target_key, trial, kind, trace, trace_hash,"
                         " status, median_ns, gflops) VALUES ('%s', '%s', '%s', 1, 'schedule', '%s',"
                         " '%s', 'ok', 1234.5, 1.5);",
                         steps[0].sql, PK_DB_APPLICATION_ID, fp.key, fp.must_match, t.workload, t.flops,
                         r.id, t.workload, fp.key, r.cand.trace, r.cand.trace_hash);
  CHECK(raw_sql(path, sql), "hand-made v1");
  CHECK_OK(ctx, pk_db_open(ctx, path, PK_DB_OPEN_EXISTING, &db));
  pk_record best;
  pk_db_match m;
  CHECK_OK(ctx, pk_db_best(db, t.workload, fp.key, NULL, &best, &m));
  CHECK(m == PK_DB_MATCH_EXACT && !strcmp(best.id, r.id) && best.meas.timing.median_ns == 1234.5,
        "best of the hand-made file");

  pk_db_migration next[PK_DB_SCHEMA_VERSION + 1];
  memcpy(next, steps, sizeof(pk_db_migration) * (size_t)nsteps);
  next[nsteps].to_version = nsteps + 1;
  next[nsteps].sql = "ALTER TABLE records ADD COLUMN energy_nj REAL;";
  CHECK_OK(ctx, pk_db_migrate(db, next, nsteps + 1));
  CHECK_OK(ctx, pk_db_migrate(db, next, nsteps + 1)); /* nothing left to do */
  CHECK_OK(ctx, pk_db_best(db, t.workload, fp.key, NULL, &best, &m));
  CHECK(m == PK_DB_MATCH_EXACT && !strcmp(best.id, r.id), "rows kept by the migration");
  char *text = export_text(ctx, db);
  CHECK(contains(text, "\"energy_nj\":null"), "a new column is exported: %s", text ? text : pk_ctx_error(ctx));
  pk_db_close(db);
  db = NULL;
  CHECK(raw_int(path, "PRAGMA user_version") == nsteps + 1, "version 2 on disk");
  CHECK(pk_db_open(ctx, path, PK_DB_OPEN_EXISTING, &db) == PK_ERR_IO &&
            contains(pk_ctx_error(ctx), "newer than this Pock"),
        "newer refused: %s", pk_ctx_error(ctx));
done:
  pk_db_close(db);
  pk_ctx_free(ctx);
}

/* ---------------------------------------------------------------- records and lookups */

static void test_records_and_lookups(const char *test_name, const char *dir) {
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *db = NULL;
  CHECK_OK(ctx, pk_db_open(ctx, db_path(ctx, dir, "lookups.db"), PK_DB_OPEN_CREATE, &db));
  int64_t run;
  CHECK_OK(ctx, fill(ctx, db, &run));
  pk_task t1 = make_task(ctx, 1), t2 = make_task(ctx, 2);
  pk_target_fp avx2 = make_fp(ctx, "c", "[\"avx\",\"avx2\",\"fma\"]");
  pk_target_fp other = make_fp(ctx, "c", "[\"sse4_2\"]");
  pk_target_fp arm = make_fp(ctx, "c -march=armv8.2-a", "[\"asimd\"]");

  pk_record r = make_record(ctx, &t1, &avx2, run, 2, PK_MEAS_OK, 4000, PK_CAND_SCHEDULE, NULL);
  bool has;
  CHECK_OK(ctx, pk_db_record_has(db, r.id, &has));
  CHECK(has, "has a committed record");
  CHECK_OK(ctx, pk_db_record_has(db, "0123", &has));
  CHECK(!has, "has no unknown record");

  int64_t n;
  CHECK_OK(ctx, pk_db_record_count(db, t1.workload, avx2.key, PK_DB_ANY_STATUS, &n));
  CHECK(n == 6, "count t1/avx2 %lld", (long long)n);
  CHECK_OK(ctx, pk_db_record_count(db, t1.workload, NULL, PK_MEAS_OK, &n));
  CHECK(n == 3, "count t1 ok %lld", (long long)n);
  CHECK_OK(ctx, pk_db_record_count(db, NULL, NULL, PK_MEAS_CRASH, &n));
  CHECK(n == 1, "count crash %lld", (long long)n);

  pk_record best;
  pk_db_match m;
  CHECK_OK(ctx, pk_db_best(db, t1.workload, avx2.key, "c", &best, &m));
  CHECK(m == PK_DB_MATCH_EXACT && best.trial == 2 && best.meas.timing.median_ns == 4000 &&
            best.cand.kind == PK_CAND_SCHEDULE && contains(best.cand.trace, "\"factor\":2") &&
            best.run_id == run && !strcmp(best.compiler, r.compiler) && best.meas.timing.repeats == 25,
        "exact best: trial %lld", (long long)best.trial);
  /* t2 was tuned only on the avx512 device: an avx2 device falls back if asked to */
  CHECK_OK(ctx, pk_db_best(db, t2.workload, avx2.key, NULL, &best, &m));
  CHECK(m == PK_DB_MATCH_NONE && best.id == NULL, "no exact record, no fallback asked");
  CHECK_OK(ctx, pk_db_best(db, t2.workload, other.key, "c", &best, &m));
  CHECK(m == PK_DB_MATCH_GENERIC && best.trial == 1 && best.meas.timing.median_ns == 800, "generic fallback");
  CHECK_OK(ctx, pk_db_best(db, t2.workload, arm.key, arm.target, &best, &m));
  CHECK(m == PK_DB_MATCH_NONE, "fallback needs the same target string");

  pk_record *hist;
  CHECK_OK(ctx, pk_db_history(db, t1.workload, avx2.key, &hist, &n));
  CHECK(n == 6, "history has %lld", (long long)n);
  for (int64_t i = 0; i < n; i++) CHECK(hist[i].trial == i + 1, "history order at %lld", (long long)i);
  CHECK(hist[2].meas.status == PK_MEAS_CRASH && contains(hist[2].meas.error, "crash"), "failure kept");
  CHECK(hist[4].cand.kind == PK_CAND_EXTERN && !strcmp(hist[4].cand.extern_sym, "cblas_sgemm"), "extern kept");

  pk_db_stats_row *rows;
  CHECK_OK(ctx, pk_db_stats(db, &rows, &n));
  CHECK(n == 2, "stats rows %lld", (long long)n);
  const pk_db_stats_row *s1 = !strcmp(rows[0].workload, t1.workload) ? &rows[0] : &rows[1];
  CHECK(s1->records == 6 && s1->by_status[PK_MEAS_OK] == 3 && s1->by_status[PK_MEAS_CRASH] == 1 &&
            s1->by_status[PK_MEAS_TIMEOUT] == 1 && s1->by_status[PK_MEAS_WRONG] == 1,
        "stats by status");
  CHECK(s1->best_generated_gflops == t1.flops / 4000 && s1->best_extern_gflops == t1.flops / 5000 &&
            s1->best_gflops == s1->best_generated_gflops && !strcmp(s1->name, t1.name) &&
            !strcmp(s1->target, "c"),
        "stats best %g %g", s1->best_generated_gflops, s1->best_extern_gflops);

  const char *key;
  CHECK_OK(ctx, pk_db_workload_resolve(db, pk_strndup(ctx, t1.workload, 10), &key));
  CHECK(!strcmp(key, t1.workload), "resolve a prefix");
  CHECK(pk_db_workload_resolve(db, "zz", &key) == PK_ERR_CHECK, "resolve refuses non-hex");
  pk_ctx_clear_error(ctx);
  CHECK(pk_db_workload_resolve(db, "", &key) == PK_ERR_CHECK, "resolve refuses empty");
  pk_ctx_clear_error(ctx);

  /* a faster record timed under other flags: the fastest overall, but a build that asks
   * for its own records gets trial 2 (and the extern still competes) */
  pk_record stale = make_record(ctx, &t1, &avx2, run, 7, PK_MEAS_OK, 1000, PK_CAND_SCHEDULE, NULL);
  stale.flags = "-O3 -march=native -fPIC";
  pk_record_make_id(ctx, &stale);
  CHECK_OK(ctx, pk_db_record_commit(db, &stale, NULL));
  CHECK_OK(ctx, pk_db_best(db, t1.workload, avx2.key, NULL, &best, &m));
  CHECK(best.trial == 7, "no preference: the fastest of any build (trial %lld)", (long long)best.trial);
  pk_db_prefer_build(db, r.compiler, r.flags, r.codegen_version);
  CHECK_OK(ctx, pk_db_best(db, t1.workload, avx2.key, NULL, &best, &m));
  CHECK(best.trial == 2 && pk_db_record_is_preferred(db, &best) && !pk_db_record_is_preferred(db, &stale),
        "this build's records first (trial %lld)", (long long)best.trial);
  pk_db_prefer_build(db, r.compiler, "-O0", r.codegen_version);
  CHECK_OK(ctx, pk_db_best(db, t1.workload, avx2.key, NULL, &best, &m));
  CHECK(best.trial == 5 && best.cand.kind == PK_CAND_EXTERN, "no record of this build: the extern ranks first");
  pk_db_prefer_build(db, NULL, NULL, 0);
  CHECK_OK(ctx, pk_db_best(db, t1.workload, avx2.key, NULL, &best, &m));
  CHECK(best.trial == 7, "preference cleared");
done:
  pk_db_close(db);
  pk_ctx_free(ctx);
}

static void test_dedupe_and_validation(const char *test_name, const char *dir) {
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *db = NULL;
  CHECK_OK(ctx, pk_db_open(ctx, db_path(ctx, dir, "dedupe.db"), PK_DB_OPEN_CREATE, &db));
  pk_task t = make_task(ctx, 1);
  pk_target_fp fp = make_fp(ctx, "c", "[]");
  CHECK_OK(ctx, pk_db_target_add(db, &fp));
  CHECK_OK(ctx, pk_db_workload_add(db, &t));
  CHECK_OK(ctx, pk_db_workload_add(db, &t)); /* idempotent */
  pk_record r = make_record(ctx, &t, &fp, 0, 1, PK_MEAS_OK, 100, PK_CAND_SCHEDULE, NULL);
  bool inserted;
  CHECK_OK(ctx, pk_db_record_commit(db, &r, &inserted));
  CHECK(inserted, "first commit inserts");
  r.meas.timing.median_ns = 50; /* a re-measurement of the same experiment */
  CHECK_OK(ctx, pk_db_record_commit(db, &r, &inserted));
  CHECK(!inserted, "same id: ignored");
  int64_t n;
  CHECK_OK(ctx, pk_db_record_count(db, NULL, NULL, PK_DB_ANY_STATUS, &n));
  CHECK(n == 1, "one row after two commits: %lld", (long long)n);
  pk_record newer = make_record(ctx, &t, &fp, 0, 1, PK_MEAS_OK, 90, PK_CAND_SCHEDULE, "gcc 13.1");
  CHECK(strcmp(newer.id, r.id) != 0, "another compiler, another id");
  CHECK_OK(ctx, pk_db_record_commit(db, &newer, &inserted));
  CHECK(inserted, "another compiler: re-measured");
  CHECK_OK(ctx, pk_db_record_count(db, NULL, NULL, PK_DB_ANY_STATUS, &n));
  CHECK(n == 2, "two rows: %lld", (long long)n);

  pk_record bad = r;
  bad.id = "00ff";
  CHECK(pk_db_record_commit(db, &bad, NULL) == PK_ERR_CHECK && contains(pk_ctx_error(ctx), "does not match"),
        "id checked: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  pk_task unknown = make_task(ctx, 9);
  bad = make_record(ctx, &unknown, &fp, 0, 1, PK_MEAS_OK, 100, PK_CAND_SCHEDULE, NULL);
  CHECK(pk_db_record_commit(db, &bad, NULL) == PK_ERR_CHECK && contains(pk_ctx_error(ctx), "add them first"),
        "unknown workload: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  bad = make_record(ctx, &t, &fp, 0, 7, PK_MEAS_OK, 100, PK_CAND_SCHEDULE, NULL);
  bad.cand.knobs = "{tile:";
  pk_record_make_id(ctx, &bad);
  CHECK(pk_db_record_commit(db, &bad, NULL) == PK_ERR_CHECK && contains(pk_ctx_error(ctx), "knobs"),
        "JSON fields checked: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  /* Finding 7: the commit path refuses an ok record without a real time as import does. */
  bad = make_record(ctx, &t, &fp, 0, 8, PK_MEAS_OK, 0, PK_CAND_SCHEDULE, NULL);
  CHECK(pk_db_record_commit(db, &bad, NULL) == PK_ERR_CHECK &&
            contains(pk_ctx_error(ctx), "needs a measured time > 0"),
        "ok record with time 0: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  bad = make_record(ctx, &t, &fp, 0, 9, PK_MEAS_OK, NAN, PK_CAND_SCHEDULE, NULL);
  CHECK(pk_db_record_commit(db, &bad, NULL) == PK_ERR_CHECK, "ok record with time NaN");
  pk_ctx_clear_error(ctx);
  CHECK(pk_db_run_finish(db, 999, PK_DB_RUN_FINISHED) == PK_ERR_CHECK, "unknown run");
  pk_ctx_clear_error(ctx);
  int64_t run;
  CHECK(pk_db_run_begin(db, "evo", "not json", &run) == PK_ERR_CHECK, "run settings checked");
  pk_ctx_clear_error(ctx);
  CHECK_OK(ctx, pk_db_record_count(db, NULL, NULL, PK_DB_ANY_STATUS, &n));
  CHECK(n == 2, "failed commits left nothing: %lld", (long long)n);
  CHECK_OK(ctx, pk_db_check(db));
done:
  pk_db_close(db);
  pk_ctx_free(ctx);
}

/* ---------------------------------------------------------------- merge, export, import */

static void test_merge_idempotent(const char *test_name, const char *dir) {
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *a = NULL, *b = NULL;
  const char *pa = db_path(ctx, dir, "merge-a.db"), *pb = db_path(ctx, dir, "merge-b.db");
  CHECK_OK(ctx, pk_db_open(ctx, pa, PK_DB_OPEN_CREATE, &a));
  CHECK_OK(ctx, pk_db_open(ctx, pb, PK_DB_OPEN_CREATE, &b));
  int64_t run_a, run_b;
  CHECK_OK(ctx, pk_db_run_begin(b, "grid", "{}", &run_b)); /* so A's run gets another id in B */
  CHECK_OK(ctx, fill(ctx, a, &run_a));
  pk_task t3 = make_task(ctx, 3);
  pk_target_fp fp = make_fp(ctx, "c", "[\"avx2\"]");
  CHECK_OK(ctx, pk_db_target_add(b, &fp));
  CHECK_OK(ctx, pk_db_workload_add(b, &t3));
  pk_record own = make_record(ctx, &t3, &fp, run_b, 1, PK_MEAS_OK, 10, PK_CAND_SCHEDULE, NULL);
  CHECK_OK(ctx, pk_db_record_commit(b, &own, NULL));

  pk_db_counts c;
  CHECK_OK(ctx, pk_db_merge(b, pa, &c));
  CHECK(c.records == 8 && c.records_seen == 8 && c.runs == 1 && c.targets == 2 && c.workloads == 2,
        "first merge adds %lld records %lld runs %lld targets", (long long)c.records, (long long)c.runs,
        (long long)c.targets);
  char *first = export_text(ctx, b);
  CHECK(first, "export: %s", pk_ctx_error(ctx));
  CHECK_OK(ctx, pk_db_merge(b, pa, &c));
  CHECK(c.records == 0 && c.runs == 0 && c.targets == 0 && c.workloads == 0 && c.records_seen == 8,
        "second merge adds nothing");
  char *second = export_text(ctx, b);
  CHECK(second && !strcmp(first, second), "same export bytes after merging twice");
  int64_t n;
  CHECK_OK(ctx, pk_db_record_count(b, NULL, NULL, PK_DB_ANY_STATUS, &n));
  CHECK(n == 9, "B has %lld records", (long long)n);
  /* A's records point at A's run, renumbered in B */
  CHECK(raw_int(pb, "SELECT count(*) FROM records r JOIN runs u ON u.id = r.run_id "
                    "WHERE u.tuner = 'random' AND u.status = 'finished'") == 8,
        "run ids remapped");
  CHECK(raw_int(pb, "SELECT count(DISTINCT run_id) FROM records") == 2, "two runs in B");
  CHECK_OK(ctx, pk_db_check(b));
  CHECK_OK(ctx, pk_db_merge(b, pb, &c)); /* into itself: nothing */
  CHECK(c.records == 0, "self merge");

  const char *text = db_path(ctx, dir, "merge-text.db");
  FILE *f = fopen(text, "w");
  fputs("this is not a database, only text posing as one\n", f);
  fclose(f);
  CHECK(pk_db_merge(b, text, &c) == PK_ERR_IO && contains(pk_ctx_error(ctx), "merge-text.db: not a Pock"),
        "text file: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  CHECK(pk_db_merge(b, db_path(ctx, dir, "none.db"), &c) == PK_ERR_IO && contains(pk_ctx_error(ctx), "none.db"),
        "missing file: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  struct stat sb;
  CHECK(stat(db_path(ctx, dir, "none.db"), &sb) != 0, "a missing file is not created");
  CHECK_OK(ctx, pk_db_record_count(b, NULL, NULL, PK_DB_ANY_STATUS, &n));
  CHECK(n == 9, "failed merges changed nothing");
done:
  pk_db_close(a);
  pk_db_close(b);
  pk_ctx_free(ctx);
}

static void test_export_import(const char *test_name, const char *dir) {
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *a = NULL, *c = NULL;
  CHECK_OK(ctx, pk_db_open(ctx, db_path(ctx, dir, "export-a.db"), PK_DB_OPEN_CREATE, &a));
  CHECK_OK(ctx, pk_db_open(ctx, db_path(ctx, dir, "export-c.db"), PK_DB_OPEN_CREATE, &c));
  int64_t run;
  CHECK_OK(ctx, fill(ctx, a, &run));
  pk_task t1 = make_task(ctx, 1);
  pk_target_fp avx2 = make_fp(ctx, "c", "[\"avx\",\"avx2\",\"fma\"]");
  pk_record runless = make_record(ctx, &t1, &avx2, 0, 99, PK_MEAS_OK, 7000, PK_CAND_SCHEDULE, NULL);
  CHECK_OK(ctx, pk_db_record_commit(a, &runless, NULL)); /* a record outside any run */
  char *text = export_text(ctx, a);
  CHECK(text, "export: %s", pk_ctx_error(ctx));
  int lines = 0;
  for (const char *p = text; *p; p++) lines += *p == '\n';
  CHECK(lines == 9, "one line per record: %d", lines);
  CHECK(contains(text, "\"run\":null"), "a record without a run");
  /* keys sorted; workload text, fingerprint and run inline; local run id left out */
  CHECK(!strncmp(text, "{\"arch\":null,\"codegen_version\":2,\"compiler\":", 44), "sorted keys: %.60s", text);
  CHECK(contains(text, "\"canonical\":\"# pock-te canonical v1\\nA = placeholder") &&
            contains(text, "\"must_match\":\"{\\\"arch\\\":\\\"x86_64\\\"") &&
            contains(text, "\"tuner\":\"random\"") && contains(text, "\"jsonl_version\":1") &&
            !contains(text, "\"run_id\"") && !contains(text, "\"target_key\""),
        "line content: %.400s", text);

  pk_db_counts n;
  CHECK_OK(ctx, import_text(c, text, &n));
  CHECK(n.records == 9 && n.runs == 1 && n.targets == 2 && n.workloads == 2, "import counts");
  char *again = export_text(ctx, c);
  CHECK(again && !strcmp(text, again), "export of the import is identical");
  CHECK_OK(ctx, import_text(c, text, &n));
  CHECK(n.records == 0 && n.runs == 0 && n.records_seen == 9, "import is idempotent");
  again = export_text(ctx, c);
  CHECK(again && !strcmp(text, again), "still identical");
  CHECK_OK(ctx, pk_db_check(c));
done:
  pk_db_close(a);
  pk_db_close(c);
  pk_ctx_free(ctx);
}

/* Finding 7 through merge: an ok record without a time in OTHER (written there by hand)
 * is refused like an imported one, and nothing is merged. */
static void test_merge_untimed(const char *test_name, const char *dir) {
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *a = NULL, *c = NULL;
  const char *pa = db_path(ctx, dir, "untimed-a.db");
  CHECK_OK(ctx, pk_db_open(ctx, pa, PK_DB_OPEN_CREATE, &a));
  int64_t run;
  CHECK_OK(ctx, fill(ctx, a, &run));
  pk_db_close(a);
  a = NULL;
  CHECK(raw_sql(pa, "UPDATE records SET median_ns = NULL WHERE id = (SELECT min(id) FROM records "
                    "WHERE status = 'ok')"),
        "untime a record");
  CHECK_OK(ctx, pk_db_open(ctx, db_path(ctx, dir, "untimed-c.db"), PK_DB_OPEN_CREATE, &c));
  pk_db_counts n;
  CHECK(pk_db_merge(c, pa, &n) == PK_ERR_CHECK &&
            contains(pk_ctx_error(ctx), "1 ok records without a measured time"),
        "merge: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  int64_t count;
  CHECK_OK(ctx, pk_db_record_count(c, NULL, NULL, PK_DB_ANY_STATUS, &count));
  CHECK(count == 0, "nothing merged (%lld)", (long long)count);
done:
  pk_db_close(a);
  pk_db_close(c);
  pk_ctx_free(ctx);
}

/* Each bad line after a good one: an error naming line 2, and nothing imported. */
static void test_import_malformed(const char *test_name, const char *dir) {
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *a = NULL, *c = NULL;
  CHECK_OK(ctx, pk_db_open(ctx, db_path(ctx, dir, "bad-a.db"), PK_DB_OPEN_CREATE, &a));
  CHECK_OK(ctx, pk_db_open(ctx, db_path(ctx, dir, "bad-c.db"), PK_DB_OPEN_CREATE, &c));
  int64_t run;
  CHECK_OK(ctx, fill(ctx, a, &run));
  char *text = export_text(ctx, a);
  CHECK(text, "export");
  size_t first_len = strcspn(text, "\n") + 1;
  char *good = pk_strndup(ctx, text, first_len);
  char *second = pk_strndup(ctx, text + first_len, strcspn(text + first_len, "\n"));
  struct {
    const char *what, *line, *message;
  } cases[] = {
      {"not JSON", "{\"id\": ", "not valid JSON"},
      {"truncated line", pk_strndup(ctx, second, strlen(second) / 2), "not valid JSON"},
      {"an array", "[1,2]", "not a JSON object"},
      {"no version", "{\"id\":\"x\"}", "jsonl_version"},
      {"future version", "{\"jsonl_version\":7}", "unsupported jsonl_version 7"},
      /* the record's status is the last one: the run's comes first in key order */
      {"bad status", pk_sprintf(ctx, "%.*s\"status\":\"exploded\"%s", (int)(last_of(second, "\"status\":") - second),
                                second, strchr(last_of(second, "\"status\":") + 10, '"') + 1),
       "'status'"},
      /* the workload's key is the last: "workload" sorts after "target" */
      {"wrong key", pk_sprintf(ctx, "%.*sx%s", (int)(last_of(second, "\"key\":\"") + 7 - second), second,
                               last_of(second, "\"key\":\"") + 8),
       "SHA-256"},
      {"median as text", pk_sprintf(ctx, "%.*s\"median_ns\":\"fast\",%s",
                                    (int)(strstr(second, "\"median_ns\":") - second), second,
                                    strchr(strstr(second, "\"median_ns\":"), ',') + 1),
       "'median_ns' must be a number"},
      {"no workload", "{\"jsonl_version\":1,\"id\":\"x\"}", "'workload'"},
      /* Finding 7: an ok record without a real time became db best. */
      {"ok without a time", pk_sprintf(ctx, "%.*s%s", (int)(strstr(second, "\"median_ns\":") - second),
                                       second, strchr(strstr(second, "\"median_ns\":"), ',') + 1),
       "an \"ok\" record needs median_ns"},
      {"ok with time 0", pk_sprintf(ctx, "%.*s\"median_ns\":0,%s",
                                    (int)(strstr(second, "\"median_ns\":") - second), second,
                                    strchr(strstr(second, "\"median_ns\":"), ',') + 1),
       "an \"ok\" record needs median_ns"},
      {"ok with a negative time", pk_sprintf(ctx, "%.*s\"median_ns\":-5,%s",
                                             (int)(strstr(second, "\"median_ns\":") - second), second,
                                             strchr(strstr(second, "\"median_ns\":"), ',') + 1),
       "an \"ok\" record needs median_ns"},
      {"ok with an infinite time", pk_sprintf(ctx, "%.*s\"median_ns\":1e999,%s",
                                              (int)(strstr(second, "\"median_ns\":") - second), second,
                                              strchr(strstr(second, "\"median_ns\":"), ',') + 1),
       "an \"ok\" record needs median_ns"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pk_db_counts n;
    char *input = pk_sprintf(ctx, "%s%s\n", good, cases[i].line);
    pk_status s = import_text(c, input, &n);
    CHECK(s == PK_ERR_CHECK && contains(pk_ctx_error(ctx), "lines.jsonl:2: ") &&
              contains(pk_ctx_error(ctx), cases[i].message),
          "%s: %s", cases[i].what, pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    int64_t count;
    CHECK_OK(ctx, pk_db_record_count(c, NULL, NULL, PK_DB_ANY_STATUS, &count));
    CHECK(count == 0 && n.records == 0, "%s: nothing imported (%lld)", cases[i].what, (long long)count);
  }
  CHECK_OK(ctx, pk_db_check(c));
done:
  pk_db_close(a);
  pk_db_close(c);
  pk_ctx_free(ctx);
}

/* ---------------------------------------------------------------- damaged and foreign files */

static void copy_prefix(const char *from, const char *to, long bytes) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  for (long i = 0; i < bytes; i++) {
    int ch = fgetc(in);
    if (ch == EOF) break;
    fputc(ch, out);
  }
  fclose(in);
  fclose(out);
}

static void test_bad_files(const char *test_name, const char *dir) {
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *db = NULL;
  const char *big = db_path(ctx, dir, "big.db"), *cut = db_path(ctx, dir, "truncated.db");
  CHECK_OK(ctx, pk_db_open(ctx, big, PK_DB_OPEN_CREATE, &db));
  pk_task t = make_task(ctx, 1);
  pk_target_fp fp = make_fp(ctx, "c", "[]");
  CHECK_OK(ctx, pk_db_target_add(db, &fp));
  CHECK_OK(ctx, pk_db_workload_add(db, &t));
  for (int i = 0; i < 400; i++) {
    pk_record r = make_record(ctx, &t, &fp, 0, i, PK_MEAS_OK, 1000 + i, PK_CAND_SCHEDULE, NULL);
    CHECK_OK(ctx, pk_db_record_commit(db, &r, NULL));
  }
  pk_db_close(db); /* the last connection checkpoints the WAL into the file */
  db = NULL;
  struct stat sb;
  CHECK(stat(big, &sb) == 0 && sb.st_size > 65536, "big file %ld bytes", (long)sb.st_size);
  copy_prefix(big, cut, sb.st_size / 2);

  /* The truncation surfaces when a missing page is read: as an error, never a crash. */
  pk_status s = pk_db_open(ctx, cut, PK_DB_OPEN_EXISTING, &db);
  if (s == PK_OK) {
    s = pk_db_check(db);
    CHECK(s == PK_ERR_IO, "integrity check of a truncated file passed");
    pk_ctx_clear_error(ctx);
    char *text = export_text(ctx, db);
    pk_db_stats_row *rows;
    int64_t n;
    pk_status s2 = pk_db_stats(db, &rows, &n);
    CHECK(!text || s2 != PK_OK, "export and stats of a truncated file both succeeded");
  }
  CHECK(contains(pk_ctx_error(ctx), "truncated.db") &&
            (contains(pk_ctx_error(ctx), "damaged") || contains(pk_ctx_error(ctx), "malformed")),
        "truncated: %s", pk_ctx_error(ctx));
  pk_db_close(db);
  db = NULL;
  pk_ctx_clear_error(ctx);

  const char *text = db_path(ctx, dir, "text.db");
  FILE *f = fopen(text, "w");
  for (int i = 0; i < 200; i++) fputs("a text file posing as a tuning database\n", f);
  fclose(f);
  CHECK(pk_db_open(ctx, text, PK_DB_OPEN_EXISTING, &db) == PK_ERR_IO &&
            contains(pk_ctx_error(ctx), "text.db: not a Pock tuning database"),
        "text: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);

  const char *newer = db_path(ctx, dir, "newer.db");
  CHECK(raw_sql(newer, pk_sprintf(ctx, "CREATE TABLE records(id TEXT); PRAGMA application_id = %d; "
                                       "PRAGMA user_version = 99;", PK_DB_APPLICATION_ID)),
        "make newer");
  CHECK(pk_db_open(ctx, newer, PK_DB_OPEN_EXISTING, &db) == PK_ERR_IO &&
            contains(pk_ctx_error(ctx), "version 99 is newer"),
        "newer: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  CHECK(raw_int(newer, "PRAGMA user_version") == 99, "newer file untouched");

  const char *other_app = db_path(ctx, dir, "other-app.db");
  CHECK(raw_sql(other_app, "CREATE TABLE t(x); PRAGMA user_version = 1;"), "make other app");
  CHECK(pk_db_open(ctx, other_app, PK_DB_OPEN_EXISTING, &db) == PK_ERR_IO &&
            contains(pk_ctx_error(ctx), "another application"),
        "other app: %s", pk_ctx_error(ctx));
done:
  pk_db_close(db);
  pk_ctx_free(ctx);
}

int main(void) {
  char *dir = scratch_dir();
  run_test("target_fingerprint", test_target_fingerprint, dir);
  run_test("create_reopen", test_create_reopen, dir);
  run_test("migrate_v0", test_migrate_v0, dir);
  run_test("migrate_v1_to_v2", test_migrate_v1_to_v2, dir);
  run_test("records_and_lookups", test_records_and_lookups, dir);
  run_test("dedupe_and_validation", test_dedupe_and_validation, dir);
  run_test("merge_idempotent", test_merge_idempotent, dir);
  run_test("merge_untimed", test_merge_untimed, dir);
  run_test("export_import", test_export_import, dir);
  run_test("import_malformed", test_import_malformed, dir);
  run_test("bad_files", test_bad_files, dir);
  remove_scratch(dir);
  printf("%s (%d failed)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
