/* op_softmax.c — softmax over one axis, numerically stable in three stages:
 *   M = max over the axis, S = sum of exp(x - M), Y = exp(x - M) / S.
 * M and S keep the axis with extent 1. Its gradient will sit here. */
#include <stdio.h>

#include "op_impl.h"

/* "i0, <at>, i2": the indices of x's dims with dim `axis` replaced by `at`. */
static void emit_index_with(pk_strbuf *b, int ndim, int axis, const char *at) {
  for (int d = 0; d < ndim; d++) {
    if (d) pk_strbuf_append(b, ", ");
    if (d == axis) pk_strbuf_append(b, at);
    else pk_strbuf_printf(b, "i%d", d);
  }
}

pk_status pk_op_text_softmax(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                             pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  int axis;
  pk_status s = pk_op_axis(ctx, op, prm->attrs.axis, x->ndim, &axis);
  if (s != PK_OK) return s;
  int64_t rshape[PK_TE_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) rshape[d] = d == axis ? 1 : x->shape[d];
  char ax[16];
  snprintf(ax, sizeof ax, "i%d", axis);

  pk_op_emit_placeholder(out, "X", x->ndim, x->shape, x->dtype);
  /* one reduce axis per stage: a reduce axis belongs to one compute */
  pk_op_emit_reduce_axis(out, 0, x->shape[axis]);
  pk_op_emit_reduce_axis(out, 1, x->shape[axis]);

  pk_op_emit_compute_head(out, "M", x->ndim, rshape);
  pk_strbuf_append(out, "max(X[");
  emit_index_with(out, x->ndim, axis, "k0");
  pk_strbuf_append(out, "], k0))\n");

  pk_op_emit_compute_head(out, "S", x->ndim, rshape);
  pk_strbuf_append(out, "sum(exp(X[");
  emit_index_with(out, x->ndim, axis, "k1");
  pk_strbuf_append(out, "] - M[");
  emit_index_with(out, x->ndim, axis, "0");
  pk_strbuf_append(out, "]), k1))\n");

  pk_op_emit_compute_head(out, "Y", x->ndim, x->shape);
  pk_strbuf_append(out, "exp(X[");
  emit_index_with(out, x->ndim, axis, ax);
  pk_strbuf_append(out, "] - M[");
  emit_index_with(out, x->ndim, axis, "0");
  pk_strbuf_append(out, "]) / S[");
  emit_index_with(out, x->ndim, axis, "0");
  pk_strbuf_append(out, "])\n");
  return PK_OK;
}
