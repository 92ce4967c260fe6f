/* bound_infer.c — bound inference: the region of a tensor that one iteration of the loop a
 * stage is attached at reads, as [min, min + extent) per dimension with min an expression
 * of the enclosing loops' variables and extent a constant.
 *
 * Each index is split into a base B (its terms over the enclosing, "fixed", variables) and
 * an offset whose bounds come from the ranges of everything else; min and max pass through
 * (max(x, y) - B = max(x - B, y - B)), so clamped halo reads stay tight. All reads of a
 * dimension share one base: each read's is a candidate, the narrowest region wins. The
 * region is finally clamped into the tensor, so the producer never computes a point
 * outside its domain and needs no guard for it. */
#include "lower_impl.h"

#include <string.h>

typedef struct access_list {
  pk_ctx *ctx;
  int n, cap, ndim;
  pk_lexpr **idx; /* n * ndim */
} access_list;

static void add_access(void *arg, pk_lexpr *const *idx, int n) {
  access_list *a = arg;
  PK_ASSERT(n == a->ndim);
  if (a->n == a->cap) {
    int cap = a->cap ? a->cap * 2 : 8;
    pk_lexpr **bigger = pk_alloc(a->ctx, sizeof *bigger * (size_t)(cap * a->ndim));
    for (int i = 0; i < a->n * a->ndim; i++) bigger[i] = a->idx[i];
    a->idx = bigger, a->cap = cap;
  }
  for (int d = 0; d < n; d++) a->idx[a->n * a->ndim + d] = idx[d];
  a->n++;
}

typedef struct region_ctx {
  lowering *L;
  const bool *fixed; /* by var id: the loop encloses the attachment point */
  int nfixed;
} region_ctx;

static bool is_fixed_atom(const region_ctx *R, const pk_lexpr *e) {
  switch (e->kind) {
  case PK_LX_INT: case PK_LX_FLOAT: return true;
  case PK_LX_VAR: return e->var->id < R->nfixed && R->fixed[e->var->id];
  case PK_LX_LOAD: return false;
  default: break;
  }
  for (int i = 0; i < e->nargs; i++)
    if (!is_fixed_atom(R, e->args[i])) return false;
  return true;
}

static bool is_split_atom(const pk_lexpr *e) {
  return e->kind == PK_LX_SELECT ||
         (e->kind == PK_LX_BINARY && (e->op == PK_EOP_MIN || e->op == PK_EOP_MAX));
}

/* The only min/max/select atom with coefficient 1, or -1 when there is none or several. */
static int split_atom(const pk_affine *a) {
  int found = -1;
  for (int i = 0; i < a->n; i++)
    if (is_split_atom(a->atom[i]) && a->coef[i] == 1) {
      if (found >= 0) return -1;
      found = i;
    }
  return found;
}

/* A candidate base of e: its terms over fixed atoms. through_splits: leaving min/max/select
 * atoms out and, when nothing else is fixed, taking a lone one's first argument's base
 * (so max(i - 1, 0) has base i, not itself). */
static void choose_base(const region_ctx *R, pk_lexpr *e, bool through_splits, pk_affine *base) {
  pk_affine a;
  memset(base, 0, sizeof *base);
  if (!pk_lx_affine(R->L->ctx, R->L->ranges, e, &a)) return;
  for (int i = 0; i < a.n; i++)
    if (is_fixed_atom(R, a.atom[i]) && !(through_splits && is_split_atom(a.atom[i]))) {
      pk_affine term = {.n = 1, .atom = {a.atom[i]}, .coef = {a.coef[i]}};
      if (!pk_affine_add(base, &term, 1)) { memset(base, 0, sizeof *base); return; }
    }
  int m = split_atom(&a);
  if (through_splits && base->n == 0 && m >= 0) {
    pk_lexpr *x = a.atom[m];
    choose_base(R, x->kind == PK_LX_SELECT ? x->args[1] : x->args[0], true, base);
    if (base->n == 0) choose_base(R, x->kind == PK_LX_SELECT ? x->args[2] : x->args[1], true, base);
  }
}

/* Bounds of e + shift, over every variable's range. */
static bool shifted_bounds(const region_ctx *R, pk_lexpr *e, const pk_affine *shift, int64_t *lo,
                           int64_t *hi) {
  pk_ctx *ctx = R->L->ctx;
  pk_affine a, rest = {0};
  if (!pk_lx_affine(ctx, R->L->ranges, e, &a) || !pk_affine_add(&rest, &a, 1) ||
      !pk_affine_add(&rest, shift, 1))
    return false;
  int m = split_atom(&rest);
  if (m < 0) return pk_lx_bounds(R->L->ranges, pk_affine_expr(ctx, &rest), lo, hi);
  /* e + shift = x + rest' where x = min/max/select(...): push rest' into x's arguments */
  pk_lexpr *x = rest.atom[m];
  pk_affine one = {.n = 1, .atom = {x}, .coef = {1}};
  if (!pk_affine_add(&rest, &one, -1)) return false;
  int64_t alo, ahi, blo, bhi;
  bool sel = x->kind == PK_LX_SELECT;
  if (!shifted_bounds(R, x->args[sel ? 1 : 0], &rest, &alo, &ahi) ||
      !shifted_bounds(R, x->args[sel ? 2 : 1], &rest, &blo, &bhi))
    return false;
  if (sel || x->op == PK_EOP_MIN) {
    *lo = alo < blo ? alo : blo;
    *hi = sel ? (ahi > bhi ? ahi : bhi) : (ahi < bhi ? ahi : bhi);
  } else {
    *lo = alo > blo ? alo : blo;
    *hi = ahi > bhi ? ahi : bhi;
  }
  return true;
}

static pk_lexpr *index_op(pk_ctx *ctx, pk_eop op, pk_lexpr *a, pk_lexpr *b) {
  pk_lexpr *x = pk_lx_binary(ctx, op, a, b, PKRT_DTYPE_I64);
  x->index_math = true;
  return x;
}

/* [lo, hi] of every access's index d minus base; false when one is unknown. */
static bool offsets_from(const region_ctx *R, pk_lexpr *const *idx, int n, const pk_affine *base,
                         int64_t *lo, int64_t *hi) {
  pk_affine neg = {0};
  if (!pk_affine_add(&neg, base, -1)) return false;
  *lo = INT64_MAX, *hi = INT64_MIN;
  for (int i = 0; i < n; i++) {
    int64_t alo, ahi;
    if (!shifted_bounds(R, idx[i], &neg, &alo, &ahi)) return false;
    if (alo < *lo) *lo = alo;
    if (ahi > *hi) *hi = ahi;
  }
  int64_t width;
  return *hi >= *lo && *lo > INT64_MIN && !pk_i64_add(*hi, -*lo, &width) && width < INT64_MAX;
}

/* Region of dimension d: every access's base is a candidate (as it stands and through its
 * min/max), the one giving the narrowest region wins. False when an index is unknown. */
static bool dim_region(const region_ctx *R, const access_list *acc, int d, pk_lexpr **min,
                       int64_t *ext) {
  pk_ctx *ctx = R->L->ctx;
  pk_lexpr **idx = pk_alloc(ctx, sizeof(pk_lexpr *) * (size_t)(acc->n + 1));
  for (int i = 0; i < acc->n; i++) {
    idx[i] = acc->idx[i * acc->ndim + d];
    if (!idx[i]) return false;
    idx[i] = pk_lx_simplify(ctx, R->L->ranges, idx[i]);
  }
  bool found = false;
  pk_affine best;
  int64_t best_lo = 0, best_hi = 0;
  for (int i = 0; i < acc->n; i++)
    for (int through = 0; through < 2; through++) {
      pk_affine base;
      int64_t lo, hi;
      choose_base(R, idx[i], through, &base);
      if (!offsets_from(R, idx, acc->n, &base, &lo, &hi)) continue;
      if (!found || hi - lo < best_hi - best_lo) found = true, best = base, best_lo = lo, best_hi = hi;
    }
  if (!found) return false;
  *ext = best_hi - best_lo + 1;
  best.c0 = best_lo;
  *min = pk_affine_expr(ctx, &best);
  return true;
}

static bool is_thread_loop(pk_loop_kind k) {
  return k >= PK_LOOP_GPU_THREAD_X && k <= PK_LOOP_GPU_THREAD_Z;
}

/* Marks the variables of every loop around sl's attachment point, and the region mins
 * bound around the stages it sits in. A SHARED stage is one buffer for the whole block:
 * its region is what every thread of the block reads, so loops bound to threads do not
 * fix it (TVM relaxes them the same way). */
static region_ctx enclosing_loops(lowering *L, const stage_lowering *sl) {
  region_ctx R = {L, NULL, L->f->nvars};
  bool *fixed = pk_alloc(L->ctx, sizeof(bool) * (size_t)(R.nfixed + 1));
  bool block_wide = sl->st->scope == PK_SCOPE_SHARED;
  for (const stage_lowering *s = sl; s->target; s = s->target)
    for (int p = 0; p <= s->attach_pos; p++)
      if (!block_wide || !is_thread_loop(s->target->st->leaf[p]->kind))
        fixed[s->target->leaf_var[p]->id] = true;
  R.fixed = fixed;
  /* a region min bound around the attachment is fixed when its value is: for a shared
   * stage, not when it follows a thread's loop (outer attachments first) */
  const stage_lowering *chain[64];
  int n = 0;
  for (const stage_lowering *s = sl; s->target && n < 64; s = s->target) chain[n++] = s->target;
  for (int i = n - 1; i >= 0; i--)
    for (int d = 0; d < chain[i]->st->tensor->ndim; d++)
      if (chain[i]->min_var[d] && (!block_wide || is_fixed_atom(&R, chain[i]->min_value[d])))
        fixed[chain[i]->min_var[d]->id] = true;
  return R;
}

static bool is_affine_in_vars(lowering *L, pk_lexpr *e) {
  pk_affine a;
  if (!pk_lx_affine(L->ctx, L->ranges, e, &a)) return false;
  for (int i = 0; i < a.n; i++)
    if (a.atom[i]->kind != PK_LX_VAR) return false;
  return true;
}

/* A variable bound to a clamped min once per attachment: indices then read the variable
 * (whose range is known), not the min/max. */
static pk_lexpr *let_min(lowering *L, stage_lowering *sl, int d, pk_lexpr *value, int64_t max_min) {
  pk_lvar *v = pk_lvar_new(L->ctx, L->f, PKRT_DTYPE_I64);
  int64_t lo, hi;
  if (!pk_lx_bounds(L->ranges, value, &lo, &hi)) lo = 0, hi = max_min;
  pk_lranges_set(L->ranges, v, lo, hi);
  sl->min_var[d] = v;
  sl->min_value[d] = value;
  return pk_lx_var(L->ctx, v);
}

/* e with every region-min variable that R does not fix (a shared stage's reader's clamped
 * min, which follows a thread's loop) replaced by its value: the min/max inside then
 * bounds the region by the block's loops, where the variable alone would only have its
 * range over every block. */
static pk_lexpr *subst_mins(const region_ctx *R, const stage_lowering *sl, pk_lexpr *e) {
  if (!e) return NULL;
  if (e->kind == PK_LX_VAR && !(e->var->id < R->nfixed && R->fixed[e->var->id]))
    for (const stage_lowering *s = sl; s->target; s = s->target)
      for (int d = 0; d < s->target->st->tensor->ndim; d++)
        if (s->target->min_var[d] == e->var) return subst_mins(R, sl, s->target->min_value[d]);
  pk_lexpr *c = NULL;
  for (int i = 0; i < e->nargs; i++) {
    pk_lexpr *a = subst_mins(R, sl, e->args[i]);
    if (a == e->args[i]) continue;
    if (!c) {
      c = pk_alloc(R->L->ctx, sizeof *c);
      *c = *e;
      c->args = pk_alloc(R->L->ctx, sizeof *c->args * (size_t)e->nargs);
      for (int j = 0; j < e->nargs; j++) c->args[j] = e->args[j];
    }
    c->args[i] = a;
  }
  return c ? c : e;
}

pk_status bound_infer_region(lowering *L, stage_lowering *sl) {
  pk_ctx *ctx = L->ctx;
  const pk_te_tensor *t = sl->st->tensor;
  stage_lowering *target = sl->target;
  PK_ASSERT(target && target->ready);
  access_list acc = {ctx, 0, 0, t->ndim, NULL};
  int nbound = lower_bind_stage(L, target);
  lower_collect_reads(L, target->st->tensor->body, t, add_access, &acc);
  lower_unbind(L, nbound);

  region_ctx R = enclosing_loops(L, sl);
  if (sl->st->scope == PK_SCOPE_SHARED)
    for (int i = 0; i < acc.n * acc.ndim; i++) acc.idx[i] = subst_mins(&R, sl, acc.idx[i]);
  for (int d = 0; d < t->ndim; d++) {
    int64_t full = t->shape[d], ext;
    pk_lexpr *min;
    if (!dim_region(&R, &acc, d, &min, &ext) || ext >= full) {
      sl->region_min[d] = pk_lx_int(ctx, 0);
      sl->region_ext[d] = full;
      continue;
    }
    /* Clamped into [0, full): max(min(m, full - ext), 0) still holds every point read. */
    pk_lexpr *clamped = index_op(ctx, PK_EOP_MIN, min, pk_lx_int(ctx, full - ext));
    clamped = pk_lx_simplify(ctx, L->ranges, index_op(ctx, PK_EOP_MAX, clamped, pk_lx_int(ctx, 0)));
    sl->region_ext[d] = ext;
    sl->region_min[d] = is_affine_in_vars(L, clamped) ? clamped : let_min(L, sl, d, clamped, full - ext);
  }
  return PK_OK;
}
