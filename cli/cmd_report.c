/* cmd_report.c — `pock report --db FILE [--format text|csv|json|html] [-o OUT]`: per tuned
 * task, the default schedule, the best generated kernel and the extern kernel side by
 * side, the tuning curve and failures by status (autotune/report.c writes the formats). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pk_report.h"
#include "pk_tunedb.h"

/* The default schedule is measured as the trace with no steps (`pock tune` does so first). */
static bool is_default_trace(const char *trace) {
  return trace && !strcmp(trace, "{\"version\":1,\"steps\":[]}");
}

/* Fills one report task from the history of (workload, target key): the best-so-far curve
 * over trials, the default schedule's speed and the best trace. */
static pk_status fill_task(pk_ctx *ctx, pk_tunedb *db, const pk_db_stats_row *row,
                           pk_report_task *t) {
  memset(t, 0, sizeof *t);
  t->name = row->name;
  t->workload = row->workload;
  t->target = row->target;
  t->best_gflops = row->best_generated_gflops;
  t->extern_gflops = row->best_extern_gflops;
  for (int s = 0; s < PK_DB_NSTATUS; s++) t->failures[s] = row->by_status[s];
  t->failures[PK_MEAS_OK] = 0;

  pk_record *recs;
  int64_t n;
  pk_status s = pk_db_history(db, row->workload, row->target_key, &recs, &n);
  if (s != PK_OK) return s;
  pk_curve_point *curve = pk_alloc(ctx, sizeof *curve * (size_t)(n ? n : 1));
  double best = 0, best_generated = 0;
  for (int64_t i = 0; i < n; i++) {
    const pk_record *r = &recs[i];
    bool ok = r->meas.status == PK_MEAS_OK;
    if (ok && r->cand.kind == PK_CAND_SCHEDULE && is_default_trace(r->cand.trace) &&
        r->meas.gflops > t->default_gflops)
      t->default_gflops = r->meas.gflops;
    if (ok && r->cand.kind == PK_CAND_SCHEDULE && r->meas.gflops > best_generated) {
      best_generated = r->meas.gflops;
      t->best_trace = r->cand.trace;
    }
    if (ok && r->meas.gflops > best) best = r->meas.gflops;
    curve[t->npoints++] = (pk_curve_point){i + 1, best};
  }
  t->trials = n;
  t->curve = curve;
  return PK_OK;
}

int pk_cmd_report(int argc, char **argv) {
  const char *db_path = NULL, *out_path = NULL, *format = "text";
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if ((!strcmp(a, "--db") || !strcmp(a, "--format") || !strcmp(a, "-o")) && i + 1 < argc) {
      const char **slot = !strcmp(a, "--db") ? &db_path : !strcmp(a, "-o") ? &out_path : &format;
      *slot = argv[++i];
    } else {
      return pk_cli_usage("report: unexpected argument '%s' (usage: pock report --db FILE "
                          "[--format text|csv|json|html] [-o OUT])", a);
    }
  }
  pk_report_format fmt;
  if (!db_path) return pk_cli_usage("report: --db FILE is required");
  if (!pk_report_format_from_name(format, &fmt))
    return pk_cli_usage("report: unknown format '%s' (text, csv, json or html)", format);

  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *db = NULL;
  FILE *out = stdout;
  pk_db_stats_row *rows;
  int64_t n = 0;
  pk_status s = pk_db_open(ctx, db_path, PK_DB_OPEN_EXISTING, &db);
  if (s == PK_OK) s = pk_db_stats(db, &rows, &n);
  pk_report_task *tasks = pk_alloc(ctx, sizeof *tasks * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n && s == PK_OK; i++) s = fill_task(ctx, db, &rows[i], &tasks[i]);
  /* -o is written whole or not at all (libpockrt's atomic writer): the report goes to
   * memory first. */
  char *text = NULL;
  size_t len = 0;
  if (s == PK_OK && out_path && !(out = open_memstream(&text, &len)))
    s = pk_ctx_fail(ctx, PK_ERR_NOMEM, "report: out of memory");
  if (s == PK_OK) s = pk_report_write(ctx, tasks, (int)n, fmt, out);
  if (out && out != stdout && fclose(out) != 0 && s == PK_OK)
    s = pk_ctx_fail(ctx, PK_ERR_NOMEM, "report: out of memory");
  int rc = s == PK_OK ? PK_EXIT_OK : pk_cli_fail(ctx, s);
  const char *const inputs[] = {db_path};
  if (rc == PK_EXIT_OK && out_path)
    rc = pkrt_cli_write_file("pock", out_path, text, len, inputs, 1);
  free(text);
  if (db) pk_db_close(db);
  pk_ctx_free(ctx);
  return rc;
}
