/* data.c — datasets: the public loader (which format, options resolved against a model),
 * the CSV reader and the checks every format shares. Errors name the file and the line. */
#define _GNU_SOURCE
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_impl.h"
#include "model_impl.h"
#include "rt_file.h"

#define MAX_DATA_FILE ((size_t)1 << 36)

bool rt_data_fits(double v, pkrt_dtype dtype) {
  return isfinite(v) && (dtype != PKRT_DTYPE_F32 || fabs(v) <= FLT_MAX);
}

bool rt_label_ok(const rt_data_opts *o, int64_t v) {
  if (o->has_ignore_index && v == o->ignore_index) return true;
  return v >= 0 && v <= INT32_MAX && (o->classes <= 0 || v < o->classes);
}

pkrt_status rt_data_check(pkrt_ctx *rt, const char *path, const pkrt_dataset *d,
                          const rt_data_opts *o) {
  if (d->rows < 1) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: no data rows", path);
  if (o->features > 0 && d->features != o->features)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: %lld features per row, but the model's input takes %lld", path,
                         (long long)d->features, (long long)o->features);
  int64_t lw = d->label_width > 1 ? d->label_width : 1;
  if (o->label_width > 1 && lw != o->label_width)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: %lld labels per row, but the model takes %lld "
                         "(a label per token)", path, (long long)lw, (long long)o->label_width);
  for (int64_t i = 0; o->classes > 0 && i < d->rows * lw; i++)
    if (!rt_label_ok(o, d->labels[i]))
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                           "%s: row %lld: label %d is out of range for a model with %lld "
                           "classes",
                           path, (long long)(i / lw) + 1, (int)d->labels[i],
                           (long long)o->classes);
  return PKRT_OK;
}

/* ---- CSV ---- */

typedef struct csv {
  pkrt_ctx *rt;
  const char *path;
  const rt_data_opts *o;
  int64_t ncols, label_col;
  int64_t rows, cap;       /* rows stored, rows allocated */
  unsigned char *x;
  int32_t *labels;
  double *vals;            /* one line's numbers */
} csv;

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Parses one line's comma-separated numbers into vals (at most cap); returns the field
 * count, or -1 with *bad = the 1-based column that is not a finite number. */
static int64_t parse_fields(const char *p, const char *end, double *vals, int64_t cap,
                            int64_t *bad) {
  int64_t n = 0;
  for (;;) {
    while (p < end && is_blank(*p)) p++;
    const char *start = p;
    double v = 0;
    int ok = 0;
    if (p < end && *p != ',') {
      /* strtod needs a terminated string and the buffer is not one (a number at its very
       * end would be read past it): the field, up to its comma, is copied first */
      const char *fe = p;
      while (fe < end && *fe != ',') fe++;
      const char *te = fe;
      while (te > p && is_blank(te[-1])) te--;
      char num[128], *e;
      size_t len = (size_t)(te - p);
      if (len < sizeof num) {
        memcpy(num, p, len);
        num[len] = '\0';
        v = strtod(num, &e);
        ok = len > 0 && e == num + len && isfinite(v);
      }
      p = fe;
    }
    if (!ok) {
      *bad = n + 1;
      (void)start;
      return -1;
    }
    if (n < cap) vals[n] = v;
    n++;
    if (p == end) return n;
    p++; /* the comma */
  }
}

static int64_t count_fields(const char *p, const char *end) {
  int64_t n = 1;
  for (; p < end; p++) n += *p == ',';
  return n;
}

static pkrt_status csv_grow(csv *C) {
  int64_t ncap = C->cap ? C->cap * 2 : 1024;
  size_t es = pkrt_dtype_size(C->o->dtype);
  size_t row = (size_t)(C->ncols - 1) * es;
  if (row && (size_t)ncap > SIZE_MAX / 2 / row)
    return pkrt_ctx_fail(C->rt, PKRT_ERR_NOMEM, "%s: too large", C->path);
  unsigned char *x = realloc(C->x, (size_t)ncap * row + 1);
  if (!x) return pkrt_ctx_fail(C->rt, PKRT_ERR_NOMEM, "%s: out of memory", C->path);
  C->x = x;
  int32_t *l = realloc(C->labels, (size_t)ncap * sizeof *l);
  if (!l) return pkrt_ctx_fail(C->rt, PKRT_ERR_NOMEM, "%s: out of memory", C->path);
  C->labels = l;
  C->cap = ncap;
  return PKRT_OK;
}

/* One data line (fields already counted). */
static pkrt_status csv_row(csv *C, const char *p, const char *end, int64_t line) {
  int64_t bad;
  if (parse_fields(p, end, C->vals, C->ncols, &bad) < 0)
    return pkrt_ctx_fail(C->rt, PKRT_ERR_INPUT, "%s:%lld: column %lld is not a finite number",
                         C->path, (long long)line, (long long)bad);
  double lv = C->vals[C->label_col];
  if (lv != floor(lv) || lv < -2147483648.0 || lv > 2147483647.0)
    return pkrt_ctx_fail(C->rt, PKRT_ERR_INPUT, "%s:%lld: label %g is not an integer", C->path,
                         (long long)line, lv);
  bool ignored = C->o->has_ignore_index && lv == (double)C->o->ignore_index;
  if (C->o->classes > 0 && !ignored && (lv < 0 || lv >= (double)C->o->classes))
    return pkrt_ctx_fail(C->rt, PKRT_ERR_INPUT,
                         "%s:%lld: label %d is out of range for a model with %lld classes",
                         C->path, (long long)line, (int)lv, (long long)C->o->classes);
  /* Labels are class ids (or the model's ignore_index), as the .npy reader requires. */
  if (lv < 0 && !ignored)
    return pkrt_ctx_fail(C->rt, PKRT_ERR_INPUT, "%s:%lld: label %d is not a class id", C->path,
                         (long long)line, (int)lv);
  if (C->rows == C->cap && csv_grow(C) != PKRT_OK) return PKRT_ERR_NOMEM;
  C->labels[C->rows] = (int32_t)lv;
  int64_t nf = C->ncols - 1;
  unsigned char *row = C->x + (size_t)C->rows * (size_t)nf * pkrt_dtype_size(C->o->dtype);
  for (int64_t c = 0, f = 0; c < C->ncols; c++) {
    if (c == C->label_col) continue;
    double v = C->vals[c] * C->o->scale;
    /* 1e39 in an f32 model (or a scale that overflows) would train on inf, then NaN. */
    if (!rt_data_fits(v, C->o->dtype))
      return pkrt_ctx_fail(C->rt, PKRT_ERR_INPUT,
                           "%s:%lld: column %lld: %g%s does not fit the model's %s", C->path,
                           (long long)line, (long long)c + 1, C->vals[c],
                           C->o->scale != 1 ? " (scaled)" : "", pkrt_dtype_name(C->o->dtype));
    if (C->o->dtype == PKRT_DTYPE_F64) ((double *)row)[f++] = v;
    else ((float *)row)[f++] = (float)v;
  }
  C->rows++;
  return PKRT_OK;
}

static pkrt_status csv_parse(csv *C, const char *text, size_t len) {
  const char *p = text, *end = text + len;
  int64_t line = 0;
  int seen_first = 0;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    line++;
    const char *q = p;
    while (q < le && is_blank(*q)) q++;
    const char *ls = p;
    p = nl ? nl + 1 : end;
    if (q == le) continue; /* blank line */
    int64_t n = count_fields(ls, le);
    if (!seen_first) {
      seen_first = 1;
      C->ncols = n;
      if (n < 2)
        return pkrt_ctx_fail(C->rt, PKRT_ERR_INPUT,
                             "%s:%lld: %lld column (a label and at least one feature needed)",
                             C->path, (long long)line, (long long)n);
      if (n > (int64_t)1 << 24)
        return pkrt_ctx_fail(C->rt, PKRT_ERR_INPUT, "%s:%lld: %lld columns is too many",
                             C->path, (long long)line, (long long)n);
      int64_t lc = C->o->label_column < 0 ? n + C->o->label_column : C->o->label_column;
      if (lc < 0 || lc >= n)
        return pkrt_ctx_fail(C->rt, PKRT_ERR_INPUT,
                             "%s: label column %d is out of range (the file has %lld columns)",
                             C->path, C->o->label_column, (long long)n);
      C->label_col = lc;
      C->vals = malloc(sizeof(double) * (size_t)n);
      if (!C->vals) return pkrt_ctx_fail(C->rt, PKRT_ERR_NOMEM, "%s: out of memory", C->path);
      if (C->o->features > 0 && n - 1 != C->o->features)
        return pkrt_ctx_fail(C->rt, PKRT_ERR_INPUT,
                             "%s: %lld features per row, but the model's input takes %lld",
                             C->path, (long long)(n - 1), (long long)C->o->features);
      /* A first line that is not all numbers is a header. */
      int64_t bad;
      if (parse_fields(ls, le, C->vals, n, &bad) < 0) continue;
    } else if (n != C->ncols) {
      return pkrt_ctx_fail(C->rt, PKRT_ERR_INPUT,
                           "%s:%lld: wrong column count (%lld, the first line has %lld)",
                           C->path, (long long)line, (long long)n, (long long)C->ncols);
    }
    pkrt_status st = csv_row(C, ls, le, line);
    if (st != PKRT_OK) return st;
  }
  return PKRT_OK;
}

pkrt_status rt_csv_parse(pkrt_ctx *rt, const char *path, const char *text, size_t len,
                         const rt_data_opts *o, pkrt_dataset **out) {
  if (memchr(text, 0, len))
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: not a text file (contains NUL bytes)", path);
  csv C = {.rt = rt, .path = path, .o = o};
  pkrt_status st = csv_parse(&C, text, len);
  free(C.vals);
  pkrt_dataset *d = NULL;
  if (st == PKRT_OK && C.rows == 0)
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: no data rows", path);
  if (st == PKRT_OK && !(d = calloc(1, sizeof *d)))
    st = pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "%s: out of memory", path);
  if (st != PKRT_OK) {
    free(C.x);
    free(C.labels);
    return st;
  }
  *d = (pkrt_dataset){.rows = C.rows, .features = C.ncols - 1, .dtype = o->dtype, .x = C.x,
                      .labels = C.labels, .label_width = 1};
  *out = d;
  return PKRT_OK;
}

pkrt_status rt_csv_load(pkrt_ctx *rt, const char *path, const rt_data_opts *o,
                        pkrt_dataset **out) {
  void *text;
  size_t len;
  pkrt_status st = rt_file_read(rt, path, MAX_DATA_FILE, &text, &len);
  if (st != PKRT_OK) return st;
  st = rt_csv_parse(rt, path, text, len, o, out);
  free(text);
  return st;
}

/* ---- the public loader ---- */

static pkrt_status resolve(pkrt_ctx *rt, const pkrt_data_options *opts, rt_data_opts *o) {
  *o = (rt_data_opts){.scale = 1, .label_column = -1, .dtype = PKRT_DTYPE_F32,
                      .label_width = 1};
  if (!opts) return PKRT_OK;
  o->scale = opts->scale != 0 ? opts->scale : 1;
  o->label_column = opts->label_column;
  if (!isfinite(o->scale))
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "scale %g is not a finite number", o->scale);
  if (opts->model) {
    o->dtype = (pkrt_dtype)pkrt_model_dtype(opts->model);
    o->classes = pkrt_model_classes(opts->model);
    o->features = pkrt_model_features(opts->model);
    o->model = opts->model;
    o->x_dtype = (pkrt_dtype)pkrt_model_input_dtype(opts->model, 0);
    o->label_width = opts->model->mf.label_width > 1 ? opts->model->mf.label_width : 1;
    o->has_ignore_index = opts->model->mf.has_ignore_index;
    o->ignore_index = opts->model->mf.ignore_index;
    return PKRT_OK;
  }
  o->dtype = opts->dtype ? (pkrt_dtype)opts->dtype : PKRT_DTYPE_F32;
  if (o->dtype != PKRT_DTYPE_F32 && o->dtype != PKRT_DTYPE_F64)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "dataset dtype must be f32 or f64");
  o->classes = opts->classes;
  o->features = opts->features;
  if (opts->label_width < 0 || opts->label_width > INT32_MAX)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "label_width %lld out of range",
                         (long long)opts->label_width);
  o->label_width = opts->label_width > 1 ? opts->label_width : 1;
  o->has_ignore_index = opts->has_ignore_index != 0;
  o->ignore_index = opts->ignore_index;
  return PKRT_OK;
}

int pkrt_dataset_load(const char *path, const pkrt_data_options *opts, pkrt_dataset **out,
                      char *err, size_t errcap) {
  if (err && errcap) err[0] = 0;
  if (!out) return PKRT_ERR_INPUT;
  *out = NULL;
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (!rt) {
    if (err && errcap) snprintf(err, errcap, "out of memory");
    return PKRT_ERR_NOMEM;
  }
  rt_data_opts o;
  pkrt_status st = resolve(rt, opts, &o);
  if (st == PKRT_OK && (!path || !*path))
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "no data file given");
  pkrt_dataset *d = NULL;
  /* "X.npy:Y.npy": split after the first ".npy" that a ':' follows. */
  const char *split = st == PKRT_OK ? strstr(path, ".npy:") : NULL;
  if (st != PKRT_OK) {
  } else if (split) {
    size_t xl = (size_t)(split - path) + 4;
    char *xpath = strndup(path, xl);
    /* "X1.npy,X2.npy:Y.npy": one file per input of a model with several (data_inputs.c) */
    if (!xpath) st = pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "out of memory");
    else if (strstr(xpath, ".npy,") || (o.model && pkrt_model_ninputs(o.model) > 1))
      st = rt_inputs_load(rt, xpath, split + 5, &o, &d);
    else st = rt_npy_load(rt, xpath, split + 5, &o, &d);
    free(xpath);
  } else if (o.model && pkrt_model_ninputs(o.model) > 1) {
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: the model has %d inputs: give one .npy file "
                       "per input and the labels, X1.npy,X2.npy:Y.npy", path,
                       pkrt_model_ninputs(o.model));
  } else {
    size_t n = strlen(path);
    if (n >= 4 && strcmp(path + n - 4, ".npy") == 0)
      st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "%s: give the features and the labels as X.npy:Y.npy", path);
    else if (o.label_width > 1)
      st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: the model takes %lld labels per row (a "
                         "label per token): give X.npy:Y.npy with Y of shape (rows, %lld)",
                         path, (long long)o.label_width, (long long)o.label_width);
    else
      st = rt_csv_load(rt, path, &o, &d);
  }
  if (st == PKRT_OK) st = rt_data_check(rt, path, d, &o);
  if (st != PKRT_OK) {
    if (err && errcap) snprintf(err, errcap, "%s", pkrt_ctx_error(rt));
    pkrt_dataset_free(d);
  } else {
    *out = d;
  }
  pkrt_ctx_free(rt);
  return st;
}

void pkrt_dataset_free(pkrt_dataset *d) {
  if (!d) return;
  for (int k = 0; k < d->nextra; k++) free(d->extra[k].data);
  free(d->x);
  free(d->labels);
  free(d);
}

int64_t pkrt_dataset_rows(const pkrt_dataset *d) { return d ? d->rows : 0; }
int64_t pkrt_dataset_features(const pkrt_dataset *d) { return d ? d->features : 0; }
int pkrt_dataset_dtype(const pkrt_dataset *d) { return d ? (int)d->dtype : 0; }
const void *pkrt_dataset_x(const pkrt_dataset *d) { return d ? d->x : NULL; }
const int32_t *pkrt_dataset_labels(const pkrt_dataset *d) { return d ? d->labels : NULL; }
int64_t pkrt_dataset_label_width(const pkrt_dataset *d) {
  return d ? (d->label_width > 1 ? d->label_width : 1) : 0;
}
