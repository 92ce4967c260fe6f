/* test_rfactor_threads.c — weight gradients whose reduction is split across threads (the
 * rfactor_threads knob): every value of the knob, in sampled configs of a depthwise conv2d
 * dW (C, 1, 3, 3) (conv template), a 4-channel conv2d dW (conv-as-GEMM template) and a
 * linear layer's dW (matmul template), builds, replays from its trace and equals the
 * interpreter when run on 3 threads; the knob is offered only to spaces that may run loops
 * in parallel; and a preset takes it exactly when the output alone cannot fill the cores,
 * except the depthwise dW's, which sums its rows in vector lanes (rfactor_lanes) instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_codegen.h"
#include "pk_ops.h"
#include "pk_search.h"
#include "pk_target.h"
#include "space_impl.h" /* the template a space chose */
#include "pk_test.h"

typedef struct rf_case {
  const char *label;
  pk_op_kind op;
  pk_op_params prm;
  int input; /* the gradient */
  const char *template_name; /* the space's template */
  bool lanes;                /* the preset takes rfactor_lanes, never rfactor_threads */
} rf_case;

/* Schedules of the gradient, per value of rfactor_threads: `per_value` sampled configs
 * with that value, plus the preset of the parallel space. */
static void check_case(pk_ctx *ctx, pk_cc *cc, pkrt_ctx *rt, const rf_case *c, int per_value) {
  const char *what = c->label;
  pk_op_grad g;
  pk_task task;
  pk_space *sp = NULL, *serial = NULL;
  pk_space_options opts;
  pk_space_options_default(&opts);
  opts.allow_parallel = true;
  if (pk_op_grad_build(ctx, c->op, &c->prm, c->input, &g) != PK_OK ||
      pk_task_from_program(ctx, g.prog, "c", &task) != PK_OK ||
      pk_space_new_opts(ctx, &task, &opts, &sp) != PK_OK || pk_space_new(ctx, &task, &serial) != PK_OK) {
    check(false, what, "setup: %s", pk_ctx_error(ctx));
    return;
  }
  int ki = pk_space_knob_index(sp, "rfactor_threads"), ks = pk_space_knob_index(serial, "rfactor_threads");
  const pk_knob *kn = ki >= 0 ? pk_space_knob(sp, ki) : NULL;
  if (!kn || kn->nvalues != 4 || ks < 0 || pk_space_knob(serial, ks)->nvalues != 1) {
    check(false, what, "rfactor_threads: %d values with parallel loops (want 0, 2, 4, 8), %d without (want 0)",
          kn ? kn->nvalues : -1, ks >= 0 ? pk_space_knob(serial, ks)->nvalues : -1);
    return;
  }
  enum { MAX = 16 };
  pk_te_program *progs[MAX];
  pk_schedule *scheds[MAX];
  int64_t value[MAX];
  int n = 0, unsplit = 0;
  const pk_te_tensor *dw = g.prog->tensors[g.prog->ntensors - 1];
  char lanes_parallel[96];
  snprintf(lanes_parallel, sizeof lanes_parallel, "\"step\":\"parallel\",\"stage\":\"t%d.rf\",\"axis\":\"i%d\"",
           dw->id, dw->ndim);
  /* every case leaves one tile of output channels / lanes / columns to run in parallel:
   * the preset splits unless the target has a single core */
  const pk_target *target;
  bool want_split = pk_task_target(ctx, &task, &target) != PK_OK || target->cores != 1;
  pk_config c0;
  bool preset = pk_space_preset(sp, &c0);
  int64_t preset_threads = preset ? kn->values[c0.idx[ki]] : -1;
  int kl = pk_space_knob_index(sp, "rfactor_lanes");
  int64_t preset_lanes = preset && kl >= 0 ? pk_space_knob(sp, kl)->values[c0.idx[kl]] : 0;
  pk_candidate cand;
  if (preset && pk_space_build(sp, &c0, &cand) == PK_OK &&
      pk_sched_from_json(ctx, g.prog, cand.trace, &scheds[n]) == PK_OK) {
    value[n] = preset_threads;
    progs[n++] = g.prog;
  } else {
    printf("     %s: preset: %s\n", what, preset ? pk_ctx_error(ctx) : "none");
    pk_ctx_clear_error(ctx);
  }
  pk_rng rng;
  pk_rng_seed(&rng, 4242);
  for (int vi = 0; vi < kn->nvalues; vi++) {
    int got = 0;
    for (int tries = 0; got < per_value && n < MAX && tries < 400; tries++) {
      pk_config cfg;
      pk_space_sample(sp, &rng, &cfg);
      cfg.idx[ki] = vi;
      /* unsplit samples of a lanes case: rfactor_lanes' values > 0 in turn */
      if (c->lanes && vi == 0 && kl >= 0 && pk_space_knob(sp, kl)->nvalues > 1)
        cfg.idx[kl] = 1 + got % (pk_space_knob(sp, kl)->nvalues - 1);
      if (pk_space_build(sp, &cfg, &cand) != PK_OK) {
        pk_ctx_clear_error(ctx);
        continue;
      }
      if (pk_sched_from_json(ctx, g.prog, cand.trace, &scheds[n]) != PK_OK) {
        printf("     %s: trace does not replay: %s\n", what, pk_ctx_error(ctx));
        pk_ctx_clear_error(ctx);
        continue;
      }
      /* the split is really there: a partial-sum stage whose lanes run in parallel */
      bool split = strstr(cand.trace, lanes_parallel) != NULL;
      if (split != (kn->values[vi] > 0)) {
        printf("     %s, rfactor_threads %lld: trace %s\n", what, (long long)kn->values[vi], cand.trace);
        unsplit++;
      }
      value[n] = kn->values[vi];
      progs[n++] = g.prog;
      got++;
    }
  }
  pkrt_module *m = NULL;
  int want = 1 + per_value * kn->nvalues;
  bool built = n == want && pk_build_scheduled(ctx, cc, rt, progs, scheds, n, &m) == PK_OK;
  int bad = 0;
  for (int i = 0; built && i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "k%d", i);
    pk_kernel_check_result res;
    if (pk_kernel_check_scheduled(ctx, rt, g.prog, scheds[i], pkrt_module_find(m, name),
                                  1 + (uint64_t)i, &res) != PK_OK) {
      printf("     %s, rfactor_threads %lld: %s\n", what, (long long)value[i], pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
      bad++;
    }
  }
  /* the serial space's preset (the default schedule) never splits */
  pk_config cs;
  bool serial_preset = pk_space_preset(serial, &cs);
  printf("     %s: template %s, %d candidates (preset rfactor_threads %lld), %d wrong\n", what,
         sp->cls->name, n, (long long)preset_threads, bad);
  check(!strcmp(sp->cls->name, c->template_name) && built && !bad && !unsplit &&
            (preset_threads > 0) == (want_split && !c->lanes) && (preset_lanes > 0) == c->lanes && serial_preset &&
            pk_space_knob(serial, ks)->values[cs.idx[ks]] == 0,
        what, "template %s (want %s); %d of %d candidates, build %s; %d wrong; preset rfactor_threads %lld, "
        "rfactor_lanes %lld; serial preset %s", sp->cls->name, c->template_name, n, want, built ? "ok" : pk_ctx_error(ctx),
        bad, (long long)preset_threads, (long long)preset_lanes, serial_preset ? "ok" : "refused");
  if (m) pkrt_module_free(m);
  pk_space_free(sp);
  pk_space_free(serial);
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
  const rf_case cases[] = {
      /* MobileNet's depthwise layer in small: dW (8, 1, 3, 3) sums over 2 x 12 x 12 */
      {"depthwise_conv2d_dW", PK_OP_CONV2D,
       {2, {{4, {2, 8, 12, 12}, PKRT_DTYPE_F32}, {4, {8, 1, 3, 3}, PKRT_DTYPE_F32}},
        {.groups = 8, .pad = {1, 1, 1, 1}}}, 1, "conv", true},
      /* a conv2d of 4 channels (the conv-as-GEMM template): dW (4, 4, 3, 3) sums over
       * 4 x 10 x 10 */
      {"conv2d_dW_4ch", PK_OP_CONV2D,
       {2, {{4, {4, 4, 10, 10}, PKRT_DTYPE_F32}, {4, {4, 4, 3, 3}, PKRT_DTYPE_F32}},
        {.pad = {1, 1, 1, 1}}}, 1, "conv_gemm", false},
      /* a linear layer on 300 tokens, Y = X W^T: dW (16, 8) sums over the tokens */
      {"linear_dW", PK_OP_MATMUL,
       {2, {{2, {300, 8}, PKRT_DTYPE_F32}, {2, {16, 8}, PKRT_DTYPE_F32}}, {.trans_b = true}}, 1, "matmul", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(ctx, cc, rt, &cases[i], 2);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  printf("%s rfactor_threads\n", failures ? "FAIL" : "PASS");
  return failures != 0;
}
