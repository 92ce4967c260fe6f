/* emit_c_impl.h — the C emitter's internal state, shared by its files: emit_c.c (module,
 * kernels, scalar statements, scopes), emit_c_expr.c (scalar expressions), emit_c_index.c
 * (affine indices and hoisting), emit_c_parallel.c (outlined parallel loops),
 * emit_c_vplan.c (can a loop be vectorized, and how wide), emit_c_vector.c and
 * emit_c_vstmt.c (vector expressions and statements; emit_c_vector.h between them). */
#ifndef PK_EMIT_C_IMPL_H
#define PK_EMIT_C_IMPL_H

#include "pk_codegen.h"

#define CG_MAX_DEPTH 64      /* nested scopes (loops, lets, unrolled iterations) per function */
#define CG_MAX_LANES 64      /* the widest vectorized loop emitted as one chunk */
#define CG_UNROLL_BUDGET 1024 /* copies of a body that explicit unrolling may make */

/* How a buffer is declared in the function being emitted. */
typedef enum cg_buf_kind {
  CG_BUF_PLAIN,   /* T b[n] or T *b */
  CG_BUF_VECTORS, /* LOCAL tile only touched by vector loops: pk_f32x16 b[n / lanes] */
  CG_BUF_PRIVATE  /* LOCAL inside a vectorized loop, one per lane: pk_f32x16 b[n][parts] */
} cg_buf_kind;

/* A hoisted index temporary: `const int64_t name = ...;` at the top of scope `level`. */
typedef struct cg_temp {
  const char *key, *name;
  int level;
} cg_temp;

/* One open scope: the text of its hoisted temporaries, then of its statements. */
typedef struct cg_scope {
  pk_strbuf temps, body;
  int indent;
} cg_scope;

/* One C function being emitted: a kernel or an outlined parallel body. */
typedef struct cg_frame {
  int depth;                    /* the innermost open scope; 0 = none */
  cg_scope scopes[CG_MAX_DEPTH + 1];
  int *var_level;               /* per var id: the scope that defines it, 0 = undefined */
  bool *var_known;              /* per var id: an unrolled iteration fixed its value */
  int64_t *var_value;
  cg_temp *temps;
  int ntemps, cap_temps;
  int overflow;                 /* opens refused past CG_MAX_DEPTH (an error is set) */
  int unroll_copies;            /* product of the explicitly unrolled extents around */
  bool outlined;                /* inside a parallel body: nested parallel loops run serially */
} cg_frame;

/* Geometry of one vectorized chunk: `lanes` lanes in `parts` vectors of `part_lanes`. */
typedef struct cg_vgeom {
  int lanes, part_lanes, parts;
  int elem_bytes; /* widest element of a vector value in the loop (4 or 8) */
} cg_vgeom;

/* The vectorized loop being emitted (or planned). */
typedef struct cg_vloop {
  const pk_stmt *loop;
  cg_vgeom g;
  bool *var_vec;        /* per var id: a let inside the loop whose value differs by lane */
  bool *var_inner;      /* per var id: defined inside the loop (inner loops and lets) */
  bool *buf_private;    /* per buffer id: allocated inside the loop, so one per lane */
} cg_vloop;

/* Per-lane mode: rendering a scalar expression for lane `pk_l` of part `part` (gathers,
 * scatters): the counter is lane 0's value + part * part_lanes + pk_l. */
typedef struct cg_lane {
  int part;
} cg_lane;

typedef struct cg {
  pk_ctx *ctx;
  pk_status status;
  int vector_bytes;
  const pk_lfunc *f;
  cg_frame *fr;
  int indent;
  pk_strbuf *out;           /* where statements go now */
  pk_strbuf helpers;        /* vector typedefs and helpers instantiated on demand */
  const char **helper_keys;
  int nhelpers, cap_helpers;
  pk_strbuf functions;      /* outlined bodies and kernels, in definition order */
  int npar;                 /* outlined functions of the current kernel */
  int next_name;            /* fresh names in the current kernel: t<N>, x<N>, s<N>, pk_c<N> */
  cg_buf_kind *buf_kind;    /* per buffer id */
  int *buf_lanes;           /* CG_BUF_VECTORS, CG_BUF_PRIVATE: lanes of one part */
  int *buf_parts;           /* CG_BUF_PRIVATE: parts per element */
  cg_vloop *vl;             /* inside a vectorized loop's vector code */
  const cg_lane *lane;      /* rendering one lane (gather and scatter indices) */
  const char *load_guard;   /* non-NULL: scalar loads read only where this holds */
} cg;

/* ---- emit_c.c: text, scopes, statements ---- */
void cg_unsupported(cg *E, const char *what);
void cg_line(cg *E, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *cg_fresh(cg *E, const char *prefix);
const char *cg_ctype(pkrt_dtype t);
const char *cg_tsuffix(pkrt_dtype t);
void cg_scope_open(cg *E);
void cg_scope_close(cg *E);
void cg_define_var(cg *E, const pk_lvar *v);
void cg_stmt(cg *E, const pk_stmt *s);
void cg_serial_loop(cg *E, const pk_stmt *s, const char *why);
void cg_unrolled_loop(cg *E, const pk_stmt *s, void (*body)(cg *, const pk_stmt *, void *),
                      void *arg);
void cg_for_header(cg *E, const pk_stmt *s);
bool cg_const_extent(const pk_stmt *s, int64_t *extent);
bool cg_full_unroll(cg *E, const pk_stmt *s); /* each iteration its own copy */
const char *cg_buf_elem_type(cg *E, const pk_lbuf *b); /* "float", "pk_f32x16", ... */
void cg_frame_init(cg *E, cg_frame *fr);
void cg_frame_free(cg_frame *fr);
/* Ends a function being written in fr: closes its brace, keeps its text among the
 * module's functions (unless emitting failed) and frees the frame. */
void cg_frame_finish_function(cg *E, cg_frame *fr);

/* ---- emit_c_expr.c: scalar expressions as text ---- */
const char *cg_x(cg *E, const pk_lexpr *e);
const char *cg_var(cg *E, const pk_lvar *v);
const char *cg_elem(cg *E, const pk_lbuf *b, const char *index);
const char *cg_int_text(cg *E, int64_t v, pkrt_dtype t);
/* An operator node over already rendered operands (scalar ones, or lanes of vectors). */
const char *cg_op_text(cg *E, const pk_lexpr *e, const char *const *args);
bool cg_lexpr_equal(const pk_lexpr *a, const pk_lexpr *b);
bool cg_has_load(const pk_lexpr *e);

/* ---- emit_c_index.c: affine index forms and loop-invariant hoisting ---- */
#define CG_AFF_MAX 16
typedef struct cg_term {
  int64_t coef;
  const pk_lvar *var;   /* a variable, or */
  const pk_lexpr *atom; /* a non-affine subexpression */
} cg_term;
typedef struct cg_affine {
  int64_t c0;
  int n;
  cg_term t[CG_AFF_MAX];
} cg_affine;
/* Decomposes an int64 index into c0 + sum(coef * term), folding unrolled constants.
 * False when it is not int64 index arithmetic or overflows the form. */
bool cg_affine_of(cg *E, const pk_lexpr *e, cg_affine *a);
int64_t cg_affine_coef_of(const cg_affine *a, const pk_lvar *v);
bool cg_affine_equal(const cg_affine *a, const cg_affine *b);
/* Text of an affine form; the parts invariant in inner scopes become hoisted temporaries. */
const char *cg_affine_text(cg *E, const cg_affine *a);
/* Text of an index expression: cg_affine_text where it is affine, cg_x otherwise. */
const char *cg_index(cg *E, const pk_lexpr *e);
void cg_temps_drop_level(cg *E, int level);

/* ---- emit_c_parallel.c ---- */
void cg_parallel_loop(cg *E, const pk_stmt *s);

/* ---- emit_c_vplan.c ---- */
bool cg_vec_of(cg *E, const pk_lexpr *e); /* differs by lane in E->vl */
/* e = c * counter + rest, rest the same in every lane and c != 0: the form and c. */
bool cg_lane_affine(cg *E, const pk_lexpr *e, cg_affine *a, int64_t *c);
/* Plans s (a VECTORIZED loop) as chunks of `lanes`: false with *why when it cannot be. */
bool cg_vplan(cg *E, const pk_stmt *s, int lanes, cg_vloop *out, const char **why);
int cg_vlanes(const pk_stmt *s); /* lanes of one chunk (0: not a constant extent) */
cg_vgeom cg_vgeom_for(cg *E, int lanes, int elem_bytes);
/* `a op b`, one side c * counter + (same in every lane), the other the same in every lane:
 * a guard on the lane, compared as one int32 vector (emit_c_vector.c). */
bool cg_lane_compare(cg *E, const pk_lexpr *e, int *lane_side, int64_t *c);
/* A LOCAL buffer whose accesses all fit whole vectors of one width: that width, else 0. */
int cg_vector_tile_lanes(cg *E, const pk_lbuf *b, const pk_stmt *scope);

/* ---- emit_c_vstmt.c, emit_c_vector.c ---- */
void cg_vector_loop(cg *E, const pk_stmt *s);
const char *cg_vec_type(cg *E, pkrt_dtype t, int part_lanes); /* instantiates helpers */
const char *cg_part_name(cg *E, const char *base, int part);  /* x7 or x7_1 */

#endif
