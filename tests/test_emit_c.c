/* test_emit_c.c — the C backend's loop kinds against the interpreter: vectorized loops
 * (contiguous, strided and gathered loads, broadcasts, masked tails, every intrinsic, NaN
 * min/max, integer and f64 vectors, per-lane accumulators, register tiles), parallel loops
 * on 1 and 2 threads, unrolled nests, the scalar fallback, and golden-ish checks of the
 * source: vector types without a per-lane loop where loads are contiguous, and index
 * arithmetic hoisted out of inner loops. Vector tests run with every buffer ending at a
 * PROT_NONE page, so a load or store past the end crashes instead of passing. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pk_codegen.h"

static int failures;

static void check(bool ok, const char *name, const char *why) {
  printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name, ok ? "" : ": ", ok ? "" : why);
  failures += !ok;
}

typedef struct harness {
  pk_ctx *ctx;
  pk_cc *cc;
  pkrt_ctx *rt[2]; /* 1 and 2 threads */
} harness;

static pk_te_program *parse(harness *H, const char *text) {
  pk_te_program *p = NULL;
  if (pk_te_parse(H->ctx, text, strlen(text), "emit.te", &p) != PK_OK)
    printf("FAIL parse: %s\n", pk_ctx_error(H->ctx)), exit(1);
  return p;
}

static pk_lfunc *lower(harness *H, const pk_te_program *p) {
  pk_lfunc *f = NULL;
  if (pk_sched_lower(H->ctx, p, NULL, "k0", &f) != PK_OK)
    printf("FAIL lower: %s\n", pk_ctx_error(H->ctx)), exit(1);
  return f;
}

/* ---- loop IR surgery (what schedules will do) ---- */

/* FOR statements in pre-order. */
static int loops(pk_stmt *s, pk_stmt **out, int n) {
  if (!s) return n;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) n = loops(s->stmts[i], out, n);
    return n;
  case PK_ST_FOR: out[n++] = s; return loops(s->body, out, n);
  case PK_ST_IF: return loops(s->else_, out, loops(s->then_, out, n));
  case PK_ST_ALLOC:
  case PK_ST_LET: return loops(s->body, out, n);
  default: return n;
  }
}

static pk_stmt *loop_at(pk_lfunc *f, int i) {
  pk_stmt *all[64];
  int n = loops(f->body, all, 0);
  if (i >= n) printf("FAIL no loop %d\n", i), exit(1);
  return all[i];
}

/* The innermost loop of each top-level nest. */
static void vectorize_innermost(pk_lfunc *f) {
  for (int i = 0; i < f->body->n; i++) {
    pk_stmt *all[64];
    int n = loops(f->body->stmts[i], all, 0);
    all[n - 1]->loop = PK_LOOP_VECTORIZED;
  }
}

static pk_lexpr *subst(pk_ctx *ctx, pk_lexpr *e, const pk_lvar *v, pk_lexpr *by) {
  if (e->kind == PK_LX_VAR && e->var == v) return by;
  if (!e->nargs) return e;
  pk_lexpr *c = pk_alloc(ctx, sizeof *c);
  *c = *e;
  c->args = pk_alloc(ctx, sizeof(pk_lexpr *) * (size_t)e->nargs);
  for (int i = 0; i < e->nargs; i++) c->args[i] = subst(ctx, e->args[i], v, by);
  return c;
}

static pk_stmt *subst_stmt(pk_ctx *ctx, pk_stmt *s, const pk_lvar *v, pk_lexpr *by) {
  if (!s) return NULL;
  pk_stmt *c = pk_alloc(ctx, sizeof *c);
  *c = *s;
  if (s->kind == PK_ST_SEQ) {
    c->stmts = pk_alloc(ctx, sizeof(pk_stmt *) * (size_t)(s->n + 1));
    for (int i = 0; i < s->n; i++) c->stmts[i] = subst_stmt(ctx, s->stmts[i], v, by);
  }
  if (s->min) c->min = subst(ctx, s->min, v, by);
  if (s->extent) c->extent = subst(ctx, s->extent, v, by);
  if (s->cond) c->cond = subst(ctx, s->cond, v, by);
  if (s->index) c->index = subst(ctx, s->index, v, by);
  if (s->value) c->value = subst(ctx, s->value, v, by);
  if (s->mask) c->mask = subst(ctx, s->mask, v, by);
  c->then_ = subst_stmt(ctx, s->then_, v, by);
  c->else_ = subst_stmt(ctx, s->else_, v, by);
  c->body = subst_stmt(ctx, s->body, v, by);
  return c;
}

static void mask_stores(pk_stmt *s, pk_lexpr *cond) {
  if (!s) return;
  if (s->kind == PK_ST_STORE) s->mask = cond;
  if (s->kind == PK_ST_SEQ)
    for (int i = 0; i < s->n; i++) mask_stores(s->stmts[i], cond);
  mask_stores(s->then_, cond);
  mask_stores(s->else_, cond);
  mask_stores(s->body, cond);
}

typedef enum guard { GUARD_IF, GUARD_MASK } guard;

/* split(s, factor): for o in [0, ceil(n / factor)): for i in [0, factor) inner_kind, with a
 * guard o * factor + i < n when factor does not divide n. */
static pk_stmt *split(harness *H, pk_lfunc *f, pk_stmt *s, int64_t factor, pk_loop_kind inner,
                      guard g) {
  pk_ctx *ctx = H->ctx;
  int64_t n = s->extent->ival;
  pk_lvar *o = pk_lvar_new(ctx, f, PKRT_DTYPE_I64), *i = pk_lvar_new(ctx, f, PKRT_DTYPE_I64);
  pk_lexpr *rel =
      pk_lx_index_add(ctx, pk_lx_index_mul(ctx, pk_lx_var(ctx, o), factor), pk_lx_var(ctx, i));
  pk_lexpr *value = pk_lx_index_add(ctx, rel, s->min);
  pk_stmt *body = subst_stmt(ctx, s->body, s->var, value);
  if (n % factor) {
    pk_lexpr *cond = pk_lx_binary(ctx, PK_EOP_LT, rel, pk_lx_int(ctx, n), PKRT_DTYPE_BOOL);
    if (g == GUARD_IF) body = pk_st_if(ctx, cond, body, NULL);
    else mask_stores(body, cond);
  }
  pk_stmt *in = pk_st_for(ctx, i, pk_lx_int(ctx, 0), pk_lx_int(ctx, factor), inner, body);
  pk_lexpr *outer_extent = pk_lx_int(ctx, (n + factor - 1) / factor);
  *s = *pk_st_for(ctx, o, pk_lx_int(ctx, 0), outer_extent, PK_LOOP_SERIAL, in);
  return in;
}

/* ---- running kernels ---- */

/* Host memory that ends where an inaccessible page begins. */
typedef struct fenced {
  void *map, *data;
  size_t map_bytes;
} fenced;

static fenced fenced_new(size_t bytes) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE), body = (bytes + page - 1) / page * page;
  fenced m = {NULL, NULL, body + page};
  m.map = mmap(NULL, m.map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m.map == MAP_FAILED) printf("FAIL mmap\n"), exit(1);
  mprotect((char *)m.map + body, page, PROT_NONE);
  m.data = (char *)m.map + body - bytes;
  return m;
}

static bool build(harness *H, pk_lfunc *f, int vector_bytes, char **src, pkrt_module **m) {
  pk_cgen_c_options o = {.vector_bytes = vector_bytes};
  pk_cc_result r;
  if (pk_cgen_c_opts(H->ctx, &f, 1, &o, src) != PK_OK || pk_cc_build(H->cc, *src, &r) != PK_OK)
    return false;
  if (pkrt_module_load_file(H->rt[0], r.so_path, m) != PKRT_OK) {
    pk_ctx_fail(H->ctx, PK_ERR_RUNTIME, "%s", pkrt_ctx_error(H->rt[0]));
    return false;
  }
  return true;
}

/* Random inputs (or the caller's, when fill is set), every buffer fenced, the kernel on rt,
 * then each compute output against the interpreter. */
static bool run_fenced(harness *H, const pk_te_program *p, const pkrt_kernel_desc *k, pkrt_ctx *rt,
                       void (*fill)(const pk_te_program *, pk_te_ref *)) {
  pk_ctx *ctx = H->ctx;
  pk_te_ref *ref = pk_te_ref_new(ctx, p);
  pk_te_ref_fill_random(p, ref, 17);
  if (fill) fill(p, ref);
  int n = p->ntensors;
  fenced *mem = calloc((size_t)n, sizeof *mem);
  pkrt_buffer *bufs = calloc((size_t)n, sizeof *bufs);
  int64_t (*strides)[PK_TE_MAX_DIMS] = calloc((size_t)n, sizeof *strides);
  for (int i = 0; i < n; i++) {
    const pk_te_tensor *t = p->tensors[i];
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) strides[i][d] = s, s *= t->shape[d];
    mem[i] = fenced_new((size_t)s * pkrt_dtype_size(t->dtype));
    if (t->kind == PK_TE_PLACEHOLDER) pk_te_ref_to_buffer(t, &ref->tensors[i], mem[i].data);
    bufs[i] = (pkrt_buffer){mem[i].data, 0, t->shape, strides[i], t->ndim, (int32_t)t->dtype};
  }
  void *ws = k->workspace_bytes ? aligned_alloc(64, (size_t)(k->workspace_bytes + 63) / 64 * 64) : NULL;
  int rc = k->fn(bufs, n, NULL, 0, ws, pkrt_ctx_exec(rt));
  bool ok = rc == PKRT_KERNEL_OK;
  if (!ok) pk_ctx_fail(ctx, PK_ERR_RUNTIME, "kernel returned %d", rc);
  if (ok) ok = pk_te_interp_run(ctx, p, ref) == PK_OK;
  for (int i = 0; i < n && ok; i++)
    if (p->tensors[i]->kind == PK_TE_COMPUTE)
      ok = pk_te_verify_output(ctx, p->tensors[i], &ref->tensors[i], mem[i].data, NULL) == PK_OK;
  for (int i = 0; i < n; i++) munmap(mem[i].map, mem[i].map_bytes);
  free(ws);
  free(mem);
  free(bufs);
  free(strides);
  return ok;
}

/* Builds f at vector_bytes and checks it on 1 and 2 threads; returns the source. */
static char *check_kernel(harness *H, const char *name, const pk_te_program *p, pk_lfunc *f,
                          int vector_bytes, void (*fill)(const pk_te_program *, pk_te_ref *)) {
  char *src = NULL, label[160];
  pkrt_module *m = NULL;
  snprintf(label, sizeof label, "%s_v%d", name, vector_bytes);
  if (!build(H, f, vector_bytes, &src, &m)) {
    check(false, label, pk_ctx_error(H->ctx));
    pk_ctx_clear_error(H->ctx);
    return src ? src : "";
  }
  const pkrt_kernel_desc *k = pkrt_module_find(m, "k0");
  for (int t = 0; t < 2; t++) {
    char l2[200];
    snprintf(l2, sizeof l2, "%s_%dthread%s", label, t + 1, t ? "s" : "");
    check(run_fenced(H, p, k, H->rt[t], fill), l2, pk_ctx_error(H->ctx));
    pk_ctx_clear_error(H->ctx);
  }
  pkrt_module_free(m);
  return src;
}

/* The text of the loop whose header declares var, up to its closing brace. */
static const char *loop_text(harness *H, const char *src, const char *var) {
  char head[64];
  snprintf(head, sizeof head, "for (int64_t %s ", var);
  const char *p = strstr(src, head);
  if (!p) return "";
  const char *q = strchr(p, '{');
  int depth = 0;
  for (; *q; q++) {
    depth += *q == '{';
    depth -= *q == '}';
    if (!depth) break;
  }
  return pk_strndup(H->ctx, p, (size_t)(q - p + 1));
}

/* ---- vectorized loops ---- */

static void test_contiguous(harness *H) {
  static const int widths[] = {32, 5, 37, 16};
  for (int w = 0; w < 4; w++) {
    char te[256], name[64];
    snprintf(te, sizeof te, "A = placeholder((3, %d), f32)\nB = compute((3, %d), (i, j) => A[i, j] * 2.0 + 1.0)\n",
             widths[w], widths[w]);
    pk_te_program *p = parse(H, te);
    for (int vb = 16; vb <= 64; vb *= 2) {
      pk_lfunc *f = lower(H, p);
      loop_at(f, 1)->loop = PK_LOOP_VECTORIZED;
      snprintf(name, sizeof name, "vector_contiguous_%d", widths[w]);
      char *src = check_kernel(H, name, p, f, vb, NULL);
      if (w == 0 && vb == 64) {
        const char *body = loop_text(H, src, "v0");
        check(strstr(body, "pk_f32x16") && strstr(body, "pk_vld_f32x16") && strstr(body, "pk_vst_f32x16") &&
                  !strstr(body, "pk_l"),
              "vector_contiguous_source_has_vectors_and_no_lane_loop", body);
      }
    }
  }
}

static void test_loads(harness *H) {
  struct { const char *name, *te, *needle; } cases[] = {
      {"vector_strided_load", "A = placeholder((16, 24), f32)\nB = compute((24, 16), (i, j) => A[j, i] * 3.0)\n",
       "pk_vlds_f32"},
      {"vector_gather", "A = placeholder((16,), f32)\nB = compute((4, 16), (i, j) => A[(j * 5 + i) % 16])\n",
       "pk_l"},
      {"vector_broadcast", "A = placeholder((4, 16), f32)\nC = placeholder((4,), f32)\n"
                           "B = compute((4, 16), (i, j) => A[i, j] * C[i] - C[i])\n", "pk_vbc_f32"},
      {"vector_strided_store", "A = placeholder((6, 8), f32)\nB = compute((8, 6), (i, j) => A[j, i] + 1.0)\n",
       "pk_vlds_f32"},
      /* stride 2: two loads and a permute where the span fits; the odd columns' last span
       * runs one past the fenced buffer's end, so those parts load lane by lane */
      {"vector_stride2_load", "A = placeholder((3, 32), f32)\nB = compute((3, 16), (i, j) => A[i, j * 2] * 3.0)\n",
       "pk_vldsb_f32"},
      {"vector_stride2_load_at_end", "A = placeholder((3, 32), f32)\n"
                                     "B = compute((3, 16), (i, j) => A[i, j * 2 + 1] - 1.0)\n", "pk_vldsb_f32"},
  };
  for (int c = 0; c < 6; c++) {
    pk_te_program *p = parse(H, cases[c].te);
    pk_lfunc *f = lower(H, p);
    loop_at(f, 1)->loop = PK_LOOP_VECTORIZED;
    char *src = check_kernel(H, cases[c].name, p, f, 32, NULL);
    check(strstr(src, cases[c].needle) != NULL, cases[c].name, cases[c].needle);
  }
  /* store with a stride: vectorize the outer (i) loop of a transpose nest, j inside it */
  pk_te_program *p = parse(H, cases[3].te);
  pk_lfunc *f = lower(H, p);
  loop_at(f, 0)->loop = PK_LOOP_VECTORIZED;
  char *src = check_kernel(H, "vector_strided_store_outer_lanes", p, f, 32, NULL);
  check(strstr(src, "pk_vsts_f32") != NULL, "vector_strided_store_source", "no pk_vsts");
}

static void test_masked_tails(harness *H) {
  const char *te = "A = placeholder((33,), f32)\nC = placeholder((33,), f32)\n"
                   "B = compute((33,), (i) => select(A[i] > 0.0, A[i] * 3.0 - C[i], C[i]))\n";
  pk_te_program *p = parse(H, te);
  for (int g = 0; g < 2; g++)
    for (int vb = 32; vb <= 64; vb *= 2) {
      pk_lfunc *f = lower(H, p);
      split(H, f, loop_at(f, 0), 16, PK_LOOP_VECTORIZED, (guard)g);
      const char *name = g == GUARD_IF ? "vector_tail_if_guard" : "vector_tail_store_mask";
      char *src = check_kernel(H, name, p, f, vb, NULL);
      check(strstr(src, "pk_clamp32") && strstr(src, "pk_vstm_f32"), "vector_tail_is_one_int32_compare",
            "expected the guard as pk_clamp32 and masked stores");
    }
  /* 2-D, the guard on the inner axis, a reduction of width 1 around it */
  const char *te2 = "A = placeholder((5, 21), f64)\nk = reduce_axis(3)\n"
                    "B = compute((5, 21), (i, j) => sum(A[i, j] * cast(f64, k), k))\n";
  pk_te_program *p2 = parse(H, te2);
  pk_lfunc *f2 = lower(H, p2);
  split(H, f2, loop_at(f2, 1), 8, PK_LOOP_VECTORIZED, GUARD_IF);
  check_kernel(H, "vector_tail_reduction_per_lane_acc", p2, f2, 32, NULL);
}

static void test_intrinsics(harness *H) {
  for (int d = 0; d < 2; d++) {
    const char *t = d ? "f64" : "f32";
    char te[2048];
    snprintf(te, sizeof te,
             "A = placeholder((2, 19), %s)\nP = placeholder((2, 19), %s)\n"
             "E = compute((2, 19), (i, j) => exp(A[i, j]))\n"
             "L = compute((2, 19), (i, j) => log(P[i, j]))\n"
             "S = compute((2, 19), (i, j) => sqrt(P[i, j]))\n"
             "R = compute((2, 19), (i, j) => rsqrt(P[i, j]))\n"
             "T = compute((2, 19), (i, j) => tanh(A[i, j]))\n"
             "F = compute((2, 19), (i, j) => erf(A[i, j]))\n"
             "B = compute((2, 19), (i, j) => abs(A[i, j]))\n"
             "G = compute((2, 19), (i, j) => sigmoid(A[i, j]))\n"
             "W = compute((2, 19), (i, j) => pow(P[i, j], A[i, j]))\n"
             "M = compute((2, 19), (i, j) => min(A[i, j], P[i, j] - 1.0) + max(A[i, j], 0.25))\n"
             "D = compute((2, 19), (i, j) => A[i, j] / P[i, j] + A[i, j] %% 0.3 - -A[i, j])\n"
             "C = compute((2, 19), (i, j) => cast(%s, A[i, j] < 0.1 && P[i, j] > 1.0 || A[i, j] == 0.5))\n"
             "X = compute((2, 19), (i, j) => select(A[i, j] > 0.0, A[i, j], 0.5 * A[i, j]) + cast(%s, j))\n"
             "Y = compute((2, 19), (i, j) => cast(%s, cast(f32, A[i, j]) * 2.0))\n"
             "Z = compute((2, 19), (i, j) => cast(%s, cast(i32, A[i, j] * 100.0)) + cast(%s, cast(i64, P[i, j] * 7.0)))\n",
             t, t, t, t, d ? "f64" : "f32", t, t);
    pk_te_program *p = parse(H, te);
    for (int vb = 32; vb <= 64; vb *= 2) {
      pk_lfunc *f = lower(H, p);
      vectorize_innermost(f);
      char *src = check_kernel(H, d ? "vector_intrinsics_f64" : "vector_intrinsics_f32", p, f, vb, NULL);
      check(strstr(src, d ? "pk_f64x" : "pk_f32x") && strstr(src, "pk_vmin_") && strstr(src, "pk_vsel_") &&
                !strstr(src, "runs serially"),
            d ? "vector_intrinsics_f64_all_vectorized" : "vector_intrinsics_f32_all_vectorized", "");
    }
  }
}

static void fill_nans(const pk_te_program *p, pk_te_ref *ref) {
  for (int t = 0; t < 2; t++)
    for (int64_t i = t; i < ref->tensors[t].numel; i += 3) ref->tensors[t].val[i] = NAN;
  (void)p;
}

static void test_nan_minmax(harness *H) {
  for (int d = 0; d < 2; d++) {
    const char *te = d ? "A = placeholder((16,), f64)\nB = placeholder((16,), f64)\n"
                         "C = compute((16,), (i) => min(A[i], B[i]))\nD = compute((16,), (i) => max(A[i], B[i]))\n"
                       : "A = placeholder((16,), f32)\nB = placeholder((16,), f32)\n"
                         "C = compute((16,), (i) => min(A[i], B[i]))\nD = compute((16,), (i) => max(A[i], B[i]))\n";
    pk_te_program *p = parse(H, te);
    pk_lfunc *f = lower(H, p);
    vectorize_innermost(f);
    check_kernel(H, d ? "vector_minmax_nan_f64" : "vector_minmax_nan_f32", p, f, 64, fill_nans);
  }
}

static void test_integers(harness *H) {
  const char *te =
      "A = placeholder((3, 16), i32)\nB = placeholder((3, 16), i32)\n"
      "W = compute((3, 16), (i, j) => A[i, j] * 123456789 + B[i, j] * 987654321 - -A[i, j])\n"
      "Q = compute((3, 16), (i, j) => A[i, j] / B[i, j] + A[i, j] % B[i, j] * 1000)\n"
      "M = compute((3, 16), (i, j) => min(A[i, j], B[i, j]) * max(A[i, j], 3) + abs(B[i, j]))\n"
      "X = compute((3, 16), (i, j) => cast(i64, A[i, j]) * 3037000499 + cast(i64, B[i, j]) * 9000000000000000)\n"
      "Y = compute((3, 16), (i, j) => cast(i64, A[i, j]) / cast(i64, B[i, j]) - cast(i64, j) % 5)\n"
      "N = compute((3, 16), (i, j) => cast(i32, X[i, j]) + select(A[i, j] < B[i, j], 7, -7))\n"
      "F = compute((3, 16), (i, j) => cast(f32, A[i, j]) * 0.5 + cast(f32, X[i, j]))\n";
  pk_te_program *p = parse(H, te);
  for (int vb = 16; vb <= 64; vb *= 4) {
    pk_lfunc *f = lower(H, p);
    vectorize_innermost(f);
    char *src = check_kernel(H, "vector_integers_wrap_floor_div", p, f, vb, NULL);
    check(strstr(src, "pk_i32x") && strstr(src, "pk_i64x") && strstr(src, "pk_u32x") &&
              !strstr(src, "runs serially"),
          "vector_integers_all_vectorized", "");
  }
}

/* ---- parallel, unrolled, nested ---- */

static const char *matmul_te = "A = placeholder((24, 16), f32)\nB = placeholder((16, 20), f32)\n"
                               "k = reduce_axis(16)\n"
                               "C = compute((24, 20), (i, j) => sum(A[i, k] * B[k, j], k))\n"
                               "D = compute((24, 20), (i, j) => max(C[i, j], 0.0) + A[i, j % 16])\n";

static void test_parallel(harness *H) {
  pk_te_program *p = parse(H, matmul_te);
  pk_lfunc *f = lower(H, p);
  loop_at(f, 0)->loop = PK_LOOP_PARALLEL; /* i of C: the reduction is inside the body */
  loop_at(f, 4)->loop = PK_LOOP_PARALLEL; /* j of D: outer i captured by the closure */
  char *src = check_kernel(H, "parallel_reduction_and_inner", p, f, 32, NULL);
  check(strstr(src, "k0_par0(int64_t pk_begin") && strstr(src, "k0_par1(") &&
            strstr(src, "parallel_for(pk_exec") && strstr(src, ".v3 = v3"),
        "parallel_outlined_with_closure", "expected two outlined bodies, the second capturing v3");

  pk_lfunc *g = lower(H, p);
  loop_at(g, 0)->loop = PK_LOOP_PARALLEL;
  loop_at(g, 1)->loop = PK_LOOP_PARALLEL; /* nested: runs serially inside the outer body */
  src = check_kernel(H, "parallel_nested", p, g, 32, NULL);
  check(strstr(src, "inside another parallel loop") != NULL, "parallel_nested_runs_serially", "");

  pk_lfunc *v = lower(H, p);
  loop_at(v, 0)->loop = PK_LOOP_PARALLEL;
  loop_at(v, 1)->loop = PK_LOOP_VECTORIZED; /* j, with the k reduction inside: per-lane acc */
  loop_at(v, 3)->loop = PK_LOOP_PARALLEL;
  loop_at(v, 4)->loop = PK_LOOP_VECTORIZED;
  src = check_kernel(H, "parallel_vectorized_matmul", p, v, 64, NULL);
  check(strstr(src, "one per lane") && !strstr(src, "runs serially"), "parallel_vectorized_per_lane_acc", "");
}

static void test_unrolled(harness *H) {
  pk_te_program *p = parse(H, "A = placeholder((6, 16), f32)\nB = placeholder((16, 8), f32)\n"
                              "k = reduce_axis(16)\n"
                              "C = compute((6, 8), (i, j) => sum(A[i, k] * B[k, j], k))\n");
  pk_lfunc *f = lower(H, p);
  loop_at(f, 0)->loop = PK_LOOP_UNROLLED; /* full: 6 copies */
  loop_at(f, 1)->loop = PK_LOOP_UNROLLED;
  loop_at(f, 1)->annotation = 4; /* a factor: GCC's pragma */
  loop_at(f, 2)->loop = PK_LOOP_UNROLLED; /* inside a pragma loop: 16 copies each */
  char *src = check_kernel(H, "unrolled_nest", p, f, 32, NULL);
  check(strstr(src, "/* v0 unrolled */") && strstr(src, "const int64_t v0 = 5;") &&
            strstr(src, "#pragma GCC unroll 4") && strstr(src, "const int64_t v2 = 15;"),
        "unrolled_explicit_and_pragma", "");
}

static void test_fallbacks(harness *H) {
  pk_te_program *p = parse(H, matmul_te);
  pk_lfunc *f = lower(H, p);
  loop_at(f, 2)->loop = PK_LOOP_VECTORIZED; /* k: every lane adds into one accumulator */
  loop_at(f, 3)->loop = PK_LOOP_VECTORIZED; /* i of D, around a vectorized j */
  loop_at(f, 4)->loop = PK_LOOP_VECTORIZED;
  char *src = check_kernel(H, "vector_fallbacks", p, f, 32, NULL);
  check(strstr(src, "runs serially: a store to one element from every lane") != NULL,
        "vector_fallback_reduction_axis", "no comment for the k loop");
  check(strstr(src, "runs serially: a vectorized loop inside it") != NULL, "vector_fallback_nested", "");
  check(strstr(src, "v4 vectorized") != NULL, "vector_fallback_inner_still_vectorized", "");

  /* GPU-only constructs stay refused */
  pk_lfunc *g = lower(H, p);
  loop_at(g, 0)->loop = PK_LOOP_GPU_BLOCK_X;
  char *s2;
  check(pk_cgen_c(H->ctx, &g, 1, &s2) == PK_ERR_UNSUPPORTED &&
            strstr(pk_ctx_error(H->ctx), "bind is for GPU"),
        "gpu_bind_refused", pk_ctx_error(H->ctx));
  pk_ctx_clear_error(H->ctx);
  pk_lfunc *b = lower(H, p);
  pk_stmt *two[2] = {pk_st_barrier(H->ctx), b->body};
  b->body = pk_st_seq(H->ctx, 2, two);
  check(pk_cgen_c(H->ctx, &b, 1, &s2) == PK_ERR_UNSUPPORTED && strstr(pk_ctx_error(H->ctx), "barrier"),
        "barrier_refused", pk_ctx_error(H->ctx));
  pk_ctx_clear_error(H->ctx);
}

static void test_hoisting(harness *H) {
  pk_te_program *p = parse(H, "A = placeholder((7, 9, 11), f32)\nB = placeholder((9, 11), f32)\n"
                              "C = compute((7, 9, 11), (i, j, k) => A[i, j, k] * B[j, k] + A[i, 8 - j, 10 - k])\n");
  pk_lfunc *f = lower(H, p);
  char *src = check_kernel(H, "hoisted_indices", p, f, 32, NULL);
  const char *inner = loop_text(H, src, "v2");
  check(!strstr(inner, "v0 *") && !strstr(inner, "v1 *") && strstr(src, "const int64_t t"),
        "inner_loop_index_has_no_outer_multiplication", inner);
}

/* ---- the GEMM register tile (the shape the lead's schedules build) ---- */

static pk_lexpr *ix(harness *H, pk_lexpr *a, int64_t c) { return pk_lx_index_mul(H->ctx, a, c); }
static pk_lexpr *add(harness *H, pk_lexpr *a, pk_lexpr *b) { return pk_lx_index_add(H->ctx, a, b); }
static pk_lexpr *var(harness *H, pk_lvar *v) { return pk_lx_var(H->ctx, v); }

static pk_stmt *loop(harness *H, pk_lvar *v, int64_t n, pk_loop_kind k, pk_stmt *body) {
  return pk_st_for(H->ctx, v, pk_lx_int(H->ctx, 0), pk_lx_int(H->ctx, n), k, body);
}

/* C[M, N] = A[M, K] B[K, N], B packed to Bp[N / 32, K, 32] in the workspace; per 6 x 32 tile
 * of C: acc (LOCAL 6 x 32) = 0; for k: for ii (unrolled): for jj (32 lanes): acc += A * Bp. */
static pk_lfunc *gemm_tile(harness *H, const pk_te_program *p, int64_t M, int64_t N, int64_t K) {
  pk_ctx *ctx = H->ctx;
  pk_lfunc *f = lower(H, p); /* for its parameters; the body is rebuilt */
  pk_lbuf *A = f->params[0], *B = f->params[1], *C = f->params[2];
  int64_t pshape[3] = {N / 32, K, 32}, tshape[2] = {6, 32};
  pk_lbuf *Bp = pk_lbuf_new(ctx, f, PKRT_DTYPE_F32, PK_SCOPE_WORKSPACE, 3, pshape);
  pk_lbuf *acc = pk_lbuf_new(ctx, f, PKRT_DTYPE_F32, PK_SCOPE_LOCAL, 2, tshape);
  f->workspace_bytes = N * K * 4;
  pk_lvar *jo = pk_lvar_new(ctx, f, PKRT_DTYPE_I64), *k = pk_lvar_new(ctx, f, PKRT_DTYPE_I64),
          *jj = pk_lvar_new(ctx, f, PKRT_DTYPE_I64);
  pk_lexpr *packed = add(H, add(H, ix(H, var(H, jo), K * 32), ix(H, var(H, k), 32)), var(H, jj));
  pk_lexpr *b_kj = add(H, ix(H, var(H, k), N), add(H, ix(H, var(H, jo), 32), var(H, jj)));
  pk_stmt *copy = pk_st_store(ctx, Bp, packed, pk_lx_load(ctx, B, b_kj));
  pk_stmt *pack = loop(H, jo, N / 32, PK_LOOP_SERIAL,
                       loop(H, k, K, PK_LOOP_SERIAL, loop(H, jj, 32, PK_LOOP_VECTORIZED, copy)));
  pk_lvar *io = pk_lvar_new(ctx, f, PKRT_DTYPE_I64), *to = pk_lvar_new(ctx, f, PKRT_DTYPE_I64);
  pk_lvar *v[9];
  for (int i = 0; i < 9; i++) v[i] = pk_lvar_new(ctx, f, PKRT_DTYPE_I64);
  pk_lvar *kk = pk_lvar_new(ctx, f, PKRT_DTYPE_I64);
  /* acc[ii * 32 + jj] for the loops' own ii, jj */
#define ACC(ii, j) add(H, ix(H, var(H, ii), 32), var(H, j))
  pk_stmt *init = loop(H, v[0], 6, PK_LOOP_UNROLLED, loop(H, v[1], 32, PK_LOOP_VECTORIZED,
      pk_st_store(ctx, acc, ACC(v[0], v[1]), pk_lx_float(ctx, 0.0, PKRT_DTYPE_F32))));
  pk_lexpr *row = add(H, ix(H, var(H, io), 6), var(H, v[2]));
  pk_lexpr *a = pk_lx_load(ctx, A, add(H, ix(H, row, K), var(H, kk)));
  pk_lexpr *panel = add(H, ix(H, var(H, to), K * 32), ix(H, var(H, kk), 32));
  pk_lexpr *b = pk_lx_load(ctx, Bp, add(H, panel, var(H, v[3])));
  pk_lexpr *sum = pk_lx_binary(ctx, PK_EOP_ADD, pk_lx_load(ctx, acc, ACC(v[2], v[3])),
                               pk_lx_binary(ctx, PK_EOP_MUL, a, b, PKRT_DTYPE_F32), PKRT_DTYPE_F32);
  pk_stmt *update = loop(H, kk, K, PK_LOOP_SERIAL, loop(H, v[2], 6, PK_LOOP_UNROLLED,
      loop(H, v[3], 32, PK_LOOP_VECTORIZED, pk_st_store(ctx, acc, ACC(v[2], v[3]), sum))));
  pk_lexpr *crow = add(H, ix(H, var(H, io), 6), var(H, v[4]));
  pk_lexpr *cidx = add(H, ix(H, crow, N), add(H, ix(H, var(H, to), 32), var(H, v[5])));
  pk_stmt *out = loop(H, v[4], 6, PK_LOOP_UNROLLED, loop(H, v[5], 32, PK_LOOP_VECTORIZED,
      pk_st_store(ctx, C, cidx, pk_lx_load(ctx, acc, ACC(v[4], v[5])))));
#undef ACC
  pk_stmt *steps[3] = {init, update, out};
  pk_stmt *tiles = loop(H, io, M / 6, PK_LOOP_PARALLEL, loop(H, to, N / 32, PK_LOOP_SERIAL,
      pk_st_alloc(ctx, acc, pk_st_seq(ctx, 3, steps))));
  pk_stmt *all[2] = {pack, tiles};
  f->body = pk_st_alloc(ctx, Bp, pk_st_seq(ctx, 2, all));
  return f;
}

static void test_gemm_tile(harness *H) {
  pk_te_program *p = parse(H, "A = placeholder((48, 40), f32)\nB = placeholder((40, 64), f32)\n"
                              "k = reduce_axis(40)\n"
                              "C = compute((48, 64), (i, j) => sum(A[i, k] * B[k, j], k))\n");
  for (int vb = 32; vb <= 64; vb *= 2) {
    pk_lfunc *f = gemm_tile(H, p, 48, 64, 40);
    char *src = check_kernel(H, "gemm_register_tile", p, f, vb, NULL);
    char want[64];
    snprintf(want, sizeof want, "pk_f32x%d b5[%d]; /* a register tile", vb / 4, 6 * 32 / (vb / 4));
    check(strstr(src, want) && !strstr(src, "pk_l") && !strstr(src, "runs serially"),
          vb == 64 ? "gemm_tile_is_vectors_avx512" : "gemm_tile_is_vectors_avx2", want);
    /* kept for reading its assembly: cc -O3 -march=<avx512 cpu> -c emit_c_gemm_tile_v64.c */
    char path[512];
    snprintf(path, sizeof path, "%s/emit_c_gemm_tile_v%d.c", PK_TEST_CACHE_DIR, vb);
    FILE *fp = fopen(path, "w");
    if (fp) fputs(src, fp), fclose(fp);
  }
}

int main(void) {
  harness H = {pk_ctx_new(), NULL, {pkrt_ctx_new(1), pkrt_ctx_new(2)}};
  pk_cc_options opts = {NULL, NULL, PK_TEST_CACHE_DIR};
  if (pk_cc_new(H.ctx, &opts, &H.cc) != PK_OK) {
    printf("FAIL compiler: %s\n", pk_ctx_error(H.ctx));
    return 1;
  }
  test_contiguous(&H);
  test_loads(&H);
  test_masked_tails(&H);
  test_intrinsics(&H);
  test_nan_minmax(&H);
  test_integers(&H);
  test_parallel(&H);
  test_unrolled(&H);
  test_fallbacks(&H);
  test_hoisting(&H);
  test_gemm_tile(&H);
  pkrt_ctx_free(H.rt[0]);
  pkrt_ctx_free(H.rt[1]);
  pk_ctx_free(H.ctx);
  printf("%s emit_c\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
