/* sched_validate.c — the schedule's invariants, checked on the whole schedule after every
 * step: a step is legal when the schedule it leaves is. One place for the rules that span
 * steps (a reorder moving a parallel loop inside a reduction, a compute_at into a parallel
 * loop, a rewrite that takes a reader away from an attached stage); cheap at kernel size. */
#include "sched_impl.h"

/* ---- one stage's loop nest ---- */

static bool is_gpu(pk_loop_kind k) { return k >= PK_LOOP_GPU_BLOCK_X; }

static pk_status check_leaves(const sched_op *op, const pk_stage *st) {
  const pk_iter *parallel = NULL, *gpu = NULL, *first_reduce = NULL;
  for (int i = 0; i < st->nleaf; i++) {
    const pk_iter *it = st->leaf[i];
    PK_ASSERT(!it->split_outer && !it->fused_into);
    bool independent = it->kind == PK_LOOP_PARALLEL || is_gpu(it->kind);
    if ((it->kind == PK_LOOP_VECTORIZED || independent) && it->reduce)
      return sched_fail(op, "'%s' of %s is a reduce iter and %s: it carries a dependence", it->name,
                        st->name, pk_loop_kind_name(it->kind));
    if (it->kind == PK_LOOP_VECTORIZED && i != st->nleaf - 1)
      return sched_fail(op, "vectorized loop '%s' of %s must stay innermost", it->name, st->name);
    if (independent && first_reduce)
      return sched_fail(op, "%s loop '%s' of %s would be inside reduce loop '%s'",
                        pk_loop_kind_name(it->kind), it->name, st->name, first_reduce->name);
    if (it->kind == PK_LOOP_PARALLEL) {
      if (parallel)
        return sched_fail(op, "parallel loops '%s' and '%s' of %s would nest", parallel->name, it->name, st->name);
      parallel = it;
    }
    if (is_gpu(it->kind)) {
      for (int j = 0; j < i; j++)
        if (st->leaf[j]->kind == it->kind)
          return sched_fail(op, "'%s' and '%s' of %s are bound to one thread tag", st->leaf[j]->name,
                            it->name, st->name);
      gpu = it;
    }
    if (it->reduce && !first_reduce) first_reduce = it;
  }
  if (parallel && gpu)
    return sched_fail(op, "%s has parallel loop '%s' and GPU-bound loop '%s'", st->name, parallel->name, gpu->name);
  return PK_OK;
}

/* ---- attachments ---- */

static pk_status check_acyclic(const sched_op *op) {
  const pk_schedule *s = op->s;
  for (int i = 0; i < s->nstages; i++) {
    const pk_stage *cur = s->stages[i];
    for (int hops = 0; cur->attach == PK_ATTACH_AT; hops++, cur = cur->attach_stage)
      if (hops > s->nstages)
        return sched_fail(op, "%s is computed inside itself (a cycle of compute_at)", s->stages[i]->name);
  }
  return PK_OK;
}

/* The parallel loop around st through its chain of attachments (NULL if none). */
static const pk_iter *enclosing_parallel(const pk_stage *st, const pk_stage **owner) {
  for (const pk_stage *cur = st; cur->attach == PK_ATTACH_AT; cur = cur->attach_stage) {
    const pk_stage *tg = cur->attach_stage;
    int pos = sched_leaf_pos(tg, cur->attach_iter);
    for (int i = 0; i <= pos; i++)
      if (tg->leaf[i]->kind == PK_LOOP_PARALLEL) {
        *owner = tg;
        return tg->leaf[i];
      }
  }
  return NULL;
}

static pk_status check_attach_point(const sched_op *op, const pk_stage *st, pk_stage **readers) {
  const pk_schedule *s = op->s;
  const pk_stage *tg = st->attach_stage;
  if (sched_stage_index(s, tg) < 0) return sched_fail(op, "%s is computed at a stage that is gone", st->name);
  if (tg->attach == PK_ATTACH_INLINE)
    return sched_fail(op, "%s is computed at %s, which would be inlined", st->name, tg->name);
  if (sched_leaf_pos(tg, st->attach_iter) < 0)
    return sched_fail(op, "%s is computed at '%s', which would no longer be a loop of %s", st->name,
                      st->attach_iter->name, tg->name);
  if (st->attach_iter->kind == PK_LOOP_VECTORIZED)
    return sched_fail(op, "%s is computed at '%s' of %s, which would be vectorized", st->name,
                      st->attach_iter->name, tg->name);
  /* a reader inlined into the target reads where the target evaluates it */
  int n = sched_readers_through_inline(s, st->tensor, readers);
  bool reads = false;
  for (int i = 0; i < n; i++) reads |= readers[i] == tg;
  if (!reads)
    return sched_fail(op, "%s is computed at %s, which would no longer read it", st->name, tg->name);
  for (int i = 0; i < n; i++)
    if (readers[i] != tg)
      return sched_fail(op, "%s is computed at %s but would also be read by %s", st->name, tg->name,
                        readers[i]->name);
  return PK_OK;
}

static pk_status check_inline(const sched_op *op, const pk_stage *st, pk_stage **readers) {
  if (sched_reduction(st->tensor)) return sched_fail(op, "inlined %s would be a reduction", st->name);
  const pk_stage *at = sched_attached_to(op->s, st);
  if (at) return sched_fail(op, "%s would be computed at inlined %s", at->name, st->name);
  if (sched_readers(op->s, st->tensor, readers) == 0)
    return sched_fail(op, "inlined %s would have no readers", st->name);
  return PK_OK;
}

/* Only LOCAL stages (per-thread storage) may run inside a parallel loop: a WORKSPACE
 * buffer would be shared by the threads, and a kernel output could be written by several
 * of them at once wherever their regions overlap. */
static pk_status check_parallel_nesting(const sched_op *op, const pk_stage *st) {
  const pk_stage *owner = NULL;
  const pk_iter *p = enclosing_parallel(st, &owner);
  if (!p) return PK_OK;
  if (st->scope != PK_SCOPE_LOCAL)
    return sched_fail(op, "%s (%s) would be computed inside parallel loop '%s' of %s; only local stages can be",
                      st->name, pk_mem_scope_name(st->scope), p->name, owner->name);
  for (int i = 0; i < st->nleaf; i++)
    if (st->leaf[i]->kind == PK_LOOP_PARALLEL)
      return sched_fail(op, "parallel loop '%s' of %s would be nested inside parallel loop '%s' of %s",
                        st->leaf[i]->name, st->name, p->name, owner->name);
  return PK_OK;
}

/* ---- kernel outputs computed in full ----
 * A stage computed at another computes only the region its reader uses. For a kernel
 * output (GLOBAL), and for anything with one attached below it, that region must be all
 * of it. Sufficient and checkable: the reader reads it unconditionally (outside select
 * branches and the right side of && / ||) at plain distinct axes spanning every dim. */

static bool needs_full(const pk_schedule *s, const pk_stage *st) {
  if (st->scope == PK_SCOPE_GLOBAL) return true;
  for (int i = 0; i < s->nstages; i++)
    if (s->stages[i]->attach == PK_ATTACH_AT && s->stages[i]->attach_stage == st && needs_full(s, s->stages[i]))
      return true;
  return false;
}

static bool axis_in_domain(const pk_te_axis *a, const pk_te_tensor *reader) {
  if (!a->reduce) return a->owner == reader;
  const pk_expr *red = sched_reduction(reader);
  for (int i = 0; red && i < red->naxes; i++)
    if (red->axes[i] == a) return true;
  return false;
}

static bool is_full_read(const pk_expr *e, const pk_te_tensor *t, const pk_te_tensor *reader) {
  if (e->kind != PK_EXPR_READ || e->tensor != t) return false;
  for (int d = 0; d < e->nargs; d++) {
    const pk_expr *ix = e->args[d];
    if (ix->kind != PK_EXPR_AXIS || !axis_in_domain(ix->axis, reader) || ix->axis->lo != 0 ||
        ix->axis->hi != t->shape[d])
      return false;
    for (int j = 0; j < d; j++)
      if (e->args[j]->axis == ix->axis) return false;
  }
  return true;
}

static bool reads_in_full(const pk_expr *e, const pk_te_tensor *t, const pk_te_tensor *reader) {
  if (is_full_read(e, t, reader)) return true;
  for (int i = 0; i < e->nargs; i++) {
    bool conditional = (e->kind == PK_EXPR_SELECT && i > 0) ||
                       (e->kind == PK_EXPR_BINARY && (e->op == PK_EOP_AND || e->op == PK_EOP_OR) && i > 0);
    if (!conditional && reads_in_full(e->args[i], t, reader)) return true;
  }
  return false;
}

static pk_status check_coverage(const sched_op *op, const pk_stage *st) {
  const pk_stage *tg = st->attach_stage;
  if (!needs_full(op->s, st) || reads_in_full(tg->tensor->body, st->tensor, tg->tensor)) return PK_OK;
  return sched_fail(op, "%s at %s: %s must be computed in full (%s), but %s does not read all of it "
                    "at plain axes (e.g. %s[i0, ...]); inline it or keep it at root",
                    st->name, tg->name, st->name,
                    st->scope == PK_SCOPE_GLOBAL ? "a kernel output" : "a kernel output is computed at it",
                    tg->name, st->name);
}

/* Whether st evaluates a scatter_add of the user's program. Asked of the original tensor:
 * a step that rewrote the stage's tensor (cache_read of what it reads) made a plain copy. */
static bool is_scatter_stage(const pk_schedule *s, const pk_stage *st) {
  if (st->tensor->dom_ndim) return true;
  if (st->scope != PK_SCOPE_GLOBAL || st->param < 0 || st->param >= s->orig->ntensors) return false;
  const pk_te_tensor *t = s->orig->tensors[st->param];
  return t->kind == PK_TE_COMPUTE && t->dom_ndim > 0;
}

/* A scatter_add has one fixed schedule (docs/te.md: its loops run serially, so repeated
 * destinations never race): no step may change its stage, rewrite its value (cache_read of
 * what it reads) or put another stage inside its loops. */
static pk_status check_scatter_fixed(const sched_op *op, const pk_stage *st) {
  const pk_schedule *s = op->s;
  if (st->attach_stage && is_scatter_stage(s, st->attach_stage))
    return sched_fail(op, "%s cannot be computed inside scatter_add %s (its schedule is fixed)",
                      st->name, st->attach_stage->name);
  if (!is_scatter_stage(s, st)) return PK_OK;
  bool fixed = st->attach == PK_ATTACH_ROOT && st->scope == PK_SCOPE_GLOBAL &&
               st->param >= 0 && st->param < s->orig->ntensors &&
               s->orig->tensors[st->param] == st->tensor && st->nleaf == st->nroot &&
               st->niters == st->nroot;
  for (int i = 0; fixed && i < st->nleaf; i++)
    fixed = st->leaf[i] == st->root[i] && st->leaf[i]->kind == PK_LOOP_SERIAL &&
            !st->leaf[i]->partition;
  if (!fixed)
    return sched_fail(op, "%s is a scatter_add: its schedule is fixed (serial loops, computed "
                      "at the root into its output)", st->name);
  return PK_OK;
}

pk_status sched_validate(const sched_op *op) {
  const pk_schedule *s = op->s;
  for (int i = 0; i < s->nstages; i++)
    if (check_scatter_fixed(op, s->stages[i]) != PK_OK) return PK_ERR_SCHEDULE;
  if (check_acyclic(op) != PK_OK) return PK_ERR_SCHEDULE;
  pk_stage **readers = pk_alloc(s->ctx, (size_t)(s->nstages + 1) * sizeof *readers);
  for (int i = 0; i < s->nstages; i++) {
    const pk_stage *st = s->stages[i];
    if (check_leaves(op, st) != PK_OK) return PK_ERR_SCHEDULE;
    if (st->attach == PK_ATTACH_AT &&
        (check_attach_point(op, st, readers) != PK_OK || check_coverage(op, st) != PK_OK))
      return PK_ERR_SCHEDULE;
    if (st->attach == PK_ATTACH_INLINE && check_inline(op, st, readers) != PK_OK) return PK_ERR_SCHEDULE;
    if (check_parallel_nesting(op, st) != PK_OK) return PK_ERR_SCHEDULE;
  }
  return PK_OK;
}
