/* simplify.c — index simplification over the loop IR: bounds of integer expressions from
 * loop-variable ranges, the affine view Σ c·x + c0, and a simplifier built on both. */
#include "pk_loopir.h"

#include <string.h>

struct pk_lranges {
  pk_ctx *ctx;
  int cap;
  bool *known;
  int64_t *lo, *hi;
};

pk_lranges *pk_lranges_new(pk_ctx *ctx) {
  pk_lranges *r = pk_alloc(ctx, sizeof *r);
  r->ctx = ctx;
  return r;
}

void pk_lranges_set(pk_lranges *r, const pk_lvar *v, int64_t lo, int64_t hi) {
  PK_ASSERT(v->id >= 0 && lo <= hi);
  if (v->id >= r->cap) {
    int cap = r->cap ? r->cap : 64;
    while (cap <= v->id) cap *= 2;
    bool *known = pk_alloc(r->ctx, sizeof(bool) * (size_t)cap);
    int64_t *nlo = pk_alloc(r->ctx, sizeof(int64_t) * (size_t)cap);
    int64_t *nhi = pk_alloc(r->ctx, sizeof(int64_t) * (size_t)cap);
    if (r->cap) {
      memcpy(known, r->known, sizeof(bool) * (size_t)r->cap);
      memcpy(nlo, r->lo, sizeof(int64_t) * (size_t)r->cap);
      memcpy(nhi, r->hi, sizeof(int64_t) * (size_t)r->cap);
    }
    r->known = known, r->lo = nlo, r->hi = nhi, r->cap = cap;
  }
  r->known[v->id] = true;
  r->lo[v->id] = lo;
  r->hi[v->id] = hi;
}

bool pk_lranges_get(const pk_lranges *r, const pk_lvar *v, int64_t *lo, int64_t *hi) {
  if (!r || v->id >= r->cap || !r->known[v->id]) return false;
  *lo = r->lo[v->id];
  *hi = r->hi[v->id];
  return true;
}

/* ---- bounds ---- */

static int64_t floor_div(int64_t a, int64_t c) { /* c > 0 */
  int64_t q = a / c;
  return (a % c != 0 && a < 0) ? q - 1 : q;
}

static bool fits_dtype(pkrt_dtype t, int64_t lo, int64_t hi) {
  if (t == PKRT_DTYPE_I32) return lo >= INT32_MIN && hi <= INT32_MAX;
  return t == PKRT_DTYPE_I64 || t == PKRT_DTYPE_BOOL;
}

static bool const_of(const pk_lexpr *e, int64_t *v) {
  if (e->kind != PK_LX_INT) return false;
  *v = e->ival;
  return true;
}

static bool mul_bounds(int64_t alo, int64_t ahi, int64_t blo, int64_t bhi, int64_t *lo, int64_t *hi) {
  int64_t c[4];
  if (pk_i64_mul(alo, blo, &c[0]) || pk_i64_mul(alo, bhi, &c[1]) || pk_i64_mul(ahi, blo, &c[2]) ||
      pk_i64_mul(ahi, bhi, &c[3]))
    return false;
  *lo = *hi = c[0];
  for (int i = 1; i < 4; i++) {
    if (c[i] < *lo) *lo = c[i];
    if (c[i] > *hi) *hi = c[i];
  }
  return true;
}

static bool binary_bounds(const pk_lranges *r, const pk_lexpr *e, int64_t *lo, int64_t *hi) {
  int64_t alo, ahi, blo, bhi, c;
  switch (e->op) {
  case PK_EOP_LT: case PK_EOP_LE: case PK_EOP_GT: case PK_EOP_GE:
  case PK_EOP_EQ: case PK_EOP_NE: case PK_EOP_AND: case PK_EOP_OR:
    *lo = 0, *hi = 1;
    return true;
  default: break;
  }
  if (!pk_dtype_is_int(e->dtype)) return false;
  if (!pk_lx_bounds(r, e->args[0], &alo, &ahi)) return false;
  /* Floor division and modulo by a positive constant are the cases indices need. */
  if (e->op == PK_EOP_DIV || e->op == PK_EOP_MOD) {
    if (!const_of(e->args[1], &c) || c <= 0) return false;
    if (e->op == PK_EOP_DIV) {
      *lo = floor_div(alo, c), *hi = floor_div(ahi, c);
    } else if (floor_div(alo, c) == floor_div(ahi, c)) {
      *lo = alo - floor_div(alo, c) * c, *hi = ahi - floor_div(alo, c) * c;
    } else {
      *lo = 0, *hi = c - 1;
    }
    return true;
  }
  if (!pk_lx_bounds(r, e->args[1], &blo, &bhi)) return false;
  switch (e->op) {
  case PK_EOP_ADD:
    if (pk_i64_add(alo, blo, lo) || pk_i64_add(ahi, bhi, hi)) return false;
    break;
  case PK_EOP_SUB:
    if (blo == INT64_MIN || pk_i64_add(alo, -bhi, lo) || pk_i64_add(ahi, -blo, hi)) return false;
    break;
  case PK_EOP_MUL:
    if (!mul_bounds(alo, ahi, blo, bhi, lo, hi)) return false;
    break;
  case PK_EOP_MIN: *lo = alo < blo ? alo : blo, *hi = ahi < bhi ? ahi : bhi; break;
  case PK_EOP_MAX: *lo = alo > blo ? alo : blo, *hi = ahi > bhi ? ahi : bhi; break;
  default: return false;
  }
  return fits_dtype(e->dtype, *lo, *hi); /* outside the type it would have wrapped */
}

bool pk_lx_bounds(const pk_lranges *r, const pk_lexpr *e, int64_t *lo, int64_t *hi) {
  int64_t alo, ahi, blo, bhi;
  switch (e->kind) {
  case PK_LX_INT: *lo = *hi = e->ival; return true;
  case PK_LX_VAR: return pk_lranges_get(r, e->var, lo, hi);
  case PK_LX_BINARY: return binary_bounds(r, e, lo, hi);
  case PK_LX_UNARY:
    if (e->op == PK_EOP_NOT) { *lo = 0, *hi = 1; return true; }
    if (!pk_dtype_is_int(e->dtype) || !pk_lx_bounds(r, e->args[0], &alo, &ahi) || alo == INT64_MIN)
      return false;
    *lo = -ahi, *hi = -alo;
    return fits_dtype(e->dtype, *lo, *hi);
  case PK_LX_SELECT:
    if (!pk_lx_bounds(r, e->args[1], &alo, &ahi) || !pk_lx_bounds(r, e->args[2], &blo, &bhi))
      return false;
    *lo = alo < blo ? alo : blo, *hi = ahi > bhi ? ahi : bhi;
    return true;
  case PK_LX_CAST:
    if (!pk_dtype_is_int(e->dtype) || pk_dtype_is_float(e->args[0]->dtype)) return false;
    if (!pk_lx_bounds(r, e->args[0], lo, hi)) return false;
    return fits_dtype(e->dtype, *lo, *hi);
  case PK_LX_CALL:
    if (e->op == PK_EOP_HASH) {
      *lo = 0, *hi = ((int64_t)1 << 53) - 1;
      return true;
    }
    if (e->op != PK_EOP_ABS || !pk_dtype_is_int(e->dtype)) return false;
    if (!pk_lx_bounds(r, e->args[0], &alo, &ahi) || alo == INT64_MIN) return false;
    *lo = alo >= 0 ? alo : ahi <= 0 ? -ahi : 0;
    *hi = -alo > ahi ? -alo : ahi;
    return fits_dtype(e->dtype, *lo, *hi);
  default: return false; /* floats, loads: unknown */
  }
}

/* ---- structural equality ---- */

bool pk_lx_equal(const pk_lexpr *a, const pk_lexpr *b) {
  if (a == b) return true;
  if (a->kind != b->kind || a->op != b->op || a->dtype != b->dtype || a->nargs != b->nargs)
    return false;
  switch (a->kind) {
  case PK_LX_INT: return a->ival == b->ival;
  case PK_LX_FLOAT: return memcmp(&a->fval, &b->fval, sizeof a->fval) == 0;
  case PK_LX_VAR: return a->var == b->var;
  case PK_LX_LOAD: if (a->buf != b->buf) return false; break;
  default: break;
  }
  for (int i = 0; i < a->nargs; i++)
    if (!pk_lx_equal(a->args[i], b->args[i])) return false;
  return true;
}

/* ---- affine view ---- */

/* Index arithmetic the affine view may reorder: i64 and proven not to overflow. */
static bool is_index_node(const pk_lexpr *e) {
  return e->dtype == PKRT_DTYPE_I64 && (e->kind == PK_LX_INT || e->kind == PK_LX_VAR || e->index_math);
}

static bool affine_add_term(pk_affine *a, pk_lexpr *atom, int64_t coef) {
  if (coef == 0) return true;
  for (int i = 0; i < a->n; i++)
    if (pk_lx_equal(a->atom[i], atom)) {
      if (pk_i64_add(a->coef[i], coef, &a->coef[i])) return false;
      if (a->coef[i] == 0) { /* cancelled: drop it */
        a->n--;
        memmove(&a->atom[i], &a->atom[i + 1], sizeof a->atom[0] * (size_t)(a->n - i));
        memmove(&a->coef[i], &a->coef[i + 1], sizeof a->coef[0] * (size_t)(a->n - i));
      }
      return true;
    }
  if (a->n == PK_AFFINE_MAX) return false;
  a->atom[a->n] = atom;
  a->coef[a->n++] = coef;
  return true;
}

bool pk_affine_add(pk_affine *a, const pk_affine *b, int64_t scale) {
  int64_t c;
  if (pk_i64_mul(b->c0, scale, &c) || pk_i64_add(a->c0, c, &a->c0)) return false;
  for (int i = 0; i < b->n; i++)
    if (pk_i64_mul(b->coef[i], scale, &c) || !affine_add_term(a, b->atom[i], c)) return false;
  return true;
}

static bool affine_of(pk_ctx *ctx, const pk_lranges *r, pk_lexpr *e, pk_affine *out);
static pk_lexpr *simplify_node(pk_ctx *ctx, const pk_lranges *r, pk_lexpr *e);

/* e as one opaque atom (simplified inside), or the affine form of what simplifying it gave
 * when that is no longer opaque (min(a, b) with a <= b provably is a). */
static bool affine_atom(pk_ctx *ctx, const pk_lranges *r, pk_lexpr *e, pk_affine *out) {
  pk_lexpr *s = simplify_node(ctx, r, e);
  bool opaque = s->kind == e->kind && s->op == e->op;
  if (!opaque && is_index_node(s)) return affine_of(ctx, r, s, out);
  memset(out, 0, sizeof *out);
  if (s->kind == PK_LX_INT) { out->c0 = s->ival; return true; }
  return affine_add_term(out, s, 1);
}

/* Floor division / modulo of affine a by c > 0: with a = c·Q + R, where every coefficient
 * of R lies in [0, c), a / c = Q + R / c and a % c = R % c exactly (Q is an integer);
 * when R's bounds lie in one period [k·c, k·c + c) the division and modulo vanish. */
static bool affine_divmod(pk_ctx *ctx, const pk_lranges *r, const pk_affine *a, int64_t c,
                          bool is_div, pk_affine *out) {
  pk_affine q = {0}, rem = {0};
  q.c0 = floor_div(a->c0, c);
  rem.c0 = a->c0 - q.c0 * c;
  for (int i = 0; i < a->n; i++) {
    int64_t qi = floor_div(a->coef[i], c);
    if (!affine_add_term(&q, a->atom[i], qi) || !affine_add_term(&rem, a->atom[i], a->coef[i] - qi * c))
      return false;
  }
  int64_t lo, hi;
  pk_lexpr *rem_e = pk_affine_expr(ctx, &rem);
  if (pk_lx_bounds(r, rem_e, &lo, &hi) && floor_div(lo, c) == floor_div(hi, c)) {
    int64_t k = floor_div(lo, c);
    if (is_div) {
      *out = q;
      return !pk_i64_add(out->c0, k, &out->c0);
    }
    *out = rem;
    out->c0 -= k * c;
    return true;
  }
  /* Undecided: split off Q only when that keeps the expression readable (no negative
   * coefficients turned into c - |coef|). */
  bool nonneg = true;
  for (int i = 0; i < a->n; i++) nonneg = nonneg && a->coef[i] > 0;
  if (!nonneg) rem_e = pk_affine_expr(ctx, a);
  pk_lexpr *x = pk_lx_binary(ctx, is_div ? PK_EOP_DIV : PK_EOP_MOD, rem_e, pk_lx_int(ctx, c),
                             PKRT_DTYPE_I64);
  x->index_math = true;
  if (!nonneg || !is_div) {
    memset(out, 0, sizeof *out);
    return affine_add_term(out, x, 1);
  }
  *out = q;
  return affine_add_term(out, x, 1);
}

static bool is_divmod_by(const pk_lexpr *e, pk_eop op, int64_t *c) {
  return e->kind == PK_LX_BINARY && e->op == op && const_of(e->args[1], c) && *c > 0;
}

/* k·c·(x / c) + k·(x % c) is k·x: what fused loops leave when both parts meet again. */
static bool join_divmod(pk_ctx *ctx, const pk_lranges *r, pk_affine *a) {
  for (int i = 0; i < a->n; i++) {
    int64_t c, c2;
    if (!is_divmod_by(a->atom[i], PK_EOP_DIV, &c)) continue;
    for (int j = 0; j < a->n; j++) {
      if (!is_divmod_by(a->atom[j], PK_EOP_MOD, &c2) || c2 != c ||
          !pk_lx_equal(a->atom[i]->args[0], a->atom[j]->args[0]))
        continue;
      int64_t k = a->coef[j], kc;
      if (pk_i64_mul(k, c, &kc) || kc != a->coef[i]) continue;
      pk_affine x, div = {.n = 1, .atom = {a->atom[i]}, .coef = {kc}};
      pk_affine mod = {.n = 1, .atom = {a->atom[j]}, .coef = {k}};
      if (!affine_of(ctx, r, a->atom[i]->args[0], &x)) return false;
      if (!pk_affine_add(a, &div, -1) || !pk_affine_add(a, &mod, -1) || !pk_affine_add(a, &x, k))
        return false;
      return join_divmod(ctx, r, a);
    }
  }
  return true;
}

static bool affine_of(pk_ctx *ctx, const pk_lranges *r, pk_lexpr *e, pk_affine *out) {
  memset(out, 0, sizeof *out);
  if (!is_index_node(e)) return affine_atom(ctx, r, e, out);
  int64_t lo, hi;
  if (e->kind == PK_LX_INT) { out->c0 = e->ival; return true; }
  if (e->kind == PK_LX_VAR && pk_lranges_get(r, e->var, &lo, &hi) && lo == hi) {
    out->c0 = lo; /* a loop of one iteration */
    return true;
  }
  if (e->kind == PK_LX_VAR) return affine_add_term(out, e, 1);
  pk_affine a, b;
  if (e->kind == PK_LX_UNARY && e->op == PK_EOP_NEG)
    return affine_of(ctx, r, e->args[0], &a) && pk_affine_add(out, &a, -1);
  if (e->kind != PK_LX_BINARY) return affine_atom(ctx, r, e, out);
  switch (e->op) {
  case PK_EOP_ADD:
  case PK_EOP_SUB:
    return affine_of(ctx, r, e->args[0], &a) && affine_of(ctx, r, e->args[1], &b) &&
           pk_affine_add(out, &a, 1) && pk_affine_add(out, &b, e->op == PK_EOP_ADD ? 1 : -1) &&
           join_divmod(ctx, r, out);
  case PK_EOP_MUL:
    if (!affine_of(ctx, r, e->args[0], &a) || !affine_of(ctx, r, e->args[1], &b)) return false;
    if (b.n == 0) return pk_affine_add(out, &a, b.c0);
    if (a.n == 0) return pk_affine_add(out, &b, a.c0);
    return affine_atom(ctx, r, e, out);
  case PK_EOP_DIV:
  case PK_EOP_MOD: {
    pk_lexpr *d = pk_lx_simplify(ctx, r, e->args[1]);
    if (d->kind != PK_LX_INT || d->ival <= 0 || !affine_of(ctx, r, e->args[0], &a))
      return affine_atom(ctx, r, e, out);
    return affine_divmod(ctx, r, &a, d->ival, e->op == PK_EOP_DIV, out);
  }
  default:
    return affine_atom(ctx, r, e, out);
  }
}

bool pk_lx_affine(pk_ctx *ctx, const pk_lranges *r, pk_lexpr *e, pk_affine *out) {
  return affine_of(ctx, r, e, out);
}

static pk_lexpr *index_binary(pk_ctx *ctx, pk_eop op, pk_lexpr *a, pk_lexpr *b) {
  pk_lexpr *x = pk_lx_binary(ctx, op, a, b, PKRT_DTYPE_I64);
  x->index_math = true;
  return x;
}

/* Variables first in creation order (outer loops first), then other atoms as they came. */
static int atom_rank(const pk_lexpr *a) { return a->kind == PK_LX_VAR ? a->var->id : 1 << 30; }

pk_lexpr *pk_affine_expr(pk_ctx *ctx, const pk_affine *a) {
  int order[PK_AFFINE_MAX];
  for (int i = 0; i < a->n; i++) {
    int j = i;
    for (; j > 0 && atom_rank(a->atom[order[j - 1]]) > atom_rank(a->atom[i]); j--) order[j] = order[j - 1];
    order[j] = i;
  }
  pk_lexpr *e = NULL;
  for (int k = 0; k < a->n; k++) {
    pk_lexpr *atom = a->atom[order[k]];
    int64_t c = a->coef[order[k]];
    if (!e) {
      e = c == 1 ? atom : index_binary(ctx, PK_EOP_MUL, atom, pk_lx_int(ctx, c));
      continue;
    }
    int64_t m = c < 0 ? -c : c;
    pk_lexpr *t = m == 1 ? atom : index_binary(ctx, PK_EOP_MUL, atom, pk_lx_int(ctx, m));
    e = index_binary(ctx, c < 0 ? PK_EOP_SUB : PK_EOP_ADD, e, t);
  }
  if (!e) return pk_lx_int(ctx, a->c0);
  if (a->c0 > 0) return index_binary(ctx, PK_EOP_ADD, e, pk_lx_int(ctx, a->c0));
  if (a->c0 < 0 && a->c0 != INT64_MIN) return index_binary(ctx, PK_EOP_SUB, e, pk_lx_int(ctx, -a->c0));
  if (a->c0 < 0) return index_binary(ctx, PK_EOP_ADD, e, pk_lx_int(ctx, a->c0));
  return e;
}

/* ---- the simplifier ---- */

static pk_lexpr *bool_const(pk_ctx *ctx, bool v) {
  pk_lexpr *x = pk_lx_int(ctx, v);
  x->dtype = PKRT_DTYPE_BOOL;
  return x;
}

static bool is_bool_const(const pk_lexpr *e, bool *v) {
  if (e->kind != PK_LX_INT || e->dtype != PKRT_DTYPE_BOOL) return false;
  *v = e->ival != 0;
  return true;
}

/* Bounds of a - b, through the affine view when both are index arithmetic (so that common
 * terms cancel: io*16 + ii - io*16 is ii). */
static bool difference_bounds(pk_ctx *ctx, const pk_lranges *r, pk_lexpr *a, pk_lexpr *b,
                              int64_t *lo, int64_t *hi) {
  pk_affine fa, fb, d = {0};
  if (is_index_node(a) && is_index_node(b) && affine_of(ctx, r, a, &fa) &&
      affine_of(ctx, r, b, &fb) && pk_affine_add(&d, &fa, 1) && pk_affine_add(&d, &fb, -1) &&
      pk_lx_bounds(r, pk_affine_expr(ctx, &d), lo, hi))
    return true;
  int64_t alo, ahi, blo, bhi;
  if (!pk_lx_bounds(r, a, &alo, &ahi) || !pk_lx_bounds(r, b, &blo, &bhi)) return false;
  if (blo == INT64_MIN || bhi == INT64_MIN) return false;
  return !pk_i64_add(alo, -bhi, lo) && !pk_i64_add(ahi, -blo, hi);
}

/* Decides a comparison of integers from the bounds of a - b; -1 when undecided. */
static int decide_compare(pk_eop op, int64_t lo, int64_t hi) {
  switch (op) {
  case PK_EOP_LT: return hi < 0 ? 1 : lo >= 0 ? 0 : -1;
  case PK_EOP_LE: return hi <= 0 ? 1 : lo > 0 ? 0 : -1;
  case PK_EOP_GT: return lo > 0 ? 1 : hi <= 0 ? 0 : -1;
  case PK_EOP_GE: return lo >= 0 ? 1 : hi < 0 ? 0 : -1;
  case PK_EOP_EQ: return lo == 0 && hi == 0 ? 1 : (lo > 0 || hi < 0) ? 0 : -1;
  case PK_EOP_NE: return lo == 0 && hi == 0 ? 0 : (lo > 0 || hi < 0) ? 1 : -1;
  default: return -1;
  }
}

static bool is_compare(pk_eop op) { return op >= PK_EOP_LT && op <= PK_EOP_NE; }

/* A copy of e with new arguments (e itself when none changed). */
static pk_lexpr *with_args(pk_ctx *ctx, pk_lexpr *e, pk_lexpr **args) {
  bool same = true;
  for (int i = 0; i < e->nargs; i++) same = same && args[i] == e->args[i];
  if (same) return e;
  pk_lexpr *x = pk_alloc(ctx, sizeof *x);
  *x = *e;
  x->args = pk_alloc(ctx, sizeof(pk_lexpr *) * (size_t)e->nargs);
  memcpy(x->args, args, sizeof(pk_lexpr *) * (size_t)e->nargs);
  return x;
}

static pk_lexpr *simplify_binary(pk_ctx *ctx, const pk_lranges *r, pk_lexpr *e, pk_lexpr **args) {
  pk_lexpr *a = args[0], *b = args[1];
  int64_t lo, hi;
  bool va, vb;
  if (is_compare(e->op) && pk_dtype_is_int(a->dtype) && difference_bounds(ctx, r, a, b, &lo, &hi)) {
    int d = decide_compare(e->op, lo, hi);
    if (d >= 0) return bool_const(ctx, d);
  }
  if (e->op == PK_EOP_AND || e->op == PK_EOP_OR) {
    bool is_and = e->op == PK_EOP_AND;
    if (is_bool_const(a, &va)) return va == is_and ? b : a; /* true && b = b; false && b = false */
    if (is_bool_const(b, &vb) && vb == is_and) return a;   /* a && true = a (a has no effects) */
  }
  if ((e->op == PK_EOP_MIN || e->op == PK_EOP_MAX) && pk_dtype_is_int(e->dtype) &&
      difference_bounds(ctx, r, a, b, &lo, &hi)) {
    bool is_min = e->op == PK_EOP_MIN;
    if (hi <= 0) return is_min ? a : b; /* a <= b */
    if (lo >= 0) return is_min ? b : a; /* a >= b */
  }
  return with_args(ctx, e, args);
}

/* Simplifies e's arguments and applies the rules local to e's operator. */
static pk_lexpr *simplify_node(pk_ctx *ctx, const pk_lranges *r, pk_lexpr *e) {
  int64_t lo, hi;
  if (e->kind == PK_LX_VAR && pk_lranges_get(r, e->var, &lo, &hi) && lo == hi) {
    pk_lexpr *x = pk_lx_int(ctx, lo); /* a loop of one iteration */
    x->dtype = e->dtype;
    return x;
  }
  if (e->kind == PK_LX_INT || e->kind == PK_LX_FLOAT || e->kind == PK_LX_VAR) return e;
  pk_lexpr *args[8], **argv = e->nargs <= 8 ? args : pk_alloc(ctx, sizeof(pk_lexpr *) * (size_t)e->nargs);
  for (int i = 0; i < e->nargs; i++) argv[i] = pk_lx_simplify(ctx, r, e->args[i]);
  bool c;
  switch (e->kind) {
  case PK_LX_BINARY: return simplify_binary(ctx, r, e, argv);
  case PK_LX_UNARY:
    if (e->op == PK_EOP_NOT && is_bool_const(argv[0], &c)) return bool_const(ctx, !c);
    break;
  case PK_LX_SELECT:
    if (is_bool_const(argv[0], &c)) return c ? argv[1] : argv[2];
    break;
  default: break;
  }
  return with_args(ctx, e, argv);
}

pk_lexpr *pk_lx_simplify(pk_ctx *ctx, const pk_lranges *r, pk_lexpr *e) {
  pk_affine a;
  if (is_index_node(e) && (e->kind == PK_LX_BINARY || e->kind == PK_LX_UNARY) &&
      e->op != PK_EOP_MIN && e->op != PK_EOP_MAX && affine_of(ctx, r, e, &a))
    return pk_affine_expr(ctx, &a);
  return simplify_node(ctx, r, e);
}

/* ---- an index in one loop counter ---- */

static bool uses_var(const pk_lexpr *e, const pk_lvar *v) {
  if (e->kind == PK_LX_VAR) return e->var == v;
  for (int i = 0; i < e->nargs; i++)
    if (uses_var(e->args[i], v)) return true;
  return false;
}

static int64_t gcd64(int64_t a, int64_t b) { /* a, b >= 0; gcd(0, b) = b */
  while (b) {
    int64_t t = a % b;
    a = b, b = t;
  }
  return a;
}

/* A divisor of every value e takes (0: e is always 0); 1 when nothing better is known.
 * Only exact index arithmetic counts: a wrapping product keeps no divisor. */
static int64_t known_divisor(const pk_lexpr *e) {
  int64_t c;
  if (const_of(e, &c)) return c == INT64_MIN ? 1 : c < 0 ? -c : c;
  if (!is_index_node(e) || e->kind == PK_LX_VAR) return 1;
  if (e->kind == PK_LX_UNARY && e->op == PK_EOP_NEG) return known_divisor(e->args[0]);
  if (e->kind != PK_LX_BINARY) return 1;
  int64_t a = known_divisor(e->args[0]), b = known_divisor(e->args[1]), m;
  switch (e->op) {
  case PK_EOP_ADD:
  case PK_EOP_SUB: return gcd64(a, b);
  case PK_EOP_MUL: return pk_i64_mul(a, b, &m) ? (a > b ? a : b) : m;
  case PK_EOP_MOD: return const_of(e->args[1], &c) && c > 0 ? gcd64(a, c) : 1;
  default: return 1;
  }
}

/* e(v) = e(0) + c·v for v in [0, lanes), and m divides e(0) (0: e(0) is 0). A floor
 * division or modulo by d keeps the form when the lanes stay inside one period: e(0) a
 * multiple of g = gcd(m, d) and c·(lanes - 1) < g, so (e(0) + c·v) / d = e(0) / d and
 * (e(0) + c·v) % d = e(0) % d + c·v. */
static bool lane_form(const pk_lexpr *e, const pk_lvar *v, int64_t lanes, int64_t *c, int64_t *m) {
  if (!uses_var(e, v)) {
    *c = 0, *m = known_divisor(e);
    return true;
  }
  if (e->kind == PK_LX_VAR) {
    *c = 1, *m = 0;
    return true;
  }
  if (!is_index_node(e)) return false;
  int64_t ca, ma, cb, mb, k, span;
  if (e->kind == PK_LX_UNARY && e->op == PK_EOP_NEG)
    return lane_form(e->args[0], v, lanes, &ca, m) && !pk_i64_mul(ca, -1, c);
  if (e->kind != PK_LX_BINARY) return false;
  switch (e->op) {
  case PK_EOP_ADD:
  case PK_EOP_SUB:
    if (!lane_form(e->args[0], v, lanes, &ca, &ma) || !lane_form(e->args[1], v, lanes, &cb, &mb) ||
        pk_i64_mul(cb, e->op == PK_EOP_ADD ? 1 : -1, &cb) || pk_i64_add(ca, cb, c))
      return false;
    *m = gcd64(ma, mb);
    return true;
  case PK_EOP_MUL: {
    int side = const_of(e->args[1], &k) ? 0 : const_of(e->args[0], &k) ? 1 : -1;
    if (side < 0 || !lane_form(e->args[side], v, lanes, &ca, &ma) || pk_i64_mul(ca, k, c))
      return false;
    if (pk_i64_mul(ma, k, m)) *m = k == INT64_MIN ? 1 : k < 0 ? -k : k;
    if (*m < 0) *m = *m == INT64_MIN ? 1 : -*m;
    return true;
  }
  case PK_EOP_DIV:
  case PK_EOP_MOD: {
    if (!const_of(e->args[1], &k) || k <= 0 || !lane_form(e->args[0], v, lanes, &ca, &ma) || ca < 0)
      return false;
    int64_t g = gcd64(ma, k);
    if (pk_i64_mul(ca, lanes - 1, &span) || span >= g) return false;
    *c = e->op == PK_EOP_DIV ? 0 : ca;
    *m = e->op == PK_EOP_DIV ? 1 : g;
    return true;
  }
  default: return false;
  }
}

bool pk_lx_lane_form(const pk_lexpr *e, const pk_lvar *v, int64_t lanes, int64_t *stride,
                     int64_t *base_divisor) {
  if (lanes < 1 || e->dtype != PKRT_DTYPE_I64) return false;
  return lane_form(e, v, lanes, stride, base_divisor);
}
