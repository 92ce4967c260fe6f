/* op_shape.c — data movement: transpose, concat, pad, expand, where and masked_fill, each
 * followed by its gradients (copies in the other direction; expand and the broadcast
 * inputs of where sum over the dims they were stretched along). */
#include <stdio.h>

#include "op_impl.h"

/* "X3" into buf: the name of concat's input i (Xi) or its gradient (DXi). */
static const char *indexed_name(char *buf, size_t cap, const char *stem, int i) {
  snprintf(buf, cap, "%s%d", stem, i);
  return buf;
}

/* A read of `name` (rank ndim) at the compute's own axes, except that axis `axis` (when
 * >= 0) reads "i<axis> <sign> <off>" (off 0 leaves the axis alone). */
static void emit_read_shifted(pk_strbuf *b, const char *name, int ndim, int axis, char sign,
                              int64_t off) {
  pk_strbuf_printf(b, "%s[", name);
  for (int d = 0; d < ndim; d++) {
    pk_strbuf_printf(b, "%si%d", d ? ", " : "", d);
    if (d == axis && off) pk_strbuf_printf(b, " %c %lld", sign, (long long)off);
  }
  pk_strbuf_append(b, "]");
}

/* ---- transpose ---- */

/* perm as result dim -> input dim: each input axis once; no perm reverses them. */
static pk_status transpose_perm(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                int *perm) {
  const pk_op_attrs *a = &prm->attrs;
  int n = prm->in[0].ndim;
  if (a->nperm == 0) {
    for (int d = 0; d < n; d++) perm[d] = n - 1 - d;
    return PK_OK;
  }
  if (a->nperm != n)
    return pk_op_fail(ctx, op, "perm has %d entries but the input has rank %d", a->nperm, n);
  bool seen[PK_TE_MAX_DIMS] = {false};
  for (int d = 0; d < n; d++) {
    pk_status s = pk_op_axis(ctx, op, a->perm[d], n, &perm[d]);
    if (s != PK_OK) return s;
    if (seen[perm[d]])
      return pk_op_fail(ctx, op, "perm lists axis %d twice (it must be a permutation of "
                        "0..%d)", perm[d], n - 1);
    seen[perm[d]] = true;
  }
  return PK_OK;
}

pk_status pk_op_text_transpose(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                               pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  int perm[PK_TE_MAX_DIMS], inv[PK_TE_MAX_DIMS];
  pk_status s = transpose_perm(ctx, op, prm, perm);
  if (s != PK_OK) return s;
  int64_t yshape[PK_TE_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) {
    yshape[d] = x->shape[perm[d]];
    inv[perm[d]] = d;
  }
  pk_op_emit_placeholder(out, "X", x->ndim, x->shape, x->dtype);
  pk_op_emit_compute_head(out, "Y", x->ndim, yshape);
  pk_strbuf_append(out, "X[");
  for (int j = 0; j < x->ndim; j++) pk_strbuf_printf(out, "%si%d", j ? ", " : "", inv[j]);
  pk_strbuf_append(out, "])\n");
  return PK_OK;
}

/* dX is dY transposed back: dX[j] = dY[j[perm[0]], j[perm[1]], ...]. */
pk_status pk_op_grad_transpose(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                               const pk_te_tensor *y, int input, pk_op_grad *g,
                               pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  int perm[PK_TE_MAX_DIMS];
  pk_status s = transpose_perm(ctx, op, prm, perm);
  if (s != PK_OK) return s;
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
  pk_strbuf_append(out, "DY[");
  for (int d = 0; d < x->ndim; d++) pk_strbuf_printf(out, "%si%d", d ? ", " : "", perm[d]);
  pk_strbuf_append(out, "])\n");
  (void)input;
  return PK_OK;
}

/* ---- concat ---- */

/* The axis, and where each input starts along it (off[ninputs] = the result's extent). */
static pk_status concat_layout(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, int *axis,
                               int64_t *off) {
  const pk_op_input *x0 = &prm->in[0];
  pk_status s = pk_op_axis(ctx, op, prm->attrs.axis, x0->ndim, axis);
  if (s != PK_OK) return s;
  off[0] = 0;
  for (int i = 0; i < prm->ninputs; i++) {
    const pk_op_input *x = &prm->in[i];
    bool same = x->ndim == x0->ndim;
    for (int d = 0; same && d < x->ndim; d++) same = d == *axis || x->shape[d] == x0->shape[d];
    if (!same) {
      char si[PK_OP_SHAPE_CHARS], s0[PK_OP_SHAPE_CHARS];
      return pk_op_fail(ctx, op, "input %d has shape %s but input 0 has %s (only axis %d may "
                        "differ)", i, pk_op_shape_str(si, x->ndim, x->shape),
                        pk_op_shape_str(s0, x0->ndim, x0->shape), *axis);
    }
    off[i + 1] = off[i] + x->shape[*axis]; /* each <= INT32_MAX: no overflow */
  }
  if (off[prm->ninputs] > PK_OP_MAX_EXTENT)
    return pk_op_fail(ctx, op, "the result's axis %d would have extent %lld (at most %lld)",
                      *axis, (long long)off[prm->ninputs], (long long)PK_OP_MAX_EXTENT);
  return PK_OK;
}

/* Y = select(i < off1, X0[..], select(i < off2, X1[.. i - off1 ..], ... X<n-1>[..])): each
 * guard (and the negation of those before it) is the fact that keeps its read in bounds. */
pk_status pk_op_text_concat(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            pk_strbuf *out) {
  int axis, n = prm->ninputs;
  int64_t off[PK_OP_MAX_INPUTS + 1], yshape[PK_TE_MAX_DIMS];
  pk_status s = concat_layout(ctx, op, prm, &axis, off);
  if (s != PK_OK) return s;
  const pk_op_input *x0 = &prm->in[0];
  char name[16];
  for (int i = 0; i < n; i++)
    pk_op_emit_placeholder(out, indexed_name(name, sizeof name, "X", i), prm->in[i].ndim,
                           prm->in[i].shape, prm->in[i].dtype);
  for (int d = 0; d < x0->ndim; d++) yshape[d] = d == axis ? off[n] : x0->shape[d];
  pk_op_emit_compute_head(out, "Y", x0->ndim, yshape);
  for (int i = 0; i < n; i++) {
    if (i < n - 1) pk_strbuf_printf(out, "select(i%d < %lld, ", axis, (long long)off[i + 1]);
    emit_read_shifted(out, indexed_name(name, sizeof name, "X", i), x0->ndim, axis, '-',
                      off[i]);
    if (i < n - 1) pk_strbuf_append(out, ", ");
  }
  for (int i = 0; i < n - 1; i++) pk_strbuf_append(out, ")");
  pk_strbuf_append(out, ")\n");
  return PK_OK;
}

/* dX_i is the part of dY that input i filled. */
pk_status pk_op_grad_concat(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  int axis;
  int64_t off[PK_OP_MAX_INPUTS + 1];
  pk_status s = concat_layout(ctx, op, prm, &axis, off);
  if (s != PK_OK) return s;
  const pk_op_input *x = &prm->in[input];
  char name[16];
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_op_emit_compute_head(out, indexed_name(name, sizeof name, "DX", input), x->ndim,
                          x->shape);
  emit_read_shifted(out, "DY", x->ndim, axis, '+', off[input]);
  pk_strbuf_append(out, ")\n");
  return PK_OK;
}

/* ---- pad ---- */

/* The result's shape; pads beyond the rank must be 0 (they would pad dims that do not
 * exist). */
static pk_status pad_shape(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                           int64_t *yshape) {
  const pk_op_input *x = &prm->in[0];
  const int64_t *p = prm->attrs.pads;
  for (int d = x->ndim; d < PK_TE_MAX_DIMS; d++)
    if (p[2 * d] || p[2 * d + 1])
      return pk_op_fail(ctx, op, "pads has entries for dim %d but the input has rank %d", d,
                        x->ndim);
  for (int d = 0; d < x->ndim; d++) {
    yshape[d] = x->shape[d] + p[2 * d] + p[2 * d + 1]; /* each <= INT32_MAX */
    if (yshape[d] > PK_OP_MAX_EXTENT)
      return pk_op_fail(ctx, op, "padded dim %d would have extent %lld (at most %lld)", d,
                        (long long)yshape[d], (long long)PK_OP_MAX_EXTENT);
  }
  return PK_OK;
}

/* Y = select(i_d >= before_d && i_d < before_d + n_d && ..., X[i_d - before_d, ...], value),
 * each guard only where that side is padded. */
pk_status pk_op_text_pad(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                         pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  const int64_t *p = prm->attrs.pads;
  int64_t yshape[PK_TE_MAX_DIMS];
  pk_status s = pad_shape(ctx, op, prm, yshape);
  if (s != PK_OK) return s;
  pk_op_emit_placeholder(out, "X", x->ndim, x->shape, x->dtype);
  pk_op_emit_compute_head(out, "Y", x->ndim, yshape);
  pk_strbuf guards;
  pk_strbuf_init(&guards);
  for (int d = 0; d < x->ndim; d++) {
    if (p[2 * d])
      pk_strbuf_printf(&guards, "%si%d >= %lld", guards.len ? " && " : "", d,
                       (long long)p[2 * d]);
    if (p[2 * d + 1])
      pk_strbuf_printf(&guards, "%si%d < %lld", guards.len ? " && " : "", d,
                       (long long)(p[2 * d] + x->shape[d]));
  }
  if (guards.len) pk_strbuf_printf(out, "select(%s, ", guards.data);
  pk_strbuf_append(out, "X[");
  for (int d = 0; d < x->ndim; d++) {
    pk_strbuf_printf(out, "%si%d", d ? ", " : "", d);
    if (p[2 * d]) pk_strbuf_printf(out, " - %lld", (long long)p[2 * d]);
  }
  pk_strbuf_append(out, "]");
  if (guards.len) {
    pk_strbuf_append(out, ", ");
    pk_op_emit_float(out, prm->attrs.value);
    pk_strbuf_append(out, ")");
  }
  pk_strbuf_append(out, ")\n");
  pk_strbuf_free(&guards);
  return PK_OK;
}

/* dX is the interior of dY: dX[j] = dY[j + before]. */
pk_status pk_op_grad_pad(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                         const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  const int64_t *p = prm->attrs.pads;
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
  pk_strbuf_append(out, "DY[");
  for (int d = 0; d < x->ndim; d++) {
    pk_strbuf_printf(out, "%si%d", d ? ", " : "", d);
    if (p[2 * d]) pk_strbuf_printf(out, " + %lld", (long long)p[2 * d]);
  }
  pk_strbuf_append(out, "])\n");
  (void)ctx, (void)op, (void)input;
  return PK_OK;
}

/* ---- expand ---- */

/* The target (new_shape) must be X broadcast: rank >= X's, and each dim of X (aligned at
 * the right) equal to the target's or 1. */
static pk_status check_expand(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm) {
  const pk_op_input *x = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  char sx[PK_OP_SHAPE_CHARS], st[PK_OP_SHAPE_CHARS];
  if (a->new_ndim < 1)
    return pk_op_fail(ctx, op, "needs the target shape (new_ndim %d)", a->new_ndim);
  int64_t n = 1;
  for (int d = 0; d < a->new_ndim; d++) {
    if (a->new_shape[d] < 1 || a->new_shape[d] > PK_OP_MAX_EXTENT)
      return pk_op_fail(ctx, op, "shape dim %d has extent %lld (must be 1..%lld)", d,
                        (long long)a->new_shape[d], (long long)PK_OP_MAX_EXTENT);
    if (pk_i64_mul(n, a->new_shape[d], &n))
      return pk_op_fail(ctx, op, "shape %s has more elements than int64 holds",
                        pk_op_shape_str(st, a->new_ndim, a->new_shape));
  }
  bool ok = a->new_ndim >= x->ndim;
  for (int j = 0; ok && j < x->ndim; j++) {
    int64_t t = a->new_shape[a->new_ndim - x->ndim + j];
    ok = x->shape[j] == t || x->shape[j] == 1;
  }
  if (!ok)
    return pk_op_fail(ctx, op, "cannot expand %s to %s (the target needs rank >= the "
                      "input's, and each input dim must equal the target's or be 1)",
                      pk_op_shape_str(sx, x->ndim, x->shape),
                      pk_op_shape_str(st, a->new_ndim, a->new_shape));
  return PK_OK;
}

pk_status pk_op_text_expand(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            pk_strbuf *out) {
  pk_status s = check_expand(ctx, op, prm);
  if (s != PK_OK) return s;
  const pk_op_input *x = &prm->in[0];
  const pk_op_attrs *a = &prm->attrs;
  pk_op_emit_placeholder(out, "X", x->ndim, x->shape, x->dtype);
  pk_op_emit_compute_head(out, "Y", a->new_ndim, a->new_shape);
  pk_strbuf_append(out, "X[");
  pk_op_emit_bcast_index(out, x->ndim, x->shape, a->new_ndim, 0);
  pk_strbuf_append(out, "])\n");
  return PK_OK;
}

/* dX = dY summed over the stretched and the new leading dims. */
pk_status pk_op_grad_expand(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_op_unbcast u;
  pk_op_unbcast_init(&u, x->ndim, x->shape, y->ndim, y->shape, 0);
  pk_op_unbcast_emit_axes(out, &u);
  pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
  if (u.nk) pk_strbuf_append(out, "sum(");
  pk_strbuf_append(out, "DY[");
  pk_op_unbcast_emit_index(out, &u, y->ndim, y->shape, y->ndim);
  pk_strbuf_append(out, "]");
  if (u.nk) pk_op_unbcast_emit_axis_list(out, &u);
  pk_strbuf_append(out, u.nk ? "))\n" : ")\n");
  (void)ctx, (void)op, (void)input;
  return PK_OK;
}

/* ---- where, masked_fill ---- */

/* where's result shape: C, A and B broadcast together. */
static pk_status where_shape(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, int *ndim,
                             int64_t *shape) {
  const pk_op_input *c = &prm->in[0], *a = &prm->in[1], *b = &prm->in[2];
  int nca;
  int64_t ca[PK_TE_MAX_DIMS];
  pk_status s = pk_op_broadcast(ctx, op, c->ndim, c->shape, a->ndim, a->shape, &nca, ca);
  if (s != PK_OK) return s;
  return pk_op_broadcast(ctx, op, nca, ca, b->ndim, b->shape, ndim, shape);
}

pk_status pk_op_text_where(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                           pk_strbuf *out) {
  int n;
  int64_t yshape[PK_TE_MAX_DIMS];
  pk_status s = where_shape(ctx, op, prm, &n, yshape);
  if (s != PK_OK) return s;
  static const char *const names[] = {"C", "A", "B"};
  for (int i = 0; i < 3; i++)
    pk_op_emit_placeholder(out, names[i], prm->in[i].ndim, prm->in[i].shape,
                           prm->in[i].dtype);
  pk_op_emit_compute_head(out, "Y", n, yshape);
  for (int i = 0; i < 3; i++) {
    const pk_op_input *in = &prm->in[i];
    pk_strbuf_printf(out, i == 0 ? "select(%s[" : "%s[", names[i]);
    pk_op_emit_bcast_index(out, in->ndim, in->shape, n, 0);
    pk_strbuf_append(out, i == 0 ? "] != 0, " : i == 1 ? "], " : "]))\n");
  }
  return PK_OK;
}

/* dA = dY where C is set, dB = dY where it is not, each summed over the dims that input
 * was stretched along; they read C and dY. */
pk_status pk_op_grad_where(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                           const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *c = &prm->in[0], *x = &prm->in[input];
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 0, "C", prm, y);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_op_unbcast u;
  pk_op_unbcast_init(&u, x->ndim, x->shape, y->ndim, y->shape, 0);
  pk_op_unbcast_emit_axes(out, &u);
  pk_op_emit_compute_head(out, input == 1 ? "DA" : "DB", x->ndim, x->shape);
  if (u.nk) pk_strbuf_append(out, "sum(");
  pk_strbuf_append(out, "select(C[");
  pk_op_unbcast_emit_index(out, &u, c->ndim, c->shape, y->ndim);
  pk_strbuf_append(out, input == 1 ? "] != 0, DY[" : "] != 0, 0.0, DY[");
  pk_op_unbcast_emit_index(out, &u, y->ndim, y->shape, y->ndim);
  pk_strbuf_append(out, input == 1 ? "], 0.0)" : "])");
  if (u.nk) pk_op_unbcast_emit_axis_list(out, &u);
  pk_strbuf_append(out, u.nk ? "))\n" : ")\n");
  (void)ctx, (void)op;
  return PK_OK;
}

/* The mask broadcasts to X's shape, which is the result's (masked_fill never grows X). */
static pk_status check_mask(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm) {
  const pk_op_input *x = &prm->in[0], *m = &prm->in[1];
  bool ok = m->ndim <= x->ndim;
  for (int j = 0; ok && j < m->ndim; j++)
    ok = m->shape[j] == 1 || m->shape[j] == x->shape[x->ndim - m->ndim + j];
  if (!ok) {
    char sx[PK_OP_SHAPE_CHARS], sm[PK_OP_SHAPE_CHARS];
    return pk_op_fail(ctx, op, "mask %s does not broadcast to the input's shape %s",
                      pk_op_shape_str(sm, m->ndim, m->shape),
                      pk_op_shape_str(sx, x->ndim, x->shape));
  }
  return PK_OK;
}

pk_status pk_op_text_masked_fill(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                 pk_strbuf *out) {
  pk_status s = check_mask(ctx, op, prm);
  if (s != PK_OK) return s;
  const pk_op_input *x = &prm->in[0], *m = &prm->in[1];
  pk_op_emit_placeholder(out, "X", x->ndim, x->shape, x->dtype);
  pk_op_emit_placeholder(out, "M", m->ndim, m->shape, m->dtype);
  pk_op_emit_compute_head(out, "Y", x->ndim, x->shape);
  pk_strbuf_append(out, "select(M[");
  pk_op_emit_bcast_index(out, m->ndim, m->shape, x->ndim, 0);
  pk_strbuf_append(out, "] != 0, ");
  pk_op_emit_float(out, prm->attrs.value);
  pk_strbuf_append(out, ", ");
  pk_op_emit_read_all(out, "X", x->ndim);
  pk_strbuf_append(out, "))\n");
  return PK_OK;
}

/* dX = dY where the mask is clear, 0 where the fill replaced X. */
pk_status pk_op_grad_masked_fill(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                 const pk_te_tensor *y, int input, pk_op_grad *g,
                                 pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0], *m = &prm->in[1];
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 1, "M", prm, y);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
  pk_strbuf_append(out, "select(M[");
  pk_op_emit_bcast_index(out, m->ndim, m->shape, x->ndim, 0);
  pk_strbuf_append(out, "] != 0, 0.0, ");
  pk_op_emit_read_all(out, "DY", x->ndim);
  pk_strbuf_append(out, "))\n");
  (void)ctx, (void)op, (void)input;
  return PK_OK;
}
