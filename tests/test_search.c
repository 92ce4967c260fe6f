/* test_search.c — the tuner's search without compiling anything: config spaces of every
 * class (sizes, legality of every sampled config, the hand schedules inside, determinism,
 * enumeration), knobs and features round trips, sgemm matching, the cost model on a linear
 * target, the tuners (grid without repeats, resume, early stop, evo beating random on a
 * synthetic objective) and the budget split. test_search_kernels.c runs real kernels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hand_schedules.h"
#include "pk_ops.h"
#include "pk_search.h"

static int failures;

#define CHECK(cond, ...)                                    \
  do {                                                      \
    if (!(cond)) {                                          \
      failures++;                                           \
      printf("FAIL %s:%d: ", __func__, __LINE__);           \
      printf(__VA_ARGS__);                                  \
      printf("\n");                                         \
    }                                                       \
  } while (0)

static void report(const char *name, int failures_before) {
  if (failures == failures_before) printf("PASS %s\n", name);
}

static pk_task *make_task(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm) {
  pk_te_program *p;
  if (pk_op_build(ctx, op, prm, &p) != PK_OK) {
    printf("FAIL building %s: %s\n", pk_op_name(op), pk_ctx_error(ctx));
    exit(1);
  }
  pk_task *t = pk_alloc(ctx, sizeof *t);
  PK_ASSERT(pk_task_from_program(ctx, p, "c", t) == PK_OK);
  return t;
}

static pk_op_params matmul_params(int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  pk_op_params prm = {.ninputs = 2, .attrs = {.trans_a = ta, .trans_b = tb}};
  prm.in[0] = (pk_op_input){2, {ta ? k : m, ta ? m : k}, PKRT_DTYPE_F32};
  prm.in[1] = (pk_op_input){2, {tb ? n : k, tb ? k : n}, PKRT_DTYPE_F32};
  return prm;
}

/* bench/bench_matmul.c's conv2d: N=8, C=O=64, 32×32, 3×3, pad 1 */
static pk_op_params conv_params(void) {
  pk_op_params prm = {.ninputs = 2, .attrs = {.pad = {1, 1, 1, 1}}};
  prm.in[0] = (pk_op_input){4, {8, 64, 32, 32}, PKRT_DTYPE_F32};
  prm.in[1] = (pk_op_input){4, {64, 64, 3, 3}, PKRT_DTYPE_F32};
  return prm;
}

static pk_space *make_space(pk_ctx *ctx, const pk_task *t) {
  pk_space *sp;
  if (pk_space_new(ctx, t, &sp) != PK_OK) {
    printf("FAIL space for %s: %s\n", t->name, pk_ctx_error(ctx));
    exit(1);
  }
  return sp;
}

/* The widest vector of "c" (this machine): what the spaces size their lanes by. */
static int native_vector_bytes(void) {
  pk_ctx *c = pk_ctx_new();
  pk_target *t;
  int bytes = pk_target_native(c, &t) == PK_OK ? t->vector_bytes : 16;
  pk_ctx_free(c);
  return bytes;
}

/* 1 + the widths 4, 8, ... up to two hardware vectors that fit max_lanes */
static uint64_t vector_choices(int64_t max_lanes) {
  int lanes = native_vector_bytes() / 4;
  uint64_t n = 1;
  for (int64_t v = 4; v <= 2 * lanes && v <= 64 && v <= max_lanes; v *= 2) n++;
  return n;
}

static void test_space_sizes(pk_ctx *ctx) {
  int before = failures;
  pk_op_params mm = matmul_params(1024, 1024, 1024, false, false), cv = conv_params();
  pk_space *gemm = make_space(ctx, make_task(ctx, PK_OP_MATMUL, &mm));
  /* tile_m 10, tile_n 10, vector, cache_write 2, pack_b 3, pack_a 2, order 2, k_unroll 4,
   * k_block 6 (0, 32 … 512), unroll 2, rfactor 2, parallel 1 (off by default), vector_rows
   * 1 (B is stored (K, N)) */
  uint64_t want = 10ull * 10 * vector_choices(1024) * 2 * 3 * 2 * 2 * 4 * 6 * 2 * 2;
  CHECK(pk_space_size(gemm) == want, "gemm 1024: size %llu, want %llu",
        (unsigned long long)pk_space_size(gemm), (unsigned long long)want);
  CHECK(pk_space_size(gemm) >= 10000, "gemm space too small");
  CHECK(pk_space_nexterns(gemm) == 1, "gemm: no sgemm extern");
  pk_space *conv = make_space(ctx, make_task(ctx, PK_OP_CONV2D, &cv));
  /* tile_oc 8 (1,2,3,4,6,8,12,16), tile_w 6 (1,2,4,8,16,32), tile_h 3, vector,
   * cache_write 2, reduce_order 6, order 2, unroll 2, unroll_k 4, pack_w 2, partition 2 */
  want = 8ull * 6 * 3 * vector_choices(32) * 2 * 6 * 2 * 2 * 4 * 2 * 2;
  CHECK(pk_space_size(conv) == want, "conv: size %llu, want %llu",
        (unsigned long long)pk_space_size(conv), (unsigned long long)want);
  CHECK(pk_space_size(conv) >= 10000, "conv space too small");
  pk_op_params sm = {.ninputs = 1, .in = {{2, {64, 1000}, PKRT_DTYPE_F32}}, .attrs = {.axis = 1}};
  pk_space *softmax = make_space(ctx, make_task(ctx, PK_OP_SOFTMAX, &sm));
  /* vector, rfactor 6 (0, 4, 8, 16, 32, 64), reduce_pos 2, unroll 4 */
  want = vector_choices(1000) * 6 * 2 * 4;
  CHECK(pk_space_size(softmax) == want, "softmax: size %llu, want %llu",
        (unsigned long long)pk_space_size(softmax), (unsigned long long)want);
  pk_op_params re = {.ninputs = 1, .in = {{2, {256, 256}, PKRT_DTYPE_F32}}};
  pk_space *relu = make_space(ctx, make_task(ctx, PK_OP_RELU, &re));
  want = vector_choices(65536) * 2 * 4; /* vector, fuse, unroll */
  CHECK(pk_space_size(relu) == want, "relu: size %llu, want %llu",
        (unsigned long long)pk_space_size(relu), (unsigned long long)want);
  pk_space_options par;
  pk_space_options_default(&par);
  par.allow_parallel = true;
  pk_space *gemm_par;
  PK_ASSERT(pk_space_new_opts(ctx, pk_space_task(gemm), &par, &gemm_par) == PK_OK);
  CHECK(pk_space_size(gemm_par) == 2 * pk_space_size(gemm), "parallel knob doubles the space");
  printf("  sizes: gemm 1024^3 %llu, conv2d %llu, softmax %llu, relu %llu\n",
         (unsigned long long)pk_space_size(gemm), (unsigned long long)pk_space_size(conv),
         (unsigned long long)pk_space_size(softmax), (unsigned long long)pk_space_size(relu));
  pk_space_free(gemm);
  pk_space_free(gemm_par);
  pk_space_free(conv);
  pk_space_free(softmax);
  pk_space_free(relu);
  report("space sizes", before);
}

/* Every sampled config of every op example (and the benchmark shapes) builds, or is
 * refused with PK_ERR_SCHEDULE — never another status. */
static void test_sampled_configs_legal_or_refused(pk_ctx *ctx) {
  int before = failures, nex, total = 0, legal = 0;
  const pk_op_example *ex = pk_op_examples(&nex);
  pk_space_options par;
  pk_space_options_default(&par);
  par.allow_parallel = true;
  pk_rng rng;
  pk_rng_seed(&rng, 42);
  for (int i = 0; i < nex + 2; i++) {
    pk_op_params big = i == nex ? matmul_params(96, 80, 200, true, true) : conv_params();
    const pk_task *t = i < nex ? make_task(ctx, ex[i].op, &ex[i].prm)
                               : make_task(ctx, i == nex ? PK_OP_MATMUL : PK_OP_CONV2D, &big);
    for (int p = 0; p < 2; p++) {
      pk_space *sp;
      if (pk_space_new_opts(ctx, t, p ? &par : NULL, &sp) != PK_OK) {
        CHECK(0, "%s: no space: %s", t->name, pk_ctx_error(ctx));
        pk_ctx_clear_error(ctx);
        continue;
      }
      for (int k = 0; k < (i == nex + 1 ? 600 : 150); k++) { /* the conv: partitions */
        pk_config c;
        pk_candidate cand;
        pk_space_sample(sp, &rng, &c);
        pk_status st = pk_space_build(sp, &c, &cand);
        total++;
        if (st == PK_OK) {
          legal++;
          CHECK(cand.trace && cand.knobs && cand.trace_hash && strlen(cand.trace_hash) == 64,
                "%s: incomplete candidate", t->name);
          /* and lowers into loop features, as the tuner does with every candidate in its
           * own process: lowering may refuse (PK_ERR_SCHEDULE), never abort */
          double feat[PK_FEATURE_COUNT];
          st = pk_features_of(ctx, t, &cand, feat, PK_FEATURE_COUNT);
          CHECK(st == PK_OK || st == PK_ERR_SCHEDULE, "%s: features: %s: %s", t->name, pk_status_name(st),
                pk_ctx_error(ctx));
        } else {
          CHECK(st == PK_ERR_SCHEDULE, "%s: status %s: %s", t->name, pk_status_name(st), pk_ctx_error(ctx));
        }
        pk_ctx_clear_error(ctx);
      }
      pk_space_free(sp);
    }
  }
  printf("  %d of %d sampled configs legal\n", legal, total);
  CHECK(legal > total / 3, "most configs illegal (%d of %d)", legal, total);
  report("sampled configs build or are refused with PK_ERR_SCHEDULE", before);
}

/* The preset is the hand schedule, step for step: the space contains it. */
static void test_hand_schedules_in_space(pk_ctx *ctx) {
  int before = failures;
  /* bench/bench_matmul.c's shapes: (M, N, K, trans_a, trans_b). Square NT is left out: the
   * hand schedule tells B's column dim by its extent, which cannot work when N == K. */
  static const struct { int64_t m, n, k; bool ta, tb; } shapes[] = {
      {1024, 1024, 1024, false, false}, {32, 256, 784, false, true}, {256, 784, 32, true, false},
      {3072, 768, 128, true, false}}; /* (rows outermost where the L2 is 2 MiB: both take it) */
  enum { NMM = sizeof shapes / sizeof shapes[0] };
  for (int i = 0; i <= NMM; i++) {
    pk_op_params prm = i < NMM ? matmul_params(shapes[i].m, shapes[i].n, shapes[i].k, shapes[i].ta, shapes[i].tb)
                               : conv_params();
    const pk_task *t = make_task(ctx, i < NMM ? PK_OP_MATMUL : PK_OP_CONV2D, &prm);
    pk_space *sp = make_space(ctx, t);
    pk_config c;
    pk_candidate cand;
    CHECK(pk_space_preset(sp, &c), "%s: no preset", t->name);
    CHECK(pk_space_build(sp, &c, &cand) == PK_OK, "%s: preset illegal: %s", t->name, pk_ctx_error(ctx));
    pk_schedule *hand = pk_sched_new(ctx, t->prog);
    PK_ASSERT((i < NMM ? pk_hand_schedule_matmul(hand, NULL) : pk_hand_schedule_conv2d(hand, NULL)) == PK_OK);
    CHECK(cand.trace && !strcmp(cand.trace, pk_sched_to_json(hand)), "%s: preset differs from the hand schedule:\n  %s\n  %s",
          t->name, cand.trace, pk_sched_to_json(hand));
    /* and so are its neighbours: each knob one step either way, mostly legal */
    int neighbours = 0, legal = 0;
    for (int k = 0; k < pk_space_nknobs(sp); k++)
      for (int step = -1; step <= 1; step += 2) {
        pk_config nb = c;
        nb.idx[k] += step;
        if (nb.idx[k] < 0 || nb.idx[k] >= pk_space_knob(sp, k)->nvalues) continue;
        neighbours++;
        legal += pk_space_build(sp, &nb, &cand) == PK_OK;
        pk_ctx_clear_error(ctx);
      }
    CHECK(neighbours >= 10 && 2 * legal >= neighbours, "%s: %d of %d neighbours legal", t->name, legal, neighbours);
    pk_space_free(sp);
  }
  report("hand schedules are configs of their spaces", before);
}

/* B stored (N, K) adds vector_rows (and its tile sizes); a record made before the knob
 * existed reads as vector_rows 0; other missing or unknown names are refused. A rows
 * config's accumulator tile is emitted as whole vectors (registers), not strided scalars. */
static void test_vector_rows(pk_ctx *ctx) {
  int before = failures;
  pk_op_params nt = matmul_params(32, 256, 784, false, true), nn = matmul_params(32, 256, 784, false, false);
  pk_space *sp = make_space(ctx, make_task(ctx, PK_OP_MATMUL, &nt));
  pk_space *plain = make_space(ctx, make_task(ctx, PK_OP_MATMUL, &nn));
  int vr = pk_space_knob_index(sp, "vector_rows");
  CHECK(vr >= 0 && pk_space_knob(sp, vr)->nvalues == 2, "NT: vector_rows offered");
  CHECK(pk_space_knob(plain, pk_space_knob_index(plain, "vector_rows"))->nvalues == 1, "NN: vector_rows 0 only");
  CHECK(pk_space_size(sp) > 2 * pk_space_size(plain), "NT space: rows and the extra tile sizes");
  const char *rows = "{\"cache_write\":1,\"k_block\":0,\"k_unroll\":1,\"order\":1,\"pack_a\":1,\"pack_b\":0,"
                     "\"parallel\":0,\"rfactor\":0,\"tile_m\":16,\"tile_n\":6,\"unroll\":1,\"vector\":8";
  pk_config c;
  CHECK(pk_space_config_from_knobs(sp, pk_sprintf(ctx, "%s,\"vector_rows\":1}", rows), &c) == PK_OK &&
            pk_space_knob(sp, vr)->values[c.idx[vr]] == 1, "rows config parses");
  pk_schedule *sched;
  pk_lfunc *f;
  char *src = NULL;
  if (pk_space_schedule(sp, ctx, &c, &sched) == PK_OK &&
      pk_sched_lower(ctx, pk_space_task(sp)->prog, sched, "k0", &f) == PK_OK)
    pk_cgen_c(ctx, &f, 1, &src);
  CHECK(src && strstr(src, "pk_f32x8 b4[12]; /* a register tile"), "16x6 rows tile: 12 vectors in registers");
  pk_ctx_clear_error(ctx);
  CHECK(pk_space_config_from_knobs(sp, pk_sprintf(ctx, "%s}", rows), &c) == PK_OK && c.idx[vr] == 0,
        "knobs without vector_rows (an older record) read as 0");
  CHECK(pk_space_config_from_knobs(sp, pk_sprintf(ctx, "%s,\"bogus\":1}", rows), &c) == PK_ERR_CHECK,
        "an unknown knob name is refused");
  pk_ctx_clear_error(ctx);
  CHECK(pk_space_config_from_knobs(sp, "{\"cache_write\":1,\"vector_rows\":1}", &c) == PK_ERR_CHECK,
        "a missing knob is refused");
  pk_ctx_clear_error(ctx);
  pk_space_free(sp);
  pk_space_free(plain);
  report("vector_rows: offered for B stored (N, K), older knobs, register tile", before);
}

static void test_determinism_and_grid(pk_ctx *ctx) {
  int before = failures;
  pk_op_params mm = matmul_params(64, 48, 40, false, true);
  pk_space *sp = make_space(ctx, make_task(ctx, PK_OP_MATMUL, &mm));
  pk_rng a, b, c;
  pk_rng_seed(&a, 7);
  pk_rng_seed(&b, 7);
  pk_rng_seed(&c, 8);
  int differ = 0;
  for (int i = 0; i < 200; i++) {
    pk_config x, y, z, mx, my;
    pk_space_sample(sp, &a, &x);
    pk_space_sample(sp, &b, &y);
    pk_space_sample(sp, &c, &z);
    CHECK(pk_config_equal(&x, &y), "sample not deterministic");
    differ += !pk_config_equal(&x, &z);
    pk_space_mutate(sp, &x, &a, &mx);
    pk_space_mutate(sp, &y, &b, &my);
    CHECK(pk_config_equal(&mx, &my), "mutate not deterministic");
    CHECK(!pk_config_equal(&mx, &x), "mutate changed nothing");
    /* knobs JSON names the config */
    pk_config back;
    CHECK(pk_space_config_from_knobs(sp, pk_space_knobs_json(ctx, sp, &x), &back) == PK_OK &&
              pk_config_equal(&back, &x), "knobs JSON round trip");
  }
  CHECK(differ > 150, "different seeds give the same samples");
  /* enumeration: a bijection between [0, size) and configs */
  pk_op_params small = matmul_params(7, 5, 33, true, false);
  pk_space *g = make_space(ctx, make_task(ctx, PK_OP_MATMUL, &small));
  uint64_t size = pk_space_size(g);
  uint64_t *hashes = malloc(size * sizeof *hashes);
  for (uint64_t i = 0; i < size; i++) {
    pk_config cfg;
    pk_space_config_at(g, i, &cfg);
    CHECK(pk_space_index_of(g, &cfg) == i, "index_of(config_at(%llu))", (unsigned long long)i);
    hashes[i] = pk_config_hash(&cfg);
  }
  int repeats = 0;
  for (uint64_t i = 0; i < size; i++)
    for (uint64_t j = i + 1; j < size && j < i + 4096; j++) repeats += hashes[i] == hashes[j];
  CHECK(repeats == 0, "config_at repeats %d configs", repeats);
  free(hashes);
  pk_space_free(g);
  pk_space_free(sp);
  report("sample and mutate deterministic per seed; enumeration is a bijection", before);
}

/* Candidates proposed by a tuner (strings compared, every one). */
static int run_tuner_collect(pk_ctx *ctx, pk_tuner *t, int batch, int max, const char **hashes) {
  int n = 0;
  while (n < max && !pk_tuner_done(t)) {
    pk_candidate c[64];
    int got;
    pk_tuner_next_batch(t, batch, c, &got);
    if (!got) break;
    for (int i = 0; i < got; i++) {
      hashes[n++] = c[i].trace_hash;
      pk_measurement m = {.status = PK_MEAS_OK, .gflops = 1 + (double)(n % 7)};
      pk_tuner_update(t, &c[i], &m);
    }
  }
  return n;
}

static int count_repeats(const char **h, int n) {
  int r = 0;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) r += !strcmp(h[i], h[j]);
  return r;
}

static void test_grid_random_resume(pk_ctx *ctx) {
  int before = failures;
  pk_op_params sm = {.ninputs = 1, .in = {{2, {16, 64}, PKRT_DTYPE_F32}}, .attrs = {.axis = 1}};
  const pk_task *task = make_task(ctx, PK_OP_SOFTMAX, &sm);
  pk_space *sp = make_space(ctx, task);
  const char *grid_hashes[4096], *more[4096];
  pk_tuner *grid = pk_tuner_new(ctx, PK_TUNER_GRID, task, sp, 1);
  int n = run_tuner_collect(ctx, grid, 16, 4096, grid_hashes);
  pk_tuner_stats st;
  pk_tuner_get_stats(grid, &st);
  CHECK(st.exhausted && pk_tuner_done(grid), "grid did not end");
  CHECK(count_repeats(grid_hashes, n) == 0, "grid repeated a trace");
  CHECK((uint64_t)(n + st.illegal + st.duplicates) == pk_space_size(sp),
        "grid: %d proposed + %lld illegal + %lld duplicates != size %llu", n, (long long)st.illegal,
        (long long)st.duplicates, (unsigned long long)pk_space_size(sp));
  pk_tuner_free(grid);
  /* random until exhausted finds the same set of traces */
  pk_tuner *rnd = pk_tuner_new(ctx, PK_TUNER_RANDOM, task, sp, 3);
  int m = run_tuner_collect(ctx, rnd, 16, 4096, more);
  CHECK(m == n && count_repeats(more, m) == 0, "random: %d traces (grid %d), repeats %d", m, n, count_repeats(more, m));
  pk_tuner_free(rnd);
  /* resume: half of the grid's traces as history are never proposed again */
  pk_record *hist = pk_alloc(ctx, (size_t)(n / 2 + 1) * sizeof *hist);
  for (int i = 0; i < n / 2; i++) {
    hist[i].workload = task->workload;
    hist[i].cand.kind = PK_CAND_SCHEDULE;
    hist[i].cand.trace_hash = grid_hashes[i];
    hist[i].meas.status = PK_MEAS_OK;
    hist[i].meas.gflops = 2;
  }
  for (int kind = 0; kind < 3; kind++) {
    pk_tuner *t = pk_tuner_new(ctx, (pk_tuner_kind)kind, task, sp, 5);
    pk_tuner_seed_history(t, hist, n / 2);
    int k = run_tuner_collect(ctx, t, 8, 4096, more);
    int reproposed = 0;
    for (int i = 0; i < k; i++)
      for (int j = 0; j < n / 2; j++) reproposed += !strcmp(more[i], grid_hashes[j]);
    CHECK(reproposed == 0, "%s re-proposed %d seeded traces", pk_tuner_kind_name((pk_tuner_kind)kind), reproposed);
    CHECK(k == n - n / 2, "%s proposed %d of the %d left", pk_tuner_kind_name((pk_tuner_kind)kind), k, n - n / 2);
    pk_tuner_free(t);
  }
  /* early stop: no improvement for `patience` updates */
  pk_tuner_options o;
  pk_tuner_options_default(&o);
  o.patience = 5;
  pk_tuner *t = pk_tuner_new_opts(ctx, PK_TUNER_RANDOM, task, sp, 9, &o);
  int updates = 0;
  while (!pk_tuner_done(t) && updates < 100) {
    pk_candidate c;
    int got;
    pk_tuner_next_batch(t, 1, &c, &got);
    if (!got) break;
    pk_measurement meas = {.status = PK_MEAS_OK, .gflops = 3};
    pk_tuner_update(t, &c, &meas);
    updates++;
  }
  CHECK(updates == 6, "early stop after %d updates, want 6 (1 best + 5 without gain)", updates);
  pk_tuner_free(t);
  pk_space_free(sp);
  report("grid enumerates without repeats; resume never re-proposes; early stop", before);
}

static void test_features_and_externs(pk_ctx *ctx) {
  int before = failures;
  pk_op_params mm = matmul_params(32, 256, 784, false, true);
  const pk_task *task = make_task(ctx, PK_OP_MATMUL, &mm);
  pk_space *sp = make_space(ctx, task);
  pk_tuner *t = pk_tuner_new(ctx, PK_TUNER_RANDOM, task, sp, 11);
  pk_candidate c[4];
  int got;
  pk_tuner_next_batch(t, 4, c, &got);
  CHECK(got == 4 && c[0].kind == PK_CAND_EXTERN, "the extern comes first");
  CHECK(!strcmp(c[0].extern_lib, "libopenblas.so.0") && !strcmp(c[0].extern_sym, "cblas_sgemm") &&
            !strcmp(c[0].extern_sig, "void(i32,i32,i32,i32,i32,i32,f32,ptr,i32,ptr,i32,f32,ptr,i32)"),
        "extern names");
  pk_sgemm_shape g;
  CHECK(pk_sgemm_shape_from_knobs(ctx, c[0].knobs, &g) == PK_OK && g.m == 32 && g.n == 256 &&
            g.k == 784 && !g.trans_a && g.trans_b && g.lda == 784 && g.ldb == 784 && g.ldc == 256 &&
            g.a == 0 && g.b == 1 && g.c == 2, "extern knobs: %s", c[0].knobs);
  double f[PK_FEATURE_COUNT], back[PK_FEATURE_COUNT];
  CHECK(pk_features_of(ctx, task, &c[0], f, PK_FEATURE_COUNT) == PK_OK && f[0] == 1, "extern feature");
  for (int i = 1; i < got; i++) {
    CHECK(pk_features_of(ctx, task, &c[i], f, PK_FEATURE_COUNT) == PK_OK, "features: %s", pk_ctx_error(ctx));
    CHECK(f[0] == 0 && f[1] > 20 && f[2] >= 3, "loop features look wrong");
    const char *json = pk_features_json(ctx, f, PK_FEATURE_COUNT);
    CHECK(pk_features_from_json(json, back, PK_FEATURE_COUNT) == PK_FEATURE_COUNT, "features JSON");
    for (int k = 0; k < PK_FEATURE_COUNT; k++)
      CHECK(fabs(back[k] - f[k]) <= 1e-8 * (1 + fabs(f[k])), "feature %s round trip", pk_feature_name(k));
  }
  pk_tuner_free(t);
  /* records of another task of the class (features from the database) train evo's model
   * alongside this task's own */
  pk_op_params other = matmul_params(48, 64, 100, false, false);
  const pk_task *task2 = make_task(ctx, PK_OP_MATMUL, &other);
  pk_space *sp2 = make_space(ctx, task2);
  pk_record recs[40];
  pk_rng rng;
  pk_rng_seed(&rng, 4);
  int nrec = 0;
  while (nrec < 40) {
    pk_config cfg;
    pk_space_sample(sp2, &rng, &cfg);
    pk_record *r = &recs[nrec];
    memset(r, 0, sizeof *r);
    if (pk_space_build(sp2, &cfg, &r->cand) != PK_OK) {
      pk_ctx_clear_error(ctx);
      continue;
    }
    PK_ASSERT(pk_features_of(ctx, task2, &r->cand, f, PK_FEATURE_COUNT) == PK_OK);
    r->workload = task2->workload;
    r->features = pk_features_json(ctx, f, PK_FEATURE_COUNT);
    r->meas.status = nrec % 9 ? PK_MEAS_OK : PK_MEAS_CRASH;
    r->meas.gflops = 1 + f[PK_FEATURE_LOOP_COUNT];
    nrec++;
  }
  pk_tuner_options o;
  pk_tuner_options_default(&o);
  o.warmup = 4;
  o.population = 16;
  o.pool = 16;
  t = pk_tuner_new_opts(ctx, PK_TUNER_EVO, task, sp, 12, &o);
  pk_tuner_add_transfer(t, recs, nrec);
  for (int batch = 0; batch < 3; batch++) {
    pk_tuner_next_batch(t, 4, c, &got);
    CHECK(got == 4, "evo with transfer records proposed %d", got);
    for (int i = 0; i < got; i++) {
      pk_measurement m = {.status = PK_MEAS_OK, .gflops = 1 + i};
      pk_tuner_update(t, &c[i], &m);
    }
  }
  pk_tuner_free(t);
  pk_space_free(sp2);
  /* what sgemm computes, and what it does not */
  pk_op_params f64 = mm;
  f64.in[0].dtype = f64.in[1].dtype = PKRT_DTYPE_F64;
  pk_op_params bmm = {.ninputs = 2, .in = {{3, {2, 8, 4}, PKRT_DTYPE_F32}, {3, {2, 4, 5}, PKRT_DTYPE_F32}}};
  CHECK(pk_match_sgemm(task->prog, &g), "NT matmul is an sgemm");
  CHECK(!pk_match_sgemm(make_task(ctx, PK_OP_MATMUL, &f64)->prog, &g), "f64 is not");
  CHECK(!pk_match_sgemm(make_task(ctx, PK_OP_BATCH_MATMUL, &bmm)->prog, &g), "batched is not");
  const char *relu_after = "A = placeholder((8, 4), f32)\nB = placeholder((4, 6), f32)\nk = reduce_axis(4)\n"
                           "C = compute((8, 6), (i, j) => sum(A[i, k] * B[k, j], k))\n"
                           "D = compute((8, 6), (i, j) => max(C[i, j], 0.0))\n";
  pk_te_program *p;
  PK_ASSERT(pk_te_parse(ctx, relu_after, strlen(relu_after), "mm_relu.te", &p) == PK_OK);
  CHECK(!pk_match_sgemm(p, &g) && pk_match_sgemm_compute(p->tensors[2], &g), "a matmul + relu program");
  pk_space_free(sp);
  report("features, extern candidates, sgemm matching", before);
}

static void test_cost_model_linear(void) {
  int before = failures;
  enum { D = 8, TRAIN = 400, TEST = 200 };
  static double x[(TRAIN + TEST) * D], y[TRAIN + TEST];
  const double w[D] = {1.5, -2.0, 0.5, 3.0, 0, 0, -1.0, 0.25};
  pk_rng r;
  pk_rng_seed(&r, 3);
  for (int i = 0; i < TRAIN + TEST; i++) {
    y[i] = 0.7;
    for (int k = 0; k < D; k++) {
      x[i * D + k] = pk_rng_unit(&r) * 4 - 2;
      y[i] += w[k] * x[i * D + k];
    }
    y[i] += 0.05 * (pk_rng_unit(&r) - 0.5);
  }
  pk_cost_model_options o;
  pk_cost_model_options_default(&o);
  o.trees = 200;
  o.shrinkage = 0.1;
  pk_cost_model *m = pk_cost_model_new(D, &o);
  pk_cost_model_fit(m, x, y, TRAIN);
  double mean = 0, ss_res = 0, ss_tot = 0;
  for (int i = TRAIN; i < TRAIN + TEST; i++) mean += y[i] / TEST;
  for (int i = TRAIN; i < TRAIN + TEST; i++) {
    double e = y[i] - pk_cost_model_predict(m, x + i * D);
    ss_res += e * e;
    ss_tot += (y[i] - mean) * (y[i] - mean);
  }
  double r2 = 1 - ss_res / ss_tot;
  printf("  cost model: held-out R^2 %.3f on a linear target\n", r2);
  CHECK(r2 > 0.9, "R^2 %.3f", r2);
  pk_cost_model_free(m);
  report("cost model fits a linear target", before);
}

/* A known function of the knobs, peaking at `target`: no compiling, so search efficiency
 * is measured exactly. */
typedef struct synthetic {
  pk_space *sp;
  pk_config target;
} synthetic;

static double synthetic_gflops(const synthetic *s, const char *knobs) {
  pk_config c;
  PK_ASSERT(pk_space_config_from_knobs(s->sp, knobs, &c) == PK_OK);
  double d = 0;
  for (int i = 0; i < c.n; i++) {
    int nv = pk_space_knob(s->sp, i)->nvalues;
    if (nv < 2) continue;
    double u = (double)(c.idx[i] - s->target.idx[i]) / (nv - 1);
    d += u * u;
  }
  return 100 * exp(-4 * d);
}

/* Best objective after `budget` measured trials. */
static double synthetic_run(pk_ctx *ctx, const synthetic *s, pk_tuner_kind kind, uint64_t seed,
                            int budget, int *trials_to_90) {
  pk_tuner_options o;
  pk_tuner_options_default(&o);
  o.externs = false;
  o.preset = false; /* fair: no hand-made start */
  o.population = 64;
  o.generations = 3;
  o.pool = 128;
  pk_tuner *t = pk_tuner_new_opts(ctx, kind, pk_space_task(s->sp), s->sp, seed, &o);
  double best = 0;
  int trials = 0;
  *trials_to_90 = budget + 1;
  while (trials < budget) {
    pk_candidate c[8];
    int got;
    pk_tuner_next_batch(t, 8, c, &got);
    if (!got) break;
    for (int i = 0; i < got && trials < budget; i++) {
      pk_measurement m = {.status = PK_MEAS_OK, .gflops = synthetic_gflops(s, c[i].knobs)};
      pk_tuner_update(t, &c[i], &m);
      trials++;
      if (m.gflops > best) best = m.gflops;
      if (best >= 90 && *trials_to_90 > budget) *trials_to_90 = trials;
    }
  }
  pk_tuner_free(t);
  return best;
}

static void test_evo_beats_random(pk_ctx *ctx) {
  int before = failures;
  pk_op_params mm = matmul_params(256, 256, 256, false, false);
  synthetic s = {make_space(ctx, make_task(ctx, PK_OP_MATMUL, &mm)), {0}};
  /* the peak: a legal config far from the preset (the tuners are not given the preset) */
  pk_rng r;
  pk_rng_seed(&r, 2024);
  pk_candidate cand;
  do pk_space_sample(s.sp, &r, &s.target);
  while (pk_space_build(s.sp, &s.target, &cand) != PK_OK && (pk_ctx_clear_error(ctx), 1));
  enum { SEEDS = 3, BUDGET = 300 };
  double evo = 0, rnd = 0;
  int evo_t = 0, rnd_t = 0;
  for (int seed = 1; seed <= SEEDS; seed++) {
    int te, tr;
    evo += synthetic_run(ctx, &s, PK_TUNER_EVO, (uint64_t)seed, BUDGET, &te) / SEEDS;
    rnd += synthetic_run(ctx, &s, PK_TUNER_RANDOM, (uint64_t)seed, BUDGET, &tr) / SEEDS;
    evo_t += te;
    rnd_t += tr;
  }
  printf("  synthetic objective (peak 100), %d trials, mean of %d seeds: evo %.1f (90 after %.0f trials), "
         "random %.1f (after %.0f; %d = never)\n", BUDGET, SEEDS, evo, (double)evo_t / SEEDS, rnd,
         (double)rnd_t / SEEDS, BUDGET + 1);
  CHECK(evo >= 90, "evo's best %.1f < 90", evo);
  CHECK(evo >= rnd * 1.25, "evo %.1f is not clearly above random %.1f", evo, rnd);
  CHECK(evo_t * 2 <= rnd_t, "evo not twice as fast to 90 (%d vs %d trials)", evo_t, rnd_t);
  pk_space_free(s.sp);
  report("evo finds the synthetic optimum faster than random", before);
}

static void test_budget(pk_ctx *ctx) {
  int before = failures;
  pk_op_params a = matmul_params(256, 256, 256, false, false), b = matmul_params(32, 32, 32, false, false);
  pk_task tasks[3] = {*make_task(ctx, PK_OP_MATMUL, &b), *make_task(ctx, PK_OP_MATMUL, &a),
                      *make_task(ctx, PK_OP_MATMUL, &b)};
  tasks[2].weight = 4;
  pk_budget *bg = pk_budget_new(tasks, 3, 64, 8);
  /* first round: one batch each, heaviest (weight × flops) first */
  int first[3];
  int64_t trials[3] = {0};
  for (int i = 0; i < 3; i++) {
    first[i] = pk_budget_next(bg);
    trials[first[i]] += 8;
    pk_budget_report(bg, first[i], trials[first[i]], 10, false);
  }
  CHECK(first[0] == 1 && first[1] == 2 && first[2] == 0, "first round order %d %d %d", first[0], first[1], first[2]);
  /* a task that is done is never picked again; caps end the rest at 64 trials, then -1 */
  pk_budget_report(bg, 1, trials[1], 10, true);
  int guard = 0, i;
  while ((i = pk_budget_next(bg)) >= 0 && guard++ < 100) {
    CHECK(i != 1, "a done task was picked");
    trials[i] += 8;
    pk_budget_report(bg, i, trials[i], 10, false);
  }
  CHECK(i < 0 && trials[0] == 64 && trials[1] == 8 && trials[2] == 64, "caps: %lld %lld %lld",
        (long long)trials[0], (long long)trials[1], (long long)trials[2]);
  pk_budget_free(bg);
  /* equal tasks, equally fast now: the one that has been improving gets the next batch */
  pk_task same[2] = {tasks[0], tasks[0]};
  for (int improving = 0; improving < 2; improving++) {
    bg = pk_budget_new(same, 2, 64, 8);
    pk_budget_report(bg, improving, 8, 10, false);
    pk_budget_report(bg, improving, 16, 20, false);
    pk_budget_report(bg, 1 - improving, 8, 20, false);
    pk_budget_report(bg, 1 - improving, 16, 20, false);
    CHECK(pk_budget_next(bg) == improving, "the improving task %d was not picked", improving);
    pk_budget_free(bg);
  }
  int64_t split[3];
  pk_budget_split(tasks, 3, 1000, 10, split);
  CHECK(split[0] + split[1] + split[2] == 1000 && split[1] > split[2] && split[2] > split[0] && split[0] >= 10,
        "split %lld %lld %lld", (long long)split[0], (long long)split[1], (long long)split[2]);
  report("budget: heaviest first, then by expected gain; caps; static split", before);
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  test_space_sizes(ctx);
  test_sampled_configs_legal_or_refused(ctx);
  test_hand_schedules_in_space(ctx);
  test_determinism_and_grid(ctx);
  test_vector_rows(ctx);
  test_grid_random_resume(ctx);
  test_features_and_externs(ctx);
  test_cost_model_linear();
  test_evo_beats_random(ctx);
  test_budget(ctx);
  pk_ctx_free(ctx);
  if (failures) printf("%d failure%s\n", failures, failures == 1 ? "" : "s");
  return failures != 0;
}
