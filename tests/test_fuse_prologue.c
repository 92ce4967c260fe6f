/* test_fuse_prologue.c — prologues fused into a matmul's packed operand (pk_te_fuse_prologue,
 * te/fuse.c; the fuse pass's last sweep) and the SGD update fused into its weight gradient's
 * kernel as a two-stage epilogue (pk_te_fuse_epilogue): a ReLU gradient's mask on the rows
 * operand (a data gradient dY·W, and a weight gradient dYᵀX, whose operand is stored
 * transposed), a frozen norm's affine on the columns operand, a prologue into a matmul that
 * already has its epilogue or its update, and weight gradients (a linear layer's dYᵀX, conv2d's, a
 * depthwise conv2d's) with SGD (momentum and weight decay, or neither) after them, fused,
 * compute in the reference interpreter exactly what producer then consumer compute; the
 * class's template offers only configs that pack the prologue's operand (the panel
 * evaluates the prologue: it is inlined there, never stored) or keep the update's product
 * in registers, and its preset and sampled configs (parallel ones on 3 threads) build as C
 * and equal the interpreter; the forms either cannot take are refused. */
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

/* a ReLU gradient: dY where the pre-activation X is positive */
static const char *RELU_MASK = "X = placeholder((12, 20), f32)\n"
                               "D = placeholder((12, 20), f32)\n"
                               "G = compute((12, 20), (i, j) => select(X[i, j] > 0.0, D[i, j], 0.0))\n";
/* a linear layer's data gradient dX = dY W, dY the rows operand (A) */
static const char *DATA_GRAD = "S = placeholder((12, 20), f32)\n"
                               "W = placeholder((20, 16), f32)\n"
                               "k = reduce_axis(20)\n"
                               "T = compute((12, 16), (i, j) => sum(S[i, k] * W[k, j], k))\n";
static const char *EXPECTED = "A = placeholder((12, 20), f32)\n"
                              "B = placeholder((12, 20), f32)\n"
                              "C = placeholder((20, 16), f32)\n"
                              "r = reduce_axis(20)\n"
                              "P = compute((12, 20), (a, b) => select(A[a, b] > 0.0, B[a, b], 0.0))\n"
                              "T = compute((12, 16), (u, v) => sum(P[u, r] * C[r, v], r))\n";

/* a frozen norm's affine on the columns operand (B) */
static const char *AFFINE = "X = placeholder((20, 16), f32)\n"
                            "S = placeholder((16,), f32)\n"
                            "B = placeholder((16,), f32)\n"
                            "Y = compute((20, 16), (i, j) => X[i, j] * S[j] + B[j])\n";
static const char *COLS = "A = placeholder((12, 20), f32)\n"
                          "S = placeholder((20, 16), f32)\n"
                          "k = reduce_axis(20)\n"
                          "T = compute((12, 16), (i, j) => sum(A[i, k] * S[k, j], k))\n";

/* a weight gradient dW = dYᵀ X over 12 tokens: dY's rows dim is its innermost ("TN") */
static const char *TOKENS_MASK = "X = placeholder((12, 24), f32)\n"
                                 "D = placeholder((12, 24), f32)\n"
                                 "G = compute((12, 24), (i, j) => select(X[i, j] > 0.0, D[i, j], 0.0))\n";
/* (24, 64): the preset's tiles divide it, so the update's two results leave one tile */
static const char *WEIGHT_GRAD = "S = placeholder((12, 24), f32)\n"
                                 "X = placeholder((12, 64), f32)\n"
                                 "t = reduce_axis(12)\n"
                                 "T = compute((24, 64), (o, i) => sum(S[t, o] * X[t, i], t))\n";

/* a scale, fused into a linear layer that already has its bias + ReLU epilogue */
static const char *SCALE = "X = placeholder((12, 20), f32)\n"
                           "Y = compute((12, 20), (i, j) => X[i, j] * 0.5)\n";
static const char *LINEAR_EPI = "X = placeholder((12, 20), f32)\n"
                                "W = placeholder((10, 20), f32)\n"
                                "B = placeholder((10,), f32)\n"
                                "k = reduce_axis(20)\n"
                                "T = compute((12, 10), (i, j) => sum(X[i, k] * W[j, k], k))\n"
                                "Y = compute((12, 10), (i, j) => max(T[i, j] + B[j], 0.0))\n";

/* the optimizer update of a weight of shape w (2-D, or 4-D when w[2] > 0) */
static pk_te_program *update(pk_ctx *ctx, pk_op_kind op, double momentum, double wd,
                             const int64_t *w) {
  pk_op_params prm = {.ninputs = op == PK_OP_SGD_UPDATE ? 4 : 5};
  for (int i = 0; i < prm.ninputs - 1; i++)
    prm.in[i] = (pk_op_input){w[2] ? 4 : 2, {w[0], w[1], w[2], w[3]}, PKRT_DTYPE_F32};
  prm.in[prm.ninputs - 1] = (pk_op_input){1, {4}, PKRT_DTYPE_F32};
  prm.attrs.momentum = momentum;
  prm.attrs.weight_decay = wd;
  pk_te_program *p = NULL;
  if (pk_op_build(ctx, op, &prm, &p) != PK_OK) {
    printf("FAIL update: %s\n", pk_ctx_error(ctx));
    failures++;
  }
  return p;
}

/* dW = dYᵀX with its SGD update fused (as the pass's update sweep leaves it, before the
 * prologue sweep) */
static pk_te_program *weight_grad_sgd(pk_ctx *ctx, const int64_t *w) {
  pk_te_program *dw = parse(ctx, WEIGHT_GRAD), *f = NULL;
  pk_te_program *u = update(ctx, PK_OP_SGD_UPDATE, 0.9, 0, w);
  if (dw && u && pk_te_fuse_epilogue(ctx, dw, u, 1, NULL, &f) != PK_OK) {
    printf("FAIL weight gradient + sgd: %s\n", pk_ctx_error(ctx));
    failures++;
  }
  return f;
}

/* conv2d's weight gradient (3x3 window, padding 1) on (2, c, h, w) into o channels in
 * groups: a sum of a product over the batch and the image */
static pk_te_program *conv_dw(pk_ctx *ctx, int64_t c, int64_t h, int64_t w, int64_t o, int64_t groups) {
  pk_op_params prm = {2, {{4, {2, c, h, w}, PKRT_DTYPE_F32}, {4, {o, c / groups, 3, 3}, PKRT_DTYPE_F32}},
                      {.pad = {1, 1, 1, 1}, .groups = groups}};
  pk_op_grad g;
  if (pk_op_grad_build(ctx, PK_OP_CONV2D, &prm, 1, &g) != PK_OK) {
    printf("FAIL conv2d dW: %s\n", pk_ctx_error(ctx));
    failures++;
    return NULL;
  }
  return g.prog;
}

static void copy_ref(pk_te_ref *to, int t, const pk_te_ref *from, int f) {
  size_t n = sizeof(double) * (size_t)from->tensors[f].numel;
  memcpy(to->tensors[t].val, from->tensors[f].val, n);
  memcpy(to->tensors[t].mag, from->tensors[f].mag, n);
}

static bool same_values(const pk_te_ref *a, int i, const pk_te_ref *b, int j) {
  return a->tensors[i].numel == b->tensors[j].numel &&
         !memcmp(a->tensors[i].val, b->tensors[j].val, sizeof(double) * (size_t)a->tensors[i].numel);
}

typedef enum { PROLOGUE, EPILOGUE } fuse_kind;

/* Producer then consumer vs the fused program, in the interpreter: the same doubles, for
 * the intermediate (the fused program's first compute) and each of the consumer's
 * computes (the ones after it). The consumer's placeholder i is the producer's share[i]
 * when that is >= 0, else one of the fused program's own. */
static void check_values(pk_ctx *ctx, const char *what, fuse_kind kind, pk_te_program *p,
                         pk_te_program *c, int slot, const int *share, const char *expected,
                         pk_te_program **out) {
  pk_te_program *f;
  *out = NULL;
  if (!p || !c) return; /* parse failed: counted */
  pk_status s = kind == PROLOGUE ? pk_te_fuse_prologue(ctx, p, c, slot, share, &f)
                                 : pk_te_fuse_epilogue(ctx, p, c, slot, share, &f);
  if (s != PK_OK) {
    check(false, what, "fuse: %s", pk_ctx_error(ctx));
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
  int np = p->ntensors - 1; /* the producer's placeholders; its compute is the last */
  pk_te_ref *rp = pk_te_ref_new(ctx, p), *rc = pk_te_ref_new(ctx, c), *rf = pk_te_ref_new(ctx, f);
  pk_te_ref_fill_random(p, rp, 11);
  pk_te_ref_fill_random(c, rc, 12);
  if (pk_te_interp_run(ctx, p, rp) != PK_OK) {
    check(false, what, "producer: %s", pk_ctx_error(ctx));
    return;
  }
  copy_ref(rc, slot, rp, np);
  int ncons = 0;
  for (int i = 0; i < c->ntensors; i++) {
    if (c->tensors[i]->kind == PK_TE_COMPUTE) ncons++;
    else if (i != slot && share[i] >= 0) copy_ref(rc, i, rp, share[i]);
  }
  if (pk_te_interp_run(ctx, c, rc) != PK_OK) {
    check(false, what, "consumer: %s", pk_ctx_error(ctx));
    return;
  }
  /* the fused program's placeholders: the producer's, then the consumer's own */
  int k = 0;
  for (int i = 0; i < np; i++) copy_ref(rf, k++, rp, i);
  for (int i = 0; i < c->ntensors; i++)
    if (c->tensors[i]->kind == PK_TE_PLACEHOLDER && i != slot && share[i] < 0) copy_ref(rf, k++, rc, i);
  if (pk_te_interp_run(ctx, f, rf) != PK_OK) {
    check(false, what, "fused: %s", pk_ctx_error(ctx));
    return;
  }
  bool same = k + 1 + ncons == f->ntensors && same_values(rf, k, rp, np);
  for (int i = 0, j = k + 1; same && i < c->ntensors; i++)
    if (c->tensors[i]->kind == PK_TE_COMPUTE) same = same_values(rf, j++, rc, i);
  check(same, what, "%d placeholders filled, %d tensors (want %d); the fused values differ "
        "from producer then consumer", k, f->ntensors, k + 1 + ncons);
  *out = f;
}

/* The knobs the fusion pins (those the template has): a prologue's operand always packed
 * (pack_a / pack_b offer no 0); an epilogue's accumulators in registers, one sum per
 * output. */
static bool pinned(const pk_space *sp, fuse_kind kind) {
  if (kind == PROLOGUE) {
    int a = pk_space_knob_index(sp, "pack_a"), b = pk_space_knob_index(sp, "pack_b"), zeros = 0;
    if (a < 0 || b < 0) return false;
    for (int i = 0; i < pk_space_knob(sp, a)->nvalues; i++) zeros += !pk_space_knob(sp, a)->values[i];
    for (int i = 0; i < pk_space_knob(sp, b)->nvalues; i++) zeros += !pk_space_knob(sp, b)->values[i];
    return zeros <= 1; /* the other operand may stay unpacked */
  }
  static const char *const names[] = {"cache_write", "rfactor", "rfactor_threads", "k_block"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    int k = pk_space_knob_index(sp, names[i]);
    if (k >= 0 && pk_space_knob(sp, k)->nvalues != 1) return false;
  }
  int kc = pk_space_knob_index(sp, "cache_write");
  return kc >= 0 && pk_space_knob(sp, kc)->values[0] == 1;
}

/* The class template's configs for fused program f: the preset (the driver's default
 * schedule) and sampled configs with parallel loops. None stores the intermediate (tensor
 * `inter`); a prologue's is packed (a stage "t<inter>.ws" evaluates it); an update's new
 * momentum is computed at the new weight's tile in the preset (serial, its tiles dividing
 * the weight), and not where the last tile is partial; each builds and equals the
 * interpreter. */
static void test_schedules(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, const char *what, fuse_kind kind,
                           const char *template_name, pk_te_program *f, int inter, bool partial) {
  enum { SAMPLES = 5 };
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
  bool restricted = pinned(sp, kind);
  pk_te_program *progs[SAMPLES + 1];
  pk_schedule *scheds[SAMPLES + 1];
  int n = 0, stored = 0, unpacked = 0, illegal = 0;
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
  const char *panel = pk_sprintf(ctx, "t%d.ws", inter);
  bool tail = kind == EPILOGUE && inter + 3 == f->ntensors; /* product, M', W' */
  bool at_tile = !tail || (n && strstr(pk_sched_to_json(scheds[0]),
                                       pk_sprintf(ctx, "\"step\":\"compute_at\",\"stage\":\"t%d\","
                                                  "\"target\":\"t%d\"", inter + 1, inter + 2)));
  if (tail && partial) at_tile = !at_tile; /* a partial last tile: M' a loop nest of its own */
  for (int i = 0; i < n; i++) {
    stored += pk_sched_is_materialized(scheds[i], inter);
    unpacked += kind == PROLOGUE && !pk_sched_find_stage(scheds[i], panel);
  }
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
  printf("     %s: template %s, %d schedules (%d sampled configs refused), %d store t%d, "
         "%d unpacked, %d wrong\n", what, sp->cls->name, n, illegal, stored, inter, unpacked, bad);
  bool ok = !strcmp(sp->cls->name, template_name) && restricted && why == NULL && built &&
            !stored && !unpacked && !bad && at_tile;
  check(ok, what, "template %s (want %s); knobs %s; preset %s%s; %d of %d schedules, build %s; "
        "%d store the intermediate; %d unpacked; %d wrong", sp->cls->name, template_name,
        restricted ? "pinned" : "NOT pinned", why ? why : "ok",
        at_tile ? "" : partial ? " (the new momentum at a partial tile)"
                           : " (the new momentum not at the new weight's tile)", n, SAMPLES + 1,
        built ? "ok" : pk_ctx_error(ctx), stored, unpacked, bad);
  if (m) pkrt_module_free(m);
  pk_space_free(sp);
}

static void refused(pk_ctx *ctx, const char *name, fuse_kind kind, pk_te_program *p,
                    pk_te_program *c, int slot, const char *msg) {
  pk_te_program *f = NULL;
  if (!p || !c) return;
  pk_status s = kind == PROLOGUE ? pk_te_fuse_prologue(ctx, p, c, slot, NULL, &f)
                                 : pk_te_fuse_epilogue(ctx, p, c, slot, NULL, &f);
  check(s == PK_ERR_UNSUPPORTED && !f && strstr(pk_ctx_error(ctx), msg), name,
        "status %d (want %d): %s", s, PK_ERR_UNSUPPORTED, pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
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
  static const int none[] = {-1, -1, -1, -1, -1, -1};
  static const int64_t fc[4] = {24, 64, 0, 0}, conv[4] = {8, 8, 3, 3}, wide[4] = {8, 4, 3, 3},
                       depthwise[4] = {8, 1, 3, 3};
  const struct {
    const char *what, *template_name;
    fuse_kind kind;
    pk_te_program *producer, *consumer;
    int slot;
    const char *expected;
    bool partial; /* an update whose weight the preset's row tiles do not divide */
  } cases[] = {
      {"data_grad_relu_mask", "matmul", PROLOGUE, parse(ctx, RELU_MASK), parse(ctx, DATA_GRAD), 0,
       EXPECTED, false},
      {"cols_norm_affine", "matmul", PROLOGUE, parse(ctx, AFFINE), parse(ctx, COLS), 1, NULL,
       false},
      {"weight_grad_relu_mask", "matmul", PROLOGUE, parse(ctx, TOKENS_MASK),
       parse(ctx, WEIGHT_GRAD), 0, NULL, false},
      {"scale_into_linear_epilogue", "matmul", PROLOGUE, parse(ctx, SCALE), parse(ctx, LINEAR_EPI),
       0, NULL, false},
      {"weight_grad_sgd_momentum", "matmul", EPILOGUE, parse(ctx, WEIGHT_GRAD),
       update(ctx, PK_OP_SGD_UPDATE, 0.9, 0.01, fc), 1, NULL, false},
      {"weight_grad_sgd", "matmul", EPILOGUE, parse(ctx, WEIGHT_GRAD),
       update(ctx, PK_OP_SGD_UPDATE, 0, 0, fc), 1, NULL, false},
      /* (10, 20): 6 or 8 rows a tile, so the last is partial and its region, clamped into
       * the weight, would overlap the previous one's: M' is not computed at W''s tile */
      {"weight_grad_sgd_partial_tile", "matmul", EPILOGUE,
       parse(ctx, "S = placeholder((12, 10), f32)\nX = placeholder((12, 20), f32)\n"
                  "t = reduce_axis(12)\n"
                  "T = compute((10, 20), (o, i) => sum(S[t, o] * X[t, i], t))\n"),
       update(ctx, PK_OP_SGD_UPDATE, 0.9, 0, (int64_t[]){10, 20, 0, 0}), 1, NULL, true},
      /* a ReLU mask on dY into a weight gradient that has its update */
      {"weight_grad_sgd_relu_mask", "matmul", PROLOGUE, parse(ctx, TOKENS_MASK),
       weight_grad_sgd(ctx, fc), 0, NULL, false},
      /* conv weight gradients (conv as GEMM: 4x4 images, rows of 40), a depthwise one (conv) */
      {"conv_dw_4x4_sgd", "conv_gemm", EPILOGUE, conv_dw(ctx, 8, 4, 4, 8, 1),
       update(ctx, PK_OP_SGD_UPDATE, 0.9, 0.01, conv), 1, NULL, false},
      {"conv_dw_6x40_sgd", "conv_gemm", EPILOGUE, conv_dw(ctx, 4, 6, 40, 8, 1),
       update(ctx, PK_OP_SGD_UPDATE, 0.9, 0, wide), 1, NULL, false},
      {"depthwise_dw_sgd", "conv", EPILOGUE, conv_dw(ctx, 8, 8, 8, 8, 8),
       update(ctx, PK_OP_SGD_UPDATE, 0.9, 0, depthwise), 1, NULL, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pk_te_program *f;
    check_values(ctx, pk_sprintf(ctx, "%s_interp", cases[i].what), cases[i].kind,
                 cases[i].producer, cases[i].consumer, cases[i].slot, none, cases[i].expected, &f);
    pk_ctx_clear_error(ctx);
    if (f) { /* the intermediate: the first compute, after the placeholders */
      int inter = 0;
      while (f->tensors[inter]->kind != PK_TE_COMPUTE) inter++;
      test_schedules(ctx, cc, rt, pk_sprintf(ctx, "%s_kernels", cases[i].what), cases[i].kind,
                     cases[i].template_name, f, inter, cases[i].partial);
    }
    pk_ctx_clear_error(ctx);
  }

  refused(ctx, "prologue_refuses_twice_read", PROLOGUE, parse(ctx, RELU_MASK),
          parse(ctx, "S = placeholder((12, 20), f32)\nk = reduce_axis(20)\n"
                     "T = compute((12, 12), (i, j) => sum(S[i, k] * S[j, k], k))\n"),
          0, "once, as an operand");
  refused(ctx, "prologue_refuses_epilogue_read", PROLOGUE,
          parse(ctx, "X = placeholder((10,), f32)\nY = compute((10,), (i) => X[i] * 2.0)\n"),
          parse(ctx, LINEAR_EPI), 2, "once, as an operand");
  refused(ctx, "prologue_refuses_reduction", PROLOGUE, parse(ctx, WEIGHT_GRAD),
          parse(ctx, "S = placeholder((24, 64), f32)\nW = placeholder((64, 4), f32)\n"
                     "k = reduce_axis(64)\n"
                     "T = compute((24, 4), (i, j) => sum(S[i, k] * W[k, j], k))\n"),
          0, "elementwise");
  refused(ctx, "update_refuses_adamw", EPILOGUE, parse(ctx, WEIGHT_GRAD),
          update(ctx, PK_OP_ADAMW_UPDATE, 0, 0, fc), 1, "two of the consumer's computes");
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  return pk_test_summary("test_fuse_prologue");
}
