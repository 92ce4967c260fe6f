/* fuse.c — inlining one elementwise program into another (pk_te_fuse): the TE half of the
 * graph's fusion pass. The consumer's read of the fused placeholder becomes the producer's
 * body with the producer's axes replaced by the read's indices, so the intermediate tensor
 * is never stored. */
#include <string.h>

#include "pk_te.h"

/* The copy being built: where each old tensor and axis goes in the new program. */
typedef struct fuse_map {
  pk_ctx *ctx;
  const pk_te_program *producer, *consumer;
  int slot;                    /* the consumer placeholder that the producer computes */
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
  const pk_te_tensor *c = single_elementwise(F->producer);
  int saved = F->naxes;
  for (int d = 0; d < c->ndim; d++) {
    F->axis_from[F->naxes] = c->axes[d];
    F->axis_to[F->naxes++] = idx[d];
  }
  pk_expr *body = copy_expr(F, c->body, true);
  F->naxes = saved;
  return body;
}

static pk_expr *copy_expr(fuse_map *F, const pk_expr *e, bool in_producer) {
  pk_ctx *ctx = F->ctx;
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
    if (!in_producer && e->tensor->id == F->slot) return inline_producer(F, idx);
    pk_te_tensor *t = in_producer ? F->prod_tensor[e->tensor->id] : F->cons_tensor[e->tensor->id];
    return pk_expr_read(ctx, t, e->nargs, idx);
  }
  case PK_EXPR_UNARY: return pk_expr_unary(ctx, e->op, args[0]);
  case PK_EXPR_BINARY: return pk_expr_binary(ctx, e->op, args[0], args[1]);
  case PK_EXPR_SELECT: return pk_expr_select(ctx, args[0], args[1], args[2]);
  case PK_EXPR_CALL: return pk_expr_call(ctx, e->op, e->nargs, args);
  case PK_EXPR_CAST: return pk_expr_cast(ctx, e->dtype, args[0]);
  case PK_EXPR_REDUCE: break; /* refused before copying */
  }
  PK_ASSERT(!"unexpected expression kind in a fused program");
  return NULL;
}

pk_status pk_te_fuse(pk_ctx *ctx, const pk_te_program *producer, const pk_te_program *consumer,
                     int slot, const int *share, pk_te_program **out) {
  *out = NULL;
  const pk_te_tensor *pc = single_elementwise(producer), *cc = single_elementwise(consumer);
  if (!pc || !cc)
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "fuse: both programs must compute one "
                       "elementwise tensor (no reduction, no scatter)");
  if (slot < 0 || slot >= consumer->ntensors || consumer->tensors[slot]->kind != PK_TE_PLACEHOLDER)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "fuse: tensor %d of the consumer is not a placeholder",
                       slot);
  const pk_te_tensor *ph = consumer->tensors[slot];
  bool same = ph->ndim == pc->ndim && ph->dtype == pc->dtype;
  for (int d = 0; same && d < ph->ndim; d++) same = ph->shape[d] == pc->shape[d];
  if (!same)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "fuse: the consumer's placeholder '%s' is not the "
                       "shape and type of the producer's result", ph->name);
  if (count_reads(cc->body, ph) != 1 || pk_te_tensor_numel(cc) != pk_te_tensor_numel(pc))
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "fuse: the consumer reads '%s' more than once "
                       "an element (inlining would recompute it)", ph->name);

  fuse_map F = {.ctx = ctx, .producer = producer, .consumer = consumer, .slot = slot};
  F.prod_tensor = pk_alloc(ctx, sizeof *F.prod_tensor * (size_t)(producer->ntensors + 1));
  F.cons_tensor = pk_alloc(ctx, sizeof *F.cons_tensor * (size_t)(consumer->ntensors + 1));
  pk_te_program *p = pk_te_program_new(ctx);
  for (int i = 0; i < producer->ntensors; i++) {
    const pk_te_tensor *t = producer->tensors[i];
    if (t->kind == PK_TE_PLACEHOLDER)
      F.prod_tensor[i] = pk_te_placeholder(ctx, p, NULL, t->ndim, t->shape, t->dtype);
  }
  for (int i = 0; i < consumer->ntensors; i++) {
    const pk_te_tensor *t = consumer->tensors[i];
    if (t->kind != PK_TE_PLACEHOLDER || i == slot) continue;
    int s = share ? share[i] : -1;
    if (s >= 0) {
      if (s >= producer->ntensors || !F.prod_tensor[s])
        return pk_ctx_fail(ctx, PK_ERR_USAGE, "fuse: share[%d] = %d is not a producer "
                           "placeholder", i, s);
      F.cons_tensor[i] = F.prod_tensor[s];
    } else {
      F.cons_tensor[i] = pk_te_placeholder(ctx, p, NULL, t->ndim, t->shape, t->dtype);
    }
  }
  const char *names[PK_TE_MAX_DIMS];
  for (int d = 0; d < cc->ndim; d++) names[d] = cc->axes[d]->name;
  /* names "t<id>": the two programs' names may clash, and canonical text has none */
  pk_te_tensor *c = pk_te_compute(ctx, p, NULL, cc->ndim, cc->shape, names);
  for (int d = 0; d < cc->ndim; d++) {
    F.axis_from[F.naxes] = cc->axes[d];
    F.axis_to[F.naxes++] = pk_expr_axis(ctx, c->axes[d]);
  }
  c->body = copy_expr(&F, cc->body, false);
  pk_status s = pk_te_check(ctx, p);
  if (s != PK_OK) return s;
  *out = p;
  return PK_OK;
}
