/* fold.c — constant folding: forward nodes whose inputs cannot change between steps (frozen
 * weights, buffers and constants that nothing writes, and each other's results: the
 * transpose of a frozen weight, a frozen norm's scale and shift) become load-phase nodes,
 * which the runtime runs once when the weights are in place instead of every step. A
 * frozen batch norm whose statistics nothing else reads is rewritten first: after a conv2d
 * or matmul that only it reads, whose weight is constant too, into that layer's weight
 * (W' = W * gamma / sqrt(var + eps), made at load) and a per-channel shift in the step;
 * otherwise into a per-channel affine map whose scale and shift are made at load. The load
 * results the step reads become FOLDED tensors (kept for the model's lifetime). */
#include <string.h>

#include "graph_impl.h"
#include "pk_passes.h"

/* How many node inputs read tensor t, and whether another tensor views its storage. */
static int reads_of(const pk_graph *g, int t) {
  int n = 0;
  for (int k = 0; k < g->nnodes; k++)
    for (int i = 0; i < g->nodes[k]->ninputs; i++) n += g->nodes[k]->inputs[i] == t;
  return n;
}

static bool viewed(const pk_graph *g, int t) {
  for (int u = 0; u < g->ntensors; u++)
    if (g->tensors[u]->base == t) return true;
  return false;
}

/* A forward (or already load-phase) op node that reads only constant tensors (k) and
 * writes results of its own, none of them the model's output or loss. */
static bool foldable(const pk_graph *g, const pk_gnode *n, const bool *k) {
  if (n->kind != PK_GNODE_OP || n->ninputs < 1 ||
      (n->phase != PK_PHASE_FORWARD && n->phase != PK_PHASE_LOAD))
    return false;
  for (int i = 0; i < n->ninputs; i++)
    if (!k[n->inputs[i]]) return false;
  for (int i = 0; i < n->noutputs; i++) {
    const pk_gtensor *o = g->tensors[n->outputs[i]];
    if (o->base >= 0 || o->id == g->output || o->id == g->loss) return false;
  }
  return true;
}

/* k[t]: tensor t holds the same value at every step once the weights are in place. Storage
 * written in place (a trained weight's update, running stats in training mode) changes; so
 * does what is fed or made from either. (Not the params' trainable marks: an inference
 * graph's params keep them, and never change.) */
static bool *constant_tensors(const pk_graph *g) {
  pk_ctx *ctx = g->ctx;
  bool *written = pk_alloc(ctx, sizeof(bool) * (size_t)(g->ntensors + 1));
  bool *k = pk_alloc(ctx, sizeof(bool) * (size_t)(g->ntensors + 1));
  for (int n = 0; n < g->nnodes; n++)
    for (int i = 0; i < g->nodes[n]->noutputs; i++) {
      const pk_gtensor *o = g->tensors[g->nodes[n]->outputs[i]];
      if (o->base >= 0) written[o->base] = true;
    }
  for (int t = 0; t < g->ntensors; t++) {
    const pk_gtensor *x = g->tensors[t];
    bool stored = x->base < 0 && !written[t];
    switch (x->role) {
    case PK_ROLE_PARAM:
    case PK_ROLE_BUFFER:
    case PK_ROLE_CONSTANT: k[t] = stored; break;
    case PK_ROLE_FOLDED: k[t] = true; break;
    default: break; /* results: below, in node order */
    }
  }
  for (int n = 0; n < g->nnodes; n++)
    if (foldable(g, g->nodes[n], k))
      for (int i = 0; i < g->nodes[n]->noutputs; i++) k[g->nodes[n]->outputs[i]] = true;
  return k;
}

/* A batch norm with running stats and constant gamma, beta and stats, whose MEAN, VAR and
 * RSTD stages nothing reads (no gradient flows through it: the simple legal case). */
static bool frozen_bn(const pk_graph *g, const pk_gnode *n, const bool *k) {
  if (n->kind != PK_GNODE_OP || n->op != PK_OP_BATCH_NORM || n->phase != PK_PHASE_FORWARD ||
      n->fused || !n->prm.attrs.use_running_stats || n->ninputs != 5 || n->noutputs != 4)
    return false;
  const pk_gtensor *x = g->tensors[n->inputs[0]];
  if (x->ndim < 2 || g->tensors[n->outputs[3]]->base >= 0) return false;
  for (int i = 1; i < 5; i++) {
    const pk_gtensor *p = g->tensors[n->inputs[i]];
    if (!k[p->id] || p->ndim != 1 || p->shape[0] != x->shape[1] || p->dtype != x->dtype)
      return false;
  }
  for (int i = 0; i < 3; i++) {
    int t = n->outputs[i];
    if (reads_of(g, t) || viewed(g, t) || t == g->output || t == g->loss) return false;
  }
  return true;
}

/* The node a frozen batch norm folds into: the forward conv2d, or rank-2 matmul, that makes
 * its input X, which nothing else reads, with a constant weight (input 1) holding the
 * norm's channels on *axis. -1 when there is none. */
static int folding_layer(const pk_graph *g, const pk_gnode *bn, const bool *k, int *axis) {
  const pk_gtensor *x = g->tensors[bn->inputs[0]];
  if (x->producer < 0 || x->base >= 0 || x->role != PK_ROLE_ACTIVATION || x->id == g->output ||
      x->id == g->loss || reads_of(g, x->id) != 1 || viewed(g, x->id))
    return -1;
  const pk_gnode *l = g->nodes[x->producer];
  if (l->kind != PK_GNODE_OP || l->phase != PK_PHASE_FORWARD || l->fused || l->ninputs != 2 ||
      l->noutputs != 1)
    return -1;
  const pk_gtensor *w = g->tensors[l->inputs[1]];
  if (!k[w->id] || w->dtype != x->dtype) return -1;
  if (l->op == PK_OP_CONV2D) *axis = 0; /* (O, I / groups, kh, kw) */
  else if (l->op == PK_OP_MATMUL && x->ndim == 2 && w->ndim == 2)
    *axis = l->prm.attrs.trans_b ? 0 : 1; /* (N, K) or (K, N) */
  else return -1;
  return w->shape[*axis] == x->shape[1] ? l->id : -1;
}

static pk_status parse_text(pk_graph *g, pk_strbuf *b, const char *what, pk_te_program **out) {
  char *text = pk_strbuf_finish(g->ctx, b);
  pk_status s = pk_te_parse(g->ctx, text, strlen(text), what, out);
  return s == PK_OK ? s : pk_graph_refail(g->ctx, s, what);
}

/* "NAME[i0, ..., i<axis>, ...]" reads of a (C,) tensor at axis `axis` of the compute. */
static void per_channel(pk_strbuf *b, const char *name, int axis) {
  pk_strbuf_printf(b, "%s[i%d]", name, axis);
}

/* A load node of program b's text over inputs, its results new tensors named names[]. */
static pk_status push_load(pk_graph *g, const char *name, const char *label, pk_op_kind op,
                           pk_strbuf *b, int nin, const int *in, int nout,
                           const char *const *names, int *outs) {
  pk_te_program *prog;
  pk_status s = parse_text(g, b, name, &prog);
  if (s != PK_OK) return s;
  int k = 0;
  for (int i = 0; i < prog->ntensors; i++) {
    const pk_te_tensor *t = prog->tensors[i];
    if (t->kind != PK_TE_COMPUTE) continue;
    PK_ASSERT(k < nout);
    outs[k] = pk_graph_push_tensor(g, pk_graph_unique_name(g, names[k]), PK_ROLE_ACTIVATION,
                                   t->dtype, t->ndim, t->shape);
    k++;
  }
  PK_ASSERT(k == nout);
  pk_op_params prm;
  pk_graph_params_of(g, nin, in, NULL, &prm);
  int id = pk_graph_push_node(g, name, PK_GNODE_OP, op, &prm, -1, PK_PHASE_LOAD, prog, nin, in,
                              nout, outs);
  g->nodes[id]->fused = label;
  return PK_OK;
}

/* Rewrites frozen batch norm n (frozen_bn): scale S = gamma * rsqrt(var + eps) and shift
 * T = beta - mean * S at load; then either W' = W * S at load with the layer reading W' and
 * the step adding T, or the step computing X * S + T. *into_layer: the former. */
static pk_status fold_bn(pk_graph *g, int nid, const bool *k, bool *into_layer) {
  pk_ctx *ctx = g->ctx;
  pk_gnode *n = g->nodes[nid];
  const pk_gtensor *x = g->tensors[n->inputs[0]];
  pkrt_dtype dt = x->dtype;
  const int64_t c[1] = {x->shape[1]};
  double eps = n->prm.attrs.eps != 0 ? n->prm.attrs.eps : 1e-5; /* pk_ops.h: 0 means 1e-5 */
  pk_strbuf b;
  pk_strbuf_init(&b);
  static const char *const pn[] = {"G", "B", "RM", "RV"};
  for (int i = 0; i < 4; i++) pk_op_emit_placeholder(&b, pn[i], 1, c, dt);
  pk_op_emit_compute_head(&b, "S", 1, c);
  pk_strbuf_append(&b, "G[i0] * rsqrt(RV[i0] + ");
  pk_op_emit_float(&b, eps);
  pk_strbuf_append(&b, "))\n");
  pk_op_emit_compute_head(&b, "T", 1, c);
  pk_strbuf_append(&b, "B[i0] - RM[i0] * S[i0])\n");
  int st[2];
  const char *names[2] = {pk_sprintf(ctx, "fold(%s).scale", n->name),
                          pk_sprintf(ctx, "fold(%s).shift", n->name)};
  pk_status s = push_load(g, pk_sprintf(ctx, "fold(%s)", n->name), "batch_norm_scale_shift",
                          PK_OP_MUL, &b, 4, n->inputs + 1, 2, names, st);
  if (s != PK_OK) return s;
  n = g->nodes[nid]; /* the node array may have grown */

  int axis, lid = folding_layer(g, n, k, &axis);
  *into_layer = lid >= 0;
  if (*into_layer) { /* W' = W * S on the weight's output-channel axis */
    pk_gnode *l = g->nodes[lid];
    const pk_gtensor *w = g->tensors[l->inputs[1]];
    pk_strbuf_init(&b);
    pk_op_emit_placeholder(&b, "W", w->ndim, w->shape, dt);
    pk_op_emit_placeholder(&b, "S", 1, c, dt);
    pk_op_emit_compute_head(&b, "Y", w->ndim, w->shape);
    pk_op_emit_read_all(&b, "W", w->ndim);
    pk_strbuf_append(&b, " * ");
    per_channel(&b, "S", axis);
    pk_strbuf_append(&b, ")\n");
    int wn;
    const char *wname = pk_sprintf(ctx, "fold(%s).weight", n->name);
    s = push_load(g, wname, "batch_norm_fold_weight", PK_OP_MUL, &b, 2,
                  (int[]){w->id, st[0]}, 1, &wname, &wn);
    if (s != PK_OK) return s;
    l = g->nodes[lid];
    n = g->nodes[nid];
    int *in = pk_alloc(ctx, sizeof(int) * 2);
    in[0] = l->inputs[0], in[1] = wn;
    l->inputs = in; /* same shape and dtype: its program stays */
  }
  /* The step's part, in place of the norm: Y = X + T, or X * S + T */
  pk_strbuf_init(&b);
  pk_op_emit_placeholder(&b, "X", x->ndim, x->shape, dt);
  if (!*into_layer) pk_op_emit_placeholder(&b, "S", 1, c, dt);
  pk_op_emit_placeholder(&b, "T", 1, c, dt);
  pk_op_emit_compute_head(&b, "Y", x->ndim, x->shape);
  pk_op_emit_read_all(&b, "X", x->ndim);
  if (!*into_layer) {
    pk_strbuf_append(&b, " * ");
    per_channel(&b, "S", 1);
  }
  pk_strbuf_append(&b, " + ");
  per_channel(&b, "T", 1);
  pk_strbuf_append(&b, ")\n");
  pk_te_program *prog;
  if ((s = parse_text(g, &b, n->name, &prog)) != PK_OK) return s;
  int *in = pk_alloc(ctx, sizeof(int) * 3), nin = 0;
  in[nin++] = x->id;
  if (!*into_layer) in[nin++] = st[0];
  in[nin++] = st[1];
  for (int i = 0; i < 3; i++) { /* MEAN, VAR, RSTD: nothing makes or reads them now */
    g->tensors[n->outputs[i]]->producer = -1;
    g->tensors[n->outputs[i]]->fused_away = true;
  }
  int *out = pk_alloc(ctx, sizeof(int));
  out[0] = n->outputs[3];
  n->op = PK_OP_ADD;
  n->fused = *into_layer ? "batch_norm_shift" : "batch_norm_affine";
  pk_graph_params_of(g, nin, in, NULL, &n->prm);
  n->inputs = in;
  n->ninputs = nin;
  n->outputs = out;
  n->noutputs = 1;
  n->prog = prog;
  return PK_OK;
}

pk_status pk_pass_fold(pk_graph *g, const char **note) {
  pk_ctx *ctx = g->ctx;
  int step0 = 0, into_layer = 0, affine = 0;
  for (int n = 0; n < g->nnodes; n++) step0 += g->nodes[n]->phase != PK_PHASE_LOAD;
  bool *k = constant_tensors(g);
  for (int n = 0, nn = g->nnodes; n < nn; n++) { /* the nodes fold_bn adds are not norms */
    if (!frozen_bn(g, g->nodes[n], k)) continue;
    bool layer;
    pk_status s = fold_bn(g, n, k, &layer);
    if (s != PK_OK) return s;
    into_layer += layer;
    affine += !layer;
    k = constant_tensors(g); /* the rewritten norm's layer reads another weight now */
  }
  k = constant_tensors(g);
  bool *load = pk_alloc(ctx, sizeof(bool) * (size_t)(g->nnodes + 1));
  for (int n = 0; n < g->nnodes; n++)
    if (foldable(g, g->nodes[n], k)) load[n] = true, g->nodes[n]->phase = PK_PHASE_LOAD;
  /* what the step reads of the load results is kept from load to close */
  bool *step_reads = pk_alloc(ctx, sizeof(bool) * (size_t)(g->ntensors + 1));
  for (int n = 0; n < g->nnodes; n++)
    for (int i = 0; !load[n] && i < g->nodes[n]->ninputs; i++)
      step_reads[g->nodes[n]->inputs[i]] = true;
  int64_t kept = 0;
  int nload = 0;
  for (int n = 0; n < g->nnodes; n++) {
    if (!load[n]) continue;
    nload++;
    for (int i = 0; i < g->nodes[n]->noutputs; i++) {
      pk_gtensor *t = g->tensors[g->nodes[n]->outputs[i]];
      if (!step_reads[t->id] && !viewed(g, t->id)) continue; /* load-time scratch */
      if (t->role != PK_ROLE_FOLDED) kept += pk_gtensor_bytes(t);
      t->role = PK_ROLE_FOLDED;
    }
  }
  /* load nodes first: legal, they read only weights, constants and each other */
  int *order = pk_alloc(ctx, sizeof(int) * (size_t)(g->nnodes + 1)), m = 0;
  for (int n = 0; n < g->nnodes; n++)
    if (load[n]) order[m++] = n;
  for (int n = 0; n < g->nnodes; n++)
    if (!load[n]) order[m++] = n;
  pk_graph_reorder(g, order);
  int step1 = g->nnodes - nload;
  *note = pk_sprintf(ctx, "%d node%s run at load (%d batch norm%s folded into %s layer's "
                     "weight, %d into a per-channel affine), %d kernel calls per step fewer, "
                     "%lld bytes of folded results kept", nload, nload == 1 ? "" : "s",
                     into_layer, into_layer == 1 ? "" : "s", into_layer == 1 ? "its" : "their",
                     affine, step0 - step1, (long long)kept);
  return PK_OK;
}
