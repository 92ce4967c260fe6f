/* bench_train_step.c — times Pock training steps for bench_train.py: rows in file order (the
 * order PyTorch sees), each step timed alone (median over steps), then test accuracy.
 *
 *   bench_train_step MODEL.pock TRAIN_X.npy TRAIN_Y.npy TEST_X.npy TEST_Y.npy EPOCHS
 * prints one JSON line: steps, ms_median, ms_mean, loss (mean of the last epoch), acc,
 * test_loss, peak_rss_kb, arena_bytes. X: <f4 or <f8 (rows, features...); Y: <i4 (rows,).
 * The last partial batch of an epoch is dropped (so every step has the same shape, and
 * PyTorch's loop does the same). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pock/pockrt.h"

typedef struct arr {
  int f8, i4;     /* element type */
  int64_t rows, cols; /* cols = product of the non-row dims */
  void *data;
} arr;

/* The .npy files bench_train.py writes: v1 header, C order, <f4/<f8/<i4. */
static int npy_load(const char *path, arr *a) {
  memset(a, 0, sizeof *a);
  FILE *f = fopen(path, "rb");
  if (!f) return fprintf(stderr, "bench_train_step: %s: %s\n", path, strerror(errno)), -1;
  unsigned char h[10];
  char hdr[4097] = {0};
  int ok = fread(h, 1, 10, f) == 10 && memcmp(h, "\x93NUMPY", 6) == 0 && h[6] == 1;
  size_t hl = ok ? (h[8] | (size_t)h[9] << 8) : 0;
  ok = ok && hl < sizeof hdr && fread(hdr, 1, hl, f) == hl;
  const char *d = ok ? strstr(hdr, "'descr': '") : NULL, *s = ok ? strstr(hdr, "'shape': (") : NULL;
  if (!d || !s || strstr(hdr, "True")) {
    fclose(f);
    return fprintf(stderr, "bench_train_step: %s: unsupported .npy header\n", path), -1;
  }
  a->f8 = strncmp(d + 10, "<f8", 3) == 0;
  a->i4 = strncmp(d + 10, "<i4", 3) == 0;
  size_t es = a->f8 ? 8 : 4;
  if (!a->f8 && !a->i4 && strncmp(d + 10, "<f4", 3) != 0) {
    fclose(f);
    return fprintf(stderr, "bench_train_step: %s: dtype %.3s\n", path, d + 10), -1;
  }
  char *p = (char *)s + 10, *e;
  a->rows = strtoll(p, &e, 10);
  a->cols = 1;
  for (p = e; *p == ',' || *p == ' ';) {
    p += strspn(p, ", ");
    long long v = strtoll(p, &e, 10);
    if (e == p) break;
    a->cols *= v;
    p = e;
  }
  size_t n = (size_t)(a->rows * a->cols);
  a->data = malloc(n * es);
  int rc = a->data && fread(a->data, es, n, f) == n ? 0 : -1;
  fclose(f);
  if (rc) fprintf(stderr, "bench_train_step: %s: truncated\n", path);
  return rc;
}

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

/* Rows [r0, r0 + n) of X into the model's input (its dtype), zero rows after n. */
static void fill(pkrt_model *m, const arr *x, int64_t r0, int64_t n, int64_t batch) {
  void *in = pkrt_model_input(m, NULL);
  int f32 = pkrt_model_dtype(m) == PKRT_DTYPE_F32;
  for (int64_t i = 0; i < batch * x->cols; i++) {
    int64_t k = r0 * x->cols + i;
    double v = i < n * x->cols ? (x->f8 ? ((double *)x->data)[k] : ((float *)x->data)[k]) : 0;
    if (f32) ((float *)in)[i] = (float)v;
    else ((double *)in)[i] = v;
  }
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: bench_train_step MODEL.pock TRAIN_X.npy TRAIN_Y.npy TEST_X.npy "
                    "TEST_Y.npy EPOCHS\n");
    return 2;
  }
  arr x, y, tx, ty;
  if (npy_load(argv[2], &x) || npy_load(argv[3], &y) || npy_load(argv[4], &tx) ||
      npy_load(argv[5], &ty))
    return 1;
  if (!y.i4 || !ty.i4 || x.rows != y.rows || tx.rows != ty.rows || tx.cols != x.cols)
    return fprintf(stderr, "bench_train_step: X/Y files disagree\n"), 1;
  int epochs = atoi(argv[6]);
  pkrt_model *m;
  char err[512];
  if (pkrt_model_open(argv[1], NULL, &m, err, sizeof err) != 0)
    return fprintf(stderr, "bench_train_step: %s\n", err), 1;
  int64_t b = pkrt_model_batch(m), per = x.rows / b;
  int64_t oshape[8];
  pkrt_model_output_shape(m, oshape);
  int64_t classes = oshape[1];
  double *ms = malloc(sizeof(double) * (size_t)(per * epochs + 1)), sum = 0, lsum = 0;
  int64_t steps = 0;
  for (int ep = 0; ep < epochs; ep++) {
    lsum = 0;
    for (int64_t s = 0; s < per; s++) {
      double t0 = now_ms(), loss;
      fill(m, &x, s * b, b, b);
      if (pkrt_model_set_labels(m, (int32_t *)y.data + s * b, b) != 0 ||
          pkrt_model_train_step(m, &loss) != 0)
        return fprintf(stderr, "bench_train_step: %s\n", pkrt_model_error(m)), 1;
      ms[steps++] = now_ms() - t0;
      sum += ms[steps - 1];
      lsum += loss;
    }
  }
  /* test accuracy: padded last batch, only valid rows count */
  int64_t correct = 0;
  double tloss = 0;
  int f32 = pkrt_model_dtype(m) == PKRT_DTYPE_F32;
  for (int64_t r0 = 0; r0 < tx.rows; r0 += b) {
    int64_t n = tx.rows - r0 < b ? tx.rows - r0 : b;
    double loss;
    fill(m, &tx, r0, n, b);
    if (pkrt_model_set_labels(m, (int32_t *)ty.data + r0, n) != 0 ||
        pkrt_model_eval_step(m, &loss) != 0)
      return fprintf(stderr, "bench_train_step: %s\n", pkrt_model_error(m)), 1;
    tloss += loss * (double)n;
    const void *out = pkrt_model_output(m);
    for (int64_t i = 0; i < n; i++) {
      int64_t best = 0;
      for (int64_t k = 1; k < classes; k++) {
        double v = f32 ? ((const float *)out)[i * classes + k] : ((const double *)out)[i * classes + k];
        double w = f32 ? ((const float *)out)[i * classes + best]
                       : ((const double *)out)[i * classes + best];
        if (v > w) best = k;
      }
      correct += best == ((int32_t *)ty.data)[r0 + i];
    }
  }
  double mean = steps ? sum / (double)steps : NAN;
  qsort(ms, (size_t)steps, sizeof *ms, cmp_d);
  double med = steps ? (steps % 2 ? ms[steps / 2] : (ms[steps / 2 - 1] + ms[steps / 2]) / 2) : NAN;
  printf("{\"steps\": %lld, \"ms_median\": %.6f, \"ms_mean\": %.6f, \"loss\": %.6g, "
         "\"acc\": %.6f, \"test_loss\": %.6g, \"peak_rss_kb\": %ld, \"arena_bytes\": %lld}\n",
         (long long)steps, med, mean, per ? lsum / (double)per : NAN,
         tx.rows ? (double)correct / (double)tx.rows : NAN,
         tx.rows ? tloss / (double)tx.rows : NAN, peak_rss_kb(),
         (long long)pkrt_model_arena_bytes(m));
  pkrt_model_close(m);
  free(ms);
  free(x.data), free(y.data), free(tx.data), free(ty.data);
  return 0;
}
