/* fuzz_dataset.h — what the model may rely on in a dataset a reader accepted (the CSV and
 * .npy targets check it): finite values, labels in range, the feature count asked for. */
#ifndef FUZZ_DATASET_H
#define FUZZ_DATASET_H

#include <math.h>
#include <stdio.h>

#include "data_impl.h"

static inline void fuzz_check_dataset(const pkrt_dataset *d, const rt_data_opts *o) {
  for (int64_t i = 0; i < d->rows * d->features; i++) {
    double v = d->dtype == PKRT_DTYPE_F64 ? ((const double *)d->x)[i] : ((const float *)d->x)[i];
    if (!isfinite(v)) {
      fprintf(stderr, "accepted a value that is not finite at %lld\n", (long long)i);
      __builtin_trap();
    }
  }
  for (int64_t r = 0; r < d->rows; r++)
    if (d->labels[r] < 0 || (o->classes > 0 && d->labels[r] >= o->classes)) {
      fprintf(stderr, "accepted label %d in row %lld\n", (int)d->labels[r], (long long)r + 1);
      __builtin_trap();
    }
  if (d->rows < 1 || d->features < 1 || (o->features > 0 && d->features != o->features)) {
    fprintf(stderr, "accepted %lld rows of %lld features\n", (long long)d->rows,
            (long long)d->features);
    __builtin_trap();
  }
}

#endif
