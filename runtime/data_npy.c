/* data_npy.c — NumPy .npy arrays (format versions 1-3, C order, little-endian) as a
 * dataset: X float32/float64 (rows, ...) and Y integer class ids (rows,) or (rows, 1).
 * The header is a Python dict literal; only what np.save writes is accepted. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_impl.h"
#include "rt_file.h"

#define MAX_NPY_FILE ((size_t)1 << 36)
#define NPY_MAX_DIMS 8

typedef struct npy {
  char kind;           /* 'f', 'i', 'u' */
  int size;            /* bytes per element */
  int ndim;
  int64_t shape[NPY_MAX_DIMS];
  int64_t count;       /* elements */
  const unsigned char *data;
} npy;

typedef struct hp {
  const char *p, *end;
} hp;

static void skip_ws(hp *h) {
  while (h->p < h->end && isspace((unsigned char)*h->p)) h->p++;
}

/* string := ' chars ' | " chars " (no escapes: np.save never writes any) */
static int parse_str(hp *h, char *buf, size_t cap) {
  skip_ws(h);
  if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return 0;
  char q = *h->p++;
  size_t n = 0;
  while (h->p < h->end && *h->p != q) {
    if (n + 1 >= cap) return 0;
    buf[n++] = *h->p++;
  }
  if (h->p >= h->end) return 0;
  h->p++;
  buf[n] = 0;
  return 1;
}

/* tuple := "(" [ int { "," int } [ "," ] ] ")" */
static int parse_shape(hp *h, npy *a) {
  skip_ws(h);
  if (h->p >= h->end || *h->p != '(') return 0;
  h->p++;
  a->ndim = 0;
  for (;;) {
    skip_ws(h);
    if (h->p < h->end && *h->p == ')') {
      h->p++;
      return 1;
    }
    if (a->ndim == NPY_MAX_DIMS || h->p >= h->end || !isdigit((unsigned char)*h->p)) return 0;
    int64_t v = 0;
    while (h->p < h->end && isdigit((unsigned char)*h->p)) {
      if (v > ((int64_t)1 << 40)) return 0;
      v = v * 10 + (*h->p++ - '0');
    }
    a->shape[a->ndim++] = v;
    skip_ws(h);
    if (h->p < h->end && *h->p == ',') h->p++;
    else if (h->p >= h->end || *h->p != ')') return 0;
  }
}

static pkrt_status bad_header(pkrt_ctx *rt, const char *path, const char *why) {
  return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: bad .npy header: %s", path, why);
}

/* dict := "{" { key ":" value "," } "}" with keys descr, fortran_order, shape. */
static pkrt_status parse_header(pkrt_ctx *rt, const char *path, const char *text, size_t len,
                                npy *a) {
  hp h = {text, text + len};
  char descr[32] = "", key[32];
  int have_descr = 0, have_order = 0, have_shape = 0, fortran = 0;
  skip_ws(&h);
  if (h.p >= h.end || *h.p != '{') return bad_header(rt, path, "not a dict");
  h.p++;
  for (;;) {
    skip_ws(&h);
    if (h.p < h.end && *h.p == '}') break;
    if (!parse_str(&h, key, sizeof key)) return bad_header(rt, path, "expected a quoted key");
    skip_ws(&h);
    if (h.p >= h.end || *h.p != ':') return bad_header(rt, path, "expected ':'");
    h.p++;
    skip_ws(&h);
    if (strcmp(key, "descr") == 0) {
      if (!parse_str(&h, descr, sizeof descr)) return bad_header(rt, path, "descr is not a string");
      have_descr = 1;
    } else if (strcmp(key, "fortran_order") == 0) {
      if ((size_t)(h.end - h.p) >= 4 && !memcmp(h.p, "True", 4)) fortran = 1, h.p += 4;
      else if ((size_t)(h.end - h.p) >= 5 && !memcmp(h.p, "False", 5)) h.p += 5;
      else return bad_header(rt, path, "fortran_order is not True or False");
      have_order = 1;
    } else if (strcmp(key, "shape") == 0) {
      if (!parse_shape(&h, a)) return bad_header(rt, path, "shape is not a tuple of integers");
      have_shape = 1;
    } else {
      return bad_header(rt, path, "unknown key");
    }
    skip_ws(&h);
    if (h.p < h.end && *h.p == ',') h.p++;
    else if (h.p >= h.end || *h.p != '}') return bad_header(rt, path, "expected ',' or '}'");
  }
  if (!have_descr || !have_order || !have_shape)
    return bad_header(rt, path, "descr, fortran_order and shape are all required");
  if (fortran)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: Fortran-order arrays are not supported (save "
                                             "np.ascontiguousarray(a))", path);
  /* Messages quote descr and end up on terminals: no control characters (none is valid
   * in a descr, so replacing them changes no verdict). */
  for (char *c = descr; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
  /* descr := byte order ('<', '|', or '=' for one byte) kind size */
  char order = descr[0];
  a->kind = order ? descr[1] : 0;
  char *e;
  long sz = order && a->kind ? strtol(descr + 2, &e, 10) : 0;
  if (!order || !a->kind || sz <= 0 || *e)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: unsupported dtype '%s'", path, descr);
  if (order == '>' && sz > 1)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: big-endian arrays ('%s') are not supported",
                         path, descr);
  if (order != '<' && order != '|' && order != '=' && order != '>')
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: unsupported dtype '%s'", path, descr);
  a->size = (int)sz;
  int ok = (a->kind == 'f' && (sz == 4 || sz == 8)) ||
           ((a->kind == 'i' || a->kind == 'u') && (sz == 1 || sz == 2 || sz == 4 || sz == 8));
  if (!ok) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: unsupported dtype '%s'", path, descr);
  a->count = 1;
  for (int d = 0; d < a->ndim; d++) {
    if (a->shape[d] != 0 && a->count > ((int64_t)1 << 40) / a->shape[d])
      return bad_header(rt, path, "shape too large");
    a->count *= a->shape[d];
  }
  return PKRT_OK;
}

/* Checks magic, version and header, and that the data is exactly count x size bytes. */
static pkrt_status npy_parse(pkrt_ctx *rt, const char *path, const unsigned char *b, size_t len,
                             npy *a) {
  if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: not a .npy file (bad magic)", path);
  int major = b[6];
  size_t hl, start;
  if (major == 1) {
    hl = (size_t)b[8] | (size_t)b[9] << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: truncated .npy header", path);
    hl = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    start = 12;
  } else {
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: .npy format version %d is not supported "
                                             "(1, 2 and 3 are)", path, major);
  }
  if (hl > len - start)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: truncated .npy header", path);
  pkrt_status st = parse_header(rt, path, (const char *)b + start, hl, a);
  if (st != PKRT_OK) return st;
  size_t data = start + hl, want = (size_t)a->count * (size_t)a->size;
  if (len - data < want)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: truncated (the data needs %zu bytes, %zu are "
                                             "there)", path, want, len - data);
  if (len - data > want)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: %zu unexpected bytes after the data", path,
                         len - data - want);
  a->data = b + data;
  return PKRT_OK;
}

static double get_f(const npy *a, int64_t i) {
  if (a->size == 4) {
    float v;
    memcpy(&v, a->data + 4 * i, 4);
    return v;
  }
  double v;
  memcpy(&v, a->data + 8 * i, 8);
  return v;
}

/* An integer element widened to int64 (uint64 above INT64_MAX saturates: out of range
 * for any class id anyway). */
static int64_t get_i(const npy *a, int64_t i) {
  const unsigned char *p = a->data + (size_t)a->size * (size_t)i;
  uint64_t u = 0;
  memcpy(&u, p, (size_t)a->size);
  if (a->kind == 'u') return u > INT64_MAX ? INT64_MAX : (int64_t)u;
  int bits = 8 * a->size;
  if (bits < 64 && (u >> (bits - 1) & 1)) u |= ~(uint64_t)0 << bits; /* sign-extend */
  return (int64_t)u;
}

pkrt_status rt_npy_parse(pkrt_ctx *rt, const char *xpath, const void *xb, size_t xl,
                         const char *ypath, const void *yb, size_t yl, const rt_data_opts *o,
                         pkrt_dataset **out) {
  npy X, Y;
  pkrt_dataset *d = NULL;
  pkrt_status st = npy_parse(rt, xpath, xb, xl, &X);
  if (st == PKRT_OK) st = npy_parse(rt, ypath, yb, yl, &Y);
  /* The model's first input may hold integers (token ids): then so must the file. */
  pkrt_dtype xd = o->x_dtype ? o->x_dtype : o->dtype;
  bool xint = xd == PKRT_DTYPE_I32 || xd == PKRT_DTYPE_I64;
  if (st == PKRT_OK && !xint && X.kind != 'f')
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: features must be float32 or float64", xpath);
  if (st == PKRT_OK && xint && X.kind == 'f')
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: the model's input takes integers (%s); the file "
                       "holds floats", xpath, pkrt_dtype_name(xd));
  if (st == PKRT_OK && Y.kind == 'f')
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: labels must be integers (int32, int64, uint8)",
                       ypath);
  if (st == PKRT_OK && (X.ndim < 1 || X.shape[0] < 1))
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: features need shape (rows, ...)", xpath);
  /* a label per token: (rows, T) for a model taking T labels per row */
  int64_t lw = o->label_width > 1 ? o->label_width : 1;
  if (st == PKRT_OK && lw > 1 && !(Y.ndim == 2 && Y.shape[1] == lw))
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: labels need shape (rows, %lld): the model takes "
                       "a label per token", ypath, (long long)lw);
  if (st == PKRT_OK && lw == 1 && !(Y.ndim == 1 || (Y.ndim == 2 && Y.shape[1] == 1)))
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: labels need shape (rows,) or (rows, 1)", ypath);
  if (st == PKRT_OK && Y.shape[0] != X.shape[0])
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s has %lld rows but %s has %lld", xpath,
                       (long long)X.shape[0], ypath, (long long)Y.shape[0]);
  int64_t rows = st == PKRT_OK ? X.shape[0] : 0, nf = rows ? X.count / rows : 0;
  if (st == PKRT_OK && nf < 1)
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: rows have no features", xpath);
  if (st == PKRT_OK && o->features > 0 && nf != o->features)
    st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                       "%s: %lld features per row, but the model's input takes %lld", xpath,
                       (long long)nf, (long long)o->features);
  if (st == PKRT_OK) {
    d = calloc(1, sizeof *d);
    size_t es = pkrt_dtype_size(xd);
    if (d) {
      d->x = malloc((size_t)X.count * es + 1);
      d->labels = malloc((size_t)rows * (size_t)lw * sizeof(int32_t) + 1);
    }
    if (!d || !d->x || !d->labels)
      st = pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "%s: out of memory", xpath);
  }
  for (int64_t i = 0; st == PKRT_OK && xint && i < X.count; i++) {
    int64_t v = get_i(&X, i);
    if (xd == PKRT_DTYPE_I32 && (v < INT32_MIN || v > INT32_MAX)) {
      st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: row %lld, feature %lld: %lld does not fit "
                         "the model's i32", xpath, (long long)(i / nf) + 1,
                         (long long)(i % nf) + 1, (long long)v);
      break;
    }
    if (xd == PKRT_DTYPE_I32) ((int32_t *)d->x)[i] = (int32_t)v;
    else ((int64_t *)d->x)[i] = v;
  }
  for (int64_t i = 0; st == PKRT_OK && !xint && i < X.count; i++) {
    double v = get_f(&X, i);
    if (!isfinite(v)) {
      st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: row %lld, feature %lld is not finite", xpath,
                         (long long)(i / nf) + 1, (long long)(i % nf) + 1);
      break;
    }
    /* An f8 1e300 (or a scale that overflows) would reach an f32 model as inf. */
    if (!rt_data_fits(v * o->scale, o->dtype)) {
      st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: row %lld, feature %lld: %g%s does not fit the "
                         "model's %s", xpath, (long long)(i / nf) + 1, (long long)(i % nf) + 1,
                         v, o->scale != 1 ? " (scaled)" : "", pkrt_dtype_name(o->dtype));
      break;
    }
    v *= o->scale;
    if (o->dtype == PKRT_DTYPE_F64) ((double *)d->x)[i] = v;
    else ((float *)d->x)[i] = (float)v;
  }
  for (int64_t i = 0; st == PKRT_OK && i < rows * lw; i++) {
    int64_t v = get_i(&Y, i), r = i / lw;
    if (!rt_label_ok(o, v)) {
      st = o->classes > 0
               ? pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: row %lld: label %lld is out of range "
                               "for a model with %lld classes", ypath, (long long)r + 1,
                               (long long)v, (long long)o->classes)
               : pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: row %lld: label %lld is not a class id",
                               ypath, (long long)r + 1, (long long)v);
      break;
    }
    d->labels[i] = (int32_t)v;
  }
  if (st != PKRT_OK) {
    pkrt_dataset_free(d);
    return st;
  }
  d->rows = rows;
  d->label_width = lw;
  d->features = nf;
  d->dtype = xd;
  *out = d;
  return PKRT_OK;
}

pkrt_status rt_npy_input(pkrt_ctx *rt, const char *path, const void *b, size_t len,
                         const char *name, int64_t rows, double scale, rt_dinput *in) {
  npy A;
  in->data = NULL;
  pkrt_status st = npy_parse(rt, path, b, len, &A);
  if (st != PKRT_OK) return st;
  bool isint = in->dtype == PKRT_DTYPE_I32 || in->dtype == PKRT_DTYPE_I64;
  if (isint && A.kind == 'f')
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: input '%s' takes integers (%s); the file "
                         "holds floats", path, name, pkrt_dtype_name(in->dtype));
  if (!isint && A.kind != 'f')
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: input '%s' takes %s; the file holds "
                         "integers", path, name, pkrt_dtype_name(in->dtype));
  int64_t want = in->batch ? rows * in->per_row : in->per_row;
  if (in->batch && (A.ndim < 1 || A.shape[0] != rows))
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: input '%s' needs %lld rows (as the first "
                         "file), the file has %lld", path, name, (long long)rows,
                         (long long)(A.ndim ? A.shape[0] : 0));
  if (A.count != want)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, in->batch
                             ? "%s: input '%s' takes %lld values per row, the file has %lld"
                             : "%s: input '%s' has no batch dim and takes %lld values, the "
                               "file has %lld",
                         path, name, (long long)in->per_row,
                         (long long)(in->batch ? A.count / rows : A.count));
  in->data = malloc((size_t)want * pkrt_dtype_size(in->dtype) + 1);
  if (!in->data) return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "%s: out of memory", path);
  for (int64_t i = 0; i < want; i++) {
    int64_t r = in->batch ? i / in->per_row + 1 : 0, c = i % in->per_row + 1;
    if (isint) {
      int64_t v = get_i(&A, i);
      if (in->dtype == PKRT_DTYPE_I32 && (v < INT32_MIN || v > INT32_MAX))
        st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: row %lld, value %lld: %lld does not fit "
                           "i32", path, (long long)r, (long long)c, (long long)v);
      else if (in->dtype == PKRT_DTYPE_I32) ((int32_t *)in->data)[i] = (int32_t)v;
      else ((int64_t *)in->data)[i] = v;
    } else {
      double v = get_f(&A, i) * scale;
      if (!rt_data_fits(v, in->dtype))
        st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: row %lld, value %lld: %g does not fit the "
                           "model's %s", path, (long long)r, (long long)c, v,
                           pkrt_dtype_name(in->dtype));
      else if (in->dtype == PKRT_DTYPE_F64) ((double *)in->data)[i] = v;
      else ((float *)in->data)[i] = (float)v;
    }
    if (st != PKRT_OK) {
      free(in->data);
      in->data = NULL;
      return st;
    }
  }
  return PKRT_OK;
}

pkrt_status rt_npy_load(pkrt_ctx *rt, const char *xpath, const char *ypath,
                        const rt_data_opts *o, pkrt_dataset **out) {
  void *xb = NULL, *yb = NULL;
  size_t xl, yl;
  pkrt_status st = rt_file_read(rt, xpath, MAX_NPY_FILE, &xb, &xl);
  if (st == PKRT_OK) st = rt_file_read(rt, ypath, MAX_NPY_FILE, &yb, &yl);
  if (st == PKRT_OK) st = rt_npy_parse(rt, xpath, xb, xl, ypath, yb, yl, o, out);
  free(xb);
  free(yb);
  return st;
}
