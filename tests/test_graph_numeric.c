/* test_graph_numeric.c — runs whole training steps through the TE reference interpreter
 * (a tiny executor honouring views and in-place outputs) and checks every update against
 * finite differences of the loss: trained weights move by -lr * dL/dW, frozen weights and
 * the untrained channels of a partial weight do not move, momentum holds the gradient. */
#include <math.h>

#include "test_graph_exec.h"
#include "test_graph_models.h"

#define N 2
#define LR 0.1
#define H 1e-5

static uint64_t rng = 88172645463325252u;
static double urand(void) { /* [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

/* Random weights scaled by fan-in (so activations stay O(1) and relus are mixed). */
static void randomize_params(pk_ctx *ctx, pk_graph *g) {
  for (int t = 0; t < g->ntensors; t++) {
    pk_gtensor *x = g->tensors[t];
    if (x->role != PK_ROLE_PARAM) continue;
    int64_t fan = x->ndim >= 2 ? tg_numel(x) / x->shape[0] : 4;
    float *v = pk_alloc(ctx, sizeof(float) * (size_t)tg_numel(x));
    for (int64_t j = 0; j < tg_numel(x); j++) v[j] = (float)(urand() * 1.5 / sqrt((double)fan));
    x->init = v;
  }
}

/* Inputs and integer class labels (cross_entropy), written into a store of g. */
static void feed(tg_store *s, const pk_graph *g, int x) {
  for (int64_t j = 0; j < tg_numel(g->tensors[x]); j++) s->val[x][j] = urand();
  int64_t K = g->tensors[g->output]->shape[1];
  for (int n = 0; n < N; n++) s->val[g->target][n] = (double)((n * 7 + 3) % K);
}

static double eval_loss(pk_ctx *ctx, const pk_graph *e, const double *xin, int w, int64_t j,
                        double dw) {
  tg_store *s = tg_store_new(ctx, e);
  memcpy(s->val[0], xin, sizeof(double) * (size_t)tg_numel(e->tensors[0]));
  int64_t K = e->tensors[e->output]->shape[1];
  for (int n = 0; n < N; n++) {
    s->val[e->target][n] = (double)((n * 7 + 3) % K);
  }
  if (w >= 0) s->val[w][j] += dw;
  if (!tg_run(s, e->nnodes)) return NAN;
  return s->val[e->loss][0];
}

/* One SGD step (momentum 0.9: the first step's M' is the gradient) checked against central
 * differences, for a few elements of every param. */
static void check_step(const char *what, pk_graph *fwd) {
  pk_ctx *ctx = fwd->ctx;
  pk_train_spec sp = {.loss = PK_LOSS_SOFTMAX_XENT, .optim = PK_OPTIM_SGD, .lr = LR,
                      .momentum = 0.9};
  pk_graph *t, *e;
  TG_OK(ctx, pk_train_build(fwd, &sp, &t));
  TG_OK(ctx, pk_eval_build(fwd, &sp, true, &e));
  tg_store *s = tg_store_new(ctx, t);
  feed(s, t, 0);
  s->val[t->hyper][0] = LR, s->val[t->hyper][1] = 1, s->val[t->hyper][2] = 1;
  double *xin = pk_alloc(ctx, sizeof(double) * (size_t)tg_numel(t->tensors[0]));
  memcpy(xin, s->val[0], sizeof(double) * (size_t)tg_numel(t->tensors[0]));
  double **before = pk_alloc(ctx, sizeof(double *) * (size_t)t->ntensors);
  for (int w = 0; w < t->ntensors; w++)
    if (t->tensors[w]->role == PK_ROLE_PARAM && t->tensors[w]->base < 0) {
      size_t b = sizeof(double) * (size_t)tg_numel(t->tensors[w]);
      before[w] = pk_alloc(ctx, b);
      memcpy(before[w], s->val[w], b);
    }
  if (!tg_run(s, t->nnodes)) {
    tg_failures++;
    return;
  }
  double l0 = eval_loss(ctx, e, xin, -1, 0, 0);
  TG_CHECK(fabs(s->val[t->loss][0] - l0) < 1e-12, "%s: step loss %g vs eval %g", what,
           s->val[t->loss][0], l0);
  int checked = 0, moved = 0;
  for (int w = 0; w < t->ntensors; w++) {
    const pk_gtensor *p = t->tensors[w];
    if (p->role != PK_ROLE_PARAM || p->base >= 0) continue;
    int64_t n = tg_numel(p), C = p->ndim >= 2 ? p->shape[1] : 1;
    int64_t inner = p->ndim >= 2 ? n / p->shape[0] / C : 1;
    bool partial = p->trainable && p->ndim >= 2 && p->train_channels < C;
    int nfd = 0;
    for (int k = 0; k < 4; k++) {
      int64_t j = (int64_t)((urand() + 1) / 2 * (double)n) % n;
      if (partial && k < 2) { /* half the samples inside the trained slice */
        int64_t ch = (j / inner) % C;
        j -= (ch - ch % p->train_channels) * inner;
      }
      int64_t ch = p->ndim >= 2 ? (j / inner) % C : 0;
      bool trains = p->trainable && (!partial || ch < p->train_channels);
      double step = (before[w][j] - s->val[w][j]) / LR;
      if (!trains) {
        TG_CHECK(s->val[w][j] == before[w][j], "%s: %s[%lld] (frozen) moved", what, p->name,
                 (long long)j);
        checked++;
        continue;
      }
      /* finite differences cost two forward passes in the interpreter: two per param */
      if (nfd++ >= 2) continue;
      double lp = eval_loss(ctx, e, xin, w, j, H), lm = eval_loss(ctx, e, xin, w, j, -H);
      double fd = (lp - lm) / (2 * H);
      TG_CHECK(fabs(step - fd) <= 1e-6 + 1e-4 * fabs(fd), "%s: %s[%lld] step %.9g vs fd %.9g",
               what, p->name, (long long)j, step, fd);
      moved += step != 0;
      checked++;
    }
  }
  /* Momentum after step 1 is the gradient: M' = (W - W') / lr. */
  for (int k = 0; k < t->nnodes; k++) {
    const pk_gnode *u = t->nodes[k];
    if (u->phase != PK_PHASE_UPDATE) continue;
    const pk_gtensor *m = t->tensors[u->inputs[2]], *wv = t->tensors[u->inputs[0]];
    int w = wv->base >= 0 ? wv->base : wv->id;
    for (int64_t j = 0; j < tg_numel(m); j++) {
      int64_t at = tg_elem(wv, j);
      double g = (before[w][at] - s->val[w][at]) / LR;
      TG_CHECK(fabs(s->val[m->id][j] - g) <= 1e-9 * (1 + fabs(g)), "%s: momentum of %s", what,
               t->tensors[w]->name);
      if (fabs(s->val[m->id][j] - g) > 1e-9 * (1 + fabs(g))) break;
    }
  }
  TG_CHECK(moved > 0, "%s: nothing moved", what);
  printf("%-24s %d elements checked against finite differences\n", what, checked);
}

/* Shape and data movement in a training graph: the MLP's logits split into three slices
 * (two strided; autodiff sums the pieces' gradients), a transposed round trip, a variadic
 * concat of four pieces (one of them twice), pad then slice back, and a column mean
 * expanded over the rows. */
static void check_shape_ops(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = tg_mlp(ctx, N); /* logits (N, 10) */
  int y = g->output, lo, ev, od, t1, t2, c, p, q, m, e, out;
  TG_OK(ctx, pk_graph_add_op(g, "lo", PK_OP_SLICE,
                             &(pk_op_attrs){.slice_axis = 1, .slice_len = 4}, 1, &y, "lo", &lo));
  TG_OK(ctx, pk_graph_add_op(g, "even", PK_OP_SLICE,
                             &(pk_op_attrs){.slice_axis = 1, .slice_start = 4, .slice_len = 6,
                                            .slice_step = 2}, 1, &y, "even", &ev));
  TG_OK(ctx, pk_graph_add_op(g, "odd", PK_OP_SLICE,
                             &(pk_op_attrs){.slice_axis = -1, .slice_start = 5, .slice_len = 5,
                                            .slice_step = 2}, 1, &y, "odd", &od));
  TG_OK(ctx, pk_graph_add_op(g, "t1", PK_OP_TRANSPOSE, NULL, 1, &lo, "t1", &t1));
  TG_OK(ctx, pk_graph_add_op(g, "t2", PK_OP_TRANSPOSE, &(pk_op_attrs){.nperm = 2, .perm = {1, 0}},
                             1, &t1, "t2", &t2));
  TG_OK(ctx, pk_graph_add_op(g, "cat", PK_OP_CONCAT, &(pk_op_attrs){.axis = 1}, 4,
                             (int[]){od, t2, ev, od}, "cat", &c)); /* od twice: summed */
  TG_OK(ctx, pk_graph_add_op(g, "pad", PK_OP_PAD,
                             &(pk_op_attrs){.pads = {1, 0, 2, 1}, .value = 0.5}, 1, &c, "pad", &p));
  TG_OK(ctx, pk_graph_add_op(g, "unpad", PK_OP_SLICE,
                             &(pk_op_attrs){.slice_axis = 1, .slice_start = 2, .slice_len = 10},
                             1, &p, "unpad", &q));
  int rows;
  TG_OK(ctx, pk_graph_add_op(g, "rows", PK_OP_SLICE,
                             &(pk_op_attrs){.slice_axis = 0, .slice_start = 1, .slice_len = N},
                             1, &q, "rows", &rows));
  TG_OK(ctx, pk_graph_add_op(g, "colmean", PK_OP_MEAN,
                             &(pk_op_attrs){.naxes = 1, .axes = {0}, .keepdims = true}, 1, &rows,
                             "colmean", &m));
  TG_OK(ctx, pk_graph_add_op(g, "expand", PK_OP_EXPAND,
                             &(pk_op_attrs){.new_ndim = 2, .new_shape = {N, 10}}, 1, &m,
                             "expand", &e));
  TG_OK(ctx, pk_graph_add_op(g, "mix", PK_OP_ADD, NULL, 2, (int[]){rows, e}, "mix", &out));
  g->output = out;
  randomize_params(ctx, g);
  TG_OK(ctx, tg_apply_text(g, "{\"version\":1,\"train\":[{\"params\":[\"fc3.*\","
                              "\"fc2.bias\"]}]}"));
  check_step("mlp shape ops", g);
  pk_ctx_free(ctx);
}

int main(void) {
  for (int sc = 0; sc < TG_NSCHEMES; sc++) {
    pk_ctx *ctx = pk_ctx_new();
    pk_graph *g = tg_cnn_sized(ctx, N, 4, 8, 8); /* narrow: the interpreter is slow */
    randomize_params(ctx, g);
    TG_OK(ctx, tg_apply_text(g, tg_scheme_text[sc]));
    check_step(tg_scheme_name[sc], g);
    pk_ctx_free(ctx);
  }
  /* MLP with a tensor read twice (gradient sum) and a partial matmul weight. */
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = tg_mlp(ctx, N);
  int r, y;
  TG_OK(ctx, pk_graph_add_op(g, "skip.relu", PK_OP_RELU, NULL, 1, &g->output, "skip.relu", &r));
  TG_OK(ctx, pk_graph_add_op(g, "skip.add", PK_OP_ADD, NULL, 2, (int[]){g->output, r}, "y", &y));
  g->output = y;
  randomize_params(ctx, g);
  TG_OK(ctx, tg_apply_text(g, "{\"version\":1,\"train\":[{\"params\":\"fc2.weight\","
                              "\"channels\":0.25},{\"params\":[\"fc1.bias\",\"fc3.*\"]}]}"));
  check_step("mlp skip+partial", g);
  pk_ctx_free(ctx);
  /* attention, softmax family, pooling, activations: causal attention over 3 positions of
   * 4 features (its gradients read the saved row max and sum stages), gelu's tanh form */
  ctx = pk_ctx_new();
  g = pk_graph_new(ctx, N);
  int xa = pk_graph_add_tensor(g, "x", PK_ROLE_INPUT, PKRT_DTYPE_F32, 2, (int64_t[]){N, 8});
  int qkv[3], att, flat;
  static const char *const qkv_names[3] = {"q", "k", "v"};
  for (int i = 0; i < 3; i++) {
    char rn[16];
    snprintf(rn, sizeof rn, "%s.seq", qkv_names[i]);
    int h = tg_linear(g, qkv_names[i], xa, 8, 12);
    TG_OK(ctx, pk_graph_add_op(g, rn, PK_OP_RESHAPE,
                               &(pk_op_attrs){.new_ndim = 3, .new_shape = {N, 3, 4}}, 1, &h, rn,
                               &qkv[i]));
  }
  TG_OK(ctx, pk_graph_add_op(g, "attn", PK_OP_SDPA, &(pk_op_attrs){.causal = true}, 3, qkv,
                             "attn", &att));
  TG_OK(ctx, pk_graph_add_op(g, "flat", PK_OP_RESHAPE,
                             &(pk_op_attrs){.new_ndim = 2, .new_shape = {N, 12}}, 1, &att,
                             "flat", &flat));
  flat = tg_unary(g, "gelu", PK_OP_GELU, &(pk_op_attrs){.approximate = PK_GELU_TANH}, flat);
  g->output = tg_linear(g, "out", flat, 12, 5);
  randomize_params(ctx, g);
  check_step("causal attention", g);
  pk_ctx_free(ctx);
  check_shape_ops();
  /* Partial channels of linear layers with a rank-3 input (batch_matmul, sliced on the last
   * axis), chosen by a blocks rule. */
  ctx = pk_ctx_new();
  g = tg_blocks(ctx, N, "layer", 2, 3, 4, 3);
  TG_CHECK(g != NULL, "tg_blocks: %s", pk_ctx_error(ctx));
  if (!g) return tg_report("test_graph_numeric");
  randomize_params(ctx, g);
  TG_OK(ctx, tg_apply_text(g, "{\"version\":1,\"train\":[{\"blocks\":{\"last\":2},"
                              "\"channels\":0.5},{\"params\":\"head.*\"}]}"));
  check_step("blocks rank-3 partial", g);
  pk_ctx_free(ctx);
  return tg_report("test_graph_numeric");
}
