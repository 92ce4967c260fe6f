/* op_build.c — the front door of the operator library: checks what every op shares, then
 * has the op's builder write TE text, which goes through the one parser and checker. */
#include <math.h>
#include <string.h>

#include "op_impl.h"

/* dtype: the float dtype of the op's float inputs (the first one's). */
static pk_status check_input(pk_ctx *ctx, pk_op_kind op, int i, const pk_op_input *in,
                             pkrt_dtype dtype) {
  if (in->ndim < 1 || in->ndim > PK_TE_MAX_DIMS)
    return pk_op_fail(ctx, op, "input %d has rank %d (must be 1..%d)", i, in->ndim,
                      PK_TE_MAX_DIMS);
  for (int d = 0; d < in->ndim; d++)
    if (in->shape[d] < 1 || in->shape[d] > PK_OP_MAX_EXTENT)
      return pk_op_fail(ctx, op, "input %d dim %d has extent %lld (must be 1..%lld)", i, d,
                        (long long)in->shape[d], (long long)PK_OP_MAX_EXTENT);
  if (pk_op_flags(op) & PK_OPF_INT_INPUT(i)) {
    if (in->dtype != PKRT_DTYPE_I32 && in->dtype != PKRT_DTYPE_I64)
      return pk_op_fail(ctx, op, "input %d has dtype %s (must be i32 or i64: it holds "
                        "integers)", i, pkrt_dtype_name(in->dtype));
    return PK_OK;
  }
  if (in->dtype != PKRT_DTYPE_F32 && in->dtype != PKRT_DTYPE_F64)
    return pk_op_fail(ctx, op, "input %d has dtype %s (must be f32 or f64)", i,
                      pkrt_dtype_name(in->dtype));
  if (in->dtype != dtype)
    return pk_op_fail(ctx, op, "input %d has dtype %s but the first float input has %s", i,
                      pkrt_dtype_name(in->dtype), pkrt_dtype_name(dtype));
  return PK_OK;
}

static pk_status check_attr(pk_ctx *ctx, pk_op_kind op, const char *what, int64_t v) {
  if (v < 0 || v > PK_OP_MAX_EXTENT)
    return pk_op_fail(ctx, op, "%s %lld out of range (0..%lld)", what, (long long)v,
                      (long long)PK_OP_MAX_EXTENT);
  return PK_OK;
}

/* A hyper-parameter: finite and in [lo, hi) (hi = INFINITY: no upper bound). */
static pk_status check_real(pk_ctx *ctx, pk_op_kind op, const char *what, double v, double lo,
                            double hi) {
  if (!isfinite(v) || v < lo || v >= hi)
    return pk_op_fail(ctx, op, "%s %g out of range (must be finite, >= %g%s)", what, v, lo,
                      hi == 1.0 ? " and < 1" : "");
  return PK_OK;
}

static pk_status check_common(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm) {
  if ((unsigned)op >= PK_OP_COUNT_)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "unknown operator %d", (int)op);
  int lo, hi;
  pk_op_input_range(op, &lo, &hi);
  if (prm->ninputs < lo || prm->ninputs > hi)
    return lo == hi ? pk_op_fail(ctx, op, "takes %d input%s, got %d", hi, hi == 1 ? "" : "s",
                                 prm->ninputs)
                    : pk_op_fail(ctx, op, "takes %d to %d inputs, got %d", lo, hi, prm->ninputs);
  pkrt_dtype fdt = PKRT_DTYPE_F32; /* the first float input's dtype */
  for (int i = prm->ninputs - 1; i >= 0; i--)
    if (!(pk_op_flags(op) & PK_OPF_INT_INPUT(i))) fdt = prm->in[i].dtype;
  pk_status s;
  for (int i = 0; i < prm->ninputs; i++)
    if ((s = check_input(ctx, op, i, &prm->in[i], fdt)) != PK_OK) return s;
  const pk_op_attrs *a = &prm->attrs;
  for (int i = 0; i < 2; i++)
    if ((s = check_attr(ctx, op, "kernel", a->kernel[i])) != PK_OK ||
        (s = check_attr(ctx, op, "stride", a->stride[i])) != PK_OK ||
        (s = check_attr(ctx, op, "dilation", a->dilation[i])) != PK_OK)
      return s;
  for (int i = 0; i < 4; i++)
    if ((s = check_attr(ctx, op, "padding", a->pad[i])) != PK_OK) return s;
  if ((s = check_attr(ctx, op, "groups", a->groups)) != PK_OK ||
      (s = check_attr(ctx, op, "slice_start", a->slice_start)) != PK_OK ||
      (s = check_attr(ctx, op, "slice_len", a->slice_len)) != PK_OK ||
      (s = check_attr(ctx, op, "new_ndim", a->new_ndim)) != PK_OK)
    return s;
  if (a->new_ndim > PK_TE_MAX_DIMS)
    return pk_op_fail(ctx, op, "new_ndim %d out of range (0..%d)", a->new_ndim, PK_TE_MAX_DIMS);
  /* zero means the default for every one of these, so zero always passes */
  if ((s = check_real(ctx, op, "momentum", a->momentum, 0, INFINITY)) != PK_OK ||
      (s = check_real(ctx, op, "weight_decay", a->weight_decay, 0, INFINITY)) != PK_OK ||
      (s = check_real(ctx, op, "beta1", a->beta1, 0, 1)) != PK_OK ||
      (s = check_real(ctx, op, "beta2", a->beta2, 0, 1)) != PK_OK ||
      (s = check_real(ctx, op, "eps", a->eps, 0, INFINITY)) != PK_OK ||
      (s = check_real(ctx, op, "clip_norm", a->clip_norm, 0, INFINITY)) != PK_OK ||
      (s = check_real(ctx, op, "alpha", a->alpha, 0, INFINITY)) != PK_OK ||
      (s = check_real(ctx, op, "p", a->drop_p, 0, 1)) != PK_OK)
    return s;
  /* clip's bounds may be negative, so check_real's [lo, hi) does not fit them */
  if (!isfinite(a->clip_min) || !isfinite(a->clip_max) || a->clip_min > a->clip_max)
    return pk_op_fail(ctx, op, "clip range [%g, %g] must be finite with min <= max",
                      a->clip_min, a->clip_max);
  /* shape and data movement: perm's entries and pads' length depend on the input's rank,
   * so transpose and pad check those */
  if ((s = check_attr(ctx, op, "slice_step", a->slice_step)) != PK_OK) return s;
  for (int i = 0; i < 2 * PK_TE_MAX_DIMS; i++)
    if ((s = check_attr(ctx, op, "pads", a->pads[i])) != PK_OK) return s;
  if (a->nperm < 0 || a->nperm > PK_TE_MAX_DIMS)
    return pk_op_fail(ctx, op, "nperm %d out of range (0..%d)", a->nperm, PK_TE_MAX_DIMS);
  if (!isfinite(a->value)) return pk_op_fail(ctx, op, "value %g must be finite", a->value);
  return PK_OK;
}

pk_status pk_op_text(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, char **text) {
  *text = NULL;
  pk_status s = check_common(ctx, op, prm);
  if (s != PK_OK) return s;
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_printf(&b, "# %s\n", pk_op_name(op));
  s = pk_op_text_builder(op)(ctx, op, prm, &b);
  if (s != PK_OK) {
    pk_strbuf_free(&b);
    return s;
  }
  *text = pk_strbuf_finish(ctx, &b);
  return PK_OK;
}

pk_status pk_op_build(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                      pk_te_program **out) {
  *out = NULL;
  char *text;
  pk_status s = pk_op_text(ctx, op, prm, &text);
  if (s != PK_OK) return s;
  /* A parse or check failure here is a builder bug, but it is reported like any other
   * error: the message points into the op's text ("op:conv2d:4:12: ..."). */
  return pk_te_parse(ctx, text, strlen(text), pk_sprintf(ctx, "op:%s", pk_op_name(op)), out);
}
