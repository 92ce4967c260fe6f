/* bounds.c — proves every read of a compute stays inside its tensor, by interval
 * arithmetic over int64 refined with the facts that guards (select, &&, ||) establish. */
#include <stdio.h>
#include <string.h>

#include "parse_impl.h"

/* Work cap per compute: nested guards inside guard conditions can make the analysis
 * exponential, and giving up (no refinement) is always sound. */
#define BOUNDS_BUDGET 1000000

/* Closed interval of int64 values; lo > hi means no value (code that cannot run). */
typedef struct ival {
  int64_t lo, hi;
} ival;

static const ival FULL = {INT64_MIN, INT64_MAX};
static const ival EMPTY = {1, 0};

/* A fact: on this path e's value lies in range. Facts chain from the innermost guard out.
 * dead: the facts contradict each other, so no execution takes this path. */
typedef struct fact {
  const pk_expr *e;
  ival range;
  bool dead;
  const struct fact *next;
} fact;

typedef struct bounds {
  pk_ctx *ctx;
  const char *file;
  long budget;
} bounds;

static bool is_empty(ival a) { return a.lo > a.hi; }
static ival iv(int64_t lo, int64_t hi) { return (ival){lo, hi}; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static bool spend(bounds *B) { return --B->budget > 0; }

static ival hull(ival a, ival b) {
  if (is_empty(a)) return b;
  if (is_empty(b)) return a;
  return iv(min64(a.lo, b.lo), max64(a.hi, b.hi));
}

static ival meet(ival a, ival b) {
  ival r = iv(max64(a.lo, b.lo), min64(a.hi, b.hi));
  return is_empty(r) ? EMPTY : r;
}

static ival dtype_range(pkrt_dtype t) {
  return t == PKRT_DTYPE_I32 ? iv(INT32_MIN, INT32_MAX) : t == PKRT_DTYPE_BOOL ? iv(0, 1) : FULL;
}

/* ---- interval arithmetic: any overflow gives FULL, since int64 arithmetic wraps ---- */

static ival iv_add(ival a, ival b) {
  ival r;
  if (pk_i64_add(a.lo, b.lo, &r.lo) || pk_i64_add(a.hi, b.hi, &r.hi)) return FULL;
  return r;
}

static ival iv_neg(ival a) {
  if (a.lo == INT64_MIN) return FULL;
  return iv(-a.hi, -a.lo);
}

static ival iv_sub(ival a, ival b) {
  ival r;
  if (__builtin_sub_overflow(a.lo, b.hi, &r.lo) || __builtin_sub_overflow(a.hi, b.lo, &r.hi)) return FULL;
  return r;
}

static ival iv_mul(ival a, ival b) {
  int64_t p[4];
  if (pk_i64_mul(a.lo, b.lo, &p[0]) || pk_i64_mul(a.lo, b.hi, &p[1]) ||
      pk_i64_mul(a.hi, b.lo, &p[2]) || pk_i64_mul(a.hi, b.hi, &p[3]))
    return FULL;
  return iv(min64(min64(p[0], p[1]), min64(p[2], p[3])), max64(max64(p[0], p[1]), max64(p[2], p[3])));
}

/* Floor division of scalars, y != 0; false on the one overflow (INT64_MIN / -1). */
static bool floordiv(int64_t x, int64_t y, int64_t *q) {
  if (x == INT64_MIN && y == -1) return false;
  *q = x / y;
  if (x % y != 0 && ((x < 0) != (y < 0))) (*q)--;
  return true;
}

/* floor(x / y) over a rectangle whose y side does not contain 0: it is monotone in each
 * argument there, so the corners bound it. */
static ival div_corners(ival a, ival b) {
  int64_t q[4];
  if (!floordiv(a.lo, b.lo, &q[0]) || !floordiv(a.lo, b.hi, &q[1]) ||
      !floordiv(a.hi, b.lo, &q[2]) || !floordiv(a.hi, b.hi, &q[3]))
    return FULL;
  return iv(min64(min64(q[0], q[1]), min64(q[2], q[3])), max64(max64(q[0], q[1]), max64(q[2], q[3])));
}

/* Integer x / 0 is 0 (docs/te.md), so a divisor range containing 0 adds {0}. */
static ival iv_div(ival a, ival b) {
  ival r = EMPTY;
  if (b.lo <= 0 && b.hi >= 0) r = iv(0, 0);
  if (b.hi >= 1) r = hull(r, div_corners(a, iv(max64(b.lo, 1), b.hi)));
  if (b.lo <= -1) r = hull(r, div_corners(a, iv(b.lo, min64(b.hi, -1))));
  return r;
}

/* Floor modulo by a positive range [p, q]: result in [0, q-1], or a shifted copy of a
 * when a divisor is constant and a stays within one period. */
static ival mod_positive(ival a, ival b) {
  int64_t qlo, qhi, shift;
  if (b.lo == b.hi && floordiv(a.lo, b.lo, &qlo) && floordiv(a.hi, b.lo, &qhi) && qlo == qhi &&
      !pk_i64_mul(qlo, b.lo, &shift))
    return iv_sub(a, iv(shift, shift));
  if (a.lo >= 0) return iv(a.hi < b.lo ? a.lo : 0, min64(a.hi, b.hi - 1));
  return iv(0, b.hi - 1);
}

/* Floor modulo by a negative range: the result takes the divisor's sign, in [lo+1, 0]. */
static ival mod_negative(ival a, ival b) {
  int64_t qlo, qhi, shift;
  if (b.lo == b.hi && floordiv(a.lo, b.lo, &qlo) && floordiv(a.hi, b.lo, &qhi) && qlo == qhi &&
      !pk_i64_mul(qlo, b.lo, &shift))
    return iv_sub(a, iv(shift, shift));
  return iv(b.lo + 1, 0);
}

/* Integer x % 0 is x (docs/te.md). */
static ival iv_mod(ival a, ival b) {
  ival r = EMPTY;
  if (b.lo <= 0 && b.hi >= 0) r = a;
  if (b.hi >= 1) r = hull(r, mod_positive(a, iv(max64(b.lo, 1), b.hi)));
  if (b.lo <= -1) r = hull(r, mod_negative(a, iv(b.lo, min64(b.hi, -1))));
  return r;
}

static ival iv_abs(ival a) {
  if (a.lo >= 0) return a;
  if (a.hi <= 0) return iv_neg(a);
  if (a.lo == INT64_MIN) return FULL;
  return iv(0, max64(-a.lo, a.hi));
}

/* ---- facts ---- */

static bool same_expr(bounds *B, const pk_expr *a, const pk_expr *b) {
  if (a == b) return true;
  if (!spend(B)) return false;
  if (a->kind != b->kind || a->op != b->op || a->dtype != b->dtype || a->nargs != b->nargs)
    return false;
  switch (a->kind) {
  case PK_EXPR_INT: if (a->ival != b->ival) return false; break;
  case PK_EXPR_FLOAT: if (memcmp(&a->fval, &b->fval, sizeof a->fval) != 0) return false; break;
  case PK_EXPR_AXIS: if (a->axis != b->axis) return false; break;
  case PK_EXPR_READ: if (a->tensor != b->tensor) return false; break;
  case PK_EXPR_REDUCE:
    if (a->naxes != b->naxes || memcmp(a->axes, b->axes, (size_t)a->naxes * sizeof *a->axes) != 0)
      return false;
    break;
  default: break;
  }
  for (int i = 0; i < a->nargs; i++)
    if (!same_expr(B, a->args[i], b->args[i])) return false;
  return true;
}

static ival interval(bounds *B, const pk_expr *e, const fact *env);

static pk_eop negate_cmp(pk_eop op) {
  switch (op) {
  case PK_EOP_LT: return PK_EOP_GE;
  case PK_EOP_LE: return PK_EOP_GT;
  case PK_EOP_GT: return PK_EOP_LE;
  case PK_EOP_GE: return PK_EOP_LT;
  case PK_EOP_EQ: return PK_EOP_NE;
  default: return PK_EOP_EQ;
  }
}

/* C op E  is  E mirror(op) C */
static pk_eop mirror_cmp(pk_eop op) {
  switch (op) {
  case PK_EOP_LT: return PK_EOP_GT;
  case PK_EOP_LE: return PK_EOP_GE;
  case PK_EOP_GT: return PK_EOP_LT;
  case PK_EOP_GE: return PK_EOP_LE;
  default: return op;
  }
}

/* Values of E for which  E op c  holds (!= says nothing an interval can hold). */
static ival cmp_range(pk_eop op, int64_t c) {
  switch (op) {
  case PK_EOP_LT: return c == INT64_MIN ? EMPTY : iv(INT64_MIN, c - 1);
  case PK_EOP_LE: return iv(INT64_MIN, c);
  case PK_EOP_GT: return c == INT64_MAX ? EMPTY : iv(c + 1, INT64_MAX);
  case PK_EOP_GE: return iv(c, INT64_MAX);
  case PK_EOP_EQ: return iv(c, c);
  default: return FULL;
  }
}

/* Adds "e lies in range" where e is already known to lie in now. */
static const fact *push_fact(bounds *B, const pk_expr *e, ival now, ival range, const fact *env) {
  fact *f = pk_alloc(B->ctx, sizeof *f);
  *f = (fact){e, range, (env && env->dead) || is_empty(meet(now, range)), env};
  return f;
}

/* The facts of  lhs op rhs  given its sides' intervals l and r. */
static const fact *assume_cmp(bounds *B, const pk_expr *c, pk_eop op, ival l, ival r,
                              const fact *env) {
  if (is_empty(l) || is_empty(r)) return push_fact(B, c->args[0], EMPTY, FULL, env); /* unreachable */
  if (op == PK_EOP_NE) return env;
  if (r.lo == r.hi) env = push_fact(B, c->args[0], l, cmp_range(op, r.lo), env);
  if (l.lo == l.hi) env = push_fact(B, c->args[1], r, cmp_range(mirror_cmp(op), l.lo), env);
  return env;
}

/* Extends env with what holds where c is true (*when_true) and where it is false
 * (*when_false): comparisons of an integer expression with a constant, split over &&
 * (when true) and || (when false). Both come from one evaluation of each comparison's
 * sides; one per outcome would double the work at every select nested in a condition. */
static void assume(bounds *B, const pk_expr *c, const fact *env, const fact **when_true,
                   const fact **when_false) {
  const fact *ignored, *first;
  *when_true = *when_false = env;
  if (!spend(B)) return;
  if (c->kind == PK_EXPR_UNARY && c->op == PK_EOP_NOT) {
    assume(B, c->args[0], env, when_false, when_true);
    return;
  }
  if (c->kind != PK_EXPR_BINARY) return;
  if (c->op == PK_EOP_AND) { /* true: both hold, the second known under the first */
    assume(B, c->args[0], env, &first, &ignored);
    assume(B, c->args[1], first, when_true, &ignored);
    return;
  }
  if (c->op == PK_EOP_OR) { /* false: both fail */
    assume(B, c->args[0], env, &ignored, &first);
    assume(B, c->args[1], first, &ignored, when_false);
    return;
  }
  if (c->op < PK_EOP_LT || c->op > PK_EOP_NE || !pk_dtype_is_int(c->args[0]->dtype)) return;
  ival l = interval(B, c->args[0], env), r = interval(B, c->args[1], env);
  *when_true = assume_cmp(B, c, c->op, l, r, env);
  *when_false = assume_cmp(B, c, negate_cmp(c->op), l, r, env);
}

/* ---- intervals ---- */

static ival iv_cast(bounds *B, const pk_expr *e, const fact *env) {
  const pk_expr *a = e->args[0];
  if (!pk_dtype_is_int(a->dtype) && a->dtype != PKRT_DTYPE_BOOL) return dtype_range(e->dtype);
  return interval(B, a, env); /* narrowing to i32 is handled by the caller's wrap */
}

static ival iv_binary(bounds *B, const pk_expr *e, const fact *env) {
  if (e->op >= PK_EOP_LT) return iv(0, 1); /* comparisons and logic */
  ival a = interval(B, e->args[0], env), b = interval(B, e->args[1], env);
  if (is_empty(a) || is_empty(b)) return EMPTY;
  switch (e->op) {
  case PK_EOP_ADD: return iv_add(a, b);
  case PK_EOP_SUB: return iv_sub(a, b);
  case PK_EOP_MUL: return iv_mul(a, b);
  case PK_EOP_DIV: return iv_div(a, b);
  case PK_EOP_MOD: return iv_mod(a, b);
  case PK_EOP_MIN: return iv(min64(a.lo, b.lo), min64(a.hi, b.hi));
  case PK_EOP_MAX: return iv(max64(a.lo, b.lo), max64(a.hi, b.hi));
  default: return FULL;
  }
}

static ival interval_raw(bounds *B, const pk_expr *e, const fact *env) {
  switch (e->kind) {
  case PK_EXPR_INT: return iv(e->ival, e->ival);
  case PK_EXPR_AXIS: return iv(e->axis->lo, e->axis->hi - 1);
  case PK_EXPR_UNARY: {
    if (e->op == PK_EOP_NOT) return iv(0, 1);
    ival a = interval(B, e->args[0], env);
    return is_empty(a) ? EMPTY : iv_neg(a);
  }
  case PK_EXPR_BINARY: return iv_binary(B, e, env);
  case PK_EXPR_SELECT: {
    const fact *when_true, *when_false;
    assume(B, e->args[0], env, &when_true, &when_false);
    return hull(interval(B, e->args[1], when_true), interval(B, e->args[2], when_false));
  }
  case PK_EXPR_CALL:
    if (e->op == PK_EOP_ABS && pk_dtype_is_int(e->dtype)) {
      ival a = interval(B, e->args[0], env);
      return is_empty(a) ? EMPTY : iv_abs(a);
    }
    if (e->op == PK_EOP_HASH) return iv(0, ((int64_t)1 << 53) - 1);
    return FULL;
  case PK_EXPR_CAST: return iv_cast(B, e, env);
  default: return dtype_range(e->dtype); /* reads, reductions, floats */
  }
}

/* The values e can take on paths where env holds (a sound over-approximation). */
static ival interval(bounds *B, const pk_expr *e, const fact *env) {
  if (env && env->dead) return EMPTY; /* nothing runs here, so no value is possible */
  if (!spend(B)) return dtype_range(e->dtype);
  ival r = interval_raw(B, e, env);
  /* i32 arithmetic wraps at 32 bits: anything that does not fit could be any i32. */
  if (e->dtype == PKRT_DTYPE_I32 && !is_empty(r) && (r.lo < INT32_MIN || r.hi > INT32_MAX))
    r = dtype_range(PKRT_DTYPE_I32);
  for (const fact *f = env; f; f = f->next)
    if (same_expr(B, f->e, e)) r = meet(r, f->range);
  return r;
}

/* ---- the walk over a body ---- */

static const char *bound_str(pk_ctx *ctx, int64_t v) {
  if (v == INT64_MIN) return "-inf";
  if (v == INT64_MAX) return "+inf";
  return pk_sprintf(ctx, "%lld", (long long)v);
}

static pk_status check_read(bounds *B, const pk_expr *e, const fact *env) {
  const pk_te_tensor *t = e->tensor;
  for (int d = 0; d < e->nargs; d++) {
    ival r = interval(B, e->args[d], env);
    if (is_empty(r) || (r.lo >= 0 && r.hi < t->shape[d])) continue; /* empty: cannot run */
    return pk_ctx_fail(B->ctx, PK_ERR_CHECK,
                       "%sread of %s can leave its tensor: index %d ranges over [%s, %s], "
                       "extent %lld; guard it with select(...) or clamp it with min/max",
                       pk_te_where(B->ctx, B->file, e->line, e->col), t->name, d,
                       bound_str(B->ctx, r.lo), bound_str(B->ctx, r.hi), (long long)t->shape[d]);
  }
  return PK_OK;
}

/* Checks every read under e, each under the facts of the guards around it. */
static pk_status walk(bounds *B, const pk_expr *e, const fact *env) {
  if (e->kind == PK_EXPR_READ && check_read(B, e, env) != PK_OK) return pk_ctx_status(B->ctx);
  const fact *env_arg[3] = {env, env, env}, *ignored;
  if (e->kind == PK_EXPR_SELECT) {
    assume(B, e->args[0], env, &env_arg[1], &env_arg[2]);
  } else if (e->kind == PK_EXPR_BINARY && e->op == PK_EOP_AND) {
    assume(B, e->args[0], env, &env_arg[1], &ignored); /* y runs only where x holds */
  } else if (e->kind == PK_EXPR_BINARY && e->op == PK_EOP_OR) {
    assume(B, e->args[0], env, &ignored, &env_arg[1]); /* y runs only where x fails */
  }
  for (int i = 0; i < e->nargs; i++)
    if (walk(B, e->args[i], i < 3 ? env_arg[i] : env) != PK_OK) return pk_ctx_status(B->ctx);
  return PK_OK;
}

pk_status pk_te_check_bounds(pk_ctx *ctx, const pk_te_tensor *t, const char *filename) {
  bounds B = {.ctx = ctx, .file = filename, .budget = BOUNDS_BUDGET};
  /* a scatter_add's destinations read tensors too (its ids); where they point is not a
   * read, and an update outside the tensor is dropped */
  for (int d = 0; t->dom_ndim && d < t->ndim; d++)
    if (walk(&B, t->dest[d], NULL) != PK_OK) return pk_ctx_status(ctx);
  return walk(&B, t->body, NULL);
}
