/* tunedb_merge.c — merging another tuning database into this one: targets and workloads
 * by key, runs by uid (renumbered here), records by content-hash id with their run ids
 * remapped. Idempotent by construction: every row is identified by content or uid. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "tunedb_impl.h"

static pk_status fail_other(pk_tunedb *db, const char *other, const char *what) {
  int code = sqlite3_extended_errcode(db->sq) & 0xff;
  if (code == SQLITE_NOTADB)
    return pk_ctx_fail(db->ctx, PK_ERR_IO, "%s: not a Pock tuning database (%s)", other,
                       sqlite3_errmsg(db->sq));
  return pk_ctx_fail(db->ctx, PK_ERR_IO, "%s: %s: %s", other, what, sqlite3_errmsg(db->sq));
}

static pk_status other_int(pk_tunedb *db, const char *other, const char *sql, int64_t *v) {
  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db, sql, &st);
  if (s != PK_OK) return s;
  if (sqlite3_step(st) == SQLITE_ROW) *v = sqlite3_column_int64(st, 0);
  else s = fail_other(db, other, "reading the database header");
  sqlite3_finalize(st);
  return s;
}

/* The attached file must be a Pock database this Pock can read. Older versions are fine:
 * columns they lack are copied as NULL. */
static pk_status check_other(pk_tunedb *db, const char *other) {
  int64_t version = 0, app_id = 0;
  pk_status s = other_int(db, other, "PRAGMA other.user_version", &version);
  if (s == PK_OK) s = other_int(db, other, "PRAGMA other.application_id", &app_id);
  if (s != PK_OK) return s;
  if (version == 0 || app_id != PK_DB_APPLICATION_ID)
    return pk_ctx_fail(db->ctx, PK_ERR_IO, "%s: not a Pock tuning database", other);
  if (version > PK_DB_SCHEMA_VERSION)
    return pk_ctx_fail(db->ctx, PK_ERR_IO,
                       "%s: tuning database schema version %lld is newer than this Pock "
                       "supports (%d); use a newer Pock",
                       other, (long long)version, PK_DB_SCHEMA_VERSION);
  return PK_OK;
}

static bool has_name(const pk_db_columns *c, const char *name) {
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->names[i], name)) return true;
  return false;
}

/* INSERT OR IGNORE INTO main.T (cols) SELECT cols FROM other.T src, over the columns both
 * files have (minus skip). Column names come from our own schema — this file's migration
 * steps — never from data; they are still checked before they go into SQL text. */
static pk_status copy_table(pk_tunedb *db, const char *other, const char *table,
                            const char *skip, int64_t *added) {
  pk_db_columns mine, theirs;
  pk_status s = pk_db_table_columns(db, "main", table, &mine);
  if (s == PK_OK) s = pk_db_table_columns(db, "other", table, &theirs);
  if (s != PK_OK) return s;
  if (theirs.n == 0) return pk_ctx_fail(db->ctx, PK_ERR_IO, "%s: has no table '%s'", other, table);
  pk_strbuf into, from;
  pk_strbuf_init(&into);
  pk_strbuf_init(&from);
  for (int i = 0; i < mine.n; i++) {
    const char *c = mine.names[i];
    if ((skip && !strcmp(c, skip)) || !has_name(&theirs, c)) continue;
    PK_ASSERT(strspn(c, "abcdefghijklmnopqrstuvwxyz_") == strlen(c));
    pk_strbuf_printf(&into, "%s\"%s\"", into.len ? ", " : "", c);
    if (!strcmp(table, "records") && !strcmp(c, "run_id")) /* the run's id in this file */
      pk_strbuf_printf(&from, "%s(SELECT m.id FROM main.runs m JOIN other.runs o ON o.uid = m.uid "
                              "WHERE o.id = src.run_id)",
                       from.len ? ", " : "");
    else
      pk_strbuf_printf(&from, "%ssrc.\"%s\"", from.len ? ", " : "", c);
  }
  pk_strbuf sql;
  pk_strbuf_init(&sql);
  pk_strbuf_printf(&sql, "INSERT OR IGNORE INTO main.\"%s\" (%s) SELECT %s FROM other.\"%s\" src",
                   table, into.data, from.data, table);
  char what[64];
  snprintf(what, sizeof what, "merging %s", table);
  s = pk_db_exec(db, sql.data, what);
  if (s != PK_OK) { /* name the file the rows came from */
    pk_ctx_clear_error(db->ctx);
    s = fail_other(db, other, what);
  }
  if (s == PK_OK) *added = sqlite3_changes(db->sq);
  pk_strbuf_free(&into);
  pk_strbuf_free(&from);
  pk_strbuf_free(&sql);
  return s;
}

static pk_status merge_attached(pk_tunedb *db, const char *other, pk_db_counts *added) {
  pk_status s = check_other(db, other);
  /* As import does: an ok record without a real time would win db best here. */
  int64_t untimed = 0;
  if (s == PK_OK)
    s = other_int(db, other, "SELECT count(*) FROM other.records WHERE status = 'ok' AND "
                             "NOT coalesce(median_ns > 0 AND median_ns < 1e308, 0)", &untimed);
  if (s == PK_OK && untimed > 0)
    return pk_ctx_fail(db->ctx, PK_ERR_CHECK,
                       "%s: %lld ok records without a measured time > 0 (median_ns); nothing "
                       "merged", other, (long long)untimed);
  if (s != PK_OK || (s = pk_db_begin(db)) != PK_OK) return s;
  /* Parents first: records refer to targets, workloads and runs. */
  s = copy_table(db, other, "targets", NULL, &added->targets);
  if (s == PK_OK) s = copy_table(db, other, "workloads", NULL, &added->workloads);
  if (s == PK_OK) s = copy_table(db, other, "runs", "id", &added->runs);
  /* A run merged while it was going on: take its end from the newer copy. */
  if (s == PK_OK)
    s = pk_db_exec(db, "UPDATE main.runs SET status = o.status, finished = o.finished "
                       "FROM other.runs o WHERE o.uid = main.runs.uid "
                       "AND main.runs.status = 'running' AND o.status != 'running'",
                   "merging runs");
  if (s == PK_OK) s = copy_table(db, other, "records", NULL, &added->records);
  /* A record both have, confirmed only in the other (a file of schema 2 or later). */
  int64_t confirms = 0;
  if (s == PK_OK)
    s = other_int(db, other, "SELECT count(*) FROM pragma_table_info('records', 'other') "
                             "WHERE name = 'confirmed_ns'", &confirms);
  if (s == PK_OK && confirms)
    s = pk_db_exec(db, "UPDATE main.records SET confirmed_ns = o.confirmed_ns, "
                       "confirmed_min_ns = o.confirmed_min_ns, confirmed_rounds = o.confirmed_rounds "
                       "FROM other.records o WHERE o.id = main.records.id "
                       "AND o.confirmed_ns IS NOT NULL AND main.records.confirmed_ns IS NULL",
                   "merging confirmations");
  if (s == PK_OK) s = other_int(db, other, "SELECT count(*) FROM other.records", &added->records_seen);
  if (s == PK_OK) return pk_db_commit(db);
  pk_db_rollback(db);
  return s;
}

pk_status pk_db_merge(pk_tunedb *db, const char *other_path, pk_db_counts *added) {
  memset(added, 0, sizeof *added);
  struct stat mine, theirs;
  /* ATTACH would create a missing file: refuse that first. */
  if (stat(other_path, &theirs) != 0)
    return pk_ctx_fail(db->ctx, PK_ERR_IO, "%s: cannot open tuning database: %s", other_path,
                       strerror(errno));
  if (!S_ISREG(theirs.st_mode))
    return pk_ctx_fail(db->ctx, PK_ERR_IO, "%s: not a regular file", other_path);
  if (stat(db->path, &mine) == 0 && mine.st_dev == theirs.st_dev && mine.st_ino == theirs.st_ino)
    return PK_OK; /* a database merged into itself gains nothing */

  sqlite3_stmt *st;
  pk_status s = pk_db_prepare(db, "ATTACH DATABASE ?1 AS other", &st);
  if (s != PK_OK) return s;
  pk_db_bind_text(st, 1, other_path);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return fail_other(db, other_path, "cannot attach");
  s = merge_attached(db, other_path, added);
  sqlite3_exec(db->sq, "DETACH DATABASE other", NULL, NULL, NULL);
  if (s != PK_OK) memset(added, 0, sizeof *added);
  return s;
}
