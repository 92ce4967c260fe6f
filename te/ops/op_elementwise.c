/* op_elementwise.c — injective ops: add/sub/mul/div with numpy broadcasting, and the
 * activations relu, sigmoid, tanh, gelu (erf form). Their gradients will sit here. */
#include <math.h>

#include "op_impl.h"

pk_status pk_op_text_binary(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            pk_strbuf *out) {
  const pk_op_input *a = &prm->in[0], *b = &prm->in[1];
  int64_t yshape[PK_TE_MAX_DIMS];
  int ndim;
  pk_status s = pk_op_broadcast(ctx, op, a->ndim, a->shape, b->ndim, b->shape, &ndim, yshape);
  if (s != PK_OK) return s;
  const char *sym = op == PK_OP_ADD ? "+" : op == PK_OP_SUB ? "-" : op == PK_OP_MUL ? "*" : "/";
  pk_op_emit_placeholder(out, "A", a->ndim, a->shape, a->dtype);
  pk_op_emit_placeholder(out, "B", b->ndim, b->shape, b->dtype);
  pk_op_emit_compute_head(out, "Y", ndim, yshape);
  pk_strbuf_append(out, "A[");
  pk_op_emit_bcast_index(out, a->ndim, a->shape, ndim, 0);
  pk_strbuf_printf(out, "] %s B[", sym);
  pk_op_emit_bcast_index(out, b->ndim, b->shape, ndim, 0);
  pk_strbuf_append(out, "])\n");
  return PK_OK;
}

pk_status pk_op_text_unary(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                           pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  pk_strbuf xr; /* "X[i0, i1]" */
  pk_strbuf_init(&xr);
  pk_strbuf_append(&xr, "X[");
  pk_op_emit_bcast_index(&xr, x->ndim, x->shape, x->ndim, 0);
  pk_strbuf_append(&xr, "]");
  pk_op_emit_placeholder(out, "X", x->ndim, x->shape, x->dtype);
  pk_op_emit_compute_head(out, "Y", x->ndim, x->shape);
  switch (op) {
  case PK_OP_RELU: pk_strbuf_printf(out, "max(%s, 0.0)", xr.data); break;
  case PK_OP_SIGMOID: pk_strbuf_printf(out, "sigmoid(%s)", xr.data); break;
  case PK_OP_TANH: pk_strbuf_printf(out, "tanh(%s)", xr.data); break;
  default: /* PK_OP_GELU: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) */
    pk_strbuf_printf(out, "0.5 * %s * (1.0 + erf(%s * ", xr.data, xr.data);
    pk_op_emit_float(out, 1.0 / sqrt(2.0));
    pk_strbuf_append(out, "))");
    break;
  }
  pk_strbuf_append(out, ")\n");
  pk_strbuf_free(&xr);
  (void)ctx;
  return PK_OK;
}
