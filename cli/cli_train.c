/* cli_train.c — `train`, `eval` and `run`, one implementation for `pock` and `pock-rt`
 * (options, help, loop): open an artifact with libpockrt's public API, load the data, then
 * train (with checkpoints and resume), evaluate, or print predictions. Ctrl-C stops
 * training after the current step; the weights and the checkpoint are still saved. */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "pock/pockrt.h"
#include "rt_file.h"

/* A signal handler can only talk through a flag; the training loop polls it. */
static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

typedef pkrt_cli_mode mode;
#define MODE_TRAIN PKRT_CLI_TRAIN
#define MODE_EVAL PKRT_CLI_EVAL
#define MODE_RUN PKRT_CLI_RUN
static const char *const mode_names[] = {"train", "eval", "run"};
enum { EXIT_OK = 0, EXIT_ERROR = 1, EXIT_USAGE = 2 };

static const char train_help[] =
    "usage: %1$s train MODEL.pock --data FILE --epochs N [options]\n"
    "\n"
    "Trains a compiled model on this device and prints one line per epoch:\n"
    "  epoch 3/30 loss 0.1234 acc 0.9512 val_loss 0.2 val_acc 0.93 ms/step 0.123 median 0.120\n"
    "(ms/step: the mean step time so far, median: the median), and at the end:\n"
    "  trained 90 steps, ms/step 0.123 median 0.120, peak RSS 5120 kB\n"
    "\n"
    "options:\n"
    "  --data FILE             training data: CSV (label last unless --label-column; an\n"
    "                          optional header line) or X.npy:Y.npy (a model with several\n"
    "                          inputs: X1.npy,X2.npy:Y.npy, one file per input in order)\n"
    "  --val FILE              validation data, evaluated after each epoch\n"
    "  --epochs N              total passes over the data (>= 1), counting those before a\n"
    "                          checkpoint given to --resume\n"
    "  --lr X                  base learning rate (default: the compiled one, or the\n"
    "                          checkpoint's)\n"
    "  --warmup-steps N        linear lr warmup over N optimizer steps, then the schedule\n"
    "                          (default: the compiled one; transformers' rule)\n"
    "  --seed S                shuffling and dropout seed (default 1)\n"
    "  --no-shuffle            read the rows in file order every epoch (a run to compare\n"
    "                          step by step with another framework's)\n"
    "  --threads T             kernel threads (default 1)\n"
    "  --save W.pkw            write the trained weights (also on Ctrl-C)\n"
    "  --checkpoint C.ckpt     write a checkpoint after every epoch, when stopped early\n"
    "                          (Ctrl-C, --max-steps) and, with --checkpoint-every N, every N\n"
    "                          steps; atomic: a crash leaves the previous one intact\n"
    "  --checkpoint-every N    also checkpoint every N training steps\n"
    "  --resume C.ckpt         continue the run C.ckpt was written by: the same losses and\n"
    "                          weights as if it had never stopped\n"
    "  --max-steps N           stop after N steps of this run (then resume later)\n"
    "  --metrics M.jsonl       one JSON object per epoch (appended to when resuming): loss,\n"
    "                          acc, ms_per_step, lr, ms_median, peak_rss_kb, ...\n"
    "  --cache-frozen          keep each row's results of the frozen prefix the first time\n"
    "                          it is trained on; later steps on it skip those layers (an\n"
    "                          artifact from `pock compile --cache-frozen`; docs/runtime.md)\n"
    "  --cache-budget SIZE     the most memory that cache may take: bytes, or with K, M or\n"
    "                          G (default 1G)\n"
    "  --scale X               multiply every feature by X (digits: 0.0625)\n"
    "  --label-column K        0-based label column of a CSV; negative counts from the end\n"
    "  --weights W.pkw         start from these weights instead of the artifact's\n"
    "  --trusted-key KEY       refuse the artifact unless KEY (a .pub file or its text)\n"
    "                          signed it (default: POCK_TRUSTED_KEY, /etc/pock/trusted.pub)\n"
    "\n"
    "Exit status: 0 success (also when interrupted), 1 error, 2 usage.\n";

static const char eval_help[] =
    "usage: %1$s eval MODEL.pock --data FILE [options]\n"
    "\n"
    "Evaluates a compiled model on a dataset and prints: loss 0.1234 accuracy 0.9512 rows 450\n"
    "(loss is nan for an inference-only artifact).\n"
    "\n"
    "options:\n"
    "  --data FILE             CSV, X.npy:Y.npy or X1.npy,X2.npy:Y.npy, as `%1$s train`\n"
    "  --weights W.pkw         weights to evaluate (default: the artifact's)\n"
    "  --scale X               multiply every feature by X\n"
    "  --label-column K        0-based label column of a CSV; negative counts from the end\n"
    "  --threads T             kernel threads (default 1)\n"
    "  --trusted-key KEY       as `%1$s train`\n"
    "\n"
    "Exit status: 0 success, 1 error, 2 usage.\n";

static const char run_help[] =
    "usage: %1$s run MODEL.pock --data FILE [options]\n"
    "\n"
    "Runs inference and prints one line per row: the predicted class (the output's first\n"
    "maximum; a per-token classifier prints one per token), then with --scores the output\n"
    "values; for a regression model, the output values. The data has the same format as\n"
    "for training: its label column is read but not used (fill it with 0 when unknown).\n"
    "\n"
    "options:\n"
    "  --data FILE             CSV, X.npy:Y.npy or X1.npy,X2.npy:Y.npy\n"
    "  --scores                print the output values after the class\n"
    "  --weights W.pkw         weights to use (default: the artifact's)\n"
    "  --scale X               multiply every feature by X\n"
    "  --label-column K        0-based label column of a CSV; negative counts from the end\n"
    "  --threads T             kernel threads (default 1)\n"
    "  --trusted-key KEY       as `%1$s train`\n"
    "\n"
    "Exit status: 0 success, 1 error, 2 usage.\n";

typedef struct run_options {
  const char *prog;         /* "pock" or "pock-rt", for messages and help */
  mode mode;
  const char *model, *data, *val, *save, *metrics, *weights, *checkpoint, *resume, *key;
  int64_t epochs, seed, threads, label_column, every, max_steps, warmup_steps;
  double lr, scale;
  bool scores;
  bool no_shuffle;          /* train: rows in file order every epoch */
  bool cache_frozen;        /* train: cache the frozen prefix per row */
  int64_t cache_budget;     /* its budget in bytes (0: the default) */
} run_options;

/* Prints "PROG: <message>" and the pointer to --help; returns the usage exit code. */
static int usage(const run_options *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage(const run_options *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pkrt_cli_vusage(o->prog, fmt, ap);
  va_end(ap);
  return EXIT_USAGE;
}

/* Prints "PROG: error: <message>"; returns the error exit code. */
static int fail(const run_options *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(const run_options *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: error: ", o->prog);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return EXIT_ERROR;
}

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
    {"--warmup-steps", offsetof(run_options, warmup_steps), 1, INT32_MAX, true},
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
    if (*i + 1 >= argc) return usage(o, "%s: %s needs a value", cmd, a);
    *(const char **)((char *)o + str_opts[k].field) = argv[++*i];
    return EXIT_OK;
  }
  for (size_t k = 0; k < sizeof int_opts / sizeof *int_opts; k++) {
    const int_opt *io = &int_opts[k];
    if (strcmp(a, io->name) != 0) continue;
    if (io->train_only && !train) return -1;
    if (*i + 1 >= argc) return usage(o, "%s: %s needs a value", cmd, a);
    int64_t n;
    if (!pkrt_cli_parse_i64(argv[++*i], &n) || n < io->lo || n > io->hi)
      return usage(o, "%s: %s needs an integer in %lld..%lld", cmd, a, (long long)io->lo,
                            (long long)io->hi);
    *(int64_t *)((char *)o + io->field) = n;
    return EXIT_OK;
  }
  if (!strcmp(a, "--cache-budget")) {
    if (!train) return -1;
    if (*i + 1 >= argc) return usage(o, "%s: %s needs a value", cmd, a);
    if (!pkrt_cli_parse_size(argv[++*i], &o->cache_budget))
      return usage(o, "%s: --cache-budget needs a size: bytes, or a number with K, M or G", cmd);
    return EXIT_OK;
  }
  bool lr = !strcmp(a, "--lr");
  if (lr || !strcmp(a, "--scale")) {
    if (lr && !train) return -1;
    if (*i + 1 >= argc) return usage(o, "%s: %s needs a value", cmd, a);
    double *d = lr ? &o->lr : &o->scale;
    if (!pkrt_cli_parse_double(argv[++*i], d) || !(*d > 0))
      return usage(o, "%s: %s needs a positive number", cmd, a);
    return EXIT_OK;
  }
  return -1;
}

/* Returns -1 after --help, else an exit code. */
static int parse_options(const char *prog, int argc, char **argv, mode md, run_options *o) {
  const char *cmd = mode_names[md];
  *o = (run_options){.prog = prog, .mode = md, .seed = 1, .threads = 1, .label_column = -1,
                     .scale = 1};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      printf(md == MODE_TRAIN ? train_help : md == MODE_EVAL ? eval_help : run_help, prog);
      return -1;
    }
    if (a[0] != '-' || !a[1]) {
      if (o->model)
        return usage(o, "%s: one artifact expected, got '%s' and '%s'", cmd, o->model, a);
      o->model = a;
      continue;
    }
    if (md == MODE_RUN && !strcmp(a, "--scores")) {
      o->scores = true;
      continue;
    }
    if (md == MODE_TRAIN && !strcmp(a, "--no-shuffle")) {
      o->no_shuffle = true;
      continue;
    }
    if (md == MODE_TRAIN && !strcmp(a, "--cache-frozen")) {
      o->cache_frozen = true;
      continue;
    }
    int rc = parse_valued(o, cmd, argc, argv, &i);
    if (rc < 0) return usage(o, "%s: unknown option '%s'", cmd, a);
    if (rc != EXIT_OK) return rc;
  }
  if (!o->model) return usage(o, "%s: expected an artifact (MODEL.pock from `pock compile`)", cmd);
  if (!o->data) return usage(o, "%s: --data FILE is required", cmd);
  if (md == MODE_TRAIN && !o->epochs) return usage(o, "train: --epochs N is required");
  if (o->every && !o->checkpoint)
    return usage(o, "train: --checkpoint-every needs --checkpoint C.ckpt");
  if (o->cache_budget && !o->cache_frozen)
    return usage(o, "train: --cache-budget needs --cache-frozen");
  if (o->weights && o->resume)
    return usage(o, "train: --weights and --resume both set the weights; give one");
  return EXIT_OK;
}

static int load_data(const run_options *o, const pkrt_model *m, const char *path,
                     pkrt_dataset **d) {
  pkrt_data_options dopt = {.scale = o->scale, .label_column = (int)o->label_column, .model = m};
  char err[512];
  if (pkrt_dataset_load(path, &dopt, d, err, sizeof err) != 0) return fail(o, "%s", err);
  return EXIT_OK;
}

static int train(const run_options *o, pkrt_model *m, const pkrt_dataset *data,
                 const pkrt_dataset *val) {
  if (!pkrt_model_can_train(m))
    return fail(o, "train: %s was compiled with --inference; it cannot train", o->model);
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  pkrt_train_options t = {.epochs = (int)o->epochs, .seed = (uint64_t)o->seed, .lr = o->lr,
                          .no_shuffle = o->no_shuffle,
                          .val = val, .save_path = o->save, .metrics_path = o->metrics,
                          .stop = &stop_requested, .checkpoint_path = o->checkpoint,
                          .checkpoint_every = o->every, .resume_path = o->resume,
                          .max_steps = o->max_steps, .warmup_steps = o->warmup_steps,
                          .cache_frozen = o->cache_frozen,
                          .cache_budget = o->cache_budget};
  pkrt_train_result r;
  fflush(stdout);
  if (pkrt_train_run(m, data, &t, &r) != 0) return fail(o, "%s", pkrt_model_error(m));
  return EXIT_OK;
}

/* Feeds the rows batch by batch through the infer plan and prints each row's prediction. */
static int predict(const run_options *o, pkrt_model *m, const pkrt_dataset *d) {
  int64_t shape[8], b = pkrt_model_batch(m), rows = pkrt_dataset_rows(d);
  int rank = pkrt_model_output_shape(m, shape);
  int64_t per_row = 1, classes = pkrt_model_classes(m);
  for (int i = 1; i < rank; i++) per_row *= shape[i];
  bool f64 = pkrt_model_dtype(m) == PKRT_DTYPE_F64;
  for (int64_t first = 0; first < rows; first += b) {
    int64_t valid = rows - first < b ? rows - first : b;
    /* every input of the model (several: X1.npy,X2.npy:Y.npy), padding rows zero */
    if (pkrt_model_feed(m, d, first, valid) != 0 || pkrt_model_infer(m) != 0)
      return fail(o, "%s", pkrt_model_error(m));
    const void *out = pkrt_model_output(m);
    /* a per-token classifier ((batch, T, classes) output) predicts T classes per row */
    int64_t tokens = classes > 0 && per_row % classes == 0 ? per_row / classes : 1;
    int64_t width = classes > 0 && tokens > 1 ? classes : per_row;
    for (int64_t r = 0; r < valid; r++) {
      for (int64_t tk = 0; tk < tokens; tk++) {
        int64_t best = 0, at = r * per_row + tk * width;
        double bv = -INFINITY;
        for (int64_t c = 0; c < width; c++) {
          double v = f64 ? ((const double *)out)[at + c] : ((const float *)out)[at + c];
          if (v > bv) bv = v, best = c;
        }
        if (classes > 0) printf("%s%lld", tk ? " " : "", (long long)best);
      }
      if (classes <= 0 || o->scores)
        for (int64_t c = 0; c < per_row; c++)
          printf("%s%.9g", c || classes > 0 ? " " : "",
                 f64 ? ((const double *)out)[r * per_row + c]
                     : (double)((const float *)out)[r * per_row + c]);
      putchar('\n');
    }
  }
  return fflush(stdout) == 0 ? EXIT_OK : fail(o, "run: writing the predictions failed");
}

static int run(const run_options *o, pkrt_model *m) {
  pkrt_dataset *data = NULL, *val = NULL;
  int rc = load_data(o, m, o->data, &data);
  if (rc == EXIT_OK && o->val) rc = load_data(o, m, o->val, &val);
  if (rc == EXIT_OK && o->weights && pkrt_model_load_weights(m, o->weights) != 0)
    rc = fail(o, "%s", pkrt_model_error(m));
  if (rc == EXIT_OK) {
    if (o->mode == MODE_TRAIN) {
      rc = train(o, m, data, val);
    } else if (o->mode == MODE_RUN) {
      rc = predict(o, m, data);
    } else {
      double loss, acc;
      if (pkrt_eval_run(m, data, &loss, &acc) != 0) rc = fail(o, "%s", pkrt_model_error(m));
      else printf("loss %.4f accuracy %.4f rows %lld\n", loss, acc, (long long)pkrt_dataset_rows(data));
    }
  }
  pkrt_dataset_free(val);
  pkrt_dataset_free(data);
  return rc;
}

/* "X.npy:Y.npy" names two files, "X1.npy,X2.npy:Y.npy" more (one per model input); each is
 * an input the outputs must not overwrite. Appends them to files[*n] (up to cap), copies in
 * buf (the same split rule as pkrt_dataset_load: after ".npy" and ':' or ','). */
static void data_files(const char *data, char *buf, size_t bufcap, const char **files, int *n,
                       int cap) {
  if (!data || strlen(data) >= bufcap) return;
  strcpy(buf, data);
  const char *start = buf;
  for (char *p = buf; *n < cap && (p = strstr(p, ".npy")) != NULL;) {
    p += 4;
    if (*p != ':' && *p != ',') continue;
    *p++ = '\0';
    files[(*n)++] = start;
    start = p;
  }
  if (start != buf && *n < cap) files[(*n)++] = start; /* the labels */
}

/* The outputs, checked before the model is opened or a step is taken (the rules:
 * runtime/rt_file.h): none may be an input (the artifact, the data, the weights, the
 * trusted key) or another output. The checkpoint may be the one resumed from, the
 * documented in-place update; --metrics may be a pipe. */
static int check_outputs(const run_options *o) {
  enum { NDATA = 2 * (PKRT_MAX_INPUTS + 1) };
  static char dbuf[4096], vbuf[4096];
  const char *data[NDATA];
  int nd = 0;
  data_files(o->data, dbuf, sizeof dbuf, data, &nd, NDATA / 2);
  int nv = 0;
  data_files(o->val, vbuf, sizeof vbuf, data + nd, &nv, NDATA / 2);
  nd += nv;
  /* Outputs, then the inputs; each output is checked against the others but itself. */
  const char *outs[] = {o->resume, o->save, o->checkpoint, o->metrics};
  enum { RESUME, SAVE, CKPT, METRICS, NOUTS };
  const char *ins[] = {o->model, o->data, o->val, o->weights, o->key};
  for (int out = SAVE; out < NOUTS; out++) {
    if (!outs[out]) continue;
    const char *against[NOUTS + 5 + NDATA];
    int n = 0;
    for (int i = 0; i < NOUTS; i++)
      if (i != out && !(out == CKPT && i == RESUME)) against[n++] = outs[i];
    for (int i = 0; i < 5; i++) against[n++] = ins[i];
    for (int i = 0; i < nd; i++) against[n++] = data[i];
    if (pkrt_cli_check_output(o->prog, outs[out], out == METRICS ? RT_OUT_STREAM : 0,
                              against, n) != 0)
      return EXIT_ERROR;
  }
  return EXIT_OK;
}

int pkrt_cli_train(const char *prog, pkrt_cli_mode md, int argc, char **argv) {
  run_options o;
  int rc = parse_options(prog, argc, argv, md, &o);
  if (rc < 0) return EXIT_OK; /* --help */
  if (rc != EXIT_OK || (rc = check_outputs(&o)) != EXIT_OK) return rc;
  pkrt_open_options oo = {.nthreads = (int)o.threads, .trusted_key = o.key};
  pkrt_model *m;
  char err[512];
  if (pkrt_model_open(o.model, &oo, &m, err, sizeof err) != 0) return fail(&o, "%s", err);
  if (pkrt_model_gpu_image(m)) fprintf(stderr, "%s: %s\n", o.prog, pkrt_model_gpu_image(m));
  rc = run(&o, m);
  pkrt_model_close(m);
  return rc;
}
