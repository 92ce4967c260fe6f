/* op_reduce.c — sum, mean and max over a set of axes, with keepdims. Mean is one stage,
 * sum(x / n), so the op stays one kernel with one output. Gradients will sit here. */
#include "op_impl.h"

pk_status pk_op_text_reduce(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  if (a->naxes < 0 || a->naxes > x->ndim)
    return pk_op_fail(ctx, op, "naxes %d out of range for rank %d", a->naxes, x->ndim);
  bool reduced[PK_TE_MAX_DIMS] = {false};
  for (int i = 0; i < a->naxes; i++) {
    int d;
    pk_status s = pk_op_axis(ctx, op, a->axes[i], x->ndim, &d);
    if (s != PK_OK) return s;
    if (reduced[d]) return pk_op_fail(ctx, op, "axis %d is listed twice", d);
    reduced[d] = true;
  }
  if (a->naxes == 0)
    for (int d = 0; d < x->ndim; d++) reduced[d] = true;

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
