/* emit_c_vplan.c — before a VECTORIZED loop is emitted as vector code: may its lanes run
 * together (no lane can see another lane's store), how wide are its vectors, and which
 * LOCAL tiles can live as arrays of whole vectors (registers) rather than as scalars. A loop
 * that fails the plan is emitted as a scalar loop with the reason in a comment. */
#include "emit_c_impl.h"

#include <string.h>

bool cg_vec_of(cg *E, const pk_lexpr *e) {
  const cg_vloop *vl = E->vl;
  if (!vl) return false;
  if (e->kind == PK_LX_VAR) return e->var == vl->loop->var || vl->var_vec[e->var->id];
  if (e->kind == PK_LX_LOAD && vl->buf_private[e->buf->id]) return true;
  for (int i = 0; i < e->nargs; i++)
    if (cg_vec_of(E, e->args[i])) return true;
  return false;
}

int cg_vlanes(const pk_stmt *s) {
  int64_t n;
  if (!cg_const_extent(s, &n) || n < 1) return 0;
  if (s->annotation > 0) return (int)(s->annotation < n ? s->annotation : n);
  return n <= CG_MAX_LANES ? (int)n : 16;
}

cg_vgeom cg_vgeom_for(cg *E, int lanes, int elem_bytes) {
  cg_vgeom g = {lanes, 1, lanes, elem_bytes < 4 ? 4 : elem_bytes};
  int cap = E->vector_bytes / g.elem_bytes;
  while (g.part_lanes < lanes && g.part_lanes < cap) g.part_lanes *= 2;
  g.parts = (lanes + g.part_lanes - 1) / g.part_lanes;
  return g;
}

bool cg_lane_affine(cg *E, const pk_lexpr *e, cg_affine *a, int64_t *c) {
  if (!cg_affine_of(E, e, a)) return false;
  const pk_lvar *lane = E->vl->loop->var;
  *c = 0;
  for (int i = 0; i < a->n; i++) {
    const cg_term *t = &a->t[i];
    if (t->var == lane) *c = t->coef;
    else if (t->var ? E->vl->var_vec[t->var->id] : cg_vec_of(E, t->atom)) return false;
  }
  return *c != 0;
}

static bool is_compare(pk_eop op) { return op >= PK_EOP_LT && op <= PK_EOP_NE; }

bool cg_lane_compare(cg *E, const pk_lexpr *e, int *lane_side, int64_t *c) {
  if (e->kind != PK_LX_BINARY || !is_compare(e->op)) return false;
  if (e->args[0]->dtype != PKRT_DTYPE_I64 || e->args[1]->dtype != PKRT_DTYPE_I64) return false;
  cg_affine a;
  for (int side = 0; side < 2; side++) {
    if (!cg_lane_affine(E, e->args[side], &a, c) || cg_vec_of(E, e->args[1 - side])) continue;
    /* c * lane stays far inside int32 once the other side is clamped to +-2^30 */
    int64_t span = (*c < 0 ? -*c : *c) * (int64_t)E->vl->g.lanes;
    if (*c == INT64_MIN || span > (1 << 20)) return false;
    *lane_side = side;
    return true;
  }
  return false;
}

/* ---- the plan ---- */

typedef struct access {
  const pk_lbuf *buf;
  const pk_lexpr *index;
  bool store, in_inner_loop;
} access;

typedef struct vplan {
  cg *E;
  cg_vloop *vl;
  const char *why;
  int elem_bytes;
  access *acc;
  int nacc, cap;
  int inner_loops;
  bool *ranged;              /* per var id: an inner counter with constant bounds */
  int64_t *var_lo, *var_hi;  /* its first and last value */
} vplan;

static void fail(vplan *P, const char *why) {
  if (!P->why) P->why = why;
}

static void count_bytes(vplan *P, pkrt_dtype t) {
  int b = (int)pkrt_dtype_size(t);
  if (b > P->elem_bytes) P->elem_bytes = b;
}

static void record(vplan *P, const pk_lbuf *b, const pk_lexpr *index, bool store) {
  if (P->nacc == P->cap) {
    int cap = P->cap ? 2 * P->cap : 16;
    access *a = pk_alloc(P->E->ctx, sizeof *a * (size_t)cap);
    if (P->nacc) memcpy(a, P->acc, sizeof *a * (size_t)P->nacc);
    P->acc = a;
    P->cap = cap;
  }
  P->acc[P->nacc++] = (access){b, index, store, P->inner_loops > 0};
}

/* Index arithmetic becomes addresses (or per-lane scalars): no vectors, only its loads. */
static void walk_index(vplan *P, const pk_lexpr *e) {
  if (e->kind == PK_LX_LOAD) record(P, e->buf, e->args[0], false);
  for (int i = 0; i < e->nargs; i++) walk_index(P, e->args[i]);
}

/* A value: records its loads and the widest element among its vector nodes. */
static void walk_value(vplan *P, const pk_lexpr *e) {
  cg *E = P->E;
  int side;
  int64_t c;
  if (e->kind == PK_LX_LOAD) {
    record(P, e->buf, e->args[0], false);
    if (cg_vec_of(E, e)) count_bytes(P, e->buf->dtype);
    walk_index(P, e->args[0]);
    return;
  }
  if (cg_lane_compare(E, e, &side, &c)) {
    walk_index(P, e->args[0]);
    walk_index(P, e->args[1]);
    return;
  }
  if (cg_vec_of(E, e)) {
    if (e->dtype != PKRT_DTYPE_BOOL) count_bytes(P, e->dtype);
    else if (e->nargs == 2 && e->args[0]->dtype != PKRT_DTYPE_BOOL) count_bytes(P, e->args[0]->dtype);
  }
  for (int i = 0; i < e->nargs; i++) walk_value(P, e->args[i]);
}

static void walk_stmt(vplan *P, const pk_stmt *s) {
  if (!s || P->why) return;
  cg_vloop *vl = P->vl;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) walk_stmt(P, s->stmts[i]);
    return;
  case PK_ST_FOR:
    if (s->loop == PK_LOOP_VECTORIZED) return fail(P, "a vectorized loop inside it");
    if (s->loop >= PK_LOOP_GPU_BLOCK_X) return fail(P, "a GPU-bound loop inside it");
    if (cg_vec_of(P->E, s->min) || cg_vec_of(P->E, s->extent))
      return fail(P, "an inner loop whose bounds differ by lane");
    walk_index(P, s->min);
    walk_index(P, s->extent);
    vl->var_inner[s->var->id] = true;
    if (s->min->kind == PK_LX_INT && s->extent->kind == PK_LX_INT && s->extent->ival > 0) {
      P->ranged[s->var->id] = true;
      P->var_lo[s->var->id] = s->min->ival;
      P->var_hi[s->var->id] = s->min->ival + s->extent->ival - 1;
    }
    P->inner_loops++;
    walk_stmt(P, s->body);
    P->inner_loops--;
    return;
  case PK_ST_IF:
    walk_value(P, s->cond);
    walk_stmt(P, s->then_);
    walk_stmt(P, s->else_);
    return;
  case PK_ST_STORE:
    record(P, s->buf, s->index, true);
    count_bytes(P, s->buf->dtype);
    walk_index(P, s->index);
    walk_value(P, s->value);
    if (s->mask) walk_value(P, s->mask);
    return;
  case PK_ST_ALLOC:
    if (s->buf->scope != PK_SCOPE_LOCAL) return fail(P, "a workspace or shared allocation inside it");
    if (!cg_ctype(s->buf->dtype) || s->buf->dtype == PKRT_DTYPE_BOOL)
      return fail(P, "a buffer of this dtype");
    vl->buf_private[s->buf->id] = true;
    count_bytes(P, s->buf->dtype);
    walk_stmt(P, s->body);
    return;
  case PK_ST_LET:
    walk_value(P, s->value);
    vl->var_inner[s->var->id] = true;
    vl->var_vec[s->var->id] = cg_vec_of(P->E, s->value);
    if (vl->var_vec[s->var->id]) count_bytes(P, s->var->dtype);
    walk_stmt(P, s->body);
    return;
  case PK_ST_BARRIER: return fail(P, "a barrier inside it");
  }
}

static bool atom_uses_inner(vplan *P, const pk_lexpr *e) {
  if (e->kind == PK_LX_VAR) return P->vl->var_inner[e->var->id];
  for (int i = 0; i < e->nargs; i++)
    if (atom_uses_inner(P, e->args[i])) return true;
  return false;
}

/* An access c * lane + outer + inner: outer the terms fixed while the loop runs, inner
 * those of inner loop counters, with the range [lo, hi] they (and c0) can take. */
typedef struct split_access {
  int64_t c, lo, hi;
  cg_affine outer;
} split_access;

static bool split_index(vplan *P, const pk_lexpr *index, split_access *x) {
  cg_affine a;
  if (!cg_lane_affine(P->E, index, &a, &x->c)) return false;
  memset(&x->outer, 0, sizeof x->outer);
  x->lo = x->hi = a.c0;
  for (int i = 0; i < a.n; i++) {
    const cg_term *t = &a.t[i];
    if (t->var == P->vl->loop->var) continue;
    if (t->atom ? cg_has_load(t->atom) || atom_uses_inner(P, t->atom) : false) return false;
    if (t->atom || !P->vl->var_inner[t->var->id]) {
      x->outer.t[x->outer.n++] = *t;
      continue;
    }
    int id = t->var->id;
    if (!P->ranged[id]) return false;
    int64_t lo, hi; /* t->coef * [var_lo, var_hi], overflow-checked */
    if (pk_i64_mul(t->coef, P->var_lo[id], &lo) || pk_i64_mul(t->coef, P->var_hi[id], &hi))
      return false;
    if (lo > hi) { int64_t s = lo; lo = hi; hi = s; }
    if (pk_i64_add(x->lo, lo, &x->lo) || pk_i64_add(x->hi, hi, &x->hi)) return false;
  }
  return true;
}

/* Lanes may run together unless one lane could read or write an element another lane
 * writes. For each buffer the loop writes, every access must be c * lane + one fixed outer
 * part + an inner part whose range (over all its accesses) is narrower than |c|: then each
 * lane owns its own elements. Else it may only have one store, outside inner loops (stored
 * lane by lane, in lane order, as the serial loop would). */
static void check_accesses(vplan *P) {
  cg *E = P->E;
  for (int i = 0; i < P->nacc && !P->why; i++) {
    const access *x = &P->acc[i];
    if (P->vl->buf_private[x->buf->id]) {
      if (cg_vec_of(E, x->index)) fail(P, "a lane-dependent index into a per-lane buffer");
      continue;
    }
    if (x->store && !cg_vec_of(E, x->index)) {
      fail(P, "a store to one element from every lane");
      continue;
    }
    if (!x->store) continue;
    int n = 0;
    bool owned = true;
    split_access first, y;
    int64_t lo = 0, hi = 0;
    for (int j = 0; j < P->nacc; j++) {
      if (P->acc[j].buf != x->buf) continue;
      bool ok = split_index(P, P->acc[j].index, &y);
      if (ok && n == 0) first = y, lo = y.lo, hi = y.hi;
      else if (!ok || y.c != first.c || !cg_affine_equal(&y.outer, &first.outer)) owned = false;
      else lo = y.lo < lo ? y.lo : lo, hi = y.hi > hi ? y.hi : hi;
      n++;
    }
    int64_t width;
    owned = owned && !pk_i64_add(hi, -lo, &width) && first.c != INT64_MIN &&
            width < (first.c < 0 ? -first.c : first.c);
    if (!owned && (n > 1 || x->in_inner_loop))
      fail(P, "lanes could touch the same element of a buffer the loop writes");
  }
}

bool cg_vplan(cg *E, const pk_stmt *s, int lanes, cg_vloop *out, const char **why) {
  memset(out, 0, sizeof *out);
  out->loop = s;
  out->var_vec = pk_alloc(E->ctx, (size_t)E->f->nvars + 1);
  out->var_inner = pk_alloc(E->ctx, (size_t)E->f->nvars + 1);
  out->buf_private = pk_alloc(E->ctx, (size_t)E->f->nbufs + 1);
  out->g = cg_vgeom_for(E, lanes, 4);
  cg_vloop *saved = E->vl;
  E->vl = out;
  size_t nv = (size_t)E->f->nvars + 1;
  vplan P = {E, out, NULL, 0, NULL, 0, 0, 0, pk_alloc(E->ctx, nv),
             pk_alloc(E->ctx, sizeof(int64_t) * nv), pk_alloc(E->ctx, sizeof(int64_t) * nv)};
  if (lanes < 2) fail(&P, "fewer than two lanes");
  if (!P.why && cg_vec_of(E, s->min)) fail(&P, "its start differs by lane");
  walk_stmt(&P, s->body);
  if (!P.why) check_accesses(&P);
  out->g = cg_vgeom_for(E, lanes, P.elem_bytes);
  E->vl = saved;
  *why = P.why;
  return P.why == NULL;
}

/* ---- register tiles ---- */

typedef struct tile_scan {
  cg *E;
  const pk_lbuf *b;
  const pk_stmt *vloop; /* innermost vectorized loop around the walk */
  int lanes;            /* width found so far; -1: not a tile */
} tile_scan;

static int loop_part_lanes(cg *E, const pk_stmt *s) {
  int lanes = cg_vlanes(s);
  int64_t extent, min = 0;
  if (!lanes || !cg_const_extent(s, &extent) || extent != lanes) return 0;
  if (s->min->kind == PK_LX_INT) min = s->min->ival;
  else return 0;
  cg_vloop vl;
  const char *why;
  if (!cg_vplan(E, s, lanes, &vl, &why)) return 0;
  if (lanes % vl.g.part_lanes || min % vl.g.part_lanes) return 0;
  return vl.g.part_lanes;
}

static void tile_access(tile_scan *T, const pk_lexpr *index) {
  if (T->lanes < 0) return;
  int pl = T->vloop ? loop_part_lanes(T->E, T->vloop) : 0;
  cg_affine a;
  bool ok = pl > 0 && cg_affine_of(T->E, index, &a) && a.c0 % pl == 0;
  for (int i = 0; ok && i < a.n; i++) {
    const cg_term *t = &a.t[i];
    if (!t->var) ok = false;
    else if (t->var == T->vloop->var) ok = t->coef == 1;
    else ok = t->coef % pl == 0;
  }
  ok = ok && cg_affine_coef_of(&a, T->vloop->var) == 1 && (T->lanes == 0 || T->lanes == pl);
  T->lanes = ok ? pl : -1;
}

static void tile_expr(tile_scan *T, const pk_lexpr *e) {
  if (e->kind == PK_LX_LOAD && e->buf == T->b) tile_access(T, e->args[0]);
  for (int i = 0; i < e->nargs; i++) tile_expr(T, e->args[i]);
}

static void tile_stmt(tile_scan *T, const pk_stmt *s) {
  if (!s || T->lanes < 0) return;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) tile_stmt(T, s->stmts[i]);
    return;
  case PK_ST_FOR: {
    const pk_stmt *saved = T->vloop;
    tile_expr(T, s->min);
    tile_expr(T, s->extent);
    if (s->loop == PK_LOOP_VECTORIZED) T->vloop = s;
    tile_stmt(T, s->body);
    T->vloop = saved;
    return;
  }
  case PK_ST_IF:
    tile_expr(T, s->cond);
    tile_stmt(T, s->then_);
    tile_stmt(T, s->else_);
    return;
  case PK_ST_STORE:
    if (s->buf == T->b) tile_access(T, s->index);
    tile_expr(T, s->index);
    tile_expr(T, s->value);
    if (s->mask) tile_expr(T, s->mask);
    return;
  case PK_ST_ALLOC: tile_stmt(T, s->body); return;
  case PK_ST_LET:
    tile_expr(T, s->value);
    tile_stmt(T, s->body);
    return;
  case PK_ST_BARRIER: return;
  }
}

int cg_vector_tile_lanes(cg *E, const pk_lbuf *b, const pk_stmt *scope) {
  if (E->vl) return 0; /* inside vector code a LOCAL is per lane instead */
  tile_scan T = {E, b, NULL, 0};
  tile_stmt(&T, scope);
  if (T.lanes <= 1 || b->numel % T.lanes) return 0;
  return T.lanes;
}
