/* tunedb.c — opening the tuning database, and writing to it: targets, workloads, runs
 * and records, each record in its own transaction. Lookups live in tunedb_query.c, merge
 * in tunedb_merge.c, JSON lines in tunedb_jsonl.c. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tunedb_impl.h"

/* ---------------------------------------------------------------- SQLite helpers */

pk_status pk_db_fail_sql(pk_tunedb *db, const char *what) {
  int code = sqlite3_extended_errcode(db->sq);
  const char *msg = sqlite3_errmsg(db->sq);
  if ((code & 0xff) == SQLITE_NOTADB)
    return pk_ctx_fail(db->ctx, PK_ERR_IO, "%s: not a Pock tuning database (%s)", db->path, msg);
  if ((code & 0xff) == SQLITE_CORRUPT)
    return pk_ctx_fail(db->ctx, PK_ERR_IO, "%s: %s: the database file is damaged (%s)", db->path,
                       what, msg);
  return pk_ctx_fail(db->ctx, PK_ERR_IO, "%s: %s: %s", db->path, what, msg);
}

pk_status pk_db_prepare(pk_tunedb *db, const char *sql, sqlite3_stmt **st) {
  if (sqlite3_prepare_v2(db->sq, sql, -1, st, NULL) == SQLITE_OK) return PK_OK;
  *st = NULL;
  return pk_db_fail_sql(db, "preparing a query");
}

pk_status pk_db_exec(pk_tunedb *db, const char *sql, const char *what) {
  return sqlite3_exec(db->sq, sql, NULL, NULL, NULL) == SQLITE_OK ? PK_OK
                                                                  : pk_db_fail_sql(db, what);
}

pk_status pk_db_step_done(pk_tunedb *db, sqlite3_stmt *st, const char *what) {
  int rc = sqlite3_step(st);
  pk_status s = rc == SQLITE_DONE || rc == SQLITE_ROW ? PK_OK : pk_db_fail_sql(db, what);
  sqlite3_finalize(st);
  return s;
}

pk_status pk_db_begin(pk_tunedb *db) {
  return pk_db_exec(db, "BEGIN IMMEDIATE", "starting a write transaction");
}

pk_status pk_db_commit(pk_tunedb *db) {
  if (sqlite3_exec(db->sq, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) return PK_OK;
  pk_status s = pk_db_fail_sql(db, "committing");
  pk_db_rollback(db);
  return s;
}

void pk_db_rollback(pk_tunedb *db) {
  if (!sqlite3_get_autocommit(db->sq)) sqlite3_exec(db->sq, "ROLLBACK", NULL, NULL, NULL);
}

void pk_db_bind_text(sqlite3_stmt *st, int i, const char *s) {
  if (s) sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(st, i);
}

const char *pk_db_column_text(pk_tunedb *db, sqlite3_stmt *st, int col) {
  if (sqlite3_column_type(st, col) == SQLITE_NULL) return NULL;
  const unsigned char *t = sqlite3_column_text(st, col);
  return t ? pk_strndup(db->ctx, (const char *)t, (size_t)sqlite3_column_bytes(st, col)) : NULL;
}

/* ---------------------------------------------------------------- open, close, check */

/* journal_mode=WAL is stored in the file by its first opener. Switching needs an exclusive
 * lock, and SQLite answers "locked" at once instead of calling the busy handler while
 * another process holds one (two tuners starting on a new file), so wait here. */
static pk_status set_wal(pk_tunedb *db) {
  for (int waited_ms = 0;; waited_ms += 10) {
    int rc = sqlite3_exec(db->sq, "PRAGMA journal_mode = WAL", NULL, NULL, NULL);
    bool busy = (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
    if (rc == SQLITE_OK) return PK_OK;
    if (!busy || waited_ms >= PK_DB_BUSY_TIMEOUT_MS) return pk_db_fail_sql(db, "opening");
    sqlite3_sleep(10);
  }
}

/* Per-connection settings, then the file's journal mode (set_wal writes the file: only
 * once pk_db_check_kind has said it is ours). */
static pk_status configure(pk_tunedb *db) {
  /* synchronous=FULL: a committed record survives power loss, not only a killed process;
   * one fsync per record is nothing next to measuring it. */
  pk_status s = pk_db_exec(db, "PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL;", "opening");
  return s == PK_OK ? set_wal(db) : s;
}

pk_status pk_db_open(pk_ctx *ctx, const char *path, pk_db_open_mode mode, pk_tunedb **out) {
  *out = NULL;
  struct stat sb;
  bool exists = stat(path, &sb) == 0;
  if (!exists && mode == PK_DB_OPEN_EXISTING)
    return pk_ctx_fail(ctx, PK_ERR_IO, "%s: cannot open tuning database: %s", path, strerror(errno));
  if (exists && S_ISDIR(sb.st_mode))
    return pk_ctx_fail(ctx, PK_ERR_IO, "%s: is a directory, not a tuning database", path);

  pk_tunedb *db = pk_xcalloc(1, sizeof *db);
  db->ctx = ctx;
  db->path = strdup(path);
  PK_ASSERT(db->path);
  int flags = SQLITE_OPEN_READWRITE | (mode == PK_DB_OPEN_CREATE ? SQLITE_OPEN_CREATE : 0);
  pk_status s = PK_OK;
  if (sqlite3_open_v2(path, &db->sq, flags, NULL) != SQLITE_OK)
    s = db->sq ? pk_db_fail_sql(db, "cannot open")
               : pk_ctx_fail(ctx, PK_ERR_NOMEM, "%s: out of memory opening SQLite", path);
  int nsteps;
  const pk_db_migration *steps = pk_db_migrations(&nsteps);
  if (db->sq) {
    sqlite3_extended_result_codes(db->sq, 1);
    sqlite3_busy_timeout(db->sq, PK_DB_BUSY_TIMEOUT_MS);
  }
  /* Another application's file is refused before anything could change it. */
  if (s == PK_OK) s = pk_db_check_kind(db, steps, nsteps);
  if (s == PK_OK) s = configure(db);
  if (s == PK_OK) s = pk_db_migrate(db, steps, nsteps);
  if (s != PK_OK) {
    pk_db_close(db);
    return s;
  }
  *out = db;
  return PK_OK;
}

void pk_db_close(pk_tunedb *db) {
  if (!db) return;
  sqlite3_close_v2(db->sq); /* NULL is a no-op; statements are always finalized by now */
  free(db->path);
  free(db);
}

const char *pk_db_path(const pk_tunedb *db) { return db->path; }

/* First row of a check pragma must be "ok" (integrity) or absent (foreign keys). */
static pk_status check_pragma(pk_tunedb *db, const char *sql, const char *ok_text,
                              const char *what) {
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db, sql, &st);
  if (s != PK_OK) return s;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    const char *first = (const char *)sqlite3_column_text(st, 0);
    if (!ok_text || !first || strcmp(first, ok_text) != 0)
      s = pk_ctx_fail(db->ctx, PK_ERR_IO, "%s: %s failed: %s", db->path, what,
                      first ? first : "(violation)");
  } else if (rc != SQLITE_DONE) {
    s = pk_db_fail_sql(db, what);
  }
  sqlite3_finalize(st);
  return s;
}

pk_status pk_db_check(pk_tunedb *db) {
  pk_status s = check_pragma(db, "PRAGMA integrity_check", "ok", "integrity check");
  if (s == PK_OK) s = check_pragma(db, "PRAGMA foreign_key_check", NULL, "foreign key check");
  return s;
}

/* ---------------------------------------------------------------- targets, workloads */

/* JSON-valued columns hold valid JSON or NULL: a reader of the database never has to
 * guess. */
static pk_status require_json(pk_tunedb *db, const char *text, const char *what,
                              const char *owner) {
  if (!text) return PK_OK;
  cJSON *doc = cJSON_ParseWithOpts(text, NULL, true);
  if (doc) {
    cJSON_Delete(doc);
    return PK_OK;
  }
  return pk_ctx_fail(db->ctx, PK_ERR_CHECK, "%s: %s: %s is not valid JSON", db->path, owner, what);
}

pk_status pk_db_target_add(pk_tunedb *db, const pk_target_fp *fp) {
  if (!fp->key || !fp->target || !fp->must_match || !fp->informative)
    return pk_ctx_fail(db->ctx, PK_ERR_CHECK, "%s: adding a target: incomplete fingerprint", db->path);
  pk_status s = require_json(db, fp->must_match, "must_match", "target");
  if (s == PK_OK) s = require_json(db, fp->informative, "informative", "target");
  sqlite3_stmt *st;
  if (s != PK_OK || (s = pk_db_prepare(db, "INSERT OR IGNORE INTO targets(key, target, must_match, "
                                           "informative, first_seen) VALUES (?1, ?2, ?3, ?4, ?5)",
                                       &st)) != PK_OK)
    return s;
  pk_db_bind_text(st, 1, fp->key);
  pk_db_bind_text(st, 2, fp->target);
  pk_db_bind_text(st, 3, fp->must_match);
  pk_db_bind_text(st, 4, fp->informative);
  sqlite3_bind_int64(st, 5, (int64_t)time(NULL));
  return pk_db_step_done(db, st, "adding a target");
}

pk_status pk_db_workload_add(pk_tunedb *db, const pk_task *task) {
  if (!task->workload || !task->canonical || !task->name)
    return pk_ctx_fail(db->ctx, PK_ERR_CHECK, "%s: adding a workload: incomplete task", db->path);
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db, "INSERT OR IGNORE INTO workloads(key, canonical, name, class, "
                                  "flops) VALUES (?1, ?2, ?3, ?4, ?5)",
                              &st);
  if (s != PK_OK) return s;
  pk_db_bind_text(st, 1, task->workload);
  pk_db_bind_text(st, 2, task->canonical);
  pk_db_bind_text(st, 3, task->name);
  pk_db_bind_text(st, 4, pk_task_class_name(task->cls));
  sqlite3_bind_double(st, 5, task->flops);
  return pk_db_step_done(db, st, "adding a workload");
}

pk_status pk_db_workload_resolve(pk_tunedb *db, const char *prefix, const char **key) {
  size_t n = strlen(prefix);
  if (n == 0 || n > 64 || strspn(prefix, "0123456789abcdef") != n)
    return pk_ctx_fail(db->ctx, PK_ERR_CHECK,
                       "workload '%s': expected a hex workload key (or a prefix of one)", prefix);
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db, "SELECT key FROM workloads WHERE substr(key, 1, ?2) = ?1 "
                                  "ORDER BY key LIMIT 2",
                              &st);
  if (s != PK_OK) return s;
  pk_db_bind_text(st, 1, prefix);
  sqlite3_bind_int64(st, 2, (int64_t)n);
  int found = 0, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    if (found++ == 0) *key = pk_db_column_text(db, st, 0);
  if (rc != SQLITE_DONE) s = pk_db_fail_sql(db, "looking up a workload");
  else if (found == 0)
    s = pk_ctx_fail(db->ctx, PK_ERR_CHECK, "%s: no workload %s in the database", db->path, prefix);
  else if (found > 1)
    s = pk_ctx_fail(db->ctx, PK_ERR_CHECK, "%s: workload prefix %s is ambiguous; give more digits",
                    db->path, prefix);
  sqlite3_finalize(st);
  return s;
}

pk_status pk_db_workload_text(pk_tunedb *db, const char *key, const char **canonical) {
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db, "SELECT canonical FROM workloads WHERE key = ?1", &st);
  if (s != PK_OK) return s;
  pk_db_bind_text(st, 1, key);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) *canonical = pk_db_column_text(db, st, 0);
  else if (rc == SQLITE_DONE) s = pk_ctx_fail(db->ctx, PK_ERR_CHECK, "%s: no workload %s", db->path, key);
  else s = pk_db_fail_sql(db, "reading a workload");
  sqlite3_finalize(st);
  return s;
}

/* ---------------------------------------------------------------- runs */

const char *pk_db_run_status_name(pk_db_run_status s) {
  static const char *const names[] = {"running", "finished", "interrupted"};
  return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

pk_status pk_db_run_begin(pk_tunedb *db, const char *tuner, const char *settings_json,
                          int64_t *run_id) {
  const char *settings = settings_json ? settings_json : "{}";
  pk_status s = require_json(db, settings, "settings", "tuning run");
  if (s != PK_OK) return s;
  /* A random uid names the run in every database it is merged into. */
  unsigned char raw[16];
  if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
    return pk_ctx_fail(db->ctx, PK_ERR_IO, "getrandom: %s", strerror(errno));
  char uid[2 * sizeof raw + 1];
  for (size_t i = 0; i < sizeof raw; i++) snprintf(uid + 2 * i, 3, "%02x", raw[i]);
  char host[256] = "";
  gethostname(host, sizeof host - 1);

  sqlite3_stmt *st;
  s = pk_db_prepare(db, "INSERT INTO runs(uid, started, status, tuner, settings, host, "
                        "pock_version) VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?6)",
                    &st);
  if (s != PK_OK) return s;
  pk_db_bind_text(st, 1, uid);
  sqlite3_bind_int64(st, 2, (int64_t)time(NULL));
  pk_db_bind_text(st, 3, tuner ? tuner : "?");
  pk_db_bind_text(st, 4, settings);
  pk_db_bind_text(st, 5, host);
  pk_db_bind_text(st, 6, POCK_VERSION);
  if ((s = pk_db_step_done(db, st, "starting a tuning run")) != PK_OK) return s;
  *run_id = sqlite3_last_insert_rowid(db->sq);
  return PK_OK;
}

pk_status pk_db_run_finish(pk_tunedb *db, int64_t run_id, pk_db_run_status status) {
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db, "UPDATE runs SET status = ?2, finished = ?3 WHERE id = ?1", &st);
  if (s != PK_OK) return s;
  sqlite3_bind_int64(st, 1, run_id);
  pk_db_bind_text(st, 2, pk_db_run_status_name(status));
  if (status == PK_DB_RUN_RUNNING) sqlite3_bind_null(st, 3);
  else sqlite3_bind_int64(st, 3, (int64_t)time(NULL));
  if ((s = pk_db_step_done(db, st, "finishing a tuning run")) != PK_OK) return s;
  if (sqlite3_changes(db->sq) == 0)
    return pk_ctx_fail(db->ctx, PK_ERR_CHECK, "%s: no tuning run %lld", db->path, (long long)run_id);
  return PK_OK;
}

/* ---------------------------------------------------------------- records */

/* What every stored record satisfies, checked before it is written. */
static pk_status validate_record(pk_tunedb *db, const pk_record *r) {
  if (!r->id || !r->workload || !r->target_key || !r->cand.trace_hash)
    return pk_ctx_fail(db->ctx, PK_ERR_CHECK,
                       "%s: record lacks its id, workload, target key or trace hash", db->path);
  pk_record copy = *r;
  pk_record_make_id(db->ctx, &copy);
  if (strcmp(copy.id, r->id) != 0)
    return pk_ctx_fail(db->ctx, PK_ERR_CHECK,
                       "%s: record %s: id does not match its content (call pk_record_make_id "
                       "after filling the record)",
                       db->path, r->id);
  if ((unsigned)r->meas.status >= PK_DB_NSTATUS)
    return pk_ctx_fail(db->ctx, PK_ERR_CHECK, "%s: record %s: unknown status %d", db->path, r->id,
                       (int)r->meas.status);
  /* db best ranks ok records by median_ns: a missing, zero, negative or NaN time would
   * win every lookup (SQLite stores NaN as NULL, which sorts first). */
  double t = r->meas.timing.median_ns;
  if (r->meas.status == PK_MEAS_OK && !(isfinite(t) && t > 0))
    return pk_ctx_fail(db->ctx, PK_ERR_CHECK,
                       "%s: record %s: an ok record needs a measured time > 0 (median_ns is %g)",
                       db->path, r->id, t);
  pk_status s = require_json(db, r->cand.trace, "trace", r->id);
  if (s == PK_OK) s = require_json(db, r->cand.knobs, "knobs", r->id);
  if (s == PK_OK) s = require_json(db, r->features, "features", r->id);
  if (s == PK_OK) s = require_json(db, r->measure_settings, "measure_settings", r->id);
  if (s == PK_OK) s = require_json(db, r->meas.launch, "launch_dims", r->id);
  return s;
}

static void bind_record(sqlite3_stmt *st, const pk_record *r) {
  const pk_candidate *c = &r->cand;
  const pk_measurement *m = &r->meas;
  bool ok = m->status == PK_MEAS_OK;
  pk_db_bind_text(st, 1, r->id);
  pk_db_bind_text(st, 2, r->workload);
  pk_db_bind_text(st, 3, r->target_key);
  if (r->run_id > 0) sqlite3_bind_int64(st, 4, r->run_id);
  else sqlite3_bind_null(st, 4);
  sqlite3_bind_int64(st, 5, r->trial);
  pk_db_bind_text(st, 6, c->kind == PK_CAND_EXTERN ? "extern" : "schedule");
  pk_db_bind_text(st, 7, c->trace);
  pk_db_bind_text(st, 8, c->trace_hash);
  pk_db_bind_text(st, 9, c->knobs);
  pk_db_bind_text(st, 10, c->extern_lib);
  pk_db_bind_text(st, 11, c->extern_sym);
  pk_db_bind_text(st, 12, c->extern_sig);
  pk_db_bind_text(st, 13, pk_meas_status_name(m->status));
  /* Timings exist only for OK records; a failure's numbers would only mislead. */
  if (ok) {
    sqlite3_bind_double(st, 14, m->timing.median_ns);
    sqlite3_bind_double(st, 15, m->timing.min_ns);
    sqlite3_bind_double(st, 16, m->timing.stddev_ns);
    sqlite3_bind_int(st, 17, m->timing.repeats);
    sqlite3_bind_double(st, 18, m->gflops);
  } /* unbound parameters are NULL */
  pk_db_bind_text(st, 19, m->error);
  pk_db_bind_text(st, 20, r->compiler);
  pk_db_bind_text(st, 21, r->flags);
  sqlite3_bind_int(st, 22, r->codegen_version);
  pk_db_bind_text(st, 23, r->pock_version);
  sqlite3_bind_int64(st, 24, r->time_unix);
  pk_db_bind_text(st, 25, r->host);
  pk_db_bind_text(st, 26, r->features);
  pk_db_bind_text(st, 27, r->measure_settings);
  pk_db_bind_text(st, 28, r->arch);
  pk_db_bind_text(st, 29, m->launch);
  pk_db_bind_text(st, 30, r->timing_method);
}

pk_status pk_db_record_commit(pk_tunedb *db, const pk_record *r, bool *inserted) {
  if (inserted) *inserted = false;
  pk_status s = validate_record(db, r);
  if (s != PK_OK) return s;
  sqlite3_stmt *st;
  s = pk_db_prepare(db,
                    "INSERT OR IGNORE INTO records(id, workload, target_key, run_id, trial, kind, "
                    "trace, trace_hash, knobs, extern_lib, extern_sym, extern_sig, status, "
                    "median_ns, min_ns, stddev_ns, repeats, gflops, error, compiler, flags, "
                    "codegen_version, pock_version, time_unix, host, features, measure_settings, "
                    "arch, launch_dims, timing_method) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
                    "?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30)",
                    &st);
  if (s != PK_OK) return s;
  bind_record(st, r);
  if ((s = pk_db_begin(db)) != PK_OK) {
    sqlite3_finalize(st);
    return s;
  }
  int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) {
    if (inserted) *inserted = sqlite3_changes(db->sq) > 0;
    sqlite3_finalize(st);
    return pk_db_commit(db);
  }
  if (sqlite3_extended_errcode(db->sq) == SQLITE_CONSTRAINT_FOREIGNKEY)
    s = pk_ctx_fail(db->ctx, PK_ERR_CHECK,
                    "%s: record %s: its workload, target or run is not in the database (add "
                    "them first)",
                    db->path, r->id);
  else
    s = pk_db_fail_sql(db, "committing a record");
  sqlite3_finalize(st);
  pk_db_rollback(db);
  return s;
}

pk_status pk_db_record_has(pk_tunedb *db, const char *id, bool *has) {
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db, "SELECT 1 FROM records WHERE id = ?1", &st);
  if (s != PK_OK) return s;
  pk_db_bind_text(st, 1, id);
  int rc = sqlite3_step(st);
  *has = rc == SQLITE_ROW;
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) s = pk_db_fail_sql(db, "looking up a record");
  sqlite3_finalize(st);
  return s;
}

pk_status pk_db_record_confirm(pk_tunedb *db, const char *id, const pk_confirmation *c) {
  if (!(c->rounds > 0 && isfinite(c->median_ns) && c->median_ns > 0 && isfinite(c->min_ns) &&
        c->min_ns > 0))
    return pk_ctx_fail(db->ctx, PK_ERR_CHECK, "%s: record %s: a confirmation needs rounds > 0 "
                       "and times > 0 (got %d rounds, %g ns)", db->path, id, c->rounds, c->median_ns);
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db, "UPDATE records SET confirmed_ns = ?2, confirmed_min_ns = ?3, "
                                  "confirmed_rounds = ?4 WHERE id = ?1 AND status = 'ok'", &st);
  if (s != PK_OK) return s;
  pk_db_bind_text(st, 1, id);
  sqlite3_bind_double(st, 2, c->median_ns);
  sqlite3_bind_double(st, 3, c->min_ns);
  sqlite3_bind_int(st, 4, c->rounds);
  if ((s = pk_db_begin(db)) != PK_OK) {
    sqlite3_finalize(st);
    return s;
  }
  if (sqlite3_step(st) != SQLITE_DONE) {
    s = pk_db_fail_sql(db, "storing a confirmation");
    sqlite3_finalize(st);
    pk_db_rollback(db);
    return s;
  }
  bool changed = sqlite3_changes(db->sq) > 0;
  sqlite3_finalize(st);
  if (!changed) {
    pk_db_rollback(db);
    return pk_ctx_fail(db->ctx, PK_ERR_CHECK, "%s: no ok record %s to confirm", db->path, id);
  }
  return pk_db_commit(db);
}

pk_status pk_db_record_count(pk_tunedb *db, const char *workload, const char *target_key,
                             int status, int64_t *n) {
  *n = 0;
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db, "SELECT count(*) FROM records WHERE (?1 IS NULL OR workload = ?1) "
                                  "AND (?2 IS NULL OR target_key = ?2) AND (?3 IS NULL OR status = ?3)",
                              &st);
  if (s != PK_OK) return s;
  pk_db_bind_text(st, 1, workload);
  pk_db_bind_text(st, 2, target_key);
  pk_db_bind_text(st, 3, status == PK_DB_ANY_STATUS ? NULL : pk_meas_status_name((pk_meas_status)status));
  if (sqlite3_step(st) == SQLITE_ROW) *n = sqlite3_column_int64(st, 0);
  else s = pk_db_fail_sql(db, "counting records");
  sqlite3_finalize(st);
  return s;
}
