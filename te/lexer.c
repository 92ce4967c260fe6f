/* lexer.c — splits TE text into tokens (parse_impl.h), dropping comments and the newlines
 * that fall inside open parentheses or brackets. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse_impl.h"

typedef struct lexer {
  pk_ctx *ctx;
  const char *file;
  const char *s, *end;
  const char *cur;
  int line;
  const char *line_start;
  int nesting; /* open ( and [: newlines inside them do not end a statement */
  pk_tok *toks;
  int n, cap;
} lexer;

static int lex_col(const lexer *L, const char *p) { return (int)(p - L->line_start) + 1; }

static pk_status lex_fail(lexer *L, const char *p, const char *what) {
  return pk_ctx_fail(L->ctx, PK_ERR_SYNTAX, "%s%s",
                     pk_te_where(L->ctx, L->file, L->line, lex_col(L, p)), what);
}

static pk_tok *push(lexer *L, pk_tok_kind kind, const char *start, const char *end) {
  if (L->n == L->cap) {
    int cap = L->cap ? L->cap * 2 : 256;
    pk_tok *bigger = pk_alloc(L->ctx, (size_t)cap * sizeof *bigger);
    if (L->n) memcpy(bigger, L->toks, (size_t)L->n * sizeof *bigger);
    L->toks = bigger;
    L->cap = cap;
  }
  pk_tok *t = &L->toks[L->n++];
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->text = start;
  t->len = (int)(end - start);
  t->line = L->line;
  t->col = lex_col(L, start);
  return t;
}

static bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

/* number := digit+ [ '.' digit* ] [ ('e'|'E') ['+'|'-'] digit+ ]; with '.' or an exponent
 * it is a float literal. */
static pk_status lex_number(lexer *L) {
  const char *start = L->cur, *p = L->cur;
  bool is_float = false;
  while (p < L->end && is_digit(*p)) p++;
  if (p < L->end && *p == '.') {
    is_float = true;
    p++;
    while (p < L->end && is_digit(*p)) p++;
  }
  if (p < L->end && (*p == 'e' || *p == 'E')) {
    const char *q = p + 1;
    if (q < L->end && (*q == '+' || *q == '-')) q++;
    if (q >= L->end || !is_digit(*q)) return lex_fail(L, start, "malformed number: exponent needs digits");
    while (q < L->end && is_digit(*q)) q++;
    is_float = true;
    p = q;
  }
  if (p < L->end && (is_ident_char(*p) || *p == '.'))
    return lex_fail(L, start, "malformed number");
  pk_tok *t = push(L, is_float ? PK_TOK_FLOAT : PK_TOK_INT, start, p);
  if (is_float) {
    /* strtod wants a terminated string; the source need not be. */
    char *copy = pk_strndup(L->ctx, start, (size_t)(p - start));
    t->fval = strtod(copy, NULL);
    if (t->fval > 1.7976931348623157e308) return lex_fail(L, start, "float literal out of range");
  } else {
    int64_t v = 0;
    for (const char *q = start; q < p; q++)
      if (pk_i64_mul(v, 10, &v) || pk_i64_add(v, *q - '0', &v))
        return lex_fail(L, start, "integer literal out of range (largest is 9223372036854775807)");
    t->ival = v;
  }
  L->cur = p;
  return PK_OK;
}

/* Operators and punctuation, longest match first. */
static const struct {
  const char *text;
  pk_tok_kind kind;
} puncts[] = {
    {"=>", PK_TOK_ARROW}, {"<=", PK_TOK_LE}, {">=", PK_TOK_GE}, {"==", PK_TOK_EQ},
    {"!=", PK_TOK_NE},    {"&&", PK_TOK_AND}, {"||", PK_TOK_OR}, {"(", PK_TOK_LPAREN},
    {")", PK_TOK_RPAREN}, {"[", PK_TOK_LBRACK}, {"]", PK_TOK_RBRACK}, {",", PK_TOK_COMMA},
    {"=", PK_TOK_ASSIGN}, {"+", PK_TOK_PLUS}, {"-", PK_TOK_MINUS}, {"*", PK_TOK_STAR},
    {"/", PK_TOK_SLASH},  {"%", PK_TOK_PERCENT}, {"<", PK_TOK_LT}, {">", PK_TOK_GT},
    {"!", PK_TOK_NOT},
};

static pk_status lex_punct(lexer *L) {
  size_t left = (size_t)(L->end - L->cur);
  for (size_t i = 0; i < sizeof puncts / sizeof puncts[0]; i++) {
    size_t n = strlen(puncts[i].text);
    if (n > left || memcmp(L->cur, puncts[i].text, n) != 0) continue;
    pk_tok_kind k = puncts[i].kind;
    if (k == PK_TOK_LPAREN || k == PK_TOK_LBRACK) L->nesting++;
    if ((k == PK_TOK_RPAREN || k == PK_TOK_RBRACK) && L->nesting > 0) L->nesting--;
    push(L, k, L->cur, L->cur + n);
    L->cur += n;
    return PK_OK;
  }
  unsigned char c = (unsigned char)*L->cur;
  char what[64];
  if (c >= 0x21 && c < 0x7f)
    snprintf(what, sizeof what, "unexpected character '%c'", c);
  else
    snprintf(what, sizeof what, "unexpected byte 0x%02x", c);
  return lex_fail(L, L->cur, what);
}

pk_status pk_te_lex(pk_ctx *ctx, const char *text, size_t len, const char *filename,
                    pk_tok **toks, int *ntoks) {
  lexer L = {.ctx = ctx, .file = filename, .s = text, .end = text + len, .cur = text,
             .line = 1, .line_start = text};
  while (L.cur < L.end) {
    char c = *L.cur;
    if (c == '\n') {
      /* A newline ends a statement only outside ( ) and [ ]; repeated ones collapse. */
      if (L.nesting == 0 && L.n > 0 && L.toks[L.n - 1].kind != PK_TOK_NEWLINE)
        push(&L, PK_TOK_NEWLINE, L.cur, L.cur + 1);
      L.cur++;
      L.line++;
      L.line_start = L.cur;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      L.cur++;
    } else if (c == '#') {
      while (L.cur < L.end && *L.cur != '\n') L.cur++;
    } else if (is_ident_start(c)) {
      const char *start = L.cur;
      while (L.cur < L.end && is_ident_char(*L.cur)) L.cur++;
      push(&L, PK_TOK_IDENT, start, L.cur);
    } else if (is_digit(c)) {
      if (lex_number(&L) != PK_OK) return pk_ctx_status(ctx);
    } else if (lex_punct(&L) != PK_OK) {
      return pk_ctx_status(ctx);
    }
  }
  push(&L, PK_TOK_EOF, L.cur, L.cur);
  *toks = L.toks;
  *ntoks = L.n;
  return PK_OK;
}

/* Every message of the text form starts like a compiler's: "FILE:LINE:COL: ". */
const char *pk_te_where(pk_ctx *ctx, const char *filename, int line, int col) {
  if (line <= 0) return "";
  return pk_sprintf(ctx, "%s:%d:%d: ", filename ? filename : "<te>", line, col);
}
