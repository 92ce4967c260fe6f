/* graph.c — the graph IR itself: creating tensors and nodes, lookup by name, cloning and
 * reordering (used by the training-graph builder). */
#include <string.h>

#include "graph_impl.h"

static const char *const role_names[] = {
    [PK_ROLE_INPUT] = "input",         [PK_ROLE_LABEL] = "label",
    [PK_ROLE_PARAM] = "param",         [PK_ROLE_ACTIVATION] = "activation",
    [PK_ROLE_TEMP] = "temp",           [PK_ROLE_GRADIENT] = "gradient",
    [PK_ROLE_OPT_STATE] = "opt_state", [PK_ROLE_HYPER] = "hyper",
    [PK_ROLE_BUFFER] = "buffer",       [PK_ROLE_CONSTANT] = "constant",
    [PK_ROLE_FOLDED] = "folded",
};
_Static_assert(sizeof role_names / sizeof role_names[0] == PK_ROLE_COUNT_, "one name per role");

const char *pk_role_name(pk_tensor_role r) {
  return (unsigned)r < PK_ROLE_COUNT_ ? role_names[r] : "?";
}

const char *pk_phase_name(pk_phase p) {
  switch (p) {
  case PK_PHASE_FORWARD: return "forward";
  case PK_PHASE_LOSS: return "loss";
  case PK_PHASE_BACKWARD: return "backward";
  case PK_PHASE_UPDATE: return "update";
  case PK_PHASE_LOAD: return "load";
  }
  return "?";
}

pk_status pk_graph_refail(pk_ctx *ctx, pk_status s, const char *prefix) {
  const char *old = pk_strdup(ctx, pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  return pk_ctx_fail(ctx, s, "graph: %s: %s", prefix, old);
}

pk_graph *pk_graph_new(pk_ctx *ctx, int64_t batch) {
  pk_graph *g = pk_alloc(ctx, sizeof *g);
  g->ctx = ctx;
  g->batch = batch;
  g->output = g->loss = g->target = g->row_weight = g->hyper = g->rng = -1;
  g->cap_tensors = 16;
  g->cap_nodes = 16;
  g->tensors = pk_alloc(ctx, sizeof *g->tensors * (size_t)g->cap_tensors);
  g->nodes = pk_alloc(ctx, sizeof *g->nodes * (size_t)g->cap_nodes);
  return g;
}

/* Arena arrays cannot be realloc'ed: growth copies into a new array twice the size (the
 * old one stays in the arena; total waste is bounded by the final size). */
static void *grow(pk_ctx *ctx, void *old, int n, int *cap, size_t elem) {
  if (n < *cap) return old;
  int ncap = *cap * 2;
  void *p = pk_alloc(ctx, elem * (size_t)ncap);
  memcpy(p, old, elem * (size_t)n);
  *cap = ncap;
  return p;
}

int64_t pk_gtensor_numel(const pk_gtensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

int64_t pk_gtensor_bytes(const pk_gtensor *t) {
  return pk_gtensor_numel(t) * (int64_t)pkrt_dtype_size(t->dtype);
}

void pk_graph_dense_strides(int ndim, const int64_t *shape, int64_t *strides) {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; d--) {
    strides[d] = s;
    s *= shape[d];
  }
}

static bool name_is_bias(const char *name) {
  size_t n = strlen(name);
  return n >= 4 && strcmp(name + n - 4, "bias") == 0;
}

int pk_graph_push_tensor(pk_graph *g, const char *name, pk_tensor_role role, pkrt_dtype dtype,
                         int ndim, const int64_t *shape) {
  g->tensors = grow(g->ctx, g->tensors, g->ntensors, &g->cap_tensors, sizeof *g->tensors);
  pk_gtensor *t = pk_alloc(g->ctx, sizeof *t);
  t->id = g->ntensors;
  t->name = pk_strdup(g->ctx, name);
  t->role = role;
  t->dtype = dtype;
  t->ndim = ndim;
  memcpy(t->shape, shape, sizeof *shape * (size_t)ndim);
  t->producer = -1;
  t->trainable = role == PK_ROLE_PARAM;
  t->train_channels = ndim >= 2 ? shape[1] : 0;
  t->layer = -1;
  t->is_bias = name_is_bias(name);
  t->base = -1;
  g->tensors[g->ntensors++] = t;
  return t->id;
}

int pk_graph_find(const pk_graph *g, const char *name) {
  if (!name) return -1;
  for (int i = 0; i < g->ntensors; i++)
    if (strcmp(g->tensors[i]->name, name) == 0) return i;
  return -1;
}

pk_status pk_graph_name_outputs(pk_graph *g, int node, int n, const char *const *names) {
  pk_ctx *ctx = g->ctx;
  if (node < 0 || node >= g->nnodes)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: no node %d", node);
  const pk_gnode *nd = g->nodes[node];
  if (n != nd->noutputs)
    return pk_ctx_fail(ctx, PK_ERR_CHECK,
                       "graph: node '%s': %d output name%s given, but %s computes %d (its stages "
                       "in order, the result last)", nd->name, n, n == 1 ? "" : "s",
                       pk_op_name(nd->op), nd->noutputs);
  /* A name may be one this node's outputs hold now (renaming among them); any other
   * tensor's name, or a name given twice, is taken. */
  for (int i = 0; i < n; i++) {
    if (!names[i] || !*names[i])
      return pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: node '%s': output %d needs a name", nd->name, i);
    int at = pk_graph_find(g, names[i]);
    bool own = false;
    for (int o = 0; o < nd->noutputs; o++) own |= at == nd->outputs[o];
    bool taken = at >= 0 && !own;
    for (int j = 0; j < i; j++) taken |= strcmp(names[j], names[i]) == 0;
    if (taken)
      return pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: node '%s': output name '%s' is already a "
                         "tensor", nd->name, names[i]);
  }
  for (int i = 0; i < n; i++) {
    pk_gtensor *t = g->tensors[nd->outputs[i]];
    t->name = pk_strdup(ctx, names[i]);
    if (t->role == PK_ROLE_TEMP) t->role = PK_ROLE_ACTIVATION;
  }
  return PK_OK;
}

int pk_graph_find_node(const pk_graph *g, const char *name) {
  if (!name) return -1;
  for (int i = 0; i < g->nnodes; i++)
    if (strcmp(g->nodes[i]->name, name) == 0) return i;
  return -1;
}

const char *pk_graph_unique_name(const pk_graph *g, const char *base) {
  if (pk_graph_find(g, base) < 0) return pk_strdup(g->ctx, base);
  for (int k = 2;; k++) {
    const char *n = pk_sprintf(g->ctx, "%s#%d", base, k);
    if (pk_graph_find(g, n) < 0) return n;
  }
}

int pk_graph_add_tensor(pk_graph *g, const char *name, pk_tensor_role role, pkrt_dtype dtype,
                        int ndim, const int64_t *shape) {
  pk_ctx *ctx = g->ctx;
  if (!name || !*name) {
    pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: a tensor needs a non-empty name");
    return -1;
  }
  if (pk_graph_find(g, name) >= 0) {
    pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: duplicate tensor name '%s'", name);
    return -1;
  }
  if ((unsigned)role >= PK_ROLE_COUNT_) {
    pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: tensor '%s' has an invalid role %d", name, (int)role);
    return -1;
  }
  if (pkrt_dtype_size(dtype) == 0) {
    pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: tensor '%s' has unsupported dtype %s", name,
                pkrt_dtype_name(dtype));
    return -1;
  }
  if (ndim < 1 || ndim > PK_TE_MAX_DIMS || !shape) {
    pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: tensor '%s' has rank %d (must be 1..%d)", name, ndim,
                PK_TE_MAX_DIMS);
    return -1;
  }
  int64_t bytes = (int64_t)pkrt_dtype_size(dtype);
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 1 || shape[d] > PK_OP_MAX_EXTENT) {
      pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: tensor '%s' dim %d has extent %lld (must be 1..%lld)",
                  name, d, (long long)shape[d], (long long)PK_OP_MAX_EXTENT);
      return -1;
    }
    if (pk_i64_mul(bytes, shape[d], &bytes) || bytes > (INT64_C(1) << 48)) {
      pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: tensor '%s' is too large", name);
      return -1;
    }
  }
  return pk_graph_push_tensor(g, name, role, dtype, ndim, shape);
}

int pk_graph_add_param(pk_graph *g, const char *name, pkrt_dtype dtype, int ndim,
                       const int64_t *shape, const void *init) {
  int id = pk_graph_add_tensor(g, name, PK_ROLE_PARAM, dtype, ndim, shape);
  if (id < 0 || !init) return id;
  pk_gtensor *t = g->tensors[id];
  size_t n = (size_t)pk_gtensor_bytes(t);
  void *copy = pk_alloc(g->ctx, n);
  memcpy(copy, init, n);
  t->init = copy;
  return id;
}

int pk_graph_add_buffer(pk_graph *g, const char *name, pk_tensor_role role, pkrt_dtype dtype,
                        int ndim, const int64_t *shape, const void *init) {
  if (role != PK_ROLE_BUFFER && role != PK_ROLE_CONSTANT) {
    pk_ctx_fail(g->ctx, PK_ERR_CHECK, "graph: tensor '%s': role %s is not a buffer or constant",
                name ? name : "?", pk_role_name(role));
    return -1;
  }
  int id = pk_graph_add_param(g, name, dtype, ndim, shape, init);
  if (id < 0) return id;
  g->tensors[id]->role = role;
  g->tensors[id]->trainable = false;
  return id;
}

int pk_graph_push_node(pk_graph *g, const char *name, pk_gnode_kind kind, pk_op_kind op,
                       const pk_op_params *prm, int grad_input, pk_phase phase,
                       pk_te_program *prog, int ninputs, const int *inputs, int noutputs,
                       const int *outputs) {
  g->nodes = grow(g->ctx, g->nodes, g->nnodes, &g->cap_nodes, sizeof *g->nodes);
  pk_gnode *n = pk_alloc(g->ctx, sizeof *n);
  n->id = g->nnodes;
  n->name = pk_strdup(g->ctx, name);
  n->kind = kind;
  n->op = op;
  n->prm = *prm;
  n->grad_input = kind == PK_GNODE_GRAD ? grad_input : -1;
  n->grad_wrt = -1; /* the autodiff sets it */
  n->phase = phase;
  n->ninputs = ninputs;
  n->inputs = pk_alloc(g->ctx, sizeof(int) * (size_t)(ninputs > 0 ? ninputs : 1));
  memcpy(n->inputs, inputs, sizeof(int) * (size_t)ninputs);
  n->noutputs = noutputs;
  n->outputs = pk_alloc(g->ctx, sizeof(int) * (size_t)(noutputs > 0 ? noutputs : 1));
  memcpy(n->outputs, outputs, sizeof(int) * (size_t)noutputs);
  n->prog = prog;
  for (int i = 0; i < noutputs; i++) g->tensors[outputs[i]]->producer = n->id;
  g->nodes[g->nnodes++] = n;
  return n->id;
}

int pk_graph_push_prog(pk_graph *g, const char *name, pk_gnode_kind kind, pk_op_kind op,
                       const pk_op_params *prm, int grad_input, pk_phase phase,
                       pk_te_program *prog, int ninputs, const int *inputs,
                       const char *out_name, pk_tensor_role out_role, int *out_tensor) {
  int ncomp = 0;
  for (int i = 0; i < prog->ntensors; i++) ncomp += prog->tensors[i]->kind == PK_TE_COMPUTE;
  int *outs = pk_alloc(g->ctx, sizeof(int) * (size_t)ncomp);
  int k = 0;
  for (int i = 0; i < prog->ntensors; i++) {
    const pk_te_tensor *pt = prog->tensors[i];
    if (pt->kind != PK_TE_COMPUTE) continue;
    bool last = k == ncomp - 1;
    const char *nm = last ? pk_graph_unique_name(g, out_name)
                          : pk_graph_unique_name(g, pk_sprintf(g->ctx, "%s.s%d", out_name, k));
    outs[k++] = pk_graph_push_tensor(g, nm, last ? out_role : PK_ROLE_TEMP, pt->dtype, pt->ndim,
                                     pt->shape);
  }
  *out_tensor = outs[ncomp - 1];
  return pk_graph_push_node(g, name, kind, op, prm, grad_input, phase, prog, ninputs, inputs,
                            ncomp, outs);
}

void pk_graph_params_of(const pk_graph *g, int ninputs, const int *inputs,
                        const pk_op_attrs *attrs, pk_op_params *prm) {
  memset(prm, 0, sizeof *prm);
  prm->ninputs = ninputs;
  for (int i = 0; i < ninputs && i < PK_OP_MAX_INPUTS; i++) {
    const pk_gtensor *t = g->tensors[inputs[i]];
    prm->in[i].ndim = t->ndim;
    memcpy(prm->in[i].shape, t->shape, sizeof t->shape);
    prm->in[i].dtype = t->dtype;
  }
  if (attrs) prm->attrs = *attrs;
}

pk_status pk_graph_add_op(pk_graph *g, const char *name, pk_op_kind op,
                          const pk_op_attrs *attrs, int ninputs, const int *inputs,
                          const char *out_name, int *out_tensor) {
  pk_ctx *ctx = g->ctx;
  if (out_tensor) *out_tensor = -1;
  if (!name || !*name)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: a node needs a non-empty name");
  if ((unsigned)op >= PK_OP_COUNT_)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: node '%s': unknown operator %d", name, (int)op);
  if (pk_graph_find_node(g, name) >= 0)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: duplicate node name '%s'", name);
  if (!out_name || !*out_name)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: node '%s': its output needs a name", name);
  if (pk_graph_find(g, out_name) >= 0)
    return pk_ctx_fail(ctx, PK_ERR_CHECK,
                       "graph: node '%s': output name '%s' is already a tensor", name, out_name);
  /* dropout and its kind read the step's (seed, step): given by the caller, or the graph's
   * one rng tensor, made on first use (the executor writes it before each step) */
  int with_rng[PK_OP_MAX_INPUTS];
  if ((pk_op_flags(op) & PK_OPF_STEP_RNG) && ninputs == pk_op_arity(op) - 1 && inputs) {
    if (g->rng < 0)
      g->rng = pk_graph_push_tensor(g, pk_graph_unique_name(g, "rng"), PK_ROLE_HYPER,
                                    PKRT_DTYPE_I64, 1, (int64_t[]){2});
    memcpy(with_rng, inputs, sizeof(int) * (size_t)ninputs);
    with_rng[ninputs++] = g->rng;
    inputs = with_rng;
  }
  int lo, hi;
  pk_op_input_range(op, &lo, &hi);
  if (ninputs < lo || ninputs > hi)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: node '%s': %s takes %s%d input%s, got %d",
                       name, pk_op_name(op), lo == hi ? "" : pk_sprintf(ctx, "%d to ", lo), hi,
                       hi == 1 ? "" : "s", ninputs);
  if (ninputs > 0 && !inputs)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: node '%s': no input list", name);
  for (int i = 0; i < ninputs; i++)
    if (inputs[i] < 0 || inputs[i] >= g->ntensors)
      return pk_ctx_fail(ctx, PK_ERR_CHECK, "graph: node '%s': input %d is not a tensor (id %d)",
                         name, i, inputs[i]);
  pk_op_params prm;
  pk_graph_params_of(g, ninputs, inputs, attrs, &prm);
  pk_te_program *prog;
  pk_status s = pk_op_build(ctx, op, &prm, &prog);
  if (s != PK_OK) return pk_graph_refail(ctx, s, pk_sprintf(ctx, "node '%s'", name));
  int y;
  pk_graph_push_prog(g, name, PK_GNODE_OP, op, &prm, -1, PK_PHASE_FORWARD, prog, ninputs, inputs,
                     out_name, PK_ROLE_ACTIVATION, &y);
  if (out_tensor) *out_tensor = y;
  return PK_OK;
}

pk_graph *pk_graph_clone(const pk_graph *src) {
  pk_ctx *ctx = src->ctx;
  pk_graph *g = pk_alloc(ctx, sizeof *g);
  *g = *src;
  g->cap_tensors = src->ntensors > 16 ? src->ntensors : 16;
  g->cap_nodes = src->nnodes > 16 ? src->nnodes : 16;
  g->tensors = pk_alloc(ctx, sizeof *g->tensors * (size_t)g->cap_tensors);
  g->nodes = pk_alloc(ctx, sizeof *g->nodes * (size_t)g->cap_nodes);
  for (int i = 0; i < src->ntensors; i++) {
    g->tensors[i] = pk_alloc(ctx, sizeof(pk_gtensor));
    *g->tensors[i] = *src->tensors[i];
  }
  for (int i = 0; i < src->nnodes; i++) {
    const pk_gnode *o = src->nodes[i];
    pk_gnode *n = pk_alloc(ctx, sizeof *n);
    *n = *o;
    n->inputs = pk_alloc(ctx, sizeof(int) * (size_t)(o->ninputs > 0 ? o->ninputs : 1));
    memcpy(n->inputs, o->inputs, sizeof(int) * (size_t)o->ninputs);
    n->outputs = pk_alloc(ctx, sizeof(int) * (size_t)(o->noutputs > 0 ? o->noutputs : 1));
    memcpy(n->outputs, o->outputs, sizeof(int) * (size_t)o->noutputs);
    g->nodes[i] = n;
  }
  if (src->nlayers > 0) {
    g->layer_nodes = pk_alloc(ctx, sizeof(int) * (size_t)src->nlayers);
    memcpy(g->layer_nodes, src->layer_nodes, sizeof(int) * (size_t)src->nlayers);
  }
  return g;
}

void pk_graph_reorder(pk_graph *g, const int *order) {
  pk_gnode **nn = pk_alloc(g->ctx, sizeof *nn * (size_t)g->cap_nodes);
  int *newid = pk_alloc(g->ctx, sizeof(int) * (size_t)(g->nnodes > 0 ? g->nnodes : 1));
  for (int k = 0; k < g->nnodes; k++) {
    PK_ASSERT(order[k] >= 0 && order[k] < g->nnodes);
    nn[k] = g->nodes[order[k]];
    newid[order[k]] = k;
  }
  for (int k = 0; k < g->nnodes; k++) nn[k]->id = k;
  for (int i = 0; i < g->ntensors; i++)
    if (g->tensors[i]->producer >= 0) g->tensors[i]->producer = newid[g->tensors[i]->producer];
  for (int l = 0; l < g->nlayers; l++) g->layer_nodes[l] = newid[g->layer_nodes[l]];
  g->nodes = nn;
}

void pk_graph_remove_nodes(pk_graph *g, const bool *drop) {
  int *newid = pk_alloc(g->ctx, sizeof(int) * (size_t)(g->nnodes > 0 ? g->nnodes : 1));
  int n = 0;
  for (int k = 0; k < g->nnodes; k++) {
    newid[k] = drop[k] ? -1 : n;
    if (!drop[k]) g->nodes[n++] = g->nodes[k];
  }
  for (int k = 0; k < n; k++) g->nodes[k]->id = k;
  for (int i = 0; i < g->ntensors; i++)
    if (g->tensors[i]->producer >= 0) g->tensors[i]->producer = newid[g->tensors[i]->producer];
  for (int l = 0; l < g->nlayers; l++) {
    PK_ASSERT(newid[g->layer_nodes[l]] >= 0 && "a layer node was removed");
    g->layer_nodes[l] = newid[g->layer_nodes[l]];
  }
  g->nnodes = n;
}
