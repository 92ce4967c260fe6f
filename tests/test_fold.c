/* test_fold.c — the fold pass (graph/passes/fold.c) on a small training graph, through the
 * TE reference interpreter: conv1 -> frozen batch norm (folded into conv1's weight), a
 * conv with a bias add -> frozen batch norm (a per-channel affine), a residual add, the
 * transpose of a frozen projection weight (made at load), a trained head. Checks the
 * rewrite (phases, roles, the order), that three training steps give the weights the
 * unfolded graph gives, that folded results have bytes of their own in the memory plan,
 * that the frozen prefix leaves the load nodes out, and that a norm a gradient flows
 * through is left alone. */
#include <math.h>

#include "graph_impl.h" /* pk_graph_clone */
#include "pk_passes.h"
#include "test_graph_exec.h"
#include "test_graph_models.h"

#define N 2
#define LR 0.1
#define STEPS 3

static uint64_t rng = 0x9e3779b97f4a7c15u;
static double urand(void) { /* [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

/* lo + [-1, 1) * scale, n values */
static float *values(pk_ctx *ctx, int64_t n, double lo, double scale) {
  float *v = pk_alloc(ctx, sizeof(float) * (size_t)n);
  for (int64_t j = 0; j < n; j++) v[j] = (float)(lo + urand() * scale);
  return v;
}

/* A frozen batch norm over x's C channels: gamma, beta, running stats (var in [0.5, 1.5]). */
static int bn(pk_graph *g, const char *name, int x, int64_t c) {
  pk_ctx *ctx = g->ctx;
  const int64_t shape[1] = {c};
  int in[5] = {x,
               pk_graph_add_param(g, pk_sprintf(ctx, "%s.weight", name), PKRT_DTYPE_F32, 1, shape,
                                  values(ctx, c, 1, 0.5)),
               pk_graph_add_param(g, pk_sprintf(ctx, "%s.bias", name), PKRT_DTYPE_F32, 1, shape,
                                  values(ctx, c, 0, 0.5)),
               pk_graph_add_buffer(g, pk_sprintf(ctx, "%s.running_mean", name), PK_ROLE_BUFFER,
                                   PKRT_DTYPE_F32, 1, shape, values(ctx, c, 0, 0.5)),
               pk_graph_add_buffer(g, pk_sprintf(ctx, "%s.running_var", name), PK_ROLE_BUFFER,
                                   PKRT_DTYPE_F32, 1, shape, values(ctx, c, 1, 0.5))};
  int y;
  pk_op_attrs a = {.eps = 1e-3};
  if (pk_graph_add_op(g, name, PK_OP_BATCH_NORM, &a, 5, in, pk_sprintf(ctx, "%s.out", name),
                      &y) != PK_OK)
    return -1;
  return y;
}

static int op2(pk_graph *g, const char *name, pk_op_kind op, const pk_op_attrs *a, int x, int w) {
  int y;
  return pk_graph_add_op(g, name, op, a, 2, (int[]){x, w}, pk_sprintf(g->ctx, "%s.out", name),
                         &y) == PK_OK ? y : -1;
}

/* x (N, 2, 5, 5) -> conv1 3x3 (4) -> bn1 -> relu1 -> conv2 1x1 (4) + bias -> bn2 -> + relu1
 * -> mean over (2, 3) -> matmul with proj.weight^T (transpose node) -> fc (trained). */
static pk_graph *model(pk_ctx *ctx) {
  pk_graph *g = pk_graph_new(ctx, N);
  int x = pk_graph_add_tensor(g, "x", PK_ROLE_INPUT, PKRT_DTYPE_F32, 4, (int64_t[]){N, 2, 5, 5});
  int w1 = pk_graph_add_param(g, "conv1.weight", PKRT_DTYPE_F32, 4, (int64_t[]){4, 2, 3, 3},
                              values(ctx, 72, 0, 0.4));
  int w2 = pk_graph_add_param(g, "conv2.weight", PKRT_DTYPE_F32, 4, (int64_t[]){4, 4, 1, 1},
                              values(ctx, 16, 0, 0.5));
  int b2 = pk_graph_add_param(g, "conv2.bias", PKRT_DTYPE_F32, 3, (int64_t[]){4, 1, 1},
                              values(ctx, 4, 0, 0.2));
  int wp = pk_graph_add_param(g, "proj.weight", PKRT_DTYPE_F32, 2, (int64_t[]){4, 4},
                              values(ctx, 16, 0, 0.5));
  int h = bn(g, "bn1", op2(g, "conv1", PK_OP_CONV2D, NULL, x, w1), 4);
  h = tg_unary(g, "relu1", PK_OP_RELU, NULL, h);
  int c2 = op2(g, "conv2.add", PK_OP_ADD, NULL, op2(g, "conv2", PK_OP_CONV2D, NULL, h, w2), b2);
  int r = op2(g, "res", PK_OP_ADD, NULL, bn(g, "bn2", c2, 4), h);
  r = tg_unary(g, "gap", PK_OP_MEAN, &(pk_op_attrs){.naxes = 2, .axes = {2, 3}}, r);
  r = op2(g, "proj", PK_OP_MATMUL, NULL, r, tg_unary(g, "proj.t", PK_OP_TRANSPOSE, NULL, wp));
  g->output = tg_linear(g, "fc", r, 4, 3);
  for (int t = 0; t < g->ntensors; t++) /* the head: tg_linear leaves it zero */
    if (g->tensors[t]->role == PK_ROLE_PARAM && !g->tensors[t]->init)
      g->tensors[t]->init = values(ctx, pk_gtensor_numel(g->tensors[t]), 0, 0.5);
  return g->output >= 0 && pk_graph_validate(g) == PK_OK ? g : NULL;
}

static const pk_gnode *node_named(const pk_graph *g, const char *name) {
  int k = pk_graph_find_node(g, name);
  return k >= 0 ? g->nodes[k] : NULL;
}

/* The rewrite: bn1 into conv1's weight, bn2 an affine map, the transpose at load; load
 * nodes first, their results the step reads FOLDED. */
static void check_rewrite(const pk_graph *t) {
  const pk_gnode *bn1 = node_named(t, "bn1"), *bn2 = node_named(t, "bn2");
  const pk_gnode *conv1 = node_named(t, "conv1"), *tr = node_named(t, "proj.t");
  TG_CHECK(bn1 && bn1->fused && !strcmp(bn1->fused, "batch_norm_shift") && bn1->ninputs == 2 &&
               bn1->phase == PK_PHASE_FORWARD,
           "bn1 is not conv1's shift");
  TG_CHECK(bn2 && bn2->fused && !strcmp(bn2->fused, "batch_norm_affine") && bn2->ninputs == 3,
           "bn2 is not an affine map");
  const pk_gtensor *w = conv1 ? t->tensors[conv1->inputs[1]] : NULL;
  TG_CHECK(w && !strcmp(w->name, "fold(bn1).weight") && w->role == PK_ROLE_FOLDED,
           "conv1 reads '%s'", w ? w->name : "?");
  TG_CHECK(tr && tr->phase == PK_PHASE_LOAD && t->tensors[tr->outputs[0]]->role == PK_ROLE_FOLDED,
           "the transpose of the frozen proj.weight is not made at load");
  int nload = 0, first_step = -1;
  for (int k = 0; k < t->nnodes; k++) {
    if (t->nodes[k]->phase != PK_PHASE_LOAD) {
      if (first_step < 0) first_step = k;
      continue;
    }
    nload++;
    TG_CHECK(first_step < 0, "load node '%s' after step node #%d", t->nodes[k]->name, first_step);
  }
  /* fold(bn1) and fold(bn2) (scale and shift), fold(bn1).weight, proj.t */
  TG_CHECK(nload == 4, "%d load nodes, want 4", nload);
  pk_train_stats st;
  pk_train_stats_of(t, &st);
  TG_CHECK(st.load_nodes == 4, "pk_train_stats_of counts %d load nodes", st.load_nodes);
}

/* Inputs, labels and H of step `step` into a store. */
static void feed(tg_store *s, const pk_graph *t, int step) {
  rng = 0x51ed270b27u + (uint64_t)step;
  int x = pk_graph_find(t, "x");
  for (int64_t j = 0; j < tg_numel(t->tensors[x]); j++) s->val[x][j] = urand();
  for (int n = 0; n < N; n++) s->val[t->target][n] = (double)((n * 2 + step) % 3);
  s->val[t->hyper][0] = LR, s->val[t->hyper][1] = 1, s->val[t->hyper][2] = 1;
  s->val[t->hyper][3] = 0;
}

/* STEPS training steps of each graph from the same weights and data: the same losses and
 * weights (the folded arithmetic is reassociated: within 1e-5 relative, f32's acceptance). */
static void check_same_training(pk_ctx *ctx, const char *what, const pk_graph *a,
                                const pk_graph *b) {
  tg_store *sa = tg_store_new(ctx, a), *sb = tg_store_new(ctx, b);
  for (int step = 1; step <= STEPS; step++) {
    feed(sa, a, step);
    feed(sb, b, step);
    if (!tg_run(sa, a->nnodes) || !tg_run(sb, b->nnodes)) {
      tg_failures++;
      return;
    }
    double la = sa->val[a->loss][0], lb = sb->val[b->loss][0];
    TG_CHECK(fabs(la - lb) <= 1e-5 * fabs(la), "%s: step %d loss %.9g vs %.9g", what, step, la,
             lb);
  }
  int nparams = 0;
  for (int i = 0; i < a->ntensors; i++) { /* forward tensors keep their ids in both */
    const pk_gtensor *p = a->tensors[i];
    if (p->role != PK_ROLE_PARAM || p->base >= 0) continue;
    int j = pk_graph_find(b, p->name);
    double scale = 0, err = 0;
    for (int64_t e = 0; e < tg_numel(p); e++) {
      scale = fmax(scale, fabs(sa->val[i][e]));
      err = fmax(err, fabs(sa->val[i][e] - sb->val[j][e]));
    }
    TG_CHECK(err <= 1e-5 * scale, "%s: %s differs by %g (scale %g)", what, p->name, err, scale);
    nparams++;
  }
  TG_CHECK(nparams >= 9, "%s: compared %d params", what, nparams);
}

/* FOLDED tensors live in the arena for the whole step, in bytes no other tensor uses. */
static void check_memplan(const pk_graph *t) {
  pk_memplan *mp;
  TG_OK(t->ctx, pk_memplan_build(t, NULL, &mp));
  int nfolded = 0;
  for (int i = 0; i < t->ntensors; i++) {
    if (t->tensors[i]->role != PK_ROLE_FOLDED) continue;
    nfolded++;
    TG_CHECK(mp->region[i] == PK_REGION_ARENA && mp->first[i] == -1 && mp->last[i] == t->nnodes,
             "'%s': region %s, lifetime %d..%d", t->tensors[i]->name,
             pk_region_name(mp->region[i]), mp->first[i], mp->last[i]);
    for (int u = 0; u < t->ntensors; u++) {
      if (u == i || mp->region[u] != PK_REGION_ARENA || t->tensors[u]->base >= 0 || !mp->size[u])
        continue;
      bool apart = mp->offset[u] + mp->size[u] <= mp->offset[i] ||
                   mp->offset[i] + mp->size[i] <= mp->offset[u];
      TG_CHECK(apart, "'%s' shares bytes with folded '%s'", t->tensors[u]->name,
               t->tensors[i]->name);
    }
  }
  TG_CHECK(nfolded >= 4, "%d folded tensors", nfolded);
}

/* --cache-frozen after folding: the load nodes stay first and out of the prefix. */
static void check_prefix(const pk_graph *t) {
  pk_graph *c = pk_graph_clone(t);
  pk_frozen_prefix fp;
  TG_OK(t->ctx, pk_graph_frozen_prefix(c, &fp));
  int nload = 0;
  while (nload < c->nnodes && c->nodes[nload]->phase == PK_PHASE_LOAD) nload++;
  TG_CHECK(nload == 4, "%d load nodes first", nload);
  for (int k = nload; k < nload + fp.nnodes && k < c->nnodes; k++)
    TG_CHECK(c->nodes[k]->phase == PK_PHASE_FORWARD, "prefix node '%s'", c->nodes[k]->name);
  for (int i = 0; i < fp.ntensors; i++)
    TG_CHECK(c->tensors[fp.tensors[i]]->role != PK_ROLE_FOLDED, "cached folded '%s'",
             c->tensors[fp.tensors[i]]->name);
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = model(ctx);
  if (!g) {
    printf("FAIL fold: the model: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  pk_train_spec sp = {.loss = PK_LOSS_SOFTMAX_XENT, .optim = PK_OPTIM_SGD, .lr = LR,
                      .momentum = 0.9};
  const char *note;
  /* head only: nothing flows back through the norms */
  TG_OK(ctx, tg_apply_text(g, "{\"version\": 1, \"train\": [{\"params\": \"fc.*\"}]}"));
  pk_graph *plain, *folded;
  TG_OK(ctx, pk_train_build(g, &sp, &plain));
  TG_OK(ctx, pk_train_build(g, &sp, &folded));
  TG_OK(ctx, pk_pass_fold(folded, &note));
  TG_OK(ctx, pk_graph_validate(folded));
  printf("head: %s\n", note);
  check_rewrite(folded);
  check_same_training(ctx, "head", plain, folded);
  check_memplan(folded);
  check_prefix(folded);

  /* conv2 trains: its gradient flows back through bn2, which stays a batch norm; bn1 (below
   * every trained layer) still folds */
  TG_OK(ctx, tg_apply_text(g, "{\"version\": 1, \"train\": [{\"params\": [\"conv2.*\", "
                              "\"fc.*\"]}]}"));
  TG_OK(ctx, pk_train_build(g, &sp, &plain));
  TG_OK(ctx, pk_train_build(g, &sp, &folded));
  TG_OK(ctx, pk_pass_fold(folded, &note));
  TG_OK(ctx, pk_graph_validate(folded));
  printf("conv2+head: %s\n", note);
  const pk_gnode *bn1 = node_named(folded, "bn1"), *bn2 = node_named(folded, "bn2");
  TG_CHECK(bn1 && bn1->fused && !strcmp(bn1->fused, "batch_norm_shift"), "bn1 not folded");
  TG_CHECK(bn2 && !bn2->fused && bn2->op == PK_OP_BATCH_NORM && bn2->noutputs == 4,
           "bn2, which the gradient of conv2 flows through, was rewritten");
  check_same_training(ctx, "conv2+head", plain, folded);
  pk_ctx_free(ctx);
  return tg_report("fold");
}
