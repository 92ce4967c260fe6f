/* op_matmul.c — matmul (2-D) and batch_matmul (leading batch dims, broadcast like numpy),
 * either operand optionally transposed; then the gradients dA = dY B^T and dB = A^T dY,
 * summed over the batch dims an operand was broadcast along. */
#include <stdio.h>

#include "op_impl.h"

pk_status pk_op_text_matmul(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            pk_strbuf *out) {
  const pk_op_input *a = &prm->in[0], *b = &prm->in[1];
  bool ta = prm->attrs.trans_a, tb = prm->attrs.trans_b;
  char sa[PK_OP_SHAPE_CHARS], sb[PK_OP_SHAPE_CHARS];
  if (op == PK_OP_MATMUL ? a->ndim != 2 || b->ndim != 2 : a->ndim < 2 || b->ndim < 2)
    return pk_op_fail(ctx, op, "operands %s and %s must have rank %s",
                      pk_op_shape_str(sa, a->ndim, a->shape),
                      pk_op_shape_str(sb, b->ndim, b->shape),
                      op == PK_OP_MATMUL ? "2" : ">= 2");
  /* The matrix dims are the last two; A is (M, K) or, transposed, (K, M). */
  const int64_t *am = a->shape + a->ndim - 2, *bm = b->shape + b->ndim - 2;
  int64_t m = am[ta ? 1 : 0], ka = am[ta ? 0 : 1];
  int64_t kb = bm[tb ? 1 : 0], n = bm[tb ? 0 : 1];
  if (ka != kb)
    return pk_op_fail(ctx, op, "inner dims differ: A %s%s gives K = %lld, B %s%s gives "
                      "K = %lld", pk_op_shape_str(sa, a->ndim, a->shape), ta ? "^T" : "",
                      (long long)ka, pk_op_shape_str(sb, b->ndim, b->shape), tb ? "^T" : "",
                      (long long)kb);
  int64_t yshape[PK_TE_MAX_DIMS];
  int nbatch;
  pk_status s = pk_op_broadcast(ctx, op, a->ndim - 2, a->shape, b->ndim - 2, b->shape, &nbatch,
                                yshape);
  if (s != PK_OK) return s;
  if (nbatch + 2 > PK_TE_MAX_DIMS)
    return pk_op_fail(ctx, op, "result rank %d exceeds %d", nbatch + 2, PK_TE_MAX_DIMS);
  yshape[nbatch] = m;
  yshape[nbatch + 1] = n;
  int im = nbatch, in = nbatch + 1; /* output axes i<im>, i<in> */

  pk_op_emit_placeholder(out, "A", a->ndim, a->shape, a->dtype);
  pk_op_emit_placeholder(out, "B", b->ndim, b->shape, b->dtype);
  pk_op_emit_reduce_axis(out, 0, ka);
  pk_op_emit_compute_head(out, "Y", nbatch + 2, yshape);
  pk_strbuf_append(out, "sum(A[");
  pk_op_emit_bcast_index(out, a->ndim - 2, a->shape, nbatch, 0);
  pk_strbuf_append(out, a->ndim > 2 ? ", " : "");
  if (ta) pk_strbuf_printf(out, "k0, i%d", im);
  else pk_strbuf_printf(out, "i%d, k0", im);
  pk_strbuf_append(out, "] * B[");
  pk_op_emit_bcast_index(out, b->ndim - 2, b->shape, nbatch, 0);
  pk_strbuf_append(out, b->ndim > 2 ? ", " : "");
  if (tb) pk_strbuf_printf(out, "i%d, k0", in);
  else pk_strbuf_printf(out, "k0, i%d", in);
  pk_strbuf_append(out, "], k0))\n");
  return PK_OK;
}

/* dA[.., m, k] = sum over n (k0) and A's broadcast batch dims of dY[.., m, n] * B[.., k, n];
 * dB[.., k, n] = sum over m (k0) and B's broadcast batch dims of A[.., m, k] * dY[.., m, n].
 * The gradient is laid out like its operand, so a transposed operand swaps its axes. */
pk_status pk_op_grad_matmul(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *a = &prm->in[0], *b = &prm->in[1], *x = &prm->in[input];
  const pk_op_input *other = input ? a : b;
  bool ta = prm->attrs.trans_a, tb = prm->attrs.trans_b;
  bool tx = input ? tb : ta; /* the differentiated operand is stored transposed */
  int nbatch = y->ndim - 2;
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 1 - input, input ? "A" : "B", prm, y);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);

  pk_op_unbcast u;
  pk_op_unbcast_init(&u, x->ndim - 2, x->shape, nbatch, y->shape, 1);
  /* k0 runs over the result dim the operand does not have: n for dA, m for dB */
  pk_op_emit_reduce_axis(out, 0, y->shape[input ? nbatch : nbatch + 1]);
  pk_op_unbcast_emit_axes(out, &u);
  /* the operand's own matrix axes: `outer` is the one it shares with Y (m of A, n of B),
   * `inner` the contracted k; A is (M, K) and B (K, N) unless stored transposed */
  int last = x->ndim - 1;
  bool outer_last = input ? !tx : tx;
  char outer[16], inner[16];
  snprintf(outer, sizeof outer, "i%d", outer_last ? last : last - 1);
  snprintf(inner, sizeof inner, "i%d", outer_last ? last - 1 : last);
  pk_op_emit_compute_head(out, input ? "DB" : "DA", x->ndim, x->shape);
  pk_strbuf_append(out, "sum(");
  if (input == 0) {
    pk_strbuf_append(out, "DY[");
    pk_op_unbcast_emit_index(out, &u, nbatch, y->shape, nbatch);
    pk_strbuf_printf(out, "%s%s, k0] * B[", nbatch ? ", " : "", outer);
    pk_op_unbcast_emit_index(out, &u, other->ndim - 2, other->shape, nbatch);
    pk_strbuf_append(out, other->ndim > 2 ? ", " : "");
    if (tb) pk_strbuf_printf(out, "k0, %s]", inner);
    else pk_strbuf_printf(out, "%s, k0]", inner);
  } else {
    pk_strbuf_append(out, "A[");
    pk_op_unbcast_emit_index(out, &u, other->ndim - 2, other->shape, nbatch);
    pk_strbuf_append(out, other->ndim > 2 ? ", " : "");
    if (ta) pk_strbuf_printf(out, "%s, k0]", inner);
    else pk_strbuf_printf(out, "k0, %s]", inner);
    pk_strbuf_append(out, " * DY[");
    pk_op_unbcast_emit_index(out, &u, nbatch, y->shape, nbatch);
    pk_strbuf_printf(out, "%sk0, %s]", nbatch ? ", " : "", outer);
  }
  pk_strbuf_append(out, ", k0");
  pk_op_unbcast_emit_axis_list(out, &u);
  pk_strbuf_append(out, "))\n");
  (void)ctx;
  (void)op;
  return PK_OK;
}
