/* train_digits.c — a complete program on libpockrt's public API (pock/pockrt.h) alone:
 * open an artifact from `pock compile`, load the digits CSVs, train with a hand-written
 * loop (batches, padding rows, loss and outputs), evaluate, save a checkpoint and prove
 * it restores the model exactly. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pock/pockrt.h>

static int die(const char *what, const char *msg) {
  fprintf(stderr, "train_digits: %s: %s\n", what, msg);
  return 1;
}

/* Index of the largest of n scores (the first one on ties). */
static int argmax(const float *v, int64_t n) {
  int best = 0;
  for (int64_t i = 1; i < n; i++)
    if (v[i] > v[best]) best = (int)i;
  return best;
}

/* One epoch in file order, by hand: what pkrt_train_run does, minus shuffling. */
static int train_epoch(pkrt_model *m, const pkrt_dataset *d, int32_t *labels, double *loss,
                       double *acc) {
  int64_t b = pkrt_model_batch(m), rows = pkrt_dataset_rows(d), k = pkrt_model_classes(m);
  size_t row_bytes = (size_t)pkrt_dataset_features(d) * sizeof(float);
  const unsigned char *x = pkrt_dataset_x(d);
  const int32_t *y = pkrt_dataset_labels(d);
  unsigned char *in = pkrt_model_input(m, NULL);
  double sum = 0;
  int64_t correct = 0;
  for (int64_t first = 0; first < rows; first += b) {
    /* The batch size is fixed at compile time: the last batch is padded with zero rows,
     * which set_labels labels -1 (ignored by the loss), so they change neither loss nor
     * gradient. */
    int64_t valid = rows - first < b ? rows - first : b;
    memcpy(in, x + (size_t)first * row_bytes, (size_t)valid * row_bytes);
    memset(in + (size_t)valid * row_bytes, 0, (size_t)(b - valid) * row_bytes);
    memcpy(labels, y + first, sizeof(int32_t) * (size_t)valid);
    double l;
    if (pkrt_model_set_labels(m, labels, valid) != 0 || pkrt_model_train_step(m, &l) != 0)
      return die("train step", pkrt_model_error(m));
    /* The outputs are those of the forward pass, before this step's update. */
    const float *out = pkrt_model_output(m);
    for (int64_t r = 0; r < valid; r++) correct += argmax(out + r * k, k) == labels[r];
    sum += l * (double)valid;
  }
  *loss = sum / (double)rows;
  *acc = (double)correct / (double)rows;
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: train_digits MODEL.pock TRAIN.csv TEST.csv [EPOCHS] [OUT.ckpt]\n"
                    "  e.g. pock compile cnn.json --batch 32 -o cnn.pock\n"
                    "       train_digits cnn.pock target_train.csv target_test.csv 10\n");
    return 2;
  }
  const char *model = argv[1], *ckpt = argc > 5 ? argv[5] : "digits.ckpt";
  int epochs = argc > 4 ? atoi(argv[4]) : 5;
  if (epochs < 1) return die("epochs", "must be >= 1");
  char err[512];
  pkrt_model *m;
  pkrt_open_options oo = {.nthreads = 1};
  if (pkrt_model_open(model, &oo, &m, err, sizeof err) != 0) return die("open", err);
  if (!pkrt_model_can_train(m) || pkrt_model_dtype(m) != PKRT_DTYPE_F32 ||
      pkrt_model_classes(m) <= 0) {
    pkrt_model_close(m);
    return die(model, "this example needs an f32 classification training artifact");
  }
  printf("model %s: batch %lld, %lld features, %lld classes\n", model,
         (long long)pkrt_model_batch(m), (long long)pkrt_model_features(m),
         (long long)pkrt_model_classes(m));

  /* Pixels are 0..16; the model was trained on [0, 1]. Labels are the last column. */
  pkrt_data_options dopt = {.scale = 1.0 / 16, .label_column = -1, .model = m};
  pkrt_dataset *train = NULL, *test = NULL;
  int rc = 1;
  int32_t *labels = malloc(sizeof(int32_t) * (size_t)pkrt_model_batch(m));
  if (!labels) {
    die("labels", "out of memory");
  } else if (pkrt_dataset_load(argv[2], &dopt, &train, err, sizeof err) != 0 ||
             pkrt_dataset_load(argv[3], &dopt, &test, err, sizeof err) != 0) {
    die("data", err);
  } else {
    rc = 0;
    for (int e = 1; e <= epochs && rc == 0; e++) {
      double loss, acc, tl, ta;
      rc = train_epoch(m, train, labels, &loss, &acc);
      if (rc == 0 && pkrt_eval_run(m, test, &tl, &ta) != 0) rc = die("eval", pkrt_model_error(m));
      if (rc == 0)
        printf("epoch %d/%d loss %.4f acc %.4f test_loss %.4f test_acc %.4f\n", e, epochs, loss,
               acc, tl, ta);
    }
  }

  /* A checkpoint holds weights, optimizer state and step count; a fresh model that loads
   * it must evaluate exactly as this one. */
  double l1 = 0, a1 = 0, l2 = 0, a2 = 0;
  pkrt_model *m2 = NULL;
  if (rc == 0 && pkrt_model_save_checkpoint(m, ckpt) != 0) rc = die("checkpoint", pkrt_model_error(m));
  if (rc == 0 && pkrt_model_open(model, &oo, &m2, err, sizeof err) != 0) rc = die("reopen", err);
  if (rc == 0 && pkrt_model_load_checkpoint(m2, ckpt) != 0) rc = die("restore", pkrt_model_error(m2));
  if (rc == 0 && (pkrt_eval_run(m, test, &l1, &a1) != 0 || pkrt_eval_run(m2, test, &l2, &a2) != 0))
    rc = die("eval", "failed after the checkpoint");
  if (rc == 0 && (memcmp(&l1, &l2, sizeof l1) != 0 || a1 != a2 ||
                  pkrt_model_steps(m) != pkrt_model_steps(m2)))
    rc = die(ckpt, "the restored model differs from the saved one");
  if (rc == 0)
    printf("checkpoint %s: %lld steps, restored model test_loss %.4f test_acc %.4f (identical)\n",
           ckpt, (long long)pkrt_model_steps(m2), l2, a2);
  pkrt_model_close(m2);
  pkrt_dataset_free(test);
  pkrt_dataset_free(train);
  free(labels);
  pkrt_model_close(m);
  return rc;
}
