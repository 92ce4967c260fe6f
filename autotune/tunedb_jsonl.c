/* tunedb_jsonl.c — JSON-lines export and import of tuning records (format in
 * docs/tuning-db.md): one object per record, keys sorted, its workload, target fingerprint
 * and run inlined, so a line is meaningful on its own. Both directions follow the table
 * columns, so a column a later schema adds travels without touching this file. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json_canon.h"
#include "tunedb_impl.h"

/* ---------------------------------------------------------------- export */

static cJSON *column_json(sqlite3_stmt *st, int col) {
  switch (sqlite3_column_type(st, col)) {
  case SQLITE_INTEGER: return cJSON_CreateNumber((double)sqlite3_column_int64(st, col));
  case SQLITE_FLOAT: return cJSON_CreateNumber(sqlite3_column_double(st, col));
  case SQLITE_NULL: return cJSON_CreateNull();
  default: return cJSON_CreateString((const char *)sqlite3_column_text(st, col));
  }
}

static bool in_list(const char *name, const char *const *list) {
  for (; list && *list; list++)
    if (!strcmp(name, *list)) return true;
  return false;
}

/* The object of result columns first .. first + cols->n - 1 (named by cols), minus skip. */
static cJSON *row_json(sqlite3_stmt *st, int first, const pk_db_columns *cols,
                       const char *const *skip) {
  cJSON *obj = cJSON_CreateObject();
  for (int i = 0; i < cols->n; i++)
    if (!in_list(cols->names[i], skip)) cJSON_AddItemToObject(obj, cols->names[i], column_json(st, first + i));
  return obj;
}

typedef struct table_cols {
  pk_db_columns records, workloads, targets, runs;
} table_cols;

static pk_status load_columns(pk_tunedb *db, table_cols *t) {
  pk_status s = pk_db_table_columns(db, "main", "records", &t->records);
  if (s == PK_OK) s = pk_db_table_columns(db, "main", "workloads", &t->workloads);
  if (s == PK_OK) s = pk_db_table_columns(db, "main", "targets", &t->targets);
  if (s == PK_OK) s = pk_db_table_columns(db, "main", "runs", &t->runs);
  return s;
}

static const char *const record_links[] = {"workload", "target_key", "run_id", NULL};
static const char *const local_id[] = {"id", NULL}; /* a run's id means nothing elsewhere */

/* One record row (r.*, w.*, t.*, u.*) as its line. */
static cJSON *record_line(sqlite3_stmt *st, const table_cols *t) {
  int w = t->records.n, tg = w + t->workloads.n, u = tg + t->targets.n;
  cJSON *line = row_json(st, 0, &t->records, record_links);
  cJSON_AddItemToObject(line, "workload", row_json(st, w, &t->workloads, NULL));
  cJSON_AddItemToObject(line, "target", row_json(st, tg, &t->targets, NULL));
  bool has_run = sqlite3_column_type(st, u) != SQLITE_NULL; /* u.id: NULL when no run */
  cJSON_AddItemToObject(line, "run", has_run ? row_json(st, u, &t->runs, local_id) : cJSON_CreateNull());
  cJSON_AddNumberToObject(line, "jsonl_version", PK_DB_JSONL_VERSION);
  return line;
}

pk_status pk_db_export_jsonl(pk_tunedb *db, FILE *out, int64_t *nrecords) {
  return pk_db_export_jsonl_top(db, out, 0, nrecords);
}

pk_status pk_db_export_jsonl_top(pk_tunedb *db, FILE *out, int64_t top, int64_t *nrecords) {
  *nrecords = 0;
  table_cols t;
  pk_status s = load_columns(db, &t);
  sqlite3_stmt *st;
  /* One statement reads one snapshot, even while a tuner writes. Ties rank by id, so the
   * digest is as deterministic as the full export. */
  if (s != PK_OK || (s = pk_db_prepare(db,
                                       "SELECT r.*, w.*, t.*, u.* FROM records r "
                                       "JOIN workloads w ON w.key = r.workload "
                                       "JOIN targets t ON t.key = r.target_key "
                                       "LEFT JOIN runs u ON u.id = r.run_id "
                                       "WHERE ?1 <= 0 OR r.id IN (SELECT id FROM (SELECT id, ROW_NUMBER() "
                                       "OVER (PARTITION BY workload, target_key, kind ORDER BY median_ns, id) "
                                       "AS pos FROM records WHERE status = 'ok') WHERE pos <= ?1) "
                                       "ORDER BY r.workload, r.target_key, r.trial, r.id",
                                       &st)) != PK_OK)
    return s;
  sqlite3_bind_int64(st, 1, top);
  PK_ASSERT(sqlite3_column_count(st) ==
            t.records.n + t.workloads.n + t.targets.n + t.runs.n);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    cJSON *line = record_line(st, &t);
    pk_json_sort_keys(line);
    char *text = cJSON_PrintUnformatted(line);
    if (!text) pk_out_of_memory(0); /* cJSON fails only for want of memory */
    fputs(text, out);
    fputc('\n', out);
    cJSON_free(text);
    cJSON_Delete(line);
    (*nrecords)++;
  }
  if (rc != SQLITE_DONE) s = pk_db_fail_sql(db, "exporting records");
  sqlite3_finalize(st);
  if (s == PK_OK && (fflush(out) != 0 || ferror(out)))
    s = pk_ctx_fail(db->ctx, PK_ERR_IO, "%s: exporting records: write error", db->path);
  return s;
}

/* ---------------------------------------------------------------- import */

typedef struct importer {
  pk_tunedb *db;
  const char *name; /* of the input, for messages */
  int64_t line;
  table_cols cols;
  sqlite3_stmt *put_record, *put_workload, *put_target, *put_run, *run_id_of, *run_end;
  pk_db_counts *added;
} importer;

static pk_status line_fail(importer *im, const char *fmt, const char *arg) {
  char msg[256];
  snprintf(msg, sizeof msg, fmt, arg);
  return pk_ctx_fail(im->db->ctx, PK_ERR_CHECK, "%s:%lld: %s", im->name, (long long)im->line, msg);
}

/* A failed statement: a constraint is the line's fault, anything else the database's. */
static pk_status line_sql_fail(importer *im) {
  if ((sqlite3_extended_errcode(im->db->sq) & 0xff) == SQLITE_CONSTRAINT)
    return line_fail(im, "%s", sqlite3_errmsg(im->db->sq));
  char what[64];
  snprintf(what, sizeof what, "importing %s line %lld", im->name, (long long)im->line);
  return pk_db_fail_sql(im->db, what);
}

/* INSERT OR IGNORE INTO table, every column but skip, parameters in column order. Names
 * are our schema's own (see tunedb_merge.c). */
static pk_status prepare_insert(pk_tunedb *db, const char *table, const pk_db_columns *cols,
                                const char *const *skip, sqlite3_stmt **st) {
  pk_strbuf names, params, sql;
  pk_strbuf_init(&names);
  pk_strbuf_init(&params);
  pk_strbuf_init(&sql);
  int k = 0;
  for (int i = 0; i < cols->n; i++) {
    if (in_list(cols->names[i], skip)) continue;
    PK_ASSERT(strspn(cols->names[i], "abcdefghijklmnopqrstuvwxyz_") == strlen(cols->names[i]));
    pk_strbuf_printf(&names, "%s\"%s\"", k ? ", " : "", cols->names[i]);
    pk_strbuf_printf(&params, "%s?%d", k ? ", " : "", k + 1);
    k++;
  }
  pk_strbuf_printf(&sql, "INSERT OR IGNORE INTO \"%s\" (%s) VALUES (%s)", table, names.data,
                   params.data);
  pk_status s = pk_db_prepare(db, sql.data, st);
  pk_strbuf_free(&names);
  pk_strbuf_free(&params);
  pk_strbuf_free(&sql);
  return s;
}

/* Binds obj's fields to the columns (minus skip) by name, converting by declared type.
 * Missing fields and nulls bind NULL (NOT NULL columns then refuse the line). */
static pk_status bind_fields(importer *im, sqlite3_stmt *st, const pk_db_columns *cols,
                             const char *const *skip, const cJSON *obj) {
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  int k = 0;
  for (int i = 0; i < cols->n; i++) {
    const char *name = cols->names[i], *type = cols->types[i];
    if (in_list(name, skip)) continue;
    k++;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!v || cJSON_IsNull(v)) continue;
    if (!strcmp(type, "TEXT")) {
      if (!cJSON_IsString(v)) return line_fail(im, "field '%s' must be a string", name);
      sqlite3_bind_text(st, k, v->valuestring, -1, SQLITE_TRANSIENT);
    } else if (!strcmp(type, "INTEGER")) {
      double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
      if (!(d == floor(d) && fabs(d) < 9.2e18)) return line_fail(im, "field '%s' must be an integer", name);
      sqlite3_bind_int64(st, k, (int64_t)d);
    } else {
      if (!cJSON_IsNumber(v)) return line_fail(im, "field '%s' must be a number", name);
      sqlite3_bind_double(st, k, v->valuedouble);
    }
  }
  return PK_OK;
}

/* Runs a bound INSERT OR IGNORE; adds 1 to *added when it inserted. */
static pk_status put_row(importer *im, sqlite3_stmt *st, int64_t *added) {
  if (sqlite3_step(st) != SQLITE_DONE) return line_sql_fail(im);
  *added += sqlite3_changes(im->db->sq);
  return PK_OK;
}

static const char *string_field(const cJSON *obj, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Fields holding JSON text must hold valid JSON, as pk_db_record_commit ensures. */
static pk_status check_json_fields(importer *im, const cJSON *obj, const char *const *names) {
  for (; *names; names++) {
    const char *text = string_field(obj, *names);
    cJSON *doc = text ? cJSON_ParseWithOpts(text, NULL, true) : NULL;
    if (text && !doc) return line_fail(im, "field '%s' is not valid JSON text", *names);
    cJSON_Delete(doc);
  }
  return PK_OK;
}

static pk_status check_line(importer *im, const cJSON *line) {
  static const char *const record_json[] = {"trace", "knobs", "features", "measure_settings",
                                            "launch_dims", NULL};
  static const char *const target_json[] = {"must_match", "informative", NULL};
  static const char *const run_json[] = {"settings", NULL};
  if (!cJSON_IsObject(line)) return line_fail(im, "%s", "not a JSON object");
  const cJSON *version = cJSON_GetObjectItemCaseSensitive(line, "jsonl_version");
  if (!cJSON_IsNumber(version)) return line_fail(im, "%s", "missing jsonl_version");
  if (version->valuedouble != PK_DB_JSONL_VERSION) {
    char v[32];
    snprintf(v, sizeof v, "%g", version->valuedouble);
    return line_fail(im, "unsupported jsonl_version %s (this Pock reads 1)", v);
  }
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(line, "workload");
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(line, "target");
  const cJSON *run = cJSON_GetObjectItemCaseSensitive(line, "run");
  if (!cJSON_IsObject(w) || !string_field(w, "key") || !string_field(w, "canonical"))
    return line_fail(im, "%s", "'workload' must be an object with key and canonical");
  if (!cJSON_IsObject(t) || !string_field(t, "key"))
    return line_fail(im, "%s", "'target' must be an object with a key");
  if (run && !cJSON_IsNull(run) && !(cJSON_IsObject(run) && string_field(run, "uid")))
    return line_fail(im, "%s", "'run' must be null or an object with a uid");
  /* The workload key is what lookups by TE text find: it must hash its text. */
  const char *canonical = string_field(w, "canonical");
  char hex[2 * PKRT_SHA256_BYTES + 1];
  pkrt_sha256_hex(canonical, strlen(canonical), hex);
  if (strcmp(hex, string_field(w, "key")) != 0)
    return line_fail(im, "%s", "workload key is not the SHA-256 of its canonical text");
  const char *kind = string_field(line, "kind");
  pk_meas_status ms;
  if (!string_field(line, "id") || !string_field(line, "trace_hash"))
    return line_fail(im, "%s", "a record needs a string id and trace_hash");
  if (!kind || (strcmp(kind, "schedule") && strcmp(kind, "extern")))
    return line_fail(im, "%s", "'kind' must be \"schedule\" or \"extern\"");
  if (!pk_db_status_from_name(string_field(line, "status"), &ms))
    return line_fail(im, "%s", "'status' must be a measurement status name (docs/tuning-db.md)");
  /* An ok record without a real time would become db best (and compile --db's choice).
   * A median that is not a number at all is bind_fields' type error. */
  const cJSON *median = cJSON_GetObjectItemCaseSensitive(line, "median_ns");
  bool no_time = !median || cJSON_IsNull(median) ||
                 (cJSON_IsNumber(median) &&
                  !(isfinite(median->valuedouble) && median->valuedouble > 0));
  if (ms == PK_MEAS_OK && no_time)
    return line_fail(im, "%s", "an \"ok\" record needs median_ns, a measured time > 0");
  pk_status s = check_json_fields(im, line, record_json);
  if (s == PK_OK) s = check_json_fields(im, t, target_json);
  if (s == PK_OK && cJSON_IsObject(run)) s = check_json_fields(im, run, run_json);
  return s;
}

/* The run's id in this database (inserted if new), or 0 for a record without a run. */
static pk_status put_run(importer *im, const cJSON *run, int64_t *run_id) {
  *run_id = 0;
  if (!cJSON_IsObject(run)) return PK_OK;
  pk_status s = bind_fields(im, im->put_run, &im->cols.runs, local_id, run);
  if (s == PK_OK) s = put_row(im, im->put_run, &im->added->runs);
  if (s != PK_OK) return s;
  /* A run exported while it was going on and again after it ended: keep the end. */
  sqlite3_reset(im->run_end);
  pk_db_bind_text(im->run_end, 1, string_field(run, "uid"));
  pk_db_bind_text(im->run_end, 2, string_field(run, "status"));
  const cJSON *fin = cJSON_GetObjectItemCaseSensitive(run, "finished");
  if (cJSON_IsNumber(fin)) sqlite3_bind_int64(im->run_end, 3, (int64_t)fin->valuedouble);
  else sqlite3_bind_null(im->run_end, 3);
  if (sqlite3_step(im->run_end) != SQLITE_DONE) return line_sql_fail(im);
  sqlite3_reset(im->run_id_of);
  pk_db_bind_text(im->run_id_of, 1, string_field(run, "uid"));
  if (sqlite3_step(im->run_id_of) != SQLITE_ROW) return line_sql_fail(im);
  *run_id = sqlite3_column_int64(im->run_id_of, 0);
  return PK_OK;
}

static pk_status import_line(importer *im, cJSON *line) {
  pk_status s = check_line(im, line);
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(line, "workload");
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(line, "target");
  int64_t run_id = 0;
  if (s == PK_OK) s = bind_fields(im, im->put_target, &im->cols.targets, NULL, t);
  if (s == PK_OK) s = put_row(im, im->put_target, &im->added->targets);
  if (s == PK_OK) s = bind_fields(im, im->put_workload, &im->cols.workloads, NULL, w);
  if (s == PK_OK) s = put_row(im, im->put_workload, &im->added->workloads);
  if (s == PK_OK) s = put_run(im, cJSON_GetObjectItemCaseSensitive(line, "run"), &run_id);
  if (s != PK_OK) return s;
  /* Flatten the links into the record's own columns. */
  cJSON *row = cJSON_Duplicate(line, true);
  cJSON_ReplaceItemInObjectCaseSensitive(row, "workload", cJSON_CreateString(string_field(w, "key")));
  cJSON_AddItemToObject(row, "target_key", cJSON_CreateString(string_field(t, "key")));
  cJSON_AddItemToObject(row, "run_id", run_id ? cJSON_CreateNumber((double)run_id) : cJSON_CreateNull());
  s = bind_fields(im, im->put_record, &im->cols.records, NULL, row);
  if (s == PK_OK) s = put_row(im, im->put_record, &im->added->records);
  cJSON_Delete(row);
  im->added->records_seen++;
  return s;
}

static bool blank(const char *s) { return s[strspn(s, " \t\r\n")] == '\0'; }

static pk_status import_all(importer *im, FILE *in) {
  char *buf = NULL;
  size_t cap = 0;
  ssize_t len;
  pk_status s = PK_OK;
  while (s == PK_OK && (len = getline(&buf, &cap, in)) >= 0) {
    im->line++;
    if (strlen(buf) != (size_t)len) s = line_fail(im, "%s", "contains a NUL byte");
    else if (blank(buf)) continue;
    cJSON *line = s == PK_OK ? cJSON_ParseWithOpts(buf, NULL, true) : NULL;
    if (s == PK_OK && !line) s = line_fail(im, "%s", "not valid JSON");
    if (s == PK_OK) s = import_line(im, line);
    cJSON_Delete(line);
  }
  free(buf);
  if (s == PK_OK && ferror(in))
    s = pk_ctx_fail(im->db->ctx, PK_ERR_IO, "%s: read error", im->name);
  return s;
}

pk_status pk_db_import_jsonl(pk_tunedb *db, FILE *in, const char *name, pk_db_counts *added) {
  memset(added, 0, sizeof *added);
  importer im = {.db = db, .name = name ? name : "(input)", .added = added};
  pk_status s = load_columns(db, &im.cols);
  if (s == PK_OK) s = prepare_insert(db, "targets", &im.cols.targets, NULL, &im.put_target);
  if (s == PK_OK) s = prepare_insert(db, "workloads", &im.cols.workloads, NULL, &im.put_workload);
  if (s == PK_OK) s = prepare_insert(db, "runs", &im.cols.runs, local_id, &im.put_run);
  if (s == PK_OK) s = prepare_insert(db, "records", &im.cols.records, NULL, &im.put_record);
  if (s == PK_OK) s = pk_db_prepare(db, "SELECT id FROM runs WHERE uid = ?1", &im.run_id_of);
  if (s == PK_OK)
    s = pk_db_prepare(db, "UPDATE runs SET status = ?2, finished = ?3 WHERE uid = ?1 "
                          "AND status = 'running' AND ?2 IS NOT NULL AND ?2 != 'running'",
                      &im.run_end);
  /* All lines or none: a bad line rolls back everything before it. */
  if (s == PK_OK && (s = pk_db_begin(db)) == PK_OK) {
    s = import_all(&im, in);
    if (s == PK_OK) s = pk_db_commit(db);
    else pk_db_rollback(db);
  }
  sqlite3_stmt *stmts[] = {im.put_target, im.put_workload, im.put_run, im.put_record,
                           im.run_id_of, im.run_end};
  for (size_t i = 0; i < sizeof stmts / sizeof stmts[0]; i++) sqlite3_finalize(stmts[i]);
  if (s != PK_OK) memset(added, 0, sizeof *added);
  return s;
}
