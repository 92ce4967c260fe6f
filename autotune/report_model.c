/* report_model.c — a model's training step as the tuning database sees it: each kernel's
 * share of the step, its untuned (preset) and tuned time, and the step before and after,
 * as text or one self-contained HTML page (`pock report --db DB --model MODEL`). */
#include <stdlib.h>
#include <string.h>

#include "pk_report.h"

typedef struct step_totals {
  double before_ns, after_ns; /* over the kernels with both times */
  int both, untuned, missing;  /* kernels with both times, a default only, no record */
} step_totals;

static step_totals totals_of(const pk_report_kernel *k, int n) {
  step_totals t = {0};
  for (int i = 0; i < n; i++) {
    if (k[i].default_ns > 0 && k[i].tuned_ns > 0) {
      t.before_ns += k[i].calls * k[i].default_ns;
      t.after_ns += k[i].calls * k[i].tuned_ns;
      t.both++;
    } else if (k[i].default_ns > 0 || k[i].tuned_ns > 0) {
      t.untuned++;
    } else {
      t.missing++;
    }
  }
  return t;
}

/* Costliest first (tuned time per step, else default), then by label. */
static int by_cost(const void *a, const void *b) {
  const pk_report_kernel *x = *(const pk_report_kernel *const *)a, *y = *(const pk_report_kernel *const *)b;
  double cx = x->calls * (x->tuned_ns > 0 ? x->tuned_ns : x->default_ns);
  double cy = y->calls * (y->tuned_ns > 0 ? y->tuned_ns : y->default_ns);
  if (cx != cy) return cx > cy ? -1 : 1;
  return strcmp(x->label, y->label);
}

static double share(const pk_report_kernel *k, double step_ns) {
  double t = k->tuned_ns > 0 ? k->tuned_ns : k->default_ns;
  return step_ns > 0 && t > 0 ? 100.0 * k->calls * t / step_ns : 0;
}

static void write_text(const char *model, const pk_report_kernel *const *k, int n, step_totals t,
                       double step_ns, FILE *out) {
  fprintf(out, "model %s: %d kernels; step %.3f ms untuned -> %.3f ms tuned (%.2fx) over the %d "
               "kernels with both records",
          model, n, t.before_ns * 1e-6, t.after_ns * 1e-6, t.after_ns > 0 ? t.before_ns / t.after_ns : 0, t.both);
  fprintf(out, "; %d with one record only, %d with none\n\n", t.untuned, t.missing);
  fprintf(out, "%-40s %6s %11s %11s %8s %7s\n", "kernel", "calls", "default us", "tuned us", "speedup",
          "share");
  for (int i = 0; i < n; i++) {
    const pk_report_kernel *r = k[i];
    fprintf(out, "%-40s %6g %11.2f %11.2f%s %7.2fx %6.1f%%\n", r->label, r->calls, r->default_ns * 1e-3,
            r->tuned_ns * 1e-3, r->confirmed ? "*" : " ",
            r->default_ns > 0 && r->tuned_ns > 0 ? r->default_ns / r->tuned_ns : 0, share(r, step_ns));
  }
  fprintf(out, "(per call; 0: no record; * confirmed (re-timed beside the task's leaders); share: "
               "of the step's known time, tuned where tuned)\n");
}

static void write_html(const char *model, const pk_report_kernel *const *k, int n, step_totals t,
                       double step_ns, FILE *out) {
  fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Pock step report</title>\n"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}td.name{text-align:left}"
        "div.bar{background:#1f6fd1;height:10px}</style></head><body>\n<h1>Training step: ", out);
  pk_report_html_text(out, model);
  fprintf(out, "</h1>\n<p id=\"step\">%d kernels. Step <b>%.3f ms</b> untuned &#8594; <b>%.3f ms</b> "
               "tuned (%.2f&#215;) over the %d kernels with both records; %d with one record only, "
               "%d with none.</p>\n",
          n, t.before_ns * 1e-6, t.after_ns * 1e-6, t.after_ns > 0 ? t.before_ns / t.after_ns : 0,
          t.both, t.untuned, t.missing);
  fputs("<table id=\"kernels\">\n<tr><th>kernel</th><th>calls/step</th><th>default &#181;s</th>"
        "<th>tuned &#181;s</th><th>speedup</th><th>share of the step</th><th></th></tr>\n", out);
  for (int i = 0; i < n; i++) {
    const pk_report_kernel *r = k[i];
    double sh = share(r, step_ns);
    fputs("<tr class=\"kernel\"><td class=\"name\">", out);
    pk_report_html_text(out, r->label);
    fprintf(out, "</td><td>%g</td><td>%.2f</td><td>%.2f%s</td><td>%.2f&#215;</td><td>%.1f%%</td>"
                 "<td style=\"width:200px\"><div class=\"bar\" style=\"width:%.1f%%\"></div></td></tr>\n",
            r->calls, r->default_ns * 1e-3, r->tuned_ns * 1e-3, r->confirmed ? " (confirmed)" : "",
            r->default_ns > 0 && r->tuned_ns > 0 ? r->default_ns / r->tuned_ns : 0, sh, sh);
  }
  fputs("</table>\n<p>Times per call from the tuning database (0: no record). Default: the "
        "kernel's untuned preset; tuned: the record <code>pock compile --db</code> builds.</p>\n"
        "</body></html>\n", out);
}

pk_status pk_report_model_write(pk_ctx *ctx, const char *model, const pk_report_kernel *k, int n,
                                pk_report_format fmt, FILE *out) {
  if (fmt != PK_REPORT_TEXT && fmt != PK_REPORT_HTML)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "report --model: formats text and html only");
  const pk_report_kernel **sorted = pk_alloc(ctx, sizeof *sorted * (size_t)(n + 1));
  double step_ns = 0;
  for (int i = 0; i < n; i++) {
    sorted[i] = &k[i];
    step_ns += k[i].calls * (k[i].tuned_ns > 0 ? k[i].tuned_ns : k[i].default_ns);
  }
  qsort(sorted, (size_t)n, sizeof *sorted, by_cost);
  step_totals t = totals_of(k, n);
  if (fmt == PK_REPORT_TEXT) write_text(model, sorted, n, t, step_ns, out);
  else write_html(model, sorted, n, t, step_ns, out);
  if (fflush(out) != 0 || ferror(out)) return pk_ctx_fail(ctx, PK_ERR_IO, "cannot write the report");
  return PK_OK;
}
