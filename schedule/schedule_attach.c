/* schedule_attach.c — where a stage is computed: at the top (root), inside one loop of the
 * stage that reads it (compute_at), or substituted into its readers (inline). */
#include "sched_impl.h"

/* The target must be the stage's only reader (a reader that is inlined counts as the stages
 * it is inlined into): bound inference then sees every use of the stage inside the
 * attachment loop, so the region it computes there is all that is read. */
static pk_status attach_at(const sched_op *op, const char *stage, const char *target, const char *axis) {
  pk_schedule *s = op->s;
  pk_stage *st = sched_need_stage(op, stage);
  if (!st) return PK_ERR_SCHEDULE;
  pk_stage *tg = pk_sched_find_stage(s, target);
  if (!tg) return sched_fail(op, "unknown target stage '%.64s'", target ? target : "(null)");
  if (tg == st) return sched_fail(op, "cannot compute %s at itself", st->name);
  if (tg->attach == PK_ATTACH_INLINE) return sched_fail(op, "target %s is inlined: it has no loops", tg->name);
  pk_iter *x = sched_need_leaf(op, tg, axis);
  if (!x) return PK_ERR_SCHEDULE;
  if (x->kind == PK_LOOP_VECTORIZED)
    return sched_fail(op, "'%s' of %s is vectorized; a vector loop cannot hold a loop nest", x->name, tg->name);
  pk_stage **readers = pk_alloc(s->ctx, (size_t)s->nstages * sizeof *readers);
  int n = sched_readers_through_inline(s, st->tensor, readers);
  bool reads = false;
  for (int i = 0; i < n; i++) reads |= readers[i] == tg;
  if (!reads) return sched_fail(op, "%s does not read %s directly", tg->name, st->name);
  for (int i = 0; i < n; i++)
    if (readers[i] != tg)
      return sched_fail(op, "%s is also read by %s; compute_at needs the target to be its only reader",
                        st->name, readers[i]->name);
  for (const pk_stage *cur = tg; cur->attach == PK_ATTACH_AT; cur = cur->attach_stage)
    if (cur->attach_stage == st)
      return sched_fail(op, "%s is computed inside %s: attaching would make a cycle", tg->name, st->name);
  st->attach = PK_ATTACH_AT;
  st->attach_stage = tg;
  st->attach_iter = x;
  return PK_OK; /* parallel nesting and output coverage: sched_validate */
}

pk_status pk_sched_compute_at(pk_schedule *s, const char *stage, const char *target,
                              const char *target_axis) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_COMPUTE_AT, stage);
  pk_status status = attach_at(&op, stage, target, target_axis);
  pk_sched_step step = {.kind = PK_STEP_COMPUTE_AT, .stage = stage, .target = target,
                        .target_axis = target_axis};
  return sched_op_end(&op, status, &step);
}

static pk_status inline_stage(const sched_op *op, const char *stage) {
  pk_schedule *s = op->s;
  pk_stage *st = sched_need_stage(op, stage);
  if (!st) return PK_ERR_SCHEDULE;
  if (sched_reduction(st->tensor))
    return sched_fail(op, "%s is a reduction; only injective stages can be inlined", st->name);
  const pk_stage *at = sched_attached_to(s, st);
  if (at) return sched_fail(op, "%s is computed at %s; an inlined stage has no loops", at->name, st->name);
  pk_stage **readers = pk_alloc(s->ctx, (size_t)s->nstages * sizeof *readers);
  if (sched_readers(s, st->tensor, readers) == 0)
    return sched_fail(op, "%s has no readers: inlining it would compute nothing", st->name);
  st->attach = PK_ATTACH_INLINE;
  st->attach_stage = NULL;
  st->attach_iter = NULL;
  return PK_OK;
}

pk_status pk_sched_compute_inline(pk_schedule *s, const char *stage) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_COMPUTE_INLINE, stage);
  pk_status status = inline_stage(&op, stage);
  pk_sched_step step = {.kind = PK_STEP_COMPUTE_INLINE, .stage = stage};
  return sched_op_end(&op, status, &step);
}

pk_status pk_sched_compute_root(pk_schedule *s, const char *stage) {
  sched_op op;
  sched_op_begin(&op, s, PK_STEP_COMPUTE_ROOT, stage);
  pk_stage *st = sched_need_stage(&op, stage);
  if (st) {
    st->attach = PK_ATTACH_ROOT;
    st->attach_stage = NULL;
    st->attach_iter = NULL;
  }
  pk_sched_step step = {.kind = PK_STEP_COMPUTE_ROOT, .stage = stage};
  return sched_op_end(&op, st ? PK_OK : PK_ERR_SCHEDULE, &step);
}
