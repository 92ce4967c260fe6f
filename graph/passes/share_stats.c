/* share_stats.c — a training-mode batch norm's statistics and sums made once. Autodiff
 * gives each norm's running-stats update (batch_norm_stats) and its gamma and beta
 * gradients kernels of their own, each another pass over the layer's input or its
 * gradient, although the forward kernel has already made the batch's mean and variance
 * and the input gradient's kernel the sums of dY and dY (x - mean) (te/ops/op_norm.c:
 * its SDY and SDYX stages). This pass makes the update an elementwise kernel over the
 * channels that reads the forward's MEAN and VAR, dB a view of SDY (no kernel) and
 * dG = SDYX * rstd (an elementwise kernel over the channels). */
#include <string.h>

#include "graph_impl.h"
#include "pk_passes.h"

/* The tensor node n reads as its program's placeholder `name` (node inputs are the
 * program's placeholders in order); -1 if it has none. */
static int input_named(const pk_gnode *n, const char *name) {
  for (int i = 0, k = 0; n->prog && i < n->prog->ntensors; i++) {
    const pk_te_tensor *t = n->prog->tensors[i];
    if (t->kind != PK_TE_PLACEHOLDER) continue;
    if (k < n->ninputs && !strcmp(t->name, name)) return n->inputs[k];
    k++;
  }
  return -1;
}

static bool training_bn(const pk_gnode *n) {
  return n->op == PK_OP_BATCH_NORM && !n->fused && !n->prm.attrs.use_running_stats;
}

/* A stage output read by another node now: it must be written (a TEMP stage may be kept
 * in registers by a schedule), so it becomes an activation. */
static void keep_stage(pk_graph *g, int t) {
  if (g->tensors[t]->role == PK_ROLE_TEMP) g->tensors[t]->role = PK_ROLE_ACTIVATION;
}

static pk_status parse_text(pk_graph *g, pk_strbuf *b, const char *what, pk_te_program **out) {
  char *text = pk_strbuf_finish(g->ctx, b);
  pk_status s = pk_te_parse(g->ctx, text, strlen(text), what, out);
  return s == PK_OK ? s : pk_graph_refail(g->ctx, s, what);
}

/* Node n becomes the elementwise program text b over inputs in[nin] with outputs
 * out[nout] (its other outputs, stages nothing else reads, are dropped). */
static pk_status rewrite(pk_graph *g, pk_gnode *n, pk_strbuf *b, const char *label, int nin,
                         const int *in, int nout, const int *out) {
  pk_te_program *prog;
  pk_status s = parse_text(g, b, n->name, &prog);
  if (s != PK_OK) return s;
  for (int i = 0; i < n->noutputs; i++) {
    bool kept = false;
    for (int j = 0; j < nout; j++) kept = kept || n->outputs[i] == out[j];
    if (!kept) g->tensors[n->outputs[i]]->producer = -1, g->tensors[n->outputs[i]]->fused_away = true;
  }
  int *ins = pk_alloc(g->ctx, sizeof(int) * (size_t)nin);
  int *outs = pk_alloc(g->ctx, sizeof(int) * (size_t)nout);
  memcpy(ins, in, sizeof(int) * (size_t)nin);
  memcpy(outs, out, sizeof(int) * (size_t)nout);
  pk_graph_params_of(g, nin, ins, NULL, &n->prm);
  n->kind = PK_GNODE_OP;
  n->op = PK_OP_ADD; /* elementwise: scheduled and tuned as an injective kernel */
  n->grad_input = -1;
  n->grad_wrt = -1;
  n->fused = label;
  n->inputs = ins;
  n->ninputs = nin;
  n->outputs = outs;
  n->noutputs = nout;
  n->prog = prog;
  return PK_OK;
}

/* The forward training-mode batch norm over X (inputs X, G, B, RM, RV[, H]; outputs
 * MEAN, VAR, RSTD, Y); -1 if none. */
static int forward_of(const pk_graph *g, int x) {
  for (int k = 0; k < g->nnodes; k++) {
    const pk_gnode *f = g->nodes[k];
    if (f->kind == PK_GNODE_OP && f->phase == PK_PHASE_FORWARD && training_bn(f) &&
        f->noutputs == 4 && f->ninputs >= 5 && f->inputs[0] == x)
      return k;
  }
  return -1;
}

/* batch_norm_stats(X, RM, RV) -> RM', RV' from the forward's MEAN and biased VAR:
 *   RM' = (1 - m) RM + m MEAN;  RV' = (1 - m) RV + m VAR * n / (n - 1)
 * (n elements per channel, momentum m). */
static pk_status share_update(pk_graph *g, int k, bool *done) {
  pk_gnode *u = g->nodes[k];
  *done = false;
  if (u->kind != PK_GNODE_OP || u->op != PK_OP_BATCH_NORM_STATS || u->fused ||
      u->phase != PK_PHASE_UPDATE || u->ninputs != 3 || u->noutputs != 4)
    return PK_OK;
  int f = forward_of(g, u->inputs[0]);
  if (f < 0 || f > k || g->nodes[f]->inputs[3] != u->inputs[1] ||
      g->nodes[f]->inputs[4] != u->inputs[2])
    return PK_OK;
  const pk_gtensor *x = g->tensors[u->inputs[0]];
  int mean = g->nodes[f]->outputs[0], var = g->nodes[f]->outputs[1];
  pkrt_dtype dt = x->dtype;
  const int64_t c[1] = {x->shape[1]};
  double per = (double)(pk_gtensor_numel(x) / x->shape[1]);
  double mom = u->prm.attrs.momentum != 0 ? u->prm.attrs.momentum : 0.1; /* pk_ops.h */
  pk_strbuf b;
  pk_strbuf_init(&b);
  static const char *const pn[] = {"MEAN", "VAR", "RM", "RV"};
  for (int i = 0; i < 4; i++) pk_op_emit_placeholder(&b, pn[i], 1, c, dt);
  pk_op_emit_compute_head(&b, "RM2", 1, c);
  pk_op_emit_float(&b, 1 - mom);
  pk_strbuf_append(&b, " * RM[i0] + ");
  pk_op_emit_float(&b, mom);
  pk_strbuf_append(&b, " * MEAN[i0])\n");
  pk_op_emit_compute_head(&b, "RV2", 1, c);
  pk_op_emit_float(&b, 1 - mom);
  pk_strbuf_append(&b, " * RV[i0] + ");
  pk_op_emit_float(&b, mom);
  pk_strbuf_append(&b, " * (VAR[i0] * ");
  pk_op_emit_float(&b, per / (per - 1));
  pk_strbuf_append(&b, "))\n");
  keep_stage(g, mean);
  keep_stage(g, var);
  *done = true;
  return rewrite(g, u, &b, "batch_norm_stats_update", 4,
                 (int[]){mean, var, u->inputs[1], u->inputs[2]}, 2, u->outputs + 2);
}

/* The gradient node of a training-mode batch norm wrt `wrt` reading dY `dy`, whose result
 * is shaped like the per-channel sums `like` (not a slice of the param); -1 if none. */
static int grad_node(const pk_graph *g, int input, int wrt, int dy, int like) {
  const pk_gtensor *l = g->tensors[like];
  for (int k = 0; k < g->nnodes; k++) {
    const pk_gnode *n = g->nodes[k];
    if (n->kind != PK_GNODE_GRAD || !training_bn(n) || n->grad_input != input ||
        n->grad_wrt != wrt || n->noutputs != 1 || input_named(n, "DY") != dy)
      continue;
    const pk_gtensor *o = g->tensors[n->outputs[0]];
    return o->ndim == 1 && l->ndim == 1 && o->shape[0] == l->shape[0] && o->dtype == l->dtype
               ? k : -1;
  }
  return -1;
}

/* Whether tensor t may become a view: not one already, not the graph's result, and
 * nothing views it. */
static bool can_alias(const pk_graph *g, int t) {
  if (g->tensors[t]->base >= 0 || t == g->output || t == g->loss) return false;
  for (int i = 0; i < g->ntensors; i++)
    if (g->tensors[i]->base == t) return false;
  return true;
}

/* For dX's node k (SDY, SDYX, DX): dG's node reads SDYX, dB becomes a view of SDY. */
static pk_status share_grads(pk_graph *g, int k, bool *drop, int *dg, int *db) {
  const pk_gnode *n = g->nodes[k];
  if (n->kind != PK_GNODE_GRAD || !training_bn(n) || n->grad_input != 0 || n->noutputs != 3)
    return PK_OK;
  int dy = input_named(n, "DY"), r = input_named(n, "R");
  int sdy = n->outputs[0], sdyx = n->outputs[1];
  /* gamma and beta of the forward norm: what its other gradients differentiate */
  int f = n->grad_wrt >= 0 ? forward_of(g, n->grad_wrt) : -1;
  if (dy < 0 || r < 0 || f < 0) return PK_OK;
  int k1 = grad_node(g, 1, g->nodes[f]->inputs[1], dy, sdyx);
  if (k1 > k) { /* dG = SDYX * rstd */
    pk_gnode *n1 = g->nodes[k1];
    const pk_gtensor *o = g->tensors[n1->outputs[0]];
    pk_strbuf b;
    pk_strbuf_init(&b);
    pk_op_emit_placeholder(&b, "SDYX", o->ndim, o->shape, o->dtype);
    pk_op_emit_placeholder(&b, "R", o->ndim, o->shape, o->dtype);
    pk_op_emit_compute_head(&b, "DG", o->ndim, o->shape);
    pk_strbuf_append(&b, "SDYX[i0] * R[i0])\n");
    keep_stage(g, sdyx);
    pk_status s = rewrite(g, n1, &b, "batch_norm_dgamma", 2, (int[]){sdyx, r}, 1, n1->outputs);
    if (s != PK_OK) return s;
    ++*dg;
  }
  int k2 = grad_node(g, 2, g->nodes[f]->inputs[2], dy, sdy);
  if (k2 > k && can_alias(g, g->nodes[k2]->outputs[0])) { /* dB = SDY */
    pk_gtensor *o = g->tensors[g->nodes[k2]->outputs[0]];
    keep_stage(g, sdy);
    o->base = sdy;
    o->view_offset = 0;
    pk_graph_dense_strides(o->ndim, o->shape, o->view_strides);
    drop[k2] = true;
    ++*db;
  }
  return PK_OK;
}

pk_status pk_pass_share_stats(pk_graph *g, const char **note) {
  int updates = 0, dg = 0, db = 0;
  for (int k = 0; k < g->nnodes; k++) {
    bool done;
    pk_status s = share_update(g, k, &done);
    if (s != PK_OK) return s;
    updates += done;
  }
  bool *drop = pk_alloc(g->ctx, sizeof(bool) * (size_t)(g->nnodes + 1));
  for (int k = 0; k < g->nnodes; k++) {
    pk_status s = share_grads(g, k, drop, &dg, &db);
    if (s != PK_OK) return s;
  }
  if (db) pk_graph_remove_nodes(g, drop);
  *note = pk_sprintf(g->ctx, "%d running-stats update%s read%s the forward's mean and "
                     "variance, %d gamma gradient%s read%s dX's sums, %d beta gradient%s "
                     "aliased (%d kernel calls fewer)", updates, updates == 1 ? "" : "s",
                     updates == 1 ? "s" : "", dg, dg == 1 ? "" : "s", dg == 1 ? "s" : "", db,
                     db == 1 ? "" : "s", db);
  return PK_OK;
}
