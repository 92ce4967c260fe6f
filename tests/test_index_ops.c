/* test_index_ops.c — the TE constructs for indexing and dropout, and the ops on them:
 * scatter_add's text form, checks, interpreter and fixed schedule; the hash intrinsic's
 * definition in the interpreter and in generated C; gather/embedding with out-of-range
 * ids (zero rows forward, dropped updates backward) through generated C; the embedding
 * gradient's work (O(tokens x D), no sweep over the vocabulary); dropout's mask rate,
 * reproducibility, step dependence, forward/backward agreement, p = 0 and evaluation
 * steps (step < 0); a config space for each new kernel. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_autotune.h"
#include "pk_codegen.h"
#include "pk_loopir.h"
#include "pk_ops.h"
#include "pk_schedule.h"
#include "pk_search.h"
#include "pk_verify.h"

static int failures;

static void check(bool ok, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void check(bool ok, const char *label, const char *fmt, ...) {
  if (ok) {
    printf("PASS %s\n", label);
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL %s: ", label);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  failures++;
}

static pk_te_program *parse(pk_ctx *ctx, const char *text) {
  pk_te_program *p = NULL;
  if (pk_te_parse(ctx, text, strlen(text), "t.te", &p) != PK_OK) return NULL;
  return p;
}

/* ---- scatter_add: text, checks, interpreter ---- */

static const char *SCATTER =
    "I = placeholder((4,), i64)\n"
    "V = placeholder((4, 3), f64)\n"
    "D = scatter_add((5, 3), (4, 3), (t, d) => [I[t], d], V[t, d] * 2.0)\n";

static void test_scatter_text(pk_ctx *ctx) {
  pk_te_program *p = parse(ctx, SCATTER);
  char *c1 = p ? pk_te_print(ctx, p) : NULL;
  pk_te_program *q = c1 ? parse(ctx, c1) : NULL;
  char *c2 = q ? pk_te_print(ctx, q) : NULL;
  check(c2 && strcmp(c1, c2) == 0 &&
            strstr(c1, "t2 = scatter_add((5, 3), (4, 3), (i0, i1) => [t0[i0], i1], t1[i0, i1] * 2.0)"),
        "scatter_text_round_trip", "%s", c1 ? c1 : pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  if (!p) return;
  /* ids 1, 1 (repeated: accumulates), -1 and 5 (outside: dropped) */
  pk_te_ref *ref = pk_te_ref_new(ctx, p);
  int64_t ids[4] = {1, 1, -1, 5};
  for (int i = 0; i < 4; i++) ref->tensors[0].ival[i] = ids[i];
  for (int i = 0; i < 12; i++) ref->tensors[1].val[i] = ref->tensors[1].mag[i] = i + 1;
  bool ok = pk_te_interp_run(ctx, p, ref) == PK_OK && pk_te_interp_run(ctx, p, ref) == PK_OK;
  const double *d = ref->tensors[2].val;
  for (int r = 0; ok && r < 5; r++)
    for (int c = 0; c < 3; c++) {
      double want = r == 1 ? 2.0 * ((1 + c) + (4 + c)) : 0.0;
      ok &= d[r * 3 + c] == want;
    }
  check(ok, "scatter_interp_accumulates_and_drops", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

static void expect_check_error(pk_ctx *ctx, const char *label, const char *text, const char *needle) {
  pk_te_program *p = parse(ctx, text);
  check(!p && strstr(pk_ctx_error(ctx), needle), label, "got '%s', want '%s'",
        p ? "(accepted)" : pk_ctx_error(ctx), needle);
  pk_ctx_clear_error(ctx);
}

static void test_scatter_errors(pk_ctx *ctx) {
  expect_check_error(ctx, "scatter_not_readable",
                     "I = placeholder((4,), i64)\nD = scatter_add((5,), (4,), (t) => [I[t]], 1.0)\n"
                     "E = compute((5,), (i) => D[i])\n",
                     "scatter_add result, which no compute may read");
  expect_check_error(ctx, "scatter_float_destination",
                     "X = placeholder((4,), f32)\nD = scatter_add((5,), (4,), (t) => [X[t]], 1.0)\n",
                     "destination index 0 of 'D' must be an integer");
  expect_check_error(ctx, "scatter_destination_count",
                     "I = placeholder((4,), i64)\nD = scatter_add((5, 2), (4,), (t) => [I[t]], 1.0)\n",
                     "destination has 1 index but the result has 2 dims");
  expect_check_error(ctx, "scatter_value_read_bounds",
                     "X = placeholder((4,), f32)\nD = scatter_add((5,), (4,), (t) => [t], X[t + 1])\n",
                     "read of X can leave its tensor");
  expect_check_error(ctx, "scatter_no_reduction",
                     "X = placeholder((4,), f32)\nk = reduce_axis(4)\n"
                     "D = scatter_add((5,), (4,), (t) => [t], sum(X[k], k))\n",
                     "reduction must be the whole body");
  expect_check_error(ctx, "hash_needs_integers",
                     "X = placeholder((4,), f32)\nY = compute((4,), (i) => hash(X[i], 1, i))\n",
                     "operand 1 of hash must be an integer");
  /* the fixed schedule: no step may change a scatter_add's stage */
  pk_te_program *p = parse(ctx, SCATTER);
  pk_schedule *s = p ? pk_sched_new(ctx, p) : NULL;
  pk_status st = s ? pk_sched_parallel(s, "t2", "i0") : PK_OK;
  check(st == PK_ERR_SCHEDULE && strstr(pk_ctx_error(ctx), "scatter_add"), "scatter_schedule_fixed",
        "status %s: %s", pk_status_name(st), pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

/* Every primitive that would touch a scatter_add's stage is refused (never another
 * status); inlining an elementwise producer into its value is allowed (lowering substitutes
 * it), and that kernel equals the interpreter. */
static void test_scatter_schedules(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt) {
  static const char text[] =
      "I = placeholder((6,), i32)\nV = placeholder((6, 5), f32)\n"
      "E = compute((6, 5), (t, d) => V[t, d] * 2.0 + 1.0)\n"
      "D = scatter_add((4, 5), (6, 5), (t, d) => [I[t], d], E[t, d])\n";
  pk_te_program *p = parse(ctx, text);
  if (!p) {
    check(false, "scatter_schedules_parse", "%s", pk_ctx_error(ctx));
    return;
  }
  const char *rd[1] = {"t3"}, *two[2] = {"i1", "i0"};
  int refused = 0, tried = 0;
  for (int k = 0; k < 11; k++) {
    pk_schedule *s = pk_sched_new(ctx, p);
    pk_status st;
    switch (k) {
    case 0: st = pk_sched_split(s, "t3", "i1", 2); break;
    case 1: st = pk_sched_reorder(s, "t3", 2, two); break;
    case 2: st = pk_sched_fuse(s, "t3", "i0", "i1"); break;
    case 3: st = pk_sched_vectorize(s, "t3", "i1"); break;
    case 4: st = pk_sched_unroll(s, "t3", "i1", 0); break;
    case 5: st = pk_sched_parallel(s, "t3", "i0"); break;
    case 6: st = pk_sched_compute_at(s, "t2", "t3", "i0"); break;
    case 7: st = pk_sched_cache_read(s, "t2", "local", 1, rd, -1, 0); break;
    case 8: st = pk_sched_cache_write(s, "t3", "local"); break;
    case 9: st = pk_sched_partition(s, "t3", "i0"); break;
    default: st = pk_sched_tile(s, "t3", "i0", "i1", 2, 2); break;
    }
    tried++;
    refused += st == PK_ERR_SCHEDULE;
    if (st != PK_ERR_SCHEDULE) printf("     step %d on the scatter_add: %s\n", k, pk_status_name(st));
    pk_ctx_clear_error(ctx);
  }
  check(refused == tried, "scatter_steps_refused", "%d of %d refused", refused, tried);
  pk_schedule *s = pk_sched_new(ctx, p);
  pkrt_module *m = NULL;
  pk_kernel_check_result res;
  bool ok = pk_sched_compute_inline(s, "t2") == PK_OK &&
            pk_build_scheduled(ctx, cc, rt, &p, &s, 1, &m) == PK_OK &&
            pk_kernel_check_scheduled(ctx, rt, p, s, pkrt_module_find(m, "k0"), 3, &res) == PK_OK;
  check(ok, "scatter_inlined_producer", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  if (m) pkrt_module_free(m);
}

/* ---- the hash: pinned values, and generated C equal to the interpreter ---- */

static void test_hash_values(void) {
  /* from the definition in docs/te.md, computed independently (Python) */
  check(pk_te_hash3(1, 2, 3) == 7334193161813100 && pk_te_hash3(0, 0, 0) == 1249383295688599 &&
            pk_te_hash3(-1, 7, 123456789) == 62605031671472,
        "hash_pinned_values", "hash(1, 2, 3) = %lld", (long long)pk_te_hash3(1, 2, 3));
}

/* ---- counting the work of a lowered kernel ---- */

/* Executions of STOREs: each weighted by the trip counts of the loops around it. */
static double store_work(const pk_stmt *s, double trips) {
  if (!s) return 0;
  switch (s->kind) {
  case PK_ST_SEQ: {
    double w = 0;
    for (int i = 0; i < s->n; i++) w += store_work(s->stmts[i], trips);
    return w;
  }
  case PK_ST_FOR: return store_work(s->body, trips * (double)s->extent->ival);
  case PK_ST_IF: return store_work(s->then_, trips) + store_work(s->else_, trips);
  case PK_ST_STORE: return trips;
  case PK_ST_ALLOC:
  case PK_ST_LET: return store_work(s->body, trips);
  default: return 0;
  }
}

/* ---- gather / embedding through generated C, out-of-range ids included ---- */

static pkrt_module *build(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, pk_te_program **progs, int n) {
  pkrt_module *m = NULL;
  if (pk_build_programs(ctx, cc, rt, progs, n, &m) != PK_OK) return NULL;
  return m;
}

static void test_embedding_bad_ids(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt) {
  enum { V = 6, D = 5, N = 4, M = 3 };
  pk_op_params prm = {2, {{2, {V, D}, PKRT_DTYPE_F32}, {2, {N, M}, PKRT_DTYPE_I64}}, {.groups = 0}};
  pk_te_program *fwd;
  pk_op_grad g;
  if (pk_op_build(ctx, PK_OP_EMBEDDING, &prm, &fwd) != PK_OK ||
      pk_op_grad_build(ctx, PK_OP_EMBEDDING, &prm, 0, &g) != PK_OK) {
    check(false, "embedding_build", "%s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return;
  }
  pk_te_program *progs[2] = {fwd, g.prog};
  pkrt_module *m = build(ctx, cc, rt, progs, 2);
  if (!m) {
    check(false, "embedding_codegen", "%s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return;
  }
  int64_t ids[N * M] = {0, 5, -1, 2, 6, 2, 1LL << 40, 3, 2, -7, 0, 5};
  /* forward: the kernel equals the interpreter, and bad ids give zero rows */
  pk_te_ref *ref = pk_te_ref_new(ctx, fwd);
  pk_te_ref_fill_random(fwd, ref, 5);
  memcpy(ref->tensors[1].ival, ids, sizeof ids);
  pk_kernel_check_result res;
  bool ok = pk_te_interp_run(ctx, fwd, ref) == PK_OK &&
            pk_kernel_check_ref(ctx, rt, fwd, NULL, pkrt_module_find(m, "k0"), ref, &res) == PK_OK;
  for (int t = 0; ok && t < N * M; t++)
    for (int d = 0; d < D; d++) {
      double want = ids[t] >= 0 && ids[t] < V ? ref->tensors[0].val[ids[t] * D + d] : 0.0;
      ok &= ref->tensors[2].val[t * D + d] == want;
    }
  check(ok, "embedding_forward_bad_ids_zero_rows", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  /* gradient: the kernel equals the interpreter, which equals a naive scatter */
  pk_te_ref *gref = pk_te_ref_new(ctx, g.prog);
  pk_te_ref_fill_random(g.prog, gref, 6);
  memcpy(gref->tensors[0].ival, ids, sizeof ids);
  ok = pk_te_interp_run(ctx, g.prog, gref) == PK_OK &&
       pk_kernel_check_ref(ctx, rt, g.prog, NULL, pkrt_module_find(m, "k1"), gref, &res) == PK_OK;
  double want[V * D] = {0};
  for (int t = 0; t < N * M; t++)
    for (int d = 0; ids[t] >= 0 && ids[t] < V && d < D; d++)
      want[ids[t] * D + d] += gref->tensors[1].val[t * D + d];
  for (int i = 0; ok && i < V * D; i++) ok &= fabs(gref->tensors[2].val[i] - want[i]) <= 1e-12;
  check(ok, "embedding_grad_bad_ids_dropped", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  pkrt_module_free(m);

  /* work: zeros over (V, D) once, then one update per (token, d): V*D + N*M*D stores */
  pk_lfunc *f;
  double work = -1;
  if (pk_sched_lower(ctx, g.prog, NULL, "k0", &f) == PK_OK) work = store_work(f->body, 1);
  check(work == (double)(V * D + N * M * D), "embedding_grad_work_tokens_times_d",
        "%g stores (want %d): %s", work, V * D + N * M * D, pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  /* the same at a real vocabulary: the kernel's work does not grow with V x tokens */
  pk_op_params big = {2, {{2, {50000, 64}, PKRT_DTYPE_F32}, {1, {128}, PKRT_DTYPE_I64}}, {.groups = 0}};
  pk_op_grad gb;
  work = -1;
  if (pk_op_grad_build(ctx, PK_OP_EMBEDDING, &big, 0, &gb) == PK_OK &&
      pk_sched_lower(ctx, gb.prog, NULL, "k0", &f) == PK_OK)
    work = store_work(f->body, 1);
  check(work == 50000.0 * 64 + 128.0 * 64 && pk_te_flops(gb.prog) == 128.0 * 64,
        "embedding_grad_work_large_vocab", "%g stores, %g flops: %s", work,
        work >= 0 ? pk_te_flops(gb.prog) : 0.0, pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

/* ---- dropout ---- */

enum { DROP_N = 100000 };

/* Runs dropout (f32 X of DROP_N ones) and its gradient (dY = 1) through the interpreter at
 * (seed, step); y and dx get the results. */
static bool run_dropout(pk_ctx *ctx, double p, int64_t seed, int64_t step, double *y, double *dx) {
  pk_op_params prm = {2, {{2, {100, DROP_N / 100}, PKRT_DTYPE_F32}, {1, {2}, PKRT_DTYPE_I64}},
                      {.drop_p = p}};
  pk_te_program *fwd;
  pk_op_grad g;
  if (pk_op_build(ctx, PK_OP_DROPOUT, &prm, &fwd) != PK_OK ||
      pk_op_grad_build(ctx, PK_OP_DROPOUT, &prm, 0, &g) != PK_OK)
    return false;
  pk_te_ref *ref = pk_te_ref_new(ctx, fwd), *gref = pk_te_ref_new(ctx, g.prog);
  if (!ref || !gref) return false;
  for (int64_t i = 0; i < DROP_N; i++) ref->tensors[0].val[i] = ref->tensors[0].mag[i] = 1.0;
  ref->tensors[1].ival[0] = gref->tensors[0].ival[0] = seed;
  ref->tensors[1].ival[1] = gref->tensors[0].ival[1] = step;
  for (int64_t i = 0; i < DROP_N; i++) gref->tensors[1].val[i] = gref->tensors[1].mag[i] = 1.0;
  if (pk_te_interp_run(ctx, fwd, ref) != PK_OK || pk_te_interp_run(ctx, g.prog, gref) != PK_OK)
    return false;
  memcpy(y, ref->tensors[2].val, sizeof(double) * DROP_N);
  memcpy(dx, gref->tensors[2].val, sizeof(double) * DROP_N);
  return true;
}

static void test_dropout(pk_ctx *ctx) {
  double *y = malloc(sizeof(double) * DROP_N), *dx = malloc(sizeof(double) * DROP_N);
  double *y2 = malloc(sizeof(double) * DROP_N), *dx2 = malloc(sizeof(double) * DROP_N);
  const double p = 0.3, scale = (double)(float)(1.0 / (1.0 - p));
  bool ran = run_dropout(ctx, p, 1234, 7, y, dx);
  int64_t zeros = 0, bad_value = 0, mask_differs = 0;
  for (int64_t i = 0; ran && i < DROP_N; i++) {
    zeros += y[i] == 0.0;
    bad_value += y[i] != 0.0 && fabs(y[i] - scale) > 1e-6;
    mask_differs += (y[i] == 0.0) != (dx[i] == 0.0) || y[i] != dx[i];
  }
  /* binomial: sd = sqrt(p (1 - p) / n) = 0.00145; 5 sd (the hash is fixed, so no flakes) */
  double rate = (double)zeros / DROP_N;
  check(ran && fabs(rate - p) < 5 * sqrt(p * (1 - p) / DROP_N) && bad_value == 0,
        "dropout_rate_and_scale", "rate %.5f (p %.2f), %lld kept values not 1/(1-p): %s", rate, p,
        (long long)bad_value, pk_ctx_error(ctx));
  /* scripts/graph_torch.py (the PyTorch reference for graph fixtures) draws the same mask:
   * at (1234, 7), p 0.3 it zeroes 29725 of these elements, the first ones 3, 4, 5, 8, 15 */
  bool same_as_torch = ran && zeros == 29725 && y[3] == 0 && y[4] == 0 && y[5] == 0 &&
                       y[8] == 0 && y[15] == 0 && y[0] != 0 && y[6] != 0;
  check(same_as_torch, "dropout_mask_matches_graph_torch", "%lld zeros", (long long)zeros);
  check(ran && mask_differs == 0, "dropout_backward_same_mask", "%lld elements differ",
        (long long)mask_differs);
  bool again = run_dropout(ctx, p, 1234, 7, y2, dx2);
  check(again && memcmp(y, y2, sizeof(double) * DROP_N) == 0, "dropout_reproducible",
        "same (seed, step) gave another mask");
  bool next = run_dropout(ctx, p, 1234, 8, y2, dx2);
  int64_t changed = 0;
  for (int64_t i = 0; next && i < DROP_N; i++) changed += (y[i] == 0.0) != (y2[i] == 0.0);
  /* independent masks differ in 2 p (1 - p) = 42% of elements */
  check(next && changed > DROP_N / 3, "dropout_differs_across_steps", "%lld of %d changed",
        (long long)changed, DROP_N);
  bool other_seed = run_dropout(ctx, p, 99, 7, y2, dx2);
  changed = 0;
  for (int64_t i = 0; other_seed && i < DROP_N; i++) changed += (y[i] == 0.0) != (y2[i] == 0.0);
  check(other_seed && changed > DROP_N / 3, "dropout_differs_across_seeds", "%lld changed",
        (long long)changed);
  bool zero = run_dropout(ctx, 0.0, 1234, 7, y2, dx2);
  bool identity = zero;
  for (int64_t i = 0; zero && i < DROP_N; i++) identity &= y2[i] == 1.0 && dx2[i] == 1.0;
  check(identity, "dropout_p0_identity", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  bool eval = run_dropout(ctx, p, 1234, -1, y2, dx2);
  identity = eval;
  for (int64_t i = 0; eval && i < DROP_N; i++) identity &= y2[i] == 1.0;
  check(identity, "dropout_negative_step_is_eval_identity", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  free(y), free(dx), free(y2), free(dx2);
}

/* dropout's generated C equals the interpreter bit for bit on the mask (the hash in
 * c_prelude.h and in te/expr.c agree) on a large tensor, with a large seed and step. */
static void test_dropout_codegen(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt) {
  pk_op_params prm = {2, {{1, {DROP_N}, PKRT_DTYPE_F32}, {1, {2}, PKRT_DTYPE_I64}}, {.drop_p = 0.25}};
  pk_te_program *fwd;
  pk_op_grad g;
  if (pk_op_build(ctx, PK_OP_DROPOUT, &prm, &fwd) != PK_OK ||
      pk_op_grad_build(ctx, PK_OP_DROPOUT, &prm, 0, &g) != PK_OK) {
    check(false, "dropout_codegen_build", "%s", pk_ctx_error(ctx));
    return;
  }
  pk_te_program *progs[2] = {fwd, g.prog};
  pkrt_module *m = build(ctx, cc, rt, progs, 2);
  bool ok = m != NULL;
  for (int k = 0; ok && k < 2; k++) {
    pk_te_program *p = progs[k];
    int s = k == 0 ? 1 : 0; /* where S sits */
    pk_te_ref *ref = pk_te_ref_new(ctx, p);
    pk_te_ref_fill_random(p, ref, 17);
    ref->tensors[s].ival[0] = -3141592653589793;
    ref->tensors[s].ival[1] = 1LL << 45;
    pk_kernel_check_result res;
    ok = pk_te_interp_run(ctx, p, ref) == PK_OK &&
         pk_kernel_check_ref(ctx, rt, p, NULL, pkrt_module_find(m, k ? "k1" : "k0"), ref, &res) == PK_OK;
  }
  check(ok, "dropout_codegen_equals_interpreter", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  if (m) pkrt_module_free(m);
}

/* `pock tune` gets a config space for each new kernel, and its configs build or are
 * refused as illegal candidates (PK_ERR_SCHEDULE: the tuner records and skips those, as an
 * unroll deeper than a loop); a scatter_add's stage keeps its fixed schedule under all. */
static void test_tune_spaces(pk_ctx *ctx) {
  const pkrt_dtype F = PKRT_DTYPE_F32, L = PKRT_DTYPE_I64;
  struct { const char *label; pk_op_kind op; pk_op_params prm; int grad; } cases[] = {
      {"tune_space_gather", PK_OP_GATHER, {2, {{2, {7, 33}, F}, {1, {5}, L}}, {.axis = 1}}, -1},
      {"tune_space_embedding_grad", PK_OP_EMBEDDING, {2, {{2, {50, 16}, F}, {2, {4, 8}, L}}, {.groups = 0}}, 0},
      {"tune_space_gather_grad", PK_OP_GATHER, {2, {{3, {2, 9, 4}, F}, {1, {6}, L}}, {.axis = 1}}, 0},
      {"tune_space_dropout", PK_OP_DROPOUT, {2, {{2, {7, 33}, F}, {1, {2}, L}}, {.drop_p = 0.5}}, -1},
      {"tune_space_dropout_grad", PK_OP_DROPOUT, {2, {{2, {7, 33}, F}, {1, {2}, L}}, {.drop_p = 0.5}}, 0},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    pk_te_program *p = NULL;
    pk_op_grad g;
    if (cases[c].grad < 0) pk_op_build(ctx, cases[c].op, &cases[c].prm, &p);
    else if (pk_op_grad_build(ctx, cases[c].op, &cases[c].prm, cases[c].grad, &g) == PK_OK) p = g.prog;
    pk_task task;
    pk_space *sp = NULL;
    bool ok = p && pk_task_from_program(ctx, p, "c", &task) == PK_OK &&
              pk_space_new(ctx, &task, &sp) == PK_OK && pk_space_nknobs(sp) > 0;
    pk_rng rng;
    pk_rng_seed(&rng, 3);
    int built = 0, illegal = 0;
    for (int i = 0; ok && i < 12; i++) {
      pk_config cfg;
      pk_candidate cand;
      pk_space_sample(sp, &rng, &cfg);
      pk_status s = pk_space_build(sp, &cfg, &cand);
      built += s == PK_OK;
      illegal += s == PK_ERR_SCHEDULE;
      ok = s == PK_OK || s == PK_ERR_SCHEDULE;
      pk_ctx_clear_error(ctx);
    }
    check(ok && built > 0, cases[c].label, "%d of 12 configs built, %d illegal: %s", built,
          illegal, pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    pk_space_free(sp);
  }
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pk_cc_options opts = {NULL, NULL, PK_TEST_CACHE_DIR};
  pk_cc *cc;
  if (pk_cc_new(ctx, &opts, &cc) != PK_OK) {
    printf("FAIL compiler: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  test_scatter_text(ctx);
  test_scatter_errors(ctx);
  test_hash_values();
  test_scatter_schedules(ctx, cc, rt);
  test_embedding_bad_ids(ctx, cc, rt);
  test_dropout(ctx);
  test_dropout_codegen(ctx, cc, rt);
  test_tune_spaces(ctx);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  printf("%s index_ops\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
