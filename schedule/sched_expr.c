/* sched_expr.c — typed TE expression building and rewriting for the derived-stage
 * primitives: new nodes get the dtypes the checker would give them, and rewriting copies
 * a body while substituting axes and redirecting reads (never touching the original). */
#include <string.h>

#include "sched_impl.h"

pk_expr *sx_int(pk_ctx *ctx, int64_t v, pkrt_dtype t) {
  pk_expr *e = pk_expr_int(ctx, v);
  e->dtype = t;
  return e;
}

pk_expr *sx_zero(pk_ctx *ctx, pkrt_dtype t) {
  pk_expr *e = pk_dtype_is_float(t) ? pk_expr_float(ctx, 0.0) : pk_expr_int(ctx, 0);
  e->dtype = t;
  return e;
}

pk_expr *sx_axis(pk_ctx *ctx, pk_te_axis *a) {
  pk_expr *e = pk_expr_axis(ctx, a);
  e->dtype = PKRT_DTYPE_I64;
  return e;
}

pk_expr *sx_binary(pk_ctx *ctx, pk_eop op, pk_expr *a, pk_expr *b) {
  PK_ASSERT(a->dtype == b->dtype);
  pk_expr *e = pk_expr_binary(ctx, op, a, b);
  e->dtype = op >= PK_EOP_LT && op <= PK_EOP_OR ? PKRT_DTYPE_BOOL : a->dtype;
  return e;
}

pk_expr *sx_select(pk_ctx *ctx, pk_expr *c, pk_expr *a, pk_expr *b) {
  PK_ASSERT(c->dtype == PKRT_DTYPE_BOOL && a->dtype == b->dtype);
  pk_expr *e = pk_expr_select(ctx, c, a, b);
  e->dtype = a->dtype;
  return e;
}

pk_expr *sx_read(pk_ctx *ctx, pk_te_tensor *t, int n, pk_expr *const *idx) {
  pk_expr *e = pk_expr_read(ctx, t, n, idx);
  e->dtype = t->dtype;
  return e;
}

pk_expr *sx_reduce(pk_ctx *ctx, pk_eop op, pk_expr *body, int naxes, pk_te_axis *const *axes) {
  pk_expr *e = pk_expr_reduce(ctx, op, body, naxes, axes);
  e->dtype = body->dtype;
  return e;
}

pk_expr *sx_as_i64(pk_ctx *ctx, pk_expr *e) {
  return e->dtype == PKRT_DTYPE_I64 ? e : pk_expr_cast(ctx, PKRT_DTYPE_I64, e);
}

void sx_map_init(sx_map *m) {
  memset(m, 0, sizeof *m);
  m->block_dim = -1;
}

void sx_map_subst(sx_map *m, const pk_te_axis *from, pk_expr *to) {
  PK_ASSERT(m->nsubst < SX_MAX_SUBST);
  m->from[m->nsubst] = from;
  m->to[m->nsubst++] = to;
}

/* T[e0, ..., ed, ..., en] -> T'[ed / block, e0, ..., en (without ed), ed % block]: the
 * cache_read layout (outer block index first, inner last). Indices are in bounds by
 * construction: 0 <= ed < E gives ed / block < ceil(E / block) and ed % block < block. */
static pk_expr *blocked_read(pk_ctx *ctx, const sx_map *m, pk_expr *const *idx, int n) {
  pk_expr *out[PK_TE_MAX_DIMS];
  pk_expr *ed = sx_as_i64(ctx, idx[m->block_dim]);
  pk_expr *block = sx_int(ctx, m->block, PKRT_DTYPE_I64);
  int k = 0;
  out[k++] = sx_binary(ctx, PK_EOP_DIV, ed, block);
  for (int d = 0; d < n; d++)
    if (d != m->block_dim) out[k++] = idx[d];
  out[k++] = sx_binary(ctx, PK_EOP_MOD, ed, block);
  PK_ASSERT(k == m->read_to->ndim);
  return sx_read(ctx, m->read_to, k, out);
}

static pk_expr *rewrite_read(pk_ctx *ctx, const pk_expr *e, const sx_map *m, pk_expr *const *idx) {
  if (m->read_from && e->tensor == m->read_from) {
    if (m->block_dim >= 0) return blocked_read(ctx, m, idx, e->nargs);
    return sx_read(ctx, m->read_to, e->nargs, idx);
  }
  pk_te_tensor *t = m->current ? m->current[e->tensor->id] : e->tensor;
  pk_expr *r = sx_read(ctx, t, e->nargs, idx);
  r->dtype = e->dtype;
  return r;
}

pk_expr *sx_rewrite(pk_ctx *ctx, const pk_expr *e, const sx_map *m) {
  if (e->kind == PK_EXPR_AXIS)
    for (int i = 0; i < m->nsubst; i++)
      if (m->from[i] == e->axis) return m->to[i];
  pk_expr **args = e->nargs ? pk_alloc(ctx, (size_t)e->nargs * sizeof *args) : NULL;
  for (int i = 0; i < e->nargs; i++) args[i] = sx_rewrite(ctx, e->args[i], m);
  if (e->kind == PK_EXPR_READ) return rewrite_read(ctx, e, m, args);
  pk_expr *c = pk_alloc(ctx, sizeof *c);
  *c = *e; /* kind, op, dtype, literal values, axis, reduction axes (shared, immutable) */
  c->line = c->col = 0;
  c->args = args;
  return c;
}

pk_te_tensor *sx_tensor_new(pk_ctx *ctx, int id, const char *name, pkrt_dtype dtype, int ndim,
                            const int64_t *shape) {
  PK_ASSERT(ndim >= 1 && ndim <= PK_TE_MAX_DIMS);
  pk_te_tensor *t = pk_alloc(ctx, sizeof *t);
  t->id = id;
  t->name = pk_strdup(ctx, name);
  t->kind = PK_TE_COMPUTE;
  t->dtype = dtype;
  t->ndim = ndim;
  memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
  t->axes = pk_alloc(ctx, (size_t)ndim * sizeof *t->axes);
  for (int d = 0; d < ndim; d++) {
    pk_te_axis *a = pk_alloc(ctx, sizeof *a);
    a->id = d;
    a->name = pk_sprintf(ctx, "i%d", d);
    a->lo = 0;
    a->hi = shape[d];
    a->owner = t;
    t->axes[d] = a;
  }
  return t;
}

pk_te_tensor *sx_tensor_copy(pk_ctx *ctx, const pk_te_tensor *t, const sx_map *m) {
  PK_ASSERT(t->kind == PK_TE_COMPUTE);
  pk_te_tensor *c = sx_tensor_new(ctx, t->id, t->name, t->dtype, t->ndim, t->shape);
  c->line = t->line;
  c->col = t->col;
  sx_map with_axes = *m;
  for (int d = 0; d < t->ndim; d++) sx_map_subst(&with_axes, t->axes[d], sx_axis(ctx, c->axes[d]));
  c->body = sx_rewrite(ctx, t->body, &with_axes);
  return c;
}
