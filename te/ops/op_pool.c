/* op_pool.c — max_pool2d and avg_pool2d, NCHW, with stride, per-side padding and dilation.
 * Padding never counts: max pools read the lowest finite value there, avg pools divide by
 * the number of in-bounds elements of each window (count_include_pad=False). */
#include <float.h>

#include "op_impl.h"

/* X[...] of a window element, or `pad` (a literal) where the element is padding. */
static void emit_window_read(pk_strbuf *b, const pk_op_window *wh, const pk_op_window *ww,
                             double pad) {
  bool guarded = pk_op_emit_window_select(b, wh, ww);
  pk_strbuf_append(b, "X[i0, i1, ");
  pk_op_emit_window_index(b, wh);
  pk_strbuf_append(b, ", ");
  pk_op_emit_window_index(b, ww);
  pk_strbuf_append(b, "]");
  if (guarded) {
    pk_strbuf_append(b, ", ");
    pk_op_emit_float(b, pad);
    pk_strbuf_append(b, ")");
  }
}

/* The divisor of an average: a literal when no window is clipped, else the in-bounds
 * count of this output element's window as a float. */
static void emit_avg_divisor(pk_strbuf *b, const pk_op_window *wh, const pk_op_window *ww,
                             pkrt_dtype dtype) {
  bool clipped = pk_op_window_pads_lo(wh) || pk_op_window_pads_hi(wh) ||
                 pk_op_window_pads_lo(ww) || pk_op_window_pads_hi(ww);
  if (!clipped) {
    pk_op_emit_float(b, (double)wh->k * (double)ww->k);
    return;
  }
  pk_strbuf_printf(b, "cast(%s, ", pkrt_dtype_name(dtype));
  pk_op_emit_window_count(b, wh);
  pk_strbuf_append(b, " * ");
  pk_op_emit_window_count(b, ww);
  pk_strbuf_append(b, ")");
}

pk_status pk_op_text_pool2d(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  char sx[PK_OP_SHAPE_CHARS];
  if (x->ndim != 4)
    return pk_op_fail(ctx, op, "input %s must have rank 4 (NCHW)",
                      pk_op_shape_str(sx, x->ndim, x->shape));
  pk_op_window wh = {.axis = 2, .kaxis = 0}, ww = {.axis = 3, .kaxis = 1};
  pk_status s;
  if ((s = pk_op_window_init(ctx, op, "H", &wh, x->shape[2], a->kernel[0], a->stride[0],
                             a->dilation[0], a->pad[0], a->pad[2])) != PK_OK ||
      (s = pk_op_window_init(ctx, op, "W", &ww, x->shape[3], a->kernel[1], a->stride[1],
                             a->dilation[1], a->pad[1], a->pad[3])) != PK_OK ||
      (s = pk_op_window_nonempty(ctx, op, "H", &wh)) != PK_OK ||
      (s = pk_op_window_nonempty(ctx, op, "W", &ww)) != PK_OK)
    return s;

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
    emit_avg_divisor(out, &wh, &ww, x->dtype);
  }
  pk_strbuf_append(out, ", k0, k1))\n");
  return PK_OK;
}
