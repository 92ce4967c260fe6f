/* interp.c — the reference interpreter: evaluates every compute of a checked program point
 * by point (floats in double with an error magnitude S, integers exactly), the oracle that
 * every generated kernel is compared with. Slow on purpose: one tree walk per element.
 *
 * Semantics the code generators must match (docs/te.md says the same):
 *   - integer + - * and unary - wrap (two's complement; I32 results wrap to 32 bits);
 *     / and % are floor division and modulo, x / 0 = 0, x % 0 = x, MIN / -1 wraps to MIN;
 *   - float % is a - floor(a / b) * b;
 *   - max/min, binary or reduction, propagate NaN: if any operand/term is NaN the result is
 *     NaN (unlike C's fmax); on ties the earlier operand/term is chosen;
 *   - cast float -> int: NaN -> 0, saturating, truncating toward zero; bool -> 0/1;
 *   - select, && and || evaluate only the taken branch;
 *   - reductions start at 0 (sum), -inf / +inf (float max / min), the type's min / max
 *     (integer max / min); the last reduce axis varies fastest.
 */
#include <math.h>
#include <string.h>

#include "pk_te.h"
#include "pk_verify.h"

/* Bound on the interpreter's storage: beyond it pk_te_ref_new fails instead of letting the
 * arena assert on out-of-memory. */
#define REF_MAX_BYTES ((uint64_t)8 << 30)

#define TWO_OVER_SQRT_PI 1.12837916709551257390

/* One value of any type: floats use v (value) and s (magnitude S); integers and bools i. */
typedef struct ref_value {
  double v, s;
  int64_t i;
} ref_value;

typedef struct interp_state {
  pk_ctx *ctx;
  const pk_te_program *p;
  const pk_te_ref *ref;
  int64_t spatial[PK_TE_MAX_DIMS]; /* values of the current compute's spatial axes */
  int64_t *reduce;                 /* values of program->reduce_axes, by id */
  pk_status status;                /* first failure; evaluation stops at the next element */
} interp_state;

static ref_value eval(interp_state *st, const pk_expr *e);

/* ---- values ---- */

static ref_value float_value(double v, double s) {
  /* An undefined magnitude (inf/inf, 0*inf) means "unbounded", never "anything goes
   * silently": inf keeps every finite kernel value acceptable and NaN placement checked. */
  ref_value r = {v, isnan(s) ? INFINITY : s, 0};
  return r;
}

static ref_value int_value(int64_t i) {
  ref_value r = {0, 0, i};
  return r;
}

/* Reinterprets u as the two's-complement integer of type t (I32: low 32 bits). */
static int64_t wrap_int(pkrt_dtype t, uint64_t u) {
  if (t == PKRT_DTYPE_I32) {
    uint32_t w = (uint32_t)u;
    return w >= 0x80000000u ? (int64_t)w - ((int64_t)1 << 32) : (int64_t)w;
  }
  int64_t r;
  memcpy(&r, &u, sizeof r);
  return r;
}

static int64_t int_type_min(pkrt_dtype t) { return t == PKRT_DTYPE_I32 ? INT32_MIN : INT64_MIN; }
static int64_t int_type_max(pkrt_dtype t) { return t == PKRT_DTYPE_I32 ? INT32_MAX : INT64_MAX; }

static int64_t int_floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap_int(PKRT_DTYPE_I64, 0 - (uint64_t)a); /* MIN / -1 wraps */
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) q--;
  return q;
}

static int64_t int_floor_mod(int64_t a, int64_t b) {
  if (b == 0) return a;
  if (b == -1) return 0; /* a % -1 would trap for MIN */
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

/* NaN-propagating max/min; ties keep a. */
/* The value of the chosen operand, but the larger S of the two: near a tie the kernel's
 * rounding may choose the other operand, whose error is then what the result carries
 * (max(C, 0.0) with C within rounding of 0 must allow C's error, not 0's). */
static ref_value float_pick_max(ref_value a, ref_value b) {
  if (isnan(a.v)) return a;
  if (isnan(b.v)) return b;
  ref_value r = b.v > a.v ? b : a;
  r.s = fmax(a.s, b.s);
  return r;
}

static ref_value float_pick_min(ref_value a, ref_value b) {
  if (isnan(a.v)) return a;
  if (isnan(b.v)) return b;
  ref_value r = b.v < a.v ? b : a;
  r.s = fmax(a.s, b.s);
  return r;
}

/* Float -> integer: NaN -> 0, saturate, truncate toward zero. The limits are exact
 * powers of two, so the comparisons are exact in double. */
static int64_t float_to_int(pkrt_dtype t, double v) {
  if (isnan(v)) return 0;
  if (t == PKRT_DTYPE_I32) {
    if (v >= 2147483648.0) return INT32_MAX;
    if (v <= -2147483649.0) return INT32_MIN;
    return (int64_t)v;
  }
  if (v >= 9223372036854775808.0) return INT64_MAX;
  if (v < -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

/* ---- expression kinds ---- */

static ref_value eval_literal(const pk_expr *e) {
  bool to_float = pk_dtype_is_float(e->dtype);
  if (e->kind == PK_EXPR_INT) {
    if (to_float) return float_value((double)e->ival, fabs((double)e->ival));
    return int_value(wrap_int(e->dtype, (uint64_t)e->ival));
  }
  if (to_float) return float_value(e->fval, fabs(e->fval));
  return int_value(float_to_int(e->dtype, e->fval));
}

static ref_value eval_read(interp_state *st, const pk_expr *e) {
  const pk_te_tensor *t = e->tensor;
  int64_t off = 0;
  for (int d = 0; d < t->ndim; d++) {
    ref_value ix = eval(st, e->args[d]);
    if (ix.i < 0 || ix.i >= t->shape[d]) {
      /* The checker proves every read in bounds; reaching this is a checker bug, but it
       * must be reported, not turned into a stray memory read. */
      if (st->status == PK_OK)
        st->status = pk_ctx_fail(st->ctx, PK_ERR_CHECK,
                                 "interpreter: read of '%s' dimension %d at index %lld is "
                                 "outside [0, %lld)",
                                 t->name ? t->name : "?", d, (long long)ix.i,
                                 (long long)t->shape[d]);
      return int_value(0);
    }
    off = off * t->shape[d] + ix.i;
  }
  const pk_te_ref_tensor *rt = &st->ref->tensors[t->id];
  if (pk_dtype_is_float(t->dtype)) return float_value(rt->val[off], rt->mag[off]);
  return int_value(rt->ival[off]);
}

static ref_value eval_unary(interp_state *st, const pk_expr *e) {
  ref_value a = eval(st, e->args[0]);
  if (e->op == PK_EOP_NOT) return int_value(!a.i);
  /* PK_EOP_NEG */
  if (pk_dtype_is_float(e->dtype)) return float_value(-a.v, a.s);
  return int_value(wrap_int(e->dtype, 0 - (uint64_t)a.i));
}

static ref_value eval_float_binary(pk_eop op, ref_value a, ref_value b) {
  switch (op) {
  case PK_EOP_ADD: return float_value(a.v + b.v, a.s + b.s);
  case PK_EOP_SUB: return float_value(a.v - b.v, a.s + b.s);
  case PK_EOP_MUL: return float_value(a.v * b.v, a.s * b.s);
  case PK_EOP_DIV:
    return float_value(a.v / b.v, a.s / fabs(b.v) + fabs(a.v) * b.s / (b.v * b.v));
  case PK_EOP_MOD: {
    double q = floor(a.v / b.v);
    return float_value(a.v - q * b.v, a.s + fabs(q) * b.s);
  }
  case PK_EOP_MIN: return float_pick_min(a, b);
  case PK_EOP_MAX: return float_pick_max(a, b);
  case PK_EOP_LT: return int_value(a.v < b.v);
  case PK_EOP_LE: return int_value(a.v <= b.v);
  case PK_EOP_GT: return int_value(a.v > b.v);
  case PK_EOP_GE: return int_value(a.v >= b.v);
  case PK_EOP_EQ: return int_value(a.v == b.v);
  case PK_EOP_NE: return int_value(a.v != b.v);
  default: PK_ASSERT(!"float binary operator");
  }
}

/* Integer (and bool, for == and !=) operators; t is the result type for wrapping. */
static ref_value eval_int_binary(pk_eop op, pkrt_dtype t, ref_value a, ref_value b) {
  uint64_t ua = (uint64_t)a.i, ub = (uint64_t)b.i;
  switch (op) {
  case PK_EOP_ADD: return int_value(wrap_int(t, ua + ub));
  case PK_EOP_SUB: return int_value(wrap_int(t, ua - ub));
  case PK_EOP_MUL: return int_value(wrap_int(t, ua * ub));
  case PK_EOP_DIV: return int_value(wrap_int(t, (uint64_t)int_floor_div(a.i, b.i)));
  case PK_EOP_MOD: return int_value(wrap_int(t, (uint64_t)int_floor_mod(a.i, b.i)));
  case PK_EOP_MIN: return b.i < a.i ? b : a;
  case PK_EOP_MAX: return b.i > a.i ? b : a;
  case PK_EOP_LT: return int_value(a.i < b.i);
  case PK_EOP_LE: return int_value(a.i <= b.i);
  case PK_EOP_GT: return int_value(a.i > b.i);
  case PK_EOP_GE: return int_value(a.i >= b.i);
  case PK_EOP_EQ: return int_value(a.i == b.i);
  case PK_EOP_NE: return int_value(a.i != b.i);
  default: PK_ASSERT(!"integer binary operator");
  }
}

static ref_value eval_binary(interp_state *st, const pk_expr *e) {
  ref_value a = eval(st, e->args[0]);
  if (e->op == PK_EOP_AND) return a.i ? int_value(eval(st, e->args[1]).i != 0) : int_value(0);
  if (e->op == PK_EOP_OR) return a.i ? int_value(1) : int_value(eval(st, e->args[1]).i != 0);
  ref_value b = eval(st, e->args[1]);
  /* Comparisons have a BOOL result: the operand type decides how to compare. */
  if (pk_dtype_is_float(e->args[0]->dtype)) return eval_float_binary(e->op, a, b);
  return eval_int_binary(e->op, e->dtype, a, b);
}

static ref_value eval_select(interp_state *st, const pk_expr *e) {
  return eval(st, e->args[0]).i ? eval(st, e->args[1]) : eval(st, e->args[2]);
}

static double sigmoid(double x) {
  /* Written so that neither branch overflows exp. */
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  double t = exp(x);
  return t / (1.0 + t);
}

/* Intrinsic f(x): value |f(x)| + |f'(x)| * Sx, the first-order error propagation. */
static ref_value eval_float_call1(pk_eop op, ref_value x) {
  double v, d; /* f(x), |f'(x)| */
  switch (op) {
  case PK_EOP_EXP: v = exp(x.v); d = fabs(v); break;
  case PK_EOP_LOG: v = log(x.v); d = 1.0 / fabs(x.v); break;
  case PK_EOP_SQRT: v = sqrt(x.v); d = 0.5 / v; break;
  case PK_EOP_RSQRT: v = 1.0 / sqrt(x.v); d = 0.5 * fabs(v) / fabs(x.v); break;
  case PK_EOP_TANH: v = tanh(x.v); d = 1.0 - v * v; break;
  case PK_EOP_ERF: v = erf(x.v); d = TWO_OVER_SQRT_PI * exp(-x.v * x.v); break;
  case PK_EOP_SIGMOID: v = sigmoid(x.v); d = v * (1.0 - v); break;
  case PK_EOP_ABS: return float_value(fabs(x.v), x.s);
  default: PK_ASSERT(!"float intrinsic");
  }
  return float_value(v, fabs(v) + d * x.s);
}

static ref_value eval_pow(ref_value a, ref_value b) {
  double p = pow(a.v, b.v);
  double sa = fabs(b.v * pow(a.v, b.v - 1.0)) * a.s;
  /* d/db a^b = a^b ln|a|; where a^b is 0 that term is 0, not 0 * -inf. */
  double sb = p == 0.0 ? 0.0 : fabs(p * log(fabs(a.v))) * b.s;
  return float_value(p, fabs(p) + sa + sb);
}

static ref_value eval_call(interp_state *st, const pk_expr *e) {
  ref_value a = eval(st, e->args[0]);
  if (e->op == PK_EOP_HASH) {
    ref_value b = eval(st, e->args[1]);
    return int_value(pk_te_hash3(a.i, b.i, eval(st, e->args[2]).i));
  }
  if (e->op == PK_EOP_POW) return eval_pow(a, eval(st, e->args[1]));
  if (pk_dtype_is_float(e->dtype)) return eval_float_call1(e->op, a);
  PK_ASSERT(e->op == PK_EOP_ABS); /* the checker admits only abs on integers */
  return int_value(a.i < 0 ? wrap_int(e->dtype, 0 - (uint64_t)a.i) : a.i);
}

static ref_value eval_cast(interp_state *st, const pk_expr *e) {
  ref_value a = eval(st, e->args[0]);
  pkrt_dtype from = e->args[0]->dtype, to = e->dtype;
  bool from_float = pk_dtype_is_float(from);
  if (to == PKRT_DTYPE_BOOL) return int_value(from_float ? a.v != 0.0 : a.i != 0);
  if (pk_dtype_is_float(to)) {
    if (from_float) {
      /* A computed f32 value (or an f32 literal) reaches an f64 computation with f32
       * rounding error, up to PK_VERIFY_F32_REL * S. Measured with the f64 tolerance that
       * is a larger S; f32 inputs are exact and keep theirs. */
      bool exact = e->args[0]->kind == PK_EXPR_READ && e->args[0]->tensor->kind == PK_TE_PLACEHOLDER;
      if (from == PKRT_DTYPE_F32 && to == PKRT_DTYPE_F64 && !exact)
        a.s *= PK_VERIFY_F32_REL / PK_VERIFY_F64_REL;
      return a; /* kept in double: f64 -> f32 rounding is inside the f32 bound */
    }
    return float_value((double)a.i, fabs((double)a.i));
  }
  if (from_float) return int_value(float_to_int(to, a.v));
  return int_value(wrap_int(to, (uint64_t)a.i));
}

static ref_value reduce_init(pk_eop op, pkrt_dtype t) {
  if (pk_dtype_is_float(t)) {
    double v = op == PK_EOP_SUM ? 0.0 : op == PK_EOP_RMAX ? -INFINITY : INFINITY;
    return float_value(v, 0.0);
  }
  return int_value(op == PK_EOP_SUM ? 0 : op == PK_EOP_RMAX ? int_type_min(t) : int_type_max(t));
}

static ref_value reduce_step(pk_eop op, pkrt_dtype t, ref_value acc, ref_value x) {
  if (pk_dtype_is_float(t)) {
    if (op == PK_EOP_SUM) return float_value(acc.v + x.v, acc.s + x.s);
    return op == PK_EOP_RMAX ? float_pick_max(acc, x) : float_pick_min(acc, x);
  }
  if (op == PK_EOP_SUM) return int_value(wrap_int(t, (uint64_t)acc.i + (uint64_t)x.i));
  if (op == PK_EOP_RMAX) return x.i > acc.i ? x : acc;
  return x.i < acc.i ? x : acc;
}

static ref_value eval_reduce(interp_state *st, const pk_expr *e) {
  ref_value acc = reduce_init(e->op, e->dtype);
  for (int a = 0; a < e->naxes; a++) {
    if (e->axes[a]->lo >= e->axes[a]->hi) return acc; /* empty domain */
    st->reduce[e->axes[a]->id] = e->axes[a]->lo;
  }
  for (;;) {
    acc = reduce_step(e->op, e->dtype, acc, eval(st, e->args[0]));
    int a = e->naxes - 1; /* odometer: the last axis varies fastest */
    while (a >= 0 && ++st->reduce[e->axes[a]->id] == e->axes[a]->hi) {
      st->reduce[e->axes[a]->id] = e->axes[a]->lo;
      a--;
    }
    if (a < 0) return acc;
  }
}

static ref_value eval(interp_state *st, const pk_expr *e) {
  switch (e->kind) {
  case PK_EXPR_INT:
  case PK_EXPR_FLOAT: return eval_literal(e);
  case PK_EXPR_AXIS:
    return int_value(e->axis->reduce ? st->reduce[e->axis->id] : st->spatial[e->axis->id]);
  case PK_EXPR_READ: return eval_read(st, e);
  case PK_EXPR_UNARY: return eval_unary(st, e);
  case PK_EXPR_BINARY: return eval_binary(st, e);
  case PK_EXPR_SELECT: return eval_select(st, e);
  case PK_EXPR_CALL: return eval_call(st, e);
  case PK_EXPR_CAST: return eval_cast(st, e);
  case PK_EXPR_REDUCE: return eval_reduce(st, e);
  }
  PK_ASSERT(!"expression kind");
}

/* ---- programs ---- */

/* scatter_add: zeros, then every domain point in row-major order adds its value (and its
 * magnitude: the sum's error bound) at its destination, when that lies in the tensor.
 * Integer sums wrap like the kernel's. */
static pk_status run_scatter(interp_state *st, const pk_te_tensor *t, pk_te_ref_tensor *out) {
  bool is_float = pk_dtype_is_float(t->dtype);
  memset(st->spatial, 0, sizeof st->spatial);
  for (int64_t i = 0; i < out->numel; i++) { /* a second run of the same buffers starts over */
    if (is_float) out->val[i] = out->mag[i] = 0.0;
    else out->ival[i] = 0;
  }
  int64_t points = 1;
  for (int d = 0; d < t->dom_ndim; d++) points *= t->dom_shape[d];
  for (int64_t n = 0; n < points; n++) {
    int64_t flat = 0;
    bool inside = true;
    for (int d = 0; d < t->ndim; d++) {
      int64_t x = eval(st, t->dest[d]).i;
      inside = inside && x >= 0 && x < t->shape[d];
      flat = inside ? flat * t->shape[d] + x : 0;
    }
    if (inside) {
      ref_value r = eval(st, t->body);
      if (is_float) {
        out->val[flat] += r.v;
        out->mag[flat] += r.s;
      } else {
        out->ival[flat] = wrap_int(t->dtype, (uint64_t)out->ival[flat] + (uint64_t)r.i);
      }
    }
    if (st->status != PK_OK) return st->status;
    for (int d = t->dom_ndim - 1; d >= 0 && ++st->spatial[d] == t->dom_shape[d]; d--)
      st->spatial[d] = 0;
  }
  return PK_OK;
}

static pk_status run_compute(interp_state *st, const pk_te_tensor *t, pk_te_ref_tensor *out) {
  if (t->dom_ndim) return run_scatter(st, t, out);
  bool is_float = pk_dtype_is_float(t->dtype);
  memset(st->spatial, 0, sizeof st->spatial);
  for (int64_t flat = 0; flat < out->numel; flat++) {
    ref_value r = eval(st, t->body);
    if (st->status != PK_OK) return st->status;
    if (is_float) {
      out->val[flat] = r.v;
      out->mag[flat] = r.s;
    } else {
      out->ival[flat] = r.i;
    }
    for (int d = t->ndim - 1; d >= 0 && ++st->spatial[d] == t->shape[d]; d--)
      st->spatial[d] = 0;
  }
  return PK_OK;
}

/* Returns NULL (with PK_ERR_NOMEM in ctx) when the tensors would need more than
 * REF_MAX_BYTES; every buffer is zero-filled. */
pk_te_ref *pk_te_ref_new(pk_ctx *ctx, const pk_te_program *p) {
  uint64_t bytes = 0;
  for (int i = 0; i < p->ntensors; i++) {
    uint64_t n = (uint64_t)pk_te_tensor_numel(p->tensors[i]);
    uint64_t per = pk_dtype_is_float(p->tensors[i]->dtype) ? 16 : 8;
    if (n > REF_MAX_BYTES / per || (bytes += n * per) > REF_MAX_BYTES) {
      pk_ctx_fail(ctx, PK_ERR_NOMEM,
                  "interpreter: tensors need more than %llu GiB of reference storage",
                  (unsigned long long)(REF_MAX_BYTES >> 30));
      return NULL;
    }
  }
  pk_te_ref *ref = pk_alloc(ctx, sizeof *ref);
  ref->ntensors = p->ntensors;
  ref->tensors = pk_alloc(ctx, (size_t)p->ntensors * sizeof *ref->tensors);
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    pk_te_ref_tensor *rt = &ref->tensors[i];
    rt->numel = pk_te_tensor_numel(t);
    size_t n = (size_t)rt->numel;
    if (pk_dtype_is_float(t->dtype)) {
      rt->val = pk_alloc(ctx, n * sizeof(double));
      rt->mag = pk_alloc(ctx, n * sizeof(double));
    } else {
      rt->ival = pk_alloc(ctx, n * sizeof(int64_t));
    }
  }
  return ref;
}

pk_status pk_te_interp_run(pk_ctx *ctx, const pk_te_program *p, pk_te_ref *ref) {
  if (!ref) /* pk_te_ref_new failed: its message is already in ctx (the first one wins) */
    return pk_ctx_fail(ctx, PK_ERR_NOMEM, "interpreter: no reference storage");
  PK_ASSERT(ref->ntensors == p->ntensors); /* buffers of another program */
  interp_state st = {.ctx = ctx, .p = p, .ref = ref, .status = PK_OK};
  st.reduce = pk_alloc(ctx, (size_t)p->nreduce * sizeof *st.reduce);
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    if (t->kind != PK_TE_COMPUTE) continue;
    pk_status s = run_compute(&st, t, &ref->tensors[i]);
    if (s != PK_OK) return s;
  }
  return PK_OK;
}
