/* parse_impl.h — private to te/: the tokens the lexer hands the parser, the source
 * positions the parser hands the checker, and the checker's entry into bounds.c. */
#ifndef PK_PARSE_IMPL_H
#define PK_PARSE_IMPL_H

#include "pk_te.h"

#define PK_TE_MAX_DEPTH 256 /* deepest expression accepted: keeps every recursive pass safe */

typedef enum pk_tok_kind {
  PK_TOK_EOF, PK_TOK_NEWLINE, PK_TOK_IDENT, PK_TOK_INT, PK_TOK_FLOAT,
  PK_TOK_LPAREN, PK_TOK_RPAREN, PK_TOK_LBRACK, PK_TOK_RBRACK, PK_TOK_COMMA,
  PK_TOK_ASSIGN, PK_TOK_ARROW,
  PK_TOK_PLUS, PK_TOK_MINUS, PK_TOK_STAR, PK_TOK_SLASH, PK_TOK_PERCENT,
  PK_TOK_LT, PK_TOK_LE, PK_TOK_GT, PK_TOK_GE, PK_TOK_EQ, PK_TOK_NE,
  PK_TOK_AND, PK_TOK_OR, PK_TOK_NOT
} pk_tok_kind;

typedef struct pk_tok {
  pk_tok_kind kind;
  const char *text; /* points into the source; not NUL-terminated */
  int len;
  int line, col;    /* 1-based; col counts bytes */
  int64_t ival;     /* INT: value (literals are never negative: '-' is an operator) */
  double fval;      /* FLOAT */
} pk_tok;

/* Splits text into tokens ending with one EOF token. Newlines inside ( ) or [ ] are
 * dropped so a statement may continue over lines; comments run from '#' to end of line.
 * PK_ERR_SYNTAX with "FILE:LINE:COL: ..." on a bad character or literal. */
pk_status pk_te_lex(pk_ctx *ctx, const char *text, size_t len, const char *filename,
                    pk_tok **toks, int *ntoks);

/* Where the parser found what the program structs cannot hold, for the checker's messages. */
typedef struct pk_te_src {
  const char *filename;
  int nreduce;
  const int *reduce_line, *reduce_col; /* indexed by reduce axis id */
} pk_te_src;

/* pk_te_check with source positions; src may be NULL (a program built in C). */
pk_status pk_te_check_src(pk_ctx *ctx, pk_te_program *p, const pk_te_src *src);

/* Proves every read in t's body stays inside its tensor (bounds.c). The body must be
 * typed and no deeper than PK_TE_MAX_DEPTH. filename may be NULL. */
pk_status pk_te_check_bounds(pk_ctx *ctx, const pk_te_tensor *t, const char *filename);

/* "FILE:LINE:COL: " for a known position, "" otherwise; in the arena. */
const char *pk_te_where(pk_ctx *ctx, const char *filename, int line, int col);

#endif
