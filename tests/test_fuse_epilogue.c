/* test_fuse_epilogue.c — epilogues fused into a matmul or conv (pk_te_fuse_epilogue,
 * te/fuse.c; the fuse pass's second sweep): a linear layer with its bias add + ReLU
 * (Y = relu(X W^T + b)), a matmul with a residual add that shares its input (Y = X W + X)
 * and conv2d with a bias add + ReLU (a small image: the conv-as-GEMM template; a long row:
 * the conv template), fused, compute in the reference interpreter exactly what producer then
 * consumer compute; the fused program's canonical text is the one written by hand; the
 * class's template offers only configs that compute the epilogue at the register tile with
 * the product inlined (never stored), and its preset and sampled configs (parallel ones run
 * on 3 threads) build as C and equal the interpreter; the forms an epilogue cannot take are
 * refused. */
#include <string.h>

#include "pk_codegen.h"
#include "pk_ops.h"
#include "pk_search.h"
#include "pk_te.h"
#include "pk_verify.h"
#include "space_impl.h" /* the template a space chose */
#include "pk_test.h"

static pk_te_program *parse(pk_ctx *ctx, const char *text) {
  pk_te_program *p = NULL;
  if (pk_te_parse(ctx, text, strlen(text), "test", &p) != PK_OK) {
    printf("FAIL parse: %s\n", pk_ctx_error(ctx));
    failures++;
  }
  return p;
}

static const char *LINEAR = "X = placeholder((12, 20), f32)\n"
                            "W = placeholder((10, 20), f32)\n"
                            "k = reduce_axis(20)\n"
                            "T = compute((12, 10), (i, j) => sum(X[i, k] * W[j, k], k))\n";

/* the bias add + ReLU chain, as the first sweep leaves it: one elementwise node */
static const char *BIAS_RELU = "T = placeholder((12, 10), f32)\n"
                               "B = placeholder((10,), f32)\n"
                               "Y = compute((12, 10), (i, j) => max(T[i, j] + B[j], 0.0))\n";

static const char *EXPECTED = "P = placeholder((12, 20), f32)\n"
                              "Q = placeholder((10, 20), f32)\n"
                              "R = placeholder((10,), f32)\n"
                              "r = reduce_axis(20)\n"
                              "S = compute((12, 10), (a, b) => sum(P[a, r] * Q[b, r], r))\n"
                              "Z = compute((12, 10), (u, v) => max(S[u, v] + R[v], 0.0))\n";

static const char *SQUARE = "X = placeholder((16, 16), f32)\n"
                            "W = placeholder((16, 16), f32)\n"
                            "k = reduce_axis(16)\n"
                            "T = compute((16, 16), (i, j) => sum(X[i, k] * W[k, j], k))\n";

/* the residual add: reads the matmul's own input X (shared with the producer) */
static const char *RESIDUAL = "T = placeholder((16, 16), f32)\n"
                              "X = placeholder((16, 16), f32)\n"
                              "Y = compute((16, 16), (i, j) => T[i, j] + X[i, j])\n";

static void copy_ref(pk_te_ref *to, int t, const pk_te_ref *from, int f) {
  size_t n = sizeof(double) * (size_t)from->tensors[f].numel;
  memcpy(to->tensors[t].val, from->tensors[f].val, n);
  memcpy(to->tensors[t].mag, from->tensors[f].mag, n);
}

/* Producer then consumer vs the fused program, in the interpreter: the same doubles. The
 * consumer's slot 0 is the product; its placeholder i is the producer's share[i] when that
 * is >= 0, else one of the fused program's own. */
static void check_values(pk_ctx *ctx, const char *what, pk_te_program *p, pk_te_program *c,
                         const int *share, int nfused, const char *expected, pk_te_program **out) {
  pk_te_program *f;
  *out = NULL;
  if (!p || !c) return; /* parse failed: counted */
  if (pk_te_fuse_epilogue(ctx, p, c, 0, share, &f) != PK_OK) {
    check(false, what, "fuse: %s", pk_ctx_error(ctx));
    return;
  }
  if (f->ntensors != nfused) {
    check(false, what, "fused program has %d tensors, want %d", f->ntensors, nfused);
    return;
  }
  if (expected) {
    pk_te_program *e = parse(ctx, expected);
    if (!e || strcmp(pk_te_print(ctx, f), pk_te_print(ctx, e)) != 0) {
      check(false, what, "canonical text:\n%s\nwant\n%s", pk_te_print(ctx, f),
            e ? pk_te_print(ctx, e) : "?");
      return;
    }
  }
  int np = p->ntensors - 1, y = f->ntensors - 1;
  pk_te_ref *rp = pk_te_ref_new(ctx, p), *rc = pk_te_ref_new(ctx, c), *rf = pk_te_ref_new(ctx, f);
  pk_te_ref_fill_random(p, rp, 11);
  pk_te_ref_fill_random(c, rc, 12);
  if (pk_te_interp_run(ctx, p, rp) != PK_OK) {
    check(false, what, "producer: %s", pk_ctx_error(ctx));
    return;
  }
  copy_ref(rc, 0, rp, np);
  for (int i = 1; i < c->ntensors - 1; i++)
    if (share[i] >= 0) copy_ref(rc, i, rp, share[i]);
  if (pk_te_interp_run(ctx, c, rc) != PK_OK) {
    check(false, what, "consumer: %s", pk_ctx_error(ctx));
    return;
  }
  /* the fused program's placeholders: the producer's, then the consumer's own */
  int k = 0;
  for (int i = 0; i < np; i++) copy_ref(rf, k++, rp, i);
  for (int i = 1; i < c->ntensors - 1; i++)
    if (share[i] < 0) copy_ref(rf, k++, rc, i);
  if (pk_te_interp_run(ctx, f, rf) != PK_OK) {
    check(false, what, "fused: %s", pk_ctx_error(ctx));
    return;
  }
  size_t ny = sizeof(double) * (size_t)rc->tensors[c->ntensors - 1].numel;
  check(k == f->ntensors - 2 && !memcmp(rf->tensors[y].val, rc->tensors[c->ntensors - 1].val, ny) &&
            !memcmp(rf->tensors[y - 1].val, rp->tensors[np].val, ny),
        what, "%d placeholders filled (want %d); the fused values or the product differ from "
        "producer then consumer", k, f->ntensors - 2);
  *out = f;
}

/* The knobs a fused epilogue pins to one value (those the template has): the accumulators
 * in registers (cache_write 1), one sum per output. */
static bool pinned(const pk_space *sp) {
  static const char *const names[] = {"cache_write", "rfactor", "rfactor_threads",
                                      "rfactor_lanes", "k_block"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    int k = pk_space_knob_index(sp, names[i]);
    if (k >= 0 && pk_space_knob(sp, k)->nvalues != 1) return false;
  }
  int kc = pk_space_knob_index(sp, "cache_write");
  return kc >= 0 && pk_space_knob(sp, kc)->values[0] == 1;
}

/* The class template's configs for fused program f: the preset (the driver's default
 * schedule) and sampled configs of the space with parallel loops. Each inlines the
 * product, builds and equals the interpreter. */
static void test_schedules(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, const char *what,
                           const char *template_name, pk_te_program *f) {
  enum { SAMPLES = 6 };
  pk_task task;
  pk_space *sp = NULL;
  pk_space_options opts;
  pk_space_options_default(&opts);
  opts.allow_parallel = true;
  if (pk_task_from_program(ctx, f, "c", &task) != PK_OK ||
      pk_space_new_opts(ctx, &task, &opts, &sp) != PK_OK) {
    check(false, what, "setup: %s", pk_ctx_error(ctx));
    return;
  }
  bool restricted = pinned(sp);
  pk_te_program *progs[SAMPLES + 1];
  pk_schedule *scheds[SAMPLES + 1];
  int n = 0, stored = 0, illegal = 0;
  const char *why = NULL;
  scheds[n] = pk_space_default_schedule(ctx, &task, &why);
  if (scheds[n]) progs[n++] = f;
  pk_rng rng;
  pk_rng_seed(&rng, 2121);
  for (int tries = 0; n < SAMPLES + 1 && tries < 200; tries++) {
    pk_config cfg;
    pk_candidate cand;
    pk_space_sample(sp, &rng, &cfg);
    if (pk_space_build(sp, &cfg, &cand) != PK_OK) {
      pk_ctx_clear_error(ctx);
      illegal++;
      continue;
    }
    if (pk_sched_from_json(ctx, f, cand.trace, &scheds[n]) != PK_OK) {
      printf("     %s: trace does not replay: %s\n", what, pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
      continue;
    }
    progs[n++] = f;
  }
  int product = f->ntensors - 2;
  for (int i = 0; i < n; i++) stored += pk_sched_is_materialized(scheds[i], product);
  pkrt_module *m = NULL;
  bool built = n == SAMPLES + 1 && pk_build_scheduled(ctx, cc, rt, progs, scheds, n, &m) == PK_OK;
  int bad = 0;
  for (int i = 0; built && i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "k%d", i);
    pk_kernel_check_result res;
    if (pk_kernel_check_scheduled(ctx, rt, f, scheds[i], pkrt_module_find(m, name), 5 + (uint64_t)i,
                                  &res) != PK_OK) {
      printf("     %s, %s: %s\n", what, i ? "sampled" : "preset", pk_ctx_error(ctx));
      printf("       %s\n", pk_sched_to_json(scheds[i]));
      pk_ctx_clear_error(ctx);
      bad++;
    }
  }
  printf("     %s: template %s, %d schedules (%d sampled configs refused), %d store the product, "
         "%d wrong\n", what, sp->cls->name, n, illegal, stored, bad);
  bool ok = !strcmp(sp->cls->name, template_name) && restricted && why == NULL && built &&
            !stored && !bad;
  check(ok, what, "template %s (want %s); knobs %s; preset %s; %d of %d schedules, build %s; "
        "%d store the product; %d wrong", sp->cls->name, template_name,
        restricted ? "pinned" : "NOT pinned", why ? why : "ok", n, SAMPLES + 1,
        built ? "ok" : pk_ctx_error(ctx), stored, bad);
  if (m) pkrt_module_free(m);
  pk_space_free(sp);
}

/* Consumers that are no epilogue, and calls that are wrong. */
static void refused(pk_ctx *ctx, const char *name, const char *producer, const char *consumer,
                    pk_status want, const char *msg) {
  pk_te_program *p = parse(ctx, producer), *c = parse(ctx, consumer), *f = NULL;
  if (!p || !c) return;
  pk_status s = pk_te_fuse_epilogue(ctx, p, c, 0, NULL, &f);
  check(s == want && !f && strstr(pk_ctx_error(ctx), msg), name, "status %d (want %d): %s", s,
        want, pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

/* conv2d of a 3x3 window, padding 1, on (2, c, h, w) into o channels; and its bias add +
 * ReLU, read at its own point. */
static pk_te_program *conv2d(pk_ctx *ctx, int64_t c, int64_t h, int64_t w, int64_t o) {
  pk_op_params prm = {2, {{4, {2, c, h, w}, PKRT_DTYPE_F32}, {4, {o, c, 3, 3}, PKRT_DTYPE_F32}},
                      {.pad = {1, 1, 1, 1}}};
  pk_te_program *p = NULL;
  if (pk_op_build(ctx, PK_OP_CONV2D, &prm, &p) != PK_OK) {
    printf("FAIL conv2d: %s\n", pk_ctx_error(ctx));
    failures++;
  }
  return p;
}

static pk_te_program *conv_bias_relu(pk_ctx *ctx, int64_t h, int64_t w, int64_t o) {
  return parse(ctx, pk_sprintf(ctx, "T = placeholder((2, %lld, %lld, %lld), f32)\n"
                               "B = placeholder((%lld,), f32)\n"
                               "Y = compute((2, %lld, %lld, %lld), (n, o, h, w) => "
                               "max(T[n, o, h, w] + B[o], 0.0))\n",
                               (long long)o, (long long)h, (long long)w, (long long)o,
                               (long long)o, (long long)h, (long long)w));
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(3);
  pk_cc_options opts = {NULL, "-O1 -march=native -fPIC -fvisibility=hidden", PK_TEST_CACHE_DIR};
  pk_cc *cc;
  if (pk_cc_new(ctx, &opts, &cc) != PK_OK) {
    printf("FAIL compiler: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  static const int none[] = {-1, -1, -1}, x_shared[] = {-1, 0, -1};
  const struct {
    const char *what, *template_name;
    pk_te_program *producer, *consumer;
    const int *share;
    int nfused;
    const char *expected;
  } cases[] = {
      {"linear_bias_relu", "matmul", parse(ctx, LINEAR), parse(ctx, BIAS_RELU), none, 5, EXPECTED},
      {"matmul_residual", "matmul", parse(ctx, SQUARE), parse(ctx, RESIDUAL), x_shared, 4, NULL},
      /* 4x4 images: rows too short for column vectors */
      {"conv2d_4x4_bias_relu", "conv_gemm", conv2d(ctx, 8, 4, 4, 8), conv_bias_relu(ctx, 4, 4, 8),
       none, 5, NULL},
      /* rows of 40: column vectors */
      {"conv2d_6x40_bias_relu", "conv", conv2d(ctx, 4, 6, 40, 8), conv_bias_relu(ctx, 6, 40, 8),
       none, 5, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pk_te_program *f;
    check_values(ctx, pk_sprintf(ctx, "%s_interp", cases[i].what), cases[i].producer,
                 cases[i].consumer, cases[i].share, cases[i].nfused, cases[i].expected, &f);
    pk_ctx_clear_error(ctx);
    if (f)
      test_schedules(ctx, cc, rt, pk_sprintf(ctx, "%s_kernels", cases[i].what),
                     cases[i].template_name, f);
    pk_ctx_clear_error(ctx);
  }

  refused(ctx, "refuses_transposed_read", LINEAR,
          "T = placeholder((12, 10), f32)\nY = compute((10, 12), (i, j) => T[j, i] + 1.0)\n",
          PK_ERR_UNSUPPORTED, "another point");
  refused(ctx, "refuses_reduction", LINEAR,
          "T = placeholder((12, 10), f32)\nk = reduce_axis(10)\n"
          "S = compute((12,), (i) => sum(T[i, k], k))\n",
          PK_ERR_UNSUPPORTED, "elementwise");
  refused(ctx, "refuses_double_read", LINEAR,
          "T = placeholder((12, 10), f32)\nY = compute((12, 10), (i, j) => T[i, j] * T[i, j])\n",
          PK_ERR_UNSUPPORTED, "more than once");
  refused(ctx, "refuses_other_shape", LINEAR,
          "T = placeholder((10, 12), f32)\nY = compute((10, 12), (i, j) => T[i, j] + 1.0)\n",
          PK_ERR_CHECK, "not the shape");
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  return pk_test_summary("test_fuse_epilogue");
}
