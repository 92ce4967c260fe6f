/* op_softmax.c — softmax and log_softmax over one axis (any axis), numerically stable in
 * three stages: M = max over the axis, S = sum of exp(x - M), then
 * Y = exp(x - M) / S (softmax) or Y = x - M - log S (log_softmax).
 * M and S keep the axis with extent 1. Each is followed by its gradient:
 * softmax dX = Y (dY - sum(dY Y)); log_softmax dX = dY - exp(Y) sum(dY). */
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

/* softmax and log_softmax share the row max M and the row sum S of exp(x - M); then
 * Y = exp(x - M) / S, or x - M - log S rather than log(softmax): no log of an underflowed
 * 0 (-inf) where a logit is far below the row's max. */
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

  bool log_form = op == PK_OP_LOG_SOFTMAX;
  pk_op_emit_compute_head(out, "Y", x->ndim, x->shape);
  pk_strbuf_append(out, log_form ? "X[" : "exp(X[");
  emit_index_with(out, x->ndim, axis, ax);
  pk_strbuf_append(out, "] - M[");
  emit_index_with(out, x->ndim, axis, "0");
  pk_strbuf_append(out, log_form ? "] - log(S[" : "]) / S[");
  emit_index_with(out, x->ndim, axis, "0");
  pk_strbuf_append(out, log_form ? "]))\n" : "])\n");
  return PK_OK;
}

/* softmax: dX = Y * (dY - S) with S = sum over the axis of dY * Y; log_softmax:
 * dX = dY - exp(Y) * S with S = sum over the axis of dY (exp(Y) is the softmax, recomputed
 * rather than saved). Both read only Y and dY. */
pk_status pk_op_grad_softmax(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                             const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  int axis;
  pk_status s = pk_op_axis(ctx, op, prm->attrs.axis, x->ndim, &axis);
  if (s != PK_OK) return s;
  int64_t rshape[PK_TE_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) rshape[d] = d == axis ? 1 : x->shape[d];
  bool log_form = op == PK_OP_LOG_SOFTMAX;
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_OUTPUT, 0, "Y", prm, y);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_op_emit_reduce_axis(out, 0, x->shape[axis]);

  pk_op_emit_compute_head(out, "S", x->ndim, rshape);
  pk_strbuf_append(out, "sum(DY[");
  emit_index_with(out, x->ndim, axis, "k0");
  if (!log_form) {
    pk_strbuf_append(out, "] * Y[");
    emit_index_with(out, x->ndim, axis, "k0");
  }
  pk_strbuf_append(out, "], k0))\n");

  pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
  if (log_form) {
    pk_op_emit_read_all(out, "DY", x->ndim);
    pk_strbuf_append(out, " - exp(");
    pk_op_emit_read_all(out, "Y", x->ndim);
    pk_strbuf_append(out, ") * S[");
  } else {
    pk_op_emit_read_all(out, "Y", x->ndim);
    pk_strbuf_append(out, " * (");
    pk_op_emit_read_all(out, "DY", x->ndim);
    pk_strbuf_append(out, " - S[");
  }
  emit_index_with(out, x->ndim, axis, "0");
  pk_strbuf_append(out, log_form ? "])\n" : "]))\n");
  (void)input;
  return PK_OK;
}
