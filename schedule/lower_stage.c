/* lower_stage.c — one stage's loop nest: a loop per leaf iter, the axes' values rebuilt
 * from the leaves through split and fuse, guards for splits that do not divide, the
 * reduction's init and update, and the nests of the stages attached to its loops. */
#include "lower_impl.h"

#include <math.h>

/* ---- first pass: trip counts, variables, counters, axis values ---- */

/* Trip counts follow the region, not the schedule's full-tensor extents: a stage attached
 * inside a tile loops over the tile. An inner part wider than its parent is cut to it. */
static int64_t iter_ext(stage_lowering *sl, const pk_iter *it) {
  int i = lower_iter_index(sl->st, it);
  if (sl->ext[i] > 0) return sl->ext[i];
  int64_t e, p;
  switch (it->rel) {
  case PK_ITER_ROOT:
    e = it->reduce ? it->axis->hi - it->axis->lo : sl->region_ext[it->axis->id];
    break;
  case PK_ITER_SPLIT_OUTER:
    p = iter_ext(sl, it->parent);
    e = p / it->factor + (p % it->factor != 0);
    break;
  case PK_ITER_SPLIT_INNER:
    p = iter_ext(sl, it->parent);
    e = it->factor < p ? it->factor : p;
    break;
  default:
    e = iter_ext(sl, it->fused_outer) * iter_ext(sl, it->fused_inner);
    break;
  }
  PK_ASSERT(e >= 1);
  return sl->ext[i] = e;
}

static int leaf_pos(const pk_stage *st, const pk_iter *it) {
  for (int p = 0; p < st->nleaf; p++)
    if (st->leaf[p] == it) return p;
  return -1;
}

static pk_lexpr *index_op(pk_ctx *ctx, pk_eop op, pk_lexpr *a, int64_t c) {
  pk_lexpr *x = pk_lx_binary(ctx, op, a, pk_lx_int(ctx, c), PKRT_DTYPE_I64);
  x->index_math = true;
  return x;
}

/* 0-based counter of an iter: a leaf's loop variable; a split parent outer * factor +
 * inner; a fused part the fused counter / or % the inner part's trip count. */
static pk_lexpr *iter_counter(lowering *L, stage_lowering *sl, const pk_iter *it) {
  int i = lower_iter_index(sl->st, it);
  if (sl->counter[i]) return sl->counter[i];
  pk_ctx *ctx = L->ctx;
  pk_lexpr *c;
  int p = leaf_pos(sl->st, it);
  if (p >= 0) {
    c = pk_lx_var(ctx, sl->leaf_var[p]);
  } else if (it->split_outer) {
    pk_lexpr *outer = iter_counter(L, sl, it->split_outer);
    c = pk_lx_index_add(ctx, pk_lx_index_mul(ctx, outer, it->split_inner->factor),
                        iter_counter(L, sl, it->split_inner));
  } else {
    const pk_iter *f = it->fused_into;
    PK_ASSERT(f != NULL);
    c = index_op(ctx, it == f->fused_outer ? PK_EOP_DIV : PK_EOP_MOD, iter_counter(L, sl, f),
                 iter_ext(sl, f->fused_inner));
  }
  return sl->counter[i] = pk_lx_simplify(ctx, L->ranges, c);
}

void stage_setup(lowering *L, stage_lowering *sl) {
  pk_ctx *ctx = L->ctx;
  const pk_stage *st = sl->st;
  sl->ext = pk_alloc(ctx, sizeof(int64_t) * (size_t)st->niters);
  sl->counter = pk_alloc(ctx, sizeof(pk_lexpr *) * (size_t)st->niters);
  sl->leaf_var = pk_alloc(ctx, sizeof(pk_lvar *) * (size_t)st->nleaf);
  sl->root_value = pk_alloc(ctx, sizeof(pk_lexpr *) * (size_t)st->nroot);
  for (int p = 0; p < st->nleaf; p++) {
    sl->leaf_var[p] = pk_lvar_new(ctx, L->f, PKRT_DTYPE_I64);
    pk_lranges_set(L->ranges, sl->leaf_var[p], 0, iter_ext(sl, st->leaf[p]) - 1);
  }
  for (int r = 0; r < st->nroot; r++) {
    const pk_iter *it = st->root[r];
    pk_lexpr *base = it->reduce ? pk_lx_int(ctx, it->axis->lo) : sl->region_min[it->axis->id];
    sl->root_value[r] = pk_lx_simplify(ctx, L->ranges, pk_lx_index_add(ctx, base, iter_counter(L, sl, it)));
  }
  sl->ready = true;
}

/* ---- second pass: the nest ---- */

/* What one nest is built from. */
typedef struct nest {
  lowering *L;
  stage_lowering *sl;
  pk_lexpr **guard;      /* per leaf (+1: index 0 holds guards outside every loop) */
  stage_lowering ***kids;/* per leaf: stages attached there, in stage order */
  pk_stmt ***kid_nests;  /* their nests */
  int *nkids;
} nest;

static void collect_vars_pos(const stage_lowering *sl, const pk_lexpr *e, int *pos) {
  if (e->kind == PK_LX_VAR)
    for (int p = 0; p < sl->st->nleaf; p++)
      if (sl->leaf_var[p] == e->var && p > *pos) *pos = p;
  for (int i = 0; i < e->nargs; i++) collect_vars_pos(sl, e->args[i], pos);
}

static pk_lexpr *and_cond(pk_ctx *ctx, pk_lexpr *a, pk_lexpr *b) {
  return a ? pk_lx_binary(ctx, PK_EOP_AND, a, b, PKRT_DTYPE_BOOL) : b;
}

/* counter < trip count for every iter that was split or fused: a split that does not
 * divide runs past its parent, and only the guard keeps that iteration out (fused parts
 * inherit overruns from the fused counter). Provably true guards vanish; each remaining
 * one sits in the innermost loop whose variable it reads. */
static void make_guards(nest *N) {
  lowering *L = N->L;
  stage_lowering *sl = N->sl;
  const pk_stage *st = sl->st;
  for (int i = 0; i < st->niters; i++) {
    const pk_iter *it = st->iters[i];
    if (leaf_pos(st, it) >= 0) continue;
    pk_lexpr *c = pk_lx_binary(L->ctx, PK_EOP_LT, iter_counter(L, sl, it),
                               pk_lx_int(L->ctx, iter_ext(sl, it)), PKRT_DTYPE_BOOL);
    c = pk_lx_simplify(L->ctx, L->ranges, c);
    if (c->kind == PK_LX_INT && c->ival) continue;
    int pos = -1;
    collect_vars_pos(sl, c, &pos);
    N->guard[pos + 1] = and_cond(L->ctx, N->guard[pos + 1], c);
  }
}

/* Guards of level pos around s: on a vector loop's single store, its mask. */
static pk_stmt *guarded(nest *N, int pos, pk_stmt *s) {
  pk_lexpr *g = N->guard[pos + 1];
  if (!g) return s;
  bool vector = pos >= 0 && N->sl->st->leaf[pos]->kind == PK_LOOP_VECTORIZED;
  if (vector && s->kind == PK_ST_STORE) {
    pk_stmt *m = pk_st_store(N->L->ctx, s->buf, s->index, s->value);
    m->mask = s->mask ? and_cond(N->L->ctx, s->mask, g) : g;
    return m;
  }
  return pk_st_if(N->L->ctx, g, s, NULL);
}

static pk_stmt *seq2(pk_ctx *ctx, pk_stmt *a, pk_stmt *b) {
  pk_stmt *two[2] = {a, b};
  return pk_st_seq(ctx, 2, two);
}

static bool any_parallel_before(const stage_lowering *sl, int pos) {
  for (int p = 0; p < pos; p++)
    if (sl->st->leaf[p]->kind == PK_LOOP_PARALLEL) return true;
  return false;
}

static bool expr_uses_var(const pk_lexpr *e, const pk_lvar *v) {
  if (!e) return false;
  if (e->kind == PK_LX_VAR && e->var == v) return true;
  for (int i = 0; i < e->nargs; i++)
    if (expr_uses_var(e->args[i], v)) return true;
  return false;
}

static bool stmt_uses_var(const pk_stmt *s, const pk_lvar *v) {
  if (!s) return false;
  for (int i = 0; s->kind == PK_ST_SEQ && i < s->n; i++)
    if (stmt_uses_var(s->stmts[i], v)) return true;
  return expr_uses_var(s->min, v) || expr_uses_var(s->extent, v) || expr_uses_var(s->cond, v) ||
         expr_uses_var(s->index, v) || expr_uses_var(s->value, v) || expr_uses_var(s->mask, v) ||
         stmt_uses_var(s->then_, v) || stmt_uses_var(s->else_, v) || stmt_uses_var(s->body, v);
}

/* The loop of leaf pos. Annotations follow the region's trip counts: a vector loop of one
 * lane or beyond the widest vector is serial; a nested parallel loop runs serially; a
 * serial loop of one iteration whose variable simplified away is just its body. */
static pk_stmt *leaf_loop(nest *N, int pos, pk_stmt *body) {
  stage_lowering *sl = N->sl;
  const pk_iter *it = sl->st->leaf[pos];
  int64_t ext = iter_ext(sl, it);
  pk_loop_kind kind = it->kind;
  int64_t annotation = 0;
  if (kind == PK_LOOP_VECTORIZED) {
    if (ext < 2 || ext > 64) kind = PK_LOOP_SERIAL;
    else annotation = ext;
  } else if (kind == PK_LOOP_UNROLLED) {
    annotation = it->annotation > 0 && it->annotation < ext ? it->annotation : ext;
  } else if (kind == PK_LOOP_PARALLEL && (sl->in_parallel || any_parallel_before(sl, pos))) {
    kind = PK_LOOP_SERIAL;
  }
  if (ext == 1 && (kind == PK_LOOP_SERIAL || kind == PK_LOOP_UNROLLED) &&
      !stmt_uses_var(body, sl->leaf_var[pos]))
    return body;
  pk_stmt *s = pk_st_for(N->L->ctx, sl->leaf_var[pos], pk_lx_int(N->L->ctx, 0),
                         pk_lx_int(N->L->ctx, ext), kind, body);
  s->annotation = annotation;
  s->partition = it->partition && kind == PK_LOOP_SERIAL;
  return s;
}

/* The nests attached at leaf pos, then s, in the scope of their buffers and region mins. */
static pk_stmt *with_attached(nest *N, int pos, pk_stmt *s) {
  pk_ctx *ctx = N->L->ctx;
  int n = N->nkids[pos];
  if (!n) return s;
  pk_stmt **seq = pk_alloc(ctx, sizeof(pk_stmt *) * (size_t)(n + 1));
  int shared = 0;
  for (int i = 0; i < n; i++) {
    seq[i] = N->kid_nests[pos][i];
    shared += N->kids[pos][i]->st->scope == PK_SCOPE_SHARED;
  }
  seq[n] = s;
  if (shared) {
    /* A block's threads stage shared data together: all of it is written before any
     * thread reads it, and read by all before the next iteration overwrites it. */
    pk_stmt *fenced[3] = {pk_st_barrier(ctx), s, pk_st_barrier(ctx)};
    seq[n] = pk_st_seq(ctx, 3, fenced);
  }
  s = pk_st_seq(ctx, n + 1, seq);
  for (int i = n - 1; i >= 0; i--) {
    const stage_lowering *c = N->kids[pos][i];
    if (c->st->scope != PK_SCOPE_GLOBAL) s = pk_st_alloc(ctx, c->buf, s);
    for (int d = c->st->tensor->ndim - 1; d >= 0; d--)
      if (c->min_var[d]) s = pk_st_let(ctx, c->min_var[d], c->min_value[d], s);
  }
  return s;
}

/* The identity of a reducer in the accumulator's type. */
static pk_lexpr *reduce_init(pk_ctx *ctx, pk_eop op, pkrt_dtype t) {
  if (pk_dtype_is_float(t)) {
    double v = op == PK_EOP_SUM ? 0.0 : op == PK_EOP_RMAX ? -INFINITY : INFINITY;
    return pk_lx_float(ctx, v, t);
  }
  int64_t lo = t == PKRT_DTYPE_I32 ? INT32_MIN : INT64_MIN;
  int64_t hi = t == PKRT_DTYPE_I32 ? INT32_MAX : INT64_MAX;
  pk_lexpr *x = pk_lx_int(ctx, op == PK_EOP_SUM ? 0 : op == PK_EOP_RMAX ? lo : hi);
  x->dtype = t;
  return x;
}

static pk_eop reduce_combiner(pk_eop op) {
  return op == PK_EOP_SUM ? PK_EOP_ADD : op == PK_EOP_RMAX ? PK_EOP_MAX : PK_EOP_MIN;
}

static bool thread_leaf(const nest *N, int p) {
  pk_loop_kind k = N->sl->st->leaf[p]->kind;
  return k >= PK_LOOP_GPU_THREAD_X && k <= PK_LOOP_GPU_THREAD_Z;
}

/* The loops of leaves [from, to) around s, each body starting with what is attached there.
 * The guard of a loop bound to GPU threads covers only the stage's own work (s), not what
 * is attached inside: shared stages are fetched by all of the block's threads and their
 * barriers reached by all (an idle thread's attached work stays in bounds: regions are
 * clamped into their tensors). */
static pk_stmt *wrap_leaves(nest *N, int from, int to, pk_stmt *s) {
  for (int p = from; p < to; p++)
    if (thread_leaf(N, p)) s = guarded(N, p, s);
  for (int p = to - 1; p >= from; p--) {
    s = thread_leaf(N, p) ? with_attached(N, p, s) : guarded(N, p, with_attached(N, p, s));
    s = leaf_loop(N, p, s);
  }
  return s;
}

/* The init of a reduction kept in its own buffer: before the outermost reduce loop r0, a
 * nest over the spatial leaves that sit inside the reduce loops. */
static pk_stmt *init_nest(nest *N, int r0, pk_stmt *init) {
  const pk_stage *st = N->sl->st;
  for (int p = st->nleaf - 1; p > r0; p--)
    if (!st->leaf[p]->reduce) init = leaf_loop(N, p, guarded(N, p, init));
  return init;
}

/* Every leaf from r0 on is a reduce loop and nothing is attached in there: the
 * accumulator can be one local scalar (a register), stored once per output point. */
static bool scalar_accumulator(const nest *N, int r0) {
  const pk_stage *st = N->sl->st;
  for (int p = r0; p < st->nleaf; p++)
    if (!st->leaf[p]->reduce || N->nkids[p]) return false;
  return true;
}

static pk_stmt *reduction_nest(nest *N, pk_lexpr *out_index) {
  lowering *L = N->L;
  pk_ctx *ctx = L->ctx;
  stage_lowering *sl = N->sl;
  const pk_stage *st = sl->st;
  const pk_expr *r = st->tensor->body;
  pkrt_dtype t = st->tensor->dtype;
  int r0 = 0;
  while (r0 < st->nleaf && !st->leaf[r0]->reduce) r0++;
  PK_ASSERT(r0 < st->nleaf);
  pk_lexpr *term = lower_value(L, r->args[0]);
  pk_lexpr *init = reduce_init(ctx, r->op, t);
  pk_eop combine = reduce_combiner(r->op);
  pk_stmt *s;
  if (scalar_accumulator(N, r0)) {
    int64_t one = 1;
    pk_lbuf *acc = pk_lbuf_new(ctx, L->f, t, PK_SCOPE_LOCAL, 1, &one);
    pk_lexpr *zero = pk_lx_int(ctx, 0);
    pk_stmt *update = pk_st_store(ctx, acc, zero,
                                  pk_lx_binary(ctx, combine, pk_lx_load(ctx, acc, zero), term, t));
    pk_stmt *steps[3] = {pk_st_store(ctx, acc, zero, init), wrap_leaves(N, r0, st->nleaf, update),
                         pk_st_store(ctx, sl->buf, out_index, pk_lx_load(ctx, acc, zero))};
    s = pk_st_alloc(ctx, acc, pk_st_seq(ctx, 3, steps));
  } else {
    pk_lexpr *next = pk_lx_binary(ctx, combine, pk_lx_load(ctx, sl->buf, out_index), term, t);
    s = seq2(ctx, init_nest(N, r0, pk_st_store(ctx, sl->buf, out_index, init)),
             wrap_leaves(N, r0, st->nleaf, pk_st_store(ctx, sl->buf, out_index, next)));
  }
  return wrap_leaves(N, 0, r0, s);
}

/* The attached stages' nests, grouped by the leaf they sit in. */
static void attach_children(nest *N) {
  lowering *L = N->L;
  int cap = N->sl->order + 1; /* attached stages come before their target */
  for (int i = 0; i < N->sl->order; i++) {
    stage_lowering *c = &L->sl[i];
    if (c->target != N->sl) continue;
    int p = c->attach_pos;
    if (!N->kids[p]) {
      N->kids[p] = pk_alloc(L->ctx, sizeof(stage_lowering *) * (size_t)cap);
      N->kid_nests[p] = pk_alloc(L->ctx, sizeof(pk_stmt *) * (size_t)cap);
    }
    N->kids[p][N->nkids[p]] = c;
    N->kid_nests[p][N->nkids[p]++] = stage_nest(L, c);
  }
}

pk_stmt *stage_nest(lowering *L, stage_lowering *sl) {
  pk_ctx *ctx = L->ctx;
  const pk_stage *st = sl->st;
  const pk_te_tensor *t = st->tensor;
  if (t->dom_ndim) return lower_scatter_nest(L, sl); /* fixed schedule: nothing attaches */
  nest N = {L, sl, NULL, NULL, NULL, NULL};
  N.guard = pk_alloc(ctx, sizeof(pk_lexpr *) * (size_t)(st->nleaf + 1));
  N.kids = pk_alloc(ctx, sizeof(stage_lowering **) * (size_t)st->nleaf);
  N.kid_nests = pk_alloc(ctx, sizeof(pk_stmt **) * (size_t)st->nleaf);
  N.nkids = pk_alloc(ctx, sizeof(int) * (size_t)st->nleaf);
  attach_children(&N);
  make_guards(&N);

  int nbound = lower_bind_stage(L, sl);
  pk_lexpr *values[PK_TE_MAX_DIMS];
  for (int r = 0; r < st->nroot; r++)
    if (!st->root[r]->reduce) values[st->root[r]->axis->id] = sl->root_value[r];
  pk_lexpr *out_index = lower_buffer_index(L, sl, values);
  pk_stmt *s = t->body->kind == PK_EXPR_REDUCE
                   ? reduction_nest(&N, out_index)
                   : wrap_leaves(&N, 0, st->nleaf,
                                 pk_st_store(ctx, sl->buf, out_index, lower_value(L, t->body)));
  lower_unbind(L, nbound);
  return guarded(&N, -1, s);
}
