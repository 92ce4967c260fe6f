/* emit_gpu.c — prepared GPU loop IR (gpu_prepare.c) → CUDA C or OpenCL C. One emitter; every
 * difference between the dialects is a field of the table below. Bound loops become the
 * block or thread index (guarded where the launch is wider), SHARED buffers are declared at
 * the kernel's top (OpenCL allows __local only there), LOCAL ones are per-thread arrays,
 * barriers are the dialect's, and integer arithmetic that may wrap goes through the prelude
 * (gpu_prelude.h) so results equal the interpreter's. A vectorized loop the plan accepts
 * (gpu_vplan.c) reads and writes whole vectors: float4 through aligned pointers in CUDA,
 * vload4/vstore4 in OpenCL. Identifiers come from the IR. */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gpu_vplan.h"

extern const char pk_cgen_gpu_prelude[]; /* codegen/gpu_prelude.h, embedded by CMake */

typedef struct gpu_dialect {
  const char *name;
  const char *header;       /* typedefs and macros the prelude needs */
  const char *f64_header;   /* what enables doubles */
  const char *kernel;       /* the entry point's qualifiers */
  const char *global;       /* pointer qualifier of kernel buffers */
  const char *shared;       /* block-shared declaration (aligned for vector accesses) */
  const char *restrict_;
  const char *i64;          /* the 64-bit integer scalar parameters have */
  const char *ws_type;      /* byte type of the workspace */
  const char *block_idx[3], *thread_idx[3];
  const char *barrier;
  const char *unroll;       /* printf format with the depth */
  const char *i64_suffix;   /* of 64-bit integer literals */
  const char *inf_f32, *nan_f32, *inf_f64, *nan_f64;
  /* vector accesses: through a cast to the vector type, which needs lanes x element bytes
   * of alignment (CUDA), or with vloadN/vstoreN, which need the element's only (OpenCL) */
  bool vector_casts;
  /* math: f32 and f64 names per call (CUDA has expf/exp, OpenCL overloads exp) */
  const char *fn_f32[PK_EOP_COUNT_], *fn_f64[PK_EOP_COUNT_];
} gpu_dialect;

static const gpu_dialect cuda = {
    .name = "CUDA C",
    .header = "typedef long long pk_i64;\ntypedef unsigned long long pk_u64;\n"
              "typedef unsigned int pk_u32;\n"
              "#define PK_FN static __device__ __forceinline__ __attribute__((unused))\n"
              "#define PK_I64_MIN (-9223372036854775807LL - 1)\n"
              "#define PK_I64_MAX 9223372036854775807LL\n#define PK_U64C(x) x##ull\n"
              "#define PK_FLOORF floorf\n#define PK_FLOOR floor\n"
              "#define PK_EXPF expf\n#define PK_EXP exp\n",
    .f64_header = "#define PK_HAS_F64 1\n",
    .kernel = "extern \"C\" __global__ void",
    .global = "",
    .shared = "__shared__ __align__(16) ",
    .restrict_ = "__restrict__",
    .i64 = "long long",
    .ws_type = "unsigned char",
    .block_idx = {"blockIdx.x", "blockIdx.y", "blockIdx.z"},
    .thread_idx = {"threadIdx.x", "threadIdx.y", "threadIdx.z"},
    .barrier = "__syncthreads();",
    .unroll = "#pragma unroll %lld",
    .i64_suffix = "LL",
    .inf_f32 = "__int_as_float(0x7f800000)", .nan_f32 = "__int_as_float(0x7fffffff)",
    .inf_f64 = "__longlong_as_double(0x7ff0000000000000LL)",
    .nan_f64 = "__longlong_as_double(0x7fffffffffffffffLL)",
    .vector_casts = true,
    .fn_f32 = {[PK_EOP_EXP] = "expf", [PK_EOP_LOG] = "logf", [PK_EOP_SQRT] = "sqrtf",
               [PK_EOP_RSQRT] = "rsqrtf", [PK_EOP_TANH] = "tanhf", [PK_EOP_ERF] = "erff",
               [PK_EOP_ABS] = "fabsf", [PK_EOP_POW] = "powf", [PK_EOP_SIGMOID] = "pk_sigmoid_f32"},
    .fn_f64 = {[PK_EOP_EXP] = "exp", [PK_EOP_LOG] = "log", [PK_EOP_SQRT] = "sqrt",
               [PK_EOP_RSQRT] = "rsqrt", [PK_EOP_TANH] = "tanh", [PK_EOP_ERF] = "erf",
               [PK_EOP_ABS] = "fabs", [PK_EOP_POW] = "pow", [PK_EOP_SIGMOID] = "pk_sigmoid_f64"},
};

static const gpu_dialect opencl = {
    .name = "OpenCL C",
    .header = "typedef long pk_i64;\ntypedef ulong pk_u64;\ntypedef uint pk_u32;\n"
              "#define PK_FN static inline\n"
              "#define PK_I64_MIN (-9223372036854775807L - 1)\n"
              "#define PK_I64_MAX 9223372036854775807L\n#define PK_U64C(x) x##ul\n"
              "#define PK_FLOORF floor\n#define PK_FLOOR floor\n"
              "#define PK_EXPF exp\n#define PK_EXP exp\n",
    .f64_header = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#define PK_HAS_F64 1\n",
    .kernel = "__kernel void",
    .global = "__global ",
    .shared = "__local ",
    .restrict_ = "restrict",
    .i64 = "long",
    .ws_type = "uchar",
    .block_idx = {"get_group_id(0)", "get_group_id(1)", "get_group_id(2)"},
    .thread_idx = {"get_local_id(0)", "get_local_id(1)", "get_local_id(2)"},
    .barrier = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);",
    .unroll = "__attribute__((opencl_unroll_hint(%lld)))",
    .i64_suffix = "L",
    .inf_f32 = "INFINITY", .nan_f32 = "NAN",
    .inf_f64 = "((double)INFINITY)", .nan_f64 = "((double)NAN)",
    .fn_f32 = {[PK_EOP_EXP] = "exp", [PK_EOP_LOG] = "log", [PK_EOP_SQRT] = "sqrt",
               [PK_EOP_RSQRT] = "rsqrt", [PK_EOP_TANH] = "tanh", [PK_EOP_ERF] = "erf",
               [PK_EOP_ABS] = "fabs", [PK_EOP_POW] = "pow", [PK_EOP_SIGMOID] = "pk_sigmoid_f32"},
    .fn_f64 = {[PK_EOP_EXP] = "exp", [PK_EOP_LOG] = "log", [PK_EOP_SQRT] = "sqrt",
               [PK_EOP_RSQRT] = "rsqrt", [PK_EOP_TANH] = "tanh", [PK_EOP_ERF] = "erf",
               [PK_EOP_ABS] = "fabs", [PK_EOP_POW] = "pow", [PK_EOP_SIGMOID] = "pk_sigmoid_f64"},
};

static const gpu_dialect *dialect_of(pk_gpu_dialect d) { return d == PK_GPU_CUDA ? &cuda : &opencl; }

typedef struct ge {
  pk_ctx *ctx;
  const gpu_dialect *D;
  const pk_gpu_kernel *k;
  pk_status status;
  pk_strbuf *out;
  int indent;
  /* the vector path of a vectorized loop (vector_loop): its counter reads as lane_text,
   * and the loads read as whole vectors as their component of lane */
  const pk_lvar *lane_var;
  const char *lane_text;
  int lane, nvloads;
  const pk_lexpr *vload[GPU_VPLAN_MAX_LOADS];
  const char *vload_name[GPU_VPLAN_MAX_LOADS];
} ge;

static void unsupported(ge *E, const char *what) {
  if (E->status == PK_OK)
    E->status = pk_ctx_fail(E->ctx, PK_ERR_UNSUPPORTED, "the %s backend cannot emit %s",
                            E->D->name, what);
}

static void line(ge *E, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(ge *E, const char *fmt, ...) {
  for (int i = 0; i < E->indent; i++) pk_strbuf_append(E->out, "  ");
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *text = pk_alloc(E->ctx, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(text, (size_t)n + 1, fmt, ap);
  va_end(ap);
  pk_strbuf_append(E->out, text);
  pk_strbuf_append(E->out, "\n");
}

static const char *ctype(const ge *E, pkrt_dtype t) {
  switch (t) {
  case PKRT_DTYPE_F32: return "float";
  case PKRT_DTYPE_F64: return "double";
  case PKRT_DTYPE_I32: return "int";
  case PKRT_DTYPE_I64: return "pk_i64";
  case PKRT_DTYPE_BOOL: return "int";
  default: (void)E; return NULL;
  }
}

static const char *tsuffix(pkrt_dtype t) {
  switch (t) {
  case PKRT_DTYPE_F32: return "f32";
  case PKRT_DTYPE_F64: return "f64";
  case PKRT_DTYPE_I32: return "i32";
  default: return "i64";
  }
}

/* ---- expressions ---- */

static const char *int_text(ge *E, int64_t v, pkrt_dtype t) {
  if (t == PKRT_DTYPE_I32 || t == PKRT_DTYPE_BOOL) return pk_sprintf(E->ctx, "((int)%" PRId64 ")", v);
  if (v == INT64_MIN) return "PK_I64_MIN";
  if (v >= INT32_MIN && v <= INT32_MAX) return pk_sprintf(E->ctx, v < 0 ? "(%" PRId64 ")" : "%" PRId64, v);
  return pk_sprintf(E->ctx, "((pk_i64)%" PRId64 "%s)", v, E->D->i64_suffix);
}

static const char *float_text(ge *E, double v, pkrt_dtype t) {
  bool f32 = t == PKRT_DTYPE_F32;
  if (isnan(v)) return f32 ? E->D->nan_f32 : E->D->nan_f64;
  if (isinf(v)) return pk_sprintf(E->ctx, "(%s%s)", v < 0 ? "-" : "", f32 ? E->D->inf_f32 : E->D->inf_f64);
  char buf[64];
  if (f32) snprintf(buf, sizeof buf, "%.9g", (double)(float)v);
  else snprintf(buf, sizeof buf, "%.17g", v);
  bool has_point = strpbrk(buf, ".e") != NULL;
  return pk_sprintf(E->ctx, "%s%s%s%s%s", v < 0 ? "(" : "", buf, has_point ? "" : ".0",
                    f32 ? "f" : "", v < 0 ? ")" : "");
}


static const char *x(ge *E, const pk_lexpr *e);

static const char *binary_text(ge *E, const pk_lexpr *e) {
  const char *a = x(E, e->args[0]), *b = x(E, e->args[1]);
  pkrt_dtype operand = e->args[0]->dtype;
  bool is_float = pk_dtype_is_float(operand);
  const char *op = pk_cgen_c_operator(e->op);
  /* plain C where it is exact and defined, as in the C emitter */
  bool plain = op && (e->dtype == PKRT_DTYPE_BOOL || (is_float && e->op != PK_EOP_MOD) ||
                      (e->index_math && e->op != PK_EOP_DIV));
  if (plain) return pk_sprintf(E->ctx, "(%s %s %s)", a, op, b);
  const char *h = pk_cgen_helper_name(e->op);
  if (!h) { unsupported(E, "this binary operator"); return "0"; }
  return pk_sprintf(E->ctx, "pk_%s_%s(%s, %s)", h, tsuffix(operand), a, b);
}

static const char *call_text(ge *E, const pk_lexpr *e) {
  const char *a[3] = {"0", "0", "0"};
  for (int i = 0; i < e->nargs && i < 3; i++) a[i] = x(E, e->args[i]);
  pkrt_dtype t = e->dtype;
  if (e->op == PK_EOP_HASH)
    return pk_sprintf(E->ctx, "pk_hash3((pk_i64)%s, (pk_i64)%s, (pk_i64)%s)", a[0], a[1], a[2]);
  if (e->op == PK_EOP_ABS && pk_dtype_is_int(t))
    return pk_sprintf(E->ctx, "pk_abs_%s(%s)", tsuffix(t), a[0]);
  if (e->op == PK_EOP_RSQRT) /* 1/sqrt, as the C backend and the interpreter compute it */
    return pk_sprintf(E->ctx, t == PKRT_DTYPE_F32 ? "(1.0f / %s(%s))" : "(1.0 / %s(%s))",
                      t == PKRT_DTYPE_F32 ? E->D->fn_f32[PK_EOP_SQRT] : E->D->fn_f64[PK_EOP_SQRT], a[0]);
  const char *fn = t == PKRT_DTYPE_F32 ? E->D->fn_f32[e->op] : t == PKRT_DTYPE_F64 ? E->D->fn_f64[e->op] : NULL;
  if (!fn) { unsupported(E, "this intrinsic"); return "0"; }
  if (e->nargs == 2) return pk_sprintf(E->ctx, "%s(%s, %s)", fn, a[0], a[1]);
  return pk_sprintf(E->ctx, "%s(%s)", fn, a[0]);
}

static const char *cast_text(ge *E, const pk_lexpr *e) {
  const char *a = x(E, e->args[0]);
  pkrt_dtype from = e->args[0]->dtype, to = e->dtype;
  if (pk_dtype_is_int(to) && pk_dtype_is_float(from))
    return pk_sprintf(E->ctx, "pk_from_%s_%s(%s)", tsuffix(from), tsuffix(to), a);
  return pk_sprintf(E->ctx, "((%s)%s)", ctype(E, to), a);
}

static const char *x(ge *E, const pk_lexpr *e) {
  switch (e->kind) {
  case PK_LX_INT: return int_text(E, e->ival, e->dtype);
  case PK_LX_FLOAT: return float_text(E, e->fval, e->dtype);
  case PK_LX_VAR: return e->var == E->lane_var ? E->lane_text : e->var->name;
  case PK_LX_LOAD:
    for (int i = 0; i < E->nvloads; i++)
      if (E->vload[i] == e) return pk_sprintf(E->ctx, "%s.%c", E->vload_name[i], "xyzw"[E->lane]);
    return pk_sprintf(E->ctx, "%s[%s]", e->buf->name, x(E, e->args[0]));
  case PK_LX_UNARY:
    if (e->op == PK_EOP_NOT) return pk_sprintf(E->ctx, "(!%s)", x(E, e->args[0]));
    if (pk_dtype_is_float(e->dtype) || e->index_math) return pk_sprintf(E->ctx, "(-%s)", x(E, e->args[0]));
    return pk_sprintf(E->ctx, "pk_neg_%s(%s)", tsuffix(e->dtype), x(E, e->args[0]));
  case PK_LX_BINARY: return binary_text(E, e);
  case PK_LX_SELECT:
    return pk_sprintf(E->ctx, "(%s ? %s : %s)", x(E, e->args[0]), x(E, e->args[1]), x(E, e->args[2]));
  case PK_LX_CALL: return call_text(E, e);
  case PK_LX_CAST: return cast_text(E, e);
  }
  return "0";
}

/* ---- statements ---- */

static void stmt(ge *E, const pk_stmt *s);

static void block_open(ge *E) { E->indent++; }
static void block_close(ge *E) { E->indent--; line(E, "}"); }

static bool is_block(pk_loop_kind k) { return k >= PK_LOOP_GPU_BLOCK_X && k <= PK_LOOP_GPU_BLOCK_Z; }

static void bound_loop(ge *E, const pk_stmt *s) {
  bool blk = is_block(s->loop);
  int d = blk ? s->loop - PK_LOOP_GPU_BLOCK_X : s->loop - PK_LOOP_GPU_THREAD_X;
  uint32_t launch = blk ? E->k->desc.grid[d] : E->k->desc.block[d];
  line(E, "{ /* %s */", pk_loop_kind_name(s->loop));
  block_open(E);
  line(E, "const pk_i64 %s = (pk_i64)%s;", s->var->name, blk ? E->D->block_idx[d] : E->D->thread_idx[d]);
  bool guard = s->extent->ival < (int64_t)launch;
  if (guard) {
    line(E, "if (%s < %s) {", s->var->name, x(E, s->extent));
    block_open(E);
  }
  stmt(E, s->body);
  if (guard) block_close(E);
  block_close(E);
}

/* A serial loop, or an unrolled one: a vectorized loop the plan refuses is unrolled too
 * (a thread's consecutive elements; the compiler merges the accesses where it can). */
static void plain_loop(ge *E, const pk_stmt *s) {
  const char *v = s->var->name, *min = x(E, s->min), *ext = x(E, s->extent);
  if (s->loop != PK_LOOP_SERIAL)
    line(E, E->D->unroll, (long long)(s->annotation > 0 ? s->annotation
                                       : s->extent->kind == PK_LX_INT ? s->extent->ival : 4));
  if (s->min->kind == PK_LX_INT && s->min->ival == 0)
    line(E, "for (pk_i64 %s = 0; %s < %s; ++%s) {", v, v, ext, v);
  else
    line(E, "for (pk_i64 %s = %s; %s < (%s) + (%s); ++%s) {", v, min, v, min, ext, v);
  block_open(E);
  stmt(E, s->body);
  block_close(E);
}

/* ---- vectorized loops (the plan: gpu_vplan.c) ---- */

static void lane_at(ge *E, const pk_stmt *loop, int lane) {
  E->lane_var = loop->var;
  E->lane = lane;
  E->lane_text = pk_sprintf(E->ctx, "%d", lane);
}

/* &b[index at lane 0] */
static const char *vector_addr(ge *E, const gpu_vplan *P, const gpu_vaccess *a) {
  lane_at(E, P->loop, 0);
  return pk_sprintf(E->ctx, "&%s[%s]", a->buf->name, x(E, a->index));
}

static const char *vector_type(ge *E, const pk_lbuf *b, int lanes) {
  return pk_sprintf(E->ctx, "%s%d", ctype(E, b->dtype), lanes);
}

/* What the vector path needs besides the plan: every lane passes every guard (outermost
 * first, so a guard is only evaluated where the ones around it hold, as in the serial
 * loop), and CUDA's vector types find their base pointers aligned. "" when nothing. */
static const char *vector_guard(ge *E, const gpu_vplan *P) {
  pk_strbuf g;
  pk_strbuf_init(&g);
  const char **seen = pk_alloc(E->ctx, sizeof *seen * (size_t)(P->nconds * P->lanes + 1));
  int nseen = 0;
  for (int c = 0; c < P->nconds; c++)
    for (int l = 0; l < P->lanes; l++) {
      lane_at(E, P->loop, l);
      const char *t = x(E, P->conds[c]);
      bool dup = false; /* a guard the same in every lane is tested once */
      for (int i = 0; i < nseen && !dup; i++) dup = !strcmp(seen[i], t);
      if (dup) continue;
      seen[nseen++] = t;
      pk_strbuf_printf(&g, "%s%s", g.len ? " && " : "", t);
    }
  for (int i = 0; i < P->nchecks; i++)
    pk_strbuf_printf(&g, "%s((pk_u64)%s %% %d == 0)", g.len ? " && " : "", P->check_buf[i]->name,
                     P->check_bytes[i]);
  E->lane_var = NULL;
  char *text = pk_strbuf_finish(E->ctx, &g);
  return text ? text : "";
}

/* Store k of the plan for every lane: its vector loads, each lane's value (a component of
 * the stored vector, or stored at once where the store stays scalar), the vector store. */
static void vector_store(ge *E, const gpu_vplan *P, int k) {
  const pk_stmt *st = P->stores[k];
  const gpu_vaccess *store = NULL;
  E->nvloads = 0;
  for (int i = 0; i < P->nacc; i++) {
    const gpu_vaccess *a = &P->acc[i];
    if (a->stmt != k || !a->vector) continue;
    if (!a->load) { store = a; continue; }
    const char *vt = vector_type(E, a->buf, P->lanes), *addr = vector_addr(E, P, a);
    const char *name = pk_sprintf(E->ctx, "pk_v%d_%d", k, E->nvloads);
    if (E->D->vector_casts) line(E, "const %s %s = *(const %s *)%s;", vt, name, vt, addr);
    else line(E, "const %s %s = vload%d(0, %s);", vt, name, P->lanes, addr);
    PK_ASSERT(E->nvloads < GPU_VPLAN_MAX_LOADS);
    E->vload[E->nvloads] = a->load;
    E->vload_name[E->nvloads++] = name;
  }
  const char *sum = pk_sprintf(E->ctx, "pk_s%d", k);
  if (store) line(E, "%s %s;", vector_type(E, st->buf, P->lanes), sum);
  for (int l = 0; l < P->lanes; l++) {
    lane_at(E, P->loop, l);
    const char *value = x(E, st->value);
    if (store) line(E, "%s.%c = %s;", sum, "xyzw"[l], value);
    else line(E, "%s[%s] = %s;", st->buf->name, x(E, st->index), value);
  }
  E->nvloads = 0;
  if (!store) { E->lane_var = NULL; return; }
  const char *addr = vector_addr(E, P, store);
  E->lane_var = NULL;
  if (E->D->vector_casts) line(E, "*(%s *)%s = %s;", vector_type(E, st->buf, P->lanes), addr, sum);
  else line(E, "vstore%d(%s, 0, %s);", P->lanes, sum, addr);
}

/* A vectorized loop as whole vectors, when the plan allows: the vector path under its
 * guard, the unrolled loop for the threads that fail it. False: emit the loop as usual. */
static bool vector_loop(ge *E, const pk_stmt *s) {
  gpu_vplan P;
  if (!pk_gpu_vplan(E->ctx, s, E->D->vector_casts, &P)) return false;
  int nvec = 0;
  for (int i = 0; i < P.nacc; i++) nvec += P.acc[i].vector;
  const char *guard = vector_guard(E, &P);
  const char *what = pk_sprintf(E->ctx, "/* %s: %d accesses of %d lanes */", s->var->name, nvec,
                                P.lanes);
  if (*guard) line(E, "if (%s) { %s", guard, what);
  else line(E, "{ %s", what);
  block_open(E);
  for (int k = 0; k < P.nstores; k++) vector_store(E, &P, k);
  E->indent--;
  if (!*guard) {
    line(E, "}");
    return true;
  }
  line(E, "} else {");
  E->indent++;
  plain_loop(E, s);
  block_close(E);
  return true;
}

static void for_loop(ge *E, const pk_stmt *s) {
  switch (s->loop) {
  case PK_LOOP_VECTORIZED:
    if (vector_loop(E, s)) return;
    break;
  case PK_LOOP_UNROLLED:
  case PK_LOOP_SERIAL: break;
  case PK_LOOP_PARALLEL: unsupported(E, "CPU parallel loops"); return;
  default: bound_loop(E, s); return;
  }
  plain_loop(E, s);
}

static void alloc(ge *E, const pk_stmt *s) {
  const pk_lbuf *b = s->buf;
  const char *ct = ctype(E, b->dtype);
  if (!ct || b->dtype == PKRT_DTYPE_BOOL) { unsupported(E, "buffers of this dtype"); return; }
  switch (b->scope) {
  case PK_SCOPE_SHARED: /* declared at the kernel's top */
    stmt(E, s->body);
    return;
  case PK_SCOPE_LOCAL:
    line(E, "{");
    block_open(E);
    line(E, "%s %s[%" PRId64 "];", ct, b->name, b->numel);
    break;
  case PK_SCOPE_WORKSPACE:
    line(E, "{");
    block_open(E);
    line(E, "%s%s *%s %s = (%s%s *)(pk_ws + %" PRId64 ");", E->D->global, ct, E->D->restrict_,
         b->name, E->D->global, ct, b->ws_offset);
    break;
  default: unsupported(E, "an allocation of a global buffer"); return;
  }
  stmt(E, s->body);
  block_close(E);
}

static void stmt(ge *E, const pk_stmt *s) {
  if (!s || E->status != PK_OK) return;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) stmt(E, s->stmts[i]);
    return;
  case PK_ST_FOR: for_loop(E, s); return;
  case PK_ST_IF:
    line(E, "if (%s) {", x(E, s->cond));
    block_open(E);
    stmt(E, s->then_);
    if (s->else_) {
      E->indent--;
      line(E, "} else {");
      E->indent++;
      stmt(E, s->else_);
    }
    block_close(E);
    return;
  case PK_ST_STORE: {
    const char *dst = pk_sprintf(E->ctx, "%s[%s]", s->buf->name, x(E, s->index));
    if (s->mask) line(E, "if (%s) %s = %s;", x(E, s->mask), dst, x(E, s->value));
    else line(E, "%s = %s;", dst, x(E, s->value));
    return;
  }
  case PK_ST_ALLOC: alloc(E, s); return;
  case PK_ST_LET: {
    const char *ct = ctype(E, s->var->dtype);
    line(E, "{");
    block_open(E);
    line(E, "const %s %s = %s;", ct, s->var->name, x(E, s->value));
    stmt(E, s->body);
    block_close(E);
    return;
  }
  case PK_ST_BARRIER: line(E, "%s", E->D->barrier); return;
  }
}

static void declare_shared(ge *E, const pk_stmt *s) {
  if (!s) return;
  for (int i = 0; s->kind == PK_ST_SEQ && i < s->n; i++) declare_shared(E, s->stmts[i]);
  if (s->kind == PK_ST_ALLOC && s->buf->scope == PK_SCOPE_SHARED)
    line(E, "%s%s %s[%" PRId64 "];", E->D->shared, ctype(E, s->buf->dtype), s->buf->name, s->buf->numel);
  declare_shared(E, s->then_), declare_shared(E, s->else_), declare_shared(E, s->body);
}

/* The canonical TE text has no user names; still, nothing may close the comment early. */
static void comment_text(pk_strbuf *out, const char *text) {
  pk_strbuf_append(out, "/*\n");
  for (const char *p = text; *p; p++) {
    if (p[0] == '*' && p[1] == '/') { pk_strbuf_append(out, "* /"); p++; continue; }
    pk_strbuf_appendn(out, p, 1);
  }
  pk_strbuf_append(out, "*/\n");
}

/* One kernel's text: the parameter contract of docs/targets.md ("GPU targets"). */
static pk_status emit_kernel(pk_ctx *ctx, const gpu_dialect *D, const pk_gpu_kernel *k,
                             pk_strbuf *out) {
  const pk_lfunc *f = k->f;
  ge E = {.ctx = ctx, .D = D, .k = k, .out = out};
  const pkrt_gpu_kernel_desc *d = &k->desc;
  if (f->te_text) comment_text(out, f->te_text);
  pk_strbuf_printf(out, "/* launch: grid %u x %u x %u, block %u x %u x %u, %lld bytes shared */\n",
                   d->grid[0], d->grid[1], d->grid[2], d->block[0], d->block[1], d->block[2],
                   (long long)k->static_shared_bytes);
  pk_strbuf_printf(out, "%s %s(", D->kernel, f->name);
  for (int i = 0; i < f->nparams; i++) {
    const pk_lbuf *b = f->params[i];
    const char *ct = ctype(&E, b->dtype);
    if (!ct || b->dtype == PKRT_DTYPE_BOOL) { unsupported(&E, "buffers of this dtype"); return E.status; }
    bool input = b->tensor && b->tensor->kind == PK_TE_PLACEHOLDER;
    /* an in-place variant's buffers may alias (pk_lfunc.params_may_alias): no restrict */
    pk_strbuf_printf(out, "%s%s%s%s *%s%s%s", i ? ", " : "", D->global, input ? "const " : "", ct,
                     f->params_may_alias ? "" : D->restrict_, f->params_may_alias ? "" : " ",
                     b->name);
  }
  for (int i = 0; i < f->nscalars; i++)
    pk_strbuf_printf(out, "%s%s s%d", f->nparams || i ? ", " : "", D->i64, i);
  if (f->workspace_bytes > 0)
    pk_strbuf_printf(out, "%s%s%s *%s pk_ws", f->nparams || f->nscalars ? ", " : "", D->global,
                     D->ws_type, D->restrict_);
  pk_strbuf_append(out, ") {\n");
  E.indent = 1;
  declare_shared(&E, f->body);
  stmt(&E, f->body);
  pk_strbuf_append(out, "}\n\n");
  return E.status;
}

static void source_header(const gpu_dialect *D, bool f64, pk_strbuf *out) {
  pk_strbuf_printf(out, "/* Generated by Pock %s (GPU codegen v%d, %s). Do not edit. */\n",
                   POCK_VERSION, PK_CGEN_GPU_VERSION, D->name);
  if (f64) pk_strbuf_append(out, D->f64_header);
  pk_strbuf_append(out, D->header);
  pk_strbuf_append(out, pk_cgen_gpu_prelude);
  pk_strbuf_append(out, "\n");
}

pk_status pk_cgen_gpu(pk_ctx *ctx, pk_gpu_dialect d, const pk_gpu_kernel *kernels, int n,
                      char **source) {
  const gpu_dialect *D = dialect_of(d);
  bool f64 = false;
  for (int i = 0; i < n; i++) f64 |= kernels[i].uses_f64;
  pk_strbuf out;
  pk_strbuf_init(&out);
  source_header(D, f64 || d == PK_GPU_CUDA, &out);
  for (int i = 0; i < n; i++) {
    pk_status s = emit_kernel(ctx, D, &kernels[i], &out);
    if (s != PK_OK) {
      pk_strbuf_free(&out);
      return s;
    }
  }
  *source = pk_strbuf_finish(ctx, &out);
  return PK_OK;
}

/* ---- the backend table's unit ---- */

struct pk_gpu_unit {
  pk_ctx *ctx;
  pk_gpu_dialect d;
  int n, cap;
  pk_gpu_kernel *kernels;
  const char **labels;
  size_t *bytes;
};

pk_status pk_gpu_unit_new(pk_ctx *ctx, const pk_target *t, pk_gpu_unit **out) {
  if (t->kind != PK_TARGET_CUDA && t->kind != PK_TARGET_OPENCL)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "target '%s' is not a GPU target", t->text);
  pk_gpu_unit *u = pk_alloc(ctx, sizeof *u);
  memset(u, 0, sizeof *u);
  u->ctx = ctx;
  u->d = t->kind == PK_TARGET_CUDA ? PK_GPU_CUDA : PK_GPU_OPENCL;
  *out = u;
  return PK_OK;
}

pk_status pk_gpu_unit_add(pk_gpu_unit *u, const pk_lfunc *f, const char *label) {
  pk_gpu_kernel k;
  pk_status s = pk_gpu_prepare(u->ctx, f, &k);
  pk_strbuf text;
  pk_strbuf_init(&text);
  if (s == PK_OK) s = emit_kernel(u->ctx, dialect_of(u->d), &k, &text);
  size_t bytes = text.len;
  pk_strbuf_free(&text);
  if (s != PK_OK) return s;
  if (u->n == u->cap) {
    int cap = u->cap ? 2 * u->cap : 8;
    pk_gpu_kernel *kernels = pk_alloc(u->ctx, sizeof *kernels * (size_t)cap);
    const char **labels = pk_alloc(u->ctx, sizeof *labels * (size_t)cap);
    size_t *sizes = pk_alloc(u->ctx, sizeof *sizes * (size_t)cap);
    if (u->n) {
      memcpy(kernels, u->kernels, sizeof *kernels * (size_t)u->n);
      memcpy(labels, u->labels, sizeof *labels * (size_t)u->n);
      memcpy(sizes, u->bytes, sizeof *sizes * (size_t)u->n);
    }
    u->kernels = kernels, u->labels = labels, u->bytes = sizes, u->cap = cap;
  }
  u->kernels[u->n] = k;
  u->labels[u->n] = label ? pk_strdup(u->ctx, label) : NULL;
  u->bytes[u->n++] = bytes;
  return PK_OK;
}

int pk_gpu_unit_count(const pk_gpu_unit *u) { return u->n; }

const pk_gpu_kernel *pk_gpu_unit_kernel(const pk_gpu_unit *u, int i) {
  PK_ASSERT(i >= 0 && i < u->n);
  return &u->kernels[i];
}

const char *pk_gpu_unit_kernel_name(const pk_gpu_unit *u, int i) {
  PK_ASSERT(i >= 0 && i < u->n);
  const char *name = u->kernels[i].desc.name;
  return u->labels[i] ? pk_sprintf(u->ctx, "%s %s", name, u->labels[i]) : name;
}

size_t pk_gpu_unit_bytes(const pk_gpu_unit *u, int i) {
  PK_ASSERT(i >= 0 && i < u->n);
  return u->bytes[i];
}

pk_status pk_gpu_unit_source(pk_gpu_unit *u, char **source) {
  return pk_cgen_gpu(u->ctx, u->d, u->kernels, u->n, source);
}
