/* pk_schedule.h — schedules: how a TE program is computed, never what. A schedule is a
 * list of stages (one per compute) whose loops are iteration variables (iters) related by
 * split and fuse, annotated (vectorize, unroll, parallel, bind, partition), attached (root, inline,
 * at another stage's loop), plus derived stages made by cache_read, cache_write and
 * rfactor. Every primitive call is recorded as a step of a trace; the trace, serialized
 * as canonical JSON, is what the tuner stores, and replaying it rebuilds the schedule.
 *
 * Usage:
 *   pk_schedule *s = pk_sched_new(ctx, prog);
 *   pk_sched_split(s, "t2", "i0", 8);                 // iters "i0.o", "i0.i"
 *   pk_sched_vectorize(s, "t2", "i1");
 *   if (pk_sched_cache_write(s, "t2", "local") == PK_ERR_SCHEDULE) ... // illegal: message in ctx
 *   char *json = pk_sched_to_json(s);                  // the trace
 *   pk_schedule *r; pk_sched_from_json(ctx, prog, json, &r);   // replays it
 *   pk_lfunc *f; pk_sched_lower(ctx, prog, s, "k0", &f);
 *
 * Names. Stages are the canonical stage ids of the TE ("t2": tensor 2 of the canonical
 * text), and derived stages "t2.local" (cache_write), "t0.ws"/"t0.local" (cache_read of
 * t0 into that scope), "t2.rf" (rfactor). Root iters are the canonical axis ids: "i0".."iN"
 * (spatial) and the reduce axes "k<n>" of the canonical text. split(x) makes "x.o", "x.i";
 * fuse(x, y) makes "x.y.f"; rfactor makes the new stage's iters from the old ones' names.
 * Because names are canonical, a trace recorded on one TE replays on any TE with the same
 * canonical text, whatever the user called things.
 *
 * Errors. An illegal step returns PK_ERR_SCHEDULE with a message naming the step, and
 * leaves the schedule exactly as it was (the tuner counts and skips such candidates).
 */
#ifndef PK_SCHEDULE_H
#define PK_SCHEDULE_H

#include "pk_loopir.h"

typedef enum pk_iter_rel {
  PK_ITER_ROOT,        /* a TE axis: value = axis->lo + loop counter */
  PK_ITER_SPLIT_OUTER, /* of parent: extent ceil(parent->extent / factor) */
  PK_ITER_SPLIT_INNER, /* of parent: extent factor; parent = outer * factor + inner */
  PK_ITER_FUSED        /* of fused_outer, fused_inner: outer = f / inner.extent, inner = f % inner.extent */
} pk_iter_rel;

typedef struct pk_iter pk_iter;
struct pk_iter {
  const char *name;         /* "i0", "k0", "i0.o", "i0.o.i1.f", ... (see above) */
  int64_t extent;           /* trip count of its loop */
  bool reduce;              /* derived (only) from reduce axes */
  pk_iter_rel rel;
  const pk_te_axis *axis;   /* ROOT: the stage tensor's axis (spatial) or reduce axis */
  pk_iter *parent;          /* SPLIT_*: the iter that was split */
  int64_t factor;           /* SPLIT_*: the inner extent */
  pk_iter *fused_outer, *fused_inner; /* FUSED */
  pk_iter *split_outer, *split_inner; /* set on an iter once it is split */
  pk_iter *fused_into;                /* set on an iter once it is fused */
  pk_loop_kind kind;        /* SERIAL unless annotated */
  int64_t annotation;       /* UNROLLED: depth; VECTORIZED: lanes (= extent) */
  bool partition;           /* cut into guard-free middle and edges (pk_sched_partition) */
};

typedef enum pk_attach {
  PK_ATTACH_ROOT,   /* its own loop nest at the top of the kernel, in stage order */
  PK_ATTACH_INLINE, /* substituted into its readers; never stored */
  PK_ATTACH_AT      /* its loop nest sits inside attach_stage's loop attach_iter, over
                       the region that loop's body reads (bound inference) */
} pk_attach;

typedef struct pk_stage pk_stage;
struct pk_stage {
  const char *name;          /* "t2", "t2.local", "t0.ws", "t2.rf" */
  pk_te_tensor *tensor;      /* the compute in s->prog this stage evaluates */
  int nroot;                 /* spatial axes, then reduce axes of its reduction */
  pk_iter **root;
  int nleaf;                 /* the loops, outermost first */
  pk_iter **leaf;
  int niters;                /* every iter made for this stage (lookup by name) */
  pk_iter **iters;
  pk_attach attach;
  pk_stage *attach_stage;    /* AT */
  pk_iter *attach_iter;      /* AT: a leaf of attach_stage */
  pk_mem_scope scope;        /* GLOBAL for the user's computes (kernel outputs); LOCAL or
                                WORKSPACE for derived stages */
  int param;                 /* GLOBAL: index of the kernel parameter it writes; else -1 */
  int cap;                   /* capacity of root/leaf/iters arrays (private) */
};

typedef enum pk_step_kind {
  PK_STEP_SPLIT, PK_STEP_TILE, PK_STEP_REORDER, PK_STEP_FUSE,
  PK_STEP_VECTORIZE, PK_STEP_UNROLL, PK_STEP_PARALLEL, PK_STEP_BIND,
  PK_STEP_COMPUTE_AT, PK_STEP_COMPUTE_INLINE, PK_STEP_COMPUTE_ROOT,
  PK_STEP_CACHE_READ, PK_STEP_CACHE_WRITE, PK_STEP_RFACTOR, PK_STEP_PARTITION,
  PK_STEP_SET_SCOPE,
  PK_STEP_COUNT_
} pk_step_kind;

const char *pk_step_kind_name(pk_step_kind k); /* "split", ..., the JSON "step" values */

/* One recorded primitive call, exactly its arguments. */
typedef struct pk_sched_step {
  pk_step_kind kind;
  const char *stage;     /* the stage (or, for cache_read, the tensor's stage id "t0") */
  int naxes;
  const char **axes;     /* iters named by the call (split: 1, tile: 2, reorder: n, fuse: 2, ...) */
  int nfactors;
  int64_t factors[4];    /* split: factor; tile: fx, fy; unroll: depth (0 = full);
                            cache_read: block_dim, block (or -1, 0 for no layout change) */
  const char *target;    /* compute_at: target stage; cache_*: scope; bind: thread tag */
  const char *target_axis; /* compute_at: the target stage's iter */
  int nreaders;
  const char **readers;  /* cache_read: stages whose reads are redirected */
} pk_sched_step;

struct pk_schedule {
  pk_ctx *ctx;
  const pk_te_program *orig; /* the user's program: kernel parameters are its tensors */
  pk_te_program *prog;       /* orig's tensors (shared) plus derived computes; stage
                                tensors whose bodies a step rewrote are private copies */
  int nstages;
  pk_stage **stages;         /* dependency order: a stage reads only earlier ones */
  int nsteps;
  pk_sched_step *steps;
  int cap_stages, cap_steps; /* private */
};

typedef struct pk_schedule pk_schedule;

pk_schedule *pk_sched_new(pk_ctx *ctx, const pk_te_program *prog);
pk_stage *pk_sched_find_stage(const pk_schedule *s, const char *name);
pk_iter *pk_sched_find_iter(const pk_stage *st, const char *name);

/* ---- loop primitives ---- */
pk_status pk_sched_split(pk_schedule *s, const char *stage, const char *axis, int64_t factor);
/* tile(x, y, fx, fy) = split x, split y, reorder to x.o, y.o, x.i, y.i (in place of x, y) */
pk_status pk_sched_tile(pk_schedule *s, const char *stage, const char *x, const char *y,
                        int64_t fx, int64_t fy);
/* Reorders the named leaves among the positions they occupy; the others stay put. */
pk_status pk_sched_reorder(pk_schedule *s, const char *stage, int n, const char *const *axes);
/* Fuses two adjacent leaves, outer directly outside inner, both spatial or both reduce. */
pk_status pk_sched_fuse(pk_schedule *s, const char *stage, const char *outer, const char *inner);
/* The innermost leaf, extent 2..64, spatial. A tail (a split that does not divide) is a
 * guard on the lane: the C backend turns it into masked loads and stores. */
pk_status pk_sched_vectorize(pk_schedule *s, const char *stage, const char *axis);
/* depth 0: full unroll (extent <= 64). */
pk_status pk_sched_unroll(pk_schedule *s, const char *stage, const char *axis, int64_t depth);
/* A spatial leaf, outside every reduce leaf of its stage, not inside another parallel loop. */
pk_status pk_sched_parallel(pk_schedule *s, const char *stage, const char *axis);
/* Loop partitioning (TVM's LoopPartition, by request): the serial loop is cut where the
 * guards affine in its counter (a padded window's bounds, a ragged split's tail) hold for
 * every iteration of the loops inside, and the middle part runs without them. For padded
 * convolutions: mark the kernel-window reduce loops, and the interior vectorizes with plain
 * loads. The loop must stay serial (annotate others, not it). */
pk_status pk_sched_partition(pk_schedule *s, const char *stage, const char *axis);
/* tag: blockIdx.x|y|z, threadIdx.x|y|z. Accepted here; the C backend refuses it. */
pk_status pk_sched_bind(pk_schedule *s, const char *stage, const char *axis, const char *tag);

/* ---- attachment ---- */
/* stage must be read (directly) by target; target_axis a leaf of target. */
pk_status pk_sched_compute_at(pk_schedule *s, const char *stage, const char *target,
                              const char *target_axis);
/* Only a stage without reduction whose readers are all in this kernel; it stops being a
 * kernel output (its parameter is left unwritten: pk_sched_is_materialized says so). */
pk_status pk_sched_compute_inline(pk_schedule *s, const char *stage);
pk_status pk_sched_compute_root(pk_schedule *s, const char *stage);

/* ---- derived stages ---- */
/* Makes "<stage>.local": the reduction computed into a LOCAL buffer; <stage> becomes a
 * copy from it. Typical use: compute_at the .local stage inside <stage>'s tile loop, so
 * the tile's accumulators live in registers. scope: "local". */
pk_status pk_sched_cache_write(pk_schedule *s, const char *stage, const char *scope);
/* Makes "<tensor>.<scope>" (scope "local" or "ws" for the workspace) holding a copy of
 * tensor that the readers read instead. block_dim >= 0 changes the layout: dimension
 * block_dim of extent E is split into (ceil(E/block), block); the outer part becomes the
 * first dimension and the inner part the last, e.g. B[K, N] with block_dim 1, block 16 is
 * packed as B.ws[ceil(N/16), K, 16] (zero beyond N): a GEMM panel. block_dim -1: same
 * layout. */
pk_status pk_sched_cache_read(pk_schedule *s, const char *tensor, const char *scope,
                              int nreaders, const char *const *readers, int block_dim,
                              int64_t block);
/* axis: a reduce leaf made by a split of a reduce axis. Makes "<stage>.rf" computing
 * partial results with axis as a new spatial dimension (last); <stage> then reduces them. */
pk_status pk_sched_rfactor(pk_schedule *s, const char *stage, const char *axis);
/* Where a derived stage (.local, .ws, .shared, .rf) keeps its values: "local", "ws" or
 * "shared" (GPU). An .rf stage made shared and computed at a block's loop, its lane bound
 * to threads, is a cross-thread reduction: the block's threads write the partial results,
 * a barrier, then the stage sums them. */
pk_status pk_sched_set_scope(pk_schedule *s, const char *stage, const char *scope);

/* ---- queries used by lowering and codegen ---- */
/* False for a user compute that was inlined: its kernel parameter is not written. */
bool pk_sched_is_materialized(const pk_schedule *s, int tensor_id);

/* ---- the trace ---- */
/* Canonical JSON: {"version":1,"steps":[{"step":"split","stage":"t2","axis":"i0","factor":8}, ...]}
 * Keys in a fixed order, no whitespace; docs/schedule.md lists every step's fields. */
char *pk_sched_to_json(const pk_schedule *s);
/* Replays a trace on prog. A malformed document is PK_ERR_SYNTAX; a step that does not
 * apply is PK_ERR_SCHEDULE naming the step's index. */
pk_status pk_sched_from_json(pk_ctx *ctx, const pk_te_program *prog, const char *json,
                             pk_schedule **out);

#endif
