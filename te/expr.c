/* expr.c — constructors for programs, tensors, axes and expression nodes, plus the small
 * queries on them (names of operators, element counts, FLOPs). Constructors only allocate;
 * pk_te_check validates and types what they built. */
#include <string.h>

#include "pk_te.h"

/* ---- arena-backed growable pointer arrays ----
 * The program structs keep only a count, so capacity is implied: the array is reallocated
 * whenever the count reaches a power of two (>= 4), which doubles it. */
static void **grow_for_append(pk_ctx *ctx, void **items, int n) {
  bool full = n == 0 || (n >= 4 && (n & (n - 1)) == 0);
  if (!full) return items;
  size_t cap = n == 0 ? 4 : (size_t)n * 2;
  void **bigger = pk_alloc(ctx, cap * sizeof *bigger);
  if (n) memcpy(bigger, items, (size_t)n * sizeof *bigger);
  return bigger;
}

static void append_tensor(pk_ctx *ctx, pk_te_program *p, pk_te_tensor *t) {
  p->tensors = (pk_te_tensor **)grow_for_append(ctx, (void **)p->tensors, p->ntensors);
  t->id = p->ntensors;
  p->tensors[p->ntensors++] = t;
}

pk_te_program *pk_te_program_new(pk_ctx *ctx) { return pk_alloc(ctx, sizeof(pk_te_program)); }

/* Shared by placeholders and computes: the dims are copied, never validated here. */
static pk_te_tensor *tensor_new(pk_ctx *ctx, pk_te_program *p, const char *name,
                                pk_te_tensor_kind kind, int ndim, const int64_t *shape) {
  PK_ASSERT(ndim >= 0 && ndim <= PK_TE_MAX_DIMS);
  pk_te_tensor *t = pk_alloc(ctx, sizeof *t);
  t->kind = kind;
  t->ndim = ndim;
  if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
  append_tensor(ctx, p, t);
  /* C-built programs may leave names out; messages still need something to say. */
  t->name = name ? pk_strdup(ctx, name) : pk_sprintf(ctx, "t%d", t->id);
  return t;
}

pk_te_tensor *pk_te_placeholder(pk_ctx *ctx, pk_te_program *p, const char *name, int ndim,
                                const int64_t *shape, pkrt_dtype dtype) {
  pk_te_tensor *t = tensor_new(ctx, p, name, PK_TE_PLACEHOLDER, ndim, shape);
  t->dtype = dtype;
  return t;
}

pk_te_axis *pk_te_reduce_axis(pk_ctx *ctx, pk_te_program *p, const char *name, int64_t lo,
                              int64_t hi) {
  pk_te_axis *a = pk_alloc(ctx, sizeof *a);
  a->lo = lo;
  a->hi = hi;
  a->reduce = true;
  p->reduce_axes = (pk_te_axis **)grow_for_append(ctx, (void **)p->reduce_axes, p->nreduce);
  a->id = p->nreduce;
  p->reduce_axes[p->nreduce++] = a;
  a->name = name ? pk_strdup(ctx, name) : pk_sprintf(ctx, "k%d", a->id);
  return a;
}

pk_te_tensor *pk_te_compute(pk_ctx *ctx, pk_te_program *p, const char *name, int ndim,
                            const int64_t *shape, const char *const *axis_names) {
  pk_te_tensor *t = tensor_new(ctx, p, name, PK_TE_COMPUTE, ndim, shape);
  t->axes = pk_alloc(ctx, (size_t)(ndim ? ndim : 1) * sizeof *t->axes);
  for (int d = 0; d < ndim; d++) {
    pk_te_axis *a = pk_alloc(ctx, sizeof *a);
    a->id = d;
    a->lo = 0;
    a->hi = shape[d];
    a->owner = t;
    a->name = axis_names && axis_names[d] ? pk_strdup(ctx, axis_names[d])
                                          : pk_sprintf(ctx, "i%d", d);
    t->axes[d] = a;
  }
  return t;
}

void pk_te_scatter_domain(pk_ctx *ctx, pk_te_tensor *t, int ndom, const int64_t *dom_shape,
                          const char *const *axis_names) {
  t->dom_ndim = ndom;
  t->dom_axes = pk_alloc(ctx, (size_t)(ndom ? ndom : 1) * sizeof *t->dom_axes);
  t->dest = pk_alloc(ctx, (size_t)(t->ndim ? t->ndim : 1) * sizeof *t->dest);
  for (int d = 0; d < ndom; d++) {
    pk_te_axis *a = pk_alloc(ctx, sizeof *a);
    a->id = d;
    a->lo = 0;
    a->hi = t->dom_shape[d] = dom_shape[d];
    a->owner = t;
    a->name = axis_names && axis_names[d] ? pk_strdup(ctx, axis_names[d])
                                          : pk_sprintf(ctx, "i%d", d);
    t->dom_axes[d] = a;
  }
}

/* ---- expression nodes ---- */

static pk_expr *node_new(pk_ctx *ctx, pk_expr_kind kind, pk_eop op, int nargs,
                         pk_expr *const *args) {
  pk_expr *e = pk_alloc(ctx, sizeof *e);
  e->kind = kind;
  e->op = op;
  e->dtype = PKRT_DTYPE_INVALID;
  e->nargs = nargs;
  if (nargs > 0) {
    e->args = pk_alloc(ctx, (size_t)nargs * sizeof *e->args);
    memcpy(e->args, args, (size_t)nargs * sizeof *e->args);
  }
  return e;
}

pk_expr *pk_expr_int(pk_ctx *ctx, int64_t v) {
  pk_expr *e = node_new(ctx, PK_EXPR_INT, PK_EOP_NONE, 0, NULL);
  e->ival = v;
  return e;
}

pk_expr *pk_expr_float(pk_ctx *ctx, double v) {
  pk_expr *e = node_new(ctx, PK_EXPR_FLOAT, PK_EOP_NONE, 0, NULL);
  e->fval = v;
  return e;
}

pk_expr *pk_expr_axis(pk_ctx *ctx, pk_te_axis *a) {
  pk_expr *e = node_new(ctx, PK_EXPR_AXIS, PK_EOP_NONE, 0, NULL);
  e->axis = a;
  return e;
}

pk_expr *pk_expr_read(pk_ctx *ctx, pk_te_tensor *t, int nidx, pk_expr *const *idx) {
  pk_expr *e = node_new(ctx, PK_EXPR_READ, PK_EOP_NONE, nidx, idx);
  e->tensor = t;
  return e;
}

pk_expr *pk_expr_unary(pk_ctx *ctx, pk_eop op, pk_expr *a) {
  return node_new(ctx, PK_EXPR_UNARY, op, 1, &a);
}

pk_expr *pk_expr_binary(pk_ctx *ctx, pk_eop op, pk_expr *a, pk_expr *b) {
  pk_expr *args[2] = {a, b};
  return node_new(ctx, PK_EXPR_BINARY, op, 2, args);
}

pk_expr *pk_expr_select(pk_ctx *ctx, pk_expr *c, pk_expr *a, pk_expr *b) {
  pk_expr *args[3] = {c, a, b};
  return node_new(ctx, PK_EXPR_SELECT, PK_EOP_NONE, 3, args);
}

pk_expr *pk_expr_call(pk_ctx *ctx, pk_eop op, int nargs, pk_expr *const *args) {
  return node_new(ctx, PK_EXPR_CALL, op, nargs, args);
}

/* The target type is the node's dtype from the start: the checker only validates it. */
pk_expr *pk_expr_cast(pk_ctx *ctx, pkrt_dtype to, pk_expr *a) {
  pk_expr *e = node_new(ctx, PK_EXPR_CAST, PK_EOP_NONE, 1, &a);
  e->dtype = to;
  return e;
}

pk_expr *pk_expr_reduce(pk_ctx *ctx, pk_eop op, pk_expr *body, int naxes,
                        pk_te_axis *const *axes) {
  pk_expr *e = node_new(ctx, PK_EXPR_REDUCE, op, 1, &body);
  e->naxes = naxes;
  if (naxes > 0) {
    e->axes = pk_alloc(ctx, (size_t)naxes * sizeof *e->axes);
    memcpy(e->axes, axes, (size_t)naxes * sizeof *e->axes);
  }
  return e;
}

/* ---- queries ---- */

const char *pk_eop_name(pk_eop op) {
  static const char *const names[PK_EOP_COUNT_] = {
      [PK_EOP_NONE] = "none", [PK_EOP_NEG] = "-",     [PK_EOP_NOT] = "!",
      [PK_EOP_ADD] = "+",     [PK_EOP_SUB] = "-",     [PK_EOP_MUL] = "*",
      [PK_EOP_DIV] = "/",     [PK_EOP_MOD] = "%",     [PK_EOP_MIN] = "min",
      [PK_EOP_MAX] = "max",   [PK_EOP_LT] = "<",      [PK_EOP_LE] = "<=",
      [PK_EOP_GT] = ">",      [PK_EOP_GE] = ">=",     [PK_EOP_EQ] = "==",
      [PK_EOP_NE] = "!=",     [PK_EOP_AND] = "&&",    [PK_EOP_OR] = "||",
      [PK_EOP_EXP] = "exp",   [PK_EOP_LOG] = "log",   [PK_EOP_SQRT] = "sqrt",
      [PK_EOP_RSQRT] = "rsqrt", [PK_EOP_TANH] = "tanh", [PK_EOP_ERF] = "erf",
      [PK_EOP_ABS] = "abs",   [PK_EOP_SIGMOID] = "sigmoid", [PK_EOP_POW] = "pow",
      [PK_EOP_HASH] = "hash",
      [PK_EOP_SUM] = "sum",   [PK_EOP_RMAX] = "max",  [PK_EOP_RMIN] = "min",
  };
  return (unsigned)op < PK_EOP_COUNT_ && names[op] ? names[op] : "?";
}

/* splitmix64's finaliser (codegen/c_prelude.h has the same lines as pk_mix64). */
static uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int64_t pk_te_hash3(int64_t a, int64_t b, int64_t c) {
  return (int64_t)(mix64(mix64(mix64((uint64_t)a) ^ (uint64_t)b) ^ (uint64_t)c) >> 11);
}

/* -1 when the product overflows, which only an unchecked program can have. */
int64_t pk_te_tensor_numel(const pk_te_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++)
    if (pk_i64_mul(n, t->shape[d], &n)) return -1;
  return n;
}

bool pk_dtype_is_float(pkrt_dtype t) {
  return t == PKRT_DTYPE_F32 || t == PKRT_DTYPE_F64 || t == PKRT_DTYPE_F16 ||
         t == PKRT_DTYPE_BF16;
}

bool pk_dtype_is_int(pkrt_dtype t) { return t == PKRT_DTYPE_I32 || t == PKRT_DTYPE_I64; }

/* Operations that cost work per evaluation: arithmetic, comparisons and intrinsics. With
 * floats_only, only those on floating-point values: index arithmetic and guards on axes
 * are integer work the kernel's address computation absorbs, and counting them would
 * report more GFLOP/s than the machine has. Reads, casts, selects and logic are data
 * movement or control, never counted. */
static bool counts(const pk_expr *e, bool floats_only) {
  pkrt_dtype operand = e->nargs ? e->args[0]->dtype : e->dtype;
  return !floats_only || pk_dtype_is_float(e->dtype) || pk_dtype_is_float(operand);
}

static double expr_ops(const pk_expr *e, bool floats_only) {
  double n = 0;
  for (int i = 0; i < e->nargs; i++) n += expr_ops(e->args[i], floats_only);
  switch (e->kind) {
  case PK_EXPR_UNARY: return n + (e->op == PK_EOP_NEG && counts(e, floats_only));
  case PK_EXPR_BINARY:
    return n + (e->op != PK_EOP_AND && e->op != PK_EOP_OR && counts(e, floats_only));
  case PK_EXPR_CALL: return n + counts(e, floats_only);
  case PK_EXPR_REDUCE: {
    double points = 1;
    for (int i = 0; i < e->naxes; i++) points *= (double)e->axes[i]->hi - (double)e->axes[i]->lo;
    /* the body, and one combine, per reduce point */
    return (n + counts(e, floats_only)) * points;
  }
  default: return n;
  }
}

static double program_ops(const pk_te_program *p, bool floats_only) {
  double total = 0;
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    if (t->kind != PK_TE_COMPUTE || !t->body) continue;
    double points = 1; /* a scatter_add evaluates its body once per domain point */
    for (int d = 0; d < (t->dom_ndim ? t->dom_ndim : t->ndim); d++)
      points *= (double)(t->dom_ndim ? t->dom_shape[d] : t->shape[d]);
    /* ... and adds it into its destination: one more operation per point */
    bool accumulates = t->dom_ndim && (!floats_only || pk_dtype_is_float(t->dtype));
    total += points * (expr_ops(t->body, floats_only) + (accumulates ? 1 : 0));
  }
  return total;
}

double pk_te_flops(const pk_te_program *p) {
  double flops = program_ops(p, true);
  /* An integer-only program has no FLOPs; its operations still measure its work, and
   * the tuner ranks candidates by work per second. */
  return flops > 0 ? flops : program_ops(p, false);
}
