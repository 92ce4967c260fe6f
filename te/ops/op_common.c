/* op_common.c — helpers every operator builder uses: messages, shape rules (broadcasting and
 * undoing it, axes) and the small pieces of TE text (placeholders, compute heads, literals). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_impl.h"

pk_status pk_op_fail(pk_ctx *ctx, pk_op_kind op, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: %s", pk_op_name(op), msg);
}

const char *pk_op_shape_str(char *buf, int ndim, const int64_t *shape) {
  size_t n = 0, cap = PK_OP_SHAPE_CHARS;
  n += (size_t)snprintf(buf, cap, "(");
  for (int d = 0; d < ndim && d < PK_TE_MAX_DIMS; d++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)shape[d]);
  snprintf(buf + n, cap - n, ndim == 1 ? ",)" : ")");
  return buf;
}

pk_status pk_op_broadcast(pk_ctx *ctx, pk_op_kind op, int na, const int64_t *a, int nb,
                          const int64_t *b, int *nout, int64_t *out) {
  int n = na > nb ? na : nb;
  for (int d = 0; d < n; d++) {
    /* dim d of the result lines up with dim d - (n - na) of a, counted from the right */
    int da = d - (n - na), db = d - (n - nb);
    int64_t ea = da >= 0 ? a[da] : 1, eb = db >= 0 ? b[db] : 1;
    if (ea != eb && ea != 1 && eb != 1) {
      char sa[PK_OP_SHAPE_CHARS], sb[PK_OP_SHAPE_CHARS];
      return pk_op_fail(ctx, op, "shapes %s and %s do not broadcast (%lld vs %lld at dim %d)",
                        pk_op_shape_str(sa, na, a), pk_op_shape_str(sb, nb, b),
                        (long long)ea, (long long)eb, d - n);
    }
    out[d] = ea == 1 ? eb : ea;
  }
  *nout = n;
  return PK_OK;
}

pk_status pk_op_axis(pk_ctx *ctx, pk_op_kind op, int axis, int ndim, int *out) {
  if (axis < -ndim || axis >= ndim)
    return pk_op_fail(ctx, op, "axis %d out of range for rank %d", axis, ndim);
  *out = axis < 0 ? axis + ndim : axis;
  return PK_OK;
}

void pk_op_emit_shape(pk_strbuf *b, int ndim, const int64_t *shape) {
  char buf[PK_OP_SHAPE_CHARS];
  pk_strbuf_append(b, pk_op_shape_str(buf, ndim, shape));
}

void pk_op_emit_placeholder(pk_strbuf *b, const char *name, int ndim, const int64_t *shape,
                            pkrt_dtype dtype) {
  pk_strbuf_printf(b, "%s = placeholder(", name);
  pk_op_emit_shape(b, ndim, shape);
  pk_strbuf_printf(b, ", %s)\n", pkrt_dtype_name(dtype));
}

void pk_op_emit_axes(pk_strbuf *b, int ndim) {
  pk_strbuf_append(b, "(");
  for (int d = 0; d < ndim; d++) pk_strbuf_printf(b, "%si%d", d ? ", " : "", d);
  pk_strbuf_append(b, ")");
}

void pk_op_emit_reduce_axis(pk_strbuf *b, int k, int64_t extent) {
  pk_strbuf_printf(b, "k%d = reduce_axis(%lld)\n", k, (long long)extent);
}

void pk_op_emit_compute_head(pk_strbuf *b, const char *name, int ndim, const int64_t *shape) {
  pk_strbuf_printf(b, "%s = compute(", name);
  pk_op_emit_shape(b, ndim, shape);
  pk_strbuf_append(b, ", ");
  pk_op_emit_axes(b, ndim);
  pk_strbuf_append(b, " => ");
}

void pk_op_emit_bcast_index(pk_strbuf *b, int in_ndim, const int64_t *in_shape, int out_ndim,
                            int first) {
  for (int j = 0; j < in_ndim; j++) {
    if (j) pk_strbuf_append(b, ", ");
    if (in_shape[j] == 1) pk_strbuf_append(b, "0");
    else pk_strbuf_printf(b, "i%d", first + out_ndim - in_ndim + j);
  }
}

void pk_op_emit_float(pk_strbuf *b, double v) {
  /* Shortest text that reads back as exactly v, so the TE holds the value the op meant. */
  char buf[40];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  if (!strpbrk(buf, ".e")) strcat(buf, ".0"); /* "2" would be an integer literal */
  pk_strbuf_append(b, buf);
}

void pk_op_emit_read_all(pk_strbuf *b, const char *name, int ndim) {
  pk_strbuf_printf(b, "%s[", name);
  for (int d = 0; d < ndim; d++) pk_strbuf_printf(b, "%si%d", d ? ", " : "", d);
  pk_strbuf_append(b, "]");
}

void pk_op_unbcast_init(pk_op_unbcast *u, int in_ndim, const int64_t *in_shape, int out_ndim,
                        const int64_t *out_shape, int first_k) {
  u->nk = 0;
  u->first_k = first_k;
  for (int d = 0; d < out_ndim; d++) {
    int j = d - (out_ndim - in_ndim); /* the input dim aligned with result dim d */
    if (j >= 0 && in_shape[j] == out_shape[d]) snprintf(u->idx[d], sizeof u->idx[d], "i%d", j);
    else if (out_shape[d] == 1) snprintf(u->idx[d], sizeof u->idx[d], "0");
    else {
      snprintf(u->idx[d], sizeof u->idx[d], "k%d", first_k + u->nk);
      u->kext[u->nk++] = out_shape[d];
    }
  }
}

void pk_op_unbcast_emit_axes(pk_strbuf *b, const pk_op_unbcast *u) {
  for (int k = 0; k < u->nk; k++) pk_op_emit_reduce_axis(b, u->first_k + k, u->kext[k]);
}

void pk_op_unbcast_emit_axis_list(pk_strbuf *b, const pk_op_unbcast *u) {
  for (int k = 0; k < u->nk; k++) pk_strbuf_printf(b, ", k%d", u->first_k + k);
}

void pk_op_unbcast_emit_index(pk_strbuf *b, const pk_op_unbcast *u, int nd,
                              const int64_t *shape, int out_ndim) {
  for (int j = 0; j < nd; j++) {
    if (j) pk_strbuf_append(b, ", ");
    pk_strbuf_append(b, shape[j] == 1 ? "0" : u->idx[out_ndim - nd + j]);
  }
}
