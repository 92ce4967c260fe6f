/* parser.c — recursive descent over the tokens of TE text (grammar: docs/te.md). Builds the
 * program with the constructors of expr.c, resolving names as it goes, then hands it to
 * the checker together with the source positions the program structs cannot hold. */
#include <stdio.h>
#include <string.h>

#include "parse_impl.h"

typedef struct parser {
  pk_ctx *ctx;
  const char *file;
  const pk_tok *toks;
  int ntoks, pos;
  pk_te_program *prog;
  pk_te_tensor *cur; /* the compute whose body is being parsed */
  int depth;         /* expression nesting, capped at PK_TE_MAX_DEPTH */
  int *reduce_line, *reduce_col, reduce_cap;
} parser;

/* Collected call arguments; bare[i] is the reduce axis argument i names when it is written
 * as a bare name, which is what makes sum(e, k) and max(e, k) reductions. */
typedef struct arglist {
  pk_expr **e;
  pk_te_axis **bare;
  int n, cap;
} arglist;

static pk_expr *parse_expr(parser *P);

/* ---- tokens and errors ---- */

static const pk_tok *peek(const parser *P) { return &P->toks[P->pos]; }

static const pk_tok *peek_ahead(const parser *P, int k) {
  int i = P->pos + k;
  return &P->toks[i < P->ntoks ? i : P->ntoks - 1]; /* the last token is EOF */
}

static const pk_tok *advance(parser *P) {
  const pk_tok *t = peek(P);
  if (t->kind != PK_TOK_EOF) P->pos++;
  return t;
}

static bool accept(parser *P, pk_tok_kind k) {
  if (peek(P)->kind != k) return false;
  advance(P);
  return true;
}

static char *tok_str(parser *P, const pk_tok *t) { return pk_strndup(P->ctx, t->text, (size_t)t->len); }

static const char *tok_desc(parser *P, const pk_tok *t) {
  switch (t->kind) {
  case PK_TOK_EOF: return "end of input";
  case PK_TOK_NEWLINE: return "end of line";
  case PK_TOK_INT:
  case PK_TOK_FLOAT: return pk_sprintf(P->ctx, "number '%.*s'", t->len > 40 ? 40 : t->len, t->text);
  default: return pk_sprintf(P->ctx, "'%.*s'", t->len > 40 ? 40 : t->len, t->text);
  }
}

static pk_status fail_at(parser *P, pk_status s, const pk_tok *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static pk_status fail_at(parser *P, pk_status s, const pk_tok *at, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return pk_ctx_fail(P->ctx, s, "%s%s", pk_te_where(P->ctx, P->file, at->line, at->col), msg);
}

/* "expected X, found Y" at the current token. */
static pk_status expected(parser *P, const char *what) {
  return fail_at(P, PK_ERR_SYNTAX, peek(P), "expected %s, found %s", what, tok_desc(P, peek(P)));
}

static bool expect(parser *P, pk_tok_kind k, const char *what) {
  if (accept(P, k)) return true;
  expected(P, what);
  return false;
}

/* ---- names ---- */

static bool tok_is(const pk_tok *t, const char *word) {
  return t->kind == PK_TOK_IDENT && (size_t)t->len == strlen(word) &&
         memcmp(t->text, word, (size_t)t->len) == 0;
}

static bool name_is(const char *name, const pk_tok *t) {
  return name && strlen(name) == (size_t)t->len && memcmp(name, t->text, (size_t)t->len) == 0;
}

static pk_te_tensor *find_tensor(const parser *P, const pk_tok *t) {
  for (int i = 0; i < P->prog->ntensors; i++)
    if (name_is(P->prog->tensors[i]->name, t)) return P->prog->tensors[i];
  return NULL;
}

static pk_te_axis *find_reduce_axis(const parser *P, const pk_tok *t) {
  for (int i = 0; i < P->prog->nreduce; i++)
    if (name_is(P->prog->reduce_axes[i]->name, t)) return P->prog->reduce_axes[i];
  return NULL;
}

static pk_te_axis *find_spatial_axis(const parser *P, const pk_tok *t) {
  if (!P->cur) return NULL;
  /* a scatter_add's body and destination see its domain axes */
  int n = P->cur->dom_ndim ? P->cur->dom_ndim : P->cur->ndim;
  pk_te_axis **axes = P->cur->dom_ndim ? P->cur->dom_axes : P->cur->axes;
  for (int d = 0; d < n; d++)
    if (name_is(axes[d]->name, t)) return axes[d];
  return NULL;
}

/* Tensors and reduce axes share one namespace: a name is defined once. */
static bool check_new_name(parser *P, const pk_tok *name) {
  const pk_te_tensor *t = find_tensor(P, name);
  const pk_te_axis *a = find_reduce_axis(P, name);
  if (!t && !a) return true;
  int line = t ? t->line : P->reduce_line[a->id], col = t ? t->col : P->reduce_col[a->id];
  fail_at(P, PK_ERR_CHECK, name, "redefinition of '%.*s' (first defined at %d:%d)", name->len,
          name->text, line, col);
  return false;
}

/* ---- expressions ---- */

static pk_expr *at_tok(pk_expr *e, const pk_tok *t) {
  e->line = t->line;
  e->col = t->col;
  return e;
}

static void arglist_push(parser *P, arglist *L, pk_expr *e, pk_te_axis *bare) {
  if (L->n == L->cap) {
    int cap = L->cap ? L->cap * 2 : 4;
    pk_expr **e2 = pk_alloc(P->ctx, (size_t)cap * sizeof *e2);
    pk_te_axis **b2 = pk_alloc(P->ctx, (size_t)cap * sizeof *b2);
    if (L->n) {
      memcpy(e2, L->e, (size_t)L->n * sizeof *e2);
      memcpy(b2, L->bare, (size_t)L->n * sizeof *b2);
    }
    L->e = e2;
    L->bare = b2;
    L->cap = cap;
  }
  L->e[L->n] = e;
  L->bare[L->n++] = bare;
}

/* expr_list := expr { ',' expr }   (call arguments and indices) */
static bool parse_expr_list(parser *P, arglist *L, pk_tok_kind close, const char *what) {
  if (peek(P)->kind == close) {
    expected(P, what);
    return false;
  }
  do {
    const pk_tok *t = peek(P), *after = peek_ahead(P, 1);
    bool bare_name = t->kind == PK_TOK_IDENT &&
                     (after->kind == PK_TOK_COMMA || after->kind == PK_TOK_RPAREN);
    pk_expr *e = parse_expr(P);
    if (!e) return false;
    pk_te_axis *bare = bare_name && e->kind == PK_EXPR_AXIS && e->axis->reduce ? e->axis : NULL;
    arglist_push(P, L, e, bare);
  } while (accept(P, PK_TOK_COMMA));
  return true;
}

static const struct {
  const char *name;
  pk_eop op;
  int nargs;
} intrinsics[] = {
    {"exp", PK_EOP_EXP, 1},   {"log", PK_EOP_LOG, 1},   {"sqrt", PK_EOP_SQRT, 1},
    {"rsqrt", PK_EOP_RSQRT, 1}, {"tanh", PK_EOP_TANH, 1}, {"erf", PK_EOP_ERF, 1},
    {"abs", PK_EOP_ABS, 1},   {"sigmoid", PK_EOP_SIGMOID, 1}, {"pow", PK_EOP_POW, 2},
    {"hash", PK_EOP_HASH, 3},
};

/* reduction := ( 'sum' | 'max' | 'min' ) '(' expr ',' reduce_axis_name { ',' reduce_axis_name } ')' */
static pk_expr *make_reduction(parser *P, const pk_tok *fn, pk_eop op, const arglist *L) {
  for (int i = 1; i < L->n; i++) {
    if (L->bare[i]) continue;
    const pk_expr *a = L->e[i];
    if (a->kind == PK_EXPR_AXIS)
      fail_at(P, PK_ERR_CHECK, fn, "'%s' is not a reduce axis (argument %d of %.*s)",
              a->axis->name, i + 1, fn->len, fn->text);
    else
      fail_at(P, PK_ERR_SYNTAX, fn, "argument %d of %.*s must name a reduce axis", i + 1,
              fn->len, fn->text);
    return NULL;
  }
  return at_tok(pk_expr_reduce(P->ctx, op, L->e[0], L->n - 1, L->bare + 1), fn);
}

/* cast := 'cast' '(' dtype ',' expr ')' */
static pk_expr *parse_cast(parser *P, const pk_tok *fn) {
  const pk_tok *dt = peek(P);
  if (dt->kind != PK_TOK_IDENT) {
    expected(P, "a dtype as cast's first argument");
    return NULL;
  }
  advance(P);
  pkrt_dtype to = pkrt_dtype_from_name(tok_str(P, dt));
  if (to == PKRT_DTYPE_INVALID) {
    fail_at(P, PK_ERR_CHECK, dt, "unknown dtype '%.*s' (expected f32, f64, i32 or i64)",
            dt->len, dt->text);
    return NULL;
  }
  if (!expect(P, PK_TOK_COMMA, "',' after cast's dtype")) return NULL;
  pk_expr *a = parse_expr(P);
  if (!a || !expect(P, PK_TOK_RPAREN, "')' after cast's operand")) return NULL;
  return at_tok(pk_expr_cast(P->ctx, to, a), fn);
}

/* call := IDENT '(' expr_list ')'   — select, min, max, intrinsics, or a reduction */
static pk_expr *parse_call(parser *P, const pk_tok *fn) {
  if (tok_is(fn, "cast")) return parse_cast(P, fn);
  arglist L = {0};
  if (!parse_expr_list(P, &L, PK_TOK_RPAREN, "an argument") ||
      !expect(P, PK_TOK_RPAREN, "')' after arguments"))
    return NULL;
  if (tok_is(fn, "select")) {
    if (L.n == 3) return at_tok(pk_expr_select(P->ctx, L.e[0], L.e[1], L.e[2]), fn);
    fail_at(P, PK_ERR_SYNTAX, fn, "select takes 3 arguments (condition, then, else), got %d", L.n);
    return NULL;
  }
  if (tok_is(fn, "sum")) {
    if (L.n >= 2) return make_reduction(P, fn, PK_EOP_SUM, &L);
    fail_at(P, PK_ERR_SYNTAX, fn, "sum takes an expression and reduce axes: sum(e, k...)");
    return NULL;
  }
  if (tok_is(fn, "min") || tok_is(fn, "max")) {
    bool is_max = tok_is(fn, "max");
    if (L.n == 2 && !L.bare[1])
      return at_tok(pk_expr_binary(P->ctx, is_max ? PK_EOP_MAX : PK_EOP_MIN, L.e[0], L.e[1]), fn);
    if (L.n >= 2) return make_reduction(P, fn, is_max ? PK_EOP_RMAX : PK_EOP_RMIN, &L);
    fail_at(P, PK_ERR_SYNTAX, fn, "%.*s takes two arguments, or an expression and reduce axes",
            fn->len, fn->text);
    return NULL;
  }
  for (size_t i = 0; i < sizeof intrinsics / sizeof intrinsics[0]; i++) {
    if (!tok_is(fn, intrinsics[i].name)) continue;
    if (L.n == intrinsics[i].nargs) return at_tok(pk_expr_call(P->ctx, intrinsics[i].op, L.n, L.e), fn);
    fail_at(P, PK_ERR_SYNTAX, fn, "%s takes %d argument%s, got %d", intrinsics[i].name,
            intrinsics[i].nargs, intrinsics[i].nargs == 1 ? "" : "s", L.n);
    return NULL;
  }
  fail_at(P, PK_ERR_SYNTAX, fn, "unknown function '%.*s'%s", fn->len, fn->text,
          find_tensor(P, fn) ? " (a tensor is read with brackets: T[i, j])" : "");
  return NULL;
}

/* read := IDENT '[' expr_list ']' */
static pk_expr *parse_read(parser *P, const pk_tok *name) {
  pk_te_tensor *t = find_tensor(P, name);
  if (!t) {
    const char *hint = find_spatial_axis(P, name) || find_reduce_axis(P, name)
                           ? " (it is an axis)" : " (tensors must be defined before they are read)";
    fail_at(P, PK_ERR_CHECK, name, "unknown tensor '%.*s'%s", name->len, name->text, hint);
    return NULL;
  }
  if (t == P->cur) {
    fail_at(P, PK_ERR_CHECK, name, "compute '%s' reads itself", t->name);
    return NULL;
  }
  arglist L = {0};
  if (!parse_expr_list(P, &L, PK_TOK_RBRACK, "an index") ||
      !expect(P, PK_TOK_RBRACK, "']' after index list"))
    return NULL;
  return at_tok(pk_expr_read(P->ctx, t, L.n, L.e), name);
}

/* name := IDENT   — an axis of the compute being defined, or a reduce axis */
static pk_expr *parse_name(parser *P, const pk_tok *name) {
  pk_te_axis *a = find_spatial_axis(P, name);
  if (!a) a = find_reduce_axis(P, name);
  if (a) return at_tok(pk_expr_axis(P->ctx, a), name);
  if (find_tensor(P, name))
    fail_at(P, PK_ERR_CHECK, name, "tensor '%.*s' is read with indices: %.*s[...]", name->len,
            name->text, name->len, name->text);
  else
    fail_at(P, PK_ERR_CHECK, name, "unknown axis '%.*s'", name->len, name->text);
  return NULL;
}

/* primary := INT | FLOAT | '(' expr ')' | read | call | name */
static pk_expr *parse_primary(parser *P) {
  const pk_tok *t = peek(P);
  switch (t->kind) {
  case PK_TOK_INT: advance(P); return at_tok(pk_expr_int(P->ctx, t->ival), t);
  case PK_TOK_FLOAT: advance(P); return at_tok(pk_expr_float(P->ctx, t->fval), t);
  case PK_TOK_LPAREN: {
    advance(P);
    pk_expr *e = parse_expr(P);
    return e && expect(P, PK_TOK_RPAREN, "')' to close '('") ? e : NULL;
  }
  case PK_TOK_IDENT:
    advance(P);
    if (accept(P, PK_TOK_LBRACK)) return parse_read(P, t);
    if (accept(P, PK_TOK_LPAREN)) return parse_call(P, t);
    return parse_name(P, t);
  default: expected(P, "an expression"); return NULL;
  }
}

/* unary := ( '-' | '!' ) unary | primary */
static pk_expr *parse_unary(parser *P) {
  /* Every nesting (parentheses, calls, indices, prefix operators) passes through here, so
   * this one counter bounds the parser's recursion. */
  if (P->depth >= PK_TE_MAX_DEPTH) {
    fail_at(P, PK_ERR_SYNTAX, peek(P), "expression nested too deeply (more than %d levels)",
            PK_TE_MAX_DEPTH);
    return NULL;
  }
  P->depth++;
  const pk_tok *t = peek(P);
  pk_expr *e;
  if (t->kind == PK_TOK_MINUS || t->kind == PK_TOK_NOT) {
    advance(P);
    pk_expr *a = parse_unary(P);
    e = a ? at_tok(pk_expr_unary(P->ctx, t->kind == PK_TOK_MINUS ? PK_EOP_NEG : PK_EOP_NOT, a), t) : NULL;
  } else {
    e = parse_primary(P);
  }
  P->depth--;
  return e;
}

typedef struct binop {
  pk_tok_kind tok;
  pk_eop op;
} binop;

/* One left-associative precedence level: operand { op operand }. */
static pk_expr *parse_level(parser *P, const binop *ops, int nops, pk_expr *(*operand)(parser *)) {
  pk_expr *e = operand(P);
  while (e) {
    const pk_tok *t = peek(P);
    int i = 0;
    while (i < nops && ops[i].tok != t->kind) i++;
    if (i == nops) break;
    advance(P);
    pk_expr *rhs = operand(P);
    e = rhs ? at_tok(pk_expr_binary(P->ctx, ops[i].op, e, rhs), t) : NULL;
  }
  return e;
}

/* mul_expr := unary { ( '*' | '/' | '%' ) unary } */
static pk_expr *parse_mul(parser *P) {
  static const binop ops[] = {{PK_TOK_STAR, PK_EOP_MUL}, {PK_TOK_SLASH, PK_EOP_DIV},
                              {PK_TOK_PERCENT, PK_EOP_MOD}};
  return parse_level(P, ops, 3, parse_unary);
}

/* add_expr := mul_expr { ( '+' | '-' ) mul_expr } */
static pk_expr *parse_add(parser *P) {
  static const binop ops[] = {{PK_TOK_PLUS, PK_EOP_ADD}, {PK_TOK_MINUS, PK_EOP_SUB}};
  return parse_level(P, ops, 2, parse_mul);
}

/* cmp_expr := add_expr { ( '<' | '<=' | '>' | '>=' | '==' | '!=' ) add_expr } */
static pk_expr *parse_cmp(parser *P) {
  static const binop ops[] = {{PK_TOK_LT, PK_EOP_LT}, {PK_TOK_LE, PK_EOP_LE},
                              {PK_TOK_GT, PK_EOP_GT}, {PK_TOK_GE, PK_EOP_GE},
                              {PK_TOK_EQ, PK_EOP_EQ}, {PK_TOK_NE, PK_EOP_NE}};
  return parse_level(P, ops, 6, parse_add);
}

/* and_expr := cmp_expr { '&&' cmp_expr } */
static pk_expr *parse_and(parser *P) {
  static const binop ops[] = {{PK_TOK_AND, PK_EOP_AND}};
  return parse_level(P, ops, 1, parse_cmp);
}

/* expr := and_expr { '||' and_expr } */
static pk_expr *parse_expr(parser *P) {
  static const binop ops[] = {{PK_TOK_OR, PK_EOP_OR}};
  return parse_level(P, ops, 1, parse_and);
}

/* ---- statements ---- */

/* dim := [ '-' ] INT   (negative values parse so the checker can say what is wrong) */
static bool parse_signed_int(parser *P, int64_t *out, const char *what) {
  bool neg = accept(P, PK_TOK_MINUS);
  const pk_tok *t = peek(P);
  if (t->kind != PK_TOK_INT) {
    expected(P, what);
    return false;
  }
  advance(P);
  *out = neg ? -t->ival : t->ival; /* ival >= 0, so negating cannot overflow */
  return true;
}

/* shape := '(' dim { ',' dim } [ ',' ] ')' */
static bool parse_shape(parser *P, int *ndim, int64_t shape[PK_TE_MAX_DIMS]) {
  if (!expect(P, PK_TOK_LPAREN, "'(' to open a shape such as (512, 128)")) return false;
  *ndim = 0;
  do {
    if (*ndim > 0 && peek(P)->kind == PK_TOK_RPAREN) break; /* trailing comma: (40,) */
    if (*ndim == PK_TE_MAX_DIMS) {
      fail_at(P, PK_ERR_CHECK, peek(P), "shape has more than %d dims", PK_TE_MAX_DIMS);
      return false;
    }
    if (!parse_signed_int(P, &shape[*ndim], "a dimension (an integer)")) return false;
    (*ndim)++;
  } while (accept(P, PK_TOK_COMMA));
  return expect(P, PK_TOK_RPAREN, "')' after shape");
}

/* axis_names := '(' IDENT { ',' IDENT } [ ',' ] ')' */
static bool parse_axis_names(parser *P, const pk_tok *compute, int *n,
                             const pk_tok *names[PK_TE_MAX_DIMS]) {
  if (!expect(P, PK_TOK_LPAREN, "'(' to open axis names such as (i, j)")) return false;
  *n = 0;
  do {
    if (*n > 0 && peek(P)->kind == PK_TOK_RPAREN) break;
    const pk_tok *t = peek(P);
    if (t->kind != PK_TOK_IDENT) {
      expected(P, "an axis name");
      return false;
    }
    if (*n == PK_TE_MAX_DIMS) {
      fail_at(P, PK_ERR_CHECK, t, "more than %d axis names", PK_TE_MAX_DIMS);
      return false;
    }
    for (int i = 0; i < *n; i++)
      if (names[i]->len == t->len && memcmp(names[i]->text, t->text, (size_t)t->len) == 0) {
        fail_at(P, PK_ERR_CHECK, t, "axis '%.*s' is named twice", t->len, t->text);
        return false;
      }
    if (find_tensor(P, t) || find_reduce_axis(P, t) || name_is(tok_str(P, compute), t)) {
      fail_at(P, PK_ERR_CHECK, t, "axis '%.*s' shadows the %s of that name", t->len, t->text,
              find_reduce_axis(P, t) ? "reduce axis" : "tensor");
      return false;
    }
    names[(*n)++] = advance(P);
  } while (accept(P, PK_TOK_COMMA));
  return expect(P, PK_TOK_RPAREN, "')' after axis names");
}

/* placeholder := 'placeholder' '(' shape ',' dtype ')' */
static pk_status parse_placeholder(parser *P, const pk_tok *name) {
  int ndim;
  int64_t shape[PK_TE_MAX_DIMS];
  if (!expect(P, PK_TOK_LPAREN, "'(' after placeholder") || !parse_shape(P, &ndim, shape) ||
      !expect(P, PK_TOK_COMMA, "',' after shape"))
    return pk_ctx_status(P->ctx);
  const pk_tok *dt = peek(P);
  if (dt->kind != PK_TOK_IDENT) return expected(P, "a dtype (f32, f64, i32 or i64)");
  advance(P);
  pkrt_dtype dtype = pkrt_dtype_from_name(tok_str(P, dt));
  if (dtype == PKRT_DTYPE_INVALID)
    return fail_at(P, PK_ERR_CHECK, dt, "unknown dtype '%.*s' (expected f32, f64, i32 or i64)",
                   dt->len, dt->text);
  if (!expect(P, PK_TOK_RPAREN, "')' after dtype")) return pk_ctx_status(P->ctx);
  pk_te_tensor *t = pk_te_placeholder(P->ctx, P->prog, tok_str(P, name), ndim, shape, dtype);
  t->line = name->line;
  t->col = name->col;
  return PK_OK;
}

/* reduce_axis := 'reduce_axis' '(' dim [ ',' dim ] ')'   — (hi) or (lo, hi) */
static pk_status parse_reduce_axis(parser *P, const pk_tok *name) {
  int64_t lo = 0, hi;
  if (!expect(P, PK_TOK_LPAREN, "'(' after reduce_axis") ||
      !parse_signed_int(P, &hi, "an integer bound"))
    return pk_ctx_status(P->ctx);
  if (accept(P, PK_TOK_COMMA)) {
    lo = hi;
    if (!parse_signed_int(P, &hi, "an integer upper bound")) return pk_ctx_status(P->ctx);
  }
  if (!expect(P, PK_TOK_RPAREN, "')' after reduce_axis bounds")) return pk_ctx_status(P->ctx);
  pk_te_axis *a = pk_te_reduce_axis(P->ctx, P->prog, tok_str(P, name), lo, hi);
  if (a->id >= P->reduce_cap) {
    int cap = P->reduce_cap ? P->reduce_cap * 2 : 8;
    int *lines = pk_alloc(P->ctx, (size_t)cap * sizeof *lines);
    int *cols = pk_alloc(P->ctx, (size_t)cap * sizeof *cols);
    if (P->reduce_cap) {
      memcpy(lines, P->reduce_line, (size_t)P->reduce_cap * sizeof *lines);
      memcpy(cols, P->reduce_col, (size_t)P->reduce_cap * sizeof *cols);
    }
    P->reduce_line = lines;
    P->reduce_col = cols;
    P->reduce_cap = cap;
  }
  P->reduce_line[a->id] = name->line;
  P->reduce_col[a->id] = name->col;
  return PK_OK;
}

/* compute := 'compute' '(' shape ',' axis_names '=>' expr ')' */
static pk_status parse_compute(parser *P, const pk_tok *name) {
  int ndim, naxes;
  int64_t shape[PK_TE_MAX_DIMS];
  const pk_tok *axis_toks[PK_TE_MAX_DIMS];
  if (!expect(P, PK_TOK_LPAREN, "'(' after compute") || !parse_shape(P, &ndim, shape) ||
      !expect(P, PK_TOK_COMMA, "',' after shape"))
    return pk_ctx_status(P->ctx);
  const pk_tok *names_at = peek(P);
  if (!parse_axis_names(P, name, &naxes, axis_toks)) return pk_ctx_status(P->ctx);
  if (naxes != ndim)
    return fail_at(P, PK_ERR_CHECK, names_at, "compute shape has %d dim%s but %d axis name%s",
                   ndim, ndim == 1 ? "" : "s", naxes, naxes == 1 ? "" : "s");
  if (!expect(P, PK_TOK_ARROW, "'=>' after axis names")) return pk_ctx_status(P->ctx);
  const char *axis_names[PK_TE_MAX_DIMS];
  for (int d = 0; d < ndim; d++) axis_names[d] = tok_str(P, axis_toks[d]);
  pk_te_tensor *t = pk_te_compute(P->ctx, P->prog, tok_str(P, name), ndim, shape, axis_names);
  t->line = name->line;
  t->col = name->col;
  P->cur = t;
  t->body = parse_expr(P);
  P->cur = NULL;
  if (!t->body || !expect(P, PK_TOK_RPAREN, "')' after compute body")) return pk_ctx_status(P->ctx);
  return PK_OK;
}

/* scatter := 'scatter_add' '(' shape ',' shape ',' axis_names '=>' '[' expr_list ']' ',' expr ')'
 * — the result's shape, the domain's shape, one axis name per domain dim, the destination
 * element (one index per result dim) and the value added there. */
static pk_status parse_scatter(parser *P, const pk_tok *name) {
  int ndim, ndom, naxes;
  int64_t shape[PK_TE_MAX_DIMS], dom[PK_TE_MAX_DIMS];
  const pk_tok *axis_toks[PK_TE_MAX_DIMS];
  if (!expect(P, PK_TOK_LPAREN, "'(' after scatter_add") || !parse_shape(P, &ndim, shape) ||
      !expect(P, PK_TOK_COMMA, "',' after the result's shape") || !parse_shape(P, &ndom, dom) ||
      !expect(P, PK_TOK_COMMA, "',' after the domain's shape"))
    return pk_ctx_status(P->ctx);
  const pk_tok *names_at = peek(P);
  if (!parse_axis_names(P, name, &naxes, axis_toks)) return pk_ctx_status(P->ctx);
  if (naxes != ndom)
    return fail_at(P, PK_ERR_CHECK, names_at, "scatter_add domain has %d dim%s but %d axis name%s",
                   ndom, ndom == 1 ? "" : "s", naxes, naxes == 1 ? "" : "s");
  if (!expect(P, PK_TOK_ARROW, "'=>' after axis names") ||
      !expect(P, PK_TOK_LBRACK, "'[' to open the destination index list"))
    return pk_ctx_status(P->ctx);
  const char *axis_names[PK_TE_MAX_DIMS], *out_names[PK_TE_MAX_DIMS];
  for (int d = 0; d < ndom; d++) axis_names[d] = tok_str(P, axis_toks[d]);
  for (int d = 0; d < ndim; d++) out_names[d] = pk_sprintf(P->ctx, "@%d", d); /* unnameable */
  pk_te_tensor *t = pk_te_compute(P->ctx, P->prog, tok_str(P, name), ndim, shape, out_names);
  t->line = name->line;
  t->col = name->col;
  pk_te_scatter_domain(P->ctx, t, ndom, dom, axis_names);
  P->cur = t;
  const pk_tok *dest_at = peek(P);
  arglist L = {0};
  bool ok = parse_expr_list(P, &L, PK_TOK_RBRACK, "a destination index") &&
            expect(P, PK_TOK_RBRACK, "']' after the destination") &&
            expect(P, PK_TOK_COMMA, "',' before the value");
  if (ok && L.n != ndim) {
    P->cur = NULL;
    return fail_at(P, PK_ERR_CHECK, dest_at, "scatter_add destination has %d ind%s but the "
                   "result has %d dim%s", L.n, L.n == 1 ? "ex" : "ices", ndim, ndim == 1 ? "" : "s");
  }
  if (ok) {
    for (int d = 0; d < ndim; d++) t->dest[d] = L.e[d];
    t->body = parse_expr(P);
  }
  P->cur = NULL;
  if (!ok || !t->body || !expect(P, PK_TOK_RPAREN, "')' after the scatter_add value"))
    return pk_ctx_status(P->ctx);
  return PK_OK;
}

/* statement := IDENT '=' ( placeholder | reduce_axis | compute | scatter ) */
static pk_status parse_statement(parser *P) {
  const pk_tok *name = peek(P);
  if (name->kind != PK_TOK_IDENT) return expected(P, "a definition such as A = placeholder(...)");
  advance(P);
  if (!expect(P, PK_TOK_ASSIGN, "'=' after the name being defined")) return pk_ctx_status(P->ctx);
  const pk_tok *kw = peek(P);
  if (!check_new_name(P, name)) return pk_ctx_status(P->ctx);
  if (tok_is(kw, "placeholder")) return advance(P), parse_placeholder(P, name);
  if (tok_is(kw, "reduce_axis")) return advance(P), parse_reduce_axis(P, name);
  if (tok_is(kw, "compute")) return advance(P), parse_compute(P, name);
  if (tok_is(kw, "scatter_add")) return advance(P), parse_scatter(P, name);
  return expected(P, "placeholder(...), reduce_axis(...), compute(...) or scatter_add(...)");
}

/* program := { NEWLINE } { statement ( NEWLINE | EOF ) } EOF */
static pk_status parse_program(parser *P) {
  int nstatements = 0;
  while (peek(P)->kind != PK_TOK_EOF) {
    if (accept(P, PK_TOK_NEWLINE)) continue;
    if (parse_statement(P) != PK_OK) return pk_ctx_status(P->ctx);
    nstatements++;
    if (!accept(P, PK_TOK_NEWLINE) && peek(P)->kind != PK_TOK_EOF)
      return expected(P, "end of line after the statement");
  }
  /* An empty file (or only comments) is almost surely the wrong file, not a program. */
  if (nstatements == 0)
    return pk_ctx_fail(P->ctx, PK_ERR_SYNTAX, "%s: empty program (no statements)", P->file);
  return PK_OK;
}

pk_status pk_te_parse(pk_ctx *ctx, const char *text, size_t len, const char *filename,
                      pk_te_program **out) {
  *out = NULL;
  parser P = {.ctx = ctx, .file = filename ? filename : "<input>"};
  pk_tok *toks;
  if (pk_te_lex(ctx, text, len, P.file, &toks, &P.ntoks) != PK_OK) return pk_ctx_status(ctx);
  P.toks = toks;
  P.prog = pk_te_program_new(ctx);
  if (parse_program(&P) != PK_OK) return pk_ctx_status(ctx);
  pk_te_src src = {.filename = P.file, .nreduce = P.prog->nreduce,
                   .reduce_line = P.reduce_line, .reduce_col = P.reduce_col};
  pk_status s = pk_te_check_src(ctx, P.prog, &src);
  if (s != PK_OK) return s;
  *out = P.prog;
  return PK_OK;
}
