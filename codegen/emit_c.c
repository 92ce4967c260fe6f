/* emit_c.c — loop IR → one self-contained C source holding several kernels and the
 * module's descriptor table (the only exported symbol): the module, kernel prologues,
 * scopes, and scalar statements. Expressions, indices, parallel and vector loops live in
 * the other emit_c_*.c files (emit_c_impl.h lists them). Identifiers come from the IR
 * (Pock-made names); the only user-derived text is the canonical TE in comments, which
 * holds no user names and is escaped anyway. */
#include "emit_c_impl.h"
#include "pk_gpu.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

extern const char pk_cgen_abi_header[];  /* include/pock/pkrt_kernel.h, embedded by CMake */
extern const char pk_cgen_c_prelude[];   /* codegen/c_prelude.h, embedded by CMake */

const char *cg_ctype(pkrt_dtype t) {
  switch (t) {
  case PKRT_DTYPE_F32: return "float";
  case PKRT_DTYPE_F64: return "double";
  case PKRT_DTYPE_I32: return "int32_t";
  case PKRT_DTYPE_I64: return "int64_t";
  case PKRT_DTYPE_BOOL: return "int";
  default: return NULL;
  }
}

/* Suffix of the prelude's typed helpers: pk_add_i64, pk_max_f32, pk_f32x16, ... */
const char *cg_tsuffix(pkrt_dtype t) {
  switch (t) {
  case PKRT_DTYPE_F32: return "f32";
  case PKRT_DTYPE_F64: return "f64";
  case PKRT_DTYPE_I32: return "i32";
  default: return "i64";
  }
}

void cg_unsupported(cg *E, const char *what) {
  if (E->status == PK_OK)
    E->status = pk_ctx_fail(E->ctx, PK_ERR_UNSUPPORTED, "the C backend cannot emit %s", what);
}

void cg_line(cg *E, const char *fmt, ...) {
  for (int i = 0; i < E->indent; i++) pk_strbuf_append(E->out, "  ");
  va_list ap;
  va_start(ap, fmt);
  char small[512];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < (int)sizeof small) {
    pk_strbuf_append(E->out, small);
  } else {
    char *big = pk_alloc(E->ctx, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    pk_strbuf_append(E->out, big);
  }
  pk_strbuf_append(E->out, "\n");
}

const char *cg_fresh(cg *E, const char *prefix) {
  return pk_sprintf(E->ctx, "%s%d", prefix, E->next_name++);
}

/* ---- scopes ----
 * Each loop body, let body and unrolled iteration is a scope: its text is buffered so that
 * index arithmetic found invariant inside it can be declared at its top (emit_c_index.c)
 * once the whole body has been seen. */

/* A fresh frame; scope 0's body is the function's own text. */
void cg_frame_init(cg *E, cg_frame *fr) {
  memset(fr, 0, sizeof *fr);
  size_t n = (size_t)E->f->nvars + 1;
  fr->var_level = pk_alloc(E->ctx, sizeof(int) * n);
  fr->var_known = pk_alloc(E->ctx, sizeof(bool) * n);
  fr->var_value = pk_alloc(E->ctx, sizeof(int64_t) * n);
  fr->unroll_copies = 1;
  pk_strbuf_init(&fr->scopes[0].temps);
  pk_strbuf_init(&fr->scopes[0].body);
}

/* Frees every text the frame still holds, the function's own included. */
void cg_frame_free(cg_frame *fr) {
  for (int d = 0; d <= fr->depth; d++) {
    pk_strbuf_free(&fr->scopes[d].temps);
    pk_strbuf_free(&fr->scopes[d].body);
  }
  fr->depth = 0;
}

void cg_frame_finish_function(cg *E, cg_frame *fr) {
  pk_strbuf_append(E->out, "}\n\n");
  if (E->status == PK_OK)
    pk_strbuf_appendn(&E->functions, fr->scopes[0].body.data, fr->scopes[0].body.len);
  cg_frame_free(fr);
}

/* Scope 0 is the function's own text; scope d's text goes to scope d-1's when it closes. */
void cg_scope_open(cg *E) {
  cg_frame *fr = E->fr;
  if (fr->depth == CG_MAX_DEPTH) { /* emission stops; keep opens and closes paired */
    cg_unsupported(E, "loop nests deeper than 64 scopes");
    fr->overflow++;
    return;
  }
  cg_scope *sc = &fr->scopes[++fr->depth];
  pk_strbuf_init(&sc->temps);
  pk_strbuf_init(&sc->body);
  sc->indent = E->indent;
  E->out = &sc->body;
}

void cg_scope_close(cg *E) {
  cg_frame *fr = E->fr;
  if (fr->overflow) { fr->overflow--; return; }
  cg_scope *sc = &fr->scopes[fr->depth];
  pk_strbuf *parent = &fr->scopes[fr->depth - 1].body;
  if (sc->temps.len) pk_strbuf_appendn(parent, sc->temps.data, sc->temps.len);
  if (sc->body.len) pk_strbuf_appendn(parent, sc->body.data, sc->body.len);
  pk_strbuf_free(&sc->temps);
  pk_strbuf_free(&sc->body);
  cg_temps_drop_level(E, fr->depth);
  fr->depth--;
  E->out = parent;
}

void cg_define_var(cg *E, const pk_lvar *v) {
  E->fr->var_level[v->id] = E->fr->depth;
  E->fr->var_known[v->id] = false;
}

/* ---- loops ---- */

bool cg_const_extent(const pk_stmt *s, int64_t *extent) {
  if (s->extent->kind != PK_LX_INT) return false;
  *extent = s->extent->ival;
  return true;
}

void cg_for_header(cg *E, const pk_stmt *s) {
  const char *v = s->var->name;
  const char *min = cg_x(E, s->min), *ext = cg_x(E, s->extent);
  if (s->min->kind == PK_LX_INT && s->min->ival == 0)
    cg_line(E, "for (int64_t %s = 0; %s < %s; ++%s) {", v, v, ext, v);
  else
    cg_line(E, "for (int64_t %s = %s; %s < (%s) + (%s); ++%s) {", v, min, v, min, ext, v);
}

void cg_serial_loop(cg *E, const pk_stmt *s, const char *why) {
  if (why)
    cg_line(E, "/* %s loop %s runs serially: %s */", pk_loop_kind_name(s->loop), s->var->name, why);
  cg_for_header(E, s);
  E->indent++;
  cg_scope_open(E);
  cg_define_var(E, s->var);
  cg_stmt(E, s->body);
  cg_scope_close(E);
  E->indent--;
  cg_line(E, "}");
}

/* The body once per iteration, the counter a constant in each copy: register tiles indexed
 * by it get constant indices, which is what lets GCC keep them in registers. */
void cg_unrolled_loop(cg *E, const pk_stmt *s, void (*body)(cg *, const pk_stmt *, void *),
                      void *arg) {
  int64_t n;
  PK_ASSERT(cg_const_extent(s, &n));
  cg_frame *fr = E->fr;
  bool known = s->min->kind == PK_LX_INT;
  const char *min = cg_x(E, s->min);
  int saved_copies = fr->unroll_copies;
  fr->unroll_copies *= (int)(n > 0 ? n : 1);
  for (int64_t it = 0; it < n && E->status == PK_OK; it++) {
    cg_line(E, "{");
    E->indent++;
    if (known)
      cg_line(E, "const int64_t %s = %s;", s->var->name,
              cg_int_text(E, s->min->ival + it, PKRT_DTYPE_I64));
    else
      cg_line(E, "const int64_t %s = (%s) + %" PRId64 ";", s->var->name, min, it);
    cg_scope_open(E);
    cg_define_var(E, s->var);
    fr->var_known[s->var->id] = known;
    fr->var_value[s->var->id] = known ? s->min->ival + it : 0;
    if (body) body(E, s->body, arg);
    else cg_stmt(E, s->body);
    fr->var_known[s->var->id] = false;
    cg_scope_close(E);
    E->indent--;
    cg_line(E, "}");
  }
  fr->unroll_copies = saved_copies;
}

/* annotation 0 or at least the extent asks for every iteration; a constant extent up to
 * 64 and a bounded number of copies of the innermost body allow it. */
bool cg_full_unroll(cg *E, const pk_stmt *s) {
  int64_t n;
  return cg_const_extent(s, &n) && n <= 64 && (s->annotation == 0 || s->annotation >= n) &&
         (int64_t)E->fr->unroll_copies * n <= CG_UNROLL_BUDGET;
}

static void unroll_loop(cg *E, const pk_stmt *s) {
  int64_t n;
  bool full = cg_full_unroll(E, s);
  if (full) {
    cg_line(E, "/* %s unrolled */", s->var->name);
    cg_unrolled_loop(E, s, NULL, NULL);
    return;
  }
  int64_t factor = s->annotation > 0 ? s->annotation : cg_const_extent(s, &n) && n <= 64 ? n : 8;
  if (factor > 65534) factor = 65534; /* GCC's limit */
  cg_line(E, "#pragma GCC unroll %" PRId64, factor);
  cg_serial_loop(E, s, NULL);
}

static void emit_for(cg *E, const pk_stmt *s) {
  switch (s->loop) {
  case PK_LOOP_SERIAL: cg_serial_loop(E, s, NULL); return;
  case PK_LOOP_UNROLLED: unroll_loop(E, s); return;
  case PK_LOOP_PARALLEL: cg_parallel_loop(E, s); return;
  case PK_LOOP_VECTORIZED: cg_vector_loop(E, s); return;
  default:
    cg_unsupported(E, "loops bound to GPU blocks or threads: bind is for GPU targets; the C "
                      "backend runs on the CPU");
    return;
  }
}

/* ---- buffers ---- */

const char *cg_buf_elem_type(cg *E, const pk_lbuf *b) {
  if (E->buf_kind[b->id] == CG_BUF_PLAIN) return cg_ctype(b->dtype);
  return cg_vec_type(E, b->dtype, E->buf_lanes[b->id]);
}

static void emit_alloc(cg *E, const pk_stmt *s) {
  const pk_lbuf *b = s->buf;
  const char *ct = cg_ctype(b->dtype);
  if (!ct || b->dtype == PKRT_DTYPE_BOOL) { cg_unsupported(E, "buffers of this dtype"); return; }
  cg_line(E, "{");
  E->indent++;
  switch (b->scope) {
  case PK_SCOPE_LOCAL: {
    int lanes = cg_vector_tile_lanes(E, b, s->body);
    if (lanes) {
      E->buf_kind[b->id] = CG_BUF_VECTORS;
      E->buf_lanes[b->id] = lanes;
      cg_line(E, "%s %s[%" PRId64 "]; /* a register tile: only vector loops touch it */",
              cg_vec_type(E, b->dtype, lanes), b->name, b->numel / lanes);
    } else if (b->numel * (int64_t)pkrt_dtype_size(b->dtype) >= 64) {
      cg_line(E, "%s %s[%" PRId64 "] __attribute__((aligned(64)));", ct, b->name, b->numel);
    } else {
      cg_line(E, "%s %s[%" PRId64 "];", ct, b->name, b->numel);
    }
    break;
  }
  case PK_SCOPE_WORKSPACE:
    /* Workspace slices are disjoint while they live (the planner's contract), so restrict
     * holds; the caller's workspace is 64-byte aligned (the ABI's contract). */
    cg_line(E, "%s *restrict %s = (%s *)((char *)__builtin_assume_aligned(pk_workspace, 64) + "
               "%" PRId64 ");", ct, b->name, ct, b->ws_offset);
    break;
  default:
    cg_unsupported(E, "shared memory: it is for GPU targets; the C backend runs on the CPU");
    break;
  }
  cg_stmt(E, s->body);
  E->buf_kind[b->id] = CG_BUF_PLAIN;
  E->indent--;
  cg_line(E, "}");
}

/* ---- statements ---- */

static void emit_let(cg *E, const pk_stmt *s) {
  const char *ct = cg_ctype(s->var->dtype);
  if (!ct) { cg_unsupported(E, "lets of this dtype"); return; }
  cg_line(E, "{");
  E->indent++;
  cg_line(E, "const %s %s = %s;", ct, s->var->name, cg_x(E, s->value));
  cg_scope_open(E);
  cg_define_var(E, s->var);
  cg_stmt(E, s->body);
  cg_scope_close(E);
  E->indent--;
  cg_line(E, "}");
}

void cg_stmt(cg *E, const pk_stmt *s) {
  if (!s || E->status != PK_OK) return;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) cg_stmt(E, s->stmts[i]);
    return;
  case PK_ST_FOR: emit_for(E, s); return;
  case PK_ST_IF:
    cg_line(E, "if (%s) {", cg_x(E, s->cond));
    E->indent++;
    cg_stmt(E, s->then_);
    E->indent--;
    if (s->else_) {
      cg_line(E, "} else {");
      E->indent++;
      cg_stmt(E, s->else_);
      E->indent--;
    }
    cg_line(E, "}");
    return;
  case PK_ST_STORE: {
    const char *dst = cg_elem(E, s->buf, cg_index(E, s->index));
    const char *val = cg_x(E, s->value);
    if (s->mask) cg_line(E, "if (%s) %s = %s;", cg_x(E, s->mask), dst, val);
    else cg_line(E, "%s = %s;", dst, val);
    return;
  }
  case PK_ST_ALLOC: emit_alloc(E, s); return;
  case PK_ST_LET: emit_let(E, s); return;
  case PK_ST_BARRIER:
    cg_unsupported(E, "barriers: they synchronise GPU threads; the C backend runs on the CPU");
    return;
  }
}

/* ---- kernels and the module ---- */

/* The canonical TE text has no user names; still, nothing may close the comment early. */
static void emit_comment_text(pk_strbuf *out, const char *text) {
  pk_strbuf_append(out, "/*\n");
  for (const char *p = text; *p; p++) {
    if (p[0] == '*' && p[1] == '/') { pk_strbuf_append(out, "* /"); p++; continue; }
    pk_strbuf_appendn(out, p, 1);
  }
  pk_strbuf_append(out, "*/\n");
}

static void emit_shape_array(cg *E, const char *what, const pk_lbuf *b, const int64_t *v) {
  pk_strbuf_printf(E->out, "  static const int64_t %s_%s[] = {", b->name, what);
  for (int d = 0; d < b->ndim; d++) pk_strbuf_printf(E->out, "%s%" PRId64, d ? ", " : "", v[d]);
  pk_strbuf_printf(E->out, "%s};\n", b->ndim ? "" : "0");
}

static void emit_function(cg *E, const pk_lfunc *f) {
  E->f = f;
  E->npar = 0;
  E->next_name = 0;
  E->buf_kind = pk_alloc(E->ctx, sizeof(cg_buf_kind) * (size_t)(f->nbufs + 1));
  E->buf_lanes = pk_alloc(E->ctx, sizeof(int) * (size_t)(f->nbufs + 1));
  E->buf_parts = pk_alloc(E->ctx, sizeof(int) * (size_t)(f->nbufs + 1));
  cg_frame fr;
  cg_frame_init(E, &fr);
  E->fr = &fr;
  E->out = &fr.scopes[0].body;
  E->indent = 1;

  if (f->te_text) emit_comment_text(E->out, f->te_text);
  pk_strbuf_printf(E->out,
       "static int %s(const pkrt_buffer *pk_bufs, int32_t pk_nbufs, const int64_t *pk_scalars,\n"
       "    int32_t pk_nscalars, void *pk_workspace, pkrt_exec_ctx *pk_exec) {\n", f->name);
  cg_line(E, "(void)pk_scalars; (void)pk_workspace; (void)pk_exec;");
  cg_line(E, "if (pk_nbufs != %d || pk_nscalars != %d) return PKRT_KERNEL_BAD_ARGS;", f->nparams,
          f->nscalars);
  if (f->workspace_bytes > 0) cg_line(E, "if (!pk_workspace) return PKRT_KERNEL_BAD_ARGS;");
  for (int i = 0; i < f->nparams; i++) {
    const pk_lbuf *b = f->params[i];
    const char *ct = cg_ctype(b->dtype);
    if (!ct || b->dtype == PKRT_DTYPE_BOOL) { cg_unsupported(E, "buffers of this dtype"); break; }
    emit_shape_array(E, "shape", b, b->shape);
    emit_shape_array(E, "strides", b, b->strides);
    cg_line(E, "if (!pk_buffer_ok(&pk_bufs[%d], %d, %d, %s_shape, %s_strides)) "
               "return PKRT_KERNEL_BAD_ARGS;", b->param, (int)b->dtype, b->ndim, b->name, b->name);
    /* Inputs are only read; buffers of one call never overlap (the caller's contract),
     * except in an in-place variant, which gets no restrict. */
    const char *q = b->tensor && b->tensor->kind == PK_TE_PLACEHOLDER ? "const " : "";
    cg_line(E, "%s%s *%s%s = (%s%s *)pk_bufs[%d].data + pk_bufs[%d].offset;", q, ct,
            f->params_may_alias ? "" : "restrict ", b->name, q, ct, b->param, b->param);
  }
  cg_scope_open(E);
  cg_stmt(E, f->body);
  cg_scope_close(E);
  cg_line(E, "return PKRT_KERNEL_OK;");
  cg_frame_finish_function(E, &fr);
  E->fr = NULL;
  E->out = NULL;
}

/* A source being assembled: one emitter state shared by its kernels (vector helpers are
 * instantiated once per source), the kernels added so far, and how much C each one made
 * (a build that runs too long names the largest). */
struct pk_cgen_unit {
  cg E;
  int n, cap;
  const pk_lfunc **funcs;
  const char **labels;
  size_t *bytes;
  pk_gpu_unit *gpu; /* a GPU target's unit: every call below forwards to it (emit_gpu.c) */
};

pk_status pk_cgen_unit_new_gpu(pk_ctx *ctx, const pk_target *t, pk_cgen_unit **out) {
  pk_cgen_unit *u = pk_alloc(ctx, sizeof *u);
  memset(u, 0, sizeof *u);
  u->E.ctx = ctx;
  pk_status s = pk_gpu_unit_new(ctx, t, &u->gpu);
  if (s != PK_OK) return s;
  *out = u;
  return PK_OK;
}

const pk_gpu_kernel *pk_cgen_unit_gpu_kernel(const pk_cgen_unit *u, int i) {
  return u->gpu ? pk_gpu_unit_kernel(u->gpu, i) : NULL;
}

pk_status pk_cgen_unit_new(pk_ctx *ctx, const pk_cgen_c_options *opts, pk_cgen_unit **out) {
  int vector_bytes = opts ? opts->vector_bytes : 0;
  if (!vector_bytes) {
    const pk_target *t = opts ? opts->target : NULL;
    pk_target *native;
    if (!t) {
      pk_status s = pk_target_native(ctx, &native);
      if (s != PK_OK) return s;
      t = native;
    }
    vector_bytes = t->vector_bytes;
  }
  if (vector_bytes < 8 || vector_bytes > 256 || (vector_bytes & (vector_bytes - 1)))
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "vector_bytes must be a power of two in 8..256, not %d",
                       vector_bytes);
  pk_cgen_unit *u = pk_alloc(ctx, sizeof *u);
  memset(u, 0, sizeof *u);
  u->E.ctx = ctx;
  u->E.vector_bytes = vector_bytes;
  pk_strbuf_init(&u->E.helpers);
  pk_strbuf_init(&u->E.functions);
  *out = u;
  return PK_OK;
}

/* A strbuf cut back to len bytes (what a failed kernel added is dropped). */
static void strbuf_truncate(pk_strbuf *b, size_t len) {
  if (b->len <= len) return;
  b->len = len;
  b->data[len] = '\0';
}

pk_status pk_cgen_unit_add(pk_cgen_unit *u, const pk_lfunc *f, const char *label) {
  if (u->gpu) return pk_gpu_unit_add(u->gpu, f, label);
  cg *E = &u->E;
  size_t helpers = E->helpers.len, functions = E->functions.len;
  int nhelpers = E->nhelpers;
  E->status = PK_OK;
  emit_function(E, f);
  if (E->status != PK_OK) {
    strbuf_truncate(&E->helpers, helpers);
    strbuf_truncate(&E->functions, functions);
    E->nhelpers = nhelpers;
    return E->status;
  }
  if (u->n == u->cap) {
    int cap = u->cap ? 2 * u->cap : 8;
    const pk_lfunc **funcs = pk_alloc(E->ctx, sizeof *funcs * (size_t)cap);
    const char **labels = pk_alloc(E->ctx, sizeof *labels * (size_t)cap);
    size_t *bytes = pk_alloc(E->ctx, sizeof *bytes * (size_t)cap);
    if (u->n) {
      memcpy(funcs, u->funcs, sizeof *funcs * (size_t)u->n);
      memcpy(labels, u->labels, sizeof *labels * (size_t)u->n);
      memcpy(bytes, u->bytes, sizeof *bytes * (size_t)u->n);
    }
    u->funcs = funcs, u->labels = labels, u->bytes = bytes, u->cap = cap;
  }
  u->funcs[u->n] = f;
  u->labels[u->n] = label ? pk_strdup(E->ctx, label) : NULL;
  u->bytes[u->n++] = E->functions.len - functions;
  return PK_OK;
}

int pk_cgen_unit_count(const pk_cgen_unit *u) {
  return u->gpu ? pk_gpu_unit_count(u->gpu) : u->n;
}

const char *pk_cgen_unit_largest(const pk_cgen_unit *u, size_t *bytes) {
  int best = -1;
  if (u->gpu) {
    for (int i = 0; i < pk_gpu_unit_count(u->gpu); i++)
      if (best < 0 || pk_gpu_unit_bytes(u->gpu, i) > pk_gpu_unit_bytes(u->gpu, best)) best = i;
    if (best >= 0 && bytes) *bytes = pk_gpu_unit_bytes(u->gpu, best);
    return best < 0 ? NULL : pk_gpu_unit_kernel_name(u->gpu, best);
  }
  for (int i = 0; i < u->n; i++)
    if (best < 0 || u->bytes[i] > u->bytes[best]) best = i;
  if (best < 0) return NULL;
  if (bytes) *bytes = u->bytes[best];
  return pk_cgen_unit_kernel_name(u, best);
}

const char *pk_cgen_unit_kernel_name(const pk_cgen_unit *u, int i) {
  if (u->gpu) return pk_gpu_unit_kernel_name(u->gpu, i);
  PK_ASSERT(i >= 0 && i < u->n);
  const char *name = u->funcs[i]->name;
  return u->labels[i] ? pk_sprintf(u->E.ctx, "%s %s", name, u->labels[i]) : name;
}

void pk_cgen_unit_free(pk_cgen_unit *u) {
  if (!u) return;
  pk_strbuf_free(&u->E.helpers);
  pk_strbuf_free(&u->E.functions);
}

pk_status pk_cgen_unit_source(pk_cgen_unit *u, char **source) {
  if (u->gpu) return pk_gpu_unit_source(u->gpu, source);
  cg *E = &u->E;
  pk_strbuf out;
  pk_strbuf_init(&out);
  pk_strbuf_printf(&out, "/* Generated by Pock %s (C codegen v%d, %d-byte vectors). Do not edit. */\n",
                   POCK_VERSION, PK_CGEN_C_VERSION, E->vector_bytes);
  pk_strbuf_append(&out, pk_cgen_abi_header);
  pk_strbuf_append(&out, pk_cgen_c_prelude);
  pk_strbuf_append(&out, "\n");
  if (E->helpers.len) pk_strbuf_appendn(&out, E->helpers.data, E->helpers.len);
  pk_strbuf_append(&out, "\n");
  if (E->functions.len) pk_strbuf_appendn(&out, E->functions.data, E->functions.len);
  pk_strbuf_append(&out, "static const pkrt_kernel_desc pk_kernels[] = {\n");
  for (int i = 0; i < u->n; i++) {
    const pk_lfunc *f = u->funcs[i];
    pk_strbuf_printf(&out, "  {\"%s\", %s, %d, %d, %" PRId64 ", \"%s\"},\n", f->name, f->name,
                     f->nparams, f->nscalars, f->workspace_bytes, f->workload ? f->workload : "");
  }
  if (u->n == 0) pk_strbuf_append(&out, "  {0},\n");
  pk_strbuf_printf(&out, "};\nPKRT_EXPORT const pkrt_module_desc pkrt_module = "
                         "{PKRT_ABI_VERSION, %d, pk_kernels};\n", u->n);
  *source = pk_strbuf_finish(E->ctx, &out);
  return PK_OK;
}

pk_status pk_cgen_unit_kernel_source(pk_cgen_unit *u, int i, char **source,
                                     const char **symbol) {
  if (u->gpu)
    return pk_ctx_fail(u->E.ctx, PK_ERR_UNSUPPORTED, "GPU kernels are built as one source");
  PK_ASSERT(i >= 0 && i < u->n);
  pk_ctx *ctx = u->E.ctx;
  cg E = {.ctx = ctx, .vector_bytes = u->E.vector_bytes};
  pk_strbuf_init(&E.helpers);
  pk_strbuf_init(&E.functions);
  pk_lfunc f = *u->funcs[i];
  f.name = "pk_kernel";
  emit_function(&E, &f);
  pk_status s = E.status;
  pk_strbuf out;
  pk_strbuf_init(&out);
  if (s == PK_OK) {
    /* no Pock version in the banner: an unchanged kernel keeps its cached object */
    pk_strbuf_printf(&out, "/* Generated by Pock (C codegen v%d, %d-byte vectors): one kernel. "
                           "Do not edit. */\n", PK_CGEN_C_VERSION, E.vector_bytes);
    pk_strbuf_append(&out, pk_cgen_abi_header);
    pk_strbuf_append(&out, pk_cgen_c_prelude);
    pk_strbuf_append(&out, "\n");
    if (E.helpers.len) pk_strbuf_appendn(&out, E.helpers.data, E.helpers.len);
    pk_strbuf_append(&out, "\n");
    if (E.functions.len) pk_strbuf_appendn(&out, E.functions.data, E.functions.len);
    char hex[2 * PKRT_SHA256_BYTES + 1];
    pkrt_sha256_hex(out.data, out.len, hex);
    *symbol = pk_sprintf(ctx, "pkk_%.24s", hex);
    pk_strbuf_printf(&out, "extern __typeof__(pk_kernel) %s\n"
                           "    __attribute__((alias(\"pk_kernel\"), visibility(\"hidden\")));\n",
                     *symbol);
    *source = pk_strbuf_finish(ctx, &out);
  }
  pk_strbuf_free(&E.helpers);
  pk_strbuf_free(&E.functions);
  if (s != PK_OK) pk_strbuf_free(&out);
  return s;
}

pk_status pk_cgen_unit_table_source(pk_cgen_unit *u, const char *const *symbols,
                                    char **source) {
  if (u->gpu)
    return pk_ctx_fail(u->E.ctx, PK_ERR_UNSUPPORTED, "GPU kernels have no C kernel table");
  pk_strbuf out;
  pk_strbuf_init(&out);
  pk_strbuf_printf(&out, "/* Generated by Pock %s (C codegen v%d): the kernel table of %d "
                         "kernels built apart. Do not edit. */\n",
                   POCK_VERSION, PK_CGEN_C_VERSION, u->n);
  pk_strbuf_append(&out, pk_cgen_abi_header);
  for (int i = 0; i < u->n; i++) {
    bool seen = false; /* identical kernels share one object, so one declaration */
    for (int j = 0; j < i && !seen; j++) seen = strcmp(symbols[i], symbols[j]) == 0;
    if (!seen)
      pk_strbuf_printf(&out, "int %s(const pkrt_buffer *, int32_t, const int64_t *, int32_t, "
                             "void *, pkrt_exec_ctx *);\n", symbols[i]);
  }
  pk_strbuf_append(&out, "static const pkrt_kernel_desc pk_kernels[] = {\n");
  for (int i = 0; i < u->n; i++) {
    const pk_lfunc *f = u->funcs[i];
    pk_strbuf_printf(&out, "  {\"%s\", %s, %d, %d, %" PRId64 ", \"%s\"},\n", f->name,
                     symbols[i], f->nparams, f->nscalars, f->workspace_bytes,
                     f->workload ? f->workload : "");
  }
  if (u->n == 0) pk_strbuf_append(&out, "  {0},\n");
  pk_strbuf_printf(&out, "};\nPKRT_EXPORT const pkrt_module_desc pkrt_module = "
                         "{PKRT_ABI_VERSION, %d, pk_kernels};\n", u->n);
  *source = pk_strbuf_finish(u->E.ctx, &out);
  return PK_OK;
}

pk_status pk_cgen_c_opts(pk_ctx *ctx, pk_lfunc *const *funcs, int n,
                         const pk_cgen_c_options *opts, char **source) {
  pk_cgen_unit *u = NULL;
  pk_status s = pk_cgen_unit_new(ctx, opts, &u);
  for (int i = 0; i < n && s == PK_OK; i++) s = pk_cgen_unit_add(u, funcs[i], NULL);
  if (s == PK_OK) s = pk_cgen_unit_source(u, source);
  pk_cgen_unit_free(u);
  return s;
}

pk_status pk_cgen_c(pk_ctx *ctx, pk_lfunc *const *funcs, int n, char **source) {
  return pk_cgen_c_opts(ctx, funcs, n, NULL, source);
}
