/* lower.c — lowers a checked TE program to one loop-IR kernel. Each compute becomes a loop
 * nest writing its output buffer; a reduction accumulates in a local buffer of one
 * element, which is also the shape cache_write will generalise to a register tile. */
#include "pk_loopir.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct lowering {
  pk_ctx *ctx;
  pk_lfunc *f;
  pk_lbuf **buf_of;        /* per tensor id */
  pk_lexpr **spatial;      /* value of the current compute's spatial axis d */
  pk_lexpr **reduce;       /* value of reduce axis id (NULL outside its reduction) */
} lowering;

static pk_lexpr *lower_expr(lowering *L, const pk_expr *e, bool in_index);

/* Flat element index of tensor t at the given per-dimension indices. */
static pk_lexpr *flat_index(lowering *L, const pk_lbuf *b, pk_lexpr **idx) {
  pk_lexpr *flat = pk_lx_int(L->ctx, 0);
  for (int d = 0; d < b->ndim; d++)
    flat = pk_lx_index_add(L->ctx, flat, pk_lx_index_mul(L->ctx, idx[d], b->strides[d]));
  return flat;
}

static pk_lexpr *lower_literal(lowering *L, const pk_expr *e) {
  if (pk_dtype_is_float(e->dtype))
    return pk_lx_float(L->ctx, e->kind == PK_EXPR_INT ? (double)e->ival : e->fval, e->dtype);
  pk_lexpr *x = pk_lx_int(L->ctx, e->ival);
  x->dtype = e->dtype;
  return x;
}

static pk_lexpr *lower_read(lowering *L, const pk_expr *e) {
  pk_lexpr *idx[PK_TE_MAX_DIMS];
  for (int d = 0; d < e->nargs; d++) {
    idx[d] = lower_expr(L, e->args[d], true);
    if (idx[d]->dtype != PKRT_DTYPE_I64) idx[d] = pk_lx_cast(L->ctx, PKRT_DTYPE_I64, idx[d]);
  }
  pk_lbuf *b = L->buf_of[e->tensor->id];
  return pk_lx_load(L->ctx, b, flat_index(L, b, idx));
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
    pk_lexpr *v = e->axis->reduce ? L->reduce[e->axis->id] : L->spatial[e->axis->id];
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
    pk_lexpr *args[2];
    PK_ASSERT(e->nargs >= 1 && e->nargs <= 2);
    for (int i = 0; i < e->nargs; i++) args[i] = lower_expr(L, e->args[i], in_index);
    return pk_lx_call(ctx, e->op, e->nargs, args, e->dtype);
  }
  case PK_EXPR_CAST:
    return pk_lx_cast(ctx, e->dtype, lower_expr(L, e->args[0], in_index));
  case PK_EXPR_REDUCE:
    break; /* the checker allows reductions only as a whole body: lower_compute handles it */
  }
  pk_assert_fail(__FILE__, __LINE__, "reduction below the top of a compute");
}

/* The identity of a reducer in the accumulator's type. */
static pk_lexpr *reduce_init(lowering *L, pk_eop op, pkrt_dtype t) {
  if (pk_dtype_is_float(t)) {
    double v = op == PK_EOP_SUM ? 0.0 : op == PK_EOP_RMAX ? -INFINITY : INFINITY;
    return pk_lx_float(L->ctx, v, t);
  }
  int64_t lo = t == PKRT_DTYPE_I32 ? INT32_MIN : INT64_MIN;
  int64_t hi = t == PKRT_DTYPE_I32 ? INT32_MAX : INT64_MAX;
  pk_lexpr *x = pk_lx_int(L->ctx, op == PK_EOP_SUM ? 0 : op == PK_EOP_RMAX ? lo : hi);
  x->dtype = t;
  return x;
}

static pk_eop reduce_combiner(pk_eop op) {
  return op == PK_EOP_SUM ? PK_EOP_ADD : op == PK_EOP_RMAX ? PK_EOP_MAX : PK_EOP_MIN;
}

/* for v in [lo, hi): body, for each axis from the outermost. */
static pk_stmt *wrap_loops(lowering *L, int n, pk_lvar **vars, const int64_t *lo,
                           const int64_t *hi, pk_stmt *body) {
  for (int i = n - 1; i >= 0; i--)
    body = pk_st_for(L->ctx, vars[i], pk_lx_int(L->ctx, lo[i]), pk_lx_int(L->ctx, hi[i] - lo[i]),
                     PK_LOOP_SERIAL, body);
  return body;
}

static pk_stmt *lower_reduction(lowering *L, const pk_te_tensor *t, pk_lbuf *out,
                                pk_lexpr *out_index) {
  pk_ctx *ctx = L->ctx;
  const pk_expr *r = t->body;
  int64_t one = 1, lo[PK_TE_MAX_DIMS * 2], hi[PK_TE_MAX_DIMS * 2];
  pk_lvar *vars[PK_TE_MAX_DIMS * 2];
  PK_ASSERT(r->naxes <= PK_TE_MAX_DIMS * 2);
  for (int i = 0; i < r->naxes; i++) {
    vars[i] = pk_lvar_new(ctx, L->f, PKRT_DTYPE_I64);
    lo[i] = r->axes[i]->lo;
    hi[i] = r->axes[i]->hi;
    L->reduce[r->axes[i]->id] = pk_lx_var(ctx, vars[i]);
  }
  pk_lbuf *acc = pk_lbuf_new(ctx, L->f, t->dtype, PK_SCOPE_LOCAL, 1, &one);
  pk_lexpr *zero = pk_lx_int(ctx, 0);
  pk_lexpr *term = lower_expr(L, r->args[0], false);
  pk_lexpr *next = pk_lx_binary(ctx, reduce_combiner(r->op), pk_lx_load(ctx, acc, zero), term,
                                t->dtype);
  pk_stmt *steps[3] = {
      pk_st_store(ctx, acc, zero, reduce_init(L, r->op, t->dtype)),
      wrap_loops(L, r->naxes, vars, lo, hi, pk_st_store(ctx, acc, zero, next)),
      pk_st_store(ctx, out, out_index, pk_lx_load(ctx, acc, zero)),
  };
  for (int i = 0; i < r->naxes; i++) L->reduce[r->axes[i]->id] = NULL;
  return pk_st_alloc(ctx, acc, pk_st_seq(ctx, 3, steps));
}

static pk_stmt *lower_compute(lowering *L, const pk_te_tensor *t) {
  pk_ctx *ctx = L->ctx;
  pk_lvar *vars[PK_TE_MAX_DIMS];
  pk_lexpr *idx[PK_TE_MAX_DIMS];
  int64_t lo[PK_TE_MAX_DIMS] = {0};
  for (int d = 0; d < t->ndim; d++) {
    vars[d] = pk_lvar_new(ctx, L->f, PKRT_DTYPE_I64);
    idx[d] = L->spatial[d] = pk_lx_var(ctx, vars[d]);
  }
  pk_lbuf *out = L->buf_of[t->id];
  pk_lexpr *out_index = flat_index(L, out, idx);
  pk_stmt *body = t->body->kind == PK_EXPR_REDUCE
                      ? lower_reduction(L, t, out, out_index)
                      : pk_st_store(ctx, out, out_index, lower_expr(L, t->body, false));
  return wrap_loops(L, t->ndim, vars, lo, t->shape, body);
}

pk_status pk_sched_lower(pk_ctx *ctx, const pk_te_program *prog, const pk_schedule *sched,
                         const char *name, pk_lfunc **out) {
  if (sched)
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "schedules other than the default are not available yet");
  pk_lfunc *f = pk_lfunc_new(ctx, name);
  lowering L = {ctx, f, NULL, NULL, NULL};
  L.buf_of = pk_alloc(ctx, sizeof(pk_lbuf *) * (size_t)prog->ntensors);
  L.spatial = pk_alloc(ctx, sizeof(pk_lexpr *) * PK_TE_MAX_DIMS);
  L.reduce = pk_alloc(ctx, sizeof(pk_lexpr *) * (size_t)(prog->nreduce + 1));

  f->nparams = prog->ntensors;
  f->params = pk_alloc(ctx, sizeof(pk_lbuf *) * (size_t)prog->ntensors);
  for (int i = 0; i < prog->ntensors; i++) {
    const pk_te_tensor *t = prog->tensors[i];
    pk_lbuf *b = pk_lbuf_new(ctx, f, t->dtype, PK_SCOPE_GLOBAL, t->ndim, t->shape);
    b->param = i;
    b->tensor = t;
    f->params[i] = L.buf_of[i] = b;
  }

  int ncomputes = 0;
  pk_stmt **nests = pk_alloc(ctx, sizeof(pk_stmt *) * (size_t)prog->ntensors);
  for (int i = 0; i < prog->ntensors; i++)
    if (prog->tensors[i]->kind == PK_TE_COMPUTE) nests[ncomputes++] = lower_compute(&L, prog->tensors[i]);
  f->body = pk_st_seq(ctx, ncomputes, nests);

  f->te_text = pk_te_print(ctx, prog);
  char hex[2 * PKRT_SHA256_BYTES + 1];
  pkrt_sha256_hex(f->te_text, strlen(f->te_text), hex);
  f->workload = pk_strdup(ctx, hex);
  *out = f;
  return PK_OK;
}
