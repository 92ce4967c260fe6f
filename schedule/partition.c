/* partition.c — loop partitioning, the lowering pass behind pk_sched_partition: a marked
 * loop over [0, E) becomes [0, p0) [p0, p1) [p1, E), where p0..p1 is the range of its
 * counter on which every guard conjunct affine in it (a padded window's bounds, a ragged
 * tail's test) holds for all values of the loops inside. The middle copy loses those
 * conjuncts, so its selects and IFs fold away and its loads need no guard: what lets a
 * padded convolution's interior vectorize without if-conversion. The edge copies keep the
 * original body (they share it). */
#include <string.h>

#include "lower_impl.h"

#define MAX_BOUNDS 32

/* Variables bound inside the loop body, with the range of those that are plain counters. */
typedef struct inner_vars {
  int cap;
  bool *bound;
  bool *ranged;
  const pk_lvar **var;
  int64_t *lo, *hi;
} inner_vars;

typedef struct partition {
  pk_ctx *ctx;
  pk_lfunc *f;
  pk_lranges *ranges; /* outer counters, the loop's, the inner ones: proves no overflow */
  const pk_lvar *v;
  inner_vars in;
  int nlower, nupper, nconj;
  pk_lexpr *lower[MAX_BOUNDS]; /* v >= each */
  pk_lexpr *upper[MAX_BOUNDS]; /* v <= each */
  const pk_lexpr *conj[MAX_BOUNDS]; /* the conjuncts those came from: true in the middle */
  int ninv;
  const pk_lexpr *inv[MAX_BOUNDS];  /* conjuncts the loop does not change: unswitched */
  bool use_inv;                     /* middle_expr: take inv[] as true too */
} partition;

static void note_var(partition *P, const pk_lvar *v, const pk_stmt *loop) {
  inner_vars *in = &P->in;
  PK_ASSERT(v->id < in->cap); /* the table is sized for every variable made so far */
  bool seen = in->bound[v->id];
  in->bound[v->id] = true;
  in->var[v->id] = v;
  /* a counter bound by several loops (an inner partition's copies) is ranged only when
   * every one of them is, over the union */
  if (loop && loop->min->kind == PK_LX_INT && loop->extent->kind == PK_LX_INT && loop->extent->ival > 0) {
    int64_t lo = loop->min->ival, hi = loop->min->ival + loop->extent->ival - 1;
    if (!seen) {
      in->ranged[v->id] = true;
      in->lo[v->id] = lo;
      in->hi[v->id] = hi;
    } else if (in->ranged[v->id]) {
      if (lo < in->lo[v->id]) in->lo[v->id] = lo;
      if (hi > in->hi[v->id]) in->hi[v->id] = hi;
    }
  } else {
    in->ranged[v->id] = false;
  }
}

static void collect_inner(partition *P, const pk_stmt *s) {
  if (!s) return;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) collect_inner(P, s->stmts[i]);
    return;
  case PK_ST_FOR: note_var(P, s->var, s); collect_inner(P, s->body); return;
  case PK_ST_LET: note_var(P, s->var, NULL); collect_inner(P, s->body); return;
  case PK_ST_IF: collect_inner(P, s->then_); collect_inner(P, s->else_); return;
  case PK_ST_ALLOC: collect_inner(P, s->body); return;
  case PK_ST_STORE: case PK_ST_BARRIER: return;
  }
}

/* An atom the bound may mention: no load (its buffer may change inside the loop), no
 * variable bound inside, not the counter itself. */
static bool invariant_atom(const partition *P, const pk_lexpr *e) {
  if (e->kind == PK_LX_LOAD) return false;
  if (e->kind == PK_LX_VAR && (e->var == P->v || e->var->id >= P->in.cap || P->in.bound[e->var->id]))
    return false;
  for (int i = 0; i < e->nargs; i++)
    if (!invariant_atom(P, e->args[i])) return false;
  return true;
}

static pk_lexpr *index_op(pk_ctx *ctx, pk_eop op, pk_lexpr *a, pk_lexpr *b) {
  pk_lexpr *x = pk_lx_binary(ctx, op, a, b, PKRT_DTYPE_I64);
  x->index_math = true; /* every operand is a loop bound or counter: small */
  return x;
}

static bool is_index(const pk_lexpr *e) { return e->dtype == PKRT_DTYPE_I64; }

/* A guard's arithmetic comes from the user's TE, so it is not marked as index math (which
 * the affine view needs); once its bounds are known it cannot overflow, and it may be. */
static pk_lexpr *as_index(pk_ctx *ctx, pk_lexpr *e) {
  bool affine_op = (e->kind == PK_LX_BINARY && (e->op == PK_EOP_ADD || e->op == PK_EOP_SUB || e->op == PK_EOP_MUL)) ||
                   (e->kind == PK_LX_UNARY && e->op == PK_EOP_NEG);
  if (!affine_op || e->dtype != PKRT_DTYPE_I64) return e;
  pk_lexpr *x = pk_alloc(ctx, sizeof *x);
  *x = *e;
  x->index_math = true;
  x->args = pk_alloc(ctx, sizeof(pk_lexpr *) * (size_t)e->nargs);
  for (int i = 0; i < e->nargs; i++) x->args[i] = as_index(ctx, e->args[i]);
  return x;
}

static bool affine_of(partition *P, pk_lexpr *e, pk_affine *out) {
  int64_t lo, hi;
  return pk_lx_bounds(P->ranges, e, &lo, &hi) && pk_lx_affine(P->ctx, P->ranges, as_index(P->ctx, e), out);
}

/* A comparison a CMP b whose a - b is c·v + Σ inner counters + invariant part becomes a
 * bound on v that makes it true for every value of the inner counters (c ≠ 0), or, when
 * neither v nor an inner counter appears, a guard to unswitch on (c = 0). */
static void try_conjunct(partition *P, const pk_lexpr *e) {
  if (e->kind != PK_LX_BINARY || e->op < PK_EOP_LT || e->op > PK_EOP_GE || !is_index(e->args[0]) ||
      !is_index(e->args[1]) || P->nconj == MAX_BOUNDS)
    return;
  pk_affine a, b, d = {0};
  if (!affine_of(P, e->args[0], &a) || !affine_of(P, e->args[1], &b) ||
      !pk_affine_add(&d, &a, 1) || !pk_affine_add(&d, &b, -1))
    return;
  /* d = c·v + rest, rest = invariant + inner; imin..imax: the inner part's range */
  int64_t c = 0, imin = 0, imax = 0;
  pk_affine rest = {.c0 = d.c0};
  for (int i = 0; i < d.n; i++) {
    const pk_lexpr *at = d.atom[i];
    int64_t k = d.coef[i];
    if (at->kind == PK_LX_VAR && at->var == P->v) {
      c = k;
    } else if (at->kind == PK_LX_VAR && at->var->id < P->in.cap && P->in.bound[at->var->id]) {
      if (!P->in.ranged[at->var->id]) return;
      int64_t x = k * P->in.lo[at->var->id], y = k * P->in.hi[at->var->id]; /* small: extents */
      imin += x < y ? x : y;
      imax += x < y ? y : x;
    } else if (invariant_atom(P, at)) {
      rest.atom[rest.n] = d.atom[i];
      rest.coef[rest.n++] = k;
    } else {
      return;
    }
  }
  if (c == 0 && imin == 0 && imax == 0 && rest.n == d.n) {
    /* the same for every iteration of the loop and the loops inside: unswitch on it */
    for (int i = 0; i < P->ninv; i++)
      if (pk_lx_equal(P->inv[i], e)) return;
    if (P->ninv < MAX_BOUNDS) P->inv[P->ninv++] = e;
    return;
  }
  if (c == 0) return;
  /* the comparison as d >= t (ge) or d <= t */
  bool ge = e->op == PK_EOP_GE || e->op == PK_EOP_GT;
  int64_t t = e->op == PK_EOP_GT ? 1 : e->op == PK_EOP_LT ? -1 : 0;
  /* for all inner values: c·v >= y (ge) or c·v <= y, y = t - rest - (imin or imax) */
  pk_affine y = {0};
  if (!pk_affine_add(&y, &rest, -1)) return;
  y.c0 += t - (ge ? imin : imax);
  if (c < 0) { /* -|c|·v >= y is |c|·v <= -y */
    pk_affine neg = {0};
    if (!pk_affine_add(&neg, &y, -1)) return;
    y = neg;
    c = -c;
    ge = !ge;
  }
  /* v >= ceil(y / c) or v <= floor(y / c); integer DIV floors */
  if (ge) y.c0 += c - 1;
  pk_lexpr *x = pk_affine_expr(P->ctx, &y);
  if (c > 1) x = pk_lx_simplify(P->ctx, P->ranges, index_op(P->ctx, PK_EOP_DIV, x, pk_lx_int(P->ctx, c)));
  if (ge) {
    if (P->nlower == MAX_BOUNDS) return;
    P->lower[P->nlower++] = x;
  } else {
    if (P->nupper == MAX_BOUNDS) return;
    P->upper[P->nupper++] = x;
  }
  P->conj[P->nconj++] = e;
}

static void scan_cond(partition *P, const pk_lexpr *e) {
  if (e->kind == PK_LX_BINARY && e->op == PK_EOP_AND) {
    scan_cond(P, e->args[0]);
    scan_cond(P, e->args[1]);
  } else {
    try_conjunct(P, e);
  }
}

static void scan_expr(partition *P, const pk_lexpr *e) {
  if (!e) return;
  if (e->kind == PK_LX_SELECT) scan_cond(P, e->args[0]);
  for (int i = 0; i < e->nargs; i++) scan_expr(P, e->args[i]);
}

static void scan_stmt(partition *P, const pk_stmt *s) {
  if (!s) return;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) scan_stmt(P, s->stmts[i]);
    return;
  case PK_ST_FOR: scan_expr(P, s->min); scan_expr(P, s->extent); scan_stmt(P, s->body); return;
  case PK_ST_IF: scan_cond(P, s->cond); scan_expr(P, s->cond); scan_stmt(P, s->then_); scan_stmt(P, s->else_); return;
  case PK_ST_STORE: scan_expr(P, s->index); scan_expr(P, s->value); return;
  case PK_ST_LET: scan_expr(P, s->value); scan_stmt(P, s->body); return;
  case PK_ST_ALLOC: scan_stmt(P, s->body); return;
  case PK_ST_BARRIER: return;
  }
}

/* ---- the middle copy: the accepted conjuncts are true ---- */

static bool is_true(const pk_lexpr *e) { return e->kind == PK_LX_INT && e->dtype == PKRT_DTYPE_BOOL && e->ival; }

static pk_lexpr *true_const(pk_ctx *ctx) {
  pk_lexpr *x = pk_lx_int(ctx, 1);
  x->dtype = PKRT_DTYPE_BOOL;
  return x;
}

static pk_lexpr *middle_expr(partition *P, pk_lexpr *e) {
  if (!e) return NULL;
  for (int i = 0; i < P->nconj; i++)
    if (e == P->conj[i] || pk_lx_equal(e, P->conj[i])) return true_const(P->ctx);
  for (int i = 0; P->use_inv && i < P->ninv; i++)
    if (e == P->inv[i] || pk_lx_equal(e, P->inv[i])) return true_const(P->ctx);
  if (e->nargs == 0) return e;
  pk_lexpr *args[8];
  bool changed = false;
  PK_ASSERT(e->nargs <= 8);
  for (int i = 0; i < e->nargs; i++) {
    args[i] = middle_expr(P, e->args[i]);
    changed |= args[i] != e->args[i];
  }
  if (!changed) return e;
  if (e->kind == PK_LX_BINARY && e->op == PK_EOP_AND) {
    if (is_true(args[0])) return args[1];
    if (is_true(args[1])) return args[0];
  }
  if (e->kind == PK_LX_SELECT && is_true(args[0])) return args[1];
  pk_lexpr *x = pk_alloc(P->ctx, sizeof *x);
  *x = *e;
  x->args = pk_alloc(P->ctx, sizeof(pk_lexpr *) * (size_t)e->nargs);
  memcpy(x->args, args, sizeof(pk_lexpr *) * (size_t)e->nargs);
  return x;
}

static pk_stmt *middle_stmt(partition *P, pk_stmt *s) {
  if (!s) return NULL;
  pk_stmt *x = pk_alloc(P->ctx, sizeof *x);
  *x = *s;
  switch (s->kind) {
  case PK_ST_SEQ:
    x->stmts = pk_alloc(P->ctx, sizeof(pk_stmt *) * (size_t)(s->n ? s->n : 1));
    for (int i = 0; i < s->n; i++) x->stmts[i] = middle_stmt(P, s->stmts[i]);
    return x;
  case PK_ST_FOR:
    x->min = middle_expr(P, s->min);
    x->extent = middle_expr(P, s->extent);
    x->body = middle_stmt(P, s->body);
    return x;
  case PK_ST_IF:
    x->cond = middle_expr(P, s->cond);
    if (is_true(x->cond)) return middle_stmt(P, s->then_);
    x->then_ = middle_stmt(P, s->then_);
    x->else_ = middle_stmt(P, s->else_);
    return x;
  case PK_ST_STORE:
    x->index = middle_expr(P, s->index);
    x->value = middle_expr(P, s->value);
    x->mask = s->mask ? middle_expr(P, s->mask) : NULL;
    return x;
  case PK_ST_LET: x->value = middle_expr(P, s->value); x->body = middle_stmt(P, s->body); return x;
  case PK_ST_ALLOC: x->body = middle_stmt(P, s->body); return x;
  case PK_ST_BARRIER: return x;
  }
  return x;
}

/* ---- the pass ---- */

static bool is_zero(const pk_lexpr *e) { return e->kind == PK_LX_INT && e->ival == 0; }

static pk_stmt *serial_for(pk_ctx *ctx, pk_lvar *v, pk_lexpr *min, pk_lexpr *extent, pk_stmt *body) {
  return pk_st_for(ctx, v, min, extent, PK_LOOP_SERIAL, body);
}

static pk_stmt *partition_loop(pk_ctx *ctx, pk_lfunc *f, pk_lranges *ranges, pk_stmt *loop) {
  int nvars = f->nvars; /* inner partitions made some */
  partition P = {.ctx = ctx, .f = f, .v = loop->var};
  P.in.cap = nvars;
  P.in.bound = pk_alloc(ctx, (size_t)nvars * sizeof(bool));
  P.in.ranged = pk_alloc(ctx, (size_t)nvars * sizeof(bool));
  P.in.lo = pk_alloc(ctx, (size_t)nvars * sizeof(int64_t));
  P.in.hi = pk_alloc(ctx, (size_t)nvars * sizeof(int64_t));
  P.in.var = pk_alloc(ctx, (size_t)nvars * sizeof(pk_lvar *));
  int64_t E;
  if (loop->min->kind != PK_LX_INT || loop->min->ival != 0 || loop->extent->kind != PK_LX_INT ||
      (E = loop->extent->ival) < 1)
    return loop;
  collect_inner(&P, loop->body);
  P.ranges = ranges;
  pk_lranges_set(ranges, loop->var, 0, E - 1);
  for (int i = 0; i < nvars; i++)
    if (P.in.ranged[i]) pk_lranges_set(ranges, P.in.var[i], P.in.lo[i], P.in.hi[i]);
  scan_stmt(&P, loop->body);
  if (P.nconj == 0 && P.ninv == 0) return loop;
  /* p0 = clamp(max(lower...), 0, E); p1 = clamp(min(upper...) + 1, p0, E) */
  pk_lexpr *lo = pk_lx_int(ctx, 0), *hi = pk_lx_int(ctx, E);
  for (int i = 0; i < P.nlower; i++) lo = index_op(ctx, PK_EOP_MAX, lo, P.lower[i]);
  for (int i = 0; i < P.nupper; i++)
    hi = index_op(ctx, PK_EOP_MIN, hi, pk_lx_index_add(ctx, P.upper[i], pk_lx_int(ctx, 1)));
  /* constant cut points (a loop at the root, a guard of a ragged tail) need no variable */
  pk_lvar *p0 = NULL, *p1 = NULL;
  pk_lexpr *p0_val = pk_lx_simplify(ctx, ranges, index_op(ctx, PK_EOP_MIN, lo, pk_lx_int(ctx, E)));
  pk_lexpr *v0 = p0_val;
  if (p0_val->kind != PK_LX_INT) {
    p0 = pk_lvar_new(ctx, f, PKRT_DTYPE_I64);
    v0 = pk_lx_var(ctx, p0);
  }
  pk_lexpr *p1_val = pk_lx_simplify(ctx, ranges, index_op(ctx, PK_EOP_MAX, v0, hi));
  pk_lexpr *v1 = p1_val;
  if (p1_val->kind != PK_LX_INT) {
    p1 = pk_lvar_new(ctx, f, PKRT_DTYPE_I64);
    v1 = pk_lx_var(ctx, p1);
  }
  pk_lexpr *mid_extent = pk_lx_simplify(ctx, ranges, index_op(ctx, PK_EOP_SUB, v1, v0));
  pk_stmt *middle = serial_for(ctx, loop->var, v0, mid_extent, middle_stmt(&P, loop->body));
  if (P.ninv) {
    /* unswitched: where the invariant guards hold (a padded window's interior rows) the
     * middle runs with none; elsewhere with them */
    pk_lexpr *cond = (pk_lexpr *)P.inv[0];
    for (int i = 1; i < P.ninv; i++)
      cond = pk_lx_binary(ctx, PK_EOP_AND, cond, (pk_lexpr *)P.inv[i], PKRT_DTYPE_BOOL);
    P.use_inv = true;
    pk_stmt *clean = serial_for(ctx, loop->var, v0, mid_extent, middle_stmt(&P, loop->body));
    middle = pk_st_if(ctx, cond, clean, middle);
  }
  pk_lexpr *tail_extent = pk_lx_simplify(ctx, ranges, index_op(ctx, PK_EOP_SUB, pk_lx_int(ctx, E), v1));
  /* copies known to be empty are left out (a guard that holds from the first iteration) */
  pk_stmt **list = pk_alloc(ctx, 3 * sizeof(pk_stmt *));
  int n = 0;
  if (!is_zero(v0)) list[n++] = serial_for(ctx, loop->var, pk_lx_int(ctx, 0), v0, loop->body);
  if (!is_zero(mid_extent)) list[n++] = middle;
  if (!is_zero(tail_extent)) list[n++] = serial_for(ctx, loop->var, v1, tail_extent, loop->body);
  pk_stmt *seq = pk_st_seq(ctx, n, list);
  pk_stmt *out = p1 ? pk_st_let(ctx, p1, p1_val, seq) : seq;
  return p0 ? pk_st_let(ctx, p0, p0_val, out) : out;
}

/* ranges: the counters (and let-bound values) around s, as far as they are known. */
static pk_stmt *walk(pk_ctx *ctx, pk_lfunc *f, pk_lranges *ranges, pk_stmt *s) {
  if (!s) return NULL;
  int64_t lo, hi;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) s->stmts[i] = walk(ctx, f, ranges, s->stmts[i]);
    return s;
  case PK_ST_FOR:
    if (s->min->kind == PK_LX_INT && s->extent->kind == PK_LX_INT && s->extent->ival > 0)
      pk_lranges_set(ranges, s->var, s->min->ival, s->min->ival + s->extent->ival - 1);
    s->body = walk(ctx, f, ranges, s->body); /* inner loops first */
    return s->partition && s->loop == PK_LOOP_SERIAL ? partition_loop(ctx, f, ranges, s) : s;
  case PK_ST_IF:
    s->then_ = walk(ctx, f, ranges, s->then_);
    s->else_ = walk(ctx, f, ranges, s->else_);
    return s;
  case PK_ST_LET:
    if (pk_lx_bounds(ranges, s->value, &lo, &hi)) pk_lranges_set(ranges, s->var, lo, hi);
    s->body = walk(ctx, f, ranges, s->body);
    return s;
  case PK_ST_ALLOC: s->body = walk(ctx, f, ranges, s->body); return s;
  case PK_ST_STORE:
  case PK_ST_BARRIER: return s;
  }
  return s;
}

void lower_partition_loops(pk_ctx *ctx, pk_lfunc *f) {
  f->body = walk(ctx, f, pk_lranges_new(ctx), f->body);
}
