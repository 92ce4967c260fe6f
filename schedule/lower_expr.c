/* lower_expr.c — TE expressions to loop-IR expressions under axis bindings: reads of stored
 * stages load their buffers (region-relative when the buffer holds a region), reads of
 * inlined stages substitute their bodies; and the walk bound inference uses to see reads. */
#include "lower_impl.h"

void lower_bind(lowering *L, const pk_te_axis *a, pk_lexpr *value) {
  if (L->nbind == L->cap_bind) {
    int cap = L->cap_bind ? L->cap_bind * 2 : 32;
    const pk_te_axis **axes = pk_alloc(L->ctx, sizeof *axes * (size_t)cap);
    pk_lexpr **values = pk_alloc(L->ctx, sizeof *values * (size_t)cap);
    for (int i = 0; i < L->nbind; i++) axes[i] = L->bind_axis[i], values[i] = L->bind_value[i];
    L->bind_axis = axes, L->bind_value = values, L->cap_bind = cap;
  }
  L->bind_axis[L->nbind] = a;
  L->bind_value[L->nbind++] = value;
}

void lower_unbind(lowering *L, int n) {
  PK_ASSERT(n <= L->nbind);
  L->nbind -= n;
}

int lower_bind_stage(lowering *L, const stage_lowering *sl) {
  for (int i = 0; i < sl->st->nroot; i++) lower_bind(L, sl->st->root[i]->axis, sl->root_value[i]);
  return sl->st->nroot;
}

/* NULL: bound to "unknown" (bound inference through an index that reads memory). */
static pk_lexpr *axis_value(const lowering *L, const pk_te_axis *a) {
  for (int i = L->nbind - 1; i >= 0; i--)
    if (L->bind_axis[i] == a) return L->bind_value[i];
  pk_assert_fail(__FILE__, __LINE__, "axis without a value while lowering");
}

static pk_lbuf *placeholder_buffer(lowering *L, const pk_te_tensor *t) {
  const pk_te_program *orig = L->s->orig;
  if (t->id >= 0 && t->id < orig->ntensors && orig->tensors[t->id] == t) return L->f->params[t->id];
  for (int i = 0; i < orig->ntensors; i++)
    if (orig->tensors[i] == t) return L->f->params[i];
  pk_assert_fail(__FILE__, __LINE__, "read of a tensor that is neither a stage nor an input");
}

pk_lexpr *lower_buffer_index(lowering *L, const stage_lowering *sl, pk_lexpr *const *values) {
  pk_ctx *ctx = L->ctx;
  const pk_lbuf *b = sl->buf;
  pk_lexpr *flat = pk_lx_int(ctx, 0);
  for (int d = 0; d < b->ndim; d++) {
    pk_lexpr *v = values[d];
    if (sl->relative) {
      v = pk_lx_binary(ctx, PK_EOP_SUB, v, sl->region_min[d], PKRT_DTYPE_I64);
      v->index_math = true; /* both lie in the tensor's extent */
    }
    flat = pk_lx_index_add(ctx, flat, pk_lx_index_mul(ctx, v, b->strides[d]));
  }
  return pk_lx_simplify(ctx, L->ranges, flat);
}

static pk_lexpr *lower_expr(lowering *L, const pk_expr *e, bool in_index);

static pk_lexpr *lower_index(lowering *L, const pk_expr *e) {
  pk_lexpr *x = lower_expr(L, e, true);
  return x->dtype == PKRT_DTYPE_I64 ? x : pk_lx_cast(L->ctx, PKRT_DTYPE_I64, x);
}

/* The inlined stage's body with its axes bound to the read's indices. Its arithmetic is a
 * value's (it may wrap), even when the read sits in an index. */
static pk_lexpr *lower_inlined(lowering *L, const pk_te_tensor *t, pk_lexpr *const *idx) {
  for (int d = 0; d < t->ndim; d++) lower_bind(L, t->axes[d], pk_lx_simplify(L->ctx, L->ranges, idx[d]));
  pk_lexpr *x = lower_expr(L, t->body, false);
  lower_unbind(L, t->ndim);
  return x;
}

static pk_lexpr *lower_read(lowering *L, const pk_expr *e) {
  pk_lexpr *idx[PK_TE_MAX_DIMS];
  for (int d = 0; d < e->nargs; d++) idx[d] = lower_index(L, e->args[d]);
  stage_lowering *sl = lower_stage_of(L, e->tensor);
  if (!sl) {
    pk_lbuf *b = placeholder_buffer(L, e->tensor);
    pk_lexpr *flat = pk_lx_int(L->ctx, 0);
    for (int d = 0; d < b->ndim; d++)
      flat = pk_lx_index_add(L->ctx, flat, pk_lx_index_mul(L->ctx, idx[d], b->strides[d]));
    return pk_lx_load(L->ctx, b, pk_lx_simplify(L->ctx, L->ranges, flat));
  }
  if (sl->st->attach == PK_ATTACH_INLINE) return lower_inlined(L, sl->st->tensor, idx);
  return pk_lx_load(L->ctx, sl->buf, lower_buffer_index(L, sl, idx));
}

static pk_lexpr *lower_literal(lowering *L, const pk_expr *e) {
  if (pk_dtype_is_float(e->dtype))
    return pk_lx_float(L->ctx, e->kind == PK_EXPR_INT ? (double)e->ival : e->fval, e->dtype);
  pk_lexpr *x = pk_lx_int(L->ctx, e->ival);
  x->dtype = e->dtype;
  return x;
}

/* in_index: the expression computes a tensor index, so integer arithmetic over axes and
 * literals cannot overflow (the checker's interval analysis proved every subexpression
 * fits in int64) and the emitter may use plain signed arithmetic. */
static pk_lexpr *lower_expr(lowering *L, const pk_expr *e, bool in_index) {
  pk_ctx *ctx = L->ctx;
  switch (e->kind) {
  case PK_EXPR_INT:
  case PK_EXPR_FLOAT:
    return lower_literal(L, e);
  case PK_EXPR_AXIS: {
    pk_lexpr *v = axis_value(L, e->axis);
    PK_ASSERT(v != NULL);
    return v;
  }
  case PK_EXPR_READ:
    return lower_read(L, e);
  case PK_EXPR_UNARY: {
    pk_lexpr *a = lower_expr(L, e->args[0], in_index);
    pk_lexpr *x = pk_lx_unary(ctx, e->op, a, e->dtype);
    x->index_math = in_index && a->index_math && pk_dtype_is_int(e->dtype);
    return x;
  }
  case PK_EXPR_BINARY: {
    pk_lexpr *a = lower_expr(L, e->args[0], in_index);
    pk_lexpr *b = lower_expr(L, e->args[1], in_index);
    pk_lexpr *x = pk_lx_binary(ctx, e->op, a, b, e->dtype);
    x->index_math = in_index && a->index_math && b->index_math && pk_dtype_is_int(e->dtype);
    return x;
  }
  case PK_EXPR_SELECT:
    return pk_lx_select(ctx, lower_expr(L, e->args[0], in_index),
                        lower_expr(L, e->args[1], in_index), lower_expr(L, e->args[2], in_index));
  case PK_EXPR_CALL: {
    pk_lexpr *args[3];
    PK_ASSERT(e->nargs >= 1 && e->nargs <= 3);
    for (int i = 0; i < e->nargs; i++) args[i] = lower_expr(L, e->args[i], in_index);
    return pk_lx_call(ctx, e->op, e->nargs, args, e->dtype);
  }
  case PK_EXPR_CAST:
    return pk_lx_cast(ctx, e->dtype, lower_expr(L, e->args[0], in_index));
  case PK_EXPR_REDUCE:
    break; /* the checker allows reductions only as a whole body: lower_stage.c handles it */
  }
  pk_assert_fail(__FILE__, __LINE__, "reduction below the top of a compute");
}

pk_lexpr *lower_value(lowering *L, const pk_expr *e) {
  return pk_lx_simplify(L->ctx, L->ranges, lower_expr(L, e, false));
}

/* ---- reads, for bound inference ---- */

/* Whether e can be lowered without loads: no reads, and no axis bound to "unknown". */
static bool is_plain_index(const lowering *L, const pk_expr *e) {
  if (e->kind == PK_EXPR_READ) return false;
  if (e->kind == PK_EXPR_AXIS) return axis_value(L, e->axis) != NULL;
  for (int i = 0; i < e->nargs; i++)
    if (!is_plain_index(L, e->args[i])) return false;
  return true;
}

typedef struct read_walk {
  lowering *L;
  const pk_te_tensor *t;
  const stage_lowering *t_stage;
  lower_access_fn fn;
  void *arg;
} read_walk;

static void walk_reads(read_walk *w, const pk_expr *e);

static void walk_read(read_walk *w, const pk_expr *e) {
  lowering *L = w->L;
  for (int d = 0; d < e->nargs; d++) walk_reads(w, e->args[d]);
  pk_lexpr *idx[PK_TE_MAX_DIMS];
  for (int d = 0; d < e->nargs; d++)
    idx[d] = is_plain_index(L, e->args[d]) ? lower_index(L, e->args[d]) : NULL;
  const stage_lowering *sl = lower_stage_of(L, e->tensor);
  if (e->tensor == w->t || (sl && sl == w->t_stage)) {
    w->fn(w->arg, idx, e->nargs);
  } else if (sl && sl->st->attach == PK_ATTACH_INLINE) {
    const pk_te_tensor *q = sl->st->tensor;
    for (int d = 0; d < q->ndim; d++)
      lower_bind(L, q->axes[d], idx[d] ? pk_lx_simplify(L->ctx, L->ranges, idx[d]) : NULL);
    walk_reads(w, q->body);
    lower_unbind(L, q->ndim);
  }
}

/* Every read, select branches included: a region holds all a loop may read. */
static void walk_reads(read_walk *w, const pk_expr *e) {
  if (e->kind == PK_EXPR_READ) {
    walk_read(w, e);
    return;
  }
  for (int i = 0; i < e->nargs; i++) walk_reads(w, e->args[i]);
}

void lower_collect_reads(lowering *L, const pk_expr *e, const pk_te_tensor *t, lower_access_fn fn,
                         void *arg) {
  read_walk w = {L, t, lower_stage_of(L, t), fn, arg};
  walk_reads(&w, e);
}
