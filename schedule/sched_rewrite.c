/* sched_rewrite.c — the derived-stage primitives: cache_write, cache_read and rfactor add
 * a compute to the schedule's program and rewrite the bodies around it. The user's
 * program is never touched: a rewritten tensor is a private copy with the same id, and
 * every compute that reads a replaced tensor is copied too, so all reads in s->prog and
 * every stage refer to the current version (ids stay a permutation of 0..ntensors-1;
 * derived computes take the next free ids). */
#include <stdio.h>
#include <string.h>

#include "sched_impl.h"

/* ---- the schedule's program: lists are copied on write, so a snapshot's old lists stay
 * intact and restoring the program's fields undoes a step ---- */

static int prog_pos(const pk_te_program *p, const pk_te_tensor *t) {
  for (int i = 0; i < p->ntensors; i++)
    if (p->tensors[i] == t) return i;
  return -1;
}

/* By id: a stage may still point to the version a step is replacing. */
static int prog_pos_of_id(const pk_te_program *p, int id) {
  for (int i = 0; i < p->ntensors; i++)
    if (p->tensors[i]->id == id) return i;
  return -1;
}

static void prog_insert(pk_ctx *ctx, pk_te_program *p, int pos, pk_te_tensor *t) {
  pk_te_tensor **list = pk_alloc(ctx, (size_t)(p->ntensors + 1) * sizeof *list);
  memcpy(list, p->tensors, (size_t)pos * sizeof *list);
  list[pos] = t;
  memcpy(list + pos + 1, p->tensors + pos, (size_t)(p->ntensors - pos) * sizeof *list);
  p->tensors = list;
  p->ntensors++;
}

/* Puts t in place of the tensor with its id. */
static void prog_replace(pk_ctx *ctx, pk_te_program *p, pk_te_tensor *t) {
  pk_te_tensor **list = pk_alloc(ctx, (size_t)p->ntensors * sizeof *list);
  for (int i = 0; i < p->ntensors; i++) list[i] = p->tensors[i]->id == t->id ? t : p->tensors[i];
  p->tensors = list;
}

static pk_te_axis *prog_new_reduce_axis(pk_ctx *ctx, pk_te_program *p, const char *name, int64_t extent) {
  pk_te_axis *a = pk_alloc(ctx, sizeof *a);
  a->id = p->nreduce;
  a->name = name;
  a->lo = 0;
  a->hi = extent;
  a->reduce = true;
  pk_te_axis **list = pk_alloc(ctx, (size_t)(p->nreduce + 1) * sizeof *list);
  if (p->nreduce) memcpy(list, p->reduce_axes, (size_t)p->nreduce * sizeof *list);
  list[p->nreduce++] = a;
  p->reduce_axes = list;
  return a;
}

static bool reads_stale(const pk_expr *e, pk_te_tensor *const *current) {
  if (e->kind == PK_EXPR_READ && current[e->tensor->id] != e->tensor) return true;
  for (int i = 0; i < e->nargs; i++)
    if (reads_stale(e->args[i], current)) return true;
  return false;
}

/* After a step replaced tensors: copies (in program order, so readers of readers follow)
 * every compute still reading an old version, then moves stages and their spatial root
 * iters to the current tensors. */
static void relink(pk_schedule *s) {
  pk_ctx *ctx = s->ctx;
  pk_te_program *p = s->prog;
  pk_te_tensor **current = pk_alloc(ctx, (size_t)p->ntensors * sizeof *current);
  for (int i = 0; i < p->ntensors; i++) {
    PK_ASSERT(p->tensors[i]->id >= 0 && p->tensors[i]->id < p->ntensors && !current[p->tensors[i]->id]);
    current[p->tensors[i]->id] = p->tensors[i];
  }
  sx_map m;
  sx_map_init(&m);
  m.current = current;
  for (int i = 0; i < p->ntensors; i++) {
    pk_te_tensor *t = p->tensors[i];
    if (t->kind != PK_TE_COMPUTE || !reads_stale(t->body, current)) continue;
    current[t->id] = sx_tensor_copy(ctx, t, &m);
    prog_replace(ctx, p, current[t->id]);
  }
  for (int i = 0; i < s->nstages; i++) {
    pk_stage *st = s->stages[i];
    pk_te_tensor *now = current[st->tensor->id];
    if (now == st->tensor) continue;
    for (int r = 0; r < st->nroot; r++)
      if (!st->root[r]->reduce) st->root[r]->axis = now->axes[st->root[r]->axis->id];
    st->tensor = now;
  }
}

/* Inserts a derived stage where its tensor sits in the program: before the first stage
 * whose tensor comes later, so stage order and program order agree. */
static void insert_stage_in_program_order(pk_schedule *s, pk_stage *st) {
  int at = prog_pos(s->prog, st->tensor), pos = 0;
  while (pos < s->nstages && prog_pos_of_id(s->prog, s->stages[pos]->tensor->id) < at) pos++;
  sched_insert_stage(s, pos, st);
}

static void add_spatial_roots(pk_ctx *ctx, pk_stage *st) {
  for (int d = 0; d < st->tensor->ndim; d++)
    sched_add_root(ctx, st, pk_sprintf(ctx, "i%d", d), st->tensor->shape[d], false, st->tensor->axes[d]);
}

/* Keeps only st's spatial roots, as its roots, leaves and iters. */
static void keep_spatial_roots(pk_stage *st) {
  int ndim = st->tensor->ndim;
  for (int d = 0; d < ndim; d++) {
    PK_ASSERT(!st->root[d]->reduce);
    st->leaf[d] = st->iters[d] = st->root[d];
  }
  st->nroot = st->nleaf = st->niters = ndim;
}

static const char *reduce_root_name(const pk_stage *st, const pk_te_axis *a) {
  for (int r = 0; r < st->nroot; r++)
    if (st->root[r]->reduce && st->root[r]->axis == a) return st->root[r]->name;
  PK_ASSERT(!"reduce axis without a root iter");
  return NULL;
}

/* A fresh compute to replace t: same id, name, dtype and shape; the caller sets its body. */
static pk_te_tensor *same_id_compute(pk_ctx *ctx, const pk_te_tensor *t) {
  pk_te_tensor *c = sx_tensor_new(ctx, t->id, t->name, t->dtype, t->ndim, t->shape);
  c->line = t->line;
  c->col = t->col;
  return c;
}

/* c[i0, ..., in(, extra)] with the spatial axes of `at`: the read of a same-shape tensor
 * at the current point (plus one more index for .rf's partial dimension). */
static pk_expr *read_at_axes(pk_ctx *ctx, pk_te_tensor *c, const pk_te_tensor *at, pk_te_axis *extra) {
  pk_expr *idx[PK_TE_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < at->ndim; d++) idx[n++] = sx_axis(ctx, at->axes[d]);
  if (extra) idx[n++] = sx_axis(ctx, extra);
  return sx_read(ctx, c, n, idx);
}

static bool loops_untouched(const pk_stage *st) {
  if (st->nleaf != st->nroot || st->niters != st->nroot) return false;
  for (int i = 0; i < st->nroot; i++)
    if (st->leaf[i] != st->root[i] || st->root[i]->kind != PK_LOOP_SERIAL) return false;
  return true;
}

static pk_status need_free_name(const sched_op *op, const char *name) {
  if (pk_sched_find_stage(op->s, name)) return sched_fail(op, "stage %s already exists", name);
  return PK_OK;
}

/* ---- cache_write ---- */

static pk_status cache_write(const sched_op *op, const char *stage, const char *scope) {
  pk_schedule *s = op->s;
  pk_ctx *ctx = s->ctx;
  pk_stage *st = sched_need_stage(op, stage);
  if (!st) return PK_ERR_SCHEDULE;
  if (!scope || strcmp(scope, "local") != 0)
    return sched_fail(op, "cache_write scope must be \"local\", got '%.32s'", scope ? scope : "(null)");
  const pk_expr *red = sched_reduction(st->tensor);
  if (!red) return sched_fail(op, "%s has no reduction; cache_write caches a reduction's accumulators", st->name);
  if (!loops_untouched(st))
    return sched_fail(op, "the loops of %s were already scheduled; cache_write must come first", st->name);
  const pk_stage *at = sched_attached_to(s, st);
  if (at) return sched_fail(op, "%s is computed at %s; cache_write must come first", at->name, st->name);
  const char *name = pk_sprintf(ctx, "%s.local", st->name);
  if (need_free_name(op, name) != PK_OK) return PK_ERR_SCHEDULE;

  pk_te_tensor *t = st->tensor;
  pk_te_tensor *local = sx_tensor_new(ctx, s->prog->ntensors, name, t->dtype, t->ndim, t->shape);
  sx_map m;
  sx_map_init(&m);
  for (int d = 0; d < t->ndim; d++) sx_map_subst(&m, t->axes[d], sx_axis(ctx, local->axes[d]));
  local->body = sx_rewrite(ctx, t->body, &m);
  pk_te_tensor *copy = same_id_compute(ctx, t);
  copy->body = read_at_axes(ctx, local, copy, NULL);
  prog_replace(ctx, s->prog, copy);
  prog_insert(ctx, s->prog, prog_pos(s->prog, copy), local);

  pk_stage *ls = sched_stage_new(ctx, name, local, PK_SCOPE_LOCAL, -1);
  add_spatial_roots(ctx, ls);
  for (int i = 0; i < red->naxes; i++)
    sched_add_root(ctx, ls, reduce_root_name(st, red->axes[i]), red->axes[i]->hi - red->axes[i]->lo, true,
                   red->axes[i]);
  keep_spatial_roots(st);
  sched_insert_stage(s, sched_stage_index(s, st), ls);
  relink(s);
  return PK_OK;
}

pk_status pk_sched_cache_write(pk_schedule *s, const char *stage, const char *scope) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_CACHE_WRITE, stage);
  pk_status status = cache_write(&op, stage, scope);
  pk_sched_step step = {.kind = PK_STEP_CACHE_WRITE, .stage = stage, .target = scope};
  return sched_op_end(&op, status, &step);
}

/* ---- cache_read ---- */

/* A placeholder by its canonical id "t<N>", or any stage by name. */
static pk_te_tensor *find_tensor(const pk_schedule *s, const char *name, pk_stage **stage) {
  *stage = pk_sched_find_stage(s, name);
  if (*stage) return (*stage)->tensor;
  for (int i = 0; name && i < s->orig->ntensors; i++) {
    pk_te_tensor *t = s->orig->tensors[i];
    char id[24];
    snprintf(id, sizeof id, "t%d", t->id);
    if (t->kind == PK_TE_PLACEHOLDER && strcmp(id, name) == 0) return t;
  }
  return NULL;
}

static pk_status check_layout(const sched_op *op, const pk_te_tensor *t, int block_dim, int64_t block) {
  if (block_dim == -1) {
    if (block != 0) return sched_fail(op, "block must be 0 without a layout change (block_dim -1)");
    return PK_OK;
  }
  if (block_dim < 0 || block_dim >= t->ndim)
    return sched_fail(op, "block_dim %d out of range: the tensor has %d dims (-1: same layout)", block_dim, t->ndim);
  if (t->ndim + 1 > PK_TE_MAX_DIMS)
    return sched_fail(op, "the blocked copy would have %d dims (at most %d)", t->ndim + 1, PK_TE_MAX_DIMS);
  if (block < 1) return sched_fail(op, "block %lld must be >= 1", (long long)block);
  if (block > t->shape[block_dim])
    return sched_fail(op, "block %lld exceeds extent %lld of dim %d", (long long)block,
                      (long long)t->shape[block_dim], block_dim);
  return PK_OK;
}

/* copy[o, i0, ..., in (without d), r] = t[..., o * block + r, ...], zero beyond t's extent. */
static pk_expr *blocked_copy_body(pk_ctx *ctx, pk_te_tensor *t, pk_te_tensor *copy, int bd, int64_t block) {
  pk_expr *idx[PK_TE_MAX_DIMS];
  pk_expr *outer = sx_axis(ctx, copy->axes[0]), *inner = sx_axis(ctx, copy->axes[copy->ndim - 1]);
  pk_expr *joined = sx_binary(ctx, PK_EOP_ADD, sx_binary(ctx, PK_EOP_MUL, outer, sx_int(ctx, block, PKRT_DTYPE_I64)), inner);
  for (int d = 0; d < t->ndim; d++)
    idx[d] = d == bd ? joined : sx_axis(ctx, copy->axes[1 + (d < bd ? d : d - 1)]);
  pk_expr *read = sx_read(ctx, t, t->ndim, idx);
  if (t->shape[bd] % block == 0) return read;
  pk_expr *inside = sx_binary(ctx, PK_EOP_LT, joined, sx_int(ctx, t->shape[bd], PKRT_DTYPE_I64));
  return sx_select(ctx, inside, read, sx_zero(ctx, t->dtype));
}

static pk_status cache_read(const sched_op *op, const char *tensor, const char *scope, int nreaders,
                            const char *const *readers, int block_dim, int64_t block) {
  pk_schedule *s = op->s;
  pk_ctx *ctx = s->ctx;
  pk_stage *tstage;
  pk_te_tensor *t = find_tensor(s, tensor, &tstage);
  if (!t) return sched_fail(op, "unknown tensor '%.64s'", tensor ? tensor : "(null)");
  bool ws = scope && strcmp(scope, "ws") == 0;
  bool shared = scope && strcmp(scope, "shared") == 0; /* GPU: staged by a block's threads */
  if (!ws && !shared && !(scope && strcmp(scope, "local") == 0))
    return sched_fail(op, "cache_read scope must be \"local\", \"shared\" or \"ws\", got '%.32s'",
                      scope ? scope : "(null)");
  const char *name = pk_sprintf(ctx, "%s.%s", tensor, scope);
  if (need_free_name(op, name) != PK_OK) return PK_ERR_SCHEDULE;
  if (tstage && tstage->attach == PK_ATTACH_AT)
    return sched_fail(op, "%s is computed at %s; cache_read it before compute_at", tstage->name,
                      tstage->attach_stage->name);
  if (nreaders < 1 || !readers) return sched_fail(op, "cache_read needs at least one reader");
  pk_stage **rs = pk_alloc(ctx, (size_t)nreaders * sizeof *rs);
  for (int i = 0; i < nreaders; i++) {
    rs[i] = pk_sched_find_stage(s, readers[i]);
    if (!rs[i]) return sched_fail(op, "unknown reader stage '%.64s'", readers[i] ? readers[i] : "(null)");
    for (int j = 0; j < i; j++)
      if (rs[j] == rs[i]) return sched_fail(op, "reader %s is named twice", rs[i]->name);
    if (!sched_expr_reads(rs[i]->tensor->body, t))
      return sched_fail(op, "%s does not read %s directly", rs[i]->name, tensor);
  }
  if (check_layout(op, t, block_dim, block) != PK_OK) return PK_ERR_SCHEDULE;

  int64_t shape[PK_TE_MAX_DIMS];
  int ndim = 0;
  if (block_dim < 0) {
    memcpy(shape, t->shape, sizeof shape);
    ndim = t->ndim;
  } else {
    int64_t e = t->shape[block_dim];
    shape[ndim++] = e / block + (e % block != 0);
    for (int d = 0; d < t->ndim; d++)
      if (d != block_dim) shape[ndim++] = t->shape[d];
    shape[ndim++] = block;
  }
  pk_te_tensor *copy = sx_tensor_new(ctx, s->prog->ntensors, name, t->dtype, ndim, shape);
  copy->body = block_dim < 0 ? read_at_axes(ctx, t, copy, NULL) : blocked_copy_body(ctx, t, copy, block_dim, block);

  sx_map m;
  sx_map_init(&m);
  m.read_from = t;
  m.read_to = copy;
  m.block_dim = block_dim;
  m.block = block;
  for (int i = 0; i < nreaders; i++) prog_replace(ctx, s->prog, sx_tensor_copy(ctx, rs[i]->tensor, &m));
  prog_insert(ctx, s->prog, prog_pos(s->prog, t) + 1, copy);
  pk_stage *cs = sched_stage_new(ctx, name, copy,
                                  ws ? PK_SCOPE_WORKSPACE : shared ? PK_SCOPE_SHARED : PK_SCOPE_LOCAL, -1);
  add_spatial_roots(ctx, cs);
  insert_stage_in_program_order(s, cs);
  relink(s);
  return PK_OK;
}

pk_status pk_sched_cache_read(pk_schedule *s, const char *tensor, const char *scope,
                              int nreaders, const char *const *readers, int block_dim,
                              int64_t block) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_CACHE_READ, tensor);
  pk_status status = cache_read(&op, tensor, scope, nreaders, readers, block_dim, block);
  pk_sched_step step = {.kind = PK_STEP_CACHE_READ, .stage = tensor, .target = scope,
                        .nfactors = 2, .factors = {block_dim, block},
                        .nreaders = nreaders > 0 ? nreaders : 0, .readers = (const char **)readers};
  return sched_op_end(&op, status, &step);
}

/* ---- set_scope ---- */

static pk_status set_scope(const sched_op *op, const char *stage, const char *scope) {
  pk_stage *st = sched_need_stage(op, stage);
  if (!st) return PK_ERR_SCHEDULE;
  if (st->scope == PK_SCOPE_GLOBAL)
    return sched_fail(op, "%s is a kernel output; only derived stages (.local, .ws, .shared, .rf) "
                      "choose their scope", st->name);
  pk_mem_scope to;
  if (scope && !strcmp(scope, "local")) to = PK_SCOPE_LOCAL;
  else if (scope && !strcmp(scope, "ws")) to = PK_SCOPE_WORKSPACE;
  else if (scope && !strcmp(scope, "shared")) to = PK_SCOPE_SHARED;
  else return sched_fail(op, "set_scope scope must be \"local\", \"shared\" or \"ws\", got '%.32s'",
                         scope ? scope : "(null)");
  st->scope = to;
  return PK_OK;
}

pk_status pk_sched_set_scope(pk_schedule *s, const char *stage, const char *scope) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_SET_SCOPE, stage);
  pk_status status = set_scope(&op, stage, scope);
  pk_sched_step step = {.kind = PK_STEP_SET_SCOPE, .stage = stage, .target = scope};
  return sched_op_end(&op, status, &step);
}

/* ---- rfactor ---- */

/* st's loops are its roots with axis's parent replaced by its split, and nothing else. */
static bool only_split(const pk_stage *st, const pk_iter *inner) {
  const pk_iter *k = inner->parent;
  if (st->niters != st->nroot + 2 || st->nleaf != st->nroot + 1) return false;
  for (int r = 0, l = 0; r < st->nroot; r++) {
    if (st->root[r] == k) {
      if (st->leaf[l++] != k->split_outer || st->leaf[l++] != inner) return false;
    } else if (st->leaf[l++] != st->root[r]) {
      return false;
    }
  }
  for (int i = 0; i < st->nleaf; i++)
    if (st->leaf[i]->kind != PK_LOOP_SERIAL) return false;
  return true;
}

/* The .rf body: op over (k.o and the other axes) of the term at k = k.o * f + r + lo,
 * where r is .rf's last spatial axis. Past the end of k (f does not divide), a sum adds
 * 0 and max/min re-read k's last point instead (they have no finite identity; a
 * repeated point changes neither). */
static pk_expr *rf_body(pk_ctx *ctx, const pk_te_tensor *t, pk_te_tensor *rf, const pk_te_axis *k,
                        pk_te_axis *ko, int64_t f) {
  const pk_expr *red = sched_reduction(t);
  pk_expr *kval = sx_binary(ctx, PK_EOP_ADD, sx_binary(ctx, PK_EOP_MUL, sx_axis(ctx, ko), sx_int(ctx, f, PKRT_DTYPE_I64)),
                            sx_axis(ctx, rf->axes[t->ndim]));
  if (k->lo != 0) kval = sx_binary(ctx, PK_EOP_ADD, kval, sx_int(ctx, k->lo, PKRT_DTYPE_I64));
  bool divides = (k->hi - k->lo) % f == 0;
  sx_map m;
  sx_map_init(&m);
  for (int d = 0; d < t->ndim; d++) sx_map_subst(&m, t->axes[d], sx_axis(ctx, rf->axes[d]));
  bool clamp = !divides && red->op != PK_EOP_SUM;
  sx_map_subst(&m, k, clamp ? sx_binary(ctx, PK_EOP_MIN, kval, sx_int(ctx, k->hi - 1, PKRT_DTYPE_I64)) : kval);
  pk_expr *term = sx_rewrite(ctx, red->args[0], &m);
  if (!divides && red->op == PK_EOP_SUM)
    term = sx_select(ctx, sx_binary(ctx, PK_EOP_LT, kval, sx_int(ctx, k->hi, PKRT_DTYPE_I64)), term,
                     sx_zero(ctx, term->dtype));
  pk_te_axis **axes = pk_alloc(ctx, (size_t)red->naxes * sizeof *axes);
  for (int i = 0; i < red->naxes; i++) axes[i] = red->axes[i] == k ? ko : red->axes[i];
  return sx_reduce(ctx, red->op, term, red->naxes, axes);
}

static pk_status rfactor(const sched_op *op, const char *stage, const char *axis) {
  pk_schedule *s = op->s;
  pk_ctx *ctx = s->ctx;
  pk_stage *st = sched_need_stage(op, stage);
  if (!st) return PK_ERR_SCHEDULE;
  pk_iter *x = pk_sched_find_iter(st, axis);
  if (!x) return sched_fail(op, "unknown axis '%.64s' of %s", axis ? axis : "(null)", st->name);
  if (x->rel != PK_ITER_SPLIT_INNER || !x->reduce || x->parent->rel != PK_ITER_ROOT)
    return sched_fail(op, "'%s' must be the inner iter of a split of a reduce axis (e.g. 'k0.i' after splitting 'k0')",
                      x->name);
  if (!only_split(st, x))
    return sched_fail(op, "%s has steps besides the split of '%s'; rfactor must follow it directly", st->name,
                      x->parent->name);
  const pk_stage *at = sched_attached_to(s, st);
  if (at) return sched_fail(op, "%s is computed at %s; rfactor must come first", at->name, st->name);
  pk_te_tensor *t = st->tensor;
  if (t->ndim + 1 > PK_TE_MAX_DIMS)
    return sched_fail(op, "%s.rf would have %d dims (at most %d)", st->name, t->ndim + 1, PK_TE_MAX_DIMS);
  const char *name = pk_sprintf(ctx, "%s.rf", st->name);
  if (need_free_name(op, name) != PK_OK) return PK_ERR_SCHEDULE;

  const pk_iter *k_iter = x->parent;
  const pk_te_axis *k = k_iter->axis;
  int64_t f = x->factor;
  const char *outer_name = pk_sprintf(ctx, "%s.o", k_iter->name);
  pk_te_axis *ko = prog_new_reduce_axis(ctx, s->prog, pk_sprintf(ctx, "%s.%s", name, outer_name),
                                        k_iter->split_outer->extent);
  pk_te_axis *r = prog_new_reduce_axis(ctx, s->prog, pk_sprintf(ctx, "%s.%s", st->name, x->name), f);
  int64_t shape[PK_TE_MAX_DIMS];
  memcpy(shape, t->shape, sizeof shape);
  shape[t->ndim] = f;
  pk_te_tensor *rf = sx_tensor_new(ctx, s->prog->ntensors, name, t->dtype, t->ndim + 1, shape);
  rf->body = rf_body(ctx, t, rf, k, ko, f);
  pk_te_tensor *copy = same_id_compute(ctx, t);
  copy->body = sx_reduce(ctx, sched_reduction(t)->op, read_at_axes(ctx, rf, copy, r), 1, &r);
  prog_replace(ctx, s->prog, copy);
  prog_insert(ctx, s->prog, prog_pos(s->prog, copy), rf);

  pk_stage *rs = sched_stage_new(ctx, name, rf, PK_SCOPE_WORKSPACE, -1);
  add_spatial_roots(ctx, rs);
  const pk_expr *red = rf->body;
  for (int i = 0; i < red->naxes; i++) {
    const pk_te_axis *a = red->axes[i];
    sched_add_root(ctx, rs, a == ko ? outer_name : reduce_root_name(st, a), a->hi - a->lo, true, a);
  }
  const char *inner_name = x->name;
  keep_spatial_roots(st);
  sched_add_root(ctx, st, inner_name, f, true, r);
  sched_insert_stage(s, sched_stage_index(s, st), rs);
  relink(s);
  return PK_OK;
}

pk_status pk_sched_rfactor(pk_schedule *s, const char *stage, const char *axis) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_RFACTOR, stage);
  pk_status status = rfactor(&op, stage, axis);
  pk_sched_step step = {.kind = PK_STEP_RFACTOR, .stage = stage, .naxes = 1, .axes = &axis};
  return sched_op_end(&op, status, &step);
}
