/* isolation_train.c — a fleet program in miniature for test_isolation.sh: uses nothing but
 * pock/pockrt.h and libpockrt.so to train an artifact on a CSV and evaluate it, so the test
 * can run it alone in an empty directory with no compiler on PATH.
 *
 *   isolation_train MODEL.pock DATA.csv EPOCHS     (pixels scaled by 1/16, label last) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "pock/pockrt.h"

int main(int argc, char **argv) {
  if (argc != 4) {
    fputs("usage: isolation_train MODEL.pock DATA.csv EPOCHS\n", stderr);
    return 2;
  }
  char err[512];
  pkrt_model *m;
  if (pkrt_model_open(argv[1], NULL, &m, err, sizeof err) != 0) {
    fprintf(stderr, "isolation_train: %s\n", err);
    return 1;
  }
  pkrt_dataset *d;
  pkrt_data_options dopt = {.scale = 0.0625, .label_column = -1, .model = m};
  if (pkrt_dataset_load(argv[2], &dopt, &d, err, sizeof err) != 0) {
    fprintf(stderr, "isolation_train: %s\n", err);
    pkrt_model_close(m);
    return 1;
  }
  double loss0, acc0, loss, acc;
  pkrt_train_options t = {.epochs = atoi(argv[3]), .seed = 1, .progress = -1};
  pkrt_train_result r;
  int rc = pkrt_eval_run(m, d, &loss0, &acc0);
  if (rc == 0) rc = pkrt_train_run(m, d, &t, &r);
  if (rc == 0) rc = pkrt_eval_run(m, d, &loss, &acc);
  if (rc != 0) {
    fprintf(stderr, "isolation_train: %s\n", pkrt_model_error(m));
  } else {
    printf("isolation_train: %lld steps, loss %.4f -> %.4f, acc %.4f -> %.4f\n",
           (long long)r.steps, loss0, loss, acc0, acc);
    if (!isfinite(loss) || !(loss < loss0)) {
      fprintf(stderr, "isolation_train: training did not lower the loss\n");
      rc = 1;
    }
  }
  pkrt_dataset_free(d);
  pkrt_model_close(m);
  return rc == 0 ? 0 : 1;
}
