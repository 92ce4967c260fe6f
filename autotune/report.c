/* report.c — writes tuning reports as text, CSV, JSON (cJSON) or one self-contained HTML
 * page whose charts are inline SVG: a user can mail the file, open it offline, and nothing
 * in it fetches anything. */
#include "pk_report.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool pk_report_format_from_name(const char *name, pk_report_format *out) {
  static const char *const names[] = {"text", "csv", "json", "html"};
  for (int i = 0; i < 4; i++)
    if (!strcmp(name, names[i])) {
      *out = (pk_report_format)i;
      return true;
    }
  return false;
}

static double speedup(double best, double base) { return best > 0 && base > 0 ? best / base : 0; }

static int64_t failed_total(const pk_report_task *t) {
  int64_t n = 0;
  for (int s = 1; s <= PK_MEAS_RUNTIME_ERROR; s++) n += t->failures[s];
  return n;
}

/* ---- text ---- */
static void write_text(const pk_report_task *tasks, int n, FILE *out) {
  fprintf(out, "%-36s %9s %9s %9s %8s %9s %9s %7s %7s\n", "task", "default", "best", "extern",
          "speedup", "measured", "confirmed", "trials", "failed");
  for (int i = 0; i < n; i++) {
    const pk_report_task *t = &tasks[i];
    fprintf(out, "%-36s %9.2f %9.2f %9.2f %7.1fx %9.2f %9.2f %7lld %7lld\n", t->name,
            t->default_gflops, t->best_gflops, t->extern_gflops,
            speedup(t->best_gflops, t->default_gflops), t->measured_gflops, t->confirmed_gflops,
            (long long)t->trials, (long long)failed_total(t));
  }
  fprintf(out, "(GFLOP/s; default = the untuned kernel (preset); speedup = best generated / "
               "default; measured and confirmed: db best's own timing and its re-timing beside "
               "the task's leaders, 0 = not confirmed)\n");
}

/* ---- CSV (RFC 4180 quoting) ---- */
static void csv_field(FILE *out, const char *s) {
  fputc('"', out);
  for (const char *p = s ? s : ""; *p; p++) {
    if (*p == '"') fputc('"', out);
    fputc(*p, out);
  }
  fputc('"', out);
}

static void write_csv(const pk_report_task *tasks, int n, FILE *out) {
  fputs("task,workload,target,default_gflops,best_gflops,extern_gflops,measured_gflops,"
        "confirmed_gflops,trials", out);
  for (int s = 1; s <= PK_MEAS_RUNTIME_ERROR; s++) fprintf(out, ",%s", pk_meas_status_name((pk_meas_status)s));
  fputc('\n', out);
  for (int i = 0; i < n; i++) {
    const pk_report_task *t = &tasks[i];
    csv_field(out, t->name);
    fputc(',', out);
    csv_field(out, t->workload);
    fputc(',', out);
    csv_field(out, t->target);
    fprintf(out, ",%.4f,%.4f,%.4f,%.4f,%.4f,%lld", t->default_gflops, t->best_gflops,
            t->extern_gflops, t->measured_gflops, t->confirmed_gflops, (long long)t->trials);
    for (int s = 1; s <= PK_MEAS_RUNTIME_ERROR; s++) fprintf(out, ",%lld", (long long)t->failures[s]);
    fputc('\n', out);
  }
}

/* ---- JSON ---- */
static pk_status write_json(pk_ctx *ctx, const pk_report_task *tasks, int n, FILE *out) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "version", 1);
  cJSON *arr = cJSON_AddArrayToObject(root, "tasks");
  for (int i = 0; i < n; i++) {
    const pk_report_task *t = &tasks[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "task", t->name ? t->name : "");
    cJSON_AddStringToObject(o, "workload", t->workload ? t->workload : "");
    cJSON_AddStringToObject(o, "target", t->target ? t->target : "");
    cJSON_AddNumberToObject(o, "default_gflops", t->default_gflops);
    cJSON_AddNumberToObject(o, "best_gflops", t->best_gflops);
    cJSON_AddNumberToObject(o, "extern_gflops", t->extern_gflops);
    cJSON_AddNumberToObject(o, "measured_gflops", t->measured_gflops);
    cJSON_AddNumberToObject(o, "confirmed_gflops", t->confirmed_gflops);
    cJSON_AddNumberToObject(o, "trials", (double)t->trials);
    cJSON *f = cJSON_AddObjectToObject(o, "failures");
    for (int s = 1; s <= PK_MEAS_RUNTIME_ERROR; s++)
      cJSON_AddNumberToObject(f, pk_meas_status_name((pk_meas_status)s), (double)t->failures[s]);
    cJSON *curve = cJSON_AddArrayToObject(o, "curve");
    for (int p = 0; p < t->npoints; p++) {
      cJSON *pt = cJSON_CreateArray();
      cJSON_AddItemToArray(pt, cJSON_CreateNumber((double)t->curve[p].trial));
      cJSON_AddItemToArray(pt, cJSON_CreateNumber(t->curve[p].best_gflops));
      cJSON_AddItemToArray(curve, pt);
    }
    if (t->best_trace) cJSON_AddStringToObject(o, "best_trace", t->best_trace);
    cJSON_AddItemToArray(arr, o);
  }
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) return pk_ctx_fail(ctx, PK_ERR_NOMEM, "out of memory writing the JSON report");
  fputs(text, out);
  fputc('\n', out);
  cJSON_free(text);
  return PK_OK;
}

/* ---- HTML with inline SVG (report_svg.c) ---- */

/* One chart per task: the best-so-far curve, with the default schedule and the extern
 * kernel as horizontal reference lines. */
static void svg_chart(FILE *out, const pk_report_task *t, int index) {
  double ymax = fmax(fmax(t->best_gflops, t->extern_gflops), t->default_gflops);
  for (int p = 0; p < t->npoints; p++) ymax = fmax(ymax, t->curve[p].best_gflops);
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  double xmax = t->npoints ? (double)t->curve[t->npoints - 1].trial : 1;
  if (xmax < 1) xmax = 1;
  char id[32], xlab[32];
  snprintf(id, sizeof id, "chart%d", index);
  snprintf(xlab, sizeof xlab, "%lld", (long long)xmax);
  pk_svg_chart c = {.id = id, .width = 560, .height = 220, .xmax = xmax, .ymax = ymax,
                    .x_label = "trials", .y_label = "GFLOP/s", .y_decimals = 1};
  pk_svg_begin(out, &c);
  if (t->default_gflops > 0) pk_svg_hline(out, &c, t->default_gflops, "default", "#888", "4 3");
  if (t->extern_gflops > 0) pk_svg_hline(out, &c, t->extern_gflops, "extern", "#c33", "6 3");
  if (t->npoints > 0) {
    double *xs = pk_xmalloc(sizeof *xs * 2 * (size_t)t->npoints), *ys = xs + t->npoints;
    for (int p = 0; p < t->npoints; p++) xs[p] = (double)t->curve[p].trial, ys[p] = t->curve[p].best_gflops;
    pk_svg_polyline(out, &c, "curve", "#1f6fd1", xs, ys, t->npoints);
    free(xs);
  }
  pk_svg_end(out, &c, xlab);
}

static void write_html(const pk_report_task *tasks, int n, FILE *out) {
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<title>Pock tuning report</title>\n<style>\n"
        "body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
        "td,th{border:1px solid #bbb;padding:4px 8px;text-align:right}td.name{text-align:left}"
        "section{margin:1.5em 0}pre{background:#f4f4f4;padding:6px;white-space:pre-wrap;"
        "word-break:break-all;font-size:11px}\n</style></head><body>\n"
        "<h1>Pock tuning report</h1>\n<table id=\"summary\">\n<tr><th>task</th><th>target</th>"
        "<th>default GFLOP/s</th><th>best generated</th><th>extern</th><th>speedup</th>"
        "<th>db best measured</th><th>confirmed</th><th>trials</th><th>failed</th></tr>\n", out);
  for (int i = 0; i < n; i++) {
    const pk_report_task *t = &tasks[i];
    fputs("<tr class=\"task\"><td class=\"name\">", out);
    pk_report_html_text(out, t->name);
    fputs("</td><td class=\"name\">", out);
    pk_report_html_text(out, t->target);
    fprintf(out, "</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.1f&#215;</td><td>%.2f</td>"
                 "<td>%.2f</td><td>%lld</td><td>%lld</td></tr>\n",
            t->default_gflops, t->best_gflops, t->extern_gflops,
            speedup(t->best_gflops, t->default_gflops), t->measured_gflops, t->confirmed_gflops,
            (long long)t->trials, (long long)failed_total(t));
  }
  fputs("</table>\n<p>Charts: best GFLOP/s so far (blue) over trials; dashed grey: default "
        "schedule; dashed red: extern kernel.</p>\n", out);
  for (int i = 0; i < n; i++) {
    const pk_report_task *t = &tasks[i];
    fputs("<section class=\"task\"><h2>", out);
    pk_report_html_text(out, t->name);
    fputs("</h2>\n", out);
    svg_chart(out, t, i);
    fputs("<p>failures:", out);
    for (int s = 1; s <= PK_MEAS_RUNTIME_ERROR; s++)
      fprintf(out, " %s %lld", pk_meas_status_name((pk_meas_status)s), (long long)t->failures[s]);
    fputs("</p>\n", out);
    if (t->best_trace) {
      fputs("<pre>", out);
      pk_report_html_text(out, t->best_trace);
      fputs("</pre>\n", out);
    }
    fputs("</section>\n", out);
  }
  fputs("</body></html>\n", out);
}

pk_status pk_report_write(pk_ctx *ctx, const pk_report_task *tasks, int n, pk_report_format fmt,
                          FILE *out) {
  pk_status s = PK_OK;
  switch (fmt) {
  case PK_REPORT_TEXT: write_text(tasks, n, out); break;
  case PK_REPORT_CSV: write_csv(tasks, n, out); break;
  case PK_REPORT_JSON: s = write_json(ctx, tasks, n, out); break;
  case PK_REPORT_HTML: write_html(tasks, n, out); break;
  }
  if (s == PK_OK && (fflush(out) != 0 || ferror(out)))
    return pk_ctx_fail(ctx, PK_ERR_IO, "cannot write the report");
  return s;
}
