/* search_report.c — `pock sparse-search`'s report: the contribution of each candidate, the
 * schemes verified (predicted vs measured accuracy, memory, step time) and the chosen
 * one, as text and as one HTML file whose chart (validation accuracy vs BP memory of every
 * scheme tried) is drawn by the tuning report's SVG code (autotune/pk_report.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_report.h"
#include "search_impl.h"

static const char *ms_text(pk_ctx *ctx, double ms) {
  return isfinite(ms) ? pk_sprintf(ctx, "%.3f", ms) : "?";
}

static const char *lr_text(pk_ctx *ctx, double lr) {
  return lr > 0 ? pk_sprintf(ctx, "%g", lr) : "default";
}

char *srch_report_text(pk_ctx *ctx, const srch_report *r) {
  const pk_search_options *o = r->o;
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_printf(&b, "\nsparse-search report: %s\n", o->compile.model);
  pk_strbuf_printf(&b, "budget: %lld bytes of BP memory", (long long)o->budget_bytes);
  if (o->budget_step_ms > 0) pk_strbuf_printf(&b, ", %g ms per step", o->budget_step_ms);
  pk_strbuf_printf(&b, " (the full update: %lld bytes)", (long long)r->full_bp_bytes);
  pk_strbuf_printf(&b, "\nhead alone (always trained:");
  for (int i = 0; i < r->sp->nhead; i++) pk_strbuf_printf(&b, " %s", r->sp->head[i]);
  pk_strbuf_printf(&b, "): val_acc %.4f\n\n", r->head_acc);
  pk_strbuf_printf(&b, "contributions (%d epochs each, head + the candidate alone):\n", o->epochs);
  pk_strbuf_printf(&b, "  %-28s %9s %8s %8s\n", "candidate", "channels", "val_acc", "gain");
  for (int i = 0; i < r->sp->nitems; i++) {
    const srch_item *it = &r->sp->items[i];
    const srch_layer *L = &r->sp->layers[it->layer];
    const char *ch = it->norm ? "norm" : it->bias ? "-" : pk_sprintf(ctx, "%lld/%lld",
                                                 (long long)it->channels, (long long)L->in_channels);
    const char *name = it->param2 ? pk_sprintf(ctx, "%s %s", it->param, it->param2) : it->param;
    pk_strbuf_printf(&b, "  %-28s %9s %8.4f %+8.4f\n", name, ch, it->val_acc, it->gain);
  }
  int nfit = 0;
  for (int i = 0; i < r->ntried; i++) nfit += r->tried[i]->fits;
  pk_strbuf_printf(&b, "\nschemes costed: %d, %d within the budget; step time %s\n",
                   r->ntried, nfit, r->step_source);
  int epochs = o->verify_epochs ? o->verify_epochs : o->epochs;
  pk_strbuf_printf(&b, "verified (%d epochs):\n", epochs);
  pk_strbuf_printf(&b, "  %-44s %9s %9s %8s %10s %10s %9s %9s\n", "scheme", "predicted",
                   "measured", "lr", "bp bytes", "peak bytes", "ms pred", "ms meas");
  for (int i = 0; i < r->nverified; i++) {
    const srch_scheme *s = r->verified[i];
    pk_strbuf_printf(&b, "%s %-44s %9.4f %9.4f %8s %10lld %10lld %9s %9s\n",
                     s == r->chosen ? "*" : " ", s->key, s->predicted, s->measured,
                     lr_text(ctx, s->measured_lr),
                     (long long)s->cost.bp_bytes, (long long)s->cost.peak_bytes,
                     ms_text(ctx, s->cost.step_ms), ms_text(ctx, s->measured_ms));
  }
  pk_strbuf_printf(&b, "chosen (*): %s — val_acc %.4f, %lld bytes BP memory\n", r->chosen->key,
                   r->chosen->measured, (long long)r->chosen->cost.bp_bytes);
  pk_strbuf_printf(&b, "search wall time %.1f s\n", r->seconds);
  return pk_strbuf_finish(ctx, &b);
}

/* The chart: every scheme tried at (BP memory, predicted accuracy) in grey, the verified
 * ones' measured accuracy in blue joined to their prediction, the chosen one in red, the
 * budget as a dashed vertical line. */
static void chart(FILE *out, const srch_report *r) {
  double xmax = (double)r->o->budget_bytes, ymin = 1, ymax = 0;
  for (int i = 0; i < r->ntried; i++) {
    const srch_scheme *s = r->tried[i];
    xmax = fmax(xmax, (double)s->cost.bp_bytes);
    if (isfinite(s->predicted)) ymin = fmin(ymin, s->predicted), ymax = fmax(ymax, s->predicted);
    if (isfinite(s->measured)) ymin = fmin(ymin, s->measured), ymax = fmax(ymax, s->measured);
  }
  if (!(ymax > ymin)) ymin = ymax - 0.1;
  double pad = (ymax - ymin) * 0.05;
  char xlab[64];
  snprintf(xlab, sizeof xlab, "%.0f bytes", xmax * 1.05);
  pk_svg_chart c = {.id = "accuracy-memory", .width = 720, .height = 320, .xmin = 0,
                    .xmax = xmax * 1.05, .ymin = ymin - pad, .ymax = ymax + pad,
                    .x_label = "BP memory (bytes)", .y_label = "validation accuracy",
                    .y_decimals = 3};
  if (c.ymax <= c.ymin) c.ymax = c.ymin + 0.01;
  pk_svg_begin(out, &c);
  pk_svg_vline(out, &c, (double)r->o->budget_bytes, "budget", "#c33", "6 3");
  for (int i = 0; i < r->ntried; i++) {
    const srch_scheme *s = r->tried[i];
    if (!isfinite(s->predicted)) continue;
    char title[512];
    snprintf(title, sizeof title, "%s: predicted %.4f, %lld bytes", s->key, s->predicted,
             (long long)s->cost.bp_bytes);
    pk_svg_point(out, &c, (double)s->cost.bp_bytes, s->predicted, 2.5, "tried",
                 s->fits ? "#999" : "#ddd", "none", title);
  }
  for (int i = 0; i < r->nverified; i++) {
    const srch_scheme *s = r->verified[i];
    double xs[2] = {(double)s->cost.bp_bytes, (double)s->cost.bp_bytes};
    double ys[2] = {s->predicted, s->measured};
    pk_svg_polyline(out, &c, "error", "#1f6fd1", xs, ys, 2);
    char title[512];
    snprintf(title, sizeof title, "%s: measured %.4f, predicted %.4f", s->key, s->measured,
             s->predicted);
    bool ch = s == r->chosen;
    pk_svg_point(out, &c, xs[0], s->measured, ch ? 6 : 4, ch ? "chosen" : "verified",
                 ch ? "#d22" : "#1f6fd1", "#000", title);
  }
  pk_svg_end(out, &c, xlab);
}

char *srch_report_html(pk_ctx *ctx, const srch_report *r) {
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  if (!out) pk_out_of_memory(0);
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<title>Pock sparse-search report</title>\n<style>\n"
        "body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
        "td,th{border:1px solid #bbb;padding:4px 8px;text-align:right}td.name{text-align:left}"
        "tr.chosen{background:#fde8e8}\n</style></head><body>\n"
        "<h1>Pock sparse-search report</h1>\n<p>", out);
  pk_report_html_text(out, r->o->compile.model);
  fprintf(out, ": budget %lld bytes of BP memory (the full update: %lld)",
          (long long)r->o->budget_bytes, (long long)r->full_bp_bytes);
  if (r->o->budget_step_ms > 0) fprintf(out, ", %g ms per step", r->o->budget_step_ms);
  fprintf(out, "; %d schemes costed; step time ", r->ntried);
  pk_report_html_text(out, r->step_source);
  fprintf(out, "; search wall time %.1f s.</p>\n", r->seconds);
  chart(out, r);
  fputs("<p>Grey: every scheme tried, at its predicted accuracy (light: over the budget); "
        "blue: measured accuracy of the verified schemes, joined to their prediction; red: "
        "the chosen one; dashed red: the budget.</p>\n"
        "<table id=\"verified\">\n<tr><th>scheme</th><th>predicted acc</th><th>measured acc</th>"
        "<th>BP bytes</th><th>peak bytes</th><th>predicted ms/step</th><th>measured ms/step</th>"
        "</tr>\n", out);
  for (int i = 0; i < r->nverified; i++) {
    const srch_scheme *s = r->verified[i];
    fprintf(out, "<tr class=\"%s\"><td class=\"name\">", s == r->chosen ? "chosen" : "verified");
    pk_report_html_text(out, s->key);
    fprintf(out, "</td><td>%.4f</td><td>%.4f</td><td>%s</td><td>%lld</td><td>%lld</td><td>%s</td>"
                 "<td>%s</td></tr>\n",
            s->predicted, s->measured, lr_text(ctx, s->measured_lr), (long long)s->cost.bp_bytes, (long long)s->cost.peak_bytes,
            ms_text(ctx, s->cost.step_ms), ms_text(ctx, s->measured_ms));
  }
  fprintf(out, "</table>\n<h2>Contributions</h2>\n<p>Head alone: %.4f.</p>\n<table id=\"contrib\">\n"
               "<tr><th>candidate</th><th>channels</th><th>val acc</th><th>gain</th></tr>\n",
          r->head_acc);
  for (int i = 0; i < r->sp->nitems; i++) {
    const srch_item *it = &r->sp->items[i];
    fputs("<tr><td class=\"name\">", out);
    pk_report_html_text(out, it->param);
    if (it->param2) fputc(' ', out), pk_report_html_text(out, it->param2);
    if (it->bias) fputs(it->norm ? "</td><td>norm" : "</td><td>-", out);
    else fprintf(out, "</td><td>%lld/%lld", (long long)it->channels,
                 (long long)r->sp->layers[it->layer].in_channels);
    fprintf(out, "</td><td>%.4f</td><td>%+.4f</td></tr>\n", it->val_acc, it->gain);
  }
  fputs("</table>\n</body></html>\n", out);
  if (fclose(out) != 0) pk_out_of_memory(len);
  char *html = pk_strdup(ctx, buf);
  free(buf);
  return html;
}
