/* sched_impl.h — private to schedule/'s primitives: the step-in-progress that makes every
 * primitive all-or-nothing, stage and iter construction, readers, the schedule invariants
 * checked after every step, and the typed expression rewriting of derived stages. */
#ifndef PK_SCHED_IMPL_H
#define PK_SCHED_IMPL_H

#include <stdarg.h>

#include "pk_schedule.h"

#define PK_SCHED_MAX_LANES 64        /* widest vectorized loop */
#define PK_SCHED_MAX_UNROLL 64       /* deepest unroll, and largest fully unrolled extent */
/* Factors travel as JSON numbers (doubles), exact only up to 2^53. */
#define PK_SCHED_MAX_FACTOR ((int64_t)1 << 53)

/* ---- a step in progress (schedule.c) ----
 * begin snapshots everything a primitive may change; end either keeps the change (after
 * sched_validate accepts the whole schedule) and records the step, or restores the
 * snapshot, so an illegal step leaves the schedule exactly as it was. */
typedef struct sched_snapshot sched_snapshot;
typedef struct sched_op {
  pk_schedule *s;
  pk_step_kind kind;
  const char *stage;   /* the stage (or tensor) named by the call, for messages */
  sched_snapshot *snap;
} sched_op;

void sched_op_begin(sched_op *op, pk_schedule *s, pk_step_kind kind, const char *stage);
pk_status sched_op_end(sched_op *op, pk_status status, const pk_sched_step *step);
/* "step <kind> on <stage>: <detail>", PK_ERR_SCHEDULE. */
pk_status sched_fail(const sched_op *op, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Lookups that fail with a message: unknown stage, unknown axis, axis not a leaf. */
pk_stage *sched_need_stage(const sched_op *op, const char *name);
pk_iter *sched_need_leaf(const sched_op *op, const pk_stage *st, const char *name);

/* ---- stages and iters (schedule.c) ---- */
pk_stage *sched_stage_new(pk_ctx *ctx, const char *name, pk_te_tensor *t, pk_mem_scope scope,
                          int param);
/* Appends a root iter (also a leaf and an iter) to st. */
pk_iter *sched_add_root(pk_ctx *ctx, pk_stage *st, const char *name, int64_t extent, bool reduce,
                        const pk_te_axis *axis);
/* Makes room for n entries in each of st's root, leaf and iters arrays. */
void sched_stage_reserve(pk_ctx *ctx, pk_stage *st, int n);
void sched_add_iter(pk_ctx *ctx, pk_stage *st, pk_iter *it);
int sched_leaf_pos(const pk_stage *st, const pk_iter *it);
/* Inserts st at position pos of s->stages. */
void sched_insert_stage(pk_schedule *s, int pos, pk_stage *st);
int sched_stage_index(const pk_schedule *s, const pk_stage *st);
/* The first stage attached (compute_at) at it, or NULL. */
pk_stage *sched_attached_at(const pk_schedule *s, const pk_iter *it);
/* The first stage attached at any iter of st, or NULL. */
pk_stage *sched_attached_to(const pk_schedule *s, const pk_stage *st);

/* ---- reads ---- */
bool sched_expr_reads(const pk_expr *e, const pk_te_tensor *t);
/* Stages whose body reads t directly: fills out (room for s->nstages), returns the count. */
int sched_readers(const pk_schedule *s, const pk_te_tensor *t, pk_stage **out);
/* The same, an inlined reader replaced by the stages that read it (where its reads are
 * evaluated): what a stage computed at one of them must serve. Each stage once. */
int sched_readers_through_inline(const pk_schedule *s, const pk_te_tensor *t, pk_stage **out);
/* The body's top-level reduction, or NULL. */
const pk_expr *sched_reduction(const pk_te_tensor *t);

/* ---- invariants (sched_validate.c) ----
 * Every rule that involves more than one step's arguments: annotations and the loop nest
 * (vectorized innermost, parallel outside reductions and never nested), attachments
 * (the target reads the stage and is its only reader, no cycles, only LOCAL stages inside
 * parallel loops, kernel outputs fully computed), inlining. Fails through op. */
pk_status sched_validate(const sched_op *op);

/* ---- typed expression building and rewriting (sched_expr.c) ----
 * Nodes get the dtype the checker would give them, so downstream code sees typed trees. */
pk_expr *sx_int(pk_ctx *ctx, int64_t v, pkrt_dtype t);
pk_expr *sx_zero(pk_ctx *ctx, pkrt_dtype t);
pk_expr *sx_axis(pk_ctx *ctx, pk_te_axis *a);
pk_expr *sx_binary(pk_ctx *ctx, pk_eop op, pk_expr *a, pk_expr *b);
pk_expr *sx_select(pk_ctx *ctx, pk_expr *c, pk_expr *a, pk_expr *b);
pk_expr *sx_read(pk_ctx *ctx, pk_te_tensor *t, int n, pk_expr *const *idx);
pk_expr *sx_reduce(pk_ctx *ctx, pk_eop op, pk_expr *body, int naxes, pk_te_axis *const *axes);
/* e as an I64 expression (a cast when it is I32). */
pk_expr *sx_as_i64(pk_ctx *ctx, pk_expr *e);

#define SX_MAX_SUBST (2 * PK_TE_MAX_DIMS + 2)
/* What a rewrite changes; everything else is copied as it is. */
typedef struct sx_map {
  int nsubst;                       /* axis substitutions: AXIS(from[i]) becomes to[i] */
  const pk_te_axis *from[SX_MAX_SUBST];
  pk_expr *to[SX_MAX_SUBST];
  const pk_te_tensor *read_from;    /* reads of this tensor ... */
  pk_te_tensor *read_to;            /* ... become reads of this one, */
  int block_dim;                    /* with cache_read's layout change (-1: same indices) */
  int64_t block;
  pk_te_tensor *const *current;     /* when set: every other read of a tensor with id i
                                       reads current[i] (relinking to private copies) */
} sx_map;

void sx_map_init(sx_map *m);
void sx_map_subst(sx_map *m, const pk_te_axis *from, pk_expr *to);
pk_expr *sx_rewrite(pk_ctx *ctx, const pk_expr *e, const sx_map *m);
/* A new compute (not in any program): fresh spatial axes "i<d>" owned by it, no body. */
pk_te_tensor *sx_tensor_new(pk_ctx *ctx, int id, const char *name, pkrt_dtype dtype, int ndim,
                            const int64_t *shape);
/* A private copy of t: same id, name, dtype and shape; fresh spatial axes owned by the
 * copy; body = t's body rewritten by m, with t's axes replaced by the copy's. */
pk_te_tensor *sx_tensor_copy(pk_ctx *ctx, const pk_te_tensor *t, const sx_map *m);

#endif
