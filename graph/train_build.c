/* train_build.c — pk_train_build / pk_eval_build: forward graph → training step (forward
 * with saved slices, loss, pruned backward, optimizer updates) in execution order, each
 * update placed right after the last node that needs the old weight or its gradient. */
#include <math.h>
#include <string.h>

#include "train_impl.h"

#define CHECKF(...) pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: " __VA_ARGS__)

/* Labels and the loss node. Classification: integer labels (i64, the prediction's shape
 * without the class dim) and cross_entropy, whose ignored labels (-1 outside [0, K), and
 * ignore_index) also make a partial batch's padding rows weigh nothing; mse: float targets
 * shaped like the prediction and row weights (1/valid, 0 for padding). */
static pk_status add_loss(pk_graph *g, const pk_train_spec *spec, int *loss_node) {
  pk_ctx *ctx = g->ctx;
  const pk_gtensor *z = g->tensors[g->output];
  if (spec->loss != PK_LOSS_MSE && spec->loss != PK_LOSS_SOFTMAX_XENT)
    return CHECKF("unknown loss kind %d", (int)spec->loss);
  bool xent = spec->loss == PK_LOSS_SOFTMAX_XENT;
  pk_op_kind op = xent ? PK_OP_CROSS_ENTROPY : PK_OP_MSE_LOSS;
  if (xent && z->ndim != 2 && z->ndim != 3)
    return CHECKF("cross-entropy needs a prediction of shape (N, K) or (N, T, K); '%s' has "
                  "rank %d", z->name, z->ndim);
  pk_op_attrs a = {.has_ignore_index = spec->has_ignore_index,
                   .ignore_index = spec->ignore_index,
                   .label_smoothing = spec->label_smoothing};
  int in[3], nin = xent ? 2 : 3;
  in[0] = g->output;
  if (xent) {
    g->target = pk_graph_push_tensor(g, pk_graph_unique_name(g, "target"), PK_ROLE_LABEL,
                                     PKRT_DTYPE_I64, z->ndim - 1, z->shape);
  } else {
    g->target = pk_graph_push_tensor(g, pk_graph_unique_name(g, "target"), PK_ROLE_LABEL,
                                     z->dtype, z->ndim, z->shape);
    g->row_weight = pk_graph_push_tensor(g, pk_graph_unique_name(g, "row_weight"),
                                         PK_ROLE_LABEL, z->dtype, 1, z->shape);
    in[2] = g->row_weight;
  }
  in[1] = g->target;
  pk_op_params prm;
  pk_graph_params_of(g, nin, in, xent ? &a : NULL, &prm);
  pk_te_program *prog;
  pk_status s = pk_op_build(ctx, op, &prm, &prog);
  if (s != PK_OK) return pk_graph_refail(ctx, s, pk_sprintf(ctx, "loss on '%s'", z->name));
  *loss_node = pk_graph_push_prog(g, "loss", PK_GNODE_OP, op, &prm, -1, PK_PHASE_LOSS, prog,
                                  nin, in, "loss", PK_ROLE_ACTIVATION, &g->loss);
  return PK_OK;
}

/* A partial-channel weight must be the second input of exactly one conv2d (groups 1) or
 * matmul / batch_matmul (trans_b, rank-2 weight) node, whose first input is the activation
 * to slice. */
static pk_status check_partial_use(pk_graph *g, const pk_gtensor *w, int *layer_node) {
  pk_ctx *ctx = g->ctx;
  int reader = -1, reads = 0;
  for (int k = 0; k < g->nnodes; k++)
    for (int i = 0; i < g->nodes[k]->ninputs; i++)
      if (g->nodes[k]->inputs[i] == w->id) reader = k, reads++;
  if (reads != 1)
    return CHECKF("partial-channel weight '%s' must be read by exactly one node (read %d times)",
                  w->name, reads);
  const pk_gnode *n = g->nodes[reader];
  bool ok = n->ninputs == 2 && n->inputs[1] == w->id &&
            ((n->op == PK_OP_CONV2D && n->prm.attrs.groups <= 1) ||
             ((n->op == PK_OP_MATMUL || (n->op == PK_OP_BATCH_MATMUL && w->ndim == 2)) &&
              n->prm.attrs.trans_b && !n->prm.attrs.trans_a));
  if (!ok)
    return CHECKF("partial-channel weight '%s' must be the weight of a conv2d (groups 1) or a "
                  "matmul / batch_matmul with trans_b and a rank-2 weight; node '%s' is not",
                  w->name, n->name);
  *layer_node = reader;
  return PK_OK;
}

/* Saves channels [0, S) of each partial-channel layer's input: a slice node that will run
 * just before the layer, and the view of the trained part of the weight. */
static pk_status add_slices(train_build *tb) {
  pk_graph *g = tb->g;
  int npartial = 0;
  for (int w = 0; w < tb->n0; w++) npartial += pk_train_is_partial(g->tensors[w]);
  tb->slice_before = pk_alloc(g->ctx, sizeof(int) * (size_t)(npartial + 1));
  for (int w = 0; w < tb->n0; w++) {
    pk_gtensor *wt = g->tensors[w];
    if (!pk_train_is_partial(wt)) continue;
    int L = -1;
    pk_status s = check_partial_use(g, wt, &L);
    if (s != PK_OK) return s;
    int64_t S = wt->train_channels;
    int x = g->nodes[L]->inputs[0];
    int axis = pk_train_channel_axis(g, g->nodes[L]);
    pk_op_attrs a = {.slice_axis = axis, .slice_start = 0, .slice_len = S};
    pk_op_params prm;
    pk_graph_params_of(g, 1, &x, &a, &prm);
    pk_te_program *prog;
    const char *name = pk_sprintf(g->ctx, "slice(%s)", g->tensors[x]->name);
    if ((s = pk_op_build(g->ctx, PK_OP_SLICE, &prm, &prog)) != PK_OK)
      return pk_graph_refail(g->ctx, s, name);
    int xs;
    int node = pk_graph_push_prog(
        g, name, PK_GNODE_OP, PK_OP_SLICE, &prm, -1, PK_PHASE_FORWARD, prog, 1, &x,
        pk_sprintf(g->ctx, "%s[%s:%lld]", g->tensors[x]->name, axis == 1 ? ":, " : "..., ",
                   (long long)S),
        PK_ROLE_ACTIVATION, &xs);
    PK_ASSERT(node == tb->nfwd + tb->nslices && tb->nslices < npartial);
    tb->slice_before[tb->nslices++] = L;
    tb->slice[w] = xs;
    int64_t shape[PK_TE_MAX_DIMS];
    memcpy(shape, wt->shape, sizeof shape);
    shape[1] = S;
    int v = pk_graph_push_tensor(g, pk_graph_unique_name(g, pk_sprintf(g->ctx, "%s[:, :%lld]",
                                                                        wt->name, (long long)S)),
                                 PK_ROLE_PARAM, wt->dtype, wt->ndim, shape);
    pk_gtensor *vt = g->tensors[v];
    vt->base = w;
    vt->trainable = true;
    vt->train_channels = S;
    vt->layer = wt->layer;
    vt->is_bias = wt->is_bias;
    pk_graph_dense_strides(wt->ndim, wt->shape, vt->view_strides);
    tb->view[w] = v;
  }
  return PK_OK;
}

/* An output that overwrites `base` in place: same storage, dense over the base (or, for a
 * partial weight, the view's strides into the full weight). */
static int inplace_output(pk_graph *g, const char *name, pk_tensor_role role, int like, int base) {
  const pk_gtensor *lt = g->tensors[like];
  int o = pk_graph_push_tensor(g, pk_graph_unique_name(g, name), role, lt->dtype, lt->ndim,
                               lt->shape);
  pk_gtensor *ot = g->tensors[o];
  ot->base = base;
  if (lt->base >= 0) {
    ot->view_offset = lt->view_offset;
    memcpy(ot->view_strides, lt->view_strides, sizeof ot->view_strides);
  } else {
    pk_graph_dense_strides(lt->ndim, lt->shape, ot->view_strides);
  }
  ot->trainable = lt->trainable;
  ot->train_channels = lt->train_channels;
  ot->layer = lt->layer;
  ot->is_bias = lt->is_bias;
  return o;
}

static int add_state(pk_graph *g, const char *what, const pk_gtensor *w, int like) {
  const pk_gtensor *lt = g->tensors[like];
  return pk_graph_push_tensor(g, pk_graph_unique_name(g, pk_sprintf(g->ctx, "%s(%s)", what,
                                                                    w->name)),
                              PK_ROLE_OPT_STATE, lt->dtype, lt->ndim, lt->shape);
}

/* One optimizer-side node of a single result (accumulate, square, sum, add, clip):
 * result named out_name with role; in place over `base` when base >= 0. */
static pk_status push_opt_node(pk_graph *g, const char *name, pk_op_kind op,
                               const pk_op_attrs *a, int nin, const int *in,
                               const char *out_name, pk_tensor_role role, int base, int *out) {
  pk_op_params prm;
  pk_graph_params_of(g, nin, in, a, &prm);
  pk_te_program *prog;
  pk_status s = pk_op_build(g->ctx, op, &prm, &prog);
  if (s != PK_OK) return pk_graph_refail(g->ctx, s, name);
  if (base < 0) {
    pk_graph_push_prog(g, name, PK_GNODE_OP, op, &prm, -1, PK_PHASE_UPDATE, prog, nin, in,
                       pk_graph_unique_name(g, out_name), role, out);
    return PK_OK;
  }
  int o = inplace_output(g, out_name, role, base, base);
  pk_graph_push_node(g, name, PK_GNODE_OP, op, &prm, -1, PK_PHASE_UPDATE, prog, nin, in, 1, &o);
  *out = o;
  return PK_OK;
}

/* The gradient each update reads, eff[w] (from tb->grad[w]): with accum_steps k > 1 the
 * group mean in a persistent accumulator (grad_accumulate, in place); with clip_global,
 * that scaled by min(1, c / (|all gradients|_2 + 1e-6)): every gradient is computed
 * before the norm, and the norm before any update reads a clipped gradient, so the
 * updates (anchored after their gradient's producer) all follow it. */
static pk_status add_grad_prep(train_build *tb, const bool *trains, int *eff) {
  pk_graph *g = tb->g;
  pk_ctx *ctx = g->ctx;
  const pk_train_spec *sp = tb->spec;
  pk_status s;
  for (int w = 0; w < tb->n0; w++) eff[w] = trains[w] ? tb->grad[w] : -1;
  if (sp->accum_steps > 1) {
    pk_op_attrs a = {.accum_steps = sp->accum_steps};
    for (int w = 0; w < tb->n0; w++) {
      if (!trains[w]) continue;
      const pk_gtensor *wt = g->tensors[w];
      int acc = add_state(g, "opt.acc", wt, tb->view[w] >= 0 ? tb->view[w] : w);
      int in[3] = {acc, eff[w], g->hyper};
      if ((s = push_opt_node(g, pk_sprintf(ctx, "accumulate(%s)", wt->name),
                             PK_OP_GRAD_ACCUMULATE, &a, 3, in,
                             pk_sprintf(ctx, "%s'", g->tensors[acc]->name), PK_ROLE_OPT_STATE,
                             acc, &eff[w])) != PK_OK)
        return s;
    }
  }
  if (!sp->clip_global) return PK_OK;
  int total = -1;
  for (int w = 0; w < tb->n0; w++) {
    if (!trains[w]) continue;
    const char *wn = g->tensors[w]->name;
    int sq, ss, in2[2] = {eff[w], eff[w]};
    pk_op_attrs all = {.naxes = 0};
    if ((s = push_opt_node(g, pk_sprintf(ctx, "square(%s)", wn), PK_OP_MUL, NULL, 2, in2,
                           pk_sprintf(ctx, "square(%s)", wn), PK_ROLE_TEMP, -1, &sq)) ||
        (s = push_opt_node(g, pk_sprintf(ctx, "sumsq(%s)", wn), PK_OP_SUM, &all, 1, &sq,
                           pk_sprintf(ctx, "sumsq(%s)", wn), PK_ROLE_TEMP, -1, &ss)))
      return s;
    if (total < 0) {
      total = ss;
      continue;
    }
    int in[2] = {total, ss};
    if ((s = push_opt_node(g, pk_sprintf(ctx, "grad_norm_sq(%s)", wn), PK_OP_ADD, NULL, 2, in,
                           "grad_norm_sq", PK_ROLE_TEMP, -1, &total)))
      return s;
  }
  pk_op_attrs c = {.clip_norm = sp->clip_norm};
  for (int w = 0; total >= 0 && w < tb->n0; w++) {
    if (!trains[w]) continue;
    const char *wn = g->tensors[w]->name;
    int in[2] = {eff[w], total};
    if ((s = push_opt_node(g, pk_sprintf(ctx, "clip(%s)", wn), PK_OP_CLIP_GRAD_NORM, &c, 2, in,
                           pk_sprintf(ctx, "clip(grad(%s))", wn), PK_ROLE_GRADIENT, -1,
                           &eff[w])))
      return s;
  }
  return PK_OK;
}

/* optimizer(W, G, M[, V], H) -> [stages,] M'[, V'], W' */
static pk_status add_update(train_build *tb, int w, int G) {
  pk_graph *g = tb->g;
  pk_ctx *ctx = g->ctx;
  const pk_train_spec *sp = tb->spec;
  const pk_gtensor *wt = g->tensors[w];
  int wv = tb->view[w] >= 0 ? tb->view[w] : w;
  bool adam = sp->optim != PK_OPTIM_SGD;
  pk_op_kind op = adam ? PK_OP_ADAMW_UPDATE : PK_OP_SGD_UPDATE;
  int m = add_state(g, "opt.m", wt, wv);
  int v = adam ? add_state(g, "opt.v", wt, wv) : -1;
  int in[5] = {wv, G, m, adam ? v : g->hyper, g->hyper};
  int nin = adam ? 5 : 4;
  /* global clipping already scaled G (clip_grad_norm) */
  pk_op_attrs a = {.weight_decay = sp->weight_decay,
                   .clip_norm = sp->clip_global ? 0 : sp->clip_norm,
                   .accum_steps = sp->accum_steps > 1 ? sp->accum_steps : 0};
  if (adam) {
    a.beta1 = sp->beta1;
    a.beta2 = sp->beta2;
    a.eps = sp->eps;
    a.decoupled = sp->optim == PK_OPTIM_ADAMW;
  } else {
    a.momentum = sp->momentum;
  }
  pk_op_params prm;
  pk_graph_params_of(g, nin, in, &a, &prm);
  const char *name = pk_sprintf(ctx, "update(%s)", wt->name);
  pk_te_program *prog;
  pk_status s = pk_op_build(ctx, op, &prm, &prog);
  if (s != PK_OK) return pk_graph_refail(ctx, s, name);
  int ncomp = 0;
  for (int i = 0; i < prog->ntensors; i++) ncomp += prog->tensors[i]->kind == PK_TE_COMPUTE;
  int nfinal = adam ? 3 : 2;
  PK_ASSERT(ncomp >= nfinal);
  int *outs = pk_alloc(ctx, sizeof(int) * (size_t)ncomp);
  int k = 0;
  for (int i = 0; i < prog->ntensors; i++) {
    const pk_te_tensor *pt = prog->tensors[i];
    if (pt->kind != PK_TE_COMPUTE || k >= ncomp - nfinal) continue;
    outs[k] = pk_graph_push_tensor(g, pk_graph_unique_name(g, pk_sprintf(ctx, "%s.s%d", name, k)),
                                   PK_ROLE_TEMP, pt->dtype, pt->ndim, pt->shape);
    k++;
  }
  outs[k++] = inplace_output(g, pk_sprintf(ctx, "%s'", g->tensors[m]->name), PK_ROLE_OPT_STATE,
                             m, m);
  if (adam)
    outs[k++] = inplace_output(g, pk_sprintf(ctx, "%s'", g->tensors[v]->name),
                               PK_ROLE_OPT_STATE, v, v);
  outs[k++] = inplace_output(g, pk_sprintf(ctx, "%s'", wt->name), PK_ROLE_PARAM, wv, w);
  pk_graph_push_node(g, name, PK_GNODE_OP, op, &prm, -1, PK_PHASE_UPDATE, prog, nin, in, ncomp,
                     outs);
  return PK_OK;
}

/* ---- batch norm ---- */

static bool trains(const pk_graph *g, int t) {
  const pk_gtensor *x = g->tensors[t];
  return x->role == PK_ROLE_PARAM && x->trainable;
}

/* Sets each forward batch_norm's mode (running stats: eval, or a frozen layer unless
 * train_all) and rebuilds its program; the stages are the same in both modes, so its
 * output tensors stay. Each layer in training mode updates its running stats, which must
 * then be buffers, and reads the step's H (made here when needed): the executor sets
 * H[3] = -1 to evaluate, so the artifact's eval and infer plans use the running stats. */
static pk_status set_bn_modes(pk_graph *g, int nfwd, bool train_all, bool eval) {
  pk_ctx *ctx = g->ctx;
  for (int k = 0; k < nfwd; k++) {
    pk_gnode *n = g->nodes[k];
    if (n->kind != PK_GNODE_OP || n->op != PK_OP_BATCH_NORM) continue;
    bool train = !eval && (train_all || trains(g, n->inputs[1]) || trains(g, n->inputs[2]));
    for (int i = 3; train && i < 5; i++)
      if (g->tensors[n->inputs[i]]->role != PK_ROLE_BUFFER)
        return CHECKF("batch_norm '%s' trains with batch statistics, so its running %s '%s' "
                      "must be a buffer (graph JSON: \"role\": \"buffer\"), not a %s", n->name,
                      i == 3 ? "mean" : "var", g->tensors[n->inputs[i]]->name,
                      pk_role_name(g->tensors[n->inputs[i]]->role));
    n->prm.attrs.use_running_stats = !train;
    if (train) { /* H[3] < 0 while the executor evaluates: then the running stats */
      if (g->hyper < 0) {
        const pk_gtensor *z = g->tensors[g->output];
        g->hyper = pk_graph_push_tensor(g, pk_graph_unique_name(g, "hyper"), PK_ROLE_HYPER,
                                        z->dtype, 1, (int64_t[]){4});
      }
      int *in = pk_alloc(ctx, sizeof(int) * 6);
      memcpy(in, n->inputs, sizeof(int) * 5);
      in[5] = g->hyper;
      n->inputs = in;
      n->ninputs = 6;
      int one = g->hyper;
      pk_op_params h;
      pk_graph_params_of(g, 1, &one, NULL, &h);
      n->prm.in[5] = h.in[0];
      n->prm.ninputs = 6;
    }
    pk_status s = pk_op_build(ctx, n->op, &n->prm, &n->prog);
    if (s != PK_OK) return pk_graph_refail(ctx, s, n->name);
  }
  return PK_OK;
}

/* batch_norm_stats(X, RM, RV) -> MEAN, VAR, RM', RV' after each training-mode batch_norm
 * (order_nodes places it right after the last reader of the old running stats). */
static pk_status add_bn_updates(train_build *tb) {
  pk_graph *g = tb->g;
  pk_ctx *ctx = g->ctx;
  for (int k = 0; k < tb->nfwd; k++) {
    const pk_gnode *n = g->nodes[k];
    if (n->kind != PK_GNODE_OP || n->op != PK_OP_BATCH_NORM || n->prm.attrs.use_running_stats)
      continue;
    int in[3] = {n->inputs[0], n->inputs[3], n->inputs[4]};
    pk_op_attrs a = {.momentum = n->prm.attrs.momentum};
    pk_op_params prm;
    pk_graph_params_of(g, 3, in, &a, &prm);
    const char *name = pk_sprintf(ctx, "update(%s.stats)", n->name);
    pk_te_program *prog;
    pk_status s = pk_op_build(ctx, PK_OP_BATCH_NORM_STATS, &prm, &prog);
    if (s != PK_OK) return pk_graph_refail(ctx, s, name);
    int outs[4], k2 = 0;
    for (int i = 0; i < prog->ntensors && k2 < 2; i++) {
      const pk_te_tensor *pt = prog->tensors[i];
      if (pt->kind != PK_TE_COMPUTE) continue;
      outs[k2] = pk_graph_push_tensor(g, pk_graph_unique_name(g, pk_sprintf(ctx, "%s.s%d", name, k2)),
                                      PK_ROLE_TEMP, pt->dtype, pt->ndim, pt->shape);
      k2++;
    }
    for (int i = 1; i < 3; i++)
      outs[1 + i] = inplace_output(g, pk_sprintf(ctx, "%s'", g->tensors[in[i]]->name),
                                   PK_ROLE_BUFFER, in[i], in[i]);
    pk_graph_push_node(g, name, PK_GNODE_OP, PK_OP_BATCH_NORM_STATS, &prm, -1, PK_PHASE_UPDATE,
                       prog, 3, in, 4, outs);
  }
  return PK_OK;
}

static int root_of(const pk_graph *g, int t) {
  return g->tensors[t]->base >= 0 ? g->tensors[t]->base : t;
}

/* Execution order: forward (each slice just before its layer), loss, backward in emission
 * order, and each update right after its anchor: the last node that reads the old weight
 * (or a view of it) or reads/produces its gradient, so the gradient dies at once. */
static void order_nodes(train_build *tb, int first_update) {
  pk_graph *g = tb->g;
  pk_ctx *ctx = g->ctx;
  int n = g->nnodes;
  int *pre = pk_alloc(ctx, sizeof(int) * (size_t)(n + 1));
  int npre = 0, slices_end = tb->nfwd + tb->nslices;
  for (int k = 0; k < tb->nfwd; k++) {
    for (int j = tb->nfwd; j < slices_end; j++)
      if (tb->slice_before[j - tb->nfwd] == k) pre[npre++] = j;
    pre[npre++] = k;
  }
  for (int j = slices_end; j < first_update; j++) pre[npre++] = j;
  int *pos = pk_alloc(ctx, sizeof(int) * (size_t)(n + 1));
  for (int p = 0; p < npre; p++) pos[pre[p]] = p;
  int *anchor = pk_alloc(ctx, sizeof(int) * (size_t)(n + 1));
  for (int u = first_update; u < n; u++) {
    const pk_gnode *un = g->nodes[u];
    int w = root_of(g, un->outputs[un->noutputs - 1]);
    int G = un->inputs[1];
    int best = g->tensors[G]->producer >= 0 ? pos[g->tensors[G]->producer] : -1;
    for (int p = 0; p < npre; p++) {
      const pk_gnode *rn = g->nodes[pre[p]];
      for (int i = 0; i < rn->ninputs; i++)
        if (root_of(g, rn->inputs[i]) == w || rn->inputs[i] == G) best = p > best ? p : best;
    }
    /* running stats update after the loss: forward + loss stays a prefix (the eval plan) */
    if (un->op == PK_OP_BATCH_NORM_STATS && best < pos[tb->loss_node]) best = pos[tb->loss_node];
    anchor[u] = best;
  }
  int *order = pk_alloc(ctx, sizeof(int) * (size_t)(n + 1));
  int no = 0;
  for (int u = first_update; u < n; u++)
    if (anchor[u] < 0) order[no++] = u;
  for (int p = 0; p < npre; p++) {
    order[no++] = pre[p];
    for (int u = first_update; u < n; u++)
      if (anchor[u] == p) order[no++] = u;
  }
  PK_ASSERT(no == n);
  pk_graph_reorder(g, order);
}

static pk_status check_spec(pk_ctx *ctx, const pk_train_spec *spec) {
  if (!spec) return CHECKF("no training spec");
  if (spec->clip_global && !(spec->clip_norm > 0))
    return CHECKF("global-norm clipping (clip_global) needs clip_norm > 0");
  if (spec->accum_steps < 0 || spec->accum_steps > INT32_MAX ||
      spec->lr_warmup_steps < 0 || spec->lr_warmup_steps > INT32_MAX)
    return CHECKF("accum_steps and lr_warmup_steps must be in 0..%d", INT32_MAX);
  if (spec->lr_sched == PK_LR_COSINE && spec->lr_warmup_steps > 0 &&
      spec->lr_total_steps <= spec->lr_warmup_steps)
    return CHECKF("cosine schedule: total_steps %lld must exceed warmup_steps %lld (the decay "
                  "runs over the steps after the warmup)", (long long)spec->lr_total_steps,
                  (long long)spec->lr_warmup_steps);
  if (spec->optim != PK_OPTIM_SGD && spec->optim != PK_OPTIM_ADAM && spec->optim != PK_OPTIM_ADAMW)
    return CHECKF("unknown optimizer kind %d", (int)spec->optim);
  if (!(spec->label_smoothing >= 0 && spec->label_smoothing <= 1))
    return CHECKF("label_smoothing %g must be in [0, 1]", spec->label_smoothing);
  const double v[] = {spec->lr, spec->momentum, spec->weight_decay, spec->beta1, spec->beta2,
                      spec->eps, spec->clip_norm};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (!isfinite(v[i]) || v[i] < 0)
      return CHECKF("training hyper-parameters must be finite and >= 0 (lr, momentum, "
                    "weight_decay, betas, eps, clip_norm)");
  return PK_OK;
}

static pk_status clone_checked(const pk_graph *fwd, pk_graph **out) {
  pk_graph *g = pk_graph_clone(fwd);
  for (int k = 0; k < g->nnodes; k++)
    if (g->nodes[k]->phase != PK_PHASE_FORWARD || g->nodes[k]->kind != PK_GNODE_OP)
      return pk_ctx_fail(g->ctx, PK_ERR_CHECK,
                         "graph: node '%s' is not a forward op: give the forward graph",
                         g->nodes[k]->name);
  if (fwd->loss >= 0) return pk_ctx_fail(g->ctx, PK_ERR_CHECK, "graph: already has a loss");
  pk_status s = pk_graph_validate(g);
  if (s != PK_OK) return s;
  *out = g;
  return PK_OK;
}

pk_status pk_train_build(const pk_graph *fwd, const pk_train_spec *spec, pk_graph **out) {
  *out = NULL;
  pk_ctx *ctx = fwd->ctx;
  pk_status s = check_spec(ctx, spec);
  pk_graph *g;
  if (s != PK_OK || (s = clone_checked(fwd, &g)) != PK_OK) return s;
  pk_train_spec sp = *spec;
  if (sp.beta1 == 0) sp.beta1 = 0.9;
  if (sp.beta2 == 0) sp.beta2 = 0.999;
  if (sp.eps == 0) sp.eps = 1e-8;
  pk_graph_layers(g); /* layer ids for names and stats; the marks on params are kept */
  train_build tb = {.g = g, .spec = &sp, .nfwd = g->nnodes, .n0 = g->ntensors};
  size_t nt = (size_t)tb.n0 + 1;
  tb.needs = pk_alloc(ctx, sizeof(bool) * nt);
  tb.grad = pk_alloc(ctx, sizeof(int) * nt);
  tb.slice = pk_alloc(ctx, sizeof(int) * nt);
  tb.view = pk_alloc(ctx, sizeof(int) * nt);
  for (size_t i = 0; i < nt; i++) tb.slice[i] = tb.view[i] = tb.grad[i] = -1;
  if ((s = set_bn_modes(g, tb.nfwd, sp.bn_train_all, false)) != PK_OK) return s;
  if ((s = add_slices(&tb)) != PK_OK) return s;
  if ((s = add_loss(g, &sp, &tb.loss_node)) != PK_OK) return s;
  if ((s = pk_train_autodiff(&tb)) != PK_OK) return s;
  const pk_gtensor *z = g->tensors[g->output];
  if (g->hyper < 0) /* else made for batch norm's mode switch */
    g->hyper = pk_graph_push_tensor(g, pk_graph_unique_name(g, "hyper"), PK_ROLE_HYPER,
                                    z->dtype, 1, (int64_t[]){4});
  bool *trains = pk_alloc(ctx, sizeof(bool) * nt);
  int *eff = pk_alloc(ctx, sizeof(int) * nt);
  for (int w = 0; w < tb.n0; w++) {
    const pk_gtensor *wt = g->tensors[w];
    /* a trainable param the loss does not depend on gets no gradient and no update */
    trains[w] = wt->role == PK_ROLE_PARAM && wt->base < 0 && wt->trainable && tb.grad[w] >= 0;
    if (trains[w] && wt->dtype != z->dtype)
      return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED,
                         "graph: param '%s' is %s but the model's output is %s (one dtype per "
                         "training graph)", wt->name, pkrt_dtype_name(wt->dtype),
                         pkrt_dtype_name(z->dtype));
  }
  if ((s = add_grad_prep(&tb, trains, eff)) != PK_OK) return s;
  int first_update = g->nnodes;
  for (int w = 0; w < tb.n0; w++)
    if (trains[w] && (s = add_update(&tb, w, eff[w])) != PK_OK) return s;
  if ((s = add_bn_updates(&tb)) != PK_OK) return s;
  order_nodes(&tb, first_update);
  if ((s = pk_graph_validate(g)) != PK_OK) return s;
  *out = g;
  return PK_OK;
}

pk_status pk_eval_build(const pk_graph *fwd, const pk_train_spec *spec, bool with_loss,
                        pk_graph **out) {
  *out = NULL;
  pk_ctx *ctx = fwd->ctx;
  pk_graph *g;
  pk_status s = clone_checked(fwd, &g);
  if (s != PK_OK) return s;
  if ((s = set_bn_modes(g, g->nnodes, false, true)) != PK_OK) return s;
  if (with_loss) {
    if (!spec) return CHECKF("evaluation with a loss needs a training spec");
    int ln;
    if ((s = add_loss(g, spec, &ln)) != PK_OK) return s;
    if ((s = pk_graph_validate(g)) != PK_OK) return s;
  }
  *out = g;
  return PK_OK;
}
