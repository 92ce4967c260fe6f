/* test_te_relayout.c — pk_te_relayout (te/relayout.c, the layout pass's rewrite): each
 * program with its batch activations (rank 4, dim 0 the batch) stored NHWC, fed the
 * original inputs permuted, computes the original results permuted, in the interpreter —
 * conv2d, its dX and dW, batch norm and its dX, max and avg pools and their dX, and
 * elementwise ops (a broadcast bias add, relu's gradient); the permuted stage iterates in
 * the new order (its canonical text says so); the conv-as-GEMM template takes an NHWC conv
 * on a small image; a bad permutation is refused. */
#include <string.h>

#include "pk_ops.h"
#include "pk_search.h"
#include "pk_te.h"
#include "pk_verify.h"
#include "space_impl.h" /* the template a space chose */
#include "pk_test.h"

#define N 2 /* the batch: tensors of rank 4 with this dim 0 are the activations */
static const int NHWC[4] = {0, 2, 3, 1};

static bool activation(const pk_te_tensor *t) { return t->ndim == 4 && t->shape[0] == N; }

/* Element (n, c, h, w) of NCHW shape s: its offset in NCHW, and in NHWC. */
static int64_t at_nchw(const int64_t *s, int64_t n, int64_t c, int64_t h, int64_t w) {
  return ((n * s[1] + c) * s[2] + h) * s[3] + w;
}
static int64_t at_nhwc(const int64_t *s, int64_t n, int64_t c, int64_t h, int64_t w) {
  return ((n * s[2] + h) * s[3] + w) * s[1] + c;
}

/* Runs p (placeholders random) and its relayout (the same values, activations permuted);
 * every compute must agree element by element. */
static void check_program(pk_ctx *ctx, const char *what, const pk_te_program *p) {
  if (!p) {
    check(false, what, "build: %s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return;
  }
  const int **perm = pk_alloc(ctx, sizeof *perm * (size_t)p->ntensors);
  int npermuted = 0;
  for (int i = 0; i < p->ntensors; i++)
    if (activation(p->tensors[i])) perm[i] = NHWC, npermuted++;
  pk_te_program *q;
  if (pk_te_relayout(ctx, p, perm, &q) != PK_OK) {
    check(false, what, "relayout: %s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return;
  }
  pk_te_ref *a = pk_te_ref_new(ctx, p), *b = pk_te_ref_new(ctx, q);
  pk_te_ref_fill_random(p, a, 7);
  for (int i = 0; a && b && i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    if (t->kind != PK_TE_PLACEHOLDER) continue;
    if (!pk_dtype_is_float(t->dtype)) {
      memcpy(b->tensors[i].ival, a->tensors[i].ival, sizeof(int64_t) * (size_t)a->tensors[i].numel);
      continue;
    }
    const int64_t *s = t->shape;
    for (int64_t e = 0; e < a->tensors[i].numel; e++) {
      int64_t to = e;
      if (perm[i]) { /* e is (n, c, h, w) in NCHW */
        int64_t w = e % s[3], h = e / s[3] % s[2], c = e / (s[3] * s[2]) % s[1],
                n = e / (s[3] * s[2] * s[1]);
        to = at_nhwc(s, n, c, h, w);
      }
      b->tensors[i].val[to] = a->tensors[i].val[e];
      b->tensors[i].mag[to] = a->tensors[i].mag[e];
    }
  }
  if (pk_te_interp_run(ctx, p, a) != PK_OK || pk_te_interp_run(ctx, q, b) != PK_OK) {
    check(false, what, "interpreter: %s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return;
  }
  double worst = 0;
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    if (t->kind != PK_TE_COMPUTE || !pk_dtype_is_float(t->dtype)) continue;
    const int64_t *s = t->shape;
    for (int64_t e = 0; e < a->tensors[i].numel; e++) {
      int64_t from = e;
      if (perm[i]) {
        int64_t w = e % s[3], h = e / s[3] % s[2], c = e / (s[3] * s[2]) % s[1],
                n = e / (s[3] * s[2] * s[1]);
        PK_ASSERT(at_nchw(s, n, c, h, w) == e);
        from = at_nhwc(s, n, c, h, w);
      }
      double d = b->tensors[i].val[from] - a->tensors[i].val[e];
      if (d < 0) d = -d;
      if (d > worst) worst = d;
    }
  }
  /* the same sums in the same order: the same doubles */
  check(worst == 0 && npermuted > 0, what, "%d tensors permuted, largest difference %g",
        npermuted, worst);
}

static pk_te_program *op(pk_ctx *ctx, pk_op_kind k, const pk_op_params *prm) {
  pk_te_program *p = NULL;
  return pk_op_build(ctx, k, prm, &p) == PK_OK ? p : NULL;
}

static pk_te_program *grad(pk_ctx *ctx, pk_op_kind k, const pk_op_params *prm, int input) {
  pk_op_grad g;
  return pk_op_grad_build(ctx, k, prm, input, &g) == PK_OK ? g.prog : NULL;
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  const pkrt_dtype F = PKRT_DTYPE_F32;
  pk_op_params conv = {.ninputs = 2,
                       .in = {{4, {N, 3, 7, 6}, F}, {4, {4, 3, 3, 3}, F}},
                       .attrs = {.stride = {2, 1}, .pad = {1, 1, 1, 0}}};
  check_program(ctx, "conv2d", op(ctx, PK_OP_CONV2D, &conv));
  check_program(ctx, "conv2d_dx", grad(ctx, PK_OP_CONV2D, &conv, 0));
  check_program(ctx, "conv2d_dw", grad(ctx, PK_OP_CONV2D, &conv, 1));
  pk_op_params dw = {.ninputs = 2,
                     .in = {{4, {N, 4, 5, 5}, F}, {4, {4, 1, 3, 3}, F}},
                     .attrs = {.groups = 4, .pad = {1, 1, 1, 1}}};
  check_program(ctx, "conv2d_depthwise", op(ctx, PK_OP_CONV2D, &dw));
  check_program(ctx, "conv2d_depthwise_dx", grad(ctx, PK_OP_CONV2D, &dw, 0));
  pk_op_params bn = {.ninputs = 5,
                     .in = {{4, {N, 3, 4, 5}, F}, {1, {3}, F}, {1, {3}, F}, {1, {3}, F},
                            {1, {3}, F}}};
  check_program(ctx, "batch_norm", op(ctx, PK_OP_BATCH_NORM, &bn));
  check_program(ctx, "batch_norm_dx", grad(ctx, PK_OP_BATCH_NORM, &bn, 0));
  pk_op_params pool = {.ninputs = 1,
                       .in = {{4, {N, 3, 6, 6}, F}},
                       .attrs = {.kernel = {3, 3}, .stride = {2, 2}, .pad = {1, 1, 1, 1}}};
  check_program(ctx, "max_pool2d", op(ctx, PK_OP_MAX_POOL2D, &pool));
  check_program(ctx, "max_pool2d_dx", grad(ctx, PK_OP_MAX_POOL2D, &pool, 0));
  check_program(ctx, "avg_pool2d_dx", grad(ctx, PK_OP_AVG_POOL2D, &pool, 0));
  pk_op_params gap = {.ninputs = 1, .in = {{4, {N, 3, 4, 4}, F}}};
  check_program(ctx, "global_avg_pool2d_dx", grad(ctx, PK_OP_GLOBAL_AVG_POOL2D, &gap, 0));
  pk_op_params bias = {.ninputs = 2, .in = {{4, {N, 3, 4, 5}, F}, {4, {1, 3, 1, 1}, F}}};
  check_program(ctx, "add_bias", op(ctx, PK_OP_ADD, &bias));
  check_program(ctx, "relu_dx", grad(ctx, PK_OP_RELU, &gap, 0));

  /* the permuted stage iterates (n, h, w, c): its canonical text is the NHWC conv's */
  pk_te_program *p = op(ctx, PK_OP_CONV2D, &conv), *q = NULL;
  const int *perm[3] = {NHWC, NULL, NHWC};
  if (p && pk_te_relayout(ctx, p, perm, &q) == PK_OK) {
    const char *text = pk_te_print(ctx, q);
    check(strstr(text, "t2 = compute((2, 4, 5, 4), (i0, i1, i2, i3) =>") != NULL, "relayout_text",
          "%s", text);
  } else {
    check(false, "relayout_text", "%s", pk_ctx_error(ctx));
  }
  /* a 3x3 conv, 16 -> 32 channels, on 8x8 images: NCHW or NHWC, the conv-as-GEMM template
   * (its vector lanes along the output channels, which the NHWC result stores contiguous) */
  pk_op_params small = {.ninputs = 2,
                        .in = {{4, {N, 16, 8, 8}, F}, {4, {32, 16, 3, 3}, F}},
                        .attrs = {.pad = {1, 1, 1, 1}}};
  for (int l = 0; l < 2; l++) {
    const char *what = l ? "relayout_conv_gemm_nhwc" : "relayout_conv_gemm_nchw";
    pk_te_program *c = op(ctx, PK_OP_CONV2D, &small), *r = c;
    const int *pm[3] = {NHWC, NULL, NHWC};
    pk_task task;
    pk_space *sp = NULL;
    if (!c || (l && pk_te_relayout(ctx, c, pm, &r) != PK_OK) ||
        pk_task_from_program(ctx, r, "c", &task) != PK_OK || pk_space_new(ctx, &task, &sp) != PK_OK) {
      check(false, what, "%s", pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
      pk_space_free(sp);
      continue;
    }
    check(!strcmp(sp->cls->name, "conv_gemm"), what, "template %s", sp->cls->name);
    pk_space_free(sp);
  }
  const int bad[4] = {0, 2, 2, 1};
  const int *perm_bad[3] = {bad, NULL, NULL};
  pk_ctx_clear_error(ctx);
  check(p && pk_te_relayout(ctx, p, perm_bad, &q) == PK_ERR_USAGE &&
            strstr(pk_ctx_error(ctx), "permutation of tensor 0") != NULL,
        "relayout_bad_perm", "%s", pk_ctx_error(ctx));
  pk_ctx_free(ctx);
  return pk_test_summary("test_te_relayout");
}
