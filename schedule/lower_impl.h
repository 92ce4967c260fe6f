/* lower_impl.h — private to lowering (lower.c, lower_expr.c, lower_stage.c, bound_infer.c):
 * the per-stage state that turns a schedule's stages into loop nests. */
#ifndef PK_LOWER_IMPL_H
#define PK_LOWER_IMPL_H

#include "pk_schedule.h"

/* One stage being lowered. Lowering runs in two passes: in reverse stage order each stage
 * gets its region (bound inference needs its reader, which comes later in the order, set
 * up already), its loop variables and the values of its axes; then, from the root stages
 * down, each stage's loop nest is built with its attached stages inside. */
typedef struct stage_lowering stage_lowering;
struct stage_lowering {
  const pk_stage *st;
  int order;                 /* position in s->stages */
  stage_lowering *target;    /* AT: the stage one of whose loops holds this one */
  int attach_pos;            /* AT: that loop's position in target's leaves */
  bool in_parallel;          /* some loop enclosing this stage's nest is parallel */
  bool ready;                /* the first pass is done */

  /* The region of the tensor this stage computes: axis d takes the values
   * region_min[d] + [0, region_ext[d]). The whole tensor unless attached AT. */
  pk_lexpr *region_min[PK_TE_MAX_DIMS];
  int64_t region_ext[PK_TE_MAX_DIMS];
  /* A min that is not affine (clamped with min/max) is computed once, by a LET of
   * min_var[d] = min_value[d] around the attached nest; region_min[d] is then that var. */
  pk_lvar *min_var[PK_TE_MAX_DIMS];
  pk_lexpr *min_value[PK_TE_MAX_DIMS];

  pk_lbuf *buf;              /* where it is stored; NULL when inlined */
  bool relative;             /* buf holds the region only: indices are value - region_min */

  int64_t *ext;              /* per st->iters[i]: trip count over this region */
  pk_lexpr **counter;        /* per st->iters[i]: 0-based counter, from the leaves' variables */
  pk_lvar **leaf_var;        /* per leaf: its loop variable, range [0, ext) */
  pk_lexpr **root_value;     /* per root iter: the value of its TE axis */
};

typedef struct lowering {
  pk_ctx *ctx;
  pk_lfunc *f;
  const pk_schedule *s;
  pk_lranges *ranges;        /* every loop variable's range (loops all start at 0) */
  stage_lowering *sl;        /* per s->stages[i] */
  /* axis bindings while lowering an expression: stage axes, then axes of inlined
   * stages being substituted (searched from the top, so the innermost binding wins) */
  int nbind, cap_bind;
  const pk_te_axis **bind_axis;
  pk_lexpr **bind_value;
  int64_t ws_bytes;          /* workspace used so far */
} lowering;

/* ---- lower.c ---- */
/* The stage that evaluates t (a compute of s->prog or of the user's program), or NULL. */
stage_lowering *lower_stage_of(lowering *L, const pk_te_tensor *t);
int lower_iter_index(const pk_stage *st, const pk_iter *it);

/* ---- lower_expr.c: TE expressions to loop-IR expressions ---- */
void lower_bind(lowering *L, const pk_te_axis *a, pk_lexpr *value);
void lower_unbind(lowering *L, int n);
/* Binds every root iter's axis of sl's stage to its value; returns how many were bound. */
int lower_bind_stage(lowering *L, const stage_lowering *sl);
/* A reduction-free expression under the current bindings, simplified; reads of inlined
 * stages are substituted, reads of stored ones load their buffer. */
pk_lexpr *lower_value(lowering *L, const pk_expr *e);
/* Flat element index of sl's buffer at the given axis values (simplified). */
pk_lexpr *lower_buffer_index(lowering *L, const stage_lowering *sl, pk_lexpr *const *values);
/* Calls fn for every read of tensor t in e, inlined stages substituted, with its indices
 * under the current bindings (NULL: an index that itself reads memory). */
typedef void (*lower_access_fn)(void *arg, pk_lexpr *const *idx, int n);
void lower_collect_reads(lowering *L, const pk_expr *e, const pk_te_tensor *t, lower_access_fn fn,
                         void *arg);

/* ---- bound_infer.c ---- */
/* Fills sl's region from the reads of its tensor by its target's body, for the values of
 * the loops that enclose the attachment. */
pk_status bound_infer_region(lowering *L, stage_lowering *sl);

/* ---- lower_stage.c ---- */
/* First pass, once sl's region is known: trip counts, loop variables, counters, values. */
void stage_setup(lowering *L, stage_lowering *sl);
/* Second pass: sl's loop nest, with the stages attached to it inside. */
pk_stmt *stage_nest(lowering *L, stage_lowering *sl);

/* lower_scatter.c: a scatter_add stage's fixed nest (zeros, then serial updates). */
pk_stmt *lower_scatter_nest(lowering *L, stage_lowering *sl);

/* partition.c: cuts the loops that pk_sched_partition marked (FOR.partition) into edge and
 * guard-free middle copies. Before number_in_order: it makes variables. */
void lower_partition_loops(pk_ctx *ctx, pk_lfunc *f);

#endif
