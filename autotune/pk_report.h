/* pk_report.h — tuning reports: per task, the default schedule, the best generated kernel
 * and the extern kernel side by side, the tuning curve and failures by status, written as
 * text, CSV, JSON or one self-contained HTML file with inline SVG charts (no external URLs).
 *
 * Usage:
 *   pk_report_task tasks[n] = ...;          // filled from the tuning database
 *   pk_report_write(ctx, tasks, n, PK_REPORT_HTML, stdout);
 */
#ifndef PK_REPORT_H
#define PK_REPORT_H

#include <stdio.h>

#include "pk_autotune.h"

typedef enum pk_report_format {
  PK_REPORT_TEXT, PK_REPORT_CSV, PK_REPORT_JSON, PK_REPORT_HTML
} pk_report_format;

/* "text" | "csv" | "json" | "html" → format; false if unknown. */
bool pk_report_format_from_name(const char *name, pk_report_format *out);

/* One point of a tuning curve: after `trial` trials, the best GFLOP/s so far. */
typedef struct pk_curve_point {
  int64_t trial;
  double best_gflops;
} pk_curve_point;

typedef struct pk_report_task {
  const char *name;         /* readable task name (escaped on output) */
  const char *workload;     /* hex key */
  const char *target;
  double default_gflops;    /* 0: not measured */
  double best_gflops;       /* best generated kernel; 0: none */
  double extern_gflops;     /* best extern kernel; 0: none */
  double measured_gflops;   /* db best (what an artifact gets): its own measurement ... */
  double confirmed_gflops;  /* ... and its re-timing beside the task's leaders; 0: none */
  const char *best_trace;   /* JSON trace of the best generated kernel, may be NULL */
  int64_t trials;
  int64_t failures[PK_MEAS_RUNTIME_ERROR + 1]; /* records by pk_meas_status (index 0 = ok) */
  int npoints;
  const pk_curve_point *curve;
} pk_report_task;

/* Writes the report; PK_ERR_IO if the stream fails. Names and traces are escaped for the
 * format (HTML entities, CSV quoting, JSON strings), so nothing in them can inject markup. */
pk_status pk_report_write(pk_ctx *ctx, const pk_report_task *tasks, int n, pk_report_format fmt,
                          FILE *out);

/* ---- a model's step from the database's view (report_model.c): `pock report --model` ----
 * One row per distinct kernel of the training step; times are per call, ns (0: no record). */
typedef struct pk_report_kernel {
  const char *label;        /* "conv2d_grad1(grad(conv3).1)" (escaped on output) */
  const char *workload;     /* hex key */
  double calls;             /* per step */
  double default_ns;        /* the untuned kernel's record (the preset: pk_task_baseline) */
  double tuned_ns;          /* db best: what `pock compile --db` builds (confirmed first) */
  bool confirmed;           /* tuned_ns is a confirmed (re-timed) time */
} pk_report_kernel;
/* Writes per kernel its share of the step, default vs tuned time and speedup, and the step
 * before and after (over the kernels with both times; the others counted and named), as
 * text or one self-contained HTML page (PK_REPORT_TEXT / PK_REPORT_HTML; others:
 * PK_ERR_USAGE). */
pk_status pk_report_model_write(pk_ctx *ctx, const char *model, const pk_report_kernel *k, int n,
                                pk_report_format fmt, FILE *out);

/* ---- the SVG chart code of every HTML report (report_svg.c) ----
 *   pk_svg_chart c = {.id = "acc", .width = 560, .height = 220, .xmax = 10, .ymax = 1,
 *                     .x_label = "trials", .y_label = "GFLOP/s", .y_decimals = 1};
 *   pk_svg_begin(out, &c); pk_svg_polyline(out, &c, "curve", "#1f6fd1", xs, ys, n);
 *   pk_svg_end(out, &c, "10");
 * Coordinates are data values; every text is HTML-escaped. */
typedef struct pk_svg_chart {
  const char *id;           /* the svg element's id (Pock-made) */
  int width, height;        /* pixels */
  double xmin, xmax, ymin, ymax;
  const char *x_label, *y_label;
  int y_decimals;           /* of the y grid labels */
} pk_svg_chart;
void pk_report_html_text(FILE *out, const char *s); /* s with <>&"' escaped */
void pk_svg_begin(FILE *out, const pk_svg_chart *c); /* frame, y grid with labels, titles */
double pk_svg_x(const pk_svg_chart *c, double v);
double pk_svg_y(const pk_svg_chart *c, double v);
void pk_svg_hline(FILE *out, const pk_svg_chart *c, double y, const char *cls, const char *color,
                  const char *dash);
void pk_svg_vline(FILE *out, const pk_svg_chart *c, double x, const char *cls, const char *color,
                  const char *dash);
void pk_svg_polyline(FILE *out, const pk_svg_chart *c, const char *cls, const char *color,
                     const double *xs, const double *ys, int n);
/* A circle of radius r (pixels); title (may be NULL) is its tooltip. */
void pk_svg_point(FILE *out, const pk_svg_chart *c, double x, double y, double r, const char *cls,
                  const char *fill, const char *stroke, const char *title);
void pk_svg_end(FILE *out, const pk_svg_chart *c, const char *xmax_label); /* closes the svg */

#endif
