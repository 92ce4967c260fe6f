/* loopir.c — constructors and the text printer of the loop IR. Index helpers fold
 * constants so that lowered indices stay short and readable in the emitted C. */
#include "pk_loopir.h"

#include <inttypes.h>
#include <string.h>

const char *pk_loop_kind_name(pk_loop_kind k) {
  static const char *const names[] = {"serial", "parallel", "vectorized", "unrolled",
                                      "blockIdx.x", "blockIdx.y", "blockIdx.z",
                                      "threadIdx.x", "threadIdx.y", "threadIdx.z"};
  return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

const char *pk_mem_scope_name(pk_mem_scope s) {
  static const char *const names[] = {"global", "workspace", "local", "shared"};
  return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

pk_lfunc *pk_lfunc_new(pk_ctx *ctx, const char *name) {
  pk_lfunc *f = pk_alloc(ctx, sizeof *f);
  f->name = pk_strdup(ctx, name);
  return f;
}

pk_lvar *pk_lvar_new(pk_ctx *ctx, pk_lfunc *f, pkrt_dtype dtype) {
  pk_lvar *v = pk_alloc(ctx, sizeof *v);
  v->id = f->nvars++;
  v->name = pk_sprintf(ctx, "v%d", v->id);
  v->dtype = dtype;
  return v;
}

pk_lbuf *pk_lbuf_new(pk_ctx *ctx, pk_lfunc *f, pkrt_dtype dtype, pk_mem_scope scope, int ndim,
                     const int64_t *shape) {
  PK_ASSERT(ndim >= 0 && ndim <= PK_TE_MAX_DIMS);
  pk_lbuf *b = pk_alloc(ctx, sizeof *b);
  b->id = f->nbufs++;
  b->name = pk_sprintf(ctx, "b%d", b->id);
  b->dtype = dtype;
  b->scope = scope;
  b->ndim = ndim;
  b->param = -1;
  int64_t stride = 1;
  for (int d = ndim - 1; d >= 0; d--) { /* row-major; the checker proved no overflow */
    b->shape[d] = shape[d];
    b->strides[d] = stride;
    stride *= shape[d];
  }
  b->numel = stride;
  return b;
}

static pk_lexpr *lx_new(pk_ctx *ctx, pk_lexpr_kind k, pkrt_dtype t, int nargs) {
  pk_lexpr *e = pk_alloc(ctx, sizeof *e);
  e->kind = k;
  e->dtype = t;
  e->nargs = nargs;
  if (nargs) e->args = pk_alloc(ctx, sizeof(pk_lexpr *) * (size_t)nargs);
  return e;
}

pk_lexpr *pk_lx_int(pk_ctx *ctx, int64_t v) {
  pk_lexpr *e = lx_new(ctx, PK_LX_INT, PKRT_DTYPE_I64, 0);
  e->ival = v;
  e->index_math = true;
  return e;
}

pk_lexpr *pk_lx_float(pk_ctx *ctx, double v, pkrt_dtype t) {
  pk_lexpr *e = lx_new(ctx, PK_LX_FLOAT, t, 0);
  e->fval = v;
  return e;
}

pk_lexpr *pk_lx_var(pk_ctx *ctx, pk_lvar *v) {
  pk_lexpr *e = lx_new(ctx, PK_LX_VAR, v->dtype, 0);
  e->var = v;
  e->index_math = true;
  return e;
}

pk_lexpr *pk_lx_load(pk_ctx *ctx, pk_lbuf *b, pk_lexpr *index) {
  pk_lexpr *e = lx_new(ctx, PK_LX_LOAD, b->dtype, 1);
  e->buf = b;
  e->args[0] = index;
  return e;
}

pk_lexpr *pk_lx_unary(pk_ctx *ctx, pk_eop op, pk_lexpr *a, pkrt_dtype t) {
  pk_lexpr *e = lx_new(ctx, PK_LX_UNARY, t, 1);
  e->op = op;
  e->args[0] = a;
  return e;
}

pk_lexpr *pk_lx_binary(pk_ctx *ctx, pk_eop op, pk_lexpr *a, pk_lexpr *b, pkrt_dtype t) {
  pk_lexpr *e = lx_new(ctx, PK_LX_BINARY, t, 2);
  e->op = op;
  e->args[0] = a;
  e->args[1] = b;
  return e;
}

pk_lexpr *pk_lx_select(pk_ctx *ctx, pk_lexpr *c, pk_lexpr *a, pk_lexpr *b) {
  pk_lexpr *e = lx_new(ctx, PK_LX_SELECT, a->dtype, 3);
  e->args[0] = c;
  e->args[1] = a;
  e->args[2] = b;
  return e;
}

pk_lexpr *pk_lx_call(pk_ctx *ctx, pk_eop op, int nargs, pk_lexpr **args, pkrt_dtype t) {
  pk_lexpr *e = lx_new(ctx, PK_LX_CALL, t, nargs);
  e->op = op;
  memcpy(e->args, args, sizeof(pk_lexpr *) * (size_t)nargs);
  return e;
}

pk_lexpr *pk_lx_cast(pk_ctx *ctx, pkrt_dtype to, pk_lexpr *a) {
  pk_lexpr *e = lx_new(ctx, PK_LX_CAST, to, 1);
  e->args[0] = a;
  return e;
}

static bool is_const(const pk_lexpr *e, int64_t v) { return e->kind == PK_LX_INT && e->ival == v; }

pk_lexpr *pk_lx_index_add(pk_ctx *ctx, pk_lexpr *a, pk_lexpr *b) {
  if (is_const(a, 0)) return b;
  if (is_const(b, 0)) return a;
  if (a->kind == PK_LX_INT && b->kind == PK_LX_INT) return pk_lx_int(ctx, a->ival + b->ival);
  pk_lexpr *e = pk_lx_binary(ctx, PK_EOP_ADD, a, b, PKRT_DTYPE_I64);
  e->index_math = true;
  return e;
}

pk_lexpr *pk_lx_index_mul(pk_ctx *ctx, pk_lexpr *a, int64_t c) {
  if (c == 0) return pk_lx_int(ctx, 0);
  if (c == 1) return a;
  if (a->kind == PK_LX_INT) return pk_lx_int(ctx, a->ival * c);
  pk_lexpr *e = pk_lx_binary(ctx, PK_EOP_MUL, a, pk_lx_int(ctx, c), PKRT_DTYPE_I64);
  e->index_math = true;
  return e;
}

static pk_stmt *st_new(pk_ctx *ctx, pk_stmt_kind k) {
  pk_stmt *s = pk_alloc(ctx, sizeof *s);
  s->kind = k;
  return s;
}

pk_stmt *pk_st_seq(pk_ctx *ctx, int n, pk_stmt **stmts) {
  pk_stmt *s = st_new(ctx, PK_ST_SEQ);
  s->n = n;
  s->stmts = pk_alloc(ctx, sizeof(pk_stmt *) * (size_t)(n ? n : 1));
  if (n) memcpy(s->stmts, stmts, sizeof(pk_stmt *) * (size_t)n);
  return s;
}

pk_stmt *pk_st_for(pk_ctx *ctx, pk_lvar *v, pk_lexpr *min, pk_lexpr *extent, pk_loop_kind k,
                   pk_stmt *body) {
  pk_stmt *s = st_new(ctx, PK_ST_FOR);
  s->var = v;
  s->min = min;
  s->extent = extent;
  s->loop = k;
  s->body = body;
  return s;
}

pk_stmt *pk_st_if(pk_ctx *ctx, pk_lexpr *cond, pk_stmt *then_, pk_stmt *else_) {
  pk_stmt *s = st_new(ctx, PK_ST_IF);
  s->cond = cond;
  s->then_ = then_;
  s->else_ = else_;
  return s;
}

pk_stmt *pk_st_store(pk_ctx *ctx, pk_lbuf *b, pk_lexpr *index, pk_lexpr *value) {
  pk_stmt *s = st_new(ctx, PK_ST_STORE);
  s->buf = b;
  s->index = index;
  s->value = value;
  return s;
}

pk_stmt *pk_st_alloc(pk_ctx *ctx, pk_lbuf *b, pk_stmt *body) {
  pk_stmt *s = st_new(ctx, PK_ST_ALLOC);
  s->buf = b;
  s->body = body;
  return s;
}

pk_stmt *pk_st_let(pk_ctx *ctx, pk_lvar *v, pk_lexpr *value, pk_stmt *body) {
  pk_stmt *s = st_new(ctx, PK_ST_LET);
  s->var = v;
  s->value = value;
  s->body = body;
  return s;
}

pk_stmt *pk_st_barrier(pk_ctx *ctx) { return st_new(ctx, PK_ST_BARRIER); }

/* ---- printer ---- */

static void print_lexpr(pk_strbuf *sb, const pk_lexpr *e) {
  switch (e->kind) {
  case PK_LX_INT: pk_strbuf_printf(sb, "%" PRId64, e->ival); return;
  case PK_LX_FLOAT: pk_strbuf_printf(sb, "%.17g", e->fval); return;
  case PK_LX_VAR: pk_strbuf_append(sb, e->var->name); return;
  case PK_LX_LOAD:
    pk_strbuf_printf(sb, "%s[", e->buf->name);
    print_lexpr(sb, e->args[0]);
    pk_strbuf_append(sb, "]");
    return;
  case PK_LX_UNARY:
    pk_strbuf_append(sb, pk_eop_name(e->op));
    print_lexpr(sb, e->args[0]);
    return;
  case PK_LX_BINARY:
    pk_strbuf_append(sb, "(");
    print_lexpr(sb, e->args[0]);
    pk_strbuf_printf(sb, " %s ", pk_eop_name(e->op));
    print_lexpr(sb, e->args[1]);
    pk_strbuf_append(sb, ")");
    return;
  case PK_LX_SELECT:
  case PK_LX_CALL:
  case PK_LX_CAST:
    pk_strbuf_append(sb, e->kind == PK_LX_SELECT ? "select"
                         : e->kind == PK_LX_CAST ? pkrt_dtype_name(e->dtype)
                                                 : pk_eop_name(e->op));
    pk_strbuf_append(sb, "(");
    for (int i = 0; i < e->nargs; i++) {
      if (i) pk_strbuf_append(sb, ", ");
      print_lexpr(sb, e->args[i]);
    }
    pk_strbuf_append(sb, ")");
    return;
  }
}

static void indent(pk_strbuf *sb, int depth) {
  for (int i = 0; i < depth; i++) pk_strbuf_append(sb, "  ");
}

static void print_stmt(pk_strbuf *sb, const pk_stmt *s, int depth) {
  if (!s) return;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) print_stmt(sb, s->stmts[i], depth);
    return;
  case PK_ST_FOR:
    indent(sb, depth);
    pk_strbuf_printf(sb, "for %s in [", s->var->name);
    print_lexpr(sb, s->min);
    pk_strbuf_append(sb, ", +");
    print_lexpr(sb, s->extent);
    pk_strbuf_printf(sb, ") %s", pk_loop_kind_name(s->loop));
    if (s->annotation) pk_strbuf_printf(sb, "(%" PRId64 ")", s->annotation);
    pk_strbuf_append(sb, ":\n");
    print_stmt(sb, s->body, depth + 1);
    return;
  case PK_ST_IF:
    indent(sb, depth);
    pk_strbuf_append(sb, "if ");
    print_lexpr(sb, s->cond);
    pk_strbuf_append(sb, ":\n");
    print_stmt(sb, s->then_, depth + 1);
    if (s->else_) {
      indent(sb, depth);
      pk_strbuf_append(sb, "else:\n");
      print_stmt(sb, s->else_, depth + 1);
    }
    return;
  case PK_ST_STORE:
    indent(sb, depth);
    pk_strbuf_printf(sb, "%s[", s->buf->name);
    print_lexpr(sb, s->index);
    pk_strbuf_append(sb, "] = ");
    print_lexpr(sb, s->value);
    if (s->mask) {
      pk_strbuf_append(sb, " where ");
      print_lexpr(sb, s->mask);
    }
    pk_strbuf_append(sb, "\n");
    return;
  case PK_ST_ALLOC:
    indent(sb, depth);
    pk_strbuf_printf(sb, "alloc %s: %s[%" PRId64 "] %s\n", s->buf->name,
                     pkrt_dtype_name(s->buf->dtype), s->buf->numel,
                     pk_mem_scope_name(s->buf->scope));
    print_stmt(sb, s->body, depth);
    return;
  case PK_ST_LET:
    indent(sb, depth);
    pk_strbuf_printf(sb, "let %s = ", s->var->name);
    print_lexpr(sb, s->value);
    pk_strbuf_append(sb, "\n");
    print_stmt(sb, s->body, depth);
    return;
  case PK_ST_BARRIER:
    indent(sb, depth);
    pk_strbuf_append(sb, "barrier\n");
    return;
  }
}

char *pk_lfunc_print(pk_ctx *ctx, const pk_lfunc *f) {
  pk_strbuf sb;
  pk_strbuf_init(&sb);
  pk_strbuf_printf(&sb, "func %s(", f->name);
  for (int i = 0; i < f->nparams; i++) {
    const pk_lbuf *b = f->params[i];
    pk_strbuf_printf(&sb, "%s%s: %s[", i ? ", " : "", b->name, pkrt_dtype_name(b->dtype));
    for (int d = 0; d < b->ndim; d++)
      pk_strbuf_printf(&sb, "%s%" PRId64, d ? ", " : "", b->shape[d]);
    pk_strbuf_append(&sb, "]");
  }
  pk_strbuf_printf(&sb, ") workspace %" PRId64 ":\n", f->workspace_bytes);
  print_stmt(&sb, f->body, 1);
  return pk_strbuf_finish(ctx, &sb);
}
