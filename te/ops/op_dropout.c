/* op_dropout.c — dropout with a mask that is never stored: each element's keep bit is
 * hash(seed, step, flat index) >= T (the TE hash intrinsic, docs/te.md), so the gradient
 * regenerates exactly the forward mask from the same (seed, step) tensor S. A negative
 * step means evaluation (model.eval()): every element passes unscaled, so one compiled
 * forward kernel serves training and evaluation steps. */
#include <math.h>
#include <stdio.h>

#include "op_impl.h"

/* T = floor(p * 2^53): an element is kept when hash >= T, with probability 1 - T / 2^53
 * (p * 2^53 is exact in a double, so this is p to double precision). */
static int64_t drop_threshold(double p) { return (int64_t)floor(ldexp(p, 53)); }

/* The element's row-major flat index over the compute's axes: "i0 * 33 + i1". */
static void emit_flat_index(pk_strbuf *b, int ndim, const int64_t *shape) {
  int64_t stride = 1;
  int64_t strides[PK_TE_MAX_DIMS];
  for (int d = ndim - 1; d >= 0; d--) strides[d] = stride, stride *= shape[d];
  bool first = true;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 1) continue;
    pk_strbuf_printf(b, "%si%d", first ? "" : " + ", d);
    if (strides[d] != 1) pk_strbuf_printf(b, " * %lld", (long long)strides[d]);
    first = false;
  }
  if (first) pk_strbuf_append(b, "0");
}

/* "select(S[1] < 0, <src>[i..], select(hash(S[0], S[1], <flat>) >= T, <src>[i..] * scale,
 * 0.0))", or the plain read when p = 0 (every element kept, scale 1: the identity, bit for
 * bit). The gradient uses the same text: it only runs in training steps. */
static void emit_masked(pk_strbuf *b, const pk_op_params *prm, const char *src) {
  const pk_op_input *x = &prm->in[0];
  double p = prm->attrs.drop_p;
  if (p == 0.0) {
    pk_op_emit_read_all(b, src, x->ndim);
    return;
  }
  pk_strbuf_append(b, "select(S[1] < 0, ");
  pk_op_emit_read_all(b, src, x->ndim);
  pk_strbuf_append(b, ", select(hash(S[0], S[1], ");
  emit_flat_index(b, x->ndim, x->shape);
  pk_strbuf_printf(b, ") >= %lld, ", (long long)drop_threshold(p));
  pk_op_emit_read_all(b, src, x->ndim);
  pk_strbuf_append(b, " * ");
  pk_op_emit_float(b, 1.0 / (1.0 - p));
  pk_strbuf_append(b, ", 0.0))");
}

static pk_status check_seed(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm) {
  const pk_op_input *s = &prm->in[1];
  if (s->ndim != 1 || s->shape[0] != 2)
    return pk_op_fail(ctx, op, "the seed tensor S must have shape (2,) holding (seed, step)");
  return PK_OK;
}

pk_status pk_op_text_dropout(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                             pk_strbuf *out) {
  pk_status s = check_seed(ctx, op, prm);
  if (s != PK_OK) return s;
  const pk_op_input *x = &prm->in[0];
  pk_op_emit_placeholder(out, "X", x->ndim, x->shape, x->dtype);
  pk_op_emit_placeholder(out, "S", 1, prm->in[1].shape, prm->in[1].dtype);
  pk_op_emit_compute_head(out, "Y", x->ndim, x->shape);
  emit_masked(out, prm, "X");
  pk_strbuf_append(out, ")\n");
  return PK_OK;
}

/* dX = dY where the forward kept the element, times the same scale: reads S and dY only. */
pk_status pk_op_grad_dropout(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                             const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  pk_status s = check_seed(ctx, op, prm);
  if (s != PK_OK) return s;
  const pk_op_input *x = &prm->in[0];
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 1, "S", prm, y);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
  emit_masked(out, prm, "DY");
  pk_strbuf_append(out, ")\n");
  (void)input;
  return PK_OK;
}
