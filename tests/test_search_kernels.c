/* test_search_kernels.c — the spaces only make correct kernels: sampled candidates of a
 * 64×64×64 matmul, of an NT one (also with vectors down the rows), and of a conv2d, a
 * softmax, a reduction and an elementwise op are replayed from their trace JSON, exactly
 * as the measurer does, built with the host compiler and checked element by element
 * against the interpreter (2 threads, so the parallel knob is exercised too).
 *
 * Usage: test_search_kernels [SEED [PER_CASE]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_ops.h"
#include "pk_search.h"

static int failures;

typedef struct kernel_case {
  const char *label;
  pk_op_kind op;
  pk_op_params prm;
  int count;
  const char *te; /* TE text instead of an op (NULL: the op) */
  const char *knob; /* only configs where this knob is `value` (NULL: any) */
  int64_t value;
} kernel_case;

/* A matmul with an epilogue: the matmul template shapes it too. (Not a ReLU: where C is
 * within rounding of 0, max(C, 0) may differ from the interpreter's by more than the
 * bound its error model gives a max, whatever the schedule.) */
static const char matmul_epilogue[] =
    "A = placeholder((40, 36), f32)\nB = placeholder((36, 24), f32)\nk = reduce_axis(36)\n"
    "C = compute((40, 24), (i, j) => sum(A[i, k] * B[k, j], k))\n"
    "D = compute((40, 24), (i, j) => C[i, j] * 0.5 + 1.0)\n";

static void check_case(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, const kernel_case *kc, uint64_t seed) {
  pk_te_program *p;
  pk_task task;
  pk_space *sp;
  pk_space_options opts;
  pk_space_options_default(&opts);
  opts.allow_parallel = true;
  pk_status built = kc->te ? pk_te_parse(ctx, kc->te, strlen(kc->te), kc->label, &p) : pk_op_build(ctx, kc->op, &kc->prm, &p);
  if (built != PK_OK || pk_task_from_program(ctx, p, "c", &task) != PK_OK ||
      pk_space_new_opts(ctx, &task, &opts, &sp) != PK_OK) {
    printf("FAIL %s: setup: %s\n", kc->label, pk_ctx_error(ctx));
    failures++;
    return;
  }
  enum { MAX = 16 };
  pk_te_program *progs[MAX];
  pk_schedule *scheds[MAX];
  const char *traces[MAX];
  int n = 0;
  pk_rng rng;
  pk_rng_seed(&rng, seed);
  for (int tries = 0; n < kc->count && n < MAX && tries < 1000; tries++) {
    pk_config c;
    pk_candidate cand;
    pk_space_sample(sp, &rng, &c);
    int ki = kc->knob ? pk_space_knob_index(sp, kc->knob) : -1;
    if (kc->knob && (ki < 0 || pk_space_knob(sp, ki)->values[c.idx[ki]] != kc->value)) continue;
    if (pk_space_build(sp, &c, &cand) != PK_OK) {
      pk_ctx_clear_error(ctx);
      continue;
    }
    /* the measurer's path: the trace alone, replayed on the task's program */
    if (pk_sched_from_json(ctx, p, cand.trace, &scheds[n]) != PK_OK) {
      printf("FAIL %s: trace does not replay: %s\n  %s\n", kc->label, pk_ctx_error(ctx), cand.trace);
      failures++;
      pk_ctx_clear_error(ctx);
      continue;
    }
    progs[n] = p;
    traces[n] = cand.trace;
    n++;
  }
  pkrt_module *m;
  if (n < kc->count || pk_build_scheduled(ctx, cc, rt, progs, scheds, n, &m) != PK_OK) {
    printf("FAIL %s: %d candidates, build: %s\n", kc->label, n, pk_ctx_error(ctx));
    failures++;
    pk_ctx_clear_error(ctx);
    pk_space_free(sp);
    return;
  }
  int bad = 0;
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "k%d", i);
    pk_kernel_check_result res;
    if (pk_kernel_check_scheduled(ctx, rt, p, scheds[i], pkrt_module_find(m, name), 1 + (uint64_t)i, &res) != PK_OK) {
      printf("FAIL %s: %s\n  trace %s\n", kc->label, pk_ctx_error(ctx), traces[i]);
      pk_ctx_clear_error(ctx);
      bad++;
    }
  }
  failures += bad;
  if (!bad) printf("PASS %s: %d sampled candidates equal the interpreter\n", kc->label, n);
  pkrt_module_free(m);
  pk_space_free(sp);
}

int main(int argc, char **argv) {
  uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : 100;
  int per_case = argc > 2 ? atoi(argv[2]) : 0; /* 0: each case's own count */
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(2);
  /* -O1: correctness is the point here, and compile time dominates */
  pk_cc_options opts = {NULL, "-O1 -march=native -fPIC -fvisibility=hidden", PK_TEST_CACHE_DIR};
  pk_cc *cc;
  if (pk_cc_new(ctx, &opts, &cc) != PK_OK) {
    printf("FAIL compiler: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  const kernel_case cases[] = {
      {"matmul 64x64x64", PK_OP_MATMUL, {2, {{2, {64, 64}, PKRT_DTYPE_F32}, {2, {64, 64}, PKRT_DTYPE_F32}}, {.groups = 0}}, 10, NULL, NULL, 0},
      {"matmul 33x20x17 NT", PK_OP_MATMUL,
       {2, {{2, {33, 17}, PKRT_DTYPE_F32}, {2, {20, 17}, PKRT_DTYPE_F32}}, {.trans_b = true}}, 6, NULL, NULL, 0},
      /* small: row tiles unroll to much code, and compile time is this test's cost */
      {"matmul 19x12x9 NT, vectors down the rows", PK_OP_MATMUL,
       {2, {{2, {19, 9}, PKRT_DTYPE_F32}, {2, {12, 9}, PKRT_DTYPE_F32}}, {.trans_b = true}}, 5, NULL,
       "vector_rows", 1},
      {"conv2d 3x3 pad 1", PK_OP_CONV2D,
       {2, {{4, {1, 8, 10, 12}, PKRT_DTYPE_F32}, {4, {8, 8, 3, 3}, PKRT_DTYPE_F32}}, {.pad = {1, 1, 1, 1}}}, 6, NULL, NULL, 0},
      {"conv2d grouped, strided, dilated", PK_OP_CONV2D,
       {2, {{4, {2, 4, 9, 8}, PKRT_DTYPE_F32}, {4, {6, 2, 3, 2}, PKRT_DTYPE_F32}},
        {.groups = 2, .stride = {2, 3}, .pad = {1, 0, 2, 1}, .dilation = {2, 1}}}, 5, NULL, NULL, 0},
      {"matmul + epilogue", PK_OP_MATMUL, {.ninputs = 0}, 5, matmul_epilogue, NULL, 0},
      {"softmax rows", PK_OP_SOFTMAX, {1, {{2, {9, 70}, PKRT_DTYPE_F32}}, {.axis = 1}}, 5, NULL, NULL, 0},
      {"sum over the middle axis", PK_OP_SUM,
       {1, {{3, {5, 40, 19}, PKRT_DTYPE_F32}}, {.naxes = 1, .axes = {1}}}, 5, NULL, NULL, 0},
      {"gelu", PK_OP_GELU, {1, {{2, {13, 50}, PKRT_DTYPE_F32}}, {.groups = 0}}, 4, NULL, NULL, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kernel_case kc = cases[i];
    if (per_case > 0) kc.count = per_case;
    check_case(ctx, cc, rt, &kc, seed + i);
  }
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  if (failures) printf("%d failure%s\n", failures, failures == 1 ? "" : "s");
  return failures != 0;
}
