/* op_attention.c — scaled dot-product attention (sdpa, sdpa_masked) and rotary position
 * embedding (rope), each followed by its gradients.
 *
 * sdpa is five stages over (batch..., Lq, Lk) scores (batch = (B, H) or (B,)):
 *   S = Q K^T;  M = row max of Z;  L = row sum of exp(Z - M);  P = exp(Z - M) / L;  Y = P V
 * with Z = S * scale (+ Mask), causal keys j > i left out of M, L and P. The gradients save
 * M and L (compute 1 and 2), not P: see pk_op_grad_sdpa. */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "op_impl.h"

/* ---- sdpa ---- */

typedef struct sdpa_dims {
  int nd, nb;                     /* rank of Q, K, V (3 or 4); batch dims nd - 2 */
  int64_t batch[2];
  int64_t lq, lk, d, dv;          /* queries, keys, head_dim of Q/K, head_dim of V */
  const pk_op_input *mask;        /* NULL for sdpa */
  double scale;                   /* default applied */
  bool causal;
  pkrt_dtype dt;
} sdpa_dims;

static pk_status sdpa_check(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, sdpa_dims *s) {
  const pk_op_input *q = &prm->in[0], *k = &prm->in[1], *v = &prm->in[2];
  char a[PK_OP_SHAPE_CHARS], b[PK_OP_SHAPE_CHARS], c[PK_OP_SHAPE_CHARS];
  if (q->ndim < 3 || q->ndim > 4 || k->ndim != q->ndim || v->ndim != q->ndim)
    return pk_op_fail(ctx, op, "Q, K and V must all have rank 4 (batch, heads, seq, head_dim) "
                      "or 3 (batch, seq, head_dim); got %s, %s, %s",
                      pk_op_shape_str(a, q->ndim, q->shape), pk_op_shape_str(b, k->ndim, k->shape),
                      pk_op_shape_str(c, v->ndim, v->shape));
  s->nd = q->ndim;
  s->nb = q->ndim - 2;
  for (int d = 0; d < s->nb; d++) {
    if (k->shape[d] != q->shape[d] || v->shape[d] != q->shape[d])
      return pk_op_fail(ctx, op, "Q, K and V must share the batch dims; got %s, %s, %s",
                        pk_op_shape_str(a, q->ndim, q->shape),
                        pk_op_shape_str(b, k->ndim, k->shape),
                        pk_op_shape_str(c, v->ndim, v->shape));
    s->batch[d] = q->shape[d];
  }
  s->lq = q->shape[s->nb];
  s->d = q->shape[s->nb + 1];
  s->lk = k->shape[s->nb];
  s->dv = v->shape[s->nb + 1];
  if (k->shape[s->nb + 1] != s->d)
    return pk_op_fail(ctx, op, "K's head_dim %lld differs from Q's %lld",
                      (long long)k->shape[s->nb + 1], (long long)s->d);
  if (v->shape[s->nb] != s->lk)
    return pk_op_fail(ctx, op, "V has %lld keys but K has %lld", (long long)v->shape[s->nb],
                      (long long)s->lk);
  s->mask = op == PK_OP_SDPA_MASKED ? &prm->in[3] : NULL;
  if (s->mask) {
    const pk_op_input *m = s->mask;
    int64_t sshape[4];
    for (int d = 0; d < s->nb; d++) sshape[d] = s->batch[d];
    sshape[s->nb] = s->lq;
    sshape[s->nb + 1] = s->lk;
    bool ok = m->ndim == 2 ? (m->shape[0] == 1 || m->shape[0] == s->batch[0]) &&
                                 (m->shape[1] == 1 || m->shape[1] == s->lk)
                           : m->ndim == s->nd;
    for (int d = 0; ok && m->ndim != 2 && d < s->nd; d++)
      ok = m->shape[d] == 1 || m->shape[d] == sshape[d];
    if (!ok)
      return pk_op_fail(ctx, op, "mask %s must be (batch, keys) = (%lld, %lld) or broadcast "
                        "to the scores' shape %s (extents equal or 1)",
                        pk_op_shape_str(a, m->ndim, m->shape), (long long)s->batch[0],
                        (long long)s->lk, pk_op_shape_str(b, s->nd, sshape));
  }
  double sc = prm->attrs.scale;
  if (!isfinite(sc) || sc < 0)
    return pk_op_fail(ctx, op, "scale %g out of range (must be finite, >= 0; 0 means "
                      "1/sqrt(head_dim))", sc);
  s->scale = sc != 0 ? sc : 1.0 / sqrt((double)s->d);
  s->causal = prm->attrs.causal;
  s->dt = q->dtype;
  return PK_OK;
}

/* Shapes over (batch..., rows, cols). */
static void sdpa_shape(const sdpa_dims *s, int64_t rows, int64_t cols, int64_t *out) {
  for (int d = 0; d < s->nb; d++) out[d] = s->batch[d];
  out[s->nb] = rows;
  out[s->nb + 1] = cols;
}

/* "T[i0, i1, <r>, <c>]": a read with the batch axes i0.. (every compute here has them). */
static void emit_rc(pk_strbuf *b, const sdpa_dims *s, const char *t, const char *r,
                    const char *c) {
  pk_strbuf_printf(b, "%s[", t);
  for (int d = 0; d < s->nb; d++) pk_strbuf_printf(b, "i%d, ", d);
  pk_strbuf_printf(b, "%s, %s]", r, c);
}

/* Z at query i<nb> and key `key`: "S[...] * scale + Mask[...]". */
static void emit_z(pk_strbuf *b, const sdpa_dims *s, const char *key) {
  char q[16];
  snprintf(q, sizeof q, "i%d", s->nb);
  emit_rc(b, s, "S", q, key);
  pk_strbuf_append(b, " * ");
  pk_op_emit_float(b, s->scale);
  if (!s->mask) return;
  const pk_op_input *m = s->mask;
  pk_strbuf_append(b, " + Mask[");
  if (m->ndim == 2) { /* padding mask (batch, keys) */
    pk_strbuf_printf(b, "%s, %s]", m->shape[0] == 1 ? "0" : "i0", m->shape[1] == 1 ? "0" : key);
    return;
  }
  for (int d = 0; d < m->ndim; d++) {
    if (d) pk_strbuf_append(b, ", ");
    if (m->shape[d] == 1) pk_strbuf_append(b, "0");
    else if (d == s->nb + 1) pk_strbuf_append(b, key);
    else pk_strbuf_printf(b, "i%d", d);
  }
  pk_strbuf_append(b, "]");
}

/* The row max as the exponent's shift: "max(M[..., i<nb>, 0], lowest)". A row whose every
 * unmasked Z is -inf has M = -inf; the floor keeps Z - M from being -inf - -inf = NaN, so
 * its exps are 0, L is 0 and the row's P is 0 (see P below). */
static void emit_shift(pk_strbuf *b, const sdpa_dims *s) {
  char q[16];
  snprintf(q, sizeof q, "i%d", s->nb);
  pk_strbuf_append(b, "max(");
  emit_rc(b, s, "M", q, "0");
  pk_strbuf_append(b, ", ");
  pk_op_emit_float(b, s->dt == PKRT_DTYPE_F32 ? -FLT_MAX : -DBL_MAX);
  pk_strbuf_append(b, ")");
}

/* Opens "select(<key> <= i<nb>, " when causal (PyTorch's is_causal: the mask is
 * ones(Lq, Lk).tril(), aligned at the top left); returns whether the caller must close it
 * with ", <excluded value>)". The condition is on integers, so the bounds checker and the
 * code generators see an ordinary guard. */
static bool open_causal(pk_strbuf *b, const sdpa_dims *s, const char *key) {
  if (s->causal) pk_strbuf_printf(b, "select(%s <= i%d, ", key, s->nb);
  return s->causal;
}

/* S = Q K^T (reduce axis k<kd> over head_dim), as stage 0 of the forward program and the
 * first stage of each gradient (which recomputes it). */
static void emit_scores(pk_strbuf *b, const sdpa_dims *s, int kd) {
  int64_t sshape[4];
  char q[16], key[16], kk[16];
  sdpa_shape(s, s->lq, s->lk, sshape);
  snprintf(q, sizeof q, "i%d", s->nb);
  snprintf(key, sizeof key, "i%d", s->nb + 1);
  snprintf(kk, sizeof kk, "k%d", kd);
  pk_op_emit_compute_head(b, "S", s->nd, sshape);
  pk_strbuf_append(b, "sum(");
  emit_rc(b, s, "Q", q, kk);
  pk_strbuf_append(b, " * ");
  emit_rc(b, s, "K", key, kk);
  pk_strbuf_printf(b, ", %s))\n", kk);
}

/* P = exp(Z - M) / max(L, 1), 0 at causally excluded keys. L is a sum that includes the row
 * max's own exp(0) = 1, so L >= 1 unless every exp is 0 (a fully masked row: see
 * emit_shift); max(L, 1) then gives 0 / 1 = 0 instead of 0 / 0 = NaN, with no float select. */
static void emit_probs(pk_strbuf *b, const sdpa_dims *s) {
  int64_t sshape[4];
  char q[16], key[16];
  sdpa_shape(s, s->lq, s->lk, sshape);
  snprintf(q, sizeof q, "i%d", s->nb);
  snprintf(key, sizeof key, "i%d", s->nb + 1);
  pk_op_emit_compute_head(b, "P", s->nd, sshape);
  bool sel = open_causal(b, s, key);
  pk_strbuf_append(b, "exp(");
  emit_z(b, s, key);
  pk_strbuf_append(b, " - ");
  emit_shift(b, s);
  pk_strbuf_append(b, ") / max(");
  emit_rc(b, s, "L", q, "0");
  pk_strbuf_append(b, ", 1.0)");
  if (sel) pk_strbuf_append(b, ", 0.0)");
  pk_strbuf_append(b, ")\n");
}

static void emit_qkv_placeholders(pk_strbuf *b, const pk_op_params *prm, bool with_v) {
  pk_op_emit_placeholder(b, "Q", prm->in[0].ndim, prm->in[0].shape, prm->in[0].dtype);
  pk_op_emit_placeholder(b, "K", prm->in[1].ndim, prm->in[1].shape, prm->in[1].dtype);
  if (with_v) pk_op_emit_placeholder(b, "V", prm->in[2].ndim, prm->in[2].shape, prm->in[2].dtype);
}

pk_status pk_op_text_sdpa(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, pk_strbuf *out) {
  sdpa_dims s;
  pk_status st = sdpa_check(ctx, op, prm, &s);
  if (st != PK_OK) return st;
  int64_t rshape[4], yshape[4];
  char q[16], key[16];
  sdpa_shape(&s, s.lq, 1, rshape);
  sdpa_shape(&s, s.lq, s.dv, yshape);
  snprintf(q, sizeof q, "i%d", s.nb);
  snprintf(key, sizeof key, "i%d", s.nb + 1);

  emit_qkv_placeholders(out, prm, true);
  if (s.mask) pk_op_emit_placeholder(out, "Mask", s.mask->ndim, s.mask->shape, s.mask->dtype);
  pk_op_emit_reduce_axis(out, 0, s.d);
  pk_op_emit_reduce_axis(out, 1, s.lk);
  pk_op_emit_reduce_axis(out, 2, s.lk);
  pk_op_emit_reduce_axis(out, 3, s.lk);
  emit_scores(out, &s, 0);

  /* excluded keys count as the lowest finite value, never above an included key's Z */
  pk_op_emit_compute_head(out, "M", s.nd, rshape);
  pk_strbuf_append(out, "max(");
  bool sel = open_causal(out, &s, "k1");
  emit_z(out, &s, "k1");
  if (sel) {
    pk_strbuf_append(out, ", ");
    pk_op_emit_float(out, s.dt == PKRT_DTYPE_F32 ? -FLT_MAX : -DBL_MAX);
    pk_strbuf_append(out, ")");
  }
  pk_strbuf_append(out, ", k1))\n");

  pk_op_emit_compute_head(out, "L", s.nd, rshape);
  pk_strbuf_append(out, "sum(");
  sel = open_causal(out, &s, "k2");
  pk_strbuf_append(out, "exp(");
  emit_z(out, &s, "k2");
  pk_strbuf_append(out, " - ");
  emit_shift(out, &s);
  pk_strbuf_append(out, ")");
  if (sel) pk_strbuf_append(out, ", 0.0)");
  pk_strbuf_append(out, ", k2))\n");

  emit_probs(out, &s);

  pk_op_emit_compute_head(out, "Y", s.nd, yshape);
  pk_strbuf_append(out, "sum(");
  emit_rc(out, &s, "P", q, "k3");
  pk_strbuf_append(out, " * ");
  emit_rc(out, &s, "V", "k3", key);
  pk_strbuf_append(out, ", k3))\n");
  return PK_OK;
}

/* Memory versus recompute: the gradients read the row max M and row sum L (stages 1 and 2,
 * Lq numbers per row) and recompute S = Q K^T and P from them, rather than reading P (stage
 * 3, Lq x Lk per row). Saving P would keep an Lq x Lk tensor per attention layer alive from
 * the forward to the backward pass, the largest activation of a transformer and what limits
 * sequence length on an edge device; the recompute costs one more Q K^T product per
 * gradient (FlashAttention's trade). P recomputed from the saved M and L is exactly the
 * forward's P. dQ and dK also need R = row sum of P * dP, computed here from P and
 * dP = dY V^T (which they need anyway) instead of reading the output Y (R = row sum of
 * dY * Y), so that Y is not saved either.
 *   dV = P^T dY;  dZ = P (dP - R);  dQ = scale dZ K;  dK = scale dZ^T Q. */
pk_status pk_op_grad_sdpa(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                          const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  sdpa_dims s;
  pk_status st = sdpa_check(ctx, op, prm, &s);
  if (st != PK_OK) return st;
  int64_t rshape[4], sshape[4];
  char q[16], key[16];
  sdpa_shape(&s, s.lq, 1, rshape);
  sdpa_shape(&s, s.lq, s.lk, sshape);
  snprintf(q, sizeof q, "i%d", s.nb);
  snprintf(key, sizeof key, "i%d", s.nb + 1);

  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 0, "Q", prm, y);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 1, "K", prm, y);
  if (input != 2) pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 2, "V", prm, y);
  if (s.mask) pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 3, "Mask", prm, y);
  pk_op_grad_add_stage(g, out, 1, "M", s.nd, rshape, s.dt);
  pk_op_grad_add_stage(g, out, 2, "L", s.nd, rshape, s.dt);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  const pk_op_input *x = &prm->in[input];

  pk_op_emit_reduce_axis(out, 0, s.d);
  if (input == 2) { /* dV[j, e] = sum_i P[i, j] dY[i, e] */
    pk_op_emit_reduce_axis(out, 1, s.lq);
    emit_scores(out, &s, 0);
    emit_probs(out, &s);
    pk_op_emit_compute_head(out, "DV", x->ndim, x->shape);
    pk_strbuf_append(out, "sum(");
    emit_rc(out, &s, "P", "k1", q);
    pk_strbuf_append(out, " * ");
    emit_rc(out, &s, "DY", "k1", key);
    pk_strbuf_append(out, ", k1))\n");
    return PK_OK;
  }
  pk_op_emit_reduce_axis(out, 1, s.dv);
  pk_op_emit_reduce_axis(out, 2, s.lk);
  pk_op_emit_reduce_axis(out, 3, input == 0 ? s.lk : s.lq);
  emit_scores(out, &s, 0);
  emit_probs(out, &s);
  pk_op_emit_compute_head(out, "DP", s.nd, sshape); /* dP = dY V^T */
  pk_strbuf_append(out, "sum(");
  emit_rc(out, &s, "DY", q, "k1");
  pk_strbuf_append(out, " * ");
  emit_rc(out, &s, "V", key, "k1");
  pk_strbuf_append(out, ", k1))\n");
  pk_op_emit_compute_head(out, "R", s.nd, rshape);
  pk_strbuf_append(out, "sum(");
  emit_rc(out, &s, "P", q, "k2");
  pk_strbuf_append(out, " * ");
  emit_rc(out, &s, "DP", q, "k2");
  pk_strbuf_append(out, ", k2))\n");
  /* G = dZ * scale = d(loss)/dS; 0 where P is (causally excluded or fully masked keys) */
  pk_op_emit_compute_head(out, "G", s.nd, sshape);
  emit_rc(out, &s, "P", q, key);
  pk_strbuf_append(out, " * (");
  emit_rc(out, &s, "DP", q, key);
  pk_strbuf_append(out, " - ");
  emit_rc(out, &s, "R", q, "0");
  pk_strbuf_append(out, ") * ");
  pk_op_emit_float(out, s.scale);
  pk_strbuf_append(out, ")\n");
  pk_op_emit_compute_head(out, input == 0 ? "DQ" : "DK", x->ndim, x->shape);
  pk_strbuf_append(out, "sum(");
  if (input == 0) { /* dQ[i, c] = sum_j G[i, j] K[j, c] */
    emit_rc(out, &s, "G", q, "k3");
    pk_strbuf_append(out, " * ");
    emit_rc(out, &s, "K", "k3", key);
  } else { /* dK[j, c] = sum_i G[i, j] Q[i, c] */
    emit_rc(out, &s, "G", "k3", q);
    pk_strbuf_append(out, " * ");
    emit_rc(out, &s, "Q", "k3", key);
  }
  pk_strbuf_append(out, ", k3))\n");
  return PK_OK;
}

/* ---- rope ---- */

/* X (..., S, Dh) with Dh even, Cos and Sin (S, Dh / 2); h = Dh / 2. LLaMA's "rotate half"
 * form (HF's rotate_half): Y = X cos + rotate_half(X) sin with rotate_half(x) = (-x2, x1),
 * x1 = x[..., :h], x2 = x[..., h:], and the tables repeated twice along the last dim:
 *   Y[d] = X[d] Cos[s, d] - X[d + h] Sin[s, d]          (d < h)
 *   Y[d] = X[d] Cos[s, d - h] + X[d - h] Sin[s, d - h]  (d >= h)
 * The guard d < h is an integer select, which the bounds checker uses for both halves. */
static pk_status rope_check(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, int64_t *h) {
  const pk_op_input *x = &prm->in[0], *c = &prm->in[1], *sn = &prm->in[2];
  char a[PK_OP_SHAPE_CHARS], b[PK_OP_SHAPE_CHARS], e[PK_OP_SHAPE_CHARS];
  if (x->ndim < 2)
    return pk_op_fail(ctx, op, "X %s must have rank >= 2 (..., seq, head_dim)",
                      pk_op_shape_str(a, x->ndim, x->shape));
  int64_t seq = x->shape[x->ndim - 2], dh = x->shape[x->ndim - 1];
  if (dh % 2 != 0)
    return pk_op_fail(ctx, op, "head_dim %lld must be even (rotate half)", (long long)dh);
  *h = dh / 2;
  int64_t want[2] = {seq, *h};
  for (int t = 1; t <= 2; t++) {
    const pk_op_input *tab = t == 1 ? c : sn;
    if (tab->ndim != 2 || tab->shape[0] != seq || tab->shape[1] != *h)
      return pk_op_fail(ctx, op, "%s table %s must be (seq, head_dim / 2) = %s for X %s",
                        t == 1 ? "cos" : "sin", pk_op_shape_str(a, tab->ndim, tab->shape),
                        pk_op_shape_str(b, 2, want), pk_op_shape_str(e, x->ndim, x->shape));
  }
  return PK_OK;
}

/* "T[i0, .., i<n-2>, <last>]" */
static void emit_last(pk_strbuf *b, const char *t, int nd, const char *last) {
  pk_strbuf_printf(b, "%s[", t);
  for (int d = 0; d < nd - 1; d++) pk_strbuf_printf(b, "i%d, ", d);
  pk_strbuf_printf(b, "%s]", last);
}

/* Writes select(d < h, A[d] Cos[d] <s1> A[d + h] Sin[d], A[d] Cos[d - h] <s2> A[d - h] Sin[d - h])
 * for A = X (forward: s1 -, s2 +) or DY (gradient, the transposed rotation: s1 +, s2 -). */
static void emit_rotation(pk_strbuf *b, int nd, int64_t h, const char *a, bool transpose) {
  char d[16], up[40], dn[40], row[16];
  snprintf(d, sizeof d, "i%d", nd - 1);
  snprintf(up, sizeof up, "i%d + %lld", nd - 1, (long long)h);
  snprintf(dn, sizeof dn, "i%d - %lld", nd - 1, (long long)h);
  snprintf(row, sizeof row, "i%d", nd - 2);
  pk_strbuf_printf(b, "select(%s < %lld, ", d, (long long)h);
  emit_last(b, a, nd, d);
  pk_strbuf_printf(b, " * Cos[%s, %s] %s ", row, d, transpose ? "+" : "-");
  emit_last(b, a, nd, up);
  pk_strbuf_printf(b, " * Sin[%s, %s], ", row, d);
  emit_last(b, a, nd, d);
  pk_strbuf_printf(b, " * Cos[%s, %s] %s ", row, dn, transpose ? "-" : "+");
  emit_last(b, a, nd, dn);
  pk_strbuf_printf(b, " * Sin[%s, %s])", row, dn);
}

pk_status pk_op_text_rope(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, pk_strbuf *out) {
  int64_t h;
  pk_status s = rope_check(ctx, op, prm, &h);
  if (s != PK_OK) return s;
  const pk_op_input *x = &prm->in[0];
  pk_op_emit_placeholder(out, "X", x->ndim, x->shape, x->dtype);
  pk_op_emit_placeholder(out, "Cos", 2, prm->in[1].shape, prm->in[1].dtype);
  pk_op_emit_placeholder(out, "Sin", 2, prm->in[2].shape, prm->in[2].dtype);
  pk_op_emit_compute_head(out, "Y", x->ndim, x->shape);
  emit_rotation(out, x->ndim, h, "X", false);
  pk_strbuf_append(out, ")\n");
  return PK_OK;
}

/* The rotation is orthogonal per pair (d, d + h), so dX is dY rotated back: the transpose,
 * which flips the signs of the sin terms. Reads the tables and dY only (the tables are not
 * differentiable: they are constants of the position). */
pk_status pk_op_grad_rope(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                          const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  int64_t h;
  pk_status s = rope_check(ctx, op, prm, &h);
  if (s != PK_OK) return s;
  const pk_op_input *x = &prm->in[0];
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 1, "Cos", prm, y);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 2, "Sin", prm, y);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
  emit_rotation(out, x->ndim, h, "DY", true);
  pk_strbuf_append(out, ")\n");
  (void)input;
  return PK_OK;
}
