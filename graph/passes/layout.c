/* layout.c — the layout pass: conv chains stored channels last (NHWC). A chain is a
 * connected set of rank-4 batch activations and their gradients made and read by convs,
 * pools, batch norms, reductions and elementwise ops; every node of a chain computes in
 * NHWC (pk_te_relayout), and a transpose converts at the chain's ends only: where the model
 * input or a tensor from outside enters it, and where a node outside (a flatten, a slice,
 * the loss) reads it. A chain turns NHWC when asked (--layout nhwc) or, by default, when the
 * step's kernels, as the fuse pass will make them, take less time so by their tuning
 * records or timings (conversions included). */
#include <math.h>
#include <string.h>

#include "graph_impl.h"
#include "pk_passes.h"

static const int TO_NHWC[4] = {0, 2, 3, 1}, TO_NCHW[4] = {0, 3, 1, 2};
/* auto keeps NHWC only this much faster: a timing is noisy, and a tie should not flip the
 * layout from one compile to the next */
#define NHWC_MARGIN 0.02

/* The nodes a chain may run through: what computes per pixel and channel, in the step (and
 * a batch norm's running-stats update, which reads its input again). */
static bool chain_node(const pk_gnode *n) {
  if (n->op == PK_OP_BATCH_NORM_STATS) return n->phase == PK_PHASE_UPDATE;
  if (n->phase != PK_PHASE_FORWARD && n->phase != PK_PHASE_BACKWARD) return false;
  switch (pk_op_class_of(n->op)) {
  case PK_OP_CLASS_CONV:
  case PK_OP_CLASS_POOL: return true;
  case PK_OP_CLASS_MATMUL: return false;
  case PK_OP_CLASS_REDUCTION:
    return n->op == PK_OP_BATCH_NORM || n->op == PK_OP_GROUP_NORM || n->op == PK_OP_SUM ||
           n->op == PK_OP_MEAN || n->op == PK_OP_MAX;
  default: break;
  }
  /* injective: elementwise ops, not shape moves (whose reads are NCHW index arithmetic) */
  switch (n->op) {
  case PK_OP_SLICE: case PK_OP_RESHAPE: case PK_OP_TRANSPOSE: case PK_OP_CONCAT:
  case PK_OP_PAD: case PK_OP_EXPAND: case PK_OP_GATHER: case PK_OP_EMBEDDING: case PK_OP_ROPE:
    return false;
  default: return !(pk_op_flags(n->op) & PK_OPF_TRAINING);
  }
}

typedef struct lay {
  pk_graph *g;
  pk_ctx *ctx;
  bool *wside;   /* per tensor: a weight's gradient or made from one (stays as the weight) */
  bool *in_s;    /* per tensor: stored NHWC (chain tensors) */
  bool *tin;     /* per tensor: NCHW, read by a chain node through a transpose to NHWC */
  bool *tout;    /* per chain tensor: read by a node outside through a transpose to NCHW */
  int *parent;   /* union-find over tensors: chains */
} lay;

static int find(lay *L, int t) {
  while (L->parent[t] != t) t = L->parent[t] = L->parent[L->parent[t]];
  return t;
}
static void unite(lay *L, int a, int b) { L->parent[find(L, a)] = find(L, b); }

/* Tensors derived from a weight's gradient (a weight gradient, its accumulation, clipping,
 * squares): they keep the weight's layout. */
static void mark_weight_side(lay *L) {
  pk_graph *g = L->g;
  for (int k = 0; k < g->nnodes; k++) {
    const pk_gnode *n = g->nodes[k];
    bool w = n->phase == PK_PHASE_UPDATE || n->phase == PK_PHASE_LOAD;
    if (n->kind == PK_GNODE_GRAD && n->grad_wrt >= 0) {
      pk_tensor_role r = g->tensors[n->grad_wrt]->role;
      w |= r != PK_ROLE_ACTIVATION && r != PK_ROLE_INPUT;
    }
    pk_op_class c = pk_op_class_of(n->op);
    for (int i = 0; !w && c != PK_OP_CLASS_CONV && c != PK_OP_CLASS_POOL && i < n->ninputs; i++)
      w = L->wside[n->inputs[i]];
    for (int o = 0; o < n->noutputs; o++) L->wside[n->outputs[o]] |= w;
  }
}

/* Whether tensor t (a root, or an alias of one) may be stored NHWC, as far as t alone says. */
static bool eligible(const lay *L, int t) {
  const pk_graph *g = L->g;
  const pk_gtensor *x = g->tensors[t];
  if (x->ndim != 4 || x->fused_away || L->wside[t] || t == g->output || t == g->loss) return false;
  if (x->role != PK_ROLE_ACTIVATION && x->role != PK_ROLE_GRADIENT) return false;
  if (x->producer >= 0 && !chain_node(g->nodes[x->producer])) return false;
  if (x->base < 0) return x->producer >= 0;
  /* an alias (copy elimination's): the whole of its base, in the same shape */
  const pk_gtensor *b = g->tensors[x->base];
  if (x->producer >= 0 || x->view_offset != 0 || b->ndim != 4) return false;
  for (int d = 0; d < 4; d++)
    if (x->shape[d] != b->shape[d]) return false;
  return true;
}

/* Whether some chain node reads t. */
static bool chain_read(const lay *L, int t) {
  for (int k = 0; k < L->g->nnodes; k++) {
    const pk_gnode *n = L->g->nodes[k];
    for (int i = 0; chain_node(n) && i < n->ninputs; i++)
      if (n->inputs[i] == t) return true;
  }
  return false;
}

/* The chain tensors: eligible roots whose aliases are all eligible, with those aliases. */
static void find_chain_tensors(lay *L) {
  pk_graph *g = L->g;
  for (int t = 0; t < g->ntensors; t++) {
    if (g->tensors[t]->base >= 0 || !eligible(L, t)) continue;
    bool ok = true, read = chain_read(L, t);
    for (int v = 0; v < g->ntensors && ok; v++)
      if (g->tensors[v]->base == t) {
        ok = eligible(L, v);
        read |= chain_read(L, v);
      }
    if (!ok || !read) continue;
    L->in_s[t] = true;
    for (int v = 0; v < g->ntensors; v++)
      if (g->tensors[v]->base == t) L->in_s[v] = true, unite(L, v, t);
  }
}

/* Whether node n computes in a chain: a chain node that makes or reads a chain tensor. */
static bool touches(const lay *L, const pk_gnode *n) {
  if (!chain_node(n)) return false;
  for (int i = 0; i < n->ninputs; i++)
    if (L->in_s[n->inputs[i]]) return true;
  for (int o = 0; o < n->noutputs; o++)
    if (L->in_s[n->outputs[o]]) return true;
  return false;
}

/* An NCHW input of a chain node that enters the chain through a transpose: a batch of
 * images (the model input, a gradient made outside), not a per-channel broadcast. */
static bool enters(const lay *L, int u) {
  const pk_gtensor *x = L->g->tensors[u];
  if (L->in_s[u] || x->ndim != 4 || L->wside[u] || x->shape[2] * x->shape[3] == 1) return false;
  return x->role == PK_ROLE_INPUT || x->role == PK_ROLE_ACTIVATION || x->role == PK_ROLE_GRADIENT;
}

/* The chains: chain tensors connected through the nodes that touch them, and the tensors
 * entering them; marks tin and tout. */
static void connect(lay *L) {
  pk_graph *g = L->g;
  for (int k = 0; k < g->nnodes; k++) {
    const pk_gnode *n = g->nodes[k];
    if (!touches(L, n)) {
      for (int i = 0; i < n->ninputs; i++) L->tout[n->inputs[i]] |= L->in_s[n->inputs[i]];
      continue;
    }
    int any = -1;
    for (int o = 0; o < n->noutputs; o++)
      if (L->in_s[n->outputs[o]]) any = n->outputs[o];
    for (int i = 0; i < n->ninputs; i++) {
      int u = n->inputs[i];
      if (enters(L, u)) L->tin[u] = true;
      if ((L->in_s[u] || L->tin[u]) && any < 0) any = u;
    }
    for (int o = 0; o < n->noutputs; o++)
      if (L->in_s[n->outputs[o]]) unite(L, n->outputs[o], any);
    for (int i = 0; i < n->ninputs; i++)
      if (L->in_s[n->inputs[i]] || L->tin[n->inputs[i]]) unite(L, n->inputs[i], any);
  }
}

/* Node n's program with its chain tensors (and entering inputs) permuted to NHWC. */
static pk_status relayout_node(lay *L, const pk_gnode *n, pk_te_program **out) {
  const int **perm = pk_alloc(L->ctx, sizeof *perm * (size_t)(n->prog->ntensors + 1));
  int k = 0;
  for (int i = 0; i < n->prog->ntensors; i++) {
    if (n->prog->tensors[i]->kind == PK_TE_PLACEHOLDER) {
      int u = n->inputs[i];
      if (L->in_s[u] || L->tin[u]) perm[i] = TO_NHWC;
    } else if (L->in_s[n->outputs[k++]]) {
      perm[i] = TO_NHWC;
    }
  }
  return pk_te_relayout(L->ctx, n->prog, perm, out);
}

/* The transpose by perm of a tensor like x of the given shape (x's, or its NHWC one). */
static pk_status transpose_prog(lay *L, const pk_gtensor *x, const int64_t *shape, const int *perm,
                                pk_op_params *prm, pk_te_program **prog) {
  memset(prm, 0, sizeof *prm);
  prm->ninputs = 1;
  prm->in[0].ndim = 4;
  prm->in[0].dtype = x->dtype;
  memcpy(prm->in[0].shape, shape, sizeof(int64_t) * 4);
  prm->attrs.nperm = 4;
  memcpy(prm->attrs.perm, perm, sizeof(int) * 4);
  return pk_op_build(L->ctx, PK_OP_TRANSPOSE, prm, prog);
}

/* A transpose of tensor u (in its current shape) by perm into a new tensor (role as u's; an
 * input's is an activation), as a node of `phase`; *t gets the tensor, *node the node. */
static pk_status push_transpose(lay *L, int u, const int *perm, const char *name, pk_phase phase,
                                int *t, int *node) {
  pk_graph *g = L->g;
  const pk_gtensor *x = g->tensors[u];
  pk_op_params prm;
  pk_te_program *prog;
  pk_status s = transpose_prog(L, x, x->shape, perm, &prm, &prog);
  if (s != PK_OK) return s;
  const pk_te_tensor *y = prog->tensors[prog->ntensors - 1];
  pk_tensor_role role = x->role == PK_ROLE_GRADIENT ? PK_ROLE_GRADIENT : PK_ROLE_ACTIVATION;
  const char *tn = pk_graph_unique_name(g, pk_sprintf(L->ctx, "%s(%s)", name, x->name));
  *t = pk_graph_push_tensor(g, tn, role, x->dtype, 4, y->shape);
  *node = pk_graph_push_node(g, tn, PK_GNODE_OP, PK_OP_TRANSPOSE, &prm, -1, phase, prog, 1, &u,
                             1, t);
  return PK_OK;
}

/* Rewrites the chosen chains: programs, shapes, conversions. */
static pk_status rewrite(lay *L) {
  pk_graph *g = L->g;
  pk_ctx *ctx = L->ctx;
  int nn = g->nnodes, nt = g->ntensors;
  /* each conversion goes right before the first node that reads through it */
  int *conv_of = pk_alloc(ctx, sizeof(int) * (size_t)(nt + 1));
  int *before = pk_alloc(ctx, sizeof(int) * (size_t)(nn + 2 * nt + 1));
  for (int t = 0; t < nt; t++) conv_of[t] = -1;
  /* chain tensors take their NHWC shape (an alias: its dense strides), before the
   * conversions out of them are made */
  for (int t = 0; t < nt; t++) {
    if (!L->in_s[t]) continue;
    pk_gtensor *x = g->tensors[t];
    int64_t sh[4];
    for (int d = 0; d < 4; d++) sh[d] = x->shape[TO_NHWC[d]];
    memcpy(x->shape, sh, sizeof sh);
    if (x->base >= 0) pk_graph_dense_strides(4, x->shape, x->view_strides);
  }
  for (int k = 0; k < nn; k++) {
    pk_gnode *n = g->nodes[k];
    bool in = touches(L, n);
    pk_te_program *q = NULL;
    if (in) {
      pk_status s = relayout_node(L, n, &q);
      if (s != PK_OK) return pk_graph_refail(ctx, s, pk_sprintf(ctx, "layout: node '%s'", n->name));
    }
    int *inputs = NULL;
    for (int i = 0; i < n->ninputs; i++) {
      int u = n->inputs[i];
      bool via = in ? L->tin[u] : L->tout[u] && L->in_s[u];
      if (!via) continue;
      if (conv_of[u] < 0) {
        int id;
        pk_status s = push_transpose(L, u, in ? TO_NHWC : TO_NCHW, in ? "nhwc" : "nchw",
                                     n->phase, &conv_of[u], &id);
        if (s != PK_OK) return s;
        before[id] = k;
        n = g->nodes[k]; /* the node array may have grown */
      }
      if (!inputs) {
        inputs = pk_alloc(ctx, sizeof(int) * (size_t)n->ninputs);
        memcpy(inputs, n->inputs, sizeof(int) * (size_t)n->ninputs);
      }
      inputs[i] = conv_of[u];
    }
    if (inputs) n->inputs = inputs;
    if (q) {
      n->prog = q;
      const char *label = n->fused ? n->fused
                          : n->kind == PK_GNODE_GRAD
                              ? pk_sprintf(ctx, "%s_grad%d", pk_op_name(n->op), n->grad_input)
                              : pk_op_name(n->op);
      n->fused = pk_sprintf(ctx, "%s@nhwc", label);
    }
  }
  /* the conversions into the order */
  int *order = pk_alloc(ctx, sizeof(int) * (size_t)(g->nnodes + 1)), m = 0;
  for (int k = 0; k < nn; k++) {
    for (int c = nn; c < g->nnodes; c++)
      if (before[c] == k) order[m++] = c;
    order[m++] = k;
  }
  PK_ASSERT(m == g->nnodes);
  pk_graph_reorder(g, order);
  return PK_OK;
}

/* A chain's size for the note: the nodes that compute in it, the conversions it needs;
 * returns how many of its nodes are convs or pools (none: elementwise ops on some other
 * rank-4 tensor, attention scores say, which gain nothing from NHWC). */
static int chain_size(lay *L, int root, int *nodes, int *conv) {
  pk_graph *g = L->g;
  int windows = 0;
  *nodes = *conv = 0;
  for (int k = 0; k < g->nnodes; k++) {
    const pk_gnode *n = g->nodes[k];
    if (!touches(L, n)) continue;
    int t = -1;
    for (int i = 0; i < n->ninputs && t < 0; i++)
      if (L->in_s[n->inputs[i]] || L->tin[n->inputs[i]]) t = n->inputs[i];
    for (int i = 0; i < n->noutputs && t < 0; i++)
      if (L->in_s[n->outputs[i]]) t = n->outputs[i];
    if (find(L, t) != root) continue;
    ++*nodes;
    pk_op_class c = pk_op_class_of(n->op);
    windows += c == PK_OP_CLASS_CONV || c == PK_OP_CLASS_POOL;
  }
  for (int u = 0; u < g->ntensors; u++)
    *conv += (L->tin[u] || L->tout[u]) && find(L, u) == root;
  return windows;
}

/* The step's kernel time of g (ms): each node's kernel once per call, fused first as the
 * driver will (o->fuse); NAN when a kernel has no time. g is changed (a trial copy). */
static double step_ms(pk_graph *g, const pk_layout_options *o) {
  const char *note;
  if (o->fuse && pk_pass_fuse_with(g, o->fuse, &note) != PK_OK) {
    pk_ctx_clear_error(g->ctx);
    return NAN;
  }
  double ms = 0;
  for (int k = 0; k < g->nnodes && !isnan(ms); k++)
    if (g->nodes[k]->phase != PK_PHASE_LOAD) ms += o->kernel_ms(o->user, g->nodes[k]->prog);
  return ms;
}

/* The step's kernel time with chain `root` alone NHWC, on a copy of the graph. */
static double chain_ms(lay *L, int root, const pk_layout_options *o) {
  size_t n = (size_t)L->g->ntensors + 1;
  lay T = *L;
  T.g = pk_graph_clone(L->g);
  T.in_s = pk_alloc(L->ctx, n), T.tin = pk_alloc(L->ctx, n), T.tout = pk_alloc(L->ctx, n);
  for (int t = 0; t < L->g->ntensors; t++) {
    bool mine = (L->in_s[t] || L->tin[t]) && find(L, t) == root;
    T.in_s[t] = mine && L->in_s[t];
    T.tin[t] = mine && L->tin[t];
    T.tout[t] = mine && L->tout[t];
  }
  if (rewrite(&T) != PK_OK) {
    pk_ctx_clear_error(L->ctx);
    return NAN;
  }
  return step_ms(T.g, o);
}

/* Drops chain `root` (it stays NCHW). */
static void drop_chain(lay *L, int root) {
  for (int t = 0; t < L->g->ntensors; t++)
    if ((L->in_s[t] || L->tin[t]) && find(L, t) == root) L->in_s[t] = L->tin[t] = L->tout[t] = false;
}

/* Chooses each chain's layout; the note says what was measured and chosen. AUTO costs the
 * whole step's kernels with the chain in each layout (the other chains NCHW in both). */
static const char *choose(lay *L, const pk_layout_options *o) {
  pk_graph *g = L->g;
  pk_strbuf b;
  pk_strbuf_init(&b);
  int nchains = 0, nhwc = 0;
  bool timed = o->mode == PK_LAYOUT_AUTO && o->kernel_ms;
  double base = timed ? step_ms(pk_graph_clone(g), o) : NAN;
  /* roots first: dropping a chain clears the marks the loop tests */
  int *roots = pk_alloc(L->ctx, sizeof(int) * (size_t)(g->ntensors + 1)), nroots = 0;
  for (int t = 0; t < g->ntensors; t++)
    if ((L->in_s[t] || L->tin[t]) && find(L, t) == t) roots[nroots++] = t;
  for (int r = 0; r < nroots; r++) {
    int t = roots[r], nodes, conv;
    if (!chain_size(L, t, &nodes, &conv)) {
      drop_chain(L, t);
      continue;
    }
    nchains++;
    double c1 = timed && !isnan(base) ? chain_ms(L, t, o) : NAN;
    bool keep = o->mode == PK_LAYOUT_NCHW ||
                (o->mode == PK_LAYOUT_AUTO && !(c1 < base * (1 - NHWC_MARGIN)));
    pk_strbuf_printf(&b, "%schain %d (%d kernel%s, %d conversion%s): ", nchains > 1 ? "; " : "",
                     nchains, nodes, nodes == 1 ? "" : "s", conv, conv == 1 ? "" : "s");
    if (o->mode != PK_LAYOUT_AUTO)
      pk_strbuf_printf(&b, "%s (--layout)", keep ? "NCHW" : "NHWC");
    else if (isnan(base) || isnan(c1))
      pk_strbuf_append(&b, "NCHW (not timed: no tuning record or measurement for every kernel)");
    else
      pk_strbuf_printf(&b, "step kernels NCHW %.4g ms, NHWC %.4g ms: %s", base, c1,
                       keep ? "NCHW" : "NHWC");
    if (keep) drop_chain(L, t);
    nhwc += !keep;
  }
  if (!nchains) return "no conv chain";
  return pk_sprintf(L->ctx, "%d of %d chain%s NHWC: %s", nhwc, nchains, nchains == 1 ? "" : "s",
                    pk_strbuf_finish(L->ctx, &b));
}

pk_status pk_layout_mode_parse(pk_ctx *ctx, const char *s, pk_layout_mode *mode) {
  if (!s || !strcmp(s, "auto")) *mode = PK_LAYOUT_AUTO;
  else if (!strcmp(s, "nchw")) *mode = PK_LAYOUT_NCHW;
  else if (!strcmp(s, "nhwc")) *mode = PK_LAYOUT_NHWC;
  else
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "compile: --layout: unknown layout '%s' (auto, nchw "
                       "or nhwc)", s);
  return PK_OK;
}

pk_status pk_pass_layout_with(pk_graph *g, const pk_layout_options *o, const char **note) {
  pk_ctx *ctx = g->ctx;
  size_t n = (size_t)g->ntensors + 1;
  lay L = {.g = g, .ctx = ctx, .wside = pk_alloc(ctx, n), .in_s = pk_alloc(ctx, n),
           .tin = pk_alloc(ctx, n), .tout = pk_alloc(ctx, n),
           .parent = pk_alloc(ctx, sizeof(int) * n)};
  for (int t = 0; t < g->ntensors; t++) L.parent[t] = t;
  mark_weight_side(&L);
  find_chain_tensors(&L);
  connect(&L);
  *note = choose(&L, o);
  return rewrite(&L);
}

pk_status pk_pass_layout(pk_graph *g, const char **note) {
  return pk_pass_layout_with(g, &(pk_layout_options){.mode = PK_LAYOUT_AUTO}, note);
}
