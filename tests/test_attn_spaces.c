/* test_attn_spaces.c — `pock tune` can tune the attention family's kernels: each forward and
 * gradient program of log_softmax, sdpa (masked, causal), rope, the adaptive pools, gelu's
 * tanh form and pow gets a tuning task and a non-empty config space, and a sampled
 * candidate of each (replayed from its trace, as the measurer does) builds and equals
 * the interpreter. All kernels go into one module: compile time is this test's cost. */
#include <stdio.h>
#include <string.h>

#include "pk_ops.h"
#include "pk_search.h"

#define F32 PKRT_DTYPE_F32

static int failures;

typedef struct space_case {
  const char *label;
  pk_op_kind op;
  pk_op_params prm;
  int input; /* -1: the forward program; else the gradient of this input */
} space_case;

static const space_case cases[] = {
    {"log_softmax", PK_OP_LOG_SOFTMAX, {1, {{2, {9, 33}, F32}}, {.axis = 1}}, -1},
    {"log_softmax_grad", PK_OP_LOG_SOFTMAX, {1, {{3, {4, 9, 5}, F32}}, {.axis = 1}}, 0},
    {"sdpa_causal", PK_OP_SDPA,
     {3, {{4, {1, 2, 9, 8}, F32}, {4, {1, 2, 9, 8}, F32}, {4, {1, 2, 9, 8}, F32}}, {.causal = true}},
     -1},
    {"sdpa_masked", PK_OP_SDPA_MASKED,
     {4, {{3, {2, 7, 8}, F32}, {3, {2, 5, 8}, F32}, {3, {2, 5, 4}, F32}, {2, {2, 5}, F32}},
      {.causal = false}},
     -1},
    {"sdpa_grad_q", PK_OP_SDPA_MASKED,
     {4, {{3, {2, 7, 8}, F32}, {3, {2, 5, 8}, F32}, {3, {2, 5, 4}, F32}, {2, {2, 5}, F32}},
      {.causal = true}},
     0},
    {"sdpa_grad_k", PK_OP_SDPA,
     {3, {{3, {2, 7, 8}, F32}, {3, {2, 5, 8}, F32}, {3, {2, 5, 4}, F32}}, {.causal = false}}, 1},
    {"sdpa_grad_v", PK_OP_SDPA,
     {3, {{3, {2, 7, 8}, F32}, {3, {2, 5, 8}, F32}, {3, {2, 5, 4}, F32}}, {.causal = true}}, 2},
    {"rope", PK_OP_ROPE, {3, {{4, {2, 3, 9, 8}, F32}, {2, {9, 4}, F32}, {2, {9, 4}, F32}}, {.causal = false}},
     -1},
    {"rope_grad", PK_OP_ROPE,
     {3, {{4, {2, 3, 9, 8}, F32}, {2, {9, 4}, F32}, {2, {9, 4}, F32}}, {.causal = false}}, 0},
    {"global_avg_pool2d", PK_OP_GLOBAL_AVG_POOL2D, {1, {{4, {2, 8, 7, 7}, F32}}, {.causal = false}}, -1},
    {"global_avg_pool2d_grad", PK_OP_GLOBAL_AVG_POOL2D, {1, {{4, {2, 8, 7, 7}, F32}}, {.causal = false}},
     0},
    {"adaptive_avg_pool2d", PK_OP_ADAPTIVE_AVG_POOL2D, {1, {{4, {2, 4, 10, 9}, F32}}, {.output_size = {3, 4}}},
     -1},
    {"adaptive_avg_pool2d_grad", PK_OP_ADAPTIVE_AVG_POOL2D,
     {1, {{4, {2, 4, 10, 9}, F32}}, {.output_size = {3, 4}}}, 0},
    {"gelu_tanh", PK_OP_GELU, {1, {{2, {13, 50}, F32}}, {.approximate = PK_GELU_TANH}}, -1},
    {"pow_grad_exponent", PK_OP_POW, {2, {{2, {13, 50}, F32}, {1, {50}, F32}}, {.causal = false}}, 1},
    {"pow_scalar", PK_OP_POW_SCALAR, {1, {{2, {13, 50}, F32}}, {.exponent = 0.5}}, -1},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))
#define PER_CASE 1

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(2);
  /* -O1: correctness is the point here, and compile time dominates */
  pk_cc_options copts = {NULL, "-O1 -march=native -fPIC -fvisibility=hidden", PK_TEST_CACHE_DIR};
  pk_cc *cc;
  if (pk_cc_new(ctx, &copts, &cc) != PK_OK) {
    printf("FAIL compiler: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  pk_te_program *progs[NCASES * PER_CASE];
  pk_schedule *scheds[NCASES * PER_CASE];
  const char *labels[NCASES * PER_CASE];
  int n = 0;
  for (int i = 0; i < NCASES; i++) {
    const space_case *c = &cases[i];
    pk_te_program *p = NULL;
    pk_op_grad g;
    pk_task task;
    pk_space *sp = NULL;
    pk_space_options opts;
    pk_space_options_default(&opts);
    opts.allow_parallel = true;
    pk_status s = c->input < 0 ? pk_op_build(ctx, c->op, &c->prm, &p)
                               : pk_op_grad_build(ctx, c->op, &c->prm, c->input, &g);
    if (s == PK_OK && c->input >= 0) p = g.prog;
    if (s != PK_OK || pk_task_from_program(ctx, p, "c", &task) != PK_OK ||
        pk_space_new_opts(ctx, &task, &opts, &sp) != PK_OK || pk_space_size(sp) == 0) {
      printf("FAIL %s: no config space: %s\n", c->label, pk_ctx_error(ctx));
      failures++;
      pk_ctx_clear_error(ctx);
      pk_space_free(sp);
      continue;
    }
    pk_rng rng;
    pk_rng_seed(&rng, 7 + (uint64_t)i);
    int got = 0;
    for (int tries = 0; got < PER_CASE && tries < 200; tries++) {
      pk_config cfg;
      pk_candidate cand;
      pk_space_sample(sp, &rng, &cfg);
      if (pk_space_build(sp, &cfg, &cand) != PK_OK) { /* an illegal config: the tuner skips it */
        pk_ctx_clear_error(ctx);
        continue;
      }
      if (pk_sched_from_json(ctx, p, cand.trace, &scheds[n]) != PK_OK) {
        printf("FAIL %s: trace does not replay: %s\n", c->label, pk_ctx_error(ctx));
        failures++;
        pk_ctx_clear_error(ctx);
        continue;
      }
      progs[n] = p;
      labels[n++] = c->label;
      got++;
    }
    if (got < PER_CASE) {
      printf("FAIL %s: %d of %d sampled configs build (task %s)\n", c->label, got, PER_CASE,
             task.name);
      failures++;
    } else {
      printf("PASS %s: task %s, %llu configs\n", c->label, task.name,
             (unsigned long long)pk_space_size(sp));
    }
    pk_space_free(sp);
  }
  pkrt_module *m;
  if (pk_build_scheduled(ctx, cc, rt, progs, scheds, n, &m) != PK_OK) {
    printf("FAIL build: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "k%d", i);
    pk_kernel_check_result res;
    if (pk_kernel_check_scheduled(ctx, rt, progs[i], scheds[i], pkrt_module_find(m, name),
                                  1 + (uint64_t)i, &res) != PK_OK) {
      printf("FAIL %s candidate %d: %s\n", labels[i], i, pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
      failures++;
    }
  }
  pkrt_module_free(m);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  printf("%s attn_spaces: %d candidates of %d kernels\n", failures ? "FAIL" : "PASS", n, NCASES);
  return failures != 0;
}
