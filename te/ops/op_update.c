/* op_update.c — optimizer updates as element-wise ops over a weight: sgd_update (PyTorch
 * SGD with momentum and L2 weight decay) and adamw_update (Adam / AdamW). Hyper-parameters
 * that never change are literals in the TE; the learning rate, Adam's bias corrections and
 * the accumulation micro-step arrive each step in H. Optional clipping of the gradient's
 * L2 norm is a first stage. Also the ops around them: grad_accumulate (gradient
 * accumulation) and clip_grad_norm (global-norm clipping). */
#include "op_impl.h"

/* Checks W, G, M (and V) share one shape and H is (4,). */
static pk_status check_update_inputs(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm) {
  static const char *const names[] = {"weight", "gradient", "first moment", "second moment"};
  const pk_op_input *w = &prm->in[0], *h = &prm->in[prm->ninputs - 1];
  char sw[PK_OP_SHAPE_CHARS], si[PK_OP_SHAPE_CHARS];
  for (int i = 1; i < prm->ninputs - 1; i++) {
    const pk_op_input *in = &prm->in[i];
    bool same = in->ndim == w->ndim;
    for (int d = 0; same && d < w->ndim; d++) same = in->shape[d] == w->shape[d];
    if (!same)
      return pk_op_fail(ctx, op, "%s %s must have the weight's shape %s", names[i],
                        pk_op_shape_str(si, in->ndim, in->shape),
                        pk_op_shape_str(sw, w->ndim, w->shape));
  }
  if (h->ndim != 1 || h->shape[0] != 4)
    return pk_op_fail(ctx, op, "hyper-parameter input %s must have shape (4,) (lr, 1 - beta1^t, "
                      "1 - beta2^t, micro-step)", pk_op_shape_str(si, h->ndim, h->shape));
  if (prm->attrs.accum_steps < 0 || prm->attrs.accum_steps > PK_OP_MAX_EXTENT)
    return pk_op_fail(ctx, op, "accum_steps %lld out of range (0..%lld)",
                      (long long)prm->attrs.accum_steps, (long long)PK_OP_MAX_EXTENT);
  return PK_OK;
}

/* "N2 = compute((1,), (i0) => sum(G[k0, k1] * G[k0, k1], k0, k1))": the squared L2 norm of
 * the whole gradient, read first (the update then runs in place element by element). */
static void emit_norm_stage(pk_strbuf *out, const pk_op_input *g) {
  int64_t one[1] = {1};
  pk_strbuf gk;
  pk_strbuf_init(&gk);
  pk_strbuf_append(&gk, "G[");
  for (int d = 0; d < g->ndim; d++) pk_strbuf_printf(&gk, "%sk%d", d ? ", " : "", d);
  pk_strbuf_append(&gk, "]");
  for (int d = 0; d < g->ndim; d++) pk_op_emit_reduce_axis(out, d, g->shape[d]);
  pk_op_emit_compute_head(out, "N2", 1, one);
  pk_strbuf_printf(out, "sum(%s * %s", gk.data, gk.data);
  for (int d = 0; d < g->ndim; d++) pk_strbuf_printf(out, ", k%d", d);
  pk_strbuf_append(out, "))\n");
  pk_strbuf_free(&gk);
}

/* The gradient as the update uses it, parenthesised when compound:
 * G * min(1, c / (|G| + 1e-6)) when clipping, plus wd * W when weight decay is L2. */
static void emit_effective_grad(pk_strbuf *b, const pk_op_attrs *a, int ndim, bool l2) {
  bool compound = a->clip_norm > 0 || (l2 && a->weight_decay != 0);
  if (compound) pk_strbuf_append(b, "(");
  pk_op_emit_read_all(b, "G", ndim);
  if (a->clip_norm > 0) {
    pk_strbuf_append(b, " * min(1.0, ");
    pk_op_emit_float(b, a->clip_norm);
    pk_strbuf_append(b, " / (sqrt(N2[0]) + 1e-06))");
  }
  if (l2 && a->weight_decay != 0) {
    pk_strbuf_append(b, " + ");
    pk_op_emit_float(b, a->weight_decay);
    pk_strbuf_append(b, " * ");
    pk_op_emit_read_all(b, "W", ndim);
  }
  if (compound) pk_strbuf_append(b, ")");
}

static void emit_update_inputs(pk_strbuf *out, const pk_op_params *prm) {
  static const char *const sgd[] = {"W", "G", "M", "H"}, *const adam[] = {"W", "G", "M", "V", "H"};
  const char *const *names = prm->ninputs == 4 ? sgd : adam;
  for (int i = 0; i < prm->ninputs; i++)
    pk_op_emit_placeholder(out, names[i], prm->in[i].ndim, prm->in[i].shape, prm->in[i].dtype);
}

/* Gradient accumulation: with accum_steps k > 1 an output is "select(H[3] > k - 1.5,
 * <new value>, <old value>)", so M, V and W change only on the group's last micro-step
 * (H[3] = k - 1) and the in-place update leaves them as they were otherwise. */
static bool emit_apply_open(pk_strbuf *out, const pk_op_attrs *a) {
  if (a->accum_steps <= 1) return false;
  pk_strbuf_append(out, "select(H[3] > ");
  pk_op_emit_float(out, (double)a->accum_steps - 1.5);
  pk_strbuf_append(out, ", ");
  return true;
}

static void emit_apply_close(pk_strbuf *out, bool open, const char *old, int ndim) {
  if (!open) return;
  pk_strbuf_append(out, ", ");
  pk_op_emit_read_all(out, old, ndim);
  pk_strbuf_append(out, ")");
}

/* M_new = momentum * M + g;  W_new = W - lr * M_new. */
pk_status pk_op_text_sgd(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                         pk_strbuf *out) {
  pk_status s = check_update_inputs(ctx, op, prm);
  if (s != PK_OK) return s;
  const pk_op_input *w = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  emit_update_inputs(out, prm);
  if (a->clip_norm > 0) emit_norm_stage(out, &prm->in[1]);
  pk_op_emit_compute_head(out, "M_new", w->ndim, w->shape);
  bool guard = emit_apply_open(out, a);
  if (a->momentum != 0) {
    pk_op_emit_float(out, a->momentum);
    pk_strbuf_append(out, " * ");
    pk_op_emit_read_all(out, "M", w->ndim);
    pk_strbuf_append(out, " + ");
  }
  emit_effective_grad(out, a, w->ndim, true);
  emit_apply_close(out, guard, "M", w->ndim);
  pk_strbuf_append(out, ")\n");
  pk_op_emit_compute_head(out, "W_new", w->ndim, w->shape);
  guard = emit_apply_open(out, a);
  pk_op_emit_read_all(out, "W", w->ndim);
  pk_strbuf_append(out, " - H[0] * ");
  pk_op_emit_read_all(out, "M_new", w->ndim);
  emit_apply_close(out, guard, "W", w->ndim);
  pk_strbuf_append(out, ")\n");
  return PK_OK;
}

/* M_new = b1 M + (1 - b1) g;  V_new = b2 V + (1 - b2) g^2;
 * W_new = W1 - lr * (M_new / H[1]) / (sqrt(V_new / H[2]) + eps), W1 = W * (1 - lr * wd)
 * for AdamW (decoupled), else W with wd * W in g. */
pk_status pk_op_text_adamw(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                           pk_strbuf *out) {
  pk_status s = check_update_inputs(ctx, op, prm);
  if (s != PK_OK) return s;
  const pk_op_input *w = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  double b1 = a->beta1 ? a->beta1 : 0.9, b2 = a->beta2 ? a->beta2 : 0.999;
  double eps = a->eps ? a->eps : 1e-8;
  bool l2 = !a->decoupled;
  emit_update_inputs(out, prm);
  if (a->clip_norm > 0) emit_norm_stage(out, &prm->in[1]);

  pk_op_emit_compute_head(out, "M_new", w->ndim, w->shape);
  bool guard = emit_apply_open(out, a);
  pk_op_emit_float(out, b1);
  pk_strbuf_append(out, " * ");
  pk_op_emit_read_all(out, "M", w->ndim);
  pk_strbuf_append(out, " + ");
  pk_op_emit_float(out, 1.0 - b1);
  pk_strbuf_append(out, " * ");
  emit_effective_grad(out, a, w->ndim, l2);
  emit_apply_close(out, guard, "M", w->ndim);
  pk_strbuf_append(out, ")\n");

  pk_op_emit_compute_head(out, "V_new", w->ndim, w->shape);
  guard = emit_apply_open(out, a);
  pk_op_emit_float(out, b2);
  pk_strbuf_append(out, " * ");
  pk_op_emit_read_all(out, "V", w->ndim);
  pk_strbuf_append(out, " + ");
  pk_op_emit_float(out, 1.0 - b2);
  pk_strbuf_append(out, " * ");
  emit_effective_grad(out, a, w->ndim, l2);
  pk_strbuf_append(out, " * ");
  emit_effective_grad(out, a, w->ndim, l2);
  emit_apply_close(out, guard, "V", w->ndim);
  pk_strbuf_append(out, ")\n");

  pk_op_emit_compute_head(out, "W_new", w->ndim, w->shape);
  guard = emit_apply_open(out, a);
  pk_op_emit_read_all(out, "W", w->ndim);
  if (!l2 && a->weight_decay != 0) {
    pk_strbuf_append(out, " * (1.0 - H[0] * ");
    pk_op_emit_float(out, a->weight_decay);
    pk_strbuf_append(out, ")");
  }
  pk_strbuf_append(out, " - H[0] * (");
  pk_op_emit_read_all(out, "M_new", w->ndim);
  pk_strbuf_append(out, " / H[1]) / (sqrt(");
  pk_op_emit_read_all(out, "V_new", w->ndim);
  pk_strbuf_append(out, " / H[2]) + ");
  pk_op_emit_float(out, eps);
  pk_strbuf_append(out, ")");
  emit_apply_close(out, guard, "W", w->ndim);
  pk_strbuf_append(out, ")\n");
  return PK_OK;
}

/* ---- optimizer: gradient accumulation and global-norm clipping ---- */

static pk_status check_accum(pk_ctx *ctx, pk_op_kind op, const pk_op_attrs *a) {
  if (a->accum_steps < 0 || a->accum_steps > PK_OP_MAX_EXTENT)
    return pk_op_fail(ctx, op, "accum_steps %lld out of range (0..%lld)",
                      (long long)a->accum_steps, (long long)PK_OP_MAX_EXTENT);
  return PK_OK;
}

/* A' = select(H[3] > 0.5, A, 0.0) + G / k: the first micro-step of a group (H[3] = 0)
 * restarts the sum without reading A (whatever it holds). */
pk_status pk_op_text_grad_accumulate(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                     pk_strbuf *out) {
  static const char *const names[] = {"accumulator", "gradient"};
  const pk_op_input *acc = &prm->in[0], *h = &prm->in[2];
  char sa[PK_OP_SHAPE_CHARS], si[PK_OP_SHAPE_CHARS];
  pk_status s = check_accum(ctx, op, &prm->attrs);
  if (s != PK_OK) return s;
  bool same = prm->in[1].ndim == acc->ndim;
  for (int d = 0; same && d < acc->ndim; d++) same = prm->in[1].shape[d] == acc->shape[d];
  if (!same)
    return pk_op_fail(ctx, op, "%s %s must have the %s's shape %s", names[1],
                      pk_op_shape_str(si, prm->in[1].ndim, prm->in[1].shape), names[0],
                      pk_op_shape_str(sa, acc->ndim, acc->shape));
  if (h->ndim != 1 || h->shape[0] != 4)
    return pk_op_fail(ctx, op, "hyper-parameter input %s must have shape (4,) (lr, 1 - beta1^t, "
                      "1 - beta2^t, micro-step)", pk_op_shape_str(si, h->ndim, h->shape));
  const char *pn[3] = {"A", "G", "H"};
  for (int i = 0; i < 3; i++)
    pk_op_emit_placeholder(out, pn[i], prm->in[i].ndim, prm->in[i].shape, prm->in[i].dtype);
  pk_op_emit_compute_head(out, "A_new", acc->ndim, acc->shape);
  pk_strbuf_append(out, "select(H[3] > 0.5, ");
  pk_op_emit_read_all(out, "A", acc->ndim);
  pk_strbuf_append(out, ", 0.0) + ");
  pk_op_emit_read_all(out, "G", acc->ndim);
  if (prm->attrs.accum_steps > 1) {
    pk_strbuf_append(out, " / ");
    pk_op_emit_float(out, (double)prm->attrs.accum_steps);
  }
  pk_strbuf_append(out, ")\n");
  return PK_OK;
}

/* G' = G * min(1, c / (sqrt(N[0]) + 1e-6)), N the squared global norm. */
pk_status pk_op_text_clip_grad_norm(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                    pk_strbuf *out) {
  const pk_op_input *g = &prm->in[0], *n = &prm->in[1];
  char sn[PK_OP_SHAPE_CHARS];
  if (n->ndim != 1 || n->shape[0] != 1)
    return pk_op_fail(ctx, op, "squared norm input %s must have shape (1,)",
                      pk_op_shape_str(sn, n->ndim, n->shape));
  if (!(prm->attrs.clip_norm > 0))
    return pk_op_fail(ctx, op, "clip_norm must be > 0");
  pk_op_emit_placeholder(out, "G", g->ndim, g->shape, g->dtype);
  pk_op_emit_placeholder(out, "N", n->ndim, n->shape, n->dtype);
  pk_op_emit_compute_head(out, "G_clip", g->ndim, g->shape);
  pk_op_emit_read_all(out, "G", g->ndim);
  pk_strbuf_append(out, " * min(1.0, ");
  pk_op_emit_float(out, prm->attrs.clip_norm);
  pk_strbuf_append(out, " / (sqrt(N[0]) + 1e-06)))\n");
  return PK_OK;
}
