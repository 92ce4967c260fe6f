/* printer.c — the canonical text of a program: names replaced by ids (t<N>, i<d>, k<n>),
 * fixed spacing, minimal parentheses, shortest round-trip literals. Hashed, it is the
 * workload key of the tuning database, so any change here bumps PK_TE_CANON_VERSION. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_te.h"

typedef struct printer {
  pk_ctx *ctx;
  const pk_te_axis **numbered; /* reduce axes in order of first use: k<n> is numbered[n] */
  int nnumbered, cap;
} printer;

/* Precedence, loosest first; C-like. Every binary level is left-associative. */
enum { PREC_OR = 1, PREC_AND, PREC_CMP, PREC_ADD, PREC_MUL, PREC_UNARY, PREC_PRIMARY };

static int binary_prec(pk_eop op) {
  switch (op) {
  case PK_EOP_OR: return PREC_OR;
  case PK_EOP_AND: return PREC_AND;
  case PK_EOP_ADD: case PK_EOP_SUB: return PREC_ADD;
  case PK_EOP_MUL: case PK_EOP_DIV: case PK_EOP_MOD: return PREC_MUL;
  case PK_EOP_MIN: case PK_EOP_MAX: return PREC_PRIMARY; /* written as calls */
  default: return PREC_CMP;
  }
}

/* Negative literals (only C builders make them) print with a leading '-', so they bind
 * like unary minus, which is what the parser reads back. */
static int prec(const pk_expr *e) {
  switch (e->kind) {
  case PK_EXPR_INT:
    if (e->ival == INT64_MIN) return PREC_ADD; /* printed as -9223372036854775807 - 1 */
    return e->ival < 0 ? PREC_UNARY : PREC_PRIMARY;
  case PK_EXPR_FLOAT: return signbit(e->fval) ? PREC_UNARY : PREC_PRIMARY;
  case PK_EXPR_UNARY: return PREC_UNARY;
  case PK_EXPR_BINARY: return binary_prec(e->op);
  default: return PREC_PRIMARY;
  }
}

/* Shortest %.{1..17}g that reads back to the same double; a '.0' is added when that has
 * neither '.' nor an exponent, so the literal stays a float literal. */
static void format_float(char *buf, size_t size, double v) {
  for (int digits = 1; digits <= 17; digits++) {
    snprintf(buf, size, "%.*g", digits, v);
    if (strtod(buf, NULL) == v) break;
  }
  if (!strpbrk(buf, ".eEn")) strncat(buf, ".0", size - strlen(buf) - 1);
}

static int reduce_number(printer *P, const pk_te_axis *a) {
  for (int n = 0; n < P->nnumbered; n++)
    if (P->numbered[n] == a) return n;
  if (P->nnumbered == P->cap) {
    P->cap = P->cap ? P->cap * 2 : 8;
    const pk_te_axis **bigger = pk_alloc(P->ctx, (size_t)P->cap * sizeof *bigger);
    if (P->nnumbered) memcpy(bigger, P->numbered, (size_t)P->nnumbered * sizeof *bigger);
    P->numbered = bigger;
  }
  P->numbered[P->nnumbered] = a;
  return P->nnumbered++;
}

static void print_expr(printer *P, pk_strbuf *b, const pk_expr *e, int min_prec);

static void print_args(printer *P, pk_strbuf *b, const pk_expr *e, int from) {
  for (int i = from; i < e->nargs; i++) {
    if (i > from) pk_strbuf_append(b, ", ");
    print_expr(P, b, e->args[i], 0);
  }
}

static void print_literal(pk_strbuf *b, const pk_expr *e) {
  if (e->kind == PK_EXPR_INT) {
    if (e->ival == INT64_MIN) pk_strbuf_append(b, "-9223372036854775807 - 1");
    else pk_strbuf_printf(b, "%lld", (long long)e->ival);
    return;
  }
  char buf[40];
  if (!isfinite(e->fval)) { /* the checker rejects these; print something unparsable */
    pk_strbuf_append(b, isnan(e->fval) ? "nan" : signbit(e->fval) ? "-inf" : "inf");
    return;
  }
  if (signbit(e->fval)) pk_strbuf_append(b, "-");
  format_float(buf, sizeof buf, fabs(e->fval));
  pk_strbuf_append(b, buf);
}

static void print_node(printer *P, pk_strbuf *b, const pk_expr *e) {
  switch (e->kind) {
  case PK_EXPR_INT:
  case PK_EXPR_FLOAT: print_literal(b, e); return;
  case PK_EXPR_AXIS:
    if (e->axis->reduce) pk_strbuf_printf(b, "k%d", reduce_number(P, e->axis));
    else pk_strbuf_printf(b, "i%d", e->axis->id);
    return;
  case PK_EXPR_READ:
    pk_strbuf_printf(b, "t%d[", e->tensor->id);
    print_args(P, b, e, 0);
    pk_strbuf_append(b, "]");
    return;
  case PK_EXPR_UNARY:
    pk_strbuf_append(b, e->op == PK_EOP_NOT ? "!" : "-");
    print_expr(P, b, e->args[0], PREC_UNARY);
    return;
  case PK_EXPR_BINARY: {
    int p = binary_prec(e->op);
    if (p == PREC_PRIMARY) { /* min(a, b) / max(a, b) */
      pk_strbuf_printf(b, "%s(", pk_eop_name(e->op));
      print_expr(P, b, e->args[0], 0);
      pk_strbuf_append(b, ", ");
      /* A bare reduce axis here would read back as a reduction: parenthesise it. */
      bool bare_reduce_axis = e->args[1]->kind == PK_EXPR_AXIS && e->args[1]->axis->reduce;
      print_expr(P, b, e->args[1], bare_reduce_axis ? PREC_PRIMARY + 1 : 0);
      pk_strbuf_append(b, ")");
      return;
    }
    print_expr(P, b, e->args[0], p);
    pk_strbuf_printf(b, " %s ", pk_eop_name(e->op));
    print_expr(P, b, e->args[1], p + 1);
    return;
  }
  case PK_EXPR_SELECT: pk_strbuf_append(b, "select("); break;
  case PK_EXPR_CALL: pk_strbuf_printf(b, "%s(", pk_eop_name(e->op)); break;
  case PK_EXPR_CAST: pk_strbuf_printf(b, "cast(%s, ", pkrt_dtype_name(e->dtype)); break;
  case PK_EXPR_REDUCE:
    pk_strbuf_printf(b, "%s(", pk_eop_name(e->op));
    print_args(P, b, e, 0);
    for (int i = 0; i < e->naxes; i++) pk_strbuf_printf(b, ", k%d", reduce_number(P, e->axes[i]));
    pk_strbuf_append(b, ")");
    return;
  }
  print_args(P, b, e, 0);
  pk_strbuf_append(b, ")");
}

static void print_expr(printer *P, pk_strbuf *b, const pk_expr *e, int min_prec) {
  bool parens = prec(e) < min_prec;
  if (parens) pk_strbuf_append(b, "(");
  print_node(P, b, e);
  if (parens) pk_strbuf_append(b, ")");
}

static void print_shape(pk_strbuf *b, const pk_te_tensor *t) {
  pk_strbuf_append(b, "(");
  for (int d = 0; d < t->ndim; d++) pk_strbuf_printf(b, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
  pk_strbuf_append(b, t->ndim == 1 ? ",)" : ")");
}

static void print_reduce_decls(printer *P, pk_strbuf *b, int from, int to) {
  for (int n = from; n < to; n++)
    pk_strbuf_printf(b, "k%d = reduce_axis(%lld, %lld)\n", n, (long long)P->numbered[n]->lo,
                     (long long)P->numbered[n]->hi);
}

static void print_dims(pk_strbuf *b, int ndim, const int64_t *shape) {
  pk_strbuf_append(b, "(");
  for (int d = 0; d < ndim; d++) pk_strbuf_printf(b, "%s%lld", d ? ", " : "", (long long)shape[d]);
  pk_strbuf_append(b, ndim == 1 ? ",)" : ")");
}

/* tN = scatter_add((out shape), (domain), (i0, ...) => [dest, ...], value); no reductions
 * inside, so no reduce axes are numbered here. */
static void print_scatter(printer *P, pk_strbuf *out, const pk_te_tensor *t) {
  pk_strbuf_printf(out, "t%d = scatter_add(", t->id);
  print_shape(out, t);
  pk_strbuf_append(out, ", ");
  print_dims(out, t->dom_ndim, t->dom_shape);
  pk_strbuf_append(out, ", (");
  for (int d = 0; d < t->dom_ndim; d++) pk_strbuf_printf(out, "%si%d", d ? ", " : "", d);
  pk_strbuf_append(out, ") => [");
  for (int d = 0; d < t->ndim; d++) {
    if (d) pk_strbuf_append(out, ", ");
    if (t->dest && t->dest[d]) print_expr(P, out, t->dest[d], 0);
  }
  pk_strbuf_append(out, "], ");
  if (t->body) print_expr(P, out, t->body, 0);
  pk_strbuf_append(out, ")\n");
}

static void print_compute(printer *P, pk_strbuf *out, const pk_te_tensor *t) {
  if (t->dom_ndim) {
    print_scatter(P, out, t);
    return;
  }
  /* The body is printed first: the reduce axes it numbers are declared before the line. */
  pk_strbuf body;
  pk_strbuf_init(&body);
  int before = P->nnumbered;
  if (t->body) print_expr(P, &body, t->body, 0);
  print_reduce_decls(P, out, before, P->nnumbered);
  pk_strbuf_printf(out, "t%d = compute(", t->id);
  print_shape(out, t);
  pk_strbuf_append(out, ", (");
  for (int d = 0; d < t->ndim; d++) pk_strbuf_printf(out, "%si%d", d ? ", " : "", d);
  pk_strbuf_append(out, ") => ");
  pk_strbuf_appendn(out, body.data ? body.data : "", body.len);
  pk_strbuf_append(out, ")\n");
  pk_strbuf_free(&body);
}

char *pk_te_print(pk_ctx *ctx, const pk_te_program *p) {
  printer P = {.ctx = ctx};
  pk_strbuf out;
  pk_strbuf_init(&out);
  pk_strbuf_printf(&out, "# pock-te canonical v%d\n", PK_TE_CANON_VERSION);
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    if (t->kind == PK_TE_COMPUTE) {
      print_compute(&P, &out, t);
      continue;
    }
    pk_strbuf_printf(&out, "t%d = placeholder(", t->id);
    print_shape(&out, t);
    pk_strbuf_printf(&out, ", %s)\n", pkrt_dtype_name(t->dtype));
  }
  /* Only an unchecked program has unused reduce axes; keep them so nothing is lost. */
  int used = P.nnumbered;
  for (int i = 0; i < p->nreduce; i++) reduce_number(&P, p->reduce_axes[i]);
  print_reduce_decls(&P, &out, used, P.nnumbered);
  return pk_strbuf_finish(ctx, &out);
}

/* Reduce axes are numbered by first use within e, as the program printer would for a
 * body that is the first to use them. */
char *pk_te_print_expr(pk_ctx *ctx, const pk_expr *e) {
  printer P = {.ctx = ctx};
  pk_strbuf out;
  pk_strbuf_init(&out);
  print_expr(&P, &out, e, 0);
  return pk_strbuf_finish(ctx, &out);
}
