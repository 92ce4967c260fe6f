/* pk_loopir.h — the loop IR: what a scheduled tensor expression lowers to and what every
 * code generator (C, CUDA) consumes. Explicit loops, buffers with memory scopes, flat
 * indices, conditionals, barriers and masked tails; no tensor-level concepts remain.
 *
 * Usage:
 *   pk_lfunc *f;
 *   if (pk_sched_lower(ctx, prog, NULL, "k0", &f) != PK_OK) ...   // NULL: default schedule
 *   char *text = pk_lfunc_print(ctx, f);                           // for --dump-after lower
 *
 * Identifiers in the IR (buffer and variable names) are made by Pock ("b0", "v3"), never
 * taken from user input, so they can go into generated source as they are.
 */
#ifndef PK_LOOPIR_H
#define PK_LOOPIR_H

#include "pk_te.h"

typedef struct pk_lvar pk_lvar;
typedef struct pk_lbuf pk_lbuf;
typedef struct pk_lexpr pk_lexpr;
typedef struct pk_stmt pk_stmt;
typedef struct pk_lfunc pk_lfunc;

/* A scalar variable: a loop counter or a let-bound value. */
struct pk_lvar {
  int id;
  const char *name;  /* "v<id>" */
  pkrt_dtype dtype;
};

typedef enum pk_mem_scope {
  PK_SCOPE_GLOBAL,    /* a kernel parameter (pkrt_buffer) */
  PK_SCOPE_WORKSPACE, /* a slice of the caller's workspace, offset fixed at compile time */
  PK_SCOPE_LOCAL,     /* registers / stack of one thread */
  PK_SCOPE_SHARED     /* GPU block-shared memory */
} pk_mem_scope;

struct pk_lbuf {
  int id;
  const char *name;     /* "b<id>" */
  pkrt_dtype dtype;
  pk_mem_scope scope;
  int ndim;
  int64_t shape[PK_TE_MAX_DIMS];
  int64_t strides[PK_TE_MAX_DIMS]; /* in elements, compile-time; GLOBAL is checked on entry */
  int64_t numel;                   /* elements a LOCAL/SHARED/WORKSPACE allocation holds */
  int64_t ws_offset;               /* WORKSPACE: byte offset in the workspace */
  int param;                       /* GLOBAL: index in the kernel's buffer list, else -1 */
  const pk_te_tensor *tensor;      /* the TE tensor it holds, when there is one */
};

typedef enum pk_lexpr_kind {
  PK_LX_INT, PK_LX_FLOAT, PK_LX_VAR,
  PK_LX_LOAD,   /* buf[args[0]] (flat element index) */
  PK_LX_UNARY, PK_LX_BINARY, PK_LX_SELECT, PK_LX_CALL, PK_LX_CAST
} pk_lexpr_kind;

struct pk_lexpr {
  pk_lexpr_kind kind;
  pk_eop op;
  pkrt_dtype dtype;
  bool index_math;  /* integer op proven not to overflow (index arithmetic): no wrap needed */
  int nargs;
  pk_lexpr **args;
  int64_t ival;
  double fval;
  pk_lvar *var;
  pk_lbuf *buf;
};

typedef enum pk_loop_kind {
  PK_LOOP_SERIAL,
  PK_LOOP_PARALLEL,     /* outlined and run by the runtime's parallel_for */
  PK_LOOP_VECTORIZED,   /* lanes = extent (must be constant) */
  PK_LOOP_UNROLLED,
  PK_LOOP_GPU_BLOCK_X, PK_LOOP_GPU_BLOCK_Y, PK_LOOP_GPU_BLOCK_Z,
  PK_LOOP_GPU_THREAD_X, PK_LOOP_GPU_THREAD_Y, PK_LOOP_GPU_THREAD_Z
} pk_loop_kind;

const char *pk_loop_kind_name(pk_loop_kind k);
const char *pk_mem_scope_name(pk_mem_scope s);

typedef enum pk_stmt_kind {
  PK_ST_SEQ,     /* stmts[0..n) in order */
  PK_ST_FOR,     /* for var in [min, min + extent): body */
  PK_ST_IF,      /* if cond: then_ else else_ (may be NULL) */
  PK_ST_STORE,   /* buf[index] = value, only where mask (if non-NULL) holds: masked tails */
  PK_ST_ALLOC,   /* buf (LOCAL, SHARED or WORKSPACE) lives during body */
  PK_ST_LET,     /* var = value during body */
  PK_ST_BARRIER  /* block-wide barrier (GPU shared memory) */
} pk_stmt_kind;

struct pk_stmt {
  pk_stmt_kind kind;
  int n;               /* SEQ */
  pk_stmt **stmts;     /* SEQ */
  pk_lvar *var;        /* FOR, LET */
  pk_lexpr *min, *extent; /* FOR */
  pk_loop_kind loop;   /* FOR */
  int64_t annotation;  /* FOR: unroll factor or vector width; 0 = none */
  bool partition;      /* FOR, during lowering only: cut by the partition pass (partition.c) */
  pk_lexpr *cond;      /* IF */
  pk_stmt *then_, *else_; /* IF */
  pk_lbuf *buf;        /* STORE, ALLOC */
  pk_lexpr *index, *value, *mask; /* STORE (value also LET) */
  pk_stmt *body;       /* FOR, ALLOC, LET */
};

/* One kernel: parameters (GLOBAL buffers, inputs then outputs) and a body. */
struct pk_lfunc {
  const char *name;       /* kernel symbol, made by Pock: "k<N>" */
  int nparams;
  pk_lbuf **params;
  int nscalars;
  pk_stmt *body;
  int64_t workspace_bytes;
  const char *workload;   /* hex SHA-256 of the canonical TE text */
  const char *te_text;    /* canonical TE text (safe for comments: no user names) */
  int nvars, nbufs;       /* counters for fresh names */
  /* An in-place variant: callers may pass an output that shares storage with an input
   * (an optimizer update writing W' over W). Codegen then drops `restrict` on its buffers,
   * which is only correct because such kernels read each element before writing it. */
  bool params_may_alias;
};

/* ---- construction ---- */
pk_lfunc *pk_lfunc_new(pk_ctx *ctx, const char *name);
pk_lvar *pk_lvar_new(pk_ctx *ctx, pk_lfunc *f, pkrt_dtype dtype);
pk_lbuf *pk_lbuf_new(pk_ctx *ctx, pk_lfunc *f, pkrt_dtype dtype, pk_mem_scope scope, int ndim,
                     const int64_t *shape);
pk_lexpr *pk_lx_int(pk_ctx *ctx, int64_t v);
pk_lexpr *pk_lx_float(pk_ctx *ctx, double v, pkrt_dtype t);
pk_lexpr *pk_lx_var(pk_ctx *ctx, pk_lvar *v);
pk_lexpr *pk_lx_load(pk_ctx *ctx, pk_lbuf *b, pk_lexpr *index);
pk_lexpr *pk_lx_unary(pk_ctx *ctx, pk_eop op, pk_lexpr *a, pkrt_dtype t);
pk_lexpr *pk_lx_binary(pk_ctx *ctx, pk_eop op, pk_lexpr *a, pk_lexpr *b, pkrt_dtype t);
pk_lexpr *pk_lx_select(pk_ctx *ctx, pk_lexpr *c, pk_lexpr *a, pk_lexpr *b);
pk_lexpr *pk_lx_call(pk_ctx *ctx, pk_eop op, int nargs, pk_lexpr **args, pkrt_dtype t);
pk_lexpr *pk_lx_cast(pk_ctx *ctx, pkrt_dtype to, pk_lexpr *a);
/* Index arithmetic with constant folding (a + 0, a * 1, 3 * 4): keeps emitted indices short. */
pk_lexpr *pk_lx_index_add(pk_ctx *ctx, pk_lexpr *a, pk_lexpr *b);
pk_lexpr *pk_lx_index_mul(pk_ctx *ctx, pk_lexpr *a, int64_t c);

pk_stmt *pk_st_seq(pk_ctx *ctx, int n, pk_stmt **stmts);
pk_stmt *pk_st_for(pk_ctx *ctx, pk_lvar *v, pk_lexpr *min, pk_lexpr *extent, pk_loop_kind k,
                   pk_stmt *body);
pk_stmt *pk_st_if(pk_ctx *ctx, pk_lexpr *cond, pk_stmt *then_, pk_stmt *else_);
pk_stmt *pk_st_store(pk_ctx *ctx, pk_lbuf *b, pk_lexpr *index, pk_lexpr *value);
pk_stmt *pk_st_alloc(pk_ctx *ctx, pk_lbuf *b, pk_stmt *body);
pk_stmt *pk_st_let(pk_ctx *ctx, pk_lvar *v, pk_lexpr *value, pk_stmt *body);
pk_stmt *pk_st_barrier(pk_ctx *ctx);

/* Readable text of a function, one statement per line (for dumps and golden tests). */
char *pk_lfunc_print(pk_ctx *ctx, const pk_lfunc *f);

/* ---- index simplification (simplify.c) ----
 * Lowering simplifies every index it builds, so split- and layout-derived indices stay
 * cheap in inner loops: (jo*16 + ji) / 16 is jo when ji is in [0, 16). Everything here is
 * sound: an expression the ranges cannot decide is left as it is.
 *
 *   pk_lranges *r = pk_lranges_new(ctx);
 *   pk_lranges_set(r, jo, 0, 7); pk_lranges_set(r, ji, 0, 15);   // inclusive
 *   pk_lexpr *s = pk_lx_simplify(ctx, r, e);
 */
typedef struct pk_lranges pk_lranges; /* inclusive value ranges of variables, by var id */
pk_lranges *pk_lranges_new(pk_ctx *ctx);
void pk_lranges_set(pk_lranges *r, const pk_lvar *v, int64_t lo, int64_t hi);
bool pk_lranges_get(const pk_lranges *r, const pk_lvar *v, int64_t *lo, int64_t *hi);

/* Inclusive bounds of an integer (or bool) expression; false when unknown: loads, floats,
 * variables without a range, possible overflow. */
bool pk_lx_bounds(const pk_lranges *r, const pk_lexpr *e, int64_t *lo, int64_t *hi);
/* Same tree: kinds, operators, dtypes, constants, variables and buffers. */
bool pk_lx_equal(const pk_lexpr *a, const pk_lexpr *b);
/* Constant folding; i64 index arithmetic (index_math) in canonical affine form Σ c·x + c0
 * (variables in creation order, then other atoms); floor div/mod by a positive constant
 * resolved when the remainder provably stays in one period; min/max, comparisons, select,
 * && and || decided when the ranges prove them. Returns e itself when nothing changed. */
pk_lexpr *pk_lx_simplify(pk_ctx *ctx, const pk_lranges *r, pk_lexpr *e);

/* The affine view of an i64 index expression: Σ coef[i]·atom[i] + c0, where an atom is a
 * variable or an opaque subexpression (a load, min/max, an undecided division, ...);
 * atoms are distinct (pk_lx_equal) with non-zero coefficients. */
#define PK_AFFINE_MAX 16
typedef struct pk_affine {
  int n;
  pk_lexpr *atom[PK_AFFINE_MAX];
  int64_t coef[PK_AFFINE_MAX];
  int64_t c0;
} pk_affine;
/* False when the form does not fit (more than PK_AFFINE_MAX atoms, coefficient overflow). */
bool pk_lx_affine(pk_ctx *ctx, const pk_lranges *r, pk_lexpr *e, pk_affine *out);
/* a += scale * b; false on overflow or too many atoms. */
bool pk_affine_add(pk_affine *a, const pk_affine *b, int64_t scale);
pk_lexpr *pk_affine_expr(pk_ctx *ctx, const pk_affine *a); /* canonical expression */

/* An index in one loop counter v running over [0, lanes): true when e(v) = e(0) + stride·v
 * for every such v, exactly (floor division and modulo included: (4·x + v) / 8 keeps the
 * form for lanes <= 4), with *base_divisor a known divisor of e(0) (1 when none is known,
 * 0 when e(0) is 0). False when that is not proven: v inside a load, a min/max or a
 * product of two counters, a division whose period the lanes could cross. What a vector
 * access needs to know: stride 1 is contiguous, and base_divisor % lanes == 0 aligned. */
bool pk_lx_lane_form(const pk_lexpr *e, const pk_lvar *v, int64_t lanes, int64_t *stride,
                     int64_t *base_divisor);

/* ---- lowering (schedule/lower.c and the files lower_impl.h lists) ----
 * Lowers prog with sched (made by pk_sched_new(ctx, prog); NULL: the default, which is
 * exactly a schedule with no steps) into one kernel whose parameters are prog's tensors in
 * definition order: placeholders are inputs, computes outputs (an inlined compute's
 * parameter is left unwritten: pk_sched_is_materialized). What code generators get:
 *   - every FOR runs from 0 over a constant extent, except the copies of a partitioned
 *     loop (pk_sched_partition: serial; min and extent are expressions of enclosing
 *     counters and LETs, and may be empty); kinds come from the schedule
 *     (VECTORIZED: annotation = lanes = extent, 2..64; UNROLLED: annotation = depth); a
 *     PARALLEL loop never nests in another;
 *   - a split that does not divide leaves an IF (counter < extent) in the innermost loop
 *     whose variable it reads; in a vectorized loop such a guard is instead the STORE's
 *     mask, which covers evaluating the value too (no loads on masked-off lanes);
 *   - a stage computed at a loop sits at the start of the loop's body: LETs binding the
 *     region's clamped mins, the ALLOC of its LOCAL or WORKSPACE buffer (shape = the
 *     region's extents, indices relative to the region) around its nest and the rest of
 *     the body; a root LOCAL/WORKSPACE stage is an ALLOC around the rest of the kernel
 *     (root LOCAL stages over 64 KiB are put in the workspace);
 *   - WORKSPACE buffers sit at fixed 64-byte aligned ws_offset, never inside a parallel
 *     loop; workspace_bytes is their total, 64-byte aligned;
 *   - a reduction whose reduce loops are innermost, with nothing attached among them,
 *     accumulates in a 1-element LOCAL buffer; otherwise in its own buffer, initialised
 *     by a nest just before its outermost reduce loop.
 * PK_ERR_SCHEDULE for what only lowering sees: a workspace stage inside a parallel loop,
 * an attachment to a loop that is not there or to a stage that does not follow. */
typedef struct pk_schedule pk_schedule;
pk_status pk_sched_lower(pk_ctx *ctx, const pk_te_program *prog, const pk_schedule *sched,
                         const char *name, pk_lfunc **out);

/* Lowering with caller-given strides for chosen kernel parameters: a tensor that is a view
 * of a larger buffer (a partial-channel weight's trained slice, written in place by its
 * update kernel). strides[id] (NULL: dense row-major) gives prog->tensors[id]'s strides in
 * elements; the kernel checks them on entry like dense ones. Strides must lay the tensor's
 * elements out without overlap (each >= 1 and, in stride order, past the span of the
 * smaller ones): PK_ERR_CHECK otherwise. o NULL: pk_sched_lower. */
typedef struct pk_lower_options {
  int nstrides;                   /* entries in strides: prog->ntensors, or 0 */
  const int64_t *const *strides;  /* per tensor id: NULL or ndim strides */
} pk_lower_options;
pk_status pk_sched_lower_opts(pk_ctx *ctx, const pk_te_program *prog, const pk_schedule *sched,
                              const char *name, const pk_lower_options *o, pk_lfunc **out);

#endif
