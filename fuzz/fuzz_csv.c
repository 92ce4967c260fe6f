/* fuzz_csv.c — libFuzzer target for the CSV dataset reader (rt_csv_parse: what
 * pkrt_dataset_load runs on a file's bytes). The options come from the input's first byte,
 * so one corpus covers f32 and f64 models, class counts, feature counts and label
 * columns; the rest is the file. Accepted datasets are checked: every value is finite and
 * every label in range. */
#include <math.h>
#include <stdint.h>

#include "data_impl.h"
#include "fuzz_check.h"
#include "fuzz_dataset.h"

#define WHAT "fuzz.csv"

/* Bits of the first byte: 0 dtype f64, 1-2 classes (0, 2, 10, 1000), 3 features 3 (else
 * any), 4-5 label column (-1, 0, 1, -2), 6-7 scale (1, 0.0625, 1e30, -3). */
static rt_data_opts options(uint8_t b) {
  static const int64_t classes[4] = {0, 2, 10, 1000};
  static const int labels[4] = {-1, 0, 1, -2};
  static const double scales[4] = {1, 0.0625, 1e30, -3};
  return (rt_data_opts){.scale = scales[b >> 6 & 3], .label_column = labels[b >> 4 & 3],
                        .dtype = b & 1 ? PKRT_DTYPE_F64 : PKRT_DTYPE_F32,
                        .classes = classes[b >> 1 & 3], .features = b & 8 ? 3 : 0};
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  rt_data_opts o = options(data[0]);
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_dataset *d = NULL;
  pkrt_status st = rt_csv_parse(rt, WHAT, (const char *)data + 1, size - 1, &o, &d);
  if (st == PKRT_OK) st = rt_data_check(rt, WHAT, d, &o);
  fuzz_report(size, st == PKRT_OK, pkrt_ctx_error(rt));
  if (st != PKRT_OK) fuzz_check_refusal((int)st, pkrt_ctx_error(rt), WHAT);
  else fuzz_check_dataset(d, &o);
  pkrt_dataset_free(d);
  pkrt_ctx_free(rt);
  return 0;
}
