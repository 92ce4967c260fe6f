/* checker.c — validates a program (parsed or built in C): names, shapes, reduction
 * placement, dtypes (filling every expr->dtype, settling untyped literals), literal integer
 * division by zero; bounds.c then proves every read stays inside its tensor. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parse_impl.h"

typedef struct checker {
  pk_ctx *ctx;
  pk_te_program *p;
  const pk_te_src *src;
  const pk_te_tensor *cur; /* the compute being checked */
  bool *reduce_used;       /* by reduce axis id: listed by some reduction */
} checker;

/* Literals have no type of their own until context gives them one ("untyped"): an integer
 * literal may become any numeric type, a float literal only a float type. A ty is a
 * pkrt_dtype or one of these. */
typedef int ty;
enum { TY_ERROR = -1, TY_UINT = 100, TY_UFLOAT = 101 };

static bool is_untyped(ty t) { return t == TY_UINT || t == TY_UFLOAT; }
static pkrt_dtype default_dtype(ty t) { return t == TY_UFLOAT ? PKRT_DTYPE_F32 : PKRT_DTYPE_I64; }

static const char *ty_name(ty t) {
  if (t == TY_UINT) return "integer literal";
  if (t == TY_UFLOAT) return "float literal";
  return pkrt_dtype_name((pkrt_dtype)t);
}

static pk_status fail_at(checker *C, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static pk_status fail_at(checker *C, int line, int col, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *file = C->src ? C->src->filename : NULL;
  return pk_ctx_fail(C->ctx, PK_ERR_CHECK, "%s%s", pk_te_where(C->ctx, file, line, col), msg);
}

#define FAIL_EXPR(C, e, ...) fail_at((C), (e)->line, (e)->col, __VA_ARGS__)
#define FAIL_TENSOR(C, t, ...) fail_at((C), (t)->line, (t)->col, __VA_ARGS__)

static pk_status fail_reduce_axis(checker *C, const pk_te_axis *a, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static pk_status fail_reduce_axis(checker *C, const pk_te_axis *a, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  bool known = C->src && a->id < C->src->nreduce;
  return fail_at(C, known ? C->src->reduce_line[a->id] : 0, known ? C->src->reduce_col[a->id] : 0,
                 "%s", msg);
}

/* ---- declarations ---- */

static pk_status check_dtype_storable(checker *C, const pk_te_tensor *t, pkrt_dtype d) {
  if (d == PKRT_DTYPE_F16 || d == PKRT_DTYPE_BF16)
    return FAIL_TENSOR(C, t, "dtype %s of '%s' is not supported yet (use f32)", pkrt_dtype_name(d), t->name);
  if (!pk_dtype_is_float(d) && !pk_dtype_is_int(d))
    return FAIL_TENSOR(C, t, "'%s' has dtype %s; tensors hold f32, f64, i32 or i64", t->name,
                       pkrt_dtype_name(d));
  return PK_OK;
}

static bool name_taken_before(const checker *C, const char *name, int tensor_id) {
  for (int i = 0; i < tensor_id; i++)
    if (strcmp(C->p->tensors[i]->name, name) == 0) return true;
  return false;
}

static pk_status check_reduce_axes(checker *C) {
  for (int i = 0; i < C->p->nreduce; i++) {
    const pk_te_axis *a = C->p->reduce_axes[i];
    int64_t extent;
    PK_ASSERT(a->id == i && a->reduce);
    if (a->lo >= a->hi)
      return fail_reduce_axis(C, a, "reduce axis '%s' is empty: reduce_axis(%lld, %lld) needs lo < hi",
                              a->name, (long long)a->lo, (long long)a->hi);
    if (__builtin_sub_overflow(a->hi, a->lo, &extent))
      return fail_reduce_axis(C, a, "extent of reduce axis '%s' overflows int64", a->name);
    for (int j = 0; j < i; j++)
      if (strcmp(C->p->reduce_axes[j]->name, a->name) == 0)
        return fail_reduce_axis(C, a, "redefinition of reduce axis '%s'", a->name);
    if (name_taken_before(C, a->name, C->p->ntensors))
      return fail_reduce_axis(C, a, "reduce axis '%s' has the name of a tensor", a->name);
  }
  return PK_OK;
}

static pk_status check_shape(checker *C, const pk_te_tensor *t) {
  if (t->ndim < 1 || t->ndim > PK_TE_MAX_DIMS)
    return FAIL_TENSOR(C, t, "'%s' has %d dims; tensors have 1 to %d", t->name, t->ndim, PK_TE_MAX_DIMS);
  for (int d = 0; d < t->ndim; d++)
    if (t->shape[d] < 1)
      return FAIL_TENSOR(C, t, "dim %d of '%s' is %lld; every dim must be >= 1", d, t->name,
                         (long long)t->shape[d]);
  if (pk_te_tensor_numel(t) < 0)
    return FAIL_TENSOR(C, t, "element count of '%s' overflows int64", t->name);
  return PK_OK;
}

static pk_status check_spatial_axes(checker *C, const pk_te_tensor *t) {
  for (int d = 0; d < t->ndim; d++) {
    const pk_te_axis *a = t->axes[d];
    if (a->reduce || a->owner != t || a->id != d || a->lo != 0 || a->hi != t->shape[d])
      return FAIL_TENSOR(C, t, "axis %d of '%s' does not match its shape", d, t->name);
    for (int e = 0; e < d; e++)
      if (strcmp(t->axes[e]->name, a->name) == 0)
        return FAIL_TENSOR(C, t, "axis '%s' of '%s' is named twice", a->name, t->name);
    if (name_taken_before(C, a->name, t->id + 1)) /* earlier tensors and the compute itself */
      return FAIL_TENSOR(C, t, "axis '%s' of '%s' shadows the tensor of that name", a->name, t->name);
    for (int i = 0; i < C->p->nreduce; i++)
      if (strcmp(C->p->reduce_axes[i]->name, a->name) == 0)
        return FAIL_TENSOR(C, t, "axis '%s' of '%s' shadows the reduce axis of that name", a->name,
                           t->name);
  }
  return PK_OK;
}

/* ---- structure: depth, node shapes, names, reductions ---- */

static pk_status check_depth(checker *C, const pk_expr *e, int depth) {
  if (depth > PK_TE_MAX_DEPTH)
    return FAIL_EXPR(C, e, "expression nested too deeply (more than %d levels)", PK_TE_MAX_DEPTH);
  for (int i = 0; i < e->nargs; i++)
    if (!e->args[i]) return FAIL_EXPR(C, e, "malformed expression: missing operand");
  for (int i = 0; i < e->nargs; i++)
    if (check_depth(C, e->args[i], depth + 1) != PK_OK) return pk_ctx_status(C->ctx);
  return PK_OK;
}

static bool op_in(pk_eop op, pk_eop first, pk_eop last) { return op >= first && op <= last; }

/* Operand counts and operators a kind allows; only C-built programs can get these wrong. */
static bool well_formed(const pk_expr *e) {
  switch (e->kind) {
  case PK_EXPR_INT: case PK_EXPR_FLOAT: return e->nargs == 0;
  case PK_EXPR_AXIS: return e->nargs == 0 && e->axis;
  case PK_EXPR_READ: return e->tensor != NULL;
  case PK_EXPR_UNARY: return e->nargs == 1 && (e->op == PK_EOP_NEG || e->op == PK_EOP_NOT);
  case PK_EXPR_BINARY: return e->nargs == 2 && op_in(e->op, PK_EOP_ADD, PK_EOP_OR);
  case PK_EXPR_SELECT: return e->nargs == 3;
  case PK_EXPR_CALL:
    return op_in(e->op, PK_EOP_EXP, PK_EOP_HASH) &&
           e->nargs == (e->op == PK_EOP_POW ? 2 : e->op == PK_EOP_HASH ? 3 : 1);
  case PK_EXPR_CAST: return e->nargs == 1;
  case PK_EXPR_REDUCE: return e->nargs == 1 && e->naxes >= 1 && op_in(e->op, PK_EOP_SUM, PK_EOP_RMIN);
  }
  return false;
}

static bool listed_by(const pk_expr *reduction, const pk_te_axis *a) {
  for (int i = 0; reduction && i < reduction->naxes; i++)
    if (reduction->axes[i] == a) return true;
  return false;
}

static pk_status check_reduction_axes(checker *C, const pk_expr *e) {
  int64_t points = 1;
  for (int i = 0; i < e->naxes; i++) {
    const pk_te_axis *a = e->axes[i];
    if (!a || !a->reduce || a->id < 0 || a->id >= C->p->nreduce || C->p->reduce_axes[a->id] != a)
      return FAIL_EXPR(C, e, "'%s' is not a reduce axis of this program", a ? a->name : "(null)");
    for (int j = 0; j < i; j++)
      if (e->axes[j] == a)
        return FAIL_EXPR(C, e, "reduce axis '%s' appears twice in one reduction", a->name);
    if (pk_i64_mul(points, a->hi - a->lo, &points))
      return FAIL_EXPR(C, e, "number of reduction points overflows int64");
    C->reduce_used[a->id] = true;
  }
  return PK_OK;
}

/* reduction: the enclosing reduction (only ever the body's root), for reduce-axis scoping. */
static pk_status check_structure(checker *C, const pk_expr *e, const pk_expr *reduction,
                                 bool at_top) {
  if (!well_formed(e)) return FAIL_EXPR(C, e, "malformed expression node");
  switch (e->kind) {
  case PK_EXPR_FLOAT:
    if (!isfinite(e->fval)) return FAIL_EXPR(C, e, "float literals must be finite");
    break;
  case PK_EXPR_AXIS:
    if (!e->axis->reduce && e->axis->owner != C->cur)
      return FAIL_EXPR(C, e, "axis '%s' does not belong to compute '%s'", e->axis->name, C->cur->name);
    if (!e->axis->reduce && C->cur->dom_ndim &&
        (e->axis->id < 0 || e->axis->id >= C->cur->dom_ndim || C->cur->dom_axes[e->axis->id] != e->axis))
      return FAIL_EXPR(C, e, "scatter_add '%s' uses an axis outside its domain", C->cur->name);
    if (e->axis->reduce && !listed_by(reduction, e->axis))
      return FAIL_EXPR(C, e, "reduce axis '%s' is used outside a reduction over it", e->axis->name);
    break;
  case PK_EXPR_READ: {
    const pk_te_tensor *t = e->tensor;
    if (t->id < 0 || t->id >= C->p->ntensors || C->p->tensors[t->id] != t)
      return FAIL_EXPR(C, e, "read of '%s', which is not in this program", t->name);
    if (t == C->cur) return FAIL_EXPR(C, e, "compute '%s' reads itself", t->name);
    /* Its elements are final only after the last update: a reader in the same kernel
     * would need a barrier between the nests, which kernels do not have. */
    if (t->kind == PK_TE_COMPUTE && t->dom_ndim)
      return FAIL_EXPR(C, e, "'%s' is a scatter_add result, which no compute may read", t->name);
    if (t->id > C->cur->id)
      return FAIL_EXPR(C, e, "compute '%s' reads '%s', which is defined after it", C->cur->name, t->name);
    if (e->nargs != t->ndim)
      return FAIL_EXPR(C, e, "wrong index arity: '%s' has %d dim%s but is read with %d ind%s", t->name,
                       t->ndim, t->ndim == 1 ? "" : "s", e->nargs, e->nargs == 1 ? "ex" : "ices");
    break;
  }
  case PK_EXPR_REDUCE:
    if (!at_top) return FAIL_EXPR(C, e, "reduction must be the whole body of a compute");
    if (check_reduction_axes(C, e) != PK_OK) return pk_ctx_status(C->ctx);
    reduction = e;
    break;
  default: break;
  }
  for (int i = 0; i < e->nargs; i++)
    if (check_structure(C, e->args[i], reduction, false) != PK_OK) return pk_ctx_status(C->ctx);
  return PK_OK;
}

/* ---- types ---- */

static ty infer(checker *C, pk_expr *e);

/* Gives an untyped subtree its type from context; typed nodes keep theirs. */
static bool settle(checker *C, pk_expr *e, pkrt_dtype to) {
  if (e->dtype != PKRT_DTYPE_INVALID) return true;
  if (e->kind == PK_EXPR_FLOAT && pk_dtype_is_int(to)) {
    FAIL_EXPR(C, e, "float literal in integer context: %g used as %s; write an integer or use cast(...)",
              e->fval, pkrt_dtype_name(to));
    return false;
  }
  if (e->kind == PK_EXPR_CALL && e->op != PK_EOP_ABS && pk_dtype_is_int(to)) {
    FAIL_EXPR(C, e, "%s yields a float, used here as %s; use cast(...)", pk_eop_name(e->op),
              pkrt_dtype_name(to));
    return false;
  }
  /* A select's condition is typed already, so settling skips it. */
  for (int i = 0; i < e->nargs; i++)
    if (!settle(C, e->args[i], to)) return false;
  e->dtype = to;
  return true;
}

static ty settle_default(checker *C, pk_expr *e, ty t) {
  if (!is_untyped(t)) return t;
  return settle(C, e, default_dtype(t)) ? (ty)default_dtype(t) : TY_ERROR;
}

/* Both operands of e must end up one type: literals adopt the other side's. */
static ty unify(checker *C, pk_expr *e, const char *what, pk_expr *a, ty ta, pk_expr *b, ty tb) {
  if (is_untyped(ta) && is_untyped(tb)) return ta == TY_UFLOAT || tb == TY_UFLOAT ? TY_UFLOAT : TY_UINT;
  if (ta != tb && (ta == PKRT_DTYPE_BOOL || tb == PKRT_DTYPE_BOOL)) {
    FAIL_EXPR(C, e, "dtype mismatch: %s vs %s in '%s'", ty_name(ta), ty_name(tb), what);
    return TY_ERROR;
  }
  if (is_untyped(ta)) return settle(C, a, (pkrt_dtype)tb) ? tb : TY_ERROR;
  if (is_untyped(tb)) return settle(C, b, (pkrt_dtype)ta) ? ta : TY_ERROR;
  if (ta == tb) return ta;
  FAIL_EXPR(C, e, "dtype mismatch: %s vs %s in '%s'; use cast(...)", ty_name(ta), ty_name(tb), what);
  return TY_ERROR;
}

static ty typed(pk_expr *e, ty t) {
  if (t != TY_ERROR && !is_untyped(t)) e->dtype = (pkrt_dtype)t;
  return t;
}

static ty need_number(checker *C, pk_expr *e, ty t, const char *what) {
  if (t == PKRT_DTYPE_BOOL) {
    FAIL_EXPR(C, e, "'%s' needs numbers, got bool; use select(...) or cast(...)", what);
    return TY_ERROR;
  }
  return t;
}

static ty need_bool(checker *C, pk_expr *e, ty t, const char *what) {
  if (t != TY_ERROR && t != PKRT_DTYPE_BOOL) {
    FAIL_EXPR(C, e, "'%s' needs a bool (a comparison), got %s", what, ty_name(t));
    return TY_ERROR;
  }
  return t;
}

static ty infer_read(checker *C, pk_expr *e) {
  for (int d = 0; d < e->nargs; d++) {
    pk_expr *ix = e->args[d];
    ty t = infer(C, ix);
    if (t == TY_ERROR) return TY_ERROR;
    if (t == TY_UINT && !settle(C, ix, PKRT_DTYPE_I64)) return TY_ERROR;
    if (t == TY_UFLOAT || (!is_untyped(t) && !pk_dtype_is_int((pkrt_dtype)t))) {
      FAIL_EXPR(C, ix, "index %d of '%s' must be an integer, got %s", d, e->tensor->name, ty_name(t));
      return TY_ERROR;
    }
  }
  return typed(e, e->tensor->dtype);
}

static ty infer_binary(checker *C, pk_expr *e) {
  const char *what = pk_eop_name(e->op);
  ty ta = infer(C, e->args[0]);
  ty tb = ta == TY_ERROR ? TY_ERROR : infer(C, e->args[1]);
  if (tb == TY_ERROR) return TY_ERROR;
  if (e->op == PK_EOP_AND || e->op == PK_EOP_OR) {
    if (need_bool(C, e->args[0], ta, what) == TY_ERROR || need_bool(C, e->args[1], tb, what) == TY_ERROR)
      return TY_ERROR;
    return typed(e, PKRT_DTYPE_BOOL);
  }
  if (need_number(C, e, ta, what) == TY_ERROR || need_number(C, e, tb, what) == TY_ERROR) return TY_ERROR;
  ty t = unify(C, e, what, e->args[0], ta, e->args[1], tb);
  if (t == TY_ERROR || !op_in(e->op, PK_EOP_LT, PK_EOP_NE)) return typed(e, t);
  /* A comparison of two literals still needs its operands typed. */
  if (settle_default(C, e->args[0], t) == TY_ERROR || settle_default(C, e->args[1], t) == TY_ERROR)
    return TY_ERROR;
  return typed(e, PKRT_DTYPE_BOOL);
}

/* hash(a, b, c): each operand an integer (a literal becomes i64), the result i64. */
static ty infer_hash(checker *C, pk_expr *e) {
  for (int i = 0; i < 3; i++) {
    ty t = infer(C, e->args[i]);
    if (t == TY_ERROR) return TY_ERROR;
    if (t == TY_UINT && !settle(C, e->args[i], PKRT_DTYPE_I64)) return TY_ERROR;
    if (t == TY_UFLOAT || (!is_untyped(t) && !pk_dtype_is_int((pkrt_dtype)t))) {
      FAIL_EXPR(C, e->args[i], "operand %d of hash must be an integer, got %s", i + 1, ty_name(t));
      return TY_ERROR;
    }
  }
  return typed(e, PKRT_DTYPE_I64);
}

static ty infer_call(checker *C, pk_expr *e) {
  const char *what = pk_eop_name(e->op);
  if (e->op == PK_EOP_HASH) return infer_hash(C, e);
  ty t = infer(C, e->args[0]);
  if (need_number(C, e, t, what) == TY_ERROR) return TY_ERROR;
  if (e->op == PK_EOP_POW) {
    ty tb = infer(C, e->args[1]);
    if (need_number(C, e, tb, what) == TY_ERROR) return TY_ERROR;
    t = unify(C, e, what, e->args[0], t, e->args[1], tb);
    if (t == TY_ERROR) return TY_ERROR;
  }
  if (e->op == PK_EOP_ABS) return typed(e, t);
  if (t == TY_UINT) return TY_UFLOAT; /* exp(1): the literal becomes a float */
  if (!is_untyped(t) && !pk_dtype_is_float((pkrt_dtype)t)) {
    FAIL_EXPR(C, e, "%s needs a float operand, got %s; use cast(f32, ...)", what, ty_name(t));
    return TY_ERROR;
  }
  return typed(e, t);
}

static ty infer_cast(checker *C, pk_expr *e) {
  pkrt_dtype to = e->dtype;
  if (to == PKRT_DTYPE_BOOL) {
    FAIL_EXPR(C, e, "cannot cast to bool; compare instead (x != 0)");
    return TY_ERROR;
  }
  if (to == PKRT_DTYPE_F16 || to == PKRT_DTYPE_BF16) {
    FAIL_EXPR(C, e, "cast to %s is not supported yet", pkrt_dtype_name(to));
    return TY_ERROR;
  }
  if (!pk_dtype_is_float(to) && !pk_dtype_is_int(to)) {
    FAIL_EXPR(C, e, "cast to an invalid dtype");
    return TY_ERROR;
  }
  ty t = infer(C, e->args[0]);
  if (t == TY_UINT || (t == TY_UFLOAT && pk_dtype_is_float(to)))
    return settle(C, e->args[0], to) ? (ty)to : TY_ERROR;
  return settle_default(C, e->args[0], t) == TY_ERROR ? TY_ERROR : (ty)to;
}

/* Returns the node's type; typed nodes get e->dtype now, untyped ones when settled. */
static ty infer(checker *C, pk_expr *e) {
  switch (e->kind) {
  case PK_EXPR_INT:
  case PK_EXPR_FLOAT:
    /* Settled by an earlier check (or typed by a C builder): keep that type. */
    if (e->dtype == PKRT_DTYPE_INVALID) return e->kind == PK_EXPR_INT ? TY_UINT : TY_UFLOAT;
    if (pk_dtype_is_float(e->dtype) || (e->kind == PK_EXPR_INT && pk_dtype_is_int(e->dtype)))
      return e->dtype;
    FAIL_EXPR(C, e, "literal typed %s", pkrt_dtype_name(e->dtype));
    return TY_ERROR;
  case PK_EXPR_AXIS: return typed(e, PKRT_DTYPE_I64);
  case PK_EXPR_READ: return infer_read(C, e);
  case PK_EXPR_UNARY: {
    ty t = infer(C, e->args[0]);
    if (e->op == PK_EOP_NOT) return typed(e, need_bool(C, e, t, "!") == TY_ERROR ? TY_ERROR : t);
    return typed(e, need_number(C, e, t, "-"));
  }
  case PK_EXPR_BINARY: return infer_binary(C, e);
  case PK_EXPR_SELECT: {
    ty tc = infer(C, e->args[0]);
    if (need_bool(C, e->args[0], tc, "select") == TY_ERROR) return TY_ERROR;
    ty ta = infer(C, e->args[1]);
    ty tb = ta == TY_ERROR ? TY_ERROR : infer(C, e->args[2]);
    if (tb == TY_ERROR) return TY_ERROR;
    return typed(e, unify(C, e, "select", e->args[1], ta, e->args[2], tb));
  }
  case PK_EXPR_CALL: return infer_call(C, e);
  case PK_EXPR_CAST: return infer_cast(C, e);
  case PK_EXPR_REDUCE: {
    ty t = need_number(C, e, infer(C, e->args[0]), pk_eop_name(e->op));
    if (t == TY_ERROR) return TY_ERROR;
    return typed(e, settle_default(C, e->args[0], t));
  }
  }
  return TY_ERROR;
}

/* x / 0 and x % 0 are defined for integers (0 and x), but a literal zero divisor is a bug. */
static pk_status check_literal_zero_divisor(checker *C, const pk_expr *e) {
  if (e->kind == PK_EXPR_BINARY && (e->op == PK_EOP_DIV || e->op == PK_EOP_MOD) &&
      pk_dtype_is_int(e->dtype)) {
    const pk_expr *d = e->args[1];
    while (d->kind == PK_EXPR_UNARY && d->op == PK_EOP_NEG) d = d->args[0];
    if (d->kind == PK_EXPR_INT && d->ival == 0)
      return FAIL_EXPR(C, e, "integer %s by literal zero", e->op == PK_EOP_DIV ? "division" : "modulo");
  }
  for (int i = 0; i < e->nargs; i++)
    if (check_literal_zero_divisor(C, e->args[i]) != PK_OK) return pk_ctx_status(C->ctx);
  return PK_OK;
}

/* scatter_add: domain axes like a compute's, destinations integer and reduction-free,
 * the value reduction-free; reads inside both provably in bounds. The destination itself
 * need not be: an update outside the tensor is dropped (docs/te.md). */
static pk_status check_scatter(checker *C, pk_te_tensor *t) {
  if (t->dom_ndim < 1 || t->dom_ndim > PK_TE_MAX_DIMS || !t->dom_axes || !t->dest)
    return FAIL_TENSOR(C, t, "scatter_add '%s' has a malformed domain", t->name);
  int64_t points = 1;
  for (int d = 0; d < t->dom_ndim; d++) {
    const pk_te_axis *a = t->dom_axes[d];
    if (t->dom_shape[d] < 1)
      return FAIL_TENSOR(C, t, "domain dim %d of '%s' is %lld; every dim must be >= 1", d, t->name,
                         (long long)t->dom_shape[d]);
    if (pk_i64_mul(points, t->dom_shape[d], &points))
      return FAIL_TENSOR(C, t, "domain of '%s' has more points than int64 holds", t->name);
    if (!a || a->reduce || a->owner != t || a->id != d || a->lo != 0 || a->hi != t->dom_shape[d])
      return FAIL_TENSOR(C, t, "domain axis %d of '%s' does not match its shape", d, t->name);
  }
  if (!t->body) return FAIL_TENSOR(C, t, "scatter_add '%s' has no value", t->name);
  for (int d = 0; d < t->ndim; d++) {
    pk_expr *e = t->dest[d];
    if (!e) return FAIL_TENSOR(C, t, "scatter_add '%s' has no destination index %d", t->name, d);
    if (check_depth(C, e, 1) != PK_OK || check_structure(C, e, NULL, false) != PK_OK)
      return pk_ctx_status(C->ctx);
    ty ti = infer(C, e);
    if (ti == TY_ERROR) return pk_ctx_status(C->ctx);
    if (ti == TY_UINT && !settle(C, e, PKRT_DTYPE_I64)) return pk_ctx_status(C->ctx);
    if (ti == TY_UFLOAT || (!is_untyped(ti) && !pk_dtype_is_int((pkrt_dtype)ti)))
      return FAIL_EXPR(C, e, "destination index %d of '%s' must be an integer, got %s", d, t->name,
                       ty_name(ti));
    if (check_literal_zero_divisor(C, e) != PK_OK) return pk_ctx_status(C->ctx);
  }
  if (check_depth(C, t->body, 1) != PK_OK || check_structure(C, t->body, NULL, false) != PK_OK)
    return pk_ctx_status(C->ctx);
  ty body = infer(C, t->body);
  body = body == TY_ERROR ? TY_ERROR : settle_default(C, t->body, body);
  if (body == TY_ERROR) return pk_ctx_status(C->ctx);
  if (body == PKRT_DTYPE_BOOL)
    return FAIL_EXPR(C, t->body, "scatter_add '%s' adds a bool; use select or cast", t->name);
  t->dtype = (pkrt_dtype)body;
  if (check_literal_zero_divisor(C, t->body) != PK_OK) return pk_ctx_status(C->ctx);
  return pk_te_check_bounds(C->ctx, t, C->src ? C->src->filename : NULL);
}

static pk_status check_compute(checker *C, pk_te_tensor *t) {
  if (!t->axes) return FAIL_TENSOR(C, t, "compute '%s' has no axes", t->name);
  if (check_spatial_axes(C, t) != PK_OK) return pk_ctx_status(C->ctx);
  if (t->dom_ndim) return check_scatter(C, t);
  if (!t->body) return FAIL_TENSOR(C, t, "compute '%s' has no body", t->name);
  if (check_depth(C, t->body, 1) != PK_OK || check_structure(C, t->body, NULL, true) != PK_OK)
    return pk_ctx_status(C->ctx);
  ty body = infer(C, t->body);
  body = body == TY_ERROR ? TY_ERROR : settle_default(C, t->body, body);
  if (body == TY_ERROR) return pk_ctx_status(C->ctx);
  if (body == PKRT_DTYPE_BOOL)
    return FAIL_EXPR(C, t->body, "compute '%s' yields bool; use select or cast", t->name);
  t->dtype = (pkrt_dtype)body;
  if (check_literal_zero_divisor(C, t->body) != PK_OK) return pk_ctx_status(C->ctx);
  return pk_te_check_bounds(C->ctx, t, C->src ? C->src->filename : NULL);
}

pk_status pk_te_check_src(pk_ctx *ctx, pk_te_program *p, const pk_te_src *src) {
  checker C = {.ctx = ctx, .p = p, .src = src};
  C.reduce_used = pk_alloc(ctx, (size_t)(p->nreduce + 1) * sizeof *C.reduce_used);
  if (check_reduce_axes(&C) != PK_OK) return pk_ctx_status(ctx);
  for (int i = 0; i < p->ntensors; i++) {
    pk_te_tensor *t = p->tensors[i];
    PK_ASSERT(t->id == i);
    if (name_taken_before(&C, t->name, i)) return FAIL_TENSOR(&C, t, "redefinition of '%s'", t->name);
    if (check_shape(&C, t) != PK_OK) return pk_ctx_status(ctx);
    if (t->kind == PK_TE_PLACEHOLDER) {
      if (check_dtype_storable(&C, t, t->dtype) != PK_OK) return pk_ctx_status(ctx);
      continue;
    }
    C.cur = t;
    if (check_compute(&C, t) != PK_OK) return pk_ctx_status(ctx);
  }
  for (int i = 0; i < p->nreduce; i++)
    if (!C.reduce_used[i])
      return fail_reduce_axis(&C, p->reduce_axes[i], "reduce axis '%s' is declared but unused",
                              p->reduce_axes[i]->name);
  return PK_OK;
}

pk_status pk_te_check(pk_ctx *ctx, pk_te_program *p) { return pk_te_check_src(ctx, p, NULL); }
