/* op_pool.c — max_pool2d and avg_pool2d, NCHW, with stride, per-side padding and dilation.
 * Padding never counts: max pools read the lowest finite value there, avg pools divide by
 * the number of in-bounds elements of each window (count_include_pad=False). Then their
 * gradients: max routes dY to the first maximum of each window, avg spreads dY / count. */
#include <float.h>

#include "op_impl.h"

/* X[...] of a window element, unguarded. */
static void emit_window_x(pk_strbuf *b, const pk_op_window *wh, const pk_op_window *ww) {
  pk_strbuf_append(b, "X[i0, i1, ");
  pk_op_emit_window_index(b, wh);
  pk_strbuf_append(b, ", ");
  pk_op_emit_window_index(b, ww);
  pk_strbuf_append(b, "]");
}

/* X[...] of a window element, or `pad` (a literal) where the element is padding. */
static void emit_window_read(pk_strbuf *b, const pk_op_window *wh, const pk_op_window *ww,
                             double pad) {
  bool guarded = pk_op_emit_window_select(b, wh, ww);
  emit_window_x(b, wh, ww);
  if (guarded) {
    pk_strbuf_append(b, ", ");
    pk_op_emit_float(b, pad);
    pk_strbuf_append(b, ")");
  }
}

/* The divisor of an average: a literal when no window is clipped, else the in-bounds
 * count of the window of output (oh, ow) as a float. */
static void emit_avg_divisor_at(pk_strbuf *b, const pk_op_window *wh, const char *oh,
                                const pk_op_window *ww, const char *ow, pkrt_dtype dtype) {
  bool clipped = pk_op_window_pads_lo(wh) || pk_op_window_pads_hi(wh) ||
                 pk_op_window_pads_lo(ww) || pk_op_window_pads_hi(ww);
  if (!clipped) {
    pk_op_emit_float(b, (double)wh->k * (double)ww->k);
    return;
  }
  pk_strbuf_printf(b, "cast(%s, ", pkrt_dtype_name(dtype));
  pk_op_emit_window_count_at(b, wh, oh);
  pk_strbuf_append(b, " * ");
  pk_op_emit_window_count_at(b, ww, ow);
  pk_strbuf_append(b, ")");
}

/* Checks a pool's own rules and fills its windows (H: axes i2, k0; W: i3, k1). */
static pk_status pool_geometry(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                               pk_op_window *wh, pk_op_window *ww) {
  const pk_op_input *x = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  char sx[PK_OP_SHAPE_CHARS];
  if (x->ndim != 4)
    return pk_op_fail(ctx, op, "input %s must have rank 4 (NCHW)",
                      pk_op_shape_str(sx, x->ndim, x->shape));
  *wh = (pk_op_window){.axis = 2, .kaxis = 0};
  *ww = (pk_op_window){.axis = 3, .kaxis = 1};
  pk_status s;
  if ((s = pk_op_window_init(ctx, op, "H", wh, x->shape[2], a->kernel[0], a->stride[0],
                             a->dilation[0], a->pad[0], a->pad[2])) != PK_OK ||
      (s = pk_op_window_init(ctx, op, "W", ww, x->shape[3], a->kernel[1], a->stride[1],
                             a->dilation[1], a->pad[1], a->pad[3])) != PK_OK ||
      (s = pk_op_window_nonempty(ctx, op, "H", wh)) != PK_OK)
    return s;
  return pk_op_window_nonempty(ctx, op, "W", ww);
}

pk_status pk_op_text_pool2d(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  pk_op_window wh, ww;
  pk_status s = pool_geometry(ctx, op, prm, &wh, &ww);
  if (s != PK_OK) return s;

  int64_t yshape[4] = {x->shape[0], x->shape[1], wh.out, ww.out};
  pk_op_emit_placeholder(out, "X", 4, x->shape, x->dtype);
  pk_op_emit_reduce_axis(out, 0, wh.k);
  pk_op_emit_reduce_axis(out, 1, ww.k);
  pk_op_emit_compute_head(out, "Y", 4, yshape);
  if (op == PK_OP_MAX_POOL2D) {
    pk_strbuf_append(out, "max(");
    emit_window_read(out, &wh, &ww, x->dtype == PKRT_DTYPE_F32 ? -FLT_MAX : -DBL_MAX);
  } else {
    pk_strbuf_append(out, "sum(");
    emit_window_read(out, &wh, &ww, 0.0);
    pk_strbuf_append(out, " / ");
    emit_avg_divisor_at(out, &wh, "i2", &ww, "i3", x->dtype);
  }
  pk_strbuf_append(out, ", k0, k1))\n");
  return PK_OK;
}

/* max: a first stage FI holds, for each output, the row-major position k0 * KW + k1 of the
 * first window element equal to the maximum (a NaN counts as it, as the forward max
 * propagates NaN); then dX[h, w] sums dY over the windows whose position FI reads (h, w).
 * avg: dX[h, w] sums dY / count over the windows holding (h, w).
 * The windows holding input (h, w) are found as in conv2d's dX: window element (k0, k1)
 * of output ((h + pad - k0 * d) / s, ...) when that is whole and in range. (A window whose
 * real elements are all -inf has the padding value as its max, so its dY is dropped.) */
pk_status pk_op_grad_pool2d(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  pk_op_window wh, ww;
  pk_status s = pool_geometry(ctx, op, prm, &wh, &ww);
  if (s != PK_OK) return s;
  bool is_max = op == PK_OP_MAX_POOL2D;
  if (is_max) {
    pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 0, "X", prm, y);
    pk_op_grad_add_arg(g, out, PK_GRAD_ARG_OUTPUT, 0, "Y", prm, y);
  }
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  int64_t npos = wh.k * ww.k; /* positions in a window; also "none found" */

  if (is_max) {
    pk_op_emit_reduce_axis(out, 0, wh.k);
    pk_op_emit_reduce_axis(out, 1, ww.k);
    pk_op_emit_compute_head(out, "FI", 4, y->shape);
    pk_strbuf_append(out, "min(");
    bool guarded = pk_op_emit_window_select(out, &wh, &ww);
    pk_strbuf_append(out, "select(");
    emit_window_x(out, &wh, &ww);
    pk_strbuf_append(out, " == Y[i0, i1, i2, i3] || ");
    emit_window_x(out, &wh, &ww);
    pk_strbuf_append(out, " != ");
    emit_window_x(out, &wh, &ww);
    pk_strbuf_printf(out, ", k0 * %lld + k1, %lld)", (long long)ww.k, (long long)npos);
    if (guarded) pk_strbuf_printf(out, ", %lld)", (long long)npos);
    pk_strbuf_append(out, ", k0, k1))\n");
  }

  /* the output whose window element (k2, k3) reads (i2, i3) */
  pk_strbuf src_h, src_w, guard;
  pk_strbuf_init(&src_h);
  pk_strbuf_init(&src_w);
  pk_strbuf_init(&guard);
  const char *rh = is_max ? "k2" : "k0", *rw = is_max ? "k3" : "k1";
  pk_op_emit_window_source(&src_h, &wh, "i2", rh);
  pk_op_emit_window_source(&src_w, &ww, "i3", rw);
  bool first = true;
  pk_op_emit_window_source_guard(&guard, &wh, "i2", rh, &first);
  pk_op_emit_window_source_guard(&guard, &ww, "i3", rw, &first);
  pk_op_emit_reduce_axis(out, is_max ? 2 : 0, wh.k);
  pk_op_emit_reduce_axis(out, is_max ? 3 : 1, ww.k);
  pk_op_emit_compute_head(out, "DX", 4, x->shape);
  pk_strbuf_append(out, "sum(");
  if (is_max) {
    pk_strbuf_printf(out, "select(%s%sFI[i0, i1, %s, %s] == %s * %lld + %s, ",
                     first ? "" : guard.data, first ? "" : " && ", src_h.data, src_w.data, rh, (long long)ww.k, rw);
  } else if (!first) {
    pk_strbuf_printf(out, "select(%s, ", guard.data);
  }
  pk_strbuf_printf(out, "DY[i0, i1, %s, %s]", src_h.data, src_w.data);
  if (!is_max) {
    pk_strbuf_append(out, " / ");
    emit_avg_divisor_at(out, &wh, src_h.data, &ww, src_w.data, x->dtype);
  }
  if (is_max || !first) pk_strbuf_append(out, ", 0.0)");
  pk_strbuf_printf(out, ", %s, %s))\n", rh, rw);
  pk_strbuf_free(&src_h);
  pk_strbuf_free(&src_w);
  pk_strbuf_free(&guard);
  (void)input;
  return PK_OK;
}
