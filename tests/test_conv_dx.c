/* test_conv_dx.c — conv2d's strided data gradient as dense phase convolutions: on shapes
 * with remainders, paddings 0..2, dilation, groups and unread rows it equals the
 * transposed-window form (the oracle, pk_op_grad_conv2d_gather) through the interpreter;
 * its multiply-adds are those of the forward convolution, not stride² times more; and the
 * conv templates give the multi-stage kernel a default schedule and sampled candidates
 * whose generated C equals the interpreter. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_impl.h"
#include "pk_codegen.h"
#include "pk_search.h"
#include "space_impl.h" /* the template a space chose */
#include "pk_test.h"

static uint64_t next_u64(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Multiply-adds: every point of a reduction's compute times its reduce extents. */
static double program_macs(const pk_te_program *p) {
  double macs = 0;
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    if (t->kind != PK_TE_COMPUTE || t->body->kind != PK_EXPR_REDUCE) continue;
    double m = (double)pk_te_tensor_numel(t);
    for (int a = 0; a < t->body->naxes; a++) m *= (double)(t->body->axes[a]->hi - t->body->axes[a]->lo);
    macs += m;
  }
  return macs;
}

static int ncomputes(const pk_te_program *p) {
  int n = 0;
  for (int i = 0; i < p->ntensors; i++) n += p->tensors[i]->kind == PK_TE_COMPUTE;
  return n;
}

/* The oracle's dX program: what pk_op_grad_build does, with the gather builder. */
static pk_te_program *oracle_program(pk_ctx *ctx, const pk_op_params *prm) {
  pk_te_program *fwd, *p;
  pk_op_grad g = {0};
  pk_strbuf b;
  pk_strbuf_init(&b);
  if (pk_op_build(ctx, PK_OP_CONV2D, prm, &fwd) != PK_OK ||
      pk_op_grad_conv2d_gather(ctx, PK_OP_CONV2D, prm, fwd->tensors[fwd->ntensors - 1], 0, &g,
                               &b) != PK_OK) {
    pk_strbuf_free(&b);
    return NULL;
  }
  char *text = pk_strbuf_finish(ctx, &b);
  return pk_te_parse(ctx, text, strlen(text), "oracle", &p) == PK_OK ? p : NULL;
}

typedef struct dx_case {
  const char *label;
  pk_op_params prm;
  int phases;  /* computes before dX that the phase form should have (0: the gather form,
                  or dX itself one dense stage: direct in both dims) */
} dx_case;

#define F64 PKRT_DTYPE_F64
static const dx_case cases[] = {
    /* H 9 = 2 * 4 + 1, W 10; pad 0 */
    {"s2_k3_pad0_rem", {2, {{4, {1, 3, 9, 10}, F64}, {4, {2, 3, 3, 3}, F64}}, {.stride = {2, 2}}}, 4},
    {"s2_k3_pad1", {2, {{4, {2, 2, 8, 7}, F64}, {4, {3, 2, 3, 3}, F64}}, {.stride = {2, 2}, .pad = {1, 1, 1, 1}}}, 4},
    {"s2_k3_pad2_asym", {2, {{4, {1, 2, 11, 7}, F64}, {4, {3, 2, 3, 3}, F64}}, {.stride = {2, 2}, .pad = {2, 1, 0, 2}}}, 4},
    {"s3_k5_pad2", {2, {{4, {1, 2, 13, 11}, F64}, {4, {2, 2, 5, 5}, F64}}, {.stride = {3, 3}, .pad = {2, 2, 2, 2}}}, 9},
    /* dilation 2 with stride 2: only even offsets reach the even phase; the odd one is 0 */
    {"s2_d2_grouped", {2, {{4, {1, 4, 10, 9}, F64}, {4, {6, 2, 3, 3}, F64}}, {.groups = 2, .stride = {2, 2}, .dilation = {2, 2}, .pad = {1, 2, 2, 1}}}, 1},
    {"s3_d2_dilated_w", {2, {{4, {1, 2, 12, 14}, F64}, {4, {2, 2, 3, 4}, F64}}, {.stride = {3, 2}, .dilation = {2, 3}, .pad = {1, 2, 2, 0}}}, 6},
    {"depthwise_s2", {2, {{4, {2, 4, 9, 9}, F64}, {4, {4, 1, 3, 3}, F64}}, {.groups = 4, .stride = {2, 2}, .pad = {1, 1, 1, 1}}}, 4},
    /* stride only along H */
    {"s2x1", {2, {{4, {1, 3, 7, 6}, F64}, {4, {2, 3, 3, 2}, F64}}, {.stride = {2, 1}, .pad = {0, 1, 2, 0}}}, 2},
    /* a 1x1 downsample: one phase; odd rows and columns get no gradient */
    {"s2_k1", {2, {{4, {1, 3, 7, 6}, F64}, {4, {4, 3, 1, 1}, F64}}, {.stride = {2, 2}}}, 1},
    /* patches (k = s, d 1): "direct" dims, dX is one dense stage; rows 8, 9 unread */
    {"patch_k4_s4", {2, {{4, {1, 2, 10, 8}, F64}, {4, {3, 2, 4, 4}, F64}}, {.stride = {4, 4}}}, 0},
    /* k < s: the phases a window element reaches (2 of 3 per dim) */
    {"k2_s3_pad1", {2, {{4, {1, 2, 8, 7}, F64}, {4, {2, 2, 2, 2}, F64}}, {.stride = {3, 3}, .pad = {1, 1, 0, 1}}}, 4},
    /* k < s with 25 phases: direct dims instead, guarded (the unread rows are visited) */
    {"k5_s6_direct", {2, {{4, {1, 2, 13, 14}, F64}, {4, {2, 2, 5, 5}, F64}}, {.stride = {6, 6}, .pad = {1, 0, 0, 2}}}, 0},
    /* H 8, kernel 3, stride 3: rows 6 and 7 unread (direct); W 10, kernel 3, stride 2:
     * column 9 unread (phases) */
    {"unread_rows", {2, {{4, {1, 2, 8, 10}, F64}, {4, {3, 2, 3, 3}, F64}}, {.stride = {3, 2}}}, 2},
    /* 25 phases: more than the form splits into; the gather form stays */
    {"s5_k7_gather", {2, {{4, {1, 1, 12, 12}, F64}, {4, {1, 1, 7, 7}, F64}}, {.stride = {5, 5}}}, 0},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* Both forms at random W and dY agree to rounding; the phase form has the expected stages
 * and at most the forward's multiply-adds (plus border terms, which both forms count) and
 * one sum over the group's output channels per element of dX (direct dims visit each
 * element once, even where no window element reaches it). */
static void check_case(const dx_case *c, uint64_t seed) {
  const char *what = c->label;
  pk_ctx *ctx = pk_ctx_new();
  pk_te_program *fwd, *oracle = oracle_program(ctx, &c->prm);
  pk_op_grad g;
  if (!oracle || pk_op_build(ctx, PK_OP_CONV2D, &c->prm, &fwd) != PK_OK ||
      pk_op_grad_build(ctx, PK_OP_CONV2D, &c->prm, 0, &g) != PK_OK) {
    check(false, what, "build: %s", pk_ctx_error(ctx));
    pk_ctx_free(ctx);
    return;
  }
  pk_te_ref *a = pk_te_ref_new(ctx, g.prog), *b = pk_te_ref_new(ctx, oracle);
  for (int t = 0; a && b && t < 2; t++) /* W, dY */
    for (int64_t i = 0; i < a->tensors[t].numel; i++) {
      double v = (double)(next_u64(&seed) >> 11) / 9007199254740992.0 * 2 - 1;
      a->tensors[t].val[i] = b->tensors[t].val[i] = v;
      a->tensors[t].mag[i] = b->tensors[t].mag[i] = fabs(v);
    }
  if (pk_te_interp_run(ctx, g.prog, a) != PK_OK || pk_te_interp_run(ctx, oracle, b) != PK_OK) {
    check(false, what, "interpreter: %s", pk_ctx_error(ctx));
    pk_ctx_free(ctx);
    return;
  }
  const pk_te_ref_tensor *da = &a->tensors[g.prog->ntensors - 1], *db = &b->tensors[oracle->ntensors - 1];
  double worst = 0;
  int64_t nonzero = 0;
  for (int64_t i = 0; i < da->numel; i++) {
    double d = fabs(da->val[i] - db->val[i]) / (1e-300 + db->mag[i] + 1);
    if (d > worst) worst = d;
    nonzero += db->val[i] != 0;
  }
  double macs = program_macs(g.prog), old = program_macs(oracle), fmacs = program_macs(fwd);
  double groups = c->prm.attrs.groups ? (double)c->prm.attrs.groups : 1;
  double bound = 1.5 * fmacs + (double)da->numel * (double)c->prm.in[1].shape[0] / groups;
  int stages = ncomputes(g.prog) - 1;
  printf("     %s: %d phase stage(s), multiply-adds %.0f (forward %.0f, transposed-window form "
         "%.0f: %.2fx)\n", what, stages, macs, fmacs, old, old / macs);
  bool gather = c->phases == 0 && c->prm.attrs.stride[0] == 5 && c->prm.in[1].shape[2] == 7;
  check(worst <= 1e-13 && nonzero > 0 && stages == c->phases &&
            macs <= (gather ? old : bound),
        what, "max relative difference %.3g (%lld nonzero); %d phase stages, want %d; "
        "multiply-adds %.0f vs forward %.0f", worst, (long long)nonzero, stages, c->phases,
        macs, fmacs);
  pk_ctx_free(ctx);
}

/* A MobileNet-sized strided layer: the forward's work exactly up to the borders, and the
 * old form's stride² (4x) more. */
static void test_work(void) {
  const char *what = "work_56x56_s2";
  pk_ctx *ctx = pk_ctx_new();
  pk_op_params prm = {2, {{4, {1, 16, 56, 56}, PKRT_DTYPE_F32}, {4, {16, 16, 3, 3}, PKRT_DTYPE_F32}},
                      {.stride = {2, 2}, .pad = {1, 1, 1, 1}}};
  pk_te_program *fwd, *oracle = oracle_program(ctx, &prm);
  pk_op_grad g;
  if (!oracle || pk_op_build(ctx, PK_OP_CONV2D, &prm, &fwd) != PK_OK ||
      pk_op_grad_build(ctx, PK_OP_CONV2D, &prm, 0, &g) != PK_OK) {
    check(false, what, "build: %s", pk_ctx_error(ctx));
    pk_ctx_free(ctx);
    return;
  }
  double macs = program_macs(g.prog), fmacs = program_macs(fwd), old = program_macs(oracle);
  /* N * C * O * KH * KW * OH * OW */
  double dense = 1.0 * 16 * 16 * 9 * 28 * 28;
  printf("     %s: phase form %.0f, N*C*O*KH*KW*OH*OW %.0f, old form %.0f (%.2fx)\n", what,
         macs, dense, old, old / macs);
  check(fmacs == dense && macs <= 1.05 * dense && old >= 3.9 * macs, what,
        "multiply-adds %.0f, dense %.0f, old %.0f", macs, dense, old);
  pk_ctx_free(ctx);
}

/* The templates shape every phase stage: the preset and sampled configs build, replay
 * from their traces (the measurer's path) and equal the interpreter (2 threads, so the
 * parallel knob runs too). Small images go to the conv_gemm template, wide ones to conv. */
static void check_schedules(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, const char *what,
                            const pk_op_params *prm, const char *want_template, int count) {
  pk_op_grad g;
  pk_task task;
  pk_space *sp = NULL;
  pk_space_options opts;
  pk_space_options_default(&opts);
  opts.allow_parallel = true;
  if (pk_op_grad_build(ctx, PK_OP_CONV2D, prm, 0, &g) != PK_OK ||
      pk_task_from_program(ctx, g.prog, "c", &task) != PK_OK ||
      pk_space_new_opts(ctx, &task, &opts, &sp) != PK_OK) {
    check(false, what, "setup: %s", pk_ctx_error(ctx));
    return;
  }
  enum { MAX = 8 };
  pk_te_program *progs[MAX];
  pk_schedule *scheds[MAX];
  int n = 0, refused = 0;
  const char *why = NULL;
  scheds[n] = pk_space_default_schedule(ctx, &task, &why);
  if (scheds[n]) progs[n++] = g.prog;
  pk_rng rng;
  pk_rng_seed(&rng, 77);
  for (int tries = 0; n < count && n < MAX && tries < 200; tries++) {
    pk_config c;
    pk_candidate cand;
    pk_space_sample(sp, &rng, &c);
    if (pk_space_build(sp, &c, &cand) != PK_OK) {
      refused++;
      pk_ctx_clear_error(ctx);
      continue;
    }
    if (pk_sched_from_json(ctx, g.prog, cand.trace, &scheds[n]) != PK_OK) break;
    progs[n++] = g.prog;
  }
  pkrt_module *m = NULL;
  bool built = n == count && pk_build_scheduled(ctx, cc, rt, progs, scheds, n, &m) == PK_OK;
  int bad = 0;
  for (int i = 0; built && i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "k%d", i);
    pk_kernel_check_result res;
    if (pk_kernel_check_scheduled(ctx, rt, g.prog, scheds[i], pkrt_module_find(m, name),
                                  1 + (uint64_t)i, &res) != PK_OK) {
      printf("     %s candidate %d: %s\n", what, i, pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
      bad++;
    }
  }
  const char *tmpl = sp->cls->name;
  printf("     %s: template %s, %llu configs, %d built (%d refused on the way)\n", what, tmpl,
         (unsigned long long)pk_space_size(sp), n, refused);
  check(why == NULL && built && !bad && strcmp(tmpl, want_template) == 0, what,
        "default schedule: %s; template %s (want %s); %d of %d candidates, build %s; %d wrong",
        why ? why : "ok", tmpl, want_template, n, count, built ? "ok" : pk_ctx_error(ctx), bad);
  if (m) pkrt_module_free(m);
  pk_space_free(sp);
}

static void test_schedules(void) {
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(2);
  pk_cc_options opts = {NULL, "-O1 -march=native -fPIC -fvisibility=hidden", PK_TEST_CACHE_DIR};
  pk_cc *cc;
  if (pk_cc_new(ctx, &opts, &cc) != PK_OK) {
    check(false, "schedules", "compiler: %s", pk_ctx_error(ctx));
    pk_ctx_free(ctx);
    return;
  }
  pk_op_params small = {2, {{4, {2, 8, 7, 7}, PKRT_DTYPE_F32}, {4, {8, 8, 3, 3}, PKRT_DTYPE_F32}},
                        {.stride = {2, 2}, .pad = {1, 1, 1, 1}}};
  pk_op_params wide = {2, {{4, {1, 4, 5, 70}, PKRT_DTYPE_F32}, {4, {4, 4, 3, 3}, PKRT_DTYPE_F32}},
                       {.stride = {2, 1}, .pad = {0, 1, 1, 1}}};
  check_schedules(ctx, cc, rt, "schedules_dx_small_image", &small, "conv_gemm", 3);
  check_schedules(ctx, cc, rt, "schedules_dx_wide_image", &wide, "conv", 3);
  /* stride 1 keeps the transposed-window form; the conv template serves it too now */
  pk_op_params wide1 = {2, {{4, {1, 3, 4, 40}, PKRT_DTYPE_F32}, {4, {4, 3, 3, 3}, PKRT_DTYPE_F32}},
                        {.pad = {1, 1, 1, 1}}};
  check_schedules(ctx, cc, rt, "schedules_dx_stride1_wide_image", &wide1, "conv", 3);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
}

int main(void) {
  for (int i = 0; i < NCASES; i++) check_case(&cases[i], 0xd1ce0000u + (uint64_t)i);
  test_work();
  test_schedules();
  printf("%s conv_dx: %d cases\n", failures ? "FAIL" : "PASS", NCASES);
  return failures ? 1 : 0;
}
