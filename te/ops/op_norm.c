/* op_norm.c — normalizations (batch_norm, layer_norm, rms_norm, group_norm), their
 * gradients, and batch_norm_stats (the in-place update of batch norm's running stats).
 *
 * The four ops share one shape of program, so each is described by a *view* (norm_view):
 * which elements of X form one statistic (a row of layer_norm, a channel of batch_norm, a
 * (sample, group) of group_norm), and how X, the statistics and the affine params index
 * each other. The forward program keeps its statistics as stages (MEAN, VAR, RSTD; rms_norm:
 * MS, RR) so that gradients read them (pk_op_grad_add_stage) instead of recomputing. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "op_impl.h"

#define NORM_IDX 256 /* index strings: at most 8 dims of "i1 * 2147483647 + @0" */

/* Indices are written with "@j" for the j-th reduce axis of the compute they sit in;
 * emit_sub renumbers them to the program-wide k<base + j> (a reduce axis belongs to one
 * compute). Other indices are the compute's own axes i<d>. */
typedef struct norm_view {
  int sr;                        /* statistics: rank and shape */
  int64_t sshape[PK_TE_MAX_DIMS];
  int nks;                       /* reduce axes of a statistics compute, and extents */
  int64_t ks[PK_TE_MAX_DIMS];
  char x_at_s[NORM_IDX];         /* X at a statistics compute's point (over @) */
  char p_at_s[NORM_IDX];         /* the affine param there */
  char s_at_x[NORM_IDX];         /* the statistic of an X-shaped compute's point */
  char p_at_x[NORM_IDX];         /* the param there */
  int pr;                        /* affine params: rank and shape */
  int64_t pshape[PK_TE_MAX_DIMS];
  int nkp;                       /* reduce axes of a param-gradient compute (may be 0) */
  int64_t kp[PK_TE_MAX_DIMS];
  char x_at_p[NORM_IDX];         /* X at a param-shaped compute's point (over @) */
  char s_at_p[NORM_IDX];         /* the statistic there */
  double m;                      /* elements per statistic (exact below 2^53) */
} norm_view;

static void cat(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cat(char *dst, const char *fmt, ...) {
  size_t n = strlen(dst);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst + n, NORM_IDX - n, fmt, ap);
  va_end(ap);
}

static const char *sep(const char *s) { return s[0] ? ", " : ""; }

static double eps_of(const pk_op_attrs *a) { return a->eps != 0 ? a->eps : 1e-5; }
static double momentum_of(const pk_op_attrs *a) { return a->momentum != 0 ? a->momentum : 0.1; }

/* Checks that a param (gamma, beta, running stat) has shape `want`. */
static pk_status check_param(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, int i,
                             const char *what, int nd, const int64_t *want) {
  const pk_op_input *p = &prm->in[i];
  bool same = p->ndim == nd;
  for (int d = 0; same && d < nd; d++) same = p->shape[d] == want[d];
  char sp[PK_OP_SHAPE_CHARS], sw[PK_OP_SHAPE_CHARS];
  if (!same)
    return pk_op_fail(ctx, op, "%s (input %d) has shape %s; it must be %s", what, i,
                      pk_op_shape_str(sp, p->ndim, p->shape), pk_op_shape_str(sw, nd, want));
  return PK_OK;
}

/* batch_norm, batch_norm_stats: one statistic per channel (dim 1), over N and the
 * spatial dims. */
static pk_status view_channels(pk_ctx *ctx, pk_op_kind op, const pk_op_input *x,
                               norm_view *v) {
  if (x->ndim < 2)
    return pk_op_fail(ctx, op, "input has rank %d; it must be (N, C, ...) of rank >= 2",
                      x->ndim);
  memset(v, 0, sizeof *v);
  v->sr = v->pr = 1;
  v->sshape[0] = v->pshape[0] = x->shape[1];
  v->m = 1;
  for (int d = 0, k = 0; d < x->ndim; d++) {
    if (d == 1) {
      cat(v->x_at_s, "%si0", sep(v->x_at_s));
      continue;
    }
    v->ks[k] = x->shape[d];
    v->m *= (double)x->shape[d];
    cat(v->x_at_s, "%s@%d", sep(v->x_at_s), k++);
  }
  v->nks = v->nkp = x->ndim - 1;
  memcpy(v->kp, v->ks, sizeof v->ks);
  strcpy(v->x_at_p, v->x_at_s);
  strcpy(v->p_at_s, "i0");
  strcpy(v->s_at_x, "i1");
  strcpy(v->p_at_x, "i1");
  strcpy(v->s_at_p, "i0");
  return PK_OK;
}

/* layer_norm, rms_norm: one statistic per row of the last k dims; the statistics keep
 * those dims with extent 1, the params are shaped like them. */
static pk_status view_rows(pk_ctx *ctx, pk_op_kind op, const pk_op_input *x, int attr_k,
                           norm_view *v) {
  int k = attr_k ? attr_k : 1;
  if (k < 1 || k > x->ndim)
    return pk_op_fail(ctx, op, "normalized_ndim %d out of range for an input of rank %d "
                      "(must be 1..%d)", attr_k, x->ndim, x->ndim);
  memset(v, 0, sizeof *v);
  int outer = x->ndim - k;
  v->sr = x->ndim;
  v->pr = k;
  v->nks = k;
  v->nkp = outer;
  v->m = 1;
  for (int d = 0; d < x->ndim; d++) {
    bool norm = d >= outer;
    int j = norm ? d - outer : d;
    v->sshape[d] = norm ? 1 : x->shape[d];
    if (norm) {
      v->ks[j] = v->pshape[j] = x->shape[d];
      v->m *= (double)x->shape[d];
      cat(v->x_at_s, "%s@%d", sep(v->x_at_s), j);
      cat(v->p_at_s, "%s@%d", sep(v->p_at_s), j);
      cat(v->s_at_x, "%s0", sep(v->s_at_x));
      cat(v->p_at_x, "%si%d", sep(v->p_at_x), d);
      cat(v->x_at_p, "%si%d", sep(v->x_at_p), j);
      cat(v->s_at_p, "%s0", sep(v->s_at_p));
    } else {
      v->kp[j] = x->shape[d];
      cat(v->x_at_s, "%si%d", sep(v->x_at_s), d);
      cat(v->s_at_x, "%si%d", sep(v->s_at_x), d);
      cat(v->x_at_p, "%s@%d", sep(v->x_at_p), j);
      cat(v->s_at_p, "%s@%d", sep(v->s_at_p), j);
    }
  }
  return PK_OK;
}

/* group_norm: one statistic per (sample, group of C / groups consecutive channels), over
 * the group's channels and the spatial dims; statistics (N, groups), params (C,). */
static pk_status view_groups(pk_ctx *ctx, pk_op_kind op, const pk_op_input *x, int64_t groups,
                             norm_view *v) {
  if (x->ndim < 2)
    return pk_op_fail(ctx, op, "input has rank %d; it must be (N, C, ...) of rank >= 2",
                      x->ndim);
  int64_t g = groups ? groups : 1, c = x->shape[1];
  if (c % g != 0)
    return pk_op_fail(ctx, op, "groups %lld does not divide the %lld channels",
                      (long long)g, (long long)c);
  int64_t cpg = c / g;
  memset(v, 0, sizeof *v);
  v->sr = 2;
  v->sshape[0] = x->shape[0];
  v->sshape[1] = g;
  v->pr = 1;
  v->pshape[0] = c;
  v->nks = v->nkp = x->ndim - 1;
  v->ks[0] = cpg;
  v->kp[0] = x->shape[0];
  v->m = (double)cpg;
  cat(v->x_at_s, "i0, i1 * %lld + @0", (long long)cpg);
  cat(v->x_at_p, "@0, i0");
  for (int d = 2; d < x->ndim; d++) {
    v->ks[d - 1] = v->kp[d - 1] = x->shape[d];
    v->m *= (double)x->shape[d];
    cat(v->x_at_s, ", @%d", d - 1);
    cat(v->x_at_p, ", @%d", d - 1);
  }
  cat(v->p_at_s, "i1 * %lld + @0", (long long)cpg);
  cat(v->s_at_x, "i0, i1 / %lld", (long long)cpg);
  strcpy(v->p_at_x, "i1");
  cat(v->s_at_p, "@0, i0 / %lld", (long long)cpg);
  return PK_OK;
}

/* The op's view of its X. */
static pk_status norm_view_of(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                              norm_view *v) {
  const pk_op_input *x = &prm->in[0];
  switch (op) {
  case PK_OP_LAYER_NORM:
  case PK_OP_RMS_NORM: return view_rows(ctx, op, x, prm->attrs.normalized_ndim, v);
  case PK_OP_GROUP_NORM: return view_groups(ctx, op, x, prm->attrs.groups, v);
  default: return view_channels(ctx, op, x, v);
  }
}

/* ---- writing TE text ---- */

/* s with each "@j" written as k<base + j>. */
static void emit_sub(pk_strbuf *out, const char *s, int base) {
  for (; *s; s++) {
    if (*s == '@') {
      int j = 0;
      while (s[1] >= '0' && s[1] <= '9') j = j * 10 + (*++s - '0');
      pk_strbuf_printf(out, "k%d", base + j);
    } else {
      pk_strbuf_appendn(out, s, 1);
    }
  }
}

/* "T[<idx>]" with @ renumbered from base. */
static void emit_read(pk_strbuf *out, const char *t, const char *idx, int base) {
  pk_strbuf_printf(out, "%s[", t);
  emit_sub(out, idx, base);
  pk_strbuf_append(out, "]");
}

/* "T[i0, i1, ...]" over a compute's own n axes. */
static void emit_self(pk_strbuf *out, const char *t, int n) { pk_op_emit_read_all(out, t, n); }

/* Declares reduce axes k<base> .. k<base + n - 1>. */
static void emit_axes(pk_strbuf *out, int base, int n, const int64_t *ext) {
  for (int j = 0; j < n; j++) pk_op_emit_reduce_axis(out, base + j, ext[j]);
}

/* ", k<base>, ..." and the closing parens of "compute(..., sum(...". */
static void emit_sum_close(pk_strbuf *out, int base, int n) {
  for (int j = 0; j < n; j++) pk_strbuf_printf(out, ", k%d", base + j);
  pk_strbuf_append(out, "))\n");
}

static void emit_placeholders(pk_strbuf *out, const pk_op_params *prm, const char *const *names) {
  for (int i = 0; i < prm->ninputs; i++)
    pk_op_emit_placeholder(out, names[i], prm->in[i].ndim, prm->in[i].shape, prm->in[i].dtype);
}

/* MEAN and VAR (biased: divided by m) of X over the view's statistics; reduce axes from
 * base. `unbiased`: VAR divides by m - 1 (batch_norm_stats' running variance). */
static void emit_mean_var(pk_strbuf *out, const norm_view *v, int base, const char *mean,
                          const char *var, bool unbiased) {
  emit_axes(out, base, v->nks, v->ks);
  emit_axes(out, base + v->nks, v->nks, v->ks);
  pk_op_emit_compute_head(out, mean, v->sr, v->sshape);
  pk_strbuf_append(out, "sum(");
  emit_read(out, "X", v->x_at_s, base);
  pk_strbuf_append(out, " / ");
  pk_op_emit_float(out, v->m);
  emit_sum_close(out, base, v->nks);
  int b2 = base + v->nks;
  pk_op_emit_compute_head(out, var, v->sr, v->sshape);
  pk_strbuf_append(out, "sum((");
  emit_read(out, "X", v->x_at_s, b2);
  pk_strbuf_append(out, " - ");
  emit_self(out, mean, v->sr);
  pk_strbuf_append(out, ") * (");
  emit_read(out, "X", v->x_at_s, b2);
  pk_strbuf_append(out, " - ");
  emit_self(out, mean, v->sr);
  pk_strbuf_append(out, ") / ");
  pk_op_emit_float(out, unbiased ? v->m - 1 : v->m);
  emit_sum_close(out, b2, v->nks);
}

/* "R = compute(<stats>, (...) => rsqrt(V[...] + eps))" */
static void emit_rstd(pk_strbuf *out, const norm_view *v, const char *r, const char *var,
                      double eps) {
  pk_op_emit_compute_head(out, r, v->sr, v->sshape);
  pk_strbuf_append(out, "rsqrt(");
  emit_self(out, var, v->sr);
  pk_strbuf_append(out, " + ");
  pk_op_emit_float(out, eps);
  pk_strbuf_append(out, "))\n");
}

/* batch_norm with running stats: its whole forward is an affine map per channel. */
static bool frozen(pk_op_kind op, const pk_op_attrs *a) {
  return op == PK_OP_BATCH_NORM && a->use_running_stats;
}

/* Checks the params' shapes and the op's own rules; fills v. */
static pk_status norm_check(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                            norm_view *v) {
  pk_status s = norm_view_of(ctx, op, prm, v);
  if (s != PK_OK) return s;
  const pk_op_attrs *a = &prm->attrs;
  if (op == PK_OP_BATCH_NORM || op == PK_OP_BATCH_NORM_STATS) {
    if (a->momentum > 1)
      return pk_op_fail(ctx, op, "momentum %g out of range (must be in [0, 1])", a->momentum);
    /* PyTorch refuses it too: the unbiased running variance would divide by zero */
    if ((op == PK_OP_BATCH_NORM_STATS || !a->use_running_stats) && v->m < 2)
      return pk_op_fail(ctx, op, "batch statistics need more than 1 value per channel "
                        "(N * spatial = %.0f)", v->m);
  }
  int nparams = prm->ninputs;
  if (op == PK_OP_BATCH_NORM) { /* variadic only for the training graph's H */
    if (prm->ninputs < 5)
      return pk_op_fail(ctx, op, "takes 5 inputs (X, gamma, beta, running_mean, running_var), "
                        "got %d", prm->ninputs);
    const pk_op_input *h = &prm->in[5];
    char sh[PK_OP_SHAPE_CHARS];
    if (prm->ninputs == 6 && (h->ndim != 1 || h->shape[0] != 4))
      return pk_op_fail(ctx, op, "input 5 (H) has shape %s; it must be (4,)",
                        pk_op_shape_str(sh, h->ndim, h->shape));
    nparams = 5;
  }
  static const char *const names[] = {"gamma", "beta", "running_mean", "running_var"};
  int first = op == PK_OP_BATCH_NORM_STATS ? 1 : 0;
  for (int i = 1; i < nparams; i++) {
    s = check_param(ctx, op, prm, i, names[i - 1 + first * 2], v->pr, v->pshape);
    if (s != PK_OK) return s;
  }
  return PK_OK;
}

/* "select(H[3] < 0.0, R[idx], B[idx])": the running stat while the executor evaluates
 * (H[3] = -1), the batch's while it trains (H[3] >= 0: the accumulation micro-step); just B
 * without H. */
static void emit_stat(pk_strbuf *out, bool h, const char *running, const char *batch,
                      const char *idx) {
  if (h) {
    pk_strbuf_append(out, "select(H[3] < 0.0, ");
    emit_read(out, running, idx, 0);
    pk_strbuf_append(out, ", ");
  }
  emit_read(out, batch, idx, 0);
  if (h) pk_strbuf_append(out, ")");
}

/* ---- forward ---- */

/* Stages: MEAN (0), VAR (1), RSTD (2), Y (frozen batch_norm: MEAN and VAR are the running
 * stats); rms_norm: MS (0), RR (1), Y. A training-mode batch_norm given the training step's
 * H (a 6th input) normalizes with the running stats while H[3] < 0 (evaluation: the
 * same kernel, so the eval plan needs no nodes of its own); MEAN, VAR stay the batch's. */
pk_status pk_op_text_norm(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                          pk_strbuf *out) {
  norm_view v;
  pk_status s = norm_check(ctx, op, prm, &v);
  if (s != PK_OK) return s;
  const pk_op_input *x = &prm->in[0];
  static const char *const names[] = {"X", "G", "B", "RM", "RV", "H"};
  emit_placeholders(out, prm, names);
  double eps = eps_of(&prm->attrs);
  bool h = prm->ninputs == 6 && !frozen(op, &prm->attrs);
  if (op == PK_OP_RMS_NORM) {
    emit_axes(out, 0, v.nks, v.ks);
    pk_op_emit_compute_head(out, "MS", v.sr, v.sshape);
    pk_strbuf_append(out, "sum(");
    emit_read(out, "X", v.x_at_s, 0);
    pk_strbuf_append(out, " * ");
    emit_read(out, "X", v.x_at_s, 0);
    pk_strbuf_append(out, " / ");
    pk_op_emit_float(out, v.m);
    emit_sum_close(out, 0, v.nks);
    emit_rstd(out, &v, "RR", "MS", eps);
    pk_op_emit_compute_head(out, "Y", x->ndim, x->shape);
    pk_op_emit_read_all(out, "X", x->ndim);
    pk_strbuf_append(out, " * ");
    emit_read(out, "RR", v.s_at_x, 0);
    pk_strbuf_append(out, " * ");
    emit_read(out, "G", v.p_at_x, 0);
    pk_strbuf_append(out, ")\n");
    return PK_OK;
  }
  if (frozen(op, &prm->attrs)) {
    /* the same stages as training mode (copies of the running stats), so that switching
     * a layer's mode keeps the graph node's outputs */
    pk_op_emit_compute_head(out, "MEAN", 1, v.sshape);
    pk_strbuf_append(out, "RM[i0])\n");
    pk_op_emit_compute_head(out, "VAR", 1, v.sshape);
    pk_strbuf_append(out, "RV[i0])\n");
    emit_rstd(out, &v, "RSTD", "VAR", eps);
  } else {
    emit_mean_var(out, &v, 0, "MEAN", "VAR", false);
    if (h) { /* batch_norm: statistics are (C,) */
      pk_op_emit_compute_head(out, "RSTD", 1, v.sshape);
      pk_strbuf_append(out, "rsqrt(");
      emit_stat(out, h, "RV", "VAR", "i0");
      pk_strbuf_append(out, " + ");
      pk_op_emit_float(out, eps);
      pk_strbuf_append(out, "))\n");
    } else {
      emit_rstd(out, &v, "RSTD", "VAR", eps);
    }
  }
  pk_op_emit_compute_head(out, "Y", x->ndim, x->shape);
  pk_strbuf_append(out, "(");
  pk_op_emit_read_all(out, "X", x->ndim);
  pk_strbuf_append(out, " - ");
  emit_stat(out, h, "RM", "MEAN", v.s_at_x);
  pk_strbuf_append(out, ") * ");
  emit_read(out, "RSTD", v.s_at_x, 0);
  pk_strbuf_append(out, " * ");
  emit_read(out, "G", v.p_at_x, 0);
  pk_strbuf_append(out, " + ");
  emit_read(out, "B", v.p_at_x, 0);
  pk_strbuf_append(out, ")\n");
  return PK_OK;
}

/* ---- gradients ----
 * With xh = (x - mean) * rstd and y = xh * g + b, per statistic of m elements:
 *   dX = rstd * (dY g - mean(dY g) - (x - mean) * rstd^2 * mean(dY g (x - mean)))
 *   dG = sum over the other dims of dY * xh;  dB = sum of dY.
 * rms_norm (y = x * rr * g, rr = rsqrt(mean(x^2) + eps)):
 *   dX = rr * (dY g - x * rr^2 * mean(dY g x));  dG = sum of dY * x * rr.
 * Frozen batch_norm is affine: dX = dY * g * rstd (its dG and dB are as above). */

/* "DG = compute(<param shape>, (...) => sum(<body>, ...))" with body written by the caller
 * between emit_param_head and emit_param_close (no sum when nothing is reduced:
 * layer_norm over every dim). */
static void emit_param_head(pk_strbuf *out, const norm_view *v, const char *name) {
  emit_axes(out, 0, v->nkp, v->kp);
  pk_op_emit_compute_head(out, name, v->pr, v->pshape);
  if (v->nkp) pk_strbuf_append(out, "sum(");
}

static void emit_param_close(pk_strbuf *out, const norm_view *v) {
  if (v->nkp) emit_sum_close(out, 0, v->nkp);
  else pk_strbuf_append(out, ")\n");
}

/* The (x - mean) * rstd of a param-gradient compute's point: "(X[..] - M[..]) * R[..]" */
static void emit_xhat_at_p(pk_strbuf *out, const norm_view *v, const char *m, const char *r) {
  pk_strbuf_append(out, "(");
  emit_read(out, "X", v->x_at_p, 0);
  pk_strbuf_append(out, " - ");
  emit_read(out, m, v->s_at_p, 0);
  pk_strbuf_append(out, ") * ");
  emit_read(out, r, v->s_at_p, 0);
}

/* "DY[x] * G[p]" at a statistics compute's point (@ from base). */
static void emit_dyg_at_s(pk_strbuf *out, const norm_view *v, int base) {
  emit_read(out, "DY", v->x_at_s, base);
  pk_strbuf_append(out, " * ");
  emit_read(out, "G", v->p_at_s, base);
}

static pk_status grad_rms(const pk_op_params *prm, const pk_te_tensor *y, int input,
                          const norm_view *v, pk_op_grad *g, pk_strbuf *out) {
  const pk_op_input *x = &prm->in[0];
  pkrt_dtype dt = x->dtype;
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 0, "X", prm, y);
  if (input == 0) pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 1, "G", prm, y);
  pk_op_grad_add_stage(g, out, 1, "RR", v->sr, v->sshape, dt);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  if (input == 1) {
    emit_param_head(out, v, "DG");
    emit_read(out, "DY", v->x_at_p, 0);
    pk_strbuf_append(out, " * ");
    emit_read(out, "X", v->x_at_p, 0);
    pk_strbuf_append(out, " * ");
    emit_read(out, "RR", v->s_at_p, 0);
    emit_param_close(out, v);
    return PK_OK;
  }
  emit_axes(out, 0, v->nks, v->ks);
  pk_op_emit_compute_head(out, "SA", v->sr, v->sshape);
  pk_strbuf_append(out, "sum(");
  emit_dyg_at_s(out, v, 0);
  pk_strbuf_append(out, " * ");
  emit_read(out, "X", v->x_at_s, 0);
  pk_strbuf_append(out, " / ");
  pk_op_emit_float(out, v->m);
  emit_sum_close(out, 0, v->nks);
  pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
  emit_read(out, "RR", v->s_at_x, 0);
  pk_strbuf_append(out, " * (");
  pk_op_emit_read_all(out, "DY", x->ndim);
  pk_strbuf_append(out, " * ");
  emit_read(out, "G", v->p_at_x, 0);
  pk_strbuf_append(out, " - ");
  pk_op_emit_read_all(out, "X", x->ndim);
  for (int i = 0; i < 2; i++) {
    pk_strbuf_append(out, " * ");
    emit_read(out, "RR", v->s_at_x, 0);
  }
  pk_strbuf_append(out, " * ");
  emit_read(out, "SA", v->s_at_x, 0);
  pk_strbuf_append(out, "))\n");
  return PK_OK;
}

/* Training-mode batch_norm's dX. gamma is per channel, as the statistics are, so it
 * comes out of the sums: the stages are SDY = sum(dY) and SDYX = sum(dY (x - mean)), which
 * are exactly dB and dG / rstd — the share_stats pass (graph/passes/share_stats.c) lets
 * the param gradients read them instead of summing again.
 *   dX = rstd g (dY - SDY / m - (x - mean) rstd^2 SDYX / m) */
static pk_status grad_bn_input(const norm_view *v, const pk_op_input *x, pk_strbuf *out) {
  int b2 = v->nks;
  emit_axes(out, 0, v->nks, v->ks);
  emit_axes(out, b2, v->nks, v->ks);
  pk_op_emit_compute_head(out, "SDY", v->sr, v->sshape);
  pk_strbuf_append(out, "sum(");
  emit_read(out, "DY", v->x_at_s, 0);
  emit_sum_close(out, 0, v->nks);
  pk_op_emit_compute_head(out, "SDYX", v->sr, v->sshape);
  pk_strbuf_append(out, "sum(");
  emit_read(out, "DY", v->x_at_s, b2);
  pk_strbuf_append(out, " * (");
  emit_read(out, "X", v->x_at_s, b2);
  pk_strbuf_append(out, " - ");
  emit_self(out, "M", v->sr);
  pk_strbuf_append(out, ")");
  emit_sum_close(out, b2, v->nks);
  pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
  emit_read(out, "R", v->s_at_x, 0);
  pk_strbuf_append(out, " * ");
  emit_read(out, "G", v->p_at_x, 0);
  pk_strbuf_append(out, " * (");
  pk_op_emit_read_all(out, "DY", x->ndim);
  pk_strbuf_append(out, " - ");
  emit_read(out, "SDY", v->s_at_x, 0);
  pk_strbuf_append(out, " / ");
  pk_op_emit_float(out, v->m);
  pk_strbuf_append(out, " - (");
  pk_op_emit_read_all(out, "X", x->ndim);
  pk_strbuf_append(out, " - ");
  emit_read(out, "M", v->s_at_x, 0);
  pk_strbuf_append(out, ")");
  for (int i = 0; i < 2; i++) {
    pk_strbuf_append(out, " * ");
    emit_read(out, "R", v->s_at_x, 0);
  }
  pk_strbuf_append(out, " * ");
  emit_read(out, "SDYX", v->s_at_x, 0);
  pk_strbuf_append(out, " / ");
  pk_op_emit_float(out, v->m);
  pk_strbuf_append(out, "))\n");
  return PK_OK;
}

pk_status pk_op_grad_norm(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                          const pk_te_tensor *y, int input, pk_op_grad *g, pk_strbuf *out) {
  norm_view v;
  pk_status s = norm_check(ctx, op, prm, &v);
  if (s != PK_OK) return s;
  const pk_op_input *x = &prm->in[0];
  pkrt_dtype dt = x->dtype;
  bool beta = op != PK_OP_RMS_NORM && input == 2;
  if (beta) { /* dB: the sum of dY over everything but the param's dims */
    pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
    emit_param_head(out, &v, "DB");
    emit_read(out, "DY", v.x_at_p, 0);
    emit_param_close(out, &v);
    return PK_OK;
  }
  if (op == PK_OP_RMS_NORM) return grad_rms(prm, y, input, &v, g, out);
  if (frozen(op, &prm->attrs) && input == 0) { /* an affine map: dX = dY * g * rstd */
    pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 1, "G", prm, y);
    pk_op_grad_add_stage(g, out, 2, "R", v.sr, v.sshape, dt);
    pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
    pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
    pk_op_emit_read_all(out, "DY", x->ndim);
    pk_strbuf_append(out, " * G[i1] * R[i1])\n");
    return PK_OK;
  }
  /* dgamma is the same in both batch_norm modes: MEAN and RSTD are whichever were used */
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 0, "X", prm, y);
  if (input == 0) pk_op_grad_add_arg(g, out, PK_GRAD_ARG_INPUT, 1, "G", prm, y);
  pk_op_grad_add_stage(g, out, 0, "M", v.sr, v.sshape, dt);
  pk_op_grad_add_stage(g, out, 2, "R", v.sr, v.sshape, dt);
  pk_op_grad_add_arg(g, out, PK_GRAD_ARG_DY, 0, "DY", prm, y);
  if (input == 1) {
    emit_param_head(out, &v, "DG");
    emit_read(out, "DY", v.x_at_p, 0);
    pk_strbuf_append(out, " * ");
    emit_xhat_at_p(out, &v, "M", "R");
    emit_param_close(out, &v);
    return PK_OK;
  }
  if (op == PK_OP_BATCH_NORM) return grad_bn_input(&v, x, out);
  /* SA = mean(dY g), SB = mean(dY g (x - mean)) per statistic */
  int b2 = v.nks;
  emit_axes(out, 0, v.nks, v.ks);
  emit_axes(out, b2, v.nks, v.ks);
  pk_op_emit_compute_head(out, "SA", v.sr, v.sshape);
  pk_strbuf_append(out, "sum(");
  emit_dyg_at_s(out, &v, 0);
  pk_strbuf_append(out, " / ");
  pk_op_emit_float(out, v.m);
  emit_sum_close(out, 0, v.nks);
  pk_op_emit_compute_head(out, "SB", v.sr, v.sshape);
  pk_strbuf_append(out, "sum(");
  emit_dyg_at_s(out, &v, b2);
  pk_strbuf_append(out, " * (");
  emit_read(out, "X", v.x_at_s, b2);
  pk_strbuf_append(out, " - ");
  emit_self(out, "M", v.sr);
  pk_strbuf_append(out, ") / ");
  pk_op_emit_float(out, v.m);
  emit_sum_close(out, b2, v.nks);
  pk_op_emit_compute_head(out, "DX", x->ndim, x->shape);
  emit_read(out, "R", v.s_at_x, 0);
  pk_strbuf_append(out, " * (");
  pk_op_emit_read_all(out, "DY", x->ndim);
  pk_strbuf_append(out, " * ");
  emit_read(out, "G", v.p_at_x, 0);
  pk_strbuf_append(out, " - ");
  emit_read(out, "SA", v.s_at_x, 0);
  pk_strbuf_append(out, " - (");
  pk_op_emit_read_all(out, "X", x->ndim);
  pk_strbuf_append(out, " - ");
  emit_read(out, "M", v.s_at_x, 0);
  pk_strbuf_append(out, ")");
  for (int i = 0; i < 2; i++) {
    pk_strbuf_append(out, " * ");
    emit_read(out, "R", v.s_at_x, 0);
  }
  pk_strbuf_append(out, " * ");
  emit_read(out, "SB", v.s_at_x, 0);
  pk_strbuf_append(out, "))\n");
  return PK_OK;
}

/* ---- running statistics ----
 * batch_norm_stats(X, RM, RV) -> RM', RV' (PyTorch's rule, momentum m):
 *   RM' = (1 - m) RM + m mean(X);  RV' = (1 - m) RV + m var_unbiased(X).
 * Each output element reads only its own channel of RM and RV (and all of X, which is
 * not updated), so the executor may run it in place like the optimizer updates. */
pk_status pk_op_text_bn_stats(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                              pk_strbuf *out) {
  norm_view v;
  pk_status s = norm_check(ctx, op, prm, &v);
  if (s != PK_OK) return s;
  static const char *const names[] = {"X", "RM", "RV"};
  emit_placeholders(out, prm, names);
  emit_mean_var(out, &v, 0, "MEAN", "VAR", true);
  double mom = momentum_of(&prm->attrs);
  static const char *const upd[][3] = {{"RM2", "RM", "MEAN"}, {"RV2", "RV", "VAR"}};
  for (int i = 0; i < 2; i++) {
    pk_op_emit_compute_head(out, upd[i][0], 1, v.sshape);
    pk_op_emit_float(out, 1 - mom);
    pk_strbuf_printf(out, " * %s[i0] + ", upd[i][1]);
    pk_op_emit_float(out, mom);
    pk_strbuf_printf(out, " * %s[i0])\n", upd[i][2]);
  }
  return PK_OK;
}
