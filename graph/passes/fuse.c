/* fuse.c — fusion. A node computing one elementwise tensor that only one other elementwise
 * node reads (same phase, read once per element) is inlined into that reader (pk_te_fuse):
 * one kernel instead of two, and the intermediate is never stored, so it takes no memory in
 * the plan. Repeated, a chain (bias, activation, residual add, their gradients, a frozen
 * norm's affine) becomes one kernel, its own tuning task. Then such a chain (or one
 * elementwise node) whose input is a matmul's or conv's result that nothing else reads
 * becomes its epilogue (pk_te_fuse_epilogue): one kernel computes a tile of the product and
 * applies the chain before it stores, so the raw product has no storage either. An
 * optimizer update (SGD) reading a weight gradient that a matmul or conv makes becomes that
 * kernel's epilogue too, writing the weight and its momentum at the tile: the gradient takes
 * no memory. Last, an elementwise node whose one reader is a matmul, reading it as an
 * operand the template packs (a ReLU gradient's mask on dY, a frozen norm's affine), becomes
 * its prologue (pk_te_fuse_prologue): the packing evaluates it, once per element. */
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

/* Whether node c may run at p instead: each input but t is made before p and nothing in
 * between writes its storage. */
static bool can_hoist(const pk_graph *g, int p, int c, int t) {
  const pk_gnode *cn = g->nodes[c];
  for (int i = 0; i < cn->ninputs; i++) {
    int u = cn->inputs[i], r = pk_pass_root(g, u);
    if (u == t) continue;
    int made = g->tensors[u]->producer >= 0 ? g->tensors[u]->producer : g->tensors[r]->producer;
    if (made >= p || written_between(g, p, c, r)) return false;
  }
  return true;
}

/* The label of what node n computes: "relu", "relu_grad0", or its fused chain. */
static const char *op_label(pk_ctx *ctx, const pk_gnode *n) {
  if (n->fused) return n->fused;
  if (n->kind == PK_GNODE_GRAD) return pk_sprintf(ctx, "%s_grad%d", pk_op_name(n->op), n->grad_input);
  return pk_op_name(n->op);
}

/* A matmul's or a conv's program, as the templates that compute an epilogue at their
 * register tile see it (autotune/space_matmul.c; space_conv.c and space_conv_gemm.c from
 * rank 3 on): one compute of rank >= 2, a sum of a product, over at most two reduce axes
 * (the matmul class) or of rank >= 3 (the conv class). A guarded product (a conv's data
 * gradient) is neither. */
static bool product_program(const pk_te_program *p) {
  const pk_te_tensor *c = NULL;
  for (int i = 0; i < p->ntensors; i++) {
    if (p->tensors[i]->kind != PK_TE_COMPUTE) continue;
    if (c) return false;
    c = p->tensors[i];
  }
  if (!c || c->dom_ndim || c->ndim < 2 || !c->body) return false;
  const pk_expr *r = c->body;
  return r->kind == PK_EXPR_REDUCE && r->op == PK_EOP_SUM && (r->naxes <= 2 || c->ndim >= 3) &&
         r->args[0]->kind == PK_EXPR_BINARY && r->args[0]->op == PK_EOP_MUL;
}

/* Whether product program p (product_program) computes no more elements than its reduction
 * is long (its reduce extents multiplied): a weight gradient of few outputs over many rows,
 * which the templates split across threads (or vector lanes) by partial sums (autotune/
 * space.c, space_thread_values; space_conv.c's rfactor_lanes) — something a fused epilogue
 * rules out, as it needs each output's one sum at the register tile. */
static bool split_by_threads(const pk_te_program *p) {
  const pk_te_tensor *c = NULL;
  for (int i = 0; i < p->ntensors && !c; i++)
    if (p->tensors[i]->kind == PK_TE_COMPUTE) c = p->tensors[i];
  double length = 1;
  for (int a = 0; a < c->body->naxes; a++)
    length *= (double)(c->body->axes[a]->hi - c->body->axes[a]->lo);
  return (double)pk_te_tensor_numel(c) <= length;
}

static bool bare_at(const pk_expr *r, const pk_te_axis *ax) {
  for (int d = 0; d < r->nargs; d++)
    if (r->args[d]->kind == PK_EXPR_AXIS && r->args[d]->axis == ax) return true;
  return false;
}

static bool uses_axis(const pk_expr *e, const pk_te_axis *ax) {
  if (e->kind == PK_EXPR_AXIS) return e->axis == ax;
  for (int i = 0; i < e->nargs; i++)
    if (uses_axis(e->args[i], ax)) return true;
  return false;
}

/* Whether placeholder `slot` of p is an operand the matmul template packs
 * (autotune/space_matmul.c, find_operand): p's product (its first sum of a product, of the
 * matmul class: rank >= 2, at most two reduce axes) reads it as a factor, at the bare row
 * or column axis (A or B), along its first reduce axis. A prologue is legal only there:
 * the packing evaluates it once per element; read unpacked, it would run at every
 * multiply-add. */
static bool packed_operand(const pk_te_program *p, int slot) {
  const pk_te_tensor *t = NULL;
  for (int i = 0; i < p->ntensors && !t; i++) {
    const pk_te_tensor *c = p->tensors[i];
    if (c->kind == PK_TE_COMPUTE && c->body && c->body->kind == PK_EXPR_REDUCE) t = c;
  }
  if (!t || t->dom_ndim || t->ndim < 2 || t->body->op != PK_EOP_SUM || t->body->naxes > 2)
    return false;
  const pk_expr *mul = t->body->args[0];
  if (mul->kind != PK_EXPR_BINARY || mul->op != PK_EOP_MUL) return false;
  const pk_te_axis *k0 = t->body->axes[0];
  for (int side = 0; side < 2; side++) { /* A at the rows, then B at the columns */
    const pk_te_axis *ax = t->axes[t->ndim - 2 + side];
    for (int i = 0; i < 2; i++) { /* the first factor read there, as find_operand picks */
      const pk_expr *r = mul->args[i];
      if (r->kind != PK_EXPR_READ || !bare_at(r, ax) || !uses_axis(r, k0)) continue;
      if (r->tensor->id == slot) return true;
      break;
    }
  }
  return false;
}

/* What fuse_input fuses: an elementwise producer inlined into its elementwise reader; an
 * elementwise reader as the epilogue of a matmul or conv; an elementwise producer as the
 * prologue of a matmul's packed operand; an optimizer update as the epilogue of the kernel
 * that makes the weight's gradient. */
typedef enum fuse_kind { FUSE_INLINE, FUSE_TAIL, FUSE_EPILOGUE, FUSE_PROLOGUE, FUSE_UPDATE } fuse_kind;

/* Whether node c's input `slot` may be fused as kind says, besides fuse_input's rules. */
static bool kind_allows(const pk_graph *g, int c, int slot, fuse_kind kind,
                        const pk_fuse_options *o) {
  const pk_gnode *cn = g->nodes[c], *pn = g->nodes[g->tensors[cn->inputs[slot]]->producer];
  bool forward = cn->phase == PK_PHASE_FORWARD && !o->forward_epilogues;
  switch (kind) {
  case FUSE_INLINE: return true;
  case FUSE_TAIL: return false; /* fuse_tail */
  case FUSE_EPILOGUE: return !forward && product_program(pn->prog);
  case FUSE_PROLOGUE: return !forward && packed_operand(cn->prog, slot);
  case FUSE_UPDATE:
    /* the update reads the gradient a product makes (not accumulated, not clipped by the
     * global norm: those are nodes between), input 1 of sgd_update, whose new momentum
     * alone reads it (AdamW's two moments both read it: pk_te_fuse_epilogue refuses); not
     * a gradient the templates would split across threads (the kernel would lose that) */
    /* Only a matmul's (a linear layer's dYᵀX): a conv's dW with its update fused ran
     * slower than the two kernels apart (ResNet-18's layer4 3x3 dW: 10.0 ms fused, 5.7 +
     * 1.3 ms apart; the full step 0.93x), and no conv net measured gained from it. */
    return pn->phase == PK_PHASE_BACKWARD && cn->kind == PK_GNODE_OP &&
           cn->op == PK_OP_SGD_UPDATE && !cn->fused && slot == 1 && product_program(pn->prog) &&
           pk_op_class_of(pn->op) == PK_OP_CLASS_MATMUL && !split_by_threads(pn->prog);
  }
  return false;
}

/* share[i] for each input i of consumer cn: the index of the same tensor among producer
 * pn's inputs (read once by the fused program), else -1; the slot stays -1. */
static int *shared_inputs(pk_ctx *ctx, const pk_gnode *pn, const pk_gnode *cn, int slot) {
  int *share = pk_alloc(ctx, sizeof(int) * (size_t)(cn->ninputs + 1));
  for (int i = 0; i < cn->ninputs; i++) {
    share[i] = -1;
    for (int j = 0; i != slot && j < pn->ninputs && share[i] < 0; j++)
      if (pn->inputs[j] == cn->inputs[i]) share[i] = j;
  }
  return share;
}

/* The fused node's inputs, as the fused program's placeholders are (pk_te_fuse): the
 * producer's, then the consumer's own (not the slot, not those shared); *n gets how many. */
static int *fused_inputs(pk_ctx *ctx, const pk_gnode *pn, const pk_gnode *cn, int slot,
                         const int *share, int *n) {
  int *inputs = pk_alloc(ctx, sizeof(int) * (size_t)(pn->ninputs + cn->ninputs + 1));
  *n = 0;
  for (int j = 0; j < pn->ninputs; j++) inputs[(*n)++] = pn->inputs[j];
  for (int i = 0; i < cn->ninputs; i++)
    if (i != slot && share[i] < 0) inputs[(*n)++] = cn->inputs[i];
  return inputs;
}

/* Fuses the producer of node c's input `slot` into c when that is legal (kind: what it
 * becomes); true if done. The legality rules are the same for each: the intermediate is
 * read by c alone (a gradient that needs it, such as a pre-activation read by relu's
 * gradient, keeps it), in c's phase (an update reads the backward pass's gradient), in the
 * arena, and nothing between the two nodes overwrites what the producer reads. */
static bool fuse_input(pk_graph *g, int c, int slot, fuse_kind kind, const pk_fuse_options *o) {
  pk_gnode *cn = g->nodes[c];
  int t = cn->inputs[slot];
  const pk_gtensor *x = g->tensors[t];
  int p = x->producer;
  if (p < 0 || p >= c) return false;
  pk_gnode *pn = g->nodes[p];
  if ((pn->phase != cn->phase && kind != FUSE_UPDATE) || pn->noutputs != 1) return false;
  if (!arena_role(x->role) || x->base >= 0 || t == g->output || t == g->loss) return false;
  /* c's results: one, not in place; an update's two in place (the weight and its
   * momentum); a prologue's reader may have fused an epilogue or an update before, whose
   * in-place results must not be what the prologue reads */
  if (kind == FUSE_UPDATE ? cn->noutputs > 2 : cn->noutputs != 1 && kind != FUSE_PROLOGUE)
    return false;
  bool in_place = false;
  for (int o2 = 0; o2 < cn->noutputs; o2++) {
    int r = g->tensors[cn->outputs[o2]]->base >= 0 ? pk_pass_root(g, cn->outputs[o2]) : -1;
    in_place |= r >= 0;
    for (int i = 0; r >= 0 && i < pn->ninputs; i++)
      if (pk_pass_root(g, pn->inputs[i]) == r) return false;
  }
  if (in_place && kind != FUSE_UPDATE && kind != FUSE_PROLOGUE) return false;
  if (reads_of(g, t) != 1 || !kind_allows(g, c, slot, kind, o)) return false;
  for (int u = 0; u < g->ntensors; u++)
    if (g->tensors[u]->base == t) return false;
  /* The producer's inputs are read at c now: nothing between may overwrite them (an
   * optimizer update between a data gradient and its reader, say). Else an epilogue or a
   * prologue may run at p instead, when its other inputs exist there and keep their
   * values until c (never an update: the nodes between may read the old weight). */
  bool at_c = true;
  for (int i = 0; i < pn->ninputs && at_c; i++)
    at_c = !written_between(g, p, c, pk_pass_root(g, pn->inputs[i]));
  bool hoist = (kind == FUSE_EPILOGUE || kind == FUSE_PROLOGUE) && !in_place;
  if (!at_c && !(hoist && can_hoist(g, p, c, t))) return false;

  pk_ctx *ctx = g->ctx;
  int *share = shared_inputs(ctx, pn, cn, slot);
  pk_te_program *prog;
  pk_status s;
  if (kind == FUSE_INLINE) s = pk_te_fuse(ctx, pn->prog, cn->prog, slot, share, &prog);
  else if (kind == FUSE_PROLOGUE)
    s = pk_te_fuse_prologue(ctx, pn->prog, cn->prog, slot, share, &prog);
  else s = pk_te_fuse_epilogue(ctx, pn->prog, cn->prog, slot, share, &prog);
  if (s != PK_OK) {
    pk_ctx_clear_error(ctx); /* not of the fusable form: both kernels stay */
    return false;
  }
  int n, *inputs = fused_inputs(ctx, pn, cn, slot, share, &n);
  cn->fused = pk_sprintf(ctx, "%s+%s", op_label(ctx, pn), op_label(ctx, cn));
  cn->prog = prog;
  cn->inputs = inputs;
  cn->ninputs = n;
  if (kind != FUSE_INLINE) { /* the intermediate is the fused program's first compute */
    int *outputs = pk_alloc(ctx, sizeof(int) * (size_t)(cn->noutputs + 1));
    outputs[0] = t;
    memcpy(outputs + 1, cn->outputs, sizeof(int) * (size_t)cn->noutputs);
    cn->outputs = outputs;
    cn->noutputs++;
  }
  /* the fused node runs at c, or at p when c is hoisted there */
  int at = at_c ? c : p;
  if (!at_c) {
    g->nodes[p] = cn;
    g->nodes[c] = pn;
  }
  for (int o2 = 0; o2 < cn->noutputs; o2++) g->tensors[cn->outputs[o2]]->producer = at;
  /* no node makes or reads an inlined intermediate; an epilogue's product or a prologue's
   * result is made but never stored (the schedule inlines it): either way the plan gives it
   * no bytes */
  if (kind == FUSE_INLINE) g->tensors[t]->producer = -1;
  g->tensors[t]->fused_away = true;
  for (int l = 0; l < g->nlayers; l++)
    if (g->layer_nodes[l] == p || g->layer_nodes[l] == c)
      g->layer_nodes[l] = at; /* the layer is computed there now */
  bool *drop = pk_alloc(ctx, sizeof(bool) * (size_t)(g->nnodes + 1));
  drop[at_c ? p : c] = true;
  pk_graph_remove_nodes(g, drop);
  return true;
}

/* Fuses elementwise node c into the producer of its input `slot` when that is a node of
 * several results (a norm: its statistics, then its elementwise result) and c reads the
 * last one, which nothing else reads (a ReLU's gradient reads the ReLU's result, not the
 * norm's): the producer's kernel applies c and stores its result instead (pk_te_fuse_tail).
 * The fused node runs where the producer did, so c's other inputs must exist there and
 * keep their values until c. True if done. */
static bool fuse_tail(pk_graph *g, int c, int slot) {
  pk_gnode *cn = g->nodes[c];
  int t = cn->inputs[slot], p = g->tensors[t]->producer;
  if (p < 0 || p >= c || cn->noutputs != 1 || g->tensors[cn->outputs[0]]->base >= 0) return false;
  pk_gnode *pn = g->nodes[p];
  const pk_gtensor *x = g->tensors[t];
  /* a reduction's program (a norm, softmax): its template vectorizes the last stage as an
   * injective one (autotune/space_generic.c); a strided conv's data gradient also ends in
   * an elementwise stage (the phases' interleave), but its template would not know it */
  if (pk_op_class_of(pn->op) != PK_OP_CLASS_REDUCTION) return false;
  if (pn->phase != cn->phase || pn->noutputs < 2 || pn->outputs[pn->noutputs - 1] != t ||
      !arena_role(x->role) || x->base >= 0 || t == g->output || t == g->loss ||
      reads_of(g, t) != 1 || !can_hoist(g, p, c, t))
    return false;
  for (int u = 0; u < g->ntensors; u++)
    if (g->tensors[u]->base == t) return false;
  for (int o = 0; o < pn->noutputs; o++)
    if (g->tensors[pn->outputs[o]]->base >= 0) return false; /* in place */
  pk_ctx *ctx = g->ctx;
  int *share = shared_inputs(ctx, pn, cn, slot);
  pk_te_program *prog;
  if (pk_te_fuse_tail(ctx, pn->prog, cn->prog, slot, share, &prog) != PK_OK) {
    pk_ctx_clear_error(ctx); /* not of the fusable form: both kernels stay */
    return false;
  }
  int n, *inputs = fused_inputs(ctx, pn, cn, slot, share, &n);
  int *outputs = pk_alloc(ctx, sizeof(int) * (size_t)pn->noutputs);
  memcpy(outputs, pn->outputs, sizeof(int) * (size_t)pn->noutputs);
  outputs[pn->noutputs - 1] = cn->outputs[0];
  pn->fused = pk_sprintf(ctx, "%s+%s", op_label(ctx, pn), op_label(ctx, cn));
  pn->prog = prog;
  pn->inputs = inputs;
  pn->ninputs = n;
  pn->outputs = outputs;
  g->tensors[cn->outputs[0]]->producer = p;
  g->tensors[t]->producer = -1;
  g->tensors[t]->fused_away = true;
  for (int l = 0; l < g->nlayers; l++)
    if (g->layer_nodes[l] == c) g->layer_nodes[l] = p;
  bool *drop = pk_alloc(ctx, sizeof(bool) * (size_t)(g->nnodes + 1));
  drop[c] = true;
  pk_graph_remove_nodes(g, drop);
  return true;
}

/* One sweep over the nodes (kind, o: as fuse_input); returns how many producers were
 * fused. */
static int sweep(pk_graph *g, fuse_kind kind, const pk_fuse_options *o) {
  int fused = 0;
  for (int c = 0; c < g->nnodes; c++) {
    bool again = true;
    while (again) { /* c's new inputs may be fusable in turn */
      again = false;
      for (int i = 0; i < g->nodes[c]->ninputs && !again; i++)
        if (kind == FUSE_TAIL ? fuse_tail(g, c, i) : fuse_input(g, c, i, kind, o)) {
          fused++;
          c--; /* the producer before it was removed */
          again = true;
        }
    }
  }
  return fused;
}

pk_status pk_pass_fuse_with(pk_graph *g, const pk_fuse_options *o, const char **note) {
  /* chains first, so that a whole chain (bias add + relu) becomes one epilogue; updates
   * before prologues, so that a weight gradient whose operand has a prologue still takes
   * its update (a product that has a prologue is no longer one compute) */
  int chains = sweep(g, FUSE_INLINE, o);
  int tails = sweep(g, FUSE_TAIL, o);
  int epis = o->epilogues ? sweep(g, FUSE_EPILOGUE, o) : 0;
  int updates = o->epilogues ? sweep(g, FUSE_UPDATE, o) : 0;
  int pros = o->epilogues ? sweep(g, FUSE_PROLOGUE, o) : 0;
  *note = pk_sprintf(g->ctx, "%d elementwise node%s inlined into %s reader, %d into %s "
                     "norm's or softmax's result, %d epilogue%s "
                     "fused into %s matmul or conv, %d prologue%s fused into %s matmul, %d "
                     "optimizer update%s fused into %s weight gradient (%d kernel calls fewer)",
                     chains, chains == 1 ? "" : "s", chains == 1 ? "its" : "their", tails,
                     tails == 1 ? "its" : "their", epis,
                     epis == 1 ? "" : "s", epis == 1 ? "its" : "their", pros,
                     pros == 1 ? "" : "s", pros == 1 ? "its" : "their", updates,
                     updates == 1 ? "" : "s", updates == 1 ? "its" : "their",
                     chains + tails + epis + pros + updates);
  return PK_OK;
}

pk_status pk_pass_fuse(pk_graph *g, const char **note) {
  return pk_pass_fuse_with(g, &(pk_fuse_options){.epilogues = true, .forward_epilogues = true},
                           note);
}
