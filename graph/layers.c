/* layers.c — pk_graph_layers: groups params into layers (a conv2d/matmul reading a param,
 * plus the bias added to its result), the unit that sparse-update specs speak of. */
#include "graph_impl.h"

static bool is_layer_op(pk_op_kind op) {
  return op == PK_OP_CONV2D || op == PK_OP_MATMUL || op == PK_OP_BATCH_MATMUL;
}

static bool is_param(const pk_graph *g, int t) {
  return g->tensors[t]->role == PK_ROLE_PARAM && g->tensors[t]->base < 0;
}

/* The param a bias operand is: the param itself, or the param a forward reshape made it
 * (ONNX's Conv bias (C,) is reshaped to (C, 1, 1) to be added); -1 otherwise. */
static int bias_param(const pk_graph *g, int t) {
  if (is_param(g, t)) return t;
  int p = g->tensors[t]->producer;
  if (p < 0) return -1;
  const pk_gnode *r = g->nodes[p];
  if (r->kind != PK_GNODE_OP || r->phase != PK_PHASE_FORWARD || r->op != PK_OP_RESHAPE)
    return -1;
  return is_param(g, r->inputs[0]) ? r->inputs[0] : -1;
}

int pk_graph_layers(pk_graph *g) {
  int *layer_of_tensor = pk_alloc(g->ctx, sizeof(int) * (size_t)(g->ntensors + 1));
  for (int i = 0; i < g->ntensors; i++) {
    layer_of_tensor[i] = -1;
    if (g->tensors[i]->role == PK_ROLE_PARAM) g->tensors[i]->layer = -1;
  }
  g->layer_nodes = pk_alloc(g->ctx, sizeof(int) * (size_t)(g->nnodes + 1));
  g->nlayers = 0;
  for (int k = 0; k < g->nnodes; k++) {
    const pk_gnode *n = g->nodes[k];
    if (n->kind != PK_GNODE_OP || n->phase != PK_PHASE_FORWARD || !is_layer_op(n->op)) continue;
    bool has_param = false;
    for (int i = 0; i < n->ninputs; i++) has_param |= is_param(g, n->inputs[i]);
    if (!has_param) continue;
    int l = g->nlayers++;
    g->layer_nodes[l] = k;
    layer_of_tensor[n->outputs[n->noutputs - 1]] = l;
    for (int i = 0; i < n->ninputs; i++) {
      pk_gtensor *t = g->tensors[n->inputs[i]];
      if (is_param(g, t->id) && t->layer < 0) t->layer = l;
    }
  }
  /* A bias joins the layer whose result it is added to (the first such add), directly or
   * through a reshape. */
  for (int k = 0; k < g->nnodes; k++) {
    const pk_gnode *n = g->nodes[k];
    if (n->kind != PK_GNODE_OP || n->phase != PK_PHASE_FORWARD || n->op != PK_OP_ADD) continue;
    for (int i = 0; i < 2; i++) {
      int bp = bias_param(g, n->inputs[i]);
      int other = layer_of_tensor[n->inputs[1 - i]];
      if (bp >= 0 && g->tensors[bp]->layer < 0 && other >= 0) g->tensors[bp]->layer = other;
    }
  }
  return g->nlayers;
}
