/* fuzz_jsonl.c — libFuzzer target for tuning-record import (pk_db_import_jsonl: what
 * `pock db import` runs on a JSON-lines file) into a fresh in-memory database. What was
 * imported is checked: every "ok" record has a finite time > 0 (a bad time would win
 * `db best`), and the database exports and re-imports into another one unchanged. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>

#include "fuzz_check.h"
#include "tunedb_impl.h"

#define WHAT "fuzz.jsonl"

static pk_tunedb *open_memory(pk_ctx *ctx) {
  pk_tunedb *db;
  if (pk_db_open(ctx, ":memory:", PK_DB_OPEN_CREATE, &db) != PK_OK) {
    fprintf(stderr, "cannot open an in-memory database: %s\n", pk_ctx_error(ctx));
    __builtin_trap();
  }
  return db;
}

static void check_ok_times(pk_tunedb *db) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db->sq, "SELECT id, median_ns FROM records WHERE status = 'ok'", -1,
                         &st, NULL) != SQLITE_OK)
    __builtin_trap();
  while (sqlite3_step(st) == SQLITE_ROW) {
    double t = sqlite3_column_type(st, 1) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 1);
    if (!(isfinite(t) && t > 0)) {
      fprintf(stderr, "imported an ok record with time %g: %s\n", t, sqlite3_column_text(st, 0));
      __builtin_trap();
    }
  }
  sqlite3_finalize(st);
}

/* Export, import into a new database, export again: both exports must be equal. */
static void check_round_trip(pk_ctx *ctx, pk_tunedb *db, int64_t nrecords) {
  char *a = NULL, *b = NULL;
  size_t al = 0, bl = 0;
  FILE *out = open_memstream(&a, &al);
  int64_t n = 0;
  if (pk_db_export_jsonl(db, out, &n) != PK_OK || fclose(out) != 0 || n != nrecords) {
    fprintf(stderr, "export after import: %s (%lld of %lld records)\n", pk_ctx_error(ctx),
            (long long)n, (long long)nrecords);
    __builtin_trap();
  }
  pk_tunedb *db2 = open_memory(ctx);
  FILE *in = al ? fmemopen(a, al, "r") : fmemopen(" ", 1, "r");
  pk_db_counts c;
  if (!in || pk_db_import_jsonl(db2, in, "export.jsonl", &c) != PK_OK) {
    fprintf(stderr, "re-import of an export: %s\n", pk_ctx_error(ctx));
    __builtin_trap();
  }
  fclose(in);
  out = open_memstream(&b, &bl);
  if (pk_db_export_jsonl(db2, out, &n) != PK_OK || fclose(out) != 0 || al != bl ||
      memcmp(a, b, al) != 0) {
    fprintf(stderr, "export, import, export differs\n");
    __builtin_trap();
  }
  pk_db_close(db2);
  free(a);
  free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *db = open_memory(ctx);
  /* fmemopen refuses a zero-size buffer: an empty input is one byte of blank. */
  FILE *in = size ? fmemopen((void *)data, size, "r") : fmemopen(" ", 1, "r");
  pk_db_counts c;
  pk_status s = pk_db_import_jsonl(db, in, WHAT, &c);
  fclose(in);
  fuzz_report(size, s == PK_OK, pk_ctx_error(ctx));
  if (s != PK_OK) {
    /* A line's fault names the input; the database's own errors name the database. */
    const char *msg = pk_ctx_error(ctx);
    fuzz_check_refusal((int)s, msg, strncmp(msg, ":memory:", 8) == 0 ? ":memory:" : WHAT);
  } else {
    check_ok_times(db);
    check_round_trip(ctx, db, c.records);
  }
  pk_db_close(db);
  pk_ctx_free(ctx);
  return 0;
}
