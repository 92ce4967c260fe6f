/* autodiff.c — the backward pass as a needs-grad walk (ggml style): only tensors with a
 * trainable param upstream get gradients, so frozen weights get no weight gradient and
 * nothing below the earliest trained layer is differentiated. Gradient rules come from
 * te/ops (pk_op_grad_build); this file only chains them. */
#include <string.h>

#include "train_impl.h"

bool pk_train_is_partial(const pk_gtensor *t) {
  return t->role == PK_ROLE_PARAM && t->base < 0 && t->trainable && t->ndim >= 2 &&
         t->train_channels > 0 && t->train_channels < t->shape[1];
}

int pk_train_channel_axis(const pk_graph *g, const pk_gnode *n) {
  return n->op == PK_OP_CONV2D ? 1 : g->tensors[n->inputs[0]]->ndim - 1;
}

static bool needs(const train_build *tb, int t) { return t < tb->n0 && tb->needs[t]; }

/* Adds `contrib` to the gradient of tensor t: the first contribution is the gradient, later
 * ones are summed by an add node (a tensor read twice gets both paths' gradients). */
static pk_status accumulate(train_build *tb, int t, int contrib) {
  pk_graph *g = tb->g;
  if (tb->grad[t] < 0) {
    tb->grad[t] = contrib;
    return PK_OK;
  }
  int in[2] = {tb->grad[t], contrib};
  pk_op_params prm;
  pk_graph_params_of(g, 2, in, NULL, &prm);
  pk_te_program *prog;
  const char *name = pk_sprintf(g->ctx, "accumulate(grad(%s))", g->tensors[t]->name);
  pk_status s = pk_op_build(g->ctx, PK_OP_ADD, &prm, &prog);
  if (s != PK_OK) return pk_graph_refail(g->ctx, s, name);
  int sum;
  pk_graph_push_prog(g, name, PK_GNODE_OP, PK_OP_ADD, &prm, -1, PK_PHASE_BACKWARD, prog, 2, in,
                     pk_sprintf(g->ctx, "grad(%s)", g->tensors[t]->name), PK_ROLE_GRADIENT, &sum);
  tb->grad[t] = sum;
  return PK_OK;
}

/* Output `stage` of node n, read by a gradient: it must outlive its kernel, so it is an
 * activation now (a TEMP stage may be inlined by a schedule and never written). */
static int saved_stage(pk_graph *g, const pk_gnode *n, int stage) {
  PK_ASSERT(stage >= 0 && stage < n->noutputs);
  int t = n->outputs[stage];
  if (g->tensors[t]->role == PK_ROLE_TEMP) g->tensors[t]->role = PK_ROLE_ACTIVATION;
  return t;
}

/* The gradient node of forward node k wrt its input i. A partial-channel weight's gradient
 * is built over the saved input slice (C replaced by S in the op params), so the kernel is
 * smaller and its result is shaped like the trained slice. */
static pk_status emit_grad(train_build *tb, int k, int i) {
  pk_graph *g = tb->g;
  const pk_gnode *n = g->nodes[k];
  int x = n->inputs[i];
  int y = n->outputs[n->noutputs - 1];
  pk_op_params prm = n->prm;
  int in_map[PK_OP_MAX_INPUTS];
  memcpy(in_map, n->inputs, sizeof(int) * (size_t)n->ninputs);
  const pk_gtensor *xt = g->tensors[x];
  if (i == 1 && pk_train_is_partial(xt) && tb->slice[x] >= 0) {
    prm.in[0].shape[pk_train_channel_axis(g, n)] = xt->train_channels;
    prm.in[1].shape[1] = xt->train_channels;
    in_map[0] = tb->slice[x];
    in_map[1] = tb->view[x];
  }
  const char *name = pk_sprintf(g->ctx, "grad(%s).%d", n->name, i);
  pk_op_grad gr;
  pk_status s = pk_op_grad_build(g->ctx, n->op, &prm, i, &gr);
  if (s != PK_OK) return pk_graph_refail(g->ctx, s, name);
  int args[PK_OP_GRAD_MAX_ARGS];
  for (int a = 0; a < gr.nargs; a++) {
    switch (gr.args[a].kind) {
    case PK_GRAD_ARG_INPUT:
      PK_ASSERT(gr.args[a].index >= 0 && gr.args[a].index < n->ninputs);
      args[a] = in_map[gr.args[a].index];
      break;
    case PK_GRAD_ARG_OUTPUT: args[a] = y; break;
    case PK_GRAD_ARG_STAGE: args[a] = saved_stage(g, n, gr.args[a].index); break;
    case PK_GRAD_ARG_DY:
      PK_ASSERT(tb->grad[y] >= 0);
      args[a] = tb->grad[y];
      break;
    }
  }
  int dx;
  int id = pk_graph_push_prog(g, name, PK_GNODE_GRAD, n->op, &prm, i, PK_PHASE_BACKWARD, gr.prog,
                              gr.nargs, args, pk_sprintf(g->ctx, "grad(%s)", xt->name),
                              PK_ROLE_GRADIENT, &dx);
  g->nodes[id]->grad_wrt = x;
  return accumulate(tb, x, dx);
}

static bool is_param(const pk_gtensor *t) { return t->role == PK_ROLE_PARAM && t->base < 0; }

pk_status pk_train_autodiff(train_build *tb) {
  pk_graph *g = tb->g;
  /* Forward sweep: which tensors need a gradient. */
  for (int t = 0; t < tb->n0; t++) {
    tb->grad[t] = -1;
    tb->needs[t] = is_param(g->tensors[t]) && g->tensors[t]->trainable;
  }
  for (int k = 0; k < tb->nfwd; k++) {
    const pk_gnode *n = g->nodes[k];
    unsigned diff = pk_op_diff_inputs(n->op);
    bool any = false;
    for (int i = 0; i < n->ninputs; i++) any |= (diff >> i & 1) && needs(tb, n->inputs[i]);
    for (int o = 0; o < n->noutputs; o++)
      if (n->outputs[o] < tb->n0) tb->needs[n->outputs[o]] = any;
  }
  /* The loss is the root: its gradient wrt the prediction needs no dY. */
  const pk_gnode *ln = g->nodes[tb->loss_node];
  if (!needs(tb, ln->inputs[0])) return PK_OK;
  {
    const char *name = pk_sprintf(g->ctx, "grad(%s).0", ln->name);
    pk_op_grad gr;
    pk_status s = pk_op_grad_build(g->ctx, ln->op, &ln->prm, 0, &gr);
    if (s != PK_OK) return pk_graph_refail(g->ctx, s, name);
    int args[PK_OP_GRAD_MAX_ARGS];
    for (int a = 0; a < gr.nargs; a++) {
      if (gr.args[a].kind == PK_GRAD_ARG_INPUT)
        args[a] = ln->inputs[gr.args[a].index];
      else if (gr.args[a].kind == PK_GRAD_ARG_OUTPUT)
        args[a] = ln->outputs[ln->noutputs - 1];
      else if (gr.args[a].kind == PK_GRAD_ARG_STAGE)
        args[a] = saved_stage(g, ln, gr.args[a].index);
      else
        return pk_ctx_fail(g->ctx, PK_ERR_CHECK, "graph: %s: a loss gradient cannot read dY",
                           name);
    }
    int dz;
    int id = pk_graph_push_prog(g, name, PK_GNODE_GRAD, ln->op, &ln->prm, 0, PK_PHASE_BACKWARD,
                                gr.prog, gr.nargs, args,
                                pk_sprintf(g->ctx, "grad(%s)", g->tensors[ln->inputs[0]]->name),
                                PK_ROLE_GRADIENT, &dz);
    g->nodes[id]->grad_wrt = ln->inputs[0];
    pk_status s2 = accumulate(tb, ln->inputs[0], dz);
    if (s2 != PK_OK) return s2;
  }
  /* Reverse sweep. Per node, activation gradients come before weight gradients: dX reads
   * the old W, so emitting it first lets W's update follow its dW at once. */
  for (int k = tb->nfwd - 1; k >= 0; k--) {
    const pk_gnode *n = g->nodes[k];
    int y = n->outputs[n->noutputs - 1];
    /* An op's gradient rules take dY of its result only: a gradient that reached an earlier
     * stage (a named output a later node reads) would be dropped, so it is refused. */
    for (int o = 0; o + 1 < n->noutputs; o++)
      if (n->outputs[o] < tb->n0 && tb->grad[n->outputs[o]] >= 0)
        return pk_ctx_fail(g->ctx, PK_ERR_UNSUPPORTED,
                           "graph: '%s' (output %d of node '%s', before its result) is on the "
                           "path from a trained param to the loss: only an op's result carries "
                           "a gradient", g->tensors[n->outputs[o]]->name, o, n->name);
    if (y >= tb->n0 || tb->grad[y] < 0) continue;
    unsigned diff = pk_op_diff_inputs(n->op);
    for (int pass = 0; pass < 2; pass++)
      for (int i = 0; i < n->ninputs; i++) {
        int x = n->inputs[i];
        if (!(diff >> i & 1) || !needs(tb, x)) continue;
        if (is_param(g->tensors[x]) != (pass == 1)) continue;
        pk_status s = emit_grad(tb, k, i);
        if (s != PK_OK) return s;
      }
  }
  return PK_OK;
}
