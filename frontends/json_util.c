/* json_util.c — checked accessors for the JSON graph frontend: every wrong type, range or
 * name becomes a PK_ERR_CHECK message "FILE: WHERE: key 'k' must be ...". */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "json_impl.h"
#include "pk_json_check.h"

pk_status pk_fe_fail(pk_fe *f, const char *where, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char msg[768];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (where)
    return pk_ctx_fail(f->ctx, PK_ERR_CHECK, "%s: %s: %s", f->file, where, msg);
  return pk_ctx_fail(f->ctx, PK_ERR_CHECK, "%s: %s", f->file, msg);
}

const char *pk_fe_quote(pk_fe *f, const char *s) { return pk_fe_cquote(f->ctx, s); }

const char *pk_fe_cquote(pk_ctx *ctx, const char *s) { return pk_json_quote(ctx, s); }

const cJSON *pk_fe_get(const cJSON *obj, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(obj, key);
}

pk_status pk_fe_no_duplicate_keys(pk_fe *f, const char *where, const cJSON *obj) {
  const char *dup = pk_json_duplicate_key(obj);
  if (dup) return pk_fe_fail(f, where, "key %s appears twice", pk_fe_quote(f, dup));
  return PK_OK;
}

pk_status pk_fe_keys(pk_fe *f, const char *where, const cJSON *obj,
                     const char *const *allowed) {
  if (!cJSON_IsObject(obj)) return pk_fe_fail(f, where, "must be an object");
  for (const cJSON *it = obj->child; it; it = it->next) {
    bool ok = false;
    for (int i = 0; allowed[i] && !ok; i++) ok = strcmp(it->string, allowed[i]) == 0;
    if (!ok) {
      pk_strbuf b;
      pk_strbuf_init(&b);
      for (int i = 0; allowed[i]; i++) pk_strbuf_printf(&b, "%s%s", i ? ", " : "", allowed[i]);
      const char *list = pk_strbuf_finish(f->ctx, &b);
      return pk_fe_fail(f, where, "unknown key %s (expected one of: %s)",
                        pk_fe_quote(f, it->string), list);
    }
  }
  return pk_fe_no_duplicate_keys(f, where, obj);
}

pk_status pk_fe_string(pk_fe *f, const char *where, const cJSON *obj, const char *key,
                       bool required, const char **out) {
  const cJSON *v = pk_fe_get(obj, key);
  if (!v) return required ? pk_fe_fail(f, where, "missing key '%s'", key) : PK_OK;
  if (!cJSON_IsString(v)) return pk_fe_fail(f, where, "key '%s' must be a string", key);
  *out = v->valuestring;
  return PK_OK;
}

pk_status pk_fe_bool(pk_fe *f, const char *where, const cJSON *obj, const char *key,
                     bool *out) {
  const cJSON *v = pk_fe_get(obj, key);
  if (!v) return PK_OK;
  if (!cJSON_IsBool(v))
    return pk_fe_fail(f, where, "key '%s' must be true or false", key);
  *out = cJSON_IsTrue(v);
  return PK_OK;
}

pk_status pk_fe_int_value(pk_fe *f, const char *where, const char *what, const cJSON *v,
                          int64_t lo, int64_t hi, int64_t *out) {
  if (!cJSON_IsNumber(v)) return pk_fe_fail(f, where, "%s must be an integer", what);
  double d = v->valuedouble;
  /* Compare as doubles first: converting an out-of-range double to int64 is undefined. */
  if (!isfinite(d) || d != floor(d))
    return pk_fe_fail(f, where, "%s must be an integer, not %g", what, d);
  /* (double)hi rounds up near 2^63: test the range that converts first, then exactly. */
  if (d < -0x1p63 || d >= 0x1p63 || (int64_t)d < lo || (int64_t)d > hi)
    return pk_fe_fail(f, where, "%s is %s, outside %lld..%lld", what,
                      fabs(d) < 1e15 ? pk_sprintf(f->ctx, "%.0f", d) : pk_sprintf(f->ctx, "%g", d),
                      (long long)lo, (long long)hi);
  int64_t x = (int64_t)d;
  *out = x;
  return PK_OK;
}

pk_status pk_fe_int(pk_fe *f, const char *where, const cJSON *obj, const char *key,
                    bool required, int64_t lo, int64_t hi, int64_t *out) {
  const cJSON *v = pk_fe_get(obj, key);
  if (!v) return required ? pk_fe_fail(f, where, "missing key '%s'", key) : PK_OK;
  return pk_fe_int_value(f, where, pk_sprintf(f->ctx, "key '%s'", key), v, lo, hi, out);
}

pk_status pk_fe_double(pk_fe *f, const char *where, const cJSON *obj, const char *key,
                       bool required, double lo, bool lo_open, double hi, double *out) {
  const cJSON *v = pk_fe_get(obj, key);
  if (!v) return required ? pk_fe_fail(f, where, "missing key '%s'", key) : PK_OK;
  if (!cJSON_IsNumber(v)) return pk_fe_fail(f, where, "key '%s' must be a number", key);
  double d = v->valuedouble;
  if (!isfinite(d) || d < lo || (lo_open && d == lo) || d > hi)
    return pk_fe_fail(f, where, "key '%s' is %g, outside %s%g, %g]", key, d,
                      lo_open ? "(" : "[", lo, hi);
  *out = d;
  return PK_OK;
}

pk_status pk_fe_array(pk_fe *f, const char *where, const cJSON *obj, const char *key,
                      int max, const cJSON **out, int *n) {
  const cJSON *v = pk_fe_get(obj, key);
  if (!v) return pk_fe_fail(f, where, "missing key '%s'", key);
  if (!cJSON_IsArray(v)) return pk_fe_fail(f, where, "key '%s' must be an array", key);
  int len = cJSON_GetArraySize(v);
  if (len < 1 || len > max)
    return pk_fe_fail(f, where, "key '%s' must have 1..%d elements, not %d", key, max, len);
  *out = v;
  *n = len;
  return PK_OK;
}

char *pk_fe_shape_str(pk_fe *f, int ndim, const int64_t *shape) {
  return pk_fe_cshape(f->ctx, ndim, shape);
}

char *pk_fe_cshape(pk_ctx *ctx, int ndim, const int64_t *shape) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_append(&b, "(");
  for (int i = 0; i < ndim; i++) pk_strbuf_printf(&b, "%s%lld", i ? ", " : "", (long long)shape[i]);
  pk_strbuf_append(&b, ")");
  return pk_strbuf_finish(ctx, &b);
}

pk_status pk_fe_shape(pk_fe *f, const char *where, const cJSON *arr, bool batch_first,
                      int *ndim, int64_t *shape) {
  if (!cJSON_IsArray(arr)) return pk_fe_fail(f, where, "shape must be an array");
  int n = cJSON_GetArraySize(arr);
  if (n < 1 || n > PK_TE_MAX_DIMS)
    return pk_fe_fail(f, where, "shape must have 1..%d dims, not %d", PK_TE_MAX_DIMS, n);
  int i = 0;
  int64_t numel = 1;
  for (const cJSON *d = arr->child; d; d = d->next, i++) {
    if (i == 0 && batch_first && cJSON_IsString(d)) {
      shape[0] = f->batch;
    } else {
      pk_status s = pk_fe_int_value(f, where, pk_sprintf(f->ctx, "shape[%d]", i), d, 1,
                                    PK_OP_MAX_EXTENT, &shape[i]);
      if (s != PK_OK) return s;
      if (i == 0 && batch_first) shape[0] = f->batch;
    }
    if (pk_i64_mul(numel, shape[i], &numel) || numel > INT64_MAX / 8)
      return pk_fe_fail(f, where, "shape has too many elements");
  }
  *ndim = n;
  return PK_OK;
}

pk_status pk_fe_check_name(pk_fe *f, const char *where, const char *name) {
  size_t n = strlen(name);
  if (n == 0) return pk_fe_fail(f, where, "empty name");
  if (n > PK_FE_MAX_NAME)
    return pk_fe_fail(f, where, "name %s is longer than %d bytes", pk_fe_quote(f, name),
                      PK_FE_MAX_NAME);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c < 0x20 || c == 0x7f)
      return pk_fe_fail(f, where, "name %s has a control character", pk_fe_quote(f, name));
    if (c == '(' || c == ')')
      return pk_fe_fail(f, where,
                        "name %s has a parenthesis (reserved for names Pock makes)",
                        pk_fe_quote(f, name));
  }
  return PK_OK;
}
