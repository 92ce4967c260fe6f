/* schedule.c — the schedule object: the initial stages of a program, lookups, the
 * all-or-nothing frame every primitive runs in (snapshot, validate, record or restore). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_impl.h"

const char *pk_step_kind_name(pk_step_kind k) {
  static const char *const names[PK_STEP_COUNT_] = {
      [PK_STEP_SPLIT] = "split",           [PK_STEP_TILE] = "tile",
      [PK_STEP_REORDER] = "reorder",       [PK_STEP_FUSE] = "fuse",
      [PK_STEP_VECTORIZE] = "vectorize",   [PK_STEP_UNROLL] = "unroll",
      [PK_STEP_PARALLEL] = "parallel",     [PK_STEP_BIND] = "bind",
      [PK_STEP_COMPUTE_AT] = "compute_at", [PK_STEP_COMPUTE_INLINE] = "compute_inline",
      [PK_STEP_COMPUTE_ROOT] = "compute_root", [PK_STEP_CACHE_READ] = "cache_read",
      [PK_STEP_CACHE_WRITE] = "cache_write",   [PK_STEP_RFACTOR] = "rfactor", [PK_STEP_PARTITION] = "partition",
      [PK_STEP_SET_SCOPE] = "set_scope",
  };
  return (unsigned)k < PK_STEP_COUNT_ ? names[k] : "?";
}

/* ---- stages and iters ---- */

pk_stage *sched_stage_new(pk_ctx *ctx, const char *name, pk_te_tensor *t, pk_mem_scope scope,
                          int param) {
  pk_stage *st = pk_alloc(ctx, sizeof *st);
  st->name = pk_strdup(ctx, name);
  st->tensor = t;
  st->attach = PK_ATTACH_ROOT;
  st->scope = scope;
  st->param = param;
  return st;
}

/* The three arrays share one capacity; a bigger one means fresh arrays (the snapshot
 * restores the old pointers, whose contents it also restores). */
void sched_stage_reserve(pk_ctx *ctx, pk_stage *st, int n) {
  if (n <= st->cap) return;
  int cap = st->cap ? st->cap : 8;
  while (cap < n) cap *= 2;
  pk_iter ***arrays[3] = {&st->root, &st->leaf, &st->iters};
  int counts[3] = {st->nroot, st->nleaf, st->niters};
  for (int a = 0; a < 3; a++) {
    pk_iter **bigger = pk_alloc(ctx, (size_t)cap * sizeof *bigger);
    if (counts[a]) memcpy(bigger, *arrays[a], (size_t)counts[a] * sizeof *bigger);
    *arrays[a] = bigger;
  }
  st->cap = cap;
}

void sched_add_iter(pk_ctx *ctx, pk_stage *st, pk_iter *it) {
  sched_stage_reserve(ctx, st, st->niters + 1);
  st->iters[st->niters++] = it;
}

pk_iter *sched_add_root(pk_ctx *ctx, pk_stage *st, const char *name, int64_t extent, bool reduce,
                        const pk_te_axis *axis) {
  pk_iter *it = pk_alloc(ctx, sizeof *it);
  it->name = pk_strdup(ctx, name);
  it->extent = extent;
  it->reduce = reduce;
  it->rel = PK_ITER_ROOT;
  it->axis = axis;
  it->kind = PK_LOOP_SERIAL;
  sched_stage_reserve(ctx, st, st->niters + 1);
  st->root[st->nroot++] = it;
  st->leaf[st->nleaf++] = it;
  st->iters[st->niters++] = it;
  return it;
}

int sched_leaf_pos(const pk_stage *st, const pk_iter *it) {
  for (int i = 0; i < st->nleaf; i++)
    if (st->leaf[i] == it) return i;
  return -1;
}

void sched_insert_stage(pk_schedule *s, int pos, pk_stage *st) {
  PK_ASSERT(pos >= 0 && pos <= s->nstages);
  if (s->nstages == s->cap_stages) {
    s->cap_stages = s->cap_stages ? s->cap_stages * 2 : 8;
    pk_stage **bigger = pk_alloc(s->ctx, (size_t)s->cap_stages * sizeof *bigger);
    if (s->nstages) memcpy(bigger, s->stages, (size_t)s->nstages * sizeof *bigger);
    s->stages = bigger;
  }
  memmove(s->stages + pos + 1, s->stages + pos, (size_t)(s->nstages - pos) * sizeof *s->stages);
  s->stages[pos] = st;
  s->nstages++;
}

int sched_stage_index(const pk_schedule *s, const pk_stage *st) {
  for (int i = 0; i < s->nstages; i++)
    if (s->stages[i] == st) return i;
  return -1;
}

pk_stage *sched_attached_at(const pk_schedule *s, const pk_iter *it) {
  for (int i = 0; i < s->nstages; i++)
    if (s->stages[i]->attach == PK_ATTACH_AT && s->stages[i]->attach_iter == it) return s->stages[i];
  return NULL;
}

pk_stage *sched_attached_to(const pk_schedule *s, const pk_stage *st) {
  for (int i = 0; i < s->nstages; i++)
    if (s->stages[i]->attach == PK_ATTACH_AT && s->stages[i]->attach_stage == st) return s->stages[i];
  return NULL;
}

/* ---- reads ---- */

bool sched_expr_reads(const pk_expr *e, const pk_te_tensor *t) {
  if (e->kind == PK_EXPR_READ && e->tensor == t) return true;
  for (int i = 0; i < e->nargs; i++)
    if (sched_expr_reads(e->args[i], t)) return true;
  return false;
}

int sched_readers(const pk_schedule *s, const pk_te_tensor *t, pk_stage **out) {
  int n = 0;
  for (int i = 0; i < s->nstages; i++)
    if (s->stages[i]->tensor->body && sched_expr_reads(s->stages[i]->tensor->body, t)) out[n++] = s->stages[i];
  return n;
}

/* An inlined reader reads where its own readers evaluate it: they take its place. */
static int readers_through(const pk_schedule *s, const pk_te_tensor *t, pk_stage **out, int n,
                           int depth) {
  for (int i = 0; i < s->nstages; i++) {
    pk_stage *r = s->stages[i];
    if (!r->tensor->body || !sched_expr_reads(r->tensor->body, t)) continue;
    if (r->attach == PK_ATTACH_INLINE && depth < s->nstages) {
      n = readers_through(s, r->tensor, out, n, depth + 1);
      continue;
    }
    bool seen = false;
    for (int j = 0; j < n; j++) seen |= out[j] == r;
    if (!seen) out[n++] = r;
  }
  return n;
}

int sched_readers_through_inline(const pk_schedule *s, const pk_te_tensor *t, pk_stage **out) {
  return readers_through(s, t, out, 0, 0);
}

const pk_expr *sched_reduction(const pk_te_tensor *t) {
  return t->body && t->body->kind == PK_EXPR_REDUCE ? t->body : NULL;
}

/* ---- the schedule ---- */

/* Root iters: the spatial axes i0.., then the reduction's axes in the order it lists them,
 * named by their canonical ids so traces do not depend on the user's names. */
static pk_stage *initial_stage(pk_ctx *ctx, pk_te_tensor *t, const int *canon_reduce_ids) {
  pk_stage *st = sched_stage_new(ctx, pk_sprintf(ctx, "t%d", t->id), t, PK_SCOPE_GLOBAL, t->id);
  for (int d = 0; d < t->ndim; d++)
    sched_add_root(ctx, st, pk_sprintf(ctx, "i%d", d), t->shape[d], false, t->axes[d]);
  const pk_expr *red = sched_reduction(t);
  for (int i = 0; red && i < red->naxes; i++) {
    const pk_te_axis *a = red->axes[i];
    sched_add_root(ctx, st, pk_sprintf(ctx, "k%d", canon_reduce_ids[a->id]), a->hi - a->lo, true, a);
  }
  return st;
}

pk_schedule *pk_sched_new(pk_ctx *ctx, const pk_te_program *prog) {
  pk_schedule *s = pk_alloc(ctx, sizeof *s);
  s->ctx = ctx;
  s->orig = prog;
  /* A copy of the lists only: tensors stay shared until a step rewrites one. */
  s->prog = pk_alloc(ctx, sizeof *s->prog);
  s->prog->ntensors = prog->ntensors;
  s->prog->tensors = pk_alloc(ctx, (size_t)(prog->ntensors + 1) * sizeof *s->prog->tensors);
  if (prog->ntensors) memcpy(s->prog->tensors, prog->tensors, (size_t)prog->ntensors * sizeof *prog->tensors);
  s->prog->nreduce = prog->nreduce;
  s->prog->reduce_axes = pk_alloc(ctx, (size_t)(prog->nreduce + 1) * sizeof *s->prog->reduce_axes);
  if (prog->nreduce) memcpy(s->prog->reduce_axes, prog->reduce_axes, (size_t)prog->nreduce * sizeof *prog->reduce_axes);

  int *canon = pk_alloc(ctx, (size_t)(prog->nreduce + 1) * sizeof *canon);
  pk_te_reduce_axis_canon_ids(prog, canon);
  for (int i = 0; i < prog->ntensors; i++)
    if (prog->tensors[i]->kind == PK_TE_COMPUTE)
      sched_insert_stage(s, s->nstages, initial_stage(ctx, prog->tensors[i], canon));
  return s;
}

pk_stage *pk_sched_find_stage(const pk_schedule *s, const char *name) {
  for (int i = 0; name && i < s->nstages; i++)
    if (strcmp(s->stages[i]->name, name) == 0) return s->stages[i];
  return NULL;
}

pk_iter *pk_sched_find_iter(const pk_stage *st, const char *name) {
  for (int i = 0; name && i < st->niters; i++)
    if (strcmp(st->iters[i]->name, name) == 0) return st->iters[i];
  return NULL;
}

bool pk_sched_is_materialized(const pk_schedule *s, int tensor_id) {
  if (tensor_id < 0 || tensor_id >= s->orig->ntensors) return false;
  if (s->orig->tensors[tensor_id]->kind == PK_TE_PLACEHOLDER) return true;
  for (int i = 0; i < s->nstages; i++)
    if (s->stages[i]->scope == PK_SCOPE_GLOBAL && s->stages[i]->param == tensor_id)
      return s->stages[i]->attach != PK_ATTACH_INLINE;
  return false;
}

/* ---- failing lookups ---- */

pk_status sched_fail(const sched_op *op, const char *fmt, ...) {
  char detail[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return pk_ctx_fail(op->s->ctx, PK_ERR_SCHEDULE, "step %s on %.64s: %s", pk_step_kind_name(op->kind),
                     op->stage ? op->stage : "(null)", detail);
}

pk_stage *sched_need_stage(const sched_op *op, const char *name) {
  pk_stage *st = pk_sched_find_stage(op->s, name);
  if (st) return st;
  const pk_te_program *p = op->s->orig;
  for (int i = 0; name && i < p->ntensors; i++) {
    char id[24];
    snprintf(id, sizeof id, "t%d", i);
    if (p->tensors[i]->kind == PK_TE_PLACEHOLDER && strcmp(id, name) == 0) {
      sched_fail(op, "%s is a placeholder (an input): it has no loops", name);
      return NULL;
    }
  }
  sched_fail(op, "unknown stage '%.64s'", name ? name : "(null)");
  return NULL;
}

pk_iter *sched_need_leaf(const sched_op *op, const pk_stage *st, const char *name) {
  pk_iter *it = pk_sched_find_iter(st, name);
  if (!it) {
    sched_fail(op, "unknown axis '%.64s' of %s", name ? name : "(null)", st->name);
    return NULL;
  }
  if (it->split_outer) {
    sched_fail(op, "'%s' is not a leaf: it was split into '%s', '%s'", it->name, it->split_outer->name,
               it->split_inner->name);
    return NULL;
  }
  if (it->fused_into) {
    sched_fail(op, "'%s' is not a leaf: it was fused into '%s'", it->name, it->fused_into->name);
    return NULL;
  }
  PK_ASSERT(sched_leaf_pos(st, it) >= 0);
  return it;
}

/* ---- the all-or-nothing frame ---- */

struct sched_snapshot {
  pk_te_program prog;       /* fields only: steps never modify a program array in place */
  int nstages, cap_stages;
  pk_stage **stages;
  pk_stage **order;         /* s->stages' contents */
  pk_stage *state;          /* each stage's fields */
  pk_iter **saved_arrays;   /* each stage's root, leaf, iters contents, back to back */
  int niters;
  pk_iter **iter_ptr;       /* every iter of every stage, and its fields */
  pk_iter *iter_state;
};

/* malloc, not the arena: a snapshot lives for one step, and the tuner replays many. */
static sched_snapshot *snapshot_take(const pk_schedule *s) {
  sched_snapshot *snap = pk_xcalloc(1, sizeof *snap);
  snap->prog = *s->prog;
  snap->nstages = s->nstages;
  snap->cap_stages = s->cap_stages;
  snap->stages = s->stages;
  snap->order = pk_xcalloc((size_t)s->nstages, sizeof *snap->order);
  snap->state = pk_xcalloc((size_t)s->nstages, sizeof *snap->state);
  size_t narray = 0;
  for (int i = 0; i < s->nstages; i++) {
    const pk_stage *st = s->stages[i];
    narray += (size_t)(st->nroot + st->nleaf + st->niters);
    snap->niters += st->niters;
  }
  snap->saved_arrays = pk_xcalloc(narray, sizeof *snap->saved_arrays);
  snap->iter_ptr = pk_xcalloc((size_t)snap->niters, sizeof *snap->iter_ptr);
  snap->iter_state = pk_xcalloc((size_t)snap->niters, sizeof *snap->iter_state);
  pk_iter **a = snap->saved_arrays;
  int k = 0;
  for (int i = 0; i < s->nstages; i++) {
    pk_stage *st = s->stages[i];
    snap->order[i] = st;
    snap->state[i] = *st;
    memcpy(a, st->root, (size_t)st->nroot * sizeof *a), a += st->nroot;
    memcpy(a, st->leaf, (size_t)st->nleaf * sizeof *a), a += st->nleaf;
    memcpy(a, st->iters, (size_t)st->niters * sizeof *a), a += st->niters;
    for (int j = 0; j < st->niters; j++, k++) {
      snap->iter_ptr[k] = st->iters[j];
      snap->iter_state[k] = *st->iters[j];
    }
  }
  return snap;
}

static void snapshot_restore(pk_schedule *s, const sched_snapshot *snap) {
  *s->prog = snap->prog;
  s->nstages = snap->nstages;
  s->cap_stages = snap->cap_stages;
  s->stages = snap->stages;
  if (s->nstages) memcpy(s->stages, snap->order, (size_t)s->nstages * sizeof *s->stages);
  pk_iter **a = snap->saved_arrays;
  for (int i = 0; i < s->nstages; i++) {
    pk_stage *st = s->stages[i];
    *st = snap->state[i];
    memcpy(st->root, a, (size_t)st->nroot * sizeof *a), a += st->nroot;
    memcpy(st->leaf, a, (size_t)st->nleaf * sizeof *a), a += st->nleaf;
    memcpy(st->iters, a, (size_t)st->niters * sizeof *a), a += st->niters;
  }
  for (int k = 0; k < snap->niters; k++) *snap->iter_ptr[k] = snap->iter_state[k];
}

static void snapshot_free(sched_snapshot *snap) {
  free(snap->order);
  free(snap->state);
  free(snap->saved_arrays);
  free(snap->iter_ptr);
  free(snap->iter_state);
  free(snap);
}

void sched_op_begin(sched_op *op, pk_schedule *s, pk_step_kind kind, const char *stage) {
  op->s = s;
  op->kind = kind;
  op->stage = stage;
  op->snap = snapshot_take(s);
}

static const char **copy_names(pk_ctx *ctx, int n, const char *const *names) {
  const char **out = pk_alloc(ctx, (size_t)(n ? n : 1) * sizeof *out);
  for (int i = 0; i < n; i++) out[i] = pk_strdup(ctx, names[i]);
  return out;
}

/* The step as called, its strings copied into the arena (callers' may be temporary). */
static void record_step(pk_schedule *s, const pk_sched_step *step) {
  pk_ctx *ctx = s->ctx;
  if (s->nsteps == s->cap_steps) {
    s->cap_steps = s->cap_steps ? s->cap_steps * 2 : 16;
    pk_sched_step *bigger = pk_alloc(ctx, (size_t)s->cap_steps * sizeof *bigger);
    if (s->nsteps) memcpy(bigger, s->steps, (size_t)s->nsteps * sizeof *bigger);
    s->steps = bigger;
  }
  pk_sched_step *r = &s->steps[s->nsteps++];
  *r = *step;
  r->stage = pk_strdup(ctx, step->stage);
  r->axes = copy_names(ctx, step->naxes, step->axes);
  r->readers = copy_names(ctx, step->nreaders, step->readers);
  r->target = step->target ? pk_strdup(ctx, step->target) : NULL;
  r->target_axis = step->target_axis ? pk_strdup(ctx, step->target_axis) : NULL;
}

pk_status sched_op_end(sched_op *op, pk_status status, const pk_sched_step *step) {
  if (status == PK_OK) status = sched_validate(op);
  if (status == PK_OK) record_step(op->s, step);
  else snapshot_restore(op->s, op->snap);
  snapshot_free(op->snap);
  op->snap = NULL;
  return status;
}
