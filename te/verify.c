/* verify.c — checks kernels against the reference interpreter: random inputs from each
 * placeholder's valid domain, inputs in a kernel's dtype, and the per-element comparison
 * with the error bound of pk_verify.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "pk_verify.h"

/* ---- input domains ---- */

/* How a tensor's values are used, or-ed over every read of it. */
enum {
  USE_POSITIVE = 1, /* reaches the argument of log/sqrt/rsqrt or the base of pow */
  USE_INDEX = 2,    /* read inside an index expression */
  USE_MASK = 4,     /* an integer compared == or != with 0 in a condition: a mask (where,
                       masked_fill), filled with 0 and 1 so both branches are exercised */
  USE_OTHER = 8     /* read for anything but a mask test (so a mask that is also a value
                       keeps the wide range) */
};

/* e is "<x> == 0" or "<x> != 0" (either order): x is tested as a mask. */
static const pk_expr *mask_operand(const pk_expr *e) {
  if (e->op != PK_EOP_EQ && e->op != PK_EOP_NE) return NULL;
  for (int i = 0; i < 2; i++)
    if (e->args[i]->kind == PK_EXPR_INT && e->args[i]->ival == 0) return e->args[1 - i];
  return NULL;
}

static void mark_uses(const pk_expr *e, unsigned use, unsigned *uses);

static void mark_args(const pk_expr *e, unsigned use, unsigned *uses) {
  for (int i = 0; i < e->nargs; i++) mark_uses(e->args[i], use, uses);
}

/* Walks e, whose value is used as `use`, or-ing into uses[tensor id] how each tensor's
 * values are used. Positivity passes through the operations that map positive operands
 * to positive results (and through -, where it is a heuristic: a difference of two
 * positives from [0.25, 2] is often positive); the rest keep only the index flag. */
static void mark_uses(const pk_expr *e, unsigned use, unsigned *uses) {
  unsigned keep_index = use & USE_INDEX;
  switch (e->kind) {
  case PK_EXPR_INT:
  case PK_EXPR_FLOAT:
  case PK_EXPR_AXIS: return;
  case PK_EXPR_READ:
    uses[e->tensor->id] |= use & USE_MASK ? use : use | USE_OTHER;
    mark_args(e, USE_INDEX, uses);
    return;
  case PK_EXPR_UNARY: mark_args(e, keep_index, uses); return;
  case PK_EXPR_BINARY:
    switch (e->op) {
    case PK_EOP_ADD: case PK_EOP_SUB: case PK_EOP_MUL: case PK_EOP_DIV:
    case PK_EOP_MIN: case PK_EOP_MAX: mark_args(e, use, uses); return;
    default:
      if (mask_operand(e)) {
        mark_uses(mask_operand(e), keep_index | USE_MASK, uses);
        return;
      }
      mark_args(e, keep_index, uses);
      return;
    }
  case PK_EXPR_SELECT:
    mark_uses(e->args[0], keep_index, uses);
    mark_uses(e->args[1], use, uses);
    mark_uses(e->args[2], use, uses);
    return;
  case PK_EXPR_CALL:
    switch (e->op) {
    case PK_EOP_LOG: case PK_EOP_SQRT: case PK_EOP_RSQRT:
      mark_args(e, use | USE_POSITIVE, uses);
      return;
    case PK_EOP_POW:
      mark_uses(e->args[0], use | USE_POSITIVE, uses);
      mark_uses(e->args[1], keep_index, uses);
      return;
    case PK_EOP_ABS: mark_args(e, use, uses); return;
    default: mark_args(e, keep_index, uses); return;
    }
  case PK_EXPR_CAST:
  case PK_EXPR_REDUCE: mark_args(e, use, uses); return;
  }
}

/* ---- a small local PRNG (splitmix64) ---- */

static uint64_t splitmix64_next(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double uniform_real(uint64_t *state, double lo, double hi) {
  double u = (double)(splitmix64_next(state) >> 11) * 0x1p-53; /* [0, 1) */
  return lo + (hi - lo) * u;
}

/* Uniform in [lo, hi] for small ranges (multiply-shift: no modulo bias worth noting). */
static int64_t uniform_int(uint64_t *state, int64_t lo, int64_t hi) {
  uint64_t span = (uint64_t)(hi - lo) + 1;
  return lo + (int64_t)(((splitmix64_next(state) >> 32) * span) >> 32);
}

static double round_to_dtype(pkrt_dtype t, double v) {
  return t == PKRT_DTYPE_F32 ? (double)(float)v : v;
}

static void fill_placeholder(const pk_te_tensor *t, pk_te_ref_tensor *rt, unsigned use,
                             uint64_t seed) {
  uint64_t state = seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(t->id + 1));
  if (pk_dtype_is_float(t->dtype)) {
    double lo = use & USE_POSITIVE ? 0.25 : -1.0, hi = use & USE_POSITIVE ? 2.0 : 1.0;
    for (int64_t i = 0; i < rt->numel; i++) {
      rt->val[i] = round_to_dtype(t->dtype, uniform_real(&state, lo, hi));
      rt->mag[i] = fabs(rt->val[i]);
    }
    return;
  }
  int64_t lo = use & USE_INDEX ? 0 : -8, hi = use & USE_INDEX ? 7 : 8;
  if (use & USE_POSITIVE) lo = 1;
  if (use == USE_MASK) lo = 0, hi = 1; /* only a mask: 0 or 1 */
  for (int64_t i = 0; i < rt->numel; i++) rt->ival[i] = uniform_int(&state, lo, hi);
}

void pk_te_ref_fill_random(const pk_te_program *p, pk_te_ref *ref, uint64_t seed) {
  if (!ref) return; /* pk_te_ref_new failed; pk_te_interp_run reports it */
  PK_ASSERT(ref->ntensors == p->ntensors);
  unsigned *uses = pk_xcalloc((size_t)p->ntensors + 1, sizeof *uses);
  /* Reads refer only to earlier tensors, so walking backwards sees every use of a compute
   * before its own body is walked with that use. */
  for (int i = p->ntensors - 1; i >= 0; i--) {
    const pk_te_tensor *t = p->tensors[i];
    if (t->kind == PK_TE_COMPUTE) mark_uses(t->body, uses[i], uses);
  }
  for (int i = 0; i < p->ntensors; i++)
    if (p->tensors[i]->kind == PK_TE_PLACEHOLDER)
      fill_placeholder(p->tensors[i], &ref->tensors[i], uses[i], seed);
  free(uses);
}

void pk_te_ref_to_buffer(const pk_te_tensor *t, const pk_te_ref_tensor *ref, void *data) {
  float *f32 = data;
  double *f64 = data;
  int32_t *i32 = data;
  int64_t *i64 = data;
  for (int64_t i = 0; i < ref->numel; i++) {
    switch (t->dtype) {
    case PKRT_DTYPE_F32: f32[i] = (float)ref->val[i]; break;
    case PKRT_DTYPE_F64: f64[i] = ref->val[i]; break;
    case PKRT_DTYPE_I32: i32[i] = (int32_t)ref->ival[i]; break;
    case PKRT_DTYPE_I64: i64[i] = ref->ival[i]; break;
    default: PK_ASSERT(!"pk_te_ref_to_buffer: a dtype kernels do not take");
    }
  }
}

/* ---- comparison ---- */

/* One element's verdict: err and bound; bad when err > bound (err is inf for a NaN or
 * infinity mismatch, so no bound covers it). */
typedef struct elem_check {
  double kernel, ref, err, bound;
  bool bad;
} elem_check;

static elem_check check_float(pkrt_dtype t, double k, double v, double s) {
  bool f32 = t == PKRT_DTYPE_F32;
  elem_check c = {k, v, 0, f32 ? PK_VERIFY_F32_REL * s + PK_VERIFY_F32_ABS
                                : PK_VERIFY_F64_REL * s + PK_VERIFY_F64_ABS, false};
  if (isnan(v) || isnan(k)) {
    c.bad = !(isnan(v) && isnan(k));
  } else {
    /* A reference beyond f32's range is what an f32 kernel rounds to inf (the threshold is
     * FLT_MAX plus half an ulp). */
    double vt = f32 && fabs(v) >= 0x1.ffffffp127 ? copysign(INFINITY, v) : v;
    if (isinf(vt) || isinf(k)) c.bad = k != vt;
    else c.err = fabs(k - v), c.bad = c.err > c.bound;
  }
  if (c.bad && !(c.err > c.bound)) c.err = INFINITY;
  return c;
}

static elem_check check_element(pkrt_dtype t, const pk_te_ref_tensor *ref, const void *data,
                                int64_t i) {
  switch (t) {
  case PKRT_DTYPE_F32: return check_float(t, ((const float *)data)[i], ref->val[i], ref->mag[i]);
  case PKRT_DTYPE_F64: return check_float(t, ((const double *)data)[i], ref->val[i], ref->mag[i]);
  default: {
    int64_t k = t == PKRT_DTYPE_I32 ? ((const int32_t *)data)[i] : ((const int64_t *)data)[i];
    elem_check c = {(double)k, (double)ref->ival[i], 0, 0, k != ref->ival[i]};
    if (c.bad) c.err = fabs(c.kernel - c.ref);
    return c;
  }
  }
}

/* err / bound; a NaN/inf mismatch or an integer difference counts as infinitely bad
 * (their bound may itself be inf or 0). */
static double check_ratio(elem_check c) {
  if (c.bad && (isinf(c.err) || !(c.bound > 0))) return INFINITY;
  return c.bound > 0 && !isinf(c.bound) ? c.err / c.bound : 0.0;
}

/* "[i0, i1, ...]" of a flat row-major index. */
static void format_index(const pk_te_tensor *t, int64_t flat, char *buf, size_t cap) {
  int64_t idx[PK_TE_MAX_DIMS];
  for (int d = t->ndim - 1; d >= 0; d--) {
    idx[d] = flat % t->shape[d];
    flat /= t->shape[d];
  }
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int d = 0; d < t->ndim && n < cap; d++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", d ? ", " : "", (long long)idx[d]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

pk_status pk_te_verify_output(pk_ctx *ctx, const pk_te_tensor *t, const pk_te_ref_tensor *ref,
                              const void *data, pk_verify_result *res) {
  pk_verify_result local;
  if (!res) res = &local;
  *res = (pk_verify_result){0, 0, -1, 0, 0, 0};
  const char *name = t->name ? t->name : "?";
  if (t->dtype != PKRT_DTYPE_F32 && t->dtype != PKRT_DTYPE_F64 &&
      t->dtype != PKRT_DTYPE_I32 && t->dtype != PKRT_DTYPE_I64)
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "verify: tensor '%s' has dtype %s, which "
                       "kernels do not output", name, pkrt_dtype_name(t->dtype));
  int64_t first_bad = -1;
  elem_check first = {0, 0, 0, 0, false};
  for (int64_t i = 0; i < ref->numel; i++) {
    elem_check c = check_element(t->dtype, ref, data, i);
    double ratio = check_ratio(c);
    if (res->worst_index < 0 || ratio > res->worst_ratio) {
      res->worst_index = i;
      res->worst_err = c.err;
      res->worst_bound = c.bound;
      res->worst_ratio = ratio;
    }
    if (c.bad && res->nbad++ == 0) first_bad = i, first = c;
  }
  res->checked = ref->numel;
  if (res->nbad == 0) return PK_OK;
  char where[PK_TE_MAX_DIMS * 22 + 4];
  format_index(t, first_bad, where, sizeof where);
  if (pk_dtype_is_int(t->dtype)) {
    int64_t k = t->dtype == PKRT_DTYPE_I32 ? ((const int32_t *)data)[first_bad]
                                           : ((const int64_t *)data)[first_bad];
    return pk_ctx_fail(ctx, PK_ERR_MISMATCH,
                       "tensor '%s' (t%d): element %s: kernel %lld, reference %lld, bound 0 "
                       "(exact) (%lld of %lld elements differ)",
                       name, t->id, where, (long long)k, (long long)ref->ival[first_bad],
                       (long long)res->nbad, (long long)res->checked);
  }
  int digits = t->dtype == PKRT_DTYPE_F32 ? 9 : 17;
  return pk_ctx_fail(ctx, PK_ERR_MISMATCH,
                     "tensor '%s' (t%d): element %s: kernel %.*g, reference %.*g, bound %.3g "
                     "(%lld of %lld elements differ)",
                     name, t->id, where, digits, first.kernel, digits, first.ref, first.bound,
                     (long long)res->nbad, (long long)res->checked);
}
