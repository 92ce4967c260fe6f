/* bench_train_step.c — bench_train.py's Pock worker: times training steps of an artifact
 * through libpockrt (each step alone: min, median, max), optionally trains whole epochs
 * and reports test accuracy, and prints one JSON line.
 *
 *   bench_train_step MODEL.pock --data X.npy[,X2.npy]:Y.npy [--test X.npy[,...]:Y.npy]
 *       [--threads T] [--warmup W] [--steps K] [--epochs E] [--lr LR]
 *
 * --steps K: W untimed steps, then K timed ones; --epochs E (instead): E epochs, every
 * step timed. Rows in file order (the order the PyTorch and ONNX Runtime workers see),
 * batches cycling through the data; the last partial batch of an epoch is dropped so
 * every step has the same shape. A step's time covers feeding the batch (one copy per
 * input), its labels and the training step.
 * Output: {"steps", "ms_median", "ms_min", "ms_max", "ms_mean", "loss" (mean of the timed
 * steps), "acc", "test_loss" (with --test, else null), "peak_rss_kb", "arena_bytes"}. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pock/pockrt.h"

/* Peak RSS of this process image in KiB: VmHWM, not getrusage's ru_maxrss, which Linux
 * carries across execve (a child of a big Python process would report the parent's). */
static long peak_rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
  if (f) fclose(f);
  return kb;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* A JSON number, or null for NaN and infinities (JSON has neither). */
static void num(char out[32], double v) {
  if (isfinite(v)) snprintf(out, 32, "%.6g", v);
  else strcpy(out, "null");
}

static int usage(const char *msg) {
  fprintf(stderr, "bench_train_step: %s\nusage: bench_train_step MODEL.pock --data "
                  "X.npy[,X2.npy]:Y.npy [--test X[,X2]:Y] [--threads T] [--warmup W] "
                  "[--steps K | --epochs E] [--lr LR]\n", msg);
  return 2;
}

/* A non-negative int option value, or -1. */
static int int_arg(const char *v) {
  char *e;
  long n = strtol(v, &e, 10);
  return *v && !*e && n >= 0 && n < 1000000000 ? (int)n : -1;
}

static int fail(pkrt_model *m) {
  fprintf(stderr, "bench_train_step: %s\n", pkrt_model_error(m));
  pkrt_model_close(m);
  return 1;
}

int main(int argc, char **argv) {
  const char *model = NULL, *train = NULL, *test = NULL;
  int threads = 1, warmup = 2, steps = -1, epochs = -1;
  double lr = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (a[0] != '-') {
      if (model) return usage("one MODEL.pock expected");
      model = a;
      continue;
    }
    if (!v) return usage("an option needs a value");
    i++;
    if (!strcmp(a, "--data")) train = v;
    else if (!strcmp(a, "--test")) test = v;
    else if (!strcmp(a, "--threads")) threads = int_arg(v);
    else if (!strcmp(a, "--warmup")) warmup = int_arg(v);
    else if (!strcmp(a, "--steps")) steps = int_arg(v);
    else if (!strcmp(a, "--epochs")) epochs = int_arg(v);
    else if (!strcmp(a, "--lr")) lr = strtod(v, NULL);
    else return usage("unknown option");
  }
  if (!model || !train) return usage("MODEL.pock and --data are required");
  if (threads < 1 || warmup < 0 || (steps < 1) == (epochs < 1))
    return usage("--threads >= 1, --warmup >= 0, and one of --steps K >= 1 or --epochs E >= 1");

  char err[512];
  pkrt_model *m;
  pkrt_open_options oo = {.nthreads = threads};
  if (pkrt_model_open(model, &oo, &m, err, sizeof err) != 0)
    return fprintf(stderr, "bench_train_step: %s\n", err), 1;
  if (lr > 0 && pkrt_model_set_lr(m, lr) != 0) return fail(m);
  pkrt_dataset *d = NULL, *t = NULL;
  pkrt_data_options dopt = {.label_column = -1, .model = m};
  if (pkrt_dataset_load(train, &dopt, &d, err, sizeof err) != 0 ||
      (test && pkrt_dataset_load(test, &dopt, &t, err, sizeof err) != 0)) {
    fprintf(stderr, "bench_train_step: %s\n", err);
    pkrt_dataset_free(d);
    pkrt_model_close(m);
    return 1;
  }
  int64_t b = pkrt_model_batch(m), per = pkrt_dataset_rows(d) / b;
  int64_t lw = pkrt_dataset_label_width(d);
  if (per < 1) {
    fprintf(stderr, "bench_train_step: %s: fewer rows than the batch (%lld)\n", train, (long long)b);
    pkrt_dataset_free(d), pkrt_dataset_free(t), pkrt_model_close(m);
    return 1;
  }
  int64_t timed = steps > 0 ? steps : per * epochs, total = steps > 0 ? warmup + steps : timed;
  double *ms = malloc(sizeof(double) * (size_t)timed), sum = 0, lsum = 0;
  const int32_t *labels = pkrt_dataset_labels(d);
  int rc = 0;
  for (int64_t s = 0, k = 0; s < total && ms; s++) {
    int64_t r0 = (s % per) * b;
    double t0 = now_ms(), loss;
    if (pkrt_model_feed(m, d, r0, b) != 0 || pkrt_model_set_labels(m, labels + r0 * lw, b) != 0 ||
        pkrt_model_train_step(m, &loss) != 0) {
      rc = 1;
      break;
    }
    double dt = now_ms() - t0;
    if (steps > 0 && s < warmup) continue;
    ms[k++] = dt, sum += dt, lsum += loss;
  }
  double tloss = NAN, tacc = NAN;
  if (!rc && t && pkrt_eval_run(m, t, &tloss, &tacc) != 0) rc = 1;
  if (rc || !ms) {
    free(ms);
    pkrt_dataset_free(d), pkrt_dataset_free(t);
    return ms ? fail(m) : (pkrt_model_close(m), 1);
  }
  qsort(ms, (size_t)timed, sizeof *ms, cmp_d);
  double med = timed % 2 ? ms[timed / 2] : (ms[timed / 2 - 1] + ms[timed / 2]) / 2;
  char acc[32], tl[32], ls[32];
  num(acc, tacc), num(tl, tloss), num(ls, lsum / (double)timed);
  printf("{\"steps\": %lld, \"ms_median\": %.6f, \"ms_min\": %.6f, \"ms_max\": %.6f, "
         "\"ms_mean\": %.6f, \"loss\": %s, \"acc\": %s, \"test_loss\": %s, "
         "\"peak_rss_kb\": %ld, \"arena_bytes\": %lld, \"threads\": %d}\n",
         (long long)timed, med, ms[0], ms[timed - 1], sum / (double)timed,
         ls, acc, tl, peak_rss_kb(), (long long)pkrt_model_arena_bytes(m),
         threads);
  free(ms);
  pkrt_dataset_free(d), pkrt_dataset_free(t);
  pkrt_model_close(m);
  return 0;
}
