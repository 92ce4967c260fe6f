/* test_lower_sched.c — lowering of schedules: the index simplifier and pk_lx_lane_form on
 * their own, then scheduled TE programs (splits with and without tails, tiles, fuse, unroll,
 * compute_at with halos, inline, cache_write/cache_read, rfactor, parallel, vectorize)
 * through the whole pipeline (primitives → pk_sched_lower → C → host compiler → runtime
 * loader) against the interpreter, with checks on the loop IR each schedule must give.
 *
 * Usage: test_lower_sched [-v]   (-v prints every kernel's loop IR) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_codegen.h"
#include "pk_schedule.h"
#include "pk_test.h"

static bool verbose;


/* ---- the simplifier ---- */

static void test_simplify(pk_ctx *ctx) {
  pk_lfunc *f = pk_lfunc_new(ctx, "k");
  pk_lranges *r = pk_lranges_new(ctx);
  pk_lvar *jo = pk_lvar_new(ctx, f, PKRT_DTYPE_I64), *ji = pk_lvar_new(ctx, f, PKRT_DTYPE_I64);
  pk_lvar *free_var = pk_lvar_new(ctx, f, PKRT_DTYPE_I64); /* no range */
  pk_lranges_set(r, jo, 0, 7);
  pk_lranges_set(r, ji, 0, 15);
  pk_lexpr *j = pk_lx_index_add(ctx, pk_lx_index_mul(ctx, pk_lx_var(ctx, jo), 16), pk_lx_var(ctx, ji));
  struct { const char *label; pk_eop op; pk_lexpr *a; int64_t c; const char *want; } cases[] = {
      {"simplify_div_split", PK_EOP_DIV, j, 16, "v0"},
      {"simplify_mod_split", PK_EOP_MOD, j, 16, "v1"},
      {"simplify_div_shifted", PK_EOP_DIV, pk_lx_index_add(ctx, j, pk_lx_int(ctx, 32)), 16, "(v0 + 2)"},
      {"simplify_div_partial", PK_EOP_DIV, pk_lx_index_add(ctx, j, pk_lx_int(ctx, 5)), 16,
       "(v0 + ((v1 + 5) / 16))"},
      {"simplify_mod_coarser", PK_EOP_MOD, j, 8, "(v1 % 8)"},
      {"simplify_div_unknown_var", PK_EOP_DIV, pk_lx_var(ctx, free_var), 4, "(v2 / 4)"},
      {"simplify_sub_cancels", PK_EOP_SUB, j, 0, "v1"},
      {"simplify_min_decided", PK_EOP_MIN, j, 127, "((v0 * 16) + v1)"},
      {"simplify_max_undecided", PK_EOP_MAX, j, 100, "(((v0 * 16) + v1) max 100)"},
      {"simplify_lt_true", PK_EOP_LT, j, 128, "1"},
      {"simplify_lt_open", PK_EOP_LT, j, 100, "(((v0 * 16) + v1) < 100)"},
      {"simplify_ge_false", PK_EOP_GE, j, 128, "0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pk_lexpr *b = cases[i].op == PK_EOP_SUB ? pk_lx_index_mul(ctx, pk_lx_var(ctx, jo), 16)
                                            : pk_lx_int(ctx, cases[i].c);
    bool cmp = cases[i].op >= PK_EOP_LT && cases[i].op <= PK_EOP_NE;
    pk_lexpr *e = pk_lx_binary(ctx, cases[i].op, cases[i].a, b, cmp ? PKRT_DTYPE_BOOL : PKRT_DTYPE_I64);
    e->index_math = !cmp;
    /* print through a one-statement function to reuse the IR printer */
    f->body = pk_st_store(ctx, pk_lbuf_new(ctx, f, PKRT_DTYPE_I64, PK_SCOPE_LOCAL, 1, (int64_t[]){1}),
                          pk_lx_int(ctx, 0), pk_lx_simplify(ctx, r, e));
    const char *text = strstr(pk_lfunc_print(ctx, f), "] = ") + 4;
    size_t n = strlen(cases[i].want);
    check(strncmp(text, cases[i].want, n) == 0 && text[n] == '\n', cases[i].label, "got %.*s, want %s",
          (int)strcspn(text, "\n"), text, cases[i].want);
  }
  /* bounds through min, max, floor division and modulo */
  int64_t lo, hi;
  pk_lexpr *mx = pk_lx_binary(ctx, PK_EOP_MAX, j, pk_lx_int(ctx, 9), PKRT_DTYPE_I64);
  pk_lexpr *m = pk_lx_binary(ctx, PK_EOP_MOD, mx, pk_lx_int(ctx, 10), PKRT_DTYPE_I64);
  check(pk_lx_bounds(r, m, &lo, &hi) && lo == 0 && hi == 9, "bounds_mod", "[%lld, %lld]", (long long)lo,
        (long long)hi);
  check(!pk_lx_bounds(r, pk_lx_var(ctx, free_var), &lo, &hi), "bounds_unknown_var", "bounded");
}

/* Random index expressions over three ranged variables: the simplified expression has the
 * same value at every point, and pk_lx_bounds holds every value. */
typedef struct rng { uint64_t s; } rng;
static uint64_t next_u64(rng *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int64_t pick(rng *r, int64_t n) { return (int64_t)(next_u64(r) % (uint64_t)n); }

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

static int64_t eval_index(const pk_lexpr *e, const int64_t *vals) {
  if (e->kind == PK_LX_INT) return e->ival;
  if (e->kind == PK_LX_VAR) return vals[e->var->id];
  if (e->kind == PK_LX_UNARY) return -eval_index(e->args[0], vals);
  if (e->kind == PK_LX_SELECT) return eval_index(e->args[0], vals) ? eval_index(e->args[1], vals) : eval_index(e->args[2], vals);
  int64_t a = eval_index(e->args[0], vals), b = eval_index(e->args[1], vals);
  switch (e->op) {
  case PK_EOP_ADD: return a + b;
  case PK_EOP_SUB: return a - b;
  case PK_EOP_MUL: return a * b;
  case PK_EOP_DIV: return floor_div(a, b);
  case PK_EOP_MOD: return a - floor_div(a, b) * b;
  case PK_EOP_MIN: return a < b ? a : b;
  case PK_EOP_MAX: return a > b ? a : b;
  case PK_EOP_LT: return a < b;
  case PK_EOP_AND: return a && b;
  default: return a == b;
  }
}

static pk_lexpr *random_index(pk_ctx *ctx, rng *r, pk_lvar **vars, int depth) {
  if (depth == 0 || pick(r, 4) == 0)
    return pick(r, 3) ? pk_lx_var(ctx, vars[pick(r, 3)]) : pk_lx_int(ctx, pick(r, 19) - 9);
  static const pk_eop ops[] = {PK_EOP_ADD, PK_EOP_SUB, PK_EOP_MUL, PK_EOP_DIV, PK_EOP_MOD,
                               PK_EOP_MIN, PK_EOP_MAX, PK_EOP_LT};
  pk_eop op = ops[pick(r, 8)];
  pk_lexpr *a = random_index(ctx, r, vars, depth - 1);
  pk_lexpr *b = op == PK_EOP_MUL || op == PK_EOP_DIV || op == PK_EOP_MOD ? pk_lx_int(ctx, 1 + pick(r, 16))
                                                                           : random_index(ctx, r, vars, depth - 1);
  if (op == PK_EOP_LT) {
    pk_lexpr *c = pk_lx_binary(ctx, op, a, b, PKRT_DTYPE_BOOL);
    return pk_lx_select(ctx, c, random_index(ctx, r, vars, depth - 1), a);
  }
  pk_lexpr *x = pk_lx_binary(ctx, op, a, b, PKRT_DTYPE_I64);
  x->index_math = true;
  return x;
}

static void test_simplify_random(pk_ctx *ctx) {
  rng r = {42};
  pk_lfunc *f = pk_lfunc_new(ctx, "k");
  pk_lvar *vars[3];
  int64_t lo[3], hi[3];
  int bad = 0, unsound_bounds = 0, changed = 0;
  for (int round = 0; round < 400 && !bad; round++) {
    pk_lranges *ranges = pk_lranges_new(ctx);
    f->nvars = 0;
    for (int v = 0; v < 3; v++) {
      vars[v] = pk_lvar_new(ctx, f, PKRT_DTYPE_I64);
      lo[v] = pick(&r, 3) ? 0 : pick(&r, 9) - 4;
      hi[v] = lo[v] + pick(&r, 12);
      pk_lranges_set(ranges, vars[v], lo[v], hi[v]);
    }
    pk_lexpr *e = random_index(ctx, &r, vars, 4), *s = pk_lx_simplify(ctx, ranges, e);
    changed += s != e;
    int64_t blo, bhi;
    bool bounded = pk_lx_bounds(ranges, e, &blo, &bhi);
    int64_t vals[3];
    for (vals[0] = lo[0]; vals[0] <= hi[0]; vals[0]++)
      for (vals[1] = lo[1]; vals[1] <= hi[1]; vals[1]++)
        for (vals[2] = lo[2]; vals[2] <= hi[2]; vals[2]++) {
          int64_t want = eval_index(e, vals);
          bad += eval_index(s, vals) != want;
          unsound_bounds += bounded && (want < blo || want > bhi);
        }
  }
  check(!bad && !unsound_bounds && changed > 100, "simplify_random_expressions",
        "%d wrong values, %d values outside their bounds, %d of 400 simplified", bad, unsound_bounds, changed);
}

/* pk_lx_lane_form: the fused loops' (4·x + v) / 8 and % 8 keep their lanes in one period
 * for 4 lanes, not 5; random expressions, where the form is proven, hold it at every
 * point (e(v) = e(0) + stride·v, e(0) a multiple of the divisor). */
static void test_lane_form(pk_ctx *ctx) {
  pk_lfunc *f = pk_lfunc_new(ctx, "k");
  pk_lvar *x = pk_lvar_new(ctx, f, PKRT_DTYPE_I64), *v = pk_lvar_new(ctx, f, PKRT_DTYPE_I64);
  pk_lexpr *fused =
      pk_lx_index_add(ctx, pk_lx_index_mul(ctx, pk_lx_var(ctx, x), 4), pk_lx_var(ctx, v));
  pk_lexpr *div = pk_lx_binary(ctx, PK_EOP_DIV, fused, pk_lx_int(ctx, 8), PKRT_DTYPE_I64);
  pk_lexpr *mod = pk_lx_binary(ctx, PK_EOP_MOD, fused, pk_lx_int(ctx, 8), PKRT_DTYPE_I64);
  div->index_math = mod->index_math = true;
  pk_lexpr *panel = pk_lx_index_add(ctx, pk_lx_index_mul(ctx, div, 96), mod); /* A's panel */
  int64_t stride, divisor;
  check(pk_lx_lane_form(panel, v, 4, &stride, &divisor) && stride == 1 && divisor == 4,
        "lane_form_panel", "stride %lld divisor %lld", (long long)stride, (long long)divisor);
  check(pk_lx_lane_form(div, v, 4, &stride, &divisor) && stride == 0, "lane_form_div",
        "stride %lld", (long long)stride);
  check(!pk_lx_lane_form(mod, v, 5, &stride, &divisor), "lane_form_crosses_period", "proven");
  pk_lbuf *ids = pk_lbuf_new(ctx, f, PKRT_DTYPE_I64, PK_SCOPE_GLOBAL, 1, (int64_t[]){8});
  check(!pk_lx_lane_form(pk_lx_load(ctx, ids, fused), v, 2, &stride, &divisor), "lane_form_load",
        "proven");

  rng r = {7};
  pk_lvar *vars[3];
  int bad = 0, proven = 0, strided = 0;
  for (int round = 0; round < 2000 && !bad; round++) {
    f->nvars = 0;
    for (int i = 0; i < 3; i++) vars[i] = pk_lvar_new(ctx, f, PKRT_DTYPE_I64);
    int64_t lanes = 2 + pick(&r, 3);
    pk_lexpr *e = random_index(ctx, &r, vars, 4);
    if (!pk_lx_lane_form(e, vars[2], lanes, &stride, &divisor)) continue;
    proven++;
    strided += stride != 0;
    int64_t vals[3];
    for (vals[0] = -6; vals[0] <= 9; vals[0]++)
      for (vals[1] = -3; vals[1] <= 5; vals[1]++) {
        vals[2] = 0;
        int64_t base = eval_index(e, vals);
        bad += divisor ? base % divisor != 0 : base != 0;
        for (vals[2] = 1; vals[2] < lanes; vals[2]++)
          bad += eval_index(e, vals) != base + stride * vals[2];
      }
  }
  check(!bad && proven > 300 && strided > 100, "lane_form_random_expressions",
        "%d wrong values; %d proven, %d with a stride", bad, proven, strided);
}

/* ---- scheduled programs ---- */

/* Applies "split t1 i0 3; compute_at t1 t2 i0.o; ..." through the public primitives:
 * split S A F | tile S X Y FX FY | reorder S A... | fuse S A B | vectorize S A |
 * unroll S A D | parallel S A | compute_at S T A | compute_inline S | compute_root S |
 * cache_write S SCOPE | cache_read T SCOPE READER BLOCK_DIM BLOCK | rfactor S A */
static pk_status apply_steps(pk_ctx *ctx, pk_schedule *s, const char *steps) {
  char *text = pk_strdup(ctx, steps), *save = NULL;
  for (char *step = strtok_r(text, ";", &save); step; step = strtok_r(NULL, ";", &save)) {
    const char *w[16];
    int n = 0;
    char *save2 = NULL;
    for (char *tok = strtok_r(step, " ", &save2); tok && n < 16; tok = strtok_r(NULL, " ", &save2))
      w[n++] = tok;
    if (n == 0) continue;
    const char *op = w[0];
    pk_status st;
    if (!strcmp(op, "split")) st = pk_sched_split(s, w[1], w[2], atoll(w[3]));
    else if (!strcmp(op, "tile")) st = pk_sched_tile(s, w[1], w[2], w[3], atoll(w[4]), atoll(w[5]));
    else if (!strcmp(op, "reorder")) st = pk_sched_reorder(s, w[1], n - 2, w + 2);
    else if (!strcmp(op, "fuse")) st = pk_sched_fuse(s, w[1], w[2], w[3]);
    else if (!strcmp(op, "vectorize")) st = pk_sched_vectorize(s, w[1], w[2]);
    else if (!strcmp(op, "unroll")) st = pk_sched_unroll(s, w[1], w[2], atoll(w[3]));
    else if (!strcmp(op, "parallel")) st = pk_sched_parallel(s, w[1], w[2]);
    else if (!strcmp(op, "compute_at")) st = pk_sched_compute_at(s, w[1], w[2], w[3]);
    else if (!strcmp(op, "compute_inline")) st = pk_sched_compute_inline(s, w[1]);
    else if (!strcmp(op, "compute_root")) st = pk_sched_compute_root(s, w[1]);
    else if (!strcmp(op, "cache_write")) st = pk_sched_cache_write(s, w[1], w[2]);
    else if (!strcmp(op, "cache_read"))
      st = pk_sched_cache_read(s, w[1], w[2], 1, &w[3], atoi(w[4]), atoll(w[5]));
    else if (!strcmp(op, "rfactor")) st = pk_sched_rfactor(s, w[1], w[2]);
    else return pk_ctx_fail(ctx, PK_ERR_USAGE, "test: unknown step '%s'", op);
    if (st != PK_OK) return st;
  }
  return PK_OK;
}

#define MATMUL(M, N, K)                                                      \
  "A = placeholder((" #M ", " #K "), f32)\nB = placeholder((" #K ", " #N "), f32)\n" \
  "k = reduce_axis(" #K ")\nC = compute((" #M ", " #N "), (i, j) => sum(A[i, k] * B[k, j], k))\n"
#define ADD_ONE(E) "A = placeholder((" #E ",), f32)\nB = compute((" #E ",), (i) => A[i] + 1.0)\n"
#define ROW_SUM(M, K, T, R)                                                  \
  "A = placeholder((" #M ", " #K "), " #T ")\nk = reduce_axis(" #K ")\n"        \
  "B = compute((" #M ",), (i) => " #R "(A[i, k], k))\n"
#define STENCIL_1D                                                           \
  "A = placeholder((33,), f32)\nP = compute((33,), (i) => A[i] * 2.0 - 1.0)\n" \
  "C = compute((33,), (i) => P[max(i - 1, 0)] + P[i] * 0.5 + P[min(i + 1, 32)])\n"

/* A case: a program, its schedule, and what its loop IR must (+) or must not (-) contain. */
typedef struct sched_case {
  const char *label, *te, *steps;
  const char *ir[4];
  bool backend; /* parallel or vectorized loops: skipped while the C backend lacks them */
} sched_case;
#define CASE(label, te, steps, ...) {label, te, steps, {__VA_ARGS__}, false}
#define BACKEND_CASE(label, te, steps, ...) {label, te, steps, {__VA_ARGS__}, true}

static const sched_case cases[] = {
    /* splits, with and without tails */
    CASE("split_e1_f1", ADD_ONE(1), "split t1 i0 1", "-if "),
    CASE("split_e7_f3", ADD_ONE(7), "split t1 i0 3", "+if (((v0 * 3) + v1) < 7):"),
    CASE("split_e7_f5", ADD_ONE(7), "split t1 i0 5", "+if "),
    CASE("split_e7_f7", ADD_ONE(7), "split t1 i0 7", "-if "),
    CASE("split_e33_f3", ADD_ONE(33), "split t1 i0 3", "-if ", "+[0, +11)"),
    CASE("split_e33_f5", ADD_ONE(33), "split t1 i0 5", "+if "),
    CASE("split_e33_f7", ADD_ONE(33), "split t1 i0 7", "+if "),
    CASE("split_twice_tails", ADD_ONE(33),
        "split t1 i0 5; split t1 i0.o 3", NULL),
    CASE("split_2d_inner",
        "A = placeholder((7, 33), f32)\nB = compute((7, 33), (i, j) => A[i, j] * A[i, 32 - j])",
        
        "split t1 i1 7; split t1 i0 3; reorder t1 i1.o i0.o i0.i i1.i", NULL),
    CASE("split_reduce_tail", ROW_SUM(5, 33, f32, sum),
        "split t1 k0 5", "+f32[1] local", "+if "),
    CASE("split_reduce_exact", ROW_SUM(5, 33, i32, max),
        "split t1 k0 3", "-if "),
    /* reductions with split reduce axes outside spatial ones: accumulate in the output */
    CASE("reduce_outer", ROW_SUM(5, 33, f32, sum),
        "split t1 k0 5; reorder t1 k0.o i0 k0.i", "-local"),
    CASE("matmul_k_outside", MATMUL(33, 20, 17), "split t2 k0 4; reorder t2 k0.o i0 i1 k0.i", NULL),
    /* tile and reorder of a matmul */
    CASE("matmul_tile", MATMUL(33, 20, 17), "tile t2 i0 i1 8 4", NULL),
    CASE("matmul_tile_reorder", MATMUL(33, 20, 17),
        "tile t2 i0 i1 8 4; reorder t2 i0.o i1.o k0 i0.i i1.i", "-local"),
    CASE("matmul_tile_split_k", MATMUL(32, 24, 17),
        "tile t2 i0 i1 8 4; split t2 k0 4; reorder t2 i0.o k0.o i1.o i0.i k0.i i1.i", NULL),
    /* fuse, with tails through the fused loop */
    CASE("fuse_split", "A = placeholder((7, 9), f32)\nB = compute((7, 9), (i, j) => A[i, j] - 1.0)",
        "fuse t1 i0 i1; split t1 i0.i1.f 5", "+[0, +13)"),
    CASE("fuse_split_parts", "A = placeholder((7, 9), f32)\nB = compute((7, 9), (i, j) => A[i, j] * 3.0)",
        
        "split t1 i0 4; fuse t1 i0.i i1; split t1 i0.i.i1.f 5", NULL),
    CASE("fuse_reduce", MATMUL(9, 7, 6), "split t2 k0 4; fuse t2 k0.o k0.i", NULL),
    /* unroll */
    CASE("unroll_full", "A = placeholder((7, 9), f32)\nB = compute((7, 9), (i, j) => A[i, j] - 1.0)",
        
        "split t1 i1 4; unroll t1 i1.i 0", "+unrolled(4)"),
    CASE("unroll_depth", MATMUL(9, 7, 6), "unroll t2 k0 2", "+unrolled(2)"),
    /* compute_at: a 3-tap clamped stencil, its producer per tile of 8 (10 points with halo) */
    CASE("stencil_at_tile", STENCIL_1D, "split t2 i0 8; compute_at t1 t2 i0.o", "+[0, +10)"),
    CASE("stencil_at_point", STENCIL_1D, "compute_at t1 t2 i0", "+[0, +3)"),
    CASE("stencil_at_tile_tail", STENCIL_1D,
        "split t2 i0 5; split t1 i0 4; compute_at t1 t2 i0.o", NULL),
    CASE("chain_at", "A = placeholder((30,), f32)\nQ = compute((30,), (i) => A[i] * 3.0)\n"
        "P = compute((30,), (i) => Q[i] + 1.0)\nC = compute((30,), (i) => P[i] * P[i])",
        "split t3 i0 8; compute_at t2 t3 i0.o; compute_at t1 t2 i0", NULL),
    CASE("blur_2d_at", "A = placeholder((9, 13), f32)\nP = compute((9, 13), (i, j) => A[i, j] * 0.5)\n"
        "C = compute((9, 13), (i, j) => P[i, j] + P[max(i - 1, 0), j] + P[i, min(j + 1, 12)])",
        "tile t2 i0 i1 4 8; compute_at t1 t2 i1.o", NULL),
    CASE("matmul_relu_at", MATMUL(16, 12, 8) "D = compute((16, 12), (i, j) => max(C[i, j], 0.0))",
        "split t3 i0 4; compute_at t2 t3 i0.o", NULL),
    /* compute_inline */
    CASE("inline_transpose", "A = placeholder((7, 5), f32)\nP = compute((7, 5), (i, j) => exp(A[i, j]))\n"
        "C = compute((5, 7), (i, j) => P[j, i] * 2.0)",
        "compute_inline t1", "-b1["),
    CASE("inline_into_reduce",
        "A = placeholder((6, 10), f32)\nP = compute((6, 10), (i, j) => A[i, j] * A[i, j])\n"
        "k = reduce_axis(10)\nS = compute((6,), (i) => sum(P[i, k], k))",
        "compute_inline t1; split t2 k0 3", NULL),
    /* cache_write + compute_at: a register tile of 6x32 accumulators */
    CASE("matmul_register_tile", MATMUL(30, 64, 16),
        "cache_write t2 local; tile t2 i0 i1 6 32; compute_at t2.local t2 i1.o", "+f32[192] local"),
    CASE("matmul_register_tile_k_outer", MATMUL(33, 40, 16),
        "cache_write t2 local; tile t2 i0 i1 6 32; compute_at t2.local t2 i1.o; reorder t2.local k0 i0 i1",
        "+f32[192] local"),
    /* cache_read with a layout change: B[K, N] packed as panels B.ws[ceil(N/8), K, 8] */
    CASE("pack_b_root", MATMUL(12, 20, 17), "cache_read t1 ws t2 1 8", "+workspace 1664:"),
    CASE("pack_b_at_outer", MATMUL(12, 20, 17),
        "cache_read t1 ws t2 1 8; split t2 i1 8; reorder t2 i1.o i0 i1.i; compute_at t1.ws t2 i1.o",
        "+f32[136] workspace"),
    CASE("pack_b_local_at", MATMUL(12, 20, 17),
        "cache_read t1 local t2 1 8; split t2 i1 8; reorder t2 i1.o i0 i1.i; compute_at t1.local t2 i1.o",
        "+f32[136] local"),
    CASE("big_local_root_to_workspace", MATMUL(64, 300, 64),
        "cache_read t1 local t2 -1 0", "+f32[19200] workspace"),
    CASE("cache_read_same_layout", MATMUL(12, 20, 17),
        "cache_read t0 local t2 -1 0; split t2 i0 4; compute_at t0.local t2 i0.o", "+f32[68] local"),
    /* rfactor, with and without a tail */
    CASE("rfactor_inner", ROW_SUM(4, 32, f32, sum),
        "split t1 k0 4; rfactor t1 k0.i", NULL),
    CASE("rfactor_inner_tail", ROW_SUM(4, 33, f32, sum),
        "split t1 k0 4; rfactor t1 k0.i", NULL),
    CASE("rfactor_min_tail", ROW_SUM(4, 33, i64, min),
        "split t1 k0 5; rfactor t1 k0.i", NULL),
    /* parallel and vectorized loops (need the C backend's support) */
    BACKEND_CASE("parallel_outer", MATMUL(33, 20, 17),
        "tile t2 i0 i1 8 4; parallel t2 i0.o", "+parallel"),
    BACKEND_CASE("vectorize_tail", "A = placeholder((33,), f32)\nB = compute((33,), (i) => A[i] * 2.0)",
        
        "split t1 i0 8; vectorize t1 i0.i", "+vectorized(8)", "+ where "),
    BACKEND_CASE("vectorize_exact", "A = placeholder((32,), f32)\nB = compute((32,), (i) => A[i] * 2.0)",
        
        "split t1 i0 8; vectorize t1 i0.i", "+vectorized(8)", "- where "),
    BACKEND_CASE("matmul_parallel_vector", MATMUL(33, 20, 17),
        "tile t2 i0 i1 8 8; reorder t2 i0.o i1.o k0 i0.i i1.i; vectorize t2 i1.i; parallel t2 i0.o",
        "+vectorized(8)", "+ where ", "+parallel"),
    BACKEND_CASE("register_tile_parallel_vector", MATMUL(30, 64, 16),
        "cache_write t2 local; tile t2 i0 i1 6 16; parallel t2 i0.o; compute_at t2.local t2 i1.o; "
        "reorder t2.local k0 i0 i1; vectorize t2.local i1", "+f32[96] local", "+vectorized(16)"),
};

#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static pk_te_program *parse(pk_ctx *ctx, const char *text) {
  pk_te_program *p = NULL;
  if (pk_te_parse(ctx, text, strlen(text), "case.te", &p) != PK_OK) return NULL;
  return p;
}

/* Lowers a case and checks its loop IR; NULL schedule on failure (reported). */
static pk_schedule *prepare(pk_ctx *ctx, const sched_case *c, pk_te_program **prog) {
  char label[128];
  snprintf(label, sizeof label, "%s_lower", c->label);
  *prog = parse(ctx, c->te);
  if (!*prog) {
    check(false, label, "parse: %s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return NULL;
  }
  pk_schedule *s = pk_sched_new(ctx, *prog);
  pk_lfunc *f;
  if (apply_steps(ctx, s, c->steps) != PK_OK || pk_sched_lower(ctx, *prog, s, "k", &f) != PK_OK) {
    check(false, label, "%s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return NULL;
  }
  char *ir = pk_lfunc_print(ctx, f);
  if (verbose) printf("---- %s: %s\n%s", c->label, c->steps, ir);
  for (int i = 0; i < 4 && c->ir[i]; i++) {
    bool want = c->ir[i][0] == '+', has = strstr(ir, c->ir[i] + 1) != NULL;
    if (want != has) {
      check(false, label, "the loop IR %s '%s':\n%s", want ? "lacks" : "has", c->ir[i] + 1, ir);
      return NULL;
    }
  }
  printf("PASS %s\n", label);
  return s;
}

/* Builds the cases in one module and checks each kernel against the interpreter. */
static void run_cases(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, bool backend) {
  pk_te_program *progs[NCASES];
  pk_schedule *scheds[NCASES];
  const sched_case *which[NCASES];
  int n = 0;
  for (int i = 0; i < NCASES; i++) {
    if (cases[i].backend != backend) continue;
    scheds[n] = prepare(ctx, &cases[i], &progs[n]);
    if (scheds[n]) which[n++] = &cases[i];
  }
  pkrt_module *m;
  pk_status s = pk_build_scheduled(ctx, cc, rt, progs, scheds, n, &m);
  if (s == PK_ERR_UNSUPPORTED && backend) {
    printf("SKIP parallel/vectorized kernels: %s\n", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return;
  }
  if (s != PK_OK) {
    check(false, backend ? "build_backend_cases" : "build_cases", "%s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return;
  }
  for (int i = 0; i < n; i++) {
    char name[16], label[128];
    snprintf(name, sizeof name, "k%d", i);
    snprintf(label, sizeof label, "%s_run", which[i]->label);
    pk_kernel_check_result res;
    for (uint64_t seed = 1; seed <= 2; seed++) {
      const pkrt_kernel_desc *k = pkrt_module_find(m, name);
      s = pk_kernel_check_scheduled(ctx, rt, progs[i], scheds[i], k, seed, &res);
      if (s != PK_OK) break;
    }
    check(s == PK_OK, label, "%s\n  steps: %s", pk_ctx_error(ctx), which[i]->steps);
    pk_ctx_clear_error(ctx);
  }
  pkrt_module_free(m);
}

/* ---- properties of lowering itself ---- */

/* The default (NULL) schedule is exactly a schedule with no steps. */
static void test_default_is_empty_schedule(pk_ctx *ctx) {
  pk_te_program *p = parse(ctx, MATMUL(16, 12, 8) "D = compute((16, 12), (i, j) => max(C[i, j], 0.0))");
  pk_lfunc *a, *b;
  bool ok = p && pk_sched_lower(ctx, p, NULL, "k", &a) == PK_OK &&
            pk_sched_lower(ctx, p, pk_sched_new(ctx, p), "k", &b) == PK_OK;
  check(ok && !strcmp(pk_lfunc_print(ctx, a), pk_lfunc_print(ctx, b)), "default_is_empty_schedule", "%s",
        pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

/* A workspace stage inside a parallel loop would be shared by the threads: lowering refuses
 * it even when the schedule got there without the primitives' checks. */
static void test_workspace_in_parallel(pk_ctx *ctx) {
  pk_te_program *p = parse(ctx, MATMUL(12, 20, 17));
  pk_schedule *s = pk_sched_new(ctx, p);
  pk_lfunc *f;
  pk_status st = apply_steps(ctx, s, "cache_read t1 ws t2 1 8; split t2 i1 8; reorder t2 i1.o i0 i1.i; "
                                     "compute_at t1.ws t2 i1.o");
  pk_sched_find_iter(pk_sched_find_stage(s, "t2"), "i1.o")->kind = PK_LOOP_PARALLEL;
  if (st == PK_OK) st = pk_sched_lower(ctx, p, s, "k", &f);
  check(st == PK_ERR_SCHEDULE && strstr(pk_ctx_error(ctx), "parallel"), "workspace_in_parallel_refused",
        "status %s: %s", pk_status_name(st), pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

int main(int argc, char **argv) {
  verbose = argc > 1 && !strcmp(argv[1], "-v");
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(2);
  pk_cc_options opts = {NULL, "-O1 -march=native -fPIC -fvisibility=hidden", PK_TEST_CACHE_DIR};
  pk_cc *cc;
  if (pk_cc_new(ctx, &opts, &cc) != PK_OK) {
    printf("FAIL compiler: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  test_simplify(ctx);
  test_simplify_random(ctx);
  test_lane_form(ctx);
  test_default_is_empty_schedule(ctx);
  test_workspace_in_parallel(ctx);
  run_cases(ctx, cc, rt, false);
  run_cases(ctx, cc, rt, true);
  printf("%s lower_sched: %d failures\n", failures ? "FAIL" : "PASS", failures);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  return failures ? 1 : 0;
}
