/* test_sanitized_train.c — a whole training run through the runtime, made to be run under
 * ASan+UBSan+LSan (label sanitize): compile the digits MLP and CNN (`pock compile`'s
 * driver), open the artifacts, train a few steps with the runtime's loop (one thread and a
 * pool), evaluate, save and reload the weights, close. Any invalid access, undefined
 * behaviour or leak in the runtime fails it; the losses must be finite and fall. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pk_driver.h"
#include "pkrt.h"
#include "pock/pockrt.h"

/* CHECK names the run (`what`) and jumps to its cleanup (`done:`). */
#define PK_TEST_CHECK_GOTO_DONE
#include "pk_test.h"

#ifndef PK_SOURCE_DIR
#error "build with -DPK_SOURCE_DIR"
#endif
#define DIGITS PK_SOURCE_DIR "/examples/digits"

static int compile(const char *model, const char *spec, const char *out) {
  pk_ctx *ctx = pk_ctx_new();
  pk_compile_options o = pk_compile_defaults();
  o.model = model;
  o.sparse = spec;
  o.batch = 32;
  o.out = out;
  FILE *log = fopen("/dev/null", "w");
  o.log = log;
  pk_compile_result r;
  pk_status s = pk_compile(ctx, &o, &r);
  if (s != PK_OK) printf("  compile %s: %s\n", model, pk_ctx_error(ctx));
  if (log) fclose(log);
  pk_ctx_free(ctx);
  return s == PK_OK ? 0 : -1;
}

/* Compiles, then trains `epochs` passes over target_val.csv with `threads` threads. */
static void run(const char *what, const char *model, const char *spec, int threads, int epochs) {
  char art[512], w[512], err[512];
  snprintf(art, sizeof art, "%s/%s.pock", pk_test_tmpdir(), what);
  snprintf(w, sizeof w, "%s/%s.pkw", pk_test_tmpdir(), what);
  pkrt_model *m = NULL;
  pkrt_dataset *d = NULL;
  FILE *out = NULL;
  double loss0 = NAN, acc0 = NAN, loss1 = NAN, acc1 = NAN, loss2 = NAN, acc2 = NAN;
  CHECK(compile(model, spec, art) == 0, "compile failed");
  pkrt_open_options oo = {.nthreads = threads};
  CHECK(pkrt_model_open(art, &oo, &m, err, sizeof err) == 0, "open: %s", err);
  pkrt_data_options dopt = {.scale = 0.0625, .label_column = -1, .model = m};
  CHECK(pkrt_dataset_load(DIGITS "/target_val.csv", &dopt, &d, err, sizeof err) == 0, "data: %s",
        err);
  CHECK(pkrt_eval_run(m, d, &loss0, &acc0) == 0, "eval: %s", pkrt_model_error(m));
  out = fopen("/dev/null", "w");
  pkrt_train_options t = {.epochs = epochs, .seed = 3, .save_path = w, .out = out, .progress = -1};
  pkrt_train_result r;
  CHECK(pkrt_train_run(m, d, &t, &r) == 0, "train: %s", pkrt_model_error(m));
  int64_t want_steps = epochs * ((pkrt_dataset_rows(d) + 31) / 32);
  CHECK(r.steps == want_steps && pkrt_model_steps(m) == want_steps, "%lld steps, want %lld",
        (long long)r.steps, (long long)want_steps);
  CHECK(pkrt_eval_run(m, d, &loss1, &acc1) == 0, "eval: %s", pkrt_model_error(m));
  CHECK(isfinite(loss1) && loss1 < loss0, "loss %.4f -> %.4f did not fall", loss0, loss1);
  /* The saved weights reproduce the trained model's loss in a fresh model. */
  pkrt_model_close(m);
  m = NULL;
  CHECK(pkrt_model_open(art, &oo, &m, err, sizeof err) == 0, "reopen: %s", err);
  CHECK(pkrt_model_load_weights(m, w) == 0, "load weights: %s", pkrt_model_error(m));
  CHECK(pkrt_eval_run(m, d, &loss2, &acc2) == 0, "eval: %s", pkrt_model_error(m));
  CHECK(loss2 == loss1 && acc2 == acc1, "reloaded weights give loss %.9g, trained %.9g", loss2,
        loss1);
  printf("PASS %s (%lld steps, loss %.4f -> %.4f, acc %.3f -> %.3f)\n", what,
         (long long)r.steps, loss0, loss1, acc0, acc1);
done:
  if (out) fclose(out);
  pkrt_dataset_free(d);
  pkrt_model_close(m);
}

int main(void) {
  if (pk_test_tmpdir_make("pk_santrain_") != 0) return 1;
  run("mlp_full", DIGITS "/models/mlp.json", NULL, 1, 2);
  run("cnn_full", DIGITS "/models/cnn.json", NULL, 1, 1);
  /* Sparse: views of a weight's input channels and in-place updates, on a thread pool. */
  run("cnn_partial25_pool", DIGITS "/models/cnn.json", DIGITS "/specs/cnn_partial25_bias_head.json",
      2, 1);
  pk_test_tmpdir_remove();
  return pk_test_summary("test_sanitized_train");
}
