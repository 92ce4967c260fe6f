/* pk_measure.h — timing a kernel the way every Pock benchmark and (later) the tuner's
 * measurer does: one warm-up call, then repeats until at least min_ns have passed (and at
 * least 5 calls), reporting median, minimum and standard deviation.
 *
 * Usage:
 *   pk_timing t;
 *   if (pk_measure(run_fn, &arg, PK_MEASURE_MIN_NS, &t) != 0) ... // run_fn returned non-zero
 *   printf("%.1f us\n", t.median_ns * 1e-3);
 */
#ifndef PK_MEASURE_H
#define PK_MEASURE_H

#include <stdint.h>

#define PK_MEASURE_MIN_NS 50000000LL /* 50 ms of repeats */

typedef struct pk_timing {
  double median_ns, min_ns, stddev_ns;
  int repeats;
} pk_timing;

/* Returns the first non-zero value fn returned (timing then incomplete), else 0. */
int pk_measure(int (*fn)(void *arg), void *arg, int64_t min_ns, pk_timing *out);

/* Pins the calling thread to one CPU (the last one the process may use, away from CPU 0's
 * interrupts when there is a choice). Returns the CPU, or -1 if pinning is unavailable. */
int pk_measure_pin_thread(void);

#endif
