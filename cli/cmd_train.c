/* cmd_train.c — `pock train` and `pock eval`: thin wrappers over libpockrt's public API
 * (pockrt.h): open the artifact, load the datasets, run the runtime's training loop or
 * evaluation. Ctrl-C stops training after the current step; the weights are still saved. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pock/pockrt.h"

/* A signal handler can only talk through a flag; the training loop polls it. */
static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

static const char train_help[] =
    "usage: pock train OUT.pock --data FILE --epochs N [options]\n"
    "\n"
    "Trains a compiled model (from `pock compile`) on this device and prints one line per\n"
    "epoch: epoch 3/30 loss 0.1234 acc 0.9512 val_loss 0.2 val_acc 0.93 ms/step 0.123\n"
    "\n"
    "options:\n"
    "  --data FILE           training data: CSV (label last unless --label-column; an\n"
    "                        optional header line) or X.npy:Y.npy\n"
    "  --val FILE            validation data, evaluated after each epoch\n"
    "  --epochs N            passes over the data (>= 1)\n"
    "  --lr X                base learning rate (default: the compiled one)\n"
    "  --seed S              shuffling seed (default 1)\n"
    "  --threads T           kernel threads (default 1)\n"
    "  --save W.pkw          write the trained weights (also on Ctrl-C)\n"
    "  --metrics M.jsonl     one JSON object per epoch\n"
    "  --scale X             multiply every feature by X (digits: 0.0625)\n"
    "  --label-column K      0-based label column of a CSV; negative counts from the end\n"
    "  --weights W.pkw       start from these weights instead of the artifact's\n"
    "\n"
    "Exit status: 0 success (also when interrupted), 1 error, 2 usage.\n";

static const char eval_help[] =
    "usage: pock eval OUT.pock --data FILE [options]\n"
    "\n"
    "Evaluates a compiled model on a dataset and prints: loss 0.1234 accuracy 0.9512 rows 450\n"
    "\n"
    "options:\n"
    "  --data FILE           CSV or X.npy:Y.npy, as `pock train`\n"
    "  --weights W.pkw       weights to evaluate (default: the artifact's)\n"
    "  --scale X             multiply every feature by X\n"
    "  --label-column K      0-based label column of a CSV; negative counts from the end\n"
    "  --threads T           kernel threads (default 1)\n"
    "\n"
    "Exit status: 0 success, 1 error, 2 usage.\n";

typedef struct run_options {
  bool train;
  const char *model, *data, *val, *save, *metrics, *weights;
  int64_t epochs, seed, threads, label_column;
  double lr, scale;
} run_options;

/* Returns -1 after --help, else an exit code. */
static int parse_options(int argc, char **argv, bool train, run_options *o) {
  const char *cmd = train ? "train" : "eval";
  *o = (run_options){.train = train, .seed = 1, .threads = 1, .label_column = -1, .scale = 1};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(train ? train_help : eval_help, stdout);
      return -1;
    }
    if (a[0] != '-' || !a[1]) {
      if (o->model) return pk_cli_usage("%s: one artifact expected, got '%s' and '%s'", cmd, o->model, a);
      o->model = a;
      continue;
    }
    if (i + 1 >= argc) return pk_cli_usage("%s: %s needs a value", cmd, a);
    const char *v = argv[++i];
    bool train_only = false;
    if (!strcmp(a, "--data")) o->data = v;
    else if (!strcmp(a, "--weights")) o->weights = v;
    else if (!strcmp(a, "--val")) o->val = v, train_only = true;
    else if (!strcmp(a, "--save")) o->save = v, train_only = true;
    else if (!strcmp(a, "--metrics")) o->metrics = v, train_only = true;
    else if (!strcmp(a, "--scale")) {
      if (!pkrt_cli_parse_double(v, &o->scale) || !(o->scale > 0)) return pk_cli_usage("%s: --scale needs a positive number", cmd);
    } else if (!strcmp(a, "--lr")) {
      train_only = true;
      if (!pkrt_cli_parse_double(v, &o->lr) || !(o->lr > 0)) return pk_cli_usage("%s: --lr needs a positive number", cmd);
    } else if (!strcmp(a, "--label-column")) {
      if (!pkrt_cli_parse_i64(v, &o->label_column) || o->label_column < -100000 || o->label_column > 100000)
        return pk_cli_usage("%s: --label-column needs an integer", cmd);
    } else if (!strcmp(a, "--epochs") || !strcmp(a, "--seed") || !strcmp(a, "--threads")) {
      int64_t n;
      bool epochs = !strcmp(a, "--epochs"), threads = !strcmp(a, "--threads");
      train_only = !threads;
      if (!pkrt_cli_parse_i64(v, &n) || n < (epochs || threads ? 1 : 0) ||
          n > (epochs ? 1000000 : threads ? 512 : INT64_MAX))
        return pk_cli_usage("%s: %s needs an integer%s", cmd, a,
                            epochs ? " in 1..1000000" : threads ? " in 1..512" : " >= 0");
      *(epochs ? &o->epochs : threads ? &o->threads : &o->seed) = n;
    } else {
      return pk_cli_usage("%s: unknown option '%s'", cmd, a);
    }
    if (train_only && !train) return pk_cli_usage("eval: unknown option '%s'", a);
  }
  if (!o->model) return pk_cli_usage("%s: expected an artifact (OUT.pock from `pock compile`)", cmd);
  if (!o->data) return pk_cli_usage("%s: --data FILE is required", cmd);
  if (train && !o->epochs) return pk_cli_usage("train: --epochs N is required");
  return PK_EXIT_OK;
}

static int fail(const char *msg) {
  fprintf(stderr, "pock: error: %s\n", msg);
  return PK_EXIT_ERROR;
}

static int load_data(const run_options *o, const pkrt_model *m, const char *path, pkrt_dataset **d) {
  pkrt_data_options dopt = {.scale = o->scale, .label_column = (int)o->label_column, .model = m};
  char err[512];
  if (pkrt_dataset_load(path, &dopt, d, err, sizeof err) != 0) return fail(err);
  return PK_EXIT_OK;
}

static int run(const run_options *o, pkrt_model *m) {
  pkrt_dataset *data = NULL, *val = NULL;
  int rc = load_data(o, m, o->data, &data);
  if (rc == PK_EXIT_OK && o->val) rc = load_data(o, m, o->val, &val);
  if (rc == PK_EXIT_OK && o->weights && pkrt_model_load_weights(m, o->weights) != 0)
    rc = fail(pkrt_model_error(m));
  if (rc == PK_EXIT_OK && o->train) {
    if (!pkrt_model_can_train(m)) {
      rc = fail("train: the artifact was compiled with --inference");
    } else {
      struct sigaction sa = {0};
      sa.sa_handler = on_signal;
      sigaction(SIGINT, &sa, NULL);
      sigaction(SIGTERM, &sa, NULL);
      pkrt_train_options t = {.epochs = (int)o->epochs, .seed = (uint64_t)o->seed, .lr = o->lr,
                              .val = val, .save_path = o->save, .metrics_path = o->metrics,
                              .stop = &stop_requested};
      pkrt_train_result r;
      fflush(stdout);
      if (pkrt_train_run(m, data, &t, &r) != 0) rc = fail(pkrt_model_error(m));
    }
  } else if (rc == PK_EXIT_OK) {
    double loss, acc;
    if (pkrt_eval_run(m, data, &loss, &acc) != 0) rc = fail(pkrt_model_error(m));
    else printf("loss %.4f accuracy %.4f rows %lld\n", loss, acc, (long long)pkrt_dataset_rows(data));
  }
  pkrt_dataset_free(val);
  pkrt_dataset_free(data);
  return rc;
}

static int train_or_eval(int argc, char **argv, bool train) {
  run_options o;
  int rc = parse_options(argc, argv, train, &o);
  if (rc < 0) return PK_EXIT_OK; /* --help */
  if (rc != PK_EXIT_OK) return rc;
  pkrt_open_options oo = {.nthreads = (int)o.threads};
  pkrt_model *m;
  char err[512];
  if (pkrt_model_open(o.model, &oo, &m, err, sizeof err) != 0) return fail(err);
  rc = run(&o, m);
  pkrt_model_close(m);
  return rc;
}

int pk_cmd_train(int argc, char **argv) { return train_or_eval(argc, argv, true); }
int pk_cmd_eval(int argc, char **argv) { return train_or_eval(argc, argv, false); }
