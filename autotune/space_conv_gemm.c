/* space_conv_gemm.c — the conv-as-GEMM template, for sums of products whose rows are too
 * short for column vectors (conv2d on 8×8..2×2 images, its data and weight gradients): a
 * channel axis V of the output runs as vector lanes, another axis R before it as register
 * rows, and every reduction (channels, kernel window, batch, image) is the K loop of a
 * GEMM micro-kernel. The operand read at bare V is packed into [V/tile_v][...][tile_v]
 * panels, so each K step loads tile_v contiguous lanes and broadcasts one value per row.
 *
 *   conv2d      out[n, o, h, w]  V = o (weight packed), R = n
 *   conv2d dX   dX[n, c, h, w]   V = c (weight packed), R = n   (sum of a guarded product)
 *   conv2d dW   dW[o, c, kh, kw] V = c (input packed),  R = o
 *
 * R comes before V in the output's dims and the tile is one point of every other dim, so
 * the accumulator tile [tile_rows][tile_v] has V innermost: a register tile for codegen. */
#include <string.h>

#include "space_impl.h"

enum {
  CG_TILE_ROWS, CG_TILE_V, CG_VECTOR, CG_CACHE_WRITE, CG_PACK, CG_REDUCE_ORDER, CG_ORDER,
  CG_UNROLL, CG_UNROLL_K, CG_PARALLEL, CG_RFACTOR_THREADS, CG_NKNOBS
};

typedef struct gemm_plan {
  space_names n;
  int v, r;           /* dims: vector lanes, register rows (-1: none) */
  int64_t ev, er;     /* their extents (er 1 without rows) */
  const char *packed; /* the operand read at bare V ("t1"); NULL: not packed (siblings) */
  int packed_dim;
  int nsib;           /* stages shaped like this one (a strided dX's phases): same knobs */
  space_names *sib;
  bool lanes_first;   /* n.root[0] is the lane of a thread-split reduction (parallel) */
  const char *epi;    /* a fused epilogue (space_epilogue_stage): "t3", which then writes
                         the tile out, the product inlined into it; NULL: none */
  const char *tail;   /* the stage after it that writes the tile out instead, epi computed
                         at its tile (space_epilogue_tail: an SGD update's W'); NULL: none */
} gemm_plan;

#define CG_MAX_SIBLINGS 16

/* The product of a sum: sum(a * b) or sum(select(c, a * b, 0)) (a transposed window's
 * guard); *guard gets c or NULL. */
static const pk_expr *sum_product(const pk_te_tensor *t, const pk_expr **guard) {
  *guard = NULL;
  if (t->kind != PK_TE_COMPUTE || t->body->kind != PK_EXPR_REDUCE || t->body->op != PK_EOP_SUM)
    return NULL;
  const pk_expr *e = t->body->args[0];
  if (e->kind == PK_EXPR_SELECT && e->args[2]->kind == PK_EXPR_FLOAT && e->args[2]->fval == 0) {
    *guard = e->args[0];
    e = e->args[1];
  }
  return e->kind == PK_EXPR_BINARY && e->op == PK_EOP_MUL ? e : NULL;
}

/* The read inside an operand: t[...] or select(c, t[...], 0) (a padded window). */
static const pk_expr *operand_read(const pk_expr *e) {
  if (e->kind == PK_EXPR_SELECT) e = e->args[1];
  return e->kind == PK_EXPR_READ ? e : NULL;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Accumulators of a register tile, by the target's vector registers (16 with AVX2, 32
 * with AVX-512 and AArch64): the rest stay free for the loads and the broadcast. */
static int64_t tile_accumulators(const pk_space *sp) { return sp->vector_regs >= 32 ? 24 : 12; }

/* Picks V, R and the packed operand: V is read bare by one operand and by nothing else (so
 * lanes differ only in that load), R is read by the other operand only (one broadcast per
 * row). The tile with the most accumulators wins (vector parts × rows); a V whose operand
 * is guarded (a padded window) counts a quarter, as each of its loads is masked. */
static bool choose_axes(const pk_space *sp, const pk_te_tensor *t, const pk_expr *mul,
                        const pk_expr *guard, gemm_plan *p) {
  double best = 0;
  for (int d = 0; d < t->ndim; d++) {
    const pk_te_axis *ax = t->axes[d];
    if (t->shape[d] < 4 || (guard && space_uses_axis(guard, ax))) continue;
    for (int i = 0; i < 2; i++) {
      const pk_expr *vop = mul->args[i], *bop = mul->args[1 - i], *rd = operand_read(vop);
      int bd = rd ? space_bare_dim(rd, ax) : -1;
      if (bd < 0 || space_uses_axis(bop, ax)) continue;
      if (vop->kind == PK_EXPR_SELECT && space_uses_axis(vop->args[0], ax)) continue;
      int r = -1;
      for (int c = 0; c < d; c++)
        if (space_uses_axis(bop, t->axes[c]) && !space_uses_axis(vop, t->axes[c]) &&
            (r < 0 || t->shape[c] > t->shape[r]))
          r = c;
      double parts = (double)t->shape[d] / sp->lanes, rows = r >= 0 ? (double)min64(t->shape[r], 8) : 1;
      if (parts > 8) parts = 8;
      double score = parts * rows;
      if (score > tile_accumulators(sp)) score = (double)tile_accumulators(sp);
      if (vop->kind == PK_EXPR_SELECT) score /= 4;
      if (score <= best) continue;
      best = score;
      p->v = d;
      p->r = r;
      p->packed = pk_sprintf(sp->ctx, "t%d", rd->tensor->id);
      p->packed_dim = bd;
    }
  }
  return best > 0;
}

/* The image row's dim of t: the last, or the one before it when the last is the channels
 * that a weight (an operand without the batch dim 0) reads bare: an NHWC conv (the graph's
 * layout pass). */
static int row_dim(const pk_te_tensor *t, const pk_expr *mul) {
  int last = t->ndim - 1;
  for (int i = 0; i < 2; i++) {
    const pk_expr *rd = operand_read(mul->args[i]);
    if (rd && space_bare_dim(rd, t->axes[last]) >= 0 && !space_uses_axis(mul->args[i], t->axes[0]))
      return last - 1;
  }
  return last;
}

static pk_status gemm_init(pk_space *sp) {
  const pk_te_program *prog = sp->task->prog;
  const pk_te_tensor *t = NULL;
  const pk_expr *mul = NULL, *guard = NULL;
  for (int i = 0; i < prog->ntensors && !mul; i++)
    if ((mul = sum_product(prog->tensors[i], &guard))) t = prog->tensors[i];
  if (!mul || t->ndim < 3) return PK_ERR_UNSUPPORTED;
  /* long rows vectorize well along columns: space_conv.c's template serves those, and
   * rows of half a vector or more too where the window is a point (a 1x1 conv) or K is
   * short (a depthwise conv, K = its taps): this template's channel-lane tile then spends
   * more on its strided stores than on its multiply-adds (MobileNetV2's 16x16 expand conv
   * 15 -> 168 GFLOP/s in the conv template, its depthwise dX 7.6 -> 31, at 8x8 7.7 -> 41);
   * full 3x3 convs at 16x16 stay here (ResNet-18's layer1 dX: 75 here, 11 there), and
   * rows of 4 (a 1x1 conv at 4x4: 122 here, 41 there) */
  int wide = 0; /* the widest sum of the program (a strided dX's first phase may be 1x1) */
  int64_t k = 1;
  for (int i = 0; i < prog->ntensors; i++) {
    const pk_te_tensor *u = prog->tensors[i];
    if (u->kind != PK_TE_COMPUTE || u->body->kind != PK_EXPR_REDUCE) continue;
    int w = 0;
    int64_t ku = 1;
    for (int a = 0; a < u->body->naxes; a++) {
      int64_t e = u->body->axes[a]->hi - u->body->axes[a]->lo;
      w += e > 1;
      ku *= e;
    }
    if (w > wide) wide = w;
    if (ku > k) k = ku;
  }
  int64_t row = t->shape[row_dim(t, mul)];
  if (row >= 2 * (int64_t)sp->lanes || ((wide <= 1 || k <= 64) && 2 * row >= sp->lanes)) return PK_ERR_UNSUPPORTED;
  gemm_plan *p = pk_alloc(sp->ctx, sizeof *p);
  if (!choose_axes(sp, t, mul, guard, p)) return PK_ERR_UNSUPPORTED;
  space_names_of(sp, t, &p->n);
  const pk_te_tensor *sibs[CG_MAX_SIBLINGS];
  p->nsib = space_sibling_stages(prog, t, sibs, CG_MAX_SIBLINGS);
  p->sib = pk_alloc(sp->ctx, (size_t)(p->nsib ? p->nsib : 1) * sizeof *p->sib);
  for (int i = 0; i < p->nsib; i++) space_names_of(sp, sibs[i], &p->sib[i]);
  const pk_te_tensor *e = space_epilogue_stage(prog, t);
  if (e) p->epi = pk_sprintf(sp->ctx, "t%d", e->id);
  const pk_te_tensor *tail = e ? space_epilogue_tail(prog, e) : NULL;
  if (tail) p->tail = pk_sprintf(sp->ctx, "t%d", tail->id);
  sp->plan = p;

  int64_t EV = p->ev = t->shape[p->v], ER = p->er = p->r >= 0 ? t->shape[p->r] : 1;
  int64_t v[PK_SPACE_MAX_VALUES];
  static const int64_t rows[] = {1, 2, 3, 4, 5, 6, 8};
  static const int64_t lanes[] = {4, 8, 12, 16, 24, 32, 48, 64};
  space_add_knob(sp, "tile_rows", v, space_tile_values(ER, rows, 7, 2, 8, v));
  int n = space_tile_values(EV, lanes, 8, 0, 0, v);
  if (EV <= 64 && (n == 0 || v[n - 1] != EV)) v[n++] = EV;
  space_add_knob(sp, "tile_v", v, n);
  space_add_knob(sp, "vector", v, space_vector_values(sp, EV, v));
  /* a fused epilogue is computed at the register tile: the accumulators are one */
  space_add_knob(sp, "cache_write", p->epi ? (int64_t[]){1} : (int64_t[]){0, 1}, p->epi ? 1 : 2);
  space_add_knob(sp, "pack", (int64_t[]){0, 1}, 2);
  n = 0;
  for (int i = 0; i < p->n.norders; i++) v[n++] = i;
  space_add_knob(sp, "reduce_order", v, n);
  space_add_knob(sp, "order", (int64_t[]){0, 1}, 2);
  space_add_knob(sp, "unroll", (int64_t[]){0, 1}, 2);
  space_add_knob(sp, "unroll_k", (int64_t[]){1, 2, 4, 0}, 4);
  space_add_knob(sp, "parallel", (int64_t[]){0, 1}, sp->opts.allow_parallel ? 2 : 1);
  /* weight gradients of few channels (space_thread_values); not with siblings or a fused
   * epilogue (v[0] is 0) */
  space_add_knob(sp, "rfactor_threads", v, p->nsib || p->epi ? 1 : space_thread_values(sp, t, v));
  sp->knobs[CG_RFACTOR_THREADS].added_later = true;
  PK_ASSERT(sp->nknobs == CG_NKNOBS);
  return PK_OK;
}

#define N_(base, suffix) space_name(s, base, suffix)

/* Splits R by tile_rows and V by tile_v (and V.i by the vector width) in stage; the names
 * of the tile's inner loops go to inner[] (rows, vector parts, lanes). */
static pk_status split_tile(const gemm_plan *p, pk_schedule *s, const char *stage, const int64_t *v,
                            const char **inner, int *ninner, const char **lanes) {
  const char *R = p->r >= 0 ? p->n.root[p->r] : NULL, *V = p->n.root[p->v];
  int64_t vec = v[CG_VECTOR];
  *ninner = 0;
  *lanes = NULL;
  if (R) {
    SPACE_TRY(pk_sched_split(s, stage, R, v[CG_TILE_ROWS]));
    inner[(*ninner)++] = N_(R, ".i");
  }
  SPACE_TRY(pk_sched_split(s, stage, V, v[CG_TILE_V]));
  const char *vi = N_(V, ".i");
  if (vec > 1) {
    SPACE_TRY(pk_sched_split(s, stage, vi, vec));
    inner[(*ninner)++] = N_(vi, ".o");
    inner[(*ninner)++] = *lanes = N_(vi, ".i");
  } else {
    inner[(*ninner)++] = vi;
  }
  return PK_OK;
}

/* Tile loops outside: V.o then R.o (order 0: one packed panel serves every row tile) or R.o
 * then V.o, then the other dims, each a single point of the tile. */
static int outer_loops(const gemm_plan *p, pk_schedule *s, const int64_t *v, const char **out) {
  int n = 0;
  if (p->lanes_first) out[n++] = p->n.root[0]; /* the threads' partial sums, in parallel */
  const char *R = p->r >= 0 ? p->n.root[p->r] : NULL, *V = p->n.root[p->v];
  if (v[CG_ORDER] == 1 && R) out[n++] = N_(R, ".o");
  out[n++] = N_(V, ".o");
  if (v[CG_ORDER] == 0 && R) out[n++] = N_(R, ".o");
  for (int d = p->lanes_first ? 1 : 0; d < p->n.ndim; d++)
    if (d != p->v && d != p->r) out[n++] = p->n.root[d];
  return n;
}

/* The accumulating stage's loops: outer, [reductions], rows, vector parts, lanes; rows and
 * parts fully unrolled (unroll 1), so the tile lives in registers. */
static pk_status shape_acc(const gemm_plan *p, pk_schedule *s, const char *stage, const int64_t *v) {
  const char *inner[4], *lanes, *order[2 * PK_TE_MAX_DIMS + 8];
  int ninner, n = 0;
  SPACE_TRY(split_tile(p, s, stage, v, inner, &ninner, &lanes));
  n = outer_loops(p, s, v, order);
  for (int r = 0; r < p->n.nreduce; r++) order[n++] = p->n.k[p->n.orders[v[CG_REDUCE_ORDER]][r]];
  for (int i = 0; i < ninner; i++) order[n++] = inner[i];
  SPACE_TRY(pk_sched_reorder(s, stage, n, order));
  if (v[CG_UNROLL])
    for (int i = 0; i < ninner; i++)
      if (inner[i] != lanes) SPACE_TRY(pk_sched_unroll(s, stage, inner[i], 0));
  if (v[CG_UNROLL_K] != 1)
    SPACE_TRY(pk_sched_unroll(s, stage, p->n.k[p->n.orders[v[CG_REDUCE_ORDER]][p->n.nreduce - 1]], v[CG_UNROLL_K]));
  if (lanes) SPACE_TRY(pk_sched_vectorize(s, stage, lanes));
  return PK_OK;
}

/* Whether the tail writes the tile out (the epilogue computed at its tile): not in parallel,
 * where a result computed inside the parallel loop would have to be local; the tail is
 * then a loop nest of its own. */
static bool tail_at_tile(const gemm_plan *p, const int64_t *v) {
  /* and only where tiles and vectors divide the extents: a tile's region is clamped into
   * the tensor, so a partial last tile would compute part of the previous one's again,
   * and the update is in place (M' = m M + g twice is wrong) */
  return p->tail && !v[CG_PARALLEL] && !p->lanes_first && p->er % v[CG_TILE_ROWS] == 0 &&
         p->ev % v[CG_TILE_V] == 0 && (v[CG_VECTOR] < 2 || v[CG_TILE_V] % v[CG_VECTOR] == 0);
}

/* Tiles O, a stage that writes the tile out: outer loops, then rows, vector parts and
 * lanes (vectorized); the outer loops' names to outer[], *nouter of them. */
static pk_status tile_out(const gemm_plan *p, pk_schedule *s, const char *O, const int64_t *v,
                          const char **outer, int *nouter) {
  const char *inner[4], *lanes, *order[2 * PK_TE_MAX_DIMS + 8];
  int ninner;
  SPACE_TRY(split_tile(p, s, O, v, inner, &ninner, &lanes));
  *nouter = outer_loops(p, s, v, outer);
  int n = 0;
  for (int i = 0; i < *nouter; i++) order[n++] = outer[i];
  for (int i = 0; i < ninner; i++) order[n++] = inner[i];
  SPACE_TRY(pk_sched_reorder(s, O, n, order));
  if (lanes) SPACE_TRY(pk_sched_vectorize(s, O, lanes));
  return PK_OK;
}

/* Shapes the accumulating stage p->n.stage (the main one or a sibling). */
static pk_status gemm_apply_stage(const gemm_plan *p, pk_schedule *s, const int64_t *v) {
  const char *T = p->n.stage;
  if (v[CG_PACK] && p->packed) {
    /* one panel for the main stage and its siblings (a strided dX's phases read the same
     * weight at other taps): unpacked, their lanes load it 9 apart */
    const char *readers[1 + CG_MAX_SIBLINGS];
    int nr = 0;
    readers[nr++] = T;
    for (int i = 0; i < p->nsib; i++) readers[nr++] = p->sib[i].stage;
    SPACE_TRY(pk_sched_cache_read(s, p->packed, "ws", nr, readers, p->packed_dim, v[CG_TILE_V]));
  }
  const char *outer[PK_TE_MAX_DIMS + 2];
  int nouter;
  const char *O = T; /* the stage whose loops write the tile out */
  if (v[CG_CACHE_WRITE]) {
    /* T copies the tile out (lanes vectorized); T.local accumulates it in registers */
    SPACE_TRY(pk_sched_cache_write(s, T, "local"));
    if (p->epi) { /* the epilogue copies it out instead, T (a copy now) inlined into it */
      SPACE_TRY(pk_sched_compute_inline(s, T));
      O = p->epi;
    }
    /* with a tail (an SGD update's W' after M'), the tail writes the tile out and the
     * epilogue is computed at its tile, shaped the same (its tile loops then run once) */
    const char *A = O; /* the stage the accumulators are computed at */
    bool at_tile = tail_at_tile(p, v);
    if (at_tile) O = p->tail;
    SPACE_TRY(tile_out(p, s, O, v, outer, &nouter));
    if (at_tile) {
      SPACE_TRY(pk_sched_compute_at(s, A, O, outer[nouter - 1]));
      SPACE_TRY(tile_out(p, s, A, v, outer, &nouter));
    }
    SPACE_TRY(pk_sched_compute_at(s, p->n.local, A, outer[nouter - 1]));
    SPACE_TRY(shape_acc(p, s, p->n.local, v));
  } else {
    SPACE_TRY(shape_acc(p, s, T, v));
    nouter = outer_loops(p, s, v, outer);
  }
  if (v[CG_PARALLEL] || p->lanes_first) SPACE_TRY(pk_sched_parallel(s, O, outer[0]));
  return PK_OK;
}

/* rfactor_threads T: the longest reduction split T ways first (space_thread_rfactor); the
 * tile is shaped in T.rf, its lanes the outermost, parallel loop; T sums the partials. */
static pk_status gemm_apply_threads(const gemm_plan *p, pk_schedule *s, const int64_t *v) {
  gemm_plan q = *p;
  int64_t w[CG_NKNOBS];
  memcpy(w, v, sizeof w);
  SPACE_TRY(space_thread_rfactor(s, &p->n, v[CG_RFACTOR_THREADS], &q.n));
  q.v++; /* the lane is root 0 */
  if (q.r >= 0) q.r++;
  q.lanes_first = true;
  const pk_stage *st = pk_sched_find_stage(s, q.n.stage);
  const pk_iter *k = pk_sched_find_iter(st, q.n.k[q.n.orders[v[CG_REDUCE_ORDER]][q.n.nreduce - 1]]);
  if (k && w[CG_UNROLL_K] > k->extent) w[CG_UNROLL_K] = k->extent <= 64 ? 0 : 1;
  return gemm_apply_stage(&q, s, w);
}

/* The knob values for a sibling stage, whose extents may be smaller than the main stage's:
 * tiles, vectors and unroll depths clamped to them; no packing. */
static void gemm_fit(const gemm_plan *q, pk_schedule *s, const int64_t *v, int64_t *out) {
  const pk_stage *st = pk_sched_find_stage(s, q->n.stage);
  const int64_t *shape = st->tensor->shape;
  memcpy(out, v, CG_NKNOBS * sizeof *out);
  if (q->r >= 0 && out[CG_TILE_ROWS] > shape[q->r]) out[CG_TILE_ROWS] = shape[q->r];
  if (out[CG_TILE_V] > shape[q->v]) out[CG_TILE_V] = shape[q->v];
  if (out[CG_VECTOR] > out[CG_TILE_V]) out[CG_VECTOR] = out[CG_TILE_V];
  if (out[CG_VECTOR] < 2) out[CG_VECTOR] = 1;
  const char *k = q->n.k[q->n.orders[v[CG_REDUCE_ORDER]][q->n.nreduce - 1]];
  const pk_iter *it = pk_sched_find_iter(st, k);
  if (it && out[CG_UNROLL_K] > it->extent) out[CG_UNROLL_K] = it->extent <= 64 ? 0 : 1;
}

static pk_status gemm_apply(const pk_space *sp, pk_schedule *s, const int64_t *v) {
  const gemm_plan *p = sp->plan;
  if (p->epi && (!v[CG_CACHE_WRITE] || v[CG_RFACTOR_THREADS]))
    return pk_ctx_fail(s->ctx, PK_ERR_SCHEDULE, "knobs: a fused epilogue needs cache_write 1 "
                       "and rfactor_threads 0");
  if (v[CG_RFACTOR_THREADS]) SPACE_TRY(gemm_apply_threads(p, s, v));
  else SPACE_TRY(gemm_apply_stage(p, s, v));
  for (int i = 0; i < p->nsib; i++) {
    gemm_plan q = *p;
    int64_t w[CG_NKNOBS];
    q.n = p->sib[i];
    q.packed = NULL;
    q.epi = NULL;
    q.tail = NULL;
    gemm_fit(&q, s, v, w);
    SPACE_TRY(gemm_apply_stage(&q, s, w));
  }
  for (int i = 0; i < p->n.nother; i++) {
    const pk_stage *st = pk_sched_find_stage(s, p->n.other[i]);
    if (p->epi && !strcmp(p->n.other[i], p->epi)) continue; /* shaped as the tile, above */
    if (tail_at_tile(p, v) && !strcmp(p->n.other[i], p->tail)) continue; /* as the tile too */
    bool sibling = false; /* shaped above (after cache_write, a copy that looks injective) */
    for (int j = 0; j < p->nsib; j++) sibling |= !strcmp(p->n.other[i], p->sib[j].stage);
    bool done = false; /* the phases' interleave */
    if (st && !sibling && p->nsib)
      SPACE_TRY(space_schedule_interleave(s, st, pk_sched_find_stage(s, p->n.stage)->tensor, v[CG_PARALLEL] != 0, &done));
    if (st && !sibling && !done) SPACE_TRY(space_schedule_injective(s, st, v[CG_VECTOR], 1, v[CG_PARALLEL] != 0, false, false));
  }
  return PK_OK;
}

/* The GEMM micro-kernel as preset: about tile_accumulators() vectors of rows × parts, two
 * parts when R has at least 4 rows (rows dividing R, so no tile has a tail), else as many
 * parts as V has (up to 64 lanes); panels packed, reductions in canonical order. */
static bool gemm_preset(const pk_space *sp, int64_t *v) {
  const gemm_plan *p = sp->plan;
  memset(v, 0, CG_NKNOBS * sizeof *v);
  int64_t acc = tile_accumulators(sp);
  int64_t vec = space_pick(sp, CG_VECTOR, p->ev >= sp->lanes ? sp->lanes : p->ev);
  int64_t vparts = (p->ev + vec - 1) / vec;
  int64_t rows = 1;
  for (int64_t r = 8; r >= 1 && rows == 1; r--)
    if (p->er % r == 0) rows = r;
  int64_t parts = rows >= 4 ? min64(2, vparts) : min64(acc / rows, vparts);
  /* fewer parts where that makes the tile divide V: the last tile of a ragged V is shifted
   * back onto the one before it, and its packed panel index is then no longer affine in
   * the lane, every load a gather (a 1x1 conv of 336 channels: 8 GFLOP/s, 130 with one
   * part instead of two) */
  for (int64_t q = parts; q > 1 && p->ev % (parts * vec) != 0; q--)
    if (p->ev % ((q - 1) * vec) == 0) parts = q - 1;
  if (rows >= 4)
    for (rows = min64(acc / parts, 8); p->er % rows; rows--) {}
  v[CG_TILE_ROWS] = space_pick(sp, CG_TILE_ROWS, rows);
  v[CG_TILE_V] = space_pick(sp, CG_TILE_V, parts * vec);
  v[CG_VECTOR] = vec;
  v[CG_CACHE_WRITE] = 1;
  v[CG_PACK] = 1;
  v[CG_UNROLL] = 1;
  v[CG_UNROLL_K] = 1;
  /* fewer lane tiles than cores (a weight gradient of few channels): split the reduction */
  v[CG_RFACTOR_THREADS] = space_thread_preset(sp, CG_RFACTOR_THREADS, (p->ev + v[CG_TILE_V] - 1) / v[CG_TILE_V]);
  /* serial: with its outer tile loop parallel, MobileNetV2's 4x4 1x1 convs (two channel
   * tiles, the ragged last one shifted back onto the first) ran 8x slower at two threads
   * than at one (docs/performance.md, issue 23's two-thread rows); the tuner may still
   * choose parallel where it measures faster */
  return true;
}

const space_class pk_space_class_conv_gemm = {"conv_gemm", gemm_init, gemm_apply, gemm_preset};
