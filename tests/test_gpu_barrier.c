/* test_gpu_barrier.c — the barrier checker: GPU kernels run on the CPU executor with each
 * block's threads in forward, reversed and random order between barriers, against the
 * interpreter. It passes the hand-scheduled shared-memory matmul in every order and fails
 * it with either of its barriers taken out; a missing barrier that forward order (PoCL's)
 * hides is caught by the reversed and random orders; long reductions split across a block's
 * threads through shared memory are right; and every operator's forward and
 * gradient kernel with its preset GPU schedule, and the sampled configs of every op class
 * (20 each, 200 with POCK_TEST_SCALE=full), pass in all three orders. */
#include <stdio.h>
#include <string.h>

#include "pk_test.h"
#include "gpu_test_util.h"
#include "gpu_test_cases.h"

static const char *const order_names[] = {"forward", "reversed", "random"};

static pk_gpu_kernel prepared(pk_ctx *ctx, const pk_te_program *p, const pk_schedule *s, bool *ok) {
  pk_lfunc *f;
  pk_gpu_kernel k;
  memset(&k, 0, sizeof k);
  *ok = pk_sched_lower(ctx, p, s, "k0", &f) == PK_OK && pk_gpu_prepare(ctx, f, &k) == PK_OK;
  return k;
}

static void test_matmul_barriers(pk_ctx *ctx) {
  pk_te_program *p = gpu_test_parse(ctx, GPU_TEST_MATMUL);
  pk_schedule *s = p ? gpu_test_matmul_schedule(ctx, p) : NULL;
  bool ok = s != NULL;
  pk_gpu_kernel k = ok ? prepared(ctx, p, s, &ok) : (pk_gpu_kernel){0};
  CHECK(ok, "matmul: %s", pk_ctx_error(ctx));
  pk_gpu_exec_result r;
  for (int o = 0; o < 3; o++)
    CHECK(pk_gpu_check(ctx, p, s, &k, (pk_gpu_order)o, 5, NULL, &r) == PK_OK && r.barriers == 2 * 6 * 4,
          "%s order: %s (%lld phases)", order_names[o], pk_ctx_error(ctx), (long long)r.barriers);
  for (int b = 0; b < 2; b++) { /* after the panels are staged; after they are read */
    pk_gpu_kernel broken = gpu_test_without_barrier(ctx, &k, b);
    for (int o = 1; o < 3; o++) {
      pk_status st = pk_gpu_check(ctx, p, s, &broken, (pk_gpu_order)o, 5, NULL, &r);
      check(st == PK_ERR_MISMATCH || st == PK_ERR_RUNTIME,
            pk_sprintf(ctx, "matmul_without_barrier%d_fails_%s", b, order_names[o]), "%s",
            pk_status_name(st));
      pk_ctx_clear_error(ctx);
    }
  }
  PASS();
}

/* Z reads Y one element to the left: in forward order every thread finds its neighbour's
 * Y written even without the barrier between the two nests; reversed and random do not. */
static void test_forward_hides(pk_ctx *ctx) {
  pk_te_program *p = gpu_test_parse(ctx, "X = placeholder((64,), f32)\n"
                                         "Y = compute((64,), (i) => X[i] * 2.0)\n"
                                         "Z = compute((64,), (i) => Y[max(i - 1, 0)] + 1.0)\n");
  pk_schedule *s = p ? pk_sched_new(ctx, p) : NULL;
  bool ok = s && pk_sched_bind(s, "t1", "i0", "threadIdx.x") == PK_OK &&
            pk_sched_bind(s, "t2", "i0", "threadIdx.x") == PK_OK;
  pk_gpu_kernel k = ok ? prepared(ctx, p, s, &ok) : (pk_gpu_kernel){0};
  CHECK(ok, "schedule: %s", pk_ctx_error(ctx));
  pk_gpu_exec_result r;
  for (int o = 0; o < 3; o++)
    CHECK(pk_gpu_check(ctx, p, s, &k, (pk_gpu_order)o, 9, NULL, &r) == PK_OK, "%s: %s",
          order_names[o], pk_ctx_error(ctx));
  pk_gpu_kernel broken = gpu_test_without_barrier(ctx, &k, 0);
  CHECK(pk_gpu_check(ctx, p, s, &broken, PK_GPU_ORDER_FORWARD, 9, NULL, &r) == PK_OK,
        "forward order should hide the missing barrier: %s", pk_ctx_error(ctx));
  for (int o = 1; o < 3; o++) {
    CHECK(pk_gpu_check(ctx, p, s, &broken, (pk_gpu_order)o, 9, NULL, &r) == PK_ERR_MISMATCH,
          "%s order missed the missing barrier", order_names[o]);
    pk_ctx_clear_error(ctx);
  }
  PASS();
}

/* A shared stage at the root with no bound loop: thread 0 of every block fills its own
 * block's copy (not just block 0's); the readers follow the barrier after it. */
static void test_root_shared_per_block(pk_ctx *ctx) {
  pk_te_program *p = gpu_test_parse(ctx, "X = placeholder((256,), f32)\n"
                                         "Y = compute((256,), (i) => X[255 - i] * 2.0)\n");
  pk_schedule *s = p ? pk_sched_new(ctx, p) : NULL;
  const char *readers[] = {"t1"};
  bool ok = s && pk_sched_cache_read(s, "t0", "shared", 1, readers, -1, 0) == PK_OK &&
            pk_sched_split(s, "t1", "i0", 64) == PK_OK &&
            pk_sched_bind(s, "t1", "i0.o", "blockIdx.x") == PK_OK &&
            pk_sched_bind(s, "t1", "i0.i", "threadIdx.x") == PK_OK;
  pk_gpu_kernel k = ok ? prepared(ctx, p, s, &ok) : (pk_gpu_kernel){0};
  CHECK(ok && k.desc.grid[0] == 4 && k.desc.block[0] == 64, "schedule: %s", pk_ctx_error(ctx));
  pk_gpu_exec_result r;
  for (int o = 0; o < 3; o++)
    CHECK(pk_gpu_check(ctx, p, s, &k, (pk_gpu_order)o, 4, NULL, &r) == PK_OK, "%s: %s",
          order_names[o], pk_ctx_error(ctx));
  PASS();
}

/* Long reductions of few outputs: the preset splits them across the block's threads
 * (rfactor into shared memory); right in every order, and wrong without the barrier
 * between the partial results and their sum. */
static void test_cross_thread_reduction(pk_ctx *ctx) {
  const char *texts[] = {
      "X = placeholder((6, 1000), f32)\nk = reduce_axis(1000)\n"
      "Y = compute((6,), (i) => sum(X[i, k] * X[i, k], k))\n",
      "X = placeholder((3000,), f32)\nk = reduce_axis(3000)\nY = compute((1,), (i) => max(X[k], k))\n",
      "X = placeholder((2, 700), f32)\nk = reduce_axis(700)\nj = reduce_axis(700)\n"
      "M = compute((2,), (i) => max(X[i, k], k))\n"
      "S = compute((2,), (i) => sum(exp(X[i, j] - M[i]), j))\n"};
  pk_target *t;
  CHECK(pk_target_parse(ctx, "opencl", NULL, &t) == PK_OK, "target");
  for (int c = 0; c < 3; c++) {
    pk_te_program *p = gpu_test_parse(ctx, texts[c]);
    CHECK(p, "parse %d: %s", c, pk_ctx_error(ctx));
    gpu_case gc;
    gpu_case_add(ctx, t, &gc, "reduction", p);
    CHECK(gc.preset && strstr(pk_sched_to_json(gc.preset), "\"set_scope\""),
          "case %d: no cross-thread preset (%s)", c, gc.why ? gc.why : pk_sched_to_json(gc.preset));
    bool ok;
    pk_gpu_kernel k = prepared(ctx, p, gc.preset, &ok);
    CHECK(ok && k.desc.block[0] == 256, "case %d: %s", c, pk_ctx_error(ctx));
    pk_gpu_exec_result r;
    for (int o = 0; o < 3; o++)
      CHECK(pk_gpu_check(ctx, p, gc.preset, &k, (pk_gpu_order)o, 6, NULL, &r) == PK_OK,
            "case %d %s: %s", c, order_names[o], pk_ctx_error(ctx));
    /* reversed order runs thread 0, which sums, after every other thread wrote its part:
     * the random order is what catches this one */
    pk_gpu_kernel broken = gpu_test_without_barrier(ctx, &k, 0);
    int caught = 0;
    for (int o = 1; o < 3; o++) {
      pk_status st = pk_gpu_check(ctx, p, gc.preset, &broken, (pk_gpu_order)o, 6, NULL, &r);
      caught += st == PK_ERR_MISMATCH || st == PK_ERR_RUNTIME;
      pk_ctx_clear_error(ctx);
    }
    CHECK(caught, "case %d: a missing barrier passed in reversed and random order", c);
  }
  PASS();
}

/* A barrier only some threads reach (what pk_gpu_prepare refuses) stops the executor. */
static void test_divergent_barrier(pk_ctx *ctx) {
  pk_te_program *p = gpu_test_parse(ctx, "X = placeholder((4,), f32)\n"
                                         "Y = compute((4,), (i) => X[i])\n");
  pk_lfunc *f;
  CHECK(p && pk_sched_lower(ctx, p, NULL, "k0", &f) == PK_OK, "lower: %s", pk_ctx_error(ctx));
  pk_lvar *v = pk_lvar_new(ctx, f, PKRT_DTYPE_I64);
  pk_lexpr *i = pk_lx_var(ctx, v);
  pk_stmt *body[2] = {
      pk_st_if(ctx, pk_lx_binary(ctx, PK_EOP_LT, i, pk_lx_int(ctx, 2), PKRT_DTYPE_BOOL),
               pk_st_barrier(ctx), NULL),
      pk_st_store(ctx, f->params[1], i, pk_lx_load(ctx, f->params[0], i))};
  f->body = pk_st_for(ctx, v, pk_lx_int(ctx, 0), pk_lx_int(ctx, 4), PK_LOOP_GPU_THREAD_X,
                      pk_st_seq(ctx, 2, body));
  pk_gpu_kernel k;
  CHECK(pk_gpu_prepare(ctx, f, &k) == PK_ERR_SCHEDULE, "prepare accepted a divergent barrier");
  pk_ctx_clear_error(ctx);
  k = (pk_gpu_kernel){.f = f, .desc = {.name = "k0", .nbufs = 2, .grid = {1, 1, 1}, .block = {4, 1, 1}}};
  pk_gpu_exec_result r;
  CHECK(pk_gpu_check(ctx, p, NULL, &k, PK_GPU_ORDER_FORWARD, 1, NULL, &r) == PK_ERR_RUNTIME &&
            strstr(pk_ctx_error(ctx), "2 of the block's 4 threads"),
        "executor: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  PASS();
}

/* Each kernel in the three orders against one interpreter run of its program. */
static void run_orders(pk_ctx *ctx, const char *label, const pk_te_program *p, const pk_schedule *s,
                       double *worst) {
  bool ok;
  pk_gpu_kernel k = prepared(ctx, p, s, &ok);
  pk_te_ref *ref = pk_te_ref_new(ctx, p);
  pk_te_ref_fill_random(p, ref, 1);
  if (ok) ok = pk_te_interp_run(ctx, p, ref) == PK_OK;
  for (int o = 0; o < 3 && ok; o++) {
    pk_gpu_exec_result r;
    ok = pk_gpu_check(ctx, p, s, &k, (pk_gpu_order)o, 1 + (uint64_t)o, ref, &r) == PK_OK;
    if (ok && r.worst_ratio > *worst) *worst = r.worst_ratio;
    if (!ok) label = pk_sprintf(ctx, "%s (%s order)", label, order_names[o]);
  }
  if (!ok) {
    printf("FAIL %s: %s\n", label, pk_ctx_error(ctx));
    failures++;
  }
  pk_ctx_clear_error(ctx);
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  test_matmul_barriers(ctx);
  test_forward_hides(ctx);
  test_divergent_barrier(ctx);
  test_root_shared_per_block(ctx);
  test_cross_thread_reduction(ctx);

  pk_target *t;
  int n, ns, counts[4];
  gpu_case *cases = pk_target_parse(ctx, "opencl", NULL, &t) == PK_OK ? gpu_test_cases(ctx, t, &n) : NULL;
  if (!cases) {
    printf("FAIL cases: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  int before = failures;
  double worst = 0;
  for (int i = 0; i < n; i++) run_orders(ctx, cases[i].label, cases[i].prog, cases[i].preset, &worst);
  check(failures == before, "presets_all_orders", "%d of %d kernels failed", failures - before, n);
  printf("     %d preset kernels in 3 orders, worst error/bound %.3g\n", n, worst);

  int per_class = gpu_test_per_class();
  gpu_sample *samples = gpu_test_samples(ctx, cases, n, per_class, 42, &ns, counts);
  before = failures;
  worst = 0;
  for (int i = 0; i < ns; i++)
    run_orders(ctx, pk_sprintf(ctx, "sample %s %s", samples[i].c->label, samples[i].knobs),
               samples[i].c->prog, samples[i].sched, &worst);
  for (int c = 0; c < 4; c++)
    check(counts[c] >= per_class, pk_sprintf(ctx, "samples_%s", pk_task_class_name((pk_task_class)c)),
          "%d sampled configs", counts[c]);
  check(failures == before, "samples_all_orders", "%d of %d configs failed", failures - before, ns);
  printf("     %d sampled configs in 3 orders, worst error/bound %.3g\n", ns, worst);
  pk_ctx_free(ctx);
  return pk_test_summary("gpu_barrier");
}
