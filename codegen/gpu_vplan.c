/* gpu_vplan.c — may a VECTORIZED loop on a GPU read and write whole vectors (float4,
 * vload4), and which of its accesses. A GPU thread's vectorized loop is short (2 or 4
 * consecutive elements: the spaces' `vector` and `items` knobs), so the plan is simple:
 * the guards must hold for every lane (else the emitter falls back to the scalar loop),
 * then each store runs for all lanes at once. Accesses that are not consecutive, of
 * another dtype or to per-thread arrays stay scalar, lane by lane, inside the vector path. */
#include "gpu_vplan.h"

#include <string.h>

typedef struct walk {
  pk_ctx *ctx;
  gpu_vplan *P;
  int cap_conds, cap_stores, cap_acc, cap_checks;
  bool bad; /* a statement the vector path cannot run */
} walk;

static void *grow(pk_ctx *ctx, void *old, int n, int *cap, size_t size) {
  if (n < *cap) return old;
  int cap2 = *cap ? 2 * *cap : 8;
  void *p = pk_alloc(ctx, size * (size_t)cap2);
  if (n) memcpy(p, old, size * (size_t)n);
  *cap = cap2;
  return p;
}

static void add_access(walk *W, const pk_lbuf *b, const pk_lexpr *index, const pk_lexpr *load,
                       int stmt, bool in_index) {
  gpu_vplan *P = W->P;
  P->acc = grow(W->ctx, P->acc, P->nacc, &W->cap_acc, sizeof *P->acc);
  P->acc[P->nacc++] = (gpu_vaccess){b, index, load, stmt, in_index, false};
}

static void walk_expr(walk *W, const pk_lexpr *e, int stmt, bool in_index) {
  if (e->kind == PK_LX_LOAD) {
    add_access(W, e->buf, e->args[0], e, stmt, in_index);
    walk_expr(W, e->args[0], stmt, true);
    return;
  }
  for (int i = 0; i < e->nargs; i++) walk_expr(W, e->args[i], stmt, in_index);
}

static void add_cond(walk *W, const pk_lexpr *c) {
  gpu_vplan *P = W->P;
  P->conds = grow(W->ctx, P->conds, P->nconds, &W->cap_conds, sizeof *P->conds);
  P->conds[P->nconds++] = c;
  walk_expr(W, c, -1, false);
}

/* The body's shape: IFs without else and SEQs around STOREs. */
static void walk_stmt(walk *W, const pk_stmt *s) {
  if (!s || W->bad) return;
  gpu_vplan *P = W->P;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) walk_stmt(W, s->stmts[i]);
    return;
  case PK_ST_IF:
    if (s->else_) break;
    add_cond(W, s->cond);
    walk_stmt(W, s->then_);
    return;
  case PK_ST_STORE: {
    if (s->mask) add_cond(W, s->mask);
    int k = P->nstores;
    P->stores = grow(W->ctx, P->stores, P->nstores, &W->cap_stores, sizeof *P->stores);
    P->stores[P->nstores++] = s;
    add_access(W, s->buf, s->index, NULL, k, false);
    walk_expr(W, s->index, k, true);
    walk_expr(W, s->value, k, false);
    return;
  }
  default: break; /* loops, lets, allocations, barriers: the scalar loop */
  }
  W->bad = true;
}

/* No lane sees another lane's store (so running a store for all lanes at once, loads
 * first, is what the serial loop does): every access to a buffer the loop writes is at
 * the store's index, that index differs by lane, and no guard reads the buffer (the
 * vector path tests the guards before any store). */
static bool lanes_independent(const gpu_vplan *P) {
  for (int i = 0; i < P->nacc; i++) {
    const gpu_vaccess *st = &P->acc[i];
    if (st->load) continue;
    int64_t stride, divisor;
    if (!pk_lx_lane_form(st->index, P->loop->var, P->lanes, &stride, &divisor) || stride == 0)
      return false;
    for (int j = 0; j < P->nacc; j++) {
      const gpu_vaccess *a = &P->acc[j];
      if (a->buf == st->buf && (a->stmt < 0 || !pk_lx_equal(a->index, st->index))) return false;
    }
  }
  return true;
}

static bool vector_dtype(pkrt_dtype t, int lanes) {
  return (t == PKRT_DTYPE_F32 && (lanes == 2 || lanes == 4)) || (t == PKRT_DTYPE_F64 && lanes == 2);
}

static void need_check(walk *W, const pk_lbuf *b, int bytes) {
  gpu_vplan *P = W->P;
  for (int i = 0; i < P->nchecks; i++)
    if (P->check_buf[i] == b) {
      if (bytes > P->check_bytes[i]) P->check_bytes[i] = bytes;
      return;
    }
  int cap = W->cap_checks;
  P->check_buf = grow(W->ctx, P->check_buf, P->nchecks, &cap, sizeof *P->check_buf);
  P->check_bytes = grow(W->ctx, P->check_bytes, P->nchecks, &W->cap_checks, sizeof *P->check_bytes);
  P->check_buf[P->nchecks] = b;
  P->check_bytes[P->nchecks++] = bytes;
}

static bool make_vector(walk *W, gpu_vaccess *a, bool aligned_only) {
  gpu_vplan *P = W->P;
  int64_t stride, divisor;
  if (a->stmt < 0 || a->in_index || a->buf->scope == PK_SCOPE_LOCAL ||
      !vector_dtype(a->buf->dtype, P->lanes) ||
      !pk_lx_lane_form(a->index, P->loop->var, P->lanes, &stride, &divisor) || stride != 1)
    return false;
  if (!aligned_only) return true;
  if (divisor % P->lanes) return false; /* divisor 0: the index at lane 0 is 0 */
  if (a->buf->scope != PK_SCOPE_SHARED)
    need_check(W, a->buf, P->lanes * (int)pkrt_dtype_size(a->buf->dtype));
  return true;
}

bool pk_gpu_vplan(pk_ctx *ctx, const pk_stmt *s, bool aligned_only, gpu_vplan *out) {
  memset(out, 0, sizeof *out);
  if (s->kind != PK_ST_FOR || s->loop != PK_LOOP_VECTORIZED || s->min->kind != PK_LX_INT ||
      s->min->ival != 0 || s->extent->kind != PK_LX_INT ||
      (s->extent->ival != 2 && s->extent->ival != 4))
    return false;
  out->loop = s;
  out->lanes = (int)s->extent->ival;
  walk W = {.ctx = ctx, .P = out};
  walk_stmt(&W, s->body);
  if (W.bad || out->nstores == 0 || !lanes_independent(out)) return false;
  int nvec = 0, *nloads = pk_alloc(ctx, sizeof *nloads * (size_t)out->nstores);
  memset(nloads, 0, sizeof *nloads * (size_t)out->nstores);
  for (int i = 0; i < out->nacc; i++) {
    gpu_vaccess *a = &out->acc[i];
    if (a->load && a->stmt >= 0 && nloads[a->stmt] == GPU_VPLAN_MAX_LOADS) continue;
    a->vector = make_vector(&W, a, aligned_only);
    if (a->vector && a->load) nloads[a->stmt]++;
    nvec += a->vector;
  }
  return nvec > 0;
}
