/* tunedb_query.c — reading the tuning database: the best record of a workload on a target
 * (with the generic-target fallback), a workload's history, per-workload statistics. */
#include <string.h>

#include "tunedb_impl.h"

bool pk_db_status_from_name(const char *name, pk_meas_status *s) {
  for (int i = 0; name && i < PK_DB_NSTATUS; i++)
    if (!strcmp(name, pk_meas_status_name((pk_meas_status)i))) {
      *s = (pk_meas_status)i;
      return true;
    }
  return false;
}

/* Reads one row selected with PK_DB_RECORD_COLUMNS (in that order). */
pk_status pk_db_read_record(pk_tunedb *db, sqlite3_stmt *st, pk_record *r) {
  memset(r, 0, sizeof *r);
  int c = 0;
  r->id = pk_db_column_text(db, st, c++);
  r->workload = pk_db_column_text(db, st, c++);
  r->target_key = pk_db_column_text(db, st, c++);
  r->run_id = sqlite3_column_int64(st, c++);
  r->trial = sqlite3_column_int64(st, c++);
  const char *kind = pk_db_column_text(db, st, c++);
  r->cand.kind = kind && !strcmp(kind, "extern") ? PK_CAND_EXTERN : PK_CAND_SCHEDULE;
  r->cand.trace = pk_db_column_text(db, st, c++);
  r->cand.trace_hash = pk_db_column_text(db, st, c++);
  r->cand.knobs = pk_db_column_text(db, st, c++);
  r->cand.extern_lib = pk_db_column_text(db, st, c++);
  r->cand.extern_sym = pk_db_column_text(db, st, c++);
  r->cand.extern_sig = pk_db_column_text(db, st, c++);
  const char *status = pk_db_column_text(db, st, c++);
  if (!pk_db_status_from_name(status, &r->meas.status))
    return pk_ctx_fail(db->ctx, PK_ERR_IO, "%s: record %s has unknown status '%s'", db->path,
                       r->id, status ? status : "(null)");
  r->meas.timing.median_ns = sqlite3_column_double(st, c++);
  r->meas.timing.min_ns = sqlite3_column_double(st, c++);
  r->meas.timing.stddev_ns = sqlite3_column_double(st, c++);
  r->meas.timing.repeats = sqlite3_column_int(st, c++);
  r->meas.gflops = sqlite3_column_double(st, c++);
  r->meas.error = pk_db_column_text(db, st, c++);
  r->compiler = pk_db_column_text(db, st, c++);
  r->flags = pk_db_column_text(db, st, c++);
  r->codegen_version = sqlite3_column_int(st, c++);
  r->pock_version = pk_db_column_text(db, st, c++);
  r->time_unix = sqlite3_column_int64(st, c++);
  r->host = pk_db_column_text(db, st, c++);
  r->features = pk_db_column_text(db, st, c++);
  r->measure_settings = pk_db_column_text(db, st, c++);
  r->confirmed.median_ns = sqlite3_column_double(st, c++);
  r->confirmed.min_ns = sqlite3_column_double(st, c++);
  r->confirmed.rounds = sqlite3_column_int(st, c++);
  r->arch = pk_db_column_text(db, st, c++);
  r->meas.launch = pk_db_column_text(db, st, c++);
  r->timing_method = pk_db_column_text(db, st, c++);
  PK_ASSERT(c == PK_DB_NRECORD_COLUMNS);
  return PK_OK;
}

void pk_db_prefer_build(pk_tunedb *db, const char *compiler, const char *flags, int codegen_version) {
  db->prefer_compiler = compiler ? pk_strdup(db->ctx, compiler) : NULL;
  db->prefer_flags = flags ? pk_strdup(db->ctx, flags) : NULL;
  db->prefer_codegen_version = codegen_version;
}

void pk_db_prefer_cc(pk_tunedb *db, const pk_cc *cc) {
  pk_db_prefer_build(db, pk_cc_version(cc), pk_cc_flags(cc), PK_CGEN_C_VERSION);
}

bool pk_db_record_is_preferred(const pk_tunedb *db, const pk_record *r) {
  if (!db->prefer_compiler || r->cand.kind == PK_CAND_EXTERN) return true;
  return r->compiler && !strcmp(r->compiler, db->prefer_compiler) && r->flags && db->prefer_flags &&
         !strcmp(r->flags, db->prefer_flags) && r->codegen_version == db->prefer_codegen_version;
}

/* The rank of a record under the build preference (?3 compiler, ?4 flags, ?5 codegen
 * version; ?3 NULL: everything ranks 0). */
#define PREFERRED_FIRST                                                                        \
  "CASE WHEN ?3 IS NULL OR r.kind = 'extern' OR (r.compiler = ?3 AND r.flags IS ?4 AND "      \
  "r.codegen_version = ?5) THEN 0 ELSE 1 END, "

/* Then confirmed records by their confirmed time, then the rest by their measured time. */
#define FASTEST_FIRST                                                                          \
  "r.confirmed_ns IS NULL, coalesce(r.confirmed_ns, r.median_ns), r.id "

/* Runs a best-record query whose parameters are ?1 workload, ?2 key or target string and
 * the preference's ?3..?5. */
static pk_status best_query(pk_tunedb *db, const char *sql, const char *workload,
                            const char *target, pk_record *out, bool *found) {
  *found = false;
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db, sql, &st);
  if (s != PK_OK) return s;
  pk_db_bind_text(st, 1, workload);
  pk_db_bind_text(st, 2, target);
  pk_db_bind_text(st, 3, db->prefer_compiler);
  pk_db_bind_text(st, 4, db->prefer_flags);
  sqlite3_bind_int(st, 5, db->prefer_codegen_version);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    s = pk_db_read_record(db, st, out);
    *found = s == PK_OK;
  } else if (rc != SQLITE_DONE) {
    s = pk_db_fail_sql(db, "looking up the best record");
  }
  sqlite3_finalize(st);
  return s;
}

pk_status pk_db_best(pk_tunedb *db, const char *workload, const char *target_key,
                     const char *fallback_target, pk_record *out, pk_db_match *match) {
  memset(out, 0, sizeof *out);
  *match = PK_DB_MATCH_NONE;
  bool found;
  /* records_best (workload, target_key, status, median_ns) narrows this to the workload's
   * records on the target; the preference then sorts those few. */
  pk_status s = best_query(db,
                           "SELECT " PK_DB_RECORD_COLUMNS " FROM records r WHERE r.workload = ?1 "
                           "AND r.target_key = ?2 AND r.status = 'ok' "
                           "ORDER BY " PREFERRED_FIRST FASTEST_FIRST "LIMIT 1",
                           workload, target_key, out, &found);
  if (s != PK_OK || found) {
    if (found) *match = PK_DB_MATCH_EXACT;
    return s;
  }
  if (!fallback_target) return PK_OK;
  s = best_query(db,
                 "SELECT " PK_DB_RECORD_COLUMNS " FROM records r JOIN targets t "
                 "ON t.key = r.target_key WHERE r.workload = ?1 AND t.target = ?2 "
                 "AND r.status = 'ok' ORDER BY " PREFERRED_FIRST FASTEST_FIRST "LIMIT 1",
                 workload, fallback_target, out, &found);
  if (found) *match = PK_DB_MATCH_GENERIC;
  else memset(out, 0, sizeof *out);
  return s;
}

/* Reads every row of a prepared record query; with names, column PK_DB_NRECORD_COLUMNS
 * (the workload's name) into *names too. */
static pk_status read_records(pk_tunedb *db, sqlite3_stmt *st, const char *what,
                              pk_record **records, const char ***names, const char ***texts,
                              int64_t *n) {
  pk_status s = PK_OK;
  int64_t cap = 0;
  int rc;
  while (s == PK_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (*n == cap) { /* arena arrays cannot grow in place: copy to a doubled one */
      cap = cap ? 2 * cap : 64;
      pk_record *bigger = pk_alloc(db->ctx, (size_t)cap * sizeof *bigger);
      if (*n) memcpy(bigger, *records, (size_t)*n * sizeof *bigger);
      *records = bigger;
      const char ***cols[2] = {names, texts};
      for (int c = 0; c < 2; c++)
        if (cols[c]) {
          const char **more = pk_alloc(db->ctx, (size_t)cap * sizeof *more);
          if (*n) memcpy(more, *cols[c], (size_t)*n * sizeof *more);
          *cols[c] = more;
        }
    }
    s = pk_db_read_record(db, st, &(*records)[*n]);
    if (names) (*names)[*n] = pk_db_column_text(db, st, PK_DB_NRECORD_COLUMNS);
    if (texts) (*texts)[*n] = pk_db_column_text(db, st, PK_DB_NRECORD_COLUMNS + 1);
    (*n)++;
  }
  if (s == PK_OK && rc != SQLITE_DONE) s = pk_db_fail_sql(db, what);
  sqlite3_finalize(st);
  return s;
}

pk_status pk_db_history(pk_tunedb *db, const char *workload, const char *target_key,
                        pk_record **records, int64_t *n) {
  *records = NULL;
  *n = 0;
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db,
                              "SELECT " PK_DB_RECORD_COLUMNS " FROM records r WHERE r.workload = ?1 "
                              "AND (?2 IS NULL OR r.target_key = ?2) "
                              "ORDER BY r.trial, r.run_id, r.id",
                              &st);
  if (s != PK_OK) return s;
  pk_db_bind_text(st, 1, workload);
  pk_db_bind_text(st, 2, target_key);
  return read_records(db, st, "reading the history", records, NULL, NULL, n);
}

pk_status pk_db_class_records(pk_tunedb *db, const char *cls, const char *target_key,
                              const char *except, int limit, pk_record **records,
                              const char ***names, const char ***canonicals, int64_t *n) {
  *records = NULL;
  *names = NULL;
  *canonicals = NULL;
  *n = 0;
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db,
                              "SELECT " PK_DB_RECORD_COLUMNS ", w.name, w.canonical FROM records r JOIN workloads w "
                              "ON w.key = r.workload WHERE w.class = ?1 AND r.target_key = ?2 "
                              "AND r.workload != ?3 AND r.status = 'ok' AND r.kind = 'schedule' "
                              "AND r.features IS NOT NULL ORDER BY r.time_unix DESC, r.id LIMIT ?4",
                              &st);
  if (s != PK_OK) return s;
  pk_db_bind_text(st, 1, cls);
  pk_db_bind_text(st, 2, target_key);
  pk_db_bind_text(st, 3, except);
  sqlite3_bind_int(st, 4, limit);
  return read_records(db, st, "reading records for transfer", records, names, canonicals, n);
}

pk_status pk_db_workload_elsewhere(pk_tunedb *db, const char *workload, const char *target_key,
                                   int limit, pk_record **records, const char ***must_match,
                                   int64_t *n) {
  *records = NULL;
  *must_match = NULL;
  *n = 0;
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db,
                              "SELECT " PK_DB_RECORD_COLUMNS ", t.must_match FROM records r JOIN targets t "
                              "ON t.key = r.target_key WHERE r.workload = ?1 AND r.target_key != ?2 "
                              "AND r.status = 'ok' AND r.kind = 'schedule' AND r.features IS NOT NULL "
                              "ORDER BY r.time_unix DESC, r.id LIMIT ?3",
                              &st);
  if (s != PK_OK) return s;
  pk_db_bind_text(st, 1, workload);
  pk_db_bind_text(st, 2, target_key);
  sqlite3_bind_int(st, 3, limit);
  return read_records(db, st, "reading records of other targets", records, must_match, NULL, n);
}

pk_status pk_db_stats(pk_tunedb *db, pk_db_stats_row **rows, int64_t *n) {
  *rows = NULL;
  *n = 0;
  sqlite3_stmt *st;
  /* One group per (workload, target, status, kind); folded into rows below. */
  pk_status s = pk_db_prepare(db,
                              "SELECT r.workload, w.name, r.target_key, t.target, r.status, r.kind, "
                              "count(*), max(r.gflops) FROM records r "
                              "JOIN workloads w ON w.key = r.workload "
                              "JOIN targets t ON t.key = r.target_key "
                              "GROUP BY r.workload, r.target_key, r.status, r.kind "
                              "ORDER BY w.name, r.workload, t.target, r.target_key",
                              &st);
  if (s != PK_OK) return s;
  int64_t cap = 0;
  pk_db_stats_row *row = NULL;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *workload = (const char *)sqlite3_column_text(st, 0);
    const char *key = (const char *)sqlite3_column_text(st, 2);
    if (!row || strcmp(row->workload, workload) || strcmp(row->target_key, key)) {
      if (*n == cap) {
        cap = cap ? 2 * cap : 16;
        pk_db_stats_row *bigger = pk_alloc(db->ctx, (size_t)cap * sizeof *bigger);
        if (*n) memcpy(bigger, *rows, (size_t)*n * sizeof *bigger);
        *rows = bigger;
      }
      row = &(*rows)[(*n)++];
      row->workload = pk_db_column_text(db, st, 0);
      row->name = pk_db_column_text(db, st, 1);
      row->target_key = pk_db_column_text(db, st, 2);
      row->target = pk_db_column_text(db, st, 3);
    }
    const char *status = (const char *)sqlite3_column_text(st, 4);
    const char *kind = (const char *)sqlite3_column_text(st, 5);
    int64_t count = sqlite3_column_int64(st, 6);
    row->records += count;
    pk_meas_status ms;
    if (!pk_db_status_from_name(status, &ms)) continue; /* counted in records only */
    row->by_status[ms] += count;
    if (ms != PK_MEAS_OK || sqlite3_column_type(st, 7) == SQLITE_NULL) continue;
    double g = sqlite3_column_double(st, 7);
    double *best = kind && !strcmp(kind, "extern") ? &row->best_extern_gflops
                                                   : &row->best_generated_gflops;
    if (g > *best) *best = g;
    if (g > row->best_gflops) row->best_gflops = g;
  }
  if (rc != SQLITE_DONE) s = pk_db_fail_sql(db, "computing statistics");
  sqlite3_finalize(st);
  return s;
}
