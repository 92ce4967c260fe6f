/* emit_c.c — loop IR → one self-contained C source holding several kernels and the
 * module's descriptor table (the only exported symbol). Identifiers come from the IR
 * (Pock-made names); the only user-derived text is the canonical TE in comments, which
 * holds no user names and is escaped anyway. */
#include "pk_codegen.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

extern const char pk_cgen_abi_header[];  /* include/pock/pkrt_kernel.h, embedded by CMake */
extern const char pk_cgen_c_prelude[];   /* codegen/c_prelude.h, embedded by CMake */

typedef struct emitter {
  pk_ctx *ctx;
  pk_strbuf *out;
  pk_status status;
} emitter;

static const char *ctype(pkrt_dtype t) {
  switch (t) {
  case PKRT_DTYPE_F32: return "float";
  case PKRT_DTYPE_F64: return "double";
  case PKRT_DTYPE_I32: return "int32_t";
  case PKRT_DTYPE_I64: return "int64_t";
  case PKRT_DTYPE_BOOL: return "int";
  default: return NULL;
  }
}

/* Suffix of the prelude's typed helpers: pk_add_i64, pk_max_f32, ... */
static const char *tsuffix(pkrt_dtype t) {
  switch (t) {
  case PKRT_DTYPE_F32: return "f32";
  case PKRT_DTYPE_F64: return "f64";
  case PKRT_DTYPE_I32: return "i32";
  default: return "i64";
  }
}

static void unsupported(emitter *E, const char *what) {
  if (E->status == PK_OK)
    E->status = pk_ctx_fail(E->ctx, PK_ERR_UNSUPPORTED, "the C backend cannot emit %s", what);
}

static void emit(emitter *E, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(emitter *E, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < (int)sizeof small) {
    pk_strbuf_append(E->out, small);
    return;
  }
  char *big = pk_alloc(E->ctx, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  pk_strbuf_append(E->out, big);
}

static void emit_float(emitter *E, double v, pkrt_dtype t) {
  bool f32 = t == PKRT_DTYPE_F32;
  if (isnan(v)) { emit(E, f32 ? "((float)NAN)" : "((double)NAN)"); return; }
  if (isinf(v)) { emit(E, "(%s(%s)INFINITY)", v < 0 ? "-" : "", f32 ? "float" : "double"); return; }
  char buf[64];
  if (f32) snprintf(buf, sizeof buf, "%.9g", (double)(float)v);
  else snprintf(buf, sizeof buf, "%.17g", v);
  bool has_point = strpbrk(buf, ".e") != NULL;
  emit(E, "%s%s%s%s", v < 0 ? "(" : "", buf, has_point ? "" : ".0", f32 ? "f" : "");
  if (v < 0) emit(E, ")");
}

static void emit_int(emitter *E, int64_t v, pkrt_dtype t) {
  if (t == PKRT_DTYPE_I32) { emit(E, "((int32_t)%" PRId64 ")", v); return; }
  if (v == INT64_MIN) { emit(E, "INT64_MIN"); return; }
  if (v >= INT32_MIN && v <= INT32_MAX) emit(E, v < 0 ? "(%" PRId64 ")" : "%" PRId64, v);
  else emit(E, "INT64_C(%" PRId64 ")", v);
}

static void emit_expr(emitter *E, const pk_lexpr *e);

static void emit_call(emitter *E, const char *fn, int nargs, pk_lexpr *const *args) {
  emit(E, "%s(", fn);
  for (int i = 0; i < nargs; i++) {
    if (i) emit(E, ", ");
    emit_expr(E, args[i]);
  }
  emit(E, ")");
}

static const char *c_operator(pk_eop op) {
  switch (op) {
  case PK_EOP_ADD: return "+";
  case PK_EOP_SUB: return "-";
  case PK_EOP_MUL: return "*";
  case PK_EOP_DIV: return "/";
  case PK_EOP_LT: return "<";
  case PK_EOP_LE: return "<=";
  case PK_EOP_GT: return ">";
  case PK_EOP_GE: return ">=";
  case PK_EOP_EQ: return "==";
  case PK_EOP_NE: return "!=";
  case PK_EOP_AND: return "&&";
  case PK_EOP_OR: return "||";
  default: return NULL;
  }
}

static const char *helper_name(pk_eop op) {
  switch (op) {
  case PK_EOP_ADD: return "add";
  case PK_EOP_SUB: return "sub";
  case PK_EOP_MUL: return "mul";
  case PK_EOP_DIV: return "div";
  case PK_EOP_MOD: return "mod";
  case PK_EOP_MIN: return "min";
  case PK_EOP_MAX: return "max";
  default: return NULL;
  }
}

static void emit_binary(emitter *E, const pk_lexpr *e) {
  pkrt_dtype t = e->dtype;
  pkrt_dtype operand = e->args[0]->dtype;
  bool is_float = pk_dtype_is_float(operand);
  const char *op = c_operator(e->op);
  /* Plain C where it is exact and defined: float + - * /, comparisons, logic, and integer
   * index arithmetic proven not to overflow. Everything else goes through the prelude. */
  bool plain = op && (t == PKRT_DTYPE_BOOL || (is_float && e->op != PK_EOP_MOD) ||
                      (e->index_math && e->op != PK_EOP_DIV));
  if (plain) {
    emit(E, "(");
    emit_expr(E, e->args[0]);
    emit(E, " %s ", op);
    emit_expr(E, e->args[1]);
    emit(E, ")");
    return;
  }
  const char *h = helper_name(e->op);
  if (!h) { unsupported(E, "this binary operator"); return; }
  char fn[32];
  snprintf(fn, sizeof fn, "pk_%s_%s", h, tsuffix(operand));
  emit_call(E, fn, 2, e->args);
}

static void emit_intrinsic(emitter *E, const pk_lexpr *e) {
  pkrt_dtype t = e->dtype;
  bool f32 = t == PKRT_DTYPE_F32;
  const char *libm = NULL;
  switch (e->op) {
  case PK_EOP_EXP: libm = f32 ? "expf" : "exp"; break;
  case PK_EOP_LOG: libm = f32 ? "logf" : "log"; break;
  case PK_EOP_SQRT: libm = f32 ? "sqrtf" : "sqrt"; break;
  case PK_EOP_TANH: libm = f32 ? "tanhf" : "tanh"; break;
  case PK_EOP_ERF: libm = f32 ? "erff" : "erf"; break;
  case PK_EOP_POW: libm = f32 ? "powf" : "pow"; break;
  case PK_EOP_ABS:
    libm = pk_dtype_is_int(t) ? (t == PKRT_DTYPE_I32 ? "pk_abs_i32" : "pk_abs_i64")
                              : (f32 ? "fabsf" : "fabs");
    break;
  case PK_EOP_SIGMOID: libm = f32 ? "pk_sigmoid_f32" : "pk_sigmoid_f64"; break;
  case PK_EOP_RSQRT:
    emit(E, f32 ? "(1.0f / sqrtf(" : "(1.0 / sqrt(");
    emit_expr(E, e->args[0]);
    emit(E, "))");
    return;
  default: unsupported(E, "this intrinsic"); return;
  }
  emit_call(E, libm, e->nargs, e->args);
}

static void emit_cast(emitter *E, const pk_lexpr *e) {
  pkrt_dtype from = e->args[0]->dtype, to = e->dtype;
  if (pk_dtype_is_int(to) && pk_dtype_is_float(from)) {
    emit(E, "pk_from_f64_%s((double)", tsuffix(to));
    emit_expr(E, e->args[0]);
    emit(E, ")");
    return;
  }
  /* int64 -> int32 keeps the low 32 bits (GCC defines the conversion that way). */
  emit(E, "((%s)", ctype(to));
  emit_expr(E, e->args[0]);
  emit(E, ")");
}

static void emit_expr(emitter *E, const pk_lexpr *e) {
  switch (e->kind) {
  case PK_LX_INT: emit_int(E, e->ival, e->dtype); return;
  case PK_LX_FLOAT: emit_float(E, e->fval, e->dtype); return;
  case PK_LX_VAR: emit(E, "%s", e->var->name); return;
  case PK_LX_LOAD:
    emit(E, "%s[", e->buf->name);
    emit_expr(E, e->args[0]);
    emit(E, "]");
    return;
  case PK_LX_UNARY:
    if (e->op == PK_EOP_NOT || pk_dtype_is_float(e->dtype) || e->index_math) {
      emit(E, "(%s", e->op == PK_EOP_NOT ? "!" : "-");
      emit_expr(E, e->args[0]);
      emit(E, ")");
    } else {
      emit(E, "pk_neg_%s(", tsuffix(e->dtype));
      emit_expr(E, e->args[0]);
      emit(E, ")");
    }
    return;
  case PK_LX_BINARY: emit_binary(E, e); return;
  case PK_LX_SELECT:
    emit(E, "(");
    emit_expr(E, e->args[0]);
    emit(E, " ? ");
    emit_expr(E, e->args[1]);
    emit(E, " : ");
    emit_expr(E, e->args[2]);
    emit(E, ")");
    return;
  case PK_LX_CALL: emit_intrinsic(E, e); return;
  case PK_LX_CAST: emit_cast(E, e); return;
  }
}

static void indent(emitter *E, int depth) {
  for (int i = 0; i < depth; i++) emit(E, "  ");
}

static void emit_stmt(emitter *E, const pk_stmt *s, int depth);

static void emit_for(emitter *E, const pk_stmt *s, int depth) {
  switch (s->loop) {
  case PK_LOOP_SERIAL: break;
  case PK_LOOP_UNROLLED:
    indent(E, depth);
    emit(E, "#pragma GCC unroll %" PRId64 "\n", s->annotation > 0 ? s->annotation : 16);
    break;
  case PK_LOOP_PARALLEL: unsupported(E, "parallel loops yet"); return;
  case PK_LOOP_VECTORIZED: unsupported(E, "vectorized loops yet"); return;
  default: unsupported(E, "loops bound to GPU blocks or threads"); return;
  }
  const char *v = s->var->name;
  indent(E, depth);
  emit(E, "for (int64_t %s = ", v);
  emit_expr(E, s->min);
  emit(E, "; %s < ", v);
  if (s->min->kind == PK_LX_INT && s->min->ival == 0) {
    emit_expr(E, s->extent);
  } else {
    emit(E, "(");
    emit_expr(E, s->min);
    emit(E, ") + (");
    emit_expr(E, s->extent);
    emit(E, ")");
  }
  emit(E, "; ++%s) {\n", v);
  emit_stmt(E, s->body, depth + 1);
  indent(E, depth);
  emit(E, "}\n");
}

static void emit_alloc(emitter *E, const pk_stmt *s, int depth) {
  const pk_lbuf *b = s->buf;
  indent(E, depth);
  switch (b->scope) {
  case PK_SCOPE_LOCAL:
    emit(E, "%s %s[%" PRId64 "];\n", ctype(b->dtype), b->name, b->numel);
    break;
  case PK_SCOPE_WORKSPACE:
    emit(E, "%s *restrict %s = (%s *)((char *)pk_workspace + %" PRId64 ");\n", ctype(b->dtype),
         b->name, ctype(b->dtype), b->ws_offset);
    break;
  default: unsupported(E, "shared memory"); return;
  }
  emit_stmt(E, s->body, depth);
}

static void emit_stmt(emitter *E, const pk_stmt *s, int depth) {
  if (!s || E->status != PK_OK) return;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) emit_stmt(E, s->stmts[i], depth);
    return;
  case PK_ST_FOR: emit_for(E, s, depth); return;
  case PK_ST_IF:
    indent(E, depth);
    emit(E, "if (");
    emit_expr(E, s->cond);
    emit(E, ") {\n");
    emit_stmt(E, s->then_, depth + 1);
    if (s->else_) {
      indent(E, depth);
      emit(E, "} else {\n");
      emit_stmt(E, s->else_, depth + 1);
    }
    indent(E, depth);
    emit(E, "}\n");
    return;
  case PK_ST_STORE:
    indent(E, depth);
    if (s->mask) {
      emit(E, "if (");
      emit_expr(E, s->mask);
      emit(E, ") ");
    }
    emit(E, "%s[", s->buf->name);
    emit_expr(E, s->index);
    emit(E, "] = ");
    emit_expr(E, s->value);
    emit(E, ";\n");
    return;
  case PK_ST_ALLOC:
    indent(E, depth);
    emit(E, "{\n");
    emit_alloc(E, s, depth + 1);
    indent(E, depth);
    emit(E, "}\n");
    return;
  case PK_ST_LET:
    indent(E, depth);
    emit(E, "{\n");
    indent(E, depth + 1);
    emit(E, "const %s %s = ", ctype(s->var->dtype), s->var->name);
    emit_expr(E, s->value);
    emit(E, ";\n");
    emit_stmt(E, s->body, depth + 1);
    indent(E, depth);
    emit(E, "}\n");
    return;
  case PK_ST_BARRIER: unsupported(E, "barriers"); return;
  }
}

/* The canonical TE text has no user names; still, nothing may close the comment early. */
static void emit_comment_text(emitter *E, const char *text) {
  emit(E, "/*\n");
  for (const char *p = text; *p; p++) {
    if (p[0] == '*' && p[1] == '/') { emit(E, "* /"); p++; continue; }
    pk_strbuf_appendn(E->out, p, 1);
  }
  emit(E, "*/\n");
}

static void emit_shape_array(emitter *E, const char *what, const pk_lbuf *b, const int64_t *v) {
  emit(E, "  static const int64_t %s_%s[] = {", b->name, what);
  for (int d = 0; d < b->ndim; d++) emit(E, "%s%" PRId64, d ? ", " : "", v[d]);
  emit(E, "%s};\n", b->ndim ? "" : "0");
}

static void emit_function(emitter *E, const pk_lfunc *f) {
  if (f->te_text) emit_comment_text(E, f->te_text);
  emit(E,
       "static int %s(const pkrt_buffer *pk_bufs, int32_t pk_nbufs, const int64_t *pk_scalars,\n"
       "    int32_t pk_nscalars, void *pk_workspace, pkrt_exec_ctx *pk_exec) {\n",
       f->name);
  emit(E, "  (void)pk_scalars; (void)pk_workspace; (void)pk_exec;\n");
  emit(E, "  if (pk_nbufs != %d || pk_nscalars != %d) return PKRT_KERNEL_BAD_ARGS;\n",
       f->nparams, f->nscalars);
  for (int i = 0; i < f->nparams; i++) {
    const pk_lbuf *b = f->params[i];
    const char *ct = ctype(b->dtype);
    if (!ct || b->dtype == PKRT_DTYPE_BOOL) { unsupported(E, "buffers of this dtype"); return; }
    emit_shape_array(E, "shape", b, b->shape);
    emit_shape_array(E, "strides", b, b->strides);
    emit(E, "  if (!pk_buffer_ok(&pk_bufs[%d], %d, %d, %s_shape, %s_strides)) return PKRT_KERNEL_BAD_ARGS;\n",
         b->param, (int)b->dtype, b->ndim, b->name, b->name);
    /* Inputs are only read; buffers of one call never overlap (the caller's contract). */
    emit(E, "  %s%s *restrict %s = (%s%s *)pk_bufs[%d].data + pk_bufs[%d].offset;\n",
         b->tensor && b->tensor->kind == PK_TE_PLACEHOLDER ? "const " : "", ct, b->name,
         b->tensor && b->tensor->kind == PK_TE_PLACEHOLDER ? "const " : "", ct, b->param, b->param);
  }
  emit_stmt(E, f->body, 1);
  emit(E, "  return PKRT_KERNEL_OK;\n}\n\n");
}

pk_status pk_cgen_c(pk_ctx *ctx, pk_lfunc *const *funcs, int n, char **source) {
  pk_strbuf out;
  pk_strbuf_init(&out);
  emitter E = {ctx, &out, PK_OK};
  emit(&E, "/* Generated by Pock %s (C codegen v%d). Do not edit. */\n", POCK_VERSION,
       PK_CGEN_C_VERSION);
  pk_strbuf_append(&out, pk_cgen_abi_header);
  pk_strbuf_append(&out, pk_cgen_c_prelude);
  emit(&E, "\n");
  for (int i = 0; i < n && E.status == PK_OK; i++) emit_function(&E, funcs[i]);
  emit(&E, "static const pkrt_kernel_desc pk_kernels[] = {\n");
  for (int i = 0; i < n; i++)
    emit(&E, "  {\"%s\", %s, %d, %d, %" PRId64 ", \"%s\"},\n", funcs[i]->name, funcs[i]->name,
         funcs[i]->nparams, funcs[i]->nscalars, funcs[i]->workspace_bytes,
         funcs[i]->workload ? funcs[i]->workload : "");
  if (n == 0) emit(&E, "  {0},\n");
  emit(&E, "};\nPKRT_EXPORT const pkrt_module_desc pkrt_module = {PKRT_ABI_VERSION, %d, pk_kernels};\n", n);
  if (E.status != PK_OK) {
    pk_strbuf_free(&out);
    return E.status;
  }
  *source = pk_strbuf_finish(ctx, &out);
  return PK_OK;
}
