/* relayout.c — the TE half of the graph's layout pass: a copy of a program in which some
 * tensors' dimensions are permuted (NCHW stored as NHWC), every read indexing the new
 * order and every permuted compute iterating and storing in it. */
#include "pk_te.h"

/* The copy being built: old tensor and axis -> new. */
typedef struct relayout_map {
  pk_ctx *ctx;
  const int *const *perm;       /* per old tensor id: NULL or its permutation */
  pk_te_tensor **tensor;        /* old tensor id -> new tensor */
  pk_te_axis **reduce;          /* old reduce axis id -> new */
  const pk_te_axis *from[PK_TE_MAX_DIMS];
  pk_te_axis *to[PK_TE_MAX_DIMS];
  int naxes;                    /* the compute being copied: its spatial (or domain) axes */
} relayout_map;

static pk_expr *copy_expr(relayout_map *M, const pk_expr *e) {
  pk_ctx *ctx = M->ctx;
  pk_expr *a[3] = {NULL, NULL, NULL};
  pk_expr **args = e->nargs > 3 ? pk_alloc(ctx, sizeof *args * (size_t)e->nargs) : a;
  for (int i = 0; i < e->nargs; i++) args[i] = copy_expr(M, e->args[i]);
  switch (e->kind) {
  case PK_EXPR_INT: return pk_expr_int(ctx, e->ival);
  case PK_EXPR_FLOAT: return pk_expr_float(ctx, e->fval);
  case PK_EXPR_AXIS:
    if (e->axis->reduce) return pk_expr_axis(ctx, M->reduce[e->axis->id]);
    for (int i = 0; i < M->naxes; i++)
      if (M->from[i] == e->axis) return pk_expr_axis(ctx, M->to[i]);
    PK_ASSERT(!"an axis of another compute");
    return NULL;
  case PK_EXPR_READ: {
    /* the read's index d of the new order is the old index perm[d] */
    const int *pm = M->perm[e->tensor->id];
    pk_expr **idx = pk_alloc(ctx, sizeof *idx * (size_t)(e->nargs + 1));
    for (int d = 0; d < e->nargs; d++) idx[d] = args[pm ? pm[d] : d];
    return pk_expr_read(ctx, M->tensor[e->tensor->id], e->nargs, idx);
  }
  case PK_EXPR_UNARY: return pk_expr_unary(ctx, e->op, args[0]);
  case PK_EXPR_BINARY: return pk_expr_binary(ctx, e->op, args[0], args[1]);
  case PK_EXPR_SELECT: return pk_expr_select(ctx, args[0], args[1], args[2]);
  case PK_EXPR_CALL: return pk_expr_call(ctx, e->op, e->nargs, args);
  case PK_EXPR_CAST: return pk_expr_cast(ctx, e->dtype, args[0]);
  case PK_EXPR_REDUCE: {
    pk_te_axis **axes = pk_alloc(ctx, sizeof *axes * (size_t)(e->naxes + 1));
    for (int i = 0; i < e->naxes; i++) axes[i] = M->reduce[e->axes[i]->id];
    return pk_expr_reduce(ctx, e->op, args[0], e->naxes, axes);
  }
  }
  PK_ASSERT(!"unexpected expression kind");
  return NULL;
}

/* Whether pm is a permutation of 0..n-1. */
static bool is_perm(const int *pm, int n) {
  bool seen[PK_TE_MAX_DIMS] = {false};
  for (int d = 0; d < n; d++) {
    if (pm[d] < 0 || pm[d] >= n || seen[pm[d]]) return false;
    seen[pm[d]] = true;
  }
  return true;
}

pk_status pk_te_relayout(pk_ctx *ctx, const pk_te_program *p, const int *const *perm,
                         pk_te_program **out) {
  *out = NULL;
  for (int i = 0; i < p->ntensors; i++)
    if (perm[i] && !is_perm(perm[i], p->tensors[i]->ndim))
      return pk_ctx_fail(ctx, PK_ERR_USAGE, "relayout: the permutation of tensor %d is not "
                         "one of its %d dims", i, p->tensors[i]->ndim);
  pk_te_program *q = pk_te_program_new(ctx);
  relayout_map M = {.ctx = ctx, .perm = perm};
  M.tensor = pk_alloc(ctx, sizeof *M.tensor * (size_t)(p->ntensors + 1));
  M.reduce = pk_alloc(ctx, sizeof *M.reduce * (size_t)(p->nreduce + 1));
  for (int k = 0; k < p->nreduce; k++) { /* declaration order: canonical ids stay */
    const pk_te_axis *a = p->reduce_axes[k];
    M.reduce[k] = pk_te_reduce_axis(ctx, q, a->name, a->lo, a->hi);
  }
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    const int *pm = perm[i];
    int64_t shape[PK_TE_MAX_DIMS];
    const char *names[PK_TE_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) {
      int o = pm ? pm[d] : d;
      shape[d] = t->shape[o];
      names[d] = t->kind == PK_TE_COMPUTE ? t->axes[o]->name : NULL;
    }
    if (t->kind == PK_TE_PLACEHOLDER) {
      M.tensor[i] = pk_te_placeholder(ctx, q, t->name, t->ndim, shape, t->dtype);
      continue;
    }
    pk_te_tensor *c = M.tensor[i] = pk_te_compute(ctx, q, t->name, t->ndim, shape, names);
    M.naxes = 0;
    if (t->dom_ndim) { /* scatter_add: the same domain, each point added at the new dest */
      const char *dn[PK_TE_MAX_DIMS];
      for (int d = 0; d < t->dom_ndim; d++) dn[d] = t->dom_axes[d]->name;
      pk_te_scatter_domain(ctx, c, t->dom_ndim, t->dom_shape, dn);
      for (int d = 0; d < t->dom_ndim; d++) {
        M.from[M.naxes] = t->dom_axes[d];
        M.to[M.naxes++] = c->dom_axes[d];
      }
      for (int d = 0; d < t->ndim; d++) c->dest[d] = copy_expr(&M, t->dest[pm ? pm[d] : d]);
    } else { /* new axis d iterates old axis perm[d] */
      for (int d = 0; d < t->ndim; d++) {
        M.from[M.naxes] = t->axes[pm ? pm[d] : d];
        M.to[M.naxes++] = c->axes[d];
      }
    }
    c->body = copy_expr(&M, t->body);
  }
  pk_status s = pk_te_check(ctx, q);
  if (s != PK_OK) return s;
  *out = q;
  return PK_OK;
}
