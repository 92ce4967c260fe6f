/* test_op_grad.c — every gradient TE of te/ops (each op, each differentiable input) against
 * f64 central differences through the interpreter; PyTorch's tie rule for max and
 * max_pool2d; sgd_update and adamw_update against their formulas in C; slice and reshape
 * values; and the errors for non-differentiable inputs (masks too) and bad training-op
 * parameters. Integer inputs (masks) are filled with 0s and 1s and read as they are. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_impl.h"
#include "test_op_grad_cases.h"
#include "pk_test.h"

/* ---- random numbers (splitmix64) ---- */

static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double uniform(uint64_t *s, double lo, double hi) {
  return lo + (hi - lo) * (double)(next_u64(s) >> 11) / 9007199254740992.0;
}

static void set_value(pk_te_ref_tensor *t, int64_t i, double v) {
  t->val[i] = v;
  t->mag[i] = fabs(v);
}

/* The kinks of a piecewise activation (at most 2), and how far to spread its inputs so
 * that every piece is exercised: [-scale, scale]. */
static int activation_kinks(pk_op_kind op, const pk_op_attrs *a, double kink[2],
                            double *scale) {
  *scale = 1;
  switch (op) {
  case PK_OP_RELU: case PK_OP_LEAKY_RELU: case PK_OP_ELU: case PK_OP_ABS:
    kink[0] = 0;
    return 1;
  case PK_OP_HARDSIGMOID: case PK_OP_HARDSWISH:
    kink[0] = -3, kink[1] = 3, *scale = 4;
    return 2;
  case PK_OP_RELU6: kink[0] = 0, kink[1] = 6, *scale = 7; return 2;
  case PK_OP_CLIP: kink[0] = a->clip_min, kink[1] = a->clip_max; return 2;
  default: return 0;
  }
}

/* Inputs away from each op's kinks: piecewise activations at least 0.05 from each kink;
 * max and max_pool2d distinct values at least 2/n apart (a permutation), so a step of 1e-6
 * never changes which is the max; divisors (and reciprocal's x) |b| >= 0.5; log, sqrt and
 * rsqrt in [0.25, 2] (pk_te_ref_fill_random's positive domain); loss row weights positive,
 * targets in [0, 1]. */
static void fill_input(pk_op_kind op, const pk_op_params *prm, int input, pk_te_ref_tensor *t,
                       uint64_t *rng) {
  int64_t n = t->numel;
  if (t->ival && op == PK_OP_CROSS_ENTROPY) { /* labels -1 .. K: some outside [0, K) */
    int64_t k = prm->in[0].shape[prm->in[0].ndim - 1];
    for (int64_t i = 0; i < n; i++) t->ival[i] = (int64_t)(next_u64(rng) % (uint64_t)(k + 2)) - 1;
    return;
  }
  if (t->ival) { /* an integer input (PK_OPF_INT_INPUT): where's and masked_fill's masks */
    for (int64_t i = 0; i < n; i++) t->ival[i] = (int64_t)(next_u64(rng) >> 63);
    if (n > 1) t->ival[0] = 0, t->ival[n - 1] = 1; /* both branches, whatever the draw */
    return;
  }
  double kink[2], scale;
  int nkinks = activation_kinks(op, &prm->attrs, kink, &scale);
  if (op == PK_OP_MAX || op == PK_OP_MAX_POOL2D) {
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
      int64_t j = (int64_t)(next_u64(rng) % (uint64_t)(i + 1)), tmp = perm[i];
      perm[i] = perm[j];
      perm[j] = tmp;
    }
    for (int64_t i = 0; i < n; i++) set_value(t, i, -1 + 2 * ((double)perm[i] + 0.5) / (double)n);
    free(perm);
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    double u = scale * uniform(rng, -1, 1);
    for (int k = 0; k < nkinks; k++)
      if (fabs(u - kink[k]) < 0.05) u = u < kink[k] ? kink[k] - 0.05 : kink[k] + 0.05;
    if ((op == PK_OP_DIV && input == 1) || op == PK_OP_RECIPROCAL)
      u = (u < 0 ? -0.5 : 0.5) + u;
    if (op == PK_OP_LOG || op == PK_OP_SQRT || op == PK_OP_RSQRT) u = 0.25 + 0.875 * (u + 1);
    /* pow's base: positive, as pk_te_ref_fill_random's domain (non-integer exponents) */
    if ((op == PK_OP_POW && input == 0) || op == PK_OP_POW_SCALAR) u = 0.25 + 0.875 * (u + 1);
    if (op == PK_OP_BATCH_NORM && input == 4) u = 0.25 + 0.875 * (u + 1); /* a variance */
    if (op == PK_OP_BATCH_NORM && input == 5) u = 0; /* H: H[3] = 0 is training */
    bool loss = op == PK_OP_SOFTMAX_CROSS_ENTROPY || op == PK_OP_MSE_LOSS;
    if (loss && input == 0 && op == PK_OP_SOFTMAX_CROSS_ENTROPY) u *= 2;
    if (loss && input == 1 && op == PK_OP_SOFTMAX_CROSS_ENTROPY) u = (u + 1) / 2;
    if (loss && input == 2) u = 0.1 + 0.45 * (u + 1);
    set_value(t, i, u);
  }
}

static bool is_loss(pk_op_kind op) {
  return op == PK_OP_SOFTMAX_CROSS_ENTROPY || op == PK_OP_MSE_LOSS || op == PK_OP_CROSS_ENTROPY;
}

/* f = sum(Y * dY), or the loss itself; NAN when the interpreter fails. */
static double objective(pk_ctx *ctx, const pk_te_program *p, pk_te_ref *ref, const double *dy,
                        bool loss) {
  if (pk_te_interp_run(ctx, p, ref) != PK_OK) return NAN;
  const pk_te_ref_tensor *y = &ref->tensors[p->ntensors - 1];
  if (loss) return y->val[0];
  long double f = 0;
  for (int64_t i = 0; i < y->numel; i++) f += (long double)y->val[i] * dy[i];
  return (double)f;
}

/* "I1 DY": the args a gradient reads, as grad_case writes them. */
static const char *args_str(const pk_op_grad *g, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  for (int i = 0; i < g->nargs && n < cap; i++) {
    const pk_op_grad_arg *a = &g->args[i];
    n += (size_t)snprintf(buf + n, cap - n, "%s", i ? " " : "");
    if (a->kind == PK_GRAD_ARG_INPUT) n += (size_t)snprintf(buf + n, cap - n, "I%d", a->index);
    else if (a->kind == PK_GRAD_ARG_STAGE)
      n += (size_t)snprintf(buf + n, cap - n, "S%d", a->index);
    else n += (size_t)snprintf(buf + n, cap - n, a->kind == PK_GRAD_ARG_OUTPUT ? "O" : "DY");
  }
  return buf;
}

/* The tensor index of compute `stage` (0-based among computes) of a forward program. */
static int stage_tensor(const pk_te_program *fwd, int stage) {
  for (int t = 0; t < fwd->ntensors; t++)
    if (fwd->tensors[t]->kind == PK_TE_COMPUTE && stage-- == 0) return t;
  return fwd->ntensors - 1; /* cannot happen: the builder named a stage it wrote */
}

/* The gradient program at the forward point of fref (whose result is current), with dy. */
static const pk_te_ref_tensor *run_grad(pk_ctx *ctx, const pk_op_grad *g,
                                        const pk_te_program *fwd, const pk_te_ref *fref,
                                        const double *dy) {
  pk_te_ref *gref = pk_te_ref_new(ctx, g->prog);
  if (!gref) return NULL;
  for (int a = 0; a < g->nargs; a++) {
    const pk_op_grad_arg *arg = &g->args[a];
    pk_te_ref_tensor *dst = &gref->tensors[a];
    if (dst->ival) { /* integer inputs are read as they are */
      memcpy(dst->ival, fref->tensors[arg->index].ival, (size_t)dst->numel * sizeof(int64_t));
      continue;
    }
    for (int64_t i = 0; i < dst->numel; i++) {
      double v = arg->kind == PK_GRAD_ARG_INPUT    ? fref->tensors[arg->index].val[i]
                 : arg->kind == PK_GRAD_ARG_OUTPUT ? fref->tensors[fwd->ntensors - 1].val[i]
                 : arg->kind == PK_GRAD_ARG_STAGE
                     ? fref->tensors[stage_tensor(fwd, arg->index)].val[i]
                     : dy[i];
      set_value(dst, i, v);
    }
  }
  if (pk_te_interp_run(ctx, g->prog, gref) != PK_OK) return NULL;
  return &gref->tensors[g->prog->ntensors - 1];
}

/* ---- finite differences ---- */

static void check_case_input(const grad_case *c, int input) {
  char label[160], got[64];
  snprintf(label, sizeof label, "grad_%s_input%d", c->label, input);
  pk_ctx *ctx = pk_ctx_new();
  uint64_t rng = 0x5eed0000u + (uint64_t)input * 7919u + (uint64_t)(c - grad_cases) * 104729u;
  pk_te_program *p;
  pk_op_grad g;
  if (pk_op_build(ctx, c->op, &c->prm, &p) != PK_OK ||
      pk_op_grad_build(ctx, c->op, &c->prm, input, &g) != PK_OK) {
    check(false, label, "build: %s", pk_ctx_error(ctx));
    pk_ctx_free(ctx);
    return;
  }
  pk_te_ref *ref = pk_te_ref_new(ctx, p);
  for (int i = 0; i < c->prm.ninputs; i++) fill_input(c->op, &c->prm, i, &ref->tensors[i], &rng);
  const pk_te_ref_tensor *y = &ref->tensors[p->ntensors - 1];
  double *dy = malloc((size_t)y->numel * sizeof *dy);
  for (int64_t i = 0; i < y->numel; i++) dy[i] = uniform(&rng, -1, 1);
  bool loss = is_loss(c->op);
  double f0 = objective(ctx, p, ref, dy, loss);
  const pk_te_ref_tensor *gt = isnan(f0) ? NULL : run_grad(ctx, &g, p, ref, dy);
  if (!gt) {
    check(false, label, "interpreter: %s", pk_ctx_error(ctx));
    free(dy);
    pk_ctx_free(ctx);
    return;
  }

  pk_te_ref_tensor *x = &ref->tensors[input];
  double num = 0, den = 0;
  int64_t worst = -1;
  double worst_diff = -1, worst_fd = 0;
  for (int64_t i = 0; i < x->numel; i++) {
    double x0 = x->val[i], h = 1e-6 * fmax(1.0, fabs(x0));
    double xp = x0 + h, xm = x0 - h;
    set_value(x, i, xp);
    double fp = objective(ctx, p, ref, dy, loss);
    set_value(x, i, xm);
    double fm = objective(ctx, p, ref, dy, loss);
    set_value(x, i, x0);
    double fd = (fp - fm) / (xp - xm), d = gt->val[i] - fd;
    num += d * d;
    den += fd * fd;
    if (fabs(d) > worst_diff) worst_diff = fabs(d), worst = i, worst_fd = fd;
  }
  double rel = sqrt(num) / fmax(sqrt(den), 1e-30);
  bool args_ok = strcmp(args_str(&g, got, sizeof got), c->args[input] ? c->args[input] : "") == 0;
  bool ok = rel <= 1e-6 && den > 0 && args_ok;
  if (ok) printf("     %s: relative error %.2g\n", label, rel);
  check(ok, label,
        "reads [%s] (want [%s]); ||g_te - g_fd|| / ||g_fd|| = %.3g (||g_fd|| = %.3g), worst "
        "element %lld: te %.17g fd %.17g", got, c->args[input] ? c->args[input] : "?", rel,
        sqrt(den), (long long)worst, worst >= 0 ? gt->val[worst] : 0.0, worst_fd);
  free(dy);
  pk_ctx_free(ctx);
}

static void test_finite_differences(void) {
  for (int c = 0; c < GRAD_CASES; c++)
    for (int i = 0; i < grad_cases[c].prm.ninputs; i++)
      if (pk_op_diff_inputs(grad_cases[c].op) >> i & 1) check_case_input(&grad_cases[c], i);
}

/* Every differentiable input of every op has a case, and the table's diff and grad_builder
 * columns agree. */
static void test_coverage(void) {
  int missing = -1;
  bool table_ok = true;
  for (int op = 0; op < PK_OP_COUNT_; op++) {
    unsigned diff = pk_op_diff_inputs((pk_op_kind)op), seen = 0;
    for (int c = 0; c < GRAD_CASES; c++)
      if (grad_cases[c].op == (pk_op_kind)op) seen = diff;
    if (seen != diff) missing = op;
    table_ok &= (diff != 0) == (pk_op_grad_builder((pk_op_kind)op) != NULL);
  }
  check(missing < 0, "grad_cases_cover_every_differentiable_op", "no case for %s",
        missing >= 0 ? pk_op_name((pk_op_kind)missing) : "-");
  check(table_ok, "grad_builder_column_matches_diff", "an op has diff bits but no builder "
        "(or a builder but no diff bits)");
}

/* ---- ties: the first maximum in row-major scan order gets the gradient ---- */

/* The interpreter's dX of op at X = xs (forward run first, for Y), dY = dys. */
static const pk_te_ref_tensor *grad_at(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                       const double *xs, const double *dys) {
  pk_te_program *p;
  pk_op_grad g;
  if (pk_op_build(ctx, op, prm, &p) != PK_OK ||
      pk_op_grad_build(ctx, op, prm, 0, &g) != PK_OK)
    return NULL;
  pk_te_ref *ref = pk_te_ref_new(ctx, p);
  for (int64_t i = 0; i < ref->tensors[0].numel; i++) set_value(&ref->tensors[0], i, xs[i]);
  if (pk_te_interp_run(ctx, p, ref) != PK_OK) return NULL;
  return run_grad(ctx, &g, p, ref, dys);
}

/* Naive max_pool2d backward with PyTorch's rule: scan each window's in-bounds elements in
 * row-major order; a later element takes over only when strictly greater. */
static void naive_max_pool_grad(const pk_op_params *prm, const double *x, const double *dy,
                                double *dx) {
  const int64_t *s = prm->in[0].shape;
  const pk_op_attrs *a = &prm->attrs;
  int64_t kh = a->kernel[0], kw = a->kernel[1], sh = a->stride[0] ? a->stride[0] : 1;
  int64_t sw = a->stride[1] ? a->stride[1] : 1, dh = a->dilation[0] ? a->dilation[0] : 1;
  int64_t dw = a->dilation[1] ? a->dilation[1] : 1, H = s[2], W = s[3];
  int64_t oh_n = (H + a->pad[0] + a->pad[2] - dh * (kh - 1) - 1) / sh + 1;
  int64_t ow_n = (W + a->pad[1] + a->pad[3] - dw * (kw - 1) - 1) / sw + 1;
  memset(dx, 0, sizeof(double) * (size_t)(s[0] * s[1] * H * W));
  for (int64_t nc = 0; nc < s[0] * s[1]; nc++)
    for (int64_t oh = 0; oh < oh_n; oh++)
      for (int64_t ow = 0; ow < ow_n; ow++) {
        int64_t best = -1;
        for (int64_t r = 0; r < kh; r++)
          for (int64_t q = 0; q < kw; q++) {
            int64_t h = oh * sh + r * dh - a->pad[0], w = ow * sw + q * dw - a->pad[1];
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            int64_t at = (nc * H + h) * W + w;
            if (best < 0 || x[at] > x[best]) best = at;
          }
        dx[best] += dy[(nc * oh_n + oh) * ow_n + ow];
      }
}

static bool same_values(const pk_te_ref_tensor *got, const double *want, int64_t n,
                        int64_t *bad) {
  *bad = -1;
  if (!got || got->numel != n) return false;
  for (int64_t i = 0; i < n; i++)
    if (fabs(got->val[i] - want[i]) > 1e-12 * (1 + fabs(want[i]))) {
      *bad = i;
      return false;
    }
  return true;
}

static void test_ties(void) {
  pk_ctx *ctx = pk_ctx_new();
  int64_t bad;
  /* all-equal 2x2 windows, stride 2: only each window's top-left element */
  pk_op_params eq = {1, {{4, {1, 1, 4, 4}, PKRT_DTYPE_F32}}, {.kernel = {2, 2}, .stride = {2, 2}}};
  double x[16], dy[4] = {1, 2, 3, 4}, want[16] = {0};
  for (int i = 0; i < 16; i++) x[i] = 0.25;
  want[0] = 1, want[2] = 2, want[8] = 3, want[10] = 4;
  const pk_te_ref_tensor *g = grad_at(ctx, PK_OP_MAX_POOL2D, &eq, x, dy);
  bool ok = same_values(g, want, 16, &bad);
  check(ok, "max_pool2d_ties_first_element",
        "element %lld: got %g want %g (%s)", (long long)bad, bad >= 0 && g ? g->val[bad] : 0.0,
        bad >= 0 ? want[bad] : 0.0, pk_ctx_error(ctx));

  /* after relu most windows tie at 0; overlapping padded windows (3, stride 2, pad 1) */
  uint64_t rng = 77;
  pk_op_params ov = {1, {{4, {2, 2, 7, 8}, PKRT_DTYPE_F32}},
                     {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1, 1, 1}}};
  static double xr[224], dyr[2 * 2 * 4 * 4], wantr[224];
  for (int i = 0; i < 224; i++) xr[i] = fmax(0.0, uniform(&rng, -1, 0.3));
  for (int i = 0; i < 64; i++) dyr[i] = uniform(&rng, -1, 1);
  naive_max_pool_grad(&ov, xr, dyr, wantr);
  g = grad_at(ctx, PK_OP_MAX_POOL2D, &ov, xr, dyr);
  ok = same_values(g, wantr, 224, &bad);
  check(ok, "max_pool2d_relu_ties_overlapping",
        "element %lld: got %g want %g (%s)", (long long)bad, bad >= 0 && g ? g->val[bad] : 0.0,
        bad >= 0 ? wantr[bad] : 0.0, pk_ctx_error(ctx));

  /* max over axis 1 of (3, 5), keepdims: rows with repeated maxima */
  pk_op_params mx = {1, {{2, {3, 5}, PKRT_DTYPE_F64}}, {.naxes = 1, .axes = {1}, .keepdims = true}};
  double xm[15] = {0, 2, 1, 2, 2, /**/ 3, 3, 3, 3, 3, /**/ -1, -4, -1, -2, -5};
  double dym[3] = {10, 20, 30}, wantm[15] = {0};
  wantm[1] = 10, wantm[5] = 20, wantm[10] = 30;
  g = grad_at(ctx, PK_OP_MAX, &mx, xm, dym);
  ok = same_values(g, wantm, 15, &bad);
  check(ok, "max_ties_first_in_row", "element %lld (%s)",
        (long long)bad, pk_ctx_error(ctx));

  /* max over every axis: the first maximum in row-major order of the whole tensor */
  pk_op_params all = {1, {{2, {2, 3}, PKRT_DTYPE_F32}}, {.naxes = 0}};
  double xa[6] = {1, 4, 2, 4, 0, 4}, dya[1] = {5}, wanta[6] = {0, 5, 0, 0, 0, 0};
  g = grad_at(ctx, PK_OP_MAX, &all, xa, dya);
  ok = same_values(g, wanta, 6, &bad);
  check(ok, "max_all_ties_first", "element %lld (%s)",
        (long long)bad, pk_ctx_error(ctx));

  /* relu'(0) = 0 */
  pk_op_params re = {1, {{1, {3}, PKRT_DTYPE_F32}}, {.groups = 0}};
  double xz[3] = {-1, 0, 2}, dyz[3] = {1, 1, 1}, wantz[3] = {0, 0, 1};
  g = grad_at(ctx, PK_OP_RELU, &re, xz, dyz);
  ok = same_values(g, wantz, 3, &bad);
  check(ok, "relu_grad_at_zero_is_zero", "element %lld",
        (long long)bad);

  /* The other activations at and around their kinks, forward and gradient, against
   * PyTorch's values (torch 2.x, dY = 1; the kink rules are listed in op_elementwise.c). */
  static const struct {
    const char *label;
    pk_op_kind op;
    pk_op_attrs attrs;
    double x[8], y[8], dx[8];
  } kinks[] = {
      {"leaky_relu_kink", PK_OP_LEAKY_RELU, {.groups = 0}, {-2, -1e-3, 0, 1e-3, 2, 0, 0, 0},
       {-0.02, -1e-5, 0, 1e-3, 2, 0, 0, 0}, {0.01, 0.01, 0.01, 1, 1, 0.01, 0.01, 0.01}},
      {"elu_kink", PK_OP_ELU, {.alpha = 2}, {-1, 0, 1, -30, 30, 0, 0, 0},
       {2 * (exp(-1) - 1), 0, 1, 2 * (exp(-30) - 1), 30, 0, 0, 0},
       {2 * exp(-1), 2, 1, 2 * exp(-30), 1, 2, 2, 2}},
      {"hardsigmoid_kinks", PK_OP_HARDSIGMOID, {.groups = 0}, {-4, -3, -1.5, 0, 1.5, 3, 4, 0},
       {0, 0, 0.25, 0.5, 0.75, 1, 1, 0.5},
       {0, 0, 1.0 / 6, 1.0 / 6, 1.0 / 6, 0, 0, 1.0 / 6}},
      {"hardswish_kinks", PK_OP_HARDSWISH, {.groups = 0}, {-4, -3, -1.5, 0, 1.5, 3, 4, 0},
       {0, 0, -0.375, 0, 1.125, 3, 4, 0}, {0, -0.5, 0, 0.5, 1, 1.5, 1, 0.5}},
      {"relu6_kinks", PK_OP_RELU6, {.groups = 0}, {-1, 0, 1, 6, 7, 3, 5.5, 0},
       {0, 0, 1, 6, 6, 3, 5.5, 0}, {0, 0, 1, 0, 0, 1, 1, 0}},
      {"abs_zero", PK_OP_ABS, {.groups = 0}, {-2, -0.5, 0, 0.5, 2, 0, 0, 0},
       {2, 0.5, 0, 0.5, 2, 0, 0, 0}, {-1, -1, 0, 1, 1, 0, 0, 0}},
      {"clip_bounds", PK_OP_CLIP, {.clip_min = -1, .clip_max = 2}, {-2, -1, 0, 2, 3, 1, 0, 0},
       {-1, -1, 0, 2, 2, 1, 0, 0}, {0, 1, 1, 1, 0, 1, 1, 1}},
  };
  for (size_t k = 0; k < sizeof kinks / sizeof kinks[0]; k++) {
    pk_op_params pk = {1, {{1, {8}, PKRT_DTYPE_F64}}, kinks[k].attrs};
    double ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    pk_te_program *fp;
    pk_te_ref *fr = NULL;
    if (pk_op_build(ctx, kinks[k].op, &pk, &fp) == PK_OK && (fr = pk_te_ref_new(ctx, fp))) {
      for (int i = 0; i < 8; i++) set_value(&fr->tensors[0], i, kinks[k].x[i]);
      if (pk_te_interp_run(ctx, fp, fr) != PK_OK) fr = NULL;
    }
    char label[64];
    bool fok = fr && same_values(&fr->tensors[fp->ntensors - 1], kinks[k].y, 8, &bad);
    snprintf(label, sizeof label, "%s_forward", kinks[k].label);
    check(fok, label, "element %lld (%s)", (long long)bad, pk_ctx_error(ctx));
    g = grad_at(ctx, kinks[k].op, &pk, kinks[k].x, ones);
    ok = g && same_values(g, kinks[k].dx, 8, &bad);
    snprintf(label, sizeof label, "%s_grad", kinks[k].label);
    check(ok, label, "element %lld (%s)", (long long)bad, pk_ctx_error(ctx));
  }
  pk_ctx_free(ctx);
}

/* ---- optimizer updates against their formulas ---- */

/* Runs an update op on given inputs; outputs[j] is the j-th compute from the end. */
static pk_te_ref *run_op(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                         const double *const *ins, pk_te_program **pp) {
  if (pk_op_build(ctx, op, prm, pp) != PK_OK) return NULL;
  pk_te_ref *ref = pk_te_ref_new(ctx, *pp);
  for (int i = 0; i < prm->ninputs; i++)
    for (int64_t j = 0; j < ref->tensors[i].numel; j++) set_value(&ref->tensors[i], j, ins[i][j]);
  return pk_te_interp_run(ctx, *pp, ref) == PK_OK ? ref : NULL;
}

static double clip_scale(const double *g, int n, double c) {
  if (c <= 0) return 1;
  double s = 0;
  for (int i = 0; i < n; i++) s += g[i] * g[i];
  return fmin(1.0, c / (sqrt(s) + 1e-6));
}

static bool close_to(double got, double want) {
  return fabs(got - want) <= 1e-12 * (1 + fabs(want));
}

#define UN 15 /* elements of the updated weight, shape (3, 5) */

static void test_sgd(const char *label, pkrt_dtype dt, double momentum, double wd, double clip) {
  pk_ctx *ctx = pk_ctx_new();
  uint64_t rng = 4242;
  double w[UN], gr[UN], m[UN], h[4] = {0.05, 0, 0, 0};
  for (int i = 0; i < UN; i++)
    w[i] = uniform(&rng, -1, 1), gr[i] = uniform(&rng, -1, 1), m[i] = uniform(&rng, -1, 1);
  pk_op_params prm = {4, {{2, {3, 5}, dt}, {2, {3, 5}, dt}, {2, {3, 5}, dt}, {1, {4}, dt}},
                      {.momentum = momentum, .weight_decay = wd, .clip_norm = clip}};
  const double *ins[4] = {w, gr, m, h};
  pk_te_program *p;
  pk_te_ref *ref = run_op(ctx, PK_OP_SGD_UPDATE, &prm, ins, &p);
  bool ok = ref != NULL;
  double sc = clip_scale(gr, UN, clip);
  for (int i = 0; ok && i < UN; i++) {
    double g = gr[i] * sc + wd * w[i], mn = momentum * m[i] + g, wn = w[i] - h[0] * mn;
    ok = close_to(ref->tensors[p->ntensors - 2].val[i], mn) &&
         close_to(ref->tensors[p->ntensors - 1].val[i], wn);
  }
  check(ok, label, "%s", ref ? "values differ from the formula" : pk_ctx_error(ctx));
  pk_ctx_free(ctx);
}

static void test_adam(const char *label, double b1_attr, double b2_attr, double eps_attr,
                      double wd, bool decoupled, double clip) {
  pk_ctx *ctx = pk_ctx_new();
  uint64_t rng = 99;
  double b1 = b1_attr ? b1_attr : 0.9, b2 = b2_attr ? b2_attr : 0.999;
  double eps = eps_attr ? eps_attr : 1e-8, t = 3;
  double w[UN], gr[UN], m[UN], v[UN];
  double h[4] = {1e-3, 1 - pow(b1, t), 1 - pow(b2, t), 0};
  for (int i = 0; i < UN; i++) {
    w[i] = uniform(&rng, -1, 1), gr[i] = uniform(&rng, -1, 1);
    m[i] = uniform(&rng, -0.1, 0.1), v[i] = uniform(&rng, 0, 0.01);
  }
  const pkrt_dtype F = PKRT_DTYPE_F32;
  pk_op_params prm = {5, {{2, {3, 5}, F}, {2, {3, 5}, F}, {2, {3, 5}, F}, {2, {3, 5}, F}, {1, {4}, F}},
                      {.beta1 = b1_attr, .beta2 = b2_attr, .eps = eps_attr, .weight_decay = wd,
                       .decoupled = decoupled, .clip_norm = clip}};
  const double *ins[5] = {w, gr, m, v, h};
  pk_te_program *p;
  pk_te_ref *ref = run_op(ctx, PK_OP_ADAMW_UPDATE, &prm, ins, &p);
  bool ok = ref != NULL;
  double sc = clip_scale(gr, UN, clip);
  for (int i = 0; ok && i < UN; i++) {
    double g = gr[i] * sc + (decoupled ? 0 : wd * w[i]);
    double w1 = decoupled ? w[i] * (1 - h[0] * wd) : w[i];
    double mn = b1 * m[i] + (1 - b1) * g, vn = b2 * v[i] + (1 - b2) * g * g;
    double wn = w1 - h[0] * (mn / h[1]) / (sqrt(vn / h[2]) + eps);
    ok = close_to(ref->tensors[p->ntensors - 3].val[i], mn) &&
         close_to(ref->tensors[p->ntensors - 2].val[i], vn) &&
         close_to(ref->tensors[p->ntensors - 1].val[i], wn);
  }
  check(ok, label, "%s", ref ? "values differ from the formula" : pk_ctx_error(ctx));
  pk_ctx_free(ctx);
}

static void test_updates(void) {
  test_sgd("sgd_plain", PKRT_DTYPE_F32, 0, 0, 0);
  test_sgd("sgd_momentum_wd", PKRT_DTYPE_F64, 0.9, 1e-2, 0);
  test_sgd("sgd_momentum_clip_active", PKRT_DTYPE_F32, 0.5, 1e-3, 0.5);
  test_sgd("sgd_clip_inactive", PKRT_DTYPE_F32, 0.9, 0, 100);
  test_adam("adamw_decoupled_defaults", 0, 0, 0, 0.01, true, 0);
  test_adam("adamw_decoupled_clip", 0.8, 0.99, 1e-6, 0.1, true, 0.5);
  test_adam("adam_l2", 0, 0, 0, 0.01, false, 0);
  test_adam("adam_l2_clip_no_wd", 0.85, 0.995, 1e-7, 0, false, 0.3);
}

/* ---- slice and reshape values ---- */

static void test_slice_reshape(void) {
  pk_ctx *ctx = pk_ctx_new();
  static double x[2 * 7 * 3];
  for (int i = 0; i < 42; i++) x[i] = i * 0.5 - 3;
  const double *ins[1] = {x};
  pk_op_params sl = {1, {{3, {2, 7, 3}, PKRT_DTYPE_F32}},
                     {.slice_axis = -2, .slice_start = 3, .slice_len = 4}};
  pk_te_program *p;
  pk_te_ref *ref = run_op(ctx, PK_OP_SLICE, &sl, ins, &p);
  const pk_te_tensor *y = ref ? p->tensors[p->ntensors - 1] : NULL;
  bool ok = y && y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 4 && y->shape[2] == 3;
  for (int a = 0; ok && a < 2; a++)
    for (int b = 0; b < 4; b++)
      for (int c = 0; c < 3; c++)
        ok &= ref->tensors[1].val[(a * 4 + b) * 3 + c] == x[(a * 7 + b + 3) * 3 + c];
  check(ok, "slice_values", "%s", pk_ctx_error(ctx));

  pk_op_params rs = {1, {{3, {2, 7, 3}, PKRT_DTYPE_F64}}, {.new_ndim = 4, .new_shape = {3, 1, 2, 7}}};
  ref = run_op(ctx, PK_OP_RESHAPE, &rs, ins, &p);
  y = ref ? p->tensors[1] : NULL;
  ok = y && y->ndim == 4 && y->shape[0] == 3 && y->shape[3] == 7;
  for (int i = 0; ok && i < 42; i++) ok &= ref->tensors[1].val[i] == x[i];
  check(ok, "reshape_values_keep_row_major_order", "%s", pk_ctx_error(ctx));
  pk_ctx_free(ctx);
}

/* ---- errors ---- */

static void expect_grad_error(pk_ctx *ctx, const char *name, pk_op_kind op,
                              const pk_op_params *prm, int input, const char *needle) {
  pk_op_grad g = {.nargs = 3};
  pk_status s = pk_op_grad_build(ctx, op, prm, input, &g);
  check(s == PK_ERR_CHECK && strstr(pk_ctx_error(ctx), needle) && g.prog == NULL &&
            g.nargs == 0, name, "status %s, message '%s' (want '%s')", pk_status_name(s),
        pk_ctx_error(ctx), needle);
  pk_ctx_clear_error(ctx);
}

static void expect_build_error(pk_ctx *ctx, const char *name, pk_op_kind op,
                               const pk_op_params *prm, const char *needle) {
  pk_te_program *p;
  pk_status s = pk_op_build(ctx, op, prm, &p);
  check(s == PK_ERR_CHECK && strstr(pk_ctx_error(ctx), needle) && p == NULL, name,
        "status %s, message '%s' (want '%s')", pk_status_name(s), pk_ctx_error(ctx), needle);
  pk_ctx_clear_error(ctx);
}

static void test_errors(void) {
  pk_ctx *ctx = pk_ctx_new();
  const pkrt_dtype F = PKRT_DTYPE_F32;
  /* shape and data movement: masks take no gradient */
  pk_op_params wh = {3, {{1, {5}, PKRT_DTYPE_I32}, {1, {5}, F}, {1, {5}, F}}, {.groups = 0}};
  expect_grad_error(ctx, "grad_where_mask_not_differentiable", PK_OP_WHERE, &wh, 0,
                    "input 0 is not differentiable (differentiable inputs: 1, 2)");
  pk_op_params mf = {2, {{1, {5}, F}, {1, {5}, PKRT_DTYPE_I64}}, {.groups = 0}};
  expect_grad_error(ctx, "grad_masked_fill_mask_not_differentiable", PK_OP_MASKED_FILL, &mf, 1,
                    "input 1 is not differentiable");
  pk_op_params cat = {2, {{1, {5}, F}, {1, {3}, F}}, {.axis = 0}};
  expect_grad_error(ctx, "grad_concat_no_such_input", PK_OP_CONCAT, &cat, 2,
                    "no input 2 to differentiate (the op has 2)");
  pk_op_params sgd = {4, {{1, {5}, F}, {1, {5}, F}, {1, {5}, F}, {1, {4}, F}}, {.momentum = 0.9}};
  expect_grad_error(ctx, "grad_sgd_not_differentiable", PK_OP_SGD_UPDATE, &sgd, 0,
                    "sgd_update: input 0 is not differentiable (differentiable inputs: none)");
  pk_op_params ce = {3, {{2, {2, 3}, F}, {2, {2, 3}, F}, {1, {2}, F}}, {.groups = 0}};
  expect_grad_error(ctx, "grad_ce_targets_not_differentiable", PK_OP_SOFTMAX_CROSS_ENTROPY, &ce,
                    1, "input 1 is not differentiable (differentiable inputs: 0)");
  pk_op_params re = {1, {{1, {3}, F}}, {.groups = 0}};
  expect_grad_error(ctx, "grad_no_such_input", PK_OP_RELU, &re, 1, "no input 1");
  expect_grad_error(ctx, "grad_negative_input", PK_OP_RELU, &re, -1, "no input -1");
  pk_op_params badmm = {2, {{2, {4, 5}, F}, {2, {6, 3}, F}}, {.groups = 0}};
  expect_grad_error(ctx, "grad_bad_forward_params", PK_OP_MATMUL, &badmm, 0, "inner dims differ");

  pk_op_params sl = {1, {{2, {3, 5}, F}}, {.slice_axis = 1, .slice_start = 3, .slice_len = 3}};
  expect_build_error(ctx, "bad_slice_range", PK_OP_SLICE, &sl, "does not fit axis 1 of extent 5");
  pk_op_params sl0 = {1, {{2, {3, 5}, F}}, {.slice_axis = 0}};
  expect_build_error(ctx, "bad_slice_empty", PK_OP_SLICE, &sl0, "len >= 1");
  pk_op_params sla = {1, {{2, {3, 5}, F}}, {.slice_axis = 2, .slice_len = 1}};
  expect_build_error(ctx, "bad_slice_axis", PK_OP_SLICE, &sla, "axis 2 out of range");
  pk_op_params rs = {1, {{2, {3, 5}, F}}, {.new_ndim = 2, .new_shape = {4, 4}}};
  expect_build_error(ctx, "bad_reshape_numel", PK_OP_RESHAPE, &rs, "has 16 elements but the input");
  pk_op_params rs0 = {1, {{2, {3, 5}, F}}, {.new_ndim = 0}};
  expect_build_error(ctx, "bad_reshape_rank", PK_OP_RESHAPE, &rs0, "new_ndim 0 out of range");
  pk_op_params rs9 = {1, {{2, {3, 5}, F}}, {.new_ndim = 9}};
  expect_build_error(ctx, "bad_reshape_rank_9", PK_OP_RESHAPE, &rs9, "new_ndim 9 out of range");
  pk_op_params rsz = {1, {{2, {3, 5}, F}}, {.new_ndim = 2, .new_shape = {15, 0}}};
  expect_build_error(ctx, "bad_reshape_zero_extent", PK_OP_RESHAPE, &rsz, "dim 1 has extent 0");

  pk_op_params adam = {5, {{1, {5}, F}, {1, {5}, F}, {1, {5}, F}, {1, {5}, F}, {1, {4}, F}},
                       {.beta1 = 1.0}};
  expect_build_error(ctx, "bad_adam_beta1", PK_OP_ADAMW_UPDATE, &adam, "beta1 1 out of range");
  adam.attrs = (pk_op_attrs){.beta2 = -0.5};
  expect_build_error(ctx, "bad_adam_beta2", PK_OP_ADAMW_UPDATE, &adam, "beta2 -0.5 out of range");
  adam.attrs = (pk_op_attrs){.eps = -1e-8};
  expect_build_error(ctx, "bad_adam_eps", PK_OP_ADAMW_UPDATE, &adam, "eps -1e-08 out of range");
  adam.attrs = (pk_op_attrs){.clip_norm = INFINITY};
  expect_build_error(ctx, "bad_adam_clip_inf", PK_OP_ADAMW_UPDATE, &adam, "clip_norm inf");
  sgd.attrs = (pk_op_attrs){.momentum = NAN};
  expect_build_error(ctx, "bad_sgd_momentum_nan", PK_OP_SGD_UPDATE, &sgd, "momentum nan");
  sgd.attrs = (pk_op_attrs){.weight_decay = -1};
  expect_build_error(ctx, "bad_sgd_weight_decay", PK_OP_SGD_UPDATE, &sgd, "weight_decay -1");
  sgd.attrs = (pk_op_attrs){.groups = 0};
  sgd.in[3] = (pk_op_input){1, {3}, F};
  expect_build_error(ctx, "bad_sgd_hyper_shape", PK_OP_SGD_UPDATE, &sgd, "must have shape (4,)");
  sgd.in[3] = (pk_op_input){1, {4}, F};
  sgd.in[2] = (pk_op_input){1, {6}, F};
  expect_build_error(ctx, "bad_sgd_moment_shape", PK_OP_SGD_UPDATE, &sgd,
                     "first moment (6,) must have the weight's shape (5,)");

  ce.in[2] = (pk_op_input){1, {3}, F};
  expect_build_error(ctx, "bad_ce_row_weights", PK_OP_SOFTMAX_CROSS_ENTROPY, &ce,
                     "row weights (3,) must have shape (2,)");
  ce.in[2] = (pk_op_input){1, {2}, F};
  ce.in[1] = (pk_op_input){2, {2, 4}, F};
  expect_build_error(ctx, "bad_ce_targets", PK_OP_SOFTMAX_CROSS_ENTROPY, &ce,
                     "targets (2, 4) must have the shape of the logits (2, 3)");
  pk_op_params ce3 = {3, {{3, {2, 3, 1}, F}, {3, {2, 3, 1}, F}, {1, {2}, F}}, {.groups = 0}};
  expect_build_error(ctx, "bad_ce_rank", PK_OP_SOFTMAX_CROSS_ENTROPY, &ce3, "must have rank 2");
  pk_op_params mse = {3, {{2, {2, 3}, F}, {2, {3, 2}, F}, {1, {2}, F}}, {.groups = 0}};
  expect_build_error(ctx, "bad_mse_targets", PK_OP_MSE_LOSS, &mse, "must have the shape of the prediction");

  /* losses with integer labels */
  pk_op_params xl = {2, {{2, {4, 3}, F}, {1, {5}, PKRT_DTYPE_I64}}, {.groups = 0}};
  expect_build_error(ctx, "bad_xent_label_shape", PK_OP_CROSS_ENTROPY, &xl,
                     "labels (5,) must have the shape (4,) of the logits without the class dim");
  xl.in[1] = (pk_op_input){1, {4}, F};
  expect_build_error(ctx, "bad_xent_float_labels", PK_OP_CROSS_ENTROPY, &xl,
                     "(must be i32 or i64: it holds integers)");
  xl.in[1] = (pk_op_input){1, {4}, PKRT_DTYPE_I32};
  xl.attrs.label_smoothing = 1.5;
  expect_build_error(ctx, "bad_xent_smoothing", PK_OP_CROSS_ENTROPY, &xl,
                     "label_smoothing 1.5 out of range");
  pk_op_params xl4 = {2, {{4, {2, 3, 4, 5}, F}, {3, {2, 3, 4}, PKRT_DTYPE_I64}}, {.groups = 0}};
  expect_build_error(ctx, "bad_xent_rank", PK_OP_CROSS_ENTROPY, &xl4,
                     "must have rank 2 (N, K) or 3 (N, T, K)");
  xl.attrs.label_smoothing = 0;
  expect_grad_error(ctx, "grad_xent_labels_not_differentiable", PK_OP_CROSS_ENTROPY, &xl, 1,
                    "not differentiable");
  pk_ctx_free(ctx);
}

/* ---- attention, softmax family, pooling, activations ---- */

/* dX of input `input` of op at inputs ins (forward run first, for stages), dY = dy. */
static const pk_te_ref_tensor *grad_of(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm,
                                       const double *const *ins, int input, const double *dy) {
  pk_te_program *p;
  pk_op_grad g;
  pk_te_ref *ref = run_op(ctx, op, prm, ins, &p);
  if (!ref || pk_op_grad_build(ctx, op, prm, input, &g) != PK_OK) return NULL;
  return run_grad(ctx, &g, p, ref, dy);
}

/* Exact values (inf included) of a gradient. */
static void check_grad_values(pk_ctx *ctx, const char *label, const pk_te_ref_tensor *got,
                              const double *want, int64_t n) {
  bool ok = got != NULL;
  int64_t bad = -1;
  for (int64_t i = 0; ok && i < n; i++)
    if (!(got->val[i] == want[i] || fabs(got->val[i] - want[i]) <= 1e-12)) ok = false, bad = i;
  check(ok, label, "%s element %lld: got %.17g, want %.17g", got ? "" : pk_ctx_error(ctx),
        (long long)bad, bad >= 0 ? got->val[bad] : 0.0, bad >= 0 ? want[bad] : 0.0);
  pk_ctx_clear_error(ctx);
}

/* torch.pow's gradient rules at 0 (values from PyTorch 1.13), and sdpa's rule for a row
 * with every key masked: zero output and zero gradients, not NaN. */
static void test_attn_family_rules(void) {
  pk_ctx *ctx = pk_ctx_new();
  const pkrt_dtype F = PKRT_DTYPE_F64;
  pk_op_params pw = {2, {{1, {4}, F}, {1, {4}, F}}, {.groups = 0}};
  const double a[4] = {0, 0, 2, 0}, b[4] = {0, 2, 0, 0.5}, ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  const double *ab[2] = {a, b};
  check_grad_values(ctx, "pow_grad_base_at_0", grad_of(ctx, PK_OP_POW, &pw, ab, 0, ones),
                    (double[]){0, 0, 0, INFINITY}, 4);
  check_grad_values(ctx, "pow_grad_exponent_at_0", grad_of(ctx, PK_OP_POW, &pw, ab, 1, ones),
                    (double[]){0, 0, log(2.0), 0}, 4);
  const double x[2] = {0, 1};
  const double *xs[1] = {x};
  pk_op_params p0 = {1, {{1, {2}, F}}, {.exponent = 0}};
  check_grad_values(ctx, "pow_scalar_grad_exponent_0", grad_of(ctx, PK_OP_POW_SCALAR, &p0, xs, 0, ones),
                    (double[]){0, 0}, 2);
  pk_op_params ph = {1, {{1, {2}, F}}, {.exponent = 0.5}};
  check_grad_values(ctx, "pow_scalar_grad_sqrt_at_0", grad_of(ctx, PK_OP_POW_SCALAR, &ph, xs, 0, ones),
                    (double[]){INFINITY, 0.5}, 2);

  /* batch 0 keeps keys 0 and 2; batch 1 masks every key: its Y and gradients are 0 */
  pk_op_params sd = {4, {{3, {2, 2, 3}, F}, {3, {2, 4, 3}, F}, {3, {2, 4, 2}, F}, {2, {2, 4}, F}},
                     {.causal = false}};
  double q[12], k[24], v[16], dy[8];
  for (int i = 0; i < 24; i++) k[i] = sin(i + 1.0);
  for (int i = 0; i < 12; i++) q[i] = cos(i + 0.5);
  for (int i = 0; i < 16; i++) v[i] = 0.1 * i - 0.7;
  for (int i = 0; i < 8; i++) dy[i] = 0.3 * i - 1;
  const double mask[8] = {0, -INFINITY, 0, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  const double *ins[4] = {q, k, v, mask};
  pk_te_program *p;
  pk_te_ref *ref = run_op(ctx, PK_OP_SDPA_MASKED, &sd, ins, &p);
  const pk_te_ref_tensor *y = ref ? &ref->tensors[p->ntensors - 1] : NULL;
  bool ok = y != NULL;
  for (int i = 0; ok && i < 8; i++) ok = isfinite(y->val[i]) && (i < 4 || y->val[i] == 0);
  check(ok, "sdpa_fully_masked_row_is_0", "%s", ok ? "" : y ? "NaN or nonzero" : pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  static const char *names[3] = {"sdpa_fully_masked_grad_q", "sdpa_fully_masked_grad_k",
                                 "sdpa_fully_masked_grad_v"};
  for (int in = 0; in < 3; in++) {
    const pk_te_ref_tensor *gr = grad_of(ctx, PK_OP_SDPA_MASKED, &sd, ins, in, dy);
    int64_t half = gr ? gr->numel / 2 : 0;
    bool gok = gr != NULL, some = false;
    for (int64_t i = 0; gok && i < gr->numel; i++) {
      gok = isfinite(gr->val[i]) && (i < half || gr->val[i] == 0);
      some |= i < half && gr->val[i] != 0;
    }
    check(gok && some, names[in], "%s", gr ? "NaN, or batch 1 not 0, or batch 0 all 0" : pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
  }
  pk_ctx_free(ctx);
}

int main(void) {
  test_attn_family_rules();
  test_coverage();
  test_finite_differences();
  test_ties();
  test_updates();
  test_slice_reshape();
  test_errors();
  printf("%s op_grad: %d cases\n", failures ? "FAIL" : "PASS", GRAD_CASES);
  return failures ? 1 : 0;
}
