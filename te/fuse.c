/* fuse.c — the TE half of the graph's fusion pass: inlining one elementwise program into
 * another (pk_te_fuse: the consumer's read of the fused placeholder becomes the producer's
 * body with the producer's axes replaced by the read's indices), appending an elementwise
 * epilogue to a matmul or conv (pk_te_fuse_epilogue: the product, then the epilogue's
 * stages, computed at the product's register tile), and prepending an elementwise prologue
 * to one operand of a matmul (pk_te_fuse_prologue: a stage the template's packing
 * evaluates). */
#include <string.h>

#include "pk_te.h"

/* The copy being built: where each old tensor and axis goes in the new program. */
typedef struct fuse_map {
  pk_ctx *ctx;
  const pk_te_program *producer, *consumer;
  int slot;                    /* the consumer placeholder that the producer computes */
  pk_te_tensor *slot_to;       /* epilogue: the slot's reads read this stage; NULL: inline */
  const pk_te_tensor *tail;    /* inline: the producer compute inlined (its only one, or its
                                  last: pk_te_fuse_tail) */
  pk_te_tensor **prod_tensor;  /* producer tensor id -> new tensor (placeholders) */
  pk_te_tensor **cons_tensor;  /* consumer tensor id -> new tensor (NULL for the slot) */
  const pk_te_axis *axis_from[PK_TE_MAX_DIMS * 2];
  pk_expr *axis_to[PK_TE_MAX_DIMS * 2];
  int naxes;
} fuse_map;

static bool has_reduce(const pk_expr *e) {
  if (e->kind == PK_EXPR_REDUCE) return true;
  for (int i = 0; i < e->nargs; i++)
    if (has_reduce(e->args[i])) return true;
  return false;
}

static int count_reads(const pk_expr *e, const pk_te_tensor *t) {
  int n = e->kind == PK_EXPR_READ && e->tensor == t;
  for (int i = 0; i < e->nargs; i++) n += count_reads(e->args[i], t);
  return n;
}

/* The one compute of an elementwise program (no reduction, no scatter), or NULL. */
static const pk_te_tensor *single_elementwise(const pk_te_program *p) {
  const pk_te_tensor *c = NULL;
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    if (t->kind != PK_TE_COMPUTE) continue;
    if (c || t->dom_ndim || !t->body || has_reduce(t->body)) return NULL;
    c = t;
  }
  return c;
}

static pk_expr *copy_expr(fuse_map *F, const pk_expr *e, bool in_producer);

/* The producer's body for the element the consumer reads at idx (already copied). */
static pk_expr *inline_producer(fuse_map *F, pk_expr *const *idx) {
  const pk_te_tensor *c = F->tail;
  int saved = F->naxes;
  for (int d = 0; d < c->ndim; d++) {
    F->axis_from[F->naxes] = c->axes[d];
    F->axis_to[F->naxes++] = idx[d];
  }
  pk_expr *body = copy_expr(F, c->body, true);
  F->naxes = saved;
  return body;
}

/* A reduction (the producer's, or a prologue's consumer's): its reduce axes become new axes
 * of the fused program. */
static pk_expr *copy_reduce(fuse_map *F, const pk_expr *e, pk_te_program *p, bool in_producer) {
  int saved = F->naxes;
  pk_te_axis **axes = pk_alloc(F->ctx, sizeof *axes * (size_t)e->naxes);
  for (int i = 0; i < e->naxes; i++) {
    PK_ASSERT(F->naxes < PK_TE_MAX_DIMS * 2);
    axes[i] = pk_te_reduce_axis(F->ctx, p, NULL, e->axes[i]->lo, e->axes[i]->hi);
    F->axis_from[F->naxes] = e->axes[i];
    F->axis_to[F->naxes++] = pk_expr_axis(F->ctx, axes[i]);
  }
  pk_expr *body = copy_expr(F, e->args[0], in_producer);
  F->naxes = saved;
  return pk_expr_reduce(F->ctx, e->op, body, e->naxes, axes);
}

static pk_expr *copy_expr(fuse_map *F, const pk_expr *e, bool in_producer) {
  pk_ctx *ctx = F->ctx;
  PK_ASSERT(e->kind != PK_EXPR_REDUCE); /* refused, or copied by copy_reduce */
  pk_expr *a[3] = {NULL, NULL, NULL};
  pk_expr **args = e->nargs > 3 ? pk_alloc(ctx, sizeof *args * (size_t)e->nargs) : a;
  if (e->kind != PK_EXPR_READ)
    for (int i = 0; i < e->nargs; i++) args[i] = copy_expr(F, e->args[i], in_producer);
  switch (e->kind) {
  case PK_EXPR_INT: return pk_expr_int(ctx, e->ival);
  case PK_EXPR_FLOAT: return pk_expr_float(ctx, e->fval);
  case PK_EXPR_AXIS:
    for (int i = F->naxes - 1; i >= 0; i--)
      if (F->axis_from[i] == e->axis) return F->axis_to[i];
    PK_ASSERT(!"an axis the fused program does not map");
    return NULL;
  case PK_EXPR_READ: {
    pk_expr **idx = pk_alloc(ctx, sizeof *idx * (size_t)(e->nargs + 1));
    for (int i = 0; i < e->nargs; i++) idx[i] = copy_expr(F, e->args[i], in_producer);
    if (!in_producer && e->tensor->id == F->slot)
      return F->slot_to ? pk_expr_read(ctx, F->slot_to, e->nargs, idx) : inline_producer(F, idx);
    pk_te_tensor *t = in_producer ? F->prod_tensor[e->tensor->id] : F->cons_tensor[e->tensor->id];
    return pk_expr_read(ctx, t, e->nargs, idx);
  }
  case PK_EXPR_UNARY: return pk_expr_unary(ctx, e->op, args[0]);
  case PK_EXPR_BINARY: return pk_expr_binary(ctx, e->op, args[0], args[1]);
  case PK_EXPR_SELECT: return pk_expr_select(ctx, args[0], args[1], args[2]);
  case PK_EXPR_CALL: return pk_expr_call(ctx, e->op, e->nargs, args);
  case PK_EXPR_CAST: return pk_expr_cast(ctx, e->dtype, args[0]);
  case PK_EXPR_REDUCE: break; /* copy_reduce */
  }
  PK_ASSERT(!"unexpected expression kind in a fused program");
  return NULL;
}

/* The checks the fusions share: slot is a placeholder of the consumer with the shape and
 * dtype of the producer's result pc, read once an element by the consumer's compute cc
 * (NULL: a prologue, which checks its own reads). */
static pk_status check_slot(pk_ctx *ctx, const pk_te_tensor *pc, const pk_te_program *consumer,
                            const pk_te_tensor *cc, int slot) {
  if (slot < 0 || slot >= consumer->ntensors || consumer->tensors[slot]->kind != PK_TE_PLACEHOLDER)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "fuse: tensor %d of the consumer is not a placeholder",
                       slot);
  const pk_te_tensor *ph = consumer->tensors[slot];
  bool same = ph->ndim == pc->ndim && ph->dtype == pc->dtype;
  for (int d = 0; same && d < ph->ndim; d++) same = ph->shape[d] == pc->shape[d];
  if (!same)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "fuse: the consumer's placeholder '%s' is not the "
                       "shape and type of the producer's result", ph->name);
  if (cc && (count_reads(cc->body, ph) != 1 || pk_te_tensor_numel(cc) != pk_te_tensor_numel(pc)))
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "fuse: the consumer reads '%s' more than once "
                       "an element (inlining would recompute it)", ph->name);
  return PK_OK;
}

/* The fused program's placeholders: the producer's, then the consumer's own (not the slot,
 * not those shared with the producer), as pk_te_fuse documents. */
/* A new stage of p shaped like pc, whose axes stand for pc's in what F rebuilds. */
static pk_te_tensor *stage_like(fuse_map *F, pk_te_program *p, const pk_te_tensor *pc) {
  pk_te_tensor *t = pk_te_compute(F->ctx, p, NULL, pc->ndim, pc->shape, NULL);
  for (int d = 0; d < pc->ndim; d++) {
    F->axis_from[F->naxes] = pc->axes[d];
    F->axis_to[F->naxes++] = pk_expr_axis(F->ctx, t->axes[d]);
  }
  return t;
}

static pk_status copy_placeholders(fuse_map *F, pk_te_program *p, const int *share) {
  pk_ctx *ctx = F->ctx;
  const pk_te_program *producer = F->producer, *consumer = F->consumer;
  F->prod_tensor = pk_alloc(ctx, sizeof *F->prod_tensor * (size_t)(producer->ntensors + 1));
  F->cons_tensor = pk_alloc(ctx, sizeof *F->cons_tensor * (size_t)(consumer->ntensors + 1));
  for (int i = 0; i < producer->ntensors; i++) {
    const pk_te_tensor *t = producer->tensors[i];
    if (t->kind == PK_TE_PLACEHOLDER)
      F->prod_tensor[i] = pk_te_placeholder(ctx, p, NULL, t->ndim, t->shape, t->dtype);
  }
  for (int i = 0; i < consumer->ntensors; i++) {
    const pk_te_tensor *t = consumer->tensors[i];
    if (t->kind != PK_TE_PLACEHOLDER || i == F->slot) continue;
    int s = share ? share[i] : -1;
    if (s >= 0) {
      if (s >= producer->ntensors || !F->prod_tensor[s])
        return pk_ctx_fail(ctx, PK_ERR_USAGE, "fuse: share[%d] = %d is not a producer "
                           "placeholder", i, s);
      F->cons_tensor[i] = F->prod_tensor[s];
    } else {
      F->cons_tensor[i] = pk_te_placeholder(ctx, p, NULL, t->ndim, t->shape, t->dtype);
    }
  }
  return PK_OK;
}

/* Appends the consumer's computes in order (axes named as theirs, or "i<d>" when names is
 * false; a read of an earlier one reads its copy) and checks the program. */
static pk_status finish(fuse_map *F, pk_te_program *p, bool names, pk_te_program **out) {
  pk_ctx *ctx = F->ctx;
  int base = F->naxes;
  for (int i = 0; i < F->consumer->ntensors; i++) {
    const pk_te_tensor *cc = F->consumer->tensors[i];
    if (cc->kind != PK_TE_COMPUTE) continue;
    const char *nm[PK_TE_MAX_DIMS];
    for (int d = 0; d < cc->ndim; d++) nm[d] = cc->axes[d]->name;
    /* names "t<id>": the two programs' names may clash, and canonical text has none */
    pk_te_tensor *c = pk_te_compute(ctx, p, NULL, cc->ndim, cc->shape, names ? nm : NULL);
    F->naxes = base;
    for (int d = 0; d < cc->ndim; d++) {
      F->axis_from[F->naxes] = cc->axes[d];
      F->axis_to[F->naxes++] = pk_expr_axis(ctx, c->axes[d]);
    }
    c->body = cc->body->kind == PK_EXPR_REDUCE ? copy_reduce(F, cc->body, p, false)
                                              : copy_expr(F, cc->body, false);
    F->cons_tensor[i] = c;
  }
  pk_status s = pk_te_check(ctx, p);
  if (s != PK_OK) return s;
  *out = p;
  return PK_OK;
}

pk_status pk_te_fuse(pk_ctx *ctx, const pk_te_program *producer, const pk_te_program *consumer,
                     int slot, const int *share, pk_te_program **out) {
  *out = NULL;
  const pk_te_tensor *pc = single_elementwise(producer), *cc = single_elementwise(consumer);
  if (!pc || !cc)
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "fuse: both programs must compute one "
                       "elementwise tensor (no reduction, no scatter)");
  pk_status s = check_slot(ctx, pc, consumer, cc, slot);
  if (s != PK_OK) return s;
  fuse_map F = {.ctx = ctx, .producer = producer, .consumer = consumer, .slot = slot, .tail = pc};
  pk_te_program *p = pk_te_program_new(ctx);
  if ((s = copy_placeholders(&F, p, share)) != PK_OK) return s;
  return finish(&F, p, true, out);
}

pk_status pk_te_fuse_tail(pk_ctx *ctx, const pk_te_program *producer,
                          const pk_te_program *consumer, int slot, const int *share,
                          pk_te_program **out) {
  *out = NULL;
  const pk_te_tensor *pc = NULL, *cc = single_elementwise(consumer);
  bool scatter = false;
  for (int i = 0; i < producer->ntensors; i++) {
    const pk_te_tensor *t = producer->tensors[i];
    if (t->kind != PK_TE_COMPUTE) continue;
    scatter = scatter || t->dom_ndim || !t->body;
    pc = t;
  }
  if (!pc || !cc || scatter || has_reduce(pc->body))
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "fuse: a tail needs a producer whose last "
                       "compute is elementwise (no scatter) and a consumer of one "
                       "elementwise compute");
  pk_status s = check_slot(ctx, pc, consumer, cc, slot);
  if (s != PK_OK) return s;
  fuse_map F = {.ctx = ctx, .producer = producer, .consumer = consumer, .slot = slot, .tail = pc};
  pk_te_program *p = pk_te_program_new(ctx);
  if ((s = copy_placeholders(&F, p, share)) != PK_OK) return s;
  /* the producer's other computes, in order, as stages of p */
  for (int i = 0; i < producer->ntensors; i++) {
    const pk_te_tensor *t = producer->tensors[i];
    if (t->kind != PK_TE_COMPUTE || t == pc) continue;
    F.naxes = 0;
    pk_te_tensor *c = stage_like(&F, p, t);
    c->body = t->body->kind == PK_EXPR_REDUCE ? copy_reduce(&F, t->body, p, true)
                                             : copy_expr(&F, t->body, true);
    F.prod_tensor[i] = c;
  }
  F.naxes = 0;
  return finish(&F, p, false, out);
}

/* The one compute of a program (any body, no scatter), or NULL. */
static const pk_te_tensor *single_compute(const pk_te_program *p) {
  const pk_te_tensor *c = NULL;
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    if (t->kind != PK_TE_COMPUTE) continue;
    if (c || t->dom_ndim || !t->body) return NULL;
    c = t;
  }
  return c;
}

/* A read of t in e, or NULL. */
static const pk_expr *find_read(const pk_expr *e, const pk_te_tensor *t) {
  if (e->kind == PK_EXPR_READ && e->tensor == t) return e;
  for (int i = 0; i < e->nargs; i++) {
    const pk_expr *r = find_read(e->args[i], t);
    if (r) return r;
  }
  return NULL;
}

/* The one compute of the consumer that reads `slot`, when every compute is elementwise; NULL,
 * with the context's message, when the consumer is not such an epilogue. */
static const pk_te_tensor *epilogue_reader(pk_ctx *ctx, const pk_te_program *consumer, int slot) {
  const pk_te_tensor *cc = NULL, *ph = consumer->tensors[slot];
  for (int i = 0; i < consumer->ntensors; i++) {
    const pk_te_tensor *t = consumer->tensors[i];
    if (t->kind != PK_TE_COMPUTE) continue;
    if (t->dom_ndim || !t->body || has_reduce(t->body)) {
      pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "fuse: an epilogue needs a producer of one compute "
                  "(no scatter) and a consumer of elementwise computes");
      return NULL;
    }
    if (count_reads(t->body, ph) == 0) continue;
    if (cc) {
      pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "fuse: two of the consumer's computes read '%s' "
                  "(an epilogue reads the product in one)", ph->name);
      return NULL;
    }
    cc = t;
  }
  if (!cc)
    pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "fuse: no compute of the consumer reads '%s'", ph->name);
  return cc;
}

pk_status pk_te_fuse_epilogue(pk_ctx *ctx, const pk_te_program *producer,
                              const pk_te_program *consumer, int slot, const int *share,
                              pk_te_program **out) {
  *out = NULL;
  const pk_te_tensor *pc = single_compute(producer);
  if (!pc)
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "fuse: an epilogue needs a producer of one "
                       "compute (no scatter) and a consumer of elementwise computes");
  if (slot < 0 || slot >= consumer->ntensors || consumer->tensors[slot]->kind != PK_TE_PLACEHOLDER)
    return check_slot(ctx, pc, consumer, NULL, slot);
  const pk_te_tensor *cc = epilogue_reader(ctx, consumer, slot);
  if (!cc) return pk_ctx_status(ctx);
  pk_status s = check_slot(ctx, pc, consumer, cc, slot);
  if (s != PK_OK) return s;
  /* the epilogue's point is the product's point: the register tile that computes one
   * holds what the other needs, so the raw result never leaves it; a later stage (an
   * optimizer update's new weight, reading the new momentum) keeps that shape too */
  const pk_expr *r = find_read(cc->body, consumer->tensors[slot]);
  bool own = cc->ndim == pc->ndim && r->nargs == cc->ndim;
  for (int d = 0; own && d < cc->ndim; d++)
    own = cc->shape[d] == pc->shape[d] && r->args[d]->kind == PK_EXPR_AXIS &&
          r->args[d]->axis == cc->axes[d];
  for (int i = 0; own && i < consumer->ntensors; i++) {
    const pk_te_tensor *t = consumer->tensors[i];
    if (t->kind != PK_TE_COMPUTE) continue;
    own = t->ndim == pc->ndim;
    for (int d = 0; own && d < t->ndim; d++) own = t->shape[d] == pc->shape[d];
  }
  if (!own)
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "fuse: the epilogue reads '%s' at another "
                       "point than its own (an epilogue keeps the product's shape and indices)",
                       consumer->tensors[slot]->name);
  fuse_map F = {.ctx = ctx, .producer = producer, .consumer = consumer, .slot = slot};
  pk_te_program *p = pk_te_program_new(ctx);
  if ((s = copy_placeholders(&F, p, share)) != PK_OK) return s;
  /* the product stage, its axes and reduce axes new ones of p */
  pk_te_tensor *t = stage_like(&F, p, pc);
  t->body = pc->body->kind == PK_EXPR_REDUCE ? copy_reduce(&F, pc->body, p, true)
                                            : copy_expr(&F, pc->body, true);
  F.naxes = 0;
  F.slot_to = t;
  return finish(&F, p, false, out);
}

/* The first sum of a product among p's computes, or NULL; *scatter is whether any compute
 * scatters. */
static const pk_te_tensor *product_stage(const pk_te_program *p, bool *scatter) {
  const pk_te_tensor *t = NULL;
  *scatter = false;
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *c = p->tensors[i];
    if (c->kind != PK_TE_COMPUTE) continue;
    *scatter |= c->dom_ndim > 0 || !c->body;
    if (!t && c->body && c->body->kind == PK_EXPR_REDUCE && c->body->op == PK_EOP_SUM &&
        c->body->args[0]->kind == PK_EXPR_BINARY && c->body->args[0]->op == PK_EOP_MUL)
      t = c;
  }
  return t;
}

pk_status pk_te_fuse_prologue(pk_ctx *ctx, const pk_te_program *producer,
                              const pk_te_program *consumer, int slot, const int *share,
                              pk_te_program **out) {
  *out = NULL;
  bool scatter;
  const pk_te_tensor *pc = single_elementwise(producer), *t = product_stage(consumer, &scatter);
  if (!pc || !t || scatter)
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "fuse: a prologue needs a producer of one "
                       "elementwise compute and a consumer with a sum of a product (no scatter)");
  pk_status s = check_slot(ctx, pc, consumer, NULL, slot);
  if (s != PK_OK) return s;
  /* the one read of the slot is an operand of the product: what a template packs */
  const pk_te_tensor *ph = consumer->tensors[slot];
  const pk_expr *mul = t->body->args[0];
  int reads = 0;
  for (int i = 0; i < consumer->ntensors; i++)
    if (consumer->tensors[i]->kind == PK_TE_COMPUTE)
      reads += count_reads(consumer->tensors[i]->body, ph);
  bool operand = false;
  for (int i = 0; i < 2; i++)
    operand |= mul->args[i]->kind == PK_EXPR_READ && mul->args[i]->tensor == ph;
  if (reads != 1 || !operand)
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "fuse: a prologue's result '%s' must be read "
                       "once, as an operand of the product", ph->name);
  fuse_map F = {.ctx = ctx, .producer = producer, .consumer = consumer, .slot = slot};
  pk_te_program *p = pk_te_program_new(ctx);
  if ((s = copy_placeholders(&F, p, share)) != PK_OK) return s;
  /* the prologue's stage first, read by the product where it read the slot */
  pk_te_tensor *pro = stage_like(&F, p, pc);
  pro->body = copy_expr(&F, pc->body, true);
  F.naxes = 0;
  F.slot_to = pro;
  return finish(&F, p, false, out);
}
