/* op_loss.c — the losses that root a training graph: cross_entropy over integer labels
 * (what classification trains with: ignored labels make padding rows count 0), and
 * softmax_cross_entropy (one-hot targets) and mse_loss, each a sum over rows weighted by
 * R (so padding rows of a partial batch count 0); their gradients take no dY (the loss is
 * the end of the chain). */
#include "op_impl.h"

static bool same_shape(const pk_op_input *a, const pk_op_input *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

/* Checks the shared rules: T shaped like the prediction, R = (N,) for its N rows. */
static pk_status check_loss_inputs(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm) {
  const pk_op_input *p = &prm->in[0], *t = &prm->in[1], *r = &prm->in[2];
  char sp[PK_OP_SHAPE_CHARS], st[PK_OP_SHAPE_CHARS];
  if (op == PK_OP_SOFTMAX_CROSS_ENTROPY && p->ndim != 2)
    return pk_op_fail(ctx, op, "logits %s must have rank 2 (N, K)",
                      pk_op_shape_str(sp, p->ndim, p->shape));
  if (!same_shape(p, t))
    return pk_op_fail(ctx, op, "targets %s must have the shape of the %s %s",
                      pk_op_shape_str(st, t->ndim, t->shape),
                      op == PK_OP_MSE_LOSS ? "prediction" : "logits",
                      pk_op_shape_str(sp, p->ndim, p->shape));
  if (r->ndim != 1 || r->shape[0] != p->shape[0])
    return pk_op_fail(ctx, op, "row weights %s must have shape (%lld,), one per row",
                      pk_op_shape_str(st, r->ndim, r->shape), (long long)p->shape[0]);
  return PK_OK;
}

/* Placeholders Z, T, R (in the order of the inputs) for the forward text. */
static void emit_inputs(pk_strbuf *out, const pk_op_params *prm, const char *pred) {
  const char *names[3] = {pred, "T", "R"};
  for (int i = 0; i < 3; i++)
    pk_op_emit_placeholder(out, names[i], prm->in[i].ndim, prm->in[i].shape, prm->in[i].dtype);
}

/* M[n] = max_k Z[n, k] and S[n] = sum_k exp(Z[n, k] - M[n]): logsumexp = M + log S without
 * overflow. Uses reduce axes k0 and k1. */
static void emit_row_lse(pk_strbuf *out, int64_t n, int64_t k) {
  int64_t rows[1] = {n};
  pk_op_emit_reduce_axis(out, 0, k);
  pk_op_emit_reduce_axis(out, 1, k);
  pk_op_emit_compute_head(out, "M", 1, rows);
  pk_strbuf_append(out, "max(Z[i0, k0], k0))\n");
  pk_op_emit_compute_head(out, "S", 1, rows);
  pk_strbuf_append(out, "sum(exp(Z[i0, k1] - M[i0]), k1))\n");
}

/* loss = sum_n R[n] * (M[n] + log S[n] - sum_k T[n, k] * Z[n, k]). */
pk_status pk_op_text_softmax_ce(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                pk_strbuf *out) {
  pk_status s = check_loss_inputs(ctx, op, prm);
  if (s != PK_OK) return s;
  int64_t n = prm->in[0].shape[0], k = prm->in[0].shape[1], rows[1] = {n}, one[1] = {1};
  emit_inputs(out, prm, "Z");
  emit_row_lse(out, n, k);
  pk_op_emit_reduce_axis(out, 2, k);
  pk_op_emit_reduce_axis(out, 3, n);
  pk_op_emit_compute_head(out, "TZ", 1, rows);
  pk_strbuf_append(out, "sum(T[i0, k2] * Z[i0, k2], k2))\n");
  pk_op_emit_compute_head(out, "Y", 1, one);
  pk_strbuf_append(out, "sum(R[k3] * (M[k3] + log(S[k3]) - TZ[k3]), k3))\n");
  return PK_OK;
}

/* dZ[n, k] = R[n] * (softmax(Z)[n, k] - T[n, k]), exact for any T (the loss is linear in T). */
pk_status pk_op_grad_softmax_ce(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                const pk_te_tensor *y, int input, pk_op_grad *g,
                                pk_strbuf *out) {
  int64_t n = prm->in[0].shape[0], k = prm->in[0].shape[1];
  const char *names[3] = {"Z", "T", "R"};
  for (int i = 0; i < 3; i++) pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, i, names[i], prm, y);
  emit_row_lse(out, n, k);
  pk_op_emit_compute_head(out, "DZ", 2, prm->in[0].shape);
  pk_strbuf_append(out, "R[i0] * (exp(Z[i0, i1] - M[i0]) / S[i0] - T[i0, i1]))\n");
  (void)ctx, (void)op, (void)input;
  return PK_OK;
}

/* "P[k0, k1, k2]" or "P[i0, i1, i2]": a read at every dim of the prediction's rank. */
static void emit_read(pk_strbuf *b, const char *name, int ndim, char axis) {
  pk_strbuf_printf(b, "%s[", name);
  for (int d = 0; d < ndim; d++) pk_strbuf_printf(b, "%s%c%d", d ? ", " : "", axis, d);
  pk_strbuf_append(b, "]");
}

/* The number of elements per row, as the divisor of the mean. */
static int64_t row_size(const pk_op_input *p) {
  int64_t inner = 1;
  for (int d = 1; d < p->ndim; d++) inner *= p->shape[d];
  return inner;
}

/* loss = sum over every element of R[n] * (P - T)^2 / (elements per row). */
pk_status pk_op_text_mse(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                         pk_strbuf *out) {
  pk_status s = check_loss_inputs(ctx, op, prm);
  if (s != PK_OK) return s;
  const pk_op_input *p = &prm->in[0];
  int64_t inner = row_size(p), one[1] = {1};
  emit_inputs(out, prm, "P");
  for (int d = 0; d < p->ndim; d++) pk_op_emit_reduce_axis(out, d, p->shape[d]);
  pk_op_emit_compute_head(out, "Y", 1, one);
  pk_strbuf diff; /* "(P[k0, k1] - T[k0, k1])" */
  pk_strbuf_init(&diff);
  pk_strbuf_append(&diff, "(");
  emit_read(&diff, "P", p->ndim, 'k');
  pk_strbuf_append(&diff, " - ");
  emit_read(&diff, "T", p->ndim, 'k');
  pk_strbuf_append(&diff, ")");
  pk_strbuf_printf(out, "sum(R[k0] * %s * %s", diff.data, diff.data);
  if (inner != 1) {
    pk_strbuf_append(out, " / ");
    pk_op_emit_float(out, (double)inner);
  }
  for (int d = 0; d < p->ndim; d++) pk_strbuf_printf(out, ", k%d", d);
  pk_strbuf_append(out, "))\n");
  pk_strbuf_free(&diff);
  return PK_OK;
}

/* dP = R[n] * 2 * (P - T) / (elements per row). */
pk_status pk_op_grad_mse(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                         const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *p = &prm->in[0];
  const char *names[3] = {"P", "T", "R"};
  for (int i = 0; i < 3; i++) pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, i, names[i], prm, y);
  int64_t inner = row_size(p);
  pk_op_emit_compute_head(out, "DP", p->ndim, p->shape);
  pk_strbuf_append(out, "2.0 * R[i0] * (");
  emit_read(out, "P", p->ndim, 'i');
  pk_strbuf_append(out, " - ");
  emit_read(out, "T", p->ndim, 'i');
  pk_strbuf_append(out, ")");
  if (inner != 1) {
    pk_strbuf_append(out, " / ");
    pk_op_emit_float(out, (double)inner);
  }
  pk_strbuf_append(out, ")\n");
  (void)ctx, (void)op, (void)input;
  return PK_OK;
}

/* ---- losses with integer labels ----
 * cross_entropy reads each row's label as an integer (a gather Z[.., L[..]] guarded to
 * [0, K)), never as a one-hot float tensor: N*T*K floats of targets would dwarf the
 * logits' own memory for a language model. Rows are every index but the last of Z. */

/* The row dims (all of Z's but the last) and the class count. */
static int ce_rows(const pk_op_params *prm, int64_t *rows, int64_t *k) {
  const pk_op_input *z = &prm->in[0];
  for (int d = 0; d + 1 < z->ndim; d++) rows[d] = z->shape[d];
  *k = z->shape[z->ndim - 1];
  return z->ndim - 1;
}

/* "i0, i1" (axis 'i', spatial) or "k3, k4" (axis 'k' from first): the row index list. */
static void ce_index(pk_strbuf *b, int nr, char axis, int first) {
  for (int d = 0; d < nr; d++) pk_strbuf_printf(b, "%s%c%d", d ? ", " : "", axis, first + d);
}

/* "L[i0] >= 0 && L[i0] < 7 && L[i0] != 3": the row counts (labels are its dims). */
static void ce_valid(pk_strbuf *b, const pk_op_attrs *a, int nr, char axis, int first,
                     int64_t k) {
  pk_strbuf l;
  pk_strbuf_init(&l);
  pk_strbuf_append(&l, "L[");
  ce_index(&l, nr, axis, first);
  pk_strbuf_append(&l, "]");
  pk_strbuf_printf(b, "%s >= 0 && %s < %lld", l.data, l.data, (long long)k);
  if (a->has_ignore_index) {
    /* a negative literal is a unary minus on a literal: "L[i0] != -100" */
    pk_strbuf_printf(b, " && %s != %s%lld", l.data, a->ignore_index < 0 ? "-" : "",
                     (long long)(a->ignore_index < 0 ? -a->ignore_index : a->ignore_index));
  }
  pk_strbuf_free(&l);
}

static pk_status ce_check(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm) {
  const pk_op_input *z = &prm->in[0], *l = &prm->in[1];
  const pk_op_attrs *a = &prm->attrs;
  char sz[PK_OP_SHAPE_CHARS], sl[PK_OP_SHAPE_CHARS];
  if (z->ndim != 2 && z->ndim != 3)
    return pk_op_fail(ctx, op, "logits %s must have rank 2 (N, K) or 3 (N, T, K)",
                      pk_op_shape_str(sz, z->ndim, z->shape));
  bool same = l->ndim == z->ndim - 1;
  for (int d = 0; same && d < l->ndim; d++) same = l->shape[d] == z->shape[d];
  if (!same)
    return pk_op_fail(ctx, op, "labels %s must have the shape %s of the logits without the "
                      "class dim", pk_op_shape_str(sl, l->ndim, l->shape),
                      pk_op_shape_str(sz, z->ndim - 1, z->shape));
  if (!(a->label_smoothing >= 0 && a->label_smoothing <= 1))
    return pk_op_fail(ctx, op, "label_smoothing %g out of range (must be in [0, 1])",
                      a->label_smoothing);
  if (a->has_ignore_index && (a->ignore_index < -PK_OP_MAX_EXTENT ||
                              a->ignore_index > PK_OP_MAX_EXTENT))
    return pk_op_fail(ctx, op, "ignore_index %lld out of range (|ignore_index| <= %lld)",
                      (long long)a->ignore_index, (long long)PK_OP_MAX_EXTENT);
  return PK_OK;
}

/* M = row max, S = row sum of exp(Z - M), [SZ = row sum of Z], C = counted rows (1,):
 * the stages the forward writes and the gradient reads back (PK_GRAD_ARG_STAGE). Reduce
 * axes k0 (M), k1 (S), k2 (SZ), k3.. (C). */
static void ce_stages(pk_strbuf *out, const pk_op_params *prm, bool with_sz) {
  int64_t rows[PK_TE_MAX_DIMS], k, one[1] = {1};
  int nr = ce_rows(prm, rows, &k);
  pk_op_emit_reduce_axis(out, 0, k);
  pk_op_emit_reduce_axis(out, 1, k);
  if (with_sz) pk_op_emit_reduce_axis(out, 2, k);
  for (int d = 0; d < nr; d++) pk_op_emit_reduce_axis(out, 3 + d, rows[d]);
  pk_op_emit_compute_head(out, "M", nr, rows);
  pk_strbuf_append(out, "max(Z[");
  ce_index(out, nr, 'i', 0);
  pk_strbuf_append(out, ", k0], k0))\n");
  pk_op_emit_compute_head(out, "S", nr, rows);
  pk_strbuf_append(out, "sum(exp(Z[");
  ce_index(out, nr, 'i', 0);
  pk_strbuf_append(out, ", k1] - M[");
  ce_index(out, nr, 'i', 0);
  pk_strbuf_append(out, "]), k1))\n");
  if (with_sz) {
    pk_op_emit_compute_head(out, "SZ", nr, rows);
    pk_strbuf_append(out, "sum(Z[");
    ce_index(out, nr, 'i', 0);
    pk_strbuf_append(out, ", k2], k2))\n");
  }
  pk_op_emit_compute_head(out, "C", 1, one);
  pk_strbuf_printf(out, "sum(cast(%s, ", pkrt_dtype_name(prm->in[0].dtype));
  ce_valid(out, &prm->attrs, nr, 'k', 3, k);
  pk_strbuf_append(out, ")");
  for (int d = 0; d < nr; d++) pk_strbuf_printf(out, ", k%d", 3 + d);
  pk_strbuf_append(out, "))\n");
}

/* P[r] = counted ? M + log S - (1 - c) Z[r, L[r]] - (c / K) SZ[r] : 0;
 * Y = sum_r P[r] / max(C, 1). */
pk_status pk_op_text_cross_entropy(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                   pk_strbuf *out) {
  pk_status s = ce_check(ctx, op, prm);
  if (s != PK_OK) return s;
  const pk_op_attrs *a = &prm->attrs;
  int64_t rows[PK_TE_MAX_DIMS], k, one[1] = {1};
  int nr = ce_rows(prm, rows, &k);
  double c = a->label_smoothing;
  pk_op_emit_placeholder(out, "Z", prm->in[0].ndim, prm->in[0].shape, prm->in[0].dtype);
  pk_op_emit_placeholder(out, "L", prm->in[1].ndim, prm->in[1].shape, prm->in[1].dtype);
  ce_stages(out, prm, c > 0);
  pk_strbuf r;
  pk_strbuf_init(&r);
  ce_index(&r, nr, 'i', 0);
  pk_op_emit_compute_head(out, "P", nr, rows);
  pk_strbuf_append(out, "select(");
  ce_valid(out, a, nr, 'i', 0, k);
  pk_strbuf_printf(out, ", M[%s] + log(S[%s]) - ", r.data, r.data);
  if (c != 0) {
    pk_op_emit_float(out, 1.0 - c);
    pk_strbuf_append(out, " * ");
  }
  pk_strbuf_printf(out, "Z[%s, L[%s]]", r.data, r.data);
  if (c != 0) {
    pk_strbuf_append(out, " - ");
    pk_op_emit_float(out, c / (double)k);
    pk_strbuf_printf(out, " * SZ[%s]", r.data);
  }
  pk_strbuf_append(out, ", 0.0))\n");
  pk_op_emit_compute_head(out, "Y", 1, one);
  pk_strbuf_append(out, "sum(P[");
  ce_index(out, nr, 'k', 3);
  pk_strbuf_append(out, "] / max(C[0], 1.0)");
  for (int d = 0; d < nr; d++) pk_strbuf_printf(out, ", k%d", 3 + d);
  pk_strbuf_append(out, "))\n");
  pk_strbuf_free(&r);
  return PK_OK;
}

/* dZ[r, j] = counted ? (softmax(Z)[r, j] - (1 - c) [L[r] == j] - c / K) / max(C, 1) : 0,
 * reading the forward's M, S and C (stages 0, 1 and 2 or 3) rather than recomputing them. */
pk_status pk_op_grad_cross_entropy(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                   const pk_te_tensor *y, int input, pk_op_grad *g,
                                   pk_strbuf *out) {
  const pk_op_attrs *a = &prm->attrs;
  const pk_op_input *z = &prm->in[0];
  int64_t rows[PK_TE_MAX_DIMS], k, one[1] = {1};
  int nr = ce_rows(prm, rows, &k);
  double c = a->label_smoothing;
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 0, "Z", prm, y);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 1, "L", prm, y);
  pk_op_grad_add_stage(g, out, 0, "M", nr, rows, z->dtype);
  pk_op_grad_add_stage(g, out, 1, "S", nr, rows, z->dtype);
  pk_op_grad_add_stage(g, out, c > 0 ? 3 : 2, "C", 1, one, z->dtype);
  pk_strbuf r;
  pk_strbuf_init(&r);
  ce_index(&r, nr, 'i', 0);
  pk_op_emit_compute_head(out, "DZ", z->ndim, z->shape);
  pk_strbuf_append(out, "select(");
  ce_valid(out, a, nr, 'i', 0, k);
  pk_strbuf_printf(out, ", (exp(Z[%s, i%d] - M[%s]) / S[%s] - ", r.data, nr, r.data, r.data);
  if (c != 1) {
    if (c != 0) {
      pk_op_emit_float(out, 1.0 - c);
      pk_strbuf_append(out, " * ");
    }
    pk_strbuf_printf(out, "select(cast(i64, L[%s]) == i%d, 1.0, 0.0)", r.data, nr);
  } else {
    pk_strbuf_append(out, "0.0");
  }
  if (c != 0) {
    pk_strbuf_append(out, " - ");
    pk_op_emit_float(out, c / (double)k);
  }
  pk_strbuf_append(out, ") / max(C[0], 1.0), 0.0))\n");
  pk_strbuf_free(&r);
  (void)ctx, (void)op, (void)input;
  return PK_OK;
}
