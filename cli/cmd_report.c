/* cmd_report.c — `pock report --db FILE [--format text|csv|json|html] [-o OUT]`: per tuned
 * task, the default schedule, the best generated kernel and the extern kernel side by
 * side, the tuning curve and failures by status (autotune/report.c writes the formats);
 * with --model MODEL [--sparse SPEC] [--batch B], that model's training step instead: each
 * kernel's share, untuned vs tuned, the step before and after (autotune/report_model.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pk_driver.h"
#include "pk_report.h"
#include "pk_search.h"
#include "pk_tunedb.h"

/* The trace hash of the task's baseline (what `pock tune` measures first: its preset, else
 * the empty trace), rebuilt from the workload's text for the row's target; NULL if it
 * cannot be. */
static const char *baseline_hash(pk_ctx *ctx, pk_tunedb *db, const pk_db_stats_row *row) {
  const char *text;
  pk_te_program *prog;
  pk_task task;
  pk_candidate base;
  if (pk_db_workload_text(db, row->workload, &text) != PK_OK ||
      pk_te_parse(ctx, text, strlen(text), "workload.te", &prog) != PK_OK ||
      pk_task_from_program(ctx, prog, row->target, &task) != PK_OK) {
    pk_ctx_clear_error(ctx);
    return NULL;
  }
  pk_task_baseline(ctx, &task, &base);
  return base.trace_hash;
}

/* Fills one report task from the history of (workload, target key): the best-so-far curve
 * over trials, the default (baseline) schedule's speed, db best's measured and confirmed
 * speed, and the best trace. Databases from before presets were the baseline measured the
 * empty trace first: that counts when the preset's record is missing. */
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
  double best = 0, best_generated = 0, empty_trace = 0;
  const char *base = baseline_hash(ctx, db, row);
  for (int64_t i = 0; i < n; i++) {
    const pk_record *r = &recs[i];
    bool ok = r->meas.status == PK_MEAS_OK;
    if (ok && base && !strcmp(r->cand.trace_hash, base)) t->default_gflops = r->meas.gflops;
    if (ok && r->cand.kind == PK_CAND_SCHEDULE && r->cand.trace && !strcmp(r->cand.trace, PK_EMPTY_TRACE))
      empty_trace = r->meas.gflops;
    if (ok && r->cand.kind == PK_CAND_SCHEDULE && r->meas.gflops > best_generated) {
      best_generated = r->meas.gflops;
      t->best_trace = r->cand.trace;
    }
    if (ok && r->meas.gflops > best) best = r->meas.gflops;
    curve[t->npoints++] = (pk_curve_point){i + 1, best};
  }
  if (!(t->default_gflops > 0)) t->default_gflops = empty_trace;
  t->trials = n;
  t->curve = curve;
  pk_record b;
  pk_db_match match;
  s = pk_db_best(db, row->workload, row->target_key, NULL, &b, &match);
  if (s == PK_OK && match != PK_DB_MATCH_NONE) {
    t->measured_gflops = b.meas.gflops;
    if (b.confirmed.rounds > 0) /* FLOPs = GFLOP/s x ns */
      t->confirmed_gflops = b.meas.gflops * b.meas.timing.median_ns / b.confirmed.median_ns;
  }
  return s;
}

/* The model's kernels (as `pock compile` makes them for this machine) with their default
 * (baseline) and db-best times on this machine's fingerprint. */
static pk_status fill_model(pk_ctx *ctx, pk_tunedb *db, const pk_compile_options *co,
                            pk_report_kernel **out, int *n) {
  pk_model_tasks mt;
  pk_target_fp fp;
  pk_status s = pk_model_tasks_of(ctx, co, &mt);
  if (s == PK_OK) s = pk_target_fp_detect(ctx, "c", &fp);
  if (s != PK_OK) return s;
  pk_report_kernel *k = pk_alloc(ctx, sizeof *k * (size_t)(mt.n + 1));
  for (int i = 0; i < mt.n && s == PK_OK; i++) {
    pk_task task;
    pk_candidate base;
    pk_record *recs, best;
    int64_t nrec;
    pk_db_match match;
    s = pk_task_from_program(ctx, mt.progs[i], "c", &task);
    if (s != PK_OK) break;
    pk_task_baseline(ctx, &task, &base);
    k[i] = (pk_report_kernel){.label = mt.names[i], .workload = task.workload, .calls = mt.calls[i]};
    s = pk_db_history(db, task.workload, fp.key, &recs, &nrec);
    for (int64_t r = 0; r < nrec && s == PK_OK; r++)
      if (recs[r].meas.status == PK_MEAS_OK && !strcmp(recs[r].cand.trace_hash, base.trace_hash))
        k[i].default_ns = recs[r].meas.timing.median_ns;
    if (s == PK_OK) s = pk_db_best(db, task.workload, fp.key, NULL, &best, &match);
    if (s == PK_OK && match != PK_DB_MATCH_NONE) {
      k[i].confirmed = best.confirmed.rounds > 0;
      k[i].tuned_ns = k[i].confirmed ? best.confirmed.median_ns : best.meas.timing.median_ns;
    }
  }
  *out = k;
  *n = mt.n;
  return s;
}

int pk_cmd_report(int argc, char **argv) {
  const char *db_path = NULL, *out_path = NULL, *format = "text";
  pk_compile_options co = pk_compile_defaults();
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if ((!strcmp(a, "--db") || !strcmp(a, "--format") || !strcmp(a, "-o") || !strcmp(a, "--model") ||
         !strcmp(a, "--sparse")) && i + 1 < argc) {
      const char **slot = !strcmp(a, "--db") ? &db_path : !strcmp(a, "-o") ? &out_path
                          : !strcmp(a, "--model") ? &co.model : !strcmp(a, "--sparse") ? &co.sparse
                          : &format;
      *slot = argv[++i];
    } else if (!strcmp(a, "--batch") && i + 1 < argc) {
      if (!pkrt_cli_parse_i64(argv[++i], &co.batch) || co.batch < 1 || co.batch > 1000000)
        return pk_cli_usage("report: --batch needs a positive integer");
    } else {
      return pk_cli_usage("report: unexpected argument '%s' (usage: pock report --db FILE "
                          "[--format text|csv|json|html] [-o OUT] [--model MODEL [--sparse SPEC] "
                          "[--batch B]])", a);
    }
  }
  pk_report_format fmt;
  if (!db_path) return pk_cli_usage("report: --db FILE is required");
  if (!pk_report_format_from_name(format, &fmt))
    return pk_cli_usage("report: unknown format '%s' (text, csv, json or html)", format);
  if (co.model && fmt != PK_REPORT_TEXT && fmt != PK_REPORT_HTML)
    return pk_cli_usage("report: --model writes text or html");
  if (co.sparse && !co.model) return pk_cli_usage("report: --sparse goes with --model");

  pk_ctx *ctx = pk_ctx_new();
  pk_tunedb *db = NULL;
  FILE *out = stdout;
  pk_db_stats_row *rows;
  int64_t n = 0;
  pk_report_kernel *kernels = NULL;
  int nkernels = 0;
  pk_status s = pk_db_open(ctx, db_path, PK_DB_OPEN_EXISTING, &db);
  if (s == PK_OK && co.model) s = fill_model(ctx, db, &co, &kernels, &nkernels);
  else if (s == PK_OK) s = pk_db_stats(db, &rows, &n);
  pk_report_task *tasks = pk_alloc(ctx, sizeof *tasks * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n && s == PK_OK; i++) s = fill_task(ctx, db, &rows[i], &tasks[i]);
  /* -o is written whole or not at all (libpockrt's atomic writer): the report goes to
   * memory first. */
  char *text = NULL;
  size_t len = 0;
  if (s == PK_OK && out_path && !(out = open_memstream(&text, &len)))
    s = pk_ctx_fail(ctx, PK_ERR_NOMEM, "report: out of memory");
  if (s == PK_OK && co.model) s = pk_report_model_write(ctx, co.model, kernels, nkernels, fmt, out);
  else if (s == PK_OK) s = pk_report_write(ctx, tasks, (int)n, fmt, out);
  if (out && out != stdout && fclose(out) != 0 && s == PK_OK)
    s = pk_ctx_fail(ctx, PK_ERR_NOMEM, "report: out of memory");
  int rc = s == PK_OK ? PK_EXIT_OK : pk_cli_fail(ctx, s);
  const char *const inputs[] = {db_path, co.model, co.sparse};
  if (rc == PK_EXIT_OK && out_path)
    rc = pkrt_cli_write_file("pock", out_path, text, len, inputs, co.sparse ? 3 : co.model ? 2 : 1);
  free(text);
  if (db) pk_db_close(db);
  pk_ctx_free(ctx);
  return rc;
}
