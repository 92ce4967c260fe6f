/* space_conv.c — the conv-class template: a register tile of tile_oc output channels ×
 * tile_h rows × tile_w columns (columns vectorized), the reductions (channels, kernel rows
 * and columns) in a chosen order outside it, accumulated in a cache_write stage or in the
 * output, the weight optionally packed by channel tile. Its preset is
 * bench/hand_schedules.c's conv2d schedule for a 1x1 conv; with a window, 8 channels x one
 * vector and the padding guards partitioned away; a depthwise weight gradient's sums each
 * row of the image in vector lanes (rfactor_lanes). */
#include <string.h>

#include "space_impl.h"

enum {
  CV_TILE_OC, CV_TILE_W, CV_TILE_H, CV_VECTOR, CV_CACHE_WRITE, CV_REDUCE_ORDER, CV_ORDER,
  CV_UNROLL, CV_UNROLL_K, CV_PACK_W, CV_PARALLEL, CV_PARTITION, CV_RFACTOR_THREADS,
  CV_RFACTOR_LANES, CV_NKNOBS
};

typedef struct conv_plan {
  space_names n; /* order 0 is k0, k1, k2: kernel rows, columns, then channels for conv2d
                    (the hand schedule's order) */
  int oc, h, w;  /* dims: output channels, rows (-1: none), columns */
  const char *weight; /* operand read at bare oc ("t1"); NULL: none */
  int weight_dim;
  int64_t weight_bytes, input_bytes; /* the weight, one image of the other operand (0:
                                         no weight): what the two loop orders re-read */
  int nsib;           /* stages shaped like this one (a strided dX's phases): same knobs */
  space_names *sib;
  bool lanes_first;   /* n.root[0] is the lane of a thread-split reduction (parallel) */
  const char *row_k;  /* the reduce root both operands read along their rows; NULL: none */
  bool window;        /* more than one reduction longer than 1 (not a 1x1 conv) */
  const char *tail;   /* the stage after epi that writes the tile out instead, epi computed
                         at its tile (space_epilogue_tail: an SGD update's W'); NULL: none */
  const char *epi;    /* a fused epilogue (space_epilogue_stage): "t3", which then writes
                         the tile out, the product inlined into it; NULL: none */
} conv_plan;

#define CV_MAX_SIBLINGS 16

/* The reduce axis of t's sum that the last index of both operands' reads uses (the image
 * row of a weight gradient): its root's name in the default schedule into *name, its
 * extent returned; 0: none. */
static int64_t row_reduce(pk_space *sp, const pk_te_tensor *t, const pk_expr *mul, const char **name) {
  for (int r = 0; r < t->body->naxes; r++) {
    bool both = true;
    for (int i = 0; i < 2 && both; i++) {
      const pk_expr *e = mul->args[i];
      if (e->kind == PK_EXPR_SELECT) e = e->args[1];
      both = e->kind == PK_EXPR_READ && e->nargs > 0 &&
             space_uses_axis(e->args[e->nargs - 1], t->body->axes[r]);
    }
    if (!both) continue;
    pk_ctx *tmp = pk_ctx_new();
    pk_schedule *s0 = pk_sched_new(tmp, sp->task->prog);
    const pk_stage *st = pk_sched_find_stage(s0, pk_sprintf(tmp, "t%d", t->id));
    *name = pk_strdup(sp->ctx, st->root[t->ndim + r]->name);
    pk_ctx_free(tmp);
    return t->body->axes[r]->hi - t->body->axes[r]->lo;
  }
  return 0;
}

static int64_t tensor_bytes(const pk_te_tensor *x, size_t elem) {
  int64_t n = (int64_t)elem;
  for (int d = 0; d < x->ndim; d++) n *= x->shape[d];
  return n;
}

static pk_status conv_init(pk_space *sp) {
  const pk_te_program *prog = sp->task->prog;
  const pk_te_tensor *t = space_product_stage(prog);
  if (!t && sp->task->cls == PK_TASK_REDUCTION) /* a guarded conv data gradient */
    for (int i = 0; i < prog->ntensors && !t; i++)
      if (space_sum_product(prog->tensors[i]) && prog->tensors[i]->body->naxes >= 3) t = prog->tensors[i];
  if (!t || t->ndim < 3) return PK_ERR_UNSUPPORTED;
  pk_ctx *ctx = sp->ctx;
  conv_plan *p = pk_alloc(ctx, sizeof *p);
  space_names_of(sp, t, &p->n);
  p->oc = 1;
  p->w = t->ndim - 1;
  int wide = 0; /* reductions longer than 1: the channels, then a window's taps */
  for (int a = 0; a < t->body->naxes; a++) wide += t->body->axes[a]->hi - t->body->axes[a]->lo > 1;
  p->window = wide >= 2;
  p->h = t->ndim >= 4 ? t->ndim - 2 : -1;
  const pk_expr *mul = space_sum_product(t);
  for (int i = 0; i < 2 && !p->weight; i++) {
    int d = space_bare_dim(mul->args[i], t->axes[p->oc]);
    if (d >= 0) {
      p->weight = pk_sprintf(ctx, "t%d", mul->args[i]->tensor->id);
      p->weight_dim = d;
      const pk_expr *in = mul->args[1 - i];
      if (in->kind == PK_EXPR_SELECT) in = in->args[1]; /* a padded window */
      /* only where an image is one batch point of the output (not a dW: batch reduced) */
      if (in->kind == PK_EXPR_READ && in->tensor->ndim >= 3 && space_bare_dim(in, t->axes[0]) == 0) {
        size_t elem = pkrt_dtype_size(t->dtype);
        p->weight_bytes = tensor_bytes(mul->args[i]->tensor, elem);
        p->input_bytes = tensor_bytes(in->tensor, elem) / in->tensor->shape[0];
      }
    }
  }
  const pk_te_tensor *sibs[CV_MAX_SIBLINGS];
  p->nsib = space_sibling_stages(prog, t, sibs, CV_MAX_SIBLINGS);
  p->sib = pk_alloc(ctx, (size_t)(p->nsib ? p->nsib : 1) * sizeof *p->sib);
  for (int i = 0; i < p->nsib; i++) space_names_of(sp, sibs[i], &p->sib[i]);
  const pk_te_tensor *e = space_epilogue_stage(prog, t);
  if (e) p->epi = pk_sprintf(ctx, "t%d", e->id);
  const pk_te_tensor *tail = e ? space_epilogue_tail(prog, e) : NULL;
  if (tail) p->tail = pk_sprintf(ctx, "t%d", tail->id);
  sp->plan = p;

  int64_t OC = t->shape[p->oc], W = t->shape[p->w], H = p->h >= 0 ? t->shape[p->h] : 1;
  int64_t v[PK_SPACE_MAX_VALUES];
  static const int64_t chans[] = {1, 2, 3, 4, 6, 8, 12, 16};
  static const int64_t cols[] = {1, 2, 4, 8, 16, 32, 64};
  static const int64_t rows[] = {1, 2, 4};
  space_add_knob(sp, "tile_oc", v, space_tile_values(OC, chans, 8, 2, 16, v));
  space_add_knob(sp, "tile_w", v, space_tile_values(W, cols, 7, 4, 64, v));
  space_add_knob(sp, "tile_h", v, space_tile_values(H, rows, 3, 0, 0, v));
  space_add_knob(sp, "vector", v, space_vector_values(sp, W, v));
  /* a fused epilogue is computed at the register tile: the accumulators are one */
  space_add_knob(sp, "cache_write", p->epi ? (int64_t[]){1} : (int64_t[]){0, 1}, p->epi ? 1 : 2);
  int n = 0;
  for (int i = 0; i < p->n.norders; i++) v[n++] = i;
  space_add_knob(sp, "reduce_order", v, n);
  space_add_knob(sp, "order", (int64_t[]){0, 1}, 2);
  space_add_knob(sp, "unroll", (int64_t[]){0, 1}, 2);
  /* depth of the innermost reduction's unroll: 1 none, 0 full (as pk_sched_unroll) */
  space_add_knob(sp, "unroll_k", (int64_t[]){1, 2, 4, 0}, 4);
  space_add_knob(sp, "pack_w", (int64_t[]){0, 1}, p->weight ? 2 : 1);
  space_add_knob(sp, "parallel", (int64_t[]){0, 1}, sp->opts.allow_parallel ? 2 : 1);
  /* cut the innermost serial reduce loop where the padding guards hold (pk_sched_partition):
   * interior tiles then read the input with plain vector loads */
  space_add_knob(sp, "partition", (int64_t[]){0, 1}, 2);
  /* weight gradients: few outputs, long reductions (space_thread_values); not with siblings
   * or a fused epilogue (v[0] is 0) */
  space_add_knob(sp, "rfactor_threads", v, p->nsib || p->epi ? 1 : space_thread_values(sp, t, v));
  sp->knobs[CV_RFACTOR_THREADS].added_later = true;
  /* a weight gradient's row split into vector lanes of partial sums (rfactor), the taps
   * unrolled around them (conv_apply_lanes); where the output is small beside the
   * reduction, as rfactor_threads, and not with siblings */
  int nl = 0;
  v[nl++] = 0;
  double length = 1;
  for (int a = 0; a < t->body->naxes; a++) length *= (double)(t->body->axes[a]->hi - t->body->axes[a]->lo);
  int64_t row = p->nsib || p->epi || (double)pk_te_tensor_numel(t) > length
                    ? 0 : row_reduce(sp, t, mul, &p->row_k);
  if (row > 0) {
    int64_t w[PK_SPACE_MAX_VALUES];
    int nw = space_vector_values(sp, row, w);
    for (int i = 0; i < nw; i++)
      if (w[i] > 1) v[nl++] = w[i];
  }
  space_add_knob(sp, "rfactor_lanes", v, nl);
  sp->knobs[CV_RFACTOR_LANES].added_later = true;
  PK_ASSERT(sp->nknobs == CV_NKNOBS);
  return PK_OK;
}

#define N_(base, suffix) space_name(s, base, suffix)

/* The loops of the tile (everything but the reductions), outer ones in the chosen order. */
typedef struct conv_loops {
  int nouter;
  const char *outer[PK_TE_MAX_DIMS];
  int ninner;
  const char *inner[4];
  const char *vec;    /* the vectorized leaf (NULL: none) */
  const char *unroll[3];
  int nunroll;
} conv_loops;

static void conv_loop_names(const conv_plan *p, pk_schedule *s, const int64_t *v, conv_loops *l) {
  int64_t V = v[CV_VECTOR], WR = v[CV_TILE_W];
  bool split_h = p->h >= 0 && v[CV_TILE_H] > 1;
  const char *oc = p->n.root[p->oc], *w = p->n.root[p->w], *h = p->h >= 0 ? p->n.root[p->h] : NULL;
  memset(l, 0, sizeof *l);
  for (int d = 0; d < p->n.ndim; d++)
    if (d != p->oc && d != p->h && d != p->w) l->outer[l->nouter++] = p->n.root[d];
  const char *tiles[3];
  int nt = 0;
  if (v[CV_ORDER] == 0) tiles[nt++] = N_(oc, ".o"); /* channels outermost: reuse inputs */
  if (h) tiles[nt++] = split_h ? N_(h, ".o") : h;
  tiles[nt++] = N_(w, ".o");
  if (v[CV_ORDER] == 1) tiles[nt++] = N_(oc, ".o");  /* channels innermost: reuse weights */
  for (int i = 0; i < nt; i++) l->outer[l->nouter++] = tiles[i];
  l->inner[l->ninner++] = N_(oc, ".i");
  l->unroll[l->nunroll++] = N_(oc, ".i");
  if (split_h) {
    l->inner[l->ninner++] = N_(h, ".i");
    l->unroll[l->nunroll++] = N_(h, ".i");
  }
  const char *wi = N_(w, ".i");
  if (V > 1 && V != WR) {
    l->inner[l->ninner++] = N_(wi, ".o");
    l->inner[l->ninner++] = N_(wi, ".i");
    l->unroll[l->nunroll++] = N_(wi, ".o");
    l->vec = N_(wi, ".i");
  } else {
    l->inner[l->ninner++] = wi;
    l->vec = V > 1 ? wi : NULL;
  }
}

/* Splits oc, h, w of stage and orders its loops: outer tiles, [reductions], inner tile. */
static pk_status conv_shape(const conv_plan *p, pk_schedule *s, const char *stage,
                            const int64_t *v, const conv_loops *l, bool with_reduce) {
  int64_t V = v[CV_VECTOR], WR = v[CV_TILE_W];
  SPACE_TRY(pk_sched_split(s, stage, p->n.root[p->oc], v[CV_TILE_OC]));
  if (p->h >= 0 && v[CV_TILE_H] > 1) SPACE_TRY(pk_sched_split(s, stage, p->n.root[p->h], v[CV_TILE_H]));
  SPACE_TRY(pk_sched_split(s, stage, p->n.root[p->w], WR));
  if (V > 1 && V != WR) SPACE_TRY(pk_sched_split(s, stage, N_(p->n.root[p->w], ".i"), V));
  const char *order[2 * PK_TE_MAX_DIMS + 8];
  int n = 0;
  for (int i = 0; i < l->nouter; i++) order[n++] = l->outer[i];
  if (with_reduce)
    for (int r = 0; r < p->n.nreduce; r++) order[n++] = p->n.k[p->n.orders[v[CV_REDUCE_ORDER]][r]];
  for (int i = 0; i < l->ninner; i++) order[n++] = l->inner[i];
  return pk_sched_reorder(s, stage, n, order);
}

static pk_status conv_unroll_and_vectorize(const conv_plan *p, pk_schedule *s, const char *stage,
                                           const int64_t *v, const conv_loops *l, bool reduce) {
  if (v[CV_UNROLL])
    for (int i = 0; i < l->nunroll; i++) SPACE_TRY(pk_sched_unroll(s, stage, l->unroll[i], 0));
  const int *order = p->n.orders[v[CV_REDUCE_ORDER]];
  if (reduce && v[CV_UNROLL_K] != 1) SPACE_TRY(pk_sched_unroll(s, stage, p->n.k[order[p->n.nreduce - 1]], v[CV_UNROLL_K]));
  int serial = p->n.nreduce - (v[CV_UNROLL_K] != 1 ? 2 : 1); /* the innermost serial reduce loop */
  if (reduce && v[CV_PARTITION] && serial >= 0) SPACE_TRY(pk_sched_partition(s, stage, p->n.k[order[serial]]));
  if (l->vec) SPACE_TRY(pk_sched_vectorize(s, stage, l->vec));
  return PK_OK;
}

/* Whether the tail writes the tile out (the epilogue computed at its tile): not in parallel,
 * where a result computed inside the parallel loop would have to be local; the tail is
 * then a loop nest of its own. */
static bool tail_fits_tile(const conv_plan *p, int64_t oc, int64_t w, int64_t h, const int64_t *v) {
  if (!p->tail || v[CV_PARALLEL] || p->lanes_first) return false;
  /* and only where tiles and vectors divide the extents: a tile's region is clamped into
   * the tensor, so a partial last tile would compute part of the previous one's again,
   * and the update is in place (M' = m M + g twice is wrong) */
  return oc % v[CV_TILE_OC] == 0 && w % v[CV_TILE_W] == 0 &&
         (p->h < 0 || v[CV_TILE_H] < 2 || h % v[CV_TILE_H] == 0) &&
         (v[CV_VECTOR] < 2 || v[CV_TILE_W] % v[CV_VECTOR] == 0);
}

static bool tail_at_tile(const conv_plan *p, pk_schedule *s, const int64_t *v) {
  return tail_fits_tile(p, space_stage_extent_of(s, p->n.stage, p->oc),
                        space_stage_extent_of(s, p->n.stage, p->w),
                        p->h >= 0 ? space_stage_extent_of(s, p->n.stage, p->h) : 1, v);
}

/* Shapes the product stage p->n.stage (the main one or a sibling). */
static pk_status conv_apply_stage(const conv_plan *p, pk_schedule *s, const int64_t *v) {
  const char *T = p->n.stage;
  bool local = v[CV_CACHE_WRITE] != 0;
  conv_loops l;
  conv_loop_names(p, s, v, &l);
  if (v[CV_PACK_W]) {
    /* the weight as [O/tile_oc][C][KH][KW][tile_oc]: the tile's channels side by side */
    const char *readers[] = {T};
    SPACE_TRY(pk_sched_cache_read(s, p->weight, "ws", 1, readers, p->weight_dim, v[CV_TILE_OC]));
  }
  const char *O = T; /* the stage whose loops write the tile out */
  if (local) {
    /* T copies the accumulator tile out (vectorized); T.local holds it in registers */
    SPACE_TRY(pk_sched_cache_write(s, T, "local"));
    if (p->epi) { /* the epilogue copies it out instead, T (a copy now) inlined into it */
      SPACE_TRY(pk_sched_compute_inline(s, T));
      O = p->epi;
    }
    /* with a tail (an SGD update's W' after M'), the tail writes the tile out and the
     * epilogue is computed at its tile, shaped the same (its tile loops then run once) */
    const char *A = O; /* the stage the accumulators are computed at */
    bool at_tile = tail_at_tile(p, s, v);
    if (at_tile) O = p->tail;
    SPACE_TRY(conv_shape(p, s, O, v, &l, false));
    if (l.vec) SPACE_TRY(pk_sched_vectorize(s, O, l.vec));
    if (at_tile) {
      SPACE_TRY(pk_sched_compute_at(s, A, O, l.outer[l.nouter - 1]));
      SPACE_TRY(conv_shape(p, s, A, v, &l, false));
      if (l.vec) SPACE_TRY(pk_sched_vectorize(s, A, l.vec));
    }
    SPACE_TRY(pk_sched_compute_at(s, p->n.local, A, l.outer[l.nouter - 1]));
    SPACE_TRY(conv_shape(p, s, p->n.local, v, &l, true));
    SPACE_TRY(conv_unroll_and_vectorize(p, s, p->n.local, v, &l, true));
  } else {
    SPACE_TRY(conv_shape(p, s, T, v, &l, true));
    SPACE_TRY(conv_unroll_and_vectorize(p, s, T, v, &l, true));
  }
  if (p->lanes_first) {
    SPACE_TRY(pk_sched_parallel(s, T, l.outer[0])); /* one partial sum per thread */
  } else if (v[CV_PARALLEL]) {
    /* the first tile loop: batch dims are often 1 */
    int first = l.nouter - (p->h >= 0 ? 3 : 2);
    SPACE_TRY(pk_sched_parallel(s, O, l.outer[first]));
  }
  return PK_OK;
}

/* The knob values for a sibling stage, whose extents may be smaller than the main stage's
 * (a phase has a row fewer, a kernel tap fewer): tiles, vectors and unroll depths clamped
 * to them; the weight is packed for the main stage only. */
static void conv_fit(const conv_plan *q, pk_schedule *s, const int64_t *v, int64_t *out) {
  const pk_stage *st = pk_sched_find_stage(s, q->n.stage);
  const int64_t *shape = st->tensor->shape;
  memcpy(out, v, CV_NKNOBS * sizeof *out);
  if (out[CV_TILE_OC] > shape[q->oc]) out[CV_TILE_OC] = shape[q->oc];
  if (q->h >= 0 && out[CV_TILE_H] > shape[q->h]) out[CV_TILE_H] = shape[q->h];
  if (out[CV_TILE_W] > shape[q->w]) out[CV_TILE_W] = shape[q->w];
  if (out[CV_VECTOR] > out[CV_TILE_W]) out[CV_VECTOR] = out[CV_TILE_W];
  if (out[CV_VECTOR] < 2) out[CV_VECTOR] = 1;
  out[CV_PACK_W] = 0;
  const char *k = q->n.k[q->n.orders[v[CV_REDUCE_ORDER]][q->n.nreduce - 1]];
  const pk_iter *it = pk_sched_find_iter(st, k);
  if (it && out[CV_UNROLL_K] > it->extent) out[CV_UNROLL_K] = it->extent <= 64 ? 0 : 1;
}

/* rfactor_threads T: the longest reduction split T ways first (space_thread_rfactor); the
 * tile is then shaped in T.rf, whose lanes run as the parallel loop outside it, and T sums
 * the T partial results. */
static pk_status conv_apply_threads(const conv_plan *p, pk_schedule *s, const int64_t *v) {
  conv_plan q = *p;
  int64_t w[CV_NKNOBS];
  memcpy(w, v, sizeof w);
  SPACE_TRY(space_thread_rfactor(s, &p->n, v[CV_RFACTOR_THREADS], &q.n));
  q.oc++, q.w++; /* the lane is root 0 */
  if (q.h >= 0) q.h++;
  q.lanes_first = true;
  const pk_stage *st = pk_sched_find_stage(s, q.n.stage);
  const pk_iter *k = pk_sched_find_iter(st, q.n.k[q.n.orders[v[CV_REDUCE_ORDER]][q.n.nreduce - 1]]);
  if (k && w[CV_UNROLL_K] > k->extent) w[CV_UNROLL_K] = k->extent <= 64 ? 0 : 1;
  return conv_apply_stage(&q, s, w);
}

/* rfactor_lanes L: the row reduction split by L and rfactored, so T.rf holds L partial
 * sums per output (its last dim, the vector lanes); its loops: the output's other dims,
 * the reductions with the row's outer part innermost, the taps (dims h and w, unrolled up
 * to 8), the lanes. T then sums the lanes. A depthwise dW's 3x3 taps are 9 (or 18)
 * vector accumulators fed by contiguous loads, where the tile template had 3 columns. */
static pk_status conv_apply_lanes(const conv_plan *p, pk_schedule *s, const int64_t *v) {
  if (v[CV_RFACTOR_THREADS])
    return pk_ctx_fail(s->ctx, PK_ERR_SCHEDULE, "knobs: rfactor_lanes and rfactor_threads exclude each other");
  const char *T = p->n.stage;
  SPACE_TRY(pk_sched_split(s, T, p->row_k, v[CV_RFACTOR_LANES]));
  SPACE_TRY(pk_sched_rfactor(s, T, N_(p->row_k, ".i")));
  const char *RF = N_(T, ".rf"), *row = N_(p->row_k, ".o");
  const pk_stage *rf = pk_sched_find_stage(s, RF);
  int nd = p->n.ndim;
  const char *order[2 * PK_TE_MAX_DIMS + 2];
  int n = 0;
  for (int d = 0; d < nd; d++)
    if (d != p->h && d != p->w) order[n++] = rf->root[d]->name;
  for (int r = nd + 1; r < rf->nroot; r++)
    if (strcmp(rf->root[r]->name, row) != 0) order[n++] = rf->root[r]->name;
  order[n++] = row;
  if (p->h >= 0) order[n++] = rf->root[p->h]->name;
  order[n++] = rf->root[p->w]->name;
  order[n++] = rf->root[nd]->name;
  SPACE_TRY(pk_sched_reorder(s, RF, n, order));
  if (p->h >= 0 && rf->root[p->h]->extent <= 8) SPACE_TRY(pk_sched_unroll(s, RF, rf->root[p->h]->name, 0));
  if (rf->root[p->w]->extent <= 8) SPACE_TRY(pk_sched_unroll(s, RF, rf->root[p->w]->name, 0));
  SPACE_TRY(pk_sched_vectorize(s, RF, rf->root[nd]->name));
  if (v[CV_PARALLEL]) {
    SPACE_TRY(pk_sched_parallel(s, RF, order[0]));
    SPACE_TRY(pk_sched_parallel(s, T, pk_sched_find_stage(s, T)->leaf[0]->name));
  }
  return PK_OK;
}

static pk_status conv_apply(const pk_space *sp, pk_schedule *s, const int64_t *v) {
  const conv_plan *p = sp->plan;
  if (p->epi && (!v[CV_CACHE_WRITE] || v[CV_RFACTOR_THREADS] || v[CV_RFACTOR_LANES]))
    return pk_ctx_fail(s->ctx, PK_ERR_SCHEDULE, "knobs: a fused epilogue needs cache_write 1, "
                       "rfactor_threads 0 and rfactor_lanes 0");
  if (v[CV_RFACTOR_LANES]) SPACE_TRY(conv_apply_lanes(p, s, v));
  else if (v[CV_RFACTOR_THREADS]) SPACE_TRY(conv_apply_threads(p, s, v));
  else SPACE_TRY(conv_apply_stage(p, s, v));
  for (int i = 0; i < p->nsib; i++) {
    conv_plan q = *p;
    int64_t w[CV_NKNOBS];
    q.n = p->sib[i];
    q.weight = NULL;
    q.epi = NULL;
    q.tail = NULL;
    conv_fit(&q, s, v, w);
    SPACE_TRY(conv_apply_stage(&q, s, w));
  }
  for (int i = 0; i < p->n.nother; i++) {
    const pk_stage *st = pk_sched_find_stage(s, p->n.other[i]);
    if (p->epi && !strcmp(p->n.other[i], p->epi)) continue; /* shaped as the tile, above */
    if (tail_at_tile(p, s, v) && !strcmp(p->n.other[i], p->tail)) continue; /* as the tile too */
    bool sibling = false; /* shaped above (after cache_write, a copy that looks injective) */
    for (int j = 0; j < p->nsib; j++) sibling |= !strcmp(p->n.other[i], p->sib[j].stage);
    bool done = false; /* the phases' interleave */
    if (st && !sibling && p->nsib)
      SPACE_TRY(space_schedule_interleave(s, st, pk_sched_find_stage(s, p->n.stage)->tensor, v[CV_PARALLEL] != 0, &done));
    if (st && !sibling && !done) SPACE_TRY(space_schedule_injective(s, st, v[CV_VECTOR], 1, v[CV_PARALLEL] != 0, false, false));
  }
  return PK_OK;
}

/* bench/hand_schedules.c: 8 channels × 1 vector of columns, reductions k0, k1, k2 outside
 * the tile, channels and the innermost reduction fully unrolled, the column taps
 * partitioned where the padding guards hold (interior tiles read without them; each input
 * load, a stride-2 one a permute, serves 8 channels): 1.1-2.7x faster than 4 x 2 vectors on
 * MobileNetV2's 3x3 convs (its stem 33 -> 90 GFLOP/s). A 1x1 conv (no window) keeps 4
 * channels x 2 vectors: 8 x 1 is 10-20% slower there. Small outputs (a depthwise dW: (C, 1,
 * 3, 3)) take the most the shape allows, and the reduction split across threads when the
 * channel tiles are fewer than the cores, or its rows in lanes (below). */
static bool conv_preset(const pk_space *sp, int64_t *v) {
  const conv_plan *p = sp->plan;
  memset(v, 0, CV_NKNOBS * sizeof *v);
  v[CV_TILE_H] = 1;
  v[CV_CACHE_WRITE] = 1;
  v[CV_UNROLL] = 1;
  v[CV_UNROLL_K] = 0;
  v[CV_PARTITION] = space_pick(sp, CV_PARTITION, 1);
  v[CV_TILE_OC] = space_pick(sp, CV_TILE_OC, p->window ? 8 : 4);
  v[CV_TILE_W] = space_pick(sp, CV_TILE_W, (p->window ? 1 : 2) * (int64_t)sp->lanes);
  v[CV_VECTOR] = space_pick(sp, CV_VECTOR, v[CV_TILE_W]);
  /* order 0 (channel tiles outermost) re-reads an image's input per channel tile, order 1
   * the weight per column tile: channels innermost when the input overflows the L2 and
   * the weight does not (a large early feature map with few channels) */
  if (p->weight_bytes) v[CV_ORDER] = space_cache_order(sp, p->input_bytes, p->weight_bytes);
  int64_t oc = space_stage_extent(sp, p->n.stage, p->oc);
  v[CV_RFACTOR_THREADS] = space_thread_preset(sp, CV_RFACTOR_THREADS, (oc + v[CV_TILE_OC] - 1) / v[CV_TILE_OC]);
  /* in parallel where the kernel has work enough, unless a fused update would then lose
   * its write from the register tile (tail_at_tile: not in parallel) */
  int64_t w = space_stage_extent(sp, p->n.stage, p->w);
  int64_t h = p->h >= 0 ? space_stage_extent(sp, p->n.stage, p->h) : 1;
  if (!tail_fits_tile(p, oc, w, h, v))
    v[CV_PARALLEL] = space_parallel_preset(sp, CV_PARALLEL, sp->task->flops, 1 << 20);
  /* a depthwise dW (each output channel's outputs only its taps, at most 16): the row in
   * lanes, two vectors wide where it has them (MobileNetV2's: 5x faster), channels in
   * parallel */
  const pk_knob *kl = &sp->knobs[CV_RFACTOR_LANES];
  int64_t numel = 1;
  for (int d = 0; d < p->n.ndim; d++) numel *= space_stage_extent(sp, p->n.stage, d);
  if (kl->nvalues > 1 && numel <= 16 * space_stage_extent(sp, p->n.stage, 0)) {
    v[CV_RFACTOR_LANES] = space_pick(sp, CV_RFACTOR_LANES, 2 * (int64_t)sp->lanes);
    v[CV_RFACTOR_THREADS] = 0;
    v[CV_PARALLEL] = space_pick(sp, CV_PARALLEL, 1);
  }
  return true;
}

const space_class pk_space_class_conv = {"conv", conv_init, conv_apply, conv_preset};
