/* op_conv.c — conv2d, NCHW: stride, per-side padding (a select guard reading 0.0),
 * dilation and groups; then its gradients, dX (a transposed convolution) and dW. */
#include "op_impl.h"

/* Checks conv2d's own rules and fills the windows (H: output axis i2, reduce axis k1;
 * W: i3, k2 — the forward's names) and the group count. */
static pk_status conv_geometry(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                               pk_op_window *wh, pk_op_window *ww, int64_t *groups_out) {
  const pk_op_input *x = &prm->in[0], *w = &prm->in[1];
  const pk_op_attrs *a = &prm->attrs;
  char sx[PK_OP_SHAPE_CHARS], sw[PK_OP_SHAPE_CHARS];
  if (x->ndim != 4 || w->ndim != 4)
    return pk_op_fail(ctx, op, "input %s and weight %s must both have rank 4 (NCHW, OIHW)",
                      pk_op_shape_str(sx, x->ndim, x->shape),
                      pk_op_shape_str(sw, w->ndim, w->shape));
  int64_t c = x->shape[1], o = w->shape[0];
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
  *wh = (pk_op_window){.axis = 2, .kaxis = 1};
  *ww = (pk_op_window){.axis = 3, .kaxis = 2};
  *groups_out = groups;
  pk_status s;
  if ((s = pk_op_window_init(ctx, op, "H", wh, x->shape[2], w->shape[2], a->stride[0],
                             a->dilation[0], a->pad[0], a->pad[2])) != PK_OK)
    return s;
  return pk_op_window_init(ctx, op, "W", ww, x->shape[3], w->shape[3], a->stride[1],
                           a->dilation[1], a->pad[1], a->pad[3]);
}

/* The first channel of the group of channel `ch` in the other tensor: group = ch / per,
 * times other_per; "* 1" and "/ 1" are left out (depthwise: "i1"). */
static void emit_group_base(pk_strbuf *b, const char *ch, int64_t per, int64_t other_per) {
  if (per != 1 && other_per != 1)
    pk_strbuf_printf(b, "(%s / %lld) * %lld", ch, (long long)per, (long long)other_per);
  else if (per != 1) pk_strbuf_printf(b, "%s / %lld", ch, (long long)per);
  else if (other_per != 1) pk_strbuf_printf(b, "%s * %lld", ch, (long long)other_per);
  else pk_strbuf_append(b, ch);
}

/* X[batch, channel, ...] of the input element that window element (rh, rw) of output
 * (oh, ow) reads, inside its padding guard; output channel `o` reads input channel `c` of
 * its group (each name is an axis of the caller's compute). */
static void emit_guarded_input(pk_strbuf *b, const pk_op_window *wh, const pk_op_window *ww,
                               int64_t groups, int64_t out_per_group, int64_t in_per_group,
                               const char *batch, const char *o, const char *c,
                               const char *oh, const char *rh, const char *ow,
                               const char *rw) {
  bool guarded = pk_op_emit_window_select_at(b, wh, oh, rh, ww, ow, rw);
  pk_strbuf_printf(b, "X[%s, ", batch);
  /* Output channel o belongs to group o / (O / groups), which reads input channels
   * group * (C / groups) + c. */
  if (groups > 1) {
    emit_group_base(b, o, out_per_group, in_per_group);
    pk_strbuf_append(b, " + ");
  }
  pk_strbuf_printf(b, "%s, ", c);
  pk_op_emit_window_index_at(b, wh, oh, rh);
  pk_strbuf_append(b, ", ");
  pk_op_emit_window_index_at(b, ww, ow, rw);
  pk_strbuf_append(b, "]");
  if (guarded) pk_strbuf_append(b, ", 0.0)");
}

pk_status pk_op_text_conv2d(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0], *w = &prm->in[1];
  pk_op_window wh, ww;
  int64_t groups;
  pk_status s = conv_geometry(ctx, op, prm, &wh, &ww, &groups);
  if (s != PK_OK) return s;
  int64_t n = x->shape[0], c = x->shape[1], o = w->shape[0];
  int64_t yshape[4] = {n, o, wh.out, ww.out};
  pk_op_emit_placeholder(out, "X", 4, x->shape, x->dtype);
  pk_op_emit_placeholder(out, "W", 4, w->shape, w->dtype);
  pk_op_emit_reduce_axis(out, 0, w->shape[1]);
  pk_op_emit_reduce_axis(out, 1, w->shape[2]);
  pk_op_emit_reduce_axis(out, 2, w->shape[3]);
  pk_op_emit_compute_head(out, "Y", 4, yshape);
  pk_strbuf_append(out, "sum(");
  emit_guarded_input(out, &wh, &ww, groups, o / groups, c / groups, "i0", "i1", "k0", "i2",
                     "k1", "i3", "k2");
  pk_strbuf_append(out, " * W[i1, k0, k1, k2], k0, k1, k2))\n");
  return PK_OK;
}

/* dX[n, c, h, w] = sum over the output channels o of c's group (k0) and window elements
 * (k1, k2) of dY[n, o, oh, ow] * W[o, c mod C/g, k1, k2], where (oh, ow) is the output
 * whose window element (k1, k2) reads (h, w): oh = (h + pad - k1 * d) / s when that is
 * whole and in range (guards; rows no window reads get 0).
 * dW[o, c, r, q] = sum over n, oh, ow (k0, k1, k2) of X at (r, q)'s read * dY[n, o, oh, ow]:
 * the forward's sum with the roles of window element and output position swapped. */
pk_status pk_op_grad_conv2d(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0], *w = &prm->in[1];
  pk_op_window wh, ww;
  int64_t groups;
  pk_status s = conv_geometry(ctx, op, prm, &wh, &ww, &groups);
  if (s != PK_OK) return s;
  int64_t og = w->shape[0] / groups, cg = x->shape[1] / groups;
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 1 - input, input ? "X" : "W", prm, y);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);

  if (input == 1) {
    pk_op_emit_reduce_axis(out, 0, y->shape[0]);
    pk_op_emit_reduce_axis(out, 1, y->shape[2]);
    pk_op_emit_reduce_axis(out, 2, y->shape[3]);
    pk_op_emit_compute_head(out, "DW", 4, w->shape);
    pk_strbuf_append(out, "sum(");
    emit_guarded_input(out, &wh, &ww, groups, og, cg, "k0", "i0", "i1", "k1", "i2", "k2",
                       "i3");
    pk_strbuf_append(out, " * DY[k0, i0, k1, k2], k0, k1, k2))\n");
    return PK_OK;
  }

  pk_strbuf oc; /* the output channel: group base + k0 */
  pk_strbuf_init(&oc);
  if (groups > 1) {
    emit_group_base(&oc, "i1", cg, og);
    pk_strbuf_append(&oc, " + ");
  }
  pk_strbuf_append(&oc, "k0");
  pk_op_emit_reduce_axis(out, 0, og);
  pk_op_emit_reduce_axis(out, 1, w->shape[2]);
  pk_op_emit_reduce_axis(out, 2, w->shape[3]);
  pk_op_emit_compute_head(out, "DX", 4, x->shape);
  pk_strbuf_append(out, "sum(");
  pk_strbuf guard;
  pk_strbuf_init(&guard);
  bool first = true;
  pk_op_emit_window_source_guard(&guard, &wh, "i2", "k1", &first);
  pk_op_emit_window_source_guard(&guard, &ww, "i3", "k2", &first);
  if (!first) pk_strbuf_printf(out, "select(%s, ", guard.data);
  pk_strbuf_printf(out, "DY[i0, %s, ", oc.data);
  pk_op_emit_window_source(out, &wh, "i2", "k1");
  pk_strbuf_append(out, ", ");
  pk_op_emit_window_source(out, &ww, "i3", "k2");
  pk_strbuf_printf(out, "] * W[%s, ", oc.data);
  if (groups == 1) pk_strbuf_append(out, "i1");
  else if (cg == 1) pk_strbuf_append(out, "0");
  else pk_strbuf_printf(out, "i1 %% %lld", (long long)cg);
  pk_strbuf_append(out, ", k1, k2]");
  if (!first) pk_strbuf_append(out, ", 0.0)");
  pk_strbuf_append(out, ", k0, k1, k2))\n");
  pk_strbuf_free(&guard);
  pk_strbuf_free(&oc);
  return PK_OK;
}
