/* op_conv.c — conv2d, NCHW: stride, per-side padding (a select guard reading 0.0),
 * dilation and groups. Gradients (data and weight) will sit here beside the forward. */
#include "op_impl.h"

/* X[...] of the input element a window position reads, inside its padding guard. */
static void emit_guarded_input(pk_strbuf *b, const pk_op_window *wh, const pk_op_window *ww,
                               int64_t groups, int64_t out_per_group, int64_t in_per_group) {
  bool guarded = pk_op_emit_window_select(b, wh, ww);
  pk_strbuf_append(b, "X[i0, ");
  /* Output channel o belongs to group o / (O / groups), which reads input channels
   * group * (C / groups) + c; "/ 1" and "* 1" are left out (depthwise: "i1 + k0"). */
  if (groups > 1) {
    int64_t og = out_per_group, cg = in_per_group;
    if (og != 1 && cg != 1)
      pk_strbuf_printf(b, "(i1 / %lld) * %lld + ", (long long)og, (long long)cg);
    else if (og != 1) pk_strbuf_printf(b, "i1 / %lld + ", (long long)og);
    else if (cg != 1) pk_strbuf_printf(b, "i1 * %lld + ", (long long)cg);
    else pk_strbuf_append(b, "i1 + ");
  }
  pk_strbuf_append(b, "k0, ");
  pk_op_emit_window_index(b, wh);
  pk_strbuf_append(b, ", ");
  pk_op_emit_window_index(b, ww);
  pk_strbuf_append(b, "]");
  if (guarded) pk_strbuf_append(b, ", 0.0)");
}

pk_status pk_op_text_conv2d(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0], *w = &prm->in[1];
  const pk_op_attrs *a = &prm->attrs;
  char sx[PK_OP_SHAPE_CHARS], sw[PK_OP_SHAPE_CHARS];
  if (x->ndim != 4 || w->ndim != 4)
    return pk_op_fail(ctx, op, "input %s and weight %s must both have rank 4 (NCHW, OIHW)",
                      pk_op_shape_str(sx, x->ndim, x->shape),
                      pk_op_shape_str(sw, w->ndim, w->shape));
  int64_t n = x->shape[0], c = x->shape[1], o = w->shape[0];
  int64_t groups = a->groups ? a->groups : 1;
  if (c % groups != 0)
    return pk_op_fail(ctx, op, "groups %lld does not divide the %lld input channels",
                      (long long)groups, (long long)c);
  if (o % groups != 0)
    return pk_op_fail(ctx, op, "groups %lld does not divide the %lld output channels",
                      (long long)groups, (long long)o);
  if (w->shape[1] != c / groups)
    return pk_op_fail(ctx, op, "weight %s has %lld input channels per group; input %s with "
                      "groups %lld needs %lld", pk_op_shape_str(sw, 4, w->shape),
                      (long long)w->shape[1], pk_op_shape_str(sx, 4, x->shape),
                      (long long)groups, (long long)(c / groups));
  pk_op_window wh = {.axis = 2, .kaxis = 1}, ww = {.axis = 3, .kaxis = 2};
  pk_status s;
  if ((s = pk_op_window_init(ctx, op, "H", &wh, x->shape[2], w->shape[2], a->stride[0],
                             a->dilation[0], a->pad[0], a->pad[2])) != PK_OK ||
      (s = pk_op_window_init(ctx, op, "W", &ww, x->shape[3], w->shape[3], a->stride[1],
                             a->dilation[1], a->pad[1], a->pad[3])) != PK_OK)
    return s;

  int64_t yshape[4] = {n, o, wh.out, ww.out};
  pk_op_emit_placeholder(out, "X", 4, x->shape, x->dtype);
  pk_op_emit_placeholder(out, "W", 4, w->shape, w->dtype);
  pk_op_emit_reduce_axis(out, 0, w->shape[1]);
  pk_op_emit_reduce_axis(out, 1, w->shape[2]);
  pk_op_emit_reduce_axis(out, 2, w->shape[3]);
  pk_op_emit_compute_head(out, "Y", 4, yshape);
  pk_strbuf_append(out, "sum(");
  emit_guarded_input(out, &wh, &ww, groups, o / groups, c / groups);
  pk_strbuf_append(out, " * W[i1, k0, k1, k2], k0, k1, k2))\n");
  return PK_OK;
}
