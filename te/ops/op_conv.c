/* op_conv.c — conv2d, NCHW: stride, per-side padding (a select guard reading 0.0),
 * dilation and groups; then its gradients, dX (a transposed convolution; with stride, dense
 * phase convolutions interleaved) and dW. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- dX of a strided convolution as dense phase convolutions ----
 * Along one spatial dim, input row x is read by window element r of output o when
 * x + pad = o * s + r * d. The transposed-window form visits every r for every x and keeps
 * the 1 in s whose o is whole. Instead the rows are split by phase t = x mod s (x = t + s q):
 * the r that reach phase t are those with r * d = t + pad (mod s), an arithmetic
 * progression r = r0 + step * j (step = s / gcd(s, d)), and for them
 * o = q + b - j * dg (b = (t + pad - r0 * d) / s, dg = d / gcd(s, d)), affine with no
 * remainder to test. Each phase is then a dense correlation of dY with the sub-sampled,
 * flipped kernel, writing rows t, t + s, ... of dX; a last compute interleaves the phases.
 * A dim with d = 1 and k = s ("direct", patches) needs no phases: r = (x + pad) mod s is the
 * only window element reaching x and o = (x + pad) / s. With k < s that form also holds
 * (r < k guarded) but visits the s - k rows of each s that no window reads, so it serves
 * only where the phases would be too many. */

/* More phases than this keep the transposed-window form (the program would grow a stage
 * per phase; strides up to 4 x 4 split). */
#define DX_MAX_PHASES 16

typedef struct dx_phase {
  int64_t t;          /* rows t, t + s, ...; -1: every row (direct, or stride 1) */
  int64_t rows;       /* the phase tensor's extent along the dim */
  int64_t r0, step;   /* window elements r0 + step * j, j in [jlo, jhi) */
  int64_t jlo, jhi;
  int64_t b, dg;      /* dY row q + b - j * dg */
  bool guard_lo, guard_hi; /* that row can fall below 0 / at or past the output's end */
} dx_phase;

typedef struct dx_dim {
  const pk_op_window *w;
  bool direct;
  bool guard_k, guard_out; /* direct: (x + pad) mod s < k and (x + pad) / s < out can fail */
  int nphases;
  dx_phase ph[DX_MAX_PHASES];
} dx_dim;

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

/* Phase t of w (t < min(s, in)); false when no window element reaches it. */
static bool dx_phase_init(const pk_op_window *w, int64_t t, dx_phase *ph) {
  int64_t a = (t + w->pad_lo) % w->s, r0 = -1;
  for (int64_t r = 0; r < w->k && r < w->s && r0 < 0; r++) /* solutions repeat every s */
    if (r * w->d % w->s == a) r0 = r;
  if (r0 < 0) return false;
  int64_t g = gcd64(w->s, w->d);
  *ph = (dx_phase){.t = w->s > 1 ? t : -1, .rows = (w->in - t + w->s - 1) / w->s, .r0 = r0,
                   .step = w->s / g, .dg = w->d / g};
  ph->b = (t + w->pad_lo - r0 * w->d) / w->s; /* exact */
  /* keep the j whose dY row is in range for some q: q + b - j * dg in [0, out) */
  int64_t j_last = (w->k - 1 - r0) / ph->step;
  int64_t top = ph->rows - 1 + ph->b;
  if (top < 0) return false;
  if (top / ph->dg < j_last) j_last = top / ph->dg;
  ph->jlo = -floor_div(w->out - 1 - ph->b, ph->dg); /* ceil((b - out + 1) / dg) */
  if (ph->jlo < 0) ph->jlo = 0;
  if (ph->jlo > j_last) return false;
  ph->jhi = j_last + 1;
  ph->guard_lo = ph->b - j_last * ph->dg < 0;
  ph->guard_hi = top - ph->jlo * ph->dg > w->out - 1;
  return true;
}

/* loose: the direct form also for k < s, where rows no window element reaches are
 * visited and guarded to 0 (the phase form skips them, at a stage per phase). */
static void dx_dim_init(dx_dim *dd, const pk_op_window *w, bool loose) {
  memset(dd, 0, sizeof *dd);
  dd->w = w;
  if (w->s > 1 && w->d == 1 && (w->k == w->s || (loose && w->k < w->s))) {
    dd->direct = true;
    dd->nphases = 1;
    dd->ph[0] = (dx_phase){.t = -1, .rows = w->in};
    dd->guard_k = w->k < w->s;
    dd->guard_out = (w->in - 1 + w->pad_lo) / w->s > w->out - 1;
    return;
  }
  int64_t nt = w->s < w->in ? w->s : w->in;
  for (int64_t t = 0; t < nt && dd->nphases <= DX_MAX_PHASES; t++) {
    dx_phase ph;
    if (!dx_phase_init(w, t, &ph)) continue;
    if (dd->nphases < DX_MAX_PHASES) dd->ph[dd->nphases] = ph;
    dd->nphases++;
  }
}

/* The dY row (x: the phase tensor's axis, j: its reduce axis) and the window element. */
static void dx_emit_source(pk_strbuf *b, const dx_dim *dd, const dx_phase *ph, const char *x,
                           const char *j) {
  const pk_op_window *w = dd->w;
  if (dd->direct) {
    if (w->pad_lo) pk_strbuf_printf(b, "(%s + %lld) / %lld", x, (long long)w->pad_lo, (long long)w->s);
    else pk_strbuf_printf(b, "%s / %lld", x, (long long)w->s);
    return;
  }
  pk_strbuf_append(b, x);
  if (ph->b) pk_strbuf_printf(b, " %c %lld", ph->b > 0 ? '+' : '-', (long long)llabs(ph->b));
  pk_strbuf_printf(b, " - %s", j);
  if (ph->dg != 1) pk_strbuf_printf(b, " * %lld", (long long)ph->dg);
}

static void dx_emit_element(pk_strbuf *b, const dx_dim *dd, const dx_phase *ph, const char *x,
                            const char *j) {
  const pk_op_window *w = dd->w;
  if (dd->direct) {
    if (w->pad_lo) pk_strbuf_printf(b, "(%s + %lld) %% %lld", x, (long long)w->pad_lo, (long long)w->s);
    else pk_strbuf_printf(b, "%s %% %lld", x, (long long)w->s);
    return;
  }
  if (ph->r0) pk_strbuf_printf(b, "%lld + ", (long long)ph->r0);
  pk_strbuf_append(b, j);
  if (ph->step != 1) pk_strbuf_printf(b, " * %lld", (long long)ph->step);
}

/* The guards of one dim that can fail, after " && " unless *first. */
static void dx_emit_guards(pk_strbuf *b, const dx_dim *dd, const dx_phase *ph, const char *x,
                           const char *j, bool *first) {
  const pk_op_window *w = dd->w;
  bool lo = dd->direct ? false : ph->guard_lo;
  bool hi = dd->direct ? dd->guard_out : ph->guard_hi;
  if (dd->direct && dd->guard_k) {
    pk_strbuf_append(b, *first ? "" : " && ");
    dx_emit_element(b, dd, ph, x, j);
    pk_strbuf_printf(b, " < %lld", (long long)w->k);
    *first = false;
  }
  if (lo) {
    pk_strbuf_append(b, *first ? "" : " && ");
    dx_emit_source(b, dd, ph, x, j);
    pk_strbuf_append(b, " >= 0");
    *first = false;
  }
  if (hi) {
    pk_strbuf_append(b, *first ? "" : " && ");
    dx_emit_source(b, dd, ph, x, j);
    pk_strbuf_printf(b, " < %lld", (long long)w->out);
    *first = false;
  }
}

/* In the interleaving compute: which rows of dX phase ph holds, and where row x sits in it. */
static void dx_emit_pick(pk_strbuf *b, const dx_dim *dd, const dx_phase *ph, const char *x,
                         bool *first) {
  const pk_op_window *w = dd->w;
  if (ph->t < 0) return;
  pk_strbuf_printf(b, "%s%s %% %lld == %lld", *first ? "" : " && ", x, (long long)w->s,
                   (long long)ph->t);
  *first = false;
  if ((w->in - 1) / w->s > ph->rows - 1) /* proves the read below in bounds */
    pk_strbuf_printf(b, " && %s / %lld < %lld", x, (long long)w->s, (long long)ph->rows);
}

static void dx_emit_row(pk_strbuf *b, const dx_phase *ph, const pk_op_window *w, const char *x) {
  if (ph->t < 0) pk_strbuf_append(b, x);
  else pk_strbuf_printf(b, "%s / %lld", x, (long long)w->s);
}

/* Writes dX as phase computes P<n> and their interleaving, after "k0 = reduce_axis(C/g)"
 * (the caller's). Returns false, having written nothing, when the form does not apply: no
 * stride, too many phases, or no input element read at all. oc: the output channel. */
static bool emit_dx_phases(pk_strbuf *out, const pk_op_input *x, const pk_op_window *wh,
                           const pk_op_window *ww, int64_t groups, int64_t cg, const char *oc) {
  if (wh->s == 1 && ww->s == 1) return false;
  dx_dim dims[2], *dh = &dims[0], *dw = &dims[1];
  dx_dim_init(dh, wh, false);
  dx_dim_init(dw, ww, false);
  if (dh->nphases * dw->nphases > DX_MAX_PHASES) { /* small kernels, large strides */
    dx_dim_init(dh, wh, true);
    dx_dim_init(dw, ww, true);
  }
  int nphases = dh->nphases * dw->nphases;
  bool ok = nphases >= 1 && nphases <= DX_MAX_PHASES;
  /* direct in both dims: the one "phase" is dX itself */
  bool whole = nphases == 1 && dh->ph[0].t < 0 && dw->ph[0].t < 0;
  for (int p = 0; ok && p < nphases; p++) {
    const dx_phase *ph = &dh->ph[p / dw->nphases], *pw = &dw->ph[p % dw->nphases];
    char jh[16], jw[16];
    snprintf(jh, sizeof jh, "a%d", p);
    snprintf(jw, sizeof jw, "b%d", p);
    if (!dh->direct)
      pk_strbuf_printf(out, "%s = reduce_axis(%lld, %lld)\n", jh, (long long)ph->jlo, (long long)ph->jhi);
    if (!dw->direct)
      pk_strbuf_printf(out, "%s = reduce_axis(%lld, %lld)\n", jw, (long long)pw->jlo, (long long)pw->jhi);
    int64_t shape[4] = {x->shape[0], x->shape[1], ph->rows, pw->rows};
    if (whole) pk_strbuf_append(out, "DX = compute(");
    else pk_strbuf_printf(out, "P%d = compute(", p);
    pk_op_emit_shape(out, 4, shape);
    pk_strbuf_append(out, ", (i0, i1, i2, i3) => sum(");
    pk_strbuf guard;
    pk_strbuf_init(&guard);
    bool first = true;
    dx_emit_guards(&guard, dh, ph, "i2", jh, &first);
    dx_emit_guards(&guard, dw, pw, "i3", jw, &first);
    if (!first) pk_strbuf_printf(out, "select(%s, ", guard.data);
    pk_strbuf_free(&guard);
    pk_strbuf_printf(out, "DY[i0, %s, ", oc);
    dx_emit_source(out, dh, ph, "i2", jh);
    pk_strbuf_append(out, ", ");
    dx_emit_source(out, dw, pw, "i3", jw);
    pk_strbuf_printf(out, "] * W[%s, ", oc);
    if (groups == 1) pk_strbuf_append(out, "i1");
    else if (cg == 1) pk_strbuf_append(out, "0");
    else pk_strbuf_printf(out, "i1 %% %lld", (long long)cg);
    pk_strbuf_append(out, ", ");
    dx_emit_element(out, dh, ph, "i2", jh);
    pk_strbuf_append(out, ", ");
    dx_emit_element(out, dw, pw, "i3", jw);
    pk_strbuf_append(out, "]");
    if (!first) pk_strbuf_append(out, ", 0.0)");
    pk_strbuf_append(out, ", k0");
    if (!dh->direct) pk_strbuf_printf(out, ", %s", jh);
    if (!dw->direct) pk_strbuf_printf(out, ", %s", jw);
    pk_strbuf_append(out, "))\n");
  }
  if (ok && !whole) {
    /* dX[x] = the phase holding row x, or 0 for rows no window reads; not whole, so some
     * dim splits into phases and each has a condition */
    pk_op_emit_compute_head(out, "DX", 4, x->shape);
    for (int p = 0; p < nphases; p++) {
      const dx_phase *ph = &dh->ph[p / dw->nphases], *pw = &dw->ph[p % dw->nphases];
      pk_strbuf cond;
      pk_strbuf_init(&cond);
      bool first = true;
      dx_emit_pick(&cond, dh, ph, "i2", &first);
      dx_emit_pick(&cond, dw, pw, "i3", &first);
      PK_ASSERT(!first);
      pk_strbuf_printf(out, "select(%s, ", cond.data);
      pk_strbuf_free(&cond);
      pk_strbuf_printf(out, "P%d[i0, i1, ", p);
      dx_emit_row(out, ph, wh, "i2");
      pk_strbuf_append(out, ", ");
      dx_emit_row(out, pw, ww, "i3");
      pk_strbuf_append(out, "], ");
    }
    pk_strbuf_append(out, "0.0");
    for (int i = 0; i < nphases; i++) pk_strbuf_append(out, ")");
    pk_strbuf_append(out, ")\n");
  }
  return ok;
}

/* dX[n, c, h, w] = sum over the output channels o of c's group (k0) and window elements
 * (k1, k2) of dY[n, o, oh, ow] * W[o, c mod C/g, k1, k2], where (oh, ow) is the output
 * whose window element (k1, k2) reads (h, w): oh = (h + pad - k1 * d) / s when that is
 * whole and in range (guards; rows no window reads get 0).
 * dW[o, c, r, q] = sum over n, oh, ow (k0, k1, k2) of X at (r, q)'s read * dY[n, o, oh, ow]:
 * the forward's sum with the roles of window element and output position swapped. */
static pk_status grad_conv2d(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                             const pk_te_tensor *y, int input, bool phases, pk_op_grad *g,
                             pk_strbuf *out) {
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
  if (phases && emit_dx_phases(out, x, &wh, &ww, groups, cg, oc.data)) {
    pk_strbuf_free(&oc);
    return PK_OK;
  }
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

pk_status pk_op_grad_conv2d(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  return grad_conv2d(ctx, op, prm, y, input, true, g, out);
}

pk_status pk_op_grad_conv2d_gather(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                   const pk_te_tensor *y, int input, pk_op_grad *g,
                                   pk_strbuf *out) {
  return grad_conv2d(ctx, op, prm, y, input, false, g, out);
}
