/* op_gather.c — indirect reads: gather (ONNX Gather / torch.index_select along one axis)
 * and embedding (nn.Embedding: gather of rows), with their gradients, scatter-adds of dY
 * into the rows the indices name (O(elements of dY) work, never a sweep over the vocabulary).
 *
 * Out-of-range indices (negative, or >= the axis extent) read 0.0 and their dY goes
 * nowhere: the read is guarded by a select the checker recognises, and scatter_add drops
 * destinations outside its tensor (docs/te.md), so no kernel touches memory outside a
 * tensor whatever the index data holds. PyTorch raises instead; see pk_ops.h. */
#include <stdio.h>

#include "op_impl.h"

/* The layout both ops share: X (data) is gathered along `axis` by I (integer indices). */
typedef struct gather_dims {
  const pk_op_input *x, *ix;
  int axis;
  int ndim;                        /* result rank: x->ndim - 1 + ix->ndim */
  int64_t shape[PK_TE_MAX_DIMS];   /* result shape: X's dims with `axis` replaced by I's */
} gather_dims;

/* embedding(W, ids) is gather(W, ids) along axis 0; gather(X, idx) reads attrs.axis. */
static pk_status gather_layout(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                               gather_dims *g) {
  g->x = &prm->in[0];
  g->ix = &prm->in[1];
  g->axis = 0;
  if (op == PK_OP_GATHER) {
    pk_status s = pk_op_axis(ctx, op, prm->attrs.axis, g->x->ndim, &g->axis);
    if (s != PK_OK) return s;
  } else if (g->x->ndim != 2) {
    return pk_op_fail(ctx, op, "the weight must have rank 2 (V, D), got rank %d", g->x->ndim);
  }
  g->ndim = g->x->ndim - 1 + g->ix->ndim;
  if (g->ndim > PK_TE_MAX_DIMS)
    return pk_op_fail(ctx, op, "result rank %d (data rank %d - 1 + index rank %d) exceeds %d",
                      g->ndim, g->x->ndim, g->ix->ndim, PK_TE_MAX_DIMS);
  int n = 0;
  for (int d = 0; d < g->axis; d++) g->shape[n++] = g->x->shape[d];
  for (int d = 0; d < g->ix->ndim; d++) g->shape[n++] = g->ix->shape[d];
  for (int d = g->axis + 1; d < g->x->ndim; d++) g->shape[n++] = g->x->shape[d];
  return PK_OK;
}

/* "I[i<axis>, ..., i<axis + rank(I) - 1>]": the index read at a point of the result. */
static void emit_index_read(pk_strbuf *b, const gather_dims *g) {
  pk_strbuf_append(b, "I[");
  for (int d = 0; d < g->ix->ndim; d++) pk_strbuf_printf(b, "%si%d", d ? ", " : "", g->axis + d);
  pk_strbuf_append(b, "]");
}

/* X's indices at a point of the result: its own axes, and the index read on `axis`. */
static void emit_data_index(pk_strbuf *b, const gather_dims *g) {
  for (int d = 0; d < g->x->ndim; d++) {
    if (d) pk_strbuf_append(b, ", ");
    if (d < g->axis) pk_strbuf_printf(b, "i%d", d);
    else if (d == g->axis) emit_index_read(b, g);
    else pk_strbuf_printf(b, "i%d", d - 1 + g->ix->ndim);
  }
}

/* Y = select(0 <= I[..] < K, X[.., I[..], ..], 0.0): the guard names the very index
 * expression of the read, which is what lets the checker prove the read in bounds. */
pk_status pk_op_text_gather(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            pk_strbuf *out) {
  gather_dims g;
  pk_status s = gather_layout(ctx, op, prm, &g);
  if (s != PK_OK) return s;
  pk_op_emit_placeholder(out, "X", g.x->ndim, g.x->shape, g.x->dtype);
  pk_op_emit_placeholder(out, "I", g.ix->ndim, g.ix->shape, g.ix->dtype);
  pk_op_emit_compute_head(out, "Y", g.ndim, g.shape);
  pk_strbuf_append(out, "select(");
  emit_index_read(out, &g);
  pk_strbuf_append(out, " >= 0 && ");
  emit_index_read(out, &g);
  pk_strbuf_printf(out, " < %lld, X[", (long long)g.x->shape[g.axis]);
  emit_data_index(out, &g);
  pk_strbuf_append(out, "], 0.0))\n");
  return PK_OK;
}

/* dX = scatter_add over dY's points of dY into X's element at the gathered index: each
 * element of dY is read once. Repeated indices accumulate (the serial order of the
 * scatter's loops is its race rule); out-of-range ones are dropped by scatter_add. */
pk_status pk_op_grad_gather(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            const pk_te_tensor *y, int input, pk_op_grad *gr, pk_strbuf *out) {
  gather_dims g;
  pk_status s = gather_layout(ctx, op, prm, &g);
  if (s != PK_OK) return s;
  pk_op_grad_add_arg(gr, out, PK_GRAD_ARG_INPUT, 1, "I", prm, y);
  pk_op_grad_add_arg(gr, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_strbuf_append(out, "DX = scatter_add(");
  pk_op_emit_shape(out, g.x->ndim, g.x->shape);
  pk_strbuf_append(out, ", ");
  pk_op_emit_shape(out, g.ndim, g.shape);
  pk_strbuf_append(out, ", ");
  pk_op_emit_axes(out, g.ndim);
  pk_strbuf_append(out, " => [");
  emit_data_index(out, &g);
  pk_strbuf_append(out, "], ");
  pk_op_emit_read_all(out, "DY", g.ndim);
  pk_strbuf_append(out, ")\n");
  (void)input;
  return PK_OK;
}
