/* measure.c — repeat-until-50-ms timing with median/min/stddev, and CPU pinning, shared by
 * `pock te run --bench`, the bench/ programs and the tuner's measurer. */
#define _GNU_SOURCE
#include "pk_measure.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>

#include "pkrt.h"

#define MIN_REPEATS 5
#define MAX_REPEATS 200000

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

int pk_measure(int (*fn)(void *arg), void *arg, int64_t min_ns, pk_timing *out) {
  out->median_ns = out->min_ns = out->stddev_ns = 0;
  out->repeats = 0;
  int rc = fn(arg); /* warm-up: caches, page faults, lazy binding */
  if (rc != 0) return rc;
  int64_t *samples = malloc(sizeof(int64_t) * MAX_REPEATS);
  if (!samples) return -1;
  int n = 0;
  int64_t total = 0;
  while (n < MAX_REPEATS && (total < min_ns || n < MIN_REPEATS)) {
    int64_t t0 = pkrt_now_ns();
    rc = fn(arg);
    samples[n] = pkrt_now_ns() - t0;
    if (rc != 0) break;
    total += samples[n++];
  }
  if (n > 0) {
    qsort(samples, (size_t)n, sizeof *samples, cmp_i64);
    double mean = (double)total / n, var = 0;
    for (int i = 0; i < n; i++) var += ((double)samples[i] - mean) * ((double)samples[i] - mean);
    out->median_ns = n % 2 ? (double)samples[n / 2] : 0.5 * (double)(samples[n / 2 - 1] + samples[n / 2]);
    out->min_ns = (double)samples[0];
    out->stddev_ns = sqrt(var / n);
    out->repeats = n;
  }
  free(samples);
  return rc;
}

int pk_measure_pin_thread(void) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return -1;
  int cpu = -1;
  for (int c = CPU_SETSIZE - 1; c >= 0 && cpu < 0; c--)
    if (CPU_ISSET(c, &allowed)) cpu = c;
  if (cpu < 0) return -1;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return sched_setaffinity(0, sizeof one, &one) == 0 ? cpu : -1;
}
