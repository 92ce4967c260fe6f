/* tunedb_impl.h — inside the tuning database (tunedb*.c only): the handle, SQLite helpers
 * that turn every failure into a context error naming the file, and the schema steps. */
#ifndef PK_TUNEDB_IMPL_H
#define PK_TUNEDB_IMPL_H

#include <sqlite3.h>

#include "pk_tunedb.h"

/* 'Pock' in PRAGMA application_id: tells a Pock database from any other SQLite file. */
#define PK_DB_APPLICATION_ID 0x506F636B
#define PK_DB_BUSY_TIMEOUT_MS 10000

struct pk_tunedb {
  pk_ctx *ctx;   /* errors and returned strings */
  sqlite3 *sq;
  char *path;    /* malloc'd: for messages */
  /* pk_db_prefer_build: records timed with this build rank first in pk_db_best (NULL: none) */
  const char *prefer_compiler, *prefer_flags;
  int prefer_codegen_version;
};

/* ---- helpers (tunedb.c) ---- */
/* PK_ERR_IO "PATH: what: <sqlite message>". */
pk_status pk_db_fail_sql(pk_tunedb *db, const char *what);
pk_status pk_db_prepare(pk_tunedb *db, const char *sql, sqlite3_stmt **st);
/* Runs SQL without parameters (one or more statements). */
pk_status pk_db_exec(pk_tunedb *db, const char *sql, const char *what);
/* Steps a statement that returns no rows and finalizes it. */
pk_status pk_db_step_done(pk_tunedb *db, sqlite3_stmt *st, const char *what);
/* BEGIN IMMEDIATE: takes the write lock now (waiting up to the busy timeout), so a
 * transaction never fails halfway for a lock another writer holds. */
pk_status pk_db_begin(pk_tunedb *db);
pk_status pk_db_commit(pk_tunedb *db);
void pk_db_rollback(pk_tunedb *db);
/* Binds s, or NULL when s is NULL. */
void pk_db_bind_text(sqlite3_stmt *st, int i, const char *s);
/* The column as an arena string, or NULL for SQL NULL. */
const char *pk_db_column_text(pk_tunedb *db, sqlite3_stmt *st, int col);

/* ---- schema (tunedb_schema.c) ---- */
/* One step of the schema: the SQL that takes a file from to_version - 1 to to_version.
 * Steps only add (tables, columns with defaults, indexes), so older files stay readable. */
typedef struct pk_db_migration {
  int to_version;
  const char *sql;
} pk_db_migration;

/* This Pock's steps, 1 .. PK_DB_SCHEMA_VERSION. */
const pk_db_migration *pk_db_migrations(int *n);
/* Checks the file's version and kind and applies the steps it lacks, in one transaction.
 * (Takes the steps as an argument so a test can migrate to a made-up next version.) */
pk_status pk_db_migrate(pk_tunedb *db, const pk_db_migration *steps, int nsteps);
/* Only reads: refuses a file of another application or a newer schema. pk_db_open calls
 * it before anything that writes or changes the file (journal_mode=WAL), so a foreign
 * SQLite file is left exactly as it was. */
pk_status pk_db_check_kind(pk_tunedb *db, const pk_db_migration *steps, int nsteps);

/* The columns of table in schema ("main", "other"), in table order, as arena strings. */
typedef struct pk_db_columns {
  int n;
  const char **names;
  const char **types; /* declared type, upper case: "TEXT", "INTEGER", "REAL" */
} pk_db_columns;
pk_status pk_db_table_columns(pk_tunedb *db, const char *schema, const char *table,
                              pk_db_columns *out);

/* ---- record rows (tunedb_query.c) ---- */
/* The column list pk_db_read_record expects, for "SELECT " PK_DB_RECORD_COLUMNS " FROM
 * records r ...". */
#define PK_DB_RECORD_COLUMNS                                                                \
  "r.id, r.workload, r.target_key, r.run_id, r.trial, r.kind, r.trace, r.trace_hash, "      \
  "r.knobs, r.extern_lib, r.extern_sym, r.extern_sig, r.status, r.median_ns, r.min_ns, "    \
  "r.stddev_ns, r.repeats, r.gflops, r.error, r.compiler, r.flags, r.codegen_version, "     \
  "r.pock_version, r.time_unix, r.host, r.features, r.measure_settings, r.confirmed_ns, "  \
  "r.confirmed_min_ns, r.confirmed_rounds, r.arch, r.launch_dims, r.timing_method"
#define PK_DB_NRECORD_COLUMNS 33 /* how many that is */
pk_status pk_db_read_record(pk_tunedb *db, sqlite3_stmt *st, pk_record *r);
/* pk_meas_status for a stored name; false when the name is unknown. */
bool pk_db_status_from_name(const char *name, pk_meas_status *s);

#endif
