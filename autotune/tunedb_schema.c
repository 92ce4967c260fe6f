/* tunedb_schema.c — the tuning database's schema as a table of migration steps, keyed by
 * PRAGMA user_version, and the checks that refuse files that are not ours or are newer.
 * docs/tuning-db.md documents every column; change both together. */
#include <stdio.h>
#include <string.h>

#include "tunedb_impl.h"

/* Adding version N: append {N, "ALTER TABLE ... ADD COLUMN ...; CREATE INDEX ..."}, bump
 * PK_DB_SCHEMA_VERSION, document it. Never edit a released step: files carry its result. */
static const pk_db_migration steps[] = {
    {1,
     /* Fingerprints of devices: key = SHA-256("<target>\n<must_match>"). */
     "CREATE TABLE targets (\n"
     "  key TEXT PRIMARY KEY,\n"
     "  target TEXT NOT NULL,\n"
     "  must_match TEXT NOT NULL,\n"
     "  informative TEXT NOT NULL,\n"
     "  first_seen INTEGER NOT NULL\n"
     ");\n"
     /* Kernels to tune: key = SHA-256 of the canonical TE text. */
     "CREATE TABLE workloads (\n"
     "  key TEXT PRIMARY KEY,\n"
     "  canonical TEXT NOT NULL,\n"
     "  name TEXT NOT NULL,\n"
     "  class TEXT NOT NULL,\n"
     "  flops REAL NOT NULL\n"
     ");\n"
     /* Tuning runs. uid (random) identifies a run across databases: merge renumbers id. */
     "CREATE TABLE runs (\n"
     "  id INTEGER PRIMARY KEY,\n"
     "  uid TEXT NOT NULL UNIQUE,\n"
     "  started INTEGER NOT NULL,\n"
     "  finished INTEGER,\n"
     "  status TEXT NOT NULL,\n"
     "  tuner TEXT NOT NULL,\n"
     "  settings TEXT NOT NULL,\n"
     "  host TEXT,\n"
     "  pock_version TEXT\n"
     ");\n"
     /* One measured candidate each, good or failed; id = content hash (pk_record_make_id).
      * arch, launch_dims, timing_method: GPU records (NULL for C). */
     "CREATE TABLE records (\n"
     "  id TEXT PRIMARY KEY,\n"
     "  workload TEXT NOT NULL REFERENCES workloads(key),\n"
     "  target_key TEXT NOT NULL REFERENCES targets(key),\n"
     "  run_id INTEGER REFERENCES runs(id),\n"
     "  trial INTEGER,\n"
     "  kind TEXT NOT NULL,\n"
     "  trace TEXT,\n"
     "  trace_hash TEXT NOT NULL,\n"
     "  knobs TEXT,\n"
     "  extern_lib TEXT,\n"
     "  extern_sym TEXT,\n"
     "  extern_sig TEXT,\n"
     "  status TEXT NOT NULL,\n"
     "  median_ns REAL,\n"
     "  min_ns REAL,\n"
     "  stddev_ns REAL,\n"
     "  repeats INTEGER,\n"
     "  gflops REAL,\n"
     "  error TEXT,\n"
     "  compiler TEXT,\n"
     "  flags TEXT,\n"
     "  codegen_version INTEGER,\n"
     "  pock_version TEXT,\n"
     "  time_unix INTEGER,\n"
     "  host TEXT,\n"
     "  features TEXT,\n"
     "  measure_settings TEXT,\n"
     "  arch TEXT,\n"
     "  launch_dims TEXT,\n"
     "  timing_method TEXT\n"
     ");\n"
     "CREATE INDEX records_best ON records(workload, target_key, status, median_ns);\n"
     "CREATE INDEX records_trial ON records(workload, target_key, trial);\n"
     "CREATE INDEX records_run ON records(run_id);\n"},
    {2,
     /* Confirmations: the task's leaders re-timed side by side (pk_confirmation). */
     "ALTER TABLE records ADD COLUMN confirmed_ns REAL;\n"
     "ALTER TABLE records ADD COLUMN confirmed_min_ns REAL;\n"
     "ALTER TABLE records ADD COLUMN confirmed_rounds INTEGER;\n"},
};

const pk_db_migration *pk_db_migrations(int *n) {
  _Static_assert(sizeof steps / sizeof steps[0] == PK_DB_SCHEMA_VERSION,
                 "one migration step per schema version");
  *n = (int)(sizeof steps / sizeof steps[0]);
  return steps;
}

pk_status pk_db_table_columns(pk_tunedb *db, const char *schema, const char *table,
                              pk_db_columns *out) {
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(
      db, "SELECT name, upper(type) FROM pragma_table_info(?1, ?2) ORDER BY cid", &st);
  if (s != PK_OK) return s;
  sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, schema, -1, SQLITE_STATIC);
  int cap = 0, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (out->n == cap) {
      cap = cap ? 2 * cap : 32;
      const char **names = pk_alloc(db->ctx, (size_t)cap * sizeof *names);
      const char **types = pk_alloc(db->ctx, (size_t)cap * sizeof *types);
      if (out->n) {
        memcpy(names, out->names, (size_t)out->n * sizeof *names);
        memcpy(types, out->types, (size_t)out->n * sizeof *types);
      }
      out->names = names;
      out->types = types;
    }
    out->names[out->n] = pk_db_column_text(db, st, 0);
    out->types[out->n] = pk_db_column_text(db, st, 1);
    out->n++;
  }
  if (rc != SQLITE_DONE) {
    s = pk_db_fail_sql(db, "reading the schema");
    sqlite3_finalize(st);
    return s;
  }
  sqlite3_finalize(st);
  return PK_OK;
}

/* Refuses what we must not touch: a newer schema, or a file of another application. */
static pk_status check_kind(pk_tunedb *db, int64_t version, int64_t app_id, int64_t ntables,
                            int latest) {
  if (version > latest)
    return pk_ctx_fail(db->ctx, PK_ERR_IO,
                       "%s: tuning database schema version %lld is newer than this Pock "
                       "supports (%d); use a newer Pock",
                       db->path, (long long)version, latest);
  if (version > 0 && app_id != PK_DB_APPLICATION_ID)
    return pk_ctx_fail(db->ctx, PK_ERR_IO,
                       "%s: an SQLite database of another application (application_id %lld), "
                       "not a Pock tuning database",
                       db->path, (long long)app_id);
  if (version == 0 && ntables > 0)
    return pk_ctx_fail(db->ctx, PK_ERR_IO,
                       "%s: an SQLite database with %lld tables but no Pock schema version, not "
                       "a Pock tuning database",
                       db->path, (long long)ntables);
  return PK_OK;
}

/* The schema version, application id and table count, read by ONE statement: one
 * snapshot of the file. Three separate reads could straddle another process's creation
 * of the schema (version 0 read before its commit, its tables counted after) and take a
 * new Pock database for a foreign one. */
static pk_status read_header(pk_tunedb *db, int64_t *version, int64_t *app_id,
                             int64_t *ntables) {
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db,
                              "SELECT (SELECT user_version FROM pragma_user_version), "
                              "(SELECT application_id FROM pragma_application_id), "
                              "(SELECT count(*) FROM sqlite_schema WHERE type = 'table')",
                              &st);
  if (s != PK_OK) return s;
  if (sqlite3_step(st) == SQLITE_ROW) {
    *version = sqlite3_column_int64(st, 0);
    *app_id = sqlite3_column_int64(st, 1);
    *ntables = sqlite3_column_int64(st, 2);
  } else {
    s = pk_db_fail_sql(db, "reading the database header");
  }
  sqlite3_finalize(st);
  return s;
}

pk_status pk_db_check_kind(pk_tunedb *db, const pk_db_migration *migrations, int nsteps) {
  int latest = nsteps ? migrations[nsteps - 1].to_version : 0;
  int64_t version = 0, app_id = 0, ntables = 0;
  pk_status s = read_header(db, &version, &app_id, &ntables);
  return s == PK_OK ? check_kind(db, version, app_id, ntables, latest) : s;
}

pk_status pk_db_migrate(pk_tunedb *db, const pk_db_migration *migrations, int nsteps) {
  int latest = nsteps ? migrations[nsteps - 1].to_version : 0;
  int64_t version = 0, app_id = 0, ntables = 0;
  /* Outside a transaction first: most opens find the current version and need no lock. */
  pk_status s = read_header(db, &version, &app_id, &ntables);
  if (s == PK_OK) s = check_kind(db, version, app_id, ntables, latest);
  if (s != PK_OK || version == latest) return s;

  /* Two tuners may open a new file at once: the second waits here, then re-reads the
   * version and finds nothing left to do. */
  if ((s = pk_db_begin(db)) != PK_OK) return s;
  s = read_header(db, &version, &app_id, &ntables);
  if (s == PK_OK) s = check_kind(db, version, app_id, ntables, latest);
  for (int i = 0; s == PK_OK && i < nsteps; i++) {
    if (migrations[i].to_version <= version) continue;
    char what[64];
    snprintf(what, sizeof what, "migrating the schema to version %d", migrations[i].to_version);
    s = pk_db_exec(db, migrations[i].sql, what);
    /* PRAGMAs take no parameters; both values are this file's own integer constants. */
    char pragma[96];
    snprintf(pragma, sizeof pragma, "PRAGMA application_id = %d; PRAGMA user_version = %d;",
             PK_DB_APPLICATION_ID, migrations[i].to_version);
    if (s == PK_OK) s = pk_db_exec(db, pragma, what);
  }
  if (s == PK_OK) return pk_db_commit(db);
  pk_db_rollback(db);
  return s;
}
