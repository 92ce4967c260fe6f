/* op_reduce.c — sum, mean and max over a set of axes, with keepdims, and their gradients.
 * Mean is one stage, sum(x / n), so the op stays one kernel with one output. */
#include "op_impl.h"

/* Validates the reduced axes; reduced[d] says whether dim d of the input is reduced. */
static pk_status reduced_dims(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                              bool *reduced) {
  const pk_op_input *x = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  if (a->naxes < 0 || a->naxes > x->ndim)
    return pk_op_fail(ctx, op, "naxes %d out of range for rank %d", a->naxes, x->ndim);
  for (int d = 0; d < x->ndim; d++) reduced[d] = a->naxes == 0;
  for (int i = 0; i < a->naxes; i++) {
    int d;
    pk_status s = pk_op_axis(ctx, op, a->axes[i], x->ndim, &d);
    if (s != PK_OK) return s;
    if (reduced[d]) return pk_op_fail(ctx, op, "axis %d is listed twice", d);
    reduced[d] = true;
  }
  return PK_OK;
}

pk_status pk_op_text_reduce(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  bool reduced[PK_TE_MAX_DIMS];
  pk_status s = reduced_dims(ctx, op, prm, reduced);
  if (s != PK_OK) return s;

  /* Result shape, and for each input dim the index it is read with. */
  int64_t yshape[PK_TE_MAX_DIMS];
  int ny = 0, nk = 0;
  double count = 1; /* elements per reduction, for mean (exact below 2^53) */
  pk_strbuf idx;
  pk_strbuf_init(&idx);
  for (int d = 0; d < x->ndim; d++) {
    if (d) pk_strbuf_append(&idx, ", ");
    if (reduced[d]) {
      pk_strbuf_printf(&idx, "k%d", nk++);
      count *= (double)x->shape[d];
      if (a->keepdims) yshape[ny++] = 1;
    } else {
      pk_strbuf_printf(&idx, "i%d", ny);
      yshape[ny++] = x->shape[d];
    }
  }
  if (ny == 0) yshape[ny++] = 1; /* every axis reduced: a TE has rank >= 1 */

  pk_op_emit_placeholder(out, "X", x->ndim, x->shape, x->dtype);
  for (int d = 0, k = 0; d < x->ndim; d++)
    if (reduced[d]) pk_op_emit_reduce_axis(out, k++, x->shape[d]);
  pk_op_emit_compute_head(out, "Y", ny, yshape);
  pk_strbuf_printf(out, "%s(X[%s]", op == PK_OP_MAX ? "max" : "sum", idx.data);
  if (op == PK_OP_MEAN) {
    pk_strbuf_append(out, " / ");
    pk_op_emit_float(out, count);
  }
  for (int k = 0; k < nk; k++) pk_strbuf_printf(out, ", k%d", k);
  pk_strbuf_append(out, "))\n");
  pk_strbuf_free(&idx);
  return PK_OK;
}

/* The row-major position of a point within its reduction, an i64 expression over the
 * reduced dims' indices (prefix "k": reduce axes k0, k1, ..; prefix "i": the input's own
 * axes): "k0 * 35 + k1 * 5 + k2". */
static void emit_flat_position(pk_strbuf *b, const pk_op_input *x, const bool *reduced,
                               char prefix) {
  bool first = true;
  for (int d = 0, k = 0; d < x->ndim; d++) {
    if (!reduced[d]) continue;
    int64_t stride = 1;
    for (int e = d + 1; e < x->ndim; e++)
      if (reduced[e]) stride *= x->shape[e];
    pk_strbuf_printf(b, "%s%c%d", first ? "" : " + ", prefix, prefix == 'k' ? k : d);
    if (stride != 1) pk_strbuf_printf(b, " * %lld", (long long)stride);
    first = false;
    k++;
  }
}

/* dX = dY at the input point's reduction (/ n for mean). For max only the first maximum of
 * each reduction in row-major order gets it (PyTorch's rule; ties are common after relu):
 * a first stage FI finds that position with a min reduction over select(x == y, position,
 * n) — a NaN counts as the maximum, as the forward max propagates it. */
pk_status pk_op_grad_reduce(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  bool reduced[PK_TE_MAX_DIMS];
  pk_status s = reduced_dims(ctx, op, prm, reduced);
  if (s != PK_OK) return s;
  if (op == PK_OP_MAX) {
    pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 0, "X", prm, y);
    pk_op_grad_add_arg(g, out, PK_GRAD_ARG_OUTPUT, 0, "Y", prm, y);
  }
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);

  /* yidx: Y's index at an input point (axes i<d>); xk: X at Y's point (axes i<j>, k<n>) */
  pk_strbuf yidx, xk;
  pk_strbuf_init(&yidx);
  pk_strbuf_init(&xk);
  int ny = 0, nk = 0;
  int64_t count = 1;
  for (int d = 0; d < x->ndim; d++) {
    if (d) pk_strbuf_append(&xk, ", ");
    if (reduced[d]) {
      count *= x->shape[d];
      pk_strbuf_printf(&xk, "k%d", nk++);
      if (prm->attrs.keepdims) pk_strbuf_printf(&yidx, "%s0", ny++ ? ", " : "");
    } else {
      pk_strbuf_printf(&yidx, "%si%d", ny ? ", " : "", d);
      pk_strbuf_printf(&xk, "i%d", ny++);
    }
  }
  if (ny == 0) pk_strbuf_append(&yidx, "0");

  if (op == PK_OP_MAX) {
    for (int d = 0, k = 0; d < x->ndim; d++)
      if (reduced[d]) pk_op_emit_reduce_axis(out, k++, x->shape[d]);
    pk_op_emit_compute_head(out, "FI", y->ndim, y->shape);
    pk_strbuf_printf(out, "min(select(X[%s] == ", xk.data);
    pk_op_emit_read_all(out, "Y", y->ndim);
    pk_strbuf_printf(out, " || X[%s] != X[%s], ", xk.data, xk.data);
    emit_flat_position(out, x, reduced, 'k');
    pk_strbuf_printf(out, ", %lld)", (long long)count);
    for (int k = 0; k < nk; k++) pk_strbuf_printf(out, ", k%d", k);
    pk_strbuf_append(out, "))\n");
  }
  pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
  if (op == PK_OP_MAX) {
    pk_strbuf_append(out, "select(");
    emit_flat_position(out, x, reduced, 'i');
    pk_strbuf_printf(out, " == FI[%s], DY[%s], 0.0))\n", yidx.data, yidx.data);
  } else {
    pk_strbuf_printf(out, "DY[%s]", yidx.data);
    if (op == PK_OP_MEAN) {
      pk_strbuf_append(out, " / ");
      pk_op_emit_float(out, (double)count);
    }
    pk_strbuf_append(out, ")\n");
  }
  pk_strbuf_free(&yidx);
  pk_strbuf_free(&xk);
  (void)input;
  return PK_OK;
}
