/* emit_c_parallel.c — parallel loops, TVM-style: the loop is outlined into a static
 * function over [begin, end) that the runtime's thread pool runs in chunks through
 * pkrt_exec_ctx.parallel_for (no OpenMP). What the body uses from outside (buffer pointers,
 * outer counters, let values) travels in a closure struct; allocations inside the body are
 * declared in the outlined function, so each thread has its own. */
#include "emit_c_impl.h"

#include <stdio.h>
#include <string.h>

typedef struct capture {
  const pk_lvar **var_used; /* per var id: the variable, when the loop uses it */
  bool *var_def;            /* per var id: defined inside the loop */
  const pk_lbuf **buf_used; /* per buffer id */
  bool *buf_def;            /* per buffer id: allocated inside the loop */
} capture;

static void capture_expr(capture *c, const pk_lexpr *e) {
  if (e->kind == PK_LX_VAR) c->var_used[e->var->id] = e->var;
  if (e->kind == PK_LX_LOAD) c->buf_used[e->buf->id] = e->buf;
  for (int i = 0; i < e->nargs; i++) capture_expr(c, e->args[i]);
}

static void capture_stmt(capture *c, const pk_stmt *s) {
  if (!s) return;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) capture_stmt(c, s->stmts[i]);
    return;
  case PK_ST_FOR:
    c->var_def[s->var->id] = true;
    capture_expr(c, s->min);
    capture_expr(c, s->extent);
    capture_stmt(c, s->body);
    return;
  case PK_ST_IF:
    capture_expr(c, s->cond);
    capture_stmt(c, s->then_);
    capture_stmt(c, s->else_);
    return;
  case PK_ST_STORE:
    c->buf_used[s->buf->id] = s->buf;
    capture_expr(c, s->index);
    capture_expr(c, s->value);
    if (s->mask) capture_expr(c, s->mask);
    return;
  case PK_ST_ALLOC:
    c->buf_def[s->buf->id] = true;
    capture_stmt(c, s->body);
    return;
  case PK_ST_LET:
    c->var_def[s->var->id] = true;
    capture_expr(c, s->value);
    capture_stmt(c, s->body);
    return;
  case PK_ST_BARRIER: return;
  }
}

static const pk_lvar *captured_var(const capture *c, int id) {
  return c->var_def[id] ? NULL : c->var_used[id];
}

static bool read_only(const pk_lbuf *b) {
  return b->scope == PK_SCOPE_GLOBAL && b->tensor && b->tensor->kind == PK_TE_PLACEHOLDER;
}

/* Emits the outlined function; E->out, frame and indent are the kernel's again after. */
static void emit_outlined(cg *E, const pk_stmt *s, const char *fn, const char *env,
                          const capture *c, const pk_lbuf **bufs, int nbufs) {
  const pk_lfunc *f = E->f;
  cg_frame *outer = E->fr;
  pk_strbuf *outer_out = E->out;
  int outer_indent = E->indent;
  cg_frame fr;
  cg_frame_init(E, &fr);
  fr.outlined = true;
  E->fr = &fr;
  E->out = &fr.scopes[0].body;
  E->indent = 0;

  cg_line(E, "typedef struct %s {", env);
  int members = 0;
  for (int i = 0; i < nbufs; i++, members++)
    cg_line(E, "  %s%s *%s;", read_only(bufs[i]) ? "const " : "", cg_buf_elem_type(E, bufs[i]),
            bufs[i]->name);
  for (int id = 0; id < f->nvars; id++)
    if (captured_var(c, id)) {
      members++;
      cg_line(E, "  %s %s;", cg_ctype(c->var_used[id]->dtype), c->var_used[id]->name);
    }
  if (!members) cg_line(E, "  char pk_unused;");
  cg_line(E, "} %s;", env);
  cg_line(E, "static int %s(int64_t pk_begin, int64_t pk_end, void *pk_closure) {", fn);
  E->indent = 1;
  cg_line(E, "const %s *pk_env = (const %s *)pk_closure;", env, env);
  for (int i = 0; i < nbufs; i++) {
    const pk_lbuf *b = bufs[i];
    const char *q = read_only(b) ? "const " : "", *t = cg_buf_elem_type(E, b);
    bool may_alias = E->f->params_may_alias && b->scope == PK_SCOPE_GLOBAL;
    cg_line(E, "%s%s *%s%s = pk_env->%s;", q, t, may_alias ? "" : "restrict ", b->name, b->name);
  }
  for (int id = 0; id < f->nvars; id++) {
    const pk_lvar *v = captured_var(c, id);
    if (v) cg_line(E, "const %s %s = pk_env->%s;", cg_ctype(v->dtype), v->name, v->name);
  }
  cg_scope_open(E); /* the captured values are defined at its top, before its temporaries */
  for (int id = 0; id < f->nvars; id++) {
    const pk_lvar *v = captured_var(c, id);
    if (!v) continue;
    cg_define_var(E, v);
    fr.var_known[id] = outer->var_known[id]; /* an unrolled counter stays a constant */
    fr.var_value[id] = outer->var_value[id];
  }
  const char *v = s->var->name, *min = cg_x(E, s->min);
  if (s->min->kind == PK_LX_INT && s->min->ival == 0)
    cg_line(E, "for (int64_t %s = pk_begin; %s < pk_end; ++%s) {", v, v, v);
  else
    cg_line(E, "for (int64_t %s = (%s) + pk_begin; %s < (%s) + pk_end; ++%s) {", v, min, v, min, v);
  E->indent++;
  cg_scope_open(E);
  cg_define_var(E, s->var);
  cg_stmt(E, s->body);
  cg_scope_close(E);
  E->indent--;
  cg_line(E, "}");
  cg_scope_close(E);
  cg_line(E, "return 0;");
  cg_frame_finish_function(E, &fr);
  E->fr = outer;
  E->out = outer_out;
  E->indent = outer_indent;
}

void cg_parallel_loop(cg *E, const pk_stmt *s) {
  if (E->fr->outlined) {
    cg_serial_loop(E, s, "inside another parallel loop (the pool would run it inline anyway)");
    return;
  }
  const pk_lfunc *f = E->f;
  capture c = {pk_alloc(E->ctx, sizeof(pk_lvar *) * (size_t)(f->nvars + 1)),
               pk_alloc(E->ctx, (size_t)f->nvars + 1),
               pk_alloc(E->ctx, sizeof(pk_lbuf *) * (size_t)(f->nbufs + 1)),
               pk_alloc(E->ctx, (size_t)f->nbufs + 1)};
  c.var_def[s->var->id] = true;
  capture_expr(&c, s->min);
  capture_stmt(&c, s->body);
  for (int id = 0; id < f->nvars; id++)
    if (captured_var(&c, id) && E->fr->var_level[id] == 0) {
      cg_unsupported(E, "a parallel loop using a variable defined nowhere around it");
      return;
    }
  const pk_lbuf **bufs = pk_alloc(E->ctx, sizeof(pk_lbuf *) * (size_t)(f->nbufs + 1));
  int nbufs = 0;
  for (int id = 0; id < f->nbufs; id++) {
    const pk_lbuf *b = c.buf_used[id];
    if (!b || c.buf_def[id]) continue;
    if (E->buf_kind[id] == CG_BUF_PRIVATE) {
      cg_unsupported(E, "a parallel loop inside a vectorized one");
      return;
    }
    bufs[nbufs++] = b;
  }
  const char *fn = pk_sprintf(E->ctx, "%s_par%d", f->name, E->npar++);
  const char *env = pk_sprintf(E->ctx, "%s_env", fn);
  emit_outlined(E, s, fn, env, &c, bufs, nbufs);

  /* Without a pool (one thread) the loop runs inline, as a serial loop would: through the
   * closure it costs what a thread would have saved (the one-thread steps of issue 23's
   * parallel-preset experiment lost up to 47%). */
  cg_line(E, "if (!pk_exec->pool) {");
  E->indent++;
  cg_serial_loop(E, s, NULL);
  E->indent--;
  cg_line(E, "} else { /* parallel loop %s: chunks of its range run on the runtime's thread "
          "pool */", s->var->name);
  E->indent++;
  pk_strbuf init;
  pk_strbuf_init(&init);
  for (int i = 0; i < nbufs; i++)
    pk_strbuf_printf(&init, "%s.%s = %s", init.len ? ", " : "", bufs[i]->name, bufs[i]->name);
  for (int id = 0; id < f->nvars; id++) {
    const pk_lvar *v = captured_var(&c, id);
    if (v) pk_strbuf_printf(&init, "%s.%s = %s", init.len ? ", " : "", v->name, v->name);
  }
  cg_line(E, "%s pk_env = {%s};", env, init.len ? init.data : "0");
  pk_strbuf_free(&init);
  cg_line(E, "if (pk_exec->parallel_for(pk_exec, %s, %s, &pk_env) != 0) return PKRT_KERNEL_FAILED;",
          cg_x(E, s->extent), fn);
  E->indent--;
  cg_line(E, "}");
}
