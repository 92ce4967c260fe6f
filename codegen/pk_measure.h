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

/* Contestants timed side by side: pk_measure_rounds measures them round-robin, `rounds`
 * times each, so that load which comes and goes during a run (a shared VM, two cores) falls
 * on all of them alike instead of on whichever was timed at the wrong moment. Benchmarks
 * and tuning re-times (bench/, docs/performance.md) both go through it. */
typedef struct pk_measure_contestant {
  int (*fn)(void *arg);
  void *arg;
  double median_ns;      /* out: median over rounds of each round's median; 0 if fn failed */
  double min_ns, max_ns; /* out: the fastest and slowest round */
  double *round_ns;      /* out: each round's median (rounds entries; the caller's array) */
} pk_measure_contestant;
void pk_measure_rounds(pk_measure_contestant *c, int n, int rounds, int64_t min_ns);

/* The median of v[0..n) (sorts v). */
double pk_measure_median(double *v, int n);

/* Pins the calling thread to one CPU (the last one the process may use, away from CPU 0's
 * interrupts when there is a choice). Returns the CPU, or -1 if pinning is unavailable. */
int pk_measure_pin_thread(void);

#endif
