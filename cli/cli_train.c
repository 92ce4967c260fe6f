/* pock_rt_train.c — `pock-rt train`, `pock-rt eval` and `pock-rt run`: open an artifact
 * with libpockrt's public API, load the data, then train (with checkpoints and resume),
 * evaluate, or print predictions. Ctrl-C stops training after the current step; the
 * weights and the checkpoint are still saved. */
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pock/pockrt.h"
#include "pock_rt.h"

/* A signal handler can only talk through a flag; the training loop polls it. */
static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

typedef enum mode { MODE_TRAIN, MODE_EVAL, MODE_RUN } mode;
static const char *const mode_names[] = {"train", "eval", "run"};

static const char train_help[] =
    "usage: pock-rt train MODEL.pock --data FILE --epochs N [options]\n"
    "\n"
    "Trains a compiled model on this device and prints one line per epoch:\n"
    "  epoch 3/30 loss 0.1234 acc 0.9512 val_loss 0.2 val_acc 0.93 ms/step 0.123\n"
    "\n"
    "options:\n"
    "  --data FILE             training data: CSV (label last unless --label-column; an\n"
    "                          optional header line) or X.npy:Y.npy\n"
    "  --val FILE              validation data, evaluated after each epoch\n"
    "  --epochs N              total passes over the data (>= 1), counting those before a\n"
    "                          checkpoint given to --resume\n"
    "  --lr X                  base learning rate (default: the compiled one, or the\n"
    "                          checkpoint's)\n"
    "  --seed S                shuffling seed (default 1)\n"
    "  --threads T             kernel threads (default 1)\n"
    "  --save W.pkw            write the trained weights (also on Ctrl-C)\n"
    "  --checkpoint C.ckpt     write a checkpoint after every epoch, when stopped early\n"
    "                          (Ctrl-C, --max-steps) and, with --checkpoint-every N, every N\n"
    "                          steps; atomic: a crash leaves the previous one intact\n"
    "  --checkpoint-every N    also checkpoint every N training steps\n"
    "  --resume C.ckpt         continue the run C.ckpt was written by: the same losses and\n"
    "                          weights as if it had never stopped\n"
    "  --max-steps N           stop after N steps of this run (then resume later)\n"
    "  --metrics M.jsonl       one JSON object per epoch (appended to when resuming)\n"
    "  --scale X               multiply every feature by X (digits: 0.0625)\n"
    "  --label-column K        0-based label column of a CSV; negative counts from the end\n"
    "  --weights W.pkw         start from these weights instead of the artifact's\n"
    "  --trusted-key KEY       refuse the artifact unless KEY (a .pub file or its text)\n"
    "                          signed it (default: POCK_TRUSTED_KEY, /etc/pock/trusted.pub)\n"
    "\n"
    "Exit status: 0 success (also when interrupted), 1 error, 2 usage.\n";

static const char eval_help[] =
    "usage: pock-rt eval MODEL.pock --data FILE [options]\n"
    "\n"
    "Evaluates a compiled model on a dataset and prints: loss 0.1234 accuracy 0.9512 rows 450\n"
    "(loss is nan for an inference-only artifact).\n"
    "\n"
    "options:\n"
    "  --data FILE             CSV or X.npy:Y.npy, as `pock-rt train`\n"
    "  --weights W.pkw         weights to evaluate (default: the artifact's)\n"
    "  --scale X               multiply every feature by X\n"
    "  --label-column K        0-based label column of a CSV; negative counts from the end\n"
    "  --threads T             kernel threads (default 1)\n"
    "  --trusted-key KEY       as `pock-rt train`\n"
    "\n"
    "Exit status: 0 success, 1 error, 2 usage.\n";

static const char run_help[] =
    "usage: pock-rt run MODEL.pock --data FILE [options]\n"
    "\n"
    "Runs inference and prints one line per row: the predicted class (the output's first\n"
    "maximum), then with --scores the output values; for a regression model, the output\n"
    "values. The data has the same format as for training: its label column is read but\n"
    "not used (fill it with 0 when unknown).\n"
    "\n"
    "options:\n"
    "  --data FILE             CSV or X.npy:Y.npy\n"
    "  --scores                print the output values after the class\n"
    "  --weights W.pkw         weights to use (default: the artifact's)\n"
    "  --scale X               multiply every feature by X\n"
    "  --label-column K        0-based label column of a CSV; negative counts from the end\n"
    "  --threads T             kernel threads (default 1)\n"
    "  --trusted-key KEY       as `pock-rt train`\n"
    "\n"
    "Exit status: 0 success, 1 error, 2 usage.\n";

typedef struct run_options {
  mode mode;
  const char *model, *data, *val, *save, *metrics, *weights, *checkpoint, *resume, *key;
  int64_t epochs, seed, threads, label_column, every, max_steps;
  double lr, scale;
  bool scores;
} run_options;

/* Integer options: name, where it goes, its range, and the modes that take it. */
typedef struct int_opt {
  const char *name;
  size_t field;
  int64_t lo, hi;
  bool train_only;
} int_opt;
static const int_opt int_opts[] = {
    {"--epochs", offsetof(run_options, epochs), 1, 1000000, true},
    {"--seed", offsetof(run_options, seed), 0, INT64_MAX, true},
    {"--threads", offsetof(run_options, threads), 1, 512, false},
    {"--checkpoint-every", offsetof(run_options, every), 1, INT64_MAX, true},
    {"--max-steps", offsetof(run_options, max_steps), 1, INT64_MAX, true},
    {"--label-column", offsetof(run_options, label_column), -100000, 100000, false},
};

/* String options and the modes that take them. */
typedef struct str_opt {
  const char *name;
  size_t field;
  bool train_only;
} str_opt;
static const str_opt str_opts[] = {
    {"--data", offsetof(run_options, data), false},
    {"--weights", offsetof(run_options, weights), false},
    {"--trusted-key", offsetof(run_options, key), false},
    {"--val", offsetof(run_options, val), true},
    {"--save", offsetof(run_options, save), true},
    {"--metrics", offsetof(run_options, metrics), true},
    {"--checkpoint", offsetof(run_options, checkpoint), true},
    {"--resume", offsetof(run_options, resume), true},
};

/* One option with its value at argv[*i + 1]; returns -1 when it is not known. */
static int parse_valued(run_options *o, const char *cmd, int argc, char **argv, int *i) {
  const char *a = argv[*i];
  bool train = o->mode == MODE_TRAIN;
  for (size_t k = 0; k < sizeof str_opts / sizeof *str_opts; k++) {
    if (strcmp(a, str_opts[k].name) != 0) continue;
    if (str_opts[k].train_only && !train) return -1;
    if (*i + 1 >= argc) return pkrt_cli_usage("%s: %s needs a value", cmd, a);
    *(const char **)((char *)o + str_opts[k].field) = argv[++*i];
    return PKRT_EXIT_OK;
  }
  for (size_t k = 0; k < sizeof int_opts / sizeof *int_opts; k++) {
    const int_opt *io = &int_opts[k];
    if (strcmp(a, io->name) != 0) continue;
    if (io->train_only && !train) return -1;
    if (*i + 1 >= argc) return pkrt_cli_usage("%s: %s needs a value", cmd, a);
    int64_t n;
    if (!pkrt_cli_parse_i64(argv[++*i], &n) || n < io->lo || n > io->hi)
      return pkrt_cli_usage("%s: %s needs an integer in %lld..%lld", cmd, a, (long long)io->lo,
                            (long long)io->hi);
    *(int64_t *)((char *)o + io->field) = n;
    return PKRT_EXIT_OK;
  }
  bool lr = !strcmp(a, "--lr");
  if (lr || !strcmp(a, "--scale")) {
    if (lr && !train) return -1;
    if (*i + 1 >= argc) return pkrt_cli_usage("%s: %s needs a value", cmd, a);
    double *d = lr ? &o->lr : &o->scale;
    if (!pkrt_cli_parse_double(argv[++*i], d) || !(*d > 0))
      return pkrt_cli_usage("%s: %s needs a positive number", cmd, a);
    return PKRT_EXIT_OK;
  }
  return -1;
}

/* Returns -1 after --help, else an exit code. */
static int parse_options(int argc, char **argv, mode md, run_options *o) {
  const char *cmd = mode_names[md];
  *o = (run_options){.mode = md, .seed = 1, .threads = 1, .label_column = -1, .scale = 1};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(md == MODE_TRAIN ? train_help : md == MODE_EVAL ? eval_help : run_help, stdout);
      return -1;
    }
    if (a[0] != '-' || !a[1]) {
      if (o->model)
        return pkrt_cli_usage("%s: one artifact expected, got '%s' and '%s'", cmd, o->model, a);
      o->model = a;
      continue;
    }
    if (md == MODE_RUN && !strcmp(a, "--scores")) {
      o->scores = true;
      continue;
    }
    int rc = parse_valued(o, cmd, argc, argv, &i);
    if (rc < 0) return pkrt_cli_usage("%s: unknown option '%s'", cmd, a);
    if (rc != PKRT_EXIT_OK) return rc;
  }
  if (!o->model) return pkrt_cli_usage("%s: expected an artifact (MODEL.pock from `pock compile`)", cmd);
  if (!o->data) return pkrt_cli_usage("%s: --data FILE is required", cmd);
  if (md == MODE_TRAIN && !o->epochs) return pkrt_cli_usage("train: --epochs N is required");
  if (o->every && !o->checkpoint)
    return pkrt_cli_usage("train: --checkpoint-every needs --checkpoint C.ckpt");
  if (o->weights && o->resume)
    return pkrt_cli_usage("train: --weights and --resume both set the weights; give one");
  return PKRT_EXIT_OK;
}

static int load_data(const run_options *o, const pkrt_model *m, const char *path,
                     pkrt_dataset **d) {
  pkrt_data_options dopt = {.scale = o->scale, .label_column = (int)o->label_column, .model = m};
  char err[512];
  if (pkrt_dataset_load(path, &dopt, d, err, sizeof err) != 0) return pkrt_cli_fail("%s", err);
  return PKRT_EXIT_OK;
}

static int train(const run_options *o, pkrt_model *m, const pkrt_dataset *data,
                 const pkrt_dataset *val) {
  if (!pkrt_model_can_train(m))
    return pkrt_cli_fail("train: %s was compiled with --inference; it cannot train", o->model);
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  pkrt_train_options t = {.epochs = (int)o->epochs, .seed = (uint64_t)o->seed, .lr = o->lr,
                          .val = val, .save_path = o->save, .metrics_path = o->metrics,
                          .stop = &stop_requested, .checkpoint_path = o->checkpoint,
                          .checkpoint_every = o->every, .resume_path = o->resume,
                          .max_steps = o->max_steps};
  pkrt_train_result r;
  fflush(stdout);
  if (pkrt_train_run(m, data, &t, &r) != 0) return pkrt_cli_fail("%s", pkrt_model_error(m));
  return PKRT_EXIT_OK;
}

/* Feeds the rows batch by batch through the infer plan and prints each row's prediction. */
static int predict(const run_options *o, pkrt_model *m, const pkrt_dataset *d) {
  int64_t shape[8], b = pkrt_model_batch(m), rows = pkrt_dataset_rows(d);
  int rank = pkrt_model_output_shape(m, shape);
  int64_t per_row = 1, classes = pkrt_model_classes(m);
  for (int i = 1; i < rank; i++) per_row *= shape[i];
  bool f64 = pkrt_model_dtype(m) == PKRT_DTYPE_F64;
  size_t row_bytes = (size_t)pkrt_dataset_features(d) * (f64 ? 8 : 4);
  unsigned char *in = pkrt_model_input(m, NULL);
  const unsigned char *x = pkrt_dataset_x(d);
  for (int64_t first = 0; first < rows; first += b) {
    int64_t valid = rows - first < b ? rows - first : b;
    memcpy(in, x + (size_t)first * row_bytes, (size_t)valid * row_bytes);
    memset(in + (size_t)valid * row_bytes, 0, (size_t)(b - valid) * row_bytes);
    if (pkrt_model_infer(m) != 0) return pkrt_cli_fail("%s", pkrt_model_error(m));
    const void *out = pkrt_model_output(m);
    for (int64_t r = 0; r < valid; r++) {
      int64_t best = 0;
      double bv = -INFINITY;
      for (int64_t c = 0; c < per_row; c++) {
        double v = f64 ? ((const double *)out)[r * per_row + c]
                       : ((const float *)out)[r * per_row + c];
        if (v > bv) bv = v, best = c;
      }
      if (classes > 0) printf("%lld", (long long)best);
      if (classes <= 0 || o->scores)
        for (int64_t c = 0; c < per_row; c++)
          printf("%s%.9g", c || classes > 0 ? " " : "",
                 f64 ? ((const double *)out)[r * per_row + c]
                     : (double)((const float *)out)[r * per_row + c]);
      putchar('\n');
    }
  }
  return fflush(stdout) == 0 ? PKRT_EXIT_OK : pkrt_cli_fail("run: writing the predictions failed");
}

static int run(const run_options *o, pkrt_model *m) {
  pkrt_dataset *data = NULL, *val = NULL;
  int rc = load_data(o, m, o->data, &data);
  if (rc == PKRT_EXIT_OK && o->val) rc = load_data(o, m, o->val, &val);
  if (rc == PKRT_EXIT_OK && o->weights && pkrt_model_load_weights(m, o->weights) != 0)
    rc = pkrt_cli_fail("%s", pkrt_model_error(m));
  if (rc == PKRT_EXIT_OK) {
    if (o->mode == MODE_TRAIN) {
      rc = train(o, m, data, val);
    } else if (o->mode == MODE_RUN) {
      rc = predict(o, m, data);
    } else {
      double loss, acc;
      if (pkrt_eval_run(m, data, &loss, &acc) != 0) rc = pkrt_cli_fail("%s", pkrt_model_error(m));
      else printf("loss %.4f accuracy %.4f rows %lld\n", loss, acc, (long long)pkrt_dataset_rows(data));
    }
  }
  pkrt_dataset_free(val);
  pkrt_dataset_free(data);
  return rc;
}

static int command(int argc, char **argv, mode md) {
  run_options o;
  int rc = parse_options(argc, argv, md, &o);
  if (rc < 0) return PKRT_EXIT_OK; /* --help */
  if (rc != PKRT_EXIT_OK) return rc;
  pkrt_open_options oo = {.nthreads = (int)o.threads, .trusted_key = o.key};
  pkrt_model *m;
  char err[512];
  if (pkrt_model_open(o.model, &oo, &m, err, sizeof err) != 0) return pkrt_cli_fail("%s", err);
  rc = run(&o, m);
  pkrt_model_close(m);
  return rc;
}

int pkrt_cmd_train(int argc, char **argv) { return command(argc, argv, MODE_TRAIN); }
int pkrt_cmd_eval(int argc, char **argv) { return command(argc, argv, MODE_EVAL); }
int pkrt_cmd_run(int argc, char **argv) { return command(argc, argv, MODE_RUN); }
