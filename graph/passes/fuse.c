/* fuse.c — fusion of elementwise chains: a node computing one elementwise tensor that only
 * one other elementwise node reads (same phase, read once per element) is inlined into that
 * reader (pk_te_fuse): one kernel instead of two, and the intermediate is never stored, so
 * it takes no memory in the plan. Repeated, a chain (bias, activation, residual add, their
 * gradients, a frozen norm's affine) becomes one kernel, its own tuning task. */
#include <string.h>

#include "graph_impl.h"
#include "pk_passes.h"

static bool arena_role(pk_tensor_role r) {
  return r == PK_ROLE_ACTIVATION || r == PK_ROLE_GRADIENT || r == PK_ROLE_TEMP;
}

/* How many node inputs read tensor t (a node reading it twice counts twice). */
static int reads_of(const pk_graph *g, int t) {
  int n = 0;
  for (int k = 0; k < g->nnodes; k++)
    for (int i = 0; i < g->nodes[k]->ninputs; i++) n += g->nodes[k]->inputs[i] == t;
  return n;
}

/* Whether a node in (from, to) writes storage root r (a result of its own, or in place). */
static bool written_between(const pk_graph *g, int from, int to, int r) {
  for (int k = from + 1; k < to; k++)
    for (int i = 0; i < g->nodes[k]->noutputs; i++)
      if (pk_pass_root(g, g->nodes[k]->outputs[i]) == r) return true;
  return false;
}

/* The label of what node n computes: "relu", "relu_grad0", or its fused chain. */
static const char *op_label(pk_ctx *ctx, const pk_gnode *n) {
  if (n->fused) return n->fused;
  if (n->kind == PK_GNODE_GRAD) return pk_sprintf(ctx, "%s_grad%d", pk_op_name(n->op), n->grad_input);
  return pk_op_name(n->op);
}

/* Inlines the producer of node c's input `slot` into c when that is legal; true if done. */
static bool fuse_input(pk_graph *g, int c, int slot) {
  pk_gnode *cn = g->nodes[c];
  int t = cn->inputs[slot];
  const pk_gtensor *x = g->tensors[t];
  int p = x->producer;
  if (p < 0 || p >= c) return false;
  pk_gnode *pn = g->nodes[p];
  if (pn->phase != cn->phase || pn->noutputs != 1 || cn->noutputs != 1) return false;
  if (!arena_role(x->role) || x->base >= 0 || t == g->output || t == g->loss) return false;
  if (g->tensors[cn->outputs[0]]->base >= 0 || reads_of(g, t) != 1) return false;
  for (int u = 0; u < g->ntensors; u++)
    if (g->tensors[u]->base == t) return false;
  /* The producer's inputs are read at c now: nothing between may overwrite them. */
  for (int i = 0; i < pn->ninputs; i++)
    if (written_between(g, p, c, pk_pass_root(g, pn->inputs[i]))) return false;

  pk_ctx *ctx = g->ctx;
  int *share = pk_alloc(ctx, sizeof(int) * (size_t)(cn->ninputs + 1));
  int nin = pn->ninputs;
  for (int i = 0; i < cn->ninputs; i++) {
    share[i] = -1;
    for (int j = 0; i != slot && j < pn->ninputs && share[i] < 0; j++)
      if (pn->inputs[j] == cn->inputs[i]) share[i] = j;
    nin += i != slot && share[i] < 0;
  }
  pk_te_program *prog;
  if (pk_te_fuse(ctx, pn->prog, cn->prog, slot, share, &prog) != PK_OK) {
    pk_ctx_clear_error(ctx); /* not of the fusable form: both kernels stay */
    return false;
  }
  int *inputs = pk_alloc(ctx, sizeof(int) * (size_t)(nin + 1)), n = 0;
  for (int j = 0; j < pn->ninputs; j++) inputs[n++] = pn->inputs[j];
  for (int i = 0; i < cn->ninputs; i++)
    if (i != slot && share[i] < 0) inputs[n++] = cn->inputs[i];
  cn->fused = pk_sprintf(ctx, "%s+%s", op_label(ctx, pn), op_label(ctx, cn));
  cn->prog = prog;
  cn->inputs = inputs;
  cn->ninputs = n;
  g->tensors[t]->producer = -1; /* no node makes or reads it: the plan gives it no bytes */
  g->tensors[t]->fused_away = true;
  for (int l = 0; l < g->nlayers; l++)
    if (g->layer_nodes[l] == p) g->layer_nodes[l] = c; /* the layer is computed there now */
  bool *drop = pk_alloc(ctx, sizeof(bool) * (size_t)(g->nnodes + 1));
  drop[p] = true;
  pk_graph_remove_nodes(g, drop);
  return true;
}

pk_status pk_pass_fuse(pk_graph *g, const char **note) {
  int fused = 0;
  for (int c = 0; c < g->nnodes; c++) {
    bool again = true;
    while (again) { /* c's new inputs may be fusable in turn */
      again = false;
      for (int i = 0; i < g->nodes[c]->ninputs && !again; i++)
        if (fuse_input(g, c, i)) {
          fused++;
          c--; /* the producer before it was removed */
          again = true;
        }
    }
  }
  *note = pk_sprintf(g->ctx, "%d elementwise node%s inlined into %s reader (%d kernel calls "
                     "fewer)", fused, fused == 1 ? "" : "s", fused == 1 ? "its" : "their", fused);
  return PK_OK;
}
