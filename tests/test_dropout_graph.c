/* test_dropout_graph.c — dropout in a trained model: a graph JSON dropout node names only
 * its data input and gets the graph's (seed, step) tensor, which the executor writes each
 * step. Through artifacts: p = 0 trains bit for bit like the same model without dropout;
 * with p = 0.5 evaluation is the model without dropout, training is not, the same seed
 * repeats every step exactly and another seed does not. (The mask itself — rate,
 * reproducibility, forward = backward — is test_index_ops' subject.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_driver.h"
#include "pock/pockrt.h"
#include "pk_test.h"

#define STEPS 3
#define BATCH 4

/* x (N, 6) -> fc1 (6 -> 8) -> relu -> [dropout] -> fc2 (8 -> 3), SGD; DROP is the dropout
 * node (or nothing) and H the tensor fc2 reads. */
#define MODEL(DROP, H)                                                                       \
  "{\"format\":\"pock-graph\",\"version\":1,\"dtype\":\"f64\","                              \
  "\"inputs\":[{\"name\":\"x\",\"shape\":[\"N\",6]}],\"params\":["                           \
  "{\"name\":\"fc1.weight\",\"shape\":[8,6],\"init\":[" W48 "]},"                             \
  "{\"name\":\"fc2.weight\",\"shape\":[3,8],\"init\":[" W24 "]}],\"nodes\":["                 \
  "{\"name\":\"fc1\",\"op\":\"matmul\",\"inputs\":[\"x\",\"fc1.weight\"],\"output\":\"h\","   \
  "\"attrs\":{\"trans_b\":true}},"                                                           \
  "{\"name\":\"act\",\"op\":\"relu\",\"inputs\":[\"h\"],\"output\":\"a\"}," DROP             \
  "{\"name\":\"fc2\",\"op\":\"matmul\",\"inputs\":[\"" H "\",\"fc2.weight\"],\"output\":\"z\"," \
  "\"attrs\":{\"trans_b\":true}}],\"output\":\"z\","                                         \
  "\"training\":{\"optimizer\":{\"kind\":\"sgd\",\"lr\":0.1}}}"
#define W8 "0.3,-0.2,0.1,0.4,-0.5,0.2,0.15,-0.35"
#define W24 W8 "," W8 "," W8
#define W48 W24 "," W24
#define DROP(P)                                                                              \
  "{\"name\":\"drop\",\"op\":\"dropout\",\"inputs\":[\"a\"],\"output\":\"d\","               \
  "\"attrs\":{\"p\":" P "}},"

typedef struct run {
  double loss[STEPS], eval;
  double w[24]; /* fc2.weight after training */
} run;

static bool compile_model(const char *name, const char *text, char *art, size_t cap) {
  char model[512];
  snprintf(model, sizeof model, "%s", pk_test_path(name));
  snprintf(art, cap, "%s.pock", model);
  if (pk_test_write_file(model, text, strlen(text)) != 0) return false;
  pk_ctx *ctx = pk_ctx_new();
  pk_compile_options o = pk_compile_defaults();
  o.model = model;
  o.batch = BATCH;
  o.out = art;
  o.log = fopen("/dev/null", "w");
  pk_compile_result r;
  pk_status s = pk_compile(ctx, &o, &r);
  if (o.log) fclose(o.log);
  check(s == PK_OK, pk_sprintf(ctx, "compile_%s", name), "%s", pk_ctx_error(ctx));
  pk_ctx_free(ctx);
  return s == PK_OK;
}

/* The eval loss before training, then STEPS training steps on fixed batches with `seed`. */
static bool train(const char *art, uint64_t seed, run *out) {
  pkrt_model *m;
  char err[512];
  if (pkrt_model_open(art, NULL, &m, err, sizeof err) != PKRT_OK) {
    check(false, "open", "%s", err);
    return false;
  }
  bool ok = pkrt_model_set_seed(m, seed) == PKRT_OK;
  for (int t = -1; ok && t < STEPS; t++) {
    double *x = pkrt_model_input(m, NULL);
    for (int i = 0; i < BATCH * 6; i++) x[i] = sin(0.7 * i + (t < 0 ? 0 : t)) + 0.3;
    int32_t labels[BATCH] = {0, 1, 2, 1};
    ok = pkrt_model_set_labels(m, labels, BATCH) == PKRT_OK &&
         (t < 0 ? pkrt_model_eval_step(m, &out->eval) : pkrt_model_train_step(m, &out->loss[t]))
             == PKRT_OK;
  }
  pkrt_tensor_info w;
  ok = ok && pkrt_model_tensor(m, "fc2.weight", &w) == PKRT_OK;
  for (int i = 0; ok && i < 24; i++) out->w[i] = ((const double *)w.data)[w.offset + i];
  check(ok, "train", "%s", pkrt_model_error(m));
  pkrt_model_close(m);
  return ok;
}

static bool same(const run *a, const run *b) {
  return memcmp(a->loss, b->loss, sizeof a->loss) == 0 && memcmp(a->w, b->w, sizeof a->w) == 0;
}

int main(void) {
  if (pk_test_tmpdir_make("pk_dropout_graph") != 0) return 1;
  char plain[600], p0[600], half[600];
  if (!compile_model("plain.json", MODEL("", "a"), plain, sizeof plain) ||
      !compile_model("p0.json", MODEL(DROP("0"), "d"), p0, sizeof p0) ||
      !compile_model("half.json", MODEL(DROP("0.5"), "d"), half, sizeof half))
    return pk_test_summary("test_dropout_graph");
  run r_plain, r_p0, r_half, r_half2, r_other;
  if (train(plain, 1, &r_plain) && train(p0, 1, &r_p0))
    check(same(&r_plain, &r_p0) && r_plain.eval == r_p0.eval, "p0_is_identity",
          "losses %.17g vs %.17g", r_plain.loss[0], r_p0.loss[0]);
  if (train(half, 7, &r_half) && train(half, 7, &r_half2) && train(half, 8, &r_other)) {
    check(r_half.eval == r_plain.eval, "eval_keeps_everything", "eval %.17g vs %.17g",
          r_half.eval, r_plain.eval);
    check(!same(&r_half, &r_plain), "training_drops", "p = 0.5 trained like no dropout");
    check(same(&r_half, &r_half2), "same_seed_same_steps", "step 1 loss %.17g vs %.17g",
          r_half.loss[0], r_half2.loss[0]);
    check(!same(&r_half, &r_other), "other_seed_other_masks", "seeds 7 and 8 agree");
  }
  return pk_test_summary("test_dropout_graph");
}
