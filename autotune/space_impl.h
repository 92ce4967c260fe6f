/* space_impl.h — the layout of a config space and the interface each op class's template
 * implements (space_matmul.c, space_conv.c, space_generic.c). Internal to autotune/. */
#ifndef PK_SPACE_IMPL_H
#define PK_SPACE_IMPL_H

#include "pk_search.h"

typedef struct space_class space_class;

struct pk_space {
  pk_ctx *ctx;                  /* results, messages, the plan */
  const pk_task *task;
  pk_space_options opts;
  int lanes;                    /* hardware vector lanes for the task's dtype */
  int vector_regs;              /* the target's vector registers (register tiles fit them) */
  bool gpu;                     /* a GPU target: the GPU templates (space_gpu.c), and every
                                   config must pass pk_gpu_prepare */
  int nknobs;
  pk_knob knobs[PK_SPACE_MAX_KNOBS];
  int by_name[PK_SPACE_MAX_KNOBS]; /* knob indices in name order: knobs JSON key order */
  const space_class *cls;
  void *plan;                   /* the class's analysis of the program */
  int nexterns;
  pk_candidate externs[1];
  /* pk_space_build's throwaway arena: schedules and lowered IR are garbage once the trace
   * is printed, and a tuning run builds thousands of them. Recycled every few hundred. */
  pk_ctx *scratch;
  int scratch_uses;
};

/* One op class's template: it reads the program once (init: adds the knobs and keeps a
 * plan), then turns knob values into primitive calls (apply). */
struct space_class {
  const char *name;
  /* PK_ERR_UNSUPPORTED when the program does not have the class's shape (pk_space_new then
   * falls back to the generic template). */
  pk_status (*init)(pk_space *sp);
  /* v[i]: the value of knob i. Returns the first refused primitive's status. */
  pk_status (*apply)(const pk_space *sp, pk_schedule *s, const int64_t *v);
  /* The hand schedule's knob values (NULL: no preset). */
  bool (*preset)(const pk_space *sp, int64_t *v);
};

extern const space_class pk_space_class_matmul;
extern const space_class pk_space_class_conv;
extern const space_class pk_space_class_conv_gemm;
extern const space_class pk_space_class_reduction;
extern const space_class pk_space_class_injective;
extern const space_class pk_space_class_gpu_product; /* space_gpu.c */
extern const space_class pk_space_class_gpu_generic;

/* ---- helpers for the templates (space.c) ---- */
#define SPACE_TRY(call)               \
  do {                                \
    pk_status st_ = (call);           \
    if (st_ != PK_OK) return st_;     \
  } while (0)

/* Adds a knob with values (deduplicated, kept in the given order; at most
 * PK_SPACE_MAX_VALUES). Returns its index. */
int space_add_knob(pk_space *sp, const char *name, const int64_t *values, int n);
/* Sorted, distinct tile sizes for an axis of this extent: each of `preferred` that fits,
 * the divisors of extent in [min_div, max_div] (so both divisors and non-divisors are
 * offered), and the extent itself when it is at most max_div. */
int space_tile_values(int64_t extent, const int64_t *preferred, int npreferred, int64_t min_div,
                      int64_t max_div, int64_t *out);
/* Vector widths: 1, then 4, 8, ... up to 2 hardware vectors (the C backend emits wider
 * vectors as several hardware ones), at most max_lanes. (An odd width such as 10, a short
 * axis as one vector, is left out: its masked part costs more than it saves.) */
int space_vector_values(const pk_space *sp, int64_t max_lanes, int64_t *out);
/* For presets: the largest value of knob k that is at most want, else its smallest. */
int64_t space_pick(const pk_space *sp, int k, int64_t want);
/* "<base><suffix>" in the schedule's context. */
const char *space_name(pk_schedule *s, const char *base, const char *suffix);
/* The compute that classifies the task: the first sum of a product (matmul, conv). */
const pk_te_tensor *space_product_stage(const pk_te_program *p);
/* The fused epilogue of product stage t (pk_te_fuse_epilogue; graph/passes/fuse.c): the
 * program's one compute that reads t, after t, t's shape, reading t only at its own point,
 * when every compute but t is elementwise (a fused prologue before t, a later stage such as
 * an SGD update's new weight after it, which a template schedules as its other stages);
 * or NULL. A template computes it at t's register tile, with t inlined (cache_write first,
 * so t is a copy of its accumulators): the raw product never reaches memory, and the graph
 * gives it no storage, so every config must do that. */
const pk_te_tensor *space_epilogue_stage(const pk_te_program *p, const pk_te_tensor *t);
/* The stage after epilogue e that writes the tile out instead, or NULL: the program's one
 * compute after e, of e's shape, reading e at its own point (an SGD update's new weight W'
 * reading the new momentum M', pk_te_fuse_epilogue). A template tiles it as it would tile
 * e, computes e at its tile (the same tile loops, each then run once) and the product's
 * accumulators at e's: both results are written from the registers of one tile. */
const pk_te_tensor *space_epilogue_tail(const pk_te_program *p, const pk_te_tensor *e);
/* The product of a sum of products, sum(a * b) or sum(select(c, a * b, 0.0)) (a guarded
 * window), or NULL when t is not one. */
const pk_expr *space_sum_product(const pk_te_tensor *t);
/* The other computes shaped like t: sums of products (possibly guarded) with t's rank and
 * number of reduce axes, after t (the phase stages of a strided conv2d's dX, which a
 * template shapes as it shapes t). Up to max tensors into out; returns how many. */
int space_sibling_stages(const pk_te_program *p, const pk_te_tensor *t,
                         const pk_te_tensor **out, int max);
/* Extent of dim d of the compute that stage "tN" evaluates. */
int64_t space_stage_extent(const pk_space *sp, const char *stage, int d);
/* The same for a stage of a schedule being built (a derived one too: "t2.rf"). */
int64_t space_stage_extent_of(const pk_schedule *s, const char *stage, int d);

/* The index of the dim of READ r that is exactly the bare axis ax, or -1. */
int space_bare_dim(const pk_expr *r, const pk_te_axis *ax);

/* The names a template of a sum of products schedules by, read off the default schedule
 * of the stage that computes t: its spatial roots, its reduce roots sorted by name (so
 * order 0 is k0, k1, ...), up to SPACE_MAX_ORDERS orders of those (the reduce_order knob),
 * and every other stage. */
#define SPACE_MAX_ORDERS 6
typedef struct space_names {
  const char *stage, *local; /* "tN", "tN.local" */
  int ndim;
  const char *root[PK_TE_MAX_DIMS];
  int nreduce;
  const char *k[PK_TE_MAX_DIMS];
  int norders;
  int orders[SPACE_MAX_ORDERS][PK_TE_MAX_DIMS]; /* permutations of k, lexicographic */
  int nother;
  const char *other[64];
} space_names;
void space_names_of(pk_space *sp, const pk_te_tensor *t, space_names *out);
/* Does e use axis ax anywhere? */
bool space_uses_axis(const pk_expr *e, const pk_te_axis *ax);

/* ---- reductions split across threads (weight gradients: few outputs, long sums) ----
 * The values of an rfactor_threads knob: 0 (off), then 2, 4, 8 up to t's longest reduce
 * axis, when the space may run loops in parallel and t has at most as many elements as
 * its reduction is long (all reduce extents multiplied); into out, returning how many. */
int space_thread_values(const pk_space *sp, const pk_te_tensor *t, int64_t *out);
/* What a preset takes for knob k (rfactor_threads): 0 when the loop the template runs in
 * parallel has at least as many iterations as the target has cores (cores from the target
 * description; 4 when it does not say), else the knob's value nearest the core count. */
int64_t space_thread_preset(const pk_space *sp, int k, int64_t parallel_extent);
/* A preset's order of its two outer tile loops by the L2 (opts.l2_bytes, else the
 * target's): pk_tile_order_by_cache. */
int64_t space_cache_order(const pk_space *sp, int64_t reread0, int64_t reread1);
/* A preset's "parallel" knob: 1 where the space offers it (allow_parallel: the driver's
 * default schedules) and the kernel has work enough (work >= min_work) that splitting its
 * outer loop across the pool beats the pool's start-up cost; else 0. */
int64_t space_parallel_preset(const pk_space *sp, int k, double work, double min_work);
/* Splits the longest reduce axis of n->stage by threads and rfactors the inner part, so
 * "<stage>.rf" computes `threads` partial results (its last dim, each from every
 * threads-th point of that axis) and <stage> sums them. out gets the names of the .rf
 * stage as the template's plan names stages, with the lane as root 0, then the stage's
 * roots, the split axis replaced by its outer part among the reduce roots (same order
 * indices), and no other stages. PK_ERR_SCHEDULE when the axis is shorter than threads. */
pk_status space_thread_rfactor(pk_schedule *s, const space_names *n, int64_t threads,
                               space_names *out);

/* ---- GPU targets (space_gpu.c, space.c) ---- */
/* Whether sched, a GPU space's schedule, fails to lower or to run on a GPU (pk_gpu_prepare;
 * message in ctx). False for C spaces. */
bool space_gpu_refuses(const pk_space *sp, pk_ctx *ctx, const pk_schedule *sched);

/* ---- shared with the tuners and space_extern.c ---- */
void space_extern_init(pk_space *sp);
/* The scratch arena for one build (recycled now and then: nothing from an earlier build
 * may be kept). */
pk_ctx *space_scratch(pk_space *sp);
/* The knob part of the features (PK_SPACE_MAX_KNOBS values, knobs JSON key order). */
void space_knob_features(const pk_space *sp, const pk_config *c, double *out);
/* Schedules and lowers a config in the scratch arena; on success *trace is its canonical
 * trace (valid until the next build), hash its hex SHA-256 and, when features is not NULL,
 * the PK_FEATURE_COUNT features are filled. A refusal's message stays in the scratch
 * context (pk_space_build copies it; the tuners only count it). */
pk_status space_build_trace(pk_space *sp, const pk_config *c, const char **trace,
                            char hash[2 * PKRT_SHA256_BYTES + 1], double *features);

/* How the generic templates shape an injective root stage (also an epilogue such as a
 * ReLU after a matmul): fuse its loops into one (fuse), split the innermost loop by
 * `vector` and vectorize the inner part, unroll the loop outside it by `unroll` (> 1), run
 * the outermost loop in parallel. strict: every step is attempted, so a knob that does not
 * fit is refused (the config is illegal); otherwise steps that cannot apply are skipped. */
pk_status space_schedule_injective(pk_schedule *s, const pk_stage *st, int64_t vector,
                                   int64_t unroll, bool parallel, bool fuse, bool strict);

/* A strided conv's dX interleave (a root injective stage of the phase tensor's rank, some
 * dim f = ceil(extent / the phase's) > 1 times longer): each such dim split by f, its inner
 * part unrolled
 * so x mod s and x / s fold away; the outermost loop parallel when asked. *done is false,
 * nothing scheduled, when st is not such a stage. */
pk_status space_schedule_interleave(pk_schedule *s, const pk_stage *st, const pk_te_tensor *phase,
                                    bool parallel, bool *done);

#endif
