/* pk_te.h — tensor expressions: expression nodes, tensors, programs; the text form's
 * parser and canonical printer; the checker; and the reference interpreter.
 *
 * Usage:
 *   pk_te_program *p;
 *   if (pk_te_parse(ctx, text, len, "mm.te", &p) != PK_OK) ...   // parses AND checks
 *   char *canon = pk_te_print(ctx, p);                             // canonical text
 *   pk_te_ref *ref = pk_te_ref_new(ctx, p);                        // interpreter buffers
 *   ... fill ref->tensors[i] for placeholders ...
 *   pk_te_interp_run(ctx, p, ref);                                 // computes every output
 *
 * A program is a list of tensors in definition order: placeholders (inputs) and computes
 * (outputs: every compute is an output of the kernel). Nodes are immutable once checked
 * and live in the context's arena. See docs/te.md for the text form and its semantics.
 */
#ifndef PK_TE_H
#define PK_TE_H

#include <stdbool.h>
#include <stdint.h>

#include "pk_ctx.h"

#define PK_TE_MAX_DIMS 8
#define PK_TE_CANON_VERSION 1 /* bump when canonical text or stage/axis ids change */

typedef struct pk_expr pk_expr;
typedef struct pk_te_axis pk_te_axis;
typedef struct pk_te_tensor pk_te_tensor;
typedef struct pk_te_program pk_te_program;

/* Operators of expressions; shared with the loop IR (schedule/) so both speak one set. */
typedef enum pk_eop {
  PK_EOP_NONE = 0,
  /* unary */
  PK_EOP_NEG, PK_EOP_NOT,
  /* binary: arithmetic (on integers / and % are floor division and floor modulo) */
  PK_EOP_ADD, PK_EOP_SUB, PK_EOP_MUL, PK_EOP_DIV, PK_EOP_MOD, PK_EOP_MIN, PK_EOP_MAX,
  /* binary: comparisons (result BOOL) and logic (BOOL operands, short-circuit) */
  PK_EOP_LT, PK_EOP_LE, PK_EOP_GT, PK_EOP_GE, PK_EOP_EQ, PK_EOP_NE, PK_EOP_AND, PK_EOP_OR,
  /* intrinsics (calls) */
  PK_EOP_EXP, PK_EOP_LOG, PK_EOP_SQRT, PK_EOP_RSQRT, PK_EOP_TANH, PK_EOP_ERF, PK_EOP_ABS,
  PK_EOP_SIGMOID, PK_EOP_POW,
  PK_EOP_HASH, /* hash(a, b, c): three integers -> i64 in [0, 2^53) (docs/te.md: dropout masks) */
  /* reducers */
  PK_EOP_SUM, PK_EOP_RMAX, PK_EOP_RMIN,
  PK_EOP_COUNT_
} pk_eop;

const char *pk_eop_name(pk_eop op); /* "+", "<=", "exp", "sum", "max" (RMAX), ... */

typedef enum pk_expr_kind {
  PK_EXPR_INT,    /* integer literal: ival */
  PK_EXPR_FLOAT,  /* float literal: fval */
  PK_EXPR_AXIS,   /* value of an axis variable (spatial or reduce), dtype I64 */
  PK_EXPR_READ,   /* tensor[args[0], ..., args[nargs-1]], nargs == tensor->ndim */
  PK_EXPR_UNARY,  /* op args[0] */
  PK_EXPR_BINARY, /* args[0] op args[1] */
  PK_EXPR_SELECT, /* args[0] ? args[1] : args[2], lazy */
  PK_EXPR_CALL,   /* intrinsic op over args (1 arg; POW has 2, HASH 3) */
  PK_EXPR_CAST,   /* cast(dtype, args[0]) */
  PK_EXPR_REDUCE  /* op over args[0] for every point of axes[0..naxes) */
} pk_expr_kind;

struct pk_expr {
  pk_expr_kind kind;
  pk_eop op;         /* UNARY, BINARY, CALL, REDUCE */
  pkrt_dtype dtype;  /* result type, set by the checker (INVALID before) */
  int line, col;     /* source position (0 when built in C) */
  int nargs;
  pk_expr **args;
  int64_t ival;        /* INT */
  double fval;         /* FLOAT: the value as written, rounded to double */
  pk_te_axis *axis;    /* AXIS */
  pk_te_tensor *tensor;/* READ */
  int naxes;           /* REDUCE */
  pk_te_axis **axes;   /* REDUCE: reduce axes, in the order written */
};

struct pk_te_axis {
  int id;            /* spatial: dimension index in its compute; reduce: index in program->reduce_axes */
  const char *name;  /* user's name; never reaches generated code */
  int64_t lo, hi;    /* iterates lo <= v < hi; spatial axes have lo = 0, hi = shape[d] */
  bool reduce;
  pk_te_tensor *owner; /* spatial: its compute; reduce: NULL */
};

typedef enum pk_te_tensor_kind { PK_TE_PLACEHOLDER, PK_TE_COMPUTE } pk_te_tensor_kind;

struct pk_te_tensor {
  int id;             /* position in program->tensors: the canonical stage id is "t<id>" */
  const char *name;   /* user's name; never reaches generated code */
  pk_te_tensor_kind kind;
  pkrt_dtype dtype;   /* compute: the body's type */
  int ndim;           /* 1..PK_TE_MAX_DIMS */
  int64_t shape[PK_TE_MAX_DIMS];
  pk_te_axis **axes;  /* compute: ndim spatial axes, canonical ids "i0".."i<ndim-1>" */
  pk_expr *body;      /* compute: reduction only at the top (sum(e, k...)), e reduction-free;
                         scatter_add: the value added, over the domain axes */
  int line, col;
  /* scatter_add (docs/te.md): a compute that starts at zeros and, for every point of its
   * domain (dom_ndim axes dom_axes, extents dom_shape), adds body to its element
   * dest[0..ndim) — dropped when that element is outside the tensor. dom_ndim is 0 for an
   * ordinary compute. Its `axes` then exist (named "@0".., never in an expression) only so
   * that code walking a compute's axes keeps working; no compute may read its result. */
  int dom_ndim;
  int64_t dom_shape[PK_TE_MAX_DIMS];
  pk_te_axis **dom_axes;
  pk_expr **dest;
};

struct pk_te_program {
  int ntensors;
  pk_te_tensor **tensors;  /* definition order; reads refer only to earlier tensors */
  int nreduce;
  pk_te_axis **reduce_axes; /* declaration order; canonical ids "k<id>" follow first use */
};

/* ---- building programs in C (the parser and te/ops use the same constructors) ----
 * Constructors only allocate; pk_te_check validates and fills dtypes. */
pk_te_program *pk_te_program_new(pk_ctx *ctx);
pk_te_tensor *pk_te_placeholder(pk_ctx *ctx, pk_te_program *p, const char *name, int ndim,
                                const int64_t *shape, pkrt_dtype dtype);
pk_te_axis *pk_te_reduce_axis(pk_ctx *ctx, pk_te_program *p, const char *name, int64_t lo,
                              int64_t hi);
/* A compute: make it, then build the body over t->axes[d] and set t->body. */
pk_te_tensor *pk_te_compute(pk_ctx *ctx, pk_te_program *p, const char *name, int ndim,
                            const int64_t *shape, const char *const *axis_names);
/* Turns compute t (made with pk_te_compute) into a scatter_add over a domain of ndom axes;
 * then build body over t->dom_axes and set t->dest[0..t->ndim). */
void pk_te_scatter_domain(pk_ctx *ctx, pk_te_tensor *t, int ndom, const int64_t *dom_shape,
                          const char *const *axis_names);
pk_expr *pk_expr_int(pk_ctx *ctx, int64_t v);
pk_expr *pk_expr_float(pk_ctx *ctx, double v);
pk_expr *pk_expr_axis(pk_ctx *ctx, pk_te_axis *a);
pk_expr *pk_expr_read(pk_ctx *ctx, pk_te_tensor *t, int nidx, pk_expr *const *idx);
pk_expr *pk_expr_unary(pk_ctx *ctx, pk_eop op, pk_expr *a);
pk_expr *pk_expr_binary(pk_ctx *ctx, pk_eop op, pk_expr *a, pk_expr *b);
pk_expr *pk_expr_select(pk_ctx *ctx, pk_expr *c, pk_expr *a, pk_expr *b);
pk_expr *pk_expr_call(pk_ctx *ctx, pk_eop op, int nargs, pk_expr *const *args);
pk_expr *pk_expr_cast(pk_ctx *ctx, pkrt_dtype to, pk_expr *a);
pk_expr *pk_expr_reduce(pk_ctx *ctx, pk_eop op, pk_expr *body, int naxes, pk_te_axis *const *axes);

/* ---- text form ---- */
/* Parses and checks. On failure: PK_ERR_SYNTAX or PK_ERR_CHECK, message "FILE:LINE:COL: ...". */
pk_status pk_te_parse(pk_ctx *ctx, const char *text, size_t len, const char *filename,
                      pk_te_program **out);
/* Validates a program built in C or parsed: names, arity, dtypes (fills expr->dtype),
 * shapes (int64 overflow), reduction placement, reduce axes used, and bounds: every read
 * provably inside its tensor (interval analysis refined by select/&&/|| guards). */
pk_status pk_te_check(pk_ctx *ctx, pk_te_program *p);
/* Canonical text: names replaced by canonical ids, one statement per line, fixed spacing,
 * minimal parentheses, shortest round-trip literals. print(parse(print(x))) == print(x). */
char *pk_te_print(pk_ctx *ctx, const pk_te_program *p);
/* One expression in canonical form (for messages and comments). */
char *pk_te_print_expr(pk_ctx *ctx, const pk_expr *e);

/* ---- fusion (te/fuse.c; the graph's fusion pass) ----
 * Inlines producer into consumer: both compute one elementwise tensor (no reduction, no
 * scatter); consumer tensor `slot` is a placeholder of the producer's result's shape and
 * dtype, read once per element. The result reads the producer's placeholders (in order),
 * then the consumer's other placeholders in order, except those with share[i] >= 0 (NULL:
 * none), which read the producer's placeholder share[i] instead (the same tensor in the
 * caller's graph); it computes the consumer's tensor. Checked (pk_te_check) before it is
 * returned. PK_ERR_UNSUPPORTED when the programs are not of that form. */
pk_status pk_te_fuse(pk_ctx *ctx, const pk_te_program *producer, const pk_te_program *consumer,
                     int slot, const int *share, pk_te_program **out);
/* A tail: consumer (one elementwise compute) inlined into the last compute of a producer of
 * several (a norm: its statistics, then its elementwise result), which must be elementwise
 * (no reduction, no scatter) and which the consumer reads at `slot` once per element. The
 * result has the placeholders pk_te_fuse gives, then the producer's other computes in
 * order, then the consumer's compute with the producer's last inlined where it read `slot`:
 * the norm's result is never stored. Checked; PK_ERR_UNSUPPORTED when not of that form. */
pk_status pk_te_fuse_tail(pk_ctx *ctx, const pk_te_program *producer,
                          const pk_te_program *consumer, int slot, const int *share,
                          pk_te_program **out);
/* An elementwise epilogue appended to a producer of one compute (a matmul or conv: a sum of
 * products; no scatter): the result has the placeholders pk_te_fuse gives, then the
 * producer's compute, then the consumer's computes in order, which read that compute where
 * they read `slot`. The consumer's computes are elementwise and of the product's shape; one
 * of them reads `slot`, once, at its own point (index d = its axis d), so a schedule can
 * compute the epilogue at the product's register tile and never store the product
 * (autotune/space_matmul.c). A later compute may read an earlier one (an SGD update's new
 * weight reads the new momentum). Checked; PK_ERR_UNSUPPORTED when not of that form. */
pk_status pk_te_fuse_epilogue(pk_ctx *ctx, const pk_te_program *producer,
                              const pk_te_program *consumer, int slot, const int *share,
                              pk_te_program **out);
/* An elementwise prologue prepended to one operand of a sum of products (a matmul): the
 * producer computes one elementwise tensor, which the consumer (a product, possibly with
 * its epilogue's stages; no scatter) reads once, as one factor of its product (`sum(S[..] *
 * B[..])`, S the placeholder `slot`). The result has the placeholders pk_te_fuse gives, then
 * the producer's compute, then the consumer's computes in order, the product reading that
 * compute where it read `slot`. A template then packs that operand, evaluating the prologue
 * while packing (autotune/space_matmul.c), so the prologue's result is never stored and
 * runs once per element, not once per multiply-add. Checked; PK_ERR_UNSUPPORTED when not
 * of that form. */
pk_status pk_te_fuse_prologue(pk_ctx *ctx, const pk_te_program *producer,
                              const pk_te_program *consumer, int slot, const int *share,
                              pk_te_program **out);

/* ---- relayout (te/relayout.c; the graph's layout pass) ----
 * A copy of p in which tensor i's dims are permuted when perm[i] (p->ntensors entries) is
 * not NULL: new dim d is old dim perm[i][d] (NCHW -> NHWC: {0, 2, 3, 1}, as transpose's
 * perm). Its shape, every read of it (index d of a read is the old read's index
 * perm[i][d]) and, for a compute, its axes (new axis d iterates old axis perm[i][d], so
 * the stage iterates and stores in the new order; a scatter_add keeps its domain and
 * permutes its destination) follow; the rest is copied. Evaluated on inputs permuted the
 * same way it computes the original results, permuted. Checked; PK_ERR_USAGE when a
 * perm[i] is not a permutation of tensor i's dims. */
pk_status pk_te_relayout(pk_ctx *ctx, const pk_te_program *p, const int *const *perm,
                         pk_te_program **out);

/* ---- queries ---- */
int64_t pk_te_tensor_numel(const pk_te_tensor *t);
bool pk_dtype_is_float(pkrt_dtype t);
bool pk_dtype_is_int(pkrt_dtype t);
/* FLOPs of evaluating every compute once: floating-point arithmetic, comparisons and
 * intrinsics × points (index arithmetic and guards on axes are not FLOPs; a scatter_add
 * counts its body and the accumulating add per domain point). A program with no
 * floating-point work counts its integer operations instead. */
double pk_te_flops(const pk_te_program *p);
/* The hash intrinsic: hash(a, b, c) of docs/te.md, the one definition the interpreter uses
 * (the C prelude spells out the same steps; tests compare the two). In [0, 2^53). */
int64_t pk_te_hash3(int64_t a, int64_t b, int64_t c);

/* ---- reference interpreter ----
 * Evaluates in f64 (floats) and exact int64 (integers, wrapped to i32 for I32), and for each
 * float element also S, the same expression over absolute values (error-propagated), so
 * that a kernel's f32 result may be checked as |kernel - val| <= 1e-5 * S + 1e-30. */
typedef struct pk_te_ref_tensor {
  int64_t numel;
  double *val;  /* float tensors: numel values, row-major */
  double *mag;  /* float tensors: numel magnitudes S (placeholders: |val|) */
  int64_t *ival;/* integer tensors: numel values */
} pk_te_ref_tensor;

typedef struct pk_te_ref {
  int ntensors;
  pk_te_ref_tensor *tensors; /* indexed like program->tensors; storage in the ctx arena */
} pk_te_ref;

/* NULL (the failure in ctx) when the tensors need more than the interpreter's storage
 * bound; pk_te_ref_fill_random and pk_te_interp_run take that NULL and report the failure,
 * so the usual new → fill → run sequence needs one status check at its end. */
pk_te_ref *pk_te_ref_new(pk_ctx *ctx, const pk_te_program *p);
pk_status pk_te_interp_run(pk_ctx *ctx, const pk_te_program *p, pk_te_ref *ref);

/* ---- canonical ids (appended for schedules: stage/iter names use the same numbering) ----
 * ids[a->id] = n where reduce axis a prints as "k<n>" in pk_te_print(p): numbered by first
 * use in canonical print order, unused axes after, in declaration order. ids holds
 * p->nreduce entries. (te/canon_ids.c; agrees with printer.c, which tests check.) */
void pk_te_reduce_axis_canon_ids(const pk_te_program *p, int *ids);

#endif
