/* test_graph_train.c — the training graph of the demo CNN under the six sparse-update
 * schemes: node counts per phase and saved-activation bytes against numbers derived by hand
 * below, pruning (no gradient for frozen weights, nothing below the earliest trained
 * layer), partial-channel slices and views, update placement, and the memory plan (sparse
 * < full < naive; no two live tensors overlap). Also accumulation, Adam, MSE and eval. */
#include "graph_impl.h" /* pk_graph_reorder, to break the update order on purpose */
#include "test_graph_models.h"

#define N 8
#define F 4 /* bytes per f32 */

/* ---- derivations (batch N = 8) ----
 * Forward (13 nodes): n0 conv1 (x, W1) -> c1 (N,16,6,6); n1 add b1 -> a1; n2 relu -> r1;
 * n3 conv2 -> c2 (N,32,4,4); n4 add -> a2; n5 relu -> r2; n6 pool -> p (N,32,2,2);
 * n7 conv3 pad 1 -> c3 (N,64,2,2); n8 add -> a3; n9 relu -> r3; n10 mean(2,3) -> g (N,64);
 * n11 matmul(g, Wfc^T) -> f (N,10); n12 add bfc -> z (logits). Partial schemes add one
 * slice node p[:, :8] just before conv3 (14 forward nodes). Loss: one node.
 *
 * What each gradient reads (te/ops): loss' dZ reads Z, T, R; add dA/dB read dY only;
 * matmul dA reads B and dY, dB reads A and dY; conv2d dX reads W and dY, dW reads X and dY;
 * relu dX reads X (the pre-activation a_i) and dY; max_pool2d dX reads X, Y and dY; mean
 * reads dY. Saved activations = forward results read by some backward node (labels and
 * the input x are fed, not saved).
 *
 * Sizes (bytes): the loss's saved stages (cross_entropy's row max M and row sum S, 8*4
 * each, and the counted rows C, 4) ls = 68; z 8*10*4 = 320; g 8*64*4 = 2048; a3 8*64*2*2*4 = 8192; p 8*32*2*2*4 =
 * 4096; r2 = a2 = 8*32*4*4*4 = 16384; r1 = a1 = 8*16*6*6*4 = 18432; p[:, :8] 8*8*2*2*4 = 1024.
 *
 * head (fc.*): backward = dZ, d f (add.0), d bfc (add.1), d Wfc = 4. Updates 2.
 *   saved: ls + z (dZ), g (dWfc) = 68 + 320 + 2048 = 2436.
 * biases+head: every activation from a1 up needs a gradient (b1 trains), c1 does not.
 *   dZ; n12: df, dbfc; n11: dg, dWfc; n10: dr3; n9: da3; n8: dc3, db3; n7: dp (W3 frozen);
 *   n6: dr2; n5: da2; n4: dc2, db2; n3: dr1; n2: da1; n1: db1 (c1 needs none) = 17.
 *   Updates 5. saved: ls, z, g, r3, r2 + p (pool dX), r1 (each relu's dX reads its result)
 *   = 68 + 320 + 2048 + 8192 + 16384 + 4096 + 18432 = 49540.
 * last 2 layers (conv3.*, fc.*): dZ, df, dbfc, dg, dWfc, dr3, da3, dc3, db3, dW3 = 10 (no
 *   dp: p needs none). Updates 4. saved: ls, z, g, a3, p (dW3) = 68+320+2048+8192+4096 =
 *   14724.
 * conv3 25% + all biases + head: biases+head plus dW3 over the slice = 18. Updates 6.
 *   saved: 49540 + p[:, :8] 1024 = 50564 (p itself is still saved: the pool's dX reads it).
 * conv3 25% + head (conv3.bias, fc.*): as last-2 = 10, updates 4, but dW3 reads the slice:
 *   saved ls, z, g, a3, p[:, :8] = 68 + 320 + 2048 + 8192 + 1024 = 11652 (p dies after
 *   conv3).
 * full: biases+head + dW3, dW2 (reads r1), dc1 + dW1 (reads x: fed) = 21. Updates 8.
 *   saved: 49540 (r1, which dW2 reads, is saved for relu1's dX already). */
typedef struct expect {
  int fwd, bwd, upd;
  int64_t saved;
  const char *grads; /* names of the tensors differentiated, sorted, space-separated */
} expect;

static const expect want[TG_NSCHEMES] = {
    [TG_HEAD] = {13, 4, 2, 2436, "fc.bias fc.mm fc.out fc.weight"},
    [TG_BIAS_HEAD] = {13, 17, 5, 49540,
                      "conv1.bias conv1.out conv2.bias conv2.conv conv2.out conv3.bias "
                      "conv3.conv conv3.out fc.bias fc.mm fc.out fc.weight gap pool relu1 "
                      "relu2 relu3"},
    [TG_LAST2] = {13, 10, 4, 14724,
                  "conv3.bias conv3.conv conv3.out conv3.weight fc.bias fc.mm fc.out "
                  "fc.weight gap relu3"},
    [TG_PART_ALLBIAS] = {14, 18, 6, 50564,
                         "conv1.bias conv1.out conv2.bias conv2.conv conv2.out conv3.bias "
                         "conv3.conv conv3.out conv3.weight fc.bias fc.mm fc.out fc.weight gap "
                         "pool relu1 relu2 relu3"},
    [TG_PART_HEAD] = {14, 10, 4, 11652,
                      "conv3.bias conv3.conv conv3.out conv3.weight fc.bias fc.mm fc.out "
                      "fc.weight gap relu3"},
    [TG_FULL] = {13, 21, 8, 49540,
                 "conv1.bias conv1.conv conv1.out conv1.weight conv2.bias conv2.conv conv2.out "
                 "conv2.weight conv3.bias conv3.conv conv3.out conv3.weight fc.bias fc.mm "
                 "fc.out fc.weight gap pool relu1 relu2 relu3"},
};

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static char *grad_names(pk_ctx *ctx, const pk_graph *t) {
  const char **names = pk_alloc(ctx, sizeof *names * (size_t)(t->nnodes + 1));
  int n = 0;
  for (int k = 0; k < t->nnodes; k++)
    if (t->nodes[k]->kind == PK_GNODE_GRAD) names[n++] = t->tensors[t->nodes[k]->grad_wrt]->name;
  qsort(names, (size_t)n, sizeof *names, cmp_str);
  pk_strbuf b;
  pk_strbuf_init(&b);
  for (int i = 0; i < n; i++) pk_strbuf_printf(&b, "%s%s", i ? " " : "", names[i]);
  return pk_strbuf_finish(ctx, &b);
}

static int root(const pk_graph *t, int x) {
  return t->tensors[x]->base >= 0 ? t->tensors[x]->base : x;
}

static bool reads(const pk_gnode *n, const pk_graph *t, int r) {
  for (int i = 0; i < n->ninputs; i++)
    if (root(t, n->inputs[i]) == r) return true;
  return false;
}

/* Pruning: frozen params get no gradient; every differentiated activation is produced at or
 * after the earliest trained layer. */
static void check_pruning(const char *what, const pk_graph *t) {
  int earliest = t->nnodes;
  for (int i = 0; i < t->ntensors; i++) {
    const pk_gtensor *p = t->tensors[i];
    if (p->role == PK_ROLE_PARAM && p->base < 0 && p->trainable && p->layer >= 0 &&
        t->layer_nodes[p->layer] < earliest)
      earliest = t->layer_nodes[p->layer];
  }
  for (int k = 0; k < t->nnodes; k++) {
    const pk_gnode *n = t->nodes[k];
    if (n->kind != PK_GNODE_GRAD) continue;
    const pk_gtensor *x = t->tensors[n->grad_wrt];
    if (x->role == PK_ROLE_PARAM)
      TG_CHECK(x->trainable, "%s: frozen %s has gradient node %s", what, x->name, n->name);
    else
      TG_CHECK(x->producer >= earliest, "%s: %s differentiates %s, below the earliest trained "
               "layer", what, n->name, x->name);
  }
  for (int i = 0; i < t->ntensors; i++) {
    const pk_gtensor *p = t->tensors[i];
    if (p->role != PK_ROLE_PARAM || p->base >= 0 || p->trainable) continue;
    char nm[160];
    snprintf(nm, sizeof nm, "grad(%s)", p->name);
    TG_CHECK(pk_graph_find(t, nm) < 0, "%s: frozen %s has a gradient tensor", what, p->name);
  }
}

/* Each update sits right after its anchor (the previous non-update node reads the old weight
 * or produces its gradient); the gradient is read by nothing after the update. */
static void check_updates(const char *what, const pk_graph *t) {
  for (int k = 0; k < t->nnodes; k++) {
    const pk_gnode *u = t->nodes[k];
    if (u->phase != PK_PHASE_UPDATE) continue;
    int w = root(t, u->outputs[u->noutputs - 1]);
    int G = u->inputs[1];
    int a = k - 1;
    while (a >= 0 && t->nodes[a]->phase == PK_PHASE_UPDATE) a--;
    TG_CHECK(a >= 0 && (reads(t->nodes[a], t, w) || t->tensors[G]->producer == a ||
                        reads(t->nodes[a], t, G)),
             "%s: %s is not right after its anchor", what, u->name);
    for (int j = k + 1; j < t->nnodes; j++)
      TG_CHECK(!reads(t->nodes[j], t, G), "%s: %s reads %s after its update", what,
               t->nodes[j]->name, t->tensors[G]->name);
    TG_CHECK(t->tensors[G]->role == PK_ROLE_GRADIENT, "%s: update input 1 is a gradient", what);
  }
}

/* No two tensors with their own ARENA storage and overlapping lifetimes share bytes;
 * in-place outputs and views sit at their base. */
static void check_memplan(const char *what, const pk_graph *t, const pk_memplan *mp) {
  int pairs = 0;
  for (int a = 0; a < t->ntensors; a++) {
    const pk_gtensor *x = t->tensors[a];
    if (x->base >= 0) {
      TG_CHECK(mp->offset[a] == mp->offset[x->base] && mp->region[a] == mp->region[x->base],
               "%s: view %s not at its base", what, x->name);
      continue;
    }
    TG_CHECK(mp->offset[a] % 64 == 0, "%s: %s misaligned", what, x->name);
    TG_CHECK(mp->size[a] >= pk_gtensor_bytes(x), "%s: %s size", what, x->name);
    TG_CHECK(mp->offset[a] + mp->size[a] <= mp->region_bytes[mp->region[a]], "%s: %s outside "
             "its region", what, x->name);
    for (int b = a + 1; b < t->ntensors; b++) {
      const pk_gtensor *y = t->tensors[b];
      if (y->base >= 0 || mp->region[a] != mp->region[b]) continue;
      bool live = mp->first[a] <= mp->last[b] && mp->first[b] <= mp->last[a];
      if (!live) continue;
      pairs++;
      bool disjoint = mp->offset[a] + mp->size[a] <= mp->offset[b] ||
                      mp->offset[b] + mp->size[b] <= mp->offset[a];
      TG_CHECK(disjoint, "%s: %s [%lld, +%lld) and %s [%lld, +%lld) overlap while both live",
               what, x->name, (long long)mp->offset[a], (long long)mp->size[a], y->name,
               (long long)mp->offset[b], (long long)mp->size[b]);
    }
  }
  TG_CHECK(pairs > 0, "%s: no live pairs checked", what);
  /* A node's outputs never share bytes with its inputs (in-place outputs excepted). */
  for (int k = 0; k < t->nnodes; k++) {
    const pk_gnode *n = t->nodes[k];
    for (int o = 0; o < n->noutputs; o++) {
      int y = n->outputs[o];
      if (t->tensors[y]->base >= 0) continue;
      for (int i = 0; i < n->ninputs; i++) {
        int x = root(t, n->inputs[i]);
        if (mp->region[x] != mp->region[y]) continue;
        TG_CHECK(mp->offset[x] + mp->size[x] <= mp->offset[y] ||
                     mp->offset[y] + mp->size[y] <= mp->offset[x],
                 "%s: node %s output %s overlaps input %s", what, n->name,
                 t->tensors[y]->name, t->tensors[x]->name);
      }
    }
  }
}

/* conv3 25%: the slice runs just before conv3, the weight gradient is over the slice and
 * lands in a view of the weight; dX of conv3 (when it exists) reads the full weight. */
static void check_partial(const char *what, const pk_graph *t, const pk_memplan *mp,
                          bool lower_trains) {
  int w3 = pk_graph_find(t, "conv3.weight");
  int pool = pk_graph_find(t, "pool");
  int sl = pk_graph_find(t, "pool[:, :8]");
  int view = pk_graph_find(t, "conv3.weight[:, :8]");
  TG_CHECK(w3 >= 0 && sl >= 0 && view >= 0, "%s: slice/view tensors exist", what);
  if (sl < 0 || view < 0) return;
  const pk_gtensor *s = t->tensors[sl], *v = t->tensors[view];
  TG_CHECK(s->ndim == 4 && s->shape[1] == 8 && s->shape[0] == N && s->shape[2] == 2,
           "%s: slice shape", what);
  const pk_gnode *sn = t->nodes[s->producer];
  TG_CHECK(sn->op == PK_OP_SLICE && sn->inputs[0] == pool, "%s: slice node", what);
  TG_CHECK(strcmp(t->nodes[s->producer + 1]->name, "conv3") == 0, "%s: slice just before conv3",
           what);
  const int64_t vs[4] = {288, 9, 3, 1}, vshape[4] = {64, 8, 3, 3};
  TG_CHECK(v->base == w3 && v->view_offset == 0 && memcmp(v->view_strides, vs, sizeof vs) == 0 &&
               memcmp(v->shape, vshape, sizeof vshape) == 0,
           "%s: view of conv3.weight", what);
  int dw = -1, dx = -1, upd = -1;
  for (int k = 0; k < t->nnodes; k++) {
    const pk_gnode *n = t->nodes[k];
    if (n->kind == PK_GNODE_GRAD && n->grad_wrt == w3) dw = k;
    if (n->kind == PK_GNODE_GRAD && n->grad_wrt == pool) dx = k;
    if (n->phase == PK_PHASE_UPDATE && root(t, n->outputs[n->noutputs - 1]) == w3) upd = k;
  }
  TG_CHECK(dw >= 0 && upd >= 0, "%s: dW3 and its update exist", what);
  if (dw < 0 || upd < 0) return;
  const pk_gnode *d = t->nodes[dw];
  TG_CHECK(d->prm.in[0].shape[1] == 8 && d->prm.in[1].shape[1] == 8 && d->inputs[0] == sl,
           "%s: dW3 over the slice (C -> S)", what);
  const pk_gtensor *G = t->tensors[d->outputs[d->noutputs - 1]];
  TG_CHECK(G->role == PK_ROLE_GRADIENT && memcmp(G->shape, vshape, sizeof vshape) == 0,
           "%s: dW3 shape (64, 8, 3, 3)", what);
  const pk_gnode *u = t->nodes[upd];
  const pk_gtensor *m = t->tensors[u->inputs[2]], *wout = t->tensors[u->outputs[u->noutputs - 1]];
  TG_CHECK(u->inputs[0] == view && m->role == PK_ROLE_OPT_STATE &&
               memcmp(m->shape, vshape, sizeof vshape) == 0,
           "%s: update reads the view, momentum has the slice's shape", what);
  TG_CHECK(wout->base == w3 && memcmp(wout->view_strides, vs, sizeof vs) == 0 &&
               mp->offset[wout->id] == mp->offset[w3] && mp->region[wout->id] == PK_REGION_PARAMS,
           "%s: update writes through the view into conv3.weight", what);
  if (lower_trains) {
    TG_CHECK(dx >= 0 && t->nodes[dx]->inputs[0] == w3 && dx < dw,
             "%s: dX of conv3 reads the full weight, before dW", what);
  } else {
    TG_CHECK(dx < 0, "%s: no dX of conv3", what);
    /* the full pool output dies at conv3: only the slice is saved */
    TG_CHECK(mp->last[pool] == s->producer + 1, "%s: pool lives to %d, not just conv3", what,
             mp->last[pool]);
  }
}

static void test_schemes(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_train_spec sp = {.loss = PK_LOSS_SOFTMAX_XENT, .optim = PK_OPTIM_SGD, .lr = 0.1,
                      .momentum = 0.9};
  int64_t arena[TG_NSCHEMES], naive[TG_NSCHEMES];
  for (int s = 0; s < TG_NSCHEMES; s++) {
    const char *what = tg_scheme_name[s];
    pk_graph *g = tg_cnn(ctx, N);
    TG_OK(ctx, tg_apply_text(g, tg_scheme_text[s]));
    pk_graph *t;
    TG_OK(ctx, pk_train_build(g, &sp, &t));
    pk_train_stats st;
    pk_train_stats_of(t, &st);
    const expect *e = &want[s];
    TG_CHECK(st.forward_nodes == e->fwd && st.loss_nodes == 1 && st.backward_nodes == e->bwd &&
                 st.update_nodes == e->upd,
             "%s: nodes fwd %d loss %d bwd %d upd %d, want %d 1 %d %d", what, st.forward_nodes,
             st.loss_nodes, st.backward_nodes, st.update_nodes, e->fwd, e->bwd, e->upd);
    TG_CHECK(st.saved_activation_bytes == e->saved, "%s: saved %lld bytes, want %lld", what,
             (long long)st.saved_activation_bytes, (long long)e->saved);
    char *gn = grad_names(ctx, t);
    TG_CHECK(strcmp(gn, e->grads) == 0, "%s: differentiated\n  %s\nwant\n  %s", what, gn,
             e->grads);
    /* params: 16*9+16 + 32*16*9+32 + 64*32*9+64 + 10*64+10 floats */
    TG_CHECK(st.param_bytes == (int64_t)(160 + 4640 + 18496 + 650) * F, "%s: param bytes", what);
    check_pruning(what, t);
    check_updates(what, t);
    /* classification: integer labels (i64, (N)), no row weights */
    TG_CHECK(t->loss >= 0 && t->target >= 0 && t->row_weight < 0 && t->hyper >= 0 &&
                 t->tensors[t->target]->role == PK_ROLE_LABEL &&
                 t->tensors[t->target]->dtype == PKRT_DTYPE_I64 &&
                 t->tensors[t->target]->ndim == 1 && t->nodes[t->tensors[t->loss]->producer]->op ==
                 PK_OP_CROSS_ENTROPY &&
                 t->tensors[t->hyper]->role == PK_ROLE_HYPER && t->tensors[t->hyper]->shape[0] == 4,
             "%s: training tensors", what);
    pk_memplan *mp;
    TG_OK(ctx, pk_memplan_build(t, NULL, &mp));
    check_memplan(what, t, mp);
    if (s == TG_PART_ALLBIAS || s == TG_PART_HEAD) check_partial(what, t, mp, s == TG_PART_ALLBIAS);
    arena[s] = mp->region_bytes[PK_REGION_ARENA];
    naive[s] = mp->naive_bytes[PK_REGION_ARENA];
    TG_CHECK(arena[s] < naive[s], "%s: planned arena %lld < naive %lld", what,
             (long long)arena[s], (long long)naive[s]);
    TG_CHECK(mp->arena_live_peak <= arena[s] && mp->arena_live_peak > 0, "%s: live peak", what);
    char *table = pk_memplan_print(ctx, t, mp);
    TG_CHECK(strstr(table, "arena") && strstr(table, "naive"), "%s: table", what);
    if (getenv("PK_TEST_VERBOSE")) printf("== %s\n%s%s", what, pk_graph_print(ctx, t), table);
    printf("%-24s fwd %2d bwd %2d upd %d saved %6lld arena %7lld (naive %7lld)\n", what,
           st.forward_nodes, st.backward_nodes, st.update_nodes,
           (long long)st.saved_activation_bytes, (long long)arena[s], (long long)naive[s]);
  }
  for (int s = 0; s < TG_FULL; s++)
    TG_CHECK(arena[s] < arena[TG_FULL], "%s arena %lld !< full %lld", tg_scheme_name[s],
             (long long)arena[s], (long long)arena[TG_FULL]);
  TG_CHECK(arena[TG_FULL] < naive[TG_FULL], "full < naive");
  pk_ctx_free(ctx);
}

/* A tensor read by two nodes gets the sum of both paths' gradients. MLP with fc2 partial
 * (25% of 128 = 32 input channels of a matmul weight), Adam and MSE. */
static void test_mlp_adam_mse(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = tg_mlp(ctx, N);
  /* y = fc3.out + relu(fc3.out): fc3.out is read twice */
  int r, y;
  TG_OK(ctx, pk_graph_add_op(g, "skip.relu", PK_OP_RELU, NULL, 1, &g->output, "skip.relu", &r));
  TG_OK(ctx, pk_graph_add_op(g, "skip.add", PK_OP_ADD, NULL, 2, (int[]){g->output, r}, "y", &y));
  g->output = y;
  TG_OK(ctx, tg_apply_text(g, "{\"version\":1,\"train\":[{\"params\":\"fc2.weight\","
                              "\"channels\":0.25},{\"params\":\"fc3.*\"}]}"));
  pk_train_spec sp = {.loss = PK_LOSS_MSE, .optim = PK_OPTIM_ADAMW, .lr = 1e-3,
                      .weight_decay = 0.01, .clip_norm = 1.0};
  pk_graph *t;
  TG_OK(ctx, pk_train_build(g, &sp, &t));
  pk_train_stats st;
  pk_train_stats_of(t, &st);
  /* forward: 8 + skip.relu + skip.add + slice(relu1) = 11.
   * backward: dY(mse); skip.add: d fc3.out (path 1), d skip.relu; skip.relu: d fc3.out
   * (path 2) + accumulate add; fc3.add: d fc3.mm, d fc3.bias; fc3: d relu2, d fc3.weight;
   * relu2: d fc2.out; fc2.add: d fc2.mm (fc2.bias frozen); fc2: d fc2.weight over the slice
   * (relu1 needs no gradient) = 1 + 2 + 1 + 1 + 2 + 2 + 1 + 1 + 1 = 12. Updates: fc2.weight,
   * fc3.weight, fc3.bias = 3. */
  TG_CHECK(st.forward_nodes == 11 && st.loss_nodes == 1 && st.backward_nodes == 12 &&
               st.update_nodes == 3,
           "mlp: fwd %d loss %d bwd %d upd %d", st.forward_nodes, st.loss_nodes,
           st.backward_nodes, st.update_nodes);
  int acc = -1;
  for (int k = 0; k < t->nnodes; k++)
    if (strcmp(t->nodes[k]->name, "accumulate(grad(fc3.out))") == 0) acc = k;
  TG_CHECK(acc >= 0 && t->nodes[acc]->op == PK_OP_ADD && t->nodes[acc]->kind == PK_GNODE_OP &&
               t->nodes[acc]->phase == PK_PHASE_BACKWARD &&
               t->nodes[t->tensors[t->nodes[acc]->inputs[0]]->producer]->kind == PK_GNODE_GRAD &&
               t->nodes[t->tensors[t->nodes[acc]->inputs[1]]->producer]->kind == PK_GNODE_GRAD,
           "mlp: the two gradients of fc3.out are summed");
  /* saved: y (N,10) for dY of mse; skip.relu's result (its dX reads it); relu2 (N,64) for
   * dW3 and relu2's dX; relu1[:, :32] (N,32) for fc2's dW: (80 + 80 + 512 + 256) * 4 = 3712 */
  TG_CHECK(st.saved_activation_bytes == (80 + 80 + 512 + 256) * F, "mlp saved %lld",
           (long long)st.saved_activation_bytes);
  /* Adam state: m and v for fc2.weight[:, :32] (64*32), fc3.weight (10*64), fc3.bias (10) */
  TG_CHECK(st.opt_state_bytes == 2 * (64 * 32 + 640 + 10) * F, "mlp opt state %lld",
           (long long)st.opt_state_bytes);
  TG_CHECK(st.trainable_param_bytes == (64 * 32 + 640 + 10) * F, "mlp trainable bytes %lld",
           (long long)st.trainable_param_bytes);
  for (int k = 0; k < t->nnodes; k++) {
    const pk_gnode *n = t->nodes[k];
    if (n->phase != PK_PHASE_UPDATE) continue;
    TG_CHECK(n->op == PK_OP_ADAMW_UPDATE && n->ninputs == 5 && n->prm.attrs.decoupled &&
                 n->prm.attrs.clip_norm == 1.0 && n->prm.attrs.beta1 == 0.9 &&
                 n->prm.attrs.beta2 == 0.999 && n->prm.attrs.eps == 1e-8,
             "mlp: adamw attrs of %s", n->name);
    TG_CHECK(t->tensors[n->inputs[3]]->role == PK_ROLE_OPT_STATE && n->inputs[4] == t->hyper,
             "mlp: adam reads V and H");
  }
  int fc2w = pk_graph_find(t, "fc2.weight");
  int view = pk_graph_find(t, "fc2.weight[:, :32]");
  TG_CHECK(view >= 0 && t->tensors[view]->base == fc2w &&
               t->tensors[view]->view_strides[0] == 128 &&
               t->tensors[view]->shape[1] == 32,
           "mlp: fc2 view");
  check_updates("mlp", t);
  check_pruning("mlp", t);
  pk_memplan *mp;
  TG_OK(ctx, pk_memplan_build(t, NULL, &mp));
  check_memplan("mlp", t, mp);

  /* plain Adam: decoupled false */
  sp.optim = PK_OPTIM_ADAM;
  TG_OK(ctx, pk_train_build(g, &sp, &t));
  for (int k = 0; k < t->nnodes; k++)
    if (t->nodes[k]->phase == PK_PHASE_UPDATE)
      TG_CHECK(!t->nodes[k]->prm.attrs.decoupled, "adam is not decoupled");
  pk_ctx_free(ctx);
}

static void test_eval_and_errors(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = tg_cnn(ctx, N);
  pk_train_spec sp = {.loss = PK_LOSS_SOFTMAX_XENT, .optim = PK_OPTIM_SGD, .lr = 0.1};
  pk_graph *e;
  TG_OK(ctx, pk_eval_build(g, &sp, true, &e));
  pk_train_stats st;
  pk_train_stats_of(e, &st);
  TG_CHECK(st.forward_nodes == 13 && st.loss_nodes == 1 && st.backward_nodes == 0 &&
               st.update_nodes == 0 && e->loss >= 0 && e->hyper == -1,
           "eval with loss");
  TG_OK(ctx, pk_eval_build(g, NULL, false, &e));
  TG_CHECK(e->nnodes == 13 && e->loss == -1, "inference");
  pk_memplan *mp;
  TG_OK(ctx, pk_memplan_build(e, NULL, &mp));
  check_memplan("inference", e, mp);
  TG_CHECK(mp->last[e->output] == e->nnodes, "output lives to the end");

  /* nothing trains: no backward, no updates */
  TG_OK(ctx, tg_apply_text(g, "{\"version\":1,\"train\":[]}"));
  pk_graph *t;
  TG_OK(ctx, pk_train_build(g, &sp, &t));
  pk_train_stats_of(t, &st);
  TG_CHECK(st.backward_nodes == 0 && st.update_nodes == 0 && st.loss_nodes == 1, "frozen model");

  sp.clip_global = true; /* without clip_norm: refused */
  TG_CHECK(pk_train_build(g, &sp, &t) == PK_ERR_CHECK &&
               strstr(pk_ctx_error(ctx), "clip_global"),
           "clip_global: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  sp.clip_global = false;
  sp.lr = -1;
  TG_CHECK(pk_train_build(g, &sp, &t) == PK_ERR_CHECK && strstr(pk_ctx_error(ctx), "lr"),
           "negative lr: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  sp.lr = 0.1;
  /* a bias (64, 1, 1) with train_channels 0 is whole: nothing to slice */
  int b = pk_graph_find(g, "conv3.bias");
  g->tensors[b]->trainable = true;
  g->tensors[b]->train_channels = 0;
  TG_OK(ctx, pk_train_build(g, &sp, &t));
  pk_train_stats_of(t, &st);
  TG_CHECK(st.update_nodes == 1 && st.forward_nodes == 13, "bias only");
  /* train_channels set by hand on a matmul weight read twice */
  pk_graph *h = pk_graph_new(ctx, 2);
  int x = pk_graph_add_tensor(h, "x", PK_ROLE_INPUT, PKRT_DTYPE_F32, 2, (int64_t[]){2, 8});
  int ww = pk_graph_add_param(h, "w", PKRT_DTYPE_F32, 2, (int64_t[]){8, 8}, NULL);
  int y1, y2;
  TG_OK(ctx, pk_graph_add_op(h, "a", PK_OP_MATMUL, &(pk_op_attrs){.trans_b = true}, 2,
                             (int[]){x, ww}, "y1", &y1));
  TG_OK(ctx, pk_graph_add_op(h, "b", PK_OP_MATMUL, &(pk_op_attrs){.trans_b = true}, 2,
                             (int[]){y1, ww}, "y2", &y2));
  h->output = y2;
  h->tensors[ww]->train_channels = 4;
  TG_CHECK(pk_train_build(h, &sp, &t) == PK_ERR_CHECK &&
               strstr(pk_ctx_error(ctx), "'w' must be read by exactly one node (read 2 times)"),
           "shared partial weight: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  /* whole, the shared weight gets both gradients summed */
  h->tensors[ww]->train_channels = 8;
  TG_OK(ctx, pk_train_build(h, &sp, &t));
  int upd = -1;
  for (int k = 0; k < t->nnodes; k++)
    if (strcmp(t->nodes[k]->name, "update(w)") == 0) upd = k;
  TG_CHECK(upd >= 0 && t->nodes[t->tensors[t->nodes[upd]->inputs[1]]->producer]->op == PK_OP_ADD,
           "shared weight: its update reads the sum of both gradients");
  pk_ctx_free(ctx);
}

/* Why dX comes before dW: with dW, W's update, then dX, the dX would read the updated
 * weight. Validation catches an in-place write followed by a read of the old value. */
static void test_inplace_order(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g = tg_cnn(ctx, N);
  TG_OK(ctx, tg_apply_text(g, tg_scheme_text[TG_LAST2]));
  pk_train_spec sp = {.loss = PK_LOSS_SOFTMAX_XENT, .optim = PK_OPTIM_SGD, .lr = 0.1};
  pk_graph *t;
  TG_OK(ctx, pk_train_build(g, &sp, &t));
  int dx = pk_graph_find_node(t, "grad(fc).0"), dw = pk_graph_find_node(t, "grad(fc).1");
  int up = pk_graph_find_node(t, "update(fc.weight)");
  TG_CHECK(dx >= 0 && dw == dx + 1 && up == dw + 1, "dX, dW, update in a row: %d %d %d", dx, dw,
           up);
  if (dx < 0 || dw != dx + 1 || up != dw + 1) return;
  int *order = pk_alloc(ctx, sizeof(int) * (size_t)t->nnodes);
  for (int k = 0; k < t->nnodes; k++) order[k] = k;
  order[dx] = dw, order[dw] = up, order[up] = dx;
  pk_graph_reorder(t, order);
  TG_CHECK(pk_graph_validate(t) != PK_OK &&
               strstr(pk_ctx_error(ctx), "node 'grad(fc).0' reads the old value of 'fc.weight' "
                                         "after node 'update(fc.weight)' overwrote it in place"),
           "stale read: %s", pk_ctx_error(ctx));
  pk_ctx_free(ctx);
}

/* Global-norm clipping and gradient accumulation: every update reads its param's clipped
 * gradient, which reads the one global squared norm, whose adds run after every gradient
 * (and its accumulation) exists; accumulators are in-place optimizer state. */
static void test_clip_global_accum(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_train_spec sp = {.loss = PK_LOSS_SOFTMAX_XENT, .optim = PK_OPTIM_ADAMW, .lr = 1e-3,
                      .clip_norm = 1.0, .clip_global = true, .accum_steps = 3};
  pk_graph *g = tg_cnn(ctx, N);
  TG_OK(ctx, tg_apply_text(g, tg_scheme_text[TG_FULL]));
  pk_graph *t;
  TG_OK(ctx, pk_train_build(g, &sp, &t));
  int last_grad = -1, last_norm = -1, first_update = t->nnodes, nacc = 0, nclip = 0, nupd = 0;
  bool ok = true;
  for (int k = 0; k < t->nnodes; k++) {
    const pk_gnode *n = t->nodes[k];
    if (n->kind == PK_GNODE_GRAD) last_grad = k;
    if (n->op == PK_OP_ADD && strncmp(n->name, "grad_norm_sq", 12) == 0) last_norm = k;
    if (n->op == PK_OP_GRAD_ACCUMULATE) {
      const pk_gtensor *o = t->tensors[n->outputs[0]];
      ok &= o->base == n->inputs[0] && t->tensors[n->inputs[0]]->role == PK_ROLE_OPT_STATE &&
            n->prm.attrs.accum_steps == 3;
      nacc++;
    }
    if (n->op == PK_OP_CLIP_GRAD_NORM) {
      ok &= t->tensors[n->inputs[1]]->producer == last_norm && last_norm >= 0;
      nclip++;
    }
    if (n->op == PK_OP_ADAMW_UPDATE) {
      const pk_gnode *c = t->nodes[t->tensors[n->inputs[1]]->producer];
      ok &= c->op == PK_OP_CLIP_GRAD_NORM && n->prm.attrs.clip_norm == 0 &&
            n->prm.attrs.accum_steps == 3;
      if (k < first_update) first_update = k;
      nupd++;
    }
  }
  TG_CHECK(ok && nacc == 8 && nclip == 8 && nupd == 8, "clip_global + accum: %d accumulate, %d "
           "clip, %d update nodes (want 8 each), wiring %s", nacc, nclip, nupd, ok ? "ok" : "bad");
  TG_CHECK(last_grad < last_norm && last_norm < first_update,
           "every gradient (last %d) before the norm (%d) before any update (%d)", last_grad,
           last_norm, first_update);
  pk_memplan *mp;
  TG_OK(ctx, pk_memplan_build(t, NULL, &mp));
  check_memplan("clip_global + accum", t, mp);
  sp.lr_sched = PK_LR_COSINE, sp.lr_total_steps = 5, sp.lr_warmup_steps = 5;
  TG_CHECK(pk_train_build(g, &sp, &t) == PK_ERR_CHECK && strstr(pk_ctx_error(ctx), "warmup"),
           "cosine total_steps <= warmup: %s", pk_ctx_error(ctx));
  pk_ctx_free(ctx);
}

int main(void) {
  test_inplace_order();
  test_schemes();
  test_mlp_adam_mse();
  test_eval_and_errors();
  test_clip_global_accum();
  return tg_report("test_graph_train");
}
