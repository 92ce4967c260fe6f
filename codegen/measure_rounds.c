/* measure_rounds.c — the round-robin re-timer: several kernels timed in interleaved rounds
 * (pk_measure each), so that passing load falls on all of them alike. */
#include <stdbool.h>
#include <stdlib.h>

#include "pk_measure.h"

double pk_measure_median(double *v, int n) {
  for (int i = 1; i < n; i++) /* insertion sort: n is a handful of rounds */
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : 0;
}

void pk_measure_rounds(pk_measure_contestant *c, int n, int rounds, int64_t min_ns) {
  bool *failed = calloc((size_t)n + 1, sizeof *failed);
  double *sorted = malloc(sizeof(double) * (size_t)(rounds + 1));
  if (!failed || !sorted) { /* nothing can be timed: report every contestant as failed */
    for (int a = 0; a < n; a++) c[a].median_ns = c[a].min_ns = c[a].max_ns = 0;
    free(failed);
    free(sorted);
    return;
  }
  for (int r = 0; r < rounds; r++)
    for (int a = 0; a < n; a++) {
      pk_timing t;
      c[a].round_ns[r] = 0;
      if (failed[a] || pk_measure(c[a].fn, c[a].arg, min_ns, &t) != 0) failed[a] = true;
      else c[a].round_ns[r] = t.median_ns;
    }
  for (int a = 0; a < n; a++) {
    c[a].median_ns = c[a].min_ns = c[a].max_ns = 0;
    if (failed[a] || rounds == 0) continue;
    for (int r = 0; r < rounds; r++) sorted[r] = c[a].round_ns[r];
    c[a].median_ns = pk_measure_median(sorted, rounds);
    c[a].min_ns = sorted[0];
    c[a].max_ns = sorted[rounds - 1];
  }
  free(sorted);
  free(failed);
}
