/* test_norm_graph.c — batch norm and buffers at the graph level: "role" and "bn_mode" in
 * graph JSON (and their errors), each batch_norm's mode in training and evaluation graphs,
 * the running-stats update nodes, the BUFFERS memory region, and through an artifact:
 * running stats updated by training, untouched by evaluation, kept by checkpoints and
 * saved with the weights. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_driver.h"
#include "pk_frontend.h"
#include "pkrt.h"
#include "pock/pockrt.h"
#include "pk_test.h"

#define FIXTURES PK_SOURCE_DIR "/tests/fixtures/train/graphs"

/* A model: x (N, 3) -> batch_norm -> y, with mse; TRAINING is the "training" object. */
#define GRAPH(ROLE, NINPUTS, TRAINING)                                                      \
  "{\"format\":\"pock-graph\",\"version\":1,\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",3]}],"\
  "\"params\":[{\"name\":\"g\",\"shape\":[3],\"init\":[1,2,3]},"                              \
  "{\"name\":\"b\",\"shape\":[3],\"init\":[0,0,1]},"                                         \
  "{\"name\":\"rm\",\"shape\":[3],\"init\":[0,0,0]" ROLE "},"                               \
  "{\"name\":\"rv\",\"shape\":[3],\"init\":[1,1,1]" ROLE "}],"                              \
  "\"nodes\":[{\"name\":\"bn\",\"op\":\"batch_norm\",\"inputs\":[\"x\",\"g\",\"b\",\"rm\","  \
  "\"rv\"" NINPUTS "],\"output\":\"y\",\"attrs\":{\"momentum\":0.2}}],"                      \
  "\"output\":\"y\",\"training\":{\"loss\":\"mse\"" TRAINING "}}"

static const pk_gnode *node_named(const pk_graph *g, const char *name) {
  for (int i = 0; i < g->nnodes; i++)
    if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
  return NULL;
}

static pk_status load(pk_ctx *ctx, const char *text, pk_graph **g, pk_model_info *info) {
  return pk_frontend_json(ctx, text, strlen(text), "bn.json", 4, g, info);
}

static void expect_load_error(const char *label, const char *text, const char *needle) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g;
  pk_model_info info;
  pk_status s = load(ctx, text, &g, &info);
  check(s == PK_ERR_CHECK && strstr(pk_ctx_error(ctx), needle), label,
        "status %s, message '%s' (want '%s')", pk_status_name(s), pk_ctx_error(ctx), needle);
  pk_ctx_free(ctx);
}

static void test_json(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g;
  pk_model_info info;
  pk_status s = load(ctx, GRAPH(",\"role\":\"buffer\"", "", ",\"bn_mode\":\"train\""), &g, &info);
  const pk_gtensor *rm = s == PK_OK ? g->tensors[pk_graph_find(g, "rm")] : NULL;
  check(s == PK_OK && rm->role == PK_ROLE_BUFFER && !rm->trainable && rm->init &&
            info.train.bn_train_all && node_named(g, "bn")->prm.attrs.momentum == 0.2,
        "json_buffer_role_and_bn_mode", "%s", s == PK_OK ? "role, bn_mode or attrs" : pk_ctx_error(ctx));
  pk_ctx_free(ctx);
  ctx = pk_ctx_new();
  s = load(ctx, GRAPH(",\"role\":\"constant\"", "", ""), &g, &info);
  check(s == PK_OK && g->tensors[pk_graph_find(g, "rv")]->role == PK_ROLE_CONSTANT &&
            !info.train.bn_train_all,
        "json_constant_role", "%s", pk_ctx_error(ctx));
  pk_ctx_free(ctx);
  expect_load_error("json_bad_role", GRAPH(",\"role\":\"state\"", "", ""),
                    "role 'state' is not \"param\", \"buffer\" or \"constant\"");
  expect_load_error("json_bad_bn_mode", GRAPH("", "", ",\"bn_mode\":\"eval\""),
                    "bn_mode 'eval' is not \"auto\" or \"train\"");
  expect_load_error("json_batch_norm_6_inputs", GRAPH("", ",\"g\"", ""),
                    "op 'batch_norm' takes 5 inputs");
}

/* The bnnet fixture (conv, batch_norm, relu, mean, fc) under a spec and bn_mode. */
static pk_status bnnet(pk_ctx *ctx, const char *spec, bool train_all, bool eval, pk_graph **t) {
  pk_graph *g;
  pk_model_info info;
  pk_status s = pk_frontend_load(ctx, FIXTURES "/bnnet.json", 4, &g, &info);
  pk_sparse_spec *sp = NULL;
  if (s == PK_OK && spec) {
    const char *text = spec;
    s = pk_sparse_parse(ctx, text, strlen(text), "spec.json", &sp);
  }
  if (s == PK_OK) s = pk_sparse_apply(g, sp);
  info.train.bn_train_all = train_all;
  if (s == PK_OK) s = eval ? pk_eval_build(g, &info.train, true, t) : pk_train_build(g, &info.train, t);
  return s;
}

static const char FROZEN[] = "{\"version\": 1, \"train\": [{\"params\": [\"conv0.*\", \"fc.*\"]}]}";

static void test_modes(void) {
  struct {
    const char *label, *spec;
    bool train_all, eval, want_running, want_update;
  } cases[] = {
      {"mode_trained_bn_uses_batch_stats", NULL, false, false, false, true},
      {"mode_frozen_bn_uses_running_stats", FROZEN, false, false, true, false},
      {"mode_bn_mode_train_on_frozen_bn", FROZEN, true, false, false, true},
      {"mode_eval_graph_uses_running_stats", NULL, false, true, true, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pk_ctx *ctx = pk_ctx_new();
    pk_graph *t;
    pk_status s = bnnet(ctx, cases[i].spec, cases[i].train_all, cases[i].eval, &t);
    const pk_gnode *bn = s == PK_OK ? node_named(t, "bn0") : NULL;
    const pk_gnode *up = s == PK_OK ? node_named(t, "update(bn0.stats)") : NULL;
    bool ok = bn && bn->prm.attrs.use_running_stats == cases[i].want_running &&
              (up != NULL) == cases[i].want_update &&
              bn->ninputs == (cases[i].want_running ? 5 : 6);
    if (ok && up) { /* in place over the buffers, after the loss, in the UPDATE phase */
      int rm = pk_graph_find(t, "bn0.running_mean"), rv = pk_graph_find(t, "bn0.running_var");
      ok = up->op == PK_OP_BATCH_NORM_STATS && up->phase == PK_PHASE_UPDATE &&
           up->noutputs == 4 && t->tensors[up->outputs[2]]->base == rm &&
           t->tensors[up->outputs[3]]->base == rv && up->id > node_named(t, "loss")->id &&
           bn->inputs[5] == t->hyper;
      pk_memplan *mp;
      ok = ok && pk_memplan_build(t, NULL, &mp) == PK_OK &&
           mp->region[rm] == PK_REGION_BUFFERS && mp->region[up->outputs[2]] == PK_REGION_BUFFERS &&
           mp->region_bytes[PK_REGION_BUFFERS] == 128 &&
           strstr(pk_memplan_print(ctx, t, mp), "buffers");
    }
    check(ok, cases[i].label, "%s", s == PK_OK ? "mode, inputs, update node or region" : pk_ctx_error(ctx));
    pk_ctx_free(ctx);
  }
  /* batch statistics update the running stats, so those must be buffers */
  pk_ctx *ctx = pk_ctx_new();
  pk_graph *g, *t;
  pk_model_info info;
  pk_status s = load(ctx, GRAPH("", "", ""), &g, &info);
  if (s == PK_OK) s = pk_sparse_apply(g, NULL);
  if (s == PK_OK) s = pk_train_build(g, &info.train, &t);
  check(s == PK_ERR_CHECK && strstr(pk_ctx_error(ctx), "running mean 'rm' must be a buffer"),
        "running_stats_must_be_buffers", "%s '%s'", pk_status_name(s), pk_ctx_error(ctx));
  pk_ctx_free(ctx);
}

static double get(const pkrt_tensor_info *t, int64_t i) {
  return t->dtype == PKRT_DTYPE_F32 ? ((const float *)t->data)[t->offset + i]
                                    : ((const double *)t->data)[t->offset + i];
}

/* Trains the bnnet artifact: running stats move; eval leaves them; a checkpoint and the
 * saved weights carry them into a fresh model. */
static void test_artifact(void) {
  char art[512], ckpt[512], pkw[512];
  snprintf(art, sizeof art, "%s/bnnet.pock", pk_test_tmpdir());
  snprintf(ckpt, sizeof ckpt, "%s/bnnet.ckpt", pk_test_tmpdir());
  snprintf(pkw, sizeof pkw, "%s/bnnet.out.pkw", pk_test_tmpdir());
  pk_ctx *ctx = pk_ctx_new();
  pk_compile_options o = pk_compile_defaults();
  o.model = FIXTURES "/bnnet.json";
  o.batch = 4;
  o.out = art;
  o.log = fopen("/dev/null", "w");
  pk_compile_result r;
  pk_status s = pk_compile(ctx, &o, &r);
  if (o.log) fclose(o.log);
  check(s == PK_OK, "artifact_compile", "%s", pk_ctx_error(ctx));
  pk_ctx_free(ctx);
  if (s != PK_OK) return;
  pkrt_model *m = NULL, *m2 = NULL;
  char err[512];
  if (pkrt_model_open(art, NULL, &m, err, sizeof err) != PKRT_OK) {
    check(false, "artifact_open", "%s", err);
    return;
  }
  pkrt_tensor_info rm;
  bool ok = pkrt_model_tensor(m, "bn0.running_mean", &rm) == PKRT_OK &&
            strcmp(rm.role, "buffer") == 0 && rm.ndim == 1 && rm.shape[0] == 4;
  double init0 = ok ? get(&rm, 0) : 0, after0 = 0;
  for (int step = 0; ok && step < 2; step++) {
    double *in = pkrt_model_input(m, NULL);
    for (int i = 0; i < 4 * 64; i++) in[i] = sin(0.37 * i + step) + 0.5;
    int32_t labels[4] = {1, 2, 3, 4};
    double loss;
    ok = pkrt_model_set_labels(m, labels, 4) == PKRT_OK &&
         pkrt_model_train_step(m, &loss) == PKRT_OK && isfinite(loss);
  }
  if (ok) after0 = get(&rm, 0);
  double loss;
  ok = ok && after0 != init0 && pkrt_model_eval_step(m, &loss) == PKRT_OK &&
       get(&rm, 0) == after0;
  check(ok, "artifact_running_stats_train_not_eval", "running_mean[0] %.17g -> %.17g (%s)",
        init0, after0, pkrt_model_error(m));
  ok = ok && pkrt_model_save_checkpoint(m, ckpt) == PKRT_OK &&
       pkrt_model_save_weights(m, pkw) == PKRT_OK;
  if (!ok || pkrt_model_open(art, NULL, &m2, err, sizeof err) != PKRT_OK) {
    check(false, "artifact_checkpoint", "%s %s", pkrt_model_error(m), err);
    pkrt_model_close(m);
    return;
  }
  pkrt_tensor_info rm2, rv, rv2;
  ok = pkrt_model_tensor(m2, "bn0.running_mean", &rm2) == PKRT_OK &&
       pkrt_model_tensor(m, "bn0.running_var", &rv) == PKRT_OK &&
       pkrt_model_tensor(m2, "bn0.running_var", &rv2) == PKRT_OK && get(&rm2, 0) == init0 &&
       pkrt_model_load_checkpoint(m2, ckpt) == PKRT_OK;
  for (int i = 0; ok && i < 4; i++) ok = get(&rm2, i) == get(&rm, i) && get(&rv2, i) == get(&rv, i);
  check(ok, "artifact_checkpoint_keeps_running_stats", "%s", pkrt_model_error(m2));
  pkrt_model_close(m2);
  /* the saved weights hold the running stats; loading them into a fresh model restores them */
  ok = pkrt_model_open(art, NULL, &m2, err, sizeof err) == PKRT_OK;
  ok = ok && pkrt_model_load_weights(m2, pkw) == PKRT_OK &&
       pkrt_model_tensor(m2, "bn0.running_var", &rv2) == PKRT_OK;
  for (int i = 0; ok && i < 4; i++) ok = get(&rv2, i) == get(&rv, i);
  check(ok, "artifact_weights_file_holds_running_stats", "%s", ok ? "" : err);
  if (m2) pkrt_model_close(m2);
  pkrt_model_close(m);
}

int main(void) {
  if (pk_test_tmpdir_make("pk_norm_graph") != 0) return 1;
  test_json();
  test_modes();
  test_artifact();
  pk_test_tmpdir_remove();
  printf("%s norm_graph\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
