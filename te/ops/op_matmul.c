/* op_matmul.c — matmul (2-D) and batch_matmul (leading batch dims, broadcast like numpy),
 * either operand optionally transposed. Gradients (dA = dY B^T, dB = A^T dY) will sit here. */
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
