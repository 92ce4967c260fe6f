/* fuzz_npy.c — libFuzzer target for the .npy dataset reader (rt_npy_parse: what
 * pkrt_dataset_load runs on the bytes of X.npy and Y.npy). The first byte chooses the
 * options as in fuzz_csv.c; the rest is both files: Y starts at the last "\x93NUMPY" after
 * the first byte of X (none: Y is a copy of X). Accepted datasets are checked as there. */
#include <stdint.h>

#include "data_impl.h"
#include "fuzz_check.h"
#include "fuzz_dataset.h"

static rt_data_opts options(uint8_t b) {
  static const int64_t classes[4] = {0, 2, 10, 1000};
  static const double scales[4] = {1, 0.0625, 1e30, -3};
  return (rt_data_opts){.scale = scales[b >> 6 & 3], .label_column = -1,
                        .dtype = b & 1 ? PKRT_DTYPE_F64 : PKRT_DTYPE_F32,
                        .classes = classes[b >> 1 & 3], .features = b & 8 ? 4 : 0};
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  rt_data_opts o = options(data[0]);
  const uint8_t *x = data + 1, *y = x;
  size_t xl = size - 1, yl = xl;
  for (size_t i = xl; i-- > 1;)
    if (i + 6 <= xl && memcmp(x + i, "\x93NUMPY", 6) == 0) {
      y = x + i;
      yl = xl - i;
      xl = i;
      break;
    }
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_dataset *d = NULL;
  pkrt_status st = rt_npy_parse(rt, "fuzz-x.npy", x, xl, "fuzz-y.npy", y, yl, &o, &d);
  if (st == PKRT_OK) st = rt_data_check(rt, "fuzz-x.npy", d, &o);
  fuzz_report(size, st == PKRT_OK, pkrt_ctx_error(rt));
  /* Messages name one of the two files, or both ("X has N rows but Y has M"). */
  if (st != PKRT_OK) fuzz_check_refusal((int)st, pkrt_ctx_error(rt), "fuzz-");
  else fuzz_check_dataset(d, &o);
  pkrt_dataset_free(d);
  pkrt_ctx_free(rt);
  return 0;
}
