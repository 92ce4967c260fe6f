/* schedule_loops.c — the loop primitives: split, tile, reorder, fuse (the shape of a
 * stage's loop nest) and vectorize, unroll, parallel, bind (how one loop runs). */
#include <string.h>

#include "sched_impl.h"

/* ---- shared checks ---- */

static pk_status need_unannotated(const sched_op *op, const pk_iter *it, const char *what) {
  if (it->kind != PK_LOOP_SERIAL)
    return sched_fail(op, "'%s' is already %s; %s it before annotating", it->name,
                      pk_loop_kind_name(it->kind), what);
  if (it->partition)
    return sched_fail(op, "'%s' is partitioned; %s it before partitioning", it->name, what);
  return PK_OK;
}

/* A loop that disappears (split, fused) must not carry an attached stage: the attachment
 * point would be gone. Attach after splitting instead. */
static pk_status need_nothing_attached(const sched_op *op, const pk_iter *it) {
  const pk_stage *at = sched_attached_at(op->s, it);
  if (at) return sched_fail(op, "%s is computed at '%s'; split and fuse before compute_at", at->name, it->name);
  return PK_OK;
}

static pk_iter *iter_new(pk_ctx *ctx, const char *name, int64_t extent, bool reduce, pk_iter_rel rel) {
  pk_iter *it = pk_alloc(ctx, sizeof *it);
  it->name = name;
  it->extent = extent;
  it->reduce = reduce;
  it->rel = rel;
  it->kind = PK_LOOP_SERIAL;
  return it;
}

/* Replaces nold leaves at pos by the nnew iters in repl. */
static void replace_leaves(pk_ctx *ctx, pk_stage *st, int pos, int nold, pk_iter *const *repl, int nnew) {
  sched_stage_reserve(ctx, st, st->nleaf - nold + nnew);
  memmove(st->leaf + pos + nnew, st->leaf + pos + nold, (size_t)(st->nleaf - pos - nold) * sizeof *st->leaf);
  memcpy(st->leaf + pos, repl, (size_t)nnew * sizeof *repl);
  st->nleaf += nnew - nold;
}

/* ---- split ---- */

static pk_status split_leaf(const sched_op *op, pk_stage *st, const char *axis, int64_t factor) {
  pk_ctx *ctx = op->s->ctx;
  pk_iter *x = sched_need_leaf(op, st, axis);
  if (!x) return PK_ERR_SCHEDULE;
  if (factor < 1) return sched_fail(op, "factor %lld of '%s' must be >= 1", (long long)factor, x->name);
  if (factor > x->extent)
    return sched_fail(op, "factor %lld exceeds extent %lld of '%s'", (long long)factor,
                      (long long)x->extent, x->name);
  if (factor > PK_SCHED_MAX_FACTOR) return sched_fail(op, "factor %lld exceeds 2^53", (long long)factor);
  if (need_unannotated(op, x, "split") != PK_OK || need_nothing_attached(op, x) != PK_OK)
    return PK_ERR_SCHEDULE;
  int64_t outer_extent = x->extent / factor + (x->extent % factor != 0);
  pk_iter *o = iter_new(ctx, pk_sprintf(ctx, "%s.o", x->name), outer_extent, x->reduce, PK_ITER_SPLIT_OUTER);
  pk_iter *i = iter_new(ctx, pk_sprintf(ctx, "%s.i", x->name), factor, x->reduce, PK_ITER_SPLIT_INNER);
  o->parent = i->parent = x;
  o->factor = i->factor = factor;
  x->split_outer = o;
  x->split_inner = i;
  pk_iter *pair[2] = {o, i};
  replace_leaves(ctx, st, sched_leaf_pos(st, x), 1, pair, 2);
  sched_add_iter(ctx, st, o);
  sched_add_iter(ctx, st, i);
  return PK_OK;
}

pk_status pk_sched_split(pk_schedule *s, const char *stage, const char *axis, int64_t factor) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_SPLIT, stage);
  pk_stage *st = sched_need_stage(&op, stage);
  pk_status status = st ? split_leaf(&op, st, axis, factor) : PK_ERR_SCHEDULE;
  pk_sched_step step = {.kind = PK_STEP_SPLIT, .stage = stage, .naxes = 1, .axes = &axis,
                        .nfactors = 1, .factors = {factor}};
  return sched_op_end(&op, status, &step);
}

/* ---- reorder ---- */

/* The named leaves take, in the order given, the positions they occupy together. */
static pk_status reorder_leaves(const sched_op *op, pk_stage *st, int n, const char *const *axes) {
  if (n < 1 || !axes) return sched_fail(op, "reorder needs at least one axis");
  if (n > st->nleaf) return sched_fail(op, "%d axes named, but %s has %d loops", n, st->name, st->nleaf);
  pk_iter **named = pk_alloc(op->s->ctx, (size_t)n * sizeof *named);
  bool *occupied = pk_alloc(op->s->ctx, (size_t)st->nleaf * sizeof *occupied);
  for (int i = 0; i < n; i++) {
    named[i] = sched_need_leaf(op, st, axes[i]);
    if (!named[i]) return PK_ERR_SCHEDULE;
    int pos = sched_leaf_pos(st, named[i]);
    if (occupied[pos]) return sched_fail(op, "'%s' is named twice", named[i]->name);
    occupied[pos] = true;
  }
  for (int pos = 0, i = 0; pos < st->nleaf; pos++)
    if (occupied[pos]) st->leaf[pos] = named[i++];
  return PK_OK;
}

pk_status pk_sched_reorder(pk_schedule *s, const char *stage, int n, const char *const *axes) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_REORDER, stage);
  pk_stage *st = sched_need_stage(&op, stage);
  pk_status status = st ? reorder_leaves(&op, st, n, axes) : PK_ERR_SCHEDULE;
  pk_sched_step step = {.kind = PK_STEP_REORDER, .stage = stage, .naxes = n, .axes = (const char **)axes};
  return sched_op_end(&op, status, &step);
}

/* ---- tile ---- */

static pk_status tile_leaves(const sched_op *op, pk_stage *st, const char *x, const char *y,
                             int64_t fx, int64_t fy) {
  if (x && y && strcmp(x, y) == 0) return sched_fail(op, "tile needs two different axes, got '%s' twice", x);
  if (split_leaf(op, st, x, fx) != PK_OK || split_leaf(op, st, y, fy) != PK_OK) return PK_ERR_SCHEDULE;
  const pk_iter *ix = pk_sched_find_iter(st, x), *iy = pk_sched_find_iter(st, y);
  const char *order[4] = {ix->split_outer->name, iy->split_outer->name, ix->split_inner->name,
                          iy->split_inner->name};
  return reorder_leaves(op, st, 4, order);
}

pk_status pk_sched_tile(pk_schedule *s, const char *stage, const char *x, const char *y,
                        int64_t fx, int64_t fy) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_TILE, stage);
  pk_stage *st = sched_need_stage(&op, stage);
  pk_status status = st ? tile_leaves(&op, st, x, y, fx, fy) : PK_ERR_SCHEDULE;
  const char *axes[2] = {x, y};
  pk_sched_step step = {.kind = PK_STEP_TILE, .stage = stage, .naxes = 2, .axes = axes,
                        .nfactors = 2, .factors = {fx, fy}};
  return sched_op_end(&op, status, &step);
}

/* ---- fuse ---- */

static pk_status fuse_leaves(const sched_op *op, pk_stage *st, const char *outer, const char *inner) {
  pk_ctx *ctx = op->s->ctx;
  pk_iter *o = sched_need_leaf(op, st, outer);
  pk_iter *i = o ? sched_need_leaf(op, st, inner) : NULL;
  if (!i) return PK_ERR_SCHEDULE;
  int pos = sched_leaf_pos(st, o);
  if (sched_leaf_pos(st, i) != pos + 1)
    return sched_fail(op, "'%s' is not directly inside '%s'; fuse needs adjacent loops, outer first",
                      i->name, o->name);
  if (o->reduce != i->reduce)
    return sched_fail(op, "cannot fuse spatial and reduce iters ('%s', '%s')", o->name, i->name);
  if (need_unannotated(op, o, "fuse") != PK_OK || need_unannotated(op, i, "fuse") != PK_OK ||
      need_nothing_attached(op, o) != PK_OK || need_nothing_attached(op, i) != PK_OK)
    return PK_ERR_SCHEDULE;
  int64_t extent;
  if (pk_i64_mul(o->extent, i->extent, &extent)) return sched_fail(op, "fused extent overflows int64");
  pk_iter *f = iter_new(ctx, pk_sprintf(ctx, "%s.%s.f", o->name, i->name), extent, o->reduce, PK_ITER_FUSED);
  f->fused_outer = o;
  f->fused_inner = i;
  o->fused_into = i->fused_into = f;
  replace_leaves(ctx, st, pos, 2, &f, 1);
  sched_add_iter(ctx, st, f);
  return PK_OK;
}

pk_status pk_sched_fuse(pk_schedule *s, const char *stage, const char *outer, const char *inner) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_FUSE, stage);
  pk_stage *st = sched_need_stage(&op, stage);
  pk_status status = st ? fuse_leaves(&op, st, outer, inner) : PK_ERR_SCHEDULE;
  const char *axes[2] = {outer, inner};
  pk_sched_step step = {.kind = PK_STEP_FUSE, .stage = stage, .naxes = 2, .axes = axes};
  return sched_op_end(&op, status, &step);
}

/* ---- annotations ---- */

static pk_status vectorize_leaf(const sched_op *op, pk_stage *st, const char *axis) {
  pk_iter *x = sched_need_leaf(op, st, axis);
  if (!x) return PK_ERR_SCHEDULE;
  if (x->reduce) return sched_fail(op, "'%s' is a reduce iter: it carries a dependence", x->name);
  if (sched_leaf_pos(st, x) != st->nleaf - 1)
    return sched_fail(op, "'%s' is not the innermost loop of %s ('%s' is)", x->name, st->name,
                      st->leaf[st->nleaf - 1]->name);
  if (x->extent < 2 || x->extent > PK_SCHED_MAX_LANES)
    return sched_fail(op, "extent %lld of '%s' is not a vector width (2..%d)", (long long)x->extent,
                      x->name, PK_SCHED_MAX_LANES);
  const pk_stage *at = sched_attached_at(op->s, x);
  if (at) return sched_fail(op, "%s is computed at '%s'; a vector loop cannot hold a loop nest", at->name, x->name);
  if (need_unannotated(op, x, "vectorize") != PK_OK) return PK_ERR_SCHEDULE;
  x->kind = PK_LOOP_VECTORIZED;
  x->annotation = x->extent;
  return PK_OK;
}

pk_status pk_sched_vectorize(pk_schedule *s, const char *stage, const char *axis) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_VECTORIZE, stage);
  pk_stage *st = sched_need_stage(&op, stage);
  pk_status status = st ? vectorize_leaf(&op, st, axis) : PK_ERR_SCHEDULE;
  pk_sched_step step = {.kind = PK_STEP_VECTORIZE, .stage = stage, .naxes = 1, .axes = &axis};
  return sched_op_end(&op, status, &step);
}

/* The annotation is the effective depth: the extent for a full unroll (depth 0). Depth 1
 * would be a serial loop under another name, so it is refused to keep the space clean. */
static pk_status unroll_leaf(const sched_op *op, pk_stage *st, const char *axis, int64_t depth) {
  pk_iter *x = sched_need_leaf(op, st, axis);
  if (!x) return PK_ERR_SCHEDULE;
  if (depth < 0 || depth == 1)
    return sched_fail(op, "unroll depth %lld of '%s': use 0 (full) or 2..%d", (long long)depth,
                      x->name, PK_SCHED_MAX_UNROLL);
  if (depth == 0 && x->extent > PK_SCHED_MAX_UNROLL)
    return sched_fail(op, "full unroll of '%s' (extent %lld) exceeds %d", x->name,
                      (long long)x->extent, PK_SCHED_MAX_UNROLL);
  if (depth > PK_SCHED_MAX_UNROLL)
    return sched_fail(op, "unroll depth %lld exceeds %d", (long long)depth, PK_SCHED_MAX_UNROLL);
  if (depth > x->extent)
    return sched_fail(op, "unroll depth %lld exceeds extent %lld of '%s'", (long long)depth,
                      (long long)x->extent, x->name);
  if (need_unannotated(op, x, "unroll") != PK_OK) return PK_ERR_SCHEDULE;
  x->kind = PK_LOOP_UNROLLED;
  x->annotation = depth ? depth : x->extent;
  return PK_OK;
}

pk_status pk_sched_unroll(pk_schedule *s, const char *stage, const char *axis, int64_t depth) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_UNROLL, stage);
  pk_stage *st = sched_need_stage(&op, stage);
  pk_status status = st ? unroll_leaf(&op, st, axis, depth) : PK_ERR_SCHEDULE;
  pk_sched_step step = {.kind = PK_STEP_UNROLL, .stage = stage, .naxes = 1, .axes = &axis,
                        .nfactors = 1, .factors = {depth}};
  return sched_op_end(&op, status, &step);
}

/* Parallel and GPU-bound loops share these rules: spatial, outside every reduce loop of
 * the stage (a reduction's iterations depend on each other). */
static pk_status need_independent(const sched_op *op, const pk_stage *st, const pk_iter *x) {
  if (x->reduce) return sched_fail(op, "'%s' is a reduce iter: it carries a dependence", x->name);
  for (int i = 0; i < sched_leaf_pos(st, x); i++)
    if (st->leaf[i]->reduce)
      return sched_fail(op, "'%s' is inside reduce loop '%s'; reorder it outside first", x->name,
                        st->leaf[i]->name);
  return PK_OK;
}

static pk_status parallel_leaf(const sched_op *op, pk_stage *st, const char *axis) {
  pk_iter *x = sched_need_leaf(op, st, axis);
  if (!x || need_independent(op, st, x) != PK_OK || need_unannotated(op, x, "parallelize") != PK_OK)
    return PK_ERR_SCHEDULE;
  for (int i = 0; i < st->nleaf; i++) {
    if (st->leaf[i]->kind == PK_LOOP_PARALLEL)
      return sched_fail(op, "%s already has parallel loop '%s'; parallel loops do not nest", st->name,
                        st->leaf[i]->name);
    if (st->leaf[i]->kind >= PK_LOOP_GPU_BLOCK_X)
      return sched_fail(op, "%s has GPU-bound loop '%s'; a stage is for the CPU or the GPU", st->name,
                        st->leaf[i]->name);
  }
  x->kind = PK_LOOP_PARALLEL; /* the rest (attach chains) is sched_validate's */
  return PK_OK;
}

pk_status pk_sched_parallel(pk_schedule *s, const char *stage, const char *axis) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_PARALLEL, stage);
  pk_stage *st = sched_need_stage(&op, stage);
  pk_status status = st ? parallel_leaf(&op, st, axis) : PK_ERR_SCHEDULE;
  pk_sched_step step = {.kind = PK_STEP_PARALLEL, .stage = stage, .naxes = 1, .axes = &axis};
  return sched_op_end(&op, status, &step);
}

/* The mark is all: lowering does the cutting (partition.c), where the guards are known. */
static pk_status partition_leaf(const sched_op *op, pk_stage *st, const char *axis) {
  pk_iter *x = sched_need_leaf(op, st, axis);
  if (!x || need_unannotated(op, x, "partition") != PK_OK) return PK_ERR_SCHEDULE;
  x->partition = true;
  return PK_OK;
}

pk_status pk_sched_partition(pk_schedule *s, const char *stage, const char *axis) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_PARTITION, stage);
  pk_stage *st = sched_need_stage(&op, stage);
  pk_status status = st ? partition_leaf(&op, st, axis) : PK_ERR_SCHEDULE;
  pk_sched_step step = {.kind = PK_STEP_PARTITION, .stage = stage, .naxes = 1, .axes = &axis};
  return sched_op_end(&op, status, &step);
}

static const struct {
  const char *tag;
  pk_loop_kind kind;
} bind_tags[] = {
    {"blockIdx.x", PK_LOOP_GPU_BLOCK_X},   {"blockIdx.y", PK_LOOP_GPU_BLOCK_Y},
    {"blockIdx.z", PK_LOOP_GPU_BLOCK_Z},   {"threadIdx.x", PK_LOOP_GPU_THREAD_X},
    {"threadIdx.y", PK_LOOP_GPU_THREAD_Y}, {"threadIdx.z", PK_LOOP_GPU_THREAD_Z},
};

static pk_status bind_leaf(const sched_op *op, pk_stage *st, const char *axis, const char *tag) {
  pk_iter *x = sched_need_leaf(op, st, axis);
  if (!x) return PK_ERR_SCHEDULE;
  int found = -1;
  for (int i = 0; tag && i < (int)(sizeof bind_tags / sizeof *bind_tags); i++)
    if (strcmp(bind_tags[i].tag, tag) == 0) found = i;
  if (found < 0)
    return sched_fail(op, "unknown thread tag '%.32s' (blockIdx.x|y|z, threadIdx.x|y|z)", tag ? tag : "(null)");
  if (need_independent(op, st, x) != PK_OK || need_unannotated(op, x, "bind") != PK_OK) return PK_ERR_SCHEDULE;
  for (int i = 0; i < st->nleaf; i++) {
    if (st->leaf[i]->kind == bind_tags[found].kind)
      return sched_fail(op, "'%s' is already bound to %s", st->leaf[i]->name, tag);
    if (st->leaf[i]->kind == PK_LOOP_PARALLEL)
      return sched_fail(op, "%s has parallel loop '%s'; a stage is for the CPU or the GPU", st->name,
                        st->leaf[i]->name);
  }
  x->kind = bind_tags[found].kind;
  return PK_OK;
}

pk_status pk_sched_bind(pk_schedule *s, const char *stage, const char *axis, const char *tag) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_BIND, stage);
  pk_stage *st = sched_need_stage(&op, stage);
  pk_status status = st ? bind_leaf(&op, st, axis, tag) : PK_ERR_SCHEDULE;
  pk_sched_step step = {.kind = PK_STEP_BIND, .stage = stage, .naxes = 1, .axes = &axis, .target = tag};
  return sched_op_end(&op, status, &step);
}
